//! What the selected pods record: each pod's recording rules (the `@record(target)=level`
//! of its effective directives: from a LogPolicy's `record`, or the pod's own
//! environment) and what its recorder holds (`PolicyView.recorder`: lines, bytes of its
//! limit, the oldest line, the lines expired), from one `GET /logpolicy` per pod.
//!
//! `targets` and `top` print it under their table when some pod records; `check` warns
//! of a rule whose target no pod knows ([`unknown_rules`]): it records nothing.

use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use logpolicy::wire::{PolicyView, RecorderView};
use logpolicy::{Directives, Level};
use serde::Serialize;

use crate::cluster::Kube;
use crate::cost::bytes;
use crate::fleet::{PodId, FLEET_READS};
use crate::output::{short_duration, table};

/// A recording rule in force on a pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rule {
    /// The target.
    pub target: String,
    /// The most verbose level recorded.
    pub level: Level,
}

/// What one pod records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodRecording {
    /// The pod.
    #[serde(flatten)]
    pub pod: PodId,
    /// Its recording rules in force.
    pub rules: Vec<Rule>,
    /// What its recorder holds (absent from pods of earlier versions).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recorder: Option<RecorderView>,
    /// How old its oldest held line was when it answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oldest_age_seconds: Option<u64>,
}

impl PodRecording {
    /// From a pod's `GET /logpolicy`: the rules from its effective directives (what
    /// every viewer gets, the reduced view included).
    ///
    /// ```
    /// use kubectl_logpolicy::fleet::PodId;
    /// use kubectl_logpolicy::recording::PodRecording;
    /// let view = serde_json::from_value(serde_json::json!({
    ///     "effective": {"directives": "info,@record(shop::payment)=debug"},
    ///     "readAt": "2026-12-03T07:05:00Z",
    ///     "recorder": {"bytes": 2048, "maxBytes": 8388608, "lines": 9,
    ///         "oldest": "2026-12-03T07:01:00Z", "expired": 2},
    /// })).unwrap();
    /// let pod = PodId { namespace: "shop".into(), name: "shop-0".into() };
    /// let r = PodRecording::of(pod, &view);
    /// assert_eq!(r.rules_text(), "shop::payment=debug");
    /// assert_eq!(r.oldest_age_seconds, Some(240));
    /// ```
    pub fn of(pod: PodId, view: &PolicyView) -> Self {
        let rules = view
            .effective
            .directives
            .parse::<Directives>()
            .map(|d| {
                d.record
                    .iter()
                    .map(|(target, level)| Rule {
                        target: target.as_str().to_owned(),
                        level: *level,
                    })
                    .collect()
            })
            .unwrap_or_default();
        let now = view.read_at.unwrap_or_else(SystemTime::now);
        let oldest_age_seconds = view
            .recorder
            .as_ref()
            .and_then(|r| r.oldest)
            .map(|t| now.duration_since(t).unwrap_or_default().as_secs());
        PodRecording {
            pod,
            rules,
            recorder: view.recorder.clone(),
            oldest_age_seconds,
        }
    }

    /// Its rules as directives say them: `shop::payment=debug,shop::db=trace`, `-` for
    /// none.
    pub fn rules_text(&self) -> String {
        if self.rules.is_empty() {
            return "-".to_owned();
        }
        let rules: Vec<String> = self
            .rules
            .iter()
            .map(|r| format!("{}={}", r.target, r.level))
            .collect();
        rules.join(",")
    }

    /// Whether it records, or still holds recorded lines.
    pub fn records(&self) -> bool {
        !self.rules.is_empty() || self.recorder.as_ref().is_some_and(|r| r.lines > 0)
    }
}

/// Each readable pod's recording, by `GET /logpolicy`, [`FLEET_READS`] at a time (a pod
/// that cannot be read is left out: the commands' own reads say why).
pub async fn read_recordings(kube: &Kube, pods: &[Pod]) -> Vec<PodRecording> {
    use futures::StreamExt;
    let reads = pods.iter().map(|pod| async move {
        let id = PodId::of(pod, &kube.namespace);
        kube.pod_get::<PolicyView>(pod, "/logpolicy")
            .await
            .ok()
            .map(|view| PodRecording::of(id, &view))
    });
    let mut out: Vec<PodRecording> = futures::stream::iter(reads)
        .buffer_unordered(FLEET_READS)
        .filter_map(|r| async move { r })
        .collect()
        .await;
    out.sort_by(|a, b| a.pod.cmp(&b.pod));
    out
}

/// The pods that record, as a table (POD, RECORDS, LINES, BYTES of the limit, OLDEST
/// line's age, EXPIRED), after a heading line; empty when no pod records.
///
/// ```
/// use kubectl_logpolicy::fleet::PodId;
/// use kubectl_logpolicy::recording::{recording_table, PodRecording, Rule};
/// let pod = PodRecording {
///     pod: PodId { namespace: "shop".into(), name: "shop-0".into() },
///     rules: vec![Rule { target: "shop::payment".into(), level: logpolicy::Level::Debug }],
///     recorder: Some(logpolicy::wire::RecorderView { bytes: 3 << 20, max_bytes: 8 << 20,
///         lines: 12000, oldest: None, expired: 40 }),
///     oldest_age_seconds: Some(312),
/// };
/// assert_eq!(recording_table(&[pod], false),
///     "recording (lines kept for a raise --since):\n\
///      POD      RECORDS               LINES   BYTES             OLDEST   EXPIRED\n\
///      shop-0   shop::payment=debug   12000   3.0 MiB/8.0 MiB   5m12s    40\n");
/// ```
pub fn recording_table(pods: &[PodRecording], qualified: bool) -> String {
    let rows: Vec<Vec<String>> = pods
        .iter()
        .filter(|p| p.records())
        .map(|p| {
            let r = p.recorder.clone().unwrap_or_default();
            vec![
                p.pod.label(qualified),
                p.rules_text(),
                r.lines.to_string(),
                format!("{}/{}", bytes(r.bytes as f64), bytes(r.max_bytes as f64)),
                p.oldest_age_seconds.map_or_else(
                    || "-".to_owned(),
                    |s| short_duration(Duration::from_secs(s)),
                ),
                r.expired.to_string(),
            ]
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut out = "recording (lines kept for a raise --since):\n".to_owned();
    out.push_str(&table(
        &["POD", "RECORDS", "LINES", "BYTES", "OLDEST", "EXPIRED"],
        &rows,
    ));
    out
}

/// The recording rules in force on `pods` whose target none of the `known` target
/// names covers (a rule's target covers a known target at or below it at a `::`
/// boundary), each once, with the pods that have it: such a rule records nothing (a
/// misspelt target, or code that has not run yet).
///
/// ```
/// use kubectl_logpolicy::fleet::PodId;
/// use kubectl_logpolicy::recording::{unknown_rules, PodRecording, Rule};
/// let rules = |t: &[&str]| PodRecording {
///     pod: PodId { namespace: "shop".into(), name: "shop-0".into() },
///     rules: t.iter().map(|t| Rule { target: (*t).into(), level: logpolicy::Level::Debug }).collect(),
///     recorder: None,
///     oldest_age_seconds: None,
/// };
/// let unknown = unknown_rules(&[rules(&["shop::payment", "shop::paymnt", "shop"])], &["shop::payment::card"]);
/// assert_eq!(unknown, [("shop::paymnt".to_owned(), 1)]);
/// ```
pub fn unknown_rules(pods: &[PodRecording], known: &[&str]) -> Vec<(String, usize)> {
    let mut out: Vec<(String, usize)> = Vec::new();
    for rule in pods.iter().flat_map(|p| &p.rules) {
        if crate::known::covers(&rule.target, known) {
            continue;
        }
        match out.iter_mut().find(|(t, _)| *t == rule.target) {
            Some((_, n)) => *n += 1,
            None => out.push((rule.target.clone(), 1)),
        }
    }
    out
}
