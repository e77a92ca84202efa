//! Behind a reader that keeps up, drop mode loses nothing: every line arrives, intact,
//! and no drop is counted or reported.

mod common;

use common::{ChildSpec, Reader};
use tracing_core::Level;

#[test]
fn a_fast_reader_gets_every_line() {
    common::child_role_or_continue();
    let spec = ChildSpec {
        events_per_thread: 150_000,
        // A heavy but realistic load (~15 MB/s of JSON lines) that leaves the reader and
        // the writer thread room on two shared cores even when other work runs beside
        // the test; unpaced producers outrun any single reader, which is what drop mode
        // is for (the reader-scenarios benchmark measures that).
        rate_per_sec: 100_000,
        ..ChildSpec::default()
    };
    let run = common::run("a_fast_reader_gets_every_line", &spec, Reader::Fast);
    let d = &run.delivered;
    eprintln!(
        "fast reader: {} lines in {:.0} ms of producing ({:.0} lines/s), {} bytes, {} write syscalls, peak queue {} B, p50 <= {} us, p99.9 <= {} us, max {} us",
        d.events_total(),
        run.num("produced_ms"),
        d.events_total() as f64 / (run.num("produced_ms") / 1e3),
        d.bytes,
        run.stat("write_syscalls"),
        run.stat("peak_queue_bytes"),
        run.num("p50_latency_us_upper"),
        run.num("p999_latency_us_upper"),
        run.num("max_latency_us"),
    );
    run.assert_clean();
    for level in [Level::INFO, Level::ERROR] {
        assert_eq!(
            d.events[common::level_index(level)],
            run.emitted(level),
            "{level} delivered"
        );
        assert_eq!(
            run.level_stat(level, "written"),
            run.emitted(level),
            "{level} written"
        );
    }
    assert_eq!(
        run.emitted(Level::INFO) + run.emitted(Level::ERROR),
        300_000
    );
    assert_eq!(d.summary_lines, 0, "no drop report expected");
    assert_eq!(run.stat("summary_lines"), 0);
    run.assert_accounting_exact();
}
