//! Field visitors that write JSON or text straight into a byte buffer.

use std::fmt::{self, Write as _};

use tracing_core::field::{Field, Visit};

use super::callsite::{write_key, JsonCallsite};
use super::escape::{write_escaped, Escaping, Raw};

/// Writes `,"key":value` for each field.
pub(crate) struct JsonFields<'a> {
    pub(crate) buf: &'a mut Vec<u8>,
    /// The keys rendered once for the callsite, if it has them.
    pub(crate) callsite: Option<&'static JsonCallsite>,
}

impl JsonFields<'_> {
    #[inline]
    fn key(&mut self, field: &Field) {
        if !self.callsite.is_some_and(|c| c.put_key(self.buf, field)) {
            write_key(self.buf, field.name());
        }
    }
}

impl Visit for JsonFields<'_> {
    #[inline]
    fn record_str(&mut self, field: &Field, value: &str) {
        self.key(field);
        self.buf.push(b'"');
        write_escaped(self.buf, value);
        self.buf.push(b'"');
    }

    #[inline]
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.key(field);
        self.buf.push(b'"');
        let _ = write!(Escaping(self.buf), "{value:?}");
        self.buf.push(b'"');
    }

    #[inline]
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.key(field);
        self.buf
            .extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
    }

    #[inline]
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.key(field);
        self.buf
            .extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
    }

    fn record_i128(&mut self, field: &Field, value: i128) {
        self.key(field);
        self.buf
            .extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
    }

    fn record_u128(&mut self, field: &Field, value: u128) {
        self.key(field);
        self.buf
            .extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
    }

    #[inline]
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.key(field);
        self.buf
            .extend_from_slice(if value { b"true" } else { b"false" });
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.key(field);
        if value.is_finite() {
            self.buf
                .extend_from_slice(ryu::Buffer::new().format_finite(value).as_bytes());
        } else {
            // JSON has no NaN or infinities: write them as strings.
            let _ = write!(Raw(self.buf), "\"{value}\"");
        }
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.key(field);
        self.buf.push(b'"');
        let _ = write!(Escaping(self.buf), "{value}");
        let mut source = value.source();
        while let Some(s) = source {
            let _ = write!(Escaping(self.buf), ": {s}");
            source = s.source();
        }
        self.buf.push(b'"');
    }
}

/// Writes ` key=value` for each field, and the message as ` message`; one event stays
/// one line (control characters are escaped).
pub(crate) struct TextFields<'a> {
    pub(crate) buf: &'a mut Vec<u8>,
}

impl TextFields<'_> {
    #[inline]
    fn key(&mut self, field: &Field) -> bool {
        self.buf.push(b' ');
        if field.name() == "message" {
            return true;
        }
        write_controls_escaped(self.buf, field.name());
        self.buf.push(b'=');
        false
    }
}

/// Escapes only control characters (`\n`, `\u{1b}`, ...): enough to keep one line one
/// line and terminals safe, while quotes stay readable.
fn write_controls_escaped(buf: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if b >= 0x20 && b != 0x7f {
            continue;
        }
        buf.extend_from_slice(&bytes[start..i]);
        match b {
            b'\n' => buf.extend_from_slice(b"\\n"),
            b'\r' => buf.extend_from_slice(b"\\r"),
            b'\t' => buf.extend_from_slice(b"\\t"),
            _ => {
                let _ = write!(Raw(buf), "\\u{{{b:x}}}");
            }
        }
        start = i + 1;
    }
    buf.extend_from_slice(&bytes[start..]);
}

struct ControlsEscaped<'a>(&'a mut Vec<u8>);

impl fmt::Write for ControlsEscaped<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        write_controls_escaped(self.0, s);
        Ok(())
    }
}

impl Visit for TextFields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if self.key(field) {
            write_controls_escaped(self.buf, value);
        } else {
            self.buf.push(b'"');
            write_escaped(self.buf, value);
            self.buf.push(b'"');
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.key(field);
        let _ = write!(ControlsEscaped(self.buf), "{value:?}");
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.key(field);
        self.buf
            .extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.key(field);
        self.buf
            .extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.key(field);
        self.buf
            .extend_from_slice(if value { b"true" } else { b"false" });
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.key(field);
        let _ = write!(ControlsEscaped(self.buf), "{value}");
    }
}
