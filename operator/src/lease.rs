//! Leader election with a `coordination.k8s.io/v1` Lease, for more than one replica,
//! and the same Lease as a heartbeat without an election.
//!
//! Every operator keeps its Lease: with an election ([`LeaseConfig::elect`], the flag
//! `--leader-election`) it leads only while it holds it; without, it leads always and
//! writes itself as the holder every `renew_every` all the same, so that whoever may
//! read the Lease (`kubectl logpolicy check`, `raise`) can tell whether an operator runs
//! and which replica leads, the same way with one replica or several. Each write also
//! carries the annotations of [`LeaseConfig::annotations`] (the operator's signing key
//! id, [`KEY_ID_ANNOTATION`]).
//!
//! The rules, as client-go's leader election has them:
//! - a Lease held by nobody (no `holderIdentity`) is taken at once;
//! - a Lease held by another replica is taken only when its record (holder, renew time)
//!   has not changed for its `leaseDurationSeconds`, measured on **this** replica's
//!   monotonic clock since it last saw the record change ([`Observer`]), so clock skew
//!   between nodes does not matter;
//! - every write is a `PUT` carrying the `resourceVersion` read: of two replicas
//!   racing for the Lease, one gets 409 and stays a follower;
//! - the leader renews every `renew_every`; it counts itself leader only until
//!   `renew_deadline` after its last successful renewal ([`Leadership`]), which is
//!   shorter than the lease duration: a leader cut off from the API server stops
//!   before anyone else can start;
//! - on shutdown the leader releases the Lease (empty holder), so a successor takes over
//!   at once rather than after a lease duration.
//!
//! The decisions ([`Observer`], [`decide`], [`Leadership`]) take the time as an
//! argument and are tested without a server; [`run`] drives them against the API.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{PostParams, ResourceExt};
use kube::{Api, Client};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::log;
use crate::ownership::MANAGED_BY;

pub use logpolicy_api::labels::KEY_ID_ANNOTATION;

/// Timings and identity of the election.
#[derive(Debug, Clone)]
pub struct LeaseConfig {
    /// Whether the replicas elect a leader with the Lease; `false`: this replica leads
    /// always and keeps the Lease as a heartbeat (it takes it whoever held it).
    pub elect: bool,
    /// Annotations set on the Lease with every write.
    pub annotations: BTreeMap<String, String>,
    /// The Lease's namespace (the operator's own).
    pub namespace: String,
    /// The Lease's name.
    pub name: String,
    /// This replica's identity (`holderIdentity`): its pod name.
    pub identity: String,
    /// `leaseDurationSeconds`: how long a silent leader keeps the Lease.
    pub duration: Duration,
    /// How often the leader renews.
    pub renew_every: Duration,
    /// A leader that could not renew for this long stops leading (shorter than
    /// `duration`).
    pub renew_deadline: Duration,
    /// How often a follower looks at the Lease (and the leader retries a failed renewal).
    pub retry_every: Duration,
}

impl LeaseConfig {
    /// An election with the defaults: 15 s lease, renewed every 5 s, deadline 10 s,
    /// followers look every 2 s; no annotations.
    pub fn new(namespace: &str, name: &str, identity: &str) -> Self {
        LeaseConfig {
            elect: true,
            annotations: BTreeMap::new(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            identity: identity.to_owned(),
            duration: Duration::from_secs(15),
            renew_every: Duration::from_secs(5),
            renew_deadline: Duration::from_secs(10),
            retry_every: Duration::from_secs(2),
        }
    }
}

/// What identifies one version of the Lease's record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// `holderIdentity` (`None` or empty: free).
    pub holder: Option<String>,
    /// `renewTime`, as the API wrote it.
    pub renew_time: Option<String>,
    /// `leaseDurationSeconds`.
    pub duration: Duration,
}

impl Record {
    /// The record of a Lease (`default_duration` when it names none).
    pub fn of(lease: &Lease, default_duration: Duration) -> Self {
        let spec = lease.spec.as_ref();
        Record {
            holder: spec
                .and_then(|s| s.holder_identity.clone())
                .filter(|h| !h.is_empty()),
            renew_time: spec
                .and_then(|s| s.renew_time.as_ref())
                .map(|t| t.0.to_string()),
            duration: spec
                .and_then(|s| s.lease_duration_seconds)
                .and_then(|s| u64::try_from(s).ok())
                .filter(|s| *s > 0)
                .map_or(default_duration, Duration::from_secs),
        }
    }
}

/// When this replica last saw the record change.
#[derive(Debug, Default)]
pub struct Observer {
    last: Option<(Record, Instant)>,
}

impl Observer {
    /// Records what was read at `now`; returns since when this record has been
    /// unchanged.
    pub fn observe(&mut self, record: Record, now: Instant) -> Instant {
        match &self.last {
            Some((r, since)) if *r == record => *since,
            _ => {
                self.last = Some((record, now));
                now
            }
        }
    }
}

/// What to do with the Lease as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// It is ours: renew it.
    Renew,
    /// It is free or its holder's time is over: take it.
    Acquire,
    /// Another replica holds it; it can be taken after this long at the earliest.
    Wait(Duration),
}

/// The step for `record`, unchanged since `since`, at `now`, for replica `me`.
pub fn decide(me: &str, record: &Record, since: Instant, now: Instant) -> Step {
    match &record.holder {
        Some(h) if h == me => Step::Renew,
        None => Step::Acquire,
        Some(_) => {
            let expires = since + record.duration;
            if now >= expires {
                Step::Acquire
            } else {
                Step::Wait(expires - now)
            }
        }
    }
}

/// Whether this replica leads: since its last successful write of the Lease, for at
/// most `renew_deadline`.
#[derive(Debug)]
pub struct Leadership {
    deadline: Duration,
    renewed: Option<Instant>,
}

impl Leadership {
    /// A follower that, once leading, leads for `deadline` after each renewal.
    pub fn new(deadline: Duration) -> Self {
        Leadership {
            deadline,
            renewed: None,
        }
    }

    /// A write of the Lease that started at `at` succeeded.
    pub fn renewed(&mut self, at: Instant) {
        self.renewed = Some(at);
    }

    /// Another replica holds the Lease (or it was released): not leading.
    pub fn lost(&mut self) {
        self.renewed = None;
    }

    /// Whether this replica leads at `now`.
    pub fn is_leader(&self, now: Instant) -> bool {
        self.renewed.is_some_and(|t| now < t + self.deadline)
    }

    /// When leadership ends unless renewed.
    pub fn ends_at(&self) -> Option<Instant> {
        self.renewed.map(|t| t + self.deadline)
    }
}

/// This replica's identity (the Lease's holder, the Events' `reportingInstance`):
/// `pod_name` (`--pod-name`, `POD_NAME`), else the hostname, else a name with the
/// process id.
pub fn identity(pod_name: Option<&str>) -> String {
    pod_name
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()))
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
                .filter(|h| !h.is_empty())
        })
        .unwrap_or_else(|| format!("logpolicy-operator-{}", std::process::id()))
}

/// Who leads: with an election, the holder of the Lease; without (no config, or one
/// that does not [`elect`](LeaseConfig::elect)), this replica, always.
#[derive(Debug)]
pub struct Election {
    task: Option<JoinHandle<()>>,
    /// Without an election the sender stays here, and this replica always leads.
    _always: Option<watch::Sender<bool>>,
}

impl Election {
    /// Starts the election or heartbeat of `config` ([`run`], until `stop` turns true),
    /// or none (`None`: this replica leads, and writes no Lease). The receiver says
    /// whether this replica leads.
    pub fn start(
        client: Client,
        config: Option<LeaseConfig>,
        stop: watch::Receiver<bool>,
    ) -> (Self, watch::Receiver<bool>) {
        let (leader_tx, leader_rx) = watch::channel(config.as_ref().is_none_or(|c| !c.elect));
        let election = match config {
            Some(config) => Election {
                task: Some(tokio::spawn(run(client, config, leader_tx, stop))),
                _always: None,
            },
            None => Election {
                task: None,
                _always: Some(leader_tx),
            },
        };
        (election, leader_rx)
    }

    /// Waits (at most 5 s) for the election to end, which releases the Lease, so that a
    /// successor takes over at once.
    pub async fn finish(self) {
        if let Some(task) = self.task {
            let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
        }
    }
}

fn now_micro() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

fn secs_i32(d: Duration) -> i32 {
    i32::try_from(d.as_secs()).unwrap_or(i32::MAX).max(1)
}

const CALL_TIMEOUT: Duration = Duration::from_secs(2);

async fn timed<T>(
    f: impl std::future::Future<Output = Result<T, kube::Error>>,
) -> Result<T, kube::Error> {
    tokio::time::timeout(CALL_TIMEOUT, f)
        .await
        .unwrap_or_else(|_| Err(kube::Error::Service("lease call timed out".into())))
}

/// Runs the election (or, when `config` does not elect, the heartbeat: this replica
/// leads throughout) until `stop` turns true, publishing whether this replica leads on
/// `leader`; releases the Lease on the way out if it holds it.
pub async fn run(
    client: Client,
    config: LeaseConfig,
    leader: watch::Sender<bool>,
    mut stop: watch::Receiver<bool>,
) {
    let api: Api<Lease> = Api::namespaced(client, &config.namespace);
    let mut observer = Observer::default();
    let mut leadership = Leadership::new(config.renew_deadline);
    let me = config.identity.as_str();
    loop {
        let started = Instant::now();
        let wrote = attempt(&api, &config, &mut observer, started).await;
        match wrote {
            Attempt::Wrote => leadership.renewed(started),
            Attempt::HeldByOther => leadership.lost(),
            Attempt::Failed => {}
        }
        let now = Instant::now();
        let leading = !config.elect || leadership.is_leader(now);
        leader.send_if_modified(|l| {
            let changed = *l != leading;
            if changed {
                log::info!(identity = me, leader = leading, lease = %config.name, "leadership changed");
            }
            *l = leading;
            changed
        });
        let mut wait = if leading && matches!(wrote, Attempt::Wrote) {
            config.renew_every
        } else {
            config.retry_every
        };
        // Wake to step down at the deadline, even if a call hangs until then.
        if let Some(end) = leadership.ends_at().filter(|_| config.elect) {
            wait = wait.min(end.saturating_duration_since(now));
        }
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop.changed() => break,
        }
        if *stop.borrow() {
            break;
        }
    }
    if leadership.is_leader(Instant::now()) {
        leader.send_replace(false);
        release(&api, &config).await;
    }
}

enum Attempt {
    /// This replica wrote itself as holder.
    Wrote,
    /// Another replica holds it (or won the race).
    HeldByOther,
    /// The API could not be reached; nothing is known.
    Failed,
}

async fn attempt(
    api: &Api<Lease>,
    config: &LeaseConfig,
    observer: &mut Observer,
    now: Instant,
) -> Attempt {
    let me = config.identity.as_str();
    let lease = match timed(api.get_opt(&config.name)).await {
        Ok(Some(l)) => l,
        Ok(None) => return create(api, config).await,
        Err(e) => {
            log::warn!(lease = %config.name, error = %e, "cannot read the Lease");
            return Attempt::Failed;
        }
    };
    let record = Record::of(&lease, config.duration);
    let since = observer.observe(record.clone(), now);
    let acquiring = match decide(me, &record, since, now) {
        // Without an election the heartbeat takes the Lease whoever holds it.
        Step::Wait(_) if config.elect => return Attempt::HeldByOther,
        Step::Wait(_) => true,
        Step::Renew => false,
        Step::Acquire => true,
    };
    let mut updated = lease.clone();
    if !config.annotations.is_empty() {
        let annotations = updated
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new);
        annotations.extend(config.annotations.clone());
    }
    let spec = updated.spec.get_or_insert_with(LeaseSpec::default);
    let stamp = now_micro();
    if acquiring {
        spec.acquire_time = Some(stamp.clone());
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
    }
    spec.holder_identity = Some(me.to_owned());
    spec.renew_time = Some(stamp);
    spec.lease_duration_seconds = Some(secs_i32(config.duration));
    match timed(api.replace(&config.name, &PostParams::default(), &updated)).await {
        Ok(_) => {
            if acquiring {
                log::info!(identity = me, previous = ?record.holder, "acquired the Lease");
            }
            Attempt::Wrote
        }
        Err(kube::Error::Api(s)) if s.code == 409 => Attempt::HeldByOther,
        Err(e) => {
            log::warn!(lease = %config.name, resource_version = ?lease.resource_version(), error = %e, "cannot write the Lease");
            Attempt::Failed
        }
    }
}

async fn create(api: &Api<Lease>, config: &LeaseConfig) -> Attempt {
    let mut lease = Lease::default();
    lease.metadata.name = Some(config.name.clone());
    lease.metadata.namespace = Some(config.namespace.clone());
    lease.metadata.labels = Some([(MANAGED_BY.0.to_owned(), MANAGED_BY.1.to_owned())].into());
    if !config.annotations.is_empty() {
        lease.metadata.annotations = Some(config.annotations.clone());
    }
    let stamp = now_micro();
    lease.spec = Some(LeaseSpec {
        holder_identity: Some(config.identity.clone()),
        acquire_time: Some(stamp.clone()),
        renew_time: Some(stamp),
        lease_duration_seconds: Some(secs_i32(config.duration)),
        lease_transitions: Some(0),
        ..LeaseSpec::default()
    });
    match timed(api.create(&PostParams::default(), &lease)).await {
        Ok(_) => {
            log::info!(identity = %config.identity, "created and acquired the Lease");
            Attempt::Wrote
        }
        Err(kube::Error::Api(s)) if s.code == 409 => Attempt::HeldByOther,
        Err(e) => {
            log::warn!(lease = %config.name, error = %e, "cannot create the Lease");
            Attempt::Failed
        }
    }
}

async fn release(api: &Api<Lease>, config: &LeaseConfig) {
    let result = async {
        let Some(mut lease) = timed(api.get_opt(&config.name)).await? else {
            return Ok(());
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(config.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(now_micro());
        timed(api.replace(&config.name, &PostParams::default(), &lease)).await?;
        Ok::<_, kube::Error>(())
    }
    .await;
    match result {
        Ok(()) => {
            log::info!(identity = %config.identity, "released the Lease")
        }
        Err(e) => {
            log::warn!(error = %e, "cannot release the Lease; it expires by itself")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(holder: Option<&str>, renew: &str) -> Record {
        Record {
            holder: holder.map(str::to_owned),
            renew_time: Some(renew.to_owned()),
            duration: Duration::from_secs(15),
        }
    }

    #[test]
    fn a_free_lease_is_taken_and_our_own_is_renewed() {
        let t = Instant::now();
        assert_eq!(decide("a", &record(None, "1"), t, t), Step::Acquire);
        assert_eq!(decide("a", &record(Some("a"), "1"), t, t), Step::Renew);
    }

    #[test]
    fn anothers_lease_is_taken_only_a_duration_after_its_record_last_changed() {
        let t0 = Instant::now();
        let mut obs = Observer::default();
        let since = obs.observe(record(Some("b"), "1"), t0);
        assert_eq!(since, t0);
        let at = |s: u64| t0 + Duration::from_secs(s);
        assert_eq!(
            decide("a", &record(Some("b"), "1"), since, at(5)),
            Step::Wait(Duration::from_secs(10))
        );
        // b renews at t0+5 s: the clock starts again.
        let since = obs.observe(record(Some("b"), "2"), at(5));
        assert_eq!(since, at(5));
        assert_eq!(
            decide("a", &record(Some("b"), "2"), since, at(19)),
            Step::Wait(Duration::from_secs(1))
        );
        // b is silent: unchanged record, the first sighting counts.
        let since = obs.observe(record(Some("b"), "2"), at(19));
        assert_eq!(since, at(5));
        assert_eq!(
            decide("a", &record(Some("b"), "2"), since, at(20)),
            Step::Acquire
        );
    }

    #[test]
    fn a_renew_time_from_a_skewed_clock_does_not_matter() {
        // The record's renewTime is years off; only local observation counts.
        let t0 = Instant::now();
        let mut obs = Observer::default();
        let r = record(Some("b"), "1970-01-01T00:00:00Z");
        let since = obs.observe(r.clone(), t0);
        assert!(matches!(decide("a", &r, since, t0), Step::Wait(_)));
    }

    #[test]
    fn a_leader_that_cannot_renew_steps_down_before_the_lease_expires() {
        let cfg = LeaseConfig::new("ns", "l", "a");
        assert!(cfg.renew_every < cfg.renew_deadline && cfg.renew_deadline < cfg.duration);
        let t0 = Instant::now();
        let mut l = Leadership::new(cfg.renew_deadline);
        assert!(!l.is_leader(t0));
        l.renewed(t0);
        assert!(l.is_leader(t0 + Duration::from_secs(9)));
        assert!(!l.is_leader(t0 + cfg.renew_deadline));
        assert!(
            !l.is_leader(t0 + cfg.duration),
            "before anyone else may take over"
        );
        l.renewed(t0 + Duration::from_secs(5));
        assert!(l.is_leader(t0 + Duration::from_secs(14)));
        assert_eq!(l.ends_at(), Some(t0 + Duration::from_secs(15)));
        l.lost();
        assert!(
            !l.is_leader(t0 + Duration::from_secs(6)),
            "held by another: at once"
        );
    }

    #[test]
    fn records_read_a_lease() {
        let mut lease = Lease::default();
        assert_eq!(
            Record::of(&lease, Duration::from_secs(15)),
            Record {
                holder: None,
                renew_time: None,
                duration: Duration::from_secs(15)
            }
        );
        lease.spec = Some(LeaseSpec {
            holder_identity: Some(String::new()),
            lease_duration_seconds: Some(7),
            ..LeaseSpec::default()
        });
        let r = Record::of(&lease, Duration::from_secs(15));
        assert_eq!(r.holder, None, "an empty holder is a released Lease");
        assert_eq!(r.duration, Duration::from_secs(7));
    }
}
