//! The real `logpolicy-operator` binary, run the way the Helm chart deploys it: its own
//! namespace, the chart's ServiceAccount and RBAC (and nothing more), a token for that
//! ServiceAccount, and the args of the chart's Deployment.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use serde_json::{json, Value};

use crate::accounts;
use crate::cluster::{repo_root, Cluster, Namespace};
use crate::image::{Launch, Program, Runtime};
use crate::net::{free_port, get_ok, get_ok_with, http};
use crate::process::{wait_for, Process, TestDir};
use crate::{Error, Result};

/// The Secret the operator keeps its signing key in (data key `signing-key`).
pub const KEY_SECRET: &str = "logpolicy-signing-key";
/// The ConfigMap it publishes its public key in, in every namespace with opted-in pods.
pub const TRUST_CONFIG_MAP: &str = "logpolicy-trust";
/// The ConfigMap's data key (a file for `LOGPOLICY_TRUSTED_KEYS_FILE`).
pub const TRUST_DATA_KEY: &str = "trusted-keys";

/// The ServiceAccount, in the operator's namespace, that the harness reads `/metrics`
/// as (bound to the chart's `RELEASE-logpolicy-operator-metrics-reader`).
pub const METRICS_SCRAPER: &str = "metrics-scraper";

/// The kinds of the chart's objects that the harness applies (the Deployment is not:
/// there is no kubelet; the harness runs its container itself).
const RBAC_KINDS: [&str; 5] = [
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
];

/// A running operator.
#[derive(Debug)]
pub struct Operator {
    /// Its namespace (where its key Secret lives).
    pub namespace: String,
    /// The chart release name.
    pub release: String,
    /// The trusted-keys file content for workloads (its public key).
    pub trusted_keys: String,
    /// The ServiceAccount kubeconfig it runs with (on the host).
    pub kubeconfig: PathBuf,
    /// The ServiceAccount's token, CA and namespace files, as a pod mounts them (in an
    /// image).
    pub service_account_dir: PathBuf,
    /// What a scraper sends to its `/metrics` (the chart's `metrics.auth.enabled`, on by
    /// default): a token of the ServiceAccount [`METRICS_SCRAPER`] in its namespace,
    /// bound to the chart's metrics-reader ClusterRole. `None` when auth is off.
    pub metrics_token: Option<String>,
    runtime: Runtime,
    /// The args and environment it runs with: a [`Operator::replica`] runs with the same.
    args: Vec<String>,
    env: Vec<(String, String)>,
    /// Its process (the first replica): `metrics_addr`, `pod_name`, `metrics()`,
    /// `kill()`, ... through `Deref`.
    first: Replica,
    // Dropped last: the namespace outlives the process.
    _namespace: Namespace,
}

impl std::ops::Deref for Operator {
    type Target = Replica;
    fn deref(&self) -> &Replica {
        &self.first
    }
}

impl std::ops::DerefMut for Operator {
    fn deref_mut(&mut self) -> &mut Replica {
        &mut self.first
    }
}

/// Applies `crds/` (idempotent; once per process is enough).
pub fn apply_crds(cluster: &Cluster) -> Result<()> {
    static APPLIED: OnceLock<Result<()>> = OnceLock::new();
    APPLIED
        .get_or_init(|| {
            let crds = repo_root().join("crds");
            cluster.kubectl(&["apply", "-f", &crds.to_string_lossy()])?;
            // Established before anyone creates a LogPolicy.
            cluster.kubectl(&[
                "wait",
                "--for=condition=Established",
                "--timeout=30s",
                "crd/logpolicies.logpolicy.dev",
            ])?;
            Ok(())
        })
        .clone()
}

/// The chart's objects for `release` in `namespace` that an install keeps (`helm
/// template`, offline; `helm test` hooks left out).
pub fn chart_objects(
    release: &str,
    namespace: &str,
    set: &[(String, String)],
) -> Result<Vec<Value>> {
    let set: Vec<(&str, &str)> = set.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    crate::helm::render(release, namespace, &set).map(crate::helm::installed)
}

/// The operator container of the chart's Deployment.
fn deployment_container(objects: &[Value]) -> Result<&Value> {
    let deployment = objects
        .iter()
        .find(|o| o["kind"] == "Deployment")
        .ok_or_else(|| Error("the chart renders no Deployment".into()))?;
    let containers = deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .ok_or_else(|| Error("the chart's Deployment has no containers".into()))?;
    containers
        .iter()
        .find(|c| c["name"] == "operator")
        .or_else(|| containers.first())
        .ok_or_else(|| Error("the chart's Deployment has no containers".into()))
}

/// The operator container's args in the chart's Deployment, without
/// `--metrics-addr` (the harness picks a free port) and `--metrics-cert-dir` (the
/// harness reads the endpoints over plain HTTP: see [`spawn_operator`]).
fn deployment_args(objects: &[Value]) -> Result<Vec<String>> {
    let container = deployment_container(objects)?;
    let raw: Vec<String> = container["args"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let mut args = Vec::new();
    let mut skip_next = false;
    for a in raw {
        if skip_next {
            skip_next = false;
            continue;
        }
        if a == "--metrics-addr" || a == "--metrics-cert-dir" {
            skip_next = true;
        } else if !a.starts_with("--metrics-addr=") && !a.starts_with("--metrics-cert-dir=") {
            args.push(a);
        }
    }
    Ok(args)
}

/// The plain `value` env entries of the operator container (not `valueFrom`).
fn deployment_env(objects: &[Value]) -> Result<Vec<(String, String)>> {
    let container = deployment_container(objects)?;
    Ok(container["env"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| {
            Some((
                e["name"].as_str()?.to_owned(),
                e["value"].as_str()?.to_owned(),
            ))
        })
        .collect())
}

fn service_account(objects: &[Value]) -> Result<String> {
    objects
        .iter()
        .find(|o| o["kind"] == "ServiceAccount")
        .and_then(|o| o["metadata"]["name"].as_str())
        .map(str::to_owned)
        .ok_or_else(|| Error("the chart renders no ServiceAccount".into()))
}

/// Options of [`Operator::start`].
#[derive(Debug, Clone, Default)]
pub struct OperatorOptions {
    /// Extra `--set` values for the chart.
    pub set: Vec<(String, String)>,
    /// Extra args after the Deployment's.
    pub extra_args: Vec<String>,
    /// Where it runs: the workspace's binary with a kubeconfig, or the operator's image
    /// with the token as a pod gets it (in-cluster config).
    pub runtime: Runtime,
}

impl OperatorOptions {
    /// The chart values it runs with: [`OperatorOptions::set`], and `maxDuration=""`
    /// (no limit on how long a policy applies) unless they set `maxDuration`, so that
    /// tests may use policies without an expiry.
    fn with_defaults(&self) -> Vec<(String, String)> {
        let mut set = self.set.clone();
        if !set.iter().any(|(k, _)| k == "maxDuration") {
            set.push(("maxDuration".to_owned(), String::new()));
        }
        set
    }
}

/// The operator [`Operator::shared`] returns.
static SHARED: Mutex<Option<Arc<Operator>>> = Mutex::new(None);

impl Operator {
    /// The operator shared by the tests of one file (they run in one test binary,
    /// `e2e/tests/main.rs`, a file at a time): started on first use, stopped by
    /// [`Operator::stop_shared`] when the file's last test has ended. A failure to
    /// start is not kept: the next caller tries again.
    pub fn shared() -> Result<Arc<Operator>> {
        let mut shared = SHARED.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(operator) = &*shared {
            return Ok(Arc::clone(operator));
        }
        let operator = Arc::new(Operator::start(OperatorOptions::default())?);
        *shared = Some(Arc::clone(&operator));
        Ok(operator)
    }

    /// Stops the shared operator, if one was started: its process is killed and its
    /// namespace deleted once no test holds it any more. The next file's tests start
    /// another: two operators that watch every namespace would fight over each
    /// namespace's `logpolicy-trust` ConfigMap.
    pub fn stop_shared() {
        let operator = SHARED.lock().unwrap_or_else(PoisonError::into_inner).take();
        drop(operator);
    }

    /// [`Operator::start`] watching only `namespace` (the chart's `watchNamespaces`): a
    /// test's own operator, which the operator shared by the tests of its file (it
    /// watches every namespace) does not interfere with.
    pub fn watching(namespace: &str) -> Result<Operator> {
        Operator::start(OperatorOptions {
            set: vec![("watchNamespaces".to_owned(), format!("{{{namespace}}}"))],
            ..OperatorOptions::default()
        })
    }

    /// Installs the CRD and the chart's RBAC in a fresh namespace, and runs the
    /// operator binary with a token of the chart's ServiceAccount; returns once it is
    /// ready (both watches listed) and its signing key exists.
    pub fn start(options: OperatorOptions) -> Result<Operator> {
        let cluster = Cluster::shared()?;
        let started = std::time::Instant::now();
        apply_crds(cluster)?;
        let ns = cluster.namespace("lpop")?;
        let release = format!("lp{}", ns.name.trim_start_matches("lpop"));
        let objects = chart_objects(&release, &ns.name, &options.with_defaults())?;
        let rbac: Vec<Value> = objects
            .iter()
            .filter(|o| RBAC_KINDS.iter().any(|k| o["kind"] == *k))
            .cloned()
            .collect();
        let list = json!({"apiVersion": "v1", "kind": "List", "items": rbac});
        cluster.kubectl_input(&["apply", "-f", "-"], &list.to_string())?;
        let sa = service_account(&objects)?;
        let mut args = deployment_args(&objects)?;
        args.extend(options.extra_args.iter().cloned());
        let metrics_token = if args.iter().any(|a| a == "--metrics-auth=token") {
            let reader = objects
                .iter()
                .filter(|o| o["kind"] == "ClusterRole")
                .filter_map(|o| o["metadata"]["name"].as_str())
                .find(|n| n.ends_with("-metrics-reader"))
                .ok_or_else(|| {
                    Error(
                        "the chart turns metrics auth on but renders no metrics-reader ClusterRole"
                            .into(),
                    )
                })?;
            Some(accounts::service_account_token(
                cluster,
                &ns.name,
                METRICS_SCRAPER,
                &[reader],
            )?)
        } else {
            None
        };

        let token = cluster.kubectl(&["create", "token", &sa, "-n", &ns.name, "--duration=24h"])?;
        let dir = TestDir::new("operator")?;
        let kubeconfig = dir.join("kubeconfig");
        let config = json!({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "e2e", "cluster": {"server": cluster.api_server, "certificate-authority": cluster.ca_file}}],
            "users": [{"name": sa, "user": {"token": token.trim()}}],
            "contexts": [{"name": "operator", "context": {"cluster": "e2e", "user": sa, "namespace": ns.name}}],
            "current-context": "operator",
        });
        std::fs::write(&kubeconfig, config.to_string())
            .map_err(|e| Error(format!("{}: {e}", kubeconfig.display())))?;
        let service_account_dir = dir.join("serviceaccount");
        let ca = std::fs::read(&cluster.ca_file)
            .map_err(|e| Error(format!("{}: {e}", cluster.ca_file.display())))?;
        for (file, content) in [
            ("token", token.trim().as_bytes()),
            ("ca.crt", &ca),
            ("namespace", ns.name.as_bytes()),
        ] {
            let path = service_account_dir.join(file);
            std::fs::create_dir_all(&service_account_dir)
                .and_then(|()| std::fs::write(&path, content))
                .map_err(|e| Error(format!("{}: {e}", path.display())))?;
        }
        let credentials = Credentials {
            kubeconfig: &kubeconfig,
            service_account_dir: &service_account_dir,
            api_server: &cluster.api_server,
            metrics_token: metrics_token.as_deref(),
        };

        let env = deployment_env(&objects)?;
        let pod_name = format!("{release}-logpolicy-operator-0");
        let first = spawn_operator(
            options.runtime,
            dir,
            "operator",
            &args,
            &env,
            &credentials,
            &ns.name,
            pod_name,
        )?;
        let secret_key = wait_for(Duration::from_secs(10), "the signing key Secret", || {
            Ok(cluster
                .kubectl(&[
                    "get",
                    "secret",
                    KEY_SECRET,
                    "-n",
                    &ns.name,
                    "-o",
                    "jsonpath={.data.signing-key}",
                ])
                .ok()
                .filter(|s| !s.is_empty()))
        })?;
        let trusted_keys = public_key_text(&secret_key)?;
        eprintln!(
            "e2e: operator in {} ready in {:.1} s",
            ns.name,
            started.elapsed().as_secs_f64()
        );
        Ok(Operator {
            namespace: ns.name.clone(),
            release,
            trusted_keys,
            kubeconfig,
            service_account_dir,
            metrics_token,
            runtime: options.runtime,
            args,
            env,
            first,
            _namespace: ns,
        })
    }

    /// Its signing key, read from its Secret as the cluster admin.
    pub fn signing_key(&self) -> Result<logpolicy::wire::SigningKey> {
        let data = Cluster::shared()?.kubectl(&[
            "get",
            "secret",
            KEY_SECRET,
            "-n",
            &self.namespace,
            "-o",
            "jsonpath={.data.signing-key}",
        ])?;
        signing_key_of(&data)
    }

    /// Its view of one pod (`GET /pods/NS/NAME`): the version it decided, the policies
    /// in it, whether the pod acknowledged it.
    pub fn pod_view(&self, namespace: &str, name: &str) -> Result<Value> {
        get_ok(self.metrics_addr, &format!("/pods/{namespace}/{name}"))?.json()
    }

    /// Another replica of it (as a Deployment with two replicas runs): the same
    /// ServiceAccount, args and environment, another `POD_NAME`
    /// (`<release>-logpolicy-operator-<suffix>`) and metrics port; returns once it
    /// answers `/readyz` (a standby is ready).
    pub fn replica(&self, suffix: &str) -> Result<Replica> {
        let dir = TestDir::new(&format!("operator-{suffix}"))?;
        let pod_name = format!("{}-logpolicy-operator-{suffix}", self.release);
        let credentials = Credentials {
            kubeconfig: &self.kubeconfig,
            service_account_dir: &self.service_account_dir,
            api_server: &Cluster::shared()?.api_server,
            metrics_token: self.metrics_token.as_deref(),
        };
        spawn_operator(
            self.runtime,
            dir,
            "operator-replica",
            &self.args,
            &self.env,
            &credentials,
            &self.namespace,
            pod_name,
        )
    }

    /// The `holderIdentity` of its leader Lease (empty when there is none).
    pub fn lease_holder(&self) -> Result<String> {
        Cluster::shared()?
            .kubectl(&[
                "get",
                "lease",
                "logpolicy-operator",
                "-n",
                &self.namespace,
                "-o",
                "jsonpath={.spec.holderIdentity}",
            ])
            .map(|s| s.trim().to_owned())
    }
}

/// One operator process (an [`Operator`]'s first, or another from
/// [`Operator::replica`]), killed when dropped.
#[derive(Debug)]
pub struct Replica {
    /// Its `POD_NAME`.
    pub pod_name: String,
    /// Where its `/metrics`, `/healthz`, `/readyz` are served.
    pub metrics_addr: std::net::SocketAddr,
    /// The bearer token [`Replica::metrics`] sends ([`Operator::metrics_token`]).
    metrics_token: Option<String>,
    process: Process,
    dir: TestDir,
}

impl Replica {
    /// `GET /metrics`, with the scraper's token when metrics auth is on; expects 200.
    pub fn metrics(&self) -> Result<String> {
        let authorization = self.metrics_token.as_ref().map(|t| format!("Bearer {t}"));
        let headers: Vec<(&str, &str)> = authorization
            .iter()
            .map(|a| ("authorization", a.as_str()))
            .collect();
        get_ok_with(self.metrics_addr, "/metrics", &headers).map(|r| r.body)
    }

    /// Fails if it exited.
    pub fn check_running(&mut self) -> Result<()> {
        self.process.check_running()
    }

    /// The last lines of its output.
    pub fn tail(&self, n: usize) -> String {
        self.process.tail(n)
    }

    /// Writes its output so far to `to` (its stdout, then its stderr): what a bench
    /// keeps after the operator's own directory is gone.
    pub fn save_output(&self, to: &std::path::Path) -> std::io::Result<()> {
        if let Some(dir) = to.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut out = std::fs::File::create(to)?;
        for file in [&self.process.stdout, &self.process.stderr] {
            std::io::copy(&mut std::fs::File::open(file)?, &mut out)?;
        }
        Ok(())
    }

    /// The directory of its files.
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// Lines of its output (stdout and stderr) that report a refusal by the API
    /// server (403 Forbidden): a permission the chart lacks.
    pub fn forbidden_lines(&self) -> Vec<String> {
        self.lines_containing("forbidden")
    }

    /// Lines of its output (stdout and stderr) that contain `needle`, ignoring
    /// ASCII case.
    pub fn lines_containing(&self, needle: &str) -> Vec<String> {
        let needle = needle.to_ascii_lowercase();
        [&self.process.stdout, &self.process.stderr]
            .iter()
            .flat_map(|p| {
                std::fs::read_to_string(p)
                    .unwrap_or_default()
                    .lines()
                    .filter(|l| l.to_ascii_lowercase().contains(&needle))
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Its pid, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.process.id()
    }

    /// Kills it (SIGKILL: no goodbye).
    pub fn kill(&mut self) {
        self.process.kill();
    }
}

/// What the operator authenticates with: on the host a kubeconfig; in an image the
/// files a pod gets (token, CA, namespace) and the API server's address in
/// `KUBERNETES_SERVICE_HOST`/`_PORT`.
struct Credentials<'a> {
    kubeconfig: &'a std::path::Path,
    service_account_dir: &'a std::path::Path,
    /// `https://HOST:PORT`.
    api_server: &'a str,
    /// The bearer token its `/metrics` answers, when metrics auth is on.
    metrics_token: Option<&'a str>,
}

/// Where a pod finds its ServiceAccount's files.
const SERVICE_ACCOUNT_MOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// Runs the operator as a pod of the chart's Deployment would, with a free metrics
/// port; returns once `/readyz` answers 200. Its endpoints are served over plain HTTP
/// (`--metrics-secure=false`) on the loopback address, where the harness reads them:
/// TLS is held by `operator/tests/metrics_are_served_over_tls.rs`.
#[allow(clippy::too_many_arguments)]
fn spawn_operator(
    runtime: Runtime,
    dir: TestDir,
    name: &str,
    args: &[String],
    env: &[(String, String)],
    credentials: &Credentials<'_>,
    namespace: &str,
    pod_name: String,
) -> Result<Replica> {
    let port = free_port()?;
    let metrics_addr: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    let mut launch = Launch::default()
        .args(args.iter().cloned())
        .args(["--metrics-addr".to_owned(), metrics_addr.to_string()])
        .args(["--metrics-secure=false".to_owned()])
        .env("POD_NAMESPACE", namespace)
        .env("POD_NAME", &pod_name)
        .unset("LOGPOLICY")
        .unset("LOGPOLICY_ADMIN_ADDR")
        .env("RUST_LOG", "info");
    for (k, v) in env {
        launch = launch.env(k, v);
    }
    launch = match runtime {
        Runtime::Host => launch.file_env("KUBECONFIG", credentials.kubeconfig, "/kubeconfig"),
        Runtime::Images(_) => {
            let address = credentials.api_server.trim_start_matches("https://");
            let (host, port) = address
                .rsplit_once(':')
                .ok_or_else(|| Error(format!("no port in {}", credentials.api_server)))?;
            for file in ["token", "ca.crt", "namespace"] {
                launch = launch.file(
                    &credentials.service_account_dir.join(file),
                    &format!("{SERVICE_ACCOUNT_MOUNT}/{file}"),
                );
            }
            launch
                .env("KUBERNETES_SERVICE_HOST", host)
                .env("KUBERNETES_SERVICE_PORT", port)
        }
    };
    let cmd = launch.command(runtime, Program::Operator, dir.path(), name)?;
    let mut process = Process::spawn(name, dir.path(), cmd)?;
    wait_for(Duration::from_secs(60), "the operator's /readyz", || {
        process.check_running()?;
        Ok(http(metrics_addr, "GET", "/readyz", &[], "")
            .ok()
            .filter(|r| r.status == 200))
    })?;
    Ok(Replica {
        pod_name,
        metrics_addr,
        metrics_token: credentials.metrics_token.map(str::to_owned),
        process,
        dir,
    })
}

/// The trusted-keys file for the signing key in the Secret (base64 of the base64 seed).
fn public_key_text(secret_data: &str) -> Result<String> {
    let key = signing_key_of(secret_data)?;
    Ok(format!(
        "{}\n",
        logpolicy::wire::encode_public_key(&key.verifying_key())
    ))
}

/// The signing key in the Secret's data (base64 of the base64 seed).
fn signing_key_of(secret_data: &str) -> Result<logpolicy::wire::SigningKey> {
    use base64::Engine as _;
    let seed = base64::engine::general_purpose::STANDARD
        .decode(secret_data.trim())
        .map_err(|e| Error(format!("Secret {KEY_SECRET}: {e}")))?;
    let text = String::from_utf8(seed).map_err(|e| Error(format!("Secret {KEY_SECRET}: {e}")))?;
    logpolicy::wire::parse_signing_key(&text)
        .map_err(|e| Error(format!("Secret {KEY_SECRET}: {e}")))
}
