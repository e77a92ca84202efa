//! What every end-to-end test needs: a namespace of its own, a directory for its
//! files, an operator (shared by the tests of a process, or its own), demo pods, and
//! `kubectl` scoped to the namespace.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use serde_json::Value;

use crate::cluster::{Cluster, Namespace};
use crate::logs::Line;
use crate::operator::{apply_crds, Operator};
use crate::pod::{DemoPod, PodSpec};
use crate::process::{wait_for, TestDir};
use crate::{Error, Result};

/// One test's world. Declare pods after it: they are dropped (killed) first.
pub struct Scenario {
    /// The cluster.
    pub cluster: &'static Cluster,
    /// The admin's kube client.
    pub client: kube::Client,
    /// The trusted-keys file the pods read (the operator's public key).
    pub keys_file: PathBuf,
    // Dropped in this order: the namespace (its pods and policies), then the files.
    ns: Namespace,
    dir: TestDir,
}

impl Scenario {
    /// A scenario named `name` (namespace `NAME-<pid>-<n>`) with the process's shared
    /// operator.
    pub async fn new(name: &str) -> Result<Scenario> {
        let operator = Operator::shared()?;
        Self::with_operator(name, operator).await
    }

    /// A scenario with a given operator.
    pub async fn with_operator(name: &str, operator: &Operator) -> Result<Scenario> {
        Self::with_keys(name, &operator.trusted_keys).await
    }

    /// A scenario whose pods trust `trusted_keys` (a trusted-keys file's content).
    pub async fn with_keys(name: &str, trusted_keys: &str) -> Result<Scenario> {
        let cluster = Cluster::shared()?;
        apply_crds(cluster)?;
        let dir = TestDir::new(name)?;
        let ns = cluster.namespace(name)?;
        let keys_file = dir.join("trusted-keys");
        std::fs::write(&keys_file, trusted_keys)
            .map_err(|e| Error(format!("{}: {e}", keys_file.display())))?;
        let client = cluster.client().await?;
        Ok(Scenario {
            cluster,
            client,
            keys_file,
            ns,
            dir,
        })
    }

    /// The namespace's name.
    pub fn namespace(&self) -> &str {
        &self.ns.name
    }

    /// The test's directory.
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// Starts these pods, concurrently.
    pub async fn pods(&self, specs: Vec<PodSpec>) -> Result<Vec<DemoPod>> {
        let starts = specs.into_iter().map(|spec| {
            DemoPod::start(
                &self.client,
                self.dir.path(),
                &self.ns.name,
                spec,
                &self.keys_file,
            )
        });
        futures::future::try_join_all(starts).await
    }

    /// `kubectl ARGS -n NS` as the admin.
    pub fn kubectl(&self, args: &[&str]) -> Result<String> {
        let mut all = args.to_vec();
        all.extend(["-n", &self.ns.name]);
        self.cluster.kubectl(&all)
    }

    /// `kubectl apply -n NS -f -` with `yaml`.
    pub fn apply(&self, yaml: &str) -> Result<String> {
        self.cluster
            .kubectl_input(&["apply", "-n", &self.ns.name, "-f", "-"], yaml)
    }

    /// `kubectl get lp NAME -o json`.
    pub fn policy(&self, name: &str) -> Result<Value> {
        let out = self.kubectl(&["get", "lp", name, "-o", "json"])?;
        serde_json::from_str(&out).map_err(|e| Error(format!("lp/{name}: {e}")))
    }

    /// Waits until `lp/NAME` has a condition `type` with `status`; returns the policy.
    pub fn wait_condition(
        &self,
        name: &str,
        type_: &str,
        status: &str,
        timeout: Duration,
    ) -> Result<Value> {
        wait_for(
            timeout,
            &format!("lp/{name} condition {type_}={status}"),
            || {
                let lp = self.policy(name)?;
                Ok(condition(&lp, type_)
                    .filter(|c| c["status"] == status)
                    .map(|_| lp.clone()))
            },
        )
    }

    /// The Events about `lp/NAME` (`events.k8s.io` or core), as `reason: note` lines.
    pub fn events(&self, name: &str) -> Result<Vec<String>> {
        let out = self.kubectl(&["get", "events", "-o", "json"])?;
        let list: Value = serde_json::from_str(&out).map_err(|e| Error(format!("events: {e}")))?;
        Ok(list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| {
                let regarding = if e["regarding"].is_object() {
                    &e["regarding"]
                } else {
                    &e["involvedObject"]
                };
                regarding["kind"] == "LogPolicy" && regarding["name"] == name
            })
            .map(|e| {
                let note = e["note"].as_str().or(e["message"].as_str()).unwrap_or("");
                format!("{}: {note}", e["reason"].as_str().unwrap_or(""))
            })
            .collect())
    }
}

/// The condition `type_` of an object's `status.conditions`.
pub fn condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// Waits until every pod wrote a line matching `pred` stamped at or after `from`;
/// returns each pod's first such line's timestamp.
pub fn wait_lines(
    pods: &mut [DemoPod],
    from: SystemTime,
    timeout: Duration,
    what: &str,
    pred: impl Fn(&Line) -> bool,
) -> Result<Vec<SystemTime>> {
    wait_for(timeout, what, || {
        let mut firsts = Vec::new();
        for pod in pods.iter_mut() {
            pod.refresh()?;
            match pod.log.first(from, &pred) {
                Some(l) => firsts.push(l.ts),
                None => return Ok(None),
            }
        }
        Ok(Some(firsts))
    })
}

/// Waits until every pod wrote some line stamped at or after `t` (so that what it
/// wrote before `t` is complete).
pub fn wait_past(pods: &mut [DemoPod], t: SystemTime, timeout: Duration) -> Result<()> {
    wait_lines(
        pods,
        t,
        timeout,
        "the services to write past a moment",
        |_| true,
    )
    .map(|_| ())
}
