//! The binaries the tests run, built once per test process from the workspace's
//! sources (so a test never runs a stale operator or service).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use crate::cluster::repo_root;
use crate::{Error, Result};

/// Set to `workspace` when the tests run inside `cargo test --workspace`: see
/// [`Binaries::get`].
pub const BUILD_VAR: &str = "LOGPOLICY_E2E_BUILD";

/// `target/debug`, holding `logpolicy-operator`, `logpolicy-demo-service`,
/// `kubectl-logpolicy` and `logpolicy-sign`.
#[derive(Debug, Clone)]
pub struct Binaries {
    /// The directory.
    pub dir: PathBuf,
}

impl Binaries {
    /// Builds `logpolicy-operator`, `logpolicy-demo-service` and the kubectl plugin
    /// `kubectl-logpolicy` once per process
    /// (`$CARGO build --profile test -p ... --bins`; concurrent callers wait for the
    /// one build), in the `test` profile (optimised, in `target/debug`).
    ///
    /// With [`BUILD_VAR`]`=workspace` (as `scripts/test` sets it around
    /// `cargo test --workspace`), it runs `$CARGO test --workspace --no-run` instead:
    /// the outer run has built the three binaries already, and this check has nothing
    /// left to do. The narrower build would not be a no-op there: three packages
    /// resolve their dependencies' features without the whole workspace's
    /// dev-dependencies (tokio's `test-util`, for one), so it compiled tokio, hyper,
    /// kube and the three crates a second time (about 4 minutes on 2 cores).
    pub fn get() -> Result<&'static Binaries> {
        static BUILT: OnceLock<Result<Binaries>> = OnceLock::new();
        BUILT.get_or_init(build).as_ref().map_err(Clone::clone)
    }

    /// The operator binary.
    pub fn operator(&self) -> PathBuf {
        self.dir.join("logpolicy-operator")
    }

    /// The demo service binary.
    pub fn demo_service(&self) -> PathBuf {
        self.dir.join("logpolicy-demo-service")
    }

    /// The kubectl plugin, `kubectl-logpolicy`.
    pub fn plugin(&self) -> PathBuf {
        self.dir.join("kubectl-logpolicy")
    }
}

fn build() -> Result<Binaries> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let root = repo_root();
    let started = std::time::Instant::now();
    let mut cmd = Command::new(&cargo);
    without_test_env(&mut cmd);
    let args: &[&str] = match std::env::var(BUILD_VAR).as_deref() {
        Ok("workspace") => &["test", "--quiet", "--workspace", "--no-run"],
        Ok(other) if !other.is_empty() => {
            return Err(Error(format!(
                "{BUILD_VAR}={other:?}: the only value is \"workspace\" (unset: build the three packages)"
            )))
        }
        _ => &[
            "build",
            "--quiet",
            "--profile",
            "test",
            "-p",
            "logpolicy-operator",
            "-p",
            "logpolicy-demo-service",
            "-p",
            "kubectl-logpolicy",
            "--bins",
        ],
    };
    let status = cmd
        .current_dir(&root)
        .args(args)
        .stdin(Stdio::null())
        .status()
        .map_err(|e| Error(format!("running {cargo:?} {}: {e}", args[0])))?;
    if !status.success() {
        return Err(Error(format!(
            "cargo {} (the operator, the demo service and the plugin) failed ({status})",
            args.join(" ")
        )));
    }
    eprintln!(
        "e2e: cargo {} (the operator, the demo service and the plugin): {:.1} s",
        args.join(" "),
        started.elapsed().as_secs_f64()
    );
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| root.join("target"), PathBuf::from)
        .join("debug");
    Ok(Binaries { dir })
}

/// Removes from `cmd`'s environment the variables cargo sets for a running test
/// (CARGO_MANIFEST_DIR, CARGO_PKG_*, ...): build scripts that watch them (ring's does)
/// would make a build run by a test differ from the same one run by hand, and each
/// would compile it all again.
pub(crate) fn without_test_env(cmd: &mut Command) {
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        let set_by_cargo_for_tests = name == "OUT_DIR"
            || [
                "CARGO_MANIFEST_",
                "CARGO_PKG_",
                "CARGO_CRATE_",
                "CARGO_BIN_",
                "CARGO_PRIMARY_PACKAGE",
                "CARGO_TARGET_TMPDIR",
                "CARGO_RUSTC_CURRENT_DIR",
            ]
            .iter()
            .any(|prefix| name.starts_with(prefix));
        if set_by_cargo_for_tests {
            cmd.env_remove(name.as_ref());
        }
    }
}
