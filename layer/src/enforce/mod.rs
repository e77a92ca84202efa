//! Enforcement: every decision about an event, in one place.
//!
//! - [`PolicyFilter`] (with its [`PolicyHandle`]) decides per callsite and per event,
//!   before any field is evaluated: levels, event-scope sampling, the burst limit.
//!   It compiles the policy once per change (`compiled.rs`), answers events from a
//!   lock-free word per callsite (`fast_path.rs`), and expires layers on time
//!   (`expiry.rs`).
//! - An output layer linked to the filter ([`FormatLayer::with_policy`](crate::FormatLayer::with_policy))
//!   asks, for each event it receives, what to do with it (`gate.rs`): write it (after the
//!   lines its request held, if it is an error in a request that was not kept), hold it
//!   with its request (`request.rs`), or drop it for a reason (sampled, over the byte
//!   budget: `limits.rs`). The output only formats bytes.
//! - Everything decided is counted ([`Stats`], `stats.rs`) and reported in-band: burst
//!   notices and a periodic summary of what was not written (`summary.rs`). With an
//!   admin endpoint and a writer, the pushed layers that start, change or stop applying
//!   are reported too, one line each (`announce.rs`).
//!
//! # Cost model
//!
//! `tracing` asks a subscriber about each callsite three ways, cheapest first, and this
//! filter answers each from one pre-compiled policy that it swaps atomically:
//!
//! 1. **`register_callsite`**, once per callsite (and again after every policy change):
//!    the filter matches the callsite's target against the compiled table (longest
//!    `::`-boundary prefix) and answers [`Interest::always`](tracing_core::subscriber::Interest::always) or
//!    [`Interest::never`](tracing_core::subscriber::Interest::never).
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
//!    [`Interest::sometimes`](tracing_core::subscriber::Interest::sometimes), and are decided per event in `enabled`, before any field
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
//! [`Clock`](crate::clock::Clock), time moves only when the test moves it, and
//! [`PolicyHandle::refresh`] re-evaluates the policy at the clock's time.

// Only an admin endpoint announces changes.
#[cfg_attr(not(feature = "admin"), allow(dead_code))]
mod announce;
mod compiled;
mod expiry;
mod fast_path;
mod filter;
mod gate;
mod limits;
mod redaction;
mod request;
mod stats;
mod summary;
mod when;

pub use filter::{PolicyFilter, PolicyHandle};
pub use request::RequestLimits;
pub use stats::{LevelCounts, Reason, Redacted, Stats};

#[cfg(feature = "admin")]
pub(crate) use announce::LayerChange;
pub(crate) use gate::{Decision, OutputGate, RecordCell};
pub(crate) use limits::Notice;
pub(crate) use redaction::{ActiveRedaction, FieldMask, RedactionSet};
pub(crate) use summary::NotWritten;
