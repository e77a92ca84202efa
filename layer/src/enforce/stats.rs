//! What happened to every event the policy let through: written, sampled out, dropped
//! by the burst limit or the byte budget, or held with its request.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::level::{level_index, LEVELS};

/// Why an event the levels enabled was not written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// A sampling rule did not keep it (or its request, which then ended without an
    /// error, or its request's buffer was full).
    Sampled,
    /// Its callsite was over the burst limit.
    Burst,
    /// The byte budget was spent.
    Budget,
}

impl Reason {
    /// Every reason.
    pub const ALL: [Reason; 3] = [Reason::Sampled, Reason::Burst, Reason::Budget];

    /// `sampled`, `burst` or `budget`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Reason::Sampled => "sampled",
            Reason::Burst => "burst",
            Reason::Budget => "budget",
        }
    }
}

/// Counts for one level.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LevelCounts {
    /// Formatted and handed to the sink.
    pub written: u64,
    /// Not written because of sampling.
    pub sampled: u64,
    /// Not written because of the burst limit.
    pub burst: u64,
    /// Not written because of the byte budget.
    pub budget: u64,
    /// Held right now with a request that was not kept (written if an error follows in
    /// it, counted as sampled when it ends without one).
    pub held: u64,
    /// Below the levels in force, kept in memory by a recording rule instead of written
    /// (see [`recorder`](crate::recorder): what became of it afterwards, replayed or
    /// expired, is the recorder's to count).
    pub recorded: u64,
}

impl LevelCounts {
    /// Every event accounted for: `written + sampled + burst + budget + held + recorded`.
    pub fn emitted(&self) -> u64 {
        self.written + self.dropped() + self.held + self.recorded
    }

    /// Not written, for any reason.
    pub fn dropped(&self) -> u64 {
        self.sampled + self.burst + self.budget
    }

    /// The count for one reason.
    pub fn by_reason(&self, reason: Reason) -> u64 {
        match reason {
            Reason::Sampled => self.sampled,
            Reason::Burst => self.burst,
            Reason::Budget => self.budget,
        }
    }
}

/// A snapshot of the layer's accounting, per level (indexed by [`level_index`](crate::level_index)).
///
/// At any quiet moment (no event in flight), for every level,
/// `emitted == written + sampled + burst + budget + held + recorded`, where `emitted`
/// counts every event the levels (or a recording rule) enabled.
///
/// # Examples
///
/// ```
/// use logpolicy::{Format, FormatLayer, NullSink, PolicyFilter};
/// use tracing_subscriber::prelude::*;
///
/// let filter = PolicyFilter::from_directives("info,@sample(app)=1/10").unwrap();
/// let stats = filter.handle();
/// let subscriber = tracing_subscriber::registry()
///     .with(filter.clone())
///     .with(FormatLayer::new(Format::Json, NullSink).with_policy(&filter));
/// tracing::subscriber::with_default(subscriber, || {
///     for i in 0..100 {
///         tracing::info!(target: "app", i, "sampled");
///     }
///     tracing::error!(target: "app", "always kept");
/// });
/// let s = stats.stats();
/// assert_eq!(s.level(&tracing::Level::INFO).written, 10);
/// assert_eq!(s.level(&tracing::Level::INFO).sampled, 90);
/// assert_eq!(s.level(&tracing::Level::ERROR).written, 1);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Per level, in [`LEVEL_ORDER`](crate::LEVEL_ORDER).
    pub levels: [LevelCounts; LEVELS],
    /// Values written as `[redacted]`, per reason.
    pub redacted: Redacted,
    /// Lines written to say that a pushed layer started, changed or stopped applying
    /// (not events: never in the per-level counts).
    pub policy_lines: u64,
}

/// Values written as `[redacted]` (see [`redact`](crate::policy::redact)), per reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Redacted {
    /// Field values whose field name is redacted.
    pub by_name: u64,
    /// Values shaped like secrets (a bearer token, a JWT, a private key) found inside a
    /// string, when value redaction is on.
    pub by_value: u64,
}

impl Redacted {
    /// Both reasons.
    pub fn total(&self) -> u64 {
        self.by_name + self.by_value
    }
}

impl Stats {
    /// The counts of one level.
    pub fn level(&self, level: &tracing_core::Level) -> LevelCounts {
        self.levels[level_index(*level)]
    }

    /// The sum over levels.
    pub fn total(&self) -> LevelCounts {
        let mut t = LevelCounts::default();
        for l in &self.levels {
            t.written += l.written;
            t.sampled += l.sampled;
            t.burst += l.burst;
            t.budget += l.budget;
            t.held += l.held;
            t.recorded += l.recorded;
        }
        t
    }
}

type Row = [AtomicU64; LEVELS];

/// The live counters behind [`Stats`].
#[derive(Debug, Default)]
pub(crate) struct StatsCells {
    pub(crate) written: Row,
    pub(crate) sampled: Row,
    pub(crate) burst: Row,
    pub(crate) budget: Row,
    pub(crate) held: Row,
    pub(crate) recorded: Row,
    /// Sampled counts of event-scope rules that no longer exist.
    retired: Row,
    pub(crate) redacted_by_name: AtomicU64,
    pub(crate) redacted_by_value: AtomicU64,
    pub(crate) policy_lines: AtomicU64,
    /// Event-scope rules in use (their counters give the rest of `sampled`).
    live_rules: Mutex<Vec<Weak<RuleCounters>>>,
}

impl StatsCells {
    #[inline]
    pub(crate) fn add(row: &Row, level: &tracing_core::Level, n: u64) {
        row[level_index(*level)].fetch_add(n, Ordering::Relaxed);
    }

    #[inline]
    pub(crate) fn sub(row: &Row, level: &tracing_core::Level, n: u64) {
        row[level_index(*level)].fetch_sub(n, Ordering::Relaxed);
    }

    pub(crate) fn register_rule(&self, rule: &Arc<RuleCounters>) {
        let mut live = self.live_rules.lock().unwrap_or_else(|p| p.into_inner());
        live.retain(|w| w.strong_count() > 0);
        live.push(Arc::downgrade(rule));
    }

    pub(crate) fn snapshot(&self) -> Stats {
        let mut s = Stats::default();
        let rules: Vec<Arc<RuleCounters>> = {
            let live = self.live_rules.lock().unwrap_or_else(|p| p.into_inner());
            live.iter().filter_map(Weak::upgrade).collect()
        };
        for (i, l) in s.levels.iter_mut().enumerate() {
            let get = |row: &Row| row[i].load(Ordering::Relaxed);
            l.written = get(&self.written);
            l.sampled = get(&self.sampled)
                + get(&self.retired)
                + rules.iter().map(|r| r.sampled(i)).sum::<u64>();
            l.burst = get(&self.burst);
            l.budget = get(&self.budget);
            l.held = get(&self.held);
            l.recorded = get(&self.recorded);
        }
        s.redacted = Redacted {
            by_name: self.redacted_by_name.load(Ordering::Relaxed),
            by_value: self.redacted_by_value.load(Ordering::Relaxed),
        };
        s.policy_lines = self.policy_lines.load(Ordering::Relaxed);
        s
    }
}

/// The counters of one event-scope sampling rule: how many events it has seen per
/// level. It keeps the 1st, (N+1)th, (2N+1)th... so it has sampled out
/// `seen - ceil(seen / N)`: one atomic add per event, and nothing else to count.
#[derive(Debug)]
pub(crate) struct RuleCounters {
    pub(crate) n: u64,
    multiple: Multiple,
    /// This rule's index in its filter's table of rules for the lock-free event path,
    /// once it has one.
    pub(crate) fast_slot: std::sync::OnceLock<usize>,
    seen: Row,
    /// Event scope: the sampled count is derived from `seen` (and folded into the
    /// stats when the rule goes away); request scope counts requests, not events.
    derive_sampled: bool,
    stats: Weak<StatsCells>,
}

impl RuleCounters {
    pub(crate) fn new(n: u64, derive_sampled: bool, stats: &Arc<StatsCells>) -> Arc<Self> {
        let rule = Arc::new(RuleCounters {
            n: n.max(1),
            multiple: Multiple::of(n),
            fast_slot: std::sync::OnceLock::new(),
            seen: Default::default(),
            derive_sampled,
            stats: Arc::downgrade(stats),
        });
        if derive_sampled {
            stats.register_rule(&rule);
        }
        rule
    }

    /// Counts one event (or request) and says whether it is the one in N kept.
    #[inline]
    pub(crate) fn keep(&self, level: &tracing_core::Level) -> bool {
        let c = self.seen[level_index(*level)].fetch_add(1, Ordering::Relaxed);
        self.multiple.divides(c)
    }

    fn sampled(&self, i: usize) -> u64 {
        if !self.derive_sampled {
            return 0;
        }
        let seen = self.seen[i].load(Ordering::Relaxed);
        seen - seen.div_ceil(self.n)
    }
}

/// Whether a count is a multiple of N, without a division: for N = 2^k · d with d odd,
/// c is a multiple of N exactly when its low k bits are 0 and (c >> k) · d⁻¹ (mod 2^64)
/// is at most (2^64 − 1) / d (the inverse of an odd number modulo 2^64 maps the
/// multiples of d, and only them, onto 0 ..= (2^64 − 1) / d).
#[derive(Debug, Clone, Copy)]
struct Multiple {
    shift: u32,
    inverse: u64,
    limit: u64,
}

impl Multiple {
    fn of(n: u64) -> Self {
        let n = n.max(1);
        let shift = n.trailing_zeros();
        let odd = n >> shift;
        // Newton's iteration doubles the correct low bits: 3 → 6 → ... → 96 ≥ 64.
        let mut inverse = odd;
        for _ in 0..5 {
            inverse = inverse.wrapping_mul(2u64.wrapping_sub(odd.wrapping_mul(inverse)));
        }
        Multiple {
            shift,
            inverse,
            limit: u64::MAX / odd,
        }
    }

    #[inline]
    fn divides(self, c: u64) -> bool {
        c.trailing_zeros() >= self.shift
            && (c >> self.shift).wrapping_mul(self.inverse) <= self.limit
    }
}

impl Drop for RuleCounters {
    fn drop(&mut self) {
        if let Some(stats) = self.stats.upgrade() {
            for i in 0..LEVELS {
                stats.retired[i].fetch_add(self.sampled(i), Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod multiple_tests {
    use super::Multiple;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn divides_is_the_remainder_test(n in 1u64.., c in any::<u64>()) {
            prop_assert_eq!(Multiple::of(n).divides(c), c % n == 0);
        }

        #[test]
        fn multiples_are_found(n in 1u64..1_000_000, k in 0u64..1_000_000) {
            prop_assert!(Multiple::of(n).divides(n * k));
            prop_assert_eq!(Multiple::of(n).divides(n * k + 1), n == 1);
        }
    }

    #[test]
    fn edges() {
        for n in [1u64, 2, 3, 4, 100, 1 << 63, u64::MAX, u64::MAX - 1] {
            let m = Multiple::of(n);
            for c in [0u64, 1, n, n.wrapping_mul(2), n - 1, u64::MAX, u64::MAX - 1] {
                assert_eq!(m.divides(c), c % n == 0, "n {n} c {c}");
            }
        }
    }
}
