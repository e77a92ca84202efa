//! Trace ids cost a service that does not ask for them nothing: with the default
//! features, `cargo tree` shows no OpenTelemetry crate among `logpolicy`'s dependencies
//! (and with `--features opentelemetry` it does, so the check sees what it looks for).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

const OPENTELEMETRY: [&str; 2] = ["opentelemetry", "tracing-opentelemetry"];

/// The packages `logpolicy` depends on (normal dependencies, any depth).
fn tree(features: &[&str]) -> Vec<String> {
    let out = Command::new(env!("CARGO"))
        .args(["tree", "--offline", "-p", "logpolicy", "-e", "normal"])
        .args(["--prefix", "none"])
        .args(features)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let text = String::from_utf8(out.stdout).unwrap();
    text.lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}

#[test]
fn no_opentelemetry_without_the_feature() {
    let default = tree(&[]);
    assert!(default.iter().any(|p| p == "tracing-core"), "{default:?}");
    for name in OPENTELEMETRY {
        assert!(!default.iter().any(|p| p == name), "{name} in {default:?}");
    }
    let with = tree(&["--features", "opentelemetry"]);
    for name in OPENTELEMETRY {
        assert!(with.iter().any(|p| p == name), "{name} not in {with:?}");
    }
}
