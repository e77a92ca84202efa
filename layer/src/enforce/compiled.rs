//! The compiled policy: what the event path reads, flat tables sorted so that the first
//! match is the longest, compiled once per policy change and swapped in atomically.

use std::sync::Arc;
use std::time::SystemTime;

use tracing_core::Metadata;

use super::fast_path::{CallsiteState, Verdict};
use super::redaction::{ActiveRedaction, RedactionSet};
use super::stats::{RuleCounters, StatsCells};
use super::when::{self, Condition};
use crate::level::Level;
use crate::policy::{prefix_matches, Burst, EffectivePolicy, Policy, Scope, FALLBACK_LEVEL};

/// The most request-scope rules the effective policy applies (a request's decisions are
/// a 64-bit mask); further request rules keep everything.
pub(crate) const MAX_REQUEST_RULES: usize = 64;

/// One sampling entry of the compiled policy.
#[derive(Debug)]
pub(crate) struct CompiledRule {
    target: Box<str>,
    pub(super) scope: Scope,
    pub(crate) counters: Arc<RuleCounters>,
    /// For request rules: the bit of this rule in a request's decision masks.
    pub(crate) request_bit: Option<u32>,
}

impl CompiledRule {
    /// The span name that marks a request for this rule (`None`: the outermost span).
    pub(crate) fn request_span(&self) -> Option<&str> {
        match &self.scope {
            Scope::Request { span } => span.as_deref(),
            Scope::Event => None,
        }
    }
}

/// The policy as the event path reads it: flat tables, longest target first.
#[derive(Debug)]
pub(crate) struct Compiled {
    default: Level,
    /// Sorted by descending length, so the first match is the longest.
    targets: Box<[(Box<str>, Level)]>,
    /// The most verbose level, `when` entries included.
    pub(super) max_level: Level,
    /// The most verbose level outside any condition (the hint while they are dormant).
    pub(super) base_max_level: Level,
    pub(crate) always_keep: Level,
    /// Sorted by descending target length.
    rules: Box<[CompiledRule]>,
    pub(crate) has_request_rules: bool,
    pub(crate) burst: Option<Burst>,
    pub(crate) max_bytes_per_second: Option<u64>,
    pub(crate) effective: EffectivePolicy,
    pub(crate) generation: u64,
    /// What outputs redact (numbered; the same `Arc` as the previous policy's when the
    /// redaction did not change).
    pub(crate) redaction: Arc<RedactionSet>,
    /// The conditions of the `when` entries, with their bits.
    pub(crate) conditions: Box<[Condition]>,
    /// `when` entries: target, level, the bits of the conditions it applies under;
    /// sorted by descending target length (then priority), so the first match is the
    /// longest.
    when_targets: Box<[(Box<str>, Level, u64)]>,
    /// Event sampling under conditions, sorted by descending target length (then
    /// priority): under a condition, the first that matches a target replaces its rule.
    when_rules: Box<[WhenRule]>,
    /// Every bit of `conditions`.
    pub(crate) when_any: u64,
    /// Recording rules: target and the most verbose level recorded, sorted by descending
    /// target length, so the first match is the longest.
    records: Box<[(Box<str>, Level)]>,
}

/// An event sampling rule that applies under a condition.
#[derive(Debug)]
struct WhenRule {
    target: Box<str>,
    when: Arc<crate::policy::When>,
    bits: u64,
    counters: Arc<RuleCounters>,
}

impl Compiled {
    pub(super) fn new(
        policy: &Policy,
        now: SystemTime,
        generation: u64,
        prev: Option<&Compiled>,
        stats: &Arc<StatsCells>,
    ) -> Self {
        let effective = policy.effective_at(now);
        let d = &effective.directives;
        let default = d.default_level.unwrap_or(FALLBACK_LEVEL);
        let targets = longest_first(&d.targets);
        let conditions = when::assign(
            &d.when
                .iter()
                .map(|e| &e.when)
                .chain(d.when_sampling.iter().map(|r| &r.when))
                .collect::<Vec<_>>(),
        )
        .into_boxed_slice();
        let mut when_targets: Vec<(Box<str>, Level, u64)> = d
            .when
            .iter()
            .filter_map(|e| {
                let c = conditions.iter().find(|c| *c.when == e.when)?;
                Some((Box::from(e.target.as_str()), e.level, c.bit))
            })
            .collect();
        // Stable: equal lengths keep the priority order of the effective policy.
        when_targets.sort_by_key(|e| std::cmp::Reverse(e.0.len()));
        let mut when_rules: Vec<WhenRule> = d
            .when_sampling
            .iter()
            .filter_map(|r| {
                let c = conditions.iter().find(|c| *c.when == r.when)?;
                let n = u64::from(r.keep_one_in.get());
                // Keep counting where the previous policy left off when a rule is unchanged.
                let counters = prev
                    .and_then(|p| {
                        p.when_rules.iter().find(|w| {
                            *w.target == *r.target.as_str()
                                && *w.when == r.when
                                && w.counters.n == n
                        })
                    })
                    .map(|w| w.counters.clone())
                    .unwrap_or_else(|| RuleCounters::new(n, true, stats));
                Some(WhenRule {
                    target: Box::from(r.target.as_str()),
                    when: c.when.clone(),
                    bits: c.bit,
                    counters,
                })
            })
            .collect();
        when_rules.sort_by_key(|r| std::cmp::Reverse(r.target.len()));
        let when_any = conditions.iter().fold(0, |m, c| m | c.bit);
        let records = longest_first(&d.record);
        // Recorded events must reach the output: tracing's hint covers their levels.
        let base_max_level = targets
            .iter()
            .chain(records.iter())
            .map(|(_, l)| *l)
            .fold(default, Level::max);
        let max_level = when_targets
            .iter()
            .map(|(_, l, _)| *l)
            .fold(base_max_level, Level::max);

        let mut next_bit = 0u32;
        let mut rules: Vec<CompiledRule> = d
            .sampling
            .iter()
            .map(|r| {
                let n = u64::from(r.keep_one_in.get());
                let is_request = matches!(r.scope, Scope::Request { .. });
                // Keep counting where the previous policy left off when a rule is unchanged.
                let counters = prev
                    .and_then(|p| {
                        p.rules.iter().find(|c| {
                            *c.target == *r.target.as_str()
                                && c.scope == r.scope
                                && c.counters.n == n
                        })
                    })
                    .map(|c| c.counters.clone())
                    .unwrap_or_else(|| RuleCounters::new(n, !is_request, stats));
                let request_bit =
                    (is_request && (next_bit as usize) < MAX_REQUEST_RULES).then(|| {
                        next_bit += 1;
                        next_bit - 1
                    });
                CompiledRule {
                    target: Box::from(r.target.as_str()),
                    scope: r.scope.clone(),
                    counters,
                    request_bit,
                }
            })
            .collect();
        rules.sort_by(|a, b| {
            b.target
                .len()
                .cmp(&a.target.len())
                .then_with(|| a.target.cmp(&b.target))
        });
        let redaction = RedactionSet::new(effective.redaction(), prev.map(|p| &p.redaction));
        Compiled {
            redaction,
            default,
            targets,
            max_level,
            base_max_level,
            always_keep: effective.always_keep(),
            has_request_rules: rules.iter().any(|r| r.request_bit.is_some()),
            rules: rules.into_boxed_slice(),
            burst: d.burst,
            max_bytes_per_second: d.max_bytes_per_second.map(|b| b.get()),
            effective,
            generation,
            conditions,
            when_targets: when_targets.into_boxed_slice(),
            when_rules: when_rules.into_boxed_slice(),
            when_any,
            records,
        }
    }

    /// Whether any recording rule is in force.
    #[inline]
    pub(crate) fn records_any(&self) -> bool {
        !self.records.is_empty()
    }

    /// The most verbose level recorded for `target`, if a recording rule names it.
    #[inline]
    fn record_level_for(&self, target: &str) -> Option<Level> {
        self.records
            .iter()
            .find(|(prefix, _)| prefix_matches(prefix, target))
            .map(|(_, l)| *l)
    }

    /// Whether an event callsite of `meta`'s level and target is recorded when the
    /// level in force for it is `in_force` (it is not written, a rule records it).
    #[inline]
    fn recorded_under(&self, meta: &Metadata<'_>, level: Level, in_force: Level) -> bool {
        level > in_force
            && !meta.is_span()
            && self
                .record_level_for(meta.target())
                .is_some_and(|r| level <= r)
    }

    /// Whether this event is recorded rather than written, in a thread whose spans
    /// satisfy the conditions of `mask`.
    #[inline]
    pub(crate) fn records_event(&self, meta: &Metadata<'_>, mask: u64) -> bool {
        let level = Level::of(meta.level());
        self.recorded_under(meta, level, self.level_under(meta.target(), mask))
    }

    /// The sampling rule a `when` entry gives `target` under the conditions of `mask`.
    #[inline]
    fn when_rule_under(&self, target: &str, mask: u64) -> Option<&WhenRule> {
        if mask & self.when_any == 0 {
            return None;
        }
        self.when_rules
            .iter()
            .find(|r| r.bits & mask != 0 && prefix_matches(&r.target, target))
    }

    /// The level of `target` under the conditions of `mask`: the first (longest) `when`
    /// entry that matches it and applies under one of them, else its level.
    #[inline]
    pub(crate) fn level_under(&self, target: &str, mask: u64) -> Level {
        if mask & self.when_any != 0 {
            for (prefix, level, bits) in self.when_targets.iter() {
                if bits & mask != 0 && prefix_matches(prefix, target) {
                    return *level;
                }
            }
        }
        self.level_for(target)
    }

    /// Whether a callsite's verdict may depend on the conditions the thread is in: a
    /// `when` entry names its target and, under it, the callsite's level is enabled
    /// where it otherwise is not, or the other way round.
    pub(super) fn is_conditional(&self, meta: &Metadata<'_>) -> bool {
        if self.when_targets.is_empty() && self.when_rules.is_empty() {
            return false;
        }
        let level = Level::of(meta.level());
        let base = level <= self.level_for(meta.target());
        let sampled = !meta.is_span()
            && !self.keeps_always(meta.level())
            && self
                .when_rules
                .iter()
                .any(|r| prefix_matches(&r.target, meta.target()));
        sampled
            || self.when_targets.iter().any(|(prefix, l, _)| {
                prefix_matches(prefix, meta.target()) && (level <= *l) != base
            })
    }

    #[inline]
    pub(crate) fn level_for(&self, target: &str) -> Level {
        for (prefix, level) in self.targets.iter() {
            if prefix_matches(prefix, target) {
                return *level;
            }
        }
        self.default
    }

    /// The sampling entry governing `target`, if any.
    #[inline]
    pub(crate) fn rule_for(&self, target: &str) -> Option<&CompiledRule> {
        self.rules
            .iter()
            .find(|r| prefix_matches(&r.target, target))
    }

    /// The request rules, for deciding at a span's start.
    pub(crate) fn request_rules(&self) -> impl Iterator<Item = &CompiledRule> {
        self.rules.iter().filter(|r| r.request_bit.is_some())
    }

    /// Whether events of this level are at or above `alwaysKeep`.
    #[inline]
    pub(crate) fn keeps_always(&self, level: &tracing_core::Level) -> bool {
        Level::of(level) <= self.always_keep
    }

    /// Whether the callsite's level is enabled for its target, or recorded.
    #[inline]
    pub(super) fn level_enabled(&self, meta: &Metadata<'_>) -> bool {
        let level = Level::of(meta.level());
        if level > self.max_level {
            return false;
        }
        let in_force = self.level_for(meta.target());
        level <= in_force || self.recorded_under(meta, level, in_force)
    }

    /// What the filter must decide per event for this callsite, in a thread whose spans
    /// satisfy the conditions of `mask`.
    pub(super) fn verdict(
        &self,
        meta: &Metadata<'_>,
        callsite: Option<Arc<CallsiteState>>,
        mask: u64,
    ) -> Verdict {
        let level = Level::of(meta.level());
        let conditional = self.is_conditional(meta);
        if level > self.max_level {
            return Verdict {
                conditional,
                ..Verdict::DISABLED
            };
        }
        let in_force = self.level_under(meta.target(), mask);
        if level > in_force {
            // Not written: recorded (neither sampled nor limited), or disabled.
            let recorded = self.recorded_under(meta, level, in_force);
            return Verdict {
                conditional,
                ..if recorded {
                    Verdict::ENABLED
                } else {
                    Verdict::DISABLED
                }
            };
        }
        if meta.is_span() || self.keeps_always(meta.level()) {
            return Verdict {
                conditional,
                ..Verdict::ENABLED
            };
        }
        let rule = match self.when_rule_under(meta.target(), mask) {
            // Under a condition, its rule replaces the target's (1 in 1: keeps all).
            Some(r) => (r.counters.n > 1).then(|| r.counters.clone()),
            None => self
                .rule_for(meta.target())
                .filter(|r| {
                    r.request_bit.is_none() && matches!(r.scope, Scope::Event) && r.counters.n > 1
                })
                .map(|r| r.counters.clone()),
        };
        let burst = match (self.burst, callsite) {
            (Some(b), Some(c)) => Some((b, c)),
            _ => None,
        };
        Verdict {
            enabled: true,
            rule,
            burst,
            conditional,
        }
    }
}

/// A table of targets and levels, sorted by descending target length (then name), so
/// that the first match is the longest.
fn longest_first(entries: &[(crate::policy::Target, Level)]) -> Box<[(Box<str>, Level)]> {
    let mut out: Vec<(Box<str>, Level)> = entries
        .iter()
        .map(|(t, l)| (Box::from(t.as_str()), *l))
        .collect();
    out.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
    out.into_boxed_slice()
}

/// What a linked [`FormatLayer`](crate::FormatLayer) needs of the policy on every event,
/// mirrored from the compiled policy into one word: `alwaysKeep`, and whether request
/// rules or a byte budget are in force (only then does the event path load the policy).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EventPath(pub(super) u64);

impl EventPath {
    const REQUEST_RULES: u64 = 1 << 8;
    const BUDGET: u64 = 1 << 9;
    const REDACT_VALUES: u64 = 1 << 10;
    const RECORD: u64 = 1 << 11;
    const RECORD_FLOOR_SHIFT: u32 = 12;

    pub(super) fn of(c: &Compiled) -> Self {
        let mut bits = c.always_keep as u64 | u64::from(c.redaction.id) << 32;
        if c.redaction.redaction.redacts_values() {
            bits |= Self::REDACT_VALUES;
        }
        if c.has_request_rules {
            bits |= Self::REQUEST_RULES;
        }
        if c.max_bytes_per_second.is_some() {
            bits |= Self::BUDGET;
        }
        if c.records_any() {
            // Events no more verbose than every level in force are written everywhere:
            // they are never recorded, and need not load the policy for it.
            let floor = c
                .targets
                .iter()
                .map(|(_, l)| *l)
                .fold(c.default, Level::min);
            bits |= Self::RECORD | (floor as u64) << Self::RECORD_FLOOR_SHIFT;
        }
        EventPath(bits)
    }

    /// Whether events of this level are at or above `alwaysKeep`.
    #[inline]
    pub(crate) fn keeps_always(self, level: &tracing_core::Level) -> bool {
        Level::of(level) as u64 <= self.0 & 0xff
    }

    /// Whether the event path must read the compiled policy.
    #[inline]
    pub(crate) fn needs_compiled(self) -> bool {
        self.0 & (Self::REQUEST_RULES | Self::BUDGET | Self::RECORD) != 0
    }

    /// Whether request rules or a byte budget are in force.
    #[inline]
    pub(crate) fn limits_events(self) -> bool {
        self.0 & (Self::REQUEST_RULES | Self::BUDGET) != 0
    }

    /// Whether an event of this level may be recorded: a recording rule is in force and
    /// the level is more verbose than some level in force.
    #[inline]
    pub(crate) fn may_record(self, level: &tracing_core::Level) -> bool {
        self.0 & Self::RECORD != 0
            && Level::of(level) as u64 > (self.0 >> Self::RECORD_FLOOR_SHIFT) & 0x7
    }

    /// The redaction in force.
    #[inline]
    pub(crate) fn redaction(self) -> ActiveRedaction {
        ActiveRedaction {
            id: (self.0 >> 32) as u32,
            values: self.0 & Self::REDACT_VALUES != 0,
        }
    }
}
