//! A service never fails to start over its `RUST_LOG`/`LOGPOLICY`: the invalid entries
//! are skipped, the valid ones apply, and the first lines the service writes are one
//! `warn` line from target `logpolicy` per skipped entry, naming it and why. The strict
//! form refuses the same string and names every bad entry.
//!
//! The test re-executes itself as a child process with `LOGPOLICY` set, logging through
//! `logpolicy::init()` to its real stdout (a pipe), and reads what it wrote.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::time::Duration;

const CHILD: &str = "SKIPPED_DIRECTIVES_CHILD";
const DIRECTIVES: &str = "shop=info,*=debug, ,shop::db=verbose,a b=debug,[span]=trace,db=2";

#[test]
fn invalid_entries_are_skipped_and_reported_first() {
    if std::env::var_os(CHILD).is_some() {
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
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "invalid_entries_are_skipped_and_reported_first",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .env("LOGPOLICY", DIRECTIVES)
        .env_remove("LOGPOLICY_ADMIN_ADDR")
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let summary: Vec<(String, String, String)> = lines
        .iter()
        .map(|l| {
            let s = |k: &str| l[k].as_str().unwrap_or_default().to_owned();
            (
                s("level"),
                s("target"),
                if l["msg"] == "skipped an invalid directive" {
                    s("error")
                } else {
                    s("msg")
                },
            )
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
        ],
        "{stdout}"
    );
    assert!(lines[..4].iter().all(|l| l["source"] == "LOGPOLICY"));
}
