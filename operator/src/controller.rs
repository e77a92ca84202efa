//! The controller loop: watches, pushes, read-backs and status writes around one
//! [`Index`], owned by one task (nothing locks it).
//!
//! The pure parts ([`InitBuffer`], [`Debounce`], [`apply_policy_event`],
//! [`apply_pod_event`]) are public so that tests drive them without an API server.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client, ResourceExt};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::sync::{mpsc, watch};

use crate::crd::{LogPolicy, LogPolicyStatus};
use crate::index::{Index, PodKey, PolicyInput, PolicyKey};
use crate::pods::{PodInfo, OPT_IN_LABEL};
use crate::push::{PushReport, Pusher};

/// The field manager of every status write.
pub const FIELD_MANAGER: &str = "logpolicy-operator";

/// A status write that takes longer is abandoned (and retried): the loop waits for it.
const STATUS_WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// Tunables of the loop.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// How often pods are read back (and failed pushes retried).
    pub resync_interval: Duration,
    /// At most one status write per policy per this interval.
    pub status_debounce: Duration,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            resync_interval: Duration::from_secs(60),
            status_debounce: Duration::from_millis(500),
        }
    }
}

/// The metrics the controller keeps.
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    /// Push reports by result (`PushOutcome::metric_label`).
    pub pushes: Family<Vec<(&'static str, &'static str)>, Counter>,
    /// Pods the index tracks.
    pub pods_tracked: Gauge,
    /// Passes of the loop that changed the index.
    pub reconciles: Counter,
    /// Status writes by result (`ok` or an error label).
    pub status_writes: Family<Vec<(&'static str, &'static str)>, Counter>,
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
    }
}

/// Buffers the objects of a relist (`Init`, `InitApply`.., `InitDone`) until it is
/// complete, so the index is reset once with the whole list.
#[derive(Debug)]
pub struct InitBuffer<T> {
    items: Option<Vec<T>>,
}

impl<T> Default for InitBuffer<T> {
    fn default() -> Self {
        InitBuffer { items: None }
    }
}

impl<T> InitBuffer<T> {
    /// `Init`: a relist starts (an unfinished one is dropped).
    pub fn start(&mut self) {
        self.items = Some(Vec::new());
    }

    /// `InitApply`: one object of the relist.
    pub fn push(&mut self, item: T) {
        self.items.get_or_insert_with(Vec::new).push(item);
    }

    /// `InitDone`: the whole list.
    pub fn finish(&mut self) -> Vec<T> {
        self.items.take().unwrap_or_default()
    }

    /// Whether a relist is under way.
    pub fn in_progress(&self) -> bool {
        self.items.is_some()
    }
}

/// A LogPolicy event as the controller sees it: the watch yields untyped objects so
/// that one malformed object is skipped rather than failing the whole list.
pub type PolicyEvent = Event<DynamicObject>;

/// What a LogPolicy event did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// The index changed.
    Changed,
    /// A relist is buffering.
    Buffered,
    /// The relist completed: the index was reset.
    InitDone,
    /// The object could not be used; it was skipped (the reason is logged).
    Skipped(String),
}

/// A `DynamicObject` as a `LogPolicy`, or why not.
pub fn parse_policy(obj: DynamicObject) -> Result<LogPolicy, String> {
    let name = format!(
        "{}/{}",
        obj.metadata.namespace.as_deref().unwrap_or(""),
        obj.metadata.name.as_deref().unwrap_or("")
    );
    obj.try_parse::<LogPolicy>()
        .map_err(|e| format!("LogPolicy {name}: {e}"))
}

/// Applies one LogPolicy watch event to the index. `statuses` keeps each policy's
/// status as last read (for the conditions' transition times).
pub fn apply_policy_event(
    index: &mut Index,
    buffer: &mut InitBuffer<PolicyInput>,
    statuses: &mut HashMap<PolicyKey, Option<LogPolicyStatus>>,
    event: PolicyEvent,
    now: SystemTime,
) -> Applied {
    match event {
        Event::Init => {
            buffer.start();
            Applied::Buffered
        }
        Event::InitApply(obj) => match policy_input(obj, statuses) {
            Ok(input) => {
                buffer.push(input);
                Applied::Buffered
            }
            Err(reason) => Applied::Skipped(reason),
        },
        Event::InitDone => {
            let inputs = buffer.finish();
            statuses.retain(|k, _| {
                inputs
                    .iter()
                    .any(|i| i.namespace == k.namespace && i.name == k.name)
            });
            index.reset_policies(inputs, now);
            Applied::InitDone
        }
        Event::Apply(obj) => match policy_input(obj, statuses) {
            Ok(input) => {
                index.apply_policy(input, now);
                Applied::Changed
            }
            Err(reason) => Applied::Skipped(reason),
        },
        Event::Delete(obj) => {
            let (Some(ns), Some(name)) = (obj.metadata.namespace, obj.metadata.name) else {
                return Applied::Skipped("deleted LogPolicy without namespace or name".into());
            };
            let key = PolicyKey::new(&ns, &name);
            statuses.remove(&key);
            index.delete_policy(&key);
            Applied::Changed
        }
    }
}

fn policy_input(
    obj: DynamicObject,
    statuses: &mut HashMap<PolicyKey, Option<LogPolicyStatus>>,
) -> Result<PolicyInput, String> {
    let lp = parse_policy(obj)?;
    let input = PolicyInput::from_resource(&lp)
        .ok_or_else(|| format!("LogPolicy {} has no namespace", lp.name_any()))?;
    statuses.insert(PolicyKey::new(&input.namespace, &input.name), lp.status);
    Ok(input)
}

/// A pod watch event, each pod already stripped to a [`PodInfo`] (`None`: unusable).
pub type PodEvent = Event<Option<PodInfo>>;

/// Strips a pod watch event at once (no `Pod` is kept).
pub fn strip_pod_event(event: Event<Pod>) -> PodEvent {
    match event {
        Event::Init => Event::Init,
        Event::InitDone => Event::InitDone,
        Event::InitApply(p) => Event::InitApply(PodInfo::from_pod(&p)),
        Event::Apply(p) => Event::Apply(PodInfo::from_pod(&p)),
        Event::Delete(p) => Event::Delete(match (p.metadata.namespace, p.metadata.name) {
            (Some(ns), Some(name)) => Some(PodInfo::new(&ns, &name, "", None, 0)),
            _ => None,
        }),
    }
}

/// Applies one (stripped) pod watch event to the index.
pub fn apply_pod_event(
    index: &mut Index,
    buffer: &mut InitBuffer<PodInfo>,
    event: PodEvent,
    now: SystemTime,
) -> Applied {
    match event {
        Event::Init => {
            buffer.start();
            Applied::Buffered
        }
        Event::InitApply(Some(info)) => {
            buffer.push(info);
            Applied::Buffered
        }
        Event::InitApply(None) | Event::Apply(None) | Event::Delete(None) => {
            Applied::Skipped("pod without namespace, name or uid".into())
        }
        Event::InitDone => {
            index.reset_pods(buffer.finish(), now);
            Applied::InitDone
        }
        Event::Apply(Some(info)) => {
            index.apply_pod(info, now);
            Applied::Changed
        }
        Event::Delete(Some(info)) => {
            index.delete_pod(&PodKey::new(&info.namespace, &info.name));
            Applied::Changed
        }
    }
}

/// Writes each policy's status at most once per interval: a change within the interval
/// after a write waits for its end.
#[derive(Debug)]
pub struct Debounce<K> {
    interval: Duration,
    last: HashMap<K, Instant>,
    pending: BTreeMap<K, Instant>,
}

impl<K: Ord + std::hash::Hash + Clone> Debounce<K> {
    /// At most one write per key per `interval`.
    pub fn new(interval: Duration) -> Self {
        Debounce {
            interval,
            last: HashMap::new(),
            pending: BTreeMap::new(),
        }
    }

    /// `key` changed at `now`.
    pub fn mark(&mut self, key: K, now: Instant) {
        let due = match self.last.get(&key) {
            Some(t) => (*t + self.interval).max(now),
            None => now,
        };
        self.pending.entry(key).or_insert(due);
    }

    /// The keys due at `now`, recorded as written at `now`.
    pub fn take_due(&mut self, now: Instant) -> Vec<K> {
        let due: Vec<K> = self
            .pending
            .iter()
            .filter(|(_, t)| **t <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for k in &due {
            self.pending.remove(k);
            self.last.insert(k.clone(), now);
        }
        let horizon = self.interval;
        self.last
            .retain(|_, t| now.saturating_duration_since(*t) < horizon);
        due
    }

    /// When the next key is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.pending.values().min().copied()
    }
}

/// What the health endpoints read.
#[derive(Debug, Default)]
pub struct Health {
    policies_synced: AtomicBool,
    pods_synced: AtomicBool,
}

impl Health {
    /// Both watchers have listed once.
    pub fn ready(&self) -> bool {
        self.policies_synced.load(Ordering::Relaxed) && self.pods_synced.load(Ordering::Relaxed)
    }
}

/// Runs the loop until `shutdown` turns true.
pub async fn run(
    client: Client,
    pusher: Pusher,
    config: ControllerConfig,
    metrics: Metrics,
    health: Arc<Health>,
    mut shutdown: watch::Receiver<bool>,
) {
    let ar = ApiResource::erase::<LogPolicy>(&());
    let policies_api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let pods_api: Api<Pod> = Api::all(client.clone());

    let policy_events =
        watcher::watcher(policies_api, watcher::Config::default()).default_backoff();
    let pod_events = watcher::watcher(
        pods_api,
        watcher::Config::default().labels(&format!("{OPT_IN_LABEL}=true")),
    )
    .default_backoff()
    .map(|r| r.map(strip_pod_event));
    let mut policy_events = std::pin::pin!(policy_events);
    let mut pod_events = std::pin::pin!(pod_events);

    let (reports_tx, mut reports_rx) = mpsc::channel::<PushReport>(1024);
    let (reads_tx, mut reads_rx) = mpsc::channel::<(PodKey, crate::PushTicket, Option<u64>)>(1024);

    let mut index = Index::new();
    let mut policy_buffer = InitBuffer::default();
    let mut pod_buffer = InitBuffer::default();
    let mut statuses: HashMap<PolicyKey, Option<LogPolicyStatus>> = HashMap::new();
    let mut debounce = Debounce::new(config.status_debounce);
    let mut resync = tokio::time::interval(config.resync_interval);
    resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    resync.tick().await;

    loop {
        let expiry = sleep_until_system(index.next_expiry());
        let status_due = sleep_until_instant(debounce.next_due());
        let mut changed = false;
        tokio::select! {
            _ = shutdown.changed() => break,
            ev = policy_events.next() => match ev {
                Some(Ok(ev)) => {
                    match apply_policy_event(&mut index, &mut policy_buffer, &mut statuses, ev, SystemTime::now()) {
                        Applied::Changed => changed = true,
                        Applied::InitDone => {
                            changed = true;
                            health.policies_synced.store(true, Ordering::Relaxed);
                            tracing::info!(target: "logpolicy_operator", policies = index.policy_keys().count(), "LogPolicies listed");
                        }
                        Applied::Buffered => {}
                        Applied::Skipped(reason) => tracing::warn!(target: "logpolicy_operator", %reason, "skipped a LogPolicy"),
                    }
                }
                Some(Err(e)) => tracing::warn!(target: "logpolicy_operator", error = %e, "LogPolicy watch failed; retrying"),
                None => {
                    tracing::error!(target: "logpolicy_operator", "LogPolicy watch ended");
                    break;
                }
            },
            ev = pod_events.next() => match ev {
                Some(Ok(ev)) => {
                    match apply_pod_event(&mut index, &mut pod_buffer, ev, SystemTime::now()) {
                        Applied::Changed => changed = true,
                        Applied::InitDone => {
                            changed = true;
                            health.pods_synced.store(true, Ordering::Relaxed);
                            tracing::info!(target: "logpolicy_operator", pods = index.pod_count(), "pods listed");
                        }
                        Applied::Buffered => {}
                        Applied::Skipped(reason) => tracing::warn!(target: "logpolicy_operator", %reason, "skipped a pod"),
                    }
                }
                Some(Err(e)) => tracing::warn!(target: "logpolicy_operator", error = %e, "pod watch failed; retrying"),
                None => {
                    tracing::error!(target: "logpolicy_operator", "pod watch ended");
                    break;
                }
            },
            _ = expiry => {
                index.tick(SystemTime::now());
                changed = true;
            }
            Some(report) = reports_rx.recv() => {
                metrics.pushes.get_or_create(&vec![("result", report.outcome.metric_label())]).inc();
                if !matches!(report.outcome, crate::PushOutcome::Applied) {
                    tracing::info!(target: "logpolicy_operator", pod = %report.pod, outcome = %report.outcome, attempts = report.attempts, "push did not apply");
                }
                changed |= index.record_push(&report.pod, report.ticket, &report.outcome);
            }
            Some((pod, ticket, held)) = reads_rx.recv() => {
                if index.record_read_back(&pod, ticket, held) {
                    tracing::info!(target: "logpolicy_operator", %pod, ?held, "drift found by read-back");
                    changed = true;
                }
            }
            _ = resync.tick() => {
                for target in index.resync() {
                    let pusher = pusher.clone();
                    let tx = reads_tx.clone();
                    tokio::spawn(async move {
                        if let Ok(read) = pusher.read_back(target.addr).await {
                            let _ = tx.send((target.pod, target.ticket, read.version)).await;
                        }
                    });
                }
                changed = true;
            }
            _ = status_due => {}
        }
        if changed {
            metrics.reconciles.inc();
            metrics
                .pods_tracked
                .set(i64::try_from(index.pod_count()).unwrap_or(i64::MAX));
        }
        // Nothing is pushed or written before both watchers have listed once: pods
        // listed before the policies would otherwise be sent a baseline document (and
        // drop the policies they hold) when the operator restarts. The index keeps what
        // is queued until then.
        if changed && health.ready() {
            let pushes = index.take_pushes(SystemTime::now());
            if !pushes.is_empty() {
                pusher.spawn_all(pushes, &reports_tx);
            }
            let now = Instant::now();
            for key in index.take_changed_policies() {
                debounce.mark(key, now);
            }
        }
        for key in debounce.take_due(Instant::now()) {
            if !write_status(&client, &index, &mut statuses, &metrics, &key).await {
                // Retried after the debounce interval.
                debounce.mark(key, Instant::now());
            }
        }
    }
    tracing::info!(target: "logpolicy_operator", "controller stopped");
}

async fn sleep_until_system(at: Option<SystemTime>) {
    match at {
        Some(t) => {
            let wait = t.duration_since(SystemTime::now()).unwrap_or_default();
            tokio::time::sleep(wait).await;
        }
        None => futures::future::pending().await,
    }
}

async fn sleep_until_instant(at: Option<Instant>) {
    match at {
        Some(t) => tokio::time::sleep_until(tokio::time::Instant::from_std(t)).await,
        None => futures::future::pending().await,
    }
}

async fn write_status(
    client: &Client,
    index: &Index,
    statuses: &mut HashMap<PolicyKey, Option<LogPolicyStatus>>,
    metrics: &Metrics,
    key: &PolicyKey,
) -> bool {
    let Some(view) = index.policy_view(key) else {
        return true; // deleted
    };
    let previous = statuses.get(key).cloned().flatten();
    let status = view.status(previous.as_ref(), SystemTime::now());
    if previous.as_ref() == Some(&status) {
        return true;
    }
    let api: Api<LogPolicy> = Api::namespaced(client.clone(), &key.namespace);
    let patch = serde_json::json!({
        "apiVersion": "logpolicy.dev/v1alpha1",
        "kind": "LogPolicy",
        "status": status,
    });
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let patch = Patch::Apply(&patch);
    let write = api.patch_status(&key.name, &params, &patch);
    match tokio::time::timeout(STATUS_WRITE_TIMEOUT, write)
        .await
        .unwrap_or_else(|_| Err(kube::Error::Service("status write timed out".into())))
    {
        Ok(_) => {
            metrics
                .status_writes
                .get_or_create(&vec![("result", "ok")])
                .inc();
            statuses.insert(key.clone(), Some(status));
            true
        }
        Err(e) => {
            metrics
                .status_writes
                .get_or_create(&vec![("result", "error")])
                .inc();
            tracing::warn!(target: "logpolicy_operator", policy = %key, error = %e, "status write failed; retrying");
            false
        }
    }
}
