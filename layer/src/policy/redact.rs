//! Which field values are never written: names redacted wherever they appear, and
//! whether values shaped like secrets are redacted too.
//!
//! A field is redacted when its name, compared without case and with `-` read as `_`,
//! equals a redacted name or ends with one after a `.` or `_`: with `token` redacted,
//! `token`, `Token`, `user_token`, `session.token` and `x-token` are redacted, `tokens`
//! and `tokenizer` are not. Its value is written as [`REDACTED`]; the key stays.
//!
//! [`BUILTIN_REDACTED_NAMES`] are redacted unless the service's own baseline removes
//! them (`@redact=-NAME` in `LOGPOLICY`, [`Builder::unredact`](crate::Builder::unredact));
//! every layer may add names (`@redact=NAME`, `redact` in a pushed policy), and a pushed
//! layer can never remove one, so raising verbosity never weakens redaction.

use std::fmt;

/// What a redacted value is written as.
pub const REDACTED: &str = "[redacted]";

/// The names redacted by default (see the [module](self) for how names match).
///
/// Passwords and secrets, tokens and keys of every common spelling, HTTP credentials
/// (`authorization`, `proxy_authorization`, `cookie`, `set_cookie`), session ids, card
/// data (`card_number`, `cvv`, `cvc`, `pan`) and connection strings that carry a
/// password (`dsn`, `connection_string`, `database_url`).
pub const BUILTIN_REDACTED_NAMES: &[&str] = &[
    "password",
    "passwd",
    "pwd",
    "passphrase",
    "secret",
    "client_secret",
    "token",
    "access_token",
    "refresh_token",
    "id_token",
    "auth_token",
    "authorization",
    "proxy_authorization",
    "cookie",
    "set_cookie",
    "session_id",
    "sessionid",
    "api_key",
    "apikey",
    "x_api_key",
    "private_key",
    "privatekey",
    "signing_key",
    "credentials",
    "credential",
    "card_number",
    "cvv",
    "cvc",
    "pan",
    "dsn",
    "connection_string",
    "database_url",
];

/// The most names one layer may add or remove.
pub const MAX_REDACT_NAMES: usize = 64;

/// The longest field name a redaction list may hold, in bytes.
pub const MAX_FIELD_NAME_LEN: usize = 128;

/// A field name in a redaction list: 1 to [`MAX_FIELD_NAME_LEN`] ASCII letters, digits,
/// `_`, `-` and `.`, kept in its matching form (lower case, `-` as `_`).
///
/// # Examples
///
/// ```
/// use logpolicy::policy::FieldName;
/// assert_eq!(FieldName::new("X-Card-Token").unwrap().as_str(), "x_card_token");
/// assert_eq!(FieldName::new("card token").unwrap_err().to_string(),
///     r#"field name "card token" contains ' ': a name is ASCII letters, digits, '_', '-' and '.'"#);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FieldName(Box<str>);

/// A redaction entry that is not a plain field name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldNameError {
    /// An empty name.
    #[error("empty field name")]
    Empty,
    /// Longer than [`MAX_FIELD_NAME_LEN`].
    #[error("field name {0:?}... is longer than {MAX_FIELD_NAME_LEN} bytes")]
    TooLong(String),
    /// A character a field name does not have.
    #[error(
        "field name {name:?} contains {ch:?}: a name is ASCII letters, digits, '_', '-' and '.'"
    )]
    InvalidChar {
        /// The name as given.
        name: String,
        /// The first character not allowed.
        ch: char,
    },
}

impl FieldName {
    /// Validates `name` and keeps its matching form.
    pub fn new(name: &str) -> Result<Self, FieldNameError> {
        if name.is_empty() {
            return Err(FieldNameError::Empty);
        }
        if name.len() > MAX_FIELD_NAME_LEN {
            let cut = (0..=40)
                .rev()
                .find(|i| name.is_char_boundary(*i))
                .unwrap_or(0);
            return Err(FieldNameError::TooLong(name[..cut].to_owned()));
        }
        if let Some(ch) = name
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
        {
            return Err(FieldNameError::InvalidChar {
                name: name.to_owned(),
                ch,
            });
        }
        Ok(FieldName(normalize(name).into()))
    }

    /// The matching form: lower case, `-` as `_`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for FieldName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A name's byte in matching form: lower case, `-` as `_`.
fn normalize_byte(b: u8) -> u8 {
    match b {
        b'-' => b'_',
        b => b.to_ascii_lowercase(),
    }
}

/// `name` (ASCII, checked) in matching form.
fn normalize(name: &str) -> String {
    name.bytes()
        .map(|b| char::from(normalize_byte(b)))
        .collect()
}

/// Whether the field `name` is redacted by the entry `entry` (in matching form).
fn name_matches(name: &[u8], entry: &[u8]) -> bool {
    if name.len() < entry.len() {
        return false;
    }
    let at = name.len() - entry.len();
    if at > 0 && !matches!(name[at - 1], b'.' | b'_' | b'-') {
        return false;
    }
    name[at..]
        .iter()
        .zip(entry)
        .all(|(n, e)| normalize_byte(*n) == *e)
}

/// The names redacted and whether value shapes are: what one effective policy redacts.
///
/// # Examples
///
/// ```
/// use logpolicy::policy::{FieldName, Redaction};
/// let r = Redaction::builtin();
/// assert!(r.redacts("password") && r.redacts("db.password") && r.redacts("User-Token"));
/// assert!(!r.redacts("tokens") && !r.redacts("user_id"));
/// let r = r.with([FieldName::new("card_token").unwrap()])
///     .without(&[FieldName::new("cookie").unwrap()]);
/// assert!(r.redacts("card_token") && !r.redacts("cookie"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redaction {
    names: Vec<Box<str>>,
    values: bool,
}

impl Default for Redaction {
    fn default() -> Self {
        Redaction::builtin()
    }
}

impl Redaction {
    /// The built-in names, value shapes off.
    pub fn builtin() -> Self {
        Redaction {
            names: BUILTIN_REDACTED_NAMES
                .iter()
                .map(|n| Box::from(*n))
                .collect(),
            values: false,
        }
    }

    /// Nothing redacted: for an output that must write every value as given (a test, a
    /// local tool); see [`FormatLayer::redaction`](crate::FormatLayer::redaction).
    pub fn none() -> Self {
        Redaction {
            names: Vec::new(),
            values: false,
        }
    }

    /// Whether nothing is redacted.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty() && !self.values
    }

    /// These names too.
    #[must_use]
    pub fn with(mut self, names: impl IntoIterator<Item = FieldName>) -> Self {
        for n in names {
            if !self.names.iter().any(|x| **x == *n.as_str()) {
                self.names.push(n.0);
            }
        }
        self
    }

    /// Not these names.
    #[must_use]
    pub fn without<'n>(mut self, names: impl IntoIterator<Item = &'n FieldName>) -> Self {
        for n in names {
            self.names.retain(|x| **x != *n.as_str());
        }
        self
    }

    /// Value shapes (bearer tokens, JWTs, private keys) redacted too, or not.
    #[must_use]
    pub fn with_values(mut self, on: bool) -> Self {
        self.values = on;
        self
    }

    /// Whether a field called `name` is redacted.
    pub fn redacts(&self, name: &str) -> bool {
        self.names
            .iter()
            .any(|e| name_matches(name.as_bytes(), e.as_bytes()))
    }

    /// Whether values shaped like secrets are redacted wherever they appear.
    pub fn redacts_values(&self) -> bool {
        self.values
    }

    /// The redacted names, in matching form.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.names.iter().map(|n| &**n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_whole_or_as_a_suffix_after_a_separator() {
        let r = Redaction::builtin();
        for yes in [
            "password",
            "PASSWORD",
            "db.password",
            "db_password",
            "user_token",
            "Authorization",
            "proxy-authorization",
            "set-cookie",
            "x.api_key",
            "a.b.c.secret",
        ] {
            assert!(r.redacts(yes), "{yes}");
        }
        for no in [
            "passwords",
            "tokenizer",
            "mytoken",
            "cookies",
            "",
            "id",
            "span",
        ] {
            assert!(!r.redacts(no), "{no}");
        }
    }

    #[test]
    fn field_names_are_checked_and_normalised() {
        assert_eq!(FieldName::new("A-b.C").unwrap().as_str(), "a_b.c");
        assert_eq!(FieldName::new(""), Err(FieldNameError::Empty));
        assert!(matches!(
            FieldName::new("a=b"),
            Err(FieldNameError::InvalidChar { ch: '=', .. })
        ));
        assert!(matches!(
            FieldName::new(&"é".repeat(100)),
            Err(FieldNameError::TooLong(_))
        ));
    }
}
