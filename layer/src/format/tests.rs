use super::*;
use crate::clock::ManualClock;
use proptest::prelude::*;
use std::sync::Mutex;
use std::time::{Duration, UNIX_EPOCH};
use tracing_subscriber::prelude::*;

fn capture(format: Format, f: impl FnOnce()) -> String {
    let out = Arc::new(Mutex::new(Vec::<u8>::new()));
    let clock = ManualClock::new(UNIX_EPOCH + Duration::from_micros(1_800_000_000_000_042));
    let subscriber = tracing_subscriber::registry()
        .with(FormatLayer::new(format, out.clone()).with_clock(clock));
    tracing::subscriber::with_default(subscriber, f);
    let bytes = out.lock().unwrap().clone();
    String::from_utf8(bytes).unwrap()
}

fn json_lines(s: &str) -> Vec<serde_json::Value> {
    s.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn json_line_has_every_part() {
    let out = capture(Format::Json, || {
        let span = tracing::info_span!("request", method = "GET", id = 7u64);
        let _g = span.enter();
        tracing::warn!(target: "shop::http", status = 503u16, ok = false, ratio = 0.5, neg = -3i64, err = ?"boom", "upstream {} failed", "db");
    });
    assert_eq!(
        out,
        "{\"ts\":\"2027-01-15T08:00:00.000042Z\",\"level\":\"WARN\",\"target\":\"shop::http\",\"msg\":\"upstream db failed\",\"status\":503,\"ok\":false,\"ratio\":0.5,\"neg\":-3,\"err\":\"\\\"boom\\\"\",\"span\":{\"name\":\"request\",\"method\":\"GET\",\"id\":7}}\n"
    );
}

#[test]
fn reserved_names_never_collide() {
    let out = capture(Format::Json, || {
        tracing::info!(level = "mine", ts = 1, target = "t", span = 2, msg = 3, "m");
    });
    let v = &json_lines(&out)[0];
    assert_eq!(v["level"], "INFO");
    assert_eq!(v["field.level"], "mine");
    assert_eq!(v["field.ts"], 1);
    assert_eq!(v["field.msg"], 3);
    assert_eq!(v["msg"], "m");
    // serde_json keeps the last of duplicate keys; make sure there are none.
    assert_eq!(out.matches("\"level\":").count(), 1);
}

#[test]
fn non_finite_floats_stay_valid_json() {
    let out = capture(Format::Json, || {
        tracing::info!(a = f64::NAN, b = f64::INFINITY, c = 1e300)
    });
    let v = &json_lines(&out)[0];
    assert_eq!(v["a"], "NaN");
    assert_eq!(v["b"], "inf");
    assert_eq!(v["c"], 1e300);
}

#[test]
fn errors_are_written_with_their_sources() {
    #[derive(Debug)]
    struct Outer(std::io::Error);
    impl std::fmt::Display for Outer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("payment failed")
        }
    }
    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }
    let e = Outer(std::io::Error::other("card \"declined\""));
    let out = capture(Format::Json, || {
        tracing::error!(error = &e as &dyn std::error::Error, "x")
    });
    assert_eq!(
        json_lines(&out)[0]["error"],
        "payment failed: card \"declined\""
    );
}

#[test]
fn span_fields_recorded_later_appear() {
    let out = capture(Format::Json, || {
        let span = tracing::info_span!("req", status = tracing::field::Empty);
        let _g = span.enter();
        span.record("status", 404u64);
        tracing::info!("done");
    });
    assert_eq!(json_lines(&out)[0]["span"]["status"], 404);
}

#[test]
fn text_is_one_line_per_event() {
    let out = capture(Format::Text, || {
        let span = tracing::info_span!("request", method = "GET");
        let _g = span.enter();
        tracing::info!(target: "shop::http", path = "/a\nb", n = 3, "served\r\n{}", "\u{1b}[31m");
    });
    assert_eq!(
        out,
        "2027-01-15T08:00:00.000042Z  INFO shop::http: request{method=\"GET\"}: served\\r\\n\\u{1b}[31m path=\"/a\\nb\" n=3\n"
    );
}

#[test]
fn a_sink_that_logs_does_not_panic() {
    struct Loud;
    impl LineSink for Loud {
        fn write_line(&self, _: &tracing_core::Level, _: bool, _: &[u8]) {
            tracing::info!("from inside the sink");
        }
    }
    let subscriber = tracing_subscriber::registry().with(FormatLayer::new(Format::Json, Loud));
    // The inner event re-enters on_event with the buffer borrowed; the outer event
    // was already formatted: this must not panic (tracing itself guards deeper recursion).
    tracing::subscriber::with_default(subscriber, || tracing::info!("outer"));
}

#[derive(Debug)]
#[allow(dead_code)] // read through Debug
struct Bytes(Vec<u8>);

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3_000))]

    /// Any strings in any position come back unchanged through serde_json.
    #[test]
    fn any_strings_parse_back(msg in any::<String>(), val in any::<String>(), span_val in any::<String>(), raw in prop::collection::vec(any::<u8>(), 0..40)) {
        let lossy = String::from_utf8_lossy(&raw).into_owned();
        let out = capture(Format::Json, || {
            let span = tracing::info_span!("s", v = %span_val);
            let _g = span.enter();
            tracing::info!(v = val.as_str(), d = ?Bytes(raw.clone()), l = %lossy, "{}", msg);
        });
        prop_assert_eq!(out.matches('\n').count(), 1);
        let v = &json_lines(&out)[0];
        prop_assert_eq!(v["msg"].as_str().unwrap(), msg.as_str());
        prop_assert_eq!(v["v"].as_str().unwrap(), val.as_str());
        prop_assert_eq!(v["l"].as_str().unwrap(), lossy.as_str());
        prop_assert_eq!(v["d"].as_str().unwrap(), format!("{:?}", Bytes(raw.clone())));
        prop_assert_eq!(v["span"]["v"].as_str().unwrap(), span_val.as_str());
    }

    #[test]
    fn text_never_breaks_a_line(msg in any::<String>(), val in any::<String>()) {
        let out = capture(Format::Text, || tracing::info!(v = val.as_str(), "{}", msg));
        prop_assert_eq!(out.matches('\n').count(), 1);
        prop_assert!(out.ends_with('\n'));
        prop_assert!(!out.contains('\r'));
    }
}

#[test]
fn otel_body_is_outside_attributes_wherever_the_message_comes() {
    let out = capture(Format::JsonOtel, || {
        let span = tracing::info_span!("req", id = 3);
        let _g = span.enter();
        tracing::info!(a = 1, b = "x", message = "late", c = true);
        tracing::info!(a = 2);
        tracing::info!(message = "only");
    });
    let v = json_lines(&out);
    assert_eq!(v[0]["Body"], "late", "{out}");
    assert_eq!(v[0]["Attributes"]["a"], 1);
    assert_eq!(v[0]["Attributes"]["b"], "x");
    assert_eq!(v[0]["Attributes"]["c"], true);
    assert_eq!(v[0]["Attributes"]["span"]["id"], 3);
    assert!(v[1].get("Body").is_none());
    assert_eq!(v[1]["Attributes"]["a"], 2);
    assert_eq!(v[2]["Body"], "only");
    assert_eq!(v[2]["Attributes"]["span"]["name"], "req");
    assert_eq!(v[0].as_object().unwrap().len(), 6, "{out}");
}

#[test]
fn otel_attributes_are_one_object_whatever_fields_are_absent() {
    // The message first (as the macros put it), last, in the middle or absent; fields
    // that record nothing (`None`), inside a span and outside one: `Attributes` is opened
    // by its first attribute and the message moved before it when it comes later, so
    // each of these paths must still give one well-formed object, or none when nothing
    // goes in it.
    let none: Option<u64> = None;
    let lines = |in_span: bool| {
        capture(Format::JsonOtel, || {
            let span = tracing::info_span!("req", id = 3);
            let _g = in_span.then(|| span.enter());
            tracing::info!(a = 1, "first");
            tracing::info!(a = none, "first, nothing after");
            tracing::info!(a = 1, b = none, message = "last");
            tracing::info!(a = none, message = "last, nothing before");
            tracing::info!(a = 1, message = "middle", c = none, d = true);
            tracing::info!(a = none, b = none);
            tracing::info!(a = none, message = "middle", b = none);
        })
    };
    for in_span in [false, true] {
        let out = lines(in_span);
        let v = json_lines(&out);
        let bodies: Vec<_> = v.iter().map(|l| l["Body"].clone()).collect();
        assert_eq!(
            bodies,
            [
                "first".into(),
                "first, nothing after".into(),
                "last".into(),
                "last, nothing before".into(),
                "middle".into(),
                serde_json::Value::Null,
                "middle".into()
            ],
            "{out}"
        );
        let attributes: Vec<_> = v
            .iter()
            .map(|l| {
                let mut a = l.get("Attributes").cloned().unwrap_or_default();
                if in_span {
                    let span = a.as_object_mut().and_then(|o| o.remove("span"));
                    assert_eq!(span.unwrap()["name"], "req", "{out}");
                }
                a
            })
            .collect();
        // With nothing recorded but the message, a line has no `Attributes` (outside a
        // span) or only the span's.
        let empty = if in_span {
            serde_json::json!({})
        } else {
            serde_json::Value::Null
        };
        let a1 = serde_json::json!({"a": 1});
        assert_eq!(
            attributes,
            [
                a1.clone(),
                empty.clone(),
                a1.clone(),
                empty.clone(),
                serde_json::json!({"a": 1, "d": true}),
                empty.clone(),
                empty,
            ],
            "{out}"
        );
    }
}

/// Numbers around the short way's limit (below 10,000), bools, and strings around its
/// 16 bytes (with and without something to escape or quote), as each format writes
/// them: JSON parses back to the values; logfmt and text show them as their long way
/// writes them.
#[test]
fn short_values_read_back_in_every_format() {
    let numbers = (0..=120u64)
        .chain(990..=1_010)
        .chain(9_990..=10_010)
        .chain([u64::MAX]);
    let strings = [
        "",
        "a",
        "ab",
        "abc",
        "abcd",
        "abcdefg",
        "abcdefgh",
        "abcdefghijklmnop",
        "abcdefghijklmnopq",
        "a b",
        "a\"b",
        "tab\there",
        "é",
        "日本語の文字",
        "x=y",
        "0123456789abcde\\",
        "ends with a quote\"",
    ];
    for v in numbers {
        let line = capture(Format::Json, || tracing::info!(n = v, b = v % 2 == 0, "m"));
        let line = &json_lines(&line)[0];
        assert_eq!(line["n"], serde_json::json!(v), "{v}");
        assert_eq!(line["b"], serde_json::json!(v % 2 == 0), "{v}");
        let logfmt = capture(Format::Logfmt, || {
            tracing::info!(n = v, b = v % 2 == 0, "m")
        });
        assert!(
            logfmt.ends_with(&format!(" n={v} b={}\n", v % 2 == 0)),
            "{logfmt}"
        );
        let text = capture(Format::Text, || tracing::info!(n = v, b = v % 2 == 0, "m"));
        assert!(
            text.ends_with(&format!(" n={v} b={}\n", v % 2 == 0)),
            "{text}"
        );
    }
    for s in strings {
        for format in [Format::Json, Format::JsonOtel, Format::JsonEcs] {
            let line = capture(format, || tracing::info!(s = s, "m"));
            let line = &json_lines(&line)[0];
            let value = line
                .get("s")
                .or_else(|| line.get("Attributes").and_then(|a| a.get("s")))
                .or_else(|| line.get("labels").and_then(|a| a.get("s")));
            assert_eq!(
                value,
                Some(&serde_json::json!(s)),
                "{format:?} {s:?}: {line}"
            );
        }
        let mut logfmt = Vec::new();
        crate::format::schema::write_logfmt_str(&mut logfmt, s);
        let line = capture(Format::Logfmt, || tracing::info!(s = s, "m"));
        let expected = format!(" s={}\n", String::from_utf8(logfmt).unwrap());
        assert!(line.ends_with(&expected), "{line} {expected}");
        let text = capture(Format::Text, || tracing::info!(s = s, "m"));
        let quoted = serde_json::to_string(s).unwrap();
        assert!(text.ends_with(&format!(" s={quoted}\n")), "{text} {quoted}");
    }
}
