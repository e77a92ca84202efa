//! `kubectl logpolicy top` says what the pods wrote: three shop pods under a steady load
//! (150 requests/s each, about 180 lines/s), `top -l app=shop -o json --window 10s`, and
//! the lines the pods wrote to stdout over the same time agree within 5 %, in lines and
//! bytes per second (each line's exact length, its newline included), per target and in
//! total; every pod is covered (3/3 pods).
//!
//! How the two sides are lined up: `top` reads each pod's ledger twice and divides what
//! grew by the time between the pod's two `readAt`s; its output gives the rates, not
//! those times. Each pod's window lies inside the plugin's run (the run is the window,
//! the listing of the pods and the reads: about 10.2 s), and the load is steady, so the
//! pods' rates over the whole run are their rates over their windows: the lines stamped
//! inside the run, over its length. With thousands of lines in it, what the edges add or
//! take is far below 5 %. (A line's `ts` is when its event happened; the ledger counts
//! the line once the output took it, milliseconds later.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::time::SystemTime;

use logpolicy_e2e::logs::{relative, secs_between};
use logpolicy_e2e::plugin::{kubectl_logpolicy, PluginRun};
use logpolicy_e2e::scenario::wait_past;
use logpolicy_e2e::shop::{three_shops, wait_known, SEC};
use logpolicy_e2e::{Operator, Scenario};
use serde_json::{json, Value};

/// Requests per second each pod sends itself.
const LOAD: u32 = 150;
/// `top --window`.
const WINDOW: &str = "10s";
/// How far apart the two sides may be, relative to the pods' side.
const TOLERANCE: f64 = 0.05;
/// The fewest lines a target must have written in the run to be compared on its own.
const MEANINGFUL_LINES: u64 = 100;
/// The demo's targets: `shop::http` logs every request, `shop::db` warns on one in 7,
/// `shop::payment` fails one in 20 (at the baseline, `info`).
const SHOP_TARGETS: [&str; 3] = ["shop::http", "shop::db", "shop::payment"];

/// Lines and bytes per second.
#[derive(Debug, Clone, Copy, Default)]
struct Rate {
    lines: f64,
    bytes: f64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_agrees_with_what_the_pods_wrote() {
    let _file = crate::one_file_at_a_time(module_path!());
    let s = Scenario::without_operator("top-agrees").await.unwrap();
    // The operator writes the trust ConfigMap the pods start with, and pushes their
    // first document: no policy change happens in the window.
    let _operator = Operator::watching(s.namespace()).unwrap();
    let specs = three_shops()
        .into_iter()
        .map(|p| p.self_load(LOAD))
        .collect();
    let mut pods = s.pods(specs).await.unwrap();
    wait_known(&pods).unwrap();
    // The load runs (each pod's first connection is open).
    wait_past(&mut pods, SystemTime::now() + SEC, 5 * SEC).unwrap();

    let from = SystemTime::now();
    let run = plugin(
        &s,
        &["top", "-l", "app=shop", "-o", "json", "--window", WINDOW],
    );
    let to = SystemTime::now();
    run.expect_code(0).unwrap();
    let top: Value = serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {run}"));
    assert_eq!(top["by"], "target", "{run}");
    assert_eq!(top["pods"], json!({"read": 3, "selected": 3}), "{run}");
    assert_eq!(top["leftOut"], json!([]), "{run}");

    // What the pods wrote in the run, complete: each has written past its end.
    wait_past(&mut pods, to + SEC, 10 * SEC).unwrap();
    let seconds = secs_between(to, from);
    let mut written: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for p in &pods {
        for l in p.log.lines().iter().filter(|l| l.ts >= from && l.ts < to) {
            let (lines, bytes) = written.entry(l.target.clone()).or_default();
            *lines += 1;
            *bytes += l.bytes as u64;
        }
    }
    let (total_lines, total_bytes) = written
        .values()
        .fold((0, 0), |(l, b), (lines, bytes)| (l + lines, b + bytes));
    let per_second = |(lines, bytes): (u64, u64)| Rate {
        lines: lines as f64 / seconds,
        bytes: bytes as f64 / seconds,
    };

    let rate = |v: &Value| Rate {
        lines: v["linesPerSecond"].as_f64().unwrap_or(f64::NAN),
        bytes: v["bytesPerSecond"].as_f64().unwrap_or(f64::NAN),
    };
    let top_rows: BTreeMap<String, Rate> = top["rows"]
        .as_array()
        .unwrap_or_else(|| panic!("no rows: {run}"))
        .iter()
        .filter(|r| r["kind"] == "target")
        .map(|r| (r["target"].as_str().unwrap_or_default().to_owned(), rate(r)))
        .collect();

    // Both sides, for every target either side has, then the total.
    let mut compared: Vec<(String, Rate, Rate)> = Vec::new();
    let mut report = format!(
        "{seconds:.3} s of the pods' stdout (the plugin's run), {total_lines} lines; top --window {WINDOW}\n\
         {:<16} {:>12} {:>12} {:>8}   {:>12} {:>12} {:>8}\n",
        "target", "lines/s top", "pods", "diff", "bytes/s top", "pods", "diff"
    );
    let targets: BTreeSet<&String> = written.keys().chain(top_rows.keys()).collect();
    for target in targets {
        let counted = written.get(target).copied().unwrap_or_default();
        let pods_side = per_second(counted);
        let top_side = top_rows.get(target).copied().unwrap_or_default();
        line(&mut report, target, top_side, pods_side);
        if counted.0 >= MEANINGFUL_LINES {
            compared.push((target.clone(), top_side, pods_side));
        }
    }
    let top_total = rate(&top["total"]);
    let pods_total = per_second((total_lines, total_bytes));
    line(&mut report, "TOTAL", top_total, pods_total);
    eprintln!("{report}");
    compared.push(("the total".to_owned(), top_total, pods_total));

    for target in SHOP_TARGETS {
        assert!(
            compared.iter().any(|(t, _, _)| t == target),
            "{target}: fewer than {MEANINGFUL_LINES} lines in the run to compare\n{report}\n{run}"
        );
    }
    let mut wrong = Vec::new();
    for (target, top_side, pods_side) in &compared {
        for (what, t, p) in [
            ("lines/s", top_side.lines, pods_side.lines),
            ("bytes/s", top_side.bytes, pods_side.bytes),
        ] {
            let off = relative(t, p);
            if off.is_nan() || off.abs() > TOLERANCE {
                wrong.push(format!(
                    "{target}: top says {t:.1} {what}, the pods wrote {p:.1} {what} ({:+.1} %)",
                    off * 100.0
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "top and the pods' stdout disagree by more than {:.0} %:\n{}\n\n{report}\n{run}",
        TOLERANCE * 100.0,
        wrong.join("\n")
    );

    // The table says which pods its figures cover.
    let table = plugin(&s, &["top", "-l", "app=shop", "--window", "1s"]);
    table.expect_code(0).unwrap();
    for target in SHOP_TARGETS {
        assert!(
            table
                .stdout
                .lines()
                .any(|l| l.starts_with(&format!("{target} "))),
            "no {target} row: {table}"
        );
    }
    assert!(
        table
            .stdout
            .lines()
            .any(|l| l.starts_with("TOTAL (3/3 pods) ")),
        "{table}"
    );
    assert_eq!(
        table.stdout.lines().last(),
        Some("3/3 pods read"),
        "{table}"
    );
}

fn plugin(s: &Scenario, args: &[&str]) -> PluginRun {
    kubectl_logpolicy(s.namespace(), None, args).unwrap()
}

/// One line of the report: both sides and how far apart.
fn line(report: &mut String, target: &str, top: Rate, pods: Rate) {
    let _ = writeln!(
        report,
        "{target:<16} {:>12.1} {:>12.1} {:>+7.1}%   {:>12.1} {:>12.1} {:>+7.1}%",
        top.lines,
        pods.lines,
        relative(top.lines, pods.lines) * 100.0,
        top.bytes,
        pods.bytes,
        relative(top.bytes, pods.bytes) * 100.0
    );
}
