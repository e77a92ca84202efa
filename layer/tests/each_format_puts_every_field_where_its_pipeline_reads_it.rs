//! The same events in every format: a plain one, one in a span with fields, one with a
//! value of every kind, one with hostile strings and fields named like the format's own
//! keys, one with redacted fields. Each line is parsed back (`serde_json`, or the logfmt
//! reader below, which unquotes as Go's `strconv.Unquote` does) and read with that
//! format's field rules (the table in `logpolicy::format`) into one common shape, which
//! must be the same for every format.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use logpolicy::clock::ManualClock;
use logpolicy::format::Service;
use logpolicy::{Format, FormatLayer};
use serde_json::{json, Value};
use tracing_subscriber::prelude::*;

const TS: &str = "2027-01-15T08:00:00.000042Z";
const TS_NANOS: &str = "1800000000000042000";
const HOSTILE: &str = "he said \"hi\"\n= x\\y\u{1b}[31m\t\u{0}é🦀 level=error";

/// A line read back with its format's rules.
#[derive(Debug, PartialEq)]
struct Line {
    level: String,
    target: String,
    msg: Option<String>,
    fields: BTreeMap<String, Value>,
    span: Option<(String, BTreeMap<String, Value>)>,
    service: (Option<String>, Option<String>),
}

/// An error whose text needs escaping.
#[derive(Debug)]
struct Failure(&'static str);
impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}
impl std::error::Error for Failure {}

fn log_events() {
    tracing::info!(target: "shop::http", "served");
    {
        let span = tracing::info_span!(
            "request",
            method = "GET",
            id = 7u64,
            q = HOSTILE,
            token = "abc"
        );
        let _g = span.enter();
        tracing::warn!(target: "shop::db", status = 503u16, "slow");
    }
    let e = Failure("card \"declined\"");
    tracing::error!(
        s = "str", d = ?Some(2), neg = -3i64, u = 42u64, big = -5i128, ubig = 7u128,
        f = 0.5, nan = f64::NAN, inf = f64::INFINITY, t = true, no = false,
        err = &e as &dyn std::error::Error, empty = "",
        "every kind"
    );
    tracing::debug!(
        target: "a\"b c",
        v = HOSTILE, "a\"b c" = 1,
        ts = 1, level = 2, target = 3, msg = 4, span = 5, "span.id" = 6,
        time = 7, severity = 8, status = 9, timestamp = 10, "logger.name" = 11,
        service = 12, version = 13, "service.name" = 14, "service.version" = 15,
        "@timestamp" = 16, "log.level" = 17, "log.logger" = 18, "ecs.version" = 19,
        "tracing.span" = 20, serviceContext = 21, "logging.googleapis.com/trace" = 22,
        trace_id = 23, "trace.id" = 24, "dd.trace_id" = 25,
        "{}", HOSTILE
    );
    tracing::trace!(password = "hunter2", user = "ann", "no message = no secret");
}

/// The lines `format` writes for [`log_events`].
fn lines(format: Format) -> Vec<String> {
    let out = Arc::new(Mutex::new(Vec::<u8>::new()));
    let clock = ManualClock::new(UNIX_EPOCH + Duration::from_micros(1_800_000_000_000_042));
    let layer = FormatLayer::new(format, out.clone())
        .with_clock(clock)
        .service(&Service::named("shop \"eu\"").version("1.2.3"));
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), log_events);
    let text = String::from_utf8(out.lock().unwrap().clone()).unwrap();
    assert!(text.ends_with('\n'));
    text.lines().map(str::to_owned).collect()
}

/// The keys `format` writes itself at the level of the fields (renamed `field.<key>`
/// when a field has them), as the format's documentation lists them.
fn reserved(format: Format) -> Vec<&'static str> {
    let keys = match format {
        // trace_id and span_id only where they can be written (the opentelemetry
        // feature): without it a service's own `trace_id` field keeps its key.
        Format::Json | Format::Logfmt if cfg!(feature = "opentelemetry") => {
            "ts level target msg span service.name service.version trace_id span_id"
        }
        Format::Json | Format::Logfmt => "ts level target msg span service.name service.version",
        Format::JsonOtel => "span",
        Format::JsonEcs => "@timestamp log.level log.logger ecs.version message tracing.span service.name service.version trace.id span.id",
        Format::JsonGcp => "time severity target message span serviceContext",
        Format::JsonDatadog => "timestamp status logger.name message span service version dd.trace_id dd.span_id",
        Format::Text => "",
    };
    keys.split(' ').collect()
}

/// A field's name with the renaming undone, checking that only reserved keys are renamed.
fn unrename(format: Format, key: &str) -> String {
    match key.strip_prefix("field.") {
        Some(name)
            if reserved(format).contains(&name)
                || (format == Format::Logfmt && name.starts_with("span."))
                || (format == Format::JsonGcp && name.starts_with("logging.googleapis.com/")) =>
        {
            name.to_owned()
        }
        _ => key.to_owned(),
    }
}

fn take_str(o: &mut serde_json::Map<String, Value>, k: &str) -> String {
    match o.remove(k) {
        Some(Value::String(s)) => s,
        other => panic!("{k}: {other:?} in {o:?}"),
    }
}

/// Reads a JSON line of `format` with its rules.
fn read_json(format: Format, line: &str) -> Line {
    let Value::Object(mut o) = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"))
    else {
        panic!("not an object: {line}")
    };
    let take = take_str;
    let (level, target, msg, service, mut fields, span);
    match format {
        Format::JsonOtel => {
            assert_eq!(take(&mut o, "Timestamp"), TS_NANOS);
            level = take(&mut o, "SeverityText").to_lowercase();
            let number = o.remove("SeverityNumber").unwrap();
            let expected = ["trace", "debug", "info", "warn", "error"]
                .iter()
                .position(|l| *l == level)
                .unwrap()
                * 4
                + 1;
            assert_eq!(number, json!(expected), "{line}");
            let Some(Value::Object(mut scope)) = o.remove("InstrumentationScope") else {
                panic!("{line}")
            };
            target = take(&mut scope, "Name");
            msg = o.remove("Body").map(|b| b.as_str().unwrap().to_owned());
            let resource = o.remove("Resource").unwrap();
            service = (
                resource["service.name"].as_str().map(str::to_owned),
                resource["service.version"].as_str().map(str::to_owned),
            );
            fields = match o.remove("Attributes") {
                Some(Value::Object(a)) => a,
                None => Default::default(),
                other => panic!("{other:?}"),
            };
            span = fields.remove("span");
        }
        Format::JsonGcp => {
            assert_eq!(take(&mut o, "time"), TS);
            level = match take(&mut o, "severity").as_str() {
                "WARNING" => "warn".to_owned(),
                // Google has no trace: the test's trace event is read as debug.
                l => l.to_lowercase(),
            };
            target = take(&mut o, "target");
            msg = o.remove("message").map(|b| b.as_str().unwrap().to_owned());
            let ctx = o.remove("serviceContext").unwrap();
            service = (
                ctx["service"].as_str().map(str::to_owned),
                ctx["version"].as_str().map(str::to_owned),
            );
            span = o.remove("span");
            fields = o;
        }
        _ => {
            let (ts, lvl, tgt, m, sn, sv, sp) = match format {
                Format::Json => (
                    "ts",
                    "level",
                    "target",
                    "msg",
                    "service.name",
                    "service.version",
                    "span",
                ),
                Format::JsonEcs => (
                    "@timestamp",
                    "log.level",
                    "log.logger",
                    "message",
                    "service.name",
                    "service.version",
                    "tracing.span",
                ),
                Format::JsonDatadog => (
                    "timestamp",
                    "status",
                    "logger.name",
                    "message",
                    "service",
                    "version",
                    "span",
                ),
                _ => unreachable!(),
            };
            if format == Format::JsonEcs {
                assert_eq!(take(&mut o, "ecs.version"), "1.6.0");
            }
            assert_eq!(take(&mut o, ts), TS);
            let raw = take(&mut o, lvl);
            if format != Format::Json {
                assert_eq!(raw, raw.to_lowercase(), "{line}");
            }
            level = raw.to_lowercase();
            target = take(&mut o, tgt);
            msg = o.remove(m).map(|b| b.as_str().unwrap().to_owned());
            service = (Some(take(&mut o, sn)), Some(take(&mut o, sv)));
            span = o.remove(sp);
            fields = o;
        }
    }
    let span = span.map(|s| {
        let Value::Object(mut s) = s else {
            panic!("{line}")
        };
        let name = take(&mut s, "name");
        (name, s.into_iter().collect())
    });
    Line {
        level,
        target,
        msg,
        fields: std::mem::take(&mut fields)
            .into_iter()
            .map(|(k, v)| (unrename(format, &k), v))
            .collect(),
        span,
        service,
    }
}

/// Splits a logfmt line into its pairs, unquoting quoted values (Go's escapes).
fn logfmt_pairs(line: &str) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    let mut rest = line;
    while !rest.is_empty() {
        rest = rest.strip_prefix(' ').unwrap_or(rest);
        let eq = rest.find('=').unwrap_or_else(|| panic!("no = in {rest:?}"));
        let key = &rest[..eq];
        assert!(
            !key.is_empty() && !key.contains([' ', '"']),
            "key {key:?} in {line}"
        );
        rest = &rest[eq + 1..];
        let value;
        if rest.starts_with('"') {
            // A quoted value is a JSON string (a subset of Go's escapes).
            let mut end = 1;
            let bytes = rest.as_bytes();
            while bytes[end] != b'"' {
                end += if bytes[end] == b'\\' { 2 } else { 1 };
            }
            value = serde_json::from_str::<String>(&rest[..=end]).unwrap();
            rest = &rest[end + 1..];
            assert!(rest.is_empty() || rest.starts_with(' '), "{line}");
        } else {
            let end = rest.find(' ').unwrap_or(rest.len());
            value = rest[..end].to_owned();
            assert!(!value.is_empty() && !value.contains(['"', '=']), "{line}");
            rest = &rest[end..];
        }
        pairs.push((key.to_owned(), value));
    }
    pairs
}

fn read_logfmt(line: &str) -> Line {
    let mut pairs: BTreeMap<String, String> = BTreeMap::new();
    for (k, v) in logfmt_pairs(line) {
        assert!(pairs.insert(k.clone(), v).is_none(), "{k} twice in {line}");
    }
    let mut take = |k: &str| pairs.remove(k).unwrap_or_else(|| panic!("{k} in {line}"));
    assert_eq!(take("ts"), TS);
    let level = take("level");
    let target = take("target");
    let service = (Some(take("service.name")), Some(take("service.version")));
    let msg = pairs.remove("msg");
    let span = pairs.remove("span").map(|name| {
        let fields = pairs
            .iter()
            .filter_map(|(k, v)| {
                Some((
                    k.strip_prefix("span.")?.to_owned(),
                    Value::String(v.clone()),
                ))
            })
            .collect();
        (name, fields)
    });
    pairs.retain(|k, _| !k.starts_with("span."));
    Line {
        level,
        target,
        msg,
        fields: pairs
            .into_iter()
            .map(|(k, v)| (unrename(Format::Logfmt, &k), Value::String(v)))
            .collect(),
        span,
        service,
    }
}

/// What every format must say about [`log_events`], values as JSON gives them.
fn expected() -> Vec<Line> {
    let obj = |v: Value| -> BTreeMap<String, Value> {
        v.as_object().unwrap().clone().into_iter().collect()
    };
    let service = (Some("shop \"eu\"".to_owned()), Some("1.2.3".to_owned()));
    let line = |level: &str, target: &str, msg: &str, fields: Value| Line {
        level: level.into(),
        target: target.into(),
        msg: Some(msg.into()),
        fields: obj(fields),
        span: None,
        service: service.clone(),
    };
    let hostile = json!({
        "v": HOSTILE, "a\"b c": 1, "ts": 1, "level": 2, "target": 3, "msg": 4, "span": 5,
        "span.id": 6, "time": 7, "severity": 8, "status": 9, "timestamp": 10,
        "logger.name": 11, "service": 12, "version": 13, "service.name": 14,
        "service.version": 15, "@timestamp": 16, "log.level": 17, "log.logger": 18,
        "ecs.version": 19, "tracing.span": 20, "serviceContext": 21,
        "logging.googleapis.com/trace": 22, "trace_id": 23, "trace.id": 24, "dd.trace_id": 25,
    });
    let mut slow = line("warn", "shop::db", "slow", json!({"status": 503}));
    slow.span = Some((
        "request".into(),
        obj(json!({"method": "GET", "id": 7, "q": HOSTILE, "token": "[redacted]"})),
    ));
    vec![
        line("info", "shop::http", "served", json!({})),
        slow,
        line(
            "error",
            module_path!(),
            "every kind",
            json!({
                "s": "str", "d": "Some(2)", "neg": -3, "u": 42, "big": -5, "ubig": 7,
                "f": 0.5, "nan": "NaN", "inf": "inf", "t": true, "no": false,
                "err": "card \"declined\"", "empty": "",
            }),
        ),
        line("debug", "a\"b c", HOSTILE, hostile),
        line(
            "trace",
            module_path!(),
            "no message = no secret",
            json!({"password": "[redacted]", "user": "ann"}),
        ),
    ]
}

/// `v` as a logfmt reader gives it back: a string.
fn as_text(v: &Value) -> Value {
    match v {
        Value::String(_) => v.clone(),
        other => Value::String(other.to_string()),
    }
}

/// A logfmt key as the format writes a field's name.
fn logfmt_key(k: &str) -> String {
    k.chars()
        .map(|c| match c {
            c if c <= ' ' || c == '=' || c == '"' || c == '\\' || c == '\u{7f}' => '_',
            c => c,
        })
        .collect()
}

#[test]
fn every_format_reads_back_as_the_same_events() {
    for format in Format::ALL {
        if format == Format::Text {
            continue;
        }
        let got: Vec<Line> = lines(format)
            .iter()
            .map(|l| match format {
                Format::Logfmt => read_logfmt(l),
                _ => read_json(format, l),
            })
            .collect();
        let mut want = expected();
        for line in &mut want {
            if format == Format::JsonGcp && line.level == "trace" {
                line.level = "debug".into();
            }
            if format == Format::Logfmt {
                let text = |m: &BTreeMap<String, Value>| {
                    m.iter().map(|(k, v)| (logfmt_key(k), as_text(v))).collect()
                };
                line.fields = text(&line.fields);
                if let Some((_, f)) = &mut line.span {
                    *f = text(f);
                }
            }
        }
        assert_eq!(got.len(), want.len(), "{format}");
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g, w, "{format}");
        }
    }
}

#[test]
fn every_line_is_one_line_and_nothing_leaks() {
    for format in Format::ALL {
        let lines = lines(format);
        assert_eq!(lines.len(), 5, "{format}: {lines:?}");
        for l in &lines {
            assert!(!l.contains(['\r', '\u{0}', '\u{1b}']), "{format}: {l}");
            assert!(
                !l.contains("hunter2") && !l.contains("abc"),
                "{format}: {l}"
            );
        }
    }
}

#[test]
fn logfmt_quotes_only_what_needs_it() {
    let lines = lines(Format::Logfmt);
    assert_eq!(
        lines[0],
        format!("ts={TS} level=info target=shop::http service.name=\"shop \\\"eu\\\"\" service.version=1.2.3 msg=served")
    );
    assert!(
        lines[1].ends_with(" status=503 span=request span.method=GET span.id=7 span.q=\"he said \\\"hi\\\"\\n= x\\\\y\\u001b[31m\\t\\u0000é🦀 level=error\" span.token=[redacted]"),
        "{}",
        lines[1]
    );
    assert!(lines[2].contains(" d=Some(2) "), "{}", lines[2]);
    assert!(lines[2].contains(" empty=\"\""), "{}", lines[2]);
}
