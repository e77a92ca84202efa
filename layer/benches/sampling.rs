//! ns per event for sampling, side by side in one run:
//!
//! - an info event sampled 1-in-100 (99 sampled out, 1 kept) under our filter vs a
//!   1-in-100 counter sampler written with `tracing_subscriber::filter::dynamic_filter_fn`:
//!   the whole pipeline (ours writing JSON into a null sink, the peer `fmt` JSON into
//!   `io::sink`, so the one kept event in 100 is paid for as a user would), and the
//!   filters alone in front of the same do-nothing layer;
//! - a request of 20 info lines under request-scope sampling: kept, sampled out, and
//!   sampled out then flushed by an error at its end (ours, JSON into a null sink);
//! - the burst limiter under a storm from one callsite (`@burst=1000/s:1/100`) vs the
//!   same storm with no limit.
//!
//! Each case runs in a child process of this binary with its subscriber installed as the
//! global default, as a service installs it (a scoped default adds a thread-local lookup
//! to every event); the parent runs them one after the other and reads their estimates.
//!
//! Run: `cargo bench -p logpolicy --bench sampling`. Prints a markdown table and writes
//! `target/bench/sampling.json`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use criterion::Criterion;
use logpolicy::{Format, FormatLayer, NullSink, PolicyFilter};
use tracing::Dispatch;
use tracing_subscriber::filter::dynamic_filter_fn;
use tracing_subscriber::prelude::*;

mod report;
use report::{global_case as under, Row, Touch};

/// Events per criterion iteration.
const N: usize = 100;

#[inline(never)]
fn sampled_events() {
    for i in 0..N {
        tracing::info!(target: "bench::http", i, "request served");
    }
}

#[inline(never)]
fn request_of_20(fail: bool) {
    let span = tracing::info_span!("request", id = 42u64);
    let _g = span.enter();
    for i in 0..20u64 {
        tracing::info!(target: "bench::http", i, path = "/api/cart", "step");
    }
    if fail {
        tracing::error!(target: "bench::http", "failed");
    }
}

#[inline(never)]
fn storm() {
    for i in 0..N {
        tracing::info!(target: "bench::storm", i, "storm");
    }
}

fn ours_touch(directives: &str) -> Dispatch {
    Dispatch::new(
        tracing_subscriber::registry()
            .with(PolicyFilter::from_directives(directives).unwrap())
            .with(Touch),
    )
}

fn ours_json(directives: &str) -> Dispatch {
    let filter = PolicyFilter::from_directives(directives).unwrap();
    Dispatch::new(
        tracing_subscriber::registry()
            .with(filter.clone())
            .with(FormatLayer::new(Format::Json, NullSink).with_policy(&filter)),
    )
}

fn counter_sampler<S: tracing::Subscriber>() -> impl tracing_subscriber::layer::Filter<S> {
    let counter = AtomicU64::new(0);
    dynamic_filter_fn(move |meta, _| {
        if meta.is_event()
            && meta.target().starts_with("bench::http")
            && *meta.level() == tracing::Level::INFO
        {
            counter.fetch_add(1, Ordering::Relaxed) % 100 == 0
        } else {
            *meta.level() <= tracing::Level::INFO
        }
    })
}

fn fmt_json() -> Dispatch {
    Dispatch::new(
        tracing_subscriber::registry()
            .with(tracing_subscriber::filter::LevelFilter::INFO)
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_writer(std::io::sink),
            ),
    )
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(700))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();

    let g = "sample-1-in-100";
    let sample = "info,@sample(bench::http)=1/100";
    under(
        &mut c,
        g,
        "logpolicy-json",
        || ours_json(sample),
        sampled_events,
    );
    let peer = || {
        let layer = tracing_subscriber::fmt::layer()
            .json()
            .with_writer(std::io::sink)
            .with_filter(counter_sampler());
        Dispatch::new(tracing_subscriber::registry().with(layer))
    };
    under(
        &mut c,
        g,
        "dynamic_filter_fn-fmt-json",
        peer,
        sampled_events,
    );
    under(
        &mut c,
        g,
        "logpolicy-filter-only",
        || ours_touch(sample),
        sampled_events,
    );
    let peer =
        || Dispatch::new(tracing_subscriber::registry().with(Touch.with_filter(counter_sampler())));
    under(
        &mut c,
        g,
        "dynamic_filter_fn-filter-only",
        peer,
        sampled_events,
    );

    let g = "request-20-lines";
    let keep_all = "info,@sample(bench::http)=1/1:request";
    let keep_none = "info,@sample(bench::http)=1/1000000:request";
    under(
        &mut c,
        g,
        "kept",
        || ours_json(keep_all),
        || request_of_20(false),
    );
    under(
        &mut c,
        g,
        "sampled-out",
        || ours_json(keep_none),
        || request_of_20(false),
    );
    under(
        &mut c,
        g,
        "sampled-out-then-flushed",
        || ours_json(keep_none),
        || request_of_20(true),
    );
    under(
        &mut c,
        g,
        "kept-with-error",
        || ours_json(keep_all),
        || request_of_20(true),
    );
    under(&mut c, g, "fmt-json-unsampled", fmt_json, || {
        request_of_20(false)
    });

    let g = "burst-storm";
    under(
        &mut c,
        g,
        "logpolicy-burst",
        || ours_json("info,@burst=1000/s:1/100"),
        storm,
    );
    under(&mut c, g, "logpolicy-no-limit", || ours_json("info"), storm);
    under(&mut c, g, "fmt-json-no-limit", fmt_json, storm);
    c.final_summary();
    if report::is_case_child() {
        return;
    }

    let n = N as f64;
    let info = f64::INFINITY;
    let row = |case, ours, peer, target, per_iter| Row {
        case,
        ours,
        peer,
        target,
        per_iter,
    };
    let s = "sample-1-in-100";
    let r = "request-20-lines";
    let b = "burst-storm";
    let rows = [
        row(
            "info sampled 1-in-100, per event, with JSON output",
            (s, "logpolicy-json"),
            (s, "dynamic_filter_fn-fmt-json"),
            0.5,
            n,
        ),
        row(
            "info sampled 1-in-100, per event, filters alone",
            (s, "logpolicy-filter-only"),
            (s, "dynamic_filter_fn-filter-only"),
            info,
            n,
        ),
        row(
            "request of 20 lines: sampled out (held, discarded) vs kept",
            (r, "sampled-out"),
            (r, "kept"),
            info,
            1.0,
        ),
        row(
            "request of 20 lines: sampled out then flushed by an error vs kept with the error",
            (r, "sampled-out-then-flushed"),
            (r, "kept-with-error"),
            info,
            1.0,
        ),
        row(
            "request of 20 lines, kept: ours vs fmt JSON",
            (r, "kept"),
            (r, "fmt-json-unsampled"),
            0.5,
            1.0,
        ),
        row(
            "burst storm, per event: limited vs unlimited (ours)",
            (b, "logpolicy-burst"),
            (b, "logpolicy-no-limit"),
            0.25,
            n,
        ),
        row(
            "burst storm, per event: ours limited vs fmt JSON",
            (b, "logpolicy-burst"),
            (b, "fmt-json-no-limit"),
            0.1,
            n,
        ),
    ];
    let sampled_ns = report::median_ns(s, "logpolicy-json").map(|v| v / n);
    let absolute_met = sampled_ns.is_some_and(|v| v <= 15.0);
    println!(
        "\ninfo sampled 1-in-100 with JSON output: {} ns per event (target ≤ 15 ns: {})",
        sampled_ns
            .map(|v| format!("{v:.2}"))
            .unwrap_or_else(|| "?".into()),
        if absolute_met { "met" } else { "NOT met" }
    );
    report::report(
        "sampling",
        &rows,
        serde_json::json!({
            "sampled_ns_per_event": sampled_ns,
            "absolute_target_ns": 15.0,
            "absolute_met": absolute_met,
        }),
    );
}
