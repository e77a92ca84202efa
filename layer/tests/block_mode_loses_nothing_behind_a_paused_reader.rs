//! In block mode a paused reader slows the service down (back-pressure) but no line is
//! lost and no drop is reported.

mod common;

use common::{level_index, ChildSpec, Reader};
use std::time::Duration;
use tracing_core::Level;

#[test]
fn block_mode_loses_nothing_behind_a_paused_reader() {
    common::child_role_or_continue();
    let spec = ChildSpec {
        events_per_thread: 50_000,
        capacity: 256 * 1024,
        block: true,
        ..ChildSpec::default()
    };
    let run = common::run(
        "block_mode_loses_nothing_behind_a_paused_reader",
        &spec,
        Reader::PausedThenFast(Duration::from_millis(1_500)),
    );
    let d = &run.delivered;
    eprintln!(
        "block mode: delivered {} of {}; max write_line {} us (the pause); peak queue {} B",
        d.events_total(),
        run.emitted(Level::INFO) + run.emitted(Level::ERROR),
        run.num("max_latency_us"),
        run.stat("peak_queue_bytes"),
    );
    run.assert_clean();
    for level in [Level::INFO, Level::ERROR] {
        assert_eq!(
            d.events[level_index(level)],
            run.emitted(level),
            "{level} delivered"
        );
    }
    assert_eq!(d.events_total(), 100_000);
    assert_eq!(d.summary_lines, 0);
    assert!(
        run.num("max_latency_us") > 500_000.0,
        "the queue filled and callers waited for the reader"
    );
    run.assert_accounting_exact();
}
