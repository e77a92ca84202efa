//! Field visitors that write JSON, logfmt or text straight into a byte buffer.

use std::fmt::{self, Write as _};

use tracing_core::field::{Field, Visit};

use super::callsite::{CachedSite, KEY_INLINE};
use super::escape::{has_control, short_bare, short_json, write_escaped, Escaping, Raw};
use super::room::Room;
use super::schema::{write_key, write_logfmt_str, Keys, LOGFMT_BARE};
use crate::clock::DIGIT_PAIRS;

/// Writes `,"key":value` for each field.
pub(crate) struct JsonFields<'a> {
    pub(crate) buf: &'a mut Vec<u8>,
    /// The keys rendered once for the callsite, if it has them.
    pub(crate) callsite: Option<&'static CachedSite>,
    /// How keys are named (what `callsite` was rendered with).
    pub(crate) keys: Keys,
}

impl JsonFields<'_> {
    #[inline]
    fn key(&mut self, field: &Field) {
        put_key(self.buf, self.callsite, self.keys, field);
    }

    /// [`JsonFields::key`] and the `"` that opens a string value.
    #[inline(always)]
    fn key_quote(&mut self, field: &Field) {
        if !self
            .callsite
            .is_some_and(|c| c.put_key_quote(self.buf, field))
        {
            write_key(self.buf, self.keys, field.name());
            self.buf.push(b'"');
        }
    }
}

/// Appends `field`'s key: the callsite's rendered one, else rendered now.
#[inline]
fn put_key(buf: &mut Vec<u8>, callsite: Option<&'static CachedSite>, keys: Keys, field: &Field) {
    if !callsite.is_some_and(|c| c.put_key(buf, field)) {
        write_key(buf, keys, field.name());
    }
}

/// Where a field goes: the line's buffer, the callsite's rendered keys (if any), the
/// format's keys and the field. Its methods append the field's key and a value, the
/// common values the short way: a rendered key and a value that fits in a few bytes are
/// one [`Room`] and fixed-size stores, with no call that comes back, so the callers
/// save no registers for them; anything else is the long way ([`Place::long`]), as a
/// tail call.
struct Place<'b, 'f> {
    buf: &'b mut Vec<u8>,
    callsite: Option<&'static CachedSite>,
    keys: Keys,
    field: &'f Field,
}

impl<'b, 'f> Place<'b, 'f> {
    #[inline(always)]
    fn new(
        buf: &'b mut Vec<u8>,
        callsite: Option<&'static CachedSite>,
        keys: Keys,
        field: &'f Field,
    ) -> Self {
        Place {
            buf,
            callsite,
            keys,
            field,
        }
    }

    /// The field's rendered key, and `quote` bytes (0 or 1) kept after it.
    #[inline(always)]
    fn rendered_key(&self, quote: usize) -> Option<(&'static [u8; KEY_INLINE], usize)> {
        self.callsite
            .and_then(|c| c.rendered_key(self.field, quote))
    }

    /// The key, then `value` as `write` writes it.
    #[inline(never)]
    fn long<T>(self, value: T, write: fn(&mut Vec<u8>, T)) {
        put_key(self.buf, self.callsite, self.keys, self.field);
        write(self.buf, value);
    }

    /// A number: below 10,000 the short way.
    #[inline(always)]
    fn u64(self, value: u64) {
        if value < 10_000 {
            if let Some((key, len)) = self.rendered_key(0) {
                if let Some(mut room) = Room::take(self.buf, KEY_INLINE + 4) {
                    room.put(*key, len);
                    let (digits, n) = small_digits(value);
                    return room.put(digits, n);
                }
            }
        }
        self.long(value, write_u64);
    }

    /// A bool, the short way.
    #[inline(always)]
    fn bool(self, value: bool) {
        if let Some((key, len)) = self.rendered_key(0) {
            if let Some(mut room) = Room::take(self.buf, KEY_INLINE + 8) {
                room.put(*key, len);
                let word = if value {
                    *b"true\0\0\0\0"
                } else {
                    *b"false\0\0\0"
                };
                return room.put(word, 5 - usize::from(value));
            }
        }
        self.long(value, write_bool);
    }

    /// A string: quoted and escaped as JSON (the JSON formats' values, and the text
    /// format's but the message's), or as logfmt writes it. Up to 16 bytes with nothing
    /// to escape (for logfmt, 1 to 16 bytes, all bare) the short way; the key is looked
    /// up before the value is looked at (4 instructions less a value than after).
    #[inline(always)]
    fn str(self, value: &str, logfmt: bool) {
        let quote = usize::from(!logfmt);
        if let Some((key, len)) = self.rendered_key(quote) {
            let short = if logfmt {
                short_bare(value)
            } else {
                short_json(value)
            };
            if let Some(short) = short {
                if let Some(mut room) = Room::take(self.buf, KEY_INLINE + 16 + quote) {
                    room.put(*key, len);
                    room.put_short(&short);
                    if !logfmt {
                        room.put([b'"'], 1);
                    }
                    return;
                }
            }
        }
        let write = if logfmt {
            write_logfmt_str
        } else {
            write_quoted
        };
        self.long(value, write);
    }
}

/// `value` quoted and escaped as JSON.
fn write_quoted(buf: &mut Vec<u8>, value: &str) {
    buf.push(b'"');
    write_escaped(buf, value);
    buf.push(b'"');
}

/// `json-otel`'s fields: the message as `Body`, every other field inside `Attributes`.
///
/// Each attribute is written exactly as JSON writes it, with `Attributes` already open
/// (`,"Attributes":`, whose `{` replaces the first key's comma when the line is
/// finished, see [`OtelAttributes::close`]): tracing's macros record the message first,
/// and `Attributes` opens right after it; for an event whose message comes later (or
/// that has none) it is open before the fields, and a message recorded after an
/// attribute is moved before it. The span, written after the fields, goes inside
/// `Attributes` too.
pub(crate) struct OtelFields<'a, 's> {
    pub(crate) inner: JsonFields<'a>,
    /// The index of the event's field called `message` (`usize::MAX`: none).
    pub(crate) message: usize,
    pub(crate) attributes: &'s mut OtelAttributes,
}

/// Where a `json-otel` line's `Attributes` object stands.
#[derive(Default)]
pub(crate) struct OtelAttributes {
    /// Where the first attribute's comma goes (it becomes the object's `{`); 0: not
    /// open.
    brace_at: usize,
}

/// `,"Attributes":`, which opens the object (its `{` replaces the first key's comma).
const ATTRIBUTES: &[u8] = b",\"Attributes\":";

impl OtelAttributes {
    /// Opens `Attributes` at the end of `buf`.
    #[inline]
    pub(crate) fn open(&mut self, buf: &mut Vec<u8>) {
        buf.extend_from_slice(ATTRIBUTES);
        self.brace_at = buf.len();
    }

    /// Appends the span's opening to `Attributes` (`,"span":{"name":"`, given as
    /// `span_open`), opening `Attributes` first if needed; the caller writes the rest
    /// of the span.
    pub(crate) fn put_span_open(&mut self, buf: &mut Vec<u8>, span_open: &[u8]) {
        if self.brace_at == 0 {
            self.open(buf);
        }
        buf.extend_from_slice(span_open);
    }

    /// Ends `Attributes` if it is open: the first attribute's comma becomes `{`, then
    /// `}`; left empty, it is taken out.
    #[inline]
    pub(crate) fn close(&self, buf: &mut Vec<u8>) {
        if self.brace_at == 0 {
            return;
        }
        if buf.len() > self.brace_at {
            buf[self.brace_at] = b'{';
            buf.push(b'}');
        } else {
            buf.truncate(self.brace_at - ATTRIBUTES.len());
        }
    }

    /// Ends `Attributes` as [`OtelAttributes::close`] does, then the line (`}` and the
    /// newline): one copy.
    #[inline]
    pub(crate) fn finish(&self, buf: &mut Vec<u8>) {
        if self.brace_at != 0 && buf.len() > self.brace_at {
            buf[self.brace_at] = b'{';
            return buf.extend_from_slice(b"}}\n");
        }
        self.close(buf);
        buf.extend_from_slice(b"}\n");
    }
}

impl OtelFields<'_, '_> {
    /// Writes the message as `Body` with `write`: before `Attributes`, which it opens
    /// when it comes first, else (attributes came before it: an `event!` with
    /// `message = ...` after other fields) moved there.
    #[cold]
    #[inline(never)]
    fn message(&mut self, write: impl FnOnce(&mut JsonFields<'_>)) {
        let brace_at = self.attributes.brace_at;
        if brace_at == 0 {
            write(&mut self.inner);
            return self.attributes.open(self.inner.buf);
        }
        let start = brace_at - ATTRIBUTES.len();
        let at = self.inner.buf.len();
        write(&mut self.inner);
        let len = self.inner.buf.len() - at;
        self.inner.buf[start..].rotate_right(len);
        self.attributes.brace_at += len;
    }
}

/// The `record_*` of [`OtelFields`]: an attribute is written as JSON writes it (the
/// body inlined, one comparison more), the message by [`OtelFields::message`]. For the
/// type the macros' messages have (`inline`: `format_args!`), the message that comes
/// first, as the macros record it, is written in place too; the others keep a tail call
/// (nothing saved across it). A string value is one of the others: with its message
/// branch inlined too, each string attribute saved and restored six registers more.
macro_rules! otel_record {
    (inline: $($name:ident($ty:ty) => $put:ident;)*) => {$(
        fn $name(&mut self, field: &Field, value: $ty) {
            if field.index() != self.message {
                return self.inner.$put(field, value);
            }
            if self.attributes.brace_at == 0 {
                self.inner.$put(field, value);
                return self.attributes.open(self.inner.buf);
            }
            self.message(|inner| inner.$put(field, value));
        }
    )*};
    (call: $($name:ident($ty:ty) => $put:ident;)*) => {$(
        fn $name(&mut self, field: &Field, value: $ty) {
            if field.index() != self.message {
                return self.inner.$put(field, value);
            }
            self.message(|inner| inner.$put(field, value));
        }
    )*};
}

impl Visit for OtelFields<'_, '_> {
    otel_record! { inline:
        record_debug(&dyn fmt::Debug) => put_debug;
    }
    otel_record! { call:
        record_str(&str) => put_str;
        record_i64(i64) => put_i64;
        record_u64(u64) => put_u64;
        record_i128(i128) => record_i128;
        record_u128(u128) => record_u128;
        record_f64(f64) => record_f64;
        record_bool(bool) => put_bool;
        record_error(&(dyn std::error::Error + 'static)) => record_error;
    }
}

/// Writes ` key=value` for each field (the message as ` msg=`): strings bare when
/// nothing in them needs quoting, else quoted with JSON's escapes; numbers and booleans
/// bare.
pub(crate) struct LogfmtFields<'a> {
    pub(crate) buf: &'a mut Vec<u8>,
    pub(crate) callsite: Option<&'static CachedSite>,
    pub(crate) keys: Keys,
}

impl LogfmtFields<'_> {
    /// Writes `render`'s output as a value: quoted and escaped, the quotes removed
    /// afterwards when nothing in it needed them (no copy of the text is made).
    fn rendered(&mut self, render: impl FnOnce(&mut Escaping<'_>)) {
        let at = self.buf.len();
        self.buf.push(b'"');
        render(&mut Escaping(self.buf));
        let text = &self.buf[at + 1..];
        if !text.is_empty() && text.iter().all(|&b| LOGFMT_BARE[b as usize]) {
            self.buf.remove(at);
        } else {
            self.buf.push(b'"');
        }
    }
}

impl Visit for LogfmtFields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        Place::new(self.buf, self.callsite, self.keys, field).str(value, true);
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        put_key(self.buf, self.callsite, self.keys, field);
        self.rendered(|w| {
            let _ = write!(w, "{value:?}");
        });
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        put_key(self.buf, self.callsite, self.keys, field);
        write_i64(self.buf, value);
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        Place::new(self.buf, self.callsite, self.keys, field).u64(value);
    }

    fn record_i128(&mut self, field: &Field, value: i128) {
        put_key(self.buf, self.callsite, self.keys, field);
        self.buf
            .extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
    }

    fn record_u128(&mut self, field: &Field, value: u128) {
        put_key(self.buf, self.callsite, self.keys, field);
        self.buf
            .extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        Place::new(self.buf, self.callsite, self.keys, field).bool(value);
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        put_key(self.buf, self.callsite, self.keys, field);
        if value.is_finite() {
            self.buf
                .extend_from_slice(ryu::Buffer::new().format_finite(value).as_bytes());
        } else {
            let _ = write!(Raw(self.buf), "{value}");
        }
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        put_key(self.buf, self.callsite, self.keys, field);
        self.rendered(|w| write_error(w, value));
    }
}

/// Writes `value` and its sources, `: ` between them.
fn write_error(w: &mut Escaping<'_>, value: &(dyn std::error::Error + 'static)) {
    let _ = write!(w, "{value}");
    let mut source = value.source();
    while let Some(s) = source {
        let _ = write!(w, ": {s}");
        source = s.source();
    }
}

impl JsonFields<'_> {
    // The bodies of the common `record_*`, inlined into `json-otel`'s visitor too (a
    // call less per field there).

    #[inline(always)]
    fn put_str(&mut self, field: &Field, value: &str) {
        Place::new(self.buf, self.callsite, self.keys, field).str(value, false);
    }

    #[inline(always)]
    fn put_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.key_quote(field);
        let _ = write!(Escaping(self.buf), "{value:?}");
        self.buf.push(b'"');
    }

    #[inline(always)]
    fn put_i64(&mut self, field: &Field, value: i64) {
        self.key(field);
        write_i64(self.buf, value);
    }

    #[inline(always)]
    fn put_u64(&mut self, field: &Field, value: u64) {
        Place::new(self.buf, self.callsite, self.keys, field).u64(value);
    }

    #[inline(always)]
    fn put_bool(&mut self, field: &Field, value: bool) {
        Place::new(self.buf, self.callsite, self.keys, field).bool(value);
    }
}

impl Visit for JsonFields<'_> {
    #[inline]
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put_str(field, value);
    }

    #[inline]
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put_debug(field, value);
    }

    #[inline]
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put_i64(field, value);
    }

    #[inline]
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put_u64(field, value);
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
        self.put_bool(field, value);
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
        write_error(&mut Escaping(self.buf), value);
        self.buf.push(b'"');
    }
}

/// Where one recorded span field is in its pre-rendered bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Entry {
    /// The field's index in its span's field set.
    pub(crate) index: u16,
    pub(crate) start: u32,
    pub(crate) end: u32,
    /// Written as the marker already.
    pub(crate) redacted: bool,
}

/// A visitor whose output is a byte buffer.
pub(crate) trait Buffered: Visit {
    fn len(&self) -> usize;
}

impl Buffered for JsonFields<'_> {
    fn len(&self) -> usize {
        self.buf.len()
    }
}

impl Buffered for LogfmtFields<'_> {
    fn len(&self) -> usize {
        self.buf.len()
    }
}

impl Buffered for TextFields<'_> {
    fn len(&self) -> usize {
        self.buf.len()
    }
}

/// Records where each field went (for span fields, which may need redacting again).
pub(crate) struct Tracked<'e, V> {
    pub(crate) inner: V,
    pub(crate) entries: &'e mut Vec<Entry>,
}

impl<V: Buffered> Tracked<'_, V> {
    fn track(&mut self, field: &Field, redacted: bool, write: impl FnOnce(&mut V)) {
        let start = self.inner.len();
        write(&mut self.inner);
        self.entries.push(Entry {
            index: u16::try_from(field.index()).unwrap_or(u16::MAX),
            start: start as u32,
            end: self.inner.len() as u32,
            redacted,
        });
    }
}

impl<V: Buffered> Visit for Tracked<'_, V> {
    fn record_str(&mut self, field: &Field, value: &str) {
        let marker = value == crate::policy::redact::REDACTED;
        self.track(field, marker, |v| v.record_str(field, value));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.track(field, false, |v| v.record_debug(field, value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.track(field, false, |v| v.record_i64(field, value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.track(field, false, |v| v.record_u64(field, value));
    }
    fn record_i128(&mut self, field: &Field, value: i128) {
        self.track(field, false, |v| v.record_i128(field, value));
    }
    fn record_u128(&mut self, field: &Field, value: u128) {
        self.track(field, false, |v| v.record_u128(field, value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.track(field, false, |v| v.record_f64(field, value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.track(field, false, |v| v.record_bool(field, value));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.track(field, false, |v| v.record_error(field, value));
    }
}

/// The digits of `v` (below 10,000) in a 4-byte block, and how many there are: one or
/// two loads from the table of digit pairs, shifted by a byte when `v` has an odd number
/// of digits.
#[inline(always)]
fn small_digits(v: u64) -> ([u8; 4], usize) {
    if v < 100 {
        let i = v as usize * 2;
        let odd = usize::from(v < 10);
        let pair = u32::from(u16::from_le_bytes([DIGIT_PAIRS[i], DIGIT_PAIRS[i + 1]])) >> (8 * odd);
        (pair.to_le_bytes(), 2 - odd)
    } else {
        let (hi, lo) = (v as usize / 100 * 2, v as usize % 100 * 2);
        let odd = usize::from(v < 1_000);
        let quad = u32::from_le_bytes([
            DIGIT_PAIRS[hi],
            DIGIT_PAIRS[hi + 1],
            DIGIT_PAIRS[lo],
            DIGIT_PAIRS[lo + 1],
        ]) >> (8 * odd);
        (quad.to_le_bytes(), 4 - odd)
    }
}

/// Appends `v` in decimal: the digits are made two at a time from a table and stored
/// as one fixed-size block (no call to `memcpy`), the buffer then cut back to the
/// number's length. Below 10,000 (status codes, counts, small latencies) a number is
/// one or two table loads and one store of 4 bytes ([`small_digits`]).
#[inline]
pub(crate) fn write_u64(buf: &mut Vec<u8>, v: u64) {
    if v < 10_000 {
        let (digits, n) = small_digits(v);
        let at = buf.len();
        buf.extend_from_slice(&digits);
        buf.truncate(at + n);
    } else {
        write_u64_long(buf, v);
    }
}

/// [`write_u64`] from 10,000: every digit pair into a 20-byte block, stored whole.
#[inline(never)]
fn write_u64_long(buf: &mut Vec<u8>, v: u64) {
    let n = v.ilog10() as usize + 1;
    let mut digits = [0u8; 20];
    let mut end = n;
    let mut v = v;
    while v >= 100 {
        let pair = (v % 100) as usize * 2;
        v /= 100;
        end -= 2;
        digits[end] = DIGIT_PAIRS[pair];
        digits[end + 1] = DIGIT_PAIRS[pair + 1];
    }
    if v >= 10 {
        digits[0] = DIGIT_PAIRS[v as usize * 2];
        digits[1] = DIGIT_PAIRS[v as usize * 2 + 1];
    } else {
        digits[0] = b'0' + v as u8;
    }
    let at = buf.len();
    buf.extend_from_slice(&digits);
    buf.truncate(at + n);
}

/// Appends `v` in decimal, as [`write_u64`] writes its magnitude.
#[inline]
pub(crate) fn write_i64(buf: &mut Vec<u8>, v: i64) {
    if v < 0 {
        buf.push(b'-');
    }
    write_u64(buf, v.unsigned_abs());
}

/// Appends `true` or `false`: one 8-byte store, cut back to the word's length.
#[inline]
pub(crate) fn write_bool(buf: &mut Vec<u8>, v: bool) {
    let word = if v { *b"true\0\0\0\0" } else { *b"false\0\0\0" };
    let at = buf.len();
    buf.extend_from_slice(&word);
    buf.truncate(at + 5 - usize::from(v));
}

/// Writes ` key=value` for each field, and the message as ` message`; one event stays
/// one line (control characters are escaped).
pub(crate) struct TextFields<'a> {
    pub(crate) buf: &'a mut Vec<u8>,
    pub(crate) callsite: Option<&'static CachedSite>,
}

impl TextFields<'_> {
    /// Writes the key; true for the message (written bare).
    #[inline(always)]
    fn key(&mut self, field: &Field) -> bool {
        put_key(self.buf, self.callsite, Keys::Text, field);
        match self.callsite {
            Some(c) => c.is_message(field),
            None => field.name() == "message",
        }
    }
}

/// Escapes only control characters (`\n`, `\u{1b}`, ...): enough to keep one line one
/// line and terminals safe, while quotes stay readable.
pub(crate) fn write_controls_escaped(buf: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    if !has_control(bytes) {
        buf.extend_from_slice(bytes);
        return;
    }
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

impl TextFields<'_> {
    /// A string value of the message, or of a callsite with no rendered keys.
    #[inline(never)]
    fn record_str_long(&mut self, field: &Field, value: &str) {
        if self.key(field) {
            write_controls_escaped(self.buf, value);
        } else {
            write_quoted(self.buf, value);
        }
    }
}

impl Visit for TextFields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        match self.callsite {
            Some(c) if !c.is_message(field) => {
                Place::new(self.buf, self.callsite, Keys::Text, field).str(value, false);
            }
            _ => self.record_str_long(field, value),
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.key(field);
        let _ = write!(ControlsEscaped(self.buf), "{value:?}");
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.key(field);
        write_i64(self.buf, value);
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        Place::new(self.buf, self.callsite, Keys::Text, field).u64(value);
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        Place::new(self.buf, self.callsite, Keys::Text, field).bool(value);
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.key(field);
        let _ = write!(ControlsEscaped(self.buf), "{value}");
    }
}

#[cfg(test)]
mod tests {
    use super::{write_bool, write_i64, write_u64};
    use tracing_subscriber::prelude::*;

    #[test]
    fn integers_are_written_as_itoa_writes_them() {
        for v in (0u64..=1_000).chain([9_999, 10_000, u64::from(u32::MAX), u64::MAX - 1, u64::MAX])
        {
            let mut buf = b"x".to_vec();
            write_u64(&mut buf, v);
            assert_eq!(&buf[1..], itoa::Buffer::new().format(v).as_bytes(), "{v}");
        }
        // Every length, at both ends of it.
        for digits in 1..=20u32 {
            let low = 10u64.pow(digits - 1);
            let high = 10u64.checked_pow(digits).map_or(u64::MAX, |p| p - 1);
            for v in [low, low + 1, high - 1, high] {
                let mut buf = b"x".to_vec();
                write_u64(&mut buf, v);
                assert_eq!(&buf[1..], itoa::Buffer::new().format(v).as_bytes(), "{v}");
            }
        }
        for v in [
            0,
            1,
            -1,
            9,
            -9,
            10,
            -10,
            99,
            -100,
            i64::MIN,
            i64::MIN + 1,
            i64::MAX,
        ] {
            let mut buf = b"x".to_vec();
            write_i64(&mut buf, v);
            assert_eq!(&buf[1..], itoa::Buffer::new().format(v).as_bytes(), "{v}");
        }
    }

    #[test]
    fn booleans_are_cut_to_their_word() {
        for v in [true, false] {
            let mut buf = b"x".to_vec();
            write_bool(&mut buf, v);
            assert_eq!(&buf[1..], v.to_string().as_bytes());
            assert!(buf.capacity() >= buf.len());
        }
    }

    #[test]
    fn signed_and_unsigned_fields_round_trip_through_json() {
        let out = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
        let subscriber = tracing_subscriber::registry()
            .with(crate::FormatLayer::new(crate::Format::Json, out.clone()));
        tracing::subscriber::with_default(subscriber, || {
            for (i, u) in [
                (0i64, 0u64),
                (9, 10),
                (-1, 99),
                (-99, 100),
                (i64::MIN, u64::MAX),
                (i64::MAX, 7),
            ] {
                tracing::info!(i, u, "n");
            }
        });
        let text = String::from_utf8(out.lock().unwrap().clone()).unwrap();
        let got: Vec<(i64, u64)> = text
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                (v["i"].as_i64().unwrap(), v["u"].as_u64().unwrap())
            })
            .collect();
        assert_eq!(
            got,
            [
                (0, 0),
                (9, 10),
                (-1, 99),
                (-99, 100),
                (i64::MIN, u64::MAX),
                (i64::MAX, 7)
            ]
        );
    }
}
