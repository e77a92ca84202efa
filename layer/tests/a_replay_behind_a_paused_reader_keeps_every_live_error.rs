//! A replay that starts while stdout's reader is paused, with the service still logging
//! infos and errors, never costs a live error its place: the replay is paced and waits
//! for room below half of what infos may fill, so the queue's reserve stays the errors'.
//! Every live error arrives once the reader resumes; every recorded line is either
//! replayed, in order, or counted as dropped by the replay; the live infos the pause
//! cost are counted too.
//!
//! Real process, real pipe: the reader is `sh` on a FIFO, which opens it at once and
//! reads nothing for 2 s, then everything.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::time::Duration;

use logpolicy::writer::{Output, ReplayRequest, WriterConfig};
use tracing_core::Level;

fn authorising(i: u32, filler: &str) {
    tracing::debug!(target: "shop::payment", attempt = i, filler, "authorising");
}

fn served(i: u32, filler: &str) {
    tracing::info!(target: "shop::http", request = i, filler, "served");
}

fn declined(i: u32) {
    tracing::error!(target: "shop::payment", attempt = i, "declined");
}

#[test]
fn a_replay_behind_a_paused_reader_keeps_every_live_error() {
    let dir = std::env::temp_dir().join(format!("replay-paused-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("stdout");
    let got = dir.join("got");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let mut reader = Command::new("sh")
        .arg("-c")
        .arg(r#"exec 3<"$0"; sleep 2; exec cat <&3 >"$1""#)
        .arg(&fifo)
        .arg(&got)
        .spawn()
        .unwrap();

    let (dispatch, logging) = logpolicy::Builder::new()
        .directives("info,@record(shop::payment)=debug")
        .writer(WriterConfig::new(Output::File(fifo.clone())).capacity_bytes(256 << 10))
        .build()
        .unwrap();
    let filler = "x".repeat(150);
    const RECORDED: u32 = 4_000;
    tracing::dispatcher::with_default(&dispatch, || {
        for i in 0..RECORDED {
            authorising(i, &filler);
        }
    });

    // The replay runs beside the service's own logging, which fills the queue while the
    // reader is paused: 20,000 infos (about 5 MiB) and 400 errors over about 1.5 s.
    let (report, live_errors) = std::thread::scope(|s| {
        let replay =
            s.spawn(|| logging.replay(&ReplayRequest::new("shop/raise", Duration::from_secs(300))));
        let mut errors = 0u32;
        tracing::dispatcher::with_default(&dispatch, || {
            for i in 0..20_000u32 {
                served(i, &filler);
                if i % 50 == 0 {
                    declined(i);
                    errors += 1;
                }
                if i % 1_000 == 999 {
                    std::thread::sleep(Duration::from_millis(75));
                }
            }
        });
        (replay.join().unwrap(), errors)
    });
    assert!(logging.flush(Duration::from_secs(20)));
    let stats = logging.finish();
    assert!(reader.wait().unwrap().success());

    let text = std::fs::read_to_string(&got).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let errors = lines
        .iter()
        .filter(|l| l["level"] == "ERROR" && l["msg"] == "declined")
        .count();
    let replayed: Vec<u64> = lines
        .iter()
        .filter(|l| l["replayed"] == true)
        .map(|l| l["attempt"].as_u64().unwrap())
        .collect();
    let infos = lines.iter().filter(|l| l["msg"] == "served").count() as u64;
    let info = stats.level(Level::INFO);
    eprintln!(
        "replay behind a paused reader: {} of {} recorded lines replayed, {} dropped by the replay; live errors {errors}/{live_errors}; live infos {infos} of 20000 delivered, {} dropped",
        replayed.len(), report.lines, report.dropped, info.dropped.total()
    );

    // Every live error, none dropped.
    assert_eq!(errors as u32, live_errors);
    assert_eq!(stats.level(Level::ERROR).dropped.total(), 0);
    // The pause cost live infos: the queue was full while the replay ran.
    assert!(
        info.dropped.total() > 0,
        "the queue never filled: {stats:?}"
    );
    // Every recorded line of the window was taken, then replayed or counted as dropped,
    // in the order it was recorded.
    assert_eq!(report.lines, u64::from(RECORDED));
    assert!(report.complete);
    assert_eq!(replayed.len() as u64, report.queued);
    assert_eq!(report.queued + report.dropped, report.lines);
    assert!(
        replayed.windows(2).all(|w| w[0] < w[1]),
        "replayed in order"
    );
    // The writer's own accounting is exact.
    assert!(stats.is_balanced(), "{stats:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
