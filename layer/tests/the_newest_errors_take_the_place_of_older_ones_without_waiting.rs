//! Behind a paused reader, a flood of errors alone (nothing below `alwaysKeep` to evict)
//! fills the queue, reserve included. With the default `ReserveFull::Drop` no call
//! waits: each new error takes the place of the oldest queued one (counted `evicted`),
//! none is refused as `reserve_full`, and once the reader resumes it gets, after the
//! batch that was in flight, the newest errors, in order, up to the last one.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::time::Duration;

use logpolicy::writer::{DropReason, Output, ReserveFull, Writer, WriterConfig, WriterStats};
use tracing_core::Level;

/// Floods a writer of a 64 KiB queue configured as `reserve_full` says with `lines`
/// errors while nobody reads its pipe, then reads everything while `finish` flushes.
/// Returns the final counters, the counters just after the flood, and what was read.
fn flood_errors_behind_a_paused_reader(
    reserve_full: ReserveFull,
    lines: u64,
) -> (WriterStats, WriterStats, Vec<u8>) {
    let (read_end, write_end) = rustix::pipe::pipe().expect("pipe");
    let config = WriterConfig::new(Output::Fd(write_end))
        .capacity_bytes(64 * 1024)
        .reserve_full(reserve_full)
        .flush_timeout(Duration::from_secs(30));
    let (writer, guard) = Writer::new(config).expect("writer");
    // Nobody reads yet: the pipe (64 KiB), the batch in flight and the queue fill.
    for i in 0..lines {
        let line = format!("{{\"seq\":{i},\"pad\":\"{}\"}}\n", "e".repeat(60));
        writer.write_line(Level::ERROR, true, line.as_bytes());
    }
    let during = writer.stats();
    // The reader resumes; `finish` flushes and closes the write end.
    let reader = std::thread::spawn(move || {
        let mut all = Vec::new();
        std::fs::File::from(read_end)
            .read_to_end(&mut all)
            .expect("read");
        all
    });
    let stats = guard.finish();
    (stats, during, reader.join().expect("reader"))
}

#[test]
fn the_newest_errors_take_the_place_of_older_ones_without_waiting() {
    let lines = 20_000u64;
    let (stats, during, read) = flood_errors_behind_a_paused_reader(ReserveFull::default(), lines);
    assert_eq!(
        stats.level(Level::ERROR).accepted,
        lines,
        "every error queued"
    );
    let text = String::from_utf8(read).expect("utf-8");
    let mut got = Vec::new();
    let mut reported = 0;
    for l in text.lines() {
        let v: serde_json::Value = serde_json::from_str(l).expect("JSON line");
        if v["msg"] == "dropped events" {
            reported += v["error"].as_u64().expect("error count");
        } else {
            got.push(v["seq"].as_u64().expect("seq"));
        }
    }
    let evicted = stats.level(Level::ERROR).dropped.get(DropReason::Evicted);
    eprintln!(
        "errors only, paused reader: {} delivered, {evicted} evicted, reported {reported}; while paused {} queued bytes",
        got.len(),
        during.queue_bytes
    );
    assert_eq!(
        stats.dropped(DropReason::ReserveFull),
        0,
        "no error refused"
    );
    assert_eq!(stats.space_waits, 0, "no call waited");
    assert!(evicted > 0, "the queue overflowed");
    assert_eq!(stats.dropped_total(), evicted);
    assert_eq!(got.len() as u64 + evicted, lines);
    assert_eq!(stats.written_total(), got.len() as u64);
    assert_eq!(reported, evicted, "every eviction reported in-band");
    // In order, and the last error is there: evictions took older lines. What got out
    // before the pipe filled, and each batch in flight, is a run of older lines; the
    // queue's content at the end is one run of the newest, at least what the queue
    // holds less a batch (64 KiB - 16 KiB, lines of 83 bytes + 12 of record).
    assert!(got.windows(2).all(|w| w[0] < w[1]), "in order");
    assert_eq!(got.last(), Some(&(lines - 1)), "the newest error is kept");
    let tail = got
        .iter()
        .rev()
        .zip((0..lines).rev())
        .take_while(|(g, want)| *g == want)
        .count();
    assert!(tail >= 400, "the newest {tail} errors kept in a row");
}

/// The opt-in: with `ReserveFull::WaitThenDrop`, the same flood makes calls wait (counted
/// in `space_waits`), then refuses the newest errors instead of evicting older ones.
#[test]
fn waiting_is_an_opt_in_with_a_bound() {
    let lines = 3_000u64;
    let wait = ReserveFull::WaitThenDrop(Duration::from_micros(100));
    let (stats, _, _) = flood_errors_behind_a_paused_reader(wait, lines);
    let refused = stats.dropped(DropReason::ReserveFull);
    eprintln!(
        "wait-then-drop: {} waits, {refused} refused",
        stats.space_waits
    );
    assert!(refused > 0, "the queue overflowed");
    assert!(
        stats.space_waits >= refused,
        "each refused line waited first"
    );
    assert_eq!(stats.dropped(DropReason::Evicted), 0, "no error evicted");
    assert_eq!(stats.written_total() + refused, lines);
}
