//! The writer thread: takes the pending chunks in batches, writes them (with the
//! in-band report of drops in front), gives the chunks back and wakes who waits.

use std::sync::atomic::Ordering;
use std::sync::{MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::output;
use super::queue::{self, clear_chunks, fresh_chunk};
use super::state::{Shared, State, BATCH_COUNTING, BATCH_IDLE, BATCH_WRITING};
use super::stats::{DropReason, ExitReport};
use super::summary;
use crate::ledger::{Col, RowId};

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

/// Naps, `nap` at a time, until lines are queued, the thread must stop, or [`LINGER`]
/// has passed.
fn linger(shared: &Shared, nap: Duration) {
    let until = Instant::now() + LINGER;
    while shared.queued_hint.load(Ordering::Acquire) == 0
        && shared.posted.is_empty()
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
pub(super) fn run(shared: &Shared, mut out: output::Destination) {
    let mut st = top_up_spares(shared, shared.lock());
    let mut batch: Vec<queue::Chunk> = Vec::with_capacity(st.queue.max_chunks());
    let mut head: Vec<u8> = Vec::with_capacity(512);
    let capacity = st.queue.capacity();
    let mut nap = NAP_MIN;
    let mut last_take = Instant::now();
    // The output took part of a line and no more: the next bytes start a new line.
    let mut torn = false;
    // The rows of a batch written with a write that may wait for the reader.
    let mut rows: Vec<(RowId, u64)> = Vec::new();
    loop {
        let mut lingered = false;
        loop {
            if st.stop {
                last_words(shared, st, &mut out, torn);
                return;
            }
            st.fold(&shared.lockless_drops);
            shared.drain_posted(&mut st);
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
        shared.batch_phase.store(BATCH_WRITING, Ordering::Release);
        drop(st);
        let unbounded = out.may_wait_for_reader();
        // A write that may wait for the reader without end may be given up on by the
        // guard: the rows of its lines are left where the guard counts them, so that
        // the ledger says `Shutdown` for them when `finish` does.
        let published = unbounded && publish_rows(shared, &batch, &mut rows);
        if unbounded && !published {
            // Given up on already (this thread was not scheduled for a long while).
            count_batch_shutdown(shared, &batch);
            return;
        }

        head.clear();
        if torn {
            head.extend_from_slice(queue::TORN_END);
        }
        if let Some(counts) = &report {
            summary::write_summary_line(&mut head, &shared.style, shared.clock.now(), counts);
        }
        if unbounded {
            shared.in_unbounded_write.store(true, Ordering::Release);
        }
        let outcome = output::write_batch(&mut out, &head, &batch, &shared.stop_flag);
        if unbounded {
            shared.in_unbounded_write.store(false, Ordering::Release);
        }
        // Out of the write: from here the batch is this thread's to count, unless the
        // guard gave up on it first and counted it as `Shutdown` (then nothing of it is
        // counted again, neither written nor dropped, whatever the reader got of it).
        if shared
            .batch_phase
            .compare_exchange(
                BATCH_WRITING,
                BATCH_COUNTING,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_err()
        {
            if !published {
                count_batch_shutdown(shared, &batch);
            }
            return;
        }
        // Which lines got out whole, if not all did: counted exactly, never both written
        // and dropped.
        let split = outcome.error.as_ref().map(|_| {
            let head_len = head.len() as u64;
            let split = queue::split_delivered(&batch, outcome.bytes.saturating_sub(head_len));
            let stopped_inside = match outcome.bytes {
                0 => torn,
                n if n < head_len => head.get(n as usize - 1) != Some(&b'\n'),
                _ => split.torn,
            };
            (split, stopped_inside)
        });
        torn = split.is_some_and(|(_, t)| t);
        count_in_ledger(shared, &batch, &head, &outcome, report.is_some());
        clear_chunks(&mut batch);

        st = shared.lock();
        st.writer_busy = false;
        shared.batch_phase.store(BATCH_IDLE, Ordering::Release);
        if published {
            st.inflight_rows.clear();
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
                let (split, _) = split.unwrap_or_default();
                debug_assert_eq!(
                    lines,
                    std::array::from_fn(|i| split.written[i] + split.lost[i])
                );
                for (c, n) in st.levels.iter_mut().zip(split.written) {
                    c.written += n;
                }
                let reason = if outcome.stopped {
                    // Told to stop while the output took nothing: the guard's flush timed
                    // out. Reported in the last line.
                    DropReason::Shutdown
                } else {
                    st.io_errors += 1;
                    st.last_io_error = Some(e.kind());
                    st.healthy = false;
                    DropReason::OutputClosed
                };
                for (li, n) in split.lost.iter().enumerate() {
                    st.count_drop(li, reason, *n, true);
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

/// Leaves the lines of `batch`, per ledger row (runs of one row counted once), where the
/// guard finds them if it gives up on the write (see `WriterGuard::finish`). Returns
/// `false` if it has given up on this batch already.
fn publish_rows(shared: &Shared, batch: &[queue::Chunk], rows: &mut Vec<(RowId, u64)>) -> bool {
    rows.clear();
    queue::for_each_line(batch, None, |row, _, _| match rows.last_mut() {
        Some((r, n)) if *r == row => *n += 1,
        _ => rows.push((row, 1)),
    });
    let mut st = shared.lock();
    if shared.batch_phase.load(Ordering::Acquire) != BATCH_WRITING {
        return false;
    }
    std::mem::swap(&mut st.inflight_rows, rows);
    true
}

/// Counts every line of `batch` as a `Shutdown` drop in the ledger: the guard gave up on
/// the batch, counted its lines so in the writer's counters, and could not name their
/// rows (this thread had not left them where it looks).
fn count_batch_shutdown(shared: &Shared, batch: &[queue::Chunk]) {
    let shutdown = Col::writer(DropReason::Shutdown.index());
    let counter = shared.ledger.local_counter();
    queue::for_each_line(batch, None, |row, _, _| counter.add(row, shutdown, 1));
}

/// Counts a batch the output took (all of it, or its first `outcome.bytes` bytes with
/// `head` before it) in the ledger, by the thread that wrote it (no other thread writes
/// its counters): each line that got out whole in its callsite's row, each other line as
/// dropped for the reason the worker counts it, and everything else the output took (the
/// writer's own summary line and torn-line marker, the part of a line cut by a failure)
/// in the row of logpolicy's own lines.
fn count_in_ledger(
    shared: &Shared,
    batch: &[queue::Chunk],
    head: &[u8],
    outcome: &output::WriteOutcome,
    summary: bool,
) {
    let counter = shared.ledger.local_counter();
    let lost = Col::writer(if outcome.stopped {
        DropReason::Shutdown.index()
    } else {
        DropReason::OutputClosed.index()
    });
    let delivered = outcome
        .error
        .as_ref()
        .map(|_| outcome.bytes.saturating_sub(head.len() as u64));
    let mut line_bytes = 0u64;
    // Lines of one callsite come in runs (a callsite logs in loops, and the queue keeps
    // each thread's lines in order): a run is counted once, so a line costs a compare
    // and two adds.
    let (mut run_row, mut run_lines, mut run_bytes) = (RowId::OTHER, 0u64, 0u64);
    queue::for_each_line(batch, delivered, |row, len, whole| {
        if !whole {
            counter.add(row, lost, 1);
            return;
        }
        line_bytes += len as u64;
        if row != run_row {
            counter.add_written(run_row, run_lines, run_bytes);
            (run_row, run_lines, run_bytes) = (row, 0, 0);
        }
        run_lines += 1;
        run_bytes += len as u64;
    });
    counter.add_written(run_row, run_lines, run_bytes);
    let summary_out = summary && outcome.bytes >= head.len() as u64;
    counter.add(RowId::OWN, Col::Lines as usize, u64::from(summary_out));
    counter.add(
        RowId::OWN,
        Col::Bytes as usize,
        outcome.bytes.saturating_sub(line_bytes),
    );
}

/// The thread's end: what is still queued is counted as [`DropReason::Shutdown`], and
/// if any drop was not reported yet, one last summary line says so: in-band if the
/// output takes it at once, else on stderr if that does, else nowhere but the counters
/// (see [`ExitReport`]). Then whoever waits is told.
fn last_words<'a>(
    shared: &'a Shared,
    mut st: MutexGuard<'a, State>,
    out: &mut output::Destination,
    torn: bool,
) {
    // (Nothing is handed over any longer: the guard closed and drained that first.)
    st.fold(&shared.lockless_drops);
    let shutdown = Col::writer(DropReason::Shutdown.index());
    let lines = st
        .queue
        .abandon(|row, n| shared.ledger.add(row, shutdown, n));
    for (li, n) in lines.iter().enumerate() {
        st.count_drop(li, DropReason::Shutdown, *n, true);
    }
    st.resolved_seq += lines.iter().sum::<u64>();
    shared.publish_queued(&st);
    if summary::total(&st.unreported) > 0 {
        let counts = std::mem::take(&mut st.unreported);
        let mut line = Vec::with_capacity(512);
        if torn {
            line.extend_from_slice(queue::TORN_END);
        }
        summary::write_summary_line(&mut line, &shared.style, shared.clock.now(), &counts);
        drop(st);
        let to_output = output::write_line_nowait(out, &line);
        let to_stderr = !to_output
            && !shared.output_is_stderr
            && output::write_stderr_nowait(
                &line[if torn { queue::TORN_END.len() } else { 0 }..],
                shared.plain_writes,
            );
        st = shared.lock();
        st.exit_report = if to_output {
            st.summary_lines += 1;
            st.bytes_written += line.len() as u64;
            shared.ledger.add(RowId::OWN, Col::Lines as usize, 1);
            shared
                .ledger
                .add(RowId::OWN, Col::Bytes as usize, line.len() as u64);
            ExitReport::InBand
        } else if to_stderr {
            ExitReport::Stderr
        } else {
            st.unreported = counts;
            ExitReport::CountersOnly
        };
    }
    st.reported_seq = st.drops_seq;
    st.exited = true;
    drop(st);
    shared.progress.notify_all();
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
