//! The operator's metrics, registered under `logpolicy_operator_`.

use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};

/// A counter by `result` (a short, bounded label such as `ok`, `sent`, `dropped`).
pub type ByResult = Family<Vec<(&'static str, &'static str)>, Counter>;

/// A gauge by LogPolicy (`policy_namespace`, `policy`: not `namespace`, which the
/// scrape sets to the operator's): one series per policy the operator
/// tracks, removed with the policy.
pub type ByPolicy = Family<Vec<(&'static str, String)>, Gauge>;

/// The labels of the policy `name` in `namespace`, in a [`ByPolicy`] family.
pub fn policy_labels(namespace: &str, name: &str) -> Vec<(&'static str, String)> {
    vec![
        ("policy_namespace", namespace.to_owned()),
        ("policy", name.to_owned()),
    ]
}

/// Counts one error of `kind` in `reconcile_errors`.
pub fn error(errors: &ByResult, kind: &'static str) {
    errors.get_or_create(&vec![("kind", kind)]).inc();
}

/// Counts one `result` in `counter`.
pub fn count(counter: &ByResult, result: &'static str) {
    counter.get_or_create(&vec![("result", result)]).inc();
}

/// The metrics the operator keeps.
#[derive(Debug, Clone)]
pub struct Metrics {
    /// Push reports by result (`PushOutcome::metric_label`).
    pub pushes: ByResult,
    /// Pods the index tracks.
    pub pods_tracked: Gauge,
    /// Passes of the loop that changed the index.
    pub reconciles: Counter,
    /// Status writes by result (`ok` or an error label).
    pub status_writes: ByResult,
    /// Time from the start of a push to its report (all attempts), in seconds.
    pub push_latency: Histogram,
    /// LogPolicies the index tracks.
    pub policies: Gauge,
    /// 1 while this replica leads (always 1 without leader election).
    pub leader: Gauge,
    /// Events by result (`sent`, `failed`, `dropped`).
    pub events: ByResult,
    /// Trust ConfigMap applies by result (`ok`, `error`).
    pub trust_writes: ByResult,
    /// Trust ConfigMaps found changed or deleted by someone else, and restored.
    pub trust_restores: Counter,
    /// Errors while reconciling, by `kind`: `push` (a pod did not apply its document:
    /// refused, unreachable, timed out) and `status_write` (a status not written, to be
    /// retried). Controller-runtime's `reconcile_errors_total`, for alerts.
    pub reconcile_errors: Family<Vec<(&'static str, &'static str)>, Counter>,
    /// Time to handle one input (a watch event, a push report, a timer) and settle what
    /// it changed, in seconds: the controller's loop, as controller-runtime's
    /// `reconcile_time_seconds`.
    pub reconcile_duration: Histogram,
    /// Opted-in pods whose current document is not acknowledged yet (a push queued, in
    /// flight or backed off): the work backlog, as controller-runtime's `workqueue_depth`.
    pub push_backlog: Gauge,
    /// Per valid, unexpired LogPolicy in force: its selected pods that have not
    /// acknowledged its current generation (`status.matchedPods - appliedPods`; 0 when
    /// it is refused or expired), as of its last status. What an alert on a policy that
    /// does not arrive names; kept by the leader only (cleared when it stops leading).
    pub policy_pods_unacknowledged: ByPolicy,
}

impl Default for Metrics {
    fn default() -> Self {
        let reconcile_errors = Family::default();
        // Every kind from the start, at 0, so that a rate over them is defined at once.
        for kind in ["push", "status_write"] {
            let _ = reconcile_errors.get_or_create(&vec![("kind", kind)]);
        }
        Metrics {
            pushes: Family::default(),
            pods_tracked: Gauge::default(),
            reconciles: Counter::default(),
            status_writes: Family::default(),
            // 1 ms .. ~16 s.
            push_latency: Histogram::new(exponential_buckets(0.001, 2.0, 15)),
            policies: Gauge::default(),
            leader: Gauge::default(),
            events: Family::default(),
            trust_writes: Family::default(),
            trust_restores: Counter::default(),
            reconcile_errors,
            // 50 µs .. ~1.6 s.
            reconcile_duration: Histogram::new(exponential_buckets(0.000_05, 2.0, 16)),
            push_backlog: Gauge::default(),
            policy_pods_unacknowledged: Family::default(),
        }
    }
}

impl Metrics {
    /// Registers every metric under `logpolicy_operator_`.
    pub fn register(&self, registry: &mut Registry) {
        let sub = registry.sub_registry_with_prefix("logpolicy_operator");
        sub.register("pushes", "Pushes to pods, by result", self.pushes.clone());
        sub.register(
            "pods_tracked",
            "Opted-in pods the index tracks",
            self.pods_tracked.clone(),
        );
        sub.register(
            "reconciles",
            "Changes applied to the index",
            self.reconciles.clone(),
        );
        sub.register(
            "status_writes",
            "LogPolicy status writes, by result",
            self.status_writes.clone(),
        );
        sub.register_with_unit(
            "push_duration",
            "Time from the start of a push to its outcome, retries included",
            Unit::Seconds,
            self.push_latency.clone(),
        );
        sub.register(
            "policies",
            "LogPolicies the index tracks",
            self.policies.clone(),
        );
        sub.register(
            "leader",
            "1 while this replica leads (pushes and writes status)",
            self.leader.clone(),
        );
        sub.register(
            "events",
            "Kubernetes Events on LogPolicies, by result",
            self.events.clone(),
        );
        sub.register(
            "trust_configmap_writes",
            "Applies of the logpolicy-trust ConfigMap, by result",
            self.trust_writes.clone(),
        );
        sub.register(
            "trust_configmap_restores",
            "logpolicy-trust ConfigMaps found changed or deleted by someone else, and restored",
            self.trust_restores.clone(),
        );
        sub.register(
            "reconcile_errors",
            "Errors while reconciling, by kind (push: a pod did not apply its document; status_write: a status not written, retried)",
            self.reconcile_errors.clone(),
        );
        sub.register_with_unit(
            "reconcile_duration",
            "Time to handle one input and settle what it changed",
            Unit::Seconds,
            self.reconcile_duration.clone(),
        );
        sub.register(
            "push_backlog",
            "Opted-in pods whose current document is not acknowledged yet (queued, in flight or backed off)",
            self.push_backlog.clone(),
        );
        sub.register(
            "policy_pods_unacknowledged",
            "Selected pods that have not acknowledged a valid, unexpired LogPolicy's current generation, by policy",
            self.policy_pods_unacknowledged.clone(),
        );
    }

    /// A registry holding every metric, for `/metrics`.
    pub fn registry(&self) -> Arc<Registry> {
        let mut registry = Registry::default();
        self.register(&mut registry);
        Arc::new(registry)
    }
}
