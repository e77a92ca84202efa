//! The portable write path (`WriterConfig::plain_writes`: plain `writev` through the
//! standard library, no preallocation; what every platform but Linux runs), forced on
//! Linux: behind a fast reader every line arrives whole and is counted written; behind
//! a paused reader the writer thread blocks inside a write, and the guard still returns
//! within the flush timeout and the stop's grace, every line counted once; a file is
//! written without disk allocated ahead of its end.

mod common;

use std::os::unix::fs::MetadataExt;
use std::time::Duration;

use common::{ChildSpec, Reader};
use logpolicy::writer::{DropReason, ExitReport, Output, Writer, WriterConfig, STOP_GRACE};
use tracing_core::Level;

#[test]
fn behind_a_fast_reader_plain_writes_deliver_every_line() {
    common::child_role_or_continue();
    let spec = ChildSpec {
        events_per_thread: 100_000,
        rate_per_sec: 100_000,
        plain_writes: true,
        ..ChildSpec::default()
    };
    let run = common::run(
        "behind_a_fast_reader_plain_writes_deliver_every_line",
        &spec,
        Reader::Fast,
    );
    run.assert_clean();
    let d = &run.delivered;
    for level in [Level::INFO, Level::ERROR] {
        assert_eq!(
            d.events[common::level_index(level)],
            run.emitted(level),
            "{level} delivered"
        );
        assert_eq!(run.level_stat(level, "written"), run.emitted(level));
    }
    assert_eq!(d.events_total(), 200_000);
    assert_eq!(d.summary_lines, 0, "no drop report expected");
    run.assert_accounting_exact();
}

#[test]
fn behind_a_paused_reader_the_guard_gives_up_on_a_blocked_write_in_time() {
    common::child_role_or_continue();
    let flush_timeout_ms = 500;
    let spec = ChildSpec {
        events_per_thread: 50_000,
        capacity: 1 << 20,
        flush_timeout_ms,
        plain_writes: true,
        ..ChildSpec::default()
    };
    let run = common::run(
        "behind_a_paused_reader_the_guard_gives_up_on_a_blocked_write_in_time",
        &spec,
        Reader::PausedThenFast(Duration::from_secs(4)),
    );
    assert!(run.exit_ok, "child failed:\n{}", run.stderr);
    let took = run.num("guard_drop_ms");
    let grace = STOP_GRACE.as_secs_f64() * 1e3;
    eprintln!("plain writes, paused reader: the guard took {took:.0} ms");
    // The thread was inside a write it could not leave (the plain path: with
    // `RWF_NOWAIT` it would have seen the stop within 50 ms): the guard waited the
    // flush timeout and the grace, and no longer.
    assert!(
        took >= flush_timeout_ms as f64 + grace - 50.0,
        "the guard waited for the blocked write: {took:.0} ms"
    );
    assert!(
        took < flush_timeout_ms as f64 + grace + 500.0,
        "the guard returned within its timeout and the stop's grace: {took:.0} ms"
    );
    run.assert_accounting_exact();
    let shutdown = run.dropped(Level::INFO, DropReason::Shutdown)
        + run.dropped(Level::ERROR, DropReason::Shutdown);
    assert!(shutdown > 0, "the blocked batch is counted as shutdown");
    // The reader, back after the pause, gets what was counted written and at most the
    // part of the abandoned batch the pipe had taken (counted as shutdown).
    let written = run.level_stat(Level::INFO, "written") + run.level_stat(Level::ERROR, "written");
    let delivered = run.delivered.events_total();
    assert!(
        delivered >= written && delivered <= written + shutdown,
        "delivered {delivered}, written {written}, shutdown {shutdown}"
    );
    assert!(run.delivered.malformed.len() <= 1, "one line cut at most");
    // The last report would have had to wait for a pipe (stderr here): counters only.
    assert_eq!(
        run.stat("exit_report"),
        &format!("{:?}", ExitReport::CountersOnly)
    );
}

#[test]
fn a_file_written_plainly_gets_no_disk_ahead_of_its_end() {
    let d = common::fresh_dir("plain-file");
    let path = d.join("app.log");
    let config = WriterConfig::new(Output::File(path.clone())).plain_writes(true);
    let (writer, guard) = Writer::new(config).unwrap();
    let mut expected = String::new();
    for n in 0..2_000 {
        let line = format!("{{\"n\":{n},\"msg\":\"{}\"}}\n", "y".repeat(60 + n % 50));
        assert!(writer.write_line(Level::INFO, false, line.as_bytes()));
        expected.push_str(&line);
    }
    assert!(writer.flush(Duration::from_secs(10)));
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(meta.len(), expected.len() as u64);
    // The default path would hold 8 MiB ahead here (see
    // a_log_file_is_allocated_ahead_and_trimmed.rs): only the last block's rounding.
    assert!(
        meta.blocks() * 512 < meta.len() + 64 * 1024,
        "{} bytes allocated for {} written",
        meta.blocks() * 512,
        meta.len()
    );
    let stats = guard.finish();
    assert_eq!(stats.written_total(), 2_000);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), expected);
    std::fs::remove_dir_all(d).unwrap();
}
