//! `LOGPOLICY_FORMAT` selects the format and `OTEL_SERVICE_NAME` /
//! `OTEL_RESOURCE_ATTRIBUTES` name the service on every line. A value that does not
//! parse never stops the service: it is reported in-band (in the format in force),
//! naming the variable and the value, and the default applies; strict refuses it.
//!
//! Each test re-executes itself as a child process with the variables set, logging
//! through `logpolicy::init()` to its real stdout (a pipe), and reads what it wrote.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod child;

use std::time::Duration;

fn log_one() {
    let logging = logpolicy::init().unwrap();
    tracing::info!(target: "shop::http", port = 8080, "listening");
    assert!(logging.flush(Duration::from_secs(10)));
}

#[test]
fn bad_values_are_reported_and_the_defaults_apply() {
    if child::is_child() {
        let err = logpolicy::Builder::from_env()
            .strict(true)
            .build()
            .unwrap_err();
        assert!(
            matches!(&err, logpolicy::InitError::Format { var: "LOGPOLICY_FORMAT", source } if source.value == "xml"),
            "{err}"
        );
        log_one();
        return;
    }
    let out = child::stdout(
        "bad_values_are_reported_and_the_defaults_apply",
        &[
            ("LOGPOLICY_FORMAT", "xml"),
            ("OTEL_SERVICE_NAME", "shop"),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "service.name=ignored,service.version=1.2,oops",
            ),
        ],
    );
    let lines: Vec<serde_json::Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert_eq!(lines[0]["msg"], "skipped an invalid format");
    assert_eq!(lines[0]["source"], "LOGPOLICY_FORMAT");
    assert_eq!(
        lines[0]["error"],
        "unknown format \"xml\" (expected one of: json, json-otel, json-ecs, json-gcp, json-datadog, logfmt, text)"
    );
    assert_eq!(lines[1]["msg"], "skipped an invalid resource attribute");
    assert_eq!(lines[1]["source"], "OTEL_RESOURCE_ATTRIBUTES");
    assert_eq!(
        lines[1]["error"],
        "entry \"oops\": no `=` (expected key=value)"
    );
    for l in &lines {
        assert_eq!(l["service.name"], "shop", "{l}");
        assert_eq!(l["service.version"], "1.2", "{l}");
    }
    assert_eq!(lines[0]["level"], "WARN");
    assert_eq!(lines[2]["msg"], "listening");
    assert_eq!(lines[2]["port"], 8080);
    // The line written when logging stops names the service too.
    assert_eq!(lines[3]["msg"], "bytes written by callsite");
}

#[test]
fn the_format_named_is_the_one_written() {
    if child::is_child() {
        log_one();
        return;
    }
    let out = child::stdout(
        "the_format_named_is_the_one_written",
        &[
            ("LOGPOLICY_FORMAT", " Logfmt "),
            ("OTEL_RESOURCE_ATTRIBUTES", "service.name=shop%20eu"),
        ],
    );
    let lines: Vec<&str> = out.lines().filter(|l| l.starts_with("ts=")).collect();
    assert_eq!(lines.len(), 2, "{out}");
    // When logging stops: the callsites that wrote the most bytes, flattened as logfmt
    // keys (no space, `=` or quote in a key).
    assert!(
        lines[1].contains(" target=logpolicy ") && lines[1].contains(" bytes.shop::http@"),
        "{out}"
    );
    let rest = lines[0].split_once(' ').unwrap().1;
    assert_eq!(
        rest,
        "level=info target=shop::http service.name=\"shop eu\" msg=listening port=8080"
    );
}
