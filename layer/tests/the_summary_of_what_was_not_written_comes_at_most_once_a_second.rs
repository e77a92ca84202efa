//! The in-band summary of events not written (target `logpolicy`) is periodic, counts
//! what went unwritten since the last one, and never comes more than once per interval.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use support::Harness;

#[test]
fn periodic_and_rate_limited() {
    let h = Harness::with_summary_every("info,@sample(app)=1/10", 1);
    let burst = |n: usize| {
        for _ in 0..n {
            tracing::info!(target: "app", "x");
        }
    };
    h.run(|| burst(1_000));
    // Nothing was unwritten before the first event: no summary in this second.
    assert_eq!(h.own_lines().len(), 0);
    for second in 1..=3 {
        h.clock.advance(Duration::from_secs(1));
        h.run(|| burst(1_000));
        let own = h.own_lines();
        assert_eq!(own.len(), second, "one summary per second at most");
        let last = own.last().unwrap();
        assert_eq!(last["msg"], "events not written");
        assert_eq!(last["level"], "INFO");
        // The first summary covers the 900 + the 1 event sampled out of the new second
        // before it was written; later ones the rest of the previous second plus that one.
        let sampled = last["sampled"]["info"].as_u64().unwrap();
        assert!((900..=901).contains(&sampled), "{sampled}");
    }
    let total: u64 = h
        .own_lines()
        .iter()
        .map(|l| l["sampled"]["info"].as_u64().unwrap())
        .sum();
    let stats = h.handle.stats().level(&tracing::Level::INFO);
    assert!(
        stats.sampled - total <= 900,
        "the summaries add up to what was sampled so far"
    );
}
