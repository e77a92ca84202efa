//! With `Spans::All`, a line inside nested spans carries every span's fields as
//! `tracing_subscriber::fmt`'s JSON does: the same `spans` list (root first, each span's
//! name and fields) and the same `span` (the innermost), compared here against the real
//! `fmt::layer().json()` on the same events; a request span's `user_id` is on the lines
//! of the spans nested in it. The default (`Spans::Innermost`) writes `span` only. Text
//! lines write `outer{..}:inner{..}:` as `fmt` does; `json-ecs` and `json-otel` put the
//! list where they put the span.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use logpolicy::format::Spans;
use logpolicy::{Format, FormatLayer};
use serde_json::Value;
use tracing_subscriber::prelude::*;

#[derive(Clone, Default)]
struct Buf(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Buf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Buf {
    fn lines(&self) -> Vec<String> {
        String::from_utf8(self.0.lock().unwrap().clone())
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

/// A request span with its user recorded after it was created, a nested `charge` span
/// and an event in each, then one outside any span.
fn events() {
    let request = tracing::info_span!("request", method = "GET", user_id = tracing::field::Empty);
    let _r = request.enter();
    request.record("user_id", 42u64);
    tracing::info!(path = "/checkout", "in the request");
    let charge = tracing::info_span!("charge", cents = 1250u64, card = "visa");
    charge.in_scope(|| tracing::info!(ok = true, "charged"));
    drop(_r);
    tracing::info!("outside");
}

fn ours(format: Format, spans: Spans) -> Vec<String> {
    let out = Arc::new(Mutex::new(Vec::<u8>::new()));
    let subscriber =
        tracing_subscriber::registry().with(FormatLayer::new(format, out.clone()).spans(spans));
    tracing::subscriber::with_default(subscriber, events);
    let text = String::from_utf8(out.lock().unwrap().clone()).unwrap();
    text.lines().map(str::to_owned).collect()
}

fn json(lines: &[String]) -> Vec<Value> {
    lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn the_spans_list_is_fmts() {
    let buf = Buf::default();
    let fmt_layer = tracing_subscriber::fmt::layer().json().with_writer({
        let buf = buf.clone();
        move || buf.clone()
    });
    tracing::subscriber::with_default(tracing_subscriber::registry().with(fmt_layer), events);
    let theirs = json(&buf.lines());
    let ours = json(&ours(Format::Json, Spans::All));
    assert_eq!(ours.len(), 3);
    assert_eq!(theirs.len(), 3);
    for (o, t) in ours.iter().zip(&theirs) {
        assert_eq!(o.get("spans"), t.get("spans"), "ours {o}\nfmt's {t}");
        assert_eq!(o.get("span"), t.get("span"), "ours {o}\nfmt's {t}");
    }
    // The user recorded on the request span is on the nested span's line.
    assert_eq!(ours[1]["spans"][0]["user_id"], 42, "{}", ours[1]);
    assert_eq!(ours[1]["span"]["name"], "charge", "{}", ours[1]);
    assert!(ours[2].get("spans").is_none(), "{}", ours[2]);
}

#[test]
fn the_default_writes_the_innermost_span_only() {
    let lines = json(&ours(Format::Json, Spans::default()));
    assert_eq!(lines[1]["span"]["name"], "charge");
    assert!(lines[1].get("spans").is_none(), "{}", lines[1]);
    assert!(lines[1]["span"].get("user_id").is_none(), "{}", lines[1]);
}

#[test]
fn each_format_puts_the_list_where_it_puts_the_span() {
    let ecs = json(&ours(Format::JsonEcs, Spans::All));
    assert_eq!(ecs[1]["tracing.spans"][0]["user_id"], 42, "{}", ecs[1]);
    assert_eq!(ecs[1]["tracing.spans"][1]["name"], "charge", "{}", ecs[1]);
    let otel = json(&ours(Format::JsonOtel, Spans::All));
    assert_eq!(
        otel[1]["Attributes"]["spans"][0]["user_id"], 42,
        "{}",
        otel[1]
    );
    for format in [Format::JsonGcp, Format::JsonDatadog] {
        let lines = json(&ours(format, Spans::All));
        assert_eq!(
            lines[1]["spans"][0]["user_id"], 42,
            "{format}: {}",
            lines[1]
        );
    }
    // A field named `spans` does not repeat the line's own key.
    let out = Arc::new(Mutex::new(Vec::<u8>::new()));
    let subscriber = tracing_subscriber::registry()
        .with(FormatLayer::new(Format::Json, out.clone()).spans(Spans::All));
    tracing::subscriber::with_default(subscriber, || {
        let _s = tracing::info_span!("request").entered();
        tracing::info!(spans = 3, "a field named spans");
    });
    let line: Value = serde_json::from_slice(&out.lock().unwrap()).unwrap();
    assert_eq!(line["field.spans"], 3, "{line}");
    assert_eq!(line["spans"][0]["name"], "request", "{line}");

    let text = ours(Format::Text, Spans::All);
    assert!(
        text[1].contains(
            " request{method=\"GET\" user_id=42}:charge{cents=1250 card=\"visa\"}: charged"
        ),
        "{}",
        text[1]
    );
    let text = ours(Format::Text, Spans::Innermost);
    assert!(
        text[1].contains(" charge{cents=1250 card=\"visa\"}: charged"),
        "{}",
        text[1]
    );
    assert!(!text[1].contains("request{"), "{}", text[1]);
}

/// The "Coming from fmt" table of `docs/coming-from-envfilter.md`, held against the real
/// `fmt` JSON (with `flatten_event(true)`, the event's fields at the top level as ours
/// are): the same keys with the same values, but `timestamp` is `ts` and `message` is
/// `msg`.
#[test]
fn the_keys_differ_from_fmts_only_where_the_docs_say() {
    let buf = Buf::default();
    let fmt_layer = tracing_subscriber::fmt::layer()
        .json()
        .flatten_event(true)
        .with_writer({
            let buf = buf.clone();
            move || buf.clone()
        });
    tracing::subscriber::with_default(tracing_subscriber::registry().with(fmt_layer), events);
    let theirs = json(&buf.lines());
    let ours = json(&ours(Format::Json, Spans::All));
    let renamed = |key: &str| match key {
        "ts" => "timestamp".to_owned(),
        "msg" => "message".to_owned(),
        other => other.to_owned(),
    };
    for (o, t) in ours.iter().zip(&theirs) {
        let (o, t) = (o.as_object().unwrap(), t.as_object().unwrap());
        let mut ours_keys: Vec<String> = o.keys().map(|k| renamed(k)).collect();
        let mut fmt_keys: Vec<String> = t.keys().cloned().collect();
        ours_keys.sort();
        fmt_keys.sort();
        assert_eq!(ours_keys, fmt_keys, "ours {o:?}\nfmt's {t:?}");
        for (key, value) in o {
            if key != "ts" {
                assert_eq!(Some(value), t.get(&renamed(key)), "{key}");
            }
        }
        // Both RFC 3339 in UTC, to the microsecond.
        let (ts, timestamp) = (o["ts"].as_str().unwrap(), t["timestamp"].as_str().unwrap());
        assert_eq!(ts.len(), timestamp.len(), "{ts} {timestamp}");
        assert!(
            ts.ends_with('Z') && timestamp.ends_with('Z'),
            "{ts} {timestamp}"
        );
    }
}

/// Each event's span (by its name) as two of our layers and `fmt`'s JSON see it, one of
/// ours (logfmt) behind a per-layer filter that hides the span `hidden`: events
/// outside any span, in nested spans, after leaving them, with an explicit parent while
/// in no span, and while another thread is in a span. A line finds its span through the
/// registry only while the thread is in one; these lines show that it finds every span
/// `fmt` finds, and none after the spans are left.
#[test]
fn every_layer_finds_the_span_fmt_finds_in_and_out_of_spans() {
    use tracing_subscriber::filter::filter_fn;
    let (plain, filtered) = (
        Arc::new(Mutex::new(Vec::<u8>::new())),
        Arc::new(Mutex::new(Vec::<u8>::new())),
    );
    let buf = Buf::default();
    let fmt_layer = tracing_subscriber::fmt::layer().json().with_writer({
        let buf = buf.clone();
        move || buf.clone()
    });
    let subscriber = tracing_subscriber::registry()
        .with(FormatLayer::new(Format::Json, plain.clone()))
        .with(
            FormatLayer::new(Format::Logfmt, filtered.clone())
                .with_filter(filter_fn(|m| m.name() != "hidden")),
        )
        .with(fmt_layer);
    tracing::subscriber::with_default(subscriber, || {
        tracing::info!("before");
        let request = tracing::info_span!("request");
        let hidden = tracing::info_span!("hidden");
        {
            let _r = request.enter();
            tracing::info!("in request");
            {
                let _h = hidden.enter();
                tracing::info!("in hidden");
            }
            tracing::info!("back in request");
        }
        tracing::info!("after");
        tracing::info!(parent: &request, "child of request");
        let (entered, done) = (std::sync::Barrier::new(2), std::sync::Barrier::new(2));
        let dispatch = tracing::dispatcher::get_default(Clone::clone);
        std::thread::scope(|s| {
            s.spawn(|| {
                tracing::dispatcher::with_default(&dispatch, || {
                    let _r = tracing::info_span!("elsewhere").entered();
                    entered.wait();
                    done.wait();
                });
            });
            entered.wait();
            tracing::info!("while another thread is in a span");
            done.wait();
        });
    });
    let span_of = |line: &Value| line["span"]["name"].as_str().map(str::to_owned);
    let lines = |out: &Arc<Mutex<Vec<u8>>>| -> Vec<String> {
        let text = String::from_utf8(out.lock().unwrap().clone()).unwrap();
        text.lines().map(str::to_owned).collect()
    };
    let logfmt_span = |line: &String| {
        line.split(' ')
            .find_map(|kv| kv.strip_prefix("span="))
            .map(str::to_owned)
    };
    let theirs: Vec<Option<String>> = json(&buf.lines()).iter().map(span_of).collect();
    let some = |s: &str| Some(s.to_owned());
    assert_eq!(
        theirs,
        [
            None,
            some("request"),
            some("hidden"),
            some("request"),
            None,
            some("request"),
            None
        ]
    );
    let plain: Vec<Option<String>> = json(&lines(&plain)).iter().map(span_of).collect();
    assert_eq!(plain, theirs);
    let mut hidden_skipped = theirs.clone();
    hidden_skipped[2] = some("request");
    let filtered: Vec<Option<String>> = lines(&filtered).iter().map(logfmt_span).collect();
    assert_eq!(filtered, hidden_skipped);
}

/// Two of our layers that render span fields the same way (two JSON formats, writing to
/// two places) in one subscriber: each keeps its own copy of a span's fields, so neither
/// panics at the span's creation nor writes a field recorded later twice; each line is
/// the line that layer alone writes.
#[test]
fn two_layers_of_one_kind_each_write_the_span_once() {
    let alone = |format: Format| ours(format, Spans::All);
    let (a, b) = (
        Arc::new(Mutex::new(Vec::<u8>::new())),
        Arc::new(Mutex::new(Vec::<u8>::new())),
    );
    let subscriber = tracing_subscriber::registry()
        .with(FormatLayer::new(Format::Json, a.clone()).spans(Spans::All))
        .with(FormatLayer::new(Format::JsonEcs, b.clone()).spans(Spans::All));
    tracing::subscriber::with_default(subscriber, events);
    let lines = |out: &Arc<Mutex<Vec<u8>>>| -> Vec<Value> {
        let text = String::from_utf8(out.lock().unwrap().clone()).unwrap();
        json(&text.lines().map(str::to_owned).collect::<Vec<_>>())
    };
    for (format, out) in [(Format::Json, &a), (Format::JsonEcs, &b)] {
        let together = lines(out);
        let alone = json(&alone(format));
        assert_eq!(together.len(), alone.len(), "{format:?}");
        for (t, o) in together.iter().zip(&alone) {
            for key in ["spans", "span", "tracing.spans", "tracing.span"] {
                assert_eq!(t.get(key), o.get(key), "{format:?} {key}: {t}\nalone: {o}");
            }
        }
    }
    assert_eq!(lines(&a)[1]["spans"][0]["user_id"], 42);
}

/// Values recorded into a span later are keyed by their own fields: the span's own with
/// the keys rendered for its callsite, and values of another callsite's fields (a
/// hand-made value set given to `Span::record_all`) by their own names, never by the
/// span's key at the same index.
#[test]
fn values_recorded_later_are_keyed_by_their_own_fields() {
    let lines = {
        let out = Arc::new(Mutex::new(Vec::<u8>::new()));
        let subscriber =
            tracing_subscriber::registry().with(FormatLayer::new(Format::Json, out.clone()));
        tracing::subscriber::with_default(subscriber, || {
            let request = tracing::info_span!(
                "request",
                method = tracing::field::Empty,
                path = tracing::field::Empty
            );
            let other = tracing::info_span!("other", secret_of_b = tracing::field::Empty);
            let fields = other.metadata().unwrap().fields();
            let secret = fields.field("secret_of_b").unwrap();
            let values: [(&tracing::field::Field, Option<&dyn tracing::Value>); 1] =
                [(&secret, Some(&"x"))];
            request.record_all(&fields.value_set(&values));
            request.record("path", "/cart");
            request.in_scope(|| tracing::info!("in the request"));
        });
        let text = String::from_utf8(out.lock().unwrap().clone()).unwrap();
        json(&text.lines().map(str::to_owned).collect::<Vec<_>>())
    };
    let span = &lines[0]["span"];
    assert_eq!(span["secret_of_b"], "x", "{span}");
    assert_eq!(span["path"], "/cart", "{span}");
    assert!(span.get("method").is_none(), "{span}");
}
