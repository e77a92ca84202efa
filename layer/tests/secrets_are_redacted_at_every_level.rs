//! Raising verbosity never dumps secrets: fields with a redacted name are written as
//! `[redacted]` in JSON and text, in events and in spans (recorded at creation and
//! later), at every level; value shapes (bearer tokens, JWTs) are cut out of any string
//! when a policy turns that on; a pushed policy can add names and never remove one.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use logpolicy::wire::PolicyDocument;
use logpolicy::{Format, FormatLayer, PolicyFilter, PolicyHandle, PolicyLayer};
use proptest::prelude::*;
use serde_json::Value;
use tracing_subscriber::prelude::*;

const JWT: &str =
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";

/// Runs `f` with a subscriber whose baseline is `directives`, writing `format` into a
/// buffer; returns the output and the handle.
fn run(directives: &str, format: Format, f: impl FnOnce(&PolicyHandle)) -> (String, PolicyHandle) {
    let out = Arc::new(Mutex::new(Vec::<u8>::new()));
    let filter = PolicyFilter::from_directives(directives).expect("directives");
    let handle = filter.handle();
    let output = FormatLayer::new(format, out.clone()).with_policy(&filter);
    let subscriber = tracing_subscriber::registry().with(filter).with(output);
    tracing::subscriber::with_default(subscriber, || f(&handle));
    let text = String::from_utf8(out.lock().expect("lock").clone()).expect("utf-8");
    (text, handle)
}

fn json_lines(out: &str) -> Vec<Value> {
    out.lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .filter(|v: &Value| v["target"] != "logpolicy")
        .collect()
}

fn log_secrets() {
    let span = tracing::trace_span!(
        "request",
        user_token = "tok-in-span",
        path = "/pay",
        password = tracing::field::Empty
    );
    let _in = span.enter();
    span.record("password", "hunter2-later");
    tracing::trace!(
        password = "hunter2",
        Authorization = "Basic dXNlcjpwYXNz",
        "db.password" = "pg-secret",
        user_token = "tok-123",
        user_id = 42,
        "charging"
    );
}

/// The values [`log_secrets`] gives redacted names.
fn assert_no_secret(out: &str) {
    for secret in [
        "hunter2",
        "dXNlcjpwYXNz",
        "pg-secret",
        "tok-123",
        "tok-in-span",
    ] {
        assert!(!out.contains(secret), "{secret} leaked: {out}");
    }
}

#[test]
fn named_fields_are_redacted_in_json_events_and_spans_at_trace() {
    let (out, handle) = run("trace", Format::Json, |_| log_secrets());
    assert_no_secret(&out);
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 1, "{out}");
    let l = &lines[0];
    for key in ["password", "Authorization", "db.password", "user_token"] {
        assert_eq!(l[key], "[redacted]", "{key}: {l}");
    }
    assert_eq!(l["user_id"], 42);
    assert_eq!(l["msg"], "charging");
    assert_eq!(l["span"]["user_token"], "[redacted]");
    assert_eq!(l["span"]["password"], "[redacted]", "recorded later: {l}");
    assert_eq!(l["span"]["path"], "/pay");
    // 4 in the event, 2 in the span.
    assert_eq!(handle.stats().redacted.by_name, 6);
    assert_eq!(handle.stats().redacted.by_value, 0);
}

#[test]
fn named_fields_are_redacted_in_text() {
    let (out, _) = run("trace", Format::Text, |_| log_secrets());
    assert_no_secret(&out);
    let line = out
        .lines()
        .find(|l| l.contains("charging"))
        .expect("the event");
    assert!(line.contains("password=\"[redacted]\""), "{line}");
    assert!(line.contains("Authorization=\"[redacted]\""), "{line}");
    assert!(line.contains("user_id=42"), "{line}");
    assert!(
        line.contains("request{user_token=\"[redacted]\" path=\"/pay\" password=\"[redacted]\"}"),
        "{line}"
    );
}

#[test]
fn value_shapes_are_cut_from_every_string_only_when_turned_on() {
    let log = || {
        tracing::info!(header = %format!("Bearer {JWT}"), note = "plain", "got token {JWT} from the client");
        tracing::info!(err = ?"authorization: bearer abcdefgh12345", "ok");
    };
    let (off, _) = run("info", Format::Json, |_| log());
    assert!(off.contains(JWT), "off by default: {off}");

    let (on, handle) = run("info,@redact_values=on", Format::Json, |_| log());
    assert!(!on.contains(JWT), "{on}");
    assert!(!on.contains("abcdefgh12345"), "{on}");
    let lines = json_lines(&on);
    assert_eq!(lines[0]["msg"], "got token [redacted] from the client");
    assert_eq!(lines[0]["header"], "Bearer [redacted]");
    assert_eq!(lines[0]["note"], "plain");
    assert_eq!(lines[1]["err"], "\"authorization: bearer [redacted]\"");
    assert_eq!(handle.stats().redacted.by_value, 3);
}

#[test]
fn a_pushed_policy_adds_names_and_cannot_remove_one() {
    let (out, handle) = run("info", Format::Json, |handle| {
        let span = tracing::info_span!("checkout", iban = "DE-in-old-span");
        let _in = span.enter();
        tracing::info!(iban = "DE-1", "before");
        handle
            .upsert_layer(
                PolicyLayer::new("shop/raise", 5, "shop=trace,@redact=iban".parse().unwrap())
                    .unwrap(),
            )
            .unwrap();
        tracing::trace!(target: "shop", iban = "DE-2", password = "pw", "after");
    });
    let lines = json_lines(&out);
    assert_eq!(lines[0]["iban"], "DE-1");
    assert_eq!(lines[0]["span"]["iban"], "DE-in-old-span");
    assert_eq!(lines[1]["iban"], "[redacted]");
    assert_eq!(lines[1]["password"], "[redacted]");
    // The span opened before the push is rendered again for the next line.
    assert_eq!(lines[1]["span"]["iban"], "[redacted]", "{out}");
    assert!(!out.contains("DE-2"));

    // A pushed layer may not remove a name, in any form.
    let err = PolicyLayer::new("shop/raise", 5, "@redact=-password".parse().unwrap()).unwrap_err();
    assert!(
        err.to_string()
            .contains("cannot stop redacting \"password\""),
        "{err}"
    );
    let doc = br#"{"pod":{"namespace":"shop","name":"web-1","uid":"u1"},"version":3,
        "issuedAt":"2026-11-29T20:06:15Z",
        "layers":[{"source":"shop/raise","redact":["card_token"],"unredact":["password"]}]}"#;
    let err = PolicyDocument::decode(doc).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("layers[0].unredact: a pushed policy cannot stop redacting"),
        "{err}"
    );
    let doc = br#"{"pod":{"namespace":"shop","name":"web-1","uid":"u1"},"version":3,
        "issuedAt":"2026-11-29T20:06:15Z",
        "layers":[{"source":"shop/raise","redact":["card token"]}]}"#;
    let err = PolicyDocument::decode(doc).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("layers[0].redact[0]: field name \"card token\" contains ' '"),
        "{err}"
    );
    // And the handle's policy is unchanged by what was refused.
    assert!(handle.effective().redaction().redacts("password"));
}

#[test]
fn the_baseline_can_remove_a_builtin_name() {
    let (out, _) = run("info,@redact=-cookie", Format::Json, |_| {
        tracing::info!(cookie = "theme=dark", token = "t0k3n", "served");
    });
    let l = &json_lines(&out)[0];
    assert_eq!(l["cookie"], "theme=dark");
    assert_eq!(l["token"], "[redacted]");
}

#[test]
fn the_summary_line_says_how_many_values_were_redacted() {
    let (out, _) = run("info", Format::Json, |_| {
        tracing::info!(password = "a", secret = "b", "one");
    });
    let summary: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["target"] == "logpolicy")
        .collect();
    assert_eq!(summary.len(), 1, "{out}");
    assert_eq!(summary[0]["redacted"]["name"], 2, "{out}");
    assert_eq!(summary[0]["redacted"]["value"], 0);
}

// Fixed callsites with names that are redacted by default, by a random extra list, or
// not at all; random values. No value of a redacted field may reach the output.
fn log_random(values: &[String; 6]) {
    tracing::info!(
        password = values[0].as_str(),
        "x.api_key" = values[1].as_str(),
        order_id = values[2].as_str(),
        customer_email = values[3].as_str(),
        note = values[4].as_str(),
        "Session-Token" = ?values[5],
        "e"
    );
    let span = tracing::info_span!(
        "s",
        customer_email = values[3].as_str(),
        order_id = tracing::field::Empty
    );
    let _in = span.enter();
    span.record("order_id", values[2].as_str());
    tracing::info!(note = values[4].as_str(), "f");
}

const NAMES: [&str; 6] = [
    "password",
    "x.api_key",
    "order_id",
    "customer_email",
    "note",
    "Session-Token",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn no_value_of_a_redacted_name_is_ever_written(
        extra in proptest::sample::subsequence(vec!["order_id", "email", "NOTE", "customer-email", "id"], 0..4),
        values in proptest::array::uniform6("[a-zA-Z0-9 \"\\\\\n\u{1b}é-]{0,12}"),
        text in any::<bool>(),
    ) {
        let values: [String; 6] = std::array::from_fn(|i| format!("V{i}Q{}", values[i]));
        let mut directives = String::from("info");
        for e in &extra {
            directives.push_str(&format!(",@redact={e}"));
        }
        let format = if text { Format::Text } else { Format::Json };
        let (out, handle) = run(&directives, format, |_| log_random(&values));
        let redaction = handle.effective().redaction();
        for (name, value) in NAMES.iter().zip(&values) {
            let escaped = serde_json::to_string(value).unwrap();
            let escaped = &escaped[1..escaped.len() - 1];
            // The distinctive start of the value (`V<i>Q`), as any format writes it.
            let head = &escaped[..3];
            if redaction.redacts(name) {
                prop_assert!(!out.contains(escaped) && !out.contains(value.as_str()), "{name}={value:?} leaked: {out}");
            } else if !text {
                prop_assert!(out.contains(head), "{name}={value:?} missing: {out}");
            }
        }
    }
}
