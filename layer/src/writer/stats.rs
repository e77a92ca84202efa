//! Counters: what was emitted, written and dropped, per level and per reason.

use std::io::ErrorKind;

use tracing_core::Level;

use crate::level::{level_index, LEVELS};

/// The number of [`DropReason`]s; per-reason counters are indexed in
/// [`DropReason::ALL`] order.
pub const REASONS: usize = 6;

/// Why a line was not written.
///
/// # Examples
///
/// ```
/// use logpolicy::writer::DropReason;
/// assert_eq!(DropReason::QueueFull.as_str(), "queue_full");
/// assert_eq!(DropReason::Contended.as_str(), "contended");
/// assert_eq!(DropReason::Evicted.as_str(), "evicted");
/// assert_eq!(DropReason::ALL.len(), 6);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// A line below `alwaysKeep` found its share of the queue full (drop mode), or could
    /// never fit in it.
    QueueFull,
    /// An `alwaysKeep` line found the whole queue, reserve included, full (after waiting
    /// as [`ReserveFull`](super::ReserveFull) says), or could never fit in it.
    ReserveFull,
    /// The line was queued but the output refused its batch (`EPIPE`, `ENOSPC`, …).
    OutputClosed,
    /// The line was still queued when the guard's flush timed out, or was logged after the
    /// guard was dropped.
    Shutdown,
    /// A line below `alwaysKeep` (drop mode) could not take the queue's lock within
    /// [`WriterConfig::lock_spin`](super::WriterConfig::lock_spin) while the queue held a
    /// quarter of its share or more: another thread held the lock, typically because the
    /// scheduler preempted that thread in the middle of its copy, and the output was
    /// behind. Dropping keeps the promise that a log call in drop mode does not wait
    /// behind a slow output; a separate reason (rather than
    /// [`DropReason::QueueFull`]) keeps a lock-contention problem from passing for a
    /// slow reader.
    Contended,
    /// A queued line was dropped to make room for an `alwaysKeep` line that found the
    /// queue, reserve included, full (drop mode): lines of lower levels first, then, by
    /// default, the oldest lines of the new line's own level. While the output is
    /// stalled, newer errors and warnings take the place of older or less severe lines
    /// rather than make the caller wait.
    Evicted,
}

impl DropReason {
    /// What a line that found its share of the queue full is dropped for:
    /// [`ReserveFull`](Self::ReserveFull) for an `alwaysKeep` line, else
    /// [`QueueFull`](Self::QueueFull).
    pub(crate) fn full(always_keep: bool) -> Self {
        if always_keep {
            DropReason::ReserveFull
        } else {
            DropReason::QueueFull
        }
    }

    /// Every reason, in counter order.
    pub const ALL: [DropReason; REASONS] = [
        DropReason::QueueFull,
        DropReason::ReserveFull,
        DropReason::OutputClosed,
        DropReason::Shutdown,
        DropReason::Contended,
        DropReason::Evicted,
    ];

    /// The reason's name in summary lines and metric labels.
    pub const fn as_str(self) -> &'static str {
        match self {
            DropReason::QueueFull => "queue_full",
            DropReason::ReserveFull => "reserve_full",
            DropReason::OutputClosed => "output_closed",
            DropReason::Shutdown => "shutdown",
            DropReason::Contended => "contended",
            DropReason::Evicted => "evicted",
        }
    }

    #[inline]
    pub(crate) const fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for DropReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Dropped lines of one level, per reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DropCounts {
    /// Counts indexed in [`DropReason::ALL`] order.
    pub by_reason: [u64; REASONS],
}

impl DropCounts {
    /// The count for one reason.
    pub fn get(&self, reason: DropReason) -> u64 {
        self.by_reason[reason.index()]
    }

    /// All reasons together.
    pub fn total(&self) -> u64 {
        self.by_reason.iter().sum()
    }
}

/// Counters of one level.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LevelStats {
    /// Calls to [`Writer::write_line`](super::Writer::write_line).
    pub emitted: u64,
    /// Lines that entered the queue.
    pub accepted: u64,
    /// Lines the output took.
    pub written: u64,
    /// Lines not written, per reason.
    pub dropped: DropCounts,
    /// Lines in the queue now (waiting or being written).
    pub queued: u64,
}

/// A snapshot of a writer's counters, taken atomically.
///
/// At every snapshot, for every level,
/// `emitted == written + dropped.total() + queued` (see [`WriterStats::is_balanced`]).
///
/// # Examples
///
/// ```
/// use logpolicy::writer::{Output, Writer, WriterConfig};
/// use tracing_core::Level;
///
/// let file = std::env::temp_dir().join(format!("stats-doc-{}.log", std::process::id()));
/// let (writer, guard) = Writer::new(WriterConfig::new(Output::File(file.clone())))?;
/// writer.write_line(Level::INFO, false, b"{\"msg\":\"hello\"}\n");
/// assert!(writer.flush(std::time::Duration::from_secs(5)));
/// let stats = writer.stats();
/// assert_eq!(stats.level(Level::INFO).written, 1);
/// assert_eq!(stats.bytes_written, 16);
/// assert!(stats.is_balanced());
/// drop(guard);
/// # std::fs::remove_file(file).ok();
/// # Ok::<(), logpolicy::writer::WriterError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriterStats {
    /// Per-level counters, indexed by [`level_index`].
    pub levels: [LevelStats; LEVELS],
    /// Bytes the output took (event lines and summary lines).
    pub bytes_written: u64,
    /// Bytes queued now (waiting plus being written).
    pub queue_bytes: usize,
    /// The most bytes ever queued at once.
    pub peak_queue_bytes: usize,
    /// `write`/`writev` calls made (including failed and partial ones).
    pub write_syscalls: u64,
    /// Failed writes (not counting `EINTR`/`EAGAIN`, which are retried), and failed
    /// rotations of an [`Output::RotatingFile`](super::Output::RotatingFile) (which lose
    /// nothing: the lines go on into the file at hand).
    pub io_errors: u64,
    /// The kind of the last failed write or rotation.
    pub last_io_error: Option<ErrorKind>,
    /// Files rotated ([`Output::RotatingFile`](super::Output::RotatingFile)).
    pub rotations: u64,
    /// In-band drop summary lines written.
    pub summary_lines: u64,
    /// Where the writer's last report of drops went when it stopped.
    pub exit_report: ExitReport,
    /// Calls to [`Writer::write_line`](super::Writer::write_line) that waited for space
    /// in the queue: only in [`Overflow::Block`](super::Overflow::Block) mode, or for
    /// `alwaysKeep` lines with [`ReserveFull::WaitThenDrop`](super::ReserveFull) or
    /// `ReserveFull::Block`. Always 0 with the defaults: no call waits for the reader.
    pub space_waits: u64,
    /// Calls that found the queue's lock held for longer than
    /// [`WriterConfig::lock_spin`](super::WriterConfig::lock_spin) and slept until its
    /// holder, which the scheduler had preempted, released it: `alwaysKeep` lines, and
    /// lines below it while the queue held less than a quarter of its share (the output
    /// keeps up, so the line is kept rather than dropped). The wait is the scheduler's,
    /// not the reader's; it shows how often the machine's load reached a log call.
    pub lock_waits: u64,
    /// Calls that found the lock so held (drop mode) and handed their line over without
    /// it instead of sleeping: the next holder of the lock queued it (or dropped and
    /// counted it, as a call holding the lock would have). Counted when queued.
    pub lock_handoffs: u64,
}

/// Where a writer's last report went: when it stops with drops not yet reported (the
/// guard's flush timed out, or drops since the last report), it writes one last summary
/// line, with the counts per level and reason, where someone will see it.
///
/// # Examples
///
/// ```
/// use logpolicy::writer::{ExitReport, Output, Writer, WriterConfig};
/// use tracing_core::Level;
///
/// let path = std::env::temp_dir().join(format!("exit-report-{}.log", std::process::id()));
/// let (writer, guard) = Writer::new(WriterConfig::new(Output::File(path.clone())))?;
/// writer.write_line(Level::INFO, false, b"bye\n");
/// // Everything was written: no last report was needed.
/// assert_eq!(guard.finish().exit_report, ExitReport::NotNeeded);
/// # std::fs::remove_file(path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ExitReport {
    /// The writer has not stopped, or stopped with every drop already reported.
    #[default]
    NotNeeded,
    /// The last summary line went to the output, after the last line it took.
    InBand,
    /// The output would not take it at once; it went to the process's stderr.
    Stderr,
    /// Neither would take it at once: the drops are only in the counters (which
    /// [`WriterGuard::finish`](super::WriterGuard::finish) returns).
    CountersOnly,
}

impl WriterStats {
    /// The counters of `level`.
    pub fn level(&self, level: Level) -> &LevelStats {
        &self.levels[level_index(level)]
    }

    /// Lines dropped for `reason`, all levels together.
    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.levels.iter().map(|l| l.dropped.get(reason)).sum()
    }

    /// Lines dropped for any reason, all levels together.
    pub fn dropped_total(&self) -> u64 {
        self.levels.iter().map(|l| l.dropped.total()).sum()
    }

    /// Lines emitted, all levels together.
    pub fn emitted_total(&self) -> u64 {
        self.levels.iter().map(|l| l.emitted).sum()
    }

    /// Lines written, all levels together.
    pub fn written_total(&self) -> u64 {
        self.levels.iter().map(|l| l.written).sum()
    }

    /// Whether `emitted == written + dropped + queued` holds for every level.
    pub fn is_balanced(&self) -> bool {
        self.levels
            .iter()
            .all(|l| l.emitted == l.written + l.dropped.total() + l.queued)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_follow_verbosity() {
        for (i, level) in crate::level::LEVEL_ORDER.iter().enumerate() {
            assert_eq!(level_index(*level), i);
        }
        for (i, reason) in DropReason::ALL.iter().enumerate() {
            assert_eq!(reason.index(), i);
        }
    }

    #[test]
    fn balance_detects_a_lost_line() {
        let mut s = WriterStats::default();
        s.levels[2].emitted = 3;
        s.levels[2].written = 1;
        s.levels[2].dropped.by_reason[DropReason::QueueFull.index()] = 1;
        assert!(!s.is_balanced());
        s.levels[2].queued = 1;
        assert!(s.is_balanced());
        assert_eq!(s.dropped(DropReason::QueueFull), 1);
        assert_eq!(s.dropped_total(), 1);
    }
}
