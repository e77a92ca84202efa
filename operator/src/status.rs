//! A policy's view, as the `status` the controller writes (by server-side apply).
//!
//! Conditions follow the Kubernetes conventions: a list keyed by `type`, each with
//! `observedGeneration`, and a `lastTransitionTime` that moves only when the condition's
//! `status` changes.

use std::time::SystemTime;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::index::{PolicyView, ReplaySummary};
use logpolicy_api::crd::{FailingPod, LogPolicyStatus, ReplayStatus};
use logpolicy_api::text::truncate;

pub use logpolicy_api::conditions::{APPLIED, EXPIRED, INVALID, READY, RECONCILING, STALLED};

fn condition(
    type_: &str,
    ok: bool,
    reason: &str,
    message: String,
    generation: i64,
    previous: Option<&LogPolicyStatus>,
    now: SystemTime,
) -> Condition {
    let status = if ok { "True" } else { "False" };
    let since = previous
        .and_then(|p| p.conditions.iter().find(|c| c.type_ == type_))
        .filter(|c| c.status == status)
        .map(|c| c.last_transition_time.clone());
    Condition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message,
        observed_generation: Some(generation),
        last_transition_time: since.unwrap_or_else(|| Time(to_timestamp(now))),
    }
}

fn to_timestamp(t: SystemTime) -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::try_from(t).unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)
}

/// Why a policy whose `expirationTime` was past when it was created did nothing.
pub fn never_applied(expiration: &str) -> String {
    format!("expirationTime {expiration} was already past when the policy was created: it never applied")
}

/// Whether `status` already says that generation `generation` expired before it was
/// created (written before an operator restart).
pub fn says_expired_before_creation(status: &LogPolicyStatus, generation: i64) -> bool {
    status.conditions.iter().any(|c| {
        c.type_ == EXPIRED
            && c.reason == "ExpiredBeforeCreation"
            && c.observed_generation == Some(generation)
    })
}

impl PolicyView {
    /// Selected pods that have not acknowledged the current generation while it is valid,
    /// in force and unexpired (0 otherwise): what `Ready` waits for (it is
    /// `PodsPending` or `PodsFailed` exactly when this is above 0), and the
    /// `policy_pods_unacknowledged` gauge.
    pub fn pods_unacknowledged(&self) -> u32 {
        if self.errors.is_empty() && self.in_force_generation.is_some() && !self.expired {
            self.matched.saturating_sub(self.applied)
        } else {
            0
        }
    }

    /// The status for this view; `previous` (the status as last read) keeps the
    /// conditions' transition times.
    pub fn status(&self, previous: Option<&LogPolicyStatus>, now: SystemTime) -> LogPolicyStatus {
        let g = self.generation;
        let in_force = self.in_force_generation.is_some();
        let counts = format!("{}/{} pods", self.applied, self.matched);
        let applied = if !in_force {
            condition(APPLIED, false, INVALID, counts.clone(), g, previous, now)
        } else if self.expired {
            condition(APPLIED, false, "Expired", counts.clone(), g, previous, now)
        } else if self.matched == 0 {
            condition(
                APPLIED,
                false,
                "NoPodsSelected",
                "0/0 pods: the selector matches no opted-in pod".into(),
                g,
                previous,
                now,
            )
        } else if self.applied == self.matched {
            condition(
                APPLIED,
                true,
                "AllPodsApplied",
                counts.clone(),
                g,
                previous,
                now,
            )
        } else if self.failed > 0 {
            condition(
                APPLIED,
                false,
                "PodsFailed",
                format!("{counts}, {} failed", self.failed),
                g,
                previous,
                now,
            )
        } else {
            condition(
                APPLIED,
                false,
                "PodsPending",
                counts.clone(),
                g,
                previous,
                now,
            )
        };
        let pushing = applied.status == "False"
            && matches!(applied.reason.as_str(), "PodsPending" | "PodsFailed");
        // Ready: the current generation is valid and every selected pod acknowledged it
        // (none selected, or expired and so back to the baseline, count as done): what
        // kstatus, `kubectl wait --for=condition=Ready`, Flux and Argo CD read as Current.
        let ready = if !self.errors.is_empty() || !in_force {
            let mut message = self
                .errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ");
            match self.in_force_generation {
                Some(old) => message.push_str(&format!(" (generation {old} stays in force)")),
                None => message.push_str(" (nothing is applied)"),
            }
            condition(
                READY,
                false,
                INVALID,
                truncate(message, 32 * 1024),
                g,
                previous,
                now,
            )
        } else if self.expired {
            let message = match self.expires_at.map(logpolicy::clock::format_rfc3339) {
                Some(t) => format!("expired at {t}: the pods are back to their baseline"),
                None => "expired: the pods are back to their baseline".to_owned(),
            };
            condition(READY, true, "Expired", message, g, previous, now)
        } else if self.matched == 0 {
            condition(
                READY,
                true,
                "NoPodsSelected",
                applied.message.clone(),
                g,
                previous,
                now,
            )
        } else if pushing && self.failed > 0 {
            condition(
                READY,
                false,
                "PodsFailed",
                applied.message.clone(),
                g,
                previous,
                now,
            )
        } else if pushing {
            condition(
                READY,
                false,
                "PodsPending",
                applied.message.clone(),
                g,
                previous,
                now,
            )
        } else {
            condition(READY, true, "AllPodsApplied", counts, g, previous, now)
        };
        let reconciling = condition(
            RECONCILING,
            pushing,
            &applied.reason,
            applied.message.clone(),
            g,
            previous,
            now,
        );
        let stalled = if self.errors.is_empty() {
            condition(
                STALLED,
                false,
                "Valid",
                "the spec is valid".into(),
                g,
                previous,
                now,
            )
        } else {
            condition(
                STALLED,
                true,
                INVALID,
                ready.message.clone(),
                g,
                previous,
                now,
            )
        };
        let expiry = self.expires_at.map(logpolicy::clock::format_rfc3339);
        let expired = match (&expiry, self.expired) {
            (Some(t), true) if self.expired_before_creation => condition(
                EXPIRED,
                true,
                "ExpiredBeforeCreation",
                never_applied(t),
                g,
                previous,
                now,
            ),
            (Some(t), true) => condition(
                EXPIRED,
                true,
                "Expired",
                format!("expired at {t}"),
                g,
                previous,
                now,
            ),
            (Some(t), false) => condition(
                EXPIRED,
                false,
                "Active",
                format!("expires at {t}"),
                g,
                previous,
                now,
            ),
            (None, _) => condition(
                EXPIRED,
                false,
                "NoExpiry",
                "applies until deleted".into(),
                g,
                previous,
                now,
            ),
        };
        LogPolicyStatus {
            observed_generation: Some(g),
            conditions: vec![ready, applied, expired, reconciling, stalled],
            matched_pods: i32::try_from(self.matched).unwrap_or(i32::MAX),
            applied_pods: i32::try_from(self.applied).unwrap_or(i32::MAX),
            failed_pods: i32::try_from(self.failed).unwrap_or(i32::MAX),
            failing_pods: self
                .failing
                .iter()
                .map(|(name, reason)| FailingPod {
                    name: name.clone(),
                    reason: truncate(reason.clone(), 1024),
                })
                .collect(),
            levels: self.levels.clone(),
            summary: Some(if self.expired {
                "expired".to_owned()
            } else {
                format!("{}/{}", self.applied, self.matched)
            }),
            expiration_time: expiry,
            replay: self.replay.as_ref().map(ReplaySummary::status),
        }
    }
}

impl ReplaySummary {
    /// As `status.replay`.
    ///
    /// ```
    /// use std::time::{Duration, UNIX_EPOCH};
    /// use logpolicy_operator::index::ReplaySummary;
    /// let t = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    /// let s = ReplaySummary { generation: 2, pods: 3, matched: 3, lines: 120,
    ///     asked_from: Some(t), held_from: Some(t + Duration::from_secs(60)), pods_held_less: 1 };
    /// let status = s.status();
    /// assert_eq!(status.summary.as_deref(), Some("120 lines, 3/3 pods, 1 held less"));
    /// assert_eq!(status.held_from.as_deref(), Some("2027-01-15T08:01:00Z"));
    /// ```
    pub fn status(&self) -> ReplayStatus {
        let mut summary = format!("{} lines, {}/{} pods", self.lines, self.pods, self.matched);
        if self.pods_held_less > 0 {
            summary.push_str(&format!(", {} held less", self.pods_held_less));
        }
        ReplayStatus {
            generation: self.generation,
            pods: i32::try_from(self.pods).unwrap_or(i32::MAX),
            lines: i64::try_from(self.lines).unwrap_or(i64::MAX),
            asked_from: self.asked_from.map(logpolicy::clock::format_rfc3339),
            held_from: self.held_from.map(logpolicy::clock::format_rfc3339),
            pods_held_less: i32::try_from(self.pods_held_less).unwrap_or(i32::MAX),
            summary: Some(truncate(summary, 64)),
        }
    }
}
