//! The controller loop: watches, pushes, read-backs and status writes around one
//! [`Index`], owned by one task (nothing locks it).
//!
//! A [`Controller`] lives for one leadership term ([`lead`] starts one each time this
//! replica leads). Its [`run`](Controller::run) waits for the next input and hands it to
//! the method for its kind: a LogPolicy event, a pod event, an expiry, a push report, a
//! read-back, a status written, the resync tick, the gauges' timer, a reader's ask for
//! the per-pod view (see [`pod_views`]) and its timer, a change of
//! leadership, a trust ConfigMap's change or the shutdown. Then `settle` does what the
//! pass calls for: push, debounce and write status, record Events, publish the trust
//! ConfigMaps (and restore one that someone else changed or deleted, see
//! [`trust`](crate::trust)) and the gauges over every pod.
//!
//! The pure parts ([`InitBuffer`], [`Debounce`], [`apply_policy_event`],
//! [`apply_pod_event`]) are public so that tests drive them without an API server.

mod apply;
mod debounce;

pub use apply::{
    apply_pod_event, apply_policy_event, parse_policy, Applied, InitBuffer, Observed,
    UnusablePolicy,
};
pub use debounce::Debounce;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::DynamicObject;
use kube::runtime::watcher::{self, Event};
use kube::Client;
use logpolicy::wire::VerifyingKey;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use crate::events::{config_map_reference, trust_restored, EventSink, PolicyEvents};
use crate::health::Health;
use crate::index::{Index, PodKey, PodView, PolicyInput, PolicyKey, PushTicket};
use crate::lease::{Election, LeaseConfig};
use crate::log;
use crate::metrics::{self, Metrics};
use crate::pods::PodInfo;
use crate::push::{PushOutcome, PushReport, Pusher};
use crate::status_writer::{StatusWrite, StatusWriter};
use crate::trust::{Drift, OnRestored, TrustPublisher, TRUST_CONFIG_MAP};
use crate::watches::{self, ConfigMapEvent, PodEvent, PolicyEvent, Tagged};
use logpolicy_api::validate::MaxDuration;

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
    /// A per-pod view (`/pods`) built less than this long ago answers the next request
    /// too; the metrics' gauges over every pod are set at most once per this interval.
    pub view_interval: Duration,
    /// The namespaces to watch (one watcher per namespace and kind); empty: every
    /// namespace, with cluster-wide watches.
    pub namespaces: Vec<String>,
    /// The longest a policy may apply; a policy without an expiry or with a longer one
    /// is refused as an invalid spec. Default: no limit (the binary's `--max-duration`
    /// defaults to 24h).
    pub max_duration: MaxDuration,
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
            max_duration: MaxDuration::default(),
        }
    }
}

/// Where the loop's outputs go besides pods and status.
#[derive(Debug, Clone)]
pub struct Outputs {
    /// Events on LogPolicies.
    pub events: EventSink,
    /// The trust ConfigMaps.
    pub trust: TrustPublisher,
    /// The per-pod view, built when `/pods` asks for it.
    pub pod_views: PodViewSource,
    /// The metrics.
    pub metrics: Metrics,
    /// What `/readyz` reads.
    pub health: Arc<Health>,
    /// This replica's identity (the Lease's holder, the Events' `reportingInstance`).
    pub identity: String,
}

impl Outputs {
    /// The outputs of the replica `identity`: Events and trust ConfigMaps (publishing
    /// `key`) are written by tasks of their own, started here; `metrics` count them.
    pub fn start(
        client: &Client,
        identity: &str,
        key: VerifyingKey,
        pod_views: PodViewSource,
        metrics: Metrics,
        health: Arc<Health>,
    ) -> Self {
        let events = metrics.events.clone();
        let events = EventSink::spawn(client.clone(), identity.to_owned(), 256, events);
        let sink = events.clone();
        let on_restored: OnRestored = Arc::new(move |ns: &str, drift: &Drift| {
            // The uid of what was restored; an immutable one was created anew.
            let uid = drift.uid.as_deref().filter(|_| drift.recreate.is_none());
            let reference = config_map_reference(ns, TRUST_CONFIG_MAP, uid);
            sink.send_about(trust_restored(&drift.what), reference);
        });
        Outputs {
            events,
            trust: TrustPublisher::spawn_with(
                client.clone(),
                key,
                metrics.trust_writes.clone(),
                metrics.trust_restores.clone(),
                on_restored,
            ),
            pod_views,
            metrics,
            health,
            identity: identity.to_owned(),
        }
    }
}

/// Runs a [`Controller`] for each term this replica leads, until `shutdown` turns true:
/// with a `lease` that elects, this replica leads while it holds the Lease
/// ([`Election`]); otherwise it leads at once (and keeps a `lease` that does not elect
/// as a heartbeat). On the way out the Lease is released (waiting at most 5 s), so that a
/// successor takes over at once.
pub async fn lead(
    client: Client,
    pusher: Pusher,
    config: ControllerConfig,
    outputs: Outputs,
    lease: Option<LeaseConfig>,
    shutdown: watch::Receiver<bool>,
) {
    let scopes = watches::watch_scopes(&config.namespaces);
    let namespaces: Vec<&str> = scopes.iter().map(|s| s.as_deref().unwrap_or("*")).collect();
    let identity = outputs.identity.as_str();
    log::info!(identity = %identity, leader_election = lease.as_ref().is_some_and(|l| l.elect), ?namespaces, "starting");
    let (election, mut leader) = Election::start(client.clone(), lease, shutdown.clone());
    let mut stop = shutdown.clone();
    loop {
        // Wait to lead (at once without leader election).
        let leading = tokio::select! {
            r = leader.wait_for(|l| *l) => r.is_ok(),
            _ = stop.changed() => false,
        };
        if !leading || *stop.borrow() {
            break;
        }
        outputs.metrics.leader.set(1);
        log::info!(identity = %identity, "leading: starting the controller");
        Controller::run(
            client.clone(),
            pusher.clone(),
            config.clone(),
            outputs.clone(),
            shutdown.clone(),
            leader.clone(),
        )
        .await;
        outputs.metrics.leader.set(0);
        if *stop.borrow() {
            break;
        }
    }
    election.finish().await;
}

/// What a read-back found: the version the pod holds, for the push it acknowledged.
#[derive(Debug)]
struct ReadBackReport {
    pod: PodKey,
    ticket: PushTicket,
    held: Option<u64>,
    replays: Vec<logpolicy::wire::ReplayView>,
}

/// One input of the loop.
// One lives at a time, on the stack, moved once into its handler: boxing the watch
// events would cost an allocation per event for nothing.
#[allow(clippy::large_enum_variant)]
enum Input {
    /// The process stops.
    Shutdown,
    /// Leadership changed: whether this replica still leads.
    Leadership(bool),
    /// A LogPolicy watch event (of the watch of scope `.0`), or its error.
    Policy(usize, Result<PolicyEvent, watcher::Error>),
    /// A pod watch event (of the watch of scope `.0`), or its error.
    Pod(usize, Result<PodEvent, watcher::Error>),
    /// A trust ConfigMap watch event (of the watch of scope `.0`), or its error.
    Trust(usize, Result<ConfigMapEvent, watcher::Error>),
    /// A watch stream ended (it never should): which kind.
    WatchEnded(Watched),
    /// A policy's time is over, or a retry is due.
    Expiry,
    /// A push ended.
    Pushed(PushReport),
    /// A read-back ended.
    ReadBack(ReadBackReport),
    /// A status write ended.
    StatusWritten(StatusWrite),
    /// Time to resync.
    Resync,
    /// A debounced status write is due.
    StatusDue,
    /// Time to set the gauges over every pod.
    GaugesDue,
    /// A reader asks for the per-pod view.
    ViewWanted,
    /// Time to build the per-pod view a reader asked for.
    ViewDue,
}

/// The per-pod view (`/pods`): the controller's side ([`PodViewSource`]) and the
/// readers' ([`PodViews`]). The view walks every pod and copies its strings (6.6 MiB at
/// 10,000 pods), so it is built only when a reader asks, never on a timer nor per
/// input; a view built less than [`ControllerConfig::view_interval`] ago answers the
/// next asks too, and a new one waits until at least 20 times the last build's time
/// has passed since it (at most 5% of the loop's time, however many ask).
pub fn pod_views() -> (PodViewSource, PodViews) {
    let (published, read) = watch::channel(None);
    let wanted = Arc::new(tokio::sync::Notify::new());
    (
        PodViewSource {
            published,
            wanted: Arc::clone(&wanted),
        },
        PodViews { read, wanted },
    )
}

/// A per-pod view as the controller built it.
#[derive(Debug)]
pub struct BuiltViews {
    /// When it was built.
    pub built: Instant,
    /// Every tracked pod's view, sorted by namespace and name.
    pub pods: Vec<PodView>,
}

/// The controller's side of [`pod_views`].
#[derive(Debug, Clone)]
pub struct PodViewSource {
    published: watch::Sender<Option<Arc<BuiltViews>>>,
    wanted: Arc<tokio::sync::Notify>,
}

/// The readers' side of [`pod_views`]. Cheap to clone.
#[derive(Debug, Clone)]
pub struct PodViews {
    read: watch::Receiver<Option<Arc<BuiltViews>>>,
    wanted: Arc<tokio::sync::Notify>,
}

/// Why [`PodViews::current`] has no view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NoViews {
    /// No controller answered within the wait: this replica does not lead (or is
    /// between two terms).
    #[error("no controller answered within {0:?}: this replica does not lead")]
    NotAnswered(Duration),
    /// The controller stopped: this replica no longer leads.
    #[error("this replica's controller stopped: it no longer leads")]
    Stopped,
}

impl PodViewSource {
    /// Answers every ask with `pods`, from a task of its own, until every reader is
    /// gone: the endpoints' view without a controller (a fixed view, as their tests
    /// serve it). `pods` must be sorted by namespace and name.
    pub fn answer_with(self, pods: Vec<PodView>) {
        let views = Arc::new(BuiltViews {
            built: Instant::now(),
            pods,
        });
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = self.published.closed() => return,
                    () = self.wanted.notified() => {
                        self.published.send_replace(Some(Arc::clone(&views)));
                    }
                }
            }
        });
    }
}

impl PodViews {
    /// A view built at most [`ControllerConfig::view_interval`] ago, asked of the
    /// controller and waited for at most `wait`.
    pub async fn current(&self, wait: Duration) -> Result<Arc<BuiltViews>, NoViews> {
        let mut read = self.read.clone();
        read.mark_unchanged();
        self.wanted.notify_one();
        match tokio::time::timeout(wait, read.changed()).await {
            Ok(Ok(())) => read.borrow_and_update().clone().ok_or(NoViews::Stopped),
            Ok(Err(_)) => Err(NoViews::Stopped),
            Err(_) => Err(NoViews::NotAnswered(wait)),
        }
    }
}

/// What a pass changed; [`Controller::settle`] acts on it.
#[derive(Debug, Default, Clone, Copy)]
struct Pass {
    /// The index changed.
    changed: bool,
    /// Pods came, went or changed (the trust ConfigMaps may be due).
    pods_changed: bool,
}

/// The most push reports handled in one pass besides its input.
const REPORTS_PER_PASS: usize = 256;

impl Pass {
    /// What two passes changed together.
    fn and(self, other: Pass) -> Pass {
        Pass {
            changed: self.changed || other.changed,
            pods_changed: self.pods_changed || other.pods_changed,
        }
    }

    const NOTHING: Pass = Pass {
        changed: false,
        pods_changed: false,
    };
    const INDEX: Pass = Pass {
        changed: true,
        pods_changed: false,
    };
    const PODS: Pass = Pass {
        changed: true,
        pods_changed: true,
    };
    /// The trust ConfigMaps are due again (the index did not change).
    const TRUST: Pass = Pass {
        changed: false,
        pods_changed: true,
    };
}

/// The kinds of watch.
#[derive(Debug, Clone, Copy)]
enum Watched {
    Policies,
    Pods,
    Trust,
}

impl Watched {
    /// What the log calls its objects.
    fn name(self) -> &'static str {
        match self {
            Watched::Policies => "LogPolicy",
            Watched::Pods => "pod",
            Watched::Trust => "trust ConfigMap",
        }
    }
}

/// When the timers of the loop fire next (from the controller's state).
struct Deadlines {
    expiry: Option<SystemTime>,
    status: Option<Instant>,
    gauges: Option<Instant>,
    view: Option<Instant>,
}

/// What the loop waits on: the stop and leadership signals, the watches, the results of
/// the tasks it spawned, and the resync interval.
struct Inputs {
    shutdown: watch::Receiver<bool>,
    leader: watch::Receiver<bool>,
    /// No election (or it ended): leadership can no longer change.
    leader_fixed: bool,
    policies: Tagged<DynamicObject>,
    pods: Tagged<Option<PodInfo>>,
    trust: Tagged<ConfigMap>,
    reports: mpsc::Receiver<PushReport>,
    reads: mpsc::Receiver<ReadBackReport>,
    statuses: mpsc::Receiver<StatusWrite>,
    resync: tokio::time::Interval,
    view_wanted: Arc<tokio::sync::Notify>,
}

impl Inputs {
    /// The next input, or the first timer of `at` to fire.
    async fn next(&mut self, at: Deadlines) -> Input {
        tokio::select! {
            _ = self.shutdown.changed() => Input::Shutdown,
            r = self.leader.changed(), if !self.leader_fixed => match r {
                Err(_) => {
                    self.leader_fixed = true;
                    Input::Leadership(true)
                }
                Ok(()) => Input::Leadership(*self.leader.borrow()),
            },
            ev = self.policies.next() => match ev {
                Some((i, ev)) => Input::Policy(i, ev),
                None => Input::WatchEnded(Watched::Policies),
            },
            ev = self.pods.next() => match ev {
                Some((i, ev)) => Input::Pod(i, ev),
                None => Input::WatchEnded(Watched::Pods),
            },
            ev = self.trust.next() => match ev {
                Some((i, ev)) => Input::Trust(i, ev),
                None => Input::WatchEnded(Watched::Trust),
            },
            _ = sleep_until_system(at.expiry) => Input::Expiry,
            Some(report) = self.reports.recv() => Input::Pushed(report),
            Some(read) = self.reads.recv() => Input::ReadBack(read),
            Some(write) = self.statuses.recv() => Input::StatusWritten(write),
            _ = self.resync.tick() => Input::Resync,
            _ = sleep_until_instant(at.status) => Input::StatusDue,
            _ = sleep_until_instant(at.gauges) => Input::GaugesDue,
            () = self.view_wanted.notified() => Input::ViewWanted,
            _ = sleep_until_instant(at.view) => Input::ViewDue,
        }
    }
}

/// The controller of one leadership term. See [the module](self).
pub struct Controller {
    client: Client,
    pusher: Pusher,
    config: ControllerConfig,
    outputs: Outputs,
    status_writer: StatusWriter,
    scopes: Vec<Option<String>>,
    index: Index,
    policy_buffers: HashMap<usize, InitBuffer<PolicyInput>>,
    pod_buffers: HashMap<usize, InitBuffer<PodInfo>>,
    /// The scopes whose LogPolicy watch has listed once.
    policies_listed: HashSet<usize>,
    /// The scopes whose pod watch has listed once.
    pods_listed: HashSet<usize>,
    observed: HashMap<PolicyKey, Observed>,
    /// Policies with a status write in flight.
    writing: HashSet<PolicyKey>,
    debounce: Debounce<PolicyKey>,
    policy_events: PolicyEvents,
    /// Namespaces whose trust ConfigMap was applied since the last resync.
    trusted: BTreeSet<String>,
    /// The trust ConfigMaps seen by their watch and not checked yet, by namespace: the
    /// last state of each, and whether that was its deletion.
    trust_seen: BTreeMap<String, (ConfigMap, bool)>,
    /// The uids of immutable trust ConfigMaps the operator deletes to create them anew:
    /// their deletion is its own.
    recreating: HashSet<String>,
    /// When the gauges over every pod are set next (after a change).
    gauges_due: Option<Instant>,
    /// How long setting them took last.
    gauges_cost: Duration,
    /// When the per-pod view a reader asked for is built.
    view_due: Option<Instant>,
    /// The last per-pod view built, and how long that took.
    last_view: Option<(Arc<BuiltViews>, Duration)>,
    /// Everything it spawned (pushes, read-backs, status writes): aborted when it stops.
    tasks: JoinSet<()>,
    reports: mpsc::Sender<PushReport>,
    reads: mpsc::Sender<ReadBackReport>,
    statuses: mpsc::Sender<StatusWrite>,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("config", &self.config)
            .field("scopes", &self.scopes)
            .finish_non_exhaustive()
    }
}

impl Controller {
    /// Runs the loop of a new controller (an empty index) until `shutdown` turns true or
    /// `leader` turns false. Everything it spawned (pushes, read-backs, status writes) is
    /// aborted when it returns.
    pub async fn run(
        client: Client,
        pusher: Pusher,
        config: ControllerConfig,
        outputs: Outputs,
        shutdown: watch::Receiver<bool>,
        leader: watch::Receiver<bool>,
    ) {
        if !*leader.borrow() {
            return;
        }
        let (reports, reports_rx) = mpsc::channel(1024);
        let (reads, reads_rx) = mpsc::channel(1024);
        let (statuses, statuses_rx) = mpsc::channel(256);
        let status_writer = StatusWriter::new(
            client.clone(),
            config.status_concurrency,
            outputs.metrics.status_writes.clone(),
        );
        let index = Index::with_max_duration(config.max_duration);
        let controller = Controller {
            scopes: watches::watch_scopes(&config.namespaces),
            debounce: Debounce::new(config.status_debounce),
            policy_events: PolicyEvents::new(config.failure_event_interval),
            client,
            pusher,
            config,
            outputs,
            status_writer,
            index,
            policy_buffers: HashMap::new(),
            pod_buffers: HashMap::new(),
            policies_listed: HashSet::new(),
            pods_listed: HashSet::new(),
            observed: HashMap::new(),
            writing: HashSet::new(),
            trusted: BTreeSet::new(),
            trust_seen: BTreeMap::new(),
            recreating: HashSet::new(),
            gauges_due: None,
            gauges_cost: Duration::ZERO,
            view_due: None,
            last_view: None,
            tasks: JoinSet::new(),
            reports,
            reads,
            statuses,
        };
        controller
            .run_loop(shutdown, leader, (reports_rx, reads_rx, statuses_rx))
            .await;
    }

    async fn run_loop(
        mut self,
        shutdown: watch::Receiver<bool>,
        leader: watch::Receiver<bool>,
        (reports, reads, statuses): (
            mpsc::Receiver<PushReport>,
            mpsc::Receiver<ReadBackReport>,
            mpsc::Receiver<StatusWrite>,
        ),
    ) {
        let mut resync = tokio::time::interval(self.config.resync_interval);
        resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        resync.tick().await;
        let mut inputs = Inputs {
            shutdown,
            leader,
            leader_fixed: false,
            policies: watches::policy_events(&self.client, &self.scopes),
            pods: watches::pod_events(&self.client, &self.scopes),
            trust: watches::config_map_events(&self.client, &self.scopes, TRUST_CONFIG_MAP),
            reports,
            reads,
            statuses,
            resync,
            view_wanted: Arc::clone(&self.outputs.pod_views.wanted),
        };
        self.outputs.health.start(2 * self.scopes.len());
        loop {
            let input = inputs.next(self.deadlines()).await;
            let started = Instant::now();
            let Some(mut pass) = self.handle(input) else {
                break;
            };
            // Push reports come by the thousand when a change reaches every pod: those
            // already waiting share one pass (one `settle`), up to a bound that keeps
            // the other inputs' wait short.
            for _ in 0..REPORTS_PER_PASS {
                let Ok(report) = inputs.reports.try_recv() else {
                    break;
                };
                pass = pass.and(self.on_push_report(report));
            }
            self.settle(pass);
            let metrics = &self.outputs.metrics;
            metrics
                .reconcile_duration
                .observe(started.elapsed().as_secs_f64());
        }
        self.stop();
    }

    fn deadlines(&self) -> Deadlines {
        // An expiry and a due retry are both handled by moving the index's time.
        let expiry = match (self.index.next_expiry(), self.index.next_retry()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Deadlines {
            expiry,
            status: self.debounce.next_due(),
            gauges: self.gauges_due,
            view: self.view_due,
        }
    }

    /// Hands `input` to the method for its kind; `None`: stop.
    fn handle(&mut self, input: Input) -> Option<Pass> {
        match input {
            Input::Shutdown => None,
            Input::Leadership(leading) => self.on_leadership(leading),
            Input::Policy(i, ev) => Some(self.on_policy_event(i, ev)),
            Input::Pod(i, ev) => Some(self.on_pod_event(i, ev)),
            Input::Trust(i, ev) => Some(self.on_trust_event(i, ev)),
            Input::WatchEnded(kind) => {
                log::error!("{} watch ended", kind.name());
                None
            }
            Input::Expiry => Some(self.on_expiry()),
            Input::Pushed(report) => Some(self.on_push_report(report)),
            Input::ReadBack(read) => Some(self.on_read_back(read)),
            Input::StatusWritten(write) => Some(self.on_status_written(write)),
            Input::Resync => Some(self.on_resync()),
            // The due writes are made by `settle`.
            Input::StatusDue => Some(Pass::NOTHING),
            Input::GaugesDue => Some(self.on_gauges_due()),
            Input::ViewWanted => Some(self.on_view_wanted()),
            Input::ViewDue => Some(self.on_view_due()),
        }
    }

    fn on_leadership(&mut self, leading: bool) -> Option<Pass> {
        if leading {
            Some(Pass::NOTHING)
        } else {
            log::info!("no longer the leader: stopping pushes");
            None
        }
    }

    fn scope(&self, i: usize) -> Option<String> {
        self.scopes.get(i).cloned().flatten()
    }

    fn on_policy_event(&mut self, i: usize, ev: Result<PolicyEvent, watcher::Error>) -> Pass {
        let Some((scope, ev)) = self.watched(Watched::Policies, i, ev) else {
            return Pass::NOTHING;
        };
        let buffer = self.policy_buffers.entry(i).or_default();
        let now = SystemTime::now();
        let (index, observed) = (&mut self.index, &mut self.observed);
        let applied = apply_policy_event(index, buffer, observed, scope.as_deref(), ev, now);
        self.on_applied(Watched::Policies, i, scope.as_deref(), applied)
    }

    fn on_pod_event(&mut self, i: usize, ev: Result<PodEvent, watcher::Error>) -> Pass {
        let Some((scope, ev)) = self.watched(Watched::Pods, i, ev) else {
            return Pass::NOTHING;
        };
        let buffer = self.pod_buffers.entry(i).or_default();
        let now = SystemTime::now();
        let applied = apply_pod_event(&mut self.index, buffer, scope.as_deref(), ev, now);
        self.on_applied(Watched::Pods, i, scope.as_deref(), applied)
    }

    /// The scope of watch `i` of `kind` and its event; `None` for an error of the watch
    /// (logged: the watcher retries by itself).
    fn watched<T>(
        &self,
        kind: Watched,
        i: usize,
        ev: Result<T, watcher::Error>,
    ) -> Option<(Option<String>, T)> {
        let scope = self.scope(i);
        match ev {
            Ok(ev) => Some((scope, ev)),
            Err(e) => {
                let namespace = scope.as_deref().unwrap_or("*");
                log::warn!(namespace, error = %e, "{} watch failed; retrying", kind.name());
                None
            }
        }
    }

    /// What an event of watch `i` of `kind` did to the index, as a pass.
    fn on_applied(
        &mut self,
        kind: Watched,
        i: usize,
        scope: Option<&str>,
        applied: Applied,
    ) -> Pass {
        let changed = match kind {
            Watched::Policies => Pass::INDEX,
            Watched::Pods => Pass::PODS,
            // Its events go to `on_trust_event`, never here.
            Watched::Trust => return Pass::NOTHING,
        };
        match applied {
            Applied::Changed => changed,
            Applied::InitDone => {
                let listed = match kind {
                    Watched::Policies => &mut self.policies_listed,
                    Watched::Pods | Watched::Trust => &mut self.pods_listed,
                };
                if listed.insert(i) {
                    self.outputs.health.listed();
                }
                let namespace = scope.unwrap_or("*");
                match kind {
                    Watched::Policies => {
                        let policies = self.index.policy_count();
                        log::info!(namespace, policies, "LogPolicies listed");
                    }
                    Watched::Pods | Watched::Trust => {
                        let pods = self.index.pod_count();
                        log::info!(namespace, pods, "pods listed");
                    }
                }
                changed
            }
            Applied::Buffered => Pass::NOTHING,
            Applied::Skipped(reason) => {
                log::warn!(%reason, "skipped a {}", kind.name());
                Pass::NOTHING
            }
        }
    }

    /// A trust ConfigMap changed or was deleted: kept to be checked by `settle` (once
    /// every watch has listed, the namespaces with pods are known). A relist may have
    /// missed a deletion: every namespace's ConfigMap is applied again after it.
    fn on_trust_event(&mut self, i: usize, ev: Result<ConfigMapEvent, watcher::Error>) -> Pass {
        let Some((_, ev)) = self.watched(Watched::Trust, i, ev) else {
            return Pass::NOTHING;
        };
        let (cm, deleted) = match ev {
            Event::Apply(cm) | Event::InitApply(cm) => (cm, false),
            Event::Delete(cm) => (cm, true),
            Event::Init => return Pass::NOTHING,
            Event::InitDone => {
                self.trusted.clear();
                return Pass::TRUST;
            }
        };
        if let Some(ns) = cm.metadata.namespace.clone() {
            self.trust_seen.insert(ns, (cm, deleted));
        }
        Pass::NOTHING
    }

    /// Restores the trust ConfigMaps seen changed or deleted in namespaces with pods
    /// (the publisher counts, logs and reports each once written).
    fn check_trust(&mut self) {
        if self.trust_seen.is_empty() {
            return;
        }
        let seen = std::mem::take(&mut self.trust_seen);
        let namespaces = self.index.pod_namespaces();
        let mut restores = Vec::new();
        for (ns, (cm, deleted)) in seen {
            if !namespaces.contains(ns.as_str()) {
                continue;
            }
            let drift = if deleted {
                let uid = cm.metadata.uid.as_ref();
                if uid.is_some_and(|u| self.recreating.remove(u)) {
                    // Its own deletion of an immutable one: the restore recreates it.
                    continue;
                }
                Drift::default()
            } else {
                match self.outputs.trust.drift(&cm) {
                    Some(d) => d,
                    None => continue,
                }
            };
            restores.push((ns, drift));
        }
        for (ns, drift) in restores {
            if let Some(uid) = &drift.recreate {
                if self.recreating.len() >= 1024 {
                    self.recreating.clear();
                }
                self.recreating.insert(uid.clone());
            }
            self.outputs.trust.restore(&ns, drift);
        }
    }

    fn on_expiry(&mut self) -> Pass {
        self.index.tick(SystemTime::now());
        Pass::INDEX
    }

    fn on_push_report(&mut self, report: PushReport) -> Pass {
        let metrics = &self.outputs.metrics;
        metrics::count(&metrics.pushes, report.outcome.metric_label());
        metrics.push_latency.observe(report.elapsed.as_secs_f64());
        if !matches!(report.outcome, PushOutcome::Applied) {
            metrics::error(&metrics.reconcile_errors, "push");
            log::info!(pod = %report.pod, outcome = %report.outcome, attempts = report.attempts, "push did not apply");
        }
        // The index's time stamps the pod's last push.
        self.index.tick(SystemTime::now());
        self.index
            .record_push(&report.pod, report.ticket, &report.outcome);
        if matches!(report.outcome, PushOutcome::Applied) {
            self.index
                .record_replays(&report.pod, report.ticket, report.replays);
        }
        Pass::INDEX
    }

    fn on_read_back(&mut self, read: ReadBackReport) -> Pass {
        let ReadBackReport {
            pod,
            ticket,
            held,
            replays,
        } = read;
        let replayed = self.index.record_replays(&pod, ticket, replays);
        if self.index.record_read_back(&pod, ticket, held) {
            log::info!(%pod, ?held, "drift found by read-back");
            Pass::INDEX
        } else if replayed {
            Pass::INDEX
        } else {
            Pass::NOTHING
        }
    }

    fn on_status_written(&mut self, write: StatusWrite) -> Pass {
        let StatusWrite { key, status, done } = write;
        self.writing.remove(&key);
        if done {
            if let Some(o) = self.observed.get_mut(&key) {
                o.status = Some(status);
            }
        } else {
            metrics::error(&self.outputs.metrics.reconcile_errors, "status_write");
            // Retried after the debounce interval.
            self.debounce.mark(key, Instant::now());
        }
        Pass::NOTHING
    }

    fn on_resync(&mut self) -> Pass {
        // One task reads the pods back, at the pusher's pace.
        let targets = self
            .index
            .resync()
            .into_iter()
            .map(|t| (t.addr, t))
            .collect();
        let mut read_backs = Box::pin(self.pusher.read_backs(targets));
        let reads = self.reads.clone();
        self.tasks.spawn(async move {
            while let Some((target, read)) = read_backs.next().await {
                let report = ReadBackReport {
                    pod: target.pod,
                    ticket: target.ticket,
                    held: read.version,
                    replays: read.replays,
                };
                let _ = reads.send(report).await;
            }
        });
        // Applied again: a ConfigMap edited or deleted by hand comes back.
        self.trusted.clear();
        Pass::PODS
    }

    /// Sets the gauges that count over every pod. They walk every pod, so they run on
    /// a timer after changes, never per input: at 50,000 pods a walk per push report
    /// made the loop quadratic. The next one waits at least 20 times as long as this one
    /// took (at most 5% of the loop's time).
    fn on_gauges_due(&mut self) -> Pass {
        let started = Instant::now();
        self.gauges_due = None;
        let metrics = &self.outputs.metrics;
        let gauge = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        metrics.pods_tracked.set(gauge(self.index.pod_count()));
        metrics.policies.set(gauge(self.index.policy_count()));
        metrics.push_backlog.set(gauge(self.index.backlog()));
        self.gauges_cost = started.elapsed();
        Pass::NOTHING
    }

    /// A reader asks for the per-pod view (see [`pod_views`]): the last one again if it
    /// is recent, else a new one, at once or when 20 times its last build's time has
    /// passed since that build.
    fn on_view_wanted(&mut self) -> Pass {
        let now = Instant::now();
        match &self.last_view {
            Some((views, _)) if now < views.built + self.config.view_interval => {
                self.outputs
                    .pod_views
                    .published
                    .send_replace(Some(Arc::clone(views)));
            }
            Some((views, cost)) => {
                let at = (views.built + *cost * 20).max(now);
                self.view_due = Some(self.view_due.map_or(at, |due| due.min(at)));
            }
            None => self.view_due = Some(now),
        }
        Pass::NOTHING
    }

    /// Builds the per-pod view a reader asked for and publishes it.
    fn on_view_due(&mut self) -> Pass {
        self.view_due = None;
        let started = Instant::now();
        let views = Arc::new(BuiltViews {
            built: started,
            pods: self.index.pod_views(),
        });
        self.last_view = Some((Arc::clone(&views), started.elapsed()));
        self.outputs.pod_views.published.send_replace(Some(views));
        Pass::NOTHING
    }

    /// After each input: counts, then (once every watch has listed) pushes, trust
    /// ConfigMaps, Events and the status writes that are due.
    fn settle(&mut self, pass: Pass) {
        while self.tasks.try_join_next().is_some() {}
        if pass.changed {
            self.outputs.metrics.reconciles.inc();
            if self.gauges_due.is_none() {
                let wait = self.config.view_interval.max(self.gauges_cost * 20);
                self.gauges_due = Some(Instant::now() + wait);
            }
        }
        // Nothing is pushed or written before every watch has listed once: pods
        // listed before the policies would otherwise be sent a baseline document (and
        // drop the policies they hold) when the operator restarts. The index keeps what
        // is queued until then.
        if !self.outputs.health.synced() {
            return;
        }
        if pass.changed {
            let pushes = self.index.take_pushes(SystemTime::now());
            if !pushes.is_empty() {
                self.pusher
                    .spawn_all_in(pushes, &self.reports, &mut self.tasks);
            }
            let now = Instant::now();
            for key in self.index.take_changed_policies() {
                self.debounce.mark(key, now);
            }
        }
        if pass.pods_changed {
            for ns in self.index.pod_namespaces() {
                if !self.trusted.contains(ns) {
                    self.trusted.insert(ns.to_owned());
                    self.outputs.trust.publish(ns);
                }
            }
        }
        self.check_trust();
        self.write_due_statuses();
    }

    /// Events and status writes for the policies whose debounce interval is over.
    fn write_due_statuses(&mut self) {
        for key in self.debounce.take_due(Instant::now()) {
            let unacknowledged = &self.outputs.metrics.policy_pods_unacknowledged;
            let labels = metrics::policy_labels(&key.namespace, &key.name);
            let Some(view) = self.index.policy_view(&key) else {
                // Deleted.
                self.policy_events.forget(&key);
                unacknowledged.remove(&labels);
                continue;
            };
            unacknowledged
                .get_or_create(&labels)
                .set(i64::from(view.pods_unacknowledged()));
            let entry = self.observed.get(&key).cloned().unwrap_or_default();
            for event in self
                .policy_events
                .observe(&view, entry.status.as_ref(), Instant::now())
            {
                self.outputs.events.send(event, entry.uid.as_deref());
            }
            if self.writing.contains(&key) {
                // One write per policy at a time: this one waits for the next slot.
                self.debounce.mark(key, Instant::now());
                continue;
            }
            let status = view.status(entry.status.as_ref(), SystemTime::now());
            if entry.status.as_ref() == Some(&status) {
                continue;
            }
            self.writing.insert(key.clone());
            self.status_writer
                .spawn(&mut self.tasks, &self.statuses, key, status);
        }
    }

    fn stop(mut self) {
        self.outputs.health.stop();
        // Another replica takes over and reports them.
        self.outputs.metrics.policy_pods_unacknowledged.clear();
        self.tasks.abort_all();
        self.outputs.pod_views.published.send_replace(None);
        log::info!("controller stopped");
    }
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
