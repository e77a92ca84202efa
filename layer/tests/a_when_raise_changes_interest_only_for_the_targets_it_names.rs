//! With a `when` raise in force, tracing asks the filter about each event only at the
//! callsites of the targets it names that it may enable; every other callsite keeps its
//! cached interest (never asked). When the raise expires, those callsites are never
//! asked again either. Seen from a layer that counts how often tracing asks it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use logpolicy::clock::{Clock, ManualClock};
use logpolicy::{Policy, PolicyFilter, PolicyLayer};
use tracing::level_filters::LevelFilter;
use tracing_core::subscriber::Interest;
use tracing_core::{Metadata, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::prelude::*;

/// Counts, per target, how often tracing asks whether an event is enabled, and the
/// events that reach it.
#[derive(Clone, Default)]
struct Asked {
    payment: Arc<AtomicUsize>,
    db: Arc<AtomicUsize>,
    events: Arc<AtomicUsize>,
}

impl<S: Subscriber> tracing_subscriber::Layer<S> for Asked {
    /// No opinion (and not counted): the filter's interest is the callsite's.
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        Interest::always()
    }

    fn enabled(&self, meta: &Metadata<'_>, _: Context<'_, S>) -> bool {
        match meta.target() {
            "shop::payment" => self.payment.fetch_add(1, Ordering::SeqCst),
            "shop::db" => self.db.fetch_add(1, Ordering::SeqCst),
            _ => 0,
        };
        true
    }

    fn on_event(&self, _: &tracing::Event<'_>, _: Context<'_, S>) {
        self.events.fetch_add(1, Ordering::SeqCst);
    }
}

fn debug_lines() {
    for _ in 0..10 {
        tracing::debug!(target: "shop::payment", "payment");
        tracing::debug!(target: "shop::db", "db");
    }
}

#[test]
fn only_named_callsites_are_asked_and_only_while_the_raise_lasts() {
    let clock = ManualClock::new(UNIX_EPOCH + Duration::from_secs(1_800_000_000));
    let filter = PolicyFilter::with_clock(
        Policy::new(vec![PolicyLayer::baseline("info".parse().unwrap())]),
        clock.clone(),
    );
    let handle = filter.handle();
    let asked = Asked::default();
    tracing_subscriber::registry()
        .with(filter)
        .with(asked.clone())
        .init();
    let count = |a: &Arc<AtomicUsize>| a.load(Ordering::SeqCst);

    debug_lines();
    assert_eq!((count(&asked.payment), count(&asked.db)), (0, 0));

    // The raise: the payment callsite is asked about each event, the db one is not.
    let raise = PolicyLayer::new(
        "shop/user-42",
        10,
        "shop::payment=debug@when(user_id=42)".parse().unwrap(),
    )
    .unwrap()
    .expires_at(clock.now() + Duration::from_secs(900));
    handle.upsert_layer(raise).unwrap();
    assert_eq!(LevelFilter::current(), LevelFilter::DEBUG);
    debug_lines();
    assert_eq!((count(&asked.payment), count(&asked.db)), (10, 0));
    assert_eq!(
        count(&asked.events),
        0,
        "outside a matching request: not enabled"
    );
    tracing::info_span!("request", user_id = 42).in_scope(debug_lines);
    assert_eq!(count(&asked.events), 10, "in one: every payment line");

    // It expires: neither is asked again, and the hint is back to info.
    clock.advance(Duration::from_secs(900));
    assert!(handle.refresh());
    let before = count(&asked.payment);
    debug_lines();
    tracing::info_span!("request", user_id = 42).in_scope(debug_lines);
    assert_eq!(count(&asked.payment), before);
    assert_eq!(count(&asked.db), 0);
    assert_eq!(count(&asked.events), 10);
    assert_eq!(LevelFilter::current(), LevelFilter::INFO);
}
