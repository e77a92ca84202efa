//! A layer with an expiry stops applying at that instant: with an injected clock when
//! the clock says so, and with the system clock on the filter's own timer, without
//! anyone touching the filter.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime};

use logpolicy::clock::{Clock, ManualClock};
use logpolicy::{Level, Policy, PolicyFilter, PolicyLayer};
use support::Count;
use tracing_subscriber::prelude::*;

fn payment_debug() {
    tracing::debug!(target: "shop::payment", "card checked");
}

#[test]
fn injected_clock_expiry_and_system_clock_timer() {
    let clock = ManualClock::new(SystemTime::now());
    let raise = PolicyLayer::new("shop/incident", 10, "shop::payment=debug".parse().unwrap())
        .unwrap()
        .expires_at(clock.now() + Duration::from_secs(900));
    let filter = PolicyFilter::with_clock(
        Policy::new(vec![PolicyLayer::baseline("info".parse().unwrap()), raise]),
        clock.clone(),
    );
    let handle = filter.handle();
    let count = Count::default();
    let dispatch = tracing::Dispatch::new(
        tracing_subscriber::registry()
            .with(filter)
            .with(count.clone()),
    );

    tracing::dispatcher::with_default(&dispatch, || {
        payment_debug();
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        clock.advance(Duration::from_secs(899));
        assert!(!handle.refresh());
        payment_debug();
        assert_eq!(count.0.load(Ordering::SeqCst), 2);
        clock.advance(Duration::from_secs(1));
        assert!(handle.refresh());
        payment_debug();
        assert_eq!(count.0.load(Ordering::SeqCst), 2);
        assert_eq!(handle.effective().sources, ["env"]);
        // The expired layer is still part of the policy, shown as such.
        assert_eq!(handle.policy().layers().len(), 2);
    });

    // System clock: the filter's own timer ends the raise; the test only waits.
    let filter = PolicyFilter::new(Policy::new(vec![
        PolicyLayer::baseline("info".parse().unwrap()),
        PolicyLayer::new("shop/short", 1, "debug".parse().unwrap())
            .unwrap()
            .expires_at(SystemTime::now() + Duration::from_millis(300)),
    ]));
    let handle = filter.handle();
    assert_eq!(handle.effective().level_for("x"), Level::Debug);
    let deadline = Instant::now() + Duration::from_secs(10);
    while handle.effective().level_for("x") != Level::Info {
        assert!(Instant::now() < deadline, "the raise did not expire");
        std::thread::yield_now();
    }
    assert_eq!(handle.effective().next_expiry, None);
}
