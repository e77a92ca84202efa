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
//! ## With other layers
//!
//! [`Builder::layer`] gives logpolicy as one `tracing-subscriber` layer (its filter, the
//! format linked to it, the writer) with everything [`init`] sets up but the global
//! subscriber, for a subscriber you build with OpenTelemetry or any other layer;
//! [`Builder::with_layer`] adds layers to the one [`init`] builds:
//!
//! ```
//! use tracing_subscriber::prelude::*;
//!
//! let (layer, logging) = logpolicy::Builder::from_env().layer().expect("logging");
//! let subscriber = tracing_subscriber::registry()
//!     // .with(tracing_opentelemetry::layer().with_tracer(tracer))
//!     .with(layer);
//! tracing::subscriber::set_global_default(subscriber).expect("the first subscriber");
//! tracing::info!(target: "shop::http", "listening");
//! log::info!(target: "shop::legacy", "and `log` records, through logpolicy's bridge");
//! # drop(logging);
//! ```
//!
//! Install it with `.init()` or `set_global_default`: `log` records are written once,
//! through logpolicy's bridge, either way (see [`Builder::layer`]).
//!
//! The parts are public too: [`PolicyFilter`] is a layer and a per-layer filter, in
//! front of `tracing_subscriber::fmt` or any layer. A [`FormatLayer`] made by hand is
//! only a formatter until [`FormatLayer::with_policy`] links it to the filter in front
//! of it: without that link, request sampling, the byte budget and the write counts are
//! off (see [`FormatLayer`]).
//!
//! ## What it costs
//!
//! See the [cost model of the filter](enforce#cost-model): a disabled callsite
//! costs what `tracing`'s static filtering costs (~1 ns), an enabled one pays nothing in
//! the filter, and a policy change rebuilds `tracing`'s interest cache once, on the
//! thread that made it. Formatting writes straight into a reused per-thread buffer (see
//! [`format`](mod@format)).
//!
//! ## Policies
//!
//! A [`Policy`] is a list of [`PolicyLayer`]s (a baseline from the environment, layers
//! pushed at runtime with a priority and an optional expiry) merged into one
//! [`EffectivePolicy`]; see [`policy`].
//!
//! ## Platforms
//!
//! Tested on Linux, where services run it. It builds for macOS, FreeBSD and other Unix
//! systems and for Windows, where the writer uses plain writes instead of Linux's
//! non-waiting ones and preallocates nothing (see [the writer](writer#platforms)); that
//! build is checked, not run.

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
pub mod recorder;
#[cfg(unix)]
pub mod sigterm;
mod sink;
mod sites;
#[cfg(feature = "admin")]
pub mod wire;
pub mod writer;

pub use enforce::{LevelCounts, PolicyFilter, PolicyHandle, Reason, Stats};
pub use format::{Format, FormatLayer};
pub use init::{
    init, Builder, InitError, Logging, DEFAULT_DIRECTIVES, ENV_VARS, FLUSH_ON_SIGTERM_VAR,
    GCP_PROJECT_VAR,
};
pub use level::{level_index, Level, ParseLevelError, LEVELS, LEVEL_NAMES, LEVEL_ORDER};
pub use log_bridge::LogBridge;
pub use policy::{
    DirectiveError, Directives, EffectivePolicy, Policy, PolicyError, PolicyLayer, Target,
};
pub use sink::{LineSink, NullSink, StdoutSink};

/// The Rust blocks of the READMEs and of the guides in `docs/`, compiled and run as
/// doctests (`cargo test -p logpolicy --doc`), so that what a reader pastes builds.
/// Only this crate's own README is part of the published package; the others are read
/// from the repository.
#[cfg(doctest)]
pub mod readme_doctests {
    /// `layer/README.md`, the crate's page.
    #[doc = include_str!("../README.md")]
    pub struct CrateReadme;

    /// The repository's `README.md`.
    #[doc = include_str!("../../README.md")]
    pub struct RepositoryReadme;

    /// `docs/admin-endpoint.md`.
    #[doc = include_str!("../../docs/admin-endpoint.md")]
    pub struct DocsAdminEndpoint;

    /// `docs/coming-from-envfilter.md`.
    #[doc = include_str!("../../docs/coming-from-envfilter.md")]
    pub struct DocsComingFromEnvfilter;

    /// `docs/development.md`.
    #[doc = include_str!("../../docs/development.md")]
    pub struct DocsDevelopment;

    /// `docs/e2e-tests.md`.
    #[doc = include_str!("../../docs/e2e-tests.md")]
    pub struct DocsE2eTests;

    /// `docs/formats.md`.
    #[doc = include_str!("../../docs/formats.md")]
    pub struct DocsFormats;

    /// `docs/incidents.md`.
    #[doc = include_str!("../../docs/incidents.md")]
    pub struct DocsIncidents;

    /// `docs/ledger.md`.
    #[doc = include_str!("../../docs/ledger.md")]
    pub struct DocsLedger;

    /// `docs/redaction.md`.
    #[doc = include_str!("../../docs/redaction.md")]
    pub struct DocsRedaction;

    /// `docs/sampling.md`.
    #[doc = include_str!("../../docs/sampling.md")]
    pub struct DocsSampling;

    /// `docs/writer.md`.
    #[doc = include_str!("../../docs/writer.md")]
    pub struct DocsWriter;
}
