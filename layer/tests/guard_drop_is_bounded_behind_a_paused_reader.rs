//! Dropping the guard while the reader is paused returns within the flush timeout (and the
//! writer thread's stop), and the lines it could not write are counted as `shutdown`, and
//! only those.

mod common;

use common::{ChildSpec, Reader};
use logpolicy::writer::DropReason;
use std::time::Duration;
use tracing_core::Level;

#[test]
fn guard_drop_is_bounded_behind_a_paused_reader() {
    common::child_role_or_continue();
    let spec = ChildSpec {
        events_per_thread: 50_000,
        capacity: 1 << 20,
        flush_timeout_ms: 500,
        ..ChildSpec::default()
    };
    let run = common::run(
        "guard_drop_is_bounded_behind_a_paused_reader",
        &spec,
        Reader::PausedThenFast(Duration::from_secs(3)),
    );
    let d = &run.delivered;
    let shutdown = run.dropped(Level::INFO, DropReason::Shutdown)
        + run.dropped(Level::ERROR, DropReason::Shutdown);
    let written = run.level_stat(Level::INFO, "written") + run.level_stat(Level::ERROR, "written");
    eprintln!(
        "guard drop: took {:.1} ms (timeout 500 ms); shutdown-dropped {shutdown}; written {written}; delivered {}",
        run.num("guard_drop_ms"),
        d.events_total()
    );
    assert!(run.exit_ok, "child failed:\n{}", run.stderr);
    assert!(
        run.num("guard_drop_ms") >= 450.0,
        "the guard waited for the reader"
    );
    // The flush timeout, then the thread's stop (it sees it within 50 ms of running; a
    // busy machine may run it later, and the guard waits for it rather than count lines
    // it may still write as dropped).
    let bound = 500.0 + logpolicy::writer::STOP_GRACE.as_secs_f64() * 1e3 + 500.0;
    assert!(
        run.num("guard_drop_ms") < bound,
        "the guard returned within its timeout and the stop's grace"
    );
    assert!(shutdown > 0, "what was still queued is counted as shutdown");
    run.assert_accounting_exact();
    // The writer thread never blocks in a write on a pipe: when the guard gives up, it
    // knows exactly which lines got out, so what the reader received is what was
    // counted written, line for line (and one line the stop cut, at most).
    assert_eq!(d.events_total(), written);
    assert!(
        d.malformed.len() <= 1,
        "malformed: {:?}",
        &d.malformed[..d.malformed.len().min(3)]
    );
}
