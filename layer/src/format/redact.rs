//! Redaction while formatting: a field whose name is redacted gets the marker instead of
//! its value (decided per callsite, see [`FieldMask`]), and with value redaction on,
//! secrets found inside any string (the message included) are cut out of it.
//!
//! Value shapes:
//! - `Bearer <token>` and `Basic <credentials>` (any case): the token after the scheme;
//! - a JWT: three base64url parts joined by `.`, the first starting `eyJ` (`{"` encoded);
//! - a PEM private key: from `-----BEGIN ... PRIVATE KEY-----` to its `-----END ...-----`
//!   line (or the end of the string).

use std::fmt::{self, Write as _};

use tracing_core::field::{Field, Visit};

use crate::enforce::{FieldMask, RedactionSet};
use crate::policy::redact::REDACTED;

/// Counts of what one line redacted.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Counts {
    pub(crate) by_name: u64,
    pub(crate) by_value: u64,
}

/// A visitor that redacts, then lets `inner` write.
pub(crate) struct Redacting<'r, V> {
    pub(crate) inner: V,
    pub(crate) mask: FieldMask,
    /// For a callsite matched by name (more than 32 fields).
    pub(crate) set: Option<&'r RedactionSet>,
    pub(crate) values: bool,
    pub(crate) counts: Counts,
}

impl<V: Visit> Redacting<'_, V> {
    /// When only the callsite's mask decides (no name matching, no value redaction: the
    /// common case), the marker for a field it hides, else `write`, each a tail call
    /// with nothing of this visitor's own around it; otherwise `checked`.
    #[inline(always)]
    fn by_mask_or(
        &mut self,
        field: &Field,
        checked: impl FnOnce(&mut Self),
        write: impl FnOnce(&mut V),
    ) {
        if self.mask.by_name || self.values {
            return checked(self);
        }
        if self.mask.hides(field.index()) {
            self.write_marker(field);
        } else {
            write(&mut self.inner);
        }
    }

    /// The marker in place of a hidden field's value, counted.
    #[inline(always)]
    fn write_marker(&mut self, field: &Field) {
        self.counts.by_name += 1;
        self.inner.record_str(field, REDACTED);
    }

    /// `record_str` with name matching or value redaction on.
    #[inline(never)]
    fn record_str_checked(&mut self, field: &Field, value: &str) {
        if !self.hidden(field) {
            self.string(field, value);
        }
    }

    /// `record_debug` with name matching or value redaction on.
    #[inline(never)]
    fn record_debug_checked(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if self.hidden(field) {
            return;
        }
        if !self.rendered(field, |s| {
            let _ = write!(s, "{value:?}");
        }) {
            self.inner.record_debug(field, value);
        }
    }

    #[inline]
    fn hidden(&mut self, field: &Field) -> bool {
        let hidden = if self.mask.by_name {
            self.set.is_some_and(|s| s.redaction.redacts(field.name()))
        } else {
            self.mask.hides(field.index())
        };
        if hidden {
            self.write_marker(field);
        }
        hidden
    }

    /// A string value, its secrets cut out when value redaction is on.
    fn string(&mut self, field: &Field, value: &str) {
        if self.values {
            if let Some((cut, n)) = cut_shapes(value) {
                self.counts.by_value += n;
                self.inner.record_str(field, &cut);
                return;
            }
        }
        self.inner.record_str(field, value);
    }

    /// A value written through `Display`/`Debug`: rendered first when value redaction
    /// is on, so that its text can be searched.
    fn rendered(&mut self, field: &Field, render: impl FnOnce(&mut String)) -> bool {
        if !self.values {
            return false;
        }
        let mut s = String::new();
        render(&mut s);
        let is_message = field.name() == "message";
        match cut_shapes(&s) {
            Some((cut, n)) => {
                self.counts.by_value += n;
                self.inner.record_str(field, &cut);
            }
            // A message reads the same through `record_str`; a `Debug` value of another
            // field is written unquoted by the text format, so give it back as `Debug`.
            None if is_message => self.inner.record_str(field, &s),
            None => self.inner.record_debug(field, &format_args!("{s}")),
        }
        true
    }
}

impl<V: Visit> Visit for Redacting<'_, V> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.by_mask_or(
            field,
            |r| r.record_str_checked(field, value),
            |v| v.record_str(field, value),
        );
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.by_mask_or(
            field,
            |r| r.record_debug_checked(field, value),
            |v| v.record_debug(field, value),
        );
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        if self.hidden(field) {
            return;
        }
        if !self.rendered(field, |s| {
            let _ = write!(s, "{value}");
            let mut source = value.source();
            while let Some(e) = source {
                let _ = write!(s, ": {e}");
                source = e.source();
            }
        }) {
            self.inner.record_error(field, value);
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if !self.hidden(field) {
            self.inner.record_i64(field, value);
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        if !self.hidden(field) {
            self.inner.record_u64(field, value);
        }
    }

    fn record_i128(&mut self, field: &Field, value: i128) {
        if !self.hidden(field) {
            self.inner.record_i128(field, value);
        }
    }

    fn record_u128(&mut self, field: &Field, value: u128) {
        if !self.hidden(field) {
            self.inner.record_u128(field, value);
        }
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        if !self.hidden(field) {
            self.inner.record_f64(field, value);
        }
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        if !self.hidden(field) {
            self.inner.record_bool(field, value);
        }
    }
}

fn is_b64url(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

fn is_token68(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'+' | b'/' | b'=')
}

/// The shortest credential after `Bearer `/`Basic ` that is cut (shorter words are
/// prose: "basic auth failed").
const MIN_CREDENTIAL: usize = 8;

/// Finds the secret shapes in `s`: the ranges to cut, in order, not overlapping.
fn find_shapes(s: &str) -> Vec<(usize, usize)> {
    let b = s.as_bytes();
    let mut cuts: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        // PEM private key block.
        if c == b'-' && b[i..].starts_with(b"-----BEGIN ") {
            if let Some(end) = pem_block(s, i) {
                cuts.push((i, end));
                i = end;
                continue;
            }
        }
        // Bearer / Basic credentials.
        if (c == b'b' || c == b'B') && (i == 0 || !b[i - 1].is_ascii_alphanumeric()) {
            let scheme = if b.len() >= i + 7 && b[i..i + 7].eq_ignore_ascii_case(b"bearer ") {
                7
            } else if b.len() >= i + 6 && b[i..i + 6].eq_ignore_ascii_case(b"basic ") {
                6
            } else {
                0
            };
            if scheme > 0 {
                let mut start = i + scheme;
                while start < b.len() && b[start] == b' ' {
                    start += 1;
                }
                let mut end = start;
                while end < b.len() && is_token68(b[end]) {
                    end += 1;
                }
                if end - start >= MIN_CREDENTIAL {
                    cuts.push((start, end));
                    i = end;
                    continue;
                }
            }
        }
        // JWT: eyJ... . ... . ...
        if c == b'e' && b[i..].starts_with(b"eyJ") && (i == 0 || !is_b64url(b[i - 1])) {
            if let Some(end) = jwt(b, i) {
                cuts.push((i, end));
                i = end;
                continue;
            }
        }
        i += 1;
    }
    cuts
}

/// The end of a JWT starting at `i`, if one does.
fn jwt(b: &[u8], i: usize) -> Option<usize> {
    let mut at = i;
    for part in 0..3 {
        let start = at;
        while at < b.len() && is_b64url(b[at]) {
            at += 1;
        }
        // Header and payload are JSON (at least `{"a":1}`); a signature may be empty
        // (an unsecured JWT).
        if part < 2 && at - start < 10 {
            return None;
        }
        if part < 2 {
            if at >= b.len() || b[at] != b'.' {
                return None;
            }
            at += 1;
        }
    }
    Some(at)
}

/// The end of a PEM private-key block starting at `i` (its END line, or the string's
/// end when it has none), if the block is a private key.
fn pem_block(s: &str, i: usize) -> Option<usize> {
    let rest = &s[i + "-----BEGIN ".len()..];
    let label_end = rest.find("-----")?;
    let label = &rest[..label_end];
    if !label.ends_with("PRIVATE KEY") || label.len() > 40 {
        return None;
    }
    let body = i + "-----BEGIN ".len() + label_end + 5;
    let end = match s[body..].find("-----END ") {
        Some(e) => {
            let after = body + e + "-----END ".len();
            match s[after..].find("-----") {
                Some(close) => after + close + 5,
                None => s.len(),
            }
        }
        None => s.len(),
    };
    Some(end)
}

/// `s` with its secret shapes replaced by the marker, and how many, or `None` when it
/// has none.
pub(crate) fn cut_shapes(s: &str) -> Option<(String, u64)> {
    // Cheap refusal: every shape has one of these bytes.
    if !s
        .as_bytes()
        .iter()
        .any(|b| matches!(b, b'-' | b'b' | b'B' | b'e'))
    {
        return None;
    }
    let cuts = find_shapes(s);
    if cuts.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(s.len());
    let mut last = 0;
    for (start, end) in &cuts {
        out.push_str(&s[last..*start]);
        out.push_str(REDACTED);
        last = *end;
    }
    out.push_str(&s[last..]);
    Some((out, cuts.len() as u64))
}

#[cfg(test)]
mod tests {
    use super::cut_shapes;

    const JWT: &str = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";

    #[test]
    fn shapes_are_cut_and_the_rest_stays() {
        let cut = cut_shapes;
        assert_eq!(
            cut("header Authorization: Bearer abc.DEF-123_xyz~+/= sent"),
            Some(("header Authorization: Bearer [redacted] sent".into(), 1))
        );
        assert_eq!(
            cut(&format!("token={JWT}; next")),
            Some(("token=[redacted]; next".into(), 1))
        );
        assert_eq!(
            cut("key -----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY----- done"),
            Some(("key [redacted] done".into(), 1))
        );
        assert_eq!(
            cut("-----BEGIN PRIVATE KEY-----\nMIIEow (truncated"),
            Some(("[redacted]".into(), 1))
        );
        assert_eq!(
            cut(&format!("basic dXNlcjpwYXNzd29yZA== and {JWT}")),
            Some(("basic [redacted] and [redacted]".into(), 2))
        );
        for clean in [
            "basic auth failed",
            "the bearer of bad news",
            "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
            "eyJ alone",
            "some.dotted.name",
            "ábearer é",
            "",
        ] {
            assert_eq!(cut(clean), None, "{clean}");
        }
    }
}
