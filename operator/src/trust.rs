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

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Patch;
use kube::{Api, Client};
use logpolicy::wire::{encode_public_key, key_id, VerifyingKey};
use tokio::sync::Notify;

use crate::log;
use crate::metrics::{self, ByResult};
use crate::ownership::{self, MANAGED_BY};

/// The ConfigMap's name, in every namespace with opted-in pods.
pub const TRUST_CONFIG_MAP: &str = "logpolicy-trust";
/// Its data key: a file the layer reads with `LOGPOLICY_TRUSTED_KEYS_FILE`.
pub const TRUST_DATA_KEY: &str = "trusted-keys";

const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// The file content: a comment naming the key id, then the key (base64 of 32 bytes).
pub fn trusted_keys_text(key: &VerifyingKey) -> String {
    format!(
        "# logpolicy-operator public key, id {}\n{}\n",
        key_id(key),
        encode_public_key(key)
    )
}

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

/// Applies the ConfigMap in the namespaces it is given; see [the module](self).
#[derive(Debug, Clone)]
pub struct TrustPublisher {
    queue: Arc<TrustQueue>,
}

/// The namespaces waiting for an apply: a set, so it holds each namespace at most once
/// however often it is asked for while the API server is slow.
#[derive(Debug, Default)]
struct TrustQueue {
    pending: Mutex<BTreeSet<String>>,
    wake: Notify,
}

impl TrustQueue {
    fn add(&self, namespace: String) {
        if let Ok(mut p) = self.pending.lock() {
            p.insert(namespace);
        }
        self.wake.notify_one();
    }

    fn take(&self) -> BTreeSet<String> {
        self.pending
            .lock()
            .map(|mut p| std::mem::take(&mut *p))
            .unwrap_or_default()
    }
}

impl TrustPublisher {
    /// Starts the applying task. `writes` counts applies by result (`ok`, `error`).
    pub fn spawn(client: Client, key: VerifyingKey, writes: ByResult) -> Self {
        let queue = Arc::new(TrustQueue::default());
        let worker = queue.clone();
        tokio::spawn(async move {
            loop {
                worker.wake.notified().await;
                for ns in worker.take() {
                    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
                    let cm = trust_config_map(&ns, &key);
                    let params = ownership::apply_params();
                    let patch = Patch::Apply(&cm);
                    let write = api.patch(TRUST_CONFIG_MAP, &params, &patch);
                    let error = match tokio::time::timeout(WRITE_TIMEOUT, write).await {
                        Ok(Ok(_)) => None,
                        Ok(Err(e)) => Some(e.to_string()),
                        Err(_) => Some("timed out".to_owned()),
                    };
                    match error {
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
                                retry.add(ns);
                            });
                        }
                    }
                }
            }
        });
        TrustPublisher { queue }
    }

    /// Queues `namespace` for an apply; never waits.
    pub fn publish(&self, namespace: &str) {
        self.queue.add(namespace.to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use logpolicy::wire::{SigningKey, TrustedKeys};

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
            q.add("a".into());
            q.add("b".into());
        }
        assert_eq!(q.take().into_iter().collect::<Vec<_>>(), ["a", "b"]);
        assert!(q.take().is_empty());
    }

    #[test]
    fn the_applied_object_serializes_with_kind_and_api_version() {
        let key = SigningKey::from_bytes(&[1; 32]).verifying_key();
        let v = serde_json::to_value(trust_config_map("a", &key)).unwrap_or_default();
        assert_eq!(v["apiVersion"], "v1");
        assert_eq!(v["kind"], "ConfigMap");
    }
}
