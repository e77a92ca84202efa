//! What the CRD schema cannot say, checked once, into a typed [`ValidatedPolicy`].
//!
//! Errors name the field the way `kubectl` does (`spec.targets[1].target`), so they read
//! the same in the `Ready` condition, in an Event and in a test.
//!
//! ```
//! use logpolicy_api::crd::LogPolicySpec;
//! use logpolicy_api::validate::validate;
//!
//! let spec: LogPolicySpec = serde_json::from_value(serde_json::json!({
//!     "selector": {},
//!     "sampling": [{"target": "shop::http", "keepOneIn": 10, "span": "request"}],
//!     "duration": "15x",
//! }))?;
//! let errors = validate(&spec).unwrap_err();
//! let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
//! assert_eq!(fields, ["spec.selector", "spec.sampling[0].span", "spec.duration"]);
//! # Ok::<(), serde_json::Error>(())
//! ```

use std::collections::BTreeSet;
use std::fmt;
use std::time::{Duration, SystemTime};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::core::Expression;
use logpolicy::policy::{LayerSpec, ReplaySpec, MAX_REPLAY_SECONDS};
use logpolicy::PolicyLayer;

use crate::crd::{LogPolicySpec, PRIORITY_RANGE};
use crate::selector::PodSelector;

/// The longest `duration` accepted.
pub const MAX_DURATION: Duration = Duration::from_secs(8760 * 3600);

/// One thing wrong with a LogPolicy, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field, as `kubectl` names it: `spec.targets[1].target`.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl FieldError {
    fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// When a policy stops applying, as its spec says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// Until it is deleted.
    Never,
    /// This long after the operator first sees the generation.
    After(Duration),
    /// At this time.
    At(SystemTime),
}

/// The longest `status.levels` the operator writes (the schema's bound).
pub const MAX_LEVELS_LEN: usize = 256;

/// A LogPolicy spec that passed every check: a compiled selector, the layer it pushes
/// (as the pod's own conversion made it; its source and expiry depend on the object and
/// on when it was seen), its priority and its expiry.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidatedPolicy {
    /// Which pods it selects (never empty).
    pub selector: PodSelector,
    /// Higher wins per target.
    pub priority: i32,
    /// When it stops applying.
    pub expiry: Expiry,
    /// How far back `spec.replay` reaches, in whole seconds (rounded up).
    pub replay_since: Option<Duration>,
    layer: PolicyLayer,
}

impl ValidatedPolicy {
    /// Whether it can only make the pods it selects write less, so that it may stand
    /// without an expiry whatever the operator's `--max-duration` (which is there so that
    /// a raise cannot be forgotten): it sets no level (no `defaultLevel`, no `targets`,
    /// no `when`), leaves `alwaysKeep` alone, unredacts nothing, and every sampling entry
    /// keeps one in 2 or more (one in 1 keeps every event: it can only undo a baseline's
    /// sampling). Burst limits and a byte budget only ever drop lines; recording rules
    /// write nothing (they keep lines in memory, bounded), and a replay writes a window
    /// once per generation: neither can be forgotten on.
    ///
    /// ```
    /// use logpolicy_api::validate::validate;
    /// let spec = |v: serde_json::Value| serde_json::from_value(v).unwrap();
    /// let saving = validate(&spec(serde_json::json!({
    ///     "selector": {"matchLabels": {"app": "shop"}},
    ///     "sampling": [{"target": "shop::http", "keepOneIn": 10}],
    ///     "maxBytesPerSecond": 1048576,
    /// }))).unwrap();
    /// assert!(saving.only_lowers());
    /// let raise = validate(&spec(serde_json::json!({
    ///     "selector": {"matchLabels": {"app": "shop"}},
    ///     "targets": [{"target": "shop::payment", "level": "debug"}],
    /// }))).unwrap();
    /// assert!(!raise.only_lowers());
    /// ```
    pub fn only_lowers(&self) -> bool {
        let d = &self.layer.directives;
        d.default_level.is_none()
            && d.targets.is_empty()
            && d.when.is_empty()
            && d.when_sampling.is_empty()
            && d.always_keep.is_none()
            && d.unredact.is_empty()
            && d.sampling.iter().all(|s| s.keep_one_in.get() > 1)
    }

    /// The levels it sets as directives, e.g. `info,shop::payment=debug` (the default
    /// level first, then each target), cut to at most [`MAX_LEVELS_LEN`] bytes; `None`
    /// when it sets no level.
    pub fn levels(&self) -> Option<String> {
        let d = &self.layer.directives;
        let mut parts: Vec<String> = Vec::with_capacity(d.targets.len() + 1);
        if let Some(l) = d.default_level {
            parts.push(l.to_string());
        }
        parts.extend(d.targets.iter().map(|(t, l)| format!("{t}={l}")));
        if parts.is_empty() {
            return None;
        }
        Some(crate::text::truncate(parts.join(","), MAX_LEVELS_LEN))
    }

    /// The layer as pushed to a pod: the settings, with this source and expiry (and no
    /// replay: see [`replay`](Self::replay)).
    pub fn layer(&self, source: &str, expires_at: Option<SystemTime>) -> LayerSpec {
        LayerSpec {
            source: source.to_owned(),
            expires_at,
            replay: None,
            ..LayerSpec::from(&self.layer)
        }
    }

    /// The replay the pushed layer asks for, once per `id` (the operator gives it the
    /// LogPolicy's `uid/generation`); `None` without `spec.replay`.
    ///
    /// ```
    /// use logpolicy_api::validate::validate;
    /// let spec = serde_json::from_value(serde_json::json!({
    ///     "selector": {"matchLabels": {"app": "shop"}},
    ///     "targets": [{"target": "shop::payment", "level": "debug"}],
    ///     "replay": {"since": "2m"},
    /// })).unwrap();
    /// let replay = validate(&spec).unwrap().replay("8d1c/3").unwrap();
    /// assert_eq!((replay.since_seconds, replay.id.as_str()), (120, "8d1c/3"));
    /// ```
    pub fn replay(&self, id: impl Into<String>) -> Option<ReplaySpec> {
        self.replay_since.map(|since| ReplaySpec {
            since_seconds: since.as_secs(),
            id: id.into(),
        })
    }

    /// Whether it records (has recording rules).
    pub fn records(&self) -> bool {
        !self.layer.directives.record.is_empty()
    }
}

/// Checks a spec beyond its schema; every problem found is returned, each naming its
/// field.
pub fn validate(spec: &LogPolicySpec) -> Result<ValidatedPolicy, Vec<FieldError>> {
    let mut errors = Vec::new();
    let selector = selector(&spec.selector, &mut errors);

    // The settings, through the pod's own conversion: one set of rules (and limits) for
    // both sides, every problem named at its field.
    let spec_layer = spec.layer_spec("validate/check");
    let layer = match PolicyLayer::try_from(&spec_layer) {
        Ok(layer) => Some(layer),
        Err(problems) => {
            errors.extend(problems.into_iter().map(|p| {
                let field = if p.path.is_empty() {
                    "spec".to_owned()
                } else {
                    format!("spec.{}", p.path)
                };
                FieldError::new(field, p.message)
            }));
            None
        }
    };

    if !(PRIORITY_RANGE.0..=PRIORITY_RANGE.1).contains(&spec.priority) {
        errors.push(FieldError::new(
            "spec.priority",
            format!(
                "{} is out of range ({} to {})",
                spec.priority, PRIORITY_RANGE.0, PRIORITY_RANGE.1
            ),
        ));
    }

    let expiry = match (&spec.duration, &spec.expiration_time) {
        (Some(_), Some(_)) => {
            errors.push(FieldError::new(
                "spec.expirationTime",
                "give either duration or expirationTime, not both",
            ));
            Expiry::Never
        }
        (Some(d), None) => match parse_duration(d) {
            Ok(d) => Expiry::After(d),
            Err(e) => {
                errors.push(FieldError::new("spec.duration", e.to_string()));
                Expiry::Never
            }
        },
        (None, Some(t)) => match logpolicy::clock::parse_rfc3339(t.trim()) {
            Ok(t) => Expiry::At(t),
            Err(e) => {
                errors.push(FieldError::new(
                    "spec.expirationTime",
                    format!("{t:?} is not an RFC 3339 time: {e}"),
                ));
                Expiry::Never
            }
        },
        (None, None) => Expiry::Never,
    };

    let replay_since = spec
        .replay
        .as_ref()
        .and_then(|r| match replay_window(&r.since) {
            Ok(d) => Some(d),
            Err(e) => {
                errors.push(FieldError::new("spec.replay.since", e));
                None
            }
        });

    if spec_layer.default_level.is_none()
        && spec_layer.targets.is_empty()
        && spec_layer.record.is_empty()
        && spec.replay.is_none()
        && spec_layer.always_keep.is_none()
        && spec_layer.sampling.is_empty()
        && spec_layer.burst.is_none()
        && spec_layer.max_bytes_per_second.is_none()
        && spec_layer.redact.is_empty()
        && !spec_layer.redact_values
    {
        errors.push(FieldError::new(
            "spec",
            "sets nothing: give at least one of defaultLevel, targets, sampling, alwaysKeep, burst, maxBytesPerSecond, redact, redactValues, record, replay",
        ));
    }

    match (selector, layer, errors.is_empty()) {
        (Some(selector), Some(layer), true) => Ok(ValidatedPolicy {
            selector,
            priority: spec.priority,
            expiry,
            replay_since,
            layer,
        }),
        _ => Err(errors),
    }
}

/// A `spec.replay.since`: a duration of at least 1s and at most the 24h a pod's
/// recorder may keep, rounded up to whole seconds (what the pod takes).
///
/// ```
/// use std::time::Duration;
/// use logpolicy_api::validate::replay_window;
/// assert_eq!(replay_window("5m"), Ok(Duration::from_secs(300)));
/// assert_eq!(replay_window("1500ms"), Ok(Duration::from_secs(2)));
/// assert!(replay_window("25h").unwrap_err().contains("at most 24h"));
/// assert!(replay_window("500ms").unwrap_err().contains("at least 1s"));
/// ```
pub fn replay_window(since: &str) -> Result<Duration, String> {
    let d = parse_duration(since).map_err(|e| e.to_string())?;
    if d < Duration::from_secs(1) {
        return Err(format!(
            "{since:?} is shorter than 1s: a replay reaches back at least 1s"
        ));
    }
    let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    if secs > MAX_REPLAY_SECONDS {
        return Err(format!(
            "{since:?} is longer than a pod's recorder may keep lines: at most 24h"
        ));
    }
    Ok(Duration::from_secs(secs))
}

/// A `duration` that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Not numbers with units `ms`, `s`, `m`, `h`.
    #[error("{0:?} is not a duration like 15m, 1h30m or 90s")]
    Malformed(String),
    /// Zero in all.
    #[error("{0:?} is zero: give a positive duration")]
    Zero(String),
    /// Longer than [`MAX_DURATION`].
    #[error("{0:?} is longer than 8760h")]
    TooLong(String),
}

/// Parses `15m`, `1h30m`, `90s`, `250ms` (the CRD's pattern), up to [`MAX_DURATION`].
///
/// ```
/// use std::time::Duration;
/// use logpolicy_api::validate::parse_duration;
/// assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
/// assert_eq!(parse_duration("1500ms"), Ok(Duration::from_millis(1500)));
/// assert!(parse_duration("15").is_err());
/// assert!(parse_duration("0s").is_err());
/// ```
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    let bad = || DurationError::Malformed(s.to_owned());
    let bytes = s.as_bytes();
    if bytes.is_empty() {
        return Err(bad());
    }
    let mut total = Duration::ZERO;
    let mut i = 0;
    while i < bytes.len() {
        let start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        let digits = s.get(start..i).ok_or_else(bad)?;
        if digits.is_empty() || digits.len() > 12 {
            return Err(bad());
        }
        let n: u64 = digits.parse().map_err(|_| bad())?;
        let rest = s.get(i..).ok_or_else(bad)?;
        let (unit, len) = if rest.starts_with("ms") {
            (Duration::from_millis(1), 2)
        } else if rest.starts_with('s') {
            (Duration::from_secs(1), 1)
        } else if rest.starts_with('m') {
            (Duration::from_secs(60), 1)
        } else if rest.starts_with('h') {
            (Duration::from_secs(3600), 1)
        } else {
            return Err(bad());
        };
        i += len;
        let part = unit
            .checked_mul(u32::try_from(n).map_err(|_| bad())?)
            .ok_or_else(bad)?;
        total = total.checked_add(part).ok_or_else(bad)?;
    }
    if total.is_zero() {
        return Err(DurationError::Zero(s.to_owned()));
    }
    if total > MAX_DURATION {
        return Err(DurationError::TooLong(s.to_owned()));
    }
    Ok(total)
}

/// The longest a policy may apply, as the operator's `--max-duration` says: `None` for
/// no limit. Policies without an expiry, or with a later one, are refused (`Ready=False`,
/// reason `Invalid`, and an `InvalidSpec` Event), so a raise cannot be forgotten.
///
/// Parsed like a `duration` (`24h`, `1h30m`, `90s`); an empty value, `0` or `none`
/// lift the limit. Shown the same way.
///
/// ```
/// use std::time::Duration;
/// use logpolicy_api::validate::MaxDuration;
/// let limit: MaxDuration = "24h".parse().unwrap();
/// assert_eq!(limit, MaxDuration(Some(Duration::from_secs(86_400))));
/// assert_eq!(limit.to_string(), "24h");
/// assert_eq!("none".parse::<MaxDuration>().unwrap(), MaxDuration(None));
/// assert_eq!("".parse::<MaxDuration>().unwrap().to_string(), "none");
/// assert!("24 hours".parse::<MaxDuration>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MaxDuration(pub Option<Duration>);

/// The operator's limit unless `--max-duration` says otherwise.
pub const DEFAULT_MAX_DURATION: &str = "24h";

impl std::str::FromStr for MaxDuration {
    type Err = DurationError;

    fn from_str(s: &str) -> Result<Self, DurationError> {
        match s.trim() {
            "" | "0" | "none" => Ok(MaxDuration(None)),
            d => parse_duration(d).map(|d| MaxDuration(Some(d))),
        }
    }
}

impl fmt::Display for MaxDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(d) = self.0 else {
            return f.write_str("none");
        };
        let ms = d.as_millis();
        let (h, m, sec, milli) = (ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000);
        for (n, unit) in [(h, "h"), (m, "m"), (sec, "s"), (milli, "ms")] {
            if n > 0 {
                write!(f, "{n}{unit}")?;
            }
        }
        Ok(())
    }
}

/// Checks a valid policy's expiry against the operator's limit, at `now` (an
/// `expirationTime` counts from now): the error names the field, the limit and how to
/// lift it.
///
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
/// use logpolicy_api::validate::{check_lifetime, Expiry, MaxDuration};
/// let limit = MaxDuration(Some(Duration::from_secs(3600)));
/// let now = UNIX_EPOCH + Duration::from_secs(1_000_000);
/// assert!(check_lifetime(Expiry::After(Duration::from_secs(900)), now, limit).is_ok());
/// let e = check_lifetime(Expiry::Never, now, limit).unwrap_err();
/// assert_eq!(e.field, "spec.duration");
/// assert!(check_lifetime(Expiry::Never, now, MaxDuration(None)).is_ok());
/// ```
pub fn check_lifetime(
    expiry: Expiry,
    now: SystemTime,
    limit: MaxDuration,
) -> Result<(), FieldError> {
    let Some(max) = limit.0 else {
        return Ok(());
    };
    let lift = "(the operator's --max-duration; the chart's value maxDuration, \"\" for no limit, lifts it for standing policies; a policy that only samples, limits bursts, caps bytes or records, setting no level, may stand without it)";
    match expiry {
        Expiry::Never => Err(FieldError::new(
            "spec.duration",
            format!("the policy has no expiry, and this operator applies a policy for at most {limit} {lift}: give spec.duration (at most {limit}) or spec.expirationTime"),
        )),
        Expiry::After(d) if d > max => Err(FieldError::new(
            "spec.duration",
            format!("{} is longer than the {limit} this operator allows {lift}", MaxDuration(Some(d))),
        )),
        Expiry::At(t) if t.duration_since(now).is_ok_and(|d| d > max) => Err(FieldError::new(
            "spec.expirationTime",
            format!("is more than {limit} from now, longer than this operator allows {lift}; give an earlier time or spec.duration (at most {limit})"),
        )),
        _ => Ok(()),
    }
}

fn selector(s: &LabelSelector, errors: &mut Vec<FieldError>) -> Option<PodSelector> {
    let labels = s.match_labels.as_ref().filter(|m| !m.is_empty());
    let exprs = s.match_expressions.as_ref().filter(|m| !m.is_empty());
    if labels.is_none() && exprs.is_none() {
        errors.push(FieldError::new(
            "spec.selector",
            "must not be empty: an empty selector would select every opted-in pod of the namespace; give matchLabels or matchExpressions",
        ));
        return None;
    }
    let before = errors.len();
    let mut out = Vec::new();
    for (k, v) in labels.into_iter().flatten() {
        let field = format!("spec.selector.matchLabels[{k}]");
        if let Err(e) = label_key(k) {
            errors.push(FieldError::new(&field, e));
        }
        if let Err(e) = label_value(v) {
            errors.push(FieldError::new(&field, e));
        }
        out.push(Expression::Equal(k.clone(), v.clone()));
    }
    for (i, r) in exprs.into_iter().flatten().enumerate() {
        let field = format!("spec.selector.matchExpressions[{i}]");
        if let Err(e) = label_key(&r.key) {
            errors.push(FieldError::new(format!("{field}.key"), e));
        }
        let values: BTreeSet<String> = r.values.iter().flatten().cloned().collect();
        for v in &values {
            if let Err(e) = label_value(v) {
                errors.push(FieldError::new(format!("{field}.values"), e));
            }
        }
        let expr = match r.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => {
                errors.push(FieldError::new(
                    format!("{field}.values"),
                    format!("operator {} needs at least one value", r.operator),
                ));
                continue;
            }
            "In" => Expression::In(r.key.clone(), values),
            "NotIn" => Expression::NotIn(r.key.clone(), values),
            "Exists" | "DoesNotExist" if !values.is_empty() => {
                errors.push(FieldError::new(
                    format!("{field}.values"),
                    format!("operator {} takes no values", r.operator),
                ));
                continue;
            }
            "Exists" => Expression::Exists(r.key.clone()),
            "DoesNotExist" => Expression::DoesNotExist(r.key.clone()),
            other => {
                errors.push(FieldError::new(
                    format!("{field}.operator"),
                    format!("{other:?} is not one of In, NotIn, Exists, DoesNotExist"),
                ));
                continue;
            }
        };
        out.push(expr);
    }
    (errors.len() == before).then(|| PodSelector::new(out))
}

fn label_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// Checks a label key (`[prefix/]name`, as Kubernetes has them); the error names it.
pub fn label_key(k: &str) -> Result<(), String> {
    let (prefix, name) = match k.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|part| {
                !part.is_empty()
                    && part.len() <= 63
                    && part
                        .bytes()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
            })
    });
    if prefix_ok && label_name(name) {
        Ok(())
    } else {
        Err(format!("{k:?} is not a valid label key"))
    }
}

/// Checks a label value (empty, or a name of up to 63 characters); the error names it.
pub fn label_value(v: &str) -> Result<(), String> {
    if v.is_empty() || label_name(v) {
        Ok(())
    } else {
        Err(format!("{v:?} is not a valid label value"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use logpolicy::policy::{BurstSpec, SamplingScope, SamplingSpec, TargetSpec};
    use logpolicy::Level;
    use std::collections::BTreeMap;

    fn spec(v: serde_json::Value) -> LogPolicySpec {
        serde_json::from_value(v).unwrap()
    }

    fn fields(v: serde_json::Value) -> Vec<String> {
        validate(&spec(v))
            .unwrap_err()
            .into_iter()
            .map(|e| e.field)
            .collect()
    }

    #[test]
    fn a_reason_is_pushed_and_checked_as_the_pod_checks_it() {
        let base =
            serde_json::json!({"selector": {"matchLabels": {"app": "a"}}, "defaultLevel": "debug"});
        let with = |reason: &str| {
            let mut v = base.clone();
            v["reason"] = reason.into();
            spec(v)
        };
        let p = validate(&with("INC-4211: card declines at checkout")).unwrap();
        let layer = p.layer("shop/raise", None);
        assert_eq!(
            layer.reason.as_deref(),
            Some("INC-4211: card declines at checkout")
        );
        assert_eq!(
            validate(&spec(base.clone()))
                .unwrap()
                .layer("s/n", None)
                .reason,
            None
        );
        for (reason, message) in [
            (
                "one\ttwo".to_owned(),
                "must not contain control characters (found U+0009)".to_owned(),
            ),
            (
                "r".repeat(257),
                "is 257 characters long, more than 256".to_owned(),
            ),
        ] {
            let errors = validate(&with(&reason)).unwrap_err();
            assert_eq!(errors, [FieldError::new("spec.reason", message)]);
        }
        assert!(validate(&with(&"r".repeat(crate::crd::MAX_REASON_LEN))).is_ok());
        assert_eq!(
            crate::crd::MAX_REASON_LEN,
            logpolicy::policy::MAX_REASON_LEN
        );
    }

    #[test]
    fn a_when_policy_is_pushed_as_conditional_targets_and_checked_as_the_pod_checks_it() {
        let p = validate(&spec(serde_json::json!({
            "selector": {"matchLabels": {"app": "shop"}},
            "targets": [{"target": "shop", "level": "debug"}],
            "when": {"spanField": "user_id", "equals": [42, "43"]}})))
        .unwrap();
        let layer = p.layer("shop/user-42", None);
        let pushed = PolicyLayer::try_from(&layer).unwrap();
        assert_eq!(
            pushed.directives.to_string(),
            "shop=debug@when(user_id=42|43)"
        );
        // What the pod receives: the condition on each target, nothing else raised.
        let json = serde_json::to_value(&layer).unwrap();
        assert_eq!(json["targets"][0]["when"]["spanField"], "user_id");
        assert!(json.get("when").is_none() && json.get("defaultLevel").is_none());

        assert_eq!(
            fields(serde_json::json!({
                "selector": {"matchLabels": {"app": "shop"}},
                "defaultLevel": "debug",
                "targets": [{"target": "shop", "level": "debug"}],
                "when": {"spanField": "user-id", "equals": []}})),
            ["spec.when.spanField", "spec.defaultLevel"]
        );
        let many: Vec<String> = (0..17).map(|i| i.to_string()).collect();
        let errors = validate(&spec(serde_json::json!({
            "selector": {"matchLabels": {"app": "shop"}},
            "targets": [{"target": "shop", "level": "debug"}],
            "when": {"spanField": "user_id", "equals": many}})))
        .unwrap_err();
        assert_eq!(
            errors,
            [FieldError::new("spec.when.equals", "more than 16 values")]
        );

        // Per-event sampling under the condition reaches the pod with it; per request
        // is refused where it is written.
        let p = validate(&spec(serde_json::json!({
            "selector": {"matchLabels": {"app": "shop"}},
            "targets": [{"target": "shop", "level": "debug"}],
            "sampling": [{"target": "shop::db", "keepOneIn": 10}],
            "when": {"spanField": "user_id", "equals": [42]}})))
        .unwrap();
        let pushed = PolicyLayer::try_from(&p.layer("shop/user-42", None)).unwrap();
        assert_eq!(
            pushed.directives.to_string(),
            "shop=debug@when(user_id=42),@sample(shop::db)=1/10@when(user_id=42)"
        );
        let errors = validate(&spec(serde_json::json!({
            "selector": {"matchLabels": {"app": "shop"}},
            "targets": [{"target": "shop", "level": "debug"}],
            "sampling": [{"target": "shop", "keepOneIn": 10, "scope": "request"}],
            "when": {"spanField": "user_id", "equals": [42]}})))
        .unwrap_err();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].field, "spec.sampling[0].scope");
        assert!(errors[0].message.contains("per event only under when"));
    }

    #[test]
    fn recording_and_replay_are_pushed_and_checked_naming_the_field() {
        // A standing policy that only records: valid, and it may stand without expiry.
        let p = validate(&spec(serde_json::json!({
            "selector": {"matchLabels": {"app": "shop"}},
            "record": [{"target": "shop::payment", "level": "debug"}]})))
        .unwrap();
        assert!(p.only_lowers() && p.records());
        assert_eq!(p.replay("u/1"), None);
        let layer = p.layer("shop/record-payments", None);
        assert_eq!(
            PolicyLayer::try_from(&layer)
                .unwrap()
                .directives
                .to_string(),
            "@record(shop::payment)=debug"
        );
        assert_eq!(layer.replay, None);

        // A raise with a replay window: the pushed layer asks for it once per id.
        let p = validate(&spec(serde_json::json!({
            "selector": {"matchLabels": {"app": "shop"}},
            "targets": [{"target": "shop::payment", "level": "debug"}],
            "replay": {"since": "5m"},
            "duration": "15m"})))
        .unwrap();
        let mut layer = p.layer("shop/raise", None);
        layer.replay = p.replay("3f2a/2");
        let pushed = PolicyLayer::try_from(&layer).unwrap();
        let ask = pushed.replay.unwrap();
        assert_eq!(
            (ask.since, ask.id.as_str()),
            (Duration::from_secs(300), "3f2a/2")
        );
        // A replay alone sets something: the window of what other policies record.
        assert!(validate(&spec(serde_json::json!({
            "selector": {"matchLabels": {"app": "shop"}},
            "replay": {"since": "90s"}})))
        .is_ok());

        for (v, field, message) in [
            (
                serde_json::json!({"record": [{"target": "shop::payment", "level": "off"}]}),
                "spec.record[0].level",
                "off records nothing",
            ),
            (
                serde_json::json!({"record": [{"target": "shop payment", "level": "debug"}]}),
                "spec.record[0].target",
                "not allowed in a target",
            ),
            (
                serde_json::json!({"record": [
                    {"target": "shop", "level": "debug"}, {"target": "shop", "level": "trace"}]}),
                "spec.record[1].target",
                "duplicate recording target",
            ),
            (
                serde_json::json!({"defaultLevel": "info", "replay": {"since": "25h"}}),
                "spec.replay.since",
                "at most 24h",
            ),
            (
                serde_json::json!({"defaultLevel": "info", "replay": {"since": "5 minutes"}}),
                "spec.replay.since",
                "is not a duration",
            ),
            (
                serde_json::json!({"defaultLevel": "info", "replay": {"since": "200ms"}}),
                "spec.replay.since",
                "at least 1s",
            ),
        ] {
            let mut v = v;
            v["selector"] = serde_json::json!({"matchLabels": {"app": "shop"}});
            v["duration"] = "5m".into();
            let errors = validate(&spec(v.clone())).unwrap_err();
            assert_eq!(errors.len(), 1, "{v}: {errors:?}");
            assert_eq!(errors[0].field, field, "{v}");
            assert!(errors[0].message.contains(message), "{v}: {}", errors[0]);
        }
        let many: Vec<serde_json::Value> = (0..=logpolicy::policy::MAX_RECORD_RULES)
            .map(|i| serde_json::json!({"target": format!("t{i}"), "level": "debug"}))
            .collect();
        assert_eq!(
            fields(serde_json::json!({
                "selector": {"matchLabels": {"app": "shop"}}, "record": many})),
            ["spec.record"]
        );
    }

    #[test]
    fn the_limit_refuses_policies_without_an_expiry_or_with_a_longer_one() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let day: MaxDuration = DEFAULT_MAX_DURATION.parse().unwrap();
        let e = check_lifetime(Expiry::Never, now, day).unwrap_err();
        assert_eq!(e.field, "spec.duration");
        for part in [
            "has no expiry",
            "at most 24h",
            "--max-duration",
            "maxDuration",
            "spec.expirationTime",
        ] {
            assert!(e.message.contains(part), "{part:?} in {e}");
        }
        let e =
            check_lifetime(Expiry::After(Duration::from_secs(25 * 3600)), now, day).unwrap_err();
        assert_eq!(e.field, "spec.duration");
        assert!(
            e.message
                .starts_with("25h is longer than the 24h this operator allows"),
            "{e}"
        );
        assert!(check_lifetime(Expiry::After(Duration::from_secs(24 * 3600)), now, day).is_ok());
        let far = now + Duration::from_secs(24 * 3600 + 1);
        let e = check_lifetime(Expiry::At(far), now, day).unwrap_err();
        assert_eq!(e.field, "spec.expirationTime");
        assert!(check_lifetime(Expiry::At(now + Duration::from_secs(3600)), now, day).is_ok());
        // An expiration time already past is not this check's business.
        assert!(check_lifetime(Expiry::At(now - Duration::from_secs(1)), now, day).is_ok());
        for never in [Expiry::Never, Expiry::After(MAX_DURATION), Expiry::At(far)] {
            assert!(check_lifetime(never, now, MaxDuration(None)).is_ok());
        }
        let shown: Vec<String> = ["90m", "1h30m5s", "250ms", "none"]
            .iter()
            .map(|s| s.parse::<MaxDuration>().unwrap().to_string())
            .collect();
        assert_eq!(shown, ["1h30m", "1h30m5s", "250ms", "none"]);
        assert_eq!(
            "1x".parse::<MaxDuration>().unwrap_err(),
            DurationError::Malformed("1x".into())
        );
    }

    #[test]
    fn a_full_spec_becomes_the_layer_the_pod_takes() {
        let p = validate(&spec(serde_json::json!({
            "selector": {"matchLabels": {"app": "checkout"},
                         "matchExpressions": [{"key": "tier", "operator": "In", "values": ["web"]}]},
            "defaultLevel": "info",
            "targets": [{"target": "checkout::payment", "level": "debug"}],
            "sampling": [{"target": "http::access", "keepOneIn": 100, "scope": "request", "span": "req"}],
            "alwaysKeep": "warn",
            "burst": {"perSecond": 100, "thenOneIn": 10},
            "maxBytesPerSecond": 1048576,
            "priority": 7,
            "duration": "15m"
        })))
        .unwrap();
        assert_eq!(p.priority, 7);
        assert_eq!(p.expiry, Expiry::After(Duration::from_secs(900)));
        let labels = BTreeMap::from([
            ("app".to_owned(), "checkout".to_owned()),
            ("tier".to_owned(), "web".to_owned()),
        ]);
        assert!(p.selector.matches(&(&labels).into()));
        assert!(!p
            .selector
            .matches(&[("app", "checkout")].into_iter().collect()));
        let layer = p.layer("shop/debug", None);
        let policy_layer = PolicyLayer::try_from(&layer).unwrap();
        assert_eq!(
            policy_layer.directives.to_string(),
            "info,checkout::payment=debug,@always_keep=warn,@sample(http::access)=1/100:request(req),@burst=100/s:1/10,@max_bytes_per_second=1048576"
        );
    }

    #[test]
    fn levels_read_as_directives_and_stay_within_the_status_bound() {
        let levels = |v: serde_json::Value| validate(&spec(v)).unwrap().levels();
        let sel = serde_json::json!({"matchLabels": {"app": "web"}});
        assert_eq!(
            levels(serde_json::json!({"selector": sel, "defaultLevel": "info",
                "targets": [{"target": "shop::payment", "level": "debug"},
                            {"target": "shop::db", "level": "off"}]})),
            Some("info,shop::payment=debug,shop::db=off".to_owned())
        );
        assert_eq!(
            levels(serde_json::json!({"selector": sel, "alwaysKeep": "error"})),
            None
        );
        let many: Vec<_> = (0..64)
            .map(|i| serde_json::json!({"target": format!("a_rather_long_crate_name::module_{i}"), "level": "trace"}))
            .collect();
        let long = levels(serde_json::json!({"selector": sel, "targets": many})).unwrap();
        assert_eq!(long.len(), MAX_LEVELS_LEN);
        assert!(long.ends_with("..."), "{long}");
    }

    #[test]
    fn what_the_schema_cannot_say_is_named_by_field() {
        assert_eq!(
            fields(serde_json::json!({"selector": {}, "defaultLevel": "info"})),
            ["spec.selector"]
        );
        assert_eq!(
            fields(serde_json::json!({"selector": {"matchLabels": {}}, "defaultLevel": "info"})),
            ["spec.selector"]
        );
        assert_eq!(
            fields(
                serde_json::json!({"selector": {"matchLabels": {"app": "a"}},
                "targets": [{"target": "a", "level": "info"}, {"target": "a", "level": "debug"}, {"target": "b c", "level": "info"}]})
            ),
            ["spec.targets[1].target", "spec.targets[2].target"]
        );
        assert_eq!(
            fields(
                serde_json::json!({"selector": {"matchLabels": {"app": "a"}},
                "sampling": [{"target": "x", "keepOneIn": 0}, {"target": "y", "keepOneIn": 5, "span": "s"},
                             {"target": "z", "keepOneIn": 5, "scope": "request", "span": "a b"}]})
            ),
            [
                "spec.sampling[0].keepOneIn",
                "spec.sampling[1].span",
                "spec.sampling[2].span"
            ]
        );
        assert_eq!(
            fields(
                serde_json::json!({"selector": {"matchLabels": {"app": "a"}}, "defaultLevel": "info", "duration": "15"})
            ),
            ["spec.duration"]
        );
        assert_eq!(
            fields(
                serde_json::json!({"selector": {"matchLabels": {"app": "a"}}, "defaultLevel": "info",
                "expirationTime": "tomorrow"})
            ),
            ["spec.expirationTime"]
        );
        assert_eq!(
            fields(
                serde_json::json!({"selector": {"matchLabels": {"app": "a"}}, "defaultLevel": "info",
                "duration": "1m", "expirationTime": "2026-11-29T20:00:00Z"})
            ),
            ["spec.expirationTime"]
        );
        assert_eq!(
            fields(serde_json::json!({"selector": {"matchExpressions": [
                {"key": "a", "operator": "In"}, {"key": "b", "operator": "Exists", "values": ["x"]},
                {"key": "c", "operator": "Near", "values": ["x"]}, {"key": "-bad", "operator": "Exists"}]},
                "defaultLevel": "info"})),
            [
                "spec.selector.matchExpressions[0].values",
                "spec.selector.matchExpressions[1].values",
                "spec.selector.matchExpressions[2].operator",
                "spec.selector.matchExpressions[3].key"
            ]
        );
        assert_eq!(
            fields(serde_json::json!({"selector": {"matchLabels": {"app": "a"}}})),
            ["spec"]
        );
        assert_eq!(
            fields(
                serde_json::json!({"selector": {"matchLabels": {"app": "a"}}, "maxBytesPerSecond": 10,
                "burst": {"perSecond": 0, "thenOneIn": 2000000}, "priority": 5000})
            ),
            [
                "spec.burst.perSecond",
                "spec.burst.thenOneIn",
                "spec.maxBytesPerSecond",
                "spec.priority"
            ]
        );
    }

    #[test]
    fn messages_say_what_to_do() {
        let e = validate(&spec(
            serde_json::json!({"selector": {}, "defaultLevel": "info"}),
        ))
        .unwrap_err();
        assert!(
            e[0].to_string()
                .starts_with("spec.selector: must not be empty"),
            "{}",
            e[0]
        );
    }

    /// Whether the CRD's `duration` schema (pattern and length) admits `s`, as the API
    /// server's RE2 engine would.
    fn schema_admits(s: &str) -> bool {
        let re = regex::Regex::new(crate::crd::DURATION_PATTERN).unwrap();
        (2..=32).contains(&s.len()) && re.is_match(s)
    }

    #[test]
    fn the_schema_refuses_zero_durations_and_admits_positive_ones() {
        for zero in ["0s", "0ms", "00m", "0h0m0s", "0h00ms"] {
            assert!(!schema_admits(zero), "{zero}");
            assert!(matches!(parse_duration(zero), Err(DurationError::Zero(_))));
        }
        for ok in ["1s", "10ms", "0h1m", "1h0m", "00010s", "0s0ms1h", "8760h"] {
            assert!(schema_admits(ok), "{ok}");
            assert!(parse_duration(ok).is_ok(), "{ok}");
        }
        for bad in ["", "s", "1", "1d", "1.5h", "-1s", "1s ", "h1"] {
            assert!(!schema_admits(bad), "{bad:?}");
        }
    }

    proptest::proptest! {
        /// The schema never refuses what the operator accepts, and refuses every zero.
        #[test]
        fn the_duration_schema_admits_exactly_the_nonzero_durations(
            s in proptest::prop_oneof![
                "(0{0,3}[0-9]{0,2}(ms|s|m|h)){1,4}",
                "[0-9smh]{0,12}",
                "\\PC{0,20}",
            ]
        ) {
            let admitted = schema_admits(&s);
            match parse_duration(&s) {
                Ok(_) => proptest::prop_assert!(admitted || s.len() > 32, "{s:?} refused"),
                Err(DurationError::Zero(_)) => proptest::prop_assert!(!admitted, "{s:?} admitted"),
                // Malformed or too long: the schema admits some of these (too many
                // digits, more than 8760h), which the operator reports as InvalidSpec.
                Err(_) => {}
            }
            if !admitted && s.len() <= 32 {
                proptest::prop_assert!(parse_duration(&s).is_err(), "{s:?} refused but parses");
            }
        }

        #[test]
        fn parse_duration_never_panics(s in "\\PC{0,40}") {
            let _ = parse_duration(&s);
        }

        #[test]
        fn parse_duration_adds_its_parts(parts in proptest::collection::vec((0u64..10_000, 0usize..4), 1..5)) {
            let units = [("ms", 1u64), ("s", 1_000), ("m", 60_000), ("h", 3_600_000)];
            let text: String = parts.iter().map(|(n, u)| format!("{n}{}", units[*u].0)).collect();
            let millis: u64 = parts.iter().map(|(n, u)| n * units[*u].1).sum();
            let expected = Duration::from_millis(millis);
            match parse_duration(&text) {
                Ok(d) => proptest::prop_assert_eq!(d, expected),
                Err(_) => proptest::prop_assert!(expected.is_zero() || expected > MAX_DURATION),
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn validate_never_panics(
            target in "\\PC{0,300}",
            span in proptest::option::of("\\PC{0,200}"),
            keep in proptest::num::u64::ANY,
            duration in proptest::option::of("\\PC{0,20}"),
            expiration in proptest::option::of("\\PC{0,40}"),
            label in "\\PC{0,80}",
            label_for_redact in "\\PC{0,20}",
            priority in proptest::num::i32::ANY,
            budget in proptest::option::of(proptest::num::u64::ANY),
            reason in proptest::option::of("\\PC{0,300}"),
            since in proptest::option::of("\\PC{0,12}"),
        ) {
            let spec = LogPolicySpec {
                selector: LabelSelector {
                    match_labels: Some(BTreeMap::from([(label.clone(), label)])),
                    match_expressions: None,
                },
                default_level: None,
                targets: vec![TargetSpec { target: target.clone(), level: Level::Debug, when: None }],
                record: vec![logpolicy::policy::RecordSpec { target: target.clone(), level: Level::Trace }],
                replay: since.map(|since| crate::crd::ReplayWindow { since }),
                when: None,
                sampling: vec![SamplingSpec {
                    target,
                    keep_one_in: keep,
                    scope: SamplingScope::Request,
                    span,
                    when: None,
                }],
                always_keep: None,
                burst: Some(BurstSpec { per_second: keep, then_one_in: u64::from(priority.unsigned_abs()) }),
                max_bytes_per_second: budget,
                redact: vec![label_for_redact],
                redact_values: keep % 2 == 0,
                priority,
                duration,
                expiration_time: expiration,
                reason,
            };
            let _ = validate(&spec);
        }
    }

    /// What a pod makes of a spec's settings: the document the operator would push,
    /// parsed as the pod parses it.
    fn pod_accepts(spec: &LogPolicySpec) -> Result<(), String> {
        let layer = spec.layer_spec("shop/policy");
        let doc = logpolicy::wire::PolicyDocument::new(
            logpolicy::wire::PodRef::new("shop", "web-1", "u1"),
            1,
        )
        .with_layer(layer);
        logpolicy::wire::PolicyDocument::from_json(doc.to_json().as_bytes())
            .map(drop)
            .map_err(|e| e.path.trim_start_matches("layers[0].").to_owned())
    }

    fn settings(targets: Vec<TargetSpec>, sampling: Vec<SamplingSpec>) -> LogPolicySpec {
        spec(serde_json::json!({"selector": {"matchLabels": {"app": "web"}}}))
            .with_settings(targets, sampling)
    }

    impl LogPolicySpec {
        fn with_settings(mut self, targets: Vec<TargetSpec>, sampling: Vec<SamplingSpec>) -> Self {
            self.targets = targets;
            self.sampling = sampling;
            self
        }
    }

    #[test]
    fn the_operator_and_the_pod_share_the_limits() {
        let target = |i: usize| TargetSpec {
            target: format!("crate_{i}"),
            level: Level::Debug,
            when: None,
        };
        let rule = |i: usize| SamplingSpec {
            target: format!("crate_{i}"),
            keep_one_in: 10,
            scope: SamplingScope::Event,
            span: None,
            when: None,
        };
        let max_t = logpolicy::policy::MAX_TARGETS;
        let max_s = logpolicy::policy::MAX_SAMPLING_RULES;
        for (n_targets, n_rules, ok) in [
            (max_t, 0, true),
            (max_t + 1, 0, false),
            (1, max_s, true),
            (1, max_s + 1, false),
        ] {
            let s = settings(
                (0..n_targets).map(target).collect(),
                (0..n_rules).map(rule).collect(),
            );
            assert_eq!(
                validate(&s).is_ok(),
                ok,
                "{n_targets} targets, {n_rules} rules"
            );
            assert_eq!(
                pod_accepts(&s).is_ok(),
                ok,
                "{n_targets} targets, {n_rules} rules"
            );
        }
    }

    fn arb_target() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        prop_oneof![
            4 => "(a|b|shop)(::(x|http)){0,2}",
            2 => "\\PC{0,12}",
            1 => Just(String::new()),
            1 => "x{250,260}",
        ]
    }

    fn arb_level() -> impl proptest::strategy::Strategy<Value = Level> {
        proptest::sample::select(Level::ALL.to_vec())
    }

    fn arb_count(lo: u64, hi: u64) -> impl proptest::strategy::Strategy<Value = u64> {
        use proptest::prelude::*;
        prop_oneof![
            lo.saturating_sub(2)..lo.saturating_add(2),
            hi.saturating_sub(2)..hi.saturating_add(2),
            lo..=hi,
            any::<u64>(),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3_000))]

        /// One validator: a spec's settings the operator accepts are exactly those the
        /// pod accepts, and where both refuse, they name the same first field.
        #[test]
        fn the_operator_accepts_what_the_pod_accepts(
            default_level in proptest::option::of(arb_level()),
            always_keep in proptest::option::of(arb_level()),
            targets in proptest::collection::vec((arb_target(), arb_level()), 0..4),
            rules in proptest::collection::vec(
                (arb_target(), arb_count(1, 1_000_000), proptest::bool::ANY,
                 proptest::option::of(proptest::prop_oneof!["[a-z_]{1,10}", "\\PC{0,6}", "y{126,130}"])),
                0..3),
            burst in proptest::option::of((arb_count(1, 10_000_000), arb_count(1, 1_000_000))),
            budget in proptest::option::of(arb_count(1024, 1 << 40)),
        ) {
            let mut s = settings(
                targets.into_iter().map(|(target, level)| TargetSpec { target, level, when: None }).collect(),
                rules.into_iter().map(|(target, keep_one_in, request, span)| SamplingSpec {
                    target,
                    keep_one_in,
                    scope: if request { SamplingScope::Request } else { SamplingScope::Event },
                    span,
                    when: None,
                }).collect(),
            );
            s.default_level = default_level;
            s.always_keep = always_keep;
            s.burst = burst.map(|(per_second, then_one_in)| BurstSpec { per_second, then_one_in });
            s.max_bytes_per_second = budget;
            let operator = validate(&s);
            let pod = pod_accepts(&s);
            let sets_nothing = s.default_level.is_none() && s.always_keep.is_none()
                && s.targets.is_empty() && s.sampling.is_empty() && s.burst.is_none()
                && s.max_bytes_per_second.is_none();
            proptest::prop_assert_eq!(operator.is_ok(), pod.is_ok() && !sets_nothing);
            if let (Err(errors), Err(first)) = (&operator, &pod) {
                proptest::prop_assert_eq!(&errors[0].field, &format!("spec.{first}"));
            }
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(
            parse_duration("1h1m1s1ms"),
            Ok(Duration::from_millis(3_661_001))
        );
        assert_eq!(parse_duration("8760h"), Ok(MAX_DURATION));
        for bad in [
            "",
            "m",
            "1",
            "1d",
            "1h 1m",
            "-1s",
            "8761h",
            "0m",
            "99999999999999999s",
            "1mss",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
