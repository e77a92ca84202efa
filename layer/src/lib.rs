//! # logpolicy
//!
//! A [`tracing`](https://docs.rs/tracing) layer that decides, per event and in
//! nanoseconds, what a service writes: per-target levels that change at runtime and
//! fall back on time by themselves, written as JSON lines (or compact text) without an
//! allocation per event.
//!
//! ## Quick start
//!
//! ```
//! // Baseline from LOGPOLICY or RUST_LOG (default "info"); JSON to stdout unless
//! // stdout is a terminal.
//! let logging = logpolicy::init().expect("logging");
//! tracing::info!(target: "shop::http", port = 8080, "listening");
//!
//! // During an incident, from any thread: raise one target for 15 minutes.
//! let raise = logpolicy::PolicyLayer::new("ops/incident-42", 10,
//!     "shop::payment=debug".parse().unwrap()).unwrap()
//!     .expires_at(std::time::SystemTime::now() + std::time::Duration::from_secs(900));
//! logging.handle().upsert_layer(raise).unwrap();
//! tracing::debug!(target: "shop::payment", "now visible, for 15 minutes");
//! ```
//!
//! ## Composing it yourself
//!
//! [`PolicyFilter`] is a `tracing-subscriber` layer and a per-layer filter; put it in
//! front of [`FormatLayer`] (ours), `tracing_subscriber::fmt`, OpenTelemetry or any
//! other layer:
//!
//! ```
//! use logpolicy::{Format, FormatLayer, PolicyFilter, StdoutSink};
//! use tracing_subscriber::prelude::*;
//!
//! let filter = PolicyFilter::from_directives("info,hyper=warn").unwrap();
//! let handle = filter.handle();
//! let subscriber = tracing_subscriber::registry()
//!     .with(filter)
//!     .with(FormatLayer::new(Format::Json, StdoutSink));
//! # drop((subscriber, handle));
//! ```
//!
//! ## What it costs
//!
//! See the [cost model of the filter](enforce#cost-model): a disabled callsite
//! costs what `tracing`'s static filtering costs (~1 ns), an enabled one pays nothing in
//! the filter, and a policy change rebuilds `tracing`'s interest cache once, on the
//! thread that made it. Formatting writes straight into a reused per-thread buffer (see
//! [`format`]).
//!
//! ## Policies
//!
//! A [`Policy`] is a list of [`PolicyLayer`]s (a baseline from the environment, layers
//! pushed at runtime with a priority and an optional expiry) merged into one
//! [`EffectivePolicy`]; see [`policy`].

// The modules, bottom to top: each imports only modules listed before it (a test,
// `tests/modules_import_only_downward.rs`, holds this order).
#[cfg(feature = "admin")]
pub mod admin;
pub mod clock;
pub mod enforce;
pub mod format;
mod init;
pub mod ledger;
mod level;
pub mod log_bridge;
pub mod policy;
mod sink;
mod sites;
#[cfg(feature = "admin")]
pub mod wire;
pub mod writer;

pub use enforce::{LevelCounts, PolicyFilter, PolicyHandle, Reason, Stats};
pub use format::{Format, FormatLayer};
pub use init::{init, Builder, InitError, Logging, DEFAULT_DIRECTIVES, ENV_VARS, GCP_PROJECT_VAR};
pub use level::{level_index, Level, ParseLevelError, LEVELS, LEVEL_NAMES, LEVEL_ORDER};
pub use log_bridge::LogBridge;
pub use policy::{
    DirectiveError, Directives, EffectivePolicy, Policy, PolicyError, PolicyLayer, Target,
};
pub use sink::{LineSink, NullSink, StdoutSink};
