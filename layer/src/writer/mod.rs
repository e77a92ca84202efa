//! The non-blocking, byte-bounded writer: formatted lines in, batched writes out.
//!
//! A [`Writer`] copies each line (already formatted, `\n` included) on the calling thread
//! into a queue bounded in **bytes**, and one background thread, `logpolicy-writer`,
//! writes the queue out in large batches. The caller never touches the output; in the
//! default [`Overflow::Drop`] mode it never waits for the reader either.
//!
//! # Design
//!
//! This module is the handle ([`Writer`]) and the guard ([`WriterGuard`]); the
//! background thread's loop is in `worker.rs`, the state they share (behind one mutex)
//! in `state.rs`, the queue in `queue.rs` and the output (files, pipes, rotation) in
//! `output.rs`.
//!
//! The queue is a list of fixed-size chunks (1/32 of the capacity, between 4 KiB and
//! 64 KiB) behind one mutex. A call to [`Writer::write_line`] takes the lock, checks the
//! byte budget, copies the line into the tail chunk (or a new one: a line never straddles
//! two chunks unless it is longer than a chunk) and bumps a few counters: the lock is
//! held for a `memcpy`, never for I/O, and the writer thread is woken after the lock is
//! released. The writer thread takes the pending chunks from the front, up to a quarter
//! of the capacity (moves of pointers), releases the lock and writes the batch with one
//! `writev` (more only on partial writes, or past 1024 chunks), empties the chunks, and
//! gives them back for reuse. While it writes, callers fill new chunks, so batches grow
//! exactly when the output is slow; the quarter bound keeps most of the queue out of a
//! batch that a stalled reader holds up, where errors can still take the place of infos
//! (see [`DropReason::Evicted`]).
//! New chunks are allocated, and their pages touched, by the writer thread outside the
//! lock (it keeps two spare chunks ready while the memory bound allows), so a caller
//! holding the lock does not take page faults.
//!
//! Callers wake the writer thread only when it sleeps: after a batch it looks for new
//! lines every few milliseconds (as long as the last batch's pace takes to fill 1/16 of
//! the queue, between 1 and 4 ms) for 20 ms before it does. A wake-up is a syscall on the caller's
//! thread, and the thread it wakes often preempts the caller in the middle of its log
//! call (measured: 2–5 ms calls on a busy two-core machine), so under a steady flow of
//! lines callers make no syscall at all.
//!
//! A lock held for nanoseconds can still be held for milliseconds: when the scheduler
//! preempts its holder (two producers, the writer thread and a reader on two cores). In
//! [`Overflow::Drop`] mode a line below `alwaysKeep` therefore only *tries* to take the
//! lock, busy-waiting at most [`WriterConfig::lock_spin`] (default 500 µs); if it cannot,
//! and the queue holds a quarter of its share or more (the output is behind), the line is
//! dropped and counted as [`DropReason::Contended`]. While the queue is nearly empty the
//! line is kept instead, and so is an `alwaysKeep` line: rather than sleep until the
//! preempted holder runs again, the caller hands the line over (one allocation, a
//! lock-free push; at most 64 lines of at most 8 KiB wait so) and returns, and the next
//! holder of the lock queues it before its own line, so one thread's lines keep their
//! order ([`WriterStats::lock_handoffs`]). Behind a reader that keeps up no line is lost
//! to scheduling (the reader-scenarios benchmark lost 3 lines in 1.2 million that way at
//! 200,000 lines/s before). Only when that hand-over is full, for a longer line, or in
//! the modes that wait for space ([`Overflow::Block`], an `alwaysKeep` line with
//! [`ReserveFull::Block`] or `WaitThenDrop`) does a caller sleep for the lock
//! ([`WriterStats::lock_waits`]).
//!
//! # Memory bound
//!
//! Queued bytes (waiting plus being written) never exceed
//! [`WriterConfig::capacity_bytes`]; an `alwaysKeep` line counts 12 bytes more than its
//! length, for the record of where it sits (what lets it stay when the lines around it
//! are evicted). Chunks are allocated lazily, reused forever, and never grow, and at most
//! `capacity / chunk + 4` of them ever exist (a line that would need another waits as if
//! the queue were full; with lines much shorter than a chunk that never happens before
//! the byte bound): memory is the capacity plus four chunks (256 KiB at most), plus 4
//! bytes per queued line (where it ends and its level; a chunk takes at most one line per
//! 12 bytes of its size, so this is at most a third of the chunks' size), plus the lines
//! handed over while the lock's holder was preempted (512 KiB at most), plus the
//! thread's stack.
//!
//! # Overflow semantics
//!
//! Lines below `alwaysKeep` (the caller says which, with `always_keep`) may fill the queue
//! up to `capacity * (100 - reserve_percent) / 100` bytes; `alwaysKeep` lines may use
//! the whole capacity, so an info flood that fills its share still leaves room for errors.
//!
//! | mode | line below `alwaysKeep`, share full | `alwaysKeep` line, queue full |
//! |---|---|---|
//! | [`Overflow::Drop`] (default) | dropped at once, [`DropReason::QueueFull`] (or [`DropReason::Contended`] if the lock is not free within [`WriterConfig::lock_spin`]) | never waits by default: takes the place of queued lines of lower levels, then of the oldest queued lines of its own level ([`DropReason::Evicted`]), else is dropped ([`DropReason::ReserveFull`]); waiting, with a bound, is an opt-in of [`ReserveFull`] |
//! | [`Overflow::Block`] | waits for space | waits for space |
//!
//! The reserve applies in block mode too, so errors still overtake an info flood in the
//! queue. A line longer than its whole share (the normal limit, or the capacity for
//! `alwaysKeep` lines) can never fit: it is dropped at once, in every mode, and counted as
//! `QueueFull` or `ReserveFull`. Lines are never truncated.
//!
//! # Drop reasons
//!
//! - [`DropReason::QueueFull`]: a line below `alwaysKeep` found its share full (drop mode).
//! - [`DropReason::ReserveFull`]: an `alwaysKeep` line found the reserve full too.
//! - [`DropReason::OutputClosed`]: the line was queued, but the `write` of its batch failed
//!   with an error other than `EINTR`/`EAGAIN` (`EPIPE` when the reader went away, `ENOSPC`,
//!   …). The lines of the batch that reached the output whole are counted as written, the
//!   others as dropped (see *Accounting*). The writer keeps serving: later lines are still
//!   taken, tried and counted.
//! - [`DropReason::Shutdown`]: the line was still queued (or not yet taken whole by the
//!   output) when the guard's flush timed out, or was logged after the guard was dropped.
//! - [`DropReason::Contended`]: a line below `alwaysKeep` (drop mode) could not take the
//!   queue's lock within [`WriterConfig::lock_spin`] because its holder was descheduled,
//!   while the queue held a quarter of its share or more. It has its own
//!   reason, not `QueueFull`, so that scheduling trouble is not mistaken for a slow reader.
//! - [`DropReason::Evicted`]: a queued line was dropped to make room for an `alwaysKeep`
//!   line that found the whole queue full (drop mode): first every waiting line of a
//!   lower level (below `alwaysKeep`, and `warn` lines for an `error`) goes at once, and
//!   the lines that remain are packed together in order; until the writer next gets a
//!   batch out, new lines below `alwaysKeep` are refused as `QueueFull`, since they could
//!   only be evicted in turn. If that is not enough, with the default
//!   [`ReserveFull::Drop`], the oldest waiting lines of the line's own level go, front
//!   to back, until it fits. Lines in the batch being written, pieces of lines longer
//!   than a chunk and lines of a higher level are never evicted. So behind a stalled
//!   reader the queue fills with errors and warnings, up to the capacity less the batch
//!   in flight, the newest kept, and no call waits.
//!
//! # Accounting and in-band reports
//!
//! For every level, at every [`Writer::stats`] snapshot:
//! `emitted == written + dropped (all reasons) + queued`.
//!
//! Whenever lines were dropped since the last report, the writer thread writes one JSON
//! line in front of its next batch (or on its own once the output is writable), e.g.
//!
//! ```text
//! {"ts":"2026-11-29T20:06:15.123456Z","level":"WARN","target":"logpolicy","msg":"dropped events","reason":{"queue_full":31,"reserve_full":0,"output_closed":0,"shutdown":0,"contended":0,"evicted":0},"trace":0,"debug":0,"info":31,"warn":0,"error":0,"total":31}
//! ```
//!
//! with the counts since the previous report, so the reports add up to the drops. Drops
//! counted without the lock are reported at the next batch, or within a second when
//! nothing else is logged. A report
//! whose write fails is carried into the next one, so `OutputClosed` drops are reported
//! too if the output recovers. Drops counted after the guard was dropped are only in the
//! stats. Reports are not events: they are counted in [`WriterStats::summary_lines`],
//! never in the per-level counters. The writer never emits `tracing` events itself.
//!
//! A line is counted once, as written or as dropped, never both. On Linux, on a pipe,
//! socket or terminal the writer thread never blocks inside a `write` (it asks the
//! kernel not to wait, `RWF_NOWAIT`, and waits for writability in `poll`), so when a
//! write stops part way (an error, or a stop) it knows exactly which bytes got out:
//! every line whose last byte did is written, the others are dropped. A line cut in the
//! middle is ended with ` [torn]` before the next bytes the writer writes, so no reader
//! takes it, or the next line, for a whole one.
//!
//! # Shutdown
//!
//! Dropping the [`WriterGuard`] (or [`WriterGuard::finish`], which also returns the final
//! counters) stops accepting lines, waits up to [`WriterConfig::flush_timeout`] for the
//! queue (and pending reports) to be written, then stops the thread. If the time runs
//! out, the thread stops where it is (within 50 ms: it waits for the output only in
//! `poll`), counts what the output took of its batch as written and everything else as
//! [`DropReason::Shutdown`], and writes one last summary line with the drops not yet
//! reported: to the output if it takes it at once, else to stderr, else nowhere but the
//! counters ([`ExitReport`]). Only with plain writes (every platform but Linux, see
//! *Platforms*) or on a kernel that cannot write without waiting (before Linux 4.14) may
//! the thread still be blocked in a `write` after [`STOP_GRACE`]: its batch is then
//! counted as `Shutdown` although the reader may still get part of it (in the counters and
//! in the [ledger](crate::ledger) alike, per callsite, when `finish` returns; nothing of
//! it is counted again if the write returns later), and the thread is
//! left to end with the process. [`install_panic_hook`] flushes, within a second, what
//! is queued when a thread panics.
//!
//! # Platforms
//!
//! Tested on Linux, where the writer thread writes with `pwritev2` (`RWF_NOWAIT`) and
//! preallocates files with `fallocate`. Everywhere else it writes plainly, with the
//! standard library's `write`/`writev`, and preallocates nothing
//! ([`WriterConfig::plain_writes`], which also forces that path on Linux, where the tests
//! run it): nothing is lost and every line is counted as on Linux, but behind a stalled
//! pipe the thread may block inside a write, which the guard gives up on after the flush
//! timeout and [`STOP_GRACE`]. The crate builds for macOS, FreeBSD and other Unix
//! systems, and for Windows (no [`Output::Fd`] there; stdout and stderr are written as
//! bytes, which a console shows in its code page); there it is checked to compile, not
//! run.
//!
//! # Examples
//!
//! ```
//! use logpolicy::writer::{Output, Writer, WriterConfig};
//! use std::time::Duration;
//! use tracing_core::Level;
//!
//! let path = std::env::temp_dir().join(format!("writer-doc-{}.log", std::process::id()));
//! let (writer, guard) = Writer::new(WriterConfig::new(Output::File(path.clone())))?;
//! assert!(writer.write_line(Level::INFO, false, b"{\"msg\":\"started\"}\n"));
//! assert!(writer.write_line(Level::ERROR, true, b"{\"msg\":\"failed\"}\n"));
//! drop(guard); // flushes
//! assert_eq!(std::fs::read_to_string(&path)?, "{\"msg\":\"started\"}\n{\"msg\":\"failed\"}\n");
//! assert!(!writer.write_line(Level::INFO, false, b"too late\n"));
//! # std::fs::remove_file(path)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod config;
mod output;
mod queue;
mod replay;
mod state;
mod stats;
mod summary;
mod worker;

pub use crate::recorder::{ReplayReport, ReplayRequest};
pub use config::{
    Output, Overflow, ReserveFull, Rotation, WriterConfig, WriterError, LOCK_SPIN, MAX_LOCK_SPIN,
    MAX_RESERVE_PERCENT, MAX_ROTATION_KEEP, MIN_CAPACITY_BYTES, MIN_ROTATION_BYTES,
};
pub use replay::{PendingReplay, REPLAY_BYTES_PER_SECOND, REPLAY_QUEUE_PERCENT, REPLAY_STALL};
pub use stats::{DropCounts, DropReason, ExitReport, LevelStats, WriterStats, REASONS};

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tracing_core::Level;

use crate::ledger::{Col, Ledger, RowId};
use crate::level::level_index;
use crate::sink::LineSink;
use queue::Fit;
use state::{Shared, LOCKLESS_CONTENDED, LOCKLESS_QUEUE_FULL};

/// How long the panic hook waits for queued lines to be written.
pub const PANIC_FLUSH_TIMEOUT: Duration = Duration::from_secs(1);

/// The name of the background thread.
pub const THREAD_NAME: &str = "logpolicy-writer";

/// A handle to the writer: cheap to clone, shared by every thread that logs.
///
/// Built with [`Writer::new`], which also returns the [`WriterGuard`] that owns the
/// background thread.
///
/// # Examples
///
/// ```
/// use logpolicy::writer::{DropReason, Output, Overflow, Writer, WriterConfig};
/// use tracing_core::Level;
///
/// let path = std::env::temp_dir().join(format!("writer-handle-{}.log", std::process::id()));
/// let config = WriterConfig::new(Output::File(path.clone())).capacity_bytes(4096);
/// let (writer, _guard) = Writer::new(config)?;
/// let worker = writer.clone();
/// std::thread::spawn(move || worker.write_line(Level::WARN, true, b"from a thread\n"))
///     .join()
///     .unwrap();
/// // A line larger than the queue can never be written: dropped and counted, not truncated.
/// assert!(!writer.write_line(Level::INFO, false, &[b'x'; 8192]));
/// assert_eq!(writer.stats().dropped(DropReason::QueueFull), 1);
/// # std::fs::remove_file(path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Writer {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("overflow", &self.shared.overflow)
            .field("reserve_full", &self.shared.reserve_full)
            .finish_non_exhaustive()
    }
}

/// Owns the background thread: dropping it flushes (within
/// [`WriterConfig::flush_timeout`]) and stops the writer.
///
/// # Examples
///
/// ```
/// use logpolicy::writer::{Output, Writer, WriterConfig};
/// use tracing_core::Level;
///
/// let path = std::env::temp_dir().join(format!("writer-guard-{}.log", std::process::id()));
/// let (writer, guard) = Writer::new(WriterConfig::new(Output::File(path.clone())))?;
/// writer.write_line(Level::INFO, false, b"last words\n");
/// drop(guard);
/// assert_eq!(std::fs::read_to_string(&path)?, "last words\n");
/// # std::fs::remove_file(path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "dropping the guard flushes and stops the writer; keep it alive for the program's lifetime"]
#[derive(Debug)]
pub struct WriterGuard {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// How long a caller may wait for space.
enum Wait {
    No,
    Forever,
    Until(Instant),
}

impl Writer {
    /// Validates `config`, opens the output and starts the background thread.
    ///
    /// # Errors
    ///
    /// [`WriterError::InvalidConfig`] naming the bad field, [`WriterError::Open`] if the
    /// output cannot be opened, [`WriterError::Spawn`] if the thread cannot be started.
    ///
    /// # Examples
    ///
    /// ```
    /// use logpolicy::writer::{Output, Writer, WriterConfig, WriterError};
    /// let err = Writer::new(WriterConfig::new(Output::Stdout).reserve_percent(95)).unwrap_err();
    /// assert!(matches!(err, WriterError::InvalidConfig { field: "reserve_percent", .. }));
    /// ```
    pub fn new(config: WriterConfig) -> Result<(Writer, WriterGuard), WriterError> {
        config.validate()?;
        let (out, shared) = Shared::open(config)?;
        let shared = Arc::new(shared);
        let for_thread = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name(THREAD_NAME.to_owned())
            .spawn(move || worker::run(&for_thread, out))
            .map_err(WriterError::Spawn)?;
        Ok((
            Writer {
                shared: Arc::clone(&shared),
            },
            WriterGuard {
                shared,
                thread: Some(thread),
            },
        ))
    }

    /// Queues one complete line (`line` includes its trailing `\n`).
    ///
    /// `always_keep` is true when the event's level is at or above the policy's
    /// `alwaysKeep` (default `warn`): such lines may use the reserve. Returns `true` if the
    /// line was queued, `false` if it was dropped (and counted). In [`Overflow::Drop`] mode
    /// a line below `alwaysKeep` never waits for the reader, nor longer than [`WriterConfig::lock_spin`]
    /// for the queue's lock unless the queue is nearly empty; an `alwaysKeep` line waits for the lock (which its holders
    /// keep for a copy) and for space at most as [`ReserveFull`] allows.
    ///
    /// # Examples
    ///
    /// ```
    /// use logpolicy::writer::{Output, Writer, WriterConfig};
    /// use tracing_core::Level;
    ///
    /// let (writer, _guard) = Writer::new(WriterConfig::new(Output::Stderr))?;
    /// assert!(writer.write_line(Level::ERROR, true, b"{\"level\":\"ERROR\",\"msg\":\"disk full\"}\n"));
    /// # Ok::<(), logpolicy::writer::WriterError>(())
    /// ```
    pub fn write_line(&self, level: Level, always_keep: bool, line: &[u8]) -> bool {
        self.write_row_line(RowId::OWN, level, always_keep, line)
    }

    /// [`Writer::write_line`] for a line of the callsite whose ledger row is `row` (see
    /// [`crate::ledger`]): the line is counted there once written or dropped.
    pub fn write_row_line(&self, row: RowId, level: Level, always_keep: bool, line: &[u8]) -> bool {
        let li = level_index(level);
        let sh = &*self.shared;
        let never_wait = !always_keep && sh.overflow == Overflow::Drop;
        if never_wait
            && line.len() <= sh.normal_limit
            && (sh.queued_hint.load(Ordering::Acquire) + line.len() > sh.normal_limit
                || sh.evicting.load(Ordering::Acquire))
        {
            // The queue is (or just was) full: refuse without touching the lock, so a
            // flood behind a paused reader never makes callers queue for it.
            sh.drop_lockless(LOCKLESS_QUEUE_FULL, li, row);
            return false;
        }
        // A steady flow: the lock free, room in the chunk being filled. Everything else
        // (a new chunk, a held lock, a full queue, lines posted before this one) takes
        // the long way, out of line.
        sh.append_now(li, row, always_keep, line)
            || self.write_row_line_slow(li, row, always_keep, never_wait, line)
    }

    /// [`Writer::write_row_line`] when [`Shared::append_now`] could not queue the line.
    #[inline(never)]
    fn write_row_line_slow(
        &self,
        li: usize,
        row: RowId,
        always_keep: bool,
        never_wait: bool,
        line: &[u8],
    ) -> bool {
        let sh = &*self.shared;
        let mut st = match sh.lock_within(sh.lock_spin) {
            Some(st) => st,
            // The holder was preempted. While the output keeps up (the queue holds less
            // than a quarter of its share), the line is no burden: wait for the holder to
            // run again rather than lose it. An `alwaysKeep` line always waits for it.
            None if !never_wait || sh.queued_hint.load(Ordering::Acquire) < sh.normal_limit / 4 => {
                // In drop mode (and, for an `alwaysKeep` line, when it would not wait for
                // space either), hand the line over rather than sleep until that thread
                // runs again.
                let may_post = sh.overflow == Overflow::Drop
                    && (!always_keep || sh.reserve_full == ReserveFull::Drop);
                if may_post && sh.post(li, row, always_keep, line) {
                    return true;
                }
                let mut st = sh.lock();
                st.lock_waits += 1;
                st
            }
            None => {
                // The output is behind too: waiting could take a time slice.
                sh.drop_lockless(LOCKLESS_CONTENDED, li, row);
                return false;
            }
        };
        if !sh.posted.is_empty() {
            // Lines handed over before this one (by this thread, too) come first.
            sh.drain_posted(&mut st);
        }
        // `append_now` already tried the last chunk; `fit` and `push` below do the rest
        // (a new chunk, a line that fits once posted lines are queued, waiting).
        st.levels[li].emitted += 1;
        let full = DropReason::full(always_keep);
        let mut deadline = None;
        let mut waited = false;
        loop {
            if st.closed {
                sh.count_drop(&mut st, li, row, DropReason::Shutdown, false);
                return false;
            }
            let fit = st.queue.fit(line.len(), always_keep);
            // Errors take the place of queued lines of lower levels rather than wait or
            // be dropped; by default (never wait) then of older ones of their own.
            if fit == Fit::Later
                && always_keep
                && sh.overflow == Overflow::Drop
                && sh.evict_for(&mut st, li, line.len())
            {
                continue;
            }
            let wait = match fit {
                Fit::Now => {
                    st.queue.push(li, row, line, always_keep);
                    sh.publish_queued(&st);
                    return sh.accepted(st, li);
                }
                Fit::Never => Wait::No,
                Fit::Later => match (sh.overflow, always_keep, sh.reserve_full) {
                    (Overflow::Block, _, _) | (Overflow::Drop, true, ReserveFull::Block) => {
                        Wait::Forever
                    }
                    (Overflow::Drop, false, _) | (Overflow::Drop, true, ReserveFull::Drop) => {
                        Wait::No
                    }
                    (Overflow::Drop, true, ReserveFull::WaitThenDrop(d)) => {
                        Wait::Until(*deadline.get_or_insert_with(|| Instant::now() + d))
                    }
                },
            };
            match wait {
                Wait::No => {
                    if st.count_drop(li, full, 1, true) {
                        sh.wake_writer(&mut st);
                    }
                    // The ledger's count is the caller's own (a thread-local add): made
                    // after the lock is free, so that the other callers do not wait on it.
                    drop(st);
                    sh.ledger.add(row, Col::writer(full.index()), 1);
                    return false;
                }
                Wait::Forever => {
                    if !std::mem::replace(&mut waited, true) {
                        st.space_waits += 1;
                    }
                    st.space_waiters += 1;
                    st = sh.space.wait(st).unwrap_or_else(PoisonError::into_inner);
                    st.space_waiters -= 1;
                }
                Wait::Until(until) => {
                    let now = Instant::now();
                    if now >= until {
                        if st.count_drop(li, full, 1, true) {
                            sh.wake_writer(&mut st);
                        }
                        drop(st);
                        sh.ledger.add(row, Col::writer(full.index()), 1);
                        return false;
                    }
                    if !std::mem::replace(&mut waited, true) {
                        st.space_waits += 1;
                    }
                    st.space_waiters += 1;
                    st = sh
                        .space
                        .wait_timeout(st, until - now)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                    st.space_waiters -= 1;
                }
            }
        }
    }

    /// Waits until every line queued before the call has left the queue (written, or
    /// dropped because the output failed) and pending drop reports were attempted, or
    /// until `timeout`. Returns whether that happened in time.
    ///
    /// # Examples
    ///
    /// ```
    /// use logpolicy::writer::{Output, Writer, WriterConfig};
    /// use std::time::Duration;
    /// use tracing_core::Level;
    ///
    /// let path = std::env::temp_dir().join(format!("writer-flush-{}.log", std::process::id()));
    /// let (writer, _guard) = Writer::new(WriterConfig::new(Output::File(path.clone())))?;
    /// writer.write_line(Level::INFO, false, b"a\n");
    /// assert!(writer.flush(Duration::from_secs(5)));
    /// assert_eq!(std::fs::read(&path)?, b"a\n");
    /// # std::fs::remove_file(path)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn flush(&self, timeout: Duration) -> bool {
        let sh = &*self.shared;
        let deadline = Instant::now().checked_add(timeout);
        let mut st = sh.lock_folded();
        let target = st.accepted_seq;
        let drops = st.drops_seq;
        loop {
            let lines_done = st.resolved_seq >= target;
            let reports_done = st.reported_seq >= drops || !st.healthy;
            if (lines_done && reports_done) || st.stop {
                return lines_done;
            }
            sh.wake_writer(&mut st);
            st.progress_waiters += 1;
            st = match deadline {
                None => sh.progress.wait(st).unwrap_or_else(PoisonError::into_inner),
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        st.progress_waiters -= 1;
                        return false;
                    }
                    sh.progress
                        .wait_timeout(st, deadline - now)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
            };
            st.progress_waiters -= 1;
        }
    }

    /// A consistent snapshot of the counters.
    ///
    /// # Examples
    ///
    /// ```
    /// use logpolicy::writer::{Output, Writer, WriterConfig};
    /// let (writer, _guard) = Writer::new(WriterConfig::new(Output::Stderr))?;
    /// let stats = writer.stats();
    /// assert_eq!(stats.emitted_total(), 0);
    /// assert!(stats.is_balanced());
    /// # Ok::<(), logpolicy::writer::WriterError>(())
    /// ```
    pub fn stats(&self) -> WriterStats {
        self.shared.lock_folded().snapshot()
    }

    /// The ledger this writer counts each line in, by its callsite (see
    /// [`crate::ledger`]): [`Ledger::sites`] reads it.
    pub fn ledger(&self) -> Ledger {
        self.shared.ledger.clone()
    }

    /// The format and service of the lines the writer writes itself.
    pub(crate) fn style(&self) -> &crate::format::Style {
        &self.shared.style
    }

    /// Replays `request` from `recorder` (see [`crate::recorder`]) at `now` (since the
    /// Unix epoch), paced: the window's lines in their order, between two lines of
    /// target `logpolicy` that say who asked and what the store still held. Returns when
    /// the last line was handed to the queue (at most [`REPLAY_BYTES_PER_SECOND`]).
    pub fn replay(
        &self,
        recorder: &crate::recorder::Recorder,
        request: &ReplayRequest,
        now: Duration,
    ) -> ReplayReport {
        PendingReplay::take(recorder, request.clone(), now).write(self)
    }
}

/// How long the guard waits, once its flush has timed out, for a writer thread blocked
/// in a write that waits for the reader (a kernel that cannot write without waiting, see
/// [`WriterGuard::finish`]) to count what it could not write and say its last words.
pub const STOP_GRACE: Duration = Duration::from_secs(1);

/// How long the guard waits for a writer thread that is not in a write that may wait
/// for the reader (it is only slow to run): past it, it is left behind as after
/// [`STOP_GRACE`].
const STOP_LIMIT: Duration = Duration::from_secs(30);

impl WriterGuard {
    /// A handle to the writer this guard owns.
    pub fn writer(&self) -> Writer {
        Writer {
            shared: Arc::clone(&self.shared),
        }
    }

    /// Flushes and stops the writer, as dropping the guard does, and returns the final
    /// counters: every line emitted so far is counted as written or dropped, exactly once
    /// (`emitted == written + dropped` per level), including what the flush could not
    /// deliver in [`WriterConfig::flush_timeout`] ([`DropReason::Shutdown`]).
    ///
    /// When lines were dropped and not yet reported in-band, the writer writes one last
    /// summary line with the counts per level and reason: to the output if it takes it
    /// at once, else to stderr, else nowhere but these counters; [`WriterStats::exit_report`]
    /// says which. Lines logged after this are counted as `Shutdown` drops in the
    /// writer's stats, and nowhere else.
    ///
    /// Takes the flush timeout plus the time the writer thread needs to see the stop:
    /// on a pipe it never blocks in a write (it asks the kernel not to wait), so that is
    /// at most 50 ms of its running time (on a loaded machine the guard waits for it to
    /// be scheduled, up to 30 s, so that what it writes is counted once). On a kernel
    /// older than Linux 4.14 it may still be blocked writing a batch to a paused reader
    /// after [`STOP_GRACE`]: that batch is then counted as `Shutdown`, although the
    /// reader may still get part of it (so does the ledger, by callsite; neither counts it
    /// again if the write returns later), and the last report goes to stderr from here.
    ///
    /// # Examples
    ///
    /// ```
    /// use logpolicy::writer::{DropReason, Output, Writer, WriterConfig};
    /// use tracing_core::Level;
    ///
    /// let path = std::env::temp_dir().join(format!("writer-finish-{}.log", std::process::id()));
    /// let config = WriterConfig::new(Output::File(path.clone())).capacity_bytes(4096);
    /// let (writer, guard) = Writer::new(config)?;
    /// writer.write_line(Level::INFO, false, b"kept\n");
    /// writer.write_line(Level::INFO, false, &[b'x'; 8192]); // can never fit
    /// let stats = guard.finish();
    /// assert_eq!(stats.written_total(), 1);
    /// assert_eq!(stats.dropped(DropReason::QueueFull), 1);
    /// assert_eq!(stats.emitted_total(), stats.written_total() + stats.dropped_total());
    /// // The drop was reported in-band before the writer stopped.
    /// assert!(std::fs::read_to_string(&path)?.contains("\"msg\":\"dropped events\""));
    /// # std::fs::remove_file(path)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn finish(mut self) -> WriterStats {
        self.shutdown()
    }

    fn shutdown(&mut self) -> WriterStats {
        let Some(thread) = self.thread.take() else {
            return self.shared.lock_folded().snapshot();
        };
        let (stats, exited) = stop(&self.shared, self.shared.flush_timeout);
        if exited {
            // The thread has said its last words and returns.
            let _ = thread.join();
        }
        stats
    }
}

impl Writer {
    /// Stops the writer as its guard does, flushing within `flush_timeout` instead of
    /// the configured one, without the guard (which another thread holds): for the
    /// termination flush (see `crate::sigterm`). Returns the final counters.
    #[cfg_attr(not(unix), allow(dead_code))]
    pub(crate) fn stop_within(&self, flush_timeout: Duration) -> WriterStats {
        stop(&self.shared, flush_timeout).0
    }
}

/// Closes the writer, waits up to `flush_timeout` for the queue to be written, tells the
/// thread to stop and waits for its last words (see [`WriterGuard::finish`]), or gives
/// up on a write that waits for the reader. Returns the final counters and whether the
/// thread has exited. A second call (the guard and the termination flush) waits for
/// the first one's outcome.
fn stop(sh: &Shared, flush_timeout: Duration) -> (WriterStats, bool) {
    let deadline = Instant::now().checked_add(flush_timeout);
    let mut st = sh.lock_folded();
    if std::mem::replace(&mut st.stopping, true) {
        // Stopping already, on another thread: its outcome, once it has one.
        let until = Instant::now() + flush_timeout + STOP_LIMIT;
        while !(st.exited || st.abandoned) {
            let now = Instant::now();
            if now >= until {
                break;
            }
            st = wait_progress(sh, st, (until - now).min(STOP_GRACE));
        }
        return (st.snapshot(), st.exited);
    }
    // Lines handed over before the close were queued by `lock_folded`; from now no
    // more are, and those being handed over now are counted as shutdown drops.
    st.closed = true;
    sh.closing.store(true, Ordering::SeqCst);
    while sh.posting.load(Ordering::SeqCst) > 0 {
        std::hint::spin_loop();
    }
    sh.drain_posted(&mut st);
    if st.space_waiters > 0 {
        sh.space.notify_all();
    }
    loop {
        st.fold(&sh.lockless_drops);
        if st.queue.queued_bytes() == 0 && !st.writer_busy && !st.report_due() {
            break;
        }
        sh.wake_writer(&mut st);
        let now = Instant::now();
        let left = match deadline {
            Some(d) if d > now => d - now,
            Some(_) => break,
            None => Duration::from_secs(3600),
        };
        st = wait_progress(sh, st, left);
    }
    // Stop: the thread counts what is left, says its last words and exits. It sees
    // the stop within 50 ms unless a write waits for the reader in the kernel; a
    // thread that is only slow to be scheduled (a loaded machine) is waited for, so
    // what it writes is counted once, and so is one that is out of its write and
    // counting what the output took.
    st.stop = true;
    sh.stop_flag.store(true, Ordering::Release);
    sh.work.notify_all();
    let started = Instant::now();
    while !st.exited {
        let waited = started.elapsed();
        let in_kernel = sh.in_unbounded_write.load(Ordering::Acquire);
        let bound = if in_kernel { STOP_GRACE } else { STOP_LIMIT };
        if waited >= bound {
            match sh.batch_phase.compare_exchange(
                state::BATCH_WRITING,
                state::BATCH_ABANDONED,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(state::BATCH_COUNTING) => {}
                Err(_) => break,
            }
        }
        let left = bound.saturating_sub(waited).max(Duration::from_millis(10));
        st = wait_progress(sh, st, left.min(STOP_GRACE));
    }
    if st.exited {
        return (st.snapshot(), true);
    }
    // The thread is blocked in a write the kernel could not make non-blocking (or has
    // not run for `STOP_LIMIT`): count what it holds as `Shutdown`, in the counters and
    // in the ledger (the batch it writes by the rows it left, or, if it left none, by
    // itself should it ever get out of the write), and leave it to end with the
    // process. Nothing of that batch is counted again.
    let shutdown = Col::writer(DropReason::Shutdown.index());
    let lines = st.queue.abandon(|row, n| sh.ledger.add(row, shutdown, n));
    for (row, n) in std::mem::take(&mut st.inflight_rows) {
        sh.ledger.add(row, shutdown, n);
    }
    sh.publish_queued(&st);
    for (li, n) in lines.iter().enumerate() {
        st.count_drop(li, DropReason::Shutdown, *n, true);
    }
    st.resolved_seq += lines.iter().sum::<u64>();
    st.abandoned = true;
    let counts = std::mem::take(&mut st.unreported);
    if summary::total(&counts) > 0 {
        let mut line = Vec::new();
        summary::write_summary_line(&mut line, &sh.style, sh.clock.now(), &counts);
        let to_stderr = !sh.output_is_stderr && output::write_stderr_nowait(&line, sh.plain_writes);
        st.exit_report = if to_stderr {
            ExitReport::Stderr
        } else {
            st.unreported = counts;
            ExitReport::CountersOnly
        };
    }
    if st.progress_waiters > 0 {
        sh.progress.notify_all();
    }
    (st.snapshot(), false)
}

/// Waits on `progress` for at most `left`.
fn wait_progress<'a>(
    sh: &'a Shared,
    mut st: std::sync::MutexGuard<'a, state::State>,
    left: Duration,
) -> std::sync::MutexGuard<'a, state::State> {
    st.progress_waiters += 1;
    st = sh
        .progress
        .wait_timeout(st, left)
        .unwrap_or_else(PoisonError::into_inner)
        .0;
    st.progress_waiters -= 1;
    st
}

impl Drop for WriterGuard {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl LineSink for Writer {
    #[inline]
    fn write_line(&self, level: &Level, always_keep: bool, line: &[u8]) {
        Writer::write_line(self, *level, always_keep, line);
    }

    #[inline]
    fn write_row_line(&self, row: RowId, level: &Level, always_keep: bool, line: &[u8]) {
        Writer::write_row_line(self, row, *level, always_keep, line);
    }

    fn ledger(&self) -> Option<Ledger> {
        Some(self.shared.ledger.clone())
    }
}

/// Chains a panic hook that, after the previous hook ran, waits up to
/// [`PANIC_FLUSH_TIMEOUT`] for what is queued to be written, so the lines that led to a
/// panic are not lost if the process then aborts or exits.
///
/// # Examples
///
/// ```
/// use logpolicy::writer::{install_panic_hook, Output, Writer, WriterConfig};
/// let (writer, _guard) = Writer::new(WriterConfig::new(Output::Stderr))?;
/// install_panic_hook(writer);
/// # let _ = std::panic::take_hook();
/// # Ok::<(), logpolicy::writer::WriterError>(())
/// ```
pub fn install_panic_hook(writer: Writer) {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        previous(info);
        writer.flush(PANIC_FLUSH_TIMEOUT);
    }));
}
