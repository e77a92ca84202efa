//! Behind a reader that takes ~1 MiB/s while the service logs ~3 MB/s, drop mode sheds
//! info lines but delivers every error, and the in-band reports account for every info
//! line that was not delivered.

mod common;

use common::{level_index, ChildSpec, Reader};
use tracing_core::Level;

#[test]
fn errors_survive_a_slow_reader() {
    common::child_role_or_continue();
    let spec = ChildSpec {
        events_per_thread: 20_000,
        rate_per_sec: 20_000, // 2 s at ~3 MB/s
        capacity: 256 * 1024,
        ..ChildSpec::default()
    };
    let run = common::run(
        "errors_survive_a_slow_reader",
        &spec,
        Reader::Paced(1 << 20),
    );
    let d = &run.delivered;
    let (info, error) = (level_index(Level::INFO), level_index(Level::ERROR));
    eprintln!(
        "slow reader: info emitted {} delivered {} reported dropped {}; errors emitted {} delivered {}; {} summary lines; read {} bytes in {:.2} s; max latency {} us",
        run.emitted(Level::INFO), d.events[info], d.reported[info],
        run.emitted(Level::ERROR), d.events[error], d.summary_lines, d.bytes, d.read_secs,
        run.num("max_latency_us"),
    );
    run.assert_clean();
    assert_eq!(
        d.events[error],
        run.emitted(Level::ERROR),
        "every error delivered"
    );
    assert_eq!(run.emitted(Level::ERROR), 40);
    assert!(
        d.reported[info] > 0,
        "the reader was slow enough to shed info lines"
    );
    assert_eq!(
        d.events[info] + d.reported[info],
        run.emitted(Level::INFO),
        "info delivered + reported == emitted"
    );
    assert_eq!(
        d.reported_total,
        run.level_stat(Level::INFO, "dropped_total")
    );
    assert_eq!(
        d.summary_lines,
        run.stat("summary_lines").as_u64().unwrap_or(0)
    );
    run.assert_accounting_exact();
}
