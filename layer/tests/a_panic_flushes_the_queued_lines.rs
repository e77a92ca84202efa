//! A thread that panics makes the panic hook flush what is queued: lines stuck behind a
//! paused reader reach it even though the process then exits without dropping the guard.

mod common;

use common::{ChildSpec, Reader};
use std::time::Duration;
use tracing_core::Level;

#[test]
fn a_panic_flushes_the_queued_lines() {
    common::child_role_or_continue();
    let spec = ChildSpec {
        threads: 1,
        events_per_thread: 20_000, // ~3 MB: far more than the pipe holds
        capacity: 8 << 20,
        end_with_panic: true,
        ..ChildSpec::default()
    };
    let run = common::run(
        "a_panic_flushes_the_queued_lines",
        &spec,
        // Paused while the child logs and panics, resumed well within the hook's 1 s.
        Reader::PausedThenFast(Duration::from_millis(300)),
    );
    let d = &run.delivered;
    eprintln!(
        "panic flush: {} bytes queued when the thread panicked; {} of {} lines delivered; hook took {:.1} ms",
        run.report["queued_bytes_at_end"],
        d.events_total(),
        spec.events_per_thread,
        run.num("guard_drop_ms"),
    );
    assert!(
        run.stderr.contains("the child panics on purpose"),
        "{}",
        run.stderr
    );
    assert!(
        run.report["queued_bytes_at_end"].as_u64().unwrap_or(0) > 1 << 20,
        "the test is only meaningful if lines were still queued at the panic"
    );
    assert!(
        d.malformed.is_empty(),
        "{:?}",
        &d.malformed[..d.malformed.len().min(3)]
    );
    assert_eq!(d.events_total(), spec.events_per_thread);
    for level in [Level::INFO, Level::ERROR] {
        assert_eq!(run.level_stat(level, "written"), run.emitted(level));
    }
    run.assert_accounting_exact();
}
