//! A service that never serves the admin endpoint compiles no tokio, hyper or Ed25519:
//! with `--no-default-features`, `cargo tree` shows none of them (and with the default
//! features it does, so the check sees what it looks for).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

const SERVER_STACK: [&str; 3] = ["tokio", "hyper", "ed25519-dalek"];

/// The packages `logpolicy` depends on (normal dependencies, any depth).
fn tree(features: &[&str]) -> Vec<String> {
    let out = Command::new(env!("CARGO"))
        .args([
            "tree",
            "--offline",
            "-p",
            "logpolicy",
            "-e",
            "normal",
            "--prefix",
            "none",
        ])
        .args(features)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}

#[test]
fn no_server_stack_without_the_admin_feature() {
    let lean = tree(&["--no-default-features"]);
    assert!(lean.iter().any(|p| p == "tracing-core"), "{lean:?}");
    for name in SERVER_STACK {
        assert!(!lean.iter().any(|p| p == name), "{name} in {lean:?}");
    }
    let full = tree(&[]);
    for name in SERVER_STACK {
        assert!(full.iter().any(|p| p == name), "{name} not in {full:?}");
    }
}
