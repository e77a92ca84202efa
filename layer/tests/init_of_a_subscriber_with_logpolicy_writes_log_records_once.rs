//! `tracing_subscriber::registry().with(logpolicy_layer).init()`, the smallest edit of a
//! service that had `.with(fmt_layer).init()`, installs without a panic (`.init()` also
//! sets `tracing-log`'s `log` logger, with `tracing-subscriber`'s default features), and
//! each `log` record is written exactly once, under its own target, with the keys the
//! bridge gives it, and a raise reaches them (`log`'s max level follows the policy);
//! `set_global_default` gives the same lines. Each case runs in a child
//! process (a global subscriber and a global `log` logger are once per process).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod child;

use serde_json::Value;

/// A dependency that logs through `log` only.
mod tls {
    pub fn handshake() {
        log::info!("handshake done");
        log::debug!("not written: debug is off");
        log::warn!(target: "tls::certs", "certificate expires soon");
    }

    pub fn details() {
        log::debug!("cipher suite chosen");
    }
}

fn service(with_init: bool) {
    use tracing_subscriber::prelude::*;
    let (layer, logging) = logpolicy::Builder::from_env().layer().unwrap();
    let subscriber = tracing_subscriber::registry().with(layer);
    if with_init {
        subscriber.init();
    } else {
        tracing::subscriber::set_global_default(subscriber).unwrap();
    }
    tracing::info!(target: "shop::http", "listening");
    tls::handshake();
    tracing::info!(target: "shop::http", "served");
    tls::handshake();
    // A raise reaches `log` records too: `log`'s max level follows the policy.
    logging
        .handle()
        .set_directives(&format!("info,{}=debug", module_path!()))
        .unwrap();
    tls::details();
    drop(logging);
}

/// `(level, target, msg, log.target)` of each line but logpolicy's own.
fn lines(test: &str) -> Vec<(String, String, String, Value)> {
    child::json_lines(test, "info")
        .iter()
        .map(|l| {
            let (level, target, msg) = child::summary(l);
            (level, target, msg, l["log.target"].clone())
        })
        .filter(|l| l.1 != "logpolicy")
        .collect()
}

fn expected() -> Vec<(String, String, String, Value)> {
    const TLS: &str = "init_of_a_subscriber_with_logpolicy_writes_log_records_once::tls";
    let line = |level: &str, target: &str, msg: &str, log_target: Option<&str>| {
        (
            level.to_owned(),
            target.to_owned(),
            msg.to_owned(),
            log_target.map_or(Value::Null, Value::from),
        )
    };
    let handshake = [
        line("INFO", TLS, "handshake done", Some(TLS)),
        line(
            "WARN",
            "tls::certs",
            "certificate expires soon",
            Some("tls::certs"),
        ),
    ];
    let mut all = vec![line("INFO", "shop::http", "listening", None)];
    all.extend(handshake.clone());
    all.push(line("INFO", "shop::http", "served", None));
    all.extend(handshake);
    all.push(line("DEBUG", TLS, "cipher suite chosen", Some(TLS)));
    all
}

#[test]
fn init_installs_it_and_each_log_record_is_written_once() {
    if child::is_child() {
        return service(true);
    }
    assert_eq!(
        lines("init_installs_it_and_each_log_record_is_written_once"),
        expected()
    );
}

#[test]
fn set_global_default_gives_the_same_lines() {
    if child::is_child() {
        return service(false);
    }
    assert_eq!(lines("set_global_default_gives_the_same_lines"), expected());
}
