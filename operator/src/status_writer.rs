//! A LogPolicy's status, written by server-side apply of its `status` subresource under
//! the operator's field manager ([`ownership::FIELD_MANAGER`], forced): bounded in
//! number of writes in flight and in time, counted by result, never fatal.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::Patch;
use kube::{Api, Client};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinSet;

use crate::index::PolicyKey;
use crate::log;
use crate::metrics::{self, ByResult};
use crate::ownership;
use logpolicy_api::crd::{LogPolicy, LogPolicyStatus};

/// A status write that takes longer is abandoned (and retried).
const STATUS_WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// A status write that takes this long (a slot, then the API server) is logged.
const SLOW_WRITE: Duration = Duration::from_secs(1);

/// The result of a status write.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusWrite {
    /// The policy.
    pub key: PolicyKey,
    /// The status written (or not).
    pub status: LogPolicyStatus,
    /// Whether it is done: written, or the policy is gone. `false`: retry it.
    pub done: bool,
}

/// Writes statuses; cheap to clone (the limit on writes in flight is shared).
#[derive(Clone)]
pub struct StatusWriter {
    client: Client,
    permits: Arc<Semaphore>,
    writes: ByResult,
}

impl std::fmt::Debug for StatusWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusWriter")
            .field("permits", &self.permits)
            .finish_non_exhaustive()
    }
}

impl StatusWriter {
    /// At most `concurrency` writes in flight; `writes` counts them by result (`ok`,
    /// `error`).
    pub fn new(client: Client, concurrency: usize, writes: ByResult) -> Self {
        StatusWriter {
            client,
            permits: Arc::new(Semaphore::new(concurrency.max(1))),
            writes,
        }
    }

    /// Writes `status` as the status of `key` (once a write slot is free, within 10 s);
    /// returns whether it is done (written, or the policy was deleted meanwhile).
    pub async fn write(&self, key: &PolicyKey, status: &LogPolicyStatus) -> bool {
        let start = Instant::now();
        let Ok(_permit) = self.permits.acquire().await else {
            return false;
        };
        let slot = start.elapsed();
        let done = self.write_now(key, status).await;
        let took = start.elapsed();
        if took >= SLOW_WRITE {
            // A status that lags its pods: say by how much, and what it was.
            log::info!(
                policy = %key,
                seconds = took.as_secs_f64(),
                waited_for_a_slot = slot.as_secs_f64(),
                applied_pods = status.applied_pods,
                done,
                "slow status write"
            );
        }
        done
    }

    async fn write_now(&self, key: &PolicyKey, status: &LogPolicyStatus) -> bool {
        let api: Api<LogPolicy> = Api::namespaced(self.client.clone(), &key.namespace);
        let patch = serde_json::json!({
            "apiVersion": logpolicy_api::crd::API_VERSION,
            "kind": "LogPolicy",
            "status": status,
        });
        let params = ownership::apply_params();
        let patch = Patch::Apply(&patch);
        let write = api.patch_status(&key.name, &params, &patch);
        match tokio::time::timeout(STATUS_WRITE_TIMEOUT, write)
            .await
            .unwrap_or_else(|_| Err(kube::Error::Service("status write timed out".into())))
        {
            Ok(_) => {
                metrics::count(&self.writes, "ok");
                true
            }
            // Deleted meanwhile: nothing to retry.
            Err(kube::Error::Api(s)) if s.code == 404 => true,
            Err(e) => {
                metrics::count(&self.writes, "error");
                log::warn!(policy = %key, error = %e, "status write failed; retrying");
                false
            }
        }
    }

    /// [`write`](Self::write) in a task of `tasks`, its result sent to `results`.
    pub fn spawn(
        &self,
        tasks: &mut JoinSet<()>,
        results: &mpsc::Sender<StatusWrite>,
        key: PolicyKey,
        status: LogPolicyStatus,
    ) {
        let writer = self.clone();
        let results = results.clone();
        tasks.spawn(async move {
            let done = writer.write(&key, &status).await;
            let _ = results.send(StatusWrite { key, status, done }).await;
        });
    }
}
