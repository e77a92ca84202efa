//! What the admin endpoint answers, typed: the pod writes these and the operator reads
//! them, from one definition.

use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::document::PodRef;
use crate::level::Level;
use crate::policy::{BurstSpec, LayerSpec, RecordSpec, SamplingSpec, TargetSpec};

/// The body of every error answer: `{"error": "<code>", "reason": "<what is wrong>"}`,
/// and for a `409` the version the pod holds (`heldVersion`), so that the sender can go
/// past it without asking.
///
/// # Examples
///
/// ```
/// use logpolicy::wire::ErrorReply;
/// let reply: ErrorReply = serde_json::from_str(
///     r#"{"error": "stale_version", "reason": "version 3 is older than the version held, 7", "heldVersion": 7}"#,
/// )?;
/// assert_eq!(reply.held_version, Some(7));
/// assert_eq!(reply.to_string(), "stale_version: version 3 is older than the version held, 7");
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorReply {
    /// A short code, e.g. `stale_version`, `wrong_pod`, `bad_signature`.
    pub error: String,
    /// What is wrong, for a person.
    #[serde(default)]
    pub reason: String,
    /// With `stale_version` and `version_conflict`: the version the pod holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_version: Option<u64>,
}

impl ErrorReply {
    /// A reply with this code and reason.
    pub fn new(error: impl Into<String>, reason: impl Into<String>) -> Self {
        ErrorReply {
            error: error.into(),
            reason: reason.into(),
            held_version: None,
        }
    }
}

impl std::fmt::Display for ErrorReply {
    /// `code: reason` (the code alone when there is no reason).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.reason.is_empty() {
            f.write_str(&self.error)
        } else {
            write!(f, "{}: {}", self.error, self.reason)
        }
    }
}

/// The body of `GET /logpolicy`, and of a `PUT` or `DELETE` that was applied (with
/// `unchanged`): what the pod enforces and why.
///
/// A reader takes what it finds: a field that is missing reads as its default, so
/// pods and operators of neighbouring versions understand each other.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PolicyView {
    /// The merged policy in force.
    pub effective: EffectiveView,
    /// Every layer, the baseline `env` included, with whether it is in force.
    pub layers: Vec<LayerView>,
    /// The last document accepted, `null` before the first.
    pub document: Option<HeldDocument>,
    /// When the next layer in force expires.
    #[serde(with = "crate::clock::serde_rfc3339_opt")]
    pub next_expiry: Option<SystemTime>,
    /// What the effective policy becomes then.
    pub after_next_expiry: Option<EffectiveView>,
    /// Increases with every compiled change, expiry included.
    pub generation: u64,
    /// The ids of the keys whose signatures this pod accepts now (16 hex digits each, as
    /// the `X-Logpolicy-Signature` header names them); empty when it trusts none (every
    /// push is refused). Key ids are not secrets: every viewer gets them. Absent
    /// (`None`) from pods of earlier versions.
    pub trusted_keys: Option<Vec<String>>,
    /// This pod's clock when it answered, the clock it judges documents by (`issuedAt`
    /// within 5 minutes of it). Absent from pods of earlier versions.
    #[serde(with = "crate::clock::serde_rfc3339_opt")]
    pub read_at: Option<SystemTime>,
    /// How much this view shows: `full` to a peer on the pod's loopback (a process of
    /// the pod, `kubectl port-forward`), `reduced` to any other.
    #[serde(default)]
    pub scope: ViewScope,
    /// In the answer to a `PUT` or `DELETE`: whether the document was the one already
    /// held (same version, same content), so nothing changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unchanged: Option<bool>,
    /// The replays pushed layers asked for, the last one per layer source (see
    /// [`crate::recorder`]); absent from pods of earlier versions.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub replays: Vec<ReplayView>,
    /// What the recorder holds now (absent from pods of earlier versions).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recorder: Option<RecorderView>,
}

/// One replay a pushed layer asked for, as the pod did it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplayView {
    /// The layer's source (`namespace/name`).
    pub policy: String,
    /// The replay's id (once per id).
    pub id: String,
    /// When the pod replayed, by its clock.
    #[serde(with = "crate::clock::serde_rfc3339")]
    pub at: SystemTime,
    /// The start of the window asked for.
    #[serde(with = "crate::clock::serde_rfc3339")]
    pub asked_from: SystemTime,
    /// When the oldest line the store held was emitted (absent: it held none); later
    /// than `askedFrom` when the pod held less than asked.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::clock::serde_rfc3339_opt"
    )]
    pub held_from: Option<SystemTime>,
    /// When the first replayed line was emitted.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::clock::serde_rfc3339_opt"
    )]
    pub first_at: Option<SystemTime>,
    /// Lines replayed.
    pub lines: u64,
}

/// What a pod's recorder holds.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct RecorderView {
    /// Bytes held (each line's length and its mark).
    pub bytes: u64,
    /// The byte limit.
    pub max_bytes: u64,
    /// Lines held.
    pub lines: u64,
    /// When the oldest line held was emitted.
    #[serde(
        skip_serializing_if = "Option::is_none",
        with = "crate::clock::serde_rfc3339_opt"
    )]
    pub oldest: Option<SystemTime>,
    /// Lines expired since the start (too old, or pushed out by the byte limit).
    pub expired: u64,
}

/// How much of the policy a [`PolicyView`] shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ViewScope {
    /// Everything: each layer's settings and reason, the pod the document was for.
    #[default]
    Full,
    /// What is in force and since when: the effective directives and their sources,
    /// each layer's source, priority, expiry and whether it is in force, the held
    /// document's version and times, the generation.
    Reduced,
}

/// A merged policy: as directives, and structured.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct EffectiveView {
    /// As directives, e.g. `info,shop::payment=debug,@always_keep=warn`.
    pub directives: String,
    /// The sources of the layers in force, highest priority first.
    pub sources: Vec<String>,
    /// The level of targets no entry names.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_level: Option<Level>,
    /// Per-target levels.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<TargetSpec>,
    /// The level at and above which nothing is sampled or dropped for budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub always_keep: Option<Level>,
    /// Sampling rules.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sampling: Vec<SamplingSpec>,
    /// The burst limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burst: Option<BurstSpec>,
    /// The output budget in bytes per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_bytes_per_second: Option<u64>,
    /// Recording rules.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub record: Vec<RecordSpec>,
}

/// One layer of the pod's policy, in the document's layer shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayerView {
    /// The layer.
    #[serde(flatten)]
    pub layer: LayerSpec,
    /// Whether it is in force now (not expired).
    #[serde(default)]
    pub active: bool,
}

/// The document a pod holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeldDocument {
    /// Its version: a push must be newer.
    pub version: u64,
    /// When it was issued.
    #[serde(default = "unix_epoch", with = "crate::clock::serde_rfc3339")]
    pub issued_at: SystemTime,
    /// The pod it was for (absent from the reduced view).
    #[serde(default, skip_serializing_if = "PodRef::is_empty")]
    pub pod: PodRef,
    /// When this pod accepted it, by its own clock (absent from pods of earlier
    /// versions).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::clock::serde_rfc3339_opt"
    )]
    pub applied_at: Option<SystemTime>,
}

fn unix_epoch() -> SystemTime {
    SystemTime::UNIX_EPOCH
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn a_view_round_trips_and_reads_as_the_pod_wrote_it() {
        let t = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let layer: LayerSpec = serde_json::from_str(
            r#"{"source": "shop/raise", "priority": 5, "targets": [{"target": "shop", "level": "debug"}]}"#,
        )
        .unwrap();
        let view = PolicyView {
            effective: EffectiveView {
                directives: "info,shop=debug".into(),
                sources: vec!["shop/raise".into(), "env".into()],
                default_level: Some(Level::Info),
                targets: layer.targets.clone(),
                always_keep: Some(Level::Warn),
                sampling: Vec::new(),
                burst: None,
                max_bytes_per_second: None,
                record: Vec::new(),
            },
            layers: vec![LayerView {
                layer,
                active: true,
            }],
            document: Some(HeldDocument {
                version: 4,
                issued_at: t,
                pod: PodRef::new("shop", "web-1", "u1"),
                applied_at: Some(t + Duration::from_millis(1500)),
            }),
            next_expiry: Some(t),
            after_next_expiry: None,
            generation: 9,
            trusted_keys: Some(vec!["0123456789abcdef".into()]),
            read_at: Some(t),
            scope: ViewScope::Full,
            unchanged: Some(false),
            replays: Vec::new(),
            recorder: None,
        };
        let json = serde_json::to_value(&view).unwrap();
        assert_eq!(json["scope"], "full");
        assert_eq!(json["document"]["version"], 4);
        assert_eq!(
            json["document"]["appliedAt"],
            "2027-01-15T08:00:01.500000000Z"
        );
        assert_eq!(json["layers"][0]["source"], "shop/raise");
        assert_eq!(json["layers"][0]["active"], true);
        assert_eq!(json["effective"]["defaultLevel"], "info");
        assert_eq!(json["nextExpiry"], "2027-01-15T08:00:00Z");
        assert_eq!(json["trustedKeys"][0], "0123456789abcdef");
        assert_eq!(json["readAt"], "2027-01-15T08:00:00Z");
        assert_eq!(serde_json::from_value::<PolicyView>(json).unwrap(), view);
    }

    #[test]
    fn a_reader_takes_what_it_finds() {
        let view: PolicyView =
            serde_json::from_str(r#"{"document": {"version": 9}, "layers": [{"source": "env"}]}"#)
                .unwrap();
        assert_eq!(view.document.map(|d| d.version), Some(9));
        assert_eq!(view.layers[0].layer.source, "env");
        assert_eq!(
            view.scope,
            ViewScope::Full,
            "a pod of an earlier version shows all"
        );
        assert!(serde_json::from_str::<PolicyView>("[1]").is_err());
        let e: ErrorReply = serde_json::from_str(r#"{"error": "busy"}"#).unwrap();
        assert_eq!(e.to_string(), "busy");
    }

    #[test]
    fn an_error_without_a_held_version_leaves_it_out() {
        let json = serde_json::to_string(&ErrorReply::new("wrong_pod", "pod.uid")).unwrap();
        assert_eq!(json, r#"{"error":"wrong_pod","reason":"pod.uid"}"#);
    }
}
