//! The filter and its handle: the policy compiled, swapped in atomically, answered to
//! `tracing`'s questions, and changed from any thread.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock};
use std::thread::Thread;
use std::time::SystemTime;

use arc_swap::ArcSwap;
use tracing_core::metadata::LevelFilter;
use tracing_core::span::{Attributes, Id, Record};
use tracing_core::subscriber::Interest;
use tracing_core::{Metadata, Subscriber};
use tracing_subscriber::layer::{self, Context};
use tracing_subscriber::registry::LookupSpan;

use super::announce::{self, Announcer, LayerChange};
use super::compiled::{Compiled, EventPath};
use super::fast_path::{self, CallsiteState, RULE_SLOTS};
use super::limits::{Budget, BurstWindow, Notices};
use super::stats::{RuleCounters, Stats, StatsCells};
use super::when;
use crate::clock::{Clock, SystemClock};
use crate::ledger::{Ledger, Sites};
use crate::policy::{
    DirectiveError, Directives, EffectivePolicy, Policy, PolicyError, PolicyLayer, Scope,
};
use crate::recorder::Recorder;

pub(super) struct State {
    pub(super) policy: Policy,
    /// Writes the lines of changes, once changes are announced, and the layers in force
    /// as last announced.
    announced: Option<(Announcer, Vec<PolicyLayer>)>,
}

/// Gives every filter a distinct id for the verdict cache (an address could be reused).
static NEXT_FILTER_ID: AtomicU64 = AtomicU64::new(1);

pub(super) struct Shared {
    /// This filter's id in the verdict cache.
    pub(super) id: usize,
    pub(super) compiled: ArcSwap<Compiled>,
    /// The event path's tag of this filter and the generation of `compiled`, published
    /// after it is stored.
    pub(super) fast_tag: AtomicU64,
    /// Events of a level less quiet than this (see [`fast_path::quiet_below`]) are more
    /// verbose than any level `compiled` enables outside every `when` condition:
    /// published after it is stored, it disables them on a thread in no matching span
    /// without a lookup.
    pub(super) quiet_below: AtomicU8,
    /// [`EventPath`] of `compiled`, published after it is stored.
    pub(super) event_path: AtomicU64,
    /// The bits of the `when` conditions of `compiled` (0: none; the span hooks return
    /// at once).
    pub(super) when_any: AtomicU64,
    /// The conditions are awake: callsites only they enable are `sometimes` to tracing
    /// (else `never`; see `when.rs`). Set before interest is rebuilt for them.
    pub(super) awake: AtomicBool,
    /// Interest was rebuilt with the conditions awake (a thread that finds it so goes
    /// on; one that does not wakes them, or waits for the thread that does).
    pub(super) ready: AtomicBool,
    /// Held while conditions are woken or put to sleep.
    pub(super) waking: Mutex<()>,
    /// When (the clock's milliseconds) a thread last left a matching span, or the
    /// conditions woke.
    pub(super) last_in_match_ms: AtomicU64,
    pub(super) state: Mutex<State>,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) stats: Arc<StatsCells>,
    /// Per callsite: what this filter held back (and, when the writer shares it, what
    /// was written and dropped).
    pub(super) ledger: Ledger,
    /// What recording rules keep instead of writing (empty, unallocated, until a rule
    /// records a line).
    pub(super) recorder: Recorder,
    /// Callsites registered with the filter (static metadata only): their burst state.
    pub(super) callsites: RwLock<HashMap<usize, Arc<CallsiteState>>>,
    /// Sampling rules the lock-free path reaches by slot (kept for the filter's life, so
    /// their counts stay in the stats as those of live rules).
    pub(super) rules: Box<[OnceLock<Arc<RuleCounters>>; RULE_SLOTS]>,
    pub(super) next_rule: AtomicUsize,
    pub(super) notices: Notices,
    pub(super) budget: Budget,
    /// Whether this filter runs its own expiry timer (system clock only).
    pub(super) own_timer: bool,
    pub(super) timer_started: AtomicBool,
    pub(super) timer: OnceLock<Thread>,
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
    pub(super) shared: Arc<Shared>,
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
    pub(super) shared: Arc<Shared>,
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
        let ledger = Ledger::new();
        let compiled = Compiled::new(&policy, clock.now(), 0, None, &stats);
        let id = NEXT_FILTER_ID.fetch_add(1, Ordering::Relaxed) as usize;
        let shared = Arc::new(Shared {
            id,
            fast_tag: AtomicU64::new(fast_path::tag(id, 0)),
            quiet_below: AtomicU8::new(fast_path::quiet_below(compiled.base_max_level)),
            event_path: AtomicU64::new(EventPath::of(&compiled).0),
            when_any: AtomicU64::new(compiled.when_any),
            awake: AtomicBool::new(false),
            ready: AtomicBool::new(false),
            waking: Mutex::new(()),
            last_in_match_ms: AtomicU64::new(0),
            compiled: ArcSwap::from_pointee(compiled),
            state: Mutex::new(State {
                policy,
                announced: None,
            }),
            clock,
            stats,
            recorder: Recorder::new(ledger.clone()),
            ledger,
            callsites: RwLock::new(HashMap::new()),
            rules: Box::new([const { OnceLock::new() }; RULE_SLOTS]),
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
        self.shared.enabled(meta)
    }

    fn interest(&self, meta: &'static Metadata<'static>) -> Interest {
        if meta.is_event() {
            // Every event callsite gets its row in the ledger when it registers.
            crate::ledger::row_of_static(meta);
        }
        let compiled = self.shared.compiled.load();
        let conditional = compiled.is_conditional(meta);
        let when_awake = conditional && self.shared.awake.load(Ordering::SeqCst);
        if !(compiled.level_enabled(meta) || when_awake) {
            // Disabled, or enabled only under conditions that are dormant (no thread
            // is in a matching span: the first one to enter one wakes them).
            return Interest::never();
        }
        if !conditional && (meta.is_span() || compiled.keeps_always(meta.level())) {
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
        if conditional || sampled || compiled.burst.is_some() {
            Interest::sometimes()
        } else {
            Interest::always()
        }
    }

    #[inline]
    fn hint(&self) -> Option<LevelFilter> {
        let compiled = self.shared.compiled.load();
        let level = if self.shared.awake.load(Ordering::SeqCst) {
            compiled.max_level
        } else {
            compiled.base_max_level
        };
        Some(level.to_level_filter())
    }
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the policy half-written: it is
        // replaced whole. Keep serving.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Recompiles `policy` at the clock's time and swaps it in (under the state lock,
    /// so generations increase in the order policies are installed), then announces
    /// the layers that started or stopped applying, if changes are announced.
    pub(super) fn install(&self, state: &mut State) {
        let prev = self.compiled.load();
        let generation = prev.generation + 1;
        let now = self.clock.now();
        let next = Compiled::new(&state.policy, now, generation, Some(&prev), &self.stats);
        drop(prev);
        let path = EventPath::of(&next);
        let when_any = next.when_any;
        let quiet_below = fast_path::quiet_below(next.base_max_level);
        self.compiled.store(Arc::new(next));
        self.when_any.store(when_any, Ordering::Release);
        self.quiet_below.store(quiet_below, Ordering::Release);
        self.event_path.store(path.0, Ordering::Release);
        self.fast_tag
            .store(fast_path::tag(self.id, generation), Ordering::Release);
        self.announce(state, now);
    }

    /// After a swap: refresh tracing's caches and (re)arm the expiry timer.
    pub(super) fn after_change(self: &Arc<Self>) {
        tracing_core::callsite::rebuild_interest_cache();
        if self.compiled.load().effective.next_expiry.is_some() {
            self.arm_timer();
        }
    }

    /// Reports the layers that started, changed or stopped applying since the last
    /// announcement (still under the state lock: lines come in the order of changes).
    fn announce(&self, state: &mut State, now: SystemTime) {
        let Some((write, before)) = state.announced.as_mut() else {
            return;
        };
        let after = announce::in_force(&state.policy, now);
        let changes = announce::changes(before, &after, now);
        *before = after;
        self.write_changes(write, &changes, now);
    }

    /// Writes the lines of `changes` with `write` and counts them in the stats.
    fn write_changes(&self, write: &Announcer, changes: &[LayerChange], now: SystemTime) {
        if !changes.is_empty() {
            let written = write(changes, now);
            self.stats
                .policy_lines
                .fetch_add(written, Ordering::Relaxed);
        }
    }
}

impl PolicyHandle {
    /// The whole policy: every layer, expired or not.
    pub fn policy(&self) -> Policy {
        self.shared.lock().policy.clone()
    }

    /// The most verbose level any target is set to, as last compiled (what `tracing`'s
    /// max-level hint says).
    pub(crate) fn max_level(&self) -> crate::level::Level {
        self.shared.compiled.load().max_level
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

    /// The ledger this filter counts in, per callsite, what it held back (sampled,
    /// burst, budget); the [`Writer`](crate::writer::Writer) that [`crate::init`] sets
    /// up counts what it writes and drops in the same one (see [`crate::ledger`]).
    pub fn ledger(&self) -> Ledger {
        self.shared.ledger.clone()
    }

    /// The store of the lines recording rules keep instead of writing (see
    /// [`crate::recorder`]): its limits, what it holds, and the lines a replay takes.
    ///
    /// ```
    /// use logpolicy::recorder::RecordLimits;
    /// let filter = logpolicy::PolicyFilter::from_directives("info,@record(shop::payment)=debug").unwrap();
    /// let recorder = filter.handle().recorder();
    /// recorder.set_limits(RecordLimits::new(1 << 20, std::time::Duration::from_secs(300)).unwrap());
    /// assert_eq!(recorder.limits().max_bytes(), 1 << 20);
    /// ```
    pub fn recorder(&self) -> Recorder {
        self.shared.recorder.clone()
    }

    /// What each callsite cost, biggest in bytes first: [`Ledger::sites`] of
    /// [`PolicyHandle::ledger`].
    ///
    /// ```
    /// let logging = logpolicy::Builder::new().directives("info,@sample(app)=1/4").try_init().unwrap();
    /// for i in 0..8 {
    ///     tracing::info!(target: "app", i, "tick");
    /// }
    /// logging.flush(std::time::Duration::from_secs(5));
    /// let sites = logging.handle().sites();
    /// let tick = sites.rows.iter().find(|r| r.name.starts_with("event") && r.target == "app").unwrap();
    /// assert_eq!((tick.counts.lines, tick.counts.sampled), (2, 6));
    /// ```
    pub fn sites(&self) -> Sites {
        self.shared.ledger.sites()
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
            self.shared.install(&mut state);
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

    /// From now on, `announcer` writes a line for every layer but the baseline that
    /// starts, changes or stops applying (see `announce.rs`); the layers in force now are
    /// taken as announced.
    #[cfg(feature = "admin")]
    pub(crate) fn announce_changes(&self, announcer: Announcer) {
        let mut state = self.shared.lock();
        let now = self.shared.clock.now();
        let in_force = announce::in_force(&state.policy, now);
        state.announced = Some((announcer, in_force));
    }

    /// Announces (if changes are announced) that each of `layers` stopped applying
    /// because the process that held them restarted: they are not held here (see
    /// [`crate::wire::PolicyDocument::lost`]).
    #[cfg(feature = "admin")]
    pub(crate) fn announce_lost(&self, layers: Vec<PolicyLayer>) {
        let mut state = self.shared.lock();
        let Some((write, _)) = state.announced.as_mut() else {
            return;
        };
        let changes: Vec<_> = layers
            .into_iter()
            .map(|layer| LayerChange {
                kind: announce::ChangeKind::Lost,
                layer,
            })
            .collect();
        self.shared
            .write_changes(write, &changes, self.shared.clock.now());
    }

    /// Re-evaluates expiry at the clock's time; returns whether the effective policy
    /// changed (some layer expired since the last compile). Also puts `when`
    /// conditions no thread has been in for a second back to sleep (the filter's own
    /// timer does both with the system clock; with another clock, this does).
    pub fn refresh(&self) -> bool {
        self.shared.sleep_conditions_if_idle();
        let changed = {
            let mut state = self.shared.lock();
            let now = self.shared.clock.now();
            let due = self
                .shared
                .compiled
                .load()
                .effective
                .next_expiry
                .is_some_and(|at| at <= now);
            if due {
                self.shared.install(&mut state);
            }
            due
        };
        if changed {
            self.shared.after_change();
        }
        changed
    }
}

impl Shared {
    /// The clock's time in milliseconds since the epoch.
    fn now_ms(&self) -> u64 {
        self.clock
            .now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    /// The thread's mask crossed zero: one entering a matching span wakes the
    /// conditions (if they sleep) before it goes on; one leaving it notes the time.
    #[inline]
    fn crossed(self: &Arc<Self>, crossing: when::Crossing) {
        match crossing {
            when::Crossing::Stay => {}
            when::Crossing::Entered => {
                if !self.ready.load(Ordering::SeqCst) {
                    self.wake_conditions();
                }
            }
            when::Crossing::Left => {
                self.last_in_match_ms
                    .store(self.now_ms(), Ordering::Release);
            }
        }
    }

    /// Makes the callsites only conditions enable `sometimes` again (interest rebuilt
    /// on this thread, before its span's events), and has the timer put them back to
    /// sleep once they are idle.
    #[cold]
    fn wake_conditions(self: &Arc<Self>) {
        // Inside a dispatcher call (a span entered in a subscriber's callback), tracing
        // would rebuild interest against no subscriber at all: leave it to the next
        // thread that enters a matching span (events here go nowhere either).
        if no_default_dispatcher() {
            return;
        }
        {
            let _waking = self.waking.lock().unwrap_or_else(|p| p.into_inner());
            if self.ready.load(Ordering::SeqCst) {
                return; // another thread woke them meanwhile
            }
            self.awake.store(true, Ordering::SeqCst);
            tracing_core::callsite::rebuild_interest_cache();
            self.last_in_match_ms
                .store(self.now_ms(), Ordering::Release);
            self.ready.store(true, Ordering::SeqCst);
        }
        self.arm_timer();
    }

    /// Puts the conditions back to sleep if no thread has been in a matching span for
    /// [`when::DORMANT_AFTER`] (by the clock): the callsites only they enable are
    /// `never` again. Returns whether it did.
    pub(super) fn sleep_conditions_if_idle(&self) -> bool {
        if !self.ready.load(Ordering::Acquire) || when::threads_in_match() > 0 {
            return false;
        }
        let idle_ms = u64::try_from(when::DORMANT_AFTER.as_millis()).unwrap_or(u64::MAX);
        let last = self.last_in_match_ms.load(Ordering::Acquire);
        if self.now_ms() < last.saturating_add(idle_ms) || no_default_dispatcher() {
            return false;
        }
        let _waking = self.waking.lock().unwrap_or_else(|p| p.into_inner());
        if !self.ready.load(Ordering::SeqCst) {
            return false;
        }
        // A thread entering a matching span now either sees `ready` false (and wakes
        // them again, after this) or is seen here.
        self.ready.store(false, Ordering::SeqCst);
        if when::threads_in_match() > 0 {
            self.ready.store(true, Ordering::SeqCst);
            return false;
        }
        self.awake.store(false, Ordering::SeqCst);
        tracing_core::callsite::rebuild_interest_cache();
        true
    }

    /// Whether the conditions are awake now (the timer looks at them while they are).
    pub(super) fn conditions_awake(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// A new span: the `when` conditions it satisfies, if any are in force.
    #[inline]
    fn on_new_span<S>(&self, attrs: &Attributes<'_>, id: &Id, ctx: &Context<'_, S>)
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        if self.when_any.load(Ordering::Relaxed) != 0 {
            let epoch = when::epoch();
            when::on_new_span(epoch, &self.compiled.load().conditions, attrs, id, ctx);
        }
    }

    #[inline]
    fn on_record<S>(self: &Arc<Self>, id: &Id, values: &Record<'_>, ctx: &Context<'_, S>)
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        if self.when_any.load(Ordering::Relaxed) != 0 {
            let epoch = when::epoch();
            let crossing =
                when::on_record(epoch, &self.compiled.load().conditions, id, values, ctx);
            self.crossed(crossing);
        }
    }

    /// The thread enters a span: its conditions become the thread's, while this filter
    /// has some (a span entered before they ended is still left in order on exit).
    #[inline]
    fn on_enter<S>(self: &Arc<Self>, id: &Id, ctx: &Context<'_, S>)
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        if self.when_any.load(Ordering::Relaxed) != 0 {
            self.crossed(when::on_enter(id, ctx));
        }
    }

    /// The thread leaves a span: the conditions it was in before come back.
    #[inline]
    fn on_exit(self: &Arc<Self>, id: &Id) {
        self.crossed(when::on_exit(id));
    }
}

/// Whether this thread would see no subscriber (inside a dispatcher call, or none set):
/// an interest rebuild from here would be made against none.
fn no_default_dispatcher() -> bool {
    tracing_core::dispatcher::get_default(|d| d.is::<tracing_core::subscriber::NoSubscriber>())
}

impl<S> tracing_subscriber::Layer<S> for PolicyFilter
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        self.interest(meta)
    }

    #[inline]
    fn enabled(&self, meta: &Metadata<'_>, _: Context<'_, S>) -> bool {
        PolicyFilter::enabled(self, meta)
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        self.hint()
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        self.shared.on_new_span(attrs, id, &ctx);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        self.shared.on_record(id, values, &ctx);
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        self.shared.on_enter(id, &ctx);
    }

    fn on_exit(&self, id: &Id, _: Context<'_, S>) {
        self.shared.on_exit(id);
    }
}

impl<S> layer::Filter<S> for PolicyFilter
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    #[inline]
    fn enabled(&self, meta: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        PolicyFilter::enabled(self, meta)
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        self.interest(meta)
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        self.hint()
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        self.shared.on_new_span(attrs, id, &ctx);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        self.shared.on_record(id, values, &ctx);
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        self.shared.on_enter(id, &ctx);
    }

    fn on_exit(&self, id: &Id, _: Context<'_, S>) {
        self.shared.on_exit(id);
    }
}
