//! What the policy holds back is counted in the row of the callsite that emitted it:
//! event sampling, request sampling (a request's held lines are written in their own
//! rows when an error comes, counted as sampled in their own rows when the request ends
//! without one), and the burst limit. Per callsite, the lines in the output are the
//! row's lines, and written + held back = emitted.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::time::Duration;

use logpolicy::writer::{Output, WriterConfig};

fn sampled_event() {
    tracing::info!(target: "app::events", "tick");
}

fn request_step(i: u32) {
    tracing::info!(target: "app::req", step = i, "step");
}

fn request_detail() {
    tracing::debug!(target: "app::req", "detail");
}

fn request_error() {
    tracing::error!(target: "app::req", "failed");
}

fn flood() {
    tracing::info!(target: "app::flood", "flood");
}

#[test]
fn each_reason_in_its_callsites_row() {
    let path = std::env::temp_dir().join(format!("ledger-held-back-{}.log", std::process::id()));
    let (dispatch, logging) = logpolicy::Builder::new()
        .directives(
            "info,app::req=debug,@sample(app::events)=1/4,@sample(app::req)=1/1000:request,@burst=50/s:1/1000000",
        )
        .writer(WriterConfig::new(Output::File(path.clone())))
        .build()
        .unwrap();
    tracing::dispatcher::with_default(&dispatch, || {
        for _ in 0..100 {
            sampled_event();
        }
        // 10 requests: the first is kept whole (one in 1,000), the others' lines are
        // held; the 5th fails, so its held lines are written before its error.
        for r in 0..10 {
            let span = tracing::info_span!(target: "app::req", "request", r);
            let _in = span.enter();
            request_step(1);
            request_detail();
            request_step(2);
            if r == 4 {
                request_error();
            }
        }
        for _ in 0..200 {
            flood();
        }
    });
    assert!(logging.flush(Duration::from_secs(10)));
    let sites = logging.sites();
    let row = |name: &str| {
        let line = line_of(name);
        sites
            .rows
            .iter()
            .find(|r| r.line == Some(line) && r.file.is_some_and(|f| f.ends_with(file!())))
            .unwrap_or_else(|| panic!("no row for {name} (line {line})"))
            .counts
    };
    // The lines of the callsites above, as `line!()` sees them.
    let tick = row("tick");
    let step1 = row("step");
    let detail = row("detail");
    let failed = row("failed");
    let flooded = row("flood");

    // Event sampling: exactly one in four.
    assert_eq!((tick.lines, tick.sampled), (25, 75));
    // Request sampling: the kept request's and the failed one's lines are written; the
    // other 8 requests' were held and counted as sampled when they ended.
    assert_eq!((step1.lines, step1.sampled), (2 * 2, 8 * 2));
    assert_eq!((detail.lines, detail.sampled), (2, 8));
    assert_eq!((failed.lines, failed.sampled), (1, 0));
    // The burst limit: held back in the flood's own row, every event accounted for.
    assert!(flooded.burst > 0, "{flooded:?}");
    assert_eq!(flooded.lines + flooded.burst, 200);

    // The output agrees, callsite by callsite.
    let out = std::fs::read_to_string(&path).unwrap();
    let mut by_msg: HashMap<String, u64> = HashMap::new();
    for l in out.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        *by_msg
            .entry(v["msg"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    assert_eq!(by_msg["tick"], tick.lines);
    assert_eq!(by_msg["step"], step1.lines);
    assert_eq!(by_msg["detail"], detail.lines);
    assert_eq!(by_msg["failed"], failed.lines);
    assert_eq!(by_msg["flood"], flooded.lines);
    // The filter's per-level counts are the rows' sums.
    let stats = logging.handle().stats();
    let info = stats.level(&tracing::Level::INFO);
    assert_eq!(
        info.sampled,
        tick.sampled + step1.sampled,
        "sampled infos: the rows' sum"
    );
    assert_eq!(info.burst, flooded.burst);
    drop(logging);
    let _ = std::fs::remove_file(path);
}

/// The line of this file of the `tracing` macro call whose message is `msg`.
fn line_of(msg: &str) -> u32 {
    let src = include_str!("the_ledger_counts_what_the_policy_held_back_per_callsite.rs");
    let quoted = format!("\"{msg}\");");
    let at = src
        .lines()
        .position(|l| l.trim_start().starts_with("tracing::") && l.ends_with(&quoted))
        .unwrap();
    at as u32 + 1
}
