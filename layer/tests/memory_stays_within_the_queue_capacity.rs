//! A flood behind a paused reader fills the queue, and the process's peak memory grows by
//! no more than the queue's capacity plus a small, fixed slack.
//!
//! Slack: 512 KiB. The queue may hold two partly filled chunks beyond its capacity
//! (2 x 64 KiB); the writer and the two producer threads touch some stack and their malloc
//! arenas (a few pages each); the rest is allocator rounding. Anything proportional to the
//! number of lines (per-line allocations, a second copy of the queue) would exceed it.

mod common;

use common::{ChildSpec, Reader};
use std::time::Duration;

const SLACK_KB: u64 = 512;

#[test]
fn memory_stays_within_the_queue_capacity() {
    common::child_role_or_continue();
    let capacity = 4 << 20;
    let spec = ChildSpec {
        events_per_thread: 300_000,
        capacity,
        ..ChildSpec::default()
    };
    let run = common::run(
        "memory_stays_within_the_queue_capacity",
        &spec,
        Reader::PausedThenFast(Duration::from_millis(1_500)),
    );
    let baseline = run.report["baseline_rss_kb"].as_u64().unwrap_or(u64::MAX);
    let peak = run.report["peak_rss_kb"].as_u64().unwrap_or(0);
    let peak_queue = run.stat("peak_queue_bytes").as_u64().unwrap_or(0);
    eprintln!(
        "memory: baseline {baseline} KiB, peak {peak} KiB, growth {} KiB for a {} KiB queue (peak queue {} KiB)",
        peak.saturating_sub(baseline),
        capacity / 1024,
        peak_queue / 1024
    );
    assert!(run.exit_ok, "child failed:\n{}", run.stderr);
    assert!(peak_queue <= capacity as u64);
    assert!(
        peak_queue >= capacity as u64 * 3 / 4,
        "the flood filled the queue"
    );
    assert!(
        peak <= baseline + capacity as u64 / 1024 + SLACK_KB,
        "peak RSS {peak} KiB > baseline {baseline} KiB + capacity {} KiB + slack {SLACK_KB} KiB",
        capacity / 1024
    );
    run.assert_accounting_exact();
}
