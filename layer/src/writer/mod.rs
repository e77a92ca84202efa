//! The non-blocking, byte-bounded writer: formatted lines in, batched writes out.
//!
//! A [`Writer`] copies each line (already formatted, `\n` included) on the calling thread
//! into a queue bounded in **bytes**, and one background thread, `logpolicy-writer`,
//! writes the queue out in large batches. The caller never touches the output; in the
//! default [`Overflow::Drop`] mode it never waits for the reader either.
//!
//! # Design
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
//! line waits for the preempted holder instead: that wait is the scheduler's, and behind
//! a reader that keeps up no line is lost to it (the reader-scenarios benchmark lost 3
//! lines in 1.2 million that way at 200,000 lines/s before). `alwaysKeep` lines, and
//! every line in [`Overflow::Block`] mode, wait for the lock.
//!
//! # Memory bound
//!
//! Queued bytes (waiting plus being written) never exceed
//! [`WriterConfig::capacity_bytes`]; an `alwaysKeep` line counts 12 bytes more than its
//! length, for the record of where it sits (what lets it stay when the lines around it
//! are evicted). Chunks are allocated lazily, reused forever, and never grow, and at most
//! `capacity / chunk + 4` of them ever exist (a line that would need another waits as if
//! the queue were full; with lines much shorter than a chunk that never happens before
//! the byte bound): memory is the capacity plus four chunks (256 KiB at most), plus the
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
//! | [`Overflow::Drop`] (default) | dropped at once, [`DropReason::QueueFull`] (or [`DropReason::Contended`] if the lock is not free within [`WriterConfig::lock_spin`]) | the queued lines below `alwaysKeep` that are not being written are dropped to make room ([`DropReason::Evicted`]); if that is not enough, as [`ReserveFull`] says: by default wait up to 100 ms, then [`DropReason::ReserveFull`] |
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
//!   …). The whole batch is counted, even if a prefix of it reached the output. The writer
//!   keeps serving: later lines are still taken, tried and counted.
//! - [`DropReason::Shutdown`]: the line was still queued when the guard's flush timed out,
//!   or was logged after the guard was dropped.
//! - [`DropReason::Contended`]: a line below `alwaysKeep` (drop mode) could not take the
//!   queue's lock within [`WriterConfig::lock_spin`] because its holder was descheduled,
//!   while the queue held a quarter of its share or more. It has its own
//!   reason, not `QueueFull`, so that scheduling trouble is not mistaken for a slow reader.
//! - [`DropReason::Evicted`]: a line below `alwaysKeep` was queued, then dropped to make
//!   room for an `alwaysKeep` line that found the whole queue full (drop mode). Every
//!   such line still waiting (not in the batch being written, and not part of a line
//!   longer than a chunk) goes at once, and the `alwaysKeep` lines that remain are packed
//!   together in order; until the writer next gets a batch out, new lines below
//!   `alwaysKeep` are refused as `QueueFull`, since they could only be evicted in turn.
//!   So behind a stalled reader the queue fills with errors and warnings, up to the
//!   capacity less the batch in flight, instead of losing them after the reserve.
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
//! # Shutdown
//!
//! Dropping the [`WriterGuard`] stops accepting lines, waits up to
//! [`WriterConfig::flush_timeout`] for the queue (and pending reports) to be written, then
//! stops the thread. If the time runs out, whatever is still queued, including a batch the
//! thread is blocked writing, is counted as [`DropReason::Shutdown`] and the thread is left
//! to end with the process (it may be blocked in `write` on a paused reader; it writes and
//! counts nothing more after that). [`install_panic_hook`] flushes, within a second, what
//! is queued when a thread panics.
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
mod stats;
mod summary;

pub use config::{
    Output, Overflow, ReserveFull, Rotation, WriterConfig, WriterError, LOCK_SPIN, MAX_LOCK_SPIN,
    MAX_RESERVE_PERCENT, MAX_ROTATION_KEEP, MIN_CAPACITY_BYTES, MIN_ROTATION_BYTES,
};
pub use stats::{
    level_index, DropCounts, DropReason, LevelStats, WriterStats, LEVELS, LEVEL_ORDER, REASONS,
};

use std::io::ErrorKind;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, TryLockError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tracing_core::Level;

use crate::clock::Clock;
use queue::{clear_chunks, fresh_chunk, Fit, Queue};
use summary::Unreported;

/// How long the panic hook waits for queued lines to be written.
pub const PANIC_FLUSH_TIMEOUT: Duration = Duration::from_secs(1);

/// The name of the background thread.
pub const THREAD_NAME: &str = "logpolicy-writer";

/// How often an idle writer thread looks for drops counted without the lock, so that they
/// are reported even if nothing else is logged.
const IDLE_TICK: Duration = Duration::from_secs(1);

/// After a batch, the writer thread keeps looking for new lines every nap for up to
/// `LINGER` before it sleeps until woken. While it does, callers never wake it. A nap
/// lasts as long as callers took, at the last batch's pace, to fill `1 / NAP_FILL_DIVISOR`
/// of the queue, between `NAP_MIN` and `NAP_MAX`: each nap costs two context switches,
/// so a steady flow is written in fewer, larger batches, and a fast one never waits
/// long enough to fill the queue.
const NAP_MIN: Duration = Duration::from_millis(1);
const NAP_MAX: Duration = Duration::from_millis(4);
const NAP_FILL_DIVISOR: u64 = 16;
const LINGER: Duration = Duration::from_millis(20);

/// How long to nap before looking for lines again, when `bytes` were queued in `elapsed`
/// (the last batch) and the queue holds `capacity` bytes.
fn nap_for(bytes: usize, elapsed: Duration, capacity: usize) -> Duration {
    let target = capacity as u64 / NAP_FILL_DIVISOR;
    if bytes == 0 {
        return NAP_MAX;
    }
    let nanos = u128::from(target).saturating_mul(elapsed.as_nanos()) / bytes as u128;
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX)).clamp(NAP_MIN, NAP_MAX)
}

/// The drop reasons counted without the lock, and their index in `Shared::lockless_drops`.
const LOCKLESS_REASONS: [DropReason; 2] = [DropReason::QueueFull, DropReason::Contended];
const LOCKLESS_QUEUE_FULL: usize = 0;
const LOCKLESS_CONTENDED: usize = 1;
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

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    /// Wakes the writer thread: lines pending, a report due, or stop.
    work: Condvar,
    /// Wakes callers waiting for queue space.
    space: Condvar,
    /// Wakes `flush` and the guard after each batch.
    progress: Condvar,
    /// Set when the thread must give up waiting for a non-blocking output.
    stop_flag: AtomicBool,
    /// Queued bytes, mirrored from the queue under the lock, read without it.
    queued_hint: AtomicUsize,
    /// Whether the queue refuses lines below `alwaysKeep` after an eviction (see
    /// [`Queue::evict_below_keep`]), mirrored under the lock, read without it.
    evicting: AtomicBool,
    /// Lines below `alwaysKeep` refused without taking the lock (drop mode: queue seen
    /// full, or lock not free within [`WriterConfig::lock_spin`]), per [`LOCKLESS_REASONS`] and level;
    /// folded into the counters under the lock by `State::fold`.
    lockless_drops: [[AtomicU64; LEVELS]; 2],
    normal_limit: usize,
    overflow: Overflow,
    reserve_full: ReserveFull,
    flush_timeout: Duration,
    lock_spin: Duration,
    clock: Arc<dyn Clock>,
}

/// Counters of one level, `dropped` indexed by [`DropReason::ALL`] order.
#[derive(Debug, Clone, Copy, Default)]
struct LevelCounters {
    emitted: u64,
    accepted: u64,
    written: u64,
    dropped: [u64; REASONS],
}

#[derive(Debug)]
struct State {
    queue: Queue,
    levels: [LevelCounters; LEVELS],
    /// The values of `Shared::lockless_drops` already folded into the counters.
    folded: [[u64; LEVELS]; 2],
    /// Drops not yet reported in-band, `[reason][level]`.
    unreported: Unreported,
    /// Reportable drops so far; `reported_seq` is the value covered by the last finished
    /// report attempt.
    drops_seq: u64,
    reported_seq: u64,
    /// Lines accepted so far, and lines that have left the queue (written or dropped).
    accepted_seq: u64,
    resolved_seq: u64,
    bytes_written: u64,
    write_syscalls: u64,
    io_errors: u64,
    last_io_error: Option<ErrorKind>,
    rotations: u64,
    summary_lines: u64,
    /// The last write succeeded (reports are only written on their own when it did).
    healthy: bool,
    /// The writer thread waits on `work`.
    writer_idle: bool,
    /// The writer thread is writing a batch outside the lock.
    writer_busy: bool,
    space_waiters: usize,
    progress_waiters: usize,
    /// The guard was dropped: no more lines are accepted.
    closed: bool,
    /// The thread must exit at its next look at the state.
    stop: bool,
    /// The guard gave up on the queue and counted it as `Shutdown`.
    abandoned: bool,
}

impl State {
    /// Counts `n` dropped lines of level `li`; reportable drops also go to the next
    /// in-band report. Returns whether the writer thread should be woken for a report.
    fn count_drop(&mut self, li: usize, reason: DropReason, n: u64, reportable: bool) -> bool {
        self.levels[li].dropped[reason.index()] += n;
        if !reportable || n == 0 {
            return false;
        }
        self.unreported[reason.index()][li] += n;
        self.drops_seq += n;
        self.healthy && self.writer_idle
    }

    /// Moves the lock-free drop counts into the counters (each such drop is one emitted
    /// and one dropped line, so the balance holds at every snapshot). Returns whether the
    /// writer thread should be woken for a report.
    fn fold(&mut self, lockless: &[[AtomicU64; LEVELS]; 2]) -> bool {
        let mut wake = false;
        for (ri, reason) in LOCKLESS_REASONS.iter().enumerate() {
            for (li, a) in lockless[ri].iter().enumerate() {
                let now = a.load(Ordering::Acquire);
                let n = now - self.folded[ri][li];
                if n > 0 {
                    self.folded[ri][li] = now;
                    self.levels[li].emitted += n;
                    wake |= self.count_drop(li, *reason, n, true);
                }
            }
        }
        wake
    }

    fn report_due(&self) -> bool {
        self.healthy && summary::total(&self.unreported) > 0
    }

    fn snapshot(&self) -> WriterStats {
        let queued = self.queue.queued_lines();
        let mut levels = [LevelStats::default(); LEVELS];
        for (li, out) in levels.iter_mut().enumerate() {
            let c = &self.levels[li];
            *out = LevelStats {
                emitted: c.emitted,
                accepted: c.accepted,
                written: c.written,
                dropped: DropCounts {
                    by_reason: c.dropped,
                },
                queued: queued[li],
            };
        }
        WriterStats {
            levels,
            bytes_written: self.bytes_written,
            queue_bytes: self.queue.queued_bytes(),
            peak_queue_bytes: self.queue.peak_bytes(),
            write_syscalls: self.write_syscalls,
            rotations: self.rotations,
            io_errors: self.io_errors,
            last_io_error: self.last_io_error,
            summary_lines: self.summary_lines,
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // No code panics while holding the lock; if some did, the counters are still
        // consistent enough to keep logging.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The lock if it can be had within `spin` (busy-waiting, never sleeping), else
    /// `None`.
    fn lock_within(&self, spin: Duration) -> Option<MutexGuard<'_, State>> {
        let mut started: Option<Instant> = None;
        loop {
            match self.state.try_lock() {
                Ok(st) => return Some(st),
                Err(TryLockError::Poisoned(p)) => return Some(p.into_inner()),
                Err(TryLockError::WouldBlock) => {}
            }
            let t0 = *started.get_or_insert_with(Instant::now);
            if t0.elapsed() >= spin {
                return None;
            }
            for _ in 0..32 {
                std::hint::spin_loop();
            }
        }
    }

    /// The lock, with the lock-free drops folded in.
    fn lock_folded(&self) -> MutexGuard<'_, State> {
        let mut st = self.lock();
        if st.fold(&self.lockless_drops) {
            self.wake_writer(&mut st);
        }
        st
    }

    /// Evicts the pending lines below `alwaysKeep` (see [`Queue::evict_below_keep`],
    /// which also refuses further ones until the writer gets a batch out) and counts
    /// them. Returns whether anything was evicted.
    fn evict(&self, st: &mut State) -> bool {
        let evicted = st.queue.evict_below_keep();
        let total: u64 = evicted.iter().sum();
        if total == 0 {
            return false;
        }
        let mut wake = false;
        for (li, n) in evicted.into_iter().enumerate() {
            wake |= st.count_drop(li, DropReason::Evicted, n, true);
        }
        st.resolved_seq += total;
        self.publish_queued(st);
        if wake {
            self.wake_writer(st);
        }
        true
    }

    fn publish_queued(&self, st: &State) {
        self.queued_hint
            .store(st.queue.queued_bytes(), Ordering::Release);
        self.evicting
            .store(st.queue.refusing_below_keep(), Ordering::Release);
    }

    /// Counts a line of level `li` just queued, unlocks, and wakes the writer if it
    /// waits: after unlocking, so the syscall is not made under the lock (the writer
    /// rechecks the queue under the lock; no wakeup is lost). Returns `true`.
    #[inline]
    fn accepted(&self, mut st: MutexGuard<'_, State>, li: usize) -> bool {
        st.levels[li].accepted += 1;
        st.accepted_seq += 1;
        let wake = std::mem::replace(&mut st.writer_idle, false);
        drop(st);
        if wake {
            self.work.notify_one();
        }
        true
    }

    fn wake_writer(&self, st: &mut State) {
        if st.writer_idle {
            st.writer_idle = false;
            self.work.notify_one();
        }
    }
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
        let normal_limit = config.normal_limit_bytes();
        let WriterConfig {
            output,
            capacity_bytes,
            overflow,
            reserve_full,
            flush_timeout,
            lock_spin,
            clock,
            ..
        } = config;
        let out = output::open(output)?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                queue: Queue::new(capacity_bytes, normal_limit),
                levels: [LevelCounters::default(); LEVELS],
                folded: [[0; LEVELS]; 2],
                unreported: [[0; LEVELS]; REASONS],
                drops_seq: 0,
                reported_seq: 0,
                accepted_seq: 0,
                resolved_seq: 0,
                bytes_written: 0,
                write_syscalls: 0,
                rotations: 0,
                io_errors: 0,
                last_io_error: None,
                summary_lines: 0,
                healthy: true,
                writer_idle: false,
                writer_busy: false,
                space_waiters: 0,
                progress_waiters: 0,
                closed: false,
                stop: false,
                abandoned: false,
            }),
            work: Condvar::new(),
            space: Condvar::new(),
            progress: Condvar::new(),
            stop_flag: AtomicBool::new(false),
            queued_hint: AtomicUsize::new(0),
            evicting: AtomicBool::new(false),
            lockless_drops: Default::default(),
            normal_limit,
            overflow,
            reserve_full,
            flush_timeout,
            lock_spin,
            clock,
        });
        let for_thread = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name(THREAD_NAME.to_owned())
            .spawn(move || run(&for_thread, out))
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
            sh.lockless_drops[LOCKLESS_QUEUE_FULL][li].fetch_add(1, Ordering::AcqRel);
            return false;
        }
        let mut st = if never_wait {
            match sh.lock_within(sh.lock_spin) {
                Some(st) => st,
                // The holder was preempted. While the output keeps up (the queue holds
                // less than a quarter of its share), the line is no burden: wait for the
                // holder to run again rather than lose it.
                None if sh.queued_hint.load(Ordering::Acquire) < sh.normal_limit / 4 => sh.lock(),
                None => {
                    // The output is behind too: waiting could take a time slice.
                    sh.lockless_drops[LOCKLESS_CONTENDED][li].fetch_add(1, Ordering::AcqRel);
                    return false;
                }
            }
        } else {
            sh.lock()
        };
        st.levels[li].emitted += 1;
        if !st.closed && st.queue.try_append(li, line, always_keep) {
            sh.publish_queued(&st);
            return sh.accepted(st, li);
        }
        let full = if always_keep {
            DropReason::ReserveFull
        } else {
            DropReason::QueueFull
        };
        let mut deadline = None;
        let mut evicted = false;
        loop {
            if st.closed {
                st.count_drop(li, DropReason::Shutdown, 1, false);
                return false;
            }
            let fit = st.queue.fit(line.len(), always_keep);
            if fit == Fit::Later && always_keep && sh.overflow == Overflow::Drop && !evicted {
                // Errors take the place of queued infos rather than wait or be dropped.
                evicted = true;
                if sh.evict(&mut st) {
                    continue;
                }
            }
            let wait = match fit {
                Fit::Now => {
                    st.queue.push(li, line, always_keep);
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
                    return false;
                }
                Wait::Forever => {
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
                        return false;
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
}

impl WriterGuard {
    /// A handle to the writer this guard owns.
    pub fn writer(&self) -> Writer {
        Writer {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl Drop for WriterGuard {
    fn drop(&mut self) {
        let sh = &*self.shared;
        let deadline = Instant::now().checked_add(sh.flush_timeout);
        let mut st = sh.lock_folded();
        st.closed = true;
        if st.space_waiters > 0 {
            sh.space.notify_all();
        }
        let mut drained = false;
        loop {
            st.fold(&sh.lockless_drops);
            if st.queue.queued_bytes() == 0 && !st.writer_busy && !st.report_due() {
                drained = true;
                break;
            }
            sh.wake_writer(&mut st);
            let now = Instant::now();
            let left = match deadline {
                Some(d) if d > now => d - now,
                Some(_) => break,
                None => Duration::from_secs(3600),
            };
            st.progress_waiters += 1;
            st = sh
                .progress
                .wait_timeout(st, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            st.progress_waiters -= 1;
        }
        if !drained {
            let lines = st.queue.abandon();
            sh.publish_queued(&st);
            for (li, n) in lines.iter().enumerate() {
                st.count_drop(li, DropReason::Shutdown, *n, false);
            }
            st.resolved_seq += lines.iter().sum::<u64>();
            st.abandoned = true;
        }
        st.stop = true;
        sh.stop_flag.store(true, Ordering::Release);
        sh.work.notify_all();
        if st.progress_waiters > 0 {
            sh.progress.notify_all();
        }
        drop(st);
        if let Some(thread) = self.thread.take() {
            if drained {
                // The thread is idle (nothing queued, nothing being written): it sees
                // `stop` at once.
                let _ = thread.join();
            }
            // Otherwise it may be blocked in `write` on a paused reader: leave it.
        }
    }
}

/// Naps, `nap` at a time, until lines are queued, the thread must stop, or [`LINGER`]
/// has passed.
fn linger(shared: &Shared, nap: Duration) {
    let until = Instant::now() + LINGER;
    while shared.queued_hint.load(Ordering::Acquire) == 0
        && !shared.stop_flag.load(Ordering::Acquire)
        && Instant::now() < until
    {
        std::thread::sleep(nap);
    }
}

/// Allocates, outside the lock, the spare chunks the queue wants, and hands them in.
fn top_up_spares<'a>(shared: &'a Shared, st: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
    let want = st.queue.spare_wanted();
    if want == 0 {
        return st;
    }
    let chunk_len = st.queue.chunk_len();
    drop(st);
    let mut spare: Vec<queue::Chunk> = (0..want).map(|_| fresh_chunk(chunk_len)).collect();
    let mut st = shared.lock();
    st.queue.add_spare(&mut spare);
    st
}

/// The background thread. It holds the lock only to swap the pending chunks out, to
/// give them back and to update counters; writing, emptying chunks, allocating new
/// ones and waking waiters all happen outside it.
fn run(shared: &Shared, mut out: output::Sink) {
    let mut st = top_up_spares(shared, shared.lock());
    let mut batch: Vec<queue::Chunk> = Vec::with_capacity(st.queue.max_chunks());
    let mut head: Vec<u8> = Vec::with_capacity(512);
    let capacity = st.queue.capacity();
    let mut nap = NAP_MIN;
    let mut last_take = Instant::now();
    loop {
        let mut lingered = false;
        loop {
            if st.stop {
                return;
            }
            st.fold(&shared.lockless_drops);
            if st.queue.pending_bytes() > 0 || st.report_due() {
                break;
            }
            if !lingered {
                // Look again every `NAP` for a while, without the lock, before asking
                // callers to wake us: a wake-up is a syscall on the caller's thread, and
                // the woken thread often preempts the caller right there, in the middle
                // of its log call, for as long as the scheduler likes.
                drop(st);
                linger(shared, nap);
                lingered = true;
                st = shared.lock();
                continue;
            }
            st.writer_idle = true;
            st = shared
                .work
                .wait_timeout(st, IDLE_TICK)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            st.writer_idle = false;
        }
        let report = if summary::total(&st.unreported) > 0 {
            Some(std::mem::take(&mut st.unreported))
        } else {
            None
        };
        let report_seq = st.drops_seq;
        let taken = st.queue.take(&mut batch);
        let now = Instant::now();
        nap = nap_for(taken, now - last_take, capacity);
        last_take = now;
        st.writer_busy = true;
        drop(st);

        head.clear();
        if let Some(counts) = &report {
            summary::write_summary_line(&mut head, shared.clock.now(), counts);
        }
        let outcome = output::write_batch(&mut out, &head, &batch, &shared.stop_flag);
        clear_chunks(&mut batch);

        st = shared.lock();
        st.writer_busy = false;
        if st.abandoned {
            // The guard counted this batch as `Shutdown`; count nothing more.
            return;
        }
        st.write_syscalls += outcome.syscalls;
        st.rotations += outcome.rotations;
        if let Some(e) = &outcome.rotation_error {
            // The batch went on into the file at hand: nothing is lost, the error counts.
            st.io_errors += 1;
            st.last_io_error = Some(e.kind());
        }
        st.bytes_written += outcome.bytes;
        if let Some(counts) = report {
            if outcome.bytes >= head.len() as u64 {
                st.summary_lines += 1;
            } else {
                for (slot, n) in st
                    .unreported
                    .iter_mut()
                    .flatten()
                    .zip(counts.iter().flatten())
                {
                    *slot += n;
                }
            }
        }
        st.reported_seq = report_seq;
        let lines = st
            .queue
            .finish(&mut batch, outcome.error.is_none() && outcome.bytes > 0);
        shared.publish_queued(&st);
        st.resolved_seq += lines.iter().sum::<u64>();
        match outcome.error {
            None => {
                for (c, n) in st.levels.iter_mut().zip(lines) {
                    c.written += n;
                }
                st.healthy = true;
            }
            Some(e) => {
                st.io_errors += 1;
                st.last_io_error = Some(e.kind());
                st.healthy = false;
                let reportable = !st.closed;
                for (li, n) in lines.iter().enumerate() {
                    st.count_drop(li, DropReason::OutputClosed, *n, reportable);
                }
            }
        }
        let notify_space = st.space_waiters > 0;
        let notify_progress = st.progress_waiters > 0;
        if notify_space || notify_progress || st.queue.spare_wanted() > 0 {
            drop(st);
            if notify_space {
                shared.space.notify_all();
            }
            if notify_progress {
                shared.progress.notify_all();
            }
            st = top_up_spares(shared, shared.lock());
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nap_fills_a_sixteenth_of_the_queue_between_one_and_four_ms() {
        let mib = 1024 * 1024;
        // 4 MiB queue: a sixteenth is 256 KiB. 64 KiB per ms fills it in 4 ms.
        assert_eq!(
            nap_for(64 * 1024, Duration::from_millis(1), 4 * mib),
            Duration::from_millis(4)
        );
        assert_eq!(
            nap_for(128 * 1024, Duration::from_millis(1), 4 * mib),
            Duration::from_millis(2)
        );
        // Faster than 256 KiB per ms: never below 1 ms; slower: never above 4 ms.
        assert_eq!(nap_for(mib, Duration::from_millis(1), 4 * mib), NAP_MIN);
        assert_eq!(nap_for(100, Duration::from_secs(5), 4 * mib), NAP_MAX);
        assert_eq!(nap_for(0, Duration::ZERO, 4 * mib), NAP_MAX);
        assert_eq!(nap_for(1, Duration::MAX, usize::MAX), NAP_MAX);
    }
}
