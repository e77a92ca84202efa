//! What the CRD schema cannot say, checked once, into a typed [`ValidatedPolicy`].
//!
//! Errors name the field the way `kubectl` does (`spec.targets[1].target`), so they read
//! the same in the `Ready` condition, in an Event and in a test.
//!
//! ```
//! use logpolicy_operator::crd::LogPolicySpec;
//! use logpolicy_operator::validate;
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
use kube::core::{Expression, Selector};
use logpolicy::wire::{WireBurst, WireLayer, WireSampling, WireScope, WireTarget};
use logpolicy::{Level, Target};

use crate::crd::{LevelName, LogPolicySpec, SamplingScope, PRIORITY_RANGE};

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
/// (without source and expiry, which depend on the object and on when it was seen),
/// its priority and its expiry.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidatedPolicy {
    /// Which pods it selects (never empty).
    pub selector: Selector,
    /// Higher wins per target.
    pub priority: i32,
    /// When it stops applying.
    pub expiry: Expiry,
    layer: WireLayer,
}

impl ValidatedPolicy {
    /// The levels it sets as directives, e.g. `info,shop::payment=debug` (the default
    /// level first, then each target), cut to at most [`MAX_LEVELS_LEN`] bytes; `None`
    /// when it sets no level.
    pub fn levels(&self) -> Option<String> {
        let mut parts: Vec<String> = Vec::with_capacity(self.layer.targets.len() + 1);
        if let Some(l) = self.layer.default_level {
            parts.push(l.to_string());
        }
        parts.extend(
            self.layer
                .targets
                .iter()
                .map(|t| format!("{}={}", t.target, t.level)),
        );
        if parts.is_empty() {
            return None;
        }
        Some(crate::text::truncate(parts.join(","), MAX_LEVELS_LEN))
    }

    /// The layer as pushed to a pod: the settings, with this source and expiry.
    pub fn layer(&self, source: &str, expires_at: Option<SystemTime>) -> WireLayer {
        WireLayer {
            source: source.to_owned(),
            expires_at,
            ..self.layer.clone()
        }
    }
}

fn level(l: LevelName) -> Level {
    match l {
        LevelName::Trace => Level::Trace,
        LevelName::Debug => Level::Debug,
        LevelName::Info => Level::Info,
        LevelName::Warn => Level::Warn,
        LevelName::Error => Level::Error,
        LevelName::Off => Level::Off,
    }
}

/// Checks a spec beyond its schema; every problem found is returned, each naming its
/// field.
pub fn validate(spec: &LogPolicySpec) -> Result<ValidatedPolicy, Vec<FieldError>> {
    let mut errors = Vec::new();
    let selector = selector(&spec.selector, &mut errors);

    let mut targets = Vec::with_capacity(spec.targets.len());
    let mut seen = BTreeSet::new();
    if spec.targets.len() > crate::crd::MAX_TARGETS {
        errors.push(FieldError::new(
            "spec.targets",
            format!("at most {} entries", crate::crd::MAX_TARGETS),
        ));
    }
    for (i, t) in spec.targets.iter().enumerate() {
        let field = format!("spec.targets[{i}].target");
        match Target::new(&t.target) {
            Ok(target) => {
                if !seen.insert(t.target.as_str()) {
                    errors.push(FieldError::new(
                        field,
                        format!("duplicate target {:?}", t.target),
                    ));
                }
                targets.push(WireTarget {
                    target,
                    level: level(t.level),
                });
            }
            Err(e) => errors.push(FieldError::new(field, e.to_string())),
        }
    }

    let mut sampling = Vec::with_capacity(spec.sampling.len());
    let mut seen = BTreeSet::new();
    if spec.sampling.len() > crate::crd::MAX_SAMPLING_RULES {
        errors.push(FieldError::new(
            "spec.sampling",
            format!("at most {} rules", crate::crd::MAX_SAMPLING_RULES),
        ));
    }
    for (i, r) in spec.sampling.iter().enumerate() {
        let target = match Target::new(&r.target) {
            Ok(t) => Some(t),
            Err(e) => {
                errors.push(FieldError::new(
                    format!("spec.sampling[{i}].target"),
                    e.to_string(),
                ));
                None
            }
        };
        if !seen.insert(r.target.as_str()) {
            errors.push(FieldError::new(
                format!("spec.sampling[{i}].target"),
                format!("duplicate target {:?}", r.target),
            ));
        }
        let keep = u64::try_from(r.keep_one_in)
            .ok()
            .filter(|k| (1..=u64::from(logpolicy::policy::MAX_ONE_IN)).contains(k));
        if keep.is_none() {
            errors.push(FieldError::new(
                format!("spec.sampling[{i}].keepOneIn"),
                format!(
                    "{} is out of range (1 to {})",
                    r.keep_one_in,
                    logpolicy::policy::MAX_ONE_IN
                ),
            ));
        }
        if let Some(span) = &r.span {
            if r.scope == SamplingScope::Event {
                errors.push(FieldError::new(
                    format!("spec.sampling[{i}].span"),
                    "a span name needs scope: request (an event rule decides per event)",
                ));
            } else if let Some(c) = span
                .chars()
                .find(|c| !(c.is_alphanumeric() || matches!(c, '_' | ':' | '.' | '-')))
            {
                errors.push(FieldError::new(
                    format!("spec.sampling[{i}].span"),
                    format!("span name {span:?} contains {c:?}"),
                ));
            } else if span.is_empty() || span.len() > logpolicy::policy::MAX_SPAN_NAME_LEN {
                errors.push(FieldError::new(
                    format!("spec.sampling[{i}].span"),
                    format!(
                        "must be 1 to {} characters",
                        logpolicy::policy::MAX_SPAN_NAME_LEN
                    ),
                ));
            }
        }
        if let (Some(target), Some(keep_one_in)) = (target, keep) {
            sampling.push(WireSampling {
                target,
                keep_one_in,
                scope: match r.scope {
                    SamplingScope::Event => WireScope::Event,
                    SamplingScope::Request => WireScope::Request,
                },
                span: r.span.clone(),
            });
        }
    }

    let burst = spec.burst.and_then(|b| {
        let per_second = u64::try_from(b.per_second)
            .ok()
            .filter(|v| (1..=u64::from(logpolicy::policy::MAX_PER_SECOND)).contains(v));
        let then_one_in = u64::try_from(b.then_one_in)
            .ok()
            .filter(|v| (1..=u64::from(logpolicy::policy::MAX_ONE_IN)).contains(v));
        if per_second.is_none() {
            errors.push(FieldError::new(
                "spec.burst.perSecond",
                format!(
                    "{} is out of range (1 to {})",
                    b.per_second,
                    logpolicy::policy::MAX_PER_SECOND
                ),
            ));
        }
        if then_one_in.is_none() {
            errors.push(FieldError::new(
                "spec.burst.thenOneIn",
                format!(
                    "{} is out of range (1 to {})",
                    b.then_one_in,
                    logpolicy::policy::MAX_ONE_IN
                ),
            ));
        }
        Some(WireBurst {
            per_second: per_second?,
            then_one_in: then_one_in?,
        })
    });

    let (lo, hi) = logpolicy::policy::BYTES_PER_SECOND_RANGE;
    let max_bytes_per_second = spec.max_bytes_per_second.and_then(|b| {
        let ok = u64::try_from(b).ok().filter(|b| (lo..=hi).contains(b));
        if ok.is_none() {
            errors.push(FieldError::new(
                "spec.maxBytesPerSecond",
                format!("{b} is out of range ({lo} to {hi})"),
            ));
        }
        ok
    });

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
                errors.push(FieldError::new("spec.duration", e));
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

    let layer = WireLayer {
        source: String::new(),
        priority: spec.priority,
        expires_at: None,
        default_level: spec.default_level.map(level),
        targets,
        always_keep: spec.always_keep.map(level),
        sampling,
        burst,
        max_bytes_per_second,
    };
    if layer.default_level.is_none()
        && layer.targets.is_empty()
        && layer.always_keep.is_none()
        && spec.sampling.is_empty()
        && spec.burst.is_none()
        && spec.max_bytes_per_second.is_none()
    {
        errors.push(FieldError::new(
            "spec",
            "sets nothing: give at least one of defaultLevel, targets, sampling, alwaysKeep, burst, maxBytesPerSecond",
        ));
    }

    if errors.is_empty() {
        // The pod's own rules, as the last word: one set of rules for both sides.
        let check = WireLayer {
            source: "validate/check".into(),
            ..layer.clone()
        };
        if let Err(e) = check.to_policy_layer() {
            let field = match e.path.strip_prefix("layers[0]") {
                Some(rest) => format!("spec{rest}"),
                None => "spec".to_owned(),
            };
            errors.push(FieldError::new(field, e.message));
        }
    }

    match (selector, errors.is_empty()) {
        (Some(selector), true) => Ok(ValidatedPolicy {
            selector,
            priority: spec.priority,
            expiry,
            layer,
        }),
        _ => Err(errors),
    }
}

/// Parses `15m`, `1h30m`, `90s`, `250ms` (the CRD's pattern), up to [`MAX_DURATION`].
///
/// ```
/// use std::time::Duration;
/// use logpolicy_operator::validate::parse_duration;
/// assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
/// assert_eq!(parse_duration("1500ms"), Ok(Duration::from_millis(1500)));
/// assert!(parse_duration("15").is_err());
/// assert!(parse_duration("0s").is_err());
/// ```
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("{s:?} is not a duration like 15m, 1h30m or 90s");
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
        return Err(format!("{s:?} is zero: give a positive duration"));
    }
    if total > MAX_DURATION {
        return Err(format!("{s:?} is longer than 8760h"));
    }
    Ok(total)
}

fn selector(s: &LabelSelector, errors: &mut Vec<FieldError>) -> Option<Selector> {
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
    (errors.len() == before).then(|| out.into_iter().collect())
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

fn label_key(k: &str) -> Result<(), String> {
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

fn label_value(v: &str) -> Result<(), String> {
    if v.is_empty() || label_name(v) {
        Ok(())
    } else {
        Err(format!("{v:?} is not a valid label value"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::SelectorExt;
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
        assert!(p.selector.matches(&labels));
        assert!(!p
            .selector
            .matches(&BTreeMap::from([("app".to_owned(), "checkout".to_owned())])));
        let layer = p.layer("shop/debug", None);
        let policy_layer = layer.to_policy_layer().unwrap();
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

    proptest::proptest! {
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
            keep in proptest::num::i32::ANY,
            duration in proptest::option::of("\\PC{0,20}"),
            expiration in proptest::option::of("\\PC{0,40}"),
            label in "\\PC{0,80}",
            priority in proptest::num::i32::ANY,
            budget in proptest::option::of(proptest::num::i64::ANY),
        ) {
            let spec = LogPolicySpec {
                selector: LabelSelector {
                    match_labels: Some(BTreeMap::from([(label.clone(), label)])),
                    match_expressions: None,
                },
                default_level: None,
                targets: vec![crate::crd::TargetLevel { target: target.clone(), level: LevelName::Debug }],
                sampling: vec![crate::crd::SamplingRule {
                    target,
                    keep_one_in: keep,
                    scope: SamplingScope::Request,
                    span,
                }],
                always_keep: None,
                burst: Some(crate::crd::Burst { per_second: keep, then_one_in: priority }),
                max_bytes_per_second: budget,
                priority,
                duration,
                expiration_time: expiration,
            };
            let _ = validate(&spec);
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
