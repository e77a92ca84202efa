//! Ten times the recorder's byte limit offered, through a real subscriber: the process's
//! peak resident memory grows by no more than the limit plus the documented constant
//! (`MEMORY_SLACK`: two chunks and their marks) and a little allocator rounding, and every
//! line that did not fit is counted as expired.
//!
//! One test in this binary: the process's memory is this test's alone.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use logpolicy::recorder::{RecordLimits, MEMORY_SLACK};
use logpolicy::writer::{Output, WriterConfig};

/// Allocator rounding, the thread-local line buffer, the writer's idle chunks, stacks.
const ALLOCATOR_SLACK_KB: u64 = 1024;

fn status_kb(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap()
}

#[test]
fn peak_memory_is_the_limit_plus_a_constant() {
    let limit = 16 << 20;
    let path = std::env::temp_dir().join(format!("recorder-rss-{}.log", std::process::id()));
    let (dispatch, logging) = logpolicy::Builder::new()
        .directives("warn,@record(shop)=debug")
        .record_limits(RecordLimits::new(limit, Duration::from_secs(900)).unwrap())
        .writer(WriterConfig::new(Output::File(path.clone())))
        .build()
        .unwrap();
    let filler = "y".repeat(180);
    // Warm up what every event touches (the line buffer, the callsite's row), then reset
    // the peak.
    tracing::dispatcher::with_default(&dispatch, || {
        tracing::debug!(target: "shop::cart", n = 0u64, filler = filler.as_str(), "added");
    });
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    let baseline = status_kb("VmRSS:");
    let mut offered = 0usize;
    let mut n = 1u64;
    tracing::dispatcher::with_default(&dispatch, || {
        while offered < 10 * limit {
            tracing::debug!(target: "shop::cart", n, filler = filler.as_str(), "added");
            offered += 250;
            n += 1;
        }
    });
    let peak = status_kb("VmHWM:");
    let held = logging.recorder().stats(
        logging
            .handle()
            .now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap(),
    );
    let bound = baseline + (limit + MEMORY_SLACK) as u64 / 1024 + ALLOCATOR_SLACK_KB;
    eprintln!(
        "recorder: {n} lines offered ({} MiB), {} held ({} KiB), {} expired; RSS baseline {baseline} KiB, peak {peak} KiB, growth {} KiB, bound {bound} KiB",
        offered >> 20,
        held.lines,
        held.bytes / 1024,
        held.expired,
        peak.saturating_sub(baseline)
    );
    assert!(held.bytes <= limit);
    assert!(held.bytes >= limit * 9 / 10, "the store filled: {held:?}");
    assert_eq!(held.recorded, n);
    assert_eq!(held.expired + held.lines as u64, n);
    assert!(peak <= bound, "peak RSS {peak} KiB over {bound} KiB");
    drop(logging);
    let _ = std::fs::remove_file(path);
}
