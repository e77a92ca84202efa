//! A `log` record's line carries the keys `tracing_subscriber::fmt`'s JSON gives it
//! (through `tracing-log`): `log.target`, `log.module_path`, `log.file`, `log.line`,
//! with the same values, and the same `target`. Two children log the same records, one
//! through `fmt().json()` with `tracing-log`'s `LogTracer` (as `.init()` sets it), one
//! through `logpolicy::init()`; this process compares their lines.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod child;

use serde_json::Value;

/// A dependency that logs through `log` only.
mod tls {
    pub fn handshake(peer: &str) {
        log::info!("handshake with {peer} done");
        log::warn!(target: "tls::certs", "certificate of {peer} expires soon");
    }
}

const KEYS: [&str; 4] = ["log.target", "log.module_path", "log.file", "log.line"];

/// `(target, message, [log.* values])` of each line that has a message.
fn records(
    lines: &[Value],
    message: &str,
    fields: Option<&str>,
) -> Vec<(Value, Value, Vec<Value>)> {
    lines
        .iter()
        .map(|l| match fields {
            Some(f) => (l["target"].clone(), l[f][message].clone(), l[f].clone()),
            None => (l["target"].clone(), l[message].clone(), l.clone()),
        })
        .filter(|(_, msg, _)| msg.is_string())
        .filter(|(target, _, _)| target != "logpolicy")
        .map(|(target, msg, holder)| {
            (
                target,
                msg,
                KEYS.iter().map(|k| holder[k].clone()).collect(),
            )
        })
        .collect()
}

#[test]
fn log_records_carry_fmts_keys() {
    if child::is_child() {
        if std::env::var_os("WITH_FMT").is_some() {
            use tracing_subscriber::util::SubscriberInitExt;
            tracing_subscriber::fmt()
                .json()
                .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
                .finish()
                .init();
            tls::handshake("a");
        } else {
            let logging = logpolicy::init().unwrap();
            tls::handshake("a");
            drop(logging);
        }
        return;
    }
    let parse = |out: String| -> Vec<Value> {
        out.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    };
    let fmt = parse(child::stdout(
        "log_records_carry_fmts_keys",
        &[("RUST_LOG", "info"), ("WITH_FMT", "1")],
    ));
    let ours = parse(child::stdout(
        "log_records_carry_fmts_keys",
        &[("RUST_LOG", "info")],
    ));
    let fmt = records(&fmt, "message", Some("fields"));
    let ours = records(&ours, "msg", None);
    assert_eq!(fmt.len(), 2, "{fmt:?}");
    assert_eq!(ours, fmt);
    assert_eq!(
        ours[1].2[0], "tls::certs",
        "log.target is the record's target"
    );
    assert!(ours[0].2[3].is_u64(), "log.line is a number: {ours:?}");
}
