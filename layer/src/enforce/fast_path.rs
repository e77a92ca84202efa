//! The event path of a filter: per registered callsite, the last verdict in one word of
//! a process-wide lock-free table, and behind it a per-thread cache of verdicts.

use std::cell::RefCell;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tracing_core::Metadata;

use super::filter::Shared;
use super::limits::{BurstDecision, BurstWindow, Notice};
use super::stats::{Reason, RuleCounters, StatsCells};
use super::when;
use crate::ledger::{self, Col, RowId};
use crate::level::Level;
use crate::policy::Burst;
use crate::sites::{self, WordSlot};

/// Per-callsite state that outlives policy changes: the burst window.
#[derive(Debug)]
pub(super) struct CallsiteState {
    pub(super) meta: &'static Metadata<'static>,
    pub(super) burst: BurstWindow,
}

/// The per-event decision for one callsite under one compiled policy.
#[derive(Debug, Clone)]
pub(super) struct Verdict {
    pub(super) enabled: bool,
    pub(super) rule: Option<Arc<RuleCounters>>,
    pub(super) burst: Option<(Burst, Arc<CallsiteState>)>,
    /// A `when` entry may change it for a thread in a matching span.
    pub(super) conditional: bool,
}

impl Verdict {
    pub(super) const DISABLED: Verdict = Verdict {
        enabled: false,
        rule: None,
        burst: None,
        conditional: false,
    };
    pub(super) const ENABLED: Verdict = Verdict {
        enabled: true,
        rule: None,
        burst: None,
        conditional: false,
    };
}

/// The lock-free event path: per registered callsite, the verdict of the last filter
/// and policy generation that decided it, in one word, inline in a process-wide table
/// ([`sites::Words`]). An event whose callsite's word is for this filter and its current
/// generation (the filter's [`tag`]) is decided by the word alone: disabled,
/// disabled unless the thread is in a span that satisfies a condition, enabled, or
/// sampled by the rule in slot `slot` of the filter's rule table (one atomic add; a
/// sampled word also carries the callsite's ledger row, where an event sampled out is
/// counted without looking the row up).
/// Anything else (no word yet, another filter's or an older policy's word, a burst
/// limit) takes the cached path.
static SITE_VERDICTS: [WordSlot; 4096] = [const { WordSlot::free() }; 4096];

/// Rules of a filter that the lock-free path can reach (more take the cached path): the
/// 8 bits of a word's rule slot.
pub(super) const RULE_SLOTS: usize = 256;

/// `generation (22 bits) | filter (20) | ledger row (12) | rule slot (8) | kind (2)`:
/// truncated ids, so a stale word could pass only after 2^22 policy changes or 2^20
/// filters between two events of a callsite, and would then only misjudge that
/// callsite. The row is set in sampled words only (0 there: look it up, as for a `log`
/// bridge callsite, whose rows are per record); every other word has 0 in its place.
struct FastWord;

impl FastWord {
    const DISABLED: u64 = 1;
    const ENABLED: u64 = 2;
    const SAMPLED: u64 = 3;
    /// Disabled with slot 1: unless the thread is in a span that satisfies a condition.
    const CONDITIONAL: u64 = (1 << 2) | Self::DISABLED;

    /// Bits below the tag: row, slot and kind.
    const LOW: u32 = 22;

    /// The word of `kind`, rule slot `slot` and ledger row index `row` under `tag`.
    fn word(tag: u64, kind: u64, slot: usize, row: usize) -> u64 {
        tag | ((row as u64 & 0xfff) << 10) | ((slot as u64 & 0xff) << 2) | kind
    }
}

/// The high bits of the event path's words of `filter` under `generation` (kept by the
/// filter as it installs a policy, so the event path loads it instead of computing it;
/// it also keys the per-thread cache).
pub(super) fn tag(filter: usize, generation: u64) -> u64 {
    ((generation & 0x3f_ffff) << 42) | ((filter as u64 & 0xf_ffff) << FastWord::LOW)
}

/// How little verbose a level is: 0 for `TRACE` to 4 for `ERROR` (the order of
/// `tracing`'s own representation, so that the event path's compare is one
/// instruction).
#[inline(always)]
fn quietness(level: &tracing_core::Level) -> u8 {
    Level::Trace as u8 - Level::of(level) as u8
}

/// The [`quietness`] below which events are disabled outside every condition, under a
/// policy whose most verbose unconditional level is `max`.
pub(super) fn quiet_below(max: Level) -> u8 {
    Level::Trace as u8 - max as u8
}

/// A per-thread, direct-mapped cache of verdicts, keyed by (filter and generation as one
/// [`tag`], callsite): a sampled callsite's decision costs a thread-local lookup and one
/// counter, with no string matching and no shared load beyond the tag.
struct CachedVerdict {
    tag: u64,
    meta: usize,
    /// The conditions the thread's spans satisfied.
    mask: u64,
    verdict: Verdict,
}

const CACHE_SLOTS: usize = 64;

thread_local! {
    static VERDICTS: RefCell<[Option<CachedVerdict>; CACHE_SLOTS]> = const { RefCell::new([const { None }; CACHE_SLOTS]) };
}

#[inline]
fn slot_of(meta: usize) -> usize {
    ((meta >> 4) ^ (meta >> 12)) % CACHE_SLOTS
}

impl Shared {
    /// Whether the current policy lets this event or span through (see
    /// [`PolicyFilter::enabled`]).
    #[inline]
    pub(super) fn enabled(&self, meta: &Metadata<'_>) -> bool {
        // Outside every condition nothing is enabled above the unconditional levels:
        // a named target's `debug!` in another customer's request stops here, at the
        // cost of a level compare and the thread's mask.
        if quietness(meta.level()) < self.quiet_below.load(Ordering::Acquire)
            && when::current_mask() == 0
        {
            return false;
        }
        let tag = self.fast_tag.load(Ordering::Acquire);
        let key = meta as *const Metadata<'_> as usize;
        // Only registered (static) callsites have a word: a key is an identity.
        if let Some(word) = sites::find_word(&SITE_VERDICTS, key) {
            // Of this filter and generation: only the low 22 bits (row, slot and kind) left.
            let w = word.load(Ordering::Acquire) ^ tag;
            // Ifs, not a match: the common words first, each one compare.
            if w == FastWord::DISABLED {
                return false;
            }
            if w == FastWord::CONDITIONAL {
                // A `when` entry names the callsite's target: enabled only in a span
                // that satisfies a condition.
                if when::current_mask() == 0 {
                    return false;
                }
            } else if w == FastWord::ENABLED {
                return true;
            } else if w < 1 << FastWord::LOW && w & 3 == FastWord::SAMPLED {
                // `% RULE_SLOTS`: a slot of the word is below it, no bounds check.
                let slot = (w >> 2) as usize % RULE_SLOTS;
                if let Some(rule) = self.rules[slot].get() {
                    if rule.keep(meta.level()) {
                        return true;
                    }
                    self.sampled_out_in((w >> 10) as usize, meta);
                    return false;
                }
            }
        }
        self.enabled_cached(meta, key, tag)
    }

    /// [`enabled`](Self::enabled) through the per-thread verdict cache (`current`: the
    /// filter's tag as the lock-free path read it); publishes the verdict for the
    /// lock-free path when it can take it.
    #[inline(never)]
    fn enabled_cached(&self, meta: &Metadata<'_>, key: usize, current: u64) -> bool {
        // The thread's conditions matter only while this filter has some.
        let mask = if self.when_any.load(Ordering::Relaxed) != 0 {
            when::current_mask()
        } else {
            0
        };
        VERDICTS.with(|cache| {
            let Ok(mut cache) = cache.try_borrow_mut() else {
                return self.decide(&self.verdict_uncached(meta, mask).0, meta);
            };
            let slot = &mut cache[slot_of(key)];
            if let Some(c) = slot {
                if c.tag == current && c.meta == key && c.mask == mask {
                    return self.decide(&c.verdict, meta);
                }
            }
            let (verdict, generation, cacheable) = self.verdict_uncached(meta, mask);
            let out = self.decide(&verdict, meta);
            if cacheable {
                // The policy the verdict was decided under (maybe newer than `current`).
                let tag = tag(self.id, generation);
                if mask == 0 {
                    self.publish(meta, key, &verdict, tag);
                }
                *slot = Some(CachedVerdict {
                    tag,
                    meta: key,
                    mask,
                    verdict,
                });
            }
            out
        })
    }

    /// Gives the lock-free path `verdict` for the callsite at `key` (registered, static),
    /// decided under the policy of `tag` outside any condition, unless it needs more than one
    /// word (a burst limit, or a rule beyond the filter's rule slots). A callsite a
    /// `when` entry may enable is published as disabled with slot 1: the lock-free path
    /// then reads the thread's conditions; one it may disable is not published.
    #[cold]
    fn publish(&self, meta: &Metadata<'_>, key: usize, verdict: &Verdict, tag: u64) {
        let (kind, slot, row) = if !verdict.enabled {
            (FastWord::DISABLED, usize::from(verdict.conditional), 0)
        } else if verdict.conditional || verdict.burst.is_some() {
            return;
        } else if let Some(rule) = &verdict.rule {
            match self.rule_slot(rule) {
                // The row where its events sampled out are counted (0: looked up).
                Some(slot) => (
                    FastWord::SAMPLED,
                    slot,
                    ledger::fixed_row(meta).map_or(0, |r| r.index()),
                ),
                None => return,
            }
        } else {
            (FastWord::ENABLED, 0, 0)
        };
        if let Some(site) = sites::find_or_insert_word(&SITE_VERDICTS, key) {
            site.store(FastWord::word(tag, kind, slot, row), Ordering::Release);
        }
    }

    /// `rule`'s slot in this filter's rule table, given on first use.
    fn rule_slot(&self, rule: &Arc<RuleCounters>) -> Option<usize> {
        if let Some(&slot) = rule.fast_slot.get() {
            return Some(slot);
        }
        let slot = self.next_rule.fetch_add(1, Ordering::AcqRel);
        let cell = self.rules.get(slot)?;
        let _ = cell.set(rule.clone());
        // Another thread may have given the rule a slot meanwhile: one of the two is
        // used, the other holds the same counters.
        Some(*rule.fast_slot.get_or_init(|| slot))
    }

    /// Computes the verdict from the compiled policy; cacheable only for callsites
    /// registered with the filter (their metadata is static, so its address is an identity).
    #[cold]
    fn verdict_uncached(&self, meta: &Metadata<'_>, mask: u64) -> (Verdict, u64, bool) {
        let compiled = self.compiled.load();
        let callsite = self
            .callsites
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(meta as *const Metadata<'_> as usize))
            .cloned();
        let cacheable = callsite.is_some();
        (
            compiled.verdict(meta, callsite, mask),
            compiled.generation,
            cacheable,
        )
    }

    /// Counts an event of `meta` sampled out in its callsite's ledger row (out of line:
    /// the path that keeps the event stays as short as it was).
    #[inline(never)]
    fn sampled_out(&self, meta: &Metadata<'_>) {
        self.ledger.add(
            ledger::row_of(meta),
            Col::policy(Reason::Sampled as usize),
            1,
        );
    }

    /// [`sampled_out`](Self::sampled_out) with the row index the callsite's word carries
    /// (0: none, looked up).
    #[inline(always)]
    fn sampled_out_in(&self, row: usize, meta: &Metadata<'_>) {
        // No row: looked up out of line, so the common way saves no register for it.
        match row {
            0 => self.sampled_out(meta),
            i => self.ledger.add(
                RowId::from_index(i),
                Col::policy(Reason::Sampled as usize),
                1,
            ),
        }
    }

    #[inline]
    fn decide(&self, v: &Verdict, meta: &Metadata<'_>) -> bool {
        if !v.enabled {
            return false;
        }
        if let Some(rule) = &v.rule {
            if !rule.keep(meta.level()) {
                self.sampled_out(meta);
                return false;
            }
        }
        if let Some((burst, callsite)) = &v.burst {
            let second = self.clock.unix_seconds();
            let (decision, summary) = callsite.burst.admit(second, *burst);
            if let Some(summary) = summary {
                self.notices.push(Notice::BurstEnded {
                    meta: callsite.meta,
                    summary,
                });
            }
            if let BurstDecision::Drop { first } = decision {
                StatsCells::add(&self.stats.burst, meta.level(), 1);
                let row = ledger::row_of_static(callsite.meta);
                self.ledger.add(row, Col::policy(Reason::Burst as usize), 1);
                if first {
                    self.notices.push(Notice::BurstStarted {
                        meta: callsite.meta,
                        burst: *burst,
                    });
                }
                return false;
            }
        }
        true
    }
}
