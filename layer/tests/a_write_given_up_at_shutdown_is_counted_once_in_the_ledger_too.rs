//! The portable write path (`WriterConfig::plain_writes(true)`, what every platform but
//! Linux runs) behind a reader stalled at shutdown: the writer thread is blocked inside
//! a write the guard cannot interrupt, so `finish()` gives up on it after the flush
//! timeout and the stop's grace, and counts its batch as `shutdown`. The ledger must
//! say the same, per callsite, when `finish()` returns: every line once, written or
//! dropped. And when the reader comes back and the blocked write returns, nothing
//! changes: neither the ledger nor the writer's counters count that batch again.
//! Two threads spin meanwhile, so that the writer's thread competes for the cores.
//! Before the fix the ledger counted 1,087 of 10,000 such lines as shutdown (the batch
//! in the blocked write in no column), and that batch as written once the write
//! returned. Run 20 times in a row with two `yes > /dev/null` beside it: 20 passed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs::File;
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use logpolicy::ledger::{SiteCounts, Sites};
use logpolicy::writer::{DropReason, Output, WriterConfig};

const LINES_PER_SITE: u64 = 5_000;

/// What the ledger counts for this test's callsites (`given_up::*`) and for
/// logpolicy's own lines, as (lines written, shutdown drops, all counts).
fn ours(sites: &Sites) -> (u64, u64, Vec<SiteCounts>) {
    let mut counts: Vec<SiteCounts> = sites
        .rows
        .iter()
        .filter(|r| r.target.starts_with("given_up::"))
        .map(|r| r.counts)
        .collect();
    counts.push(sites.own);
    let lines = counts.iter().map(|c| c.lines).sum();
    let shutdown = counts.iter().map(|c| c.shutdown).sum();
    (lines, shutdown, counts)
}

#[test]
fn a_blocked_plain_write_given_up_at_shutdown_is_shutdown_in_the_ledger_and_stays_so() {
    let (read, write) = rustix::pipe::pipe().unwrap();
    rustix::pipe::fcntl_setpipe_size(&write, 4096).unwrap();
    let (dispatch, logging) = logpolicy::Builder::new()
        .directives("info")
        .log_bridge(false)
        .writer(
            WriterConfig::new(Output::Fd(write))
                .plain_writes(true)
                .flush_timeout(Duration::from_millis(200)),
        )
        .build()
        .unwrap();
    tracing::dispatcher::with_default(&dispatch, || {
        for i in 0..LINES_PER_SITE {
            tracing::info!(target: "given_up::http", i, path = "/cart", "served");
            tracing::warn!(target: "given_up::pool", i, "pool low");
        }
    });
    // The writer's thread has taken a batch and is blocked writing it to the full pipe.
    std::thread::sleep(Duration::from_millis(100));
    let spin = Arc::new(AtomicBool::new(true));
    let load: Vec<_> = (0..2)
        .map(|_| {
            let spin = Arc::clone(&spin);
            std::thread::spawn(move || {
                while spin.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    let handle = logging.handle().clone();
    let stats = logging.finish();
    let at_finish = handle.sites();
    spin.store(false, Ordering::Relaxed);
    for t in load {
        t.join().unwrap();
    }

    assert!(stats.is_balanced(), "{stats:?}");
    let shutdown = stats.dropped(DropReason::Shutdown);
    assert!(
        shutdown > 0,
        "the blocked batch and the queue are given up: {stats:?}"
    );
    let (lines, ledger_shutdown, counts) = ours(&at_finish);
    assert_eq!(
        ledger_shutdown, shutdown,
        "the ledger counts as shutdown what finish() does: {counts:?}"
    );
    assert_eq!(
        lines,
        stats.written_total() + stats.summary_lines,
        "and as written what it does: {counts:?}"
    );
    assert_eq!(
        at_finish.totals.bytes + at_finish.own.bytes,
        stats.bytes_written,
        "bytes too"
    );

    // The reader comes back: the blocked write returns, the thread ends and closes the
    // pipe (end of file here). Nothing is counted again.
    let mut all = Vec::new();
    File::from(read).read_to_end(&mut all).unwrap();
    let after = handle.sites();
    assert_eq!(ours(&after).2, counts, "nothing counted after finish()");
    assert_eq!(
        after.totals.bytes + after.own.bytes,
        stats.bytes_written,
        "bytes after"
    );
    eprintln!(
        "given up at shutdown: {shutdown} lines (ledger {ledger_shutdown}), written {}, \
         the reader got {} bytes in all",
        stats.written_total(),
        all.len()
    );
}
