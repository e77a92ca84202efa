//! The controller loop: watches, pushes, read-backs and status writes around one
//! [`Index`], owned by one task (nothing locks it).
//!
//! The pure parts ([`InitBuffer`], [`Debounce`], [`apply_policy_event`],
//! [`apply_pod_event`]) are public so that tests drive them without an API server.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use futures::stream::BoxStream;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client, ResourceExt};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use tokio::sync::{mpsc, watch, Semaphore};
use tokio::task::JoinSet;

use crate::crd::{LogPolicy, LogPolicyStatus};
use crate::events::{EventSink, PolicyEvents};
use crate::index::{Index, PodKey, PodView, PolicyInput, PolicyKey};
use crate::pods::{PodInfo, OPT_IN_LABEL};
use crate::push::{PushReport, Pusher};
use crate::trust::TrustPublisher;

/// The field manager of every status write.
pub const FIELD_MANAGER: &str = "logpolicy-operator";

/// A status write that takes longer is abandoned (and retried).
const STATUS_WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// Tunables of the loop.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// How often pods are read back (and failed pushes retried).
    pub resync_interval: Duration,
    /// At most one status write per policy per this interval.
    pub status_debounce: Duration,
    /// Status writes in flight at most.
    pub status_concurrency: usize,
    /// At most one `PushFailed` Event per policy per this interval.
    pub failure_event_interval: Duration,
    /// The per-pod view is published at most once per this interval.
    pub view_interval: Duration,
    /// The namespaces to watch (one watcher per namespace and kind); empty: every
    /// namespace, with cluster-wide watches.
    pub namespaces: Vec<String>,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            resync_interval: Duration::from_secs(60),
            status_debounce: Duration::from_millis(500),
            status_concurrency: 8,
            failure_event_interval: Duration::from_secs(60),
            view_interval: Duration::from_millis(200),
            namespaces: Vec::new(),
        }
    }
}

/// The scopes of the watches: `[None]` (all namespaces) or one `Some` per namespace.
pub fn watch_scopes(namespaces: &[String]) -> Vec<Option<String>> {
    let set: BTreeSet<&str> = namespaces
        .iter()
        .map(|n| n.trim())
        .filter(|n| !n.is_empty())
        .collect();
    if set.is_empty() {
        vec![None]
    } else {
        set.into_iter().map(|n| Some(n.to_owned())).collect()
    }
}

/// The metrics the controller keeps.
#[derive(Debug, Clone)]
pub struct Metrics {
    /// Push reports by result (`PushOutcome::metric_label`).
    pub pushes: Family<Vec<(&'static str, &'static str)>, Counter>,
    /// Pods the index tracks.
    pub pods_tracked: Gauge,
    /// Passes of the loop that changed the index.
    pub reconciles: Counter,
    /// Status writes by result (`ok` or an error label).
    pub status_writes: Family<Vec<(&'static str, &'static str)>, Counter>,
    /// Time from the start of a push to its report (all attempts), in seconds.
    pub push_latency: Histogram,
    /// LogPolicies the index tracks.
    pub policies: Gauge,
    /// 1 while this replica leads (always 1 without leader election).
    pub leader: Gauge,
    /// Events by result (`sent`, `failed`, `dropped`).
    pub events: Family<Vec<(&'static str, &'static str)>, Counter>,
    /// Trust ConfigMap applies by result (`ok`, `error`).
    pub trust_writes: Family<Vec<(&'static str, &'static str)>, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
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
            prometheus_client::registry::Unit::Seconds,
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

/// What the controller keeps of a LogPolicy as last read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observed {
    /// Its status (for the conditions' transition times, and to skip equal writes).
    pub status: Option<LogPolicyStatus>,
    /// Its uid (Events name it).
    pub uid: Option<String>,
}

/// Applies one LogPolicy watch event of the watch of `scope` (a namespace, or `None`
/// for all) to the index. `observed` keeps each policy's status and uid as last read.
pub fn apply_policy_event(
    index: &mut Index,
    buffer: &mut InitBuffer<PolicyInput>,
    observed: &mut HashMap<PolicyKey, Observed>,
    scope: Option<&str>,
    event: PolicyEvent,
    now: SystemTime,
) -> Applied {
    match event {
        Event::Init => {
            buffer.start();
            Applied::Buffered
        }
        Event::InitApply(obj) => match policy_input(obj, observed) {
            Ok(input) => {
                buffer.push(input);
                Applied::Buffered
            }
            Err(reason) => Applied::Skipped(reason),
        },
        Event::InitDone => {
            let inputs = buffer.finish();
            observed.retain(|k, _| {
                scope.is_some_and(|ns| k.namespace != ns)
                    || inputs
                        .iter()
                        .any(|i| i.namespace == k.namespace && i.name == k.name)
            });
            index.reset_policies_in(scope, inputs, now);
            Applied::InitDone
        }
        Event::Apply(obj) => match policy_input(obj, observed) {
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
            observed.remove(&key);
            index.delete_policy(&key);
            Applied::Changed
        }
    }
}

fn policy_input(
    obj: DynamicObject,
    observed: &mut HashMap<PolicyKey, Observed>,
) -> Result<PolicyInput, String> {
    let lp = parse_policy(obj)?;
    let input = PolicyInput::from_resource(&lp)
        .ok_or_else(|| format!("LogPolicy {} has no namespace", lp.name_any()))?;
    observed.insert(
        PolicyKey::new(&input.namespace, &input.name),
        Observed {
            uid: lp.metadata.uid.clone(),
            status: lp.status,
        },
    );
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

/// Applies one (stripped) pod watch event of the watch of `scope` to the index.
pub fn apply_pod_event(
    index: &mut Index,
    buffer: &mut InitBuffer<PodInfo>,
    scope: Option<&str>,
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
            index.reset_pods_in(scope, buffer.finish(), now);
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
    /// Watches (of both kinds, every scope) that have not listed yet.
    unsynced: AtomicUsize,
    /// The controller loop runs (this replica leads).
    running: AtomicBool,
    /// Leader election is on: a replica that does not lead is ready (and idle).
    standby_ready: AtomicBool,
}

/// What `/readyz` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    /// Leading, and every watch has listed once.
    Leading,
    /// Not leading (leader election): ready, idle.
    Standby,
    /// Starting, or leading but a watch has not listed yet.
    NotReady,
}

impl Health {
    /// Leader election is on: a replica that does not lead reports ready.
    pub fn set_standby_ready(&self, on: bool) {
        self.standby_ready.store(on, Ordering::Relaxed);
    }

    /// What `/readyz` says.
    pub fn readiness(&self) -> Readiness {
        if !self.running.load(Ordering::Relaxed) {
            if self.standby_ready.load(Ordering::Relaxed) {
                Readiness::Standby
            } else {
                Readiness::NotReady
            }
        } else if self.unsynced.load(Ordering::Relaxed) == 0 {
            Readiness::Leading
        } else {
            Readiness::NotReady
        }
    }

    /// Whether every watch has listed once (the loop pushes only then).
    pub fn ready(&self) -> bool {
        self.readiness() != Readiness::NotReady
    }

    /// A watch (`i`, of the kind whose set this is) listed: the first time, one fewer
    /// watch to wait for.
    fn listed(&self, listed: &mut HashSet<usize>, i: usize) {
        if listed.insert(i) {
            self.unsynced.fetch_sub(1, Ordering::Relaxed);
        }
    }

    fn synced(&self) -> bool {
        self.running.load(Ordering::Relaxed) && self.unsynced.load(Ordering::Relaxed) == 0
    }
}

/// Where the loop's outputs go besides pods and status.
#[derive(Debug, Clone)]
pub struct Outputs {
    /// Events on LogPolicies.
    pub events: EventSink,
    /// The trust ConfigMaps.
    pub trust: TrustPublisher,
    /// The per-pod view, published after changes.
    pub pod_views: watch::Sender<Arc<Vec<PodView>>>,
    /// The metrics.
    pub metrics: Metrics,
    /// What `/readyz` reads.
    pub health: Arc<Health>,
}

type Tagged<T> = BoxStream<'static, (usize, Result<Event<T>, watcher::Error>)>;

fn policy_streams(client: &Client, scopes: &[Option<String>]) -> Tagged<DynamicObject> {
    let ar = ApiResource::erase::<LogPolicy>(&());
    let streams = scopes.iter().enumerate().map(|(i, scope)| {
        let api: Api<DynamicObject> = match scope {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
            None => Api::all_with(client.clone(), &ar),
        };
        watcher::watcher(api, watcher::Config::default())
            .default_backoff()
            .map(move |r| (i, r))
            .boxed()
    });
    futures::stream::select_all(streams).boxed()
}

fn pod_streams(client: &Client, scopes: &[Option<String>]) -> Tagged<Option<PodInfo>> {
    let streams = scopes.iter().enumerate().map(|(i, scope)| {
        let api: Api<Pod> = match scope {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        };
        watcher::watcher(
            api,
            watcher::Config::default().labels(&format!("{OPT_IN_LABEL}=true")),
        )
        .default_backoff()
        .map(move |r| (i, r.map(strip_pod_event)))
        .boxed()
    });
    futures::stream::select_all(streams).boxed()
}

/// The result of a status write: the policy, the status written, and whether it was.
type StatusResult = (PolicyKey, LogPolicyStatus, bool);

/// Runs the loop until `shutdown` turns true or `leader` turns false. Everything it
/// spawned (pushes, read-backs, status writes) is aborted when it returns.
pub async fn run(
    client: Client,
    pusher: Pusher,
    config: ControllerConfig,
    outputs: Outputs,
    mut shutdown: watch::Receiver<bool>,
    mut leader: watch::Receiver<bool>,
) {
    if !*leader.borrow() {
        return;
    }
    let metrics = outputs.metrics.clone();
    let health = outputs.health.clone();
    let scopes = watch_scopes(&config.namespaces);
    let mut policy_events = policy_streams(&client, &scopes);
    let mut pod_events = pod_streams(&client, &scopes);
    let scope_name = |i: usize| scopes.get(i).cloned().flatten();
    health.unsynced.store(2 * scopes.len(), Ordering::Relaxed);
    health.running.store(true, Ordering::Relaxed);
    let mut policy_synced: HashSet<usize> = HashSet::new();
    let mut pod_synced: HashSet<usize> = HashSet::new();

    let (reports_tx, mut reports_rx) = mpsc::channel::<PushReport>(1024);
    let (reads_tx, mut reads_rx) = mpsc::channel::<(PodKey, crate::PushTicket, Option<u64>)>(1024);
    let (status_tx, mut status_rx) = mpsc::channel::<StatusResult>(256);
    let status_permits = Arc::new(Semaphore::new(config.status_concurrency.max(1)));
    let mut tasks: JoinSet<()> = JoinSet::new();

    let mut index = Index::new();
    let mut policy_buffers: HashMap<usize, InitBuffer<PolicyInput>> = HashMap::new();
    let mut pod_buffers: HashMap<usize, InitBuffer<PodInfo>> = HashMap::new();
    let mut observed: HashMap<PolicyKey, Observed> = HashMap::new();
    let mut writing: HashSet<PolicyKey> = HashSet::new();
    let mut debounce = Debounce::new(config.status_debounce);
    let mut policy_events_seen = PolicyEvents::new(config.failure_event_interval);
    let mut trusted: BTreeSet<String> = BTreeSet::new();
    let mut views_due: Option<Instant> = None;
    let mut leader_fixed = false;
    let mut resync = tokio::time::interval(config.resync_interval);
    resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    resync.tick().await;

    loop {
        let expiry = sleep_until_system(index.next_expiry());
        let status_due = sleep_until_instant(debounce.next_due());
        let views_timer = sleep_until_instant(views_due);
        let mut changed = false;
        let mut pods_changed = false;
        tokio::select! {
            _ = shutdown.changed() => break,
            r = leader.changed(), if !leader_fixed => {
                if r.is_err() {
                    // No election (or it ended): leadership can no longer change.
                    leader_fixed = true;
                } else if !*leader.borrow() {
                    tracing::info!(target: "logpolicy_operator", "no longer the leader: stopping pushes");
                    break;
                }
            }
            ev = policy_events.next() => match ev {
                Some((i, Ok(ev))) => {
                    let scope = scope_name(i);
                    let buffer = policy_buffers.entry(i).or_default();
                    match apply_policy_event(&mut index, buffer, &mut observed, scope.as_deref(), ev, SystemTime::now()) {
                        Applied::Changed => changed = true,
                        Applied::InitDone => {
                            changed = true;
                            health.listed(&mut policy_synced, i);
                            tracing::info!(target: "logpolicy_operator", namespace = scope.as_deref().unwrap_or("*"), policies = index.policy_count(), "LogPolicies listed");
                        }
                        Applied::Buffered => {}
                        Applied::Skipped(reason) => tracing::warn!(target: "logpolicy_operator", %reason, "skipped a LogPolicy"),
                    }
                }
                Some((i, Err(e))) => tracing::warn!(target: "logpolicy_operator", namespace = scope_name(i).as_deref().unwrap_or("*"), error = %e, "LogPolicy watch failed; retrying"),
                None => {
                    tracing::error!(target: "logpolicy_operator", "LogPolicy watch ended");
                    break;
                }
            },
            ev = pod_events.next() => match ev {
                Some((i, Ok(ev))) => {
                    let scope = scope_name(i);
                    let buffer = pod_buffers.entry(i).or_default();
                    match apply_pod_event(&mut index, buffer, scope.as_deref(), ev, SystemTime::now()) {
                        Applied::Changed => {
                            changed = true;
                            pods_changed = true;
                        }
                        Applied::InitDone => {
                            changed = true;
                            pods_changed = true;
                            health.listed(&mut pod_synced, i);
                            tracing::info!(target: "logpolicy_operator", namespace = scope.as_deref().unwrap_or("*"), pods = index.pod_count(), "pods listed");
                        }
                        Applied::Buffered => {}
                        Applied::Skipped(reason) => tracing::warn!(target: "logpolicy_operator", %reason, "skipped a pod"),
                    }
                }
                Some((i, Err(e))) => tracing::warn!(target: "logpolicy_operator", namespace = scope_name(i).as_deref().unwrap_or("*"), error = %e, "pod watch failed; retrying"),
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
                metrics.push_latency.observe(report.elapsed.as_secs_f64());
                if !matches!(report.outcome, crate::PushOutcome::Applied) {
                    tracing::info!(target: "logpolicy_operator", pod = %report.pod, outcome = %report.outcome, attempts = report.attempts, "push did not apply");
                }
                // The index's time stamps the pod's last push.
                index.tick(SystemTime::now());
                index.record_push(&report.pod, report.ticket, &report.outcome);
                changed = true;
            }
            Some((pod, ticket, held)) = reads_rx.recv() => {
                if index.record_read_back(&pod, ticket, held) {
                    tracing::info!(target: "logpolicy_operator", %pod, ?held, "drift found by read-back");
                    changed = true;
                }
            }
            Some((key, status, ok)) = status_rx.recv() => {
                writing.remove(&key);
                if ok {
                    if let Some(o) = observed.get_mut(&key) {
                        o.status = Some(status);
                    }
                } else {
                    // Retried after the debounce interval.
                    debounce.mark(key, Instant::now());
                }
            }
            _ = resync.tick() => {
                for target in index.resync() {
                    let pusher = pusher.clone();
                    let tx = reads_tx.clone();
                    tasks.spawn(async move {
                        if let Ok(read) = pusher.read_back(target.addr).await {
                            let _ = tx.send((target.pod, target.ticket, read.version)).await;
                        }
                    });
                }
                // Applied again: a ConfigMap edited or deleted by hand comes back.
                trusted.clear();
                pods_changed = true;
                changed = true;
            }
            _ = status_due => {}
            _ = views_timer => {
                views_due = None;
                outputs.pod_views.send_replace(Arc::new(index.pod_views()));
            }
        }
        while tasks.try_join_next().is_some() {}
        if changed {
            metrics.reconciles.inc();
            metrics
                .pods_tracked
                .set(i64::try_from(index.pod_count()).unwrap_or(i64::MAX));
            metrics
                .policies
                .set(i64::try_from(index.policy_count()).unwrap_or(i64::MAX));
            if views_due.is_none() {
                views_due = Some(Instant::now() + config.view_interval);
            }
        }
        // Nothing is pushed or written before every watch has listed once: pods
        // listed before the policies would otherwise be sent a baseline document (and
        // drop the policies they hold) when the operator restarts. The index keeps what
        // is queued until then.
        if !health.synced() {
            continue;
        }
        if changed {
            let pushes = index.take_pushes(SystemTime::now());
            if !pushes.is_empty() {
                pusher.spawn_all_in(pushes, &reports_tx, &mut tasks);
            }
            let now = Instant::now();
            for key in index.take_changed_policies() {
                debounce.mark(key, now);
            }
        }
        if pods_changed {
            for ns in index.pod_namespaces() {
                if !trusted.contains(ns) {
                    trusted.insert(ns.to_owned());
                    outputs.trust.publish(ns);
                }
            }
        }
        for key in debounce.take_due(Instant::now()) {
            let Some(view) = index.policy_view(&key) else {
                // Deleted.
                policy_events_seen.forget(&key);
                continue;
            };
            let entry = observed.get(&key).cloned().unwrap_or_default();
            for event in policy_events_seen.observe(&view, Instant::now()) {
                outputs.events.send(event, entry.uid.as_deref());
            }
            if writing.contains(&key) {
                // One write per policy at a time: this one waits for the next slot.
                debounce.mark(key, Instant::now());
                continue;
            }
            let status = view.status(entry.status.as_ref(), SystemTime::now());
            if entry.status.as_ref() == Some(&status) {
                continue;
            }
            writing.insert(key.clone());
            tasks.spawn(write_status(
                client.clone(),
                status_permits.clone(),
                status_tx.clone(),
                metrics.clone(),
                key,
                status,
            ));
        }
    }
    health.running.store(false, Ordering::Relaxed);
    tasks.abort_all();
    outputs.pod_views.send_replace(Arc::new(Vec::new()));
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
    client: Client,
    permits: Arc<Semaphore>,
    results: mpsc::Sender<StatusResult>,
    metrics: Metrics,
    key: PolicyKey,
    status: LogPolicyStatus,
) {
    let Ok(_permit) = permits.acquire_owned().await else {
        return;
    };
    let api: Api<LogPolicy> = Api::namespaced(client, &key.namespace);
    let patch = serde_json::json!({
        "apiVersion": "logpolicy.dev/v1alpha1",
        "kind": "LogPolicy",
        "status": status,
    });
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let patch = Patch::Apply(&patch);
    let write = api.patch_status(&key.name, &params, &patch);
    let ok = match tokio::time::timeout(STATUS_WRITE_TIMEOUT, write)
        .await
        .unwrap_or_else(|_| Err(kube::Error::Service("status write timed out".into())))
    {
        Ok(_) => {
            metrics
                .status_writes
                .get_or_create(&vec![("result", "ok")])
                .inc();
            true
        }
        // Deleted meanwhile: nothing to retry.
        Err(kube::Error::Api(s)) if s.code == 404 => true,
        Err(e) => {
            metrics
                .status_writes
                .get_or_create(&vec![("result", "error")])
                .inc();
            tracing::warn!(target: "logpolicy_operator", policy = %key, error = %e, "status write failed; retrying");
            false
        }
    };
    let _ = results.send((key, status, ok)).await;
}
