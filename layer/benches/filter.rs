//! ns per event for the filter and the formatter, side by side with what a Rust user
//! would pick instead, in the same run:
//!
//! (a) a disabled `debug!` and a disabled `info!(target: "noisy")` under our filter, under
//!     `EnvFilter` with the same directives, and with no subscriber;
//! (b) the same after 1,000 policy swaps (ours: handle swaps; peer: `reload` of EnvFilter);
//! (c) an enabled event and a per-target-filtered event behind
//!     `reload::Layer<EnvFilter>` and behind our filter;
//! (d) an enabled 6-field `info!` formatted to JSON into a sink: ours vs
//!     `tracing_subscriber::fmt` JSON;
//! (d') the same 6-field event with redaction: no field name matching (today's default:
//!     the built-in list) and one matching (`user` added), each against the same layer
//!     told to redact nothing, the three sampled in turns in one process
//!     (`report::interleaved`: the median of the per-round ratios);
//! (f) a 200-byte message with value-shape redaction on (bearer tokens, JWTs, keys
//!     searched in every string) against off;
//! (e) the 5 lines of one request of the HTTP benchmark's service (`bench/`): ours as
//!     `logpolicy::init` builds it, into the non-blocking writer (to `/dev/null`), vs
//!     `tracing_subscriber::fmt` JSON into a sink: what the request's thread pays;
//! (g) the same 6-field event in every format (`json-otel`, `json-ecs`, `json-gcp`,
//!     `json-datadog`, `logfmt`, `text`) against `json`, all sampled in turns in one
//!     process (`report::interleaved`), with the service named (as `init` names it
//!     from `OTEL_SERVICE_NAME`), and the bytes of each line;
//! (h) with `--features opentelemetry`: the 6-field event in a span that carries an
//!     OpenTelemetry context (a `tracing-opentelemetry` layer with an SDK tracer that
//!     exports nothing, filtered to see spans only, so that its own recording of events
//!     is not counted), its line with the trace id and span id, against the same span
//!     without that layer;
//! (n) the 6-field event inside three nested spans (`request{method,user_id}` >
//!     `handler{route}` > `db{table}`, entered once), to JSON with every span's fields
//!     (`Spans::All`, fmt's shape) vs `tracing_subscriber::fmt` JSON (which writes every
//!     span by default), and vs ours with the innermost span only (the default);
//! (f) records of the `log` crate: a disabled `log::debug!` and a `log::info!(target:
//!     "noisy")` disabled by target, through our bridge (`logpolicy::log_bridge`) vs
//!     through `tracing-log`'s `LogTracer` + `EnvFilter` (each with `log`'s max level as
//!     its `init` sets it), and an enabled `log::info!` to JSON, ours vs `LogTracer` +
//!     `fmt` JSON. Only one `log` logger can be set per process: both are reached through
//!     the same switch, so both pay its one atomic load.
//!
//! (w) with one `when` rule in force (`shop::payment=debug@when(user_id=42)`): a disabled
//!     `debug!` of a target it does not name against the same filter without the rule;
//!     a disabled `debug!(target: "shop::payment")` outside any matching span against
//!     `EnvFilter` with the equivalent span filter
//!     (`shop::payment[request{user_id=42}]=debug`); and the same `debug!` inside a
//!     matching request span, to JSON, against an unconditional `shop::payment=debug`
//!     (reported). With customer 42's requests in flight, the named-outside pair is
//!     also measured with its processes sampled in turns (`report::paired`: 7 batches
//!     of fresh processes, 15 rounds of one ~20 ms sample each; the row's figure is the
//!     median of the per-round ratios), with a third case, the floor: a filter that
//!     answers at once at the same `sometimes` callsite, i.e. tracing's own path, which
//!     no filter avoids.
//!
//! Run: `cargo bench -p logpolicy --bench filter`. Prints a markdown table and writes
//! `target/bench/filter.json`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::LazyLock;
use std::time::Duration;

use criterion::Criterion;
use logpolicy::format::{Service, Spans};
use logpolicy::policy::{FieldName, Redaction};
use logpolicy::writer::{Output, Writer, WriterConfig};
use logpolicy::{Format, FormatLayer, LogBridge, NullSink, PolicyFilter};
use tracing::Dispatch;
use tracing_log::LogTracer;
use tracing_subscriber::prelude::*;
use tracing_subscriber::{reload, EnvFilter};

mod events;
mod report;
use events::six_fields;
use report::{Row, Touch};

const DIRECTIVES: &str = "info,noisy=warn";
/// Macro calls per criterion iteration, so that loop overhead does not dominate ~1 ns.
const N: usize = 100;

#[inline(never)]
fn disabled_debug() {
    for i in 0..N {
        tracing::debug!(i, "disabled by level");
    }
}

#[inline(never)]
fn disabled_noisy() {
    for i in 0..N {
        tracing::info!(target: "noisy", i, "disabled by target");
    }
}

#[inline(never)]
fn enabled_info() {
    for i in 0..N {
        tracing::info!(target: "app", i, "enabled");
    }
}

#[inline(never)]
fn filtered_by_target() {
    for i in 0..N {
        tracing::info!(target: "noisy::db", i, "disabled by target");
    }
}

/// What the HTTP benchmark's service logs per request at 5 lines.
#[inline(never)]
fn http_request() {
    let (method, path) = ("GET", "/api/orders");
    for step in 1..5u32 {
        tracing::info!(target: "http", method, path, step, "handling request");
    }
    tracing::info!(
        target: "http",
        method,
        path,
        status = 200u16,
        latency_us = 12u64,
        bytes = 9usize,
        "request completed"
    );
}

/// 200 bytes of message with no secret in it, and one string field.
#[inline(never)]
fn long_message() {
    tracing::info!(
        target: "shop::http",
        user = "c0ffee-42",
        "request served to the customer after checking the basket, the stock of every item, the \
         delivery slots, the vouchers and the payment method on file; nothing to report here ok"
    );
}

#[inline(never)]
fn disabled_db() {
    for i in 0..N {
        tracing::debug!(target: "shop::db", i, "disabled by level");
    }
}

#[inline(never)]
fn payment_debug() {
    for i in 0..N {
        tracing::debug!(target: "shop::payment", i, "charging the card");
    }
}

const WHEN_RULE: &str = "info,shop::payment=debug@when(user_id=42)";
/// Batches of fresh processes and rounds in each, of the paired named-outside cases
/// with customer 42 in flight (awake).
const WHEN_ROUNDS: (usize, usize) = (7, 15);

/// Rounds of the in-process comparisons sampled in turns ((d') and (g)).
const INTERLEAVED_ROUNDS: usize = 31;

/// (d'): the 6-field JSON line redacting nothing, with the built-in names, and with one
/// field's name added, sampled in turns.
static REDACTION_PAIRED: std::sync::OnceLock<report::Paired> = std::sync::OnceLock::new();

/// (g): the 6-field event in every format, sampled in turns.
static FORMATS_PAIRED: std::sync::OnceLock<report::Paired> = std::sync::OnceLock::new();

/// The named-outside cases with customer 42 in flight, sampled in turns.
static WHEN_PAIRED: std::sync::OnceLock<report::Paired> = std::sync::OnceLock::new();

/// The per-round ratios of the awake named-outside cases, and their medians: ours vs
/// EnvFilter (the target), the floor vs EnvFilter (the least any filter could reach
/// there), ours vs the floor (what ours adds to tracing's own path).
fn when_rounds() -> serde_json::Value {
    let Some(p) = WHEN_PAIRED.get() else {
        return serde_json::Value::Null;
    };
    let summary = |a: &str, b: &str| {
        let r = p.ratios(a, b);
        let q = |f: f64| {
            r.get(((r.len() as f64 - 1.0) * f).round() as usize)
                .copied()
        };
        (q(0.25), p.median_ratio(a, b), q(0.75))
    };
    let ours = summary("logpolicy", "envfilter");
    let floor = summary("floor", "envfilter");
    let over = summary("logpolicy", "floor");
    let show = |(lo, m, hi): (Option<f64>, Option<f64>, Option<f64>)| {
        format!(
            "median {:.3} (quartiles {:.3}-{:.3})",
            m.unwrap_or(f64::NAN),
            lo.unwrap_or(f64::NAN),
            hi.unwrap_or(f64::NAN)
        )
    };
    let batches = |a: &str, b: &str| p.batch_medians(a, b, WHEN_ROUNDS.1);
    println!(
        "(w) named-outside with 42 in flight, {} batches of {} paired rounds: ours vs EnvFilter span filter {} (target 0.4); floor vs EnvFilter {}; ours vs floor {}",
        WHEN_ROUNDS.0,
        WHEN_ROUNDS.1,
        show(ours),
        show(floor),
        show(over)
    );
    println!(
        "(w) the same, each batch's median: ours vs EnvFilter {:.3?}; floor vs EnvFilter {:.3?}; ours vs floor {:.3?}",
        batches("logpolicy", "envfilter"),
        batches("floor", "envfilter"),
        batches("logpolicy", "floor")
    );
    let json = |(lo, m, hi): (Option<f64>, Option<f64>, Option<f64>)| serde_json::json!({"q1": lo, "median": m, "q3": hi});
    serde_json::json!({
        "batches": WHEN_ROUNDS.0,
        "rounds_per_batch": WHEN_ROUNDS.1,
        "ns_per_event": {
            "logpolicy": p.median_ns("logpolicy").map(|v| v / N as f64),
            "envfilter": p.median_ns("envfilter").map(|v| v / N as f64),
            "floor": p.median_ns("floor").map(|v| v / N as f64),
        },
        "ours_vs_envfilter": json(ours),
        "target": 0.4,
        "floor_vs_envfilter": json(floor),
        "ours_vs_floor": json(over),
        "batch_medians": {
            "ours_vs_envfilter": batches("logpolicy", "envfilter"),
            "floor_vs_envfilter": batches("floor", "envfilter"),
            "ours_vs_floor": batches("logpolicy", "floor"),
        },
    })
}

/// The least a filter can cost at a `sometimes` callsite: tracing's own path. Interest
/// as ours gives it with the condition awake (`shop::payment` sometimes, other callsites
/// by level), and `enabled` answering from the level alone, with no lookup at all.
struct Floor;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Floor {
    fn register_callsite(
        &self,
        meta: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        use tracing::subscriber::Interest;
        if meta.target() == "shop::payment" {
            Interest::sometimes()
        } else if *meta.level() <= tracing::Level::INFO {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn enabled(
        &self,
        meta: &tracing::Metadata<'_>,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) -> bool {
        *meta.level() <= tracing::Level::INFO
    }

    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(tracing::level_filters::LevelFilter::DEBUG)
    }
}

/// EnvFilter with the span filter equivalent to [`WHEN_RULE`], reloadable as ours is.
fn span_filter() -> Dispatch {
    env_filter("info,shop::payment[request{user_id=42}]=debug").0
}

/// [`Floor`] under the same layers as ours.
fn floor() -> Dispatch {
    Dispatch::new(tracing_subscriber::registry().with(Floor).with(Touch))
}

/// `f` while another thread is inside a request of customer 42 (entered once, before
/// the first batch, and held): the `when` condition is awake, as in a service where that
/// customer's requests are in flight all the time.
fn while_42_in_flight(mut f: impl FnMut()) -> impl FnMut() {
    let mut holder = None;
    move || {
        holder.get_or_insert_with(|| {
            let (tx, rx) = std::sync::mpsc::channel();
            let t = std::thread::spawn(move || {
                let _in = tracing::info_span!("request", user_id = 42u64).entered();
                let _ = tx.send(());
                loop {
                    std::thread::park(); // the request stays open: the process ends it
                }
            });
            let _ = rx.recv();
            t
        });
        f();
    }
}

/// `f` in an entered span `request{user_id}` (created once), as a request handler
/// runs: the span is entered and left around each batch of events.
fn in_request(user: u64, f: fn()) -> impl FnMut() {
    let mut span = None;
    move || {
        let span = span.get_or_insert_with(|| tracing::info_span!("request", user_id = user));
        let _in = span.enter();
        f();
    }
}

/// The `when` cases run with their subscriber as the process's global default (in a
/// child process each, see `report::global_case`), as in a service: the costs compared
/// are a few nanoseconds, of which a scoped default would add its own.
fn bench_when(c: &mut Criterion) {
    use report::global_case;
    let plain = |d: &'static str| move || ours(d).0;
    global_case(
        c,
        "w-when",
        "other-target/no-rule",
        plain("info"),
        disabled_db,
    );
    global_case(
        c,
        "w-when",
        "other-target/unconditional",
        plain("info,shop::payment=debug"),
        disabled_db,
    );
    global_case(
        c,
        "w-when",
        "other-target/rule",
        plain(WHEN_RULE),
        disabled_db,
    );
    global_case(
        c,
        "w-when",
        "other-target/rule-awake",
        plain(WHEN_RULE),
        while_42_in_flight(disabled_db),
    );
    // Outside a matching span: in a request of another user, as most events are; with
    // no request of 42 in flight (the condition dormant), and with one (awake).
    global_case(
        c,
        "w-when",
        "named-outside/logpolicy",
        plain(WHEN_RULE),
        in_request(7, payment_debug),
    );
    global_case(
        c,
        "w-when",
        "named-outside-awake/logpolicy",
        plain(WHEN_RULE),
        while_42_in_flight(in_request(7, payment_debug)),
    );
    global_case(
        c,
        "w-when",
        "named-outside/envfilter",
        span_filter,
        in_request(7, payment_debug),
    );
    // The same callsite under a filter that answers at once (the floor), alone, for
    // profiles of it.
    global_case(
        c,
        "w-when",
        "named-outside-awake/floor",
        floor,
        while_42_in_flight(in_request(7, payment_debug)),
    );
    // The awake cases again, sampled in turns (a machine whose speed changes from one
    // second to the next moves one criterion case against another; see
    // `report::paired`): this is the row's figure.
    let paired = report::paired(
        "w-when",
        "named-outside-paired",
        &[
            ("logpolicy", || ours(WHEN_RULE).0),
            ("envfilter", span_filter),
            ("floor", floor),
        ],
        WHEN_ROUNDS,
        while_42_in_flight(in_request(7, payment_debug)),
    );
    if let Some(p) = paired {
        let _ = WHEN_PAIRED.set(p);
    }
    let json = |directives: &'static str| {
        move || {
            let filter = PolicyFilter::from_directives(directives).expect("directives");
            Dispatch::new(
                tracing_subscriber::registry()
                    .with(filter.clone())
                    .with(FormatLayer::new(Format::Json, NullSink).with_policy(&filter)),
            )
        }
    };
    global_case(
        c,
        "w-when",
        "inside/logpolicy-when",
        json(WHEN_RULE),
        in_request(42, payment_debug),
    );
    global_case(
        c,
        "w-when",
        "inside/logpolicy-unconditional",
        json("info,shop::payment=debug"),
        in_request(42, payment_debug),
    );
}

fn ours(directives: &str) -> (Dispatch, logpolicy::PolicyHandle) {
    let filter = PolicyFilter::from_directives(directives).expect("directives");
    let handle = filter.handle();
    (
        Dispatch::new(tracing_subscriber::registry().with(filter).with(Touch)),
        handle,
    )
}

fn env_filter(
    directives: &str,
) -> (
    Dispatch,
    reload::Handle<EnvFilter, tracing_subscriber::Registry>,
) {
    let (layer, handle) = reload::Layer::new(EnvFilter::new(directives));
    (
        Dispatch::new(tracing_subscriber::registry().with(layer).with(Touch)),
        handle,
    )
}

/// Runs `f` under `dispatch` with only that dispatcher alive, so tracing's interest
/// cache reflects it alone (as in a service with one global subscriber).
///
/// Scoped, not global as in the sampling bench (`report::global_case`): case (a) compares
/// with no subscriber, and with none installed globally `tracing` turns every level off
/// before any callsite is looked at, which no subscriber that enables `info` can match
/// (EnvFilter neither): that row would measure something else.
fn under(c: &mut Criterion, group: &str, id: &str, dispatch: Dispatch, f: fn()) {
    tracing::callsite::rebuild_interest_cache();
    tracing::dispatcher::with_default(&dispatch, || {
        tracing::callsite::rebuild_interest_cache();
        c.benchmark_group(group).bench_function(id, |b| b.iter(f));
    });
    drop(dispatch);
    tracing::callsite::rebuild_interest_cache();
}

fn bench_disabled(c: &mut Criterion, group: &str, swaps: usize) {
    for (name, f) in [("debug", disabled_debug as fn()), ("noisy", disabled_noisy)] {
        let (d, h) = ours(DIRECTIVES);
        for i in 0..swaps {
            h.set_directives(if i % 2 == 0 {
                "debug,noisy=info"
            } else {
                DIRECTIVES
            })
            .expect("swap");
        }
        h.set_directives(DIRECTIVES).expect("swap");
        under(c, group, &format!("{name}/logpolicy"), d, f);

        let (d, h) = env_filter(DIRECTIVES);
        for i in 0..swaps {
            let next = if i % 2 == 0 {
                "debug,noisy=info"
            } else {
                DIRECTIVES
            };
            h.reload(EnvFilter::new(next)).expect("reload");
        }
        h.reload(EnvFilter::new(DIRECTIVES)).expect("reload");
        under(c, group, &format!("{name}/envfilter"), d, f);

        if swaps == 0 {
            under(
                c,
                group,
                &format!("{name}/no-subscriber"),
                Dispatch::none(),
                f,
            );
        }
    }
}

fn bench_reloadable(c: &mut Criterion) {
    for (name, f) in [
        ("enabled", enabled_info as fn()),
        ("target-filtered", filtered_by_target),
    ] {
        under(
            c,
            "c-reloadable",
            &format!("{name}/logpolicy"),
            ours(DIRECTIVES).0,
            f,
        );
        under(
            c,
            "c-reloadable",
            &format!("{name}/reload-envfilter"),
            env_filter(DIRECTIVES).0,
            f,
        );
    }
}

fn line_bytes(dispatch: &Dispatch, out: &std::sync::Mutex<Vec<u8>>) -> usize {
    tracing::dispatcher::with_default(dispatch, six_fields);
    let n = out.lock().map(|b| b.len()).unwrap_or(0);
    n
}

fn bench_json(c: &mut Criterion) -> serde_json::Value {
    let ours = || {
        Dispatch::new(
            tracing_subscriber::registry()
                .with(PolicyFilter::from_directives("info").expect("directives"))
                .with(FormatLayer::new(Format::Json, NullSink)),
        )
    };
    let fmt = || {
        Dispatch::new(
            tracing_subscriber::registry()
                .with(EnvFilter::new("info"))
                .with(
                    tracing_subscriber::fmt::layer()
                        .json()
                        .with_writer(std::io::sink),
                ),
        )
    };
    under(c, "d-json", "logpolicy", ours(), six_fields);
    under(c, "d-json", "fmt-json", fmt(), six_fields);
    let redacting = |redaction: Redaction| {
        Dispatch::new(
            tracing_subscriber::registry()
                .with(PolicyFilter::from_directives("info").expect("directives"))
                .with(FormatLayer::new(Format::Json, NullSink).redaction(redaction)),
        )
    };
    let user = FieldName::new("user").expect("name");
    let redaction = report::interleaved(
        "d-json",
        "redaction",
        &[
            ("unredacted", redacting(Redaction::none())),
            ("builtin", ours()),
            ("one-redacted", redacting(Redaction::builtin().with([user]))),
        ],
        INTERLEAVED_ROUNDS,
        six_fields,
    );
    if let Some(p) = redaction {
        let _ = REDACTION_PAIRED.set(p);
    }
    under(
        c,
        "f-values",
        "off",
        redacting(Redaction::builtin()),
        long_message,
    );
    under(
        c,
        "f-values",
        "on",
        redacting(Redaction::builtin().with_values(true)),
        long_message,
    );

    let filter = PolicyFilter::from_directives("info").expect("directives");
    let (writer, guard) = Writer::new(WriterConfig::new(Output::File("/dev/null".into())))
        .expect("writer to /dev/null");
    let linked = Dispatch::new(
        tracing_subscriber::registry()
            .with(filter.clone())
            .with(FormatLayer::new(Format::Json, writer).with_policy(&filter)),
    );
    under(
        c,
        "e-http-request",
        "logpolicy-writer",
        linked,
        http_request,
    );
    drop(guard);
    under(c, "e-http-request", "fmt-json", fmt(), http_request);

    // Bytes per line, measured on one line each.
    let buf = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let ours_line = Dispatch::new(
        tracing_subscriber::registry().with(FormatLayer::new(Format::Json, buf.clone())),
    );
    let ours_bytes = line_bytes(&ours_line, &buf);
    let ours_text =
        String::from_utf8_lossy(&buf.lock().map(|b| b.clone()).unwrap_or_default()).into_owned();
    drop(ours_line);
    let fmt_buf = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let w = fmt_buf.clone();
    let fmt_line = Dispatch::new(
        tracing_subscriber::registry().with(
            tracing_subscriber::fmt::layer()
                .json()
                .with_writer(move || SharedVec(w.clone())),
        ),
    );
    let fmt_bytes = line_bytes(&fmt_line, &fmt_buf);
    let fmt_text = String::from_utf8_lossy(&fmt_buf.lock().map(|b| b.clone()).unwrap_or_default())
        .into_owned();
    println!("\nbytes per 6-field line: logpolicy {ours_bytes}, fmt JSON {fmt_bytes}");
    println!("logpolicy: {}", ours_text.trim_end());
    println!("fmt JSON:  {}", fmt_text.trim_end());
    let formats = bench_formats();
    serde_json::json!({
        "bytes_per_line": { "logpolicy": ours_bytes, "fmt-json": fmt_bytes },
        "bytes_per_line_by_format": formats,
    })
}

/// (n): the 6-field event in three nested spans: ours with every span's fields
/// (`Spans::All`), ours with the innermost only, and `fmt` JSON (every span).
fn bench_nested_spans(c: &mut Criterion) {
    let ours = |spans: Spans| {
        Dispatch::new(
            tracing_subscriber::registry()
                .with(PolicyFilter::from_directives("info").expect("directives"))
                .with(FormatLayer::new(Format::Json, NullSink).spans(spans)),
        )
    };
    let fmt = Dispatch::new(
        tracing_subscriber::registry()
            .with(EnvFilter::new("info"))
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_writer(std::io::sink),
            ),
    );
    for (id, dispatch) in [
        ("logpolicy-all", ours(Spans::All)),
        ("logpolicy-innermost", ours(Spans::Innermost)),
        ("fmt-json", fmt),
    ] {
        tracing::callsite::rebuild_interest_cache();
        tracing::dispatcher::with_default(&dispatch, || {
            tracing::callsite::rebuild_interest_cache();
            let request = tracing::info_span!("request", method = "GET", user_id = 42u64);
            let _r = request.enter();
            let handler = tracing::info_span!("handler", route = "/checkout");
            let _h = handler.enter();
            let db = tracing::info_span!("db", table = "orders");
            let _d = db.enter();
            c.benchmark_group("n-spans")
                .bench_function(id, |b| b.iter(six_fields));
        });
    }
    tracing::callsite::rebuild_interest_cache();
}

/// (h): the 6-field event in an entered span, with and without an OpenTelemetry context.
#[cfg(feature = "opentelemetry")]
fn bench_trace_context(c: &mut Criterion) {
    use opentelemetry::trace::TracerProvider as _;
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
    let with = Dispatch::new(
        tracing_subscriber::registry()
            .with(PolicyFilter::from_directives("info").expect("directives"))
            .with(
                tracing_opentelemetry::layer()
                    .with_tracer(provider.tracer("bench"))
                    .with_filter(tracing_subscriber::filter::filter_fn(|m| m.is_span())),
            )
            .with(FormatLayer::new(Format::Json, NullSink)),
    );
    let without = Dispatch::new(
        tracing_subscriber::registry()
            .with(PolicyFilter::from_directives("info").expect("directives"))
            .with(FormatLayer::new(Format::Json, NullSink)),
    );
    for (id, dispatch) in [("with-context", with), ("without", without)] {
        tracing::callsite::rebuild_interest_cache();
        tracing::dispatcher::with_default(&dispatch, || {
            tracing::callsite::rebuild_interest_cache();
            let span = tracing::info_span!("request", method = "GET");
            let _entered = span.enter();
            c.benchmark_group("h-trace")
                .bench_function(id, |b| b.iter(six_fields));
        });
    }
    tracing::callsite::rebuild_interest_cache();
}

/// (g): the 6-field event in each format, and the bytes of its line.
fn bench_formats() -> serde_json::Value {
    let service = Service::named("shop").version("1.4.2");
    let layer = |format: Format| {
        Dispatch::new(
            tracing_subscriber::registry()
                .with(PolicyFilter::from_directives("info").expect("directives"))
                .with(FormatLayer::new(format, NullSink).service(&service)),
        )
    };
    // Every format sampled in turns with `json`: each ratio compares neighbours in time
    // (a shared machine drifts by more than the 5% the target allows between criterion
    // cases).
    let cases: Vec<(&'static str, Dispatch)> = Format::ALL
        .into_iter()
        .map(|format| (format.name(), layer(format)))
        .collect();
    if let Some(p) = report::interleaved("g-formats", "all", &cases, INTERLEAVED_ROUNDS, six_fields)
    {
        let _ = FORMATS_PAIRED.set(p);
    }
    let mut bytes = serde_json::Map::new();
    println!("\nbytes per 6-field line, by format (service named):");
    for format in Format::ALL {
        let buf = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let one = Dispatch::new(
            tracing_subscriber::registry()
                .with(FormatLayer::new(format, buf.clone()).service(&service)),
        );
        let n = line_bytes(&one, &buf);
        let line = String::from_utf8_lossy(&buf.lock().map(|b| b.clone()).unwrap_or_default())
            .into_owned();
        println!("{:>13} {n:>4}  {}", format.name(), line.trim_end());
        bytes.insert(format.name().to_owned(), n.into());
    }
    bytes.into()
}

struct SharedVec(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
impl std::io::Write for SharedVec {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut v) = self.0.lock() {
            v.extend_from_slice(b);
        }
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[inline(never)]
fn log_disabled_debug() {
    for i in 0..N {
        log::debug!("disabled by level {i}");
    }
}

#[inline(never)]
fn log_disabled_noisy() {
    for i in 0..N {
        log::info!(target: "noisy", "disabled by target {i}");
    }
}

#[inline(never)]
fn log_enabled() {
    log::info!(target: "shop::http", "GET /api/cart/42 served 200 in {}us", 1234);
}

/// The bench's global `log` logger: our bridge, or `LogTracer` when `TRACER` is set.
struct LogSwitch;
static TRACER: AtomicBool = AtomicBool::new(false);
static LOG_TRACER: LazyLock<LogTracer> = LazyLock::new(LogTracer::new);

impl log::Log for LogSwitch {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        if TRACER.load(Ordering::Relaxed) {
            LOG_TRACER.enabled(m)
        } else {
            LogBridge.enabled(m)
        }
    }
    fn log(&self, r: &log::Record<'_>) {
        if TRACER.load(Ordering::Relaxed) {
            LOG_TRACER.log(r)
        } else {
            LogBridge.log(r)
        }
    }
    fn flush(&self) {}
}

fn bench_log(c: &mut Criterion) {
    log::set_logger(&LogSwitch).expect("the only log logger");
    // Both set `log`'s max level to their filter's most verbose level: `LogBridge::install`
    // to the policy's, `fmt().init()` (feature tracing-log) to `LevelFilter::current()`.
    log::set_max_level(log::LevelFilter::Info);
    for (name, f) in [
        ("debug", log_disabled_debug as fn()),
        ("noisy", log_disabled_noisy),
    ] {
        TRACER.store(false, Ordering::Relaxed);
        under(
            c,
            "f-log",
            &format!("{name}/logpolicy"),
            ours(DIRECTIVES).0,
            f,
        );
        TRACER.store(true, Ordering::Relaxed);
        under(
            c,
            "f-log",
            &format!("{name}/tracing-log-envfilter"),
            env_filter(DIRECTIVES).0,
            f,
        );
    }
    TRACER.store(false, Ordering::Relaxed);
    let ours = Dispatch::new(
        tracing_subscriber::registry()
            .with(PolicyFilter::from_directives("info").expect("directives"))
            .with(FormatLayer::new(Format::Json, NullSink)),
    );
    under(c, "f-log", "json/logpolicy", ours, log_enabled);
    TRACER.store(true, Ordering::Relaxed);
    let fmt = Dispatch::new(
        tracing_subscriber::registry()
            .with(EnvFilter::new("info"))
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_writer(std::io::sink),
            ),
    );
    under(c, "f-log", "json/tracing-log-fmt-json", fmt, log_enabled);
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(700))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    if report::is_case_child() {
        // A child process running one of the global `when` cases.
        bench_when(&mut c);
        return;
    }
    bench_disabled(&mut c, "a-disabled", 0);
    bench_disabled(&mut c, "b-after-1000-swaps", 1_000);
    bench_reloadable(&mut c);
    let extra = bench_json(&mut c);
    #[cfg(feature = "opentelemetry")]
    bench_trace_context(&mut c);
    bench_nested_spans(&mut c);
    bench_log(&mut c);
    bench_when(&mut c);
    c.final_summary();

    let n = N as f64;
    let rows = vec![
        Row {
            case: "(w) one when rule: disabled debug! of a target it does not name, vs an unconditional raise of the same target",
            ours: ("w-when", "other-target/rule"),
            peer: ("w-when", "other-target/unconditional"),
            target: 1.1,
            per_iter: n,
        },
        Row {
            case: "(w) the same vs no rule (debug! stopped by the max-level hint; reported)",
            ours: ("w-when", "other-target/rule"),
            peer: ("w-when", "other-target/no-rule"),
            target: f64::INFINITY,
            per_iter: n,
        },
        Row {
            case: "(w) the same, customer 42's requests in flight (condition awake)",
            ours: ("w-when", "other-target/rule-awake"),
            peer: ("w-when", "other-target/unconditional"),
            target: 1.1,
            per_iter: n,
        },
        Row {
            case: "(w) one when rule: disabled debug! of its target outside a match, no match in flight, vs EnvFilter span filter",
            ours: ("w-when", "named-outside/logpolicy"),
            peer: ("w-when", "named-outside/envfilter"),
            target: 0.4,
            per_iter: n,
        },
        Row {
            case: "(w) the same, customer 42's requests in flight (condition awake), one criterion process each, seconds apart (reported: the paired row is the figure)",
            ours: ("w-when", "named-outside-awake/logpolicy"),
            peer: ("w-when", "named-outside/envfilter"),
            target: f64::INFINITY,
            per_iter: n,
        },
        Row {
            case: "(w) debug! in a matching request to JSON, vs unconditional debug (reported)",
            ours: ("w-when", "inside/logpolicy-when"),
            peer: ("w-when", "inside/logpolicy-unconditional"),
            target: f64::INFINITY,
            per_iter: n,
        },
        Row {
            case: "(a) disabled debug!",
            ours: ("a-disabled", "debug/logpolicy"),
            peer: ("a-disabled", "debug/envfilter"),
            target: 1.1,
            per_iter: n,
        },
        Row {
            case: "(a) disabled info!(target: noisy)",
            ours: ("a-disabled", "noisy/logpolicy"),
            peer: ("a-disabled", "noisy/envfilter"),
            target: 1.1,
            per_iter: n,
        },
        Row {
            case: "(a) disabled debug! vs no subscriber",
            ours: ("a-disabled", "debug/logpolicy"),
            peer: ("a-disabled", "debug/no-subscriber"),
            target: 1.1,
            per_iter: n,
        },
        Row {
            case: "(a) disabled noisy vs no subscriber",
            ours: ("a-disabled", "noisy/logpolicy"),
            peer: ("a-disabled", "noisy/no-subscriber"),
            target: 1.1,
            per_iter: n,
        },
        Row {
            case: "(b) disabled debug!, 1,000 swaps",
            ours: ("b-after-1000-swaps", "debug/logpolicy"),
            peer: ("b-after-1000-swaps", "debug/envfilter"),
            target: 1.1,
            per_iter: n,
        },
        Row {
            case: "(b) disabled noisy, 1,000 swaps",
            ours: ("b-after-1000-swaps", "noisy/logpolicy"),
            peer: ("b-after-1000-swaps", "noisy/envfilter"),
            target: 1.1,
            per_iter: n,
        },
        Row {
            case: "(c) enabled event",
            ours: ("c-reloadable", "enabled/logpolicy"),
            peer: ("c-reloadable", "enabled/reload-envfilter"),
            target: 1.1,
            per_iter: n,
        },
        Row {
            case: "(c) per-target-filtered event",
            ours: ("c-reloadable", "target-filtered/logpolicy"),
            peer: ("c-reloadable", "target-filtered/reload-envfilter"),
            target: 1.1,
            per_iter: n,
        },
        Row {
            case: "(d) 6-field info! to JSON",
            ours: ("d-json", "logpolicy"),
            peer: ("d-json", "fmt-json"),
            target: 0.3,
            per_iter: 1.0,
        },
        Row {
            case: "(f) 200-byte message, value shapes on vs off (reported)",
            ours: ("f-values", "on"),
            peer: ("f-values", "off"),
            target: f64::INFINITY,
            per_iter: 1.0,
        },
        Row {
            case: "(e) an HTTP request's 5 lines (per request)",
            ours: ("e-http-request", "logpolicy-writer"),
            peer: ("e-http-request", "fmt-json"),
            target: f64::INFINITY,
            per_iter: 1.0,
        },
        Row {
            case: "(n) 6-field JSON in 3 nested spans, every span's fields (Spans::All) vs fmt JSON",
            ours: ("n-spans", "logpolicy-all"),
            peer: ("n-spans", "fmt-json"),
            target: 0.5,
            per_iter: 1.0,
        },
        Row {
            case: "(n) the same, every span vs the innermost only (the default; reported)",
            ours: ("n-spans", "logpolicy-all"),
            peer: ("n-spans", "logpolicy-innermost"),
            target: f64::INFINITY,
            per_iter: 1.0,
        },
        Row {
            case: "(f) disabled log::debug!",
            ours: ("f-log", "debug/logpolicy"),
            peer: ("f-log", "debug/tracing-log-envfilter"),
            target: 1.1,
            per_iter: n,
        },
        Row {
            case: "(f) log::info!(target: noisy), disabled by target",
            ours: ("f-log", "noisy/logpolicy"),
            peer: ("f-log", "noisy/tracing-log-envfilter"),
            target: f64::INFINITY,
            per_iter: n,
        },
        Row {
            case: "(f) enabled log::info! to JSON",
            ours: ("f-log", "json/logpolicy"),
            peer: ("f-log", "json/tracing-log-fmt-json"),
            target: 0.3,
            per_iter: 1.0,
        },
    ];
    #[cfg(feature = "opentelemetry")]
    let mut rows = rows;
    #[cfg(feature = "opentelemetry")]
    rows.push(Row {
        case: "(h) 6-field JSON in a span with an OpenTelemetry context vs without (reported)",
        ours: ("h-trace", "with-context"),
        peer: ("h-trace", "without"),
        target: f64::INFINITY,
        per_iter: 1.0,
    });
    let mut extra = extra;
    extra["when_named_outside_paired"] = when_rounds();
    let mut paired: Vec<report::PairedRow<'_>> = Vec::new();
    if let Some(p) = REDACTION_PAIRED.get() {
        paired.push(report::PairedRow {
            case: "(d') 6-field JSON, redaction on, no name matching, vs redacting nothing (sampled in turns)",
            paired: p,
            ours: "builtin",
            peer: "unredacted",
            target: 1.03,
            per_iter: 1.0,
        });
        paired.push(report::PairedRow {
            case: "(d') 6-field JSON, one field redacted, vs redacting nothing (sampled in turns)",
            paired: p,
            ours: "one-redacted",
            peer: "unredacted",
            target: 1.10,
            per_iter: 1.0,
        });
    }
    if let Some(p) = FORMATS_PAIRED.get() {
        for (case, format) in [
            (
                "(g) 6-field event as json-otel vs json (sampled in turns)",
                Format::JsonOtel,
            ),
            (
                "(g) 6-field event as json-ecs vs json (sampled in turns)",
                Format::JsonEcs,
            ),
            (
                "(g) 6-field event as json-gcp vs json (sampled in turns)",
                Format::JsonGcp,
            ),
            (
                "(g) 6-field event as json-datadog vs json (sampled in turns)",
                Format::JsonDatadog,
            ),
            (
                "(g) 6-field event as logfmt vs json (sampled in turns)",
                Format::Logfmt,
            ),
            (
                "(g) 6-field event as text vs json (sampled in turns)",
                Format::Text,
            ),
        ] {
            paired.push(report::PairedRow {
                case,
                paired: p,
                ours: format.name(),
                peer: Format::Json.name(),
                target: 1.05,
                per_iter: 1.0,
            });
        }
    }
    paired.extend(WHEN_PAIRED.get().map(|p| report::PairedRow {
            case: "(w) the same named-outside debug!, customer 42's requests in flight (condition awake), sampled in turns with the EnvFilter case (median of the per-round ratios)",
            paired: p,
            ours: "logpolicy",
            peer: "envfilter",
            target: 0.4,
            per_iter: n,
        }));
    report::report_with("filter", &rows, &paired, extra);
}
