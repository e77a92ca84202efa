//! The per-callsite burst limit, the byte budget, and the notices they report in-band.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;

use tracing_core::Metadata;

use crate::policy::Burst;

/// The burst window of one callsite: `(second << 32) | events in that second`.
#[derive(Debug, Default)]
pub(crate) struct BurstWindow(AtomicU64);

/// What the burst limiter decided about one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BurstDecision {
    Keep,
    /// Dropped; `first` when it is the first event dropped in this window.
    Drop {
        first: bool,
    },
}

/// A window that ended with events dropped: reported in-band.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BurstSummary {
    pub(crate) second: u64,
    pub(crate) events: u64,
    pub(crate) dropped: u64,
}

impl BurstWindow {
    /// Counts one event at `second` under `burst`; returns the decision and, when this
    /// event opened a new window after one that dropped events, that window's summary.
    #[inline]
    pub(crate) fn admit(&self, second: u64, burst: Burst) -> (BurstDecision, Option<BurstSummary>) {
        let per_second = u64::from(burst.per_second.get());
        let then = u64::from(burst.then_one_in.get());
        let second32 = second & 0xffff_ffff;
        let mut summary = None;
        let mut v = self.0.load(Ordering::Relaxed);
        loop {
            if v >> 32 == second32 {
                break;
            }
            // A new window: reset the count to this event.
            match self.0.compare_exchange_weak(
                v,
                (second32 << 32) | 1,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(old) => {
                    let events = old & 0xffff_ffff;
                    if events > per_second && old != 0 {
                        let over = events - per_second;
                        summary = Some(BurstSummary {
                            second: (second & !0xffff_ffff) | (old >> 32),
                            events,
                            dropped: over - over.div_ceil(then),
                        });
                    }
                    return (BurstDecision::Keep, summary);
                }
                Err(cur) => v = cur,
            }
        }
        let n = (self.0.fetch_add(1, Ordering::AcqRel) & 0xffff_ffff) + 1;
        if n <= per_second {
            return (BurstDecision::Keep, None);
        }
        let over = n - per_second; // 1-based among the events over the limit
        if (over - 1) % then == 0 {
            (BurstDecision::Keep, None)
        } else {
            (BurstDecision::Drop { first: over == 2 }, None)
        }
    }
}

/// A token bucket on bytes: `rate` bytes per second, up to one second's worth banked.
/// Lines are admitted while tokens remain, then charged their real size (so the bucket
/// may go into debt by one line); `alwaysKeep` lines are charged but never refused.
#[derive(Debug)]
pub(crate) struct Budget {
    tokens: AtomicI64,
    last_refill_ns: AtomicU64,
    initialised: AtomicBool,
}

impl Budget {
    pub(crate) fn new() -> Self {
        Budget {
            tokens: AtomicI64::new(0),
            last_refill_ns: AtomicU64::new(0),
            initialised: AtomicBool::new(false),
        }
    }

    fn refill(&self, now_ns: u64, rate: u64) {
        let cap = i64::try_from(rate).unwrap_or(i64::MAX);
        if !self.initialised.swap(true, Ordering::AcqRel) {
            self.last_refill_ns.store(now_ns, Ordering::Release);
            self.tokens.store(cap, Ordering::Release);
            return;
        }
        let last = self.last_refill_ns.load(Ordering::Acquire);
        // Refill at most every 100 µs, by the one thread that wins the race.
        if now_ns <= last.saturating_add(100_000) {
            return;
        }
        if self
            .last_refill_ns
            .compare_exchange(last, now_ns, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            return;
        }
        let add = u128::from(now_ns - last) * u128::from(rate) / 1_000_000_000;
        // Pay off any debt first, then bank at most `cap`.
        let add = i64::try_from(add).unwrap_or(i64::MAX).min(1 << 60);
        let before = self.tokens.fetch_add(add, Ordering::AcqRel);
        if before.saturating_add(add) > cap {
            self.tokens.fetch_min(cap, Ordering::AcqRel);
        }
    }

    /// Whether a line below `alwaysKeep` may be written now.
    #[inline]
    pub(crate) fn admit(&self, now_ns: u64, rate: u64) -> bool {
        self.refill(now_ns, rate);
        self.tokens.load(Ordering::Acquire) > 0
    }

    /// Charges a written line.
    #[inline]
    pub(crate) fn charge(&self, bytes: usize) {
        self.tokens
            .fetch_sub(i64::try_from(bytes).unwrap_or(i64::MAX), Ordering::AcqRel);
    }
}

/// Something the layer tells in-band, as a line from target `logpolicy`.
#[derive(Debug, Clone)]
pub(crate) enum Notice {
    /// A callsite went over the burst limit.
    BurstStarted {
        meta: &'static Metadata<'static>,
        burst: Burst,
    },
    /// A callsite's window ended with events dropped.
    BurstEnded {
        meta: &'static Metadata<'static>,
        summary: BurstSummary,
    },
}

/// Notices waiting for the output layer; bounded, and what does not fit is counted.
#[derive(Debug, Default)]
pub(crate) struct Notices {
    pending: AtomicBool,
    queue: Mutex<VecDeque<Notice>>,
    pub(crate) lost: AtomicU64,
}

const MAX_NOTICES: usize = 256;

impl Notices {
    pub(crate) fn push(&self, notice: Notice) {
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        if q.len() >= MAX_NOTICES {
            self.lost.fetch_add(1, Ordering::Relaxed);
            return;
        }
        q.push_back(notice);
        self.pending.store(true, Ordering::Release);
    }

    /// Takes every waiting notice (one load when there are none).
    #[inline]
    pub(crate) fn take(&self) -> Option<VecDeque<Notice>> {
        if !self.pending.load(Ordering::Acquire) {
            return None;
        }
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        self.pending.store(false, Ordering::Release);
        Some(std::mem::take(&mut *q))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::num::NonZeroU32;

    fn burst(p: u32, t: u32) -> Burst {
        Burst {
            per_second: NonZeroU32::new(p).unwrap(),
            then_one_in: NonZeroU32::new(t).unwrap(),
        }
    }

    #[test]
    fn burst_keeps_n_then_one_in_m_and_summarises_the_window() {
        let w = BurstWindow::default();
        let b = burst(3, 4);
        let mut kept = 0;
        let mut firsts = 0;
        for _ in 0..15 {
            match w.admit(100, b).0 {
                BurstDecision::Keep => kept += 1,
                BurstDecision::Drop { first } => firsts += usize::from(first),
            }
        }
        // 3 under the limit, then events 4..15 (12 over): keep the 1st, 5th, 9th.
        assert_eq!(kept, 6);
        assert_eq!(firsts, 1);
        let (d, summary) = w.admit(101, b);
        assert_eq!(d, BurstDecision::Keep);
        assert_eq!(
            summary,
            Some(BurstSummary {
                second: 100,
                events: 15,
                dropped: 9
            })
        );
        // A quiet window reports nothing.
        assert_eq!(w.admit(102, b).1, None);
    }

    #[test]
    fn budget_admits_a_seconds_worth_then_refills() {
        let b = Budget::new();
        let rate = 1000;
        let mut t = 1_000_000_000u64;
        let mut written = 0;
        while b.admit(t, rate) {
            b.charge(100);
            written += 100;
        }
        assert_eq!(written, 1000);
        t += 500_000_000;
        assert!(b.admit(t, rate));
        b.charge(600);
        assert!(!b.admit(t, rate));
        // Never banks more than one second.
        t += 100_000_000_000;
        let mut n = 0;
        while b.admit(t, rate) {
            b.charge(1);
            n += 1;
        }
        assert_eq!(n, 1000);
    }
}
