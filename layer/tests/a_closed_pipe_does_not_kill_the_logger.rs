//! When the reader goes away (EPIPE), the service keeps running and logging: the lost
//! lines are counted as `output_closed`, and every emitted line is accounted for.

mod common;

use common::{ChildSpec, Reader};
use logpolicy::writer::DropReason;
use tracing_core::Level;

#[test]
fn a_closed_pipe_does_not_kill_the_logger() {
    common::child_role_or_continue();
    let spec = ChildSpec {
        events_per_thread: 50_000,
        rate_per_sec: 100_000, // 1 s; the reader leaves after the first 2,000 lines
        capacity: 256 * 1024,
        ..ChildSpec::default()
    };
    let run = common::run(
        "a_closed_pipe_does_not_kill_the_logger",
        &spec,
        Reader::CloseAfter(2_000),
    );
    eprintln!(
        "closed pipe: exit ok {}; written {} output_closed {} queue_full {}; io_errors {} last {}; report {}",
        run.exit_ok,
        run.level_stat(Level::INFO, "written") + run.level_stat(Level::ERROR, "written"),
        run.dropped(Level::INFO, DropReason::OutputClosed) + run.dropped(Level::ERROR, DropReason::OutputClosed),
        run.dropped(Level::INFO, DropReason::QueueFull),
        run.stat("io_errors"), run.stat("last_io_error"), run.report,
    );
    assert!(run.exit_ok, "the child died:\n{}", run.stderr);
    assert_eq!(
        run.emitted(Level::INFO) + run.emitted(Level::ERROR),
        100_000,
        "kept logging to the end"
    );
    assert!(run.dropped(Level::INFO, DropReason::OutputClosed) > 0);
    assert!(
        run.dropped(Level::ERROR, DropReason::OutputClosed) > 0,
        "errors after the close are counted too"
    );
    assert!(run.stat("io_errors").as_u64().unwrap_or(0) >= 1);
    assert_eq!(run.stat("last_io_error"), "BrokenPipe");
    run.assert_accounting_exact();
}
