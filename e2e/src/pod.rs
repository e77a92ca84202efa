//! A simulated pod: a Pod object (bound to a node that does not exist, its status
//! written by the harness as a kubelet would) and the real `logpolicy-demo-service`
//! process bound to the pod's IP, 127.x.y.z.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams, PostParams};
use kube::Api;
use serde_json::{json, Value};

use crate::image::{Launch, Program, Runtime};
use crate::logs::ServiceLog;
use crate::net::{get_ok, http, next_pod_ip, Reply};
use crate::process::{wait_for, Process};
use crate::{Error, Result};

/// The opt-in label.
pub const OPT_IN_LABEL: &str = "logpolicy.dev/enabled";
/// The admin port annotation.
pub const PORT_ANNOTATION: &str = "logpolicy.dev/port";

/// What to run.
#[derive(Debug, Clone)]
pub struct PodSpec {
    /// The pod's name (and the process's name in the test's files).
    pub name: String,
    /// Labels besides the opt-in label.
    pub labels: BTreeMap<String, String>,
    /// Requests per second the service sends itself.
    pub self_load: u32,
    /// Every Nth request fails (0: never).
    pub fail_every: u64,
    /// The baseline directives (`RUST_LOG`).
    pub baseline: String,
    /// Where the service runs: the workspace's binary, or its image.
    pub runtime: Runtime,
    /// More environment variables of the service (e.g. `LOGPOLICY_RECORD_BYTES`).
    pub env: BTreeMap<String, String>,
}

impl PodSpec {
    /// A pod `name` labelled `app=shop`, under a light load (20 requests/s), failing
    /// every 20th request, baseline `info`.
    pub fn shop(name: &str) -> PodSpec {
        PodSpec {
            name: name.to_owned(),
            labels: BTreeMap::from([("app".to_owned(), "shop".to_owned())]),
            self_load: 20,
            fail_every: 20,
            baseline: "info".to_owned(),
            runtime: Runtime::Host,
            env: BTreeMap::new(),
        }
    }

    /// With an environment variable of the service.
    #[must_use]
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.insert(key.to_owned(), value.to_owned());
        self
    }

    /// With a label.
    #[must_use]
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.to_owned(), value.to_owned());
        self
    }

    /// Run in another [`Runtime`] (e.g. the demo service's image).
    #[must_use]
    pub fn runtime(mut self, runtime: Runtime) -> Self {
        self.runtime = runtime;
        self
    }

    /// With another self-load (0: none; the test drives requests).
    #[must_use]
    pub fn self_load(mut self, per_second: u32) -> Self {
        self.self_load = per_second;
        self
    }
}

/// A running simulated pod.
#[derive(Debug)]
pub struct DemoPod {
    /// The pod's namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its uid.
    pub uid: String,
    /// Its IP.
    pub ip: Ipv4Addr,
    /// The shop's address.
    pub shop: SocketAddr,
    /// The admin endpoint's address.
    pub admin: SocketAddr,
    /// The service's stdout.
    pub log: ServiceLog,
    /// The container's restart count (as written in the pod's status).
    pub restarts: i32,
    /// Whether its status says Ready.
    pub ready: bool,
    /// The container's start time, as written in the pod's status.
    started_at: String,
    spec: PodSpec,
    keys_file: PathBuf,
    dir: PathBuf,
    api: Api<Pod>,
    process: Process,
}

impl DemoPod {
    /// Creates the Pod, starts the service with the pod's identity (trusting the keys
    /// in `keys_file`, as a workload mounting the `logpolicy-trust` ConfigMap does),
    /// annotates the admin port, and only then marks the pod Running with its IP: the
    /// operator's first push finds the process listening.
    pub async fn start(
        client: &kube::Client,
        dir: &Path,
        namespace: &str,
        spec: PodSpec,
        keys_file: &Path,
    ) -> Result<DemoPod> {
        let uid = create_pod(client, namespace, &spec).await?;
        Self::launch(client, dir, namespace, spec, uid, keys_file).await
    }

    /// The second half of [`DemoPod::start`], for a Pod made by [`create_pod`].
    pub async fn launch(
        client: &kube::Client,
        dir: &Path,
        namespace: &str,
        spec: PodSpec,
        uid: String,
        keys_file: &Path,
    ) -> Result<DemoPod> {
        let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let ip = next_pod_ip();
        let (process, shop, admin) = spawn_service(
            dir,
            namespace,
            &spec,
            &uid,
            keys_file,
            SocketAddr::new(ip.into(), 0),
            SocketAddr::new(ip.into(), 0),
        )?;
        let annotate =
            json!({"metadata": {"annotations": {PORT_ANNOTATION: admin.port().to_string()}}});
        api.patch(
            &spec.name,
            &PatchParams::default(),
            &Patch::Merge(&annotate),
        )
        .await
        .map_err(|e| Error(format!("annotating pod {}: {e}", spec.name)))?;
        let pod = DemoPod {
            namespace: namespace.to_owned(),
            name: spec.name.clone(),
            uid,
            ip,
            shop,
            admin,
            log: ServiceLog::new(process.stdout.clone()),
            restarts: 0,
            ready: true,
            started_at: logpolicy::clock::format_rfc3339(SystemTime::now()),
            spec,
            keys_file: keys_file.to_owned(),
            dir: dir.to_owned(),
            api,
            process,
        };
        pod.write_status().await?;
        Ok(pod)
    }

    /// "Restarts the container": kills the service, starts a new one on the same
    /// addresses, and writes the pod's status with the restart count incremented and a
    /// new start time, as a kubelet would.
    pub async fn restart(&mut self) -> Result<()> {
        self.respawn()?;
        self.restarts += 1;
        self.started_at = logpolicy::clock::format_rfc3339(SystemTime::now());
        self.write_status().await
    }

    /// Starts the service again on the same addresses after [`kill`](Self::kill),
    /// without a word to the API server: the pod's status still says the container
    /// runs (an endpoint that was down and is back, as after a hang or a slow start).
    pub fn respawn(&mut self) -> Result<()> {
        self.process.kill();
        let (process, shop, admin) = spawn_service(
            &self.dir,
            &self.namespace,
            &self.spec,
            &self.uid,
            &self.keys_file,
            self.shop,
            self.admin,
        )?;
        self.process = process;
        self.shop = shop;
        self.admin = admin;
        Ok(())
    }

    /// Writes the pod's status with its `Ready` condition (and the container's
    /// `ready`) set to `ready`, the container's run unchanged, as a kubelet does when a
    /// readiness probe starts or stops passing.
    pub async fn set_ready(&mut self, ready: bool) -> Result<()> {
        self.ready = ready;
        self.write_status().await
    }

    async fn write_status(&self) -> Result<()> {
        let now = logpolicy::clock::format_rfc3339(SystemTime::now());
        let cond = |t: &str, ok: bool| json!({"type": t, "status": if ok { "True" } else { "False" }, "lastTransitionTime": now});
        let ready = self.ready;
        let status = json!({"status": {
            "phase": "Running", "hostIP": "127.0.0.1",
            "podIP": self.ip.to_string(), "podIPs": [{"ip": self.ip.to_string()}],
            "startTime": self.started_at,
            "conditions": [cond("PodScheduled", true), cond("Initialized", true),
                           cond("ContainersReady", ready), cond("Ready", ready)],
            "containerStatuses": [{
                "name": "main", "image": "example.invalid/shop:1", "imageID": "",
                "containerID": format!("fake://{}/{}/{}", self.namespace, self.name, self.restarts),
                "ready": ready, "started": true, "restartCount": self.restarts,
                "state": {"running": {"startedAt": self.started_at}},
            }],
        }});
        self.api
            .patch_status(&self.name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .map_err(|e| Error(format!("status of pod {}: {e}", self.name)))?;
        Ok(())
    }

    /// Reads what the service wrote since the last call.
    pub fn refresh(&mut self) -> Result<()> {
        self.process.check_running()?;
        self.log.refresh()?;
        self.log.check()
    }

    /// `GET /logpolicy` from its admin endpoint.
    pub fn policy(&self) -> Result<Value> {
        get_ok(self.admin, "/logpolicy")?.json()
    }

    /// The version of the document it holds (0: none).
    pub fn policy_version(&self) -> Result<u64> {
        let p = self.policy()?;
        Ok(p["document"]["version"].as_u64().unwrap_or(0))
    }

    /// The effective directives (`effective.directives` of `GET /logpolicy`).
    pub fn directives(&self) -> Result<String> {
        let p = self.policy()?;
        p["effective"]["directives"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| Error(format!("{}: no effective.directives in {p}", self.name)))
    }

    /// A request to its admin endpoint.
    pub fn admin_request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Result<Reply> {
        http(self.admin, method, path, headers, body)
    }

    /// The tail of its output.
    pub fn tail(&self, n: usize) -> String {
        self.process.tail(n)
    }

    /// The service's pid, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.process.id()
    }

    /// Kills the service process (the Pod object stays).
    pub fn kill(&mut self) {
        self.process.kill();
    }
}

/// Creates the Pod object of `spec` (opted in, bound to a node, no status yet: no IP,
/// so nothing is pushed to it); returns its uid.
pub async fn create_pod(client: &kube::Client, namespace: &str, spec: &PodSpec) -> Result<String> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let mut labels = spec.labels.clone();
    labels.insert(OPT_IN_LABEL.to_owned(), "true".to_owned());
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": spec.name, "namespace": namespace, "labels": labels},
        "spec": {"nodeName": "fake-node", "containers": [{"name": "main", "image": "example.invalid/shop:1"}]},
    }))
    .map_err(|e| Error(format!("pod {}: {e}", spec.name)))?;
    let created = api
        .create(&PostParams::default(), &pod)
        .await
        .map_err(|e| Error(format!("creating pod {namespace}/{}: {e}", spec.name)))?;
    created
        .metadata
        .uid
        .ok_or_else(|| Error(format!("pod {} has no uid", spec.name)))
}

/// Creates `count` opted-in pods `PREFIX-0`.. labelled `labels`, Running and Ready,
/// whose admin endpoint is `admin` (the same for all: e.g. an address that never
/// answers), with no process behind them; at most 16 API calls at a time.
pub async fn create_running_pods(
    client: &kube::Client,
    namespace: &str,
    prefix: &str,
    count: usize,
    labels: &BTreeMap<String, String>,
    admin: SocketAddr,
) -> Result<()> {
    let pods = (0..count)
        .map(|i| (format!("{prefix}-{i}"), admin))
        .collect();
    create_running_pods_at(client, namespace, pods, labels).await
}

/// Creates opted-in pods, each `(name, admin address)` (its IP and port annotation),
/// labelled `labels`, Running and Ready, with no process behind them; at most 16 API
/// calls at a time.
pub async fn create_running_pods_at(
    client: &kube::Client,
    namespace: &str,
    pods: Vec<(String, SocketAddr)>,
    labels: &BTreeMap<String, String>,
) -> Result<()> {
    use futures::StreamExt;
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let mut labels = labels.clone();
    labels.insert(OPT_IN_LABEL.to_owned(), "true".to_owned());
    let one = |(name, admin): (String, SocketAddr)| {
        let api = api.clone();
        let labels = labels.clone();
        async move {
            let pod: Pod = serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": namespace, "labels": labels,
                             "annotations": {PORT_ANNOTATION: admin.port().to_string()}},
                "spec": {"nodeName": "fake-node", "containers": [{"name": "main", "image": "example.invalid/shop:1"}]},
            }))
            .map_err(|e| Error(format!("pod {name}: {e}")))?;
            api.create(&PostParams::default(), &pod)
                .await
                .map_err(|e| Error(format!("creating pod {namespace}/{name}: {e}")))?;
            let now = logpolicy::clock::format_rfc3339(SystemTime::now());
            let ip = admin.ip().to_string();
            let status = json!({"status": {
                "phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}], "startTime": now,
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}],
                "containerStatuses": [{
                    "name": "main", "image": "example.invalid/shop:1", "imageID": "",
                    "ready": true, "started": true, "restartCount": 0,
                    "state": {"running": {"startedAt": now}},
                }],
            }});
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                .await
                .map_err(|e| Error(format!("status of pod {name}: {e}")))?;
            Ok::<(), Error>(())
        }
    };
    let results: Vec<Result<()>> = futures::stream::iter(pods)
        .map(one)
        .buffer_unordered(16)
        .collect()
        .await;
    results.into_iter().collect()
}

/// Starts the service on `shop`/`admin` (port 0: a free one) and waits for its start
/// line; returns the addresses it reports.
fn spawn_service(
    dir: &Path,
    namespace: &str,
    spec: &PodSpec,
    uid: &str,
    keys_file: &Path,
    shop: SocketAddr,
    admin: SocketAddr,
) -> Result<(Process, SocketAddr, SocketAddr)> {
    let mut cmd = Launch::default();
    for (k, v) in &spec.env {
        cmd = cmd.env(k, v);
    }
    let cmd = cmd
        .args(["--addr", &shop.to_string()])
        .args(["--self-load", &spec.self_load.to_string()])
        .args(["--fail-every", &spec.fail_every.to_string()])
        .args(["--threads", "1"])
        .unset("LOGPOLICY")
        .unset("LOGPOLICY_TRUSTED_KEYS")
        .env("RUST_LOG", &spec.baseline)
        .env("LOGPOLICY_ADMIN_ADDR", &admin.to_string())
        .file_env(
            "LOGPOLICY_TRUSTED_KEYS_FILE",
            keys_file,
            "/etc/logpolicy/trusted-keys",
        )
        .env("POD_UID", uid)
        .env("POD_NAME", &spec.name)
        .env("POD_NAMESPACE", namespace)
        .command(spec.runtime, Program::DemoService, dir, &spec.name)?;
    let starts_before = start_lines(&dir.join(format!("{}.stderr", spec.name))).len();
    let mut process = Process::spawn(&spec.name, dir, cmd)?;
    let line = wait_for(
        Duration::from_secs(10),
        &format!("{} to listen", spec.name),
        || {
            process.check_running()?;
            Ok(start_lines(&process.stderr).get(starts_before).cloned())
        },
    )?;
    let addr_after = |marker: &str| -> Result<SocketAddr> {
        line.split(marker)
            .nth(1)
            .and_then(|rest| rest.split([',', ' ']).next())
            .and_then(|a| a.parse().ok())
            .ok_or_else(|| Error(format!("{}: no `{marker}` address in {line:?}", spec.name)))
    };
    let shop = addr_after("shop on http://")?;
    let admin = addr_after("admin on http://")?;
    Ok((process, shop, admin))
}

/// The complete start lines in `stderr` (a line being written may be read in part:
/// stderr is unbuffered and the line is written in pieces).
fn start_lines(stderr: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(stderr).unwrap_or_default();
    let complete = text.rfind('\n').map_or("", |end| &text[..end]);
    complete
        .lines()
        .filter(|l| l.starts_with("logpolicy-demo-service: shop on"))
        .map(str::to_owned)
        .collect()
}
