//! The filter: enforces the effective policy, reloads at runtime, expires layers.
//!
//! # Cost model
//!
//! `tracing` asks a subscriber about each callsite three ways, cheapest first, and this
//! filter answers each from one pre-compiled policy that it swaps atomically:
//!
//! 1. **`register_callsite`**, once per callsite (and again after every policy change):
//!    the filter matches the callsite's target against the compiled table (longest
//!    `::`-boundary prefix) and answers [`Interest::always`] or [`Interest::never`].
//!    `tracing` caches that answer in the callsite itself.
//! 2. **The max-level hint**: `tracing` compares an event's level against the most
//!    verbose level any target is set to before it looks at the callsite at all.
//! 3. **`enabled`**, per event, only for callsites whose interest is `sometimes` (another
//!    layer asked for it, or a `log` record bridged without a callsite): one atomic load
//!    of the compiled policy, a comparison with its max level, then the prefix match.
//!    No lock, no allocation.
//!
//! 4. **Sampled callsites** (an event below `alwaysKeep` whose target has an event-scope
//!    sampling rule, or any event below `alwaysKeep` when a burst limit is set) get
//!    [`Interest::sometimes`], and are decided per event in `enabled`, before any field
//!    is evaluated: one word per callsite in a process-wide lock-free table says which
//!    filter and policy generation decided it and how (so no string matching and no
//!    reference counting), then one shared counter increment (`keep one in N` is a
//!    counter, not a dice roll; its divisibility test needs no division). A burst limit,
//!    or a callsite whose word is another filter's or an older policy's, goes through a
//!    per-thread cache of verdicts instead, and a burst limit adds one atomic on the
//!    callsite's window. An event sampled out costs no formatting: about 7.5 ns in all
//!    (`cargo bench -p logpolicy --bench sampling`).
//!
//! So a **disabled callsite** costs what `tracing`'s static filtering costs: a
//! relaxed load of the global max level, or of the callsite's cached interest (~1 ns).
//! An **enabled callsite** costs nothing in this filter: the event goes straight to the
//! layers that write it. A **reloaded policy** costs one rebuild of `tracing`'s interest
//! cache per change (proportional to the number of callsites, done on the thread that
//! changed the policy); after it, callsites the new policy disables are back to ~1 ns
//! and callsites it enables emit at once. Nothing is paid per event for reloadability,
//! unlike `tracing_subscriber::reload`, which takes a read lock in every callback.
//!
//! # Expiry
//!
//! A layer with an `expires_at` stops applying at that instant. With the system clock,
//! the filter keeps a small timer thread (`logpolicy-expiry`, started the first time a
//! policy has an expiry) that wakes at the next expiry and recompiles: a temporary raise
//! ends on time even if nothing ever talks to the process again. With an injected
//! [`Clock`], time moves only when the test moves it, and
//! [`PolicyHandle::refresh`] re-evaluates the policy at the clock's time.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock, Weak};
use std::thread::Thread;
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use tracing_core::metadata::LevelFilter;
use tracing_core::subscriber::Interest;
use tracing_core::{Metadata, Subscriber};
use tracing_subscriber::layer::{self, Context};

use crate::clock::{Clock, SystemClock};
use crate::level::Level;
use crate::limits::{Budget, BurstDecision, BurstWindow, Notice, Notices};
use crate::policy::{
    prefix_matches, Burst, DirectiveError, Directives, EffectivePolicy, Policy, PolicyError,
    PolicyLayer, Scope,
};
use crate::sites::{self, Site};
use crate::stats::{RuleCounters, Stats, StatsCells};

/// The most request-scope rules the effective policy applies (a request's decisions are
/// a 64-bit mask); further request rules keep everything.
pub(crate) const MAX_REQUEST_RULES: usize = 64;

/// One sampling entry of the compiled policy.
#[derive(Debug)]
pub(crate) struct CompiledRule {
    target: Box<str>,
    scope: Scope,
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
    max_level: Level,
    pub(crate) always_keep: Level,
    /// Sorted by descending target length.
    rules: Box<[CompiledRule]>,
    pub(crate) has_request_rules: bool,
    pub(crate) burst: Option<Burst>,
    pub(crate) max_bytes_per_second: Option<u64>,
    pub(crate) effective: EffectivePolicy,
    pub(crate) generation: u64,
}

impl Compiled {
    fn new(
        policy: &Policy,
        now: SystemTime,
        generation: u64,
        prev: Option<&Compiled>,
        stats: &Arc<StatsCells>,
    ) -> Self {
        let effective = policy.effective_at(now);
        let d = &effective.directives;
        let default = d.default_level.unwrap_or(crate::policy::FALLBACK_LEVEL);
        let mut targets: Vec<(Box<str>, Level)> = d
            .targets
            .iter()
            .map(|(t, l)| (Box::from(t.as_str()), *l))
            .collect();
        targets.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
        let max_level = targets.iter().map(|(_, l)| *l).fold(default, Level::max);

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
        Compiled {
            default,
            targets: targets.into_boxed_slice(),
            max_level,
            always_keep: effective.always_keep(),
            has_request_rules: rules.iter().any(|r| r.request_bit.is_some()),
            rules: rules.into_boxed_slice(),
            burst: d.burst,
            max_bytes_per_second: d.max_bytes_per_second.map(|b| b.get()),
            effective,
            generation,
        }
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

    #[inline]
    fn level_enabled(&self, meta: &Metadata<'_>) -> bool {
        let level = Level::of(meta.level());
        level <= self.max_level && level <= self.level_for(meta.target())
    }

    /// What the filter must decide per event for this callsite.
    fn verdict(&self, meta: &Metadata<'_>, callsite: Option<Arc<CallsiteState>>) -> Verdict {
        if !self.level_enabled(meta) {
            return Verdict::DISABLED;
        }
        if meta.is_span() || self.keeps_always(meta.level()) {
            return Verdict::ENABLED;
        }
        let rule = self
            .rule_for(meta.target())
            .filter(|r| {
                r.request_bit.is_none() && matches!(r.scope, Scope::Event) && r.counters.n > 1
            })
            .map(|r| r.counters.clone());
        let burst = match (self.burst, callsite) {
            (Some(b), Some(c)) => Some((b, c)),
            _ => None,
        };
        Verdict {
            enabled: true,
            rule,
            burst,
        }
    }
}

/// What a linked [`FormatLayer`](crate::FormatLayer) needs of the policy on every event,
/// mirrored from the compiled policy into one word: `alwaysKeep`, and whether request
/// rules or a byte budget are in force (only then does the event path load the policy).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EventPath(u32);

impl EventPath {
    const REQUEST_RULES: u32 = 1 << 8;
    const BUDGET: u32 = 1 << 9;

    fn of(c: &Compiled) -> Self {
        let mut bits = c.always_keep as u32;
        if c.has_request_rules {
            bits |= Self::REQUEST_RULES;
        }
        if c.max_bytes_per_second.is_some() {
            bits |= Self::BUDGET;
        }
        EventPath(bits)
    }

    /// Whether events of this level are at or above `alwaysKeep`.
    #[inline]
    pub(crate) fn keeps_always(self, level: &tracing_core::Level) -> bool {
        Level::of(level) as u32 <= self.0 & 0xff
    }

    /// Whether the event path must read the compiled policy.
    #[inline]
    pub(crate) fn needs_compiled(self) -> bool {
        self.0 & (Self::REQUEST_RULES | Self::BUDGET) != 0
    }
}

/// Per-callsite state that outlives policy changes: the burst window.
#[derive(Debug)]
pub(crate) struct CallsiteState {
    meta: &'static Metadata<'static>,
    burst: BurstWindow,
}

/// The per-event decision for one callsite under one compiled policy.
#[derive(Debug, Clone)]
struct Verdict {
    enabled: bool,
    rule: Option<Arc<RuleCounters>>,
    burst: Option<(Burst, Arc<CallsiteState>)>,
}

impl Verdict {
    const DISABLED: Verdict = Verdict {
        enabled: false,
        rule: None,
        burst: None,
    };
    const ENABLED: Verdict = Verdict {
        enabled: true,
        rule: None,
        burst: None,
    };
}

/// The lock-free event path: per registered callsite, the verdict of the last filter
/// and policy generation that decided it, in one word, in a process-wide table
/// ([`sites`]). An event whose callsite's word is for this filter and its current
/// generation is decided by the word alone: disabled, enabled, or sampled by the rule in
/// slot `slot` of the filter's rule table (one atomic add). Anything else (no word yet,
/// another filter's or an older policy's word, a burst limit) takes the cached path.
struct SiteVerdict {
    key: usize,
    word: AtomicU64,
}

impl Site for SiteVerdict {
    fn key(&self) -> usize {
        self.key
    }
}

static SITE_VERDICTS: [OnceLock<&'static SiteVerdict>; 4096] = [const { OnceLock::new() }; 4096];

/// Rules of a filter that the lock-free path can reach (more take the cached path).
const RULE_SLOTS: usize = 256;

/// `generation (24 bits) | filter (24) | rule slot (14) | kind (2)`: truncated ids, so a
/// stale word could pass only after 2^24 filters or policy changes between two events of
/// a callsite, and would then only misjudge that callsite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FastWord(u64);

impl FastWord {
    const DISABLED: u64 = 1;
    const ENABLED: u64 = 2;
    const SAMPLED: u64 = 3;

    #[inline]
    fn tag(filter: usize, generation: u64) -> u64 {
        ((generation & 0xff_ffff) << 40) | ((filter as u64 & 0xff_ffff) << 16)
    }

    fn new(filter: usize, generation: u64, kind: u64, slot: usize) -> Self {
        FastWord(Self::tag(filter, generation) | ((slot as u64 & 0x3fff) << 2) | kind)
    }

    #[inline]
    fn kind_for(self, tag: u64) -> u64 {
        if self.0 & !0xffff == tag {
            self.0 & 3
        } else {
            0
        }
    }

    #[inline]
    fn slot(self) -> usize {
        ((self.0 >> 2) & 0x3fff) as usize
    }
}

/// A per-thread, direct-mapped cache of verdicts, keyed by (filter, callsite,
/// generation): a sampled callsite's decision costs a thread-local lookup and one
/// counter, with no string matching and no shared load beyond the generation.
struct CachedVerdict {
    filter: usize,
    meta: usize,
    generation: u64,
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

struct State {
    policy: Policy,
}

/// Gives every filter a distinct id for the verdict cache (an address could be reused).
static NEXT_FILTER_ID: AtomicU64 = AtomicU64::new(1);

struct Shared {
    /// This filter's id in the verdict cache.
    id: usize,
    compiled: ArcSwap<Compiled>,
    /// The generation of `compiled`, published after it is stored.
    generation: AtomicU64,
    /// [`EventPath`] of `compiled`, published after it is stored.
    event_path: AtomicU32,
    state: Mutex<State>,
    clock: Arc<dyn Clock>,
    stats: Arc<StatsCells>,
    /// Callsites registered with the filter (static metadata only): their burst state.
    callsites: RwLock<HashMap<usize, Arc<CallsiteState>>>,
    /// Sampling rules the lock-free path reaches by slot (kept for the filter's life, so
    /// their counts stay in the stats as those of live rules).
    rules: Box<[OnceLock<Arc<RuleCounters>>]>,
    next_rule: AtomicUsize,
    notices: Notices,
    budget: Budget,
    /// Whether this filter runs its own expiry timer (system clock only).
    own_timer: bool,
    timer_started: AtomicBool,
    timer: OnceLock<Thread>,
}

/// A `tracing-subscriber` filter that enforces a [`Policy`], usable as a global
/// [`Layer`](tracing_subscriber::Layer) or as a per-layer
/// [`Filter`](tracing_subscriber::layer::Filter); its [`PolicyHandle`] changes the
/// policy at runtime from any thread.
///
/// Clones share the same policy.
///
/// # Examples
///
/// As a global layer, with the policy changed at runtime:
///
/// ```
/// use logpolicy::PolicyFilter;
/// use tracing_subscriber::prelude::*;
///
/// let filter = PolicyFilter::from_directives("info,noisy=warn").unwrap();
/// let handle = filter.handle();
/// let subscriber = tracing_subscriber::registry().with(filter);
/// tracing::subscriber::with_default(subscriber, || {
///     assert!(tracing::enabled!(tracing::Level::INFO));
///     assert!(!tracing::enabled!(target: "noisy", tracing::Level::INFO));
///     handle.set_directives("info,noisy=debug").unwrap();
///     assert!(tracing::enabled!(target: "noisy", tracing::Level::INFO));
///     assert!(!tracing::enabled!(tracing::Level::DEBUG));
/// });
/// ```
///
/// As a per-layer filter, so it governs one output and not another:
///
/// ```
/// use logpolicy::PolicyFilter;
/// use tracing_subscriber::{prelude::*, filter::LevelFilter};
///
/// let subscriber = tracing_subscriber::registry()
///     .with(tracing_subscriber::fmt::layer().with_writer(std::io::sink)
///         .with_filter(PolicyFilter::from_directives("warn,shop::payment=debug").unwrap()))
///     .with(tracing_subscriber::fmt::layer().with_writer(std::io::sink)
///         .with_filter(LevelFilter::TRACE));
/// tracing::subscriber::with_default(subscriber, || tracing::debug!(target: "shop::payment", "kept"));
/// ```
#[derive(Clone)]
pub struct PolicyFilter {
    shared: Arc<Shared>,
}

/// Changes a [`PolicyFilter`]'s policy from any thread.
///
/// Every change is validated before it takes effect (the previous policy stays on any
/// error), compiled once, swapped in atomically, and followed by a rebuild of
/// `tracing`'s interest cache and max-level hint.
///
/// Install the subscriber as the global default (as [`init`](crate::init) does) when
/// changes come from other threads: when the only subscriber in the process is a
/// *scoped* one (`tracing::subscriber::with_default`), `tracing` rebuilds its interest
/// cache against the default of the thread that made the change, which on another
/// thread is no subscriber at all.
#[derive(Clone)]
pub struct PolicyHandle {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for PolicyFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyFilter")
            .field(
                "effective",
                &self.shared.compiled.load().effective.directives.to_string(),
            )
            .finish()
    }
}

impl std::fmt::Debug for PolicyHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyHandle")
            .field("generation", &self.generation())
            .finish()
    }
}

impl PolicyFilter {
    /// A filter for `policy`, on the system clock.
    pub fn new(policy: Policy) -> Self {
        Self::build(policy, Arc::new(SystemClock), true)
    }

    /// A filter for `policy` that reads time from `clock`. No timer thread is started:
    /// call [`PolicyHandle::refresh`] after moving the clock.
    ///
    /// # Examples
    ///
    /// ```
    /// use logpolicy::{clock::{Clock, ManualClock}, Level, Policy, PolicyFilter, PolicyLayer};
    /// use std::time::{Duration, SystemTime};
    ///
    /// let clock = ManualClock::new(SystemTime::now());
    /// let raise = PolicyLayer::new("ns/raise", 1, "debug".parse().unwrap()).unwrap()
    ///     .expires_at(clock.now() + Duration::from_secs(900));
    /// let filter = PolicyFilter::with_clock(
    ///     Policy::new(vec![PolicyLayer::baseline("info".parse().unwrap()), raise]),
    ///     clock.clone(),
    /// );
    /// let handle = filter.handle();
    /// assert_eq!(handle.effective().level_for("app"), Level::Debug);
    /// clock.advance(Duration::from_secs(900));
    /// assert!(handle.refresh());
    /// assert_eq!(handle.effective().level_for("app"), Level::Info);
    /// ```
    pub fn with_clock(policy: Policy, clock: impl Clock) -> Self {
        Self::build(policy, Arc::new(clock), false)
    }

    /// A filter whose only layer is the baseline parsed from `directives`.
    pub fn from_directives(directives: &str) -> Result<Self, DirectiveError> {
        let d: Directives = directives.parse()?;
        Ok(Self::new(Policy::new(vec![PolicyLayer::baseline(d)])))
    }

    fn build(policy: Policy, clock: Arc<dyn Clock>, own_timer: bool) -> Self {
        let stats = Arc::new(StatsCells::default());
        let compiled = Compiled::new(&policy, clock.now(), 0, None, &stats);
        let shared = Arc::new(Shared {
            id: NEXT_FILTER_ID.fetch_add(1, Ordering::Relaxed) as usize,
            event_path: AtomicU32::new(EventPath::of(&compiled).0),
            compiled: ArcSwap::from_pointee(compiled),
            generation: AtomicU64::new(0),
            state: Mutex::new(State { policy }),
            clock,
            stats,
            callsites: RwLock::new(HashMap::new()),
            rules: (0..RULE_SLOTS).map(|_| OnceLock::new()).collect(),
            next_rule: AtomicUsize::new(0),
            notices: Notices::default(),
            budget: Budget::new(),
            own_timer,
            timer_started: AtomicBool::new(false),
            timer: OnceLock::new(),
        });
        // No interest rebuild here: no subscriber uses this filter yet, and registering
        // the `Dispatch` that will asks it about every callsite. (Rebuilding now could
        // even be wrong: with a single scoped dispatcher alive, tracing rebuilds against
        // *this* thread's default.)
        if shared.compiled.load().effective.next_expiry.is_some() {
            shared.arm_timer();
        }
        PolicyFilter { shared }
    }

    /// A handle that changes this filter's policy.
    pub fn handle(&self) -> PolicyHandle {
        PolicyHandle {
            shared: self.shared.clone(),
        }
    }

    /// Whether the current policy lets this event or span through: its level is
    /// enabled for its target and, for an event below `alwaysKeep`, its sampling rule
    /// and the burst limit keep it. Counts what it does not keep.
    #[inline]
    pub fn enabled(&self, meta: &Metadata<'_>) -> bool {
        let sh = &*self.shared;
        let generation = sh.generation.load(Ordering::Acquire);
        let key = meta as *const Metadata<'_> as usize;
        // Only registered (static) callsites have a word: a key is an identity.
        if let Some(site) = sites::find(&SITE_VERDICTS, key) {
            let word = FastWord(site.word.load(Ordering::Acquire));
            match word.kind_for(FastWord::tag(sh.id, generation)) {
                FastWord::DISABLED => return false,
                FastWord::ENABLED => return true,
                FastWord::SAMPLED => {
                    if let Some(rule) = sh.rules.get(word.slot()).and_then(OnceLock::get) {
                        return rule.keep(meta.level());
                    }
                }
                _ => {}
            }
        }
        self.enabled_cached(meta, generation, key)
    }

    /// [`enabled`](Self::enabled) through the per-thread verdict cache; publishes the
    /// verdict for the lock-free path when it can take it.
    fn enabled_cached(&self, meta: &Metadata<'_>, generation: u64, key: usize) -> bool {
        let filter = self.shared.id;
        VERDICTS.with(|cache| {
            let Ok(mut cache) = cache.try_borrow_mut() else {
                return self.decide(&self.verdict_uncached(meta).0, meta);
            };
            let slot = &mut cache[slot_of(key)];
            if let Some(c) = slot {
                if c.filter == filter && c.meta == key && c.generation == generation {
                    return self.decide(&c.verdict, meta);
                }
            }
            let (verdict, generation, cacheable) = self.verdict_uncached(meta);
            let out = self.decide(&verdict, meta);
            if cacheable {
                self.publish(key, &verdict, generation);
                *slot = Some(CachedVerdict {
                    filter,
                    meta: key,
                    generation,
                    verdict,
                });
            }
            out
        })
    }

    /// Gives the lock-free path `verdict` for the callsite at `key` (registered, static),
    /// decided under `generation`, unless it needs more than one word (a burst limit, or
    /// a rule beyond the filter's rule slots).
    #[cold]
    fn publish(&self, key: usize, verdict: &Verdict, generation: u64) {
        let (kind, slot) = if !verdict.enabled {
            (FastWord::DISABLED, 0)
        } else if verdict.burst.is_some() {
            return;
        } else if let Some(rule) = &verdict.rule {
            match self.rule_slot(rule) {
                Some(slot) => (FastWord::SAMPLED, slot),
                None => return,
            }
        } else {
            (FastWord::ENABLED, 0)
        };
        let make = || SiteVerdict {
            key,
            word: AtomicU64::new(0),
        };
        if let Some(site) = sites::find_or_insert(&SITE_VERDICTS, key, make) {
            let word = FastWord::new(self.shared.id, generation, kind, slot);
            site.word.store(word.0, Ordering::Release);
        }
    }

    /// `rule`'s slot in this filter's rule table, given on first use.
    fn rule_slot(&self, rule: &Arc<RuleCounters>) -> Option<usize> {
        if let Some(&slot) = rule.fast_slot.get() {
            return Some(slot);
        }
        let sh = &*self.shared;
        let slot = sh.next_rule.fetch_add(1, Ordering::AcqRel);
        let cell = sh.rules.get(slot)?;
        let _ = cell.set(rule.clone());
        // Another thread may have given the rule a slot meanwhile: one of the two is
        // used, the other holds the same counters.
        Some(*rule.fast_slot.get_or_init(|| slot))
    }

    /// Computes the verdict from the compiled policy; cacheable only for callsites
    /// registered with the filter (their metadata is static, so its address is an identity).
    #[cold]
    fn verdict_uncached(&self, meta: &Metadata<'_>) -> (Verdict, u64, bool) {
        let compiled = self.shared.compiled.load();
        let callsite = self
            .shared
            .callsites
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(meta as *const Metadata<'_> as usize))
            .cloned();
        let cacheable = callsite.is_some();
        (
            compiled.verdict(meta, callsite),
            compiled.generation,
            cacheable,
        )
    }

    #[inline]
    fn decide(&self, v: &Verdict, meta: &Metadata<'_>) -> bool {
        if !v.enabled {
            return false;
        }
        if let Some(rule) = &v.rule {
            if !rule.keep(meta.level()) {
                return false;
            }
        }
        if let Some((burst, callsite)) = &v.burst {
            let second = self.shared.clock.unix_seconds();
            let (decision, summary) = callsite.burst.admit(second, *burst);
            if let Some(summary) = summary {
                self.shared.notices.push(Notice::BurstEnded {
                    meta: callsite.meta,
                    summary,
                });
            }
            if let BurstDecision::Drop { first } = decision {
                StatsCells::add(&self.shared.stats.burst, meta.level(), 1);
                if first {
                    self.shared.notices.push(Notice::BurstStarted {
                        meta: callsite.meta,
                        burst: *burst,
                    });
                }
                return false;
            }
        }
        true
    }

    fn interest(&self, meta: &'static Metadata<'static>) -> Interest {
        let compiled = self.shared.compiled.load();
        if !compiled.level_enabled(meta) {
            return Interest::never();
        }
        if meta.is_span() || compiled.keeps_always(meta.level()) {
            return Interest::always();
        }
        let key = meta as *const Metadata<'static> as usize;
        self.shared
            .callsites
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .entry(key)
            .or_insert_with(|| {
                Arc::new(CallsiteState {
                    meta,
                    burst: BurstWindow::default(),
                })
            });
        let sampled = compiled
            .rule_for(meta.target())
            .is_some_and(|r| matches!(r.scope, Scope::Event) && r.counters.n > 1);
        if sampled || compiled.burst.is_some() {
            Interest::sometimes()
        } else {
            Interest::always()
        }
    }

    pub(crate) fn clock(&self) -> Arc<dyn Clock> {
        self.shared.clock.clone()
    }

    pub(crate) fn compiled(&self) -> arc_swap::Guard<Arc<Compiled>> {
        self.shared.compiled.load()
    }

    #[inline]
    pub(crate) fn event_path(&self) -> EventPath {
        EventPath(self.shared.event_path.load(Ordering::Acquire))
    }

    pub(crate) fn stats_cells(&self) -> &Arc<StatsCells> {
        &self.shared.stats
    }

    pub(crate) fn notices(&self) -> &Notices {
        &self.shared.notices
    }

    pub(crate) fn budget(&self) -> &Budget {
        &self.shared.budget
    }

    #[inline]
    fn hint(&self) -> Option<LevelFilter> {
        Some(self.shared.compiled.load().max_level.to_level_filter())
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the policy half-written: it is
        // replaced whole. Keep serving.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Recompiles `policy` at the clock's time and swaps it in (under the state lock,
    /// so generations increase in the order policies are installed).
    fn install(&self, state: &State) {
        let prev = self.compiled.load();
        let generation = prev.generation + 1;
        let next = Compiled::new(
            &state.policy,
            self.clock.now(),
            generation,
            Some(&prev),
            &self.stats,
        );
        drop(prev);
        let path = EventPath::of(&next);
        self.compiled.store(Arc::new(next));
        self.event_path.store(path.0, Ordering::Release);
        self.generation.store(generation, Ordering::Release);
    }

    /// After a swap: refresh tracing's caches and (re)arm the expiry timer.
    fn after_change(self: &Arc<Self>) {
        tracing_core::callsite::rebuild_interest_cache();
        if self.compiled.load().effective.next_expiry.is_some() {
            self.arm_timer();
        }
    }

    fn arm_timer(self: &Arc<Self>) {
        if !self.own_timer {
            return;
        }
        if let Some(t) = self.timer.get() {
            t.unpark();
            return;
        }
        if self.timer_started.swap(true, Ordering::SeqCst) {
            return;
        }
        let weak = Arc::downgrade(self);
        let spawned = std::thread::Builder::new()
            .name("logpolicy-expiry".into())
            .spawn(move || expiry_timer(weak));
        match spawned {
            Ok(handle) => {
                let _ = self.timer.set(handle.thread().clone());
            }
            // No thread: expiry still happens at the next change or refresh.
            Err(_) => self.timer_started.store(false, Ordering::SeqCst),
        }
    }
}

/// Sleeps until the next expiry, recompiles, repeats; exits when the filter is gone.
fn expiry_timer(shared: Weak<Shared>) {
    const IDLE: Duration = Duration::from_secs(60);
    loop {
        let wait = {
            let Some(s) = shared.upgrade() else { return };
            let compiled = s.compiled.load();
            match compiled.effective.next_expiry {
                Some(at) => {
                    let now = s.clock.now();
                    if at <= now {
                        drop(compiled);
                        PolicyHandle { shared: s.clone() }.refresh();
                        continue;
                    }
                    at.duration_since(now).unwrap_or_default().min(IDLE)
                }
                None => IDLE,
            }
        };
        std::thread::park_timeout(wait);
    }
}

impl PolicyHandle {
    /// The whole policy: every layer, expired or not.
    pub fn policy(&self) -> Policy {
        self.shared.lock().policy.clone()
    }

    /// The effective policy as it was last compiled.
    pub fn effective(&self) -> EffectivePolicy {
        self.shared.compiled.load().effective.clone()
    }

    /// Increases by one with every compiled change, expiry included.
    pub fn generation(&self) -> u64 {
        self.shared.compiled.load().generation
    }

    /// What happened to the events the levels enabled: written, sampled out, dropped by
    /// the burst limit or the budget, or held with a request. Writes are counted by a
    /// [`FormatLayer`](crate::FormatLayer) linked with
    /// [`with_policy`](crate::FormatLayer::with_policy).
    pub fn stats(&self) -> Stats {
        self.shared.stats.snapshot()
    }

    /// The time on this filter's clock.
    pub fn now(&self) -> SystemTime {
        self.shared.clock.now()
    }

    /// Edits the policy: `f` works on a copy, which replaces the policy only if `f`
    /// returns `Ok`; on `Err` the previous policy stays in force.
    ///
    /// # Examples
    ///
    /// ```
    /// use logpolicy::{Level, PolicyFilter, PolicyLayer};
    /// let handle = PolicyFilter::from_directives("info").unwrap().handle();
    /// let r = handle.update(|p| p.upsert(PolicyLayer::new("", 1, "debug".parse().unwrap())?));
    /// assert!(r.is_err());
    /// assert_eq!(handle.effective().level_for("x"), Level::Info);
    /// ```
    pub fn update<R, E>(&self, f: impl FnOnce(&mut Policy) -> Result<R, E>) -> Result<R, E> {
        let result = {
            let mut state = self.shared.lock();
            let mut next = state.policy.clone();
            let r = f(&mut next)?;
            state.policy = next;
            self.shared.install(&state);
            r
        };
        self.shared.after_change();
        Ok(result)
    }

    /// Replaces the whole policy.
    pub fn set_policy(&self, policy: Policy) {
        let _ = self.update(|p| {
            *p = policy;
            Ok::<(), std::convert::Infallible>(())
        });
    }

    /// Adds a layer, or replaces the layer with the same source.
    pub fn upsert_layer(&self, layer: PolicyLayer) -> Result<(), PolicyError> {
        self.update(|p| p.upsert(layer))
    }

    /// Removes the layer of `source`; returns whether there was one.
    pub fn remove_layer(&self, source: &str) -> bool {
        self.update(|p| Ok::<bool, std::convert::Infallible>(p.remove(source)))
            .unwrap_or(false)
    }

    /// Replaces the baseline layer (source `env`) with `directives` parsed from text.
    /// On an error the previous policy stays.
    pub fn set_directives(&self, directives: &str) -> Result<(), PolicyError> {
        let d: Directives = directives.parse()?;
        self.update(|p| p.upsert(PolicyLayer::baseline(d)))
    }

    /// Re-evaluates expiry at the clock's time; returns whether the effective policy
    /// changed (some layer expired since the last compile).
    pub fn refresh(&self) -> bool {
        let changed = {
            let state = self.shared.lock();
            let now = self.shared.clock.now();
            let due = self
                .shared
                .compiled
                .load()
                .effective
                .next_expiry
                .is_some_and(|at| at <= now);
            if due {
                self.shared.install(&state);
            }
            due
        };
        if changed {
            self.shared.after_change();
        }
        changed
    }
}

impl<S: Subscriber> tracing_subscriber::Layer<S> for PolicyFilter {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        self.interest(meta)
    }

    fn enabled(&self, meta: &Metadata<'_>, _: Context<'_, S>) -> bool {
        PolicyFilter::enabled(self, meta)
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        self.hint()
    }
}

impl<S> layer::Filter<S> for PolicyFilter {
    fn enabled(&self, meta: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        PolicyFilter::enabled(self, meta)
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        self.interest(meta)
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        self.hint()
    }
}
