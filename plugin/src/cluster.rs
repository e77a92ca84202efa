//! The Kubernetes side: the client (kubectl's kubeconfig, context and namespace), the
//! pods a selector picks, the operator's Lease, and a pod's admin endpoint.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use clap::Args;
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::api::ListParams;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use logpolicy_operator::{DEFAULT_ADMIN_PORT, OPT_IN_LABEL, PORT_ANNOTATION};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::exit::{api_failure, Failure, Result};
use crate::selector::selector_string;

/// The Lease the operator's replicas elect a leader with (`--leader-election`).
pub const LEASE_NAME: &str = "logpolicy-operator";

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
                Err(e) if self.context.is_none() => Config::incluster().map_err(|_| {
                    Failure::error(format!("no kubeconfig ({e}) and not in a cluster"))
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
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.namespace);
        let selector = selector_string(selector);
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
        let name = |p: &Pod| p.metadata.name.clone().unwrap_or_default();
        opted_in.sort_by_key(name);
        not_opted_in.sort_by_key(name);
        out.opted_in = opted_in.iter().map(name).collect();
        out.not_opted_in = not_opted_in.iter().map(name).collect();
        out.opted_in_pods = opted_in;
        Ok(out)
    }

    /// Why the operator seems not to run, from its Lease, when the Lease says so:
    /// `Some(reason)` when it was released or not renewed for longer than its duration;
    /// `None` when it is held, absent or cannot be read (the operator runs without an
    /// election by default: no Lease then).
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
                "there is no Lease {at} (there is one only with --leader-election; use --operator-namespace if it runs elsewhere)"
            ),
            Err(e) => format!("its Lease {at} cannot be read: {e}"),
        }
    }

    /// `GET /logpolicy` of a pod's admin endpoint: through the API server's pod proxy,
    /// else straight to the pod's IP (from inside the cluster network); `Err` says why
    /// neither answered.
    pub async fn pod_policy(&self, pod: &Pod) -> Result<serde_json::Value, String> {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let port = pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(PORT_ANNOTATION))
            .and_then(|p| p.parse::<u16>().ok())
            .unwrap_or(DEFAULT_ADMIN_PORT);
        let path = format!(
            "/api/v1/namespaces/{}/pods/{name}:{port}/proxy/logpolicy",
            self.namespace
        );
        let ip = pod.status.as_ref().and_then(|s| s.pod_ip.clone());
        if let (true, Some(ip)) = (self.direct_first.load(Ordering::Relaxed), &ip) {
            if let Ok(v) = direct_get(ip, port, "/logpolicy").await {
                return Ok(v);
            }
        }
        let proxied = match http::Request::get(&path).body(Vec::new()) {
            Ok(req) => {
                match tokio::time::timeout(Duration::from_secs(3), self.client.request_text(req))
                    .await
                {
                    Ok(Ok(text)) => match serde_json::from_str(&text) {
                        Ok(v) => return Ok(v),
                        Err(e) => format!("the pod proxy answered no JSON: {e}"),
                    },
                    Ok(Err(e)) => format!("pod proxy: {e}"),
                    Err(_) => "pod proxy: no answer in 3 s".to_owned(),
                }
            }
            Err(e) => format!("pod proxy: {e}"),
        };
        let Some(ip) = ip else {
            return Err(format!("{proxied}; the pod has no IP"));
        };
        let direct = direct_get(&ip, port, "/logpolicy")
            .await
            .map_err(|e| format!("{proxied}; {ip}:{port}: {e}"))?;
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

/// A plain HTTP/1.1 `GET` of `path` at `ip:port`, within 2 s; the body as JSON.
async fn direct_get(ip: &str, port: u16, path: &str) -> Result<serde_json::Value, String> {
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
            .take(1 << 20)
            .read_to_end(&mut reply)
            .await
            .map_err(|e| e.to_string())?;
        Ok::<_, String>(reply)
    };
    let reply = tokio::time::timeout(Duration::from_secs(2), exchange)
        .await
        .map_err(|_| "no answer in 2 s".to_owned())??;
    let text = String::from_utf8_lossy(&reply);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| "not an HTTP reply".to_owned())?;
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        return Err(head.lines().next().unwrap_or("").to_owned());
    }
    serde_json::from_str(body).map_err(|e| format!("not JSON: {e}"))
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
}

/// What a pod's `GET /logpolicy` (`view`) holds of the LogPolicy `ns/name`: `None` when
/// no layer of it is in force there.
pub fn pod_hold(view: &serde_json::Value, source: &str) -> Option<PodHold> {
    if !holds_layer(view, source) {
        return None;
    }
    let doc = &view["document"];
    Some(PodHold {
        version: doc["version"].as_u64()?,
        applied_at: doc["appliedAt"].as_str().map(str::to_owned),
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
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    fn lease(holder: &str, renewed: SystemTime) -> Lease {
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
                applied_at: Some("2026-12-03T07:00:00.031000000Z".into())
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
                applied_at: None
            })
        );
    }
}
