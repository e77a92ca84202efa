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

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::thread::Thread;
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use tracing_core::metadata::LevelFilter;
use tracing_core::subscriber::Interest;
use tracing_core::{Metadata, Subscriber};
use tracing_subscriber::layer::{self, Context};

use crate::clock::{Clock, SystemClock};
use crate::level::Level;
use crate::policy::{
    prefix_matches, DirectiveError, Directives, EffectivePolicy, Policy, PolicyError, PolicyLayer,
};

/// The policy as the event path reads it: a flat table, longest target first.
#[derive(Debug)]
pub(crate) struct Compiled {
    default: Level,
    /// Sorted by descending length, so the first match is the longest.
    targets: Box<[(Box<str>, Level)]>,
    max_level: Level,
    pub(crate) effective: EffectivePolicy,
    pub(crate) generation: u64,
}

impl Compiled {
    fn new(policy: &Policy, now: SystemTime, generation: u64) -> Self {
        let effective = policy.effective_at(now);
        let default = effective
            .directives
            .default_level
            .unwrap_or(crate::policy::FALLBACK_LEVEL);
        let mut targets: Vec<(Box<str>, Level)> = effective
            .directives
            .targets
            .iter()
            .map(|(t, l)| (Box::from(t.as_str()), *l))
            .collect();
        targets.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
        let max_level = targets.iter().map(|(_, l)| *l).fold(default, Level::max);
        Compiled {
            default,
            targets: targets.into_boxed_slice(),
            max_level,
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

    #[inline]
    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        let level = Level::of(meta.level());
        level <= self.max_level && level <= self.level_for(meta.target())
    }
}

struct State {
    policy: Policy,
}

struct Shared {
    compiled: ArcSwap<Compiled>,
    state: Mutex<State>,
    clock: Arc<dyn Clock>,
    generation: AtomicU64,
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
        let compiled = Compiled::new(&policy, clock.now(), 0);
        let shared = Arc::new(Shared {
            compiled: ArcSwap::from_pointee(compiled),
            state: Mutex::new(State { policy }),
            clock,
            generation: AtomicU64::new(0),
            own_timer,
            timer_started: AtomicBool::new(false),
            timer: OnceLock::new(),
        });
        shared.after_change();
        PolicyFilter { shared }
    }

    /// A handle that changes this filter's policy.
    pub fn handle(&self) -> PolicyHandle {
        PolicyHandle {
            shared: self.shared.clone(),
        }
    }

    /// Whether the current policy enables an event or span with this metadata.
    #[inline]
    pub fn enabled(&self, meta: &Metadata<'_>) -> bool {
        self.shared.compiled.load().enabled(meta)
    }

    #[inline]
    fn interest(&self, meta: &Metadata<'_>) -> Interest {
        if self.shared.compiled.load().enabled(meta) {
            Interest::always()
        } else {
            Interest::never()
        }
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

    /// Recompiles `policy` at the clock's time and swaps it in.
    fn install(&self, state: &State) {
        let generation = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
        self.compiled.store(Arc::new(Compiled::new(
            &state.policy,
            self.clock.now(),
            generation,
        )));
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
    pub fn set_directives(&self, directives: &str) -> Result<(), DirectiveError> {
        let d: Directives = directives.parse()?;
        self.update(|p| {
            p.upsert(PolicyLayer::baseline(d))
                .map_err(|_| DirectiveError::TooManyTargets)
        })
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
