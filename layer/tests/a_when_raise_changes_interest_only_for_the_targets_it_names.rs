//! With a `when` raise in force, tracing asks the filter about each event only at the
//! callsites of the targets it names that it may enable, and only while a request that
//! matches is in flight (and for a second after); every other callsite keeps its
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

    // The raise. No request of customer 42 is in flight: its condition is dormant,
    // nothing is asked and the hint stays at info.
    let raise = PolicyLayer::new(
        "shop/user-42",
        10,
        "shop::payment=debug@when(user_id=42)".parse().unwrap(),
    )
    .unwrap()
    .expires_at(clock.now() + Duration::from_secs(900));
    handle.upsert_layer(raise).unwrap();
    assert_eq!(LevelFilter::current(), LevelFilter::INFO);
    debug_lines();
    tracing::info_span!("request", user_id = 7).in_scope(debug_lines);
    assert_eq!((count(&asked.payment), count(&asked.db)), (0, 0));

    // Customer 42's request: entering it wakes the condition before its first line;
    // the payment callsite is asked about each event, the db one never.
    tracing::info_span!("request", user_id = 42).in_scope(debug_lines);
    assert_eq!(
        count(&asked.events),
        10,
        "every payment line of 42's request"
    );
    assert_eq!((count(&asked.payment), count(&asked.db)), (10, 0));
    assert_eq!(LevelFilter::current(), LevelFilter::DEBUG);
    // Awake, another customer's request is asked about, and gets nothing.
    tracing::info_span!("request", user_id = 7).in_scope(debug_lines);
    assert_eq!((count(&asked.payment), count(&asked.events)), (20, 10));

    // While a thread is in 42's request, time passing does not put it to sleep.
    let open = tracing::info_span!("request", user_id = 42).entered();
    clock.advance(Duration::from_secs(5));
    handle.refresh();
    debug_lines();
    assert_eq!(count(&asked.events), 20, "the open request's lines");
    drop(open);
    // Left less than a second ago: still awake.
    clock.advance(Duration::from_millis(500));
    handle.refresh();
    debug_lines();
    assert_eq!(count(&asked.payment), 40);
    // A second after the last matching request: dormant again, never asked.
    clock.advance(Duration::from_millis(600));
    handle.refresh();
    assert_eq!(LevelFilter::current(), LevelFilter::INFO);
    debug_lines();
    tracing::info_span!("request", user_id = 7).in_scope(debug_lines);
    assert_eq!((count(&asked.payment), count(&asked.db)), (40, 0));
    // And 42's next request wakes it again, lines and all.
    tracing::info_span!("request", user_id = 42).in_scope(debug_lines);
    assert_eq!(count(&asked.events), 30);

    // It expires: neither is asked again, even in 42's requests, and the hint is back
    // to info.
    clock.advance(Duration::from_secs(900));
    assert!(handle.refresh());
    let before = count(&asked.payment);
    debug_lines();
    tracing::info_span!("request", user_id = 42).in_scope(debug_lines);
    assert_eq!(count(&asked.payment), before);
    assert_eq!(count(&asked.db), 0);
    assert_eq!(count(&asked.events), 30);
    assert_eq!(LevelFilter::current(), LevelFilter::INFO);
}

#[test]
fn a_thread_entering_a_matching_request_wakes_the_condition_for_its_first_line() {
    // Another process: a global subscriber of its own (the test above holds this one's).
    if std::env::var_os("WHEN_WAKE_CHILD").is_none() {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "a_thread_entering_a_matching_request_wakes_the_condition_for_its_first_line",
                "--exact",
                "--nocapture",
            ])
            .env("WHEN_WAKE_CHILD", "1")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
    let filter =
        PolicyFilter::from_directives("info,shop::payment=debug@when(user_id=42)").unwrap();
    let asked = Asked::default();
    tracing_subscriber::registry()
        .with(filter)
        .with(asked.clone())
        .init();
    // Many threads at once, each entering a request of customer 42 while the condition
    // sleeps, or of another: each of 42's requests has every line, from its first, and
    // no other request has any. The real clock: it may sleep again between rounds.
    for round in 0..20 {
        let before = asked.events.load(Ordering::SeqCst);
        let threads: Vec<_> = (0..8u64)
            .map(|t| {
                std::thread::spawn(move || {
                    let user = if t % 2 == 0 { 42 } else { t };
                    tracing::info_span!("request", user_id = user).in_scope(debug_lines);
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(
            asked.events.load(Ordering::SeqCst) - before,
            40,
            "round {round}: 4 requests of 42, 10 lines each"
        );
        if round % 5 == 4 {
            // The filter's timer puts the condition to sleep a second after the last
            // request of 42 (it looks every second; a loaded machine may be late).
            let since = std::time::Instant::now();
            while LevelFilter::current() != LevelFilter::INFO {
                assert!(since.elapsed() < Duration::from_secs(10), "still awake");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}
