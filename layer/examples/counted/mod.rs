//! What the counted loops (`format_loop`, `floor_probe`) share: the full layer's writer
//! and filter on a fixed clock, and the run that checks no line was dropped.

use std::sync::Arc;
use std::time::Duration;

use logpolicy::clock::ManualClock;
use logpolicy::writer::{Output, Writer, WriterConfig, WriterGuard};
use logpolicy::{Directives, Policy, PolicyFilter, PolicyLayer};

/// The `Writer` as `logpolicy::init` builds it (4 MiB queue, stdout) and a
/// `PolicyFilter` of `directives`, both on `clock`.
pub fn writer_and_filter(
    clock: &ManualClock,
    directives: &str,
) -> (Writer, WriterGuard, PolicyFilter) {
    let config = WriterConfig::new(Output::Stdout)
        .capacity_bytes(4 << 20)
        .flush_timeout(Duration::from_secs(60))
        .clock(Arc::new(clock.clone()));
    let (writer, guard) = Writer::new(config).expect("writer");
    let directives: Directives = directives.parse().expect("directives");
    let policy = Policy::new(vec![PolicyLayer::baseline(directives)]);
    let filter = PolicyFilter::with_clock(policy, clock.clone());
    (writer, guard, filter)
}

/// Emits `n` events, flushes, and prints the writer's counts on stderr (a dropped line
/// would make the count wrong: it must say `dropped 0`).
pub fn run(n: u64, event: fn(), writer: &Writer, guard: WriterGuard) {
    for _ in 0..n {
        event();
    }
    drop(guard);
    let s = writer.stats();
    eprintln!(
        "written {} dropped {}",
        s.level(tracing::Level::INFO).written,
        s.dropped_total()
    );
}
