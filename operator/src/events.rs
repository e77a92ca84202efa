//! Kubernetes Events on LogPolicies (`events.k8s.io/v1`), and on the trust ConfigMaps
//! the operator restores ([`trust_restored`]).
//!
//! The decisions are pure: [`PolicyEvents::observe`] compares a policy's view with what
//! was last seen and returns the Events to record ([`EventSpec`]): `InvalidSpec` when a
//! new set of field errors appears, `PushFailed` while pods fail (at most one per policy
//! per [`EventLimiter`] interval, so a flapping pod cannot flood the namespace), and
//! `Expired` once when the policy's time is over (a `Warning` when its `expirationTime`
//! was already past when it was created: it never applied).
//!
//! [`EventSink`] publishes them from one background task through a bounded queue: the
//! controller never waits for the API server, a full queue drops the Event (counted),
//! and a failed write is logged, never fatal.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::Client;
use tokio::sync::mpsc;

use crate::index::{PolicyKey, PolicyView};
use crate::log;
use crate::metrics::{self, ByResult};
use crate::status;
use logpolicy_api::crd::LogPolicyStatus;
use logpolicy_api::text::truncate;

/// The `reportingController` of every Event.
pub const REPORTING_CONTROLLER: &str = "logpolicy.dev/operator";

/// Reason of the Event for an invalid spec.
pub const REASON_INVALID: &str = "InvalidSpec";
/// Reason of the Event for pods that could not be given the policy.
pub const REASON_PUSH_FAILED: &str = "PushFailed";
/// Reason of the Event for an expired policy.
pub const REASON_EXPIRED: &str = "Expired";
/// Reason of the Event for a trust ConfigMap restored.
pub const REASON_TRUST_RESTORED: &str = "TrustRestored";

/// Events longer than this (the API's limit is 1 kB) are cut.
const MAX_NOTE: usize = 1000;
/// A write that takes longer is abandoned (and logged).
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// `Normal` or `Warning`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// Informational.
    Normal,
    /// Something needs attention.
    Warning,
}

/// One Event to record on a LogPolicy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSpec {
    /// The policy it is about.
    pub policy: PolicyKey,
    /// `Normal` or `Warning`.
    pub severity: Severity,
    /// `InvalidSpec`, `PushFailed` or `Expired`.
    pub reason: &'static str,
    /// What the operator did: `Validate`, `Push` or `Expire`.
    pub action: &'static str,
    /// The human-readable message (at most 1,000 bytes).
    pub note: String,
}

/// At most one event per key per interval. Keys not seen for an interval are forgotten.
#[derive(Debug)]
pub struct EventLimiter<K> {
    interval: Duration,
    last: HashMap<K, Instant>,
}

impl<K: std::hash::Hash + Eq + Clone> EventLimiter<K> {
    /// At most one event per key per `interval`.
    pub fn new(interval: Duration) -> Self {
        EventLimiter {
            interval,
            last: HashMap::new(),
        }
    }

    /// Whether an event for `key` may be sent at `now`; if so, it is counted as sent.
    pub fn allow(&mut self, key: &K, now: Instant) -> bool {
        if let Some(t) = self.last.get(key) {
            if now.saturating_duration_since(*t) < self.interval {
                return false;
            }
        }
        if self.last.len() >= 1024 {
            let horizon = self.interval;
            self.last
                .retain(|_, t| now.saturating_duration_since(*t) < horizon);
        }
        self.last.insert(key.clone(), now);
        true
    }

    /// Forgets a key (its policy was deleted).
    pub fn forget(&mut self, key: &K) {
        self.last.remove(key);
    }
}

#[derive(Debug, Default, Clone)]
struct Seen {
    errors: BTreeSet<String>,
    expired: bool,
}

/// Decides which Events a policy's changes deserve. See [the module](self).
#[derive(Debug)]
pub struct PolicyEvents {
    seen: HashMap<PolicyKey, Seen>,
    failures: EventLimiter<PolicyKey>,
}

impl PolicyEvents {
    /// At most one `PushFailed` Event per policy per `failure_interval`.
    pub fn new(failure_interval: Duration) -> Self {
        PolicyEvents {
            seen: HashMap::new(),
            failures: EventLimiter::new(failure_interval),
        }
    }

    /// The Events for `view` at `now`; `previous` is the policy's status as last read.
    ///
    /// The first view of a policy that has already expired (seen again after a restart)
    /// records no `Expired` Event: it was recorded when it happened. The exception is a
    /// policy whose `expirationTime` was past when it was created: it gets a `Warning`
    /// saying that it never applied, unless `previous` already says so (an operator
    /// restart).
    pub fn observe(
        &mut self,
        view: &PolicyView,
        previous: Option<&LogPolicyStatus>,
        now: Instant,
    ) -> Vec<EventSpec> {
        let mut out = Vec::new();
        let first = !self.seen.contains_key(&view.key);
        let seen = self.seen.entry(view.key.clone()).or_default();

        let errors: BTreeSet<String> = view.errors.iter().map(ToString::to_string).collect();
        if !errors.is_empty() && errors != seen.errors {
            let mut note = format!(
                "generation {}: {}",
                view.generation,
                errors.iter().cloned().collect::<Vec<_>>().join("; ")
            );
            match view.in_force_generation {
                Some(g) => note.push_str(&format!(" (generation {g} stays in force)")),
                None => note.push_str(" (nothing is applied)"),
            }
            out.push(EventSpec {
                policy: view.key.clone(),
                severity: Severity::Warning,
                reason: REASON_INVALID,
                action: "Validate",
                note: truncate(note, MAX_NOTE),
            });
        }
        seen.errors = errors;

        let reported_before_restart =
            previous.is_some_and(|s| status::says_expired_before_creation(s, view.generation));
        if view.expired
            && !seen.expired
            && first
            && view.expired_before_creation
            && !reported_before_restart
        {
            let at = view
                .expires_at
                .map(rfc3339)
                .unwrap_or_else(|| "an unknown time".to_owned());
            out.push(EventSpec {
                policy: view.key.clone(),
                severity: Severity::Warning,
                reason: REASON_EXPIRED,
                action: "Expire",
                note: status::never_applied(&at),
            });
        }
        if view.expired && !seen.expired && !first {
            let at = view
                .expires_at
                .map(rfc3339)
                .unwrap_or_else(|| "an unknown time".to_owned());
            let n = view.matched;
            out.push(EventSpec {
                policy: view.key.clone(),
                severity: Severity::Normal,
                reason: REASON_EXPIRED,
                action: "Expire",
                note: format!(
                    "expired at {at}, {n} pod{} reverted",
                    if n == 1 { "" } else { "s" }
                ),
            });
        }
        seen.expired = view.expired;

        if view.failed > 0 && !view.expired && self.failures.allow(&view.key, now) {
            let pods = view
                .failing
                .iter()
                .map(|(pod, why)| format!("{pod}: {why}"))
                .collect::<Vec<_>>()
                .join("; ");
            let listed = u32::try_from(view.failing.len()).unwrap_or(u32::MAX);
            let more = if listed < view.failed {
                format!("; and {} more", view.failed - listed)
            } else {
                String::new()
            };
            out.push(EventSpec {
                policy: view.key.clone(),
                severity: Severity::Warning,
                reason: REASON_PUSH_FAILED,
                action: "Push",
                note: truncate(
                    format!(
                        "{} of {} pods failed: {pods}{more}",
                        view.failed, view.matched
                    ),
                    MAX_NOTE,
                ),
            });
        }
        out
    }

    /// Forgets a deleted policy.
    pub fn forget(&mut self, key: &PolicyKey) {
        self.seen.remove(key);
        self.failures.forget(key);
    }
}

/// A time as RFC 3339 (UTC, seconds).
pub fn rfc3339(t: SystemTime) -> String {
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    logpolicy::clock::format_rfc3339(std::time::UNIX_EPOCH + Duration::from_secs(secs))
}

/// The reference an Event is about: a LogPolicy (with its uid when known, which
/// `kubectl describe` needs to list it).
pub fn policy_reference(key: &PolicyKey, uid: Option<&str>) -> ObjectReference {
    ObjectReference {
        api_version: Some(logpolicy_api::crd::API_VERSION.to_owned()),
        kind: Some("LogPolicy".to_owned()),
        namespace: Some(key.namespace.clone()),
        name: Some(key.name.clone()),
        uid: uid.map(str::to_owned),
        ..ObjectReference::default()
    }
}

/// The reference an Event is about: a ConfigMap.
pub fn config_map_reference(namespace: &str, name: &str, uid: Option<&str>) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("ConfigMap".to_owned()),
        namespace: Some(namespace.to_owned()),
        name: Some(name.to_owned()),
        uid: uid.map(str::to_owned),
        ..ObjectReference::default()
    }
}

/// The `Warning` Event on a trust ConfigMap found changed (`what`) or deleted (`what`
/// empty), and restored.
pub fn trust_restored(what: &[String]) -> Outgoing {
    let note = if what.is_empty() {
        "deleted; created anew with the operator's public key".to_owned()
    } else {
        format!(
            "changed by someone else ({}); restored to the operator's public key only",
            what.join("; ")
        )
    };
    Outgoing {
        severity: Severity::Warning,
        reason: REASON_TRUST_RESTORED,
        action: "Restore",
        note: truncate(note, MAX_NOTE),
    }
}

/// An Event about any object: what [`EventSink::send_about`] records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    /// `Normal` or `Warning`.
    pub severity: Severity,
    /// The Event's reason.
    pub reason: &'static str,
    /// What the operator did.
    pub action: &'static str,
    /// The human-readable message (at most 1,000 bytes).
    pub note: String,
}

impl From<EventSpec> for Outgoing {
    fn from(spec: EventSpec) -> Self {
        Outgoing {
            severity: spec.severity,
            reason: spec.reason,
            action: spec.action,
            note: spec.note,
        }
    }
}

/// `kind namespace/name` of a reference, for the log.
fn describe(r: &ObjectReference) -> String {
    format!(
        "{} {}/{}",
        r.kind.as_deref().unwrap_or(""),
        r.namespace.as_deref().unwrap_or(""),
        r.name.as_deref().unwrap_or("")
    )
}

/// Publishes Events from one background task; see [the module](self).
#[derive(Debug, Clone)]
pub struct EventSink {
    tx: mpsc::Sender<(Outgoing, ObjectReference)>,
    /// Events by what happened to them: `sent`, `failed`, `dropped` (queue full).
    counter: ByResult,
}

impl EventSink {
    /// Starts the publishing task, with a queue of `capacity` Events. `instance` is the
    /// `reportingInstance` (the pod name).
    pub fn spawn(client: Client, instance: String, capacity: usize, counter: ByResult) -> Self {
        let (tx, mut rx) = mpsc::channel::<(Outgoing, ObjectReference)>(capacity.max(1));
        let recorder = Recorder::new(
            client,
            Reporter {
                controller: REPORTING_CONTROLLER.to_owned(),
                instance: Some(instance),
            },
        );
        let task_counter = counter.clone();
        tokio::spawn(async move {
            while let Some((spec, reference)) = rx.recv().await {
                let event = Event {
                    type_: match spec.severity {
                        Severity::Normal => EventType::Normal,
                        Severity::Warning => EventType::Warning,
                    },
                    reason: spec.reason.to_owned(),
                    note: Some(spec.note.clone()),
                    action: spec.action.to_owned(),
                    secondary: None,
                };
                let result =
                    tokio::time::timeout(WRITE_TIMEOUT, recorder.publish(&event, &reference)).await;
                let label = match result {
                    Ok(Ok(())) => "sent",
                    Ok(Err(e)) => {
                        log::warn!(object = %describe(&reference), reason = spec.reason, error = %e, "cannot record an Event");
                        "failed"
                    }
                    Err(_) => {
                        log::warn!(object = %describe(&reference), reason = spec.reason, "recording an Event timed out");
                        "failed"
                    }
                };
                metrics::count(&task_counter, label);
            }
        });
        EventSink { tx, counter }
    }

    /// Queues an Event on a LogPolicy; never waits. A full queue drops it (counted and
    /// logged).
    pub fn send(&self, spec: EventSpec, uid: Option<&str>) {
        let reference = policy_reference(&spec.policy, uid);
        self.send_about(spec.into(), reference);
    }

    /// Queues an Event on `reference`; never waits. A full queue drops it (counted and
    /// logged).
    pub fn send_about(&self, event: Outgoing, reference: ObjectReference) {
        if let Err(e) = self.tx.try_send((event, reference)) {
            let (event, reference) = match e {
                mpsc::error::TrySendError::Full(v) | mpsc::error::TrySendError::Closed(v) => v,
            };
            metrics::count(&self.counter, "dropped");
            log::warn!(object = %describe(&reference), reason = event.reason, "Event queue full; Event dropped");
        }
    }
}

#[cfg(test)]
mod tests;
