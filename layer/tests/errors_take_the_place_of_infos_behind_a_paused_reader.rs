//! A producer logging as fast as it can behind a paused reader fills the queue with infos
//! and then brings more errors than the reserve holds: the errors evict queued infos
//! (counted as `evicted`), so every error arrives once the reader resumes, in order with
//! what was kept, and the counts add up exactly.

mod common;

use common::{level_index, ChildSpec, Reader};
use logpolicy::writer::DropReason;
use std::time::Duration;
use tracing_core::Level;

#[test]
fn errors_take_the_place_of_infos_behind_a_paused_reader() {
    common::child_role_or_continue();
    // 512 KiB queue: a 128 KiB reserve holds ~850 error lines; 1.2M events bring 1,200
    // errors, most of them while the reader is paused.
    let spec = ChildSpec {
        events_per_thread: 600_000,
        capacity: 512 * 1024,
        ..ChildSpec::default()
    };
    let run = common::run(
        "errors_take_the_place_of_infos_behind_a_paused_reader",
        &spec,
        Reader::PausedThenFast(Duration::from_secs(3)),
    );
    let d = &run.delivered;
    let (info, error) = (level_index(Level::INFO), level_index(Level::ERROR));
    eprintln!(
        "paused reader, producer flat out: errors {}/{}; info emitted {} delivered {} reported dropped {} (queue_full {}, evicted {}, contended {}); peak queue {} B",
        d.events[error], run.emitted(Level::ERROR),
        run.emitted(Level::INFO), d.events[info], d.reported[info],
        run.dropped(Level::INFO, DropReason::QueueFull),
        run.dropped(Level::INFO, DropReason::Evicted),
        run.dropped(Level::INFO, DropReason::Contended),
        run.stat("peak_queue_bytes"),
    );
    run.assert_clean();
    assert!(
        run.dropped(Level::INFO, DropReason::Evicted) > 0,
        "the errors needed more than the reserve"
    );
    assert_eq!(
        d.events[error],
        run.emitted(Level::ERROR),
        "every error delivered"
    );
    assert_eq!(run.level_stat(Level::ERROR, "dropped_total"), 0);
    assert_eq!(d.events[info] + d.reported[info], run.emitted(Level::INFO));
    run.assert_accounting_exact();
    assert!(run
        .stat("peak_queue_bytes")
        .as_u64()
        .is_some_and(|b| b <= 512 * 1024));
}
