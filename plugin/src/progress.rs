//! How far a LogPolicy got, as the operator's status tells it: whether the operator has
//! seen the current generation, refused it, or how many of the selected pods
//! acknowledged it, and one row per pod.
//!
//! The status counts pods (`matchedPods`, `appliedPods`, `failedPods`) and names up to 10
//! failing pods with their reason; it does not name the pods that applied. A pod is
//! `applied` when every pod applied, `failed` when the status names it, and `pending`
//! otherwise.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use logpolicy_api::conditions::{APPLIED, READY, STALLED};
use logpolicy_api::LogPolicy;
use serde::Serialize;

use crate::cluster::PodHold;

/// What the status says about the policy's current generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// No status for this generation yet: the operator has not seen it.
    Unseen,
    /// `Stalled=True`: the operator refused the spec (the condition's reason and
    /// message). From an operator that predates `Stalled`: `Ready=False` reason `Invalid`.
    Refused(String),
    /// Every selected pod acknowledged it.
    Applied,
    /// Seen, not yet acknowledged by every pod.
    Pending {
        /// Pods that acknowledged.
        applied: i32,
        /// Opted-in pods the selector matches.
        matched: i32,
        /// Pods that refused it or could not be reached.
        failed: i32,
    },
}

/// The condition `type_` of the policy's status.
pub fn condition<'a>(lp: &'a LogPolicy, type_: &str) -> Option<&'a Condition> {
    lp.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
}

/// Where `lp` stands, for its current `metadata.generation`.
pub fn progress(lp: &LogPolicy) -> Progress {
    let Some(status) = &lp.status else {
        return Progress::Unseen;
    };
    let generation = lp.metadata.generation.unwrap_or(1);
    if status.observed_generation.is_none_or(|g| g < generation) {
        return Progress::Unseen;
    }
    // `Ready=False` alone is not a refusal: it is also what pushes in flight look like.
    let refused = condition(lp, STALLED)
        .filter(|c| c.status == "True")
        .or_else(|| {
            condition(lp, READY)
                .filter(|c| c.status == "False" && c.reason == logpolicy_api::conditions::INVALID)
        });
    if let Some(c) = refused {
        return Progress::Refused(format!("{}: {}", c.reason, c.message));
    }
    let all = condition(lp, APPLIED).is_some_and(|c| c.status == "True");
    if all && status.applied_pods == status.matched_pods {
        Progress::Applied
    } else {
        Progress::Pending {
            applied: status.applied_pods,
            matched: status.matched_pods,
            failed: status.failed_pods,
        }
    }
}

/// One pod's row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodRow {
    /// The pod.
    pub pod: String,
    /// `applied`, `pending` or `failed`.
    pub state: &'static str,
    /// The version of the document that carries the policy, as the pod says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
    /// When the pod applied that document, by its clock.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub applied_at: Option<String>,
    /// Why it failed, as the operator reports it, or why the pod could not be read.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub error: String,
    /// What the pod replayed of the recorded lines the policy asked for (`spec.replay`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replayed: Option<Replayed>,
}

/// What one pod replayed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Replayed {
    /// Lines replayed.
    pub lines: u64,
    /// The start of the window asked for (RFC 3339).
    pub asked_from: String,
    /// When the oldest line the pod still held was emitted, when later than asked: it
    /// held less than asked (its recorder let older lines go).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_from: Option<String>,
    /// When the first replayed line was emitted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_at: Option<String>,
}

impl Replayed {
    /// From the pod's own account.
    pub fn of(r: &logpolicy::wire::ReplayView) -> Self {
        use logpolicy::clock::format_rfc3339;
        Replayed {
            lines: r.lines,
            asked_from: format_rfc3339(r.asked_from),
            // The pod says whether lines of the window had expired before the replay.
            held_from: r.held_from.filter(|_| !r.complete).map(format_rfc3339),
            first_at: r.first_at.map(format_rfc3339),
        }
    }

    /// As the table says it: `42 lines from 07:00:01`, `0 lines`, or with `held less
    /// (asked from 06:55:00, held from 06:57:00)`.
    pub fn cell(&self) -> String {
        let clock = |t: &str| t.get(11..19).unwrap_or(t).to_owned();
        let mut out = format!("{} lines", self.lines);
        if let Some(first) = &self.first_at {
            out.push_str(&format!(" from {}", clock(first)));
        }
        if let Some(held) = &self.held_from {
            out.push_str(&format!(
                ", held less (asked from {}, held from {})",
                clock(&self.asked_from),
                clock(held)
            ));
        }
        out
    }
}

/// What the pods said they hold, by name (see [`Kube::holds`](crate::cluster::Kube::holds)).
pub type Holds = BTreeMap<String, Result<Option<PodHold>, String>>;

/// The rows of `pods` (the selected, opted-in pods, by name) under `lp`'s status, with
/// what each pod said it holds (`holds`; a pod missing there was not read).
pub fn pod_rows(lp: &LogPolicy, pods: &[String], holds: &Holds) -> Vec<PodRow> {
    let applied_all = progress(lp) == Progress::Applied;
    let failing = lp
        .status
        .as_ref()
        .map(|s| s.failing_pods.as_slice())
        .unwrap_or_default();
    pods.iter()
        .map(|pod| {
            let failed = failing.iter().find(|f| &f.name == pod);
            let (state, mut error) = match failed {
                Some(f) => ("failed", f.reason.clone()),
                None if applied_all => ("applied", String::new()),
                None => ("pending", String::new()),
            };
            let (mut version, mut applied_at, mut replayed) = (None, None, None);
            match holds.get(pod) {
                Some(Ok(Some(hold))) => {
                    version = Some(hold.version);
                    applied_at = hold.applied_at.clone();
                    replayed = hold.replay.as_ref().map(Replayed::of);
                }
                Some(Err(e)) if error.is_empty() => error = format!("not read: {e}"),
                _ => {}
            }
            PodRow {
                pod: pod.clone(),
                state,
                version,
                applied_at,
                error,
                replayed,
            }
        })
        .collect()
}

/// The pods' table, with a note on the counts when the status cannot say which pods
/// applied.
///
/// A policy with `spec.replay` gets a `REPLAYED` column: what each pod replayed of the
/// window, and whether it held less than asked.
pub fn pod_table(lp: &LogPolicy, rows: &[PodRow]) -> String {
    let replay = lp.spec.replay.is_some();
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut row = vec![
                r.pod.clone(),
                r.state.to_owned(),
                r.version.map_or_else(|| "-".to_owned(), |v| v.to_string()),
                r.applied_at.clone().unwrap_or_else(|| "-".to_owned()),
            ];
            if replay {
                row.push(
                    r.replayed
                        .as_ref()
                        .map_or_else(|| "-".to_owned(), Replayed::cell),
                );
            }
            row.push(r.error.clone());
            row
        })
        .collect();
    let header: &[&str] = if replay {
        &["POD", "STATE", "VERSION", "APPLIED AT", "REPLAYED", "ERROR"]
    } else {
        &["POD", "STATE", "VERSION", "APPLIED AT", "ERROR"]
    };
    let mut out = crate::output::table(header, &cells);
    if let Progress::Pending {
        applied, matched, ..
    } = progress(lp)
    {
        if applied > 0 {
            out.push_str(&format!(
                "{applied} of the {matched} selected pods applied it (the operator's status counts them; it does not name them)\n"
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use logpolicy_api::crd::{FailingPod, LogPolicyStatus};

    fn policy(generation: i64, status: Option<serde_json::Value>) -> LogPolicy {
        let mut lp: LogPolicy = serde_json::from_value(serde_json::json!({
            "apiVersion": "logpolicy.dev/v1beta1", "kind": "LogPolicy",
            "metadata": {"name": "raise-shop-debug-bbbbb", "namespace": "shop", "generation": generation},
            "spec": {"selector": {"matchLabels": {"app": "shop"}}, "defaultLevel": "debug"},
        }))
        .unwrap();
        lp.status = status.map(|s| serde_json::from_value::<LogPolicyStatus>(s).unwrap());
        lp
    }

    fn cond(t: &str, s: &str, reason: &str, msg: &str) -> serde_json::Value {
        serde_json::json!({"type": t, "status": s, "reason": reason, "message": msg,
            "lastTransitionTime": "2026-12-03T07:00:00Z", "observedGeneration": 2})
    }

    #[test]
    fn progress_reads_the_current_generation_only() {
        assert_eq!(progress(&policy(1, None)), Progress::Unseen);
        let applied = serde_json::json!({
            "observedGeneration": 1, "matchedPods": 3, "appliedPods": 3,
            "conditions": [cond("Ready", "True", "AllPodsApplied", "3/3 pods"), cond("Applied", "True", "AllPodsApplied", "3/3 pods")],
        });
        assert_eq!(
            progress(&policy(1, Some(applied.clone()))),
            Progress::Applied
        );
        // A status of generation 1 says nothing of generation 2 (after `extend`).
        assert_eq!(progress(&policy(2, Some(applied))), Progress::Unseen);
        let refused = serde_json::json!({
            "observedGeneration": 2,
            "conditions": [cond("Ready", "False", "Invalid", "spec.targets[0].target: bad (nothing is applied)"),
                cond("Stalled", "True", "Invalid", "spec.targets[0].target: bad (nothing is applied)")],
        });
        assert_eq!(
            progress(&policy(2, Some(refused))),
            Progress::Refused("Invalid: spec.targets[0].target: bad (nothing is applied)".into())
        );
        // From an operator that wrote no Stalled condition yet.
        let refused_before_stalled = serde_json::json!({
            "observedGeneration": 2,
            "conditions": [cond("Ready", "False", "Invalid", "spec.selector: must not be empty")],
        });
        assert_eq!(
            progress(&policy(2, Some(refused_before_stalled))),
            Progress::Refused("Invalid: spec.selector: must not be empty".into())
        );
        let pending = serde_json::json!({
            "observedGeneration": 2, "matchedPods": 3, "appliedPods": 1, "failedPods": 1,
            "failingPods": [{"name": "shop-2", "reason": "timeout after 2s"}],
            // Ready=False while pushes are in flight: pending, not refused.
            "conditions": [cond("Ready", "False", "PodsFailed", "1/3 pods, 1 failed"),
                cond("Applied", "False", "PodsFailed", "1/3 pods, 1 failed"),
                cond("Reconciling", "True", "PodsFailed", "1/3 pods, 1 failed"),
                cond("Stalled", "False", "Valid", "the spec is valid")],
        });
        let lp = policy(2, Some(pending));
        assert_eq!(
            progress(&lp),
            Progress::Pending {
                applied: 1,
                matched: 3,
                failed: 1
            }
        );
        let pods: Vec<String> = ["shop-0", "shop-1", "shop-2"].map(String::from).to_vec();
        let holds: Holds = [
            (
                "shop-0".to_owned(),
                Ok(Some(PodHold {
                    version: 12,
                    applied_at: Some("2026-12-03T07:00:01.250000000Z".into()),
                    replay: None,
                })),
            ),
            (
                "shop-1".to_owned(),
                Err("pod proxy: no answer in 3 s".into()),
            ),
            ("shop-2".to_owned(), Err("connection refused".into())),
        ]
        .into();
        let rows = pod_rows(&lp, &pods, &holds);
        assert_eq!(
            rows.iter().map(|r| r.state).collect::<Vec<_>>(),
            ["pending", "pending", "failed"]
        );
        // What the pod said; why it could not be read, unless the operator said why
        // it failed.
        assert_eq!(rows[0].version, Some(12));
        assert_eq!(
            rows[0].applied_at.as_deref(),
            Some("2026-12-03T07:00:01.250000000Z")
        );
        assert_eq!(rows[1].version, None);
        assert_eq!(rows[1].error, "not read: pod proxy: no answer in 3 s");
        assert_eq!(rows[2].error, "timeout after 2s");
        let table = pod_table(&lp, &rows);
        assert!(
            table.contains("1 of the 3 selected pods applied it"),
            "{table}"
        );
    }

    #[test]
    fn every_pod_is_applied_when_all_applied() {
        let mut lp = policy(1, None);
        lp.status = Some(LogPolicyStatus {
            observed_generation: Some(1),
            matched_pods: 2,
            applied_pods: 2,
            failing_pods: vec![FailingPod {
                name: "shop-9".into(),
                reason: "gone".into(),
            }],
            conditions: serde_json::from_value(serde_json::json!([
                cond("Ready", "True", "AllPodsApplied", "2/2 pods"),
                cond("Applied", "True", "AllPodsApplied", "2/2 pods")
            ]))
            .unwrap(),
            ..LogPolicyStatus::default()
        });
        let rows = pod_rows(&lp, &["shop-0".into(), "shop-1".into()], &Holds::new());
        assert!(rows.iter().all(|r| r.state == "applied"), "{rows:?}");
        let table = pod_table(&lp, &rows);
        assert!(
            table.starts_with("POD") && table.contains("VERSION") && table.contains("APPLIED AT"),
            "{table}"
        );
    }

    #[test]
    fn a_pod_that_replayed_says_how_many_lines_from_when_and_whether_it_held_less() {
        let t = |s: &str| logpolicy::clock::parse_rfc3339(s).unwrap();
        let view = |held: &str| logpolicy::wire::ReplayView {
            policy: "shop/raise".into(),
            id: "u/1".into(),
            at: t("2026-12-03T07:05:00Z"),
            asked_from: t("2026-12-03T07:00:00Z"),
            held_from: Some(t(held)),
            first_at: Some(t(held)),
            lines: 42,
            complete: held == "2026-12-03T07:00:00Z",
        };
        let all = Replayed::of(&view("2026-12-03T07:00:00Z"));
        assert_eq!(all.held_from, None);
        assert_eq!(all.cell(), "42 lines from 07:00:00");
        let less = Replayed::of(&view("2026-12-03T07:02:30Z"));
        assert_eq!(
            less.cell(),
            "42 lines from 07:02:30, held less (asked from 07:00:00, held from 07:02:30)"
        );
        let mut lp = policy(1, None);
        lp.spec.replay = Some(logpolicy_api::crd::ReplayWindow { since: "5m".into() });
        let rows = pod_rows(
            &lp,
            &["shop-0".into()],
            &[(
                "shop-0".to_owned(),
                Ok(Some(PodHold {
                    version: 3,
                    applied_at: None,
                    replay: Some(view("2026-12-03T07:02:30Z")),
                })),
            )]
            .into(),
        );
        let table = pod_table(&lp, &rows);
        assert!(
            table.starts_with("POD      STATE     VERSION   APPLIED AT   REPLAYED"),
            "{table}"
        );
        assert!(
            table.contains("42 lines from 07:02:30, held less"),
            "{table}"
        );
    }
}
