//! `kubectl logpolicy top --watch` in a real terminal (tmux, 220 columns by 40 rows)
//! against three shop pods: each refresh (every second) redraws the frame in place, so
//! the heading and the header row are on the screen once, at the top, a row for each
//! shop target and the total (3/3 pods) follow, and the rows' sparklines grow a bar per
//! refresh; nothing scrolled off the top into the terminal's history. Ctrl-C ends it at
//! once, with exit code 0.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use logpolicy_e2e::plugin::command_line;
use logpolicy_e2e::process::wait_for;
use logpolicy_e2e::shop::{three_shops, wait_known, SEC};
use logpolicy_e2e::terminal::{Ended, Terminal};
use logpolicy_e2e::{Error, Operator, Scenario};

const WIDTH: u16 = 220;
const HEIGHT: u16 = 40;
/// The sparkline's bars, lowest first.
const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
/// The demo's targets at its baseline (`info`): every request is logged by `shop::http`,
/// one in 7 warns in `shop::db`, one in 20 fails in `shop::payment`.
const SHOP_TARGETS: [&str; 3] = ["shop::http", "shop::db", "shop::payment"];
const HEADING: &str = "kubectl logpolicy top: -l app=shop, by target, every 1s; ";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_watch_redraws_in_place_and_stops_on_ctrl_c() {
    let _file = crate::one_file_at_a_time(module_path!());
    let s = Scenario::without_operator("top-watch").await.unwrap();
    let _operator = Operator::watching(s.namespace()).unwrap();
    // 40 requests/s: two failures a second per pod, so that no one-second window is
    // without a `shop::payment` line.
    let specs = three_shops().into_iter().map(|p| p.self_load(40)).collect();
    let pods = s.pods(specs).await.unwrap();
    wait_known(&pods).unwrap();

    let command = command_line(
        s.namespace(),
        None,
        &["top", "-l", "app=shop", "--watch", "--window", "1s"],
    )
    .unwrap();
    let terminal = Terminal::start(s.dir(), WIDTH, HEIGHT, &command).unwrap();
    // Three refreshes, then three more.
    let first = frame_with_bars(&terminal, 3, 15 * SEC);
    let later = frame_with_bars(&terminal, 6, 10 * SEC);
    eprintln!("the screen after 6 refreshes:\n{later}");
    for screen in [&first, &later] {
        check_frame(screen);
    }
    // The same place, redrawn: a later heading (it says when, to the second) over
    // longer sparklines.
    assert_ne!(
        first.lines().next(),
        later.lines().next(),
        "{first}\n{later}"
    );
    let all = terminal.history_and_screen().unwrap();
    let headings = all.lines().filter(|l| l.starts_with(HEADING)).count();
    let headers = all.lines().filter(|l| l.starts_with("TARGET ")).count();
    assert_eq!(
        (headings, headers),
        (1, 1),
        "a frame scrolled into the terminal's history:\n{all}"
    );
    assert_eq!(
        all.lines().count(),
        usize::from(HEIGHT),
        "lines scrolled off the screen:\n{all}"
    );

    let asked = Instant::now();
    terminal.send_keys(&["C-c"]).unwrap();
    let ended = wait_for(5 * SEC, "top --watch to end after Ctrl-C", || {
        std::thread::sleep(Duration::from_millis(50));
        terminal.ended()
    })
    .unwrap();
    eprintln!(
        "Ctrl-C -> the plugin ended ({ended:?}) within {:.0} ms",
        asked.elapsed().as_secs_f64() * 1000.0
    );
    assert_eq!(ended, Ended::Code(0), "{}", terminal.screen().unwrap());
    drop(pods);
}

/// Waits until the screen shows a frame whose total row's sparkline has at least
/// `bars` bars (as many refreshes); returns the screen.
fn frame_with_bars(terminal: &Terminal, bars: usize, timeout: Duration) -> String {
    let mut last = String::new();
    let found = wait_for(timeout, &format!("a frame of {bars} refreshes"), || {
        std::thread::sleep(Duration::from_millis(200));
        if let Some(ended) = terminal.ended()? {
            return Err(Error(format!("top --watch ended ({ended:?})")));
        }
        last = terminal.screen()?;
        let total = last.lines().find(|l| l.starts_with("TOTAL ")).unwrap_or("");
        Ok((total.chars().filter(|c| BARS.contains(c)).count() >= bars).then(|| last.clone()))
    });
    found.unwrap_or_else(|e| panic!("{e}; the screen:\n{last}"))
}

/// A whole frame, from the top of the screen: the heading, a blank line, the header
/// row, a row per shop target with its sparkline, the total for 3/3 pods, the pods
/// line, and nothing under it; the heading and header once.
fn check_frame(screen: &str) {
    let lines: Vec<&str> = screen.lines().collect();
    assert!(
        lines[0].starts_with(HEADING) && lines[0].ends_with("; Ctrl-C to stop"),
        "{screen}"
    );
    assert_eq!(lines[1], "", "{screen}");
    assert!(
        lines[2].starts_with("TARGET ") && lines[2].ends_with("BYTES/S, LAST 1M"),
        "{screen}"
    );
    let count = |prefix: &str| lines.iter().filter(|l| l.starts_with(prefix)).count();
    assert_eq!(count(HEADING), 1, "{screen}");
    assert_eq!(count("TARGET "), 1, "{screen}");
    let total = lines
        .iter()
        .position(|l| l.starts_with("TOTAL (3/3 pods) "))
        .unwrap_or_else(|| panic!("no total row for 3/3 pods:\n{screen}"));
    for target in SHOP_TARGETS {
        let row = lines[3..total]
            .iter()
            .find(|l| l.starts_with(&format!("{target} ")))
            .unwrap_or_else(|| panic!("no {target} row above the total:\n{screen}"));
        assert!(
            row.trim_end().ends_with(|c| BARS.contains(&c)),
            "{target}: no sparkline:\n{screen}"
        );
    }
    let pods_line = lines[total + 1..]
        .iter()
        .position(|l| *l == "3/3 pods read")
        .map(|i| total + 1 + i)
        .unwrap_or_else(|| panic!("no `3/3 pods read` under the total:\n{screen}"));
    assert!(
        lines[pods_line + 1..].iter().all(|l| l.trim().is_empty()),
        "something under the frame:\n{screen}"
    );
}
