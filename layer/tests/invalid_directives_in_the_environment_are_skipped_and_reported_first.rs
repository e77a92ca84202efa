//! A service never fails to start over its `RUST_LOG`/`LOGPOLICY`: the invalid entries
//! are skipped, the valid ones apply, and the first lines the service writes are one
//! `warn` line from target `logpolicy` per skipped entry, naming it and why. The strict
//! form refuses the same string and names every bad entry.
//!
//! The test re-executes itself as a child process with `LOGPOLICY` set, logging through
//! `logpolicy::init()` to its real stdout (a pipe), and reads what it wrote.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod child;

use std::time::Duration;

const DIRECTIVES: &str = "shop=info,*=debug, ,shop::db=verbose,a b=debug,[span]=trace,db=2";

#[test]
fn invalid_entries_are_skipped_and_reported_first() {
    if child::is_child() {
        let err = logpolicy::Builder::from_env()
            .strict(true)
            .build()
            .unwrap_err();
        let entries = match &err {
            logpolicy::InitError::Directives { var, source } => {
                assert_eq!(*var, "LOGPOLICY");
                source.entries().len()
            }
            other => panic!("{other}"),
        };
        assert_eq!(entries, 4, "{err}");
        let logging = logpolicy::init().unwrap();
        tracing::info!(target: "shop::http", "up");
        tracing::debug!(target: "shop::http", "not written: below info");
        tracing::info!(target: "other", "not written: no default level, as with EnvFilter");
        tracing::warn!(target: "db", "written");
        assert!(logging.flush(Duration::from_secs(10)));
        return;
    }
    let lines = child::json_lines("invalid_entries_are_skipped_and_reported_first", DIRECTIVES);
    let summary: Vec<(String, String, String)> = lines
        .iter()
        .map(|l| match l["msg"] == "skipped an invalid directive" {
            true => (
                child::summary(l).0,
                child::summary(l).1,
                l["error"].as_str().unwrap_or_default().to_owned(),
            ),
            false => child::summary(l),
        })
        .collect();
    let warn = |e: &str| ("WARN".to_owned(), "logpolicy".to_owned(), e.to_owned());
    assert_eq!(
        summary,
        vec![
            warn(
                r#"directive "*=debug" starts with '*': a directive starts with a letter, a digit, '-', ':' or '_'"#
            ),
            warn(
                r#"invalid level "verbose" in directive "shop::db=verbose" (expected off, error, warn, info, debug, trace (any case), 0-5, or empty for trace)"#
            ),
            warn(
                r#"invalid target in directive "a b=debug": target "a b" contains ' ', which is not allowed in a target"#
            ),
            warn(
                r#"span filters are not supported in directive "[span]=trace": they make every disabled event in the program costly; use a target instead"#
            ),
            ("INFO".to_owned(), "shop::http".to_owned(), "up".to_owned()),
            ("WARN".to_owned(), "db".to_owned(), "written".to_owned()),
            // No line naming the callsites that wrote the most bytes when logging
            // stops: an `info` line of target `logpolicy`, which no directive enables
            // (no default level), as `EnvFilter` would write no such line.
        ],
        "{lines:?}"
    );
    assert!(lines[..4].iter().all(|l| l["source"] == "LOGPOLICY"));
}
