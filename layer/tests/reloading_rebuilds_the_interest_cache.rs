//! A swap takes effect at once for callsites already cached, in both directions, and
//! moves tracing's global max-level hint with it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::atomic::Ordering;

use logpolicy::PolicyFilter;
use support::Count;
use tracing::level_filters::LevelFilter;
use tracing_subscriber::prelude::*;

fn noisy() {
    tracing::info!(target: "noisy::sub", "x");
}
fn debug_line() {
    tracing::debug!(target: "app", "y");
}

#[test]
fn swaps_enable_and_disable_cached_callsites() {
    let filter = PolicyFilter::from_directives("info,noisy=warn").unwrap();
    let handle = filter.handle();
    let count = Count::default();
    tracing_subscriber::registry()
        .with(filter)
        .with(count.clone())
        .init();

    // Cache both callsites as disabled.
    noisy();
    debug_line();
    assert_eq!(count.0.load(Ordering::SeqCst), 0);
    assert_eq!(LevelFilter::current(), LevelFilter::INFO);

    handle.set_directives("info,noisy=info,app=debug").unwrap();
    assert_eq!(LevelFilter::current(), LevelFilter::DEBUG);
    noisy();
    debug_line();
    assert_eq!(count.0.load(Ordering::SeqCst), 2);

    // And back: the callsites cached as enabled are disabled again.
    for _ in 0..1_000 {
        handle.set_directives("info,noisy=warn").unwrap();
    }
    noisy();
    debug_line();
    assert_eq!(count.0.load(Ordering::SeqCst), 2);
    assert_eq!(LevelFilter::current(), LevelFilter::INFO);
    assert_eq!(handle.generation(), 1_001);

    // A bad change is refused and the previous policy stays.
    let err = handle.set_directives("info,noisy=verbose").unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"invalid level "verbose" in directive "noisy=verbose" (expected off, error, warn, info, debug, trace (any case), 0-5, or empty for trace)"#
    );
    noisy();
    tracing::info!(target: "other", "kept");
    assert_eq!(count.0.load(Ordering::SeqCst), 3);
    assert_eq!(handle.generation(), 1_001);
}
