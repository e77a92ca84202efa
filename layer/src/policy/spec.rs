//! The one serde shape of a policy layer ([`LayerSpec`]), and the one conversion from it
//! into a [`PolicyLayer`].
//!
//! Every JSON form of a layer is this shape: a layer of [`Policy::from_json`], of a
//! signed policy document ([`crate::wire`]), of the admin endpoint's view; and the
//! settings of a `LogPolicy` in Kubernetes use its parts ([`TargetSpec`],
//! [`SamplingSpec`], [`BurstSpec`], [`Level`]). The conversion validates every field and
//! reports every problem, each with the path of its field, so the pod (which refuses
//! the first) and the operator (which lists them all in the policy's status) apply one
//! set of rules.
//!
//! With the cargo feature `schema`, the parts derive `schemars::JsonSchema`, with the
//! bounds of this module's constants ([`MAX_TARGETS`], [`MAX_SAMPLING_RULES`], …).

use std::fmt;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::redact::{FieldName, MAX_REDACT_NAMES};
use super::sampling::{self, Burst, SamplingRule, Scope};
use super::when::has_entry;
use super::{
    check_reason, Directives, Policy, PolicyError, PolicyLayer, ReplayAsk, Target, When,
    WhenSampling, WhenTarget, BASELINE_SOURCE, MAX_RECORD_RULES, MAX_REPLAY_ID_LEN,
    MAX_REPLAY_SECONDS, MAX_SAMPLING_RULES, MAX_TARGETS, MAX_WHEN_TARGETS,
};
use crate::level::Level;

#[cfg(feature = "schema")]
use super::redact::MAX_FIELD_NAME_LEN;
#[cfg(feature = "schema")]
use super::{
    MAX_ONE_IN, MAX_PER_SECOND, MAX_REASON_LEN, MAX_SPAN_NAME_LEN, MAX_TARGET_LEN,
    MAX_WHEN_FIELD_LEN, MAX_WHEN_VALUES,
};

/// One layer of a policy in its JSON form: camelCase, unknown fields refused, everything
/// but `source` optional.
///
/// # Examples
///
/// ```
/// use logpolicy::policy::LayerSpec;
/// use logpolicy::PolicyLayer;
///
/// let spec = LayerSpec::from_directives("shop/raise", 10, "info,shop::payment=debug".parse().unwrap());
/// assert_eq!(spec.targets[0].target, "shop::payment");
/// let layer = PolicyLayer::try_from(&spec).unwrap();
/// assert_eq!(layer.directives.to_string(), "info,shop::payment=debug");
///
/// let bad: LayerSpec = serde_json::from_str(r#"{"source": "shop/raise",
///     "targets": [{"target": "shop payment", "level": "debug"}],
///     "sampling": [{"target": "shop::http", "keepOneIn": 0}]}"#).unwrap();
/// let errors = PolicyLayer::try_from(&bad).unwrap_err();
/// let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
/// assert_eq!(paths, ["targets[0].target", "sampling[0].keepOneIn"]);
/// assert_eq!(errors.to_string(),
///     r#"targets[0].target: target "shop payment" contains ' ', which is not allowed in a target"#);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LayerSpec {
    /// Where the layer comes from: the LogPolicy's `namespace/name`, or `env` for the
    /// pod's baseline.
    pub source: String,
    /// Higher wins per target; between equal priorities, the layer listed first wins.
    #[serde(default)]
    pub priority: i32,
    /// When the layer stops applying (RFC 3339); the pod enforces it by itself.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::clock::serde_rfc3339_opt"
    )]
    #[cfg_attr(feature = "schema", schemars(with = "Option<String>"))]
    pub expires_at: Option<SystemTime>,
    /// Why the layer exists, in one line (e.g. `INC-4211: card declines at checkout`):
    /// the pod names it in the lines it writes when the layer starts and stops applying.
    /// At most 256 characters, no control characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = MAX_REASON_LEN)))]
    pub reason: Option<String>,
    /// The level of targets no entry names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_level: Option<Level>,
    /// Per-target levels (`::`-boundary prefix, longest wins).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<TargetSpec>,
    /// Makes every entry of `targets` and `sampling` apply only to events in a span (or
    /// below one) that recorded this field with one of these values, e.g.
    /// `{"spanField": "user_id", "equals": ["42"]}`. A layer with `when` sets target
    /// levels and event sampling only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<WhenSpec>,
    /// The level at and above which nothing is sampled or dropped for budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub always_keep: Option<Level>,
    /// Sampling rules for events below `alwaysKeep`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sampling: Vec<SamplingSpec>,
    /// A per-callsite burst limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<BurstSpec>,
    /// An output budget in bytes per second; events below `alwaysKeep` beyond it are
    /// dropped and counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes_per_second: Option<u64>,
    /// Field names whose values are written as `[redacted]`, besides the built-in list
    /// (`password`, `token`, `authorization`, ...); also as a suffix after `.` or `_`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(max = MAX_REDACT_NAMES), inner(length(min = 1, max = MAX_FIELD_NAME_LEN)))
    )]
    pub redact: Vec<String>,
    /// Built-in names no longer redacted: only the service's own baseline (`env`) may;
    /// refused in any other layer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "schema", schemars(skip))]
    pub unredact: Vec<String>,
    /// Also redact values shaped like secrets (bearer tokens, JWTs, private keys) in
    /// every string, the message included.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub redact_values: bool,
    /// Recording rules: the events of each target down to its level that the levels in
    /// force do not write are kept in the pod's memory, bounded, for a raise to replay
    /// (`@record(target)=level` in directives).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "schema", schemars(length(max = MAX_RECORD_RULES)))]
    pub record: Vec<RecordSpec>,
    /// Asks the pod to write first the lines its recording rules kept from the last
    /// `sinceSeconds`, once per `id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<ReplaySpec>,
}

/// A replay a layer asks for: the recorded lines of the last `sinceSeconds`, once per
/// `id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ReplaySpec {
    /// How far back, in seconds: 1 to 86400.
    pub since_seconds: u64,
    /// Replayed once per id (the operator uses the LogPolicy's uid and generation): 1 to
    /// 128 printable characters.
    pub id: String,
}

/// A recording rule: keep in memory the events of `target` down to `level` that are not
/// written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct RecordSpec {
    /// A tracing target prefix, e.g. `shop::payment`.
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = MAX_TARGET_LEN)))]
    pub target: String,
    /// The most verbose level recorded: one of `trace`, `debug`, `info`, `warn`,
    /// `error` (not `off`).
    pub level: Level,
}

/// A level for one tracing target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct TargetSpec {
    /// A tracing target prefix, e.g. `shop::payment` (Rust module paths are targets by
    /// default). No whitespace, commas, `=`, brackets, braces, quotes, `@` or parentheses.
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = MAX_TARGET_LEN)))]
    pub target: String,
    /// The level for the target and everything below it: one of `trace`, `debug`,
    /// `info`, `warn`, `error`, `off` (quote it in YAML: `"off"`).
    pub level: Level,
    /// Only in a span (or below one) that recorded this field with one of these values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<WhenSpec>,
}

/// A condition on the request: a span field and the values it must have (see
/// [`When`](super::When)).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WhenSpec {
    /// The span field, a plain identifier, e.g. `user_id`.
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = MAX_WHEN_FIELD_LEN), regex(pattern = "^[A-Za-z_][A-Za-z0-9_]*$"))
    )]
    pub span_field: String,
    /// The values it must have, as text (`42` matches `user_id = 42` and `user_id =
    /// "42"`); 1 to 16.
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = MAX_WHEN_VALUES)))]
    pub equals: Vec<WhenValue>,
}

/// One value of a [`WhenSpec`]: text or a whole number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum WhenValue {
    /// A whole number, matched by its decimal text.
    Int(i64),
    /// Text.
    Text(String),
}

/// An int-or-string, as Kubernetes schemas say it.
#[cfg(feature = "schema")]
impl schemars::JsonSchema for WhenValue {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "WhenValue".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A value: text (1 to 128 printable ASCII characters, no spaces, '|', ',', '(' or ')') or a whole number.",
            "x-kubernetes-int-or-string": true
        })
    }
}

impl WhenValue {
    fn text(&self) -> String {
        match self {
            WhenValue::Int(i) => i.to_string(),
            WhenValue::Text(s) => s.clone(),
        }
    }
}

impl WhenSpec {
    /// The condition, or its error (paths `when.spanField`, `when.equals[i]`).
    ///
    /// ```
    /// use logpolicy::policy::WhenSpec;
    /// let spec: WhenSpec = serde_json::from_str(r#"{"spanField": "user_id", "equals": [43, "42"]}"#).unwrap();
    /// assert_eq!(spec.to_when().unwrap().to_string(), "user_id=42|43");
    /// ```
    pub fn to_when(&self) -> Result<When, super::WhenError> {
        When::new(&self.span_field, self.equals.iter().map(WhenValue::text))
    }
}

impl From<&When> for WhenSpec {
    fn from(w: &When) -> Self {
        WhenSpec {
            span_field: w.field().to_owned(),
            equals: w.values().iter().cloned().map(WhenValue::Text).collect(),
        }
    }
}

/// Keep one in `keepOneIn` events, or requests, of a target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SamplingSpec {
    /// The tracing target prefix the rule governs, e.g. `shop::http`.
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = MAX_TARGET_LEN)))]
    pub target: String,
    /// One in this many is kept, from 1 (keep all: turns off the sampling of a
    /// lower-priority policy) to 1000000.
    #[cfg_attr(
        feature = "schema",
        schemars(range(min = 1, max = MAX_ONE_IN), extend("format" = "int32"))
    )]
    pub keep_one_in: u64,
    /// `event` decides for every event on its own; `request` decides once per request
    /// and keeps a kept request whole (and writes a dropped request's lines before its
    /// first error). Default `event`.
    #[serde(default)]
    pub scope: SamplingScope,
    /// With `scope: request`, the name of the span that marks a request (default: the
    /// outermost span). Not allowed with `scope: event`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = MAX_SPAN_NAME_LEN)))]
    pub span: Option<String>,
    /// Only in a span (or below one) that recorded this field with one of these values;
    /// `scope: event` only (a request that matches is always kept whole).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<WhenSpec>,
}

/// Where a sampling decision is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum SamplingScope {
    /// Every event on its own.
    #[default]
    Event,
    /// Once per request, when its span opens; a kept request is kept whole.
    Request,
}

/// After `perSecond` events in one second from one callsite, keep one in `thenOneIn`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BurstSpec {
    /// Events per second per callsite written before the limit applies, from 1 to
    /// 10000000.
    #[cfg_attr(
        feature = "schema",
        schemars(range(min = 1, max = MAX_PER_SECOND), extend("format" = "int32"))
    )]
    pub per_second: u64,
    /// Beyond it, one in this many is kept, from 1 to 1000000.
    #[cfg_attr(
        feature = "schema",
        schemars(range(min = 1, max = MAX_ONE_IN), extend("format" = "int32"))
    )]
    pub then_one_in: u64,
}

/// One thing wrong with a [`LayerSpec`], and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    /// The field, relative to the layer (`targets[1].target`, `burst.perSecond`), empty
    /// for the layer as a whole.
    pub path: String,
    /// What is wrong with it.
    pub message: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// Everything wrong with a [`LayerSpec`], in the order of its fields (never empty).
/// Shown as the first: what a pod answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecErrors(Vec<SpecError>);

impl SpecErrors {
    /// Every problem, in field order.
    pub fn iter(&self) -> std::slice::Iter<'_, SpecError> {
        self.0.iter()
    }

    /// The first problem.
    pub fn first(&self) -> &SpecError {
        // Never empty: built only from a non-empty list.
        &self.0[0]
    }
}

impl IntoIterator for SpecErrors {
    type Item = SpecError;
    type IntoIter = std::vec::IntoIter<SpecError>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl fmt::Display for SpecErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.first(), f)
    }
}

impl std::error::Error for SpecErrors {}

/// Collects the problems of one layer, each at its path.
struct Problems(Vec<SpecError>);

impl Problems {
    fn add(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.0.push(SpecError {
            path: path.into(),
            message: message.into(),
        });
    }

    /// The valid names of a redaction list (duplicates once), each bad one recorded at
    /// `field[i]`.
    fn names(&mut self, field: &str, names: &[String]) -> Vec<FieldName> {
        if names.len() > MAX_REDACT_NAMES {
            self.add(
                field,
                format!("too many names (at most {MAX_REDACT_NAMES})"),
            );
        }
        let mut out: Vec<FieldName> = Vec::with_capacity(names.len());
        for (i, n) in names.iter().enumerate() {
            if let Some(n) = self.check(format!("{field}[{i}]"), FieldName::new(n)) {
                if !out.contains(&n) {
                    out.push(n);
                }
            }
        }
        out
    }

    /// The condition the entry at `at` (`targets[j]`, `sampling[j]`) applies under:
    /// its own `when` (recorded at `at.when...` if bad), or the layer's (`layer`, what
    /// is valid of `layer_spec`), or none. `Err` when the entry has none it can use: its
    /// own beside the layer's (recorded), or the layer's was refused.
    fn entry_when(
        &mut self,
        at: &str,
        own: Option<&WhenSpec>,
        layer: Option<&When>,
        layer_spec: Option<&WhenSpec>,
    ) -> Result<Option<When>, ()> {
        match (own, layer, layer_spec) {
            (Some(_), _, Some(_)) => {
                self.add(
                    format!("{at}.when"),
                    "the layer's when already applies to every entry",
                );
                Err(())
            }
            (Some(w), _, None) => w.to_when().map(Some).map_err(|e| {
                self.add(format!("{at}.{}", e.path), e.message);
            }),
            (None, Some(w), _) => Ok(Some(w.clone())),
            (None, None, Some(_)) => Err(()), // the layer's when was refused
            (None, None, None) => Ok(None),
        }
    }

    /// `r`'s value, or `None` with its error recorded at `path`.
    fn check<T, E: fmt::Display>(&mut self, path: impl Into<String>, r: Result<T, E>) -> Option<T> {
        r.map_err(|e| self.add(path, e.to_string())).ok()
    }
}

impl TryFrom<&LayerSpec> for PolicyLayer {
    type Error = SpecErrors;

    /// Validates every field of `spec`: targets and span names, ranges, duplicates, at
    /// most [`MAX_TARGETS`] targets and [`MAX_SAMPLING_RULES`] rules, `alwaysKeep` not
    /// `off`, the source. Every problem is reported, in field order.
    fn try_from(spec: &LayerSpec) -> Result<Self, SpecErrors> {
        let mut p = Problems(Vec::new());
        if spec.targets.len() > MAX_TARGETS {
            p.add(
                "targets",
                format!("too many targets (at most {MAX_TARGETS})"),
            );
        }
        let mut directives = Directives {
            default_level: spec.default_level,
            targets: Vec::with_capacity(spec.targets.len()),
            ..Directives::default()
        };
        let layer_when = spec.when.as_ref().and_then(|w| match w.to_when() {
            Ok(w) => Some(w),
            Err(e) => {
                p.add(e.path, e.message);
                None
            }
        });
        if spec.when.is_some() {
            let set = [
                ("defaultLevel", spec.default_level.is_some()),
                ("alwaysKeep", spec.always_keep.is_some()),
                ("burst", spec.burst.is_some()),
                ("maxBytesPerSecond", spec.max_bytes_per_second.is_some()),
                ("redact", !spec.redact.is_empty()),
                ("redactValues", spec.redact_values),
                ("record", !spec.record.is_empty()),
                ("replay", spec.replay.is_some()),
            ];
            for (field, _) in set.iter().filter(|(_, set)| *set) {
                p.add(
                    *field,
                    "does not apply under when: a layer with when sets target levels and sampling only",
                );
            }
            if spec.targets.is_empty() && spec.sampling.is_empty() {
                p.add("targets", "a layer with when names the targets it raises");
            }
        }
        for (j, t) in spec.targets.iter().enumerate() {
            let path = format!("targets[{j}].target");
            let Some(target) = p.check(&path, Target::new(&t.target)) else {
                continue;
            };
            let Ok(when) = p.entry_when(
                &format!("targets[{j}]"),
                t.when.as_ref(),
                layer_when.as_ref(),
                spec.when.as_ref(),
            ) else {
                continue;
            };
            match when {
                Some(when) => {
                    let entry = WhenTarget {
                        when,
                        target,
                        level: t.level,
                    };
                    if has_entry(&directives.when, &entry) {
                        p.add(path, format!("duplicate target {:?}", t.target));
                    } else if directives.when.len() >= MAX_WHEN_TARGETS {
                        p.add(
                            path,
                            format!("too many targets with when (at most {MAX_WHEN_TARGETS})"),
                        );
                    } else {
                        directives.when.push(entry);
                    }
                }
                None if directives.targets.iter().any(|(x, _)| *x == target) => {
                    p.add(path, format!("duplicate target {:?}", t.target));
                }
                None => directives.targets.push((target, t.level)),
            }
        }
        if spec.always_keep == Some(Level::Off) {
            p.add(
                "alwaysKeep",
                "alwaysKeep cannot be off: errors must always be kept",
            );
        }
        directives.always_keep = spec.always_keep;
        if spec.sampling.len() > MAX_SAMPLING_RULES {
            p.add(
                "sampling",
                format!("too many sampling rules (at most {MAX_SAMPLING_RULES})"),
            );
        }
        for (j, r) in spec.sampling.iter().enumerate() {
            let at = |f: &str| format!("sampling[{j}].{f}");
            let target = p.check(at("target"), Target::new(&r.target));
            let Ok(when) = p.entry_when(
                &format!("sampling[{j}]"),
                r.when.as_ref(),
                layer_when.as_ref(),
                spec.when.as_ref(),
            ) else {
                continue;
            };
            // Under a condition, a duplicate is the same target and condition (below).
            let duplicate = when.is_none()
                && target
                    .as_ref()
                    .is_some_and(|t| directives.sampling.iter().any(|x| x.target == *t));
            if duplicate {
                p.add(
                    at("target"),
                    format!("duplicate sampling target {:?}", r.target),
                );
            }
            let keep_one_in = p.check(
                at("keepOneIn"),
                sampling::one_in("keepOneIn", r.keep_one_in),
            );
            let scope = match (r.scope, &r.span) {
                (SamplingScope::Event, None) => Some(Scope::Event),
                (SamplingScope::Event, Some(_)) => {
                    p.add(at("span"), "span is only meaningful with scope: request");
                    None
                }
                (SamplingScope::Request, None) => Some(Scope::Request { span: None }),
                (SamplingScope::Request, Some(s)) => p
                    .check(at("span"), sampling::span_name(s))
                    .map(|s| Scope::Request { span: Some(s) }),
            };
            if let Some(when) = when {
                if r.scope != SamplingScope::Event {
                    p.add(
                        at("scope"),
                        "sampling is per event only under when: a request that satisfies a condition is always kept whole",
                    );
                } else if let (Some(target), Some(keep_one_in)) = (target, keep_one_in) {
                    let rule = WhenSampling {
                        when,
                        target,
                        keep_one_in,
                    };
                    if has_entry(&directives.when_sampling, &rule) {
                        p.add(
                            at("target"),
                            format!("duplicate sampling target {:?}", r.target),
                        );
                    } else if directives.when_sampling.len() >= MAX_WHEN_TARGETS {
                        p.add(
                            at("target"),
                            format!(
                                "too many sampling rules with when (at most {MAX_WHEN_TARGETS})"
                            ),
                        );
                    } else {
                        directives.when_sampling.push(rule);
                    }
                }
                continue;
            }
            if let (Some(target), Some(keep_one_in), Some(scope), false) =
                (target, keep_one_in, scope, duplicate)
            {
                directives.sampling.push(SamplingRule {
                    target,
                    keep_one_in,
                    scope,
                });
            }
        }
        if let Some(b) = spec.burst {
            let per_second = p.check("burst.perSecond", sampling::per_second(b.per_second));
            let then_one_in = p.check(
                "burst.thenOneIn",
                sampling::one_in("thenOneIn", b.then_one_in),
            );
            if let (Some(per_second), Some(then_one_in)) = (per_second, then_one_in) {
                directives.burst = Some(Burst {
                    per_second,
                    then_one_in,
                });
            }
        }
        if let Some(b) = spec.max_bytes_per_second {
            directives.max_bytes_per_second =
                p.check("maxBytesPerSecond", sampling::bytes_per_second(b));
        }
        if spec.record.len() > MAX_RECORD_RULES {
            p.add(
                "record",
                format!("too many recording rules (at most {MAX_RECORD_RULES})"),
            );
        }
        for (j, r) in spec.record.iter().enumerate() {
            let path = format!("record[{j}].target");
            let Some(target) = p.check(&path, Target::new(&r.target)) else {
                continue;
            };
            if r.level == Level::Off {
                p.add(
                    format!("record[{j}].level"),
                    "a recording rule records down to a level: off records nothing",
                );
            } else if directives.record.iter().any(|(t, _)| *t == target) {
                p.add(path, format!("duplicate recording target {:?}", r.target));
            } else {
                directives.record.push((target, r.level));
            }
        }
        let replay = spec.replay.as_ref().and_then(|r| {
            let mut ok = true;
            if !(1..=MAX_REPLAY_SECONDS).contains(&r.since_seconds) {
                p.add(
                    "replay.sinceSeconds",
                    format!(
                        "{} is out of range (1 to {MAX_REPLAY_SECONDS})",
                        r.since_seconds
                    ),
                );
                ok = false;
            }
            if r.id.is_empty()
                || r.id.chars().count() > MAX_REPLAY_ID_LEN
                || r.id.chars().any(char::is_control)
            {
                p.add(
                    "replay.id",
                    format!("must be 1 to {MAX_REPLAY_ID_LEN} printable characters"),
                );
                ok = false;
            }
            ok.then(|| ReplayAsk {
                since: std::time::Duration::from_secs(r.since_seconds),
                id: r.id.clone(),
            })
        });
        directives.redact = p.names("redact", &spec.redact);
        if !spec.unredact.is_empty() && spec.source != BASELINE_SOURCE {
            p.add(
                "unredact",
                "a pushed policy cannot stop redacting a field: only the service's own baseline (LOGPOLICY, Builder::unredact) can; a policy can only add names",
            );
        } else {
            directives.unredact = p.names("unredact", &spec.unredact);
        }
        directives.redact_values = spec.redact_values;
        let layer = p.check(
            "source",
            PolicyLayer::new(spec.source.clone(), spec.priority, directives),
        );
        if let Some(reason) = &spec.reason {
            p.check("reason", check_reason(reason));
        }
        match layer {
            Some(mut layer) if p.0.is_empty() => {
                layer.expires_at = spec.expires_at;
                layer.reason = spec.reason.clone();
                layer.replay = replay;
                Ok(layer)
            }
            _ => Err(SpecErrors(p.0)),
        }
    }
}

impl LayerSpec {
    /// A layer with these directives, no expiry.
    pub fn from_directives(
        source: impl Into<String>,
        priority: i32,
        directives: Directives,
    ) -> Self {
        LayerSpec {
            source: source.into(),
            priority,
            expires_at: None,
            reason: None,
            default_level: directives.default_level,
            targets: directives
                .targets
                .into_iter()
                .map(|(target, level)| TargetSpec {
                    target: target.as_str().to_owned(),
                    level,
                    when: None,
                })
                .chain(directives.when.iter().map(|e| TargetSpec {
                    target: e.target.as_str().to_owned(),
                    level: e.level,
                    when: Some(WhenSpec::from(&e.when)),
                }))
                .collect(),
            when: None,
            always_keep: directives.always_keep,
            sampling: directives
                .sampling
                .into_iter()
                .map(|r| {
                    let (scope, span) = match r.scope {
                        Scope::Event => (SamplingScope::Event, None),
                        Scope::Request { span } => (SamplingScope::Request, span),
                    };
                    SamplingSpec {
                        target: r.target.as_str().to_owned(),
                        keep_one_in: u64::from(r.keep_one_in.get()),
                        scope,
                        span,
                        when: None,
                    }
                })
                .chain(directives.when_sampling.iter().map(|r| SamplingSpec {
                    target: r.target.as_str().to_owned(),
                    keep_one_in: u64::from(r.keep_one_in.get()),
                    scope: SamplingScope::Event,
                    span: None,
                    when: Some(WhenSpec::from(&r.when)),
                }))
                .collect(),
            burst: directives.burst.map(|b| BurstSpec {
                per_second: u64::from(b.per_second.get()),
                then_one_in: u64::from(b.then_one_in.get()),
            }),
            max_bytes_per_second: directives.max_bytes_per_second.map(|b| b.get()),
            redact: directives.redact.iter().map(|n| n.to_string()).collect(),
            unredact: directives.unredact.iter().map(|n| n.to_string()).collect(),
            redact_values: directives.redact_values,
            record: directives
                .record
                .iter()
                .map(|(target, level)| RecordSpec {
                    target: target.as_str().to_owned(),
                    level: *level,
                })
                .collect(),
            replay: None,
        }
    }

    /// This layer, expiring at `at`.
    #[must_use]
    pub fn expires_at(mut self, at: SystemTime) -> Self {
        self.expires_at = Some(at);
        self
    }
}

impl From<&PolicyLayer> for LayerSpec {
    fn from(layer: &PolicyLayer) -> Self {
        LayerSpec {
            expires_at: layer.expires_at,
            reason: layer.reason.clone(),
            replay: layer.replay.as_ref().map(|r| ReplaySpec {
                since_seconds: r.since.as_secs(),
                id: r.id.clone(),
            }),
            ..LayerSpec::from_directives(layer.source(), layer.priority, layer.directives.clone())
        }
    }
}

/// The JSON form of a whole policy: `{"layers": [...]}`.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PolicySpec {
    pub(super) layers: Vec<LayerSpec>,
}

impl TryFrom<&PolicySpec> for Policy {
    type Error = PolicyError;

    /// Every layer converted (the first problem is the error, its path under
    /// `layers[i]`), then the list checked (count, duplicate sources).
    fn try_from(spec: &PolicySpec) -> Result<Self, PolicyError> {
        Policy::from_layer_specs(&spec.layers)
    }
}

impl Policy {
    /// The policy of these layers in their JSON form; the error names the first problem
    /// by its path (`layers[1].targets[0].target: ...`).
    pub fn from_layer_specs(layers: &[LayerSpec]) -> Result<Self, PolicyError> {
        let layers = layers
            .iter()
            .enumerate()
            .map(|(i, l)| {
                PolicyLayer::try_from(l).map_err(|e| {
                    let first = e.first();
                    PolicyError::Json {
                        path: if first.path.is_empty() {
                            format!("layers[{i}]")
                        } else {
                            format!("layers[{i}].{}", first.path)
                        },
                        message: first.message.clone(),
                    }
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Policy::try_new(layers).map_err(|e| PolicyError::Json {
            path: "layers".into(),
            message: e.to_string(),
        })
    }
}

impl From<&Policy> for PolicySpec {
    fn from(p: &Policy) -> Self {
        PolicySpec {
            layers: p.layers().iter().map(LayerSpec::from).collect(),
        }
    }
}
