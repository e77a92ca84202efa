//! ns per event for sampling, side by side in one run:
//!
//! - an info event sampled 1-in-100 (99 sampled out, 1 kept) under our filter vs a
//!   1-in-100 counter sampler written with `tracing_subscriber::filter::dynamic_filter_fn`,
//!   both in front of the same do-nothing layer;
//! - a request of 20 info lines under request-scope sampling: kept, sampled out, and
//!   sampled out then flushed by an error at its end (ours, JSON into a null sink);
//! - the burst limiter under a storm from one callsite (`@burst=1000/s:1/100`) vs the
//!   same storm with no limit.
//!
//! Run: `cargo bench -p logpolicy --bench sampling`. Prints a markdown table and writes
//! `target/bench/sampling.json`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use criterion::Criterion;
use logpolicy::{Format, FormatLayer, NullSink, PolicyFilter};
use tracing::Dispatch;
use tracing_subscriber::filter::dynamic_filter_fn;
use tracing_subscriber::prelude::*;

mod report;
use report::Row;

/// Events per criterion iteration.
const N: usize = 100;

struct Touch;
impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Touch {
    fn on_event(&self, e: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        black_box(e.metadata().name());
    }
}

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

fn under(c: &mut Criterion, group: &str, id: &str, dispatch: Dispatch, f: impl FnMut()) {
    let mut f = f;
    tracing::callsite::rebuild_interest_cache();
    tracing::dispatcher::with_default(&dispatch, || {
        tracing::callsite::rebuild_interest_cache();
        c.benchmark_group(group)
            .bench_function(id, |b| b.iter(&mut f));
    });
    drop(dispatch);
    tracing::callsite::rebuild_interest_cache();
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

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(700))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();

    under(
        &mut c,
        "sample-1-in-100",
        "logpolicy",
        ours_touch("info,@sample(bench::http)=1/100"),
        sampled_events,
    );
    let counter = AtomicU64::new(0);
    let peer = Dispatch::new(tracing_subscriber::registry().with(Touch.with_filter(
        dynamic_filter_fn(move |meta, _| {
            if meta.is_event()
                && meta.target().starts_with("bench::http")
                && *meta.level() == tracing::Level::INFO
            {
                counter.fetch_add(1, Ordering::Relaxed) % 100 == 0
            } else {
                *meta.level() <= tracing::Level::INFO
            }
        }),
    )));
    under(
        &mut c,
        "sample-1-in-100",
        "dynamic_filter_fn",
        peer,
        sampled_events,
    );

    under(
        &mut c,
        "request-20-lines",
        "kept",
        ours_json("info,@sample(bench::http)=1/1:request"),
        || request_of_20(false),
    );
    under(
        &mut c,
        "request-20-lines",
        "sampled-out",
        ours_json("info,@sample(bench::http)=1/1000000:request"),
        || request_of_20(false),
    );
    under(
        &mut c,
        "request-20-lines",
        "sampled-out-then-flushed",
        ours_json("info,@sample(bench::http)=1/1000000:request"),
        || request_of_20(true),
    );
    under(
        &mut c,
        "request-20-lines",
        "kept-with-error",
        ours_json("info,@sample(bench::http)=1/1:request"),
        || request_of_20(true),
    );
    under(
        &mut c,
        "request-20-lines",
        "fmt-json-unsampled",
        Dispatch::new(
            tracing_subscriber::registry()
                .with(tracing_subscriber::filter::LevelFilter::INFO)
                .with(
                    tracing_subscriber::fmt::layer()
                        .json()
                        .with_writer(std::io::sink),
                ),
        ),
        || request_of_20(false),
    );

    under(
        &mut c,
        "burst-storm",
        "logpolicy-burst",
        ours_json("info,@burst=1000/s:1/100"),
        storm,
    );
    under(
        &mut c,
        "burst-storm",
        "logpolicy-no-limit",
        ours_json("info"),
        storm,
    );
    under(
        &mut c,
        "burst-storm",
        "fmt-json-no-limit",
        Dispatch::new(
            tracing_subscriber::registry()
                .with(tracing_subscriber::filter::LevelFilter::INFO)
                .with(
                    tracing_subscriber::fmt::layer()
                        .json()
                        .with_writer(std::io::sink),
                ),
        ),
        storm,
    );
    c.final_summary();

    let n = N as f64;
    let rows = [
        Row {
            case: "info sampled 1-in-100, per event",
            ours: ("sample-1-in-100", "logpolicy"),
            peer: ("sample-1-in-100", "dynamic_filter_fn"),
            target: 0.5,
            per_iter: n,
        },
        Row {
            case: "request of 20 lines: sampled out vs kept (ours)",
            ours: ("request-20-lines", "sampled-out"),
            peer: ("request-20-lines", "kept"),
            target: 1.0,
            per_iter: 1.0,
        },
        Row {
            case:
                "request of 20 lines: sampled out, then flushed by an error vs kept with the error",
            ours: ("request-20-lines", "sampled-out-then-flushed"),
            peer: ("request-20-lines", "kept-with-error"),
            target: 1.5,
            per_iter: 1.0,
        },
        Row {
            case: "request of 20 lines kept (ours) vs fmt JSON",
            ours: ("request-20-lines", "kept"),
            peer: ("request-20-lines", "fmt-json-unsampled"),
            target: 0.5,
            per_iter: 1.0,
        },
        Row {
            case: "burst storm, per event: limited vs unlimited (ours)",
            ours: ("burst-storm", "logpolicy-burst"),
            peer: ("burst-storm", "logpolicy-no-limit"),
            target: 0.25,
            per_iter: n,
        },
        Row {
            case: "burst storm, per event: ours limited vs fmt JSON",
            ours: ("burst-storm", "logpolicy-burst"),
            peer: ("burst-storm", "fmt-json-no-limit"),
            target: 0.1,
            per_iter: n,
        },
    ];
    let sampled_ns = report::median_ns("sample-1-in-100", "logpolicy").map(|v| v / n);
    let absolute_met = sampled_ns.is_some_and(|v| v <= 15.0);
    println!(
        "\ninfo sampled 1-in-100: {} ns per event (target ≤ 15 ns: {})",
        sampled_ns
            .map(|v| format!("{v:.2}"))
            .unwrap_or_else(|| "?".into()),
        if absolute_met { "met" } else { "NOT met" }
    );
    report::report(
        "sampling",
        &rows,
        serde_json::json!({ "sampled_ns_per_event": sampled_ns, "absolute_target_ns": 15.0, "absolute_met": absolute_met }),
    );
}
