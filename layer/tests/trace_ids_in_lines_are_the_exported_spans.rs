//! With the `opentelemetry` feature, a line logged in a span that `tracing-opentelemetry`
//! exports carries the trace id and span id of that exported span, in the format's own
//! fields, so that the pipeline joins the line with its trace; a line outside any span
//! carries none. Spans are exported by the OpenTelemetry SDK's in-memory exporter.
//!
//! `cargo test -p logpolicy --features opentelemetry --test trace_ids_in_lines_are_the_exported_spans`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use logpolicy::writer::{Output, WriterConfig};
use logpolicy::{Format, FormatLayer};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{
    InMemorySpanExporter, InMemorySpanExporterBuilder, SdkTracerProvider,
};
use serde_json::Value;
use tracing_subscriber::prelude::*;

/// The lines `format` writes for an event in a child span of a request span and one
/// outside any span, and the exported spans' `(name, trace id, span id)`, in W3C hex.
fn run(format: Format) -> (Vec<String>, Vec<(String, String, String)>) {
    let exporter = InMemorySpanExporterBuilder::new().build();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let out = Arc::new(Mutex::new(Vec::<u8>::new()));
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")))
        .with(FormatLayer::new(format, out.clone()).gcp_project("shop-prod"));
    tracing::subscriber::with_default(subscriber, || {
        let request = tracing::info_span!("request", method = "GET");
        let _r = request.enter();
        tracing::info!("in request");
        let db = tracing::info_span!("db");
        db.in_scope(|| {
            tracing::warn!(rows = 3, "in db");
            tracing::info!("again in db: the ids kept with the span");
        });
        drop(db);
        drop(_r);
        drop(request);
        tracing::info!("outside");
    });
    provider.force_flush().unwrap();
    let spans = exported(&exporter);
    let text = String::from_utf8(out.lock().unwrap().clone()).unwrap();
    (text.lines().map(str::to_owned).collect(), spans)
}

/// The spans `exporter` has: `(name, trace id, span id)`, in W3C hex.
fn exported(exporter: &InMemorySpanExporter) -> Vec<(String, String, String)> {
    exporter
        .get_finished_spans()
        .unwrap()
        .into_iter()
        .map(|s| {
            (
                s.name.to_string(),
                s.span_context.trace_id().to_string(),
                s.span_context.span_id().to_string(),
            )
        })
        .collect()
}

/// The exported span called `name`.
fn span<'a>(spans: &'a [(String, String, String)], name: &str) -> &'a (String, String, String) {
    spans.iter().find(|s| s.0 == name).unwrap()
}

#[test]
fn each_json_format_carries_the_ids_in_its_fields() {
    for (format, trace_key, span_key) in [
        (Format::Json, "trace_id", "span_id"),
        (Format::JsonOtel, "TraceId", "SpanId"),
        (Format::JsonEcs, "trace.id", "span.id"),
        (
            Format::JsonGcp,
            "logging.googleapis.com/trace",
            "logging.googleapis.com/spanId",
        ),
    ] {
        let (lines, spans) = run(format);
        assert_eq!(lines.len(), 4, "{format}: {lines:?}");
        assert_eq!(spans.len(), 2, "{format}: {spans:?}");
        let v: Vec<Value> = lines
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let request = span(&spans, "request");
        let db = span(&spans, "db");
        assert_eq!(request.1, db.1, "one trace");
        assert_ne!(request.2, db.2);
        let trace = |id: &str| match format {
            Format::JsonGcp => format!("projects/shop-prod/traces/{id}"),
            _ => id.to_owned(),
        };
        assert_eq!(v[0][trace_key], trace(&request.1), "{format}: {}", lines[0]);
        assert_eq!(v[0][span_key], request.2, "{format}: {}", lines[0]);
        assert_eq!(v[1][trace_key], trace(&db.1), "{format}: {}", lines[1]);
        assert_eq!(v[1][span_key], db.2, "{format}: {}", lines[1]);
        assert_eq!(v[2][trace_key], v[1][trace_key], "{format}: {}", lines[2]);
        assert_eq!(v[2][span_key], v[1][span_key], "{format}: {}", lines[2]);
        assert!(v[3].get(trace_key).is_none(), "{format}: {}", lines[3]);
        assert_eq!(request.1.len(), 32);
        assert_eq!(request.2.len(), 16);
    }
}

#[test]
fn datadog_and_logfmt_carry_them_as_their_readers_join_them() {
    let (lines, spans) = run(Format::JsonDatadog);
    let db = span(&spans, "db");
    let v: Value = serde_json::from_str(&lines[1]).unwrap();
    let low64 = |hex: &str| {
        u64::from_str_radix(&hex[hex.len() - 16..], 16)
            .unwrap()
            .to_string()
    };
    assert_eq!(v["dd.trace_id"], low64(&db.1), "{}", lines[1]);
    assert_eq!(v["dd.span_id"], low64(&db.2), "{}", lines[1]);

    let (lines, spans) = run(Format::Logfmt);
    let db = span(&spans, "db");
    assert!(
        lines[1].ends_with(&format!(" trace_id={} span_id={}", db.1, db.2)),
        "{}",
        lines[1]
    );
    assert!(lines[2].ends_with(&format!(" trace_id={} span_id={}", db.1, db.2)));
    assert!(!lines[3].contains("trace_id="), "{}", lines[3]);
}

/// Logpolicy as one layer of the user's subscriber (`Builder::layer`, under the
/// OpenTelemetry layer as a service composes them): its lines, written through the
/// writer, carry the exported spans' ids, and the policy filters what is exported.
#[test]
fn as_one_layer_beside_opentelemetry_its_lines_carry_the_exported_ids() {
    let exporter = InMemorySpanExporterBuilder::new().build();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let out = std::env::temp_dir().join(format!("trace-ids-as-a-layer-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&out);
    let (layer, logging) = logpolicy::Builder::new()
        .directives("info")
        .format(Format::Json)
        .writer(WriterConfig::new(Output::File(out.clone())))
        .log_bridge(false)
        .layer()
        .unwrap();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")))
        .with(layer);
    tracing::subscriber::with_default(subscriber, || {
        let request = tracing::info_span!("request", method = "GET");
        let _r = request.enter();
        tracing::debug_span!("not exported: the policy says info").in_scope(|| {
            tracing::info!("in request");
        });
        tracing::info_span!("db").in_scope(|| tracing::warn!(rows = 3, "in db"));
    });
    provider.force_flush().unwrap();
    logging.finish();
    let spans = exported(&exporter);
    assert_eq!(spans.len(), 2, "{spans:?}");
    let lines: Vec<Value> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        // The events' lines; logpolicy's own (the exit line naming the top callsites)
        // carry no span.
        .filter(|l: &Value| l["target"] != "logpolicy")
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    let (request, db) = (span(&spans, "request"), span(&spans, "db"));
    assert_eq!(lines[0]["trace_id"], request.1, "{}", lines[0]);
    assert_eq!(lines[0]["span_id"], request.2, "{}", lines[0]);
    assert_eq!(lines[1]["trace_id"], db.1, "{}", lines[1]);
    assert_eq!(lines[1]["span_id"], db.2, "{}", lines[1]);
}

/// With no layer of the tracing-opentelemetry this feature reads (none at all here, as
/// with a layer of another version), the lines carry no ids, and one `warn` line from
/// target `logpolicy` says so, once, naming the version.
#[test]
fn without_a_layer_of_the_version_read_one_warning_says_why_there_are_no_ids() {
    let out = Arc::new(Mutex::new(Vec::<u8>::new()));
    let subscriber =
        tracing_subscriber::registry().with(FormatLayer::new(Format::Json, out.clone()));
    tracing::subscriber::with_default(subscriber, || {
        for _ in 0..3 {
            tracing::info_span!("request").in_scope(|| tracing::info!("in request"));
        }
    });
    let text = String::from_utf8(out.lock().unwrap().clone()).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let warnings: Vec<&Value> = lines
        .iter()
        .filter(|l| l["target"] == "logpolicy")
        .collect();
    assert_eq!(warnings.len(), 1, "{text}");
    assert_eq!(warnings[0]["level"], "WARN");
    assert_eq!(warnings[0]["source"], "opentelemetry");
    assert!(warnings[0]["error"]
        .as_str()
        .unwrap()
        .contains("tracing-opentelemetry 0.34"));
    assert_eq!(lines.iter().filter(|l| l["msg"] == "in request").count(), 3);
    assert!(lines.iter().all(|l| l["trace_id"].is_null()));
}
