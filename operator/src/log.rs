//! The operator's log events, every one under the target `logpolicy_operator`, which is
//! named here once: `log::info!(pod = %key, "...")` is
//! `tracing::info!(target: "logpolicy_operator", pod = %key, "...")`.

/// The target of every event the operator logs (what a `RUST_LOG`-style directive such as
/// `logpolicy_operator=debug` selects).
pub const TARGET: &str = "logpolicy_operator";

macro_rules! error_event {
    ($($arg:tt)+) => { ::tracing::error!(target: $crate::log::TARGET, $($arg)+) };
}

macro_rules! warn_event {
    ($($arg:tt)+) => { ::tracing::warn!(target: $crate::log::TARGET, $($arg)+) };
}

macro_rules! info_event {
    ($($arg:tt)+) => { ::tracing::info!(target: $crate::log::TARGET, $($arg)+) };
}

macro_rules! debug_event {
    ($($arg:tt)+) => { ::tracing::debug!(target: $crate::log::TARGET, $($arg)+) };
}

// Renamed on export: a macro named `warn` could not be re-exported under its own name
// (the built-in attribute `#[warn]` makes the bare name ambiguous); `log::warn!` is not.
pub(crate) use {
    debug_event as debug, error_event as error, info_event as info, warn_event as warn,
};
