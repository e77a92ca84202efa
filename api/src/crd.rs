//! The `LogPolicy` custom resource (`logpolicy.dev/v1beta1`, stored; `v1alpha1` served
//! beside it with the same schema: [`crd`]).
//!
//! Every field's doc comment becomes its description in the CRD, which is what
//! `kubectl explain logpolicy.spec.sampling` prints: write them for the on-call engineer
//! who reads them there.
//!
//! The settings of a policy (levels, targets, sampling, burst, budget) are the layer's
//! own types ([`logpolicy::policy::TargetSpec`], [`SamplingSpec`],
//! [`BurstSpec`], [`logpolicy::Level`]), with the layer's bounds: one shape and one set
//! of limits from the pod to `kubectl explain`.
//!
//! The schema says what OpenAPI v3 can say on Kubernetes 1.20 and later (no CEL): enums
//! for levels and scopes, bounds on every list, string and number, the duration pattern,
//! and `not: {required: [duration, expirationTime]}`. What it cannot say (an empty
//! selector, a span name on an event rule, a target the layer would refuse, an expiration
//! time that does not parse) is checked by [`validate`](crate::validate) and reported
//! as the `Ready` condition.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::CustomResource;
use logpolicy::policy::redact::{MAX_FIELD_NAME_LEN, MAX_REDACT_NAMES};
use logpolicy::policy::{
    BurstSpec, LayerSpec, RecordSpec, SamplingSpec, TargetSpec, WhenSpec, BYTES_PER_SECOND_RANGE,
    MAX_RECORD_RULES, MAX_SAMPLING_RULES, MAX_TARGETS,
};
use logpolicy::Level;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The smallest and largest `priority`.
pub const PRIORITY_RANGE: (i32, i32) = (-1000, 1000);
/// The most failing pods listed in `status.failingPods`.
pub const MAX_FAILING_PODS: usize = 10;
/// The longest `reason`, in characters: the pods' own bound.
pub use logpolicy::policy::MAX_REASON_LEN;
/// The pattern a `duration` must match, e.g. `15m`, `1h30m`, `90s`: numbers with units,
/// at least one of them not zero (`0s` is refused at admission). RE2 syntax (no
/// lookahead), as the API server reads it.
pub const DURATION_PATTERN: &str =
    "^([0-9]+(ms|s|m|h))*0*[1-9][0-9]*(ms|s|m|h)([0-9]+(ms|s|m|h))*$";

/// A LogPolicy changes what the selected pods log, while it exists or until it expires.
///
/// The operator pushes every LogPolicy that selects a pod into that pod's running
/// process as one layer of its logging policy; the pod merges the layers per target,
/// higher `priority` winning (ties: the older LogPolicy wins). When a LogPolicy expires
/// or is deleted, the pods fall back to what the remaining layers and their own
/// environment (`RUST_LOG`) say; an expiry is enforced by the pod itself, even if the
/// operator is gone.
// Each `printcolumn(...)` repeats `type_` and `priority`: not a duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "logpolicy.dev",
    version = "v1beta1",
    kind = "LogPolicy",
    plural = "logpolicies",
    singular = "logpolicy",
    namespaced,
    status = "LogPolicyStatus",
    derive = "PartialEq",
    shortname = "lp",
    shortname = "logpol",
    category = "observability",
    category = "logging",
    doc = "A LogPolicy changes what the selected pods log (levels per target, sampling, a byte budget), while it exists or until it expires.",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status",
        description = "Whether the spec is valid and in force"
    ),
    printcolumn(
        name = "Levels",
        type_ = "string",
        json_path = ".status.levels",
        description = "The levels the policy sets, as directives (default level first)"
    ),
    printcolumn(
        name = "Applied",
        type_ = "string",
        json_path = ".status.summary",
        description = "Pods that applied the policy / pods it selects"
    ),
    printcolumn(
        name = "Expires",
        type_ = "string",
        json_path = ".status.expirationTime",
        description = "When the policy stops applying"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Priority",
        type_ = "integer",
        json_path = ".spec.priority",
        priority = 1,
        description = "Higher wins per target"
    ),
    printcolumn(
        name = "Targets",
        type_ = "string",
        json_path = ".spec.targets[*].target",
        priority = 1,
        description = "The targets given a level"
    ),
    printcolumn(
        name = "Sampling",
        type_ = "string",
        json_path = ".spec.sampling[*].target",
        priority = 1,
        description = "The targets sampled"
    ),
    printcolumn(
        name = "Replayed",
        type_ = "string",
        json_path = ".status.replay.summary",
        priority = 1,
        description = "What the pods replayed of the recorded lines the policy asked for"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".spec.reason",
        priority = 1,
        description = "Why the policy exists"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(
    extend("not" = {"required": ["duration", "expirationTime"]}),
    transform = optional_enums_keep_field_docs
)]
pub struct LogPolicySpec {
    /// Which pods of this namespace the policy applies to, by label (e.g.
    /// `matchLabels: {app: checkout}`). Required and must not be empty. Only pods that opted
    /// in with the label `logpolicy.dev/enabled: "true"` are ever changed.
    #[schemars(extend("minProperties" = 1))]
    pub selector: LabelSelector,

    /// The level of every target that no `targets` entry names: one of `trace`, `debug`,
    /// `info`, `warn`, `error`, `off` (quote it in YAML: `"off"`). Unset leaves it to lower-priority policies and the
    /// pod's own environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_level: Option<Level>,

    /// Levels for tracing targets. A target matches itself and everything below it at a
    /// `::` boundary (`shop::payment` covers `shop::payment::card`, not
    /// `shop::payments`); the longest matching entry wins. At most one entry per target.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = MAX_TARGETS),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["target"])
    )]
    pub targets: Vec<TargetSpec>,

    /// Makes `targets` and `sampling` apply only to requests: to events in a span (or
    /// below one) that recorded the field `spanField` with one of the values `equals` (1
    /// to 16, text or whole numbers), e.g. `{spanField: user_id, equals: ["42"]}` raises
    /// one customer's requests and no other's. A policy with `when` sets `targets` and
    /// per-event `sampling` only (a matching request is always kept whole).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<WhenSpec>,

    /// Sampling rules for events below `alwaysKeep`: keep one in `keepOneIn` events (or
    /// whole requests) of a target; the rest are not written, and counted. At most one
    /// rule per target.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = MAX_SAMPLING_RULES),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["target"])
    )]
    pub sampling: Vec<SamplingSpec>,

    /// Recording rules: the events of `target` down to `level` that the levels in force
    /// do not write are kept, formatted and redacted, in each pod's memory (bounded: 8
    /// MiB and 15 minutes by default, the oldest leaving first), and written only when
    /// a policy asks for a `replay`. E.g. `[{target: shop::payment, level: debug}]` in a
    /// standing policy, then `kubectl logpolicy raise ... --since 5m` writes the last
    /// five minutes of them. A policy that only records needs no `duration`. Levels
    /// `trace` to `error` (not `off`); at most one rule per target.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = MAX_RECORD_RULES),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["target"])
    )]
    pub record: Vec<RecordSpec>,

    /// Asks each selected pod to write first the lines its recording rules kept from
    /// the last `since` (e.g. `{since: 5m}`), in their order with their original time
    /// and `"replayed":true`, between two lines of target `logpolicy`. A pod replays
    /// once per generation of the policy (a changed spec asks again; pushes of the same
    /// generation do not), and only the lines it still holds: `status.replay` says how
    /// many lines, from when, and how many pods held less than asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<ReplayWindow>,

    /// Events at or above this level are never sampled out or dropped for the byte
    /// budget (default `warn` in the pod: keep every warning and error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub always_keep: Option<Level>,

    /// A per-callsite burst limit for events below `alwaysKeep`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<BurstSpec>,

    /// A budget, in bytes per second, for the lines written below `alwaysKeep`; beyond it
    /// such events are dropped and counted. From 1024 (1 KiB/s) to 1099511627776 (1 TiB/s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        range(min = BYTES_PER_SECOND_RANGE.0, max = BYTES_PER_SECOND_RANGE.1),
        extend("format" = "int64")
    )]
    pub max_bytes_per_second: Option<u64>,

    /// Field names whose values the pods write as `[redacted]`, on top of their built-in
    /// list (`password`, `secret`, `token`, `authorization`, `cookie`, `api_key`, ...):
    /// matched without case, also as a suffix after `.` or `_` (`card_token` covers
    /// `payment.card_token`). ASCII letters, digits, `_`, `-`, `.`. A policy can only add
    /// names: raising verbosity never weakens redaction.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_REDACT_NAMES), inner(length(min = 1, max = MAX_FIELD_NAME_LEN), regex(pattern = "^[A-Za-z0-9_.-]+$")))]
    pub redact: Vec<String>,

    /// Also redact values shaped like secrets (bearer and basic credentials, JWTs, PEM
    /// private keys) inside every string the pods write, the message included. Costs a
    /// second rendering of each string value while on. Default off.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub redact_values: bool,

    /// Higher wins per target when several policies select a pod; between equal
    /// priorities the older policy wins. From -1000 to 1000, default 0.
    #[serde(default)]
    #[schemars(range(min = -1000, max = 1000))]
    pub priority: i32,

    /// How long the policy applies, counted from when the operator first sees this
    /// generation of it: a sequence of numbers with units `ms`, `s`, `m`, `h`, e.g.
    /// `15m`, `1h30m`; not zero. At most 8760h. Not together with `expirationTime`.
    /// Unset, and without `expirationTime`, the policy applies until it is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 2, max = 32), regex(pattern = DURATION_PATTERN))]
    pub duration: Option<String>,

    /// When the policy stops applying, as an RFC 3339 time (e.g.
    /// `2026-11-29T21:00:00Z`). Not together with `duration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"), length(max = 64))]
    pub expiration_time: Option<String>,

    /// Why the policy exists, in one line (e.g. `INC-4211: card declines at checkout`):
    /// shown by `kubectl get lp -o wide` and written by each pod in the lines that say when
    /// the policy started and stopped applying there. At most 256 characters, no control
    /// characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_REASON_LEN))]
    pub reason: Option<String>,
}

impl LogPolicySpec {
    /// The policy's settings as a layer of the pod's policy, with this `source` and no
    /// expiry: what the pod's own conversion checks, and what is pushed.
    pub fn layer_spec(&self, source: impl Into<String>) -> LayerSpec {
        LayerSpec {
            source: source.into(),
            priority: self.priority,
            expires_at: None,
            reason: self.reason.clone(),
            default_level: self.default_level,
            targets: self.targets.clone(),
            when: self.when.clone(),
            always_keep: self.always_keep,
            sampling: self.sampling.clone(),
            burst: self.burst,
            max_bytes_per_second: self.max_bytes_per_second,
            redact: self.redact.clone(),
            unredact: Vec::new(),
            redact_values: self.redact_values,
            record: self.record.clone(),
            // The replay's id depends on the object (uid and generation): the index
            // sets it, from `ValidatedPolicy::replay`.
            replay: None,
        }
    }
}

/// How far back a replay reaches.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ReplayWindow {
    /// The window, ending when the pod gets the policy: numbers with units `s`, `m`,
    /// `h`, e.g. `5m`, `90s`; at least 1s, at most 24h. A pod replays what it still
    /// holds of it (its recorder keeps 15 minutes and 8 MiB by default).
    #[schemars(length(min = 2, max = 32), regex(pattern = DURATION_PATTERN))]
    pub since: String,
}

/// The committed CRD file, relative to the workspace root.
pub const CRD_FILE: &str = "crds/logpolicy.dev_logpolicies.yaml";

/// The CRD to install: [`LogPolicy::crd()`](kube::CustomResourceExt::crd) without
/// `nullable` (nor `null` among an optional enum's values).
///
/// kube marks every `Option` field `nullable: true`; the operator never writes `null`
/// (unset fields are left out), and Kubernetes 1.20 publishes a nullable field to
/// `kubectl explain` without its type (`span <>`). Without `nullable`, a `null` sent by a
/// client is pruned, which is what leaving the field out means.
///
/// It serves two versions with one schema: [`VERSION`] (`v1beta1`, stored, what the
/// operator and the plugin write) and [`OLD_VERSIONS`] (`v1alpha1`, served so that
/// objects and manifests written for it keep working; conversion `None`: the API server
/// only rewrites `apiVersion`).
pub fn crd() -> CustomResourceDefinition {
    use kube::CustomResourceExt;
    let derived = LogPolicy::crd();
    let Ok(mut value) = serde_json::to_value(&derived) else {
        return derived;
    };
    strip_nullable(&mut value);
    if let Some(versions) = value
        .pointer_mut("/spec/versions")
        .and_then(serde_json::Value::as_array_mut)
    {
        if let Some(stored) = versions.first().cloned() {
            for old in OLD_VERSIONS {
                let mut served = stored.clone();
                served["name"] = old.into();
                served["storage"] = false.into();
                versions.push(served);
            }
        }
    }
    serde_json::from_value(value).unwrap_or(derived)
}

/// The version the operator and the plugin read and write, and the API server stores.
pub const VERSION: &str = "v1beta1";

/// Older versions the CRD still serves, with the same schema (see the chart README's
/// "API versions" for how long).
pub const OLD_VERSIONS: [&str; 1] = ["v1alpha1"];

/// `logpolicy.dev/v1beta1`: the `apiVersion` of what the operator writes.
pub const API_VERSION: &str = "logpolicy.dev/v1beta1";

fn strip_nullable(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            if m.get("nullable") == Some(&serde_json::Value::Bool(true)) {
                m.remove("nullable");
            }
            // An optional enum (a level) lists `null` among its values too: never sent.
            if let Some(serde_json::Value::Array(values)) = m.get_mut("enum") {
                values.retain(|v| !v.is_null());
            }
            m.values_mut().for_each(strip_nullable);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(strip_nullable),
        _ => {}
    }
}

/// The CRD as YAML, as `crdgen` writes it and [`CRD_FILE`] holds it.
///
/// Scalars that YAML 1.1 reads as booleans (`off`, `on`, `yes`, `no`, `y`, `n`) are
/// quoted: serde_yaml writes YAML 1.2, where `off` is a string, but kubectl and the API
/// server read YAML 1.1, where the level `off` would become `false`.
pub fn crd_yaml() -> Result<String, serde_yaml::Error> {
    let body = serde_yaml::to_string(&crd())?;
    let mut out = String::with_capacity(body.len() + 200);
    out.push_str(
        "# Generated from api/src/crd.rs by `cargo run -p logpolicy-api --bin crdgen`.\n\
         # Do not edit: change the types and regenerate.\n",
    );
    for line in body.lines() {
        out.push_str(&quote_yaml11_booleans(line));
        out.push('\n');
    }
    Ok(out)
}

/// Quotes a list item or mapping value that YAML 1.1 would read as a boolean.
pub fn quote_yaml11_booleans(line: &str) -> std::borrow::Cow<'_, str> {
    const WORDS: [&str; 16] = [
        "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on", "On", "ON", "off", "Off",
        "OFF",
    ];
    let split = line.rfind(": ").map(|i| i + 2).or_else(|| {
        line.trim_start()
            .starts_with("- ")
            .then(|| line.len() - line.trim_start().len() + 2)
    });
    match split {
        Some(i) if WORDS.contains(&&line[i..]) => format!("{}'{}'", &line[..i], &line[i..]).into(),
        _ => line.into(),
    }
}

/// Keeps a field's own description on an optional enum. schemars describes
/// `Option<Enum>` as `anyOf: [enum, null]`, which kube flattens with the enum's
/// description replacing the field's: flatten it here first, the field's keys winning.
fn optional_enums_keep_field_docs(schema: &mut schemars::Schema) {
    let Some(props) = schema
        .get_mut("properties")
        .and_then(serde_json::Value::as_object_mut)
    else {
        return;
    };
    let is_null = |v: &serde_json::Value| {
        v.get("type") == Some(&serde_json::json!("null"))
            || v.get("enum") == Some(&serde_json::json!([null]))
    };
    for prop in props.values_mut() {
        let Some(obj) = prop.as_object_mut() else {
            continue;
        };
        let inner = match obj.get("anyOf").and_then(serde_json::Value::as_array) {
            Some(a) if a.len() == 2 && is_null(&a[1]) => a[0].clone(),
            Some(a) if a.len() == 2 && is_null(&a[0]) => a[1].clone(),
            _ => continue,
        };
        let serde_json::Value::Object(inner) = inner else {
            continue;
        };
        obj.remove("anyOf");
        for (k, v) in inner {
            obj.entry(k).or_insert(v);
        }
        obj.insert("nullable".into(), true.into());
    }
}

/// What the operator observed and did for a LogPolicy.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LogPolicyStatus {
    /// The generation of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// `Ready` (the spec is valid and in force), `Applied` (every selected pod has
    /// acknowledged it; the message says e.g. `11/12 pods`) and `Expired`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 8),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"])
    )]
    pub conditions: Vec<Condition>,

    /// How many opted-in pods the selector matches.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub matched_pods: i32,

    /// How many of them acknowledged the current policy.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub applied_pods: i32,

    /// How many of them refused it or could not be reached after retries.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub failed_pods: i32,

    /// Up to 10 of the failing pods, with the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 10))]
    pub failing_pods: Vec<FailingPod>,

    /// The levels the policy in force sets, as directives, e.g.
    /// `info,shop::payment=debug` (the default level first, then each target), for
    /// `kubectl get`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub levels: Option<String>,

    /// `applied/matched`, e.g. `11/12`, for `kubectl get`; `expired` once the policy
    /// has expired (its pods are back to what they had without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    pub summary: Option<String>,

    /// When the policy stops applying (RFC 3339), computed once per generation from
    /// `duration` or copied from `expirationTime`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"), length(max = 64))]
    pub expiration_time: Option<String>,

    /// What the selected pods replayed of the window `spec.replay` asks for, in this
    /// generation (absent without `spec.replay`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<ReplayStatus>,
}

/// What the pods replayed for one generation of a policy.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplayStatus {
    /// The generation whose window was replayed.
    #[serde(default)]
    pub generation: i64,
    /// Pods that replayed it (each once).
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub pods: i32,
    /// Recorded lines they replayed, in all.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub lines: i64,
    /// The start of the window asked for (RFC 3339; the earliest of the pods').
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"), length(max = 64))]
    pub asked_from: Option<String>,
    /// When a pod that held less than asked still held lines from (RFC 3339; the latest
    /// of those pods'): its recorder had let older lines go (age or byte limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"), length(max = 64))]
    pub held_from: Option<String>,
    /// Pods whose recorder no longer held the start of the window.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub pods_held_less: i32,
    /// In one line, for `kubectl get lp -o wide`: e.g. `120 lines, 3/3 pods` or
    /// `80 lines, 3/3 pods, 1 held less`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub summary: Option<String>,
}

/// A pod that has not applied the policy, and why.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct FailingPod {
    /// The pod's name.
    #[schemars(length(max = 253))]
    pub name: String,
    /// Why, e.g. `timeout after 2s` or `422: layers[0].targets[0].level: invalid level`.
    #[schemars(length(max = 1024))]
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> serde_json::Value {
        let crd = crd();
        let v = serde_json::to_value(&crd).unwrap_or_default();
        v["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
    }

    fn walk(v: &serde_json::Value, path: &str, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, child) in m {
                    if matches!(
                        k.as_str(),
                        "$ref"
                            | "anyOf"
                            | "oneOf"
                            | "allOf"
                            | "definitions"
                            | "$defs"
                            | "x-kubernetes-validations"
                    ) {
                        out.push(format!("{path}.{k}"));
                    }
                    if k == "type" && child.as_str() == Some("number") {
                        out.push(format!("{path}: a float"));
                    }
                    walk(child, &format!("{path}.{k}"), out);
                }
            }
            serde_json::Value::Array(a) => {
                for (i, child) in a.iter().enumerate() {
                    walk(child, &format!("{path}[{i}]"), out);
                }
            }
            _ => {}
        }
    }

    #[test]
    fn the_schema_is_structural_and_has_no_floats_refs_or_cel() {
        let mut bad = Vec::new();
        walk(&schema(), "", &mut bad);
        assert!(bad.is_empty(), "{bad:#?}");
    }

    /// Every property, at every depth, has a description (`kubectl explain`).
    #[test]
    fn every_field_is_documented() {
        fn check(v: &serde_json::Value, path: &str, out: &mut Vec<String>) {
            if let Some(props) = v.get("properties").and_then(|p| p.as_object()) {
                for (k, child) in props {
                    let p = format!("{path}.{k}");
                    let top = matches!(p.as_str(), ".apiVersion" | ".kind" | ".metadata");
                    if !top && child.get("description").is_none() {
                        out.push(p.clone());
                    }
                    check(child, &p, out);
                }
            }
            if let Some(items) = v.get("items") {
                check(items, &format!("{path}[]"), out);
            }
        }
        let mut missing = Vec::new();
        check(&schema(), "", &mut missing);
        assert!(missing.is_empty(), "undocumented: {missing:?}");
    }

    #[test]
    fn the_schema_says_what_1_20_can_check() {
        let s = schema();
        let spec = &s["properties"]["spec"];
        assert_eq!(spec["required"], serde_json::json!(["selector"]));
        assert_eq!(
            spec["not"],
            serde_json::json!({"required": ["duration", "expirationTime"]})
        );
        let targets = &spec["properties"]["targets"];
        assert_eq!(targets["x-kubernetes-list-type"], "map");
        assert_eq!(
            targets["x-kubernetes-list-map-keys"],
            serde_json::json!(["target"])
        );
        assert_eq!(targets["maxItems"], MAX_TARGETS);
        assert_eq!(
            targets["items"]["properties"]["level"]["enum"],
            serde_json::json!(["trace", "debug", "info", "warn", "error", "off"])
        );
        let sampling = &spec["properties"]["sampling"];
        assert_eq!(sampling["maxItems"], MAX_SAMPLING_RULES);
        let keep = &sampling["items"]["properties"]["keepOneIn"];
        assert_eq!(
            (keep["minimum"].as_f64(), keep["maximum"].as_f64()),
            (Some(1.0), Some(1e6))
        );
        assert_eq!(
            sampling["items"]["properties"]["scope"]["enum"],
            serde_json::json!(["event", "request"])
        );
        assert_eq!(spec["properties"]["duration"]["pattern"], DURATION_PATTERN);
        let record = &spec["properties"]["record"];
        assert_eq!(record["maxItems"], MAX_RECORD_RULES);
        assert_eq!(
            record["x-kubernetes-list-map-keys"],
            serde_json::json!(["target"])
        );
        assert_eq!(
            record["items"]["required"],
            serde_json::json!(["level", "target"])
        );
        let since = &spec["properties"]["replay"]["properties"]["since"];
        assert_eq!(since["pattern"], DURATION_PATTERN);
        assert_eq!(
            spec["properties"]["replay"]["required"],
            serde_json::json!(["since"])
        );
        let replay = &s["properties"]["status"]["properties"]["replay"]["properties"];
        for field in [
            "generation",
            "pods",
            "lines",
            "askedFrom",
            "heldFrom",
            "podsHeldLess",
            "summary",
        ] {
            assert!(replay.get(field).is_some(), "status.replay.{field}");
        }
        assert_eq!(spec["properties"]["expirationTime"]["format"], "date-time");
        let mbps = &spec["properties"]["maxBytesPerSecond"];
        assert_eq!(
            (mbps["minimum"].as_f64(), mbps["maximum"].as_f64()),
            (Some(1024.0), Some((1u64 << 40) as f64))
        );
        let prio = &spec["properties"]["priority"];
        assert_eq!(
            (prio["minimum"].as_f64(), prio["maximum"].as_f64()),
            (
                Some(f64::from(PRIORITY_RANGE.0)),
                Some(f64::from(PRIORITY_RANGE.1))
            )
        );
        for level in ["defaultLevel", "alwaysKeep"] {
            let field = &spec["properties"][level];
            assert_eq!(
                field["enum"],
                serde_json::json!(["trace", "debug", "info", "warn", "error", "off"])
            );
            assert_ne!(
                field["description"], "A log level.",
                "{level} lost its own description"
            );
        }
        let conditions = &s["properties"]["status"]["properties"]["conditions"];
        assert_eq!(
            conditions["x-kubernetes-list-map-keys"],
            serde_json::json!(["type"])
        );
        let failing = &s["properties"]["status"]["properties"]["failingPods"];
        assert_eq!(failing["maxItems"], MAX_FAILING_PODS);
    }

    #[test]
    fn names_columns_and_subresources() {
        let crd = crd();
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("logpolicies.logpolicy.dev")
        );
        let names = &crd.spec.names;
        assert_eq!(names.short_names, Some(vec!["lp".into(), "logpol".into()]));
        assert_eq!(
            names.categories,
            Some(vec!["observability".into(), "logging".into()])
        );
        assert_eq!(crd.spec.scope, "Namespaced");
        let version = &crd.spec.versions[0];
        assert!(version
            .subresources
            .as_ref()
            .and_then(|s| s.status.as_ref())
            .is_some());
        let columns: Vec<(String, i32)> = version
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| (c.name.clone(), c.priority.unwrap_or(0)))
            .collect();
        assert_eq!(
            columns,
            [
                ("Ready", 0),
                ("Levels", 0),
                ("Applied", 0),
                ("Expires", 0),
                ("Age", 0),
                ("Priority", 1),
                ("Targets", 1),
                ("Sampling", 1),
                ("Replayed", 1),
                ("Reason", 1)
            ]
            .map(|(n, p)| (n.to_owned(), p))
        );
    }

    #[test]
    fn yaml_1_1_booleans_are_quoted() {
        let yaml = crd_yaml().unwrap();
        assert!(yaml.contains("- 'off'\n"), "the level off must be quoted");
        assert!(!yaml
            .lines()
            .any(|l| l.trim_end().ends_with("- off") || l.trim_end().ends_with(": off")));
        assert_eq!(quote_yaml11_booleans("  default: on"), "  default: 'on'");
        assert_eq!(quote_yaml11_booleans("    - no"), "    - 'no'");
        assert_eq!(quote_yaml11_booleans("    - info"), "    - info");
        assert_eq!(
            quote_yaml11_booleans("  description: turn it off"),
            "  description: turn it off"
        );
        // Still the same data.
        let back: serde_yaml::Value = serde_yaml::from_str(&yaml).unwrap();
        let direct: serde_yaml::Value =
            serde_yaml::from_str(&serde_yaml::to_string(&crd()).unwrap()).unwrap();
        assert_eq!(back, direct);
    }

    #[test]
    fn a_policy_round_trips_through_yaml() {
        let yaml = r#"
apiVersion: logpolicy.dev/v1beta1
kind: LogPolicy
metadata: {name: debug-payments, namespace: shop}
spec:
  selector: {matchLabels: {app: checkout}}
  defaultLevel: info
  targets:
  - {target: "checkout::payment", level: debug}
  sampling:
  - {target: "http::access", keepOneIn: 100, scope: request}
  alwaysKeep: warn
  maxBytesPerSecond: 1048576
  priority: 0
  duration: 15m
  record:
  - {target: "checkout::db", level: trace}
  replay: {since: 5m}
"#;
        let lp: LogPolicy = serde_yaml::from_str(yaml).unwrap();
        assert_eq!(lp.spec.record[0].level, Level::Trace);
        assert_eq!(
            lp.spec.replay.as_ref().map(|r| r.since.as_str()),
            Some("5m")
        );
        assert_eq!(lp.spec.default_level, Some(Level::Info));
        assert_eq!(
            lp.spec.sampling[0].scope,
            logpolicy::policy::SamplingScope::Request
        );
        assert_eq!(lp.spec.duration.as_deref(), Some("15m"));
        let back: LogPolicy = serde_yaml::from_str(&serde_yaml::to_string(&lp).unwrap()).unwrap();
        assert_eq!(back, lp);
    }
}
