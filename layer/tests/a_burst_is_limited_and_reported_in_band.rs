//! After N events in a second from one callsite, one in M is kept for the rest of that
//! second; the first drop and the window's summary are reported in-band; other
//! callsites and events at `alwaysKeep` are not limited.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use support::Harness;
use tracing::Level;

fn storm(n: usize) {
    for i in 0..n {
        tracing::info!(target: "shop::http", i, "storm");
    }
}

#[test]
fn limits_one_callsite_and_reports_the_first_drop_and_the_summary() {
    let h = Harness::new("info,@burst=10/s:1/5");
    h.run(|| {
        storm(100);
        tracing::info!(target: "shop::db", "another callsite is not limited");
        for _ in 0..20 {
            tracing::error!(target: "shop::http", "errors are never limited");
        }
    });
    let msgs = h.messages();
    // 10 under the limit, then 1 in 5 of the 90 over it.
    assert_eq!(msgs.iter().filter(|m| *m == "storm").count(), 28);
    assert_eq!(msgs.iter().filter(|m| m.starts_with("errors")).count(), 20);
    assert!(msgs.contains(&"another callsite is not limited".to_owned()));
    let own = h.own_lines();
    assert_eq!(own.len(), 1, "{own:?}");
    assert_eq!(own[0]["level"], "WARN");
    assert!(own[0]["msg"]
        .as_str()
        .unwrap()
        .starts_with("burst limit reached"));
    assert!(own[0]["callsite"]
        .as_str()
        .unwrap()
        .starts_with("shop::http "));
    assert_eq!(own[0]["perSecond"], 10);

    // The next second: the callsite starts afresh and the last window is summarised.
    h.clock.advance(Duration::from_secs(1));
    h.run(|| storm(3));
    let own = h.own_lines();
    let summary = own
        .iter()
        .find(|l| l["msg"] == "burst limit summary")
        .expect("summary");
    assert_eq!(summary["events"], 100);
    assert_eq!(summary["dropped"], 72);
    let s = h.handle.stats().level(&Level::INFO);
    assert_eq!((s.written, s.burst), (28 + 1 + 3, 72));
}
