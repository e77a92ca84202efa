//! A reader paused for 5 s neither stalls the service (no `write_line` takes 1 ms in drop
//! mode, not even right after the reader resumes) nor loses an error, and the counts add
//! up exactly once it resumes.

mod common;

use common::{level_index, ChildSpec, Reader};
use logpolicy::writer::DropReason;
use std::time::Duration;
use tracing_core::Level;

#[test]
fn errors_survive_a_paused_reader() {
    common::child_role_or_continue();
    let spec = ChildSpec {
        events_per_thread: 120_000,
        rate_per_sec: 40_000, // 6 s, the first 5 of them unread
        ..ChildSpec::default()
    };
    let run = common::run(
        "errors_survive_a_paused_reader",
        &spec,
        Reader::PausedThenFast(Duration::from_secs(5)),
    );
    let d = &run.delivered;
    let (info, error) = (level_index(Level::INFO), level_index(Level::ERROR));
    eprintln!(
        "paused reader: write_line max {} us, p99.9 <= {} us, {} calls >= 1 ms (control: max {} us, {} >= 1 ms; slow calls [ms since start, us, queued]: {}); info emitted {} delivered {} reported dropped {} (queue_full {}, contended {}); errors {}/{}; peak queue {} B",
        run.num("max_latency_us"), run.num("p999_latency_us_upper"), run.report["latencies_over_1ms"],
        run.num("control_max_us"), run.report["control_over_1ms"],
        run.report["slow_calls_ms_us_queued"],
        run.emitted(Level::INFO), d.events[info], d.reported[info],
        run.dropped(Level::INFO, DropReason::QueueFull), run.dropped(Level::INFO, DropReason::Contended),
        d.events[error], run.emitted(Level::ERROR), run.stat("peak_queue_bytes"),
    );
    run.assert_clean();
    assert!(d.reported[info] > 0, "the pause filled the queue");
    assert_eq!(
        d.events[error],
        run.emitted(Level::ERROR),
        "every error delivered"
    );
    assert_eq!(d.events[info] + d.reported[info], run.emitted(Level::INFO));
    assert_eq!(run.level_stat(Level::ERROR, "dropped_total"), 0);
    run.assert_accounting_exact();
    // While the reader is paused a log call never waits for it, nor (behind a
    // preempted lock holder) for the queue's lock: no call takes 1 ms.
    assert_eq!(
        run.report["latencies_over_1ms"], 0,
        "slow calls [ms since start, us, queued]: {}",
        run.report["slow_calls_ms_us_queued"]
    );
    assert!(run.num("max_latency_us") < 1000.0);
    assert!(run.num("p999_latency_us_upper") <= 100.0);
}
