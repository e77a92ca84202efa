//! Targets and how they match.

use std::fmt;
use std::str::FromStr;

/// The longest target a policy accepts, in bytes.
pub const MAX_TARGET_LEN: usize = 256;

/// A tracing target prefix, such as `shop::payment`.
///
/// A target matches itself and every target below it at a `::` boundary:
/// `a::b` matches `a::b` and `a::b::c`, never `a::bc`. Matching is exact and
/// case-sensitive, like tracing targets themselves.
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
/// ```
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Target(Box<str>);

/// Why a string is not a target.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// The string is empty.
    #[error("empty target")]
    Empty,
    /// The string is longer than [`MAX_TARGET_LEN`].
    #[error("target {0:?} is longer than {MAX_TARGET_LEN} bytes")]
    TooLong(String),
    /// The string has a character that directives use as syntax, or whitespace.
    #[error("target {target:?} contains {ch:?}, which is not allowed in a target")]
    BadChar {
        /// The offending target.
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
            let mut cut = MAX_TARGET_LEN.min(s.len());
            while !s.is_char_boundary(cut) {
                cut -= 1;
            }
            return Err(TargetError::TooLong(format!("{}...", &s[..cut])));
        }
        if let Some(ch) = s.chars().find(|c| {
            c.is_whitespace()
                || c.is_control()
                || matches!(c, ',' | '=' | '[' | ']' | '{' | '}' | '"' | '@' | '(' | ')')
        }) {
            return Err(TargetError::BadChar {
                target: s.to_owned(),
                ch,
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
        for bad in ["", "a b", "a=b", "a,b", "a[b]", "a{b}", "a\n", "@a"] {
            assert!(Target::new(bad).is_err(), "{bad:?}");
        }
        assert!(matches!(
            Target::new(&"x".repeat(300)),
            Err(TargetError::TooLong(_))
        ));
        assert!(Target::new("héllo::wörld").is_ok());
    }
}
