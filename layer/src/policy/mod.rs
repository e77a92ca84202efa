//! The policy model: layers of directives, merged into one effective policy.
//!
//! A [`Policy`] is an ordered list of [`PolicyLayer`]s. Each layer has a source (`env`
//! for the baseline from the environment, `namespace/name` for a pushed LogPolicy), a
//! priority, an optional expiry and its [`Directives`]. The effective policy at a time
//! is decided per target: among the layers not yet expired, the one with the highest
//! priority (ties: the one listed first) that has an opinion on the target (a
//! matching target entry or a default level) gives the level. That is the same as
//! flattening the layers into one table in which every target named by any layer gets
//! the level the layers give it, which is what [`Policy::effective_at`] returns and
//! what the filter compiles.
//!
//! ```
//! use logpolicy::{Directives, Level, Policy, PolicyLayer};
//! use std::time::{Duration, UNIX_EPOCH};
//!
//! let now = UNIX_EPOCH + Duration::from_secs(1_000);
//! let policy = Policy::new(vec![
//!     PolicyLayer::baseline("info,shop::db=warn".parse().unwrap()),
//!     PolicyLayer::new("prod/incident-42", 10, "shop=debug".parse().unwrap())
//!         .unwrap()
//!         .expires_at(now + Duration::from_secs(900)),
//! ]);
//! let effective = policy.effective_at(now);
//! assert_eq!(effective.level_for("shop::db::pool"), Level::Debug); // the raise covers shop::*
//! assert_eq!(effective.level_for("hyper"), Level::Info);
//! assert_eq!(effective.next_expiry, Some(now + Duration::from_secs(900)));
//!
//! let later = policy.effective_at(now + Duration::from_secs(900));
//! assert_eq!(later.level_for("shop::db::pool"), Level::Warn); // fell back by itself
//! ```

mod directives;
pub mod redact;
mod sampling;
mod spec;
mod target;
mod when;

use std::fmt;
use std::time::SystemTime;

pub use directives::{
    DirectiveError, Directives, MAX_DIRECTIVES_LEN, MAX_RECORD_RULES, MAX_TARGETS,
};
pub use redact::{FieldName, FieldNameError, Redaction};
pub use sampling::{
    Burst, RangeError, RuleError, SamplingRule, Scope, SpanNameError, BYTES_PER_SECOND_RANGE,
    MAX_ONE_IN, MAX_PER_SECOND, MAX_SAMPLING_RULES, MAX_SPAN_NAME_LEN,
};
pub use spec::{
    BurstSpec, LayerSpec, RecordSpec, ReplaySpec, SamplingScope, SamplingSpec, SpecError,
    SpecErrors, TargetSpec, WhenSpec, WhenValue,
};
pub(crate) use target::prefix_matches;
pub use target::{Target, TargetError, MAX_TARGET_LEN};
pub use when::{
    When, WhenError, WhenSampling, WhenTarget, MAX_WHEN_FIELD_LEN, MAX_WHEN_TARGETS,
    MAX_WHEN_VALUES, MAX_WHEN_VALUE_LEN,
};

use crate::clock::format_rfc3339;
use crate::level::Level;

/// The level of targets when no layer sets a default level.
pub const FALLBACK_LEVEL: Level = Level::Info;

/// Events at or above this level are never sampled or dropped for budget, unless a
/// layer says otherwise.
pub const DEFAULT_ALWAYS_KEEP: Level = Level::Warn;

/// The most layers a policy may have.
pub const MAX_LAYERS: usize = 64;

/// The longest reason a layer may give, in characters.
pub const MAX_REASON_LEN: usize = 256;

/// The source name of the baseline layer built from the environment.
pub const BASELINE_SOURCE: &str = "env";

/// One layer of a policy: where it came from, how much it weighs, until when, and what
/// it says.
///
/// # Examples
///
/// ```
/// use logpolicy::PolicyLayer;
/// let layer = PolicyLayer::new("shop/debug-payments", 5, "shop::payment=debug".parse().unwrap()).unwrap();
/// assert_eq!(layer.source(), "shop/debug-payments");
/// assert!(PolicyLayer::new("", 0, Default::default()).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyLayer {
    source: String,
    /// Higher wins; between equal priorities, the layer listed first wins.
    pub priority: i32,
    /// When the layer stops applying; `None` for never.
    pub expires_at: Option<SystemTime>,
    /// What the layer says.
    pub directives: Directives,
    /// Why the layer exists, in one line (a pushed LogPolicy's `spec.reason`): named in
    /// the lines a pod writes when the layer starts and stops applying. At most
    /// [`MAX_REASON_LEN`] characters, no control characters.
    pub reason: Option<String>,
    /// A replay of recorded lines this layer asks for (see [`crate::recorder`]): a pod
    /// replays once per id.
    pub replay: Option<ReplayAsk>,
}

/// A replay a pushed layer asks for: the recorded lines of the last `since`, once per
/// `id` (the operator gives each generation of a LogPolicy its own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayAsk {
    /// How far back.
    pub since: std::time::Duration,
    /// Replayed once per id: a push of the same id again replays nothing.
    pub id: String,
}

/// The longest window a replay may ask for, in seconds (24 hours: the recorder's age
/// limit at most).
pub const MAX_REPLAY_SECONDS: u64 = 24 * 3600;

/// The longest replay id, in characters.
pub const MAX_REPLAY_ID_LEN: usize = 128;

/// A policy layer or document that is not valid; names the offending field.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// Directives that do not parse (the message is the directive error's own).
    #[error(transparent)]
    Directives(#[from] DirectiveError),
    /// A layer's source name is empty, too long, or has control characters.
    #[error("invalid source {0:?}: must be 1 to 256 printable characters")]
    InvalidSource(String),
    /// More than [`MAX_LAYERS`] layers.
    #[error("too many layers: {0} (at most {MAX_LAYERS})")]
    TooManyLayers(usize),
    /// Two layers with the same source.
    #[error("duplicate layer source {0:?}")]
    DuplicateSource(String),
    /// A layer other than the baseline tries to stop redacting a field.
    #[error("layer {source_name:?} cannot stop redacting {name:?}: only the service's own baseline (LOGPOLICY, Builder::unredact) can remove a redacted name; a pushed policy can only add names")]
    Unredact {
        /// The layer's source.
        source_name: String,
        /// The first name it tried to remove.
        name: String,
    },
    /// A JSON document that does not describe a policy; the message gives the path of
    /// the offending field, e.g. `layers[1].targets[0].level: invalid level "verbose"`.
    #[error("{path}: {message}")]
    Json {
        /// Where in the document, e.g. `layers[0].expiresAt`, or `.` for the whole.
        path: String,
        /// What is wrong there.
        message: String,
    },
}

impl PolicyLayer {
    /// A layer with no expiry.
    pub fn new(
        source: impl Into<String>,
        priority: i32,
        directives: Directives,
    ) -> Result<Self, PolicyError> {
        let source = source.into();
        if source.is_empty() || source.len() > 256 || source.chars().any(char::is_control) {
            return Err(PolicyError::InvalidSource(source));
        }
        if let Some(name) = directives.unredact.first() {
            if source != BASELINE_SOURCE {
                return Err(PolicyError::Unredact {
                    source_name: source,
                    name: name.to_string(),
                });
            }
        }
        Ok(PolicyLayer {
            source,
            priority,
            expires_at: None,
            directives,
            reason: None,
            replay: None,
        })
    }

    /// The baseline layer: source `env`, priority `i32::MIN`, no expiry.
    ///
    /// As with `EnvFilter`, a baseline that names targets but no default level leaves
    /// every other target off: `RUST_LOG=my_crate=debug` shows only `my_crate`. A
    /// baseline without any level at all (empty) leaves the default to
    /// [`FALLBACK_LEVEL`].
    ///
    /// ```
    /// use logpolicy::{Level, Policy, PolicyLayer};
    /// let p = Policy::new(vec![PolicyLayer::baseline("my_crate=debug".parse().unwrap())]);
    /// let effective = p.effective_at(std::time::SystemTime::now());
    /// assert_eq!(effective.level_for("my_crate::db"), Level::Debug);
    /// assert_eq!(effective.level_for("hyper"), Level::Off);
    /// ```
    pub fn baseline(mut directives: Directives) -> Self {
        if directives.default_level.is_none() && !directives.targets.is_empty() {
            directives.default_level = Some(Level::Off);
        }
        PolicyLayer {
            source: BASELINE_SOURCE.to_owned(),
            priority: i32::MIN,
            expires_at: None,
            directives,
            reason: None,
            replay: None,
        }
    }

    /// This layer, expiring at `at`.
    #[must_use]
    pub fn expires_at(mut self, at: SystemTime) -> Self {
        self.expires_at = Some(at);
        self
    }

    /// This layer, with `reason` (checked as a pushed layer's reason is: see
    /// [`check_reason`]).
    pub fn with_reason(mut self, reason: impl Into<String>) -> Result<Self, PolicyError> {
        let reason = reason.into();
        check_reason(&reason).map_err(|message| PolicyError::Json {
            path: "reason".into(),
            message,
        })?;
        self.reason = Some(reason);
        Ok(self)
    }

    /// Where this layer came from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether the layer still applies at `now`.
    pub fn is_active_at(&self, now: SystemTime) -> bool {
        self.expires_at.is_none_or(|at| now < at)
    }
}

/// Checks a layer's reason: at most [`MAX_REASON_LEN`] characters, no control
/// characters (a reason is written inside one log line).
///
/// ```
/// use logpolicy::policy::check_reason;
/// assert!(check_reason("INC-4211: card declines at checkout").is_ok());
/// assert_eq!(check_reason("two\nlines").unwrap_err(), "must not contain control characters (found U+000A)");
/// ```
pub fn check_reason(reason: &str) -> Result<(), String> {
    let len = reason.chars().count();
    if len > MAX_REASON_LEN {
        return Err(format!(
            "is {len} characters long, more than {MAX_REASON_LEN}"
        ));
    }
    if let Some(c) = reason.chars().find(|c| c.is_control()) {
        return Err(format!(
            "must not contain control characters (found U+{:04X})",
            u32::from(c)
        ));
    }
    Ok(())
}

/// An ordered list of layers.
///
/// Its JSON form is `{"layers": [...]}`, each layer a [`LayerSpec`]:
/// `{"source", "priority", "expiresAt", "defaultLevel", "targets": [{"target", "level"}],
/// "alwaysKeep", "sampling": [{"target", "keepOneIn", "scope": "event"|"request", "span"}],
/// "burst": {"perSecond", "thenOneIn"}, "maxBytesPerSecond"}` with everything but `source`
/// optional.
///
/// # Examples
///
/// ```
/// use logpolicy::{Level, Policy};
/// let p = Policy::from_json(r#"{"layers":[{"source":"env","defaultLevel":"warn",
///     "targets":[{"target":"shop","level":"debug"}]}]}"#).unwrap();
/// assert_eq!(p.effective_at(std::time::SystemTime::now()).level_for("shop::x"), Level::Debug);
/// assert_eq!(Policy::from_json(&p.to_json()).unwrap(), p);
///
/// let err = Policy::from_json(r#"{"layers":[{"source":"env","targets":[{"target":"a","level":"verbose"}]}]}"#);
/// assert_eq!(err.unwrap_err().to_string(),
///            r#"layers[0].targets[0].level: invalid level "verbose" (expected one of trace, debug, info, warn, error, off)"#);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Policy {
    layers: Vec<PolicyLayer>,
}

impl Policy {
    /// A policy of these layers, in this order (earlier wins ties of priority).
    ///
    /// Prefer [`Policy::try_new`] for layers from outside: this one keeps only the first
    /// [`MAX_LAYERS`] layers and the first layer of each source.
    pub fn new(layers: Vec<PolicyLayer>) -> Self {
        let mut out: Vec<PolicyLayer> = Vec::with_capacity(layers.len().min(MAX_LAYERS));
        for layer in layers {
            if out.len() < MAX_LAYERS && !out.iter().any(|l| l.source == layer.source) {
                out.push(layer);
            }
        }
        Policy { layers: out }
    }

    /// A policy of these layers, or an error if there are too many or two share a source.
    pub fn try_new(layers: Vec<PolicyLayer>) -> Result<Self, PolicyError> {
        if layers.len() > MAX_LAYERS {
            return Err(PolicyError::TooManyLayers(layers.len()));
        }
        for (i, l) in layers.iter().enumerate() {
            if layers[..i].iter().any(|o| o.source == l.source) {
                return Err(PolicyError::DuplicateSource(l.source.clone()));
            }
        }
        Ok(Policy { layers })
    }

    /// The layers, in order.
    pub fn layers(&self) -> &[PolicyLayer] {
        &self.layers
    }

    /// The layers, in order, by value.
    pub fn into_layers(self) -> Vec<PolicyLayer> {
        self.layers
    }

    /// Replaces the layer with the same source, or adds it at the end.
    pub fn upsert(&mut self, layer: PolicyLayer) -> Result<(), PolicyError> {
        let len = self.layers.len();
        match self.layers.iter_mut().find(|l| l.source == layer.source) {
            Some(slot) => *slot = layer,
            None if len >= MAX_LAYERS => return Err(PolicyError::TooManyLayers(len + 1)),
            None => self.layers.push(layer),
        }
        Ok(())
    }

    /// Removes the layer of `source`; returns whether there was one.
    pub fn remove(&mut self, source: &str) -> bool {
        let before = self.layers.len();
        self.layers.retain(|l| l.source != source);
        before != self.layers.len()
    }

    /// The effective policy at `now`.
    pub fn effective_at(&self, now: SystemTime) -> EffectivePolicy {
        let mut active: Vec<&PolicyLayer> =
            self.layers.iter().filter(|l| l.is_active_at(now)).collect();
        // Stable: equal priorities keep list order, so the first listed wins.
        active.sort_by_key(|l| std::cmp::Reverse(l.priority));
        let resolve = |target: &str| active.iter().find_map(|l| l.directives.level_for(target));
        let default_level = active
            .iter()
            .find_map(|l| l.directives.default_level)
            .unwrap_or(FALLBACK_LEVEL);
        let mut directives = Directives::with_default(default_level);
        for layer in &active {
            for (target, _) in &layer.directives.targets {
                if !directives.targets.iter().any(|(t, _)| t == target) {
                    let level = resolve(target.as_str()).unwrap_or(default_level);
                    directives.targets.push((target.clone(), level));
                }
            }
        }
        // Sampling resolves like levels: per target, the highest layer with a matching
        // rule decides, flattened into one table keyed by every rule target.
        let resolve_rule = |target: &str| {
            active
                .iter()
                .find_map(|l| l.directives.sampling_for(target))
        };
        for layer in &active {
            for rule in &layer.directives.sampling {
                if !directives.sampling.iter().any(|r| r.target == rule.target) {
                    if let Some(winner) = resolve_rule(rule.target.as_str()) {
                        directives.sampling.push(SamplingRule {
                            target: rule.target.clone(),
                            keep_one_in: winner.keep_one_in,
                            scope: winner.scope.clone(),
                        });
                    }
                }
            }
        }
        // Recording resolves like levels: per target, the highest layer naming it.
        for layer in &active {
            for (target, _) in &layer.directives.record {
                if !directives.record.iter().any(|(t, _)| t == target) {
                    let winner = active
                        .iter()
                        .find_map(|l| l.directives.record_level_for(target.as_str()));
                    if let Some(level) = winner {
                        directives.record.push((target.clone(), level));
                    }
                }
            }
        }
        directives.always_keep = Some(
            active
                .iter()
                .find_map(|l| l.directives.always_keep)
                .unwrap_or(DEFAULT_ALWAYS_KEEP),
        );
        directives.burst = active.iter().find_map(|l| l.directives.burst);
        directives.max_bytes_per_second = active
            .iter()
            .find_map(|l| l.directives.max_bytes_per_second);
        // Redaction only grows with layers: every active layer's names, the baseline's
        // removals (no other layer can have any), value shapes if any layer asks.
        for layer in &active {
            for name in &layer.directives.redact {
                if !directives.redact.contains(name) {
                    directives.redact.push(name.clone());
                }
            }
            if layer.source == BASELINE_SOURCE {
                directives.unredact.clone_from(&layer.directives.unredact);
            }
        }
        directives.redact_values = active.iter().any(|l| l.directives.redact_values);
        // Conditional entries, highest priority first: under a condition, the first
        // entry that matches a target (see `When`) decides, before any other entry.
        fn add_new<T: when::Conditional>(list: &mut Vec<T>, from: &[T]) {
            for entry in from {
                if !when::has_entry(list, entry) && list.len() < MAX_WHEN_TARGETS {
                    list.push(entry.clone());
                }
            }
        }
        for layer in &active {
            add_new(&mut directives.when, &layer.directives.when);
            add_new(
                &mut directives.when_sampling,
                &layer.directives.when_sampling,
            );
        }
        let next_expiry = active.iter().filter_map(|l| l.expires_at).min();
        EffectivePolicy {
            directives,
            sources: active.iter().map(|l| l.source.clone()).collect(),
            next_expiry,
        }
    }

    /// Parses the JSON form; errors name the path of the offending field.
    pub fn from_json(json: &str) -> Result<Self, PolicyError> {
        let de = &mut serde_json::Deserializer::from_str(json);
        let spec: spec::PolicySpec =
            serde_path_to_error::deserialize(de).map_err(|e| PolicyError::Json {
                path: e.path().to_string(),
                message: strip_position(e.inner()),
            })?;
        Policy::try_from(&spec)
    }

    /// The JSON form.
    pub fn to_json(&self) -> String {
        serde_json::to_string(&spec::PolicySpec::from(self)).unwrap_or_default()
    }
}

/// serde_json appends " at line 1 column 42"; the path already says where.
fn strip_position(e: &serde_json::Error) -> String {
    let s = e.to_string();
    match s.rfind(" at line ") {
        Some(i) if e.line() > 0 => s[..i].to_owned(),
        _ => s,
    }
}

/// The merged result of a policy's active layers at one time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectivePolicy {
    /// One flat table: the default level (always set) and every target any active layer
    /// names, with the level the layers give it.
    pub directives: Directives,
    /// The sources of the active layers, highest priority first.
    pub sources: Vec<String>,
    /// When the next active layer expires, if any does.
    pub next_expiry: Option<SystemTime>,
}

impl EffectivePolicy {
    /// The level for `target` (longest matching entry, else the default).
    pub fn level_for(&self, target: &str) -> Level {
        self.directives.level_for(target).unwrap_or(FALLBACK_LEVEL)
    }

    /// The level at and above which nothing is sampled or dropped for budget.
    pub fn always_keep(&self) -> Level {
        self.directives.always_keep.unwrap_or(DEFAULT_ALWAYS_KEEP)
    }

    /// What is redacted: the built-in names less the baseline's removals, plus every
    /// active layer's names (a name both removed and added stays redacted).
    ///
    /// # Examples
    ///
    /// ```
    /// use logpolicy::{Policy, PolicyLayer};
    /// let policy = Policy::new(vec![
    ///     PolicyLayer::baseline("info,@redact=-cookie".parse().unwrap()),
    ///     PolicyLayer::new("shop/raise", 5, "shop=trace,@redact=card_token".parse().unwrap()).unwrap(),
    /// ]);
    /// let r = policy.effective_at(std::time::SystemTime::now()).redaction();
    /// assert!(r.redacts("card_token") && r.redacts("password") && !r.redacts("cookie"));
    /// assert!(PolicyLayer::new("shop/raise", 5, "@redact=-password".parse().unwrap()).is_err());
    /// ```
    pub fn redaction(&self) -> Redaction {
        let d = &self.directives;
        Redaction::builtin()
            .without(&d.unredact)
            .with(d.redact.iter().cloned())
            .with_values(d.redact_values)
    }
}

impl fmt::Display for EffectivePolicy {
    /// The flat table as directives, e.g. `info,shop::payment=debug`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.directives, f)
    }
}

impl fmt::Display for Policy {
    /// One line per layer: `source priority=N [until=TIME] directives`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, l) in self.layers.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{} priority={}", l.source, l.priority)?;
            if let Some(at) = l.expires_at {
                write!(f, " until={}", format_rfc3339(at))?;
            }
            write!(f, " {}", l.directives)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
