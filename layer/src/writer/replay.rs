//! Replay: the lines a [`Recorder`] holds from a window, written through the writer in
//! their order, between two lines of logpolicy's own that say who asked and what the
//! store still held, paced so that live lines keep their place.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, UNIX_EPOCH};

use super::Writer;
use crate::format::own_line;
use crate::recorder::{Recorder, ReplayReport, ReplayRequest, Taken};

/// Replayed lines are written at most this many bytes per second.
pub const REPLAY_BYTES_PER_SECOND: usize = 4 << 20;

/// A replayed line waits while the writer's queue holds more than this share of what
/// lines below `alwaysKeep` may fill (in percent), so live lines always find room.
pub const REPLAY_QUEUE_PERCENT: usize = 50;

/// How long a replayed line waits for the queue to drain below
/// [`REPLAY_QUEUE_PERCENT`] before it is offered anyway (and dropped and counted if the
/// queue is full: a stalled reader does not hold a replay forever).
pub const REPLAY_STALL: Duration = Duration::from_secs(2);

/// A replay whose lines were taken from the store and are still to be written: what
/// the admin endpoint answers at once, before the paced writing.
#[derive(Debug)]
pub struct PendingReplay {
    request: ReplayRequest,
    taken: Taken,
    report: ReplayReport,
    asked_at: Duration,
}

impl PendingReplay {
    /// Takes the lines of `request`'s window from `recorder` at `now` (since the Unix
    /// epoch): from then on they are this replay's (a second replay finds none of them).
    pub fn take(recorder: &Recorder, request: ReplayRequest, now: Duration) -> Self {
        let since = now.saturating_sub(request.since);
        let taken = recorder.take_since(since, now);
        let report = ReplayReport {
            asked_from: UNIX_EPOCH + since,
            held_from: taken.held_from,
            first_at: taken.first_at(),
            lines: taken.len() as u64,
            bytes: taken.byte_len() as u64,
            queued: 0,
            dropped: 0,
            complete: taken.complete,
        };
        PendingReplay {
            request,
            taken,
            report,
            asked_at: now,
        }
    }

    /// What was taken (nothing queued or dropped yet).
    pub fn report(&self) -> &ReplayReport {
        &self.report
    }

    /// Writes the opening line, the lines paced, and the closing line through `writer`;
    /// returns when the last one was handed to the writer.
    pub fn write(self, writer: &Writer) -> ReplayReport {
        let PendingReplay {
            request,
            taken,
            mut report,
            asked_at,
        } = self;
        let style = writer.style();
        let mut buf = Vec::with_capacity(512);
        own_line::write_replay(
            &mut buf,
            style,
            UNIX_EPOCH + asked_at,
            &request,
            &report,
            false,
        );
        writer.write_line(tracing_core::Level::INFO, true, &buf);
        let sh = &*writer.shared;
        let room = sh.normal_limit * REPLAY_QUEUE_PERCENT / 100;
        let started = Instant::now();
        let mut sent = 0usize;
        for (row, level, line) in taken.lines() {
            // The pace: no faster than the rate, and only while the queue has room.
            let due = Duration::from_secs_f64(sent as f64 / REPLAY_BYTES_PER_SECOND as f64);
            if let Some(wait) = due.checked_sub(started.elapsed()) {
                std::thread::sleep(wait);
            }
            let stalled = Instant::now();
            while sh.queued_hint.load(Ordering::Acquire) + line.len() > room
                && stalled.elapsed() < REPLAY_STALL
            {
                std::thread::sleep(Duration::from_millis(1));
            }
            sent += line.len();
            if writer.write_row_line(row, level.to_tracing(), false, line) {
                report.queued += 1;
            } else {
                report.dropped += 1;
            }
        }
        buf.clear();
        let end = UNIX_EPOCH + asked_at + started.elapsed();
        own_line::write_replay(&mut buf, style, end, &request, &report, true);
        writer.write_line(tracing_core::Level::INFO, true, &buf);
        report
    }
}
