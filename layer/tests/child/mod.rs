//! Runs one test of the current test binary again as a child process (which sees
//! `CHILD` set and plays the service) with `LOGPOLICY` set, and returns the JSON lines
//! the child wrote to its real stdout (a pipe); the harness's own lines are skipped.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

/// Set in the child.
pub const CHILD: &str = "LOGPOLICY_TEST_CHILD";

/// Whether this process is the child.
pub fn is_child() -> bool {
    std::env::var_os(CHILD).is_some()
}

/// The JSON lines written by `test` run as a child with `LOGPOLICY=directives`.
pub fn json_lines(test: &str, directives: &str) -> Vec<serde_json::Value> {
    stdout(test, &[("LOGPOLICY", directives)])
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// What `test`, run as a child with `vars` set (and none of the variables that
/// configure logging from the environment otherwise), wrote to stdout, the harness's
/// lines included.
pub fn stdout(test: &str, vars: &[(&str, &str)]) -> String {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture"])
        .env(CHILD, "1")
        .env_remove("LOGPOLICY")
        .env_remove("RUST_LOG")
        .env_remove("LOGPOLICY_ADMIN_ADDR")
        .env_remove("LOGPOLICY_FORMAT")
        .env_remove("OTEL_SERVICE_NAME")
        .env_remove("OTEL_RESOURCE_ATTRIBUTES")
        .envs(vars.iter().copied())
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// A line's `(level, target, msg)`.
pub fn summary(line: &serde_json::Value) -> (String, String, String) {
    let s = |k: &str| line[k].as_str().unwrap_or_default().to_owned();
    (s("level"), s("target"), s("msg"))
}
