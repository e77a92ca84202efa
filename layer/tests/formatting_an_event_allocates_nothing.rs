//! Formatting and handing over a line allocates nothing in the steady state, in every
//! format, for events with every kind of value, inside nested spans (innermost and
//! every span), and for records of the `log` crate: a global allocator that counts
//! every allocation of the process sees none while 200 rounds of them are written.
//!
//! One test in this binary, so no other test allocates meanwhile.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::alloc::System;
use std::time::SystemTime;

use logpolicy::clock::ManualClock;
use logpolicy::format::Spans;
use logpolicy::{
    Directives, Format, FormatLayer, LogBridge, NullSink, Policy, PolicyFilter, PolicyLayer,
};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use tracing_subscriber::prelude::*;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

#[derive(Debug)]
struct Refused;

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("refused: \"quota\"")
    }
}

impl std::error::Error for Refused {}

/// One round: events with every kind of value, and `log` records.
fn round(i: u64) {
    let error = Refused;
    tracing::info!(
        target: "shop::http",
        method = "GET",
        path = "/api/cart/42",
        status = 200u16,
        latency_us = 1234u64 + i,
        delta = -5i64,
        wide = u128::MAX,
        ratio = 0.5f64,
        nan = f64::NAN,
        cache_hit = true,
        who = ?Some("c0ffee"),
        shown = %"dis\"play",
        escaped = "tab\there \"quoted\" \\ é \u{1}",
        "request {} served in {} µs", i, 1234
    );
    tracing::warn!(target: "shop::db", error = &error as &dyn std::error::Error, "slow");
    tracing::error!(target: "shop::db", "failed \"{}\"", i);
    log::info!(target: "shop::legacy", "a log record {}", i);
    log::warn!("a log record of this module, \"quoted\"");
}

#[test]
fn no_format_allocates_per_event() {
    let directives: Directives = "info".parse().unwrap();
    let clock = ManualClock::new(SystemTime::now());
    let bridge = PolicyFilter::with_clock(
        Policy::new(vec![PolicyLayer::baseline(directives.clone())]),
        clock.clone(),
    );
    LogBridge::install(&bridge.handle()).unwrap();
    for format in Format::ALL {
        for spans in [Spans::Innermost, Spans::All] {
            let filter = PolicyFilter::with_clock(
                Policy::new(vec![PolicyLayer::baseline(directives.clone())]),
                clock.clone(),
            );
            let layer = FormatLayer::new(format, NullSink)
                .with_policy(&filter)
                .with_clock(clock.clone())
                .spans(spans);
            let subscriber = tracing_subscriber::registry().with(filter).with(layer);
            tracing::subscriber::with_default(subscriber, || {
                let outer = tracing::info_span!("request", id = 7u64, user = "c0ffee").entered();
                let inner = tracing::info_span!("charge", cents = 1250, note = "a \"b\"").entered();
                // First events: callsites' rendered parts, ledger rows, the
                // per-thread buffer and counters are made once.
                for i in 0..3 {
                    round(i);
                }
                let region = Region::new(GLOBAL);
                for i in 0..200 {
                    round(i);
                }
                let change = region.change();
                drop(inner);
                drop(outer);
                assert_eq!(
                    (change.allocations, change.reallocations),
                    (0, 0),
                    "{format:?} with {spans:?}: {change:?}"
                );
            });
        }
    }
}
