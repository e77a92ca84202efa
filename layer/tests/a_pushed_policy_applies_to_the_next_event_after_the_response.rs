//! When a PUT returns 200, the new policy is already in force: the very next event
//! follows it (the swap and the interest-cache rebuild happen before the response).
//! Also measures the PUT round trip over loopback.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin_fixture;

use std::sync::atomic::Ordering;
use std::time::Instant;

use admin_fixture::{percentiles, Fixture};

#[test]
fn a_pushed_policy_applies_to_the_next_event_after_the_response() {
    let f = Fixture::new("info");
    f.install_global();
    f.lines.keep.store(false, Ordering::Relaxed);
    let raise = r#"[{"source":"ops/raise","priority":10,"targets":[{"target":"shop::payment","level":"debug"}]}]"#;
    let lower = r#"[{"source":"ops/lower","priority":10,"targets":[{"target":"shop::payment","level":"warn"}]}]"#;
    let mut rtts = Vec::new();
    for version in 1..=200u64 {
        let raised = version % 2 == 1;
        let body = f.doc(version, if raised { raise } else { lower });
        let started = Instant::now();
        let r = f.signed("PUT", &body);
        rtts.push(started.elapsed());
        assert_eq!(r.status, 200, "{r:?}");
        let before = f.lines.count.load(Ordering::Relaxed);
        tracing::debug!(target: "shop::payment", version, "authorising");
        tracing::info!(target: "shop::payment", version, "charged");
        let written = f.lines.count.load(Ordering::Relaxed) - before;
        assert_eq!(written, if raised { 2 } else { 0 }, "version {version}");
    }
    let (median, p99) = percentiles(rtts);
    println!("PUT round trip over loopback, 200 signed PUTs: median {median:?}, p99 {p99:?}");
}
