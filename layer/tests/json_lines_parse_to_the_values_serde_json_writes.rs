//! Every JSON line parses, with `serde_json`, to the values `serde_json` itself writes
//! for the event's fields: 100,000 random events in `json` (and 5,000 in each other JSON
//! format), with strings from every Unicode class (control characters, C1 controls,
//! quotes, backslashes, line and paragraph separators, the byte-order mark, the last
//! code point, combining marks, astral characters), strings over 64 KiB, every integer
//! width at its limits, floats (NaN and the infinities written as the strings `NaN`,
//! `inf` and `-inf`, as documented: JSON has no such numbers), bools, `Debug` and
//! `Display` values, and messages.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use logpolicy::policy::Redaction;
use logpolicy::{Format, FormatLayer};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::Value;
use tracing_subscriber::prelude::*;

/// One event's values.
#[derive(Debug, Clone)]
struct Case {
    s: String,
    message: String,
    debug: String,
    display: String,
    i8: i8,
    i16: i16,
    i32: i32,
    i64: i64,
    i128: i128,
    u8: u8,
    u16: u16,
    u32: u32,
    u64: u64,
    u128: u128,
    f: f64,
    b: bool,
}

/// Characters of every class, the ones JSON escapes most often.
fn a_char() -> impl Strategy<Value = char> {
    prop_oneof![
        4 => any::<char>(),
        2 => proptest::char::range(' ', '~'),
        2 => proptest::char::range('\u{0}', '\u{1f}'),
        1 => proptest::char::range('\u{7f}', '\u{9f}'),
        2 => prop::sample::select(vec![
            '"', '\\', '/', '\u{2028}', '\u{2029}', '\u{feff}', '\u{10ffff}', '\u{fffd}',
            '\u{301}', '\u{d7ff}', '\u{e000}', '😀', 'é', '中',
        ]),
    ]
}

fn a_string() -> impl Strategy<Value = String> {
    let short = proptest::collection::vec(a_char(), 0..48).prop_map(String::from_iter);
    // Over 64 KiB (the per-thread buffer's bound): a random string repeated.
    let long = (proptest::collection::vec(a_char(), 1..64), 0usize..64).prop_map(|(c, extra)| {
        let unit = String::from_iter(c);
        let mut s = unit.repeat(65 * 1024 / unit.len() + 1);
        s.push_str(&"x".repeat(extra));
        s
    });
    prop_oneof![2000 => short, 1 => long]
}

/// A value of an integer type, its limits and their neighbours often.
macro_rules! an_int {
    ($t:ty) => {
        prop_oneof![
            4 => any::<$t>(),
            1 => Just(<$t>::MIN),
            1 => Just(<$t>::MAX),
            1 => Just(<$t>::MIN.wrapping_add(1)),
            1 => Just(<$t>::MAX - 1),
            1 => Just(0 as $t),
            1 => 0..=100 as $t,
        ]
    };
}

fn a_float() -> impl Strategy<Value = f64> {
    prop_oneof![
        6 => any::<f64>(),
        1 => Just(f64::NAN),
        1 => Just(f64::INFINITY),
        1 => Just(f64::NEG_INFINITY),
        1 => Just(-0.0),
        1 => Just(f64::MIN_POSITIVE),
        1 => Just(f64::MAX),
        1 => Just(5e-324),
        2 => -1e6..1e6f64,
    ]
}

fn a_case() -> impl Strategy<Value = Case> {
    (
        (a_string(), a_string(), a_string(), a_string()),
        (
            an_int!(i8),
            an_int!(i16),
            an_int!(i32),
            an_int!(i64),
            an_int!(i128),
        ),
        (
            an_int!(u8),
            an_int!(u16),
            an_int!(u32),
            an_int!(u64),
            an_int!(u128),
        ),
        (a_float(), any::<bool>()),
    )
        .prop_map(
            |(
                (s, message, debug, display),
                (i8, i16, i32, i64, i128),
                (u8, u16, u32, u64, u128),
                (f, b),
            )| Case {
                s,
                message,
                debug,
                display,
                i8,
                i16,
                i32,
                i64,
                i128,
                u8,
                u16,
                u32,
                u64,
                u128,
                f,
                b,
            },
        )
}

#[inline(never)]
fn log(c: &Case) {
    tracing::info!(
        target: "prop::json",
        s = c.s.as_str(),
        i8 = c.i8,
        i16 = c.i16,
        i32 = c.i32,
        i64 = c.i64,
        i128 = c.i128,
        u8 = c.u8,
        u16 = c.u16,
        u32 = c.u32,
        u64 = c.u64,
        u128 = c.u128,
        f = c.f,
        b = c.b,
        debug = ?c.debug,
        display = %c.display,
        "{}",
        c.message
    );
}

/// What `serde_json` makes of its own text for `v`.
fn reference<T: serde::Serialize>(v: T) -> Value {
    serde_json::from_str(&serde_json::to_string(&v).unwrap()).unwrap()
}

/// The values the line must hold, by key: `serde_json`'s for each, floats that JSON
/// cannot hold as the documented strings.
fn expected(c: &Case) -> Vec<(&'static str, Value)> {
    let f = if c.f.is_finite() {
        reference(c.f)
    } else {
        Value::String(c.f.to_string())
    };
    vec![
        ("s", reference(&c.s)),
        ("i8", reference(c.i8)),
        ("i16", reference(c.i16)),
        ("i32", reference(c.i32)),
        ("i64", reference(c.i64)),
        ("i128", reference(c.i128)),
        ("u8", reference(c.u8)),
        ("u16", reference(c.u16)),
        ("u32", reference(c.u32)),
        ("u64", reference(c.u64)),
        ("u128", reference(c.u128)),
        ("f", f),
        ("b", reference(c.b)),
        ("debug", reference(format!("{:?}", c.debug))),
        ("display", reference(&c.display)),
    ]
}

/// Where each format puts an event's fields and its message.
fn fields_and_message(format: Format, line: &Value) -> (&Value, &Value) {
    match format {
        Format::Json => (line, &line["msg"]),
        Format::JsonOtel => (&line["Attributes"], &line["Body"]),
        _ => (line, &line["message"]),
    }
}

fn check(format: Format, cases: u32) {
    let out = Arc::new(Mutex::new(Vec::<u8>::new()));
    let layer = FormatLayer::new(format, out.clone()).redaction(Redaction::none());
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::with_default(subscriber, || {
        let mut runner = TestRunner::new(Config::with_cases(cases));
        runner
            .run(&a_case(), |c| {
                out.lock().unwrap().clear();
                log(&c);
                let bytes = out.lock().unwrap().clone();
                prop_assert_eq!(bytes.iter().filter(|&&b| b == b'\n').count(), 1);
                prop_assert_eq!(bytes.last(), Some(&b'\n'));
                let line: Value = match serde_json::from_slice(&bytes) {
                    Ok(v) => v,
                    Err(e) => {
                        return Err(TestCaseError::fail(format!(
                            "{format:?}: {e}: {}",
                            String::from_utf8_lossy(&bytes)
                        )))
                    }
                };
                let (fields, message) = fields_and_message(format, &line);
                prop_assert_eq!(message, &reference(&c.message), "{:?} message", format);
                for (key, want) in expected(&c) {
                    prop_assert_eq!(&fields[key], &want, "{:?} field {}", format, key);
                }
                Ok(())
            })
            .unwrap();
    });
}

#[test]
fn json_lines_parse_to_what_serde_json_writes() {
    check(Format::Json, 100_000);
}

#[test]
fn every_json_format_parses_to_what_serde_json_writes() {
    for format in [
        Format::JsonOtel,
        Format::JsonEcs,
        Format::JsonGcp,
        Format::JsonDatadog,
    ] {
        check(format, 5_000);
    }
}
