//! What every end-to-end test needs: a namespace of its own, a directory for its
//! files, an operator (shared by the tests of a file, or its own), demo pods, and
//! `kubectl` scoped to the namespace.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use serde_json::Value;

use crate::cluster::{Cluster, Namespace};
use crate::logs::Line;
use crate::operator::{apply_crds, Operator, TRUST_CONFIG_MAP, TRUST_DATA_KEY};
use crate::pod::{create_pod, DemoPod, PodSpec};
use crate::process::{wait_for, wait_for_async, TestDir};
use crate::{Error, Result};

/// One test's world. Declare pods after it: they are dropped (killed) first.
pub struct Scenario {
    /// The cluster.
    pub cluster: &'static Cluster,
    /// The admin's kube client.
    pub client: kube::Client,
    /// The trusted-keys file the pods read (the operator's public key, from the
    /// `logpolicy-trust` ConfigMap).
    pub keys_file: PathBuf,
    operator_key: Option<String>,
    // Dropped in this order: the namespace (its pods and policies), then the files.
    ns: Namespace,
    dir: TestDir,
}

impl Scenario {
    /// A scenario named `name` (namespace `NAME-<pid>-<n>`) with the shared operator
    /// ([`Operator::shared`]).
    pub async fn new(name: &str) -> Result<Scenario> {
        let operator = Operator::shared()?;
        Self::with_operator(name, &operator).await
    }

    /// A scenario with a given operator.
    pub async fn with_operator(name: &str, operator: &Operator) -> Result<Scenario> {
        let mut s = Self::without_operator(name).await?;
        s.operator_key = Some(operator.trusted_keys.clone());
        Ok(s)
    }

    /// A scenario whose operator is started later (or elsewhere): the pods trust what
    /// the `logpolicy-trust` ConfigMap of the namespace holds.
    pub async fn without_operator(name: &str) -> Result<Scenario> {
        let cluster = Cluster::shared()?;
        apply_crds(cluster)?;
        let dir = TestDir::new(name)?;
        let ns = cluster.namespace(name)?;
        let keys_file = dir.join("trusted-keys");
        let client = cluster.client().await?;
        Ok(Scenario {
            cluster,
            client,
            keys_file,
            operator_key: None,
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

    /// Starts these pods: creates the Pod objects, waits for the operator's
    /// `logpolicy-trust` ConfigMap in the namespace (written when the first opted-in
    /// pod appears) and gives its key file to the services, as a workload mounting it
    /// would; then starts the services and marks the pods Running, concurrently.
    pub async fn pods(&self, specs: Vec<PodSpec>) -> Result<Vec<DemoPod>> {
        let uids = futures::future::try_join_all(
            specs
                .iter()
                .map(|spec| create_pod(&self.client, &self.ns.name, spec)),
        )
        .await?;
        if !self.keys_file.exists() {
            let keys = self.trust_config_map().await?;
            std::fs::write(&self.keys_file, keys)
                .map_err(|e| Error(format!("{}: {e}", self.keys_file.display())))?;
        }
        let launches = specs.into_iter().zip(uids).map(|(spec, uid)| {
            DemoPod::launch(
                &self.client,
                self.dir.path(),
                &self.ns.name,
                spec,
                uid,
                &self.keys_file,
            )
        });
        futures::future::try_join_all(launches).await
    }

    /// The `trusted-keys` of the `logpolicy-trust` ConfigMap in the namespace (waits up
    /// to 10 s for it); checked against the operator's key when it is known.
    pub async fn trust_config_map(&self) -> Result<String> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.ns.name);
        let keys = wait_for_async(
            Duration::from_secs(10),
            "the operator's logpolicy-trust ConfigMap",
            || async {
                let cm = api
                    .get_opt(TRUST_CONFIG_MAP)
                    .await
                    .map_err(|e| Error(format!("ConfigMap {TRUST_CONFIG_MAP}: {e}")))?;
                Ok(cm
                    .and_then(|cm| cm.data)
                    .and_then(|mut d| d.remove(TRUST_DATA_KEY)))
            },
        )
        .await?;
        if let Some(expected) = &self.operator_key {
            let key_lines = |s: &str| -> Vec<String> {
                s.lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty() && !l.starts_with('#'))
                    .map(str::to_owned)
                    .collect()
            };
            if key_lines(&keys) != key_lines(expected) {
                return Err(Error(format!(
                    "ConfigMap {TRUST_CONFIG_MAP} holds {keys:?}, the operator's Secret {expected:?}"
                )));
            }
        }
        Ok(keys)
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

    /// The READY column of `kubectl get lp NAME` (the CRD's second printer column), and
    /// the whole line printed.
    pub fn ready_column(&self, name: &str) -> Result<(String, String)> {
        let line = self.kubectl(&["get", "lp", name, "--no-headers"])?;
        let ready = line.split_whitespace().nth(1).ok_or_else(|| {
            Error(format!(
                "kubectl get lp {name}: no READY column in {line:?}"
            ))
        })?;
        Ok((ready.to_owned(), line))
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
        self.events_about("LogPolicy", name)
    }

    /// The Events about the object of `kind` named `name` in the namespace, as
    /// `reason: note` lines.
    pub fn events_about(&self, kind: &str, name: &str) -> Result<Vec<String>> {
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
                regarding["kind"] == kind && regarding["name"] == name
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
