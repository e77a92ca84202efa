//! A service-shaped demo of the layer: logs from several targets at every level, then
//! raises `shop::payment` to `debug` for two seconds and shows it fall back by itself.
//!
//! Run: `cargo run --release -p logpolicy --example demo` (JSON lines on stdout when
//! piped, text on a terminal).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant, SystemTime};

use logpolicy::PolicyLayer;

fn traffic(round: u32) {
    let span = tracing::info_span!("request", id = round, method = "POST", path = "/checkout");
    let _g = span.enter();
    tracing::trace!(target: "shop::db", "pool checkout");
    tracing::debug!(target: "shop::payment", card = "4242…", "authorising");
    tracing::info!(target: "shop::http", status = 200u16, latency_us = 830u64, "served");
    if round % 3 == 0 {
        tracing::warn!(target: "shop::db", slow_ms = 412u64, "slow query");
    }
    if round % 5 == 0 {
        tracing::error!(target: "shop::payment", code = "card_declined", "payment failed");
    }
}

fn main() {
    let logging = logpolicy::init().expect("logging");
    let handle = logging.handle().clone();

    eprintln!("== baseline: {}", handle.effective());
    for round in 1..=3 {
        traffic(round);
    }

    let raise = PolicyLayer::new(
        "ops/incident-42",
        10,
        "shop::payment=debug".parse().unwrap(),
    )
    .unwrap()
    .expires_at(SystemTime::now() + Duration::from_secs(2));
    handle.upsert_layer(raise).unwrap();
    eprintln!(
        "== raised for 2 s: {} (sources {:?})",
        handle.effective(),
        handle.effective().sources
    );
    for round in 4..=6 {
        traffic(round);
    }

    eprintln!("== a bad change is refused, the policy stays:");
    if let Err(e) = handle.set_directives("info,shop=verbose") {
        eprintln!("   error: {e}");
    }

    let start = Instant::now();
    while handle.effective().sources.len() > 1 && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!(
        "== after {:.1} s the raise expired by itself: {}",
        start.elapsed().as_secs_f32(),
        handle.effective()
    );
    for round in 7..=10 {
        traffic(round);
    }
}
