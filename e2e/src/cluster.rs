//! The API server the tests talk to: started (or found running) by `e2e/cluster/up`,
//! shared by every test of a process, and reached with `kubectl` the way a user does.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

/// What went wrong in the harness: a command that failed (with its output), or a
/// condition that did not come true in time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(pub String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

/// A `Result` with the harness's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A running etcd + kube-apiserver, as `e2e/cluster/up` reported it.
#[derive(Debug)]
pub struct Cluster {
    /// The state dir (`LOGPOLICY_E2E_DIR`).
    pub dir: PathBuf,
    /// The admin kubeconfig (`system:masters`).
    pub kubeconfig: PathBuf,
    /// The kubeconfig of a user with no RBAC grants.
    pub user_kubeconfig: PathBuf,
    /// `https://127.0.0.1:PORT`.
    pub api_server: String,
    /// The CA that signed the API server's certificate.
    pub ca_file: PathBuf,
}

static SHARED: OnceLock<Result<Cluster>> = OnceLock::new();

/// The repository's root directory.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(".."))
}

impl Cluster {
    /// The cluster of this test process: `e2e/cluster/up` is run once (it starts etcd
    /// and kube-apiserver, or only re-prints the settings of a healthy cluster in
    /// `$LOGPOLICY_E2E_DIR`). It is left running: `e2e/cluster/down` stops it
    /// (`scripts/test` does so on exit).
    pub fn shared() -> Result<&'static Cluster> {
        SHARED.get_or_init(Self::up).as_ref().map_err(Clone::clone)
    }

    fn up() -> Result<Cluster> {
        let script = repo_root().join("e2e/cluster/up");
        let out = Command::new("bash")
            .arg(&script)
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| Error(format!("running {}: {e}", script.display())))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            return Err(Error(format!(
                "{} failed ({}); see its output above",
                script.display(),
                out.status
            )));
        }
        let vars = parse_exports(&stdout)?;
        let get = |k: &str| {
            vars.get(k)
                .cloned()
                .ok_or_else(|| Error(format!("e2e/cluster/up did not print {k}")))
        };
        Ok(Cluster {
            dir: get("LOGPOLICY_E2E_DIR")?.into(),
            kubeconfig: get("KUBECONFIG")?.into(),
            user_kubeconfig: get("LOGPOLICY_E2E_USER_KUBECONFIG")?.into(),
            api_server: get("LOGPOLICY_E2E_API_SERVER")?,
            ca_file: get("LOGPOLICY_E2E_CA_FILE")?.into(),
        })
    }

    /// Runs `kubectl ARGS` as the admin; its stdout, or an error with its stderr.
    pub fn kubectl(&self, args: &[&str]) -> Result<String> {
        kubectl_with(&self.kubeconfig, args, None)
    }

    /// Runs `kubectl ARGS` as the admin with `input` on its stdin (`apply -f -`).
    pub fn kubectl_input(&self, args: &[&str], input: &str) -> Result<String> {
        kubectl_with(&self.kubeconfig, args, Some(input))
    }

    /// Runs `kubectl ARGS` with another kubeconfig.
    pub fn kubectl_as(&self, kubeconfig: &Path, args: &[&str]) -> Result<String> {
        kubectl_with(kubeconfig, args, None)
    }

    /// A kube client for the admin.
    pub async fn client(&self) -> Result<kube::Client> {
        client_for(&self.kubeconfig).await
    }

    /// A fresh namespace, `PREFIX-<pid>-<n>`, deleted (without waiting) when dropped.
    /// Without a controller manager a deleted namespace stays `Terminating`: every
    /// test uses its own.
    pub fn namespace(&'static self, prefix: &str) -> Result<Namespace> {
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "{prefix}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        self.kubectl(&["create", "namespace", &name])?;
        Ok(Namespace {
            cluster: self,
            name,
        })
    }
}

/// An API-server outage: kube-apiserver stopped or killed, etcd kept
/// (`e2e/cluster/outage`).
/// [`end`](Outage::end) starts it again; so does dropping it (a failed test leaves the
/// cluster up for the next).
#[derive(Debug)]
#[must_use = "the API server stays down until the outage ends"]
pub struct Outage<'a> {
    cluster: &'a Cluster,
    over: bool,
}

impl Outage<'_> {
    /// Starts kube-apiserver again (same port, certificates and etcd); returns once
    /// its `/readyz` says ok.
    pub fn end(mut self) -> Result<()> {
        self.over = true;
        self.cluster.outage_script("start")
    }
}

impl Drop for Outage<'_> {
    fn drop(&mut self) {
        if !self.over {
            let _ = self.cluster.outage_script("start");
        }
    }
}

impl Cluster {
    /// Stops kube-apiserver, keeping etcd: every API call fails until the outage
    /// [ends](Outage::end).
    pub fn api_server_outage(&self) -> Result<Outage<'_>> {
        self.begin_outage("stop")
    }

    /// Kills kube-apiserver with SIGKILL, keeping etcd: a crash, with none of the
    /// graceful shutdown's goodbyes on its connections; every API call fails until the
    /// outage [ends](Outage::end).
    pub fn api_server_crash(&self) -> Result<Outage<'_>> {
        self.begin_outage("kill")
    }

    fn begin_outage(&self, action: &str) -> Result<Outage<'_>> {
        self.outage_script(action)?;
        Ok(Outage {
            cluster: self,
            over: false,
        })
    }

    fn outage_script(&self, action: &str) -> Result<()> {
        let script = repo_root().join("e2e/cluster/outage");
        let out = Command::new("bash")
            .arg(&script)
            .arg(action)
            .env("LOGPOLICY_E2E_DIR", &self.dir)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| Error(format!("running {}: {e}", script.display())))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(Error(format!(
                "{} {action} failed ({}): {}",
                script.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )))
        }
    }
}

/// A kube client for a kubeconfig file.
pub async fn client_for(kubeconfig: &Path) -> Result<kube::Client> {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)
        .map_err(|e| Error(format!("reading {}: {e}", kubeconfig.display())))?;
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .map_err(|e| Error(format!("kubeconfig {}: {e}", kubeconfig.display())))?;
    kube::Client::try_from(config).map_err(|e| Error(format!("kube client: {e}")))
}

fn kubectl_with(kubeconfig: &Path, args: &[&str], input: Option<&str>) -> Result<String> {
    let mut cmd = Command::new("kubectl");
    cmd.args(args)
        .env("KUBECONFIG", kubeconfig)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .map_err(|e| Error(format!("kubectl {}: {e}", args.join(" "))))?;
    if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin
            .write_all(input.as_bytes())
            .map_err(|e| Error(format!("kubectl {}: stdin: {e}", args.join(" "))))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| Error(format!("kubectl {}: {e}", args.join(" "))))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(Error(format!(
            "kubectl {} failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// `export K=V` lines as `up` prints them (values are `%q`-quoted by bash: only plain
/// values, which is all `up` prints, are accepted).
fn parse_exports(stdout: &str) -> Result<BTreeMap<String, String>> {
    let mut vars = BTreeMap::new();
    for line in stdout.lines() {
        let Some(rest) = line.strip_prefix("export ") else {
            continue;
        };
        let Some((k, v)) = rest.split_once('=') else {
            return Err(Error(format!(
                "unexpected line from e2e/cluster/up: {line}"
            )));
        };
        if v.contains(['\\', '\'', '"', '$']) {
            return Err(Error(format!(
                "e2e/cluster/up printed a quoted value for {k}: use a state dir without special characters"
            )));
        }
        vars.insert(k.to_owned(), v.to_owned());
    }
    Ok(vars)
}

/// A namespace for one test; deleted when dropped.
#[derive(Debug)]
pub struct Namespace {
    cluster: &'static Cluster,
    /// Its name.
    pub name: String,
}

impl Drop for Namespace {
    fn drop(&mut self) {
        // Without a kubelet and a namespace controller nothing would ever remove the
        // pods (an operator watching every namespace would keep pushing to them): they
        // are finished here, as a kubelet would, and the policies deleted.
        let _ = self.cluster.kubectl(&[
            "delete",
            "pods",
            "--all",
            "-n",
            &self.name,
            "--grace-period=0",
            "--force",
            "--wait=false",
        ]);
        let _ = self.cluster.kubectl(&[
            "delete",
            "logpolicies.logpolicy.dev",
            "--all",
            "-n",
            &self.name,
            "--wait=false",
        ]);
        let _ = self
            .cluster
            .kubectl(&["delete", "namespace", &self.name, "--wait=false"]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exports_are_parsed_and_quoted_values_refused() {
        let vars = parse_exports(
            "export KUBECONFIG=/tmp/x/kubeconfig\nexport LOGPOLICY_E2E_DIR=/tmp/x\n# API server ...\n",
        )
        .unwrap();
        assert_eq!(vars["KUBECONFIG"], "/tmp/x/kubeconfig");
        assert_eq!(vars["LOGPOLICY_E2E_DIR"], "/tmp/x");
        assert!(parse_exports("export A=/tmp/a\\ b\n").is_err());
        assert!(parse_exports("export A\n").is_err());
    }
}
