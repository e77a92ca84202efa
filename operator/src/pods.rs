//! A pod, stripped to what the index needs.
//!
//! A full `Pod` costs ~46 KiB in a cache (most of it `managedFields`); the index keeps
//! only identity, labels, address and enough of the container statuses to notice that a
//! process restarted (and so lost what was pushed to it).

use std::net::{IpAddr, SocketAddr};

use k8s_openapi::api::core::v1::Pod;

pub use logpolicy_api::labels::{DEFAULT_ADMIN_PORT, OPT_IN_LABEL, PORT_ANNOTATION};
pub use logpolicy_api::selector::Labels;

/// A [`PORT_ANNOTATION`] that is not a port.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("annotation {annotation}={value:?} is not a port (1 to 65535)", annotation = PORT_ANNOTATION)]
pub struct BadPortAnnotation {
    /// The annotation's value.
    pub value: String,
}

/// Why a pod has no admin endpoint (yet).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoAdminAddr {
    /// It has no IP yet.
    #[error("no pod IP yet")]
    NoIp,
    /// Its port annotation is unusable.
    #[error(transparent)]
    BadPort(#[from] BadPortAnnotation),
}

/// One container's run: a change in restart count or start time means a new process.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContainerRun {
    /// The container's name.
    pub name: String,
    /// `restartCount`.
    pub restart_count: i32,
    /// `state.running.startedAt`, as given (RFC 3339), if running.
    pub started_at: Option<String>,
}

/// What the index knows of a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodInfo {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `metadata.uid`: a new uid under the same name is a new pod.
    pub uid: String,
    /// Labels, matched against LogPolicy selectors.
    pub labels: Labels,
    /// `status.podIP`, once it has one.
    pub ip: Option<IpAddr>,
    /// The admin port, or why the annotation is unusable.
    pub port: Result<u16, BadPortAnnotation>,
    /// The containers' runs, sorted by name.
    pub containers: Vec<ContainerRun>,
    /// Its `Ready` condition is `True`: turning Ready means its endpoint may answer
    /// now.
    pub ready: bool,
}

impl PodInfo {
    /// A running, Ready pod with this address, no labels and no container statuses (for
    /// tests and simulations).
    pub fn new(namespace: &str, name: &str, uid: &str, ip: Option<IpAddr>, port: u16) -> Self {
        PodInfo {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            uid: uid.to_owned(),
            labels: Labels::default(),
            ip,
            port: Ok(port),
            containers: Vec::new(),
            ready: true,
        }
    }

    /// This pod with a label.
    #[must_use]
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels = self.labels.with(key, value);
        self
    }

    /// Strips a `Pod` from the API; `None` for a pod without namespace, name or uid
    /// (never the case for a pod from a watch, but never trusted either).
    pub fn from_pod(pod: &Pod) -> Option<Self> {
        let meta = &pod.metadata;
        let port = match meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(PORT_ANNOTATION))
        {
            None => Ok(DEFAULT_ADMIN_PORT),
            Some(v) => v
                .trim()
                .parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| BadPortAnnotation { value: v.clone() }),
        };
        let status = pod.status.as_ref();
        let ip = status
            .and_then(|s| s.pod_ip.as_deref())
            .and_then(|ip| ip.parse().ok());
        let mut containers: Vec<ContainerRun> = status
            .and_then(|s| s.container_statuses.as_ref())
            .into_iter()
            .flatten()
            .map(|c| ContainerRun {
                name: c.name.clone(),
                restart_count: c.restart_count,
                started_at: c
                    .state
                    .as_ref()
                    .and_then(|s| s.running.as_ref())
                    .and_then(|r| r.started_at.as_ref())
                    .map(|t| t.0.to_string()),
            })
            .collect();
        containers.sort_by(|a, b| a.name.cmp(&b.name));
        let ready = status
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        Some(PodInfo {
            namespace: meta.namespace.clone()?,
            name: meta.name.clone()?,
            uid: meta.uid.clone()?,
            labels: meta.labels.as_ref().map(Labels::from).unwrap_or_default(),
            ip,
            port,
            containers,
            ready,
        })
    }

    /// Where its admin endpoint is, or why there is none yet.
    pub fn admin_addr(&self) -> Result<SocketAddr, NoAdminAddr> {
        let port = self.port.clone()?;
        match self.ip {
            Some(ip) => Ok(SocketAddr::new(ip, port)),
            None => Err(NoAdminAddr::NoIp),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(json: serde_json::Value) -> Pod {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn strips_a_pod_to_what_the_index_needs() {
        let p = pod(serde_json::json!({
            "metadata": {"namespace": "shop", "name": "web-1", "uid": "u1",
                         "labels": {"app": "web", OPT_IN_LABEL: "true"},
                         "annotations": {PORT_ANNOTATION: "9100", "big": "x"},
                         "managedFields": [{"manager": "kubectl"}]},
            "spec": {"containers": [{"name": "main", "image": "x"}]},
            "status": {"podIP": "127.0.0.7", "containerStatuses": [
                {"name": "side", "image": "x", "imageID": "", "ready": true, "restartCount": 0},
                {"name": "main", "image": "x", "imageID": "", "ready": true, "restartCount": 2,
                 "state": {"running": {"startedAt": "2026-11-29T20:00:00Z"}}}]}
        }));
        let info = PodInfo::from_pod(&p).unwrap();
        assert_eq!(info.admin_addr(), Ok("127.0.0.7:9100".parse().unwrap()));
        assert_eq!(info.labels.get("app"), Some("web"));
        assert_eq!(info.containers.len(), 2);
        assert_eq!(info.containers[0].name, "main");
        assert_eq!(info.containers[0].restart_count, 2);
        assert!(info.containers[0].started_at.is_some());
        assert!(!info.ready, "no Ready condition");
        let mut ready = p.clone();
        if let Some(s) = ready.status.as_mut() {
            s.conditions = Some(vec![serde_json::from_value(
                serde_json::json!({"type": "Ready", "status": "True"}),
            )
            .unwrap()]);
        }
        assert!(PodInfo::from_pod(&ready).unwrap().ready);
    }

    #[test]
    fn defaults_and_bad_annotations() {
        let base = serde_json::json!({"metadata": {"namespace": "s", "name": "n", "uid": "u"}});
        let info = PodInfo::from_pod(&pod(base.clone())).unwrap();
        assert_eq!(info.port, Ok(DEFAULT_ADMIN_PORT));
        assert_eq!(info.admin_addr(), Err(NoAdminAddr::NoIp));
        assert_eq!(NoAdminAddr::NoIp.to_string(), "no pod IP yet");
        for bad in ["0", "65536", "http", ""] {
            let mut p = base.clone();
            p["metadata"]["annotations"] = serde_json::json!({PORT_ANNOTATION: bad});
            let info = PodInfo::from_pod(&pod(p)).unwrap();
            assert_eq!(
                info.port.map_err(|e| e.to_string()),
                Err(format!(
                    "annotation {PORT_ANNOTATION}={bad:?} is not a port (1 to 65535)"
                )),
                "{bad}"
            );
        }
        assert!(PodInfo::from_pod(&pod(serde_json::json!({"metadata": {"name": "n"}}))).is_none());
    }
}
