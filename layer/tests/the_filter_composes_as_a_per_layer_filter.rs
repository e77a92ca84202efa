//! As a per-layer filter, the policy governs one output and leaves another alone, and
//! swaps reach it too.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use logpolicy::{Format, FormatLayer, PolicyFilter};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::prelude::*;

#[test]
fn governs_only_its_own_layer() {
    let ours = Arc::new(Mutex::new(Vec::<u8>::new()));
    let other = Arc::new(Mutex::new(Vec::<u8>::new()));
    let filter = PolicyFilter::from_directives("warn,shop::payment=debug").unwrap();
    let handle = filter.handle();
    tracing_subscriber::registry()
        .with(FormatLayer::new(Format::Json, ours.clone()).with_filter(filter))
        .with(FormatLayer::new(Format::Json, other.clone()).with_filter(LevelFilter::TRACE))
        .init();
    let lines = |b: &Arc<Mutex<Vec<u8>>>| {
        String::from_utf8(b.lock().unwrap().clone())
            .unwrap()
            .lines()
            .count()
    };

    let emit = || {
        tracing::debug!(target: "shop::payment::card", "a");
        tracing::info!(target: "shop::db", "b");
        tracing::error!(target: "shop::db", "c");
    };
    emit();
    assert_eq!(lines(&ours), 2);
    assert_eq!(lines(&other), 3);

    handle.set_directives("info").unwrap();
    emit();
    assert_eq!(lines(&ours), 4);
    assert_eq!(lines(&other), 6);
}
