//! The periodic summary of events not written: when it is due (at most once per
//! interval, by whichever thread logs first after that), and what it says (the counts
//! per reason and level since the last one).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::stats::{Reason, Redacted, Stats};
use crate::level::LEVELS;

/// The summary of events not written comes at most this often by default.
pub(crate) const DEFAULT_SUMMARY_INTERVAL_SECS: u64 = 10;

/// Events not written since the last summary: `counts[reason][level]`, reasons in
/// [`Reason::ALL`] order, levels in [`LEVEL_ORDER`](crate::LEVEL_ORDER) order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NotWritten {
    pub(crate) counts: [[u64; LEVELS]; 3],
    /// Values written as `[redacted]` since the last summary.
    pub(crate) redacted: Redacted,
}

impl NotWritten {
    /// `WARN` when events were lost to the burst limit or the budget (a policy's limit
    /// was hit), `INFO` when they were only sampled out, as the policy asked.
    pub(crate) fn level(&self) -> tracing_core::Level {
        let lossy = self.counts[1].iter().chain(&self.counts[2]).any(|n| *n > 0);
        if lossy {
            tracing_core::Level::WARN
        } else {
            tracing_core::Level::INFO
        }
    }
}

/// When the summary is due, and the counts of the last one.
#[derive(Debug)]
pub(crate) struct Summary {
    interval: u64,
    next_due: AtomicU64,
    last: Mutex<Stats>,
}

impl Summary {
    /// A summary written at most once per `interval` seconds.
    pub(crate) fn new(interval: u64) -> Self {
        Summary {
            interval,
            next_due: AtomicU64::new(0),
            last: Mutex::new(Stats::default()),
        }
    }

    /// Whether this thread should write the summary now (at most one per interval).
    #[inline]
    pub(crate) fn due(&self, secs: u64) -> bool {
        let next = self.next_due.load(Ordering::Relaxed);
        secs >= next
            && self
                .next_due
                .compare_exchange(
                    next,
                    secs + self.interval,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok()
    }

    /// The counts since the last summary, or `None` when nothing went unwritten and
    /// nothing was redacted since.
    pub(crate) fn since_last(&self, stats: &Stats) -> Option<NotWritten> {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let mut counts = [[0u64; LEVELS]; 3];
        for (row, reason) in counts.iter_mut().zip(Reason::ALL) {
            for (cell, (now, before)) in row.iter_mut().zip(stats.levels.iter().zip(&last.levels)) {
                *cell = now
                    .by_reason(reason)
                    .saturating_sub(before.by_reason(reason));
            }
        }
        let redacted = Redacted {
            by_name: stats.redacted.by_name.saturating_sub(last.redacted.by_name),
            by_value: stats
                .redacted
                .by_value
                .saturating_sub(last.redacted.by_value),
        };
        *last = *stats;
        if counts.iter().flatten().all(|n| *n == 0) && redacted.total() == 0 {
            return None;
        }
        Some(NotWritten { counts, redacted })
    }
}
