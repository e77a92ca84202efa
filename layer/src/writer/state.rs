//! The state a writer's handles and its thread share, behind one mutex, and the few
//! values mirrored out of it to be read without the lock.

use std::io::ErrorKind;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::{Duration, Instant};

use super::config::{Overflow, ReserveFull, WriterConfig, WriterError};
use super::output::{self, Destination};
use super::queue::{Fit, Queue};
use super::stats::{DropCounts, DropReason, ExitReport, LevelStats, WriterStats, REASONS};
use super::summary::{self, Unreported};
use crate::clock::Clock;
use crate::format::Style;
use crate::ledger::{Col, Ledger, RowId};
use crate::level::LEVELS;

/// The drop reasons counted without the lock, and their index in `Shared::lockless_drops`.
pub(super) const LOCKLESS_REASONS: [DropReason; 2] = [DropReason::QueueFull, DropReason::Contended];
pub(super) const LOCKLESS_QUEUE_FULL: usize = 0;
pub(super) const LOCKLESS_CONTENDED: usize = 1;

/// Where the writer thread is with the batch it took (`Shared::batch_phase`): none
/// taken, writing it, counting what the output took of it, or given up on by the guard
/// (which counted it as `Shutdown`: nothing of it is counted again).
pub(super) const BATCH_IDLE: u8 = 0;
pub(super) const BATCH_WRITING: u8 = 1;
pub(super) const BATCH_COUNTING: u8 = 2;
pub(super) const BATCH_ABANDONED: u8 = 3;

/// The most lines handed over without the lock at once (see [`Shared::post`]).
pub(super) const POST_SLOTS: usize = 64;
/// The longest line handed over without the lock, in bytes; a longer one waits for it.
pub(super) const POST_MAX_LINE: usize = 8 * 1024;

/// A line a caller handed over without the lock, because a thread the scheduler had
/// preempted held it (see [`Shared::post`]).
#[derive(Debug)]
pub(super) struct Posted {
    li: u8,
    row: RowId,
    always_keep: bool,
    line: Box<[u8]>,
}

/// What the handles and the writer thread share: the state behind the lock, the
/// condition variables, and the few values read without the lock.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) state: Mutex<State>,
    /// Wakes the writer thread: lines pending, a report due, or stop.
    pub(super) work: Condvar,
    /// Wakes callers waiting for queue space.
    pub(super) space: Condvar,
    /// Wakes `flush` and the guard after each batch.
    pub(super) progress: Condvar,
    /// Set when the thread must give up waiting for a non-blocking output.
    pub(super) stop_flag: AtomicBool,
    /// The thread is in a write that may wait for the reader without end (a kernel
    /// that cannot write without waiting): only then does the guard leave it behind
    /// after [`STOP_GRACE`](super::STOP_GRACE).
    pub(super) in_unbounded_write: AtomicBool,
    /// Where the writer thread is with its batch ([`BATCH_IDLE`] ...): the guard gives a
    /// batch up only while it is being written, and the thread counts it only if the
    /// guard has not (one compare-and-swap decides which).
    pub(super) batch_phase: AtomicU8,
    /// Queued bytes, mirrored from the queue under the lock, read without it.
    pub(super) queued_hint: AtomicUsize,
    /// Whether the queue refuses lines below `alwaysKeep` after an eviction (see
    /// [`Queue::evict_below`]), mirrored under the lock, read without it.
    pub(super) evicting: AtomicBool,
    /// Lines below `alwaysKeep` refused without taking the lock (drop mode: queue seen
    /// full, or lock not free within [`WriterConfig::lock_spin`]), per [`LOCKLESS_REASONS`] and level;
    /// folded into the counters under the lock by `State::fold`.
    pub(super) lockless_drops: [[AtomicU64; LEVELS]; 2],
    pub(super) normal_limit: usize,
    pub(super) overflow: Overflow,
    pub(super) reserve_full: ReserveFull,
    pub(super) flush_timeout: Duration,
    pub(super) lock_spin: Duration,
    pub(super) clock: Arc<dyn Clock>,
    /// The output is stderr: the last report has nowhere else to go.
    pub(super) output_is_stderr: bool,
    /// [`WriterConfig::plain_writes`]: so are the last words written to stderr.
    pub(super) plain_writes: bool,
    /// Lines handed over without the lock, queued by the next holder of the lock (boxed:
    /// its cache-padded fields would otherwise change how the hot fields here share
    /// cache lines).
    pub(super) posted: Box<crossbeam_queue::ArrayQueue<Posted>>,
    /// Callers between looking at `closing` and posting.
    pub(super) posting: AtomicUsize,
    /// The guard is closing the writer: nothing more is posted.
    pub(super) closing: AtomicBool,
    /// The format and service of the writer's own lines.
    pub(super) style: Style,
    /// Where each line is counted, by its callsite's row.
    pub(super) ledger: Ledger,
}

/// Counters of one level, `dropped` indexed by [`DropReason::ALL`] order.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct LevelCounters {
    pub(super) emitted: u64,
    pub(super) accepted: u64,
    pub(super) written: u64,
    pub(super) dropped: [u64; REASONS],
}

#[derive(Debug)]
pub(super) struct State {
    pub(super) queue: Queue,
    pub(super) levels: [LevelCounters; LEVELS],
    /// The values of `Shared::lockless_drops` already folded into the counters.
    pub(super) folded: [[u64; LEVELS]; 2],
    /// Drops not yet reported in-band, `[reason][level]`.
    pub(super) unreported: Unreported,
    /// Reportable drops so far; `reported_seq` is the value covered by the last finished
    /// report attempt.
    pub(super) drops_seq: u64,
    pub(super) reported_seq: u64,
    /// Lines accepted so far, and lines that have left the queue (written or dropped).
    pub(super) accepted_seq: u64,
    pub(super) resolved_seq: u64,
    pub(super) bytes_written: u64,
    pub(super) write_syscalls: u64,
    pub(super) io_errors: u64,
    pub(super) last_io_error: Option<ErrorKind>,
    pub(super) rotations: u64,
    pub(super) summary_lines: u64,
    /// The last write succeeded (reports are only written on their own when it did).
    pub(super) healthy: bool,
    /// The writer thread waits on `work`.
    pub(super) writer_idle: bool,
    /// The writer thread is writing a batch outside the lock.
    pub(super) writer_busy: bool,
    pub(super) space_waiters: usize,
    /// Calls that waited for space (see `WriterStats::space_waits`).
    pub(super) space_waits: u64,
    /// Calls that slept for the lock (see `WriterStats::lock_waits`).
    pub(super) lock_waits: u64,
    /// Lines handed over without the lock (see `WriterStats::lock_handoffs`).
    pub(super) lock_handoffs: u64,
    pub(super) progress_waiters: usize,
    /// The guard was dropped: no more lines are accepted.
    pub(super) closed: bool,
    /// The thread must exit at its next look at the state.
    pub(super) stop: bool,
    /// The guard gave up on the queue and counted it as `Shutdown`.
    pub(super) abandoned: bool,
    /// The thread has counted everything and said its last words: nothing changes after.
    pub(super) exited: bool,
    /// Where the last report went.
    pub(super) exit_report: ExitReport,
    /// The lines of the batch being written, per ledger row, when the write may wait for
    /// the reader without end: what the guard counts as `Shutdown` in the ledger if it
    /// gives up on the write.
    pub(super) inflight_rows: Vec<(RowId, u64)>,
    /// A guard (or the termination flush) is stopping the writer.
    pub(super) stopping: bool,
}

impl State {
    /// Counts a line of level `li` just queued.
    #[inline]
    pub(super) fn count_accepted(&mut self, li: usize) {
        self.levels[li].accepted += 1;
        self.accepted_seq += 1;
    }

    /// Counts `n` dropped lines of level `li`; reportable drops also go to the next
    /// in-band report. Returns whether the writer thread should be woken for a report.
    pub(super) fn count_drop(
        &mut self,
        li: usize,
        reason: DropReason,
        n: u64,
        reportable: bool,
    ) -> bool {
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
    pub(super) fn fold(&mut self, lockless: &[[AtomicU64; LEVELS]; 2]) -> bool {
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

    pub(super) fn report_due(&self) -> bool {
        self.healthy && summary::total(&self.unreported) > 0
    }

    pub(super) fn snapshot(&self) -> WriterStats {
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
            exit_report: self.exit_report,
            space_waits: self.space_waits,
            lock_waits: self.lock_waits,
            lock_handoffs: self.lock_handoffs,
        }
    }
}

impl Shared {
    /// Opens the output of a validated `config`, and the state of a writer that has
    /// queued nothing yet.
    pub(super) fn open(config: WriterConfig) -> Result<(Destination, Shared), WriterError> {
        let normal_limit = config.normal_limit_bytes();
        let WriterConfig {
            output,
            capacity_bytes,
            overflow,
            reserve_full,
            flush_timeout,
            lock_spin,
            clock,
            format,
            service,
            ledger,
            plain_writes,
            ..
        } = config;
        let output_is_stderr = matches!(output, super::config::Output::Stderr);
        let out = output::open(output, plain_writes)?;
        let shared = Shared {
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
                space_waits: 0,
                lock_waits: 0,
                lock_handoffs: 0,
                progress_waiters: 0,
                closed: false,
                stop: false,
                abandoned: false,
                exited: false,
                exit_report: ExitReport::NotNeeded,
                inflight_rows: Vec::new(),
                stopping: false,
            }),
            work: Condvar::new(),
            space: Condvar::new(),
            progress: Condvar::new(),
            stop_flag: AtomicBool::new(false),
            in_unbounded_write: AtomicBool::new(false),
            batch_phase: AtomicU8::new(BATCH_IDLE),
            queued_hint: AtomicUsize::new(0),
            evicting: AtomicBool::new(false),
            lockless_drops: Default::default(),
            normal_limit,
            overflow,
            reserve_full,
            flush_timeout,
            lock_spin,
            clock,
            output_is_stderr,
            plain_writes,
            style: Style::new(format, &service),
            ledger,
            posted: Box::new(crossbeam_queue::ArrayQueue::new(POST_SLOTS)),
            posting: AtomicUsize::new(0),
            closing: AtomicBool::new(false),
        };
        Ok((out, shared))
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        // No code panics while holding the lock; if some did, the counters are still
        // consistent enough to keep logging.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The lock if it can be had within `spin` (busy-waiting, never sleeping), else
    /// `None`. A free lock is taken inline; the wait is out of line.
    #[inline]
    pub(super) fn lock_within(&self, spin: Duration) -> Option<MutexGuard<'_, State>> {
        match self.state.try_lock() {
            Ok(st) => Some(st),
            Err(_) => self.spin_for_lock(spin),
        }
    }

    /// [`Shared::lock_within`] once the lock was found held (or poisoned).
    #[cold]
    #[inline(never)]
    fn spin_for_lock(&self, spin: Duration) -> Option<MutexGuard<'_, State>> {
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

    /// The lock, with the lock-free drops folded in and the posted lines queued.
    pub(super) fn lock_folded(&self) -> MutexGuard<'_, State> {
        let mut st = self.lock();
        if st.fold(&self.lockless_drops) | self.drain_posted(&mut st) {
            self.wake_writer(&mut st);
        }
        st
    }

    /// Hands `line` over without the lock, for the next holder of the lock to queue
    /// (drop mode, when the lock is not free within `lock_spin` because the scheduler
    /// preempted its holder): the caller does not sleep until that thread runs again.
    /// Returns `false` (the caller then waits for the lock) when the line is longer than
    /// [`POST_MAX_LINE`], [`POST_SLOTS`] lines wait already, or the writer is closing.
    pub(super) fn post(&self, li: usize, row: RowId, always_keep: bool, line: &[u8]) -> bool {
        if line.len() > POST_MAX_LINE {
            return false;
        }
        self.posting.fetch_add(1, Ordering::SeqCst);
        let posted = !self.closing.load(Ordering::SeqCst)
            && self
                .posted
                .push(Posted {
                    li: li as u8,
                    row,
                    always_keep,
                    line: line.into(),
                })
                .is_ok();
        self.posting.fetch_sub(1, Ordering::SeqCst);
        if posted {
            // Its holder may be done with the lock by now: queue the line at once then
            // (else the holder's next call, or the writer thread's next look, does).
            if let Ok(mut st) = self.state.try_lock() {
                if self.drain_posted(&mut st) {
                    self.wake_writer(&mut st);
                }
            }
        }
        posted
    }

    /// Queues the posted lines, oldest first, as `write_line` would have with the lock
    /// in drop mode but without waiting: a line that does not fit (after evicting, for
    /// an `alwaysKeep` line) is dropped and counted. Each is counted emitted here.
    /// Returns whether anything was queued or reported (the writer thread may be woken).
    pub(super) fn drain_posted(&self, st: &mut State) -> bool {
        let mut any = false;
        while let Some(p) = self.posted.pop() {
            let li = usize::from(p.li);
            st.levels[li].emitted += 1;
            st.lock_handoffs += 1;
            self.queue_now(st, li, p.row, &p.line, p.always_keep);
            any = true;
        }
        any
    }

    /// Queues `line` now, or drops and counts it.
    fn queue_now(&self, st: &mut State, li: usize, row: RowId, line: &[u8], always_keep: bool) {
        if st.closed {
            self.count_drop(st, li, row, DropReason::Shutdown, false);
            return;
        }
        loop {
            match st.queue.fit(line.len(), always_keep) {
                Fit::Now => {
                    st.queue.push(li, row, line, always_keep);
                    self.publish_queued(st);
                    st.count_accepted(li);
                    return;
                }
                Fit::Later if always_keep => {
                    if !self.evict_for(st, li, line.len()) {
                        break;
                    }
                }
                Fit::Later | Fit::Never => break,
            }
        }
        self.count_drop(st, li, row, DropReason::full(always_keep), true);
    }

    /// Counts one line of level `li` and ledger row `row` dropped for `reason` (see
    /// [`State::count_drop`]).
    #[inline]
    pub(super) fn count_drop(
        &self,
        st: &mut State,
        li: usize,
        row: RowId,
        reason: DropReason,
        reportable: bool,
    ) -> bool {
        self.ledger.add(row, Col::writer(reason.index()), 1);
        st.count_drop(li, reason, 1, reportable)
    }

    /// Makes room for an `alwaysKeep` line of level `li` and `len` bytes that found the
    /// whole queue full (drop mode): evicts every waiting line of a lower level, then,
    /// with [`ReserveFull::Drop`], the oldest of its own. Returns whether anything was
    /// evicted (then try to fit it again).
    pub(super) fn evict_for(&self, st: &mut State, li: usize, len: usize) -> bool {
        let evicted = Col::writer(DropReason::Evicted.index());
        let below = st
            .queue
            .evict_below(li, |row| self.ledger.add(row, evicted, 1));
        if self.count_evicted(st, below) {
            return true;
        }
        if self.reserve_full == ReserveFull::Drop {
            let need = st.queue.shortfall(len, true);
            let older = st
                .queue
                .evict_oldest(li, need, |row| self.ledger.add(row, evicted, 1));
            return self.count_evicted(st, older);
        }
        false
    }

    /// Counts the lines an eviction dropped (see [`Queue::evict_below`] and
    /// [`Queue::evict_oldest`]) as [`DropReason::Evicted`]. Returns whether anything was
    /// evicted.
    pub(super) fn count_evicted(&self, st: &mut State, evicted: [u64; LEVELS]) -> bool {
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

    /// Queues a line at once, in the common case of a steady flow: the lock free, no
    /// line posted before this one, the writer open, and room for the line in the chunk
    /// being filled. Returns `false`, having changed nothing, in every other case: the
    /// caller then takes the long way (`Writer::write_row_line_slow`), which handles each
    /// of them.
    #[inline]
    pub(super) fn append_now(&self, li: usize, row: RowId, always_keep: bool, line: &[u8]) -> bool {
        let Ok(mut st) = self.state.try_lock() else {
            return false;
        };
        if st.closed || !self.posted.is_empty() || !st.queue.try_append(li, row, line, always_keep)
        {
            return false;
        }
        st.levels[li].emitted += 1;
        self.publish_queued(&st);
        self.accepted(st, li)
    }

    /// Counts a line below `alwaysKeep` refused without the lock, for the reason at
    /// `slot` of [`LOCKLESS_REASONS`]: in the lock-free counters, folded in later, and in
    /// its ledger row.
    #[cold]
    #[inline(never)]
    pub(super) fn drop_lockless(&self, slot: usize, li: usize, row: RowId) {
        self.lockless_drops[slot][li].fetch_add(1, Ordering::AcqRel);
        self.ledger
            .add(row, Col::writer(LOCKLESS_REASONS[slot].index()), 1);
    }

    pub(super) fn publish_queued(&self, st: &State) {
        self.queued_hint
            .store(st.queue.queued_bytes(), Ordering::Release);
        self.evicting
            .store(st.queue.refusing_below_keep(), Ordering::Release);
    }

    /// Counts a line of level `li` just queued, unlocks, and wakes the writer if it
    /// waits: after unlocking, so the syscall is not made under the lock (the writer
    /// rechecks the queue under the lock; no wakeup is lost). Returns `true`.
    #[inline]
    pub(super) fn accepted(&self, mut st: MutexGuard<'_, State>, li: usize) -> bool {
        st.count_accepted(li);
        let wake = std::mem::replace(&mut st.writer_idle, false);
        drop(st);
        if wake {
            self.work.notify_one();
        }
        true
    }

    pub(super) fn wake_writer(&self, st: &mut State) {
        if st.writer_idle {
            st.writer_idle = false;
            self.work.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Output, Writer, WriterConfig};
    use crate::ledger::RowId;
    use std::time::Duration;
    use tracing_core::Level;

    /// A caller that finds the lock held (its holder preempted, here: held by the test)
    /// hands its line over and returns; the next holder queues it before its own line,
    /// and every line is counted once.
    #[test]
    fn a_held_lock_never_puts_a_drop_mode_caller_to_sleep() {
        let path = std::env::temp_dir().join(format!("posted-{}.log", std::process::id()));
        let config =
            WriterConfig::new(Output::File(path.clone())).lock_spin(Duration::from_micros(50));
        let (writer, guard) = Writer::new(config).unwrap();
        let held = writer.shared.lock();
        let w = writer.clone();
        let t = std::thread::spawn(move || {
            assert!(w.write_line(Level::ERROR, true, b"error while held\n"));
            assert!(w.write_line(Level::INFO, false, b"info while held\n"));
        });
        // The caller returns while the lock is still held (had it slept on the lock,
        // this join would never return).
        t.join().unwrap();
        assert!(writer.shared.posted.len() == 2, "both lines handed over");
        drop(held);
        assert!(writer.write_line(Level::INFO, false, b"after\n"));
        let stats = guard.finish();
        assert_eq!(stats.lock_handoffs, 2);
        assert_eq!(stats.lock_waits, 0);
        assert_eq!(stats.written_total(), 3);
        assert!(stats.is_balanced());
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "error while held\ninfo while held\nafter\n");
        std::fs::remove_file(path).ok();
    }

    /// Lines being handed over when the writer closes are counted, as shutdown drops.
    #[test]
    fn lines_handed_over_at_close_are_counted() {
        let path = std::env::temp_dir().join(format!("posted-close-{}.log", std::process::id()));
        let (writer, guard) = Writer::new(WriterConfig::new(Output::File(path.clone()))).unwrap();
        {
            let _held = writer.shared.lock();
            assert!(writer
                .shared
                .post(2, RowId::OWN, false, b"queued before the close\n"));
        }
        let stats = guard.finish();
        assert!(
            !writer.shared.post(2, RowId::OWN, false, b"too late\n"),
            "closed"
        );
        assert_eq!(stats.lock_handoffs, 1);
        assert_eq!(stats.written_total(), 1);
        assert!(stats.is_balanced());
        std::fs::remove_file(path).ok();
    }
}
