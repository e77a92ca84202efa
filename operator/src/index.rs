//! The index: policies + pods → each pod's policy document, the pushes to make, and
//! each policy's view. Pure and synchronous: no I/O, no clock (every change takes `now`),
//! so tests drive it directly and a controller drives it from its watch streams.
//!
//! # What it decides
//!
//! - A pod's document holds, as layers, every LogPolicy of its namespace whose selector
//!   matches the pod's labels and that has not expired, ordered by priority (highest
//!   first), then age (oldest first), then name; at most
//!   [`MAX_DOCUMENT_LAYERS`](logpolicy::wire::MAX_DOCUMENT_LAYERS) of them.
//! - A pod's version increases strictly whenever its layers change (it is
//!   `max(previous + 1, now in Unix milliseconds)`, so a restarted operator still issues
//!   versions newer than the ones pods hold).
//! - A pod is pushed its document when it first has an address, when its layers change
//!   (including to none: back to its baseline), when its process changed (new uid, new IP
//!   or port, a container restarted), and when a read-back shows drift.
//! - Each policy remembers the pods it matched, so narrowing its selector or deleting it
//!   recomputes exactly those pods.
//! - A pod that leaves the opted-in set (deleted, or its label removed) while it may
//!   hold pushed layers is sent its baseline (a document without layers) before it is
//!   forgotten; a pod holding nothing is forgotten at once.
//! - A failed push is retried per pod with capped exponential backoff ([`Retry`]),
//!   and at once when the pod's endpoint may answer now (a new process, the pod turning
//!   Ready). Pods that acknowledged their last push are pushed in their own [`Lane`].
//! - A standing policy (no `duration`, allowed when the operator has no
//!   `--max-duration`) reaches a pod as a layer that ends [`STANDING_LEASE`] after the
//!   document's `issuedAt` (a pod refuses a layer that never ends); once the pod
//!   acknowledged it, the pod is sent a new version [`STANDING_RENEWAL`] later. With the
//!   operator gone, a standing policy falls back by itself within a day.
//! - A pod that refuses a push because it holds a version at least as new (a `409`
//!   with its held version) is pushed a version past the one it holds, at once, once
//!   per attempt: that is how a restarted operator catches up with the versions an
//!   earlier process issued. A pod that refuses that one too, or holds a version no
//!   operator issues (more than [`MAX_HELD_AHEAD`] ahead of the index's clock, e.g.
//!   2^53 - 1), does not converge: it is a failure, retried with backoff (capped at
//!   [`RETRY_CAP_LATER`]) and reported with what to do (restart the pod), never a loop
//!   of pushes.
//!
//! # How it is driven
//!
//! ```
//! use std::time::{Duration, UNIX_EPOCH};
//! use logpolicy_operator::{Index, PodInfo, PolicyInput, PushResult};
//!
//! let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
//! let mut index = Index::new();
//! index.apply_pod(PodInfo::new("shop", "web-1", "u1", Some([127, 0, 0, 7].into()), 9090).label("app", "web"), now);
//! let spec = serde_json::from_value(serde_json::json!({
//!     "selector": {"matchLabels": {"app": "web"}},
//!     "targets": [{"target": "shop::payment", "level": "debug"}],
//!     "duration": "15m"}))?;
//! index.apply_policy(PolicyInput::new("shop", "debug-payments", spec), now);
//!
//! let pushes = index.take_pushes(now);
//! assert_eq!(pushes.len(), 1);
//! assert_eq!(pushes[0].document.layers[0].source, "shop/debug-payments");
//! assert_eq!(pushes[0].document.layers[0].expires_at, Some(now + Duration::from_secs(900)));
//!
//! index.record_push(&pushes[0].pod, pushes[0].ticket, PushResult::Applied);
//! let view = index.policy_view(&"shop/debug-payments".parse()?).unwrap();
//! assert_eq!((view.matched, view.applied), (1, 1));
//! assert_eq!(index.next_expiry(), Some(now + Duration::from_secs(900)));
//!
//! // At expiry the pod is pushed a document without the layer.
//! index.tick(now + Duration::from_secs(900));
//! let pushes = index.take_pushes(now + Duration::from_secs(900));
//! assert!(pushes[0].document.layers.is_empty());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kube::ResourceExt;
use logpolicy::policy::LayerSpec;
use logpolicy::wire::{
    PodRef, PolicyDocument, ReplayView, MAX_DOCUMENT_LAYERS, MAX_DOCUMENT_VERSION,
};

use crate::pods::PodInfo;
use logpolicy_api::crd::{LogPolicy, LogPolicySpec, MAX_FAILING_PODS};
use logpolicy_api::validate::{
    check_lifetime, validate, Expiry, FieldError, MaxDuration, ValidatedPolicy,
};

pub use logpolicy_api::keys::{NotNamespaceName, PodKey, PolicyKey};

/// A LogPolicy as the index takes it.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyInput {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `metadata.uid`: with the generation, the id of the replay its `spec.replay` asks
    /// for (`uid/generation`: once per generation, and a recreated policy asks again).
    pub uid: String,
    /// `metadata.generation`.
    pub generation: i64,
    /// `metadata.creationTimestamp`: between equal priorities, the older policy wins.
    pub created: SystemTime,
    /// The spec.
    pub spec: LogPolicySpec,
    /// `status.expirationTime`, when the status describes this generation: the expiry a
    /// `duration` was resolved to before (by this or an earlier operator process).
    pub recorded_expiration: Option<SystemTime>,
}

impl PolicyInput {
    /// A policy of generation 1, created at the Unix epoch, with no recorded expiry.
    pub fn new(namespace: &str, name: &str, spec: LogPolicySpec) -> Self {
        PolicyInput {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            uid: String::new(),
            generation: 1,
            created: UNIX_EPOCH,
            spec,
            recorded_expiration: None,
        }
    }

    /// The input for a LogPolicy from the API; `None` without a namespace.
    pub fn from_resource(lp: &LogPolicy) -> Option<Self> {
        let generation = lp.metadata.generation.unwrap_or(0);
        let recorded_expiration = lp
            .status
            .as_ref()
            .filter(|s| s.observed_generation == Some(generation))
            .and_then(|s| s.expiration_time.as_deref())
            .and_then(|t| logpolicy::clock::parse_rfc3339(t).ok());
        let created = lp
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| SystemTime::from(t.0))
            .unwrap_or(UNIX_EPOCH);
        Some(PolicyInput {
            namespace: lp.namespace()?,
            name: lp.name_any(),
            uid: lp.metadata.uid.clone().unwrap_or_default(),
            generation,
            created,
            spec: lp.spec.clone(),
            recorded_expiration,
        })
    }
}

/// Identifies one push: a result for an older version or an older process of the pod
/// is ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PushTicket {
    /// The document version pushed.
    pub version: u64,
    /// The pod's process generation (bumped on a new uid, address or container restart).
    pub epoch: u64,
}

/// A document to send to a pod.
#[derive(Debug, Clone, PartialEq)]
pub struct Push {
    /// Which pod.
    pub pod: PodKey,
    /// Its admin endpoint.
    pub addr: SocketAddr,
    /// Pass back to [`Index::record_push`] with the outcome.
    pub ticket: PushTicket,
    /// What to send (the pusher signs its JSON).
    pub document: PolicyDocument,
    /// Its queue.
    pub lane: Lane,
}

/// A pod to read back (`GET /logpolicy`) during a resync.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadBackTarget {
    /// Which pod.
    pub pod: PodKey,
    /// Its admin endpoint.
    pub addr: SocketAddr,
    /// The version it acknowledged; pass back to [`Index::record_read_back`].
    pub ticket: PushTicket,
}

/// How a push ended, as the index records it. The pusher (a module above this one) converts
/// its `PushOutcome` into it, so that the index knows nothing of HTTP: only whether the
/// pod holds its document, and if not, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushResult {
    /// The pod holds the document.
    Applied,
    /// The pod does not hold it.
    Failed {
        /// A short, bounded label: `rejected`, `stale`, `timeout`... (the per-pod view's
        /// `lastPush.outcome`).
        label: &'static str,
        /// Why, for the per-pod view and the policy's failing pods.
        reason: String,
        /// The version the pod says it holds, when it refused the push as stale: if it is
        /// not older than the version pushed, another writer got ahead (an earlier
        /// operator process) and the pod is issued a newer version of the same content.
        held: Option<u64>,
        /// Whether, and how soon, another attempt is worth making.
        retry: Retry,
    },
}

/// Whether, and how soon, a failed push is tried again (per pod, with capped
/// exponential backoff: [`RETRY_BASE`] doubled per consecutive failure).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Not before something changes (the pod refused the document) or the resync.
    No,
    /// Soon (refused connection, 5xx): an attempt costs little; backoff capped at
    /// [`RETRY_CAP_SOON`].
    Soon,
    /// Later (no answer in time): each attempt holds a connection for the whole
    /// timeout; backoff capped at [`RETRY_CAP_LATER`].
    Later,
}

/// The wait before the first retry of a failed push.
pub const RETRY_BASE: Duration = Duration::from_secs(1);
/// The longest wait between retries of a pod that refuses or errs.
pub const RETRY_CAP_SOON: Duration = Duration::from_secs(5);
/// The longest wait between retries of a pod that does not answer.
pub const RETRY_CAP_LATER: Duration = Duration::from_secs(30);
/// The furthest ahead of the index's clock (as Unix milliseconds, what versions are) a
/// version a pod holds may be for the operator to move past it: versions are issued as
/// `max(previous + 1, now in Unix ms)`, so one further ahead was not issued by an
/// operator with a sane clock, and following it would only carry this pod's versions
/// towards the highest one a pod accepts.
pub const MAX_HELD_AHEAD: Duration = Duration::from_secs(24 * 3600);
/// How long a standing policy's layer lasts in a document: from its `issuedAt`.
pub const STANDING_LEASE: Duration = Duration::from_secs(24 * 3600);
/// How long after a pod acknowledged a document with a standing layer it is sent a new
/// one (the layer renewed), well before [`STANDING_LEASE`] runs out.
pub const STANDING_RENEWAL: Duration = Duration::from_secs(12 * 3600);
/// Attempts to withdraw the layers of a pod that left (deleted, opted out) before it is
/// forgotten.
pub const WITHDRAW_ATTEMPTS: u32 = 3;

/// Which queue a push waits in: pods that acknowledged their current process's last
/// push are never behind pods that are new or failing (which may hang until the
/// timeout).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lane {
    /// The pod's process acknowledged its last push.
    Known,
    /// New, failing, or not heard from yet.
    Unproven,
}

impl PushResult {
    /// `applied`, or the failure's label.
    pub fn label(&self) -> &'static str {
        match self {
            PushResult::Applied => "applied",
            PushResult::Failed { label, .. } => label,
        }
    }
}

/// What a policy achieved, for its status.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyView {
    /// Which policy.
    pub key: PolicyKey,
    /// The latest generation seen.
    pub generation: i64,
    /// Why the latest generation is invalid (empty when valid).
    pub errors: Vec<FieldError>,
    /// The generation in force: the latest if valid, else the last valid one, if any.
    pub in_force_generation: Option<i64>,
    /// When the generation in force stops applying.
    pub expires_at: Option<SystemTime>,
    /// Whether it has expired.
    pub expired: bool,
    /// Whether its `expirationTime` was already past when the policy was created
    /// (`metadata.creationTimestamp`): it never applied to any pod.
    pub expired_before_creation: bool,
    /// Opted-in pods its selector matches.
    pub matched: u32,
    /// Of those, pods that acknowledged a document holding its current layer.
    pub applied: u32,
    /// Of those, pods that refused it or could not be reached.
    pub failed: u32,
    /// Of those, pods not yet pushed or not answered yet.
    pub pending: u32,
    /// Up to ten failing pods (by name) and why.
    pub failing: Vec<(String, String)>,
    /// The levels the generation in force sets, as directives
    /// ([`ValidatedPolicy::levels`](logpolicy_api::validate::ValidatedPolicy::levels)).
    pub levels: Option<String>,
    /// What the pods replayed of the window the generation in force asks for (`None`
    /// when it asks for none).
    pub replay: Option<ReplaySummary>,
}

/// What the selected pods said they replayed for a policy's current replay id.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReplaySummary {
    /// The generation that asked.
    pub generation: i64,
    /// Pods that replayed it.
    pub pods: u32,
    /// Pods the policy selects (that may replay it).
    pub matched: u32,
    /// Lines they replayed, in all.
    pub lines: u64,
    /// The earliest start of the window asked for.
    pub asked_from: Option<SystemTime>,
    /// Of the pods that held less than asked, the latest time their store still held
    /// lines from.
    pub held_from: Option<SystemTime>,
    /// Pods whose store no longer held the start of the window.
    pub pods_held_less: u32,
}

impl ReplaySummary {
    fn add(&mut self, r: &ReplayView) {
        self.pods += 1;
        self.lines = self.lines.saturating_add(r.lines);
        self.asked_from = Some(
            self.asked_from
                .map_or(r.asked_from, |a| a.min(r.asked_from)),
        );
        // The pod says whether lines of the window had expired before the replay.
        if let Some(held) = r.held_from.filter(|_| !r.complete) {
            self.pods_held_less += 1;
            self.held_from = Some(self.held_from.map_or(held, |h| h.max(held)));
        }
    }
}

#[derive(Debug)]
struct Active {
    generation: i64,
    policy: ValidatedPolicy,
    expires_at: Option<SystemTime>,
    expired: bool,
    /// An `expirationTime` at or before `metadata.creationTimestamp`.
    expired_before_creation: bool,
    layer: Arc<LayerSpec>,
}

#[derive(Debug)]
struct PolicyState {
    generation: i64,
    created: SystemTime,
    errors: Vec<FieldError>,
    active: Option<Active>,
    /// Pods its selector matches (whatever its expiry), remembered so that a narrower
    /// selector or a deletion recomputes them.
    covered: BTreeSet<PodKey>,
    /// The input last put in force, while nothing refuses it: the same input again (a
    /// watch event for a write of its status, or of its labels) changes nothing.
    applied: Option<PolicyInput>,
}

impl PolicyState {
    fn matches(&self, pod: &PodInfo) -> bool {
        self.active
            .as_ref()
            .is_some_and(|a| a.policy.selector.matches(&pod.labels))
    }

    fn live_layer(&self) -> Option<&Active> {
        self.active.as_ref().filter(|a| !a.expired)
    }
}

#[derive(Debug)]
struct PodState {
    info: PodInfo,
    /// Its document's layers and the policies they come from, in order.
    layers: Vec<Arc<LayerSpec>>,
    sources: Vec<PolicyKey>,
    /// Policies that select it beyond the most layers a document may carry.
    overflow: Vec<PolicyKey>,
    /// The document version; 0 before the first decision.
    version: u64,
    epoch: u64,
    /// What the pod acknowledged: version and layers.
    acked: Option<(u64, Vec<Arc<LayerSpec>>)>,
    /// The layers its previous process had acknowledged when its container restarted:
    /// sent with the next document (the pod writes their end lines) until one is
    /// acknowledged.
    lost: Vec<Arc<LayerSpec>>,
    /// Why the last push of the current version failed.
    failure: Option<String>,
    /// How the last push (of any version) ended, and when.
    last_push: Option<LastPush>,
    /// Consecutive failed pushes to this process.
    failures: u32,
    /// When the next retry is due (also in [`Index::retries`]).
    retry_at: Option<SystemTime>,
    /// Pushes taken ([`Index::take_pushes`]) whose report has not come yet: a
    /// resync does not push a pod again while its document is on the way (a second
    /// push of the same version would be refused as stale, and that refusal read as
    /// another writer ahead: a newer version, pushed a third time).
    pushing: u32,
    /// This attempt already moved the version past one the pod said it holds (reset
    /// by an acknowledgement, a new process and a retry coming due).
    passed_held: bool,
    /// When its standing layers are renewed (also in [`Index::renewals`]).
    renew_at: Option<SystemTime>,
    /// The replays its process reported (the last per layer source, at most one per
    /// layer it was pushed).
    replays: Vec<ReplayView>,
}

impl PodState {
    /// Whether the pod may hold pushed layers: its document has some, or it
    /// acknowledged some.
    fn may_hold_layers(&self) -> bool {
        !self.layers.is_empty() || self.acked.as_ref().is_some_and(|(_, l)| !l.is_empty())
    }

    fn lane(&self) -> Lane {
        if self.acked.is_some() && self.failures == 0 {
            Lane::Known
        } else {
            Lane::Unproven
        }
    }
}

/// A pod that left the opted-in set (deleted, or its label removed) while it may hold
/// pushed layers: it is sent a document without them (back to its baseline) before it
/// is forgotten, at most [`WITHDRAW_ATTEMPTS`] times.
#[derive(Debug)]
struct Departed {
    info: PodInfo,
    version: u64,
    epoch: u64,
    attempts: u32,
    retry_at: Option<SystemTime>,
}

/// The index. See [the module](self).
#[derive(Debug, Default)]
pub struct Index {
    policies: BTreeMap<PolicyKey, PolicyState>,
    /// Boxed: the map's nodes then hold a pointer, not the state (the nodes of a map
    /// filled in key order, as a listing fills it, stay half empty).
    pods: BTreeMap<PodKey, Box<PodState>>,
    /// How many of `pods` each namespace has (kept with `pods`, so that the namespaces
    /// are known without a walk over every pod).
    namespaces: BTreeMap<String, usize>,
    /// Pods with a document to push.
    to_push: BTreeSet<PodKey>,
    /// Pods that left while holding layers, to withdraw them from.
    departed: BTreeMap<PodKey, Departed>,
    /// Departed pods with a withdrawal to send.
    to_withdraw: BTreeSet<PodKey>,
    /// Failed pushes to retry, by when (pods and departed pods).
    retries: BTreeSet<(SystemTime, PodKey)>,
    /// Pods holding standing layers, by when they are renewed.
    renewals: BTreeSet<(SystemTime, PodKey)>,
    /// Policies whose view may have changed since the last `take_changed_policies`.
    changed: BTreeSet<PolicyKey>,
    now: Option<SystemTime>,
    /// The longest a policy may apply (none: no limit).
    max_duration: MaxDuration,
}

/// The index's parts that recomputing a pod's layers reads and writes, borrowed apart
/// so that a caller may walk a policy's `covered` while the pods it names are
/// recomputed. At 50,000 pods, copying that set first, and each pod's policy keys
/// whether they changed or not, took 0.6-0.8 of the controller loop's 4.7-5.9 CPU
/// seconds a change.
struct Recompute<'a> {
    policies: &'a BTreeMap<PolicyKey, PolicyState>,
    pods: &'a mut BTreeMap<PodKey, Box<PodState>>,
    changed: &'a mut BTreeSet<PolicyKey>,
    to_push: &'a mut BTreeSet<PodKey>,
    now: SystemTime,
}

impl<'a> Recompute<'a> {
    fn of(index: &'a mut Index) -> Self {
        Recompute {
            now: index.now(),
            policies: &index.policies,
            pods: &mut index.pods,
            changed: &mut index.changed,
            to_push: &mut index.to_push,
        }
    }

    /// Recomputes one pod's layers from the policies covering it; a new document when
    /// they changed.
    fn pod(&mut self, key: &PodKey) {
        let policies = self.policies;
        let Some(pod) = self.pods.get_mut(key) else {
            return;
        };
        let mut candidates: Vec<(&PolicyKey, &PolicyState, &Active)> = policies
            .range(PolicyKey::new(&key.namespace, "")..)
            .take_while(|(k, _)| k.namespace == key.namespace)
            .filter(|(_, p)| p.covered.contains(key))
            .filter_map(|(k, p)| Some((k, p, p.live_layer()?)))
            .collect();
        candidates.sort_by_key(|(k, p, a)| (Reverse(a.policy.priority), p.created, *k));
        let (kept, over) = candidates.split_at(candidates.len().min(MAX_DOCUMENT_LAYERS));
        let new_document =
            pod.version == 0 || !pod.layers.iter().eq(kept.iter().map(|(_, _, a)| &a.layer));
        let same_sources = pod.sources.iter().eq(kept.iter().map(|(k, _, _)| *k))
            && pod.overflow.iter().eq(over.iter().map(|(k, _, _)| *k));
        if new_document || !same_sources {
            // The views of the policies it leaves, joins or stays in may change.
            for p in pod
                .sources
                .iter()
                .chain(&pod.overflow)
                .chain(candidates.iter().map(|(k, _, _)| *k))
            {
                if !self.changed.contains(p) {
                    self.changed.insert(p.clone());
                }
            }
        }
        if new_document {
            pod.version = next_version(pod.version, self.now);
            pod.layers = kept.iter().map(|(_, _, a)| a.layer.clone()).collect();
            pod.failure = None;
            self.to_push.insert(key.clone());
        }
        if !same_sources {
            pod.sources = kept.iter().map(|(k, _, _)| (*k).clone()).collect();
            pod.overflow = over.iter().map(|(k, _, _)| (*k).clone()).collect();
        }
    }
}

fn unix_millis(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

fn next_version(prev: u64, now: SystemTime) -> u64 {
    prev.saturating_add(1).max(unix_millis(now))
}

/// Whether a pod's held version may be moved past: not beyond what the operator issues
/// ([`MAX_HELD_AHEAD`]), and leaving a version the pod accepts.
fn may_pass(held: u64, now: SystemTime) -> bool {
    let ahead = u64::try_from(MAX_HELD_AHEAD.as_millis()).unwrap_or(u64::MAX);
    held <= unix_millis(now).saturating_add(ahead)
        && next_version(held, now) <= MAX_DOCUMENT_VERSION
}

/// Why a pod that holds version `held` does not take `sent`: it says it holds a newer
/// one, and the operator did not (or no longer may) move past it.
fn held_newer_reason(held: u64, sent: u64, passed: bool, now: SystemTime) -> String {
    let why = if !may_pass(held, now) {
        " and beyond any version the operator issues (versions are Unix milliseconds)"
    } else if passed {
        ", and again after the operator moved past the version it held"
    } else {
        ""
    };
    format!(
        "the pod holds version {held}, newer than the operator's {sent}{why}: it refuses every document until its process restarts; restart the pod (delete it, or restart its container)"
    )
}

/// The wait before retry number `failures` (1: the first) of pod `key`:
/// `RETRY_BASE * 2^(failures-1)`, capped, scaled by a factor in [0.5, 1) derived from
/// the key, so that pods failing together do not retry together (deterministic: the
/// index has no randomness).
fn retry_delay(key: &PodKey, failures: u32, retry: Retry) -> Option<Duration> {
    use std::hash::{Hash, Hasher};
    let cap = match retry {
        Retry::No => return None,
        Retry::Soon => RETRY_CAP_SOON,
        Retry::Later => RETRY_CAP_LATER,
    };
    let exp = RETRY_BASE
        .saturating_mul(1u32 << failures.saturating_sub(1).min(16))
        .min(cap);
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (key, failures).hash(&mut h);
    let spread = (h.finish() % 1000) as f64 / 2000.0;
    Some(exp.mul_f64(0.5 + spread))
}

impl Index {
    /// An empty index.
    pub fn new() -> Self {
        Index::default()
    }

    /// An empty index that refuses policies applying longer than `limit` (or without an
    /// expiry), as invalid specs: their last valid generation, if any, stays in force.
    pub fn with_max_duration(limit: MaxDuration) -> Self {
        Index {
            max_duration: limit,
            ..Index::default()
        }
    }

    fn now(&self) -> SystemTime {
        self.now.unwrap_or(UNIX_EPOCH)
    }

    /// Adds or updates a LogPolicy. A valid spec replaces the one in force; an invalid
    /// one is recorded (see [`PolicyView::errors`]) and the last valid generation, if
    /// any, stays in force. The input in force again changes nothing: its status writes
    /// come back as watch events, and at 50,000 pods each made a walk over every pod.
    pub fn apply_policy(&mut self, input: PolicyInput, now: SystemTime) {
        self.tick(now);
        let now = self.now();
        let key = PolicyKey::new(&input.namespace, &input.name);
        if self
            .policies
            .get(&key)
            .is_some_and(|p| p.applied.as_ref() == Some(&input))
        {
            return;
        }
        let state = self
            .policies
            .entry(key.clone())
            .or_insert_with(|| PolicyState {
                generation: input.generation,
                created: input.created,
                errors: Vec::new(),
                active: None,
                covered: BTreeSet::new(),
                applied: None,
            });
        state.generation = input.generation;
        state.created = input.created;
        let limit = self.max_duration;
        let checked = validate(&input.spec).and_then(|policy| {
            // The limit is for raises: a policy that can only make pods write less may
            // stand.
            if policy.only_lowers() {
                return Ok(policy);
            }
            check_lifetime(policy.expiry, now, limit)
                .map(|()| policy)
                .map_err(|e| vec![e])
        });
        match checked {
            Ok(policy) => {
                let same_generation = state
                    .active
                    .as_ref()
                    .filter(|a| a.generation == input.generation);
                let expires_at = match policy.expiry {
                    Expiry::Never => None,
                    Expiry::At(t) => Some(t),
                    Expiry::After(d) => same_generation
                        .and_then(|a| a.expires_at)
                        .or(input.recorded_expiration)
                        .or_else(|| now.checked_add(d)),
                };
                let expired_before_creation =
                    matches!(policy.expiry, Expiry::At(t) if t <= input.created);
                let mut layer = policy.layer(&key.to_string(), expires_at);
                layer.replay = policy.replay(format!("{}/{}", input.uid, input.generation));
                let layer = Arc::new(layer);
                state.errors.clear();
                state.active = Some(Active {
                    generation: input.generation,
                    policy,
                    expires_at,
                    expired: expires_at.is_some_and(|t| now >= t),
                    expired_before_creation,
                    layer,
                });
            }
            Err(errors) => state.errors = errors,
        }
        // An input refused may be taken later (a lifetime checked against the time).
        state.applied = state.errors.is_empty().then_some(input);
        let before = std::mem::take(&mut state.covered);
        state.covered = self
            .pods
            .range(PodKey::new(&key.namespace, "")..)
            .take_while(|(k, _)| k.namespace == key.namespace)
            .filter(|(_, p)| state.matches(&p.info))
            .map(|(k, _)| k.clone())
            .collect();
        let mut recompute = Recompute::of(self);
        let policies = recompute.policies;
        if let Some(state) = policies.get(&key) {
            for pod in before.union(&state.covered) {
                recompute.pod(pod);
            }
        }
        self.changed.insert(key);
    }

    /// Removes a LogPolicy: the pods it covered are recomputed without it.
    pub fn delete_policy(&mut self, key: &PolicyKey) {
        if let Some(state) = self.policies.remove(key) {
            self.changed.insert(key.clone());
            for pod in &state.covered {
                self.recompute_pod(pod);
            }
        }
    }

    /// Replaces every policy with these (after a watch restart): those missing are
    /// deleted.
    pub fn reset_policies(&mut self, inputs: Vec<PolicyInput>, now: SystemTime) {
        self.reset_policies_in(None, inputs, now);
    }

    /// [`reset_policies`](Self::reset_policies) for one namespace (`Some`), for a
    /// watch of that namespace only: policies of other namespaces are kept.
    pub fn reset_policies_in(
        &mut self,
        namespace: Option<&str>,
        inputs: Vec<PolicyInput>,
        now: SystemTime,
    ) {
        let keep: BTreeSet<PolicyKey> = inputs
            .iter()
            .map(|i| PolicyKey::new(&i.namespace, &i.name))
            .collect();
        let gone = missing(self.policies.keys(), namespace, &keep, |k| &k.namespace);
        for k in &gone {
            self.delete_policy(k);
        }
        for i in inputs {
            self.apply_policy(i, now);
        }
    }

    /// Adds or updates an opted-in pod. A new uid, a new address or a container restart
    /// means a new process that holds nothing: it is pushed its document again. A pod
    /// that turns Ready without holding its document is pushed at once (its endpoint
    /// may answer now), whatever its retry backoff.
    pub fn apply_pod(&mut self, info: PodInfo, now: SystemTime) {
        self.tick(now);
        let key = PodKey::new(&info.namespace, &info.name);
        let returning = self.departed.remove(&key);
        if let Some(d) = &returning {
            self.to_withdraw.remove(&key);
            if let Some(t) = d.retry_at {
                self.retries.remove(&(t, key.clone()));
            }
        }
        let labels_changed = match self.pods.get_mut(&key) {
            Some(state) => {
                let new_process = state.info.uid != info.uid
                    || state.info.ip != info.ip
                    || state.info.port != info.port
                    || state.info.containers != info.containers;
                let new_uid = state.info.uid != info.uid;
                let restarted = !new_uid && state.info.containers != info.containers;
                let turned_ready = info.ready && !state.info.ready;
                let labels_changed = state.info.labels != info.labels;
                state.info = info;
                let in_sync = state
                    .acked
                    .as_ref()
                    .is_some_and(|(v, _)| *v == state.version);
                if new_process || (turned_ready && !in_sync) {
                    if new_process {
                        state.epoch += 1;
                        // The same pod, a new process (its container restarted): what
                        // the last one held is lost, and the next document says so.
                        match state.acked.take() {
                            Some((_, layers)) if restarted && !layers.is_empty() => {
                                state.lost = layers;
                            }
                            _ if new_uid => state.lost.clear(),
                            _ => {}
                        }
                        state.failure = None;
                        state.passed_held = false;
                        state.replays.clear();
                    }
                    state.failures = 0;
                    if let Some(t) = state.retry_at.take() {
                        self.retries.remove(&(t, key.clone()));
                    }
                    if state.version > 0 {
                        self.to_push.insert(key.clone());
                    }
                    for p in state.sources.iter().chain(&state.overflow) {
                        self.changed.insert(p.clone());
                    }
                }
                labels_changed
            }
            None => {
                *self.namespaces.entry(key.namespace.clone()).or_default() += 1;
                self.pods.insert(
                    key.clone(),
                    Box::new(PodState {
                        info,
                        layers: Vec::new(),
                        sources: Vec::new(),
                        overflow: Vec::new(),
                        version: 0,
                        // A pod that comes back (relabelled) is a new process for
                        // the reports of its withdrawal still in flight.
                        epoch: returning.as_ref().map_or(0, |d| d.epoch + 1),
                        acked: None,
                        lost: Vec::new(),
                        failure: None,
                        last_push: None,
                        failures: 0,
                        retry_at: None,
                        pushing: 0,
                        passed_held: false,
                        renew_at: None,
                        replays: Vec::new(),
                    }),
                );
                true
            }
        };
        if labels_changed {
            if let Some(pod) = self.pods.get(&key) {
                for (pk, p) in self
                    .policies
                    .range_mut(PolicyKey::new(&key.namespace, "")..)
                    .take_while(|(k, _)| k.namespace == key.namespace)
                {
                    let was = p.covered.contains(&key);
                    let is = p.matches(&pod.info);
                    if is && !was {
                        p.covered.insert(key.clone());
                    } else if was && !is {
                        p.covered.remove(&key);
                    }
                    if is != was {
                        self.changed.insert(pk.clone());
                    }
                }
            }
        }
        self.recompute_pod(&key);
        if let (Some(d), Some(pod)) = (returning, self.pods.get_mut(&key)) {
            // Newer than anything it was sent before it left.
            pod.version = pod.version.max(d.version + 1);
        }
    }

    /// Removes a pod (deleted, or no longer opted in). If it may hold pushed layers,
    /// it is sent a document without them (its baseline) before it is forgotten: a
    /// pod that opts out while raised does not stay raised.
    pub fn delete_pod(&mut self, key: &PodKey) {
        let Some(state) = self.pods.remove(key) else {
            return;
        };
        if let Some(n) = self.namespaces.get_mut(&key.namespace) {
            *n -= 1;
            if *n == 0 {
                self.namespaces.remove(&key.namespace);
            }
        }
        self.to_push.remove(key);
        if let Some(t) = state.retry_at {
            self.retries.remove(&(t, key.clone()));
        }
        if let Some(t) = state.renew_at {
            self.renewals.remove(&(t, key.clone()));
        }
        for (pk, p) in self
            .policies
            .range_mut(PolicyKey::new(&key.namespace, "")..)
            .take_while(|(k, _)| k.namespace == key.namespace)
        {
            if p.covered.remove(key) {
                self.changed.insert(pk.clone());
            }
        }
        if state.may_hold_layers() && state.info.admin_addr().is_ok() {
            let version = next_version(state.version, self.now());
            self.departed.insert(
                key.clone(),
                Departed {
                    info: state.info,
                    version,
                    epoch: state.epoch,
                    attempts: 0,
                    retry_at: None,
                },
            );
            self.to_withdraw.insert(key.clone());
        }
    }

    /// How many pods that left are still to be sent their baseline.
    pub fn departed_count(&self) -> usize {
        self.departed.len()
    }

    /// When the next retry of a failed push is due: when to call
    /// [`take_pushes`](Self::take_pushes) next.
    pub fn next_retry(&self) -> Option<SystemTime> {
        let retry = self.retries.first().map(|(t, _)| *t);
        let renewal = self.renewals.first().map(|(t, _)| *t);
        match (retry, renewal) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Replaces every pod with these (after a watch restart): those missing are deleted.
    pub fn reset_pods(&mut self, pods: Vec<PodInfo>, now: SystemTime) {
        self.reset_pods_in(None, pods, now);
    }

    /// [`reset_pods`](Self::reset_pods) for one namespace (`Some`): pods of other
    /// namespaces are kept.
    pub fn reset_pods_in(&mut self, namespace: Option<&str>, pods: Vec<PodInfo>, now: SystemTime) {
        let keep: BTreeSet<PodKey> = pods
            .iter()
            .map(|p| PodKey::new(&p.namespace, &p.name))
            .collect();
        let gone = missing(self.pods.keys(), namespace, &keep, |k| &k.namespace);
        for k in &gone {
            self.delete_pod(k);
        }
        for p in pods {
            self.apply_pod(p, now);
        }
    }

    /// Moves the index's time to `now` (never backwards): policies that expire by then
    /// leave their pods' documents.
    pub fn tick(&mut self, now: SystemTime) {
        let now = self.now.map_or(now, |t| t.max(now));
        self.now = Some(now);
        while let Some((t, key)) = self.retries.first().cloned() {
            if t > now {
                break;
            }
            self.retries.pop_first();
            if let Some(pod) = self.pods.get_mut(&key) {
                pod.retry_at = None;
                pod.passed_held = false;
                self.to_push.insert(key);
            } else if let Some(d) = self.departed.get_mut(&key) {
                d.retry_at = None;
                self.to_withdraw.insert(key);
            }
        }
        while let Some((t, key)) = self.renewals.first().cloned() {
            if t > now {
                break;
            }
            self.renewals.pop_first();
            if let Some(pod) = self.pods.get_mut(&key) {
                if pod.renew_at == Some(t) {
                    pod.renew_at = None;
                    pod.version = next_version(pod.version, now);
                    pod.failure = None;
                    self.to_push.insert(key);
                }
            }
        }
        let mut recompute = BTreeSet::new();
        for (key, p) in &mut self.policies {
            if let Some(a) = &mut p.active {
                let expired = a.expires_at.is_some_and(|t| now >= t);
                if expired != a.expired {
                    a.expired = expired;
                    self.changed.insert(key.clone());
                    recompute.extend(p.covered.iter().cloned());
                }
            }
        }
        for pod in &recompute {
            self.recompute_pod(pod);
        }
    }

    /// The earliest expiry still to come: when to call [`Index::tick`] next.
    pub fn next_expiry(&self) -> Option<SystemTime> {
        self.policies
            .values()
            .filter_map(|p| p.active.as_ref())
            .filter(|a| !a.expired)
            .filter_map(|a| a.expires_at)
            .min()
    }

    fn recompute_pod(&mut self, key: &PodKey) {
        Recompute::of(self).pod(key);
    }

    /// The documents to send now, one per pod whose document changed or whose process
    /// needs it again, and a baseline document for each pod that left while holding
    /// layers. Pods without a usable address are kept for later (their policies count
    /// them as pending, or failed for a bad port annotation); pods waiting for a retry
    /// are pushed when it is due.
    pub fn take_pushes(&mut self, now: SystemTime) -> Vec<Push> {
        self.tick(now);
        let now = self.now();
        let mut out = Vec::with_capacity(self.to_push.len() + self.to_withdraw.len());
        let mut keep = BTreeSet::new();
        for key in std::mem::take(&mut self.to_push) {
            let Some(pod) = self.pods.get_mut(&key) else {
                continue;
            };
            if pod.retry_at.is_some() {
                // Backing off: the retry queues it again.
                continue;
            }
            match pod.info.admin_addr() {
                Ok(addr) => {
                    pod.pushing = pod.pushing.saturating_add(1);
                    out.push(Push {
                        pod: key,
                        addr,
                        ticket: PushTicket {
                            version: pod.version,
                            epoch: pod.epoch,
                        },
                        document: document(pod, now),
                        lane: pod.lane(),
                    });
                }
                Err(_) => {
                    keep.insert(key);
                }
            }
        }
        self.to_push = keep;
        for key in std::mem::take(&mut self.to_withdraw) {
            let Some(d) = self.departed.get(&key) else {
                continue;
            };
            if let Ok(addr) = d.info.admin_addr() {
                out.push(Push {
                    addr,
                    ticket: PushTicket {
                        version: d.version,
                        epoch: d.epoch,
                    },
                    document: PolicyDocument {
                        pod: PodRef::new(&d.info.namespace, &d.info.name, &d.info.uid),
                        version: d.version,
                        issued_at: now,
                        layers: Vec::new(),
                        lost: Vec::new(),
                    },
                    lane: Lane::Unproven,
                    pod: key,
                });
            }
        }
        out
    }

    /// Records how a withdrawal from a departed pod ended: done when applied (or
    /// refused: the pod is not the one that held the layers, or holds a newer
    /// document), retried with backoff otherwise, at most [`WITHDRAW_ATTEMPTS`] times.
    fn record_withdrawal(&mut self, key: &PodKey, ticket: PushTicket, result: &PushResult) -> bool {
        let now = self.now();
        let Some(d) = self.departed.get_mut(key) else {
            return false;
        };
        if ticket.epoch != d.epoch || ticket.version != d.version {
            return false;
        }
        d.attempts += 1;
        let retry = match result {
            PushResult::Applied => None,
            PushResult::Failed { retry, .. } => retry_delay(key, d.attempts, *retry),
        };
        match retry {
            Some(wait) if d.attempts < WITHDRAW_ATTEMPTS => {
                let at = now + wait;
                d.retry_at = Some(at);
                self.retries.insert((at, key.clone()));
            }
            _ => {
                self.departed.remove(key);
            }
        }
        true
    }

    /// Records how a push ended. Returns `false` (and changes nothing) for a result
    /// about an older version or an older process of the pod, or a pod now gone.
    pub fn record_push(
        &mut self,
        key: &PodKey,
        ticket: PushTicket,
        result: impl Into<PushResult>,
    ) -> bool {
        let result = result.into();
        let now = self.now();
        let Some(pod) = self.pods.get_mut(key) else {
            return self.record_withdrawal(key, ticket, &result);
        };
        // Every push taken reports once, whatever its version.
        pod.pushing = pod.pushing.saturating_sub(1);
        if ticket.epoch != pod.epoch || ticket.version != pod.version {
            return false;
        }
        pod.last_push = Some(LastPush {
            at: now,
            version: ticket.version,
            outcome: result.label(),
            error: match &result {
                PushResult::Applied => None,
                PushResult::Failed { reason, .. } => Some(reason.clone()),
            },
        });
        match result {
            PushResult::Applied => {
                if let Some(t) = pod.renew_at.take() {
                    self.renewals.remove(&(t, key.clone()));
                }
                if pod.layers.iter().any(|l| l.expires_at.is_none()) {
                    let t = now + STANDING_RENEWAL;
                    pod.renew_at = Some(t);
                    self.renewals.insert((t, key.clone()));
                }
                pod.acked = Some((pod.version, pod.layers.clone()));
                pod.lost.clear();
                pod.failure = None;
                pod.failures = 0;
                pod.passed_held = false;
            }
            PushResult::Failed {
                held: Some(held), ..
            } if held >= pod.version && !pod.passed_held && may_pass(held, now) => {
                // Another writer (an earlier operator process) got ahead: issue a newer
                // version of the same content, once per attempt.
                pod.version = next_version(held, now);
                pod.passed_held = true;
                pod.failure = None;
                self.to_push.insert(key.clone());
            }
            PushResult::Failed {
                held: Some(held), ..
            } if held >= pod.version => {
                // It does not converge: a failure, backed off, never an immediate push.
                pod.failure = Some(held_newer_reason(held, pod.version, pod.passed_held, now));
                fail(&mut self.retries, key, pod, Retry::Later, now);
            }
            PushResult::Failed { label, .. } if label == "rejected" && !pod.lost.is_empty() => {
                // Refused, perhaps by a layer too old to know `lost`: the end lines are
                // a courtesy, the document is not; at once again without them.
                pod.lost.clear();
                self.to_push.insert(key.clone());
            }
            PushResult::Failed { reason, retry, .. } => {
                pod.failure = Some(reason);
                fail(&mut self.retries, key, pod, retry, now);
            }
        }
        for p in pod.sources.iter().chain(&pod.overflow) {
            self.changed.insert(p.clone());
        }
        true
    }

    /// Records the replays a pod reported (in its answer to a push or a read-back) for
    /// its current process (`ticket.epoch`); the policies they concern get a new view.
    /// At most one per layer source it was pushed is kept. Returns whether anything
    /// changed.
    pub fn record_replays(
        &mut self,
        key: &PodKey,
        ticket: PushTicket,
        mut replays: Vec<ReplayView>,
    ) -> bool {
        let Some(pod) = self.pods.get_mut(key) else {
            return false;
        };
        if ticket.epoch != pod.epoch {
            return false;
        }
        let sources: Vec<String> = pod.sources.iter().map(ToString::to_string).collect();
        replays.retain(|r| sources.contains(&r.policy));
        replays.sort_by(|a, b| a.policy.cmp(&b.policy));
        replays.dedup_by(|a, b| a.policy == b.policy);
        if replays == pod.replays {
            return false;
        }
        for r in replays.iter().chain(&pod.replays) {
            if let Ok(p) = r.policy.parse::<PolicyKey>() {
                self.changed.insert(p);
            }
        }
        pod.replays = replays;
        true
    }

    /// Starts a periodic resync: pods whose last push failed or never happened are
    /// queued for a push again (not those with a push on the way), and the pods in
    /// sync are returned, to be read back.
    pub fn resync(&mut self) -> Vec<ReadBackTarget> {
        let mut out = Vec::new();
        for (key, pod) in &self.pods {
            let Ok(addr) = pod.info.admin_addr() else {
                continue;
            };
            match &pod.acked {
                Some((v, _)) if *v == pod.version => out.push(ReadBackTarget {
                    pod: key.clone(),
                    addr,
                    ticket: PushTicket {
                        version: pod.version,
                        epoch: pod.epoch,
                    },
                }),
                // Not while a push of it is on the way: its report says how it went.
                _ if pod.version > 0 && pod.pushing == 0 => {
                    self.to_push.insert(key.clone());
                }
                _ => {}
            }
        }
        out
    }

    /// Records what a read-back found: `held` is the version the pod reports (`None` if
    /// it holds no pushed document). Drift (any other version than the acknowledged one)
    /// queues a push; returns whether there was drift.
    pub fn record_read_back(
        &mut self,
        key: &PodKey,
        ticket: PushTicket,
        held: Option<u64>,
    ) -> bool {
        let Some(pod) = self.pods.get_mut(key) else {
            return false;
        };
        if ticket.epoch != pod.epoch || ticket.version != pod.version || held == Some(pod.version) {
            return false;
        }
        pod.acked = None;
        self.to_push.insert(key.clone());
        for p in pod.sources.iter().chain(&pod.overflow) {
            self.changed.insert(p.clone());
        }
        true
    }

    /// The document a pod should hold now (issued at the index's time).
    pub fn document(&self, key: &PodKey) -> Option<PolicyDocument> {
        self.pods.get(key).map(|p| document(p, self.now()))
    }

    /// The policies whose view may have changed since the last call (to write their
    /// status); deleted ones included.
    pub fn take_changed_policies(&mut self) -> Vec<PolicyKey> {
        std::mem::take(&mut self.changed).into_iter().collect()
    }

    /// Every policy's key.
    pub fn policy_keys(&self) -> impl Iterator<Item = &PolicyKey> {
        self.policies.keys()
    }

    /// How many pods the index tracks.
    pub fn pod_count(&self) -> usize {
        self.pods.len()
    }

    /// How many tracked pods have a document they have not acknowledged (a push queued,
    /// in flight or backed off).
    pub fn backlog(&self) -> usize {
        self.pods
            .values()
            .filter(|pod| {
                pod.version > 0 && pod.acked.as_ref().is_none_or(|(v, _)| *v != pod.version)
            })
            .count()
    }

    /// How many policies the index tracks.
    pub fn policy_count(&self) -> usize {
        self.policies.len()
    }

    /// The namespaces that have opted-in pods.
    pub fn pod_namespaces(&self) -> BTreeSet<&str> {
        self.namespaces.keys().map(String::as_str).collect()
    }

    /// What every tracked pod was given, in key order.
    pub fn pod_views(&self) -> Vec<PodView> {
        self.pods
            .iter()
            .map(|(key, pod)| PodView {
                namespace: key.namespace.clone(),
                name: key.name.clone(),
                uid: pod.info.uid.clone(),
                ip: pod.info.ip,
                port: pod.info.port.as_ref().ok().copied(),
                port_error: pod.info.port.as_ref().err().map(ToString::to_string),
                version: pod.version,
                layers: pod.sources.iter().map(|p| p.name.clone()).collect(),
                acknowledged_version: pod.acked.as_ref().map(|(v, _)| *v),
                in_sync: pod.acked.as_ref().is_some_and(|(v, _)| *v == pod.version),
                last_push: pod.last_push.clone(),
                error: pod.failure.clone(),
            })
            .collect()
    }

    /// What a policy achieved; `None` for a policy the index does not have.
    pub fn policy_view(&self, key: &PolicyKey) -> Option<PolicyView> {
        let p = self.policies.get(key)?;
        let mut view = PolicyView {
            key: key.clone(),
            generation: p.generation,
            errors: p.errors.clone(),
            in_force_generation: p.active.as_ref().map(|a| a.generation),
            expires_at: p.active.as_ref().and_then(|a| a.expires_at),
            expired: p.active.as_ref().is_some_and(|a| a.expired),
            expired_before_creation: p.active.as_ref().is_some_and(|a| a.expired_before_creation),
            matched: u32::try_from(p.covered.len()).unwrap_or(u32::MAX),
            applied: 0,
            failed: 0,
            pending: 0,
            failing: Vec::new(),
            levels: p.active.as_ref().and_then(|a| a.policy.levels()),
            replay: None,
        };
        let Some(active) = p.live_layer() else {
            return Some(view);
        };
        if let Some(ask) = &active.layer.replay {
            let source = key.to_string();
            let mut summary = ReplaySummary {
                generation: active.generation,
                matched: view.matched,
                ..ReplaySummary::default()
            };
            for pod in p.covered.iter().filter_map(|pk| self.pods.get(pk)) {
                if let Some(r) = pod
                    .replays
                    .iter()
                    .find(|r| r.policy == source && r.id == ask.id)
                {
                    summary.add(r);
                }
            }
            view.replay = Some(summary);
        }
        for pk in &p.covered {
            let Some(pod) = self.pods.get(pk) else {
                continue;
            };
            let failure = if pod.overflow.contains(key) {
                Some(format!(
                    "more than {MAX_DOCUMENT_LAYERS} policies select this pod; this one has too low a priority"
                ))
            } else if pod.acked.as_ref().is_some_and(|(_, layers)| {
                layers
                    .iter()
                    .any(|l| Arc::ptr_eq(l, &active.layer) || **l == *active.layer)
            }) {
                view.applied += 1;
                continue;
            } else if let Some(f) = &pod.failure {
                Some(f.clone())
            } else if let Err(e) = &pod.info.port {
                Some(e.to_string())
            } else {
                None
            };
            match failure {
                Some(reason) => {
                    view.failed += 1;
                    if view.failing.len() < MAX_FAILING_PODS {
                        view.failing.push((pk.name.clone(), reason));
                    }
                }
                None => view.pending += 1,
            }
        }
        Some(view)
    }
}

/// Counts a failed push of `pod` and schedules its retry, if `retry` calls for one.
fn fail(
    retries: &mut BTreeSet<(SystemTime, PodKey)>,
    key: &PodKey,
    pod: &mut PodState,
    retry: Retry,
    now: SystemTime,
) {
    pod.failures = pod.failures.saturating_add(1);
    if let Some(wait) = retry_delay(key, pod.failures, retry) {
        if let Some(t) = pod.retry_at.take() {
            retries.remove(&(t, key.clone()));
        }
        let at = now + wait;
        pod.retry_at = Some(at);
        retries.insert((at, key.clone()));
    }
}

fn serialize_time<S: serde::Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&logpolicy::clock::format_rfc3339(*t))
}

/// How a push ended, and when (the index's time).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LastPush {
    /// When the report was recorded.
    #[serde(serialize_with = "serialize_time")]
    pub at: SystemTime,
    /// The version pushed.
    pub version: u64,
    /// [`PushResult::label`]: `applied`, `rejected`, `timeout`...
    pub outcome: &'static str,
    /// The failure, for anything but `applied`.
    pub error: Option<String>,
}

/// What one pod was given: the per-pod view the operator serves on `GET /pods`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodView {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub name: String,
    /// Its uid (the document is bound to it).
    pub uid: String,
    /// Its IP, once it has one.
    pub ip: Option<IpAddr>,
    /// Its admin port.
    pub port: Option<u16>,
    /// Why its port annotation is unusable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port_error: Option<String>,
    /// The version of its current document (0: none decided yet).
    pub version: u64,
    /// The LogPolicies (names, in its namespace) whose layers its document holds, in
    /// order of precedence.
    pub layers: Vec<String>,
    /// The version it last acknowledged.
    pub acknowledged_version: Option<u64>,
    /// Whether it acknowledged the current version.
    pub in_sync: bool,
    /// How the last push ended.
    pub last_push: Option<LastPush>,
    /// Why the current version has not been applied, if it failed.
    pub error: Option<String>,
}

/// A standing layer (no expiry) ends [`STANDING_LEASE`] after `now`, the `issuedAt`.
fn document(pod: &PodState, now: SystemTime) -> PolicyDocument {
    PolicyDocument {
        pod: PodRef::new(&pod.info.namespace, &pod.info.name, &pod.info.uid),
        version: pod.version,
        issued_at: now,
        layers: pod
            .layers
            .iter()
            .map(|l| LayerSpec {
                expires_at: l.expires_at.or(Some(now + STANDING_LEASE)),
                ..(**l).clone()
            })
            .collect(),
        lost: pod.lost.iter().map(|l| (**l).clone()).collect(),
    }
}

/// The keys of a relist's scope (one namespace, or all with `None`) that the relist no
/// longer holds.
fn missing<'a, K: Ord + Clone + 'a>(
    keys: impl Iterator<Item = &'a K>,
    namespace: Option<&str>,
    keep: &BTreeSet<K>,
    namespace_of: impl Fn(&K) -> &str,
) -> Vec<K> {
    keys.filter(|k| namespace.is_none_or(|ns| namespace_of(k) == ns))
        .filter(|k| !keep.contains(*k))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests;
