//! Targets and how they match.

use std::fmt;
use std::str::FromStr;

use super::directives::quoted;

/// The longest target a policy accepts, in bytes.
pub const MAX_TARGET_LEN: usize = 256;

/// A tracing target prefix, such as `shop::payment`.
///
/// A target matches itself and every target below it at a `::` boundary:
/// `a::b` matches `a::b` and `a::b::c`, never `a::bc`. Matching is exact and
/// case-sensitive, like tracing targets themselves.
///
/// A target starts with a letter, a digit, `-`, `:` or `_` (what `EnvFilter` accepts
/// at the start of a directive) and holds no whitespace, control characters, `,`, `=`,
/// `[` or `]`; anything else goes (`a{b}`, `a'b`).
///
/// # Examples
///
/// ```
/// use logpolicy::Target;
/// let t: Target = "shop::payment".parse().unwrap();
/// assert!(t.matches("shop::payment"));
/// assert!(t.matches("shop::payment::card"));
/// assert!(!t.matches("shop::payments"));
/// assert!(!t.matches("shop"));
/// assert!("shop payment".parse::<Target>().is_err());
/// assert!("*".parse::<Target>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Target(Box<str>);

/// Why a string is not a target.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// The string is empty.
    #[error("empty target")]
    Empty,
    /// The string does not start with a letter, a digit, `-`, `:` or `_`.
    #[error("target {target:?} starts with {ch:?}: a target starts with a letter, a digit, '-', ':' or '_'")]
    BadStart {
        /// The offending target (at most 80 characters of it).
        target: String,
        /// Its first character.
        ch: char,
    },
    /// The string is longer than [`MAX_TARGET_LEN`] (the message quotes 80 characters).
    #[error("target {0:?} is longer than {MAX_TARGET_LEN} bytes")]
    TooLong(String),
    /// The string has a character that directives use as syntax, or whitespace.
    #[error("target {target:?} contains {ch:?}, which is not allowed in a target")]
    BadChar {
        /// The offending target (at most 80 characters of it).
        target: String,
        /// The first offending character.
        ch: char,
    },
}

impl Target {
    /// Validates `s` as a target.
    pub fn new(s: &str) -> Result<Self, TargetError> {
        if s.is_empty() {
            return Err(TargetError::Empty);
        }
        if s.len() > MAX_TARGET_LEN {
            return Err(TargetError::TooLong(quoted(s)));
        }
        if let Some(ch) = s
            .chars()
            .find(|c| c.is_whitespace() || c.is_control() || matches!(c, ',' | '=' | '[' | ']'))
        {
            return Err(TargetError::BadChar {
                target: quoted(s),
                ch,
            });
        }
        let first = s.chars().next().unwrap_or('-');
        if !(first.is_alphanumeric() || matches!(first, '-' | ':' | '_')) {
            return Err(TargetError::BadStart {
                target: quoted(s),
                ch: first,
            });
        }
        Ok(Target(s.into()))
    }

    /// The target as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this prefix governs `target` (equal, or a parent at a `::` boundary).
    #[inline]
    pub fn matches(&self, target: &str) -> bool {
        prefix_matches(&self.0, target)
    }
}

/// `prefix` governs `target` when equal, or when `target` continues with `::`.
#[inline]
pub(crate) fn prefix_matches(prefix: &str, target: &str) -> bool {
    let (p, t) = (prefix.as_bytes(), target.as_bytes());
    t.len() >= p.len()
        && &t[..p.len()] == p
        && (t.len() == p.len() || t[p.len()..].starts_with(b"::"))
}

impl FromStr for Target {
    type Err = TargetError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Target::new(s)
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl serde::Serialize for Target {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for Target {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Target::new(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundaries() {
        assert!(prefix_matches("a::b", "a::b::c"));
        assert!(prefix_matches("a::b", "a::b"));
        assert!(!prefix_matches("a::b", "a::bc"));
        assert!(!prefix_matches("a::b", "a::"));
        assert!(!prefix_matches("kube", "kube_client"));
        assert!(!prefix_matches("a::b", "a:b"));
        assert!(prefix_matches("a", "a::b:c"));
    }

    #[test]
    fn rejects_syntax_and_whitespace() {
        for bad in [
            "", "a b", "a=b", "a,b", "a[b]", "*", "a\n", "@a", "'a'", ".a",
        ] {
            assert!(Target::new(bad).is_err(), "{bad:?}");
        }
        assert!(matches!(
            Target::new(&"x".repeat(300)),
            Err(TargetError::TooLong(_))
        ));
        assert!(Target::new("héllo::wörld").is_ok());
        assert!(Target::new("a{b}").is_ok());
        assert!(Target::new("::a-b").is_ok());
    }
}
