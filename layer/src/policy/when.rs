//! Conditions on the request: a span field and the values it must have for a layer's
//! targets to apply ("debug for this one customer's requests").

use std::fmt;
use std::num::NonZeroU32;

use super::target::Target;
use crate::level::Level;

/// The most values one condition may list.
pub const MAX_WHEN_VALUES: usize = 16;

/// The longest value a condition may list, in bytes.
pub const MAX_WHEN_VALUE_LEN: usize = 128;

/// The longest span field name a condition may name, in bytes.
pub const MAX_WHEN_FIELD_LEN: usize = 64;

/// The most conditional entries (`target=level@when(...)`) one layer, or the effective
/// policy, may hold.
pub const MAX_WHEN_TARGETS: usize = 64;

/// A condition: the span field `field` recorded with one of `values`, by the span an
/// event is in or one of its ancestors.
///
/// A value matches a recorded field by its text: `user_id = 42`, `user_id = "42"` and
/// `user_id = %id` (an `id` that displays as `42`) all match the value `42`; a value
/// recorded with `?` matches with or without the quotes `Debug` gives a string.
///
/// # Examples
///
/// ```
/// use logpolicy::policy::When;
/// let when = When::new("user_id", ["42", "43"]).unwrap();
/// assert!(when.matches("42"));
/// assert!(!when.matches("4"));
/// assert_eq!(when.to_string(), "user_id=42|43");
/// assert_eq!("user_id=43|42".parse::<When>().unwrap(), when);
///
/// let err = When::new("user id", ["42"]).unwrap_err();
/// assert_eq!(err.to_string(), r#"when.spanField: "user id" is not a plain identifier (letters, digits and '_', not starting with a digit)"#);
/// assert!(When::new("user_id", Vec::<String>::new()).unwrap_err().to_string().starts_with("when.equals: no values"));
/// ```
///
/// In a service: the request span records the customer (here once the handler knows
/// it; with tower-http, `TraceLayer::make_span_with` creates the span with
/// `user_id = tracing::field::Empty`), and only that customer's requests are raised:
///
/// ```
/// use tracing_subscriber::prelude::*;
///
/// let filter = logpolicy::PolicyFilter::from_directives("info,shop::payment=debug@when(user_id=42)")?;
/// let subscriber = tracing_subscriber::registry().with(filter);
/// tracing::subscriber::with_default(subscriber, || {
///     for user in [7u64, 42] {
///         let span = tracing::info_span!("request", user_id = tracing::field::Empty);
///         let _in = span.enter();
///         span.record("user_id", user);
///         let enabled = tracing::enabled!(target: "shop::payment", tracing::Level::DEBUG);
///         assert_eq!(enabled, user == 42);
///         let child = tracing::info_span!("db");
///         let _child = child.enter(); // spans below the request are in it
///         assert_eq!(tracing::enabled!(target: "shop::payment", tracing::Level::DEBUG), user == 42);
///     }
///     assert!(!tracing::enabled!(target: "shop::payment", tracing::Level::DEBUG));
/// });
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct When {
    field: String,
    /// Sorted, without duplicates.
    values: Vec<String>,
}

/// A condition that is not valid; names the offending part (`when.spanField`,
/// `when.equals[i]`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct WhenError {
    /// `when.spanField`, `when.equals` or `when.equals[i]`.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl When {
    /// A condition on `field` having one of `values` (order and duplicates do not matter).
    pub fn new<V: Into<String>>(
        field: &str,
        values: impl IntoIterator<Item = V>,
    ) -> Result<When, WhenError> {
        let err = |path: String, message: String| WhenError { path, message };
        let identifier = !field.is_empty()
            && field.len() <= MAX_WHEN_FIELD_LEN
            && field
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_')
            && !field.as_bytes()[0].is_ascii_digit();
        if !identifier {
            return Err(err(
                "when.spanField".into(),
                format!(
                    "{:?} is not a plain identifier (letters, digits and '_', not starting with a digit)",
                    super::directives::quoted(field)
                ),
            ));
        }
        let mut out: Vec<String> = Vec::new();
        for (i, v) in values.into_iter().enumerate() {
            let v: String = v.into();
            if i >= MAX_WHEN_VALUES {
                return Err(err(
                    "when.equals".into(),
                    format!("more than {MAX_WHEN_VALUES} values"),
                ));
            }
            let plain = !v.is_empty()
                && v.len() <= MAX_WHEN_VALUE_LEN
                && v.chars()
                    .all(|c| c.is_ascii_graphic() && !matches!(c, '|' | ',' | '(' | ')'));
            if !plain {
                return Err(err(
                    format!("when.equals[{i}]"),
                    format!(
                        "{:?} is not a plain value (1 to {MAX_WHEN_VALUE_LEN} printable ASCII characters, no spaces, '|', ',', '(' or ')')",
                        super::directives::quoted(&v)
                    ),
                ));
            }
            out.push(v);
        }
        if out.is_empty() {
            return Err(err(
                "when.equals".into(),
                "no values: a condition lists the values the field must have".into(),
            ));
        }
        out.sort();
        out.dedup();
        Ok(When {
            field: field.to_owned(),
            values: out,
        })
    }

    /// The span field.
    pub fn field(&self) -> &str {
        &self.field
    }

    /// The values, sorted.
    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// Whether a field recorded as `value` (its text) satisfies the condition.
    pub fn matches(&self, value: &str) -> bool {
        self.values.iter().any(|v| v == value)
    }
}

impl fmt::Display for When {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.field, self.values.join("|"))
    }
}

impl std::str::FromStr for When {
    type Err = WhenError;

    /// `field=value|value...`
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (field, values) = s.split_once('=').ok_or_else(|| WhenError {
            path: "when".into(),
            message: format!(
                "{:?}: expected field=value|value...",
                super::directives::quoted(s)
            ),
        })?;
        let values: Vec<&str> = if values.trim().is_empty() {
            Vec::new()
        } else {
            values.split('|').map(str::trim).collect()
        };
        When::new(field.trim(), values)
    }
}

/// A target's level that applies only under a condition: `shop::payment=debug` for
/// events in a request whose span recorded `user_id=42`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WhenTarget {
    /// The condition.
    pub when: When,
    /// The target (and the targets below it).
    pub target: Target,
    /// Its level under the condition.
    pub level: Level,
}

impl fmt::Display for WhenTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}@when({})", self.target, self.level, self.when)
    }
}

/// A sampling rule that applies only under a condition: `@sample(shop)=1/10@when(user_id=42)`
/// keeps one `shop` event in 10 in the requests whose span recorded `user_id=42`, and
/// has no effect anywhere else. Per event only: a request that satisfies a condition is
/// always kept whole, so sampling it per request would mean nothing.
///
/// # Examples
///
/// ```
/// use logpolicy::Directives;
/// let d: Directives = "info,shop=debug@when(user_id=42),@sample(shop)=1/10@when(user_id=42)".parse()?;
/// assert_eq!(d.when_sampling[0].keep_one_in.get(), 10);
/// assert_eq!(d.when_sampling[0].to_string(), "@sample(shop)=1/10@when(user_id=42)");
/// let err = "@sample(shop)=1/10:request@when(user_id=42)".parse::<Directives>().unwrap_err();
/// assert!(err.to_string().contains("per event only under when"));
/// # Ok::<(), logpolicy::DirectiveError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WhenSampling {
    /// The condition.
    pub when: When,
    /// The target (and the targets below it) the rule governs.
    pub target: Target,
    /// One event in this many is kept (1 keeps every one: turns off, in matching
    /// requests, the sampling the target has elsewhere).
    pub keep_one_in: NonZeroU32,
}

impl fmt::Display for WhenSampling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "@sample({})=1/{}@when({})",
            self.target, self.keep_one_in, self.when
        )
    }
}

/// An entry that applies under a condition: a list holds at most one per target and
/// condition ([`WhenTarget`], [`WhenSampling`]).
pub(crate) trait Conditional: Clone {
    fn target(&self) -> &Target;
    fn when(&self) -> &When;

    /// Whether `other` is the entry for the same target and condition.
    fn same_entry(&self, other: &Self) -> bool {
        self.target() == other.target() && self.when() == other.when()
    }
}

impl Conditional for WhenTarget {
    fn target(&self) -> &Target {
        &self.target
    }
    fn when(&self) -> &When {
        &self.when
    }
}

impl Conditional for WhenSampling {
    fn target(&self) -> &Target {
        &self.target
    }
    fn when(&self) -> &When {
        &self.when
    }
}

/// Whether `list` has an entry for `item`'s target and condition.
pub(crate) fn has_entry<T: Conditional>(list: &[T], item: &T) -> bool {
    list.iter().any(|e| e.same_entry(item))
}

/// Puts `item` in `list`, replacing the entry for its target and condition.
pub(crate) fn set_entry<T: Conditional>(list: &mut Vec<T>, item: T) {
    match list.iter_mut().find(|e| e.same_entry(&item)) {
        Some(slot) => *slot = item,
        None => list.push(item),
    }
}

/// Whether `item` can go into `list`: it replaces an entry, or there is room for one
/// more (at most [`MAX_WHEN_TARGETS`]).
pub(crate) fn has_room<T: Conditional>(list: &[T], item: &T) -> bool {
    has_entry(list, item) || list.len() < MAX_WHEN_TARGETS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_conditions_are_refused_naming_the_part() {
        let e = |f: &str, v: &[&str]| When::new(f, v.iter().copied()).unwrap_err().path;
        assert_eq!(e("", &["1"]), "when.spanField");
        assert_eq!(e("1st", &["1"]), "when.spanField");
        assert_eq!(e("user.id", &["1"]), "when.spanField");
        assert_eq!(e(&"a".repeat(65), &["1"]), "when.spanField");
        assert_eq!(e("user_id", &[]), "when.equals");
        assert_eq!(e("user_id", &["1", ""]), "when.equals[1]");
        assert_eq!(e("user_id", &["a b"]), "when.equals[0]");
        assert_eq!(e("user_id", &["a|b"]), "when.equals[0]");
        let many: Vec<String> = (0..17).map(|i| i.to_string()).collect();
        let err = When::new("user_id", many).unwrap_err();
        assert_eq!(err.to_string(), "when.equals: more than 16 values");
        assert!("user_id".parse::<When>().is_err());
        assert_eq!("user_id=".parse::<When>().unwrap_err().path, "when.equals");
    }

    #[test]
    fn values_are_a_set() {
        let a = When::new("tenant", ["b", "a", "b"]).unwrap();
        assert_eq!(a.values(), ["a", "b"]);
        assert_eq!(a.to_string().parse::<When>().unwrap(), a);
    }
}
