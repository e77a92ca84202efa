//! The Kubernetes side: the client (kubectl's kubeconfig, context and namespace), the
//! pods a selector or a workload picks, the operator's Lease, and a pod's admin
//! endpoint (any of its paths: [`Kube::pod_get`]).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use clap::Args;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::api::ListParams;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use logpolicy_api::{DEFAULT_ADMIN_PORT, OPT_IN_LABEL, PORT_ANNOTATION};
use serde::de::DeserializeOwned;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::exit::{api_failure, Failure, Result};
use crate::output;
use crate::selector::{selector_string, workload_selector, Workload, WorkloadKind, WorkloadRef};

/// The Lease the operator's replicas elect a leader with (`--leader-election`), the
/// operator's own name for it.
pub use logpolicy_api::labels::LEASE_NAME;

/// Where and as whom: kubectl's flags.
#[derive(Debug, Clone, Args)]
pub struct Connection {
    /// The namespace (default: the kubeconfig context's namespace, else `default`).
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
    /// The kubeconfig context to use (default: the current context).
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// The kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else the
    /// in-cluster service account).
    #[arg(long, global = true)]
    pub kubeconfig: Option<PathBuf>,
    /// The operator's namespace, where its Lease is (to tell whether it runs).
    #[arg(
        long,
        global = true,
        env = "LOGPOLICY_OPERATOR_NAMESPACE",
        default_value = "logpolicy-system"
    )]
    pub operator_namespace: String,
}

/// A client, and the namespace the command works in.
#[derive(Clone)]
pub struct Kube {
    /// The client.
    pub client: Client,
    /// `-n`, else the context's namespace, else `default`.
    pub namespace: String,
    /// The operator's namespace.
    pub operator_namespace: String,
    /// Set once a pod answered at its IP after the pod proxy failed: where the API server
    /// cannot proxy to pods (e.g. to loopback addresses), the others are read at their IP
    /// first rather than each waiting for the proxy's refusal.
    direct_first: Arc<AtomicBool>,
}

impl Connection {
    /// Connects as kubectl would.
    pub async fn connect(&self) -> Result<Kube> {
        let options = KubeConfigOptions {
            context: self.context.clone(),
            cluster: None,
            user: None,
        };
        let config = match &self.kubeconfig {
            Some(path) => {
                let kc = Kubeconfig::read_from(path)
                    .map_err(|e| Failure::error(format!("{}: {e}", path.display())))?;
                Config::from_custom_kubeconfig(kc, &options)
                    .await
                    .map_err(|e| Failure::error(format!("{}: {e}", path.display())))?
            }
            None => match Config::from_kubeconfig(&options).await {
                Ok(c) => c,
                Err(e) if self.context.is_none() => Config::incluster().map_err(|why| {
                    Failure::error(format!(
                        "no kubeconfig ({e}) and no in-cluster service account ({why})"
                    ))
                })?,
                Err(e) => return Err(Failure::error(format!("kubeconfig: {e}"))),
            },
        };
        let namespace = self
            .namespace
            .clone()
            .unwrap_or_else(|| config.default_namespace.clone());
        let client =
            Client::try_from(config).map_err(|e| Failure::error(format!("kube client: {e}")))?;
        Ok(Kube {
            client,
            namespace,
            operator_namespace: self.operator_namespace.clone(),
            direct_first: Arc::new(AtomicBool::new(false)),
        })
    }
}

/// Whether the pod (its metadata) opted in.
pub fn opted_in(meta: &ObjectMeta) -> bool {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(OPT_IN_LABEL))
        .is_some_and(|v| v == "true")
}

/// The pods of a namespace.
#[derive(Debug, Clone, Default)]
pub struct Selected {
    /// The pods the selector matches that opted in, by name.
    pub opted_in: Vec<String>,
    /// Those pods, whole (their IPs and annotations say where their endpoints are), in
    /// the same order.
    pub opted_in_pods: Vec<Pod>,
    /// Those that did not opt in, by name.
    pub not_opted_in: Vec<String>,
}

impl Kube {
    /// The pods of the namespace that `selector` matches (not those being deleted).
    pub async fn selected_pods(&self, selector: &LabelSelector) -> Result<Selected> {
        self.pods(Some(selector), false).await
    }

    /// The pods that `selector` matches (not those being deleted), in the namespace or,
    /// with `all_namespaces`, in every namespace (then named `namespace/name` in
    /// [`Selected::opted_in`] and [`Selected::not_opted_in`]). Without a selector: the
    /// pods that opted in (listed by the opt-in label, so none is `not_opted_in`).
    pub async fn pods(
        &self,
        selector: Option<&LabelSelector>,
        all_namespaces: bool,
    ) -> Result<Selected> {
        let api: Api<Pod> = if all_namespaces {
            Api::all(self.client.clone())
        } else {
            Api::namespaced(self.client.clone(), &self.namespace)
        };
        let selector = match selector {
            Some(s) => selector_string(s),
            None => format!("{OPT_IN_LABEL}=true"),
        };
        let list = api
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(|e| api_failure(&format!("listing pods with {selector}"), e))?;
        let mut out = Selected::default();
        let (mut opted_in, mut not_opted_in): (Vec<Pod>, Vec<Pod>) = list
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .partition(|p| opted_in(&p.metadata));
        let name = |p: &Pod| {
            let name = p.metadata.name.clone().unwrap_or_default();
            match (&p.metadata.namespace, all_namespaces) {
                (Some(ns), true) => format!("{ns}/{name}"),
                _ => name,
            }
        };
        opted_in.sort_by_key(name);
        not_opted_in.sort_by_key(name);
        out.opted_in = opted_in.iter().map(name).collect();
        out.not_opted_in = not_opted_in.iter().map(name).collect();
        out.opted_in_pods = opted_in;
        Ok(out)
    }

    /// The `spec.selector` of a workload of the namespace, read from the API; an error
    /// names the workload when it cannot be read or its selector is empty.
    pub async fn workload_selector(&self, w: &WorkloadRef) -> Result<LabelSelector> {
        let (c, ns) = (self.client.clone(), self.namespace.as_str());
        let what = format!("{w} in namespace {ns}");
        let fail = |e| api_failure(&what, e);
        let workload = match w.kind {
            WorkloadKind::Deployment => Workload::Deployment(
                Api::<Deployment>::namespaced(c, ns)
                    .get(&w.name)
                    .await
                    .map_err(fail)?,
            ),
            WorkloadKind::StatefulSet => Workload::StatefulSet(
                Api::<StatefulSet>::namespaced(c, ns)
                    .get(&w.name)
                    .await
                    .map_err(fail)?,
            ),
            WorkloadKind::DaemonSet => Workload::DaemonSet(
                Api::<DaemonSet>::namespaced(c, ns)
                    .get(&w.name)
                    .await
                    .map_err(fail)?,
            ),
            WorkloadKind::ReplicaSet => Workload::ReplicaSet(
                Api::<ReplicaSet>::namespaced(c, ns)
                    .get(&w.name)
                    .await
                    .map_err(fail)?,
            ),
        };
        workload_selector(&workload).map_err(Failure::error)
    }

    /// Why the operator seems not to run, from its Lease, when the Lease says so:
    /// `Some(reason)` when it was released or not renewed for longer than its duration;
    /// `None` when it is held, absent or cannot be read (an operator older than its
    /// Lease heartbeat kept none without `--leader-election`: absence proves nothing).
    pub async fn lease_says_down(&self) -> Option<String> {
        let api: Api<Lease> = Api::namespaced(self.client.clone(), &self.operator_namespace);
        let lease = api.get_opt(LEASE_NAME).await.ok()??;
        lease_down(&lease, SystemTime::now())
            .map(|why| format!("its Lease {}/{LEASE_NAME} {why}", self.operator_namespace))
    }

    /// What to say about the operator's Lease, for a message: held, down, or absent.
    pub async fn lease_note(&self) -> String {
        let api: Api<Lease> = Api::namespaced(self.client.clone(), &self.operator_namespace);
        let at = format!("{}/{LEASE_NAME}", self.operator_namespace);
        match api.get_opt(LEASE_NAME).await {
            Ok(Some(lease)) => match lease_down(&lease, SystemTime::now()) {
                Some(why) => format!("its Lease {at} {why}"),
                None => format!("its Lease {at} is held (the operator may be overloaded or unable to write status)"),
            },
            Ok(None) => format!(
                "there is no Lease {at} (a running operator keeps it; is it running, or does it run in another namespace? --operator-namespace)"
            ),
            Err(e) => format!("its Lease {at} cannot be read: {e}"),
        }
    }

    /// `GET /logpolicy` of a pod's admin endpoint: through the API server's pod proxy,
    /// else straight to the pod's IP (from inside the cluster network); `Err` says why
    /// neither answered.
    pub async fn pod_policy(&self, pod: &Pod) -> Result<serde_json::Value, String> {
        self.pod_get(pod, "/logpolicy").await
    }

    /// `GET path` of a pod's admin endpoint (at its `logpolicy.dev/port`, else the
    /// default port), its JSON body read as `T`: through the API server's pod proxy
    /// (within [`PROXY_TIMEOUT`]), else straight to the pod's IP (within
    /// [`DIRECT_TIMEOUT`], from inside the cluster network; once a pod answered there
    /// after the proxy failed, the IP is tried first). `Err` says why neither answered.
    ///
    /// The pod's own namespace is used (the command's when the pod has none), so pods
    /// listed across namespaces (`-A`) are read where they are.
    pub async fn pod_get<T: DeserializeOwned>(&self, pod: &Pod, path: &str) -> Result<T, String> {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let namespace = pod.metadata.namespace.as_deref().unwrap_or(&self.namespace);
        let port = pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(PORT_ANNOTATION))
            .and_then(|p| p.parse::<u16>().ok())
            .unwrap_or(DEFAULT_ADMIN_PORT);
        let proxy_path = format!("/api/v1/namespaces/{namespace}/pods/{name}:{port}/proxy{path}");
        let ip = pod.status.as_ref().and_then(|s| s.pod_ip.clone());
        if let (true, Some(ip)) = (self.direct_first.load(Ordering::Relaxed), &ip) {
            if let Ok(v) = direct_get(ip, port, path).await {
                return Ok(v);
            }
        }
        let secs = PROXY_TIMEOUT.as_secs();
        let proxied =
            match tokio::time::timeout(PROXY_TIMEOUT, proxy_get(&self.client, &proxy_path)).await {
                Ok(Ok(text)) => match json_body(&text) {
                    Ok(v) => return Ok(v),
                    Err(e) => format!("the pod proxy answered {e}"),
                },
                Ok(Err(e)) => format!("pod proxy: {e}"),
                Err(_) => format!("pod proxy: no answer in {secs} s"),
            };
        // What a pod answered, even in an error, is shown as text, never as terminal
        // control.
        let proxied = output::printable(&proxied).into_owned();
        let Some(ip) = ip else {
            return Err(format!("{proxied}; the pod has no IP"));
        };
        let direct = direct_get(&ip, port, path)
            .await
            .map_err(|e| format!("{proxied}; {ip}:{port}: {}", output::printable(&e)))?;
        self.direct_first.store(true, Ordering::Relaxed);
        Ok(direct)
    }

    /// A pod of the namespace.
    pub async fn pod(&self, name: &str) -> Result<Pod> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.namespace);
        api.get(name)
            .await
            .map_err(|e| api_failure(&format!("pod {name} in namespace {}", self.namespace), e))
    }
}

/// Why `lease` says its holder is gone: released, or not renewed for longer than its
/// duration at `now`.
pub fn lease_down(lease: &Lease, now: SystemTime) -> Option<String> {
    let spec = lease.spec.as_ref()?;
    let holder = spec.holder_identity.as_deref().unwrap_or("");
    if holder.is_empty() {
        return Some("is held by no replica (released)".to_owned());
    }
    let duration =
        Duration::from_secs(u64::try_from(spec.lease_duration_seconds.unwrap_or(15)).unwrap_or(15));
    let renewed = spec.renew_time.as_ref()?;
    let renewed = SystemTime::from(renewed.0);
    let silent = now.duration_since(renewed).ok()?;
    (silent > duration).then(|| {
        format!(
            "was last renewed by {holder} {}s ago (lease {}s)",
            silent.as_secs(),
            duration.as_secs()
        )
    })
}

/// How long the API server's pod proxy has to answer a pod read.
pub const PROXY_TIMEOUT: Duration = Duration::from_secs(3);
/// How long a pod has to answer a read at its IP.
pub const DIRECT_TIMEOUT: Duration = Duration::from_secs(2);
/// The largest reply read from a pod at its IP (a `GET /logpolicy/sites` of a full
/// ledger, 4,096 rows as indented JSON, is a few MiB).
pub const MAX_DIRECT_REPLY: u64 = 16 << 20;

/// The largest reply read from a pod through the API server's pod proxy: the same as
/// at its IP.
pub const MAX_PROXY_REPLY: usize = MAX_DIRECT_REPLY as usize;

/// `GET path` through `client` (a pod's proxy path): the body as text, at most
/// [`MAX_PROXY_REPLY`] bytes read (a larger reply is refused, whatever its status);
/// `Err` names the status of an answer other than 2xx.
pub async fn proxy_get(client: &Client, path: &str) -> std::result::Result<String, String> {
    use http_body_util::BodyExt;
    let request = http::Request::get(path)
        .body(kube::client::Body::from(Vec::new()))
        .map_err(|e| e.to_string())?;
    let reply = client.send(request).await.map_err(|e| e.to_string())?;
    let status = reply.status();
    let body = http_body_util::Limited::new(reply.into_body(), MAX_PROXY_REPLY)
        .collect()
        .await
        .map_err(|e| {
            if e.is::<http_body_util::LengthLimitError>() {
                format!("the reply is larger than {} MiB", MAX_PROXY_REPLY >> 20)
            } else {
                e.to_string()
            }
        })?
        .to_bytes();
    let text = String::from_utf8_lossy(&body).into_owned();
    if !status.is_success() {
        // The API server's own refusal is a Status whose message says why.
        let message = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v["message"].as_str().map(str::to_owned))
            .filter(|m| !m.is_empty());
        return Err(match message {
            Some(m) => format!("{status}: {m}"),
            None => status.to_string(),
        });
    }
    Ok(text)
}

/// A plain HTTP/1.1 `GET` of `path` at `ip:port`, within [`DIRECT_TIMEOUT`]; the body
/// as JSON, read as `T`; a reply larger than [`MAX_DIRECT_REPLY`] is refused.
async fn direct_get<T: DeserializeOwned>(ip: &str, port: u16, path: &str) -> Result<T, String> {
    let host = if ip.contains(':') {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    };
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(&host)
            .await
            .map_err(|e| e.to_string())?;
        let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        let mut reply = Vec::new();
        stream
            .take(MAX_DIRECT_REPLY + 1)
            .read_to_end(&mut reply)
            .await
            .map_err(|e| e.to_string())?;
        Ok::<_, String>(reply)
    };
    let reply = tokio::time::timeout(DIRECT_TIMEOUT, exchange)
        .await
        .map_err(|_| format!("no answer in {} s", DIRECT_TIMEOUT.as_secs()))??;
    if reply.len() as u64 > MAX_DIRECT_REPLY {
        return Err(format!(
            "the reply is larger than {} MiB",
            MAX_DIRECT_REPLY >> 20
        ));
    }
    let text = String::from_utf8_lossy(&reply);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| "not an HTTP reply".to_owned())?;
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        return Err(head.lines().next().unwrap_or("").to_owned());
    }
    json_body(body)
}

/// A reply's body read as `T`, every string in it [`output::printable`] (targets, file
/// names and the like come from the pod: none can carry terminal control); `Err` says
/// whether it is not JSON at all (`no JSON: …`) or JSON of another shape (`JSON of
/// another shape: …`, e.g. a pod of an earlier version).
fn json_body<T: DeserializeOwned>(body: &str) -> std::result::Result<T, String> {
    let value: serde_json::Value =
        serde_json::from_str(body).map_err(|e| format!("no JSON: {e}"))?;
    serde_json::from_value(output::printable_json(value))
        .map_err(|e| output::printable(&format!("JSON of another shape: {e}")).into_owned())
}

/// What a pod says it holds of a LogPolicy: the version of the document that carries
/// it and when the pod applied that document (by the pod's clock; absent from pods of
/// earlier versions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodHold {
    /// The document's version.
    pub version: u64,
    /// When the pod applied it, RFC 3339.
    pub applied_at: Option<String>,
    /// The last replay the LogPolicy asked of the pod, as the pod did it
    /// (`PolicyView.replays`; absent when it asked none, or from pods of earlier
    /// versions).
    pub replay: Option<logpolicy::wire::ReplayView>,
}

/// What a pod's `GET /logpolicy` (`view`) holds of the LogPolicy `ns/name`: `None` when
/// no layer of it is in force there.
pub fn pod_hold(view: &serde_json::Value, source: &str) -> Option<PodHold> {
    if !holds_layer(view, source) {
        return None;
    }
    let doc = &view["document"];
    let replay = view["replays"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["policy"] == source)
        .and_then(|r| serde_json::from_value(r.clone()).ok());
    Some(PodHold {
        version: doc["version"].as_u64()?,
        applied_at: doc["appliedAt"].as_str().map(str::to_owned),
        replay,
    })
}

impl Kube {
    /// What each of `pods` holds of the LogPolicy `source`, by pod name, read from
    /// their endpoints [`HOLD_READS`] at a time: `Err` says why a pod could not be read.
    pub async fn holds(
        &self,
        pods: &[Pod],
        source: &str,
    ) -> BTreeMap<String, std::result::Result<Option<PodHold>, String>> {
        let reads = pods.iter().map(|pod| async move {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let hold = self.pod_policy(pod).await.map(|v| pod_hold(&v, source));
            (name, hold)
        });
        futures::stream::iter(reads)
            .buffer_unordered(HOLD_READS)
            .collect()
            .await
    }
}

/// How many pods' endpoints are read at a time.
pub const HOLD_READS: usize = 32;

/// Whether a pod's `GET /logpolicy` holds a layer from the LogPolicy `ns/name` that is
/// in force.
pub fn holds_layer(policy: &serde_json::Value, source: &str) -> bool {
    policy["layers"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|l| l["source"] == source && l["active"] != false)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    /// A Lease held by `holder`, renewed at `renewed`, for 15 s (also `check`'s tests).
    pub(crate) fn lease(holder: &str, renewed: SystemTime) -> Lease {
        Lease {
            metadata: Default::default(),
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.into()),
                lease_duration_seconds: Some(15),
                renew_time: Some(MicroTime(
                    k8s_openapi::jiff::Timestamp::try_from(renewed).unwrap(),
                )),
                ..LeaseSpec::default()
            }),
        }
    }

    #[test]
    fn a_lease_not_renewed_for_its_duration_says_the_operator_is_down() {
        let now = SystemTime::now();
        assert_eq!(
            lease_down(&lease("op-0", now - Duration::from_secs(5)), now),
            None
        );
        let down = lease_down(&lease("op-0", now - Duration::from_secs(40)), now).unwrap();
        assert!(down.contains("last renewed by op-0 40s ago"), "{down}");
        let released = lease_down(&lease("", now), now).unwrap();
        assert!(released.contains("released"), "{released}");
    }

    /// Serves each of `replies` (status line, body) to one connection, in order, at a
    /// loopback port; returns the port.
    async fn serve(replies: Vec<(&'static str, String)>) -> u16 {
        serve_path("/logpolicy/sites", replies).await
    }

    /// As [`serve`], each request for `path`.
    async fn serve_path(path: &'static str, replies: Vec<(&'static str, String)>) -> u16 {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            for (status, body) in replies {
                let (mut stream, _) = listener.accept().await.unwrap();
                let mut request = Vec::new();
                let mut buf = [0u8; 1024];
                while !request.ends_with(b"\r\n\r\n") {
                    let n = stream.read(&mut buf).await.unwrap();
                    assert!(n > 0, "the request ended early");
                    request.extend_from_slice(&buf[..n]);
                }
                let expected = format!("GET {path} HTTP/1.1\r\n");
                assert!(
                    request.starts_with(expected.as_bytes()),
                    "{}",
                    String::from_utf8_lossy(&request)
                );
                let head = format!(
                    "{status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                // The reader may stop early (a reply too large): ignore a reset.
                let _ = stream.write_all(head.as_bytes()).await;
                let _ = stream.write_all(body.as_bytes()).await;
            }
        });
        port
    }

    #[tokio::test]
    async fn a_pod_read_at_its_ip_takes_a_full_ledger_and_says_why_it_refuses_a_reply() {
        use logpolicy::wire::{SiteView, SitesView};
        // A full ledger, as the admin endpoint writes it (indented): several MiB.
        let mut view: SitesView = serde_json::from_str("{}").unwrap();
        view.rows = (0..4096u32)
            .map(|i| SiteView {
                target: format!("shop::module_{i}"),
                name: format!("event src/module_{i}.rs:{i}"),
                file: Some(format!("src/module_{i}.rs")),
                line: Some(i),
                module_path: Some(format!("shop::module_{i}")),
                ..SiteView::default()
            })
            .collect();
        let full = serde_json::to_string_pretty(&view).unwrap();
        assert!(full.len() > 1 << 20, "{}", full.len());
        let port = serve(vec![
            ("HTTP/1.1 200 OK", full),
            (
                "HTTP/1.1 200 OK",
                " ".repeat((MAX_DIRECT_REPLY + 1) as usize),
            ),
            ("HTTP/1.1 404 Not Found", "{}".to_owned()),
            ("HTTP/1.1 200 OK", r#"{"rows": 3}"#.to_owned()),
            ("HTTP/1.1 200 OK", "<html>".to_owned()),
        ])
        .await;
        let read = || direct_get::<SitesView>("127.0.0.1", port, "/logpolicy/sites");
        assert_eq!(read().await.unwrap(), view);
        let e = read().await.unwrap_err();
        assert_eq!(e, "the reply is larger than 16 MiB");
        assert_eq!(read().await.unwrap_err(), "HTTP/1.1 404 Not Found");
        let e = read().await.unwrap_err();
        assert!(e.starts_with("JSON of another shape: invalid type"), "{e}");
        let e = read().await.unwrap_err();
        assert!(e.starts_with("no JSON: expected value"), "{e}");
        // Nobody listens any more.
        let e = read().await.unwrap_err();
        assert!(e.contains("refused"), "{e}");
    }

    #[tokio::test]
    async fn a_pods_reply_through_the_proxy_is_capped_and_shown_as_text() {
        use logpolicy::wire::SitesView;
        let path = "/api/v1/namespaces/shop/pods/web-1:9095/proxy/logpolicy/sites";
        let hostile = serde_json::json!({
            "rows": [{
                "target": "shop\u{1b}]0;owned\u{7}",
                "name": "event \u{1b}[2J\u{1b}[H",
                "file": "src/\u{202e}sr.niam",
            }],
        })
        .to_string();
        let status = serde_json::json!({
            "kind": "Status", "code": 500,
            "message": "error trying to reach service: \u{1b}[31mdial tcp\u{9b}",
        })
        .to_string();
        let port = serve_path(
            path,
            vec![
                ("HTTP/1.1 200 OK", hostile),
                ("HTTP/1.1 500 Internal Server Error", status),
                ("HTTP/1.1 200 OK", " ".repeat(MAX_PROXY_REPLY + 1)),
            ],
        )
        .await;
        let config = Config::new(format!("http://127.0.0.1:{port}").parse().unwrap());
        let kube = Kube {
            client: Client::try_from(config).unwrap(),
            namespace: "shop".into(),
            operator_namespace: "logpolicy-system".into(),
            direct_first: Arc::default(),
        };
        let mut pod = Pod::default();
        pod.metadata.name = Some("web-1".into());
        pod.metadata.namespace = Some("shop".into());
        pod.metadata.annotations = Some([(PORT_ANNOTATION.to_owned(), "9095".to_owned())].into());

        let view: SitesView = kube.pod_get(&pod, "/logpolicy/sites").await.unwrap();
        let row = &view.rows[0];
        assert_eq!(row.target, "shop\\u{1b}]0;owned\\u{7}");
        assert_eq!(row.name, "event \\u{1b}[2J\\u{1b}[H");
        assert_eq!(row.file.as_deref(), Some("src/\\u{202e}sr.niam"));

        let e = kube
            .pod_get::<SitesView>(&pod, "/logpolicy/sites")
            .await
            .unwrap_err();
        assert_eq!(
            e,
            "pod proxy: 500 Internal Server Error: error trying to reach service: \
             \\u{1b}[31mdial tcp\\u{9b}; the pod has no IP"
        );
        let e = kube
            .pod_get::<SitesView>(&pod, "/logpolicy/sites")
            .await
            .unwrap_err();
        assert_eq!(
            e,
            "pod proxy: the reply is larger than 16 MiB; the pod has no IP"
        );
    }

    #[test]
    fn a_layer_is_held_while_in_force() {
        let v = serde_json::json!({"layers": [{"source": "env"}, {"source": "shop/raise-x", "active": true}]});
        assert!(holds_layer(&v, "shop/raise-x"));
        assert!(!holds_layer(&v, "shop/raise-y"));
        let expired = serde_json::json!({"layers": [{"source": "shop/raise-x", "active": false}]});
        assert!(!holds_layer(&expired, "shop/raise-x"));
    }

    #[test]
    fn a_hold_gives_the_document_version_and_when_the_pod_applied_it() {
        let v = serde_json::json!({
            "layers": [{"source": "env"}, {"source": "shop/raise-x", "active": true}],
            "document": {"version": 7, "issuedAt": "2026-12-03T07:00:00Z", "appliedAt": "2026-12-03T07:00:00.031000000Z"},
        });
        assert_eq!(
            pod_hold(&v, "shop/raise-x"),
            Some(PodHold {
                version: 7,
                applied_at: Some("2026-12-03T07:00:00.031000000Z".into()),
                replay: None,
            })
        );
        assert_eq!(pod_hold(&v, "shop/raise-y"), None);
        // A pod of an earlier version says no appliedAt.
        let older = serde_json::json!({
            "layers": [{"source": "shop/raise-x", "active": true}],
            "document": {"version": 3, "issuedAt": "2026-12-03T07:00:00Z"},
        });
        assert_eq!(
            pod_hold(&older, "shop/raise-x"),
            Some(PodHold {
                version: 3,
                applied_at: None,
                replay: None,
            })
        );
        // The replay the policy asked for, as the pod did it; another policy's is not
        // this one's.
        let replayed = serde_json::json!({
            "layers": [{"source": "shop/raise-x", "active": true}],
            "document": {"version": 8, "issuedAt": "2026-12-03T07:00:00Z"},
            "replays": [
                {"policy": "shop/other", "id": "u2/1", "at": "2026-12-03T07:00:00Z",
                 "askedFrom": "2026-12-03T06:50:00Z", "lines": 3},
                {"policy": "shop/raise-x", "id": "u1/1", "at": "2026-12-03T07:00:00Z",
                 "askedFrom": "2026-12-03T06:55:00Z", "heldFrom": "2026-12-03T06:57:00Z",
                 "firstAt": "2026-12-03T06:57:00Z", "lines": 42}],
        });
        let replay = pod_hold(&replayed, "shop/raise-x").unwrap().replay.unwrap();
        assert_eq!((replay.id.as_str(), replay.lines), ("u1/1", 42));
        assert!(replay.held_from.is_some());
    }
}
