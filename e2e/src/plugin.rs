//! `kubectl logpolicy`, the plugin, run as a user runs it: the workspace's
//! `kubectl-logpolicy` binary with the admin kubeconfig and a namespace.

use std::ffi::OsString;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::binaries::Binaries;
use crate::cluster::Cluster;
use crate::{Error, Result};

/// What one run of the plugin did.
#[derive(Debug, Clone)]
pub struct PluginRun {
    /// The exit code (`-1`: killed by a signal).
    pub code: i32,
    /// What it printed on stdout.
    pub stdout: String,
    /// What it printed on stderr.
    pub stderr: String,
    /// How long it ran.
    pub took: Duration,
}

impl PluginRun {
    /// The name of the LogPolicy a `raise` created (`lp/NAME created ...`).
    pub fn created_policy(&self) -> Result<String> {
        self.stdout
            .lines()
            .find_map(|l| {
                let rest = l.strip_prefix("lp/")?;
                let (name, after) = rest.split_once(' ')?;
                after.starts_with("created").then(|| name.to_owned())
            })
            .ok_or_else(|| Error(format!("no `lp/NAME created` line in:\n{self}")))
    }

    /// Fails unless it exited with `code`.
    pub fn expect_code(&self, code: i32) -> Result<&Self> {
        if self.code == code {
            Ok(self)
        } else {
            Err(Error(format!(
                "kubectl logpolicy exited with {}, not {code}:\n{self}",
                self.code
            )))
        }
    }
}

impl std::fmt::Display for PluginRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {} after {:.2} s\n--- stdout\n{}--- stderr\n{}",
            self.code,
            self.took.as_secs_f64(),
            self.stdout,
            self.stderr
        )
    }
}

/// The command line of `kubectl-logpolicy ARGS --kubeconfig <admin> -n NAMESPACE` (with
/// `--operator-namespace` if given), the binary first: for a test that runs it elsewhere
/// than in [`kubectl_logpolicy`] (e.g. in a terminal). It must run without `KUBECONFIG`
/// in its environment.
pub fn command_line(
    namespace: &str,
    operator_namespace: Option<&str>,
    args: &[&str],
) -> Result<Vec<OsString>> {
    let cluster = Cluster::shared()?;
    let mut line: Vec<OsString> = vec![Binaries::get()?.plugin().into()];
    line.extend(args.iter().map(OsString::from));
    line.push("--kubeconfig".into());
    line.push(cluster.kubeconfig.clone().into());
    line.extend(["-n".into(), namespace.into()]);
    if let Some(ns) = operator_namespace {
        line.extend(["--operator-namespace".into(), ns.into()]);
    }
    Ok(line)
}

/// Runs `kubectl-logpolicy ARGS --kubeconfig <admin> -n NAMESPACE` (with
/// `--operator-namespace` if given) and waits for it.
pub fn kubectl_logpolicy(
    namespace: &str,
    operator_namespace: Option<&str>,
    args: &[&str],
) -> Result<PluginRun> {
    kubectl_logpolicy_with_env(namespace, operator_namespace, args, &[])
}

/// [`kubectl_logpolicy`] with the variables `env` (name, value) set.
pub fn kubectl_logpolicy_with_env(
    namespace: &str,
    operator_namespace: Option<&str>,
    args: &[&str],
    env: &[(&str, &str)],
) -> Result<PluginRun> {
    let line = command_line(namespace, operator_namespace, args)?;
    let binary = &line[0];
    let mut cmd = Command::new(binary);
    cmd.args(&line[1..])
        .env_remove("KUBECONFIG")
        .envs(env.iter().copied())
        .stdin(Stdio::null());
    let started = Instant::now();
    let out = cmd
        .output()
        .map_err(|e| Error(format!("running {}: {e}", binary.to_string_lossy())))?;
    let run = PluginRun {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        took: started.elapsed(),
    };
    Ok(run)
}
