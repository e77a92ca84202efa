//! The `logpolicy-trust` ConfigMap: the operator's public key, published in every
//! namespace that has opted-in pods, in the format the layer reads
//! (`logpolicy::wire::TrustedKeys`, the file `LOGPOLICY_TRUSTED_KEYS_FILE` names).
//!
//! A workload mounts it and points the layer at the file:
//!
//! ```yaml
//! env:
//! - {name: LOGPOLICY_TRUSTED_KEYS_FILE, value: /etc/logpolicy/trusted-keys}
//! volumeMounts:
//! - {name: logpolicy-trust, mountPath: /etc/logpolicy, readOnly: true}
//! volumes:
//! - {name: logpolicy-trust, configMap: {name: logpolicy-trust}}
//! ```
//!
//! [`TrustPublisher`] applies it (server-side apply, the operator's field manager) from
//! one background task, so the controller never waits for the API server.
//!
//! # Restored at once
//!
//! Whoever may patch ConfigMaps in a namespace could otherwise add their own key to the
//! file its pods trust. The controller watches the ConfigMaps named [`TRUST_CONFIG_MAP`]
//! (a field selector on `metadata.name`, nothing else) and compares each with what the
//! operator writes ([`drift`]): the one data key [`TRUST_DATA_KEY`] holding exactly
//! [`trusted_keys_text`] (the operator's one key: no other key is legitimate, there is
//! no second, rotated key to keep), no other data or binary data, the managed-by label,
//! and not `immutable`. Labels and annotations others add are left alone: the pods do
//! not read them. A ConfigMap that differs is restored ([`TrustPublisher::restore`])
//! with one JSON merge patch (the operator's key and label, the keys it does not write
//! removed: a server-side apply cannot remove fields that another manager set); an
//! `immutable` one, which no write can change, is deleted (on its uid) and created
//! anew; a deleted one is created anew (applied). Each restore, once written, is
//! counted (`logpolicy_operator_trust_configmap_restores_total`), logged as a warning
//! naming what was found, and handed to a callback (the controller records a `Warning`
//! Event `TrustRestored` on the ConfigMap). One in a namespace being deleted is dropped.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::{Api, Client};
use logpolicy::wire::VerifyingKey;
use prometheus_client::metrics::counter::Counter;
use tokio::sync::Notify;

use crate::log;
use crate::metrics::{self, ByResult};
use crate::ownership::{self, MANAGED_BY};

pub use logpolicy_api::trust::{trusted_keys_text, TRUST_CONFIG_MAP, TRUST_DATA_KEY};

const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// The ConfigMap for `namespace`, as applied.
pub fn trust_config_map(namespace: &str, key: &VerifyingKey) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(TRUST_CONFIG_MAP.to_owned());
    cm.metadata.namespace = Some(namespace.to_owned());
    cm.metadata.labels = Some(BTreeMap::from([(
        MANAGED_BY.0.to_owned(),
        MANAGED_BY.1.to_owned(),
    )]));
    cm.data = Some(BTreeMap::from([(
        TRUST_DATA_KEY.to_owned(),
        trusted_keys_text(key),
    )]));
    cm
}

/// How a trust ConfigMap seen differs from what the operator writes: what a restore
/// must undo besides applying the operator's content again.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Drift {
    /// What differs, for the log and the Event (e.g. `data.trusted-keys is not the
    /// operator's key`).
    pub what: Vec<String>,
    /// Data keys the operator does not write (removed).
    pub extra_data: BTreeSet<String>,
    /// Binary data keys (removed).
    pub extra_binary: BTreeSet<String>,
    /// The uid of an `immutable` ConfigMap: deleted and created anew.
    pub recreate: Option<String>,
    /// The uid of the ConfigMap seen changed (`None`: deleted).
    pub uid: Option<String>,
    /// Whether the write is a restore (counted, logged and reported once done), not
    /// the operator's routine apply.
    pub restore: bool,
}

impl Drift {
    /// Merges what another drift of the same ConfigMap asks for.
    fn merge(&mut self, other: Drift) {
        self.what.extend(other.what);
        self.extra_data.extend(other.extra_data);
        self.extra_binary.extend(other.extra_binary);
        if other.recreate.is_some() {
            self.recreate = other.recreate;
        }
        if other.uid.is_some() {
            self.uid = other.uid;
        }
        self.restore |= other.restore;
    }

    /// What was found, for the log and the Event: `deleted` when nothing else.
    pub fn describe(&self) -> String {
        if self.what.is_empty() {
            "deleted".to_owned()
        } else {
            self.what.join("; ")
        }
    }

    /// The JSON merge patch that restores a changed ConfigMap in one write: the
    /// operator's label and key, and the keys it does not write removed (one write, so
    /// that no state in between is seen as another change).
    fn restore_patch(&self, key: &VerifyingKey) -> serde_json::Value {
        let nulls = |keys: &BTreeSet<String>| {
            keys.iter()
                .map(|k| (k.clone(), serde_json::Value::Null))
                .collect::<serde_json::Map<_, _>>()
        };
        let mut data = nulls(&self.extra_data);
        data.insert(TRUST_DATA_KEY.into(), trusted_keys_text(key).into());
        let mut patch = serde_json::json!({
            "metadata": {"labels": {MANAGED_BY.0: MANAGED_BY.1}},
            "data": data,
        });
        if !self.extra_binary.is_empty() {
            patch["binaryData"] = nulls(&self.extra_binary).into();
        }
        patch
    }
}

/// How `seen` differs from the trust ConfigMap the operator writes for `key`; `None`
/// when it holds exactly the operator's content. See [the module](self) for what is
/// compared.
pub fn drift(seen: &ConfigMap, key: &VerifyingKey) -> Option<Drift> {
    let mut d = Drift::default();
    let expected = trusted_keys_text(key);
    let data = seen.data.clone().unwrap_or_default();
    match data.get(TRUST_DATA_KEY) {
        None => d.what.push(format!("data.{TRUST_DATA_KEY} is missing")),
        Some(text) if *text != expected => d
            .what
            .push(format!("data.{TRUST_DATA_KEY} is not the operator's key")),
        Some(_) => {}
    }
    d.extra_data = data.into_keys().filter(|k| k != TRUST_DATA_KEY).collect();
    if !d.extra_data.is_empty() {
        let keys: Vec<&str> = d.extra_data.iter().map(String::as_str).collect();
        d.what.push(format!(
            "data has keys the operator does not write: {keys:?}"
        ));
    }
    d.extra_binary = seen
        .binary_data
        .as_ref()
        .map(|b| b.keys().cloned().collect())
        .unwrap_or_default();
    if !d.extra_binary.is_empty() {
        let keys: Vec<&str> = d.extra_binary.iter().map(String::as_str).collect();
        d.what.push(format!("binaryData is set: {keys:?}"));
    }
    let label = seen
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(MANAGED_BY.0));
    if label.map(String::as_str) != Some(MANAGED_BY.1) {
        d.what.push(format!(
            "the label {}={} is missing",
            MANAGED_BY.0, MANAGED_BY.1
        ));
    }
    if seen.immutable == Some(true) {
        d.what.push("it is immutable".to_owned());
        d.recreate = Some(seen.metadata.uid.clone().unwrap_or_default());
    }
    d.uid = seen.metadata.uid.clone();
    (!d.what.is_empty()).then_some(d)
}

/// Applies the ConfigMap in the namespaces it is given; see [the module](self).
#[derive(Debug, Clone)]
pub struct TrustPublisher {
    queue: Arc<TrustQueue>,
    key: VerifyingKey,
}

/// The namespaces waiting for a write, each with what its restore must undo: a map, so
/// it holds each namespace at most once however often it is asked for while the API
/// server is slow.
#[derive(Debug, Default)]
struct TrustQueue {
    pending: Mutex<BTreeMap<String, Drift>>,
    wake: Notify,
}

impl TrustQueue {
    fn add(&self, namespace: String, drift: Drift) {
        if let Ok(mut p) = self.pending.lock() {
            p.entry(namespace).or_default().merge(drift);
        }
        self.wake.notify_one();
    }

    fn take(&self) -> BTreeMap<String, Drift> {
        self.pending
            .lock()
            .map(|mut p| std::mem::take(&mut *p))
            .unwrap_or_default()
    }
}

/// Called with the namespace and what was undone after each restore is written (the
/// controller records an Event with it).
pub type OnRestored = Arc<dyn Fn(&str, &Drift) + Send + Sync>;

impl TrustPublisher {
    /// Starts the applying task. `writes` counts writes by result (`ok`, `error`, and
    /// `gone` for a namespace deleted meanwhile).
    pub fn spawn(client: Client, key: VerifyingKey, writes: ByResult) -> Self {
        Self::spawn_with(client, key, writes, Counter::default(), Arc::new(|_, _| {}))
    }

    /// [`spawn`](Self::spawn), and each restore, once written, is counted in
    /// `restores`, logged as a warning and handed to `on_restored`. A restore that
    /// cannot be written because the namespace is being deleted is none of these.
    pub fn spawn_with(
        client: Client,
        key: VerifyingKey,
        writes: ByResult,
        restores: Counter,
        on_restored: OnRestored,
    ) -> Self {
        let queue = Arc::new(TrustQueue::default());
        let worker = queue.clone();
        let publisher = TrustPublisher { queue, key };
        tokio::spawn(async move {
            loop {
                worker.wake.notified().await;
                for (ns, drift) in worker.take() {
                    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
                    let write = write_one(&api, &ns, &key, &drift);
                    let error = match tokio::time::timeout(WRITE_TIMEOUT, write).await {
                        Ok(Ok(())) => None,
                        Ok(Err(e)) if namespace_gone(&e) => {
                            metrics::count(&writes, "gone");
                            log::debug!(namespace = %ns, "namespace deleted or being deleted: no trust ConfigMap written");
                            continue;
                        }
                        Ok(Err(e)) => Some(e.to_string()),
                        Err(_) => Some("timed out".to_owned()),
                    };
                    match error {
                        None if drift.restore => {
                            metrics::count(&writes, "ok");
                            restores.inc();
                            let what = drift.describe();
                            log::warn!(namespace = %ns, %what, "trust ConfigMap {TRUST_CONFIG_MAP} was changed by someone else; restored");
                            on_restored(&ns, &drift);
                        }
                        None => {
                            metrics::count(&writes, "ok");
                            log::debug!(namespace = %ns, "trust ConfigMap applied");
                        }
                        Some(error) => {
                            metrics::count(&writes, "error");
                            log::warn!(namespace = %ns, %error, "cannot apply the trust ConfigMap; retrying");
                            let retry = worker.clone();
                            tokio::spawn(async move {
                                tokio::time::sleep(RETRY_AFTER).await;
                                retry.add(ns, drift);
                            });
                        }
                    }
                }
            }
        });
        publisher
    }

    /// How `seen` differs from what this publisher writes ([`drift`]).
    pub fn drift(&self, seen: &ConfigMap) -> Option<Drift> {
        drift(seen, &self.key)
    }

    /// Queues `namespace` for an apply; never waits.
    pub fn publish(&self, namespace: &str) {
        self.queue.add(namespace.to_owned(), Drift::default());
    }

    /// Queues a restore of the ConfigMap in `namespace`, undoing `drift` (see [the
    /// module](self)); never waits. A deleted ConfigMap is restored with an empty
    /// [`Drift`] (created anew by the apply).
    pub fn restore(&self, namespace: &str, drift: Drift) {
        let drift = Drift {
            restore: true,
            ..drift
        };
        self.queue.add(namespace.to_owned(), drift);
    }
}

/// Whether a write failed because its namespace is gone (404 on the create) or being
/// deleted (403 "being terminated"): a namespace's deletion takes its ConfigMap with it,
/// which is nothing to restore or retry.
fn namespace_gone(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => {
            s.code == 404 || (s.code == 403 && s.message.contains("because it is being terminated"))
        }
        _ => false,
    }
}

/// One namespace's write: the apply, or the restore of a changed ConfigMap (one merge
/// patch; applied if it is gone meanwhile), or an immutable one deleted (on its uid;
/// already gone is fine) and applied anew.
async fn write_one(
    api: &Api<ConfigMap>,
    namespace: &str,
    key: &VerifyingKey,
    drift: &Drift,
) -> Result<(), kube::Error> {
    if let Some(uid) = &drift.recreate {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match api.delete(TRUST_CONFIG_MAP, &params).await {
            Ok(_) => {}
            // Gone already, or another object of that name since.
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
            Err(e) => return Err(e),
        }
    }
    if drift.recreate.is_none() && !drift.what.is_empty() {
        let params = PatchParams {
            field_manager: Some(ownership::FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        let patch = drift.restore_patch(key);
        match api
            .patch(TRUST_CONFIG_MAP, &params, &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return Ok(()),
            // Deleted meanwhile: created anew below.
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let cm = trust_config_map(namespace, key);
    api.patch(
        TRUST_CONFIG_MAP,
        &ownership::apply_params(),
        &Patch::Apply(&cm),
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use logpolicy::wire::{key_id, SigningKey, TrustedKeys};

    #[test]
    fn the_data_is_what_the_layer_reads_as_trusted_keys() {
        let key = SigningKey::from_bytes(&[7; 32]).verifying_key();
        let cm = trust_config_map("shop", &key);
        assert_eq!(cm.metadata.name.as_deref(), Some("logpolicy-trust"));
        assert_eq!(cm.metadata.namespace.as_deref(), Some("shop"));
        assert_eq!(
            cm.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("app.kubernetes.io/managed-by"))
                .map(String::as_str),
            Some("logpolicy-operator")
        );
        let data = cm.data.unwrap_or_default();
        assert_eq!(data.len(), 1);
        let text = &data["trusted-keys"];
        let keys = TrustedKeys::parse(text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(keys.len(), 1);
        assert!(keys.get(&key_id(&key)).is_some());
        // And as a mounted file, the way LOGPOLICY_TRUSTED_KEYS_FILE reads it.
        let path = std::env::temp_dir().join(format!("lp-trust-{}", std::process::id()));
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
        let from_file = TrustedKeys::from_file(&path);
        let _ = std::fs::remove_file(&path);
        assert_eq!(from_file.ok(), Some(keys));
    }

    #[test]
    fn the_queue_holds_each_namespace_once() {
        let q = TrustQueue::default();
        for _ in 0..1000 {
            q.add("a".into(), Drift::default());
            q.add("b".into(), Drift::default());
        }
        assert_eq!(q.take().into_keys().collect::<Vec<_>>(), ["a", "b"]);
        assert!(q.take().is_empty());
    }

    #[test]
    fn a_queued_restore_keeps_what_every_drift_asked_for() {
        let q = TrustQueue::default();
        let extra = |k: &str| Drift {
            what: vec![format!("extra {k}")],
            extra_data: BTreeSet::from([k.to_owned()]),
            ..Drift::default()
        };
        q.add("a".into(), extra("x"));
        q.add("a".into(), Drift::default());
        q.add("a".into(), extra("y"));
        let taken = q.take();
        let d = &taken["a"];
        assert_eq!(d.extra_data, BTreeSet::from(["x".into(), "y".into()]));
        assert_eq!(d.what, ["extra x", "extra y"]);
    }

    fn key() -> VerifyingKey {
        SigningKey::from_bytes(&[7; 32]).verifying_key()
    }

    #[test]
    fn what_the_operator_writes_has_no_drift_whatever_labels_others_add() {
        let mut cm = trust_config_map("shop", &key());
        assert_eq!(drift(&cm, &key()), None);
        cm.metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert("team".into(), "payments".into());
        cm.metadata.annotations = Some(BTreeMap::from([("note".into(), "x".into())]));
        assert_eq!(drift(&cm, &key()), None);
    }

    #[test]
    fn another_key_added_or_in_place_of_the_operators_is_drift() {
        let attacker = SigningKey::from_bytes(&[9; 32]).verifying_key();
        let ours = trusted_keys_text(&key());
        for text in [
            trusted_keys_text(&attacker),
            format!("{ours}{}", trusted_keys_text(&attacker)),
            String::new(),
        ] {
            let mut cm = trust_config_map("shop", &key());
            cm.data = Some(BTreeMap::from([(TRUST_DATA_KEY.to_owned(), text.clone())]));
            let d = drift(&cm, &key()).unwrap_or_default();
            assert_eq!(
                d.what,
                ["data.trusted-keys is not the operator's key"],
                "{text:?}"
            );
            assert_eq!(
                d.restore_patch(&key()),
                serde_json::json!({
                    "metadata": {"labels": {"app.kubernetes.io/managed-by": "logpolicy-operator"}},
                    "data": {"trusted-keys": ours},
                })
            );
        }
    }

    #[test]
    fn extra_keys_a_missing_label_and_immutability_are_drift() {
        let mut cm = trust_config_map("shop", &key());
        cm.metadata.uid = Some("u-1".into());
        cm.metadata.labels = None;
        cm.data = Some(BTreeMap::from([("other".into(), "k".into())]));
        cm.binary_data = Some(BTreeMap::from([(
            "bin".into(),
            k8s_openapi::ByteString(vec![1]),
        )]));
        cm.immutable = Some(true);
        let d = drift(&cm, &key()).unwrap_or_default();
        assert_eq!(
            d.what,
            [
                "data.trusted-keys is missing",
                "data has keys the operator does not write: [\"other\"]",
                "binaryData is set: [\"bin\"]",
                "the label app.kubernetes.io/managed-by=logpolicy-operator is missing",
                "it is immutable",
            ]
        );
        assert_eq!(d.recreate.as_deref(), Some("u-1"));
        assert_eq!(
            d.restore_patch(&key()),
            serde_json::json!({
                "metadata": {"labels": {"app.kubernetes.io/managed-by": "logpolicy-operator"}},
                "data": {"other": null, "trusted-keys": trusted_keys_text(&key())},
                "binaryData": {"bin": null},
            })
        );
    }

    #[test]
    fn the_applied_object_serializes_with_kind_and_api_version() {
        let key = SigningKey::from_bytes(&[1; 32]).verifying_key();
        let v = serde_json::to_value(trust_config_map("a", &key)).unwrap_or_default();
        assert_eq!(v["apiVersion"], "v1");
        assert_eq!(v["kind"], "ConfigMap");
    }
}
