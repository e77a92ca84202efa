//! Records of a module that logs through the `log` crate (as rustls or reqwest do) are
//! written by `logpolicy::init()` under the same policy as tracing events, their module
//! path as target; a policy change reaches them; `Builder::log_bridge(false)` leaves the
//! global `log` logger alone.
//!
//! Each case re-executes this test binary as a child process logging to its real stdout
//! (a pipe), and reads what it wrote.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod child;

use std::time::Duration;

/// A dependency that logs through `log` only.
mod tls {
    pub fn handshake(peer: &str) {
        log::debug!("handshake with {peer} done");
        log::trace!("cipher suite chosen");
        log::error!("certificate of {peer} expires soon");
    }
}

fn child_lines(test: &str, directives: &str) -> Vec<(String, String, String)> {
    child::json_lines(test, directives)
        .iter()
        .map(child::summary)
        .collect()
}

fn line(level: &str, target: &str, msg: &str) -> (String, String, String) {
    (level.to_owned(), target.to_owned(), msg.to_owned())
}

#[test]
fn log_records_follow_the_policy() {
    const TARGET: &str = "log_records_are_written_under_their_module_path::tls";
    if child::is_child() {
        let logging = logpolicy::init().unwrap();
        tls::handshake("a");
        log::info!(target: "other", "not written: other targets are at warn");
        logging
            .handle()
            .set_directives(&format!("warn,{TARGET}=trace"))
            .unwrap();
        assert_eq!(log::max_level(), log::LevelFilter::Trace);
        tls::handshake("b");
        assert!(logging.flush(Duration::from_secs(10)));
        return;
    }
    let lines = child_lines(
        "log_records_follow_the_policy",
        &format!("warn,{TARGET}=debug"),
    );
    assert_eq!(
        lines,
        vec![
            line("DEBUG", TARGET, "handshake with a done"),
            line("ERROR", TARGET, "certificate of a expires soon"),
            line("DEBUG", TARGET, "handshake with b done"),
            line("TRACE", TARGET, "cipher suite chosen"),
            line("ERROR", TARGET, "certificate of b expires soon"),
            // No `bytes written by callsite` line: an `info` line of target
            // `logpolicy`, and the policy at exit says `warn` for it.
        ]
    );
}

#[test]
fn the_bridge_can_be_left_out() {
    if child::is_child() {
        let logging = logpolicy::Builder::from_env()
            .log_bridge(false)
            .try_init()
            .unwrap();
        assert_eq!(log::max_level(), log::LevelFilter::Off);
        tls::handshake("a");
        tracing::error!(target: "app", "written");
        assert!(logging.flush(Duration::from_secs(10)));
        return;
    }
    let lines = child_lines("the_bridge_can_be_left_out", "trace");
    assert_eq!(
        lines,
        vec![
            line("ERROR", "app", "written"),
            line("INFO", "logpolicy", "bytes written by callsite"),
        ]
    );
}
