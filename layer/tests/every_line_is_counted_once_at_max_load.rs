//! At max load behind a reader that cannot keep up (1 MiB/s, or paused), with a flush
//! timeout that runs out at exit: every line is counted exactly once, as written or as
//! dropped, and the counts match what the reader received, line for line, per level.
//! The drops are all reported, in-band or (when stdout would not take the last report)
//! on stderr. Nothing here depends on timing: whatever the machine does, the counts
//! must agree.

mod common;

use common::{ChildSpec, Reader, Run};
use logpolicy::writer::DropReason;
use logpolicy::LEVEL_ORDER;
use std::time::Duration;

fn check(run: &Run) {
    assert!(run.exit_ok, "child failed:\n{}", run.stderr);
    run.assert_accounting_exact();
    let d = &run.delivered;
    let stderr = run.reported_on_stderr();
    let mut dropped_total = 0;
    for (i, level) in LEVEL_ORDER.iter().enumerate() {
        let written = run.level_stat(*level, "written");
        let dropped = run.level_stat(*level, "dropped_total");
        dropped_total += dropped;
        eprintln!(
            "{level}: emitted {} written {written} dropped {dropped}; reader got {} lines, reports in-band {} + stderr {}",
            run.emitted(*level),
            d.events[i],
            d.reported[i],
            stderr[i]
        );
        assert_eq!(
            d.events[i], written,
            "{level}: lines the reader got vs written"
        );
        assert_eq!(
            d.reported[i] + stderr[i],
            dropped,
            "{level}: drops reported (in-band + stderr) vs counted"
        );
    }
    assert!(dropped_total > 0, "the scenario overloads the writer");
    // With the defaults no call waited for space, however full the queue was.
    assert_eq!(
        run.stat("space_waits").as_u64(),
        Some(0),
        "calls that waited"
    );
    // At most one line was cut by the stop: marked so if the writer wrote anything
    // after it, else the last bytes the reader got, with no line end.
    assert!(d.malformed.len() <= 1, "malformed: {:?}", d.malformed);
    for (i, m) in d.malformed.iter().enumerate() {
        let cut = d.cut_at_end && i + 1 == d.malformed.len();
        assert!(m.ends_with(" [torn]") || cut, "malformed line: {m}");
    }
    // Lines still queued when the flush ran out (if the machine was slow enough for the
    // reader to catch up first, there are none) were reported by a last line.
    let shutdown: u64 = LEVEL_ORDER
        .iter()
        .map(|l| run.dropped(*l, DropReason::Shutdown))
        .sum();
    let report = run.stat("exit_report").as_str().unwrap_or("");
    eprintln!("shutdown drops {shutdown}, last report: {report}");
    if shutdown > 0 {
        assert!(
            ["InBand", "Stderr"].contains(&report),
            "the last report went somewhere: {report}"
        );
    }
}

fn spec() -> ChildSpec {
    ChildSpec {
        threads: 2,
        events_per_thread: 300_000,
        capacity: 1 << 20,
        flush_timeout_ms: 300,
        ..ChildSpec::default()
    }
}

#[test]
fn behind_a_reader_at_one_mib_per_second() {
    common::child_role_or_continue();
    let run = common::run(
        "behind_a_reader_at_one_mib_per_second",
        &spec(),
        Reader::Paced(1 << 20),
    );
    check(&run);
}

#[test]
fn behind_a_paused_reader() {
    common::child_role_or_continue();
    let run = common::run(
        "behind_a_paused_reader",
        &spec(),
        Reader::PausedThenFast(Duration::from_secs(2)),
    );
    check(&run);
}
