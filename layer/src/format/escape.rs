//! JSON string escaping straight into a byte buffer.

use super::room::Room;

/// For each byte: 0 if it is written as is, else the character after the backslash
/// (`u` meaning `\u00XX`).
static ESCAPE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = b'u';
        i += 1;
    }
    t[b'\n' as usize] = b'n';
    t[b'\r' as usize] = b'r';
    t[b'\t' as usize] = b't';
    t[0x08] = b'b';
    t[0x0c] = b'f';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t
};

const HEX: &[u8; 16] = b"0123456789abcdef";

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The high bit of each byte of `w` that is a control character, `"` or `\\`, and maybe
/// of bytes after such a byte (the classic "has a byte less than" and "has a zero
/// byte" word tricks: a borrow runs upwards only from a byte that matched, so the
/// result is 0 exactly when no byte matches; used only as a yes/no).
#[inline(always)]
fn escape_bits(w: u64) -> u64 {
    let control = w.wrapping_sub(ONES * 0x20) & !w;
    let q = w ^ (ONES * u64::from(b'"'));
    let quote = q.wrapping_sub(ONES) & !q;
    let b = w ^ (ONES * u64::from(b'\\'));
    let backslash = b.wrapping_sub(ONES) & !b;
    (control | quote | backslash) & HIGH
}

/// Whether any of the 8 bytes in `w` is a control character, `"` or `\\`.
#[cfg(test)]
fn word_needs_escape(w: u64) -> bool {
    escape_bits(w) != 0
}

#[inline(always)]
fn word_at(bytes: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(w)
}

#[inline(always)]
fn half_at(bytes: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(w)
}

/// The high bit of each byte of `w` that is a control character (below `0x20`, or
/// `0x7f`), and maybe of bytes after it (as [`escape_bits`]: a yes/no).
#[inline(always)]
fn control_bits(w: u64) -> u64 {
    let control = w.wrapping_sub(ONES * 0x20) & !w;
    let d = w ^ (ONES * 0x7f);
    let del = d.wrapping_sub(ONES) & !d;
    (control | del) & HIGH
}

/// Whether any of the 8 bytes in `w` is a control character (below `0x20`, or `0x7f`).
#[inline]
fn word_has_control(w: u64) -> bool {
    control_bits(w) != 0
}

/// Whether `bytes` holds a byte that must be escaped: 8 bytes at a time (the last word
/// overlapping), bytes one by one only for strings shorter than 8.
#[cfg(test)]
fn needs_escape(bytes: &[u8]) -> bool {
    scan(bytes, word_needs_escape, |b| ESCAPE[b as usize] != 0)
}

/// Whether `bytes` holds a control character (what the text format escapes), as
/// [`needs_escape`] looks.
#[inline]
pub(crate) fn has_control(bytes: &[u8]) -> bool {
    scan(bytes, word_has_control, |b| b < 0x20 || b == 0x7f)
}

/// Whether `word` finds something in `bytes` (8 at a time, the last word overlapping;
/// `byte` one by one for fewer than 4). Both must ignore `0x20`, which pads short words.
#[inline(always)]
fn scan(bytes: &[u8], word: impl Fn(u64) -> bool, byte: impl Fn(u8) -> bool) -> bool {
    let word_needs_escape = word;
    let len = bytes.len();
    if len < 8 {
        if len < 4 {
            return bytes.iter().any(|&b| byte(b));
        }
        // Two overlapping 4-byte words, widened: the upper half (`0x20` bytes) is clean.
        let half = |at: usize| u64::from(half_at(bytes, at)) | (ONES * 0x20) << 32;
        return word_needs_escape(half(0)) || word_needs_escape(half(len - 4));
    }
    let mut at = 0;
    while at + 8 < len {
        if word_needs_escape(word_at(bytes, at)) {
            return true;
        }
        at += 8;
    }
    word_needs_escape(word_at(bytes, len - 8))
}

/// A value of at most 16 bytes as two 8-byte words to store one after the other, the
/// first cut back to `keep` bytes (the second overlaps it, or is empty), as
/// [`write_escaped`] stores a short string without a call to `memcpy`.
#[derive(Clone, Copy)]
pub(crate) struct Short {
    pub(crate) first: [u8; 8],
    pub(crate) keep: usize,
    pub(crate) last: [u8; 8],
    pub(crate) keep_last: usize,
}

/// `bytes` as a [`Short`], if at most 16 bytes and none flagged by `flagged` (a word test
/// like [`escape_bits`], which must not flag `pad`, the byte that fills the words of
/// values shorter than 8); loaded as [`write_escaped`] loads them: two overlapping words,
/// two halves, or the first, middle and last byte.
#[inline(always)]
fn short_of(bytes: &[u8], pad: u8, flagged: impl Fn(u64) -> u64) -> Option<Short> {
    let len = bytes.len();
    let pads = ONES * u64::from(pad);
    let (first, keep, last, keep_last, flags) = if len >= 8 {
        if len > 16 {
            return None;
        }
        let (a, b) = (word_at(bytes, 0), word_at(bytes, len - 8));
        (a, len - 8, b, 8, flagged(a) | flagged(b))
    } else if len >= 4 {
        let (a, b) = (
            u64::from(half_at(bytes, 0)),
            u64::from(half_at(bytes, len - 4)),
        );
        (
            a,
            len - 4,
            b,
            4,
            flagged(a | pads << 32) | flagged(b | pads << 32),
        )
    } else if len > 0 {
        // 1 to 3 bytes: the first, the middle and the last byte are every byte.
        let w = u64::from_le_bytes([bytes[0], bytes[len / 2], bytes[len - 1], 0, 0, 0, 0, 0]);
        (w, len, 0, 0, flagged(w | pads << 24))
    } else {
        (0, 0, 0, 0, 0)
    };
    (flags == 0).then_some(Short {
        first: first.to_le_bytes(),
        keep,
        last: last.to_le_bytes(),
        keep_last,
    })
}

/// `s` as a [`Short`] if it is at most 16 bytes and JSON escapes none of them.
#[inline(always)]
pub(crate) fn short_json(s: &str) -> Option<Short> {
    short_of(s.as_bytes(), b' ', escape_bits)
}

/// `s` as a [`Short`] if it is 1 to 16 bytes, all of them bare in logfmt.
#[inline(always)]
pub(crate) fn short_bare(s: &str) -> Option<Short> {
    if s.is_empty() {
        return None;
    }
    short_of(s.as_bytes(), b'a', not_bare_bits)
}

/// Appends `s` to `buf` escaped for the inside of a JSON string: quotes, backslashes and
/// control characters are escaped; everything else (valid UTF-8) is copied.
///
/// Checked and copied 16 bytes at a time (two words), each block stored as one
/// fixed-size move into the buffer, never through a call to `memcpy` (whose branches on
/// the length mispredict as a line's strings alternate): the last block overlaps the
/// one before it (the buffer is cut back to where it starts, then the block is stored
/// whole), and a string shorter than 16 bytes is stored as two overlapping words (8 or
/// 4 bytes), or, below 4 bytes, as one word built from its first, middle and last byte.
#[inline(always)]
pub(crate) fn write_escaped(buf: &mut Vec<u8>, s: &str) {
    if s.len() >= 16 {
        return write_escaped_blocks(buf, s.as_bytes());
    }
    match short_json(s) {
        Some(short) => put_short(buf, &short),
        None => write_escaped_slow(buf, s.as_bytes()),
    }
}

/// Appends a [`Short`]: two fixed-size stores into a [`Room`], the second overlapping
/// the first.
#[inline(always)]
fn put_short(buf: &mut Vec<u8>, short: &Short) {
    buf.reserve(16);
    if let Some(mut room) = Room::take(buf, 16) {
        room.put_short(short);
    }
}

/// [`write_escaped`] for 16 bytes or more.
#[inline(never)]
fn write_escaped_blocks(buf: &mut Vec<u8>, bytes: &[u8]) {
    let len = bytes.len();
    let at = buf.len();
    buf.reserve(len);
    let block = |i: usize| {
        let (a, b) = (word_at(bytes, i), word_at(bytes, i + 8));
        (
            u128::from(a) | u128::from(b) << 64,
            escape_bits(a) | escape_bits(b),
        )
    };
    let mut i = 0;
    while i + 16 < len {
        let (w, escape) = block(i);
        if escape != 0 {
            return write_escaped_slow(buf, &bytes[i..]);
        }
        buf.extend_from_slice(&w.to_le_bytes());
        i += 16;
    }
    // The last block ends with the string, overlapping what was stored before it.
    let last = len - 16;
    buf.truncate(at + last);
    let (w, escape) = block(last);
    if escape != 0 {
        return write_escaped_slow(buf, &bytes[last..]);
    }
    buf.extend_from_slice(&w.to_le_bytes());
}

/// [`write_escaped`] for bytes holding something to escape (a whole string, or the rest
/// of one from where the block with the first escape starts: never inside a character,
/// since the bytes escaped are ASCII and runs between them are copied whole).
#[cold]
#[inline(never)]
fn write_escaped_slow(buf: &mut Vec<u8>, bytes: &[u8]) {
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let e = ESCAPE[b as usize];
        if e == 0 {
            continue;
        }
        buf.extend_from_slice(&bytes[start..i]);
        if e == b'u' {
            buf.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(b >> 4) as usize],
                HEX[(b & 0xf) as usize],
            ]);
        } else {
            buf.extend_from_slice(&[b'\\', e]);
        }
        start = i + 1;
    }
    buf.extend_from_slice(&bytes[start..]);
}

/// The high bit of each byte of `w` that a bare logfmt value may not hold (a control
/// character, a space, `"`, `=`, `\\` or DEL; see [`LOGFMT_BARE`]), and maybe of bytes
/// after one (as [`escape_bits`]: only a yes/no).
///
/// [`LOGFMT_BARE`]: super::schema::LOGFMT_BARE
#[inline(always)]
fn not_bare_bits(w: u64) -> u64 {
    let equal = |c: u8| {
        let x = w ^ (ONES * u64::from(c));
        x.wrapping_sub(ONES) & !x
    };
    let low = w.wrapping_sub(ONES * 0x21) & !w;
    (low | equal(0x7f) | equal(b'"') | equal(b'=') | equal(b'\\')) & HIGH
}

/// Appends `bytes` as they are if a bare logfmt value may hold every one of them (and
/// there is at least one); otherwise appends nothing and returns `false`. Up to 16
/// bytes are checked a word at a time and stored as [`write_escaped`] stores them; a
/// longer value is checked byte by byte and copied.
#[inline(always)]
pub(crate) fn put_if_bare(buf: &mut Vec<u8>, bytes: &[u8]) -> bool {
    use super::schema::LOGFMT_BARE;
    if bytes.len() > 16 {
        if !bytes.iter().all(|&b| LOGFMT_BARE[b as usize]) {
            return false;
        }
        buf.extend_from_slice(bytes);
        return true;
    }
    if bytes.is_empty() {
        return false;
    }
    match short_of(bytes, b'a', not_bare_bits) {
        Some(short) => {
            put_short(buf, &short);
            true
        }
        None => false,
    }
}

/// A `fmt::Write` that escapes what is written into it, so `Debug` output is escaped
/// without first being collected into a `String`.
pub(crate) struct Escaping<'a>(pub(crate) &'a mut Vec<u8>);

impl std::fmt::Write for Escaping<'_> {
    #[inline]
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        write_escaped(self.0, s);
        Ok(())
    }
}

/// A `fmt::Write` that appends to a byte buffer as is.
pub(crate) struct Raw<'a>(pub(crate) &'a mut Vec<u8>);

impl std::fmt::Write for Raw<'_> {
    #[inline]
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every byte value at every position of values 1 to 40 bytes long (around the half
    /// word, the word and the 16-byte limit), after a prefix: bare exactly when the
    /// table says every byte may be bare, and then copied as is; nothing written otherwise.
    #[test]
    fn a_short_value_is_taken_exactly_when_it_needs_nothing_and_stored_whole() {
        use super::super::room::Room;
        let store = |short: &Short| {
            let mut buf = Vec::with_capacity(64);
            buf.extend_from_slice(b"key=");
            Room::take(&mut buf, 16).unwrap().put_short(short);
            buf[4..].to_vec()
        };
        // Every length around the half word, the word and the 16-byte limit, with every
        // byte value at the first, a middle and the last position.
        for len in 0..=18usize {
            for at in [0, len / 2, len.saturating_sub(1)] {
                for b in 0..=255u8 {
                    let mut bytes = vec![b'v'; len];
                    if len > 0 {
                        bytes[at] = b;
                    }
                    let Ok(s) = std::str::from_utf8(&bytes) else {
                        continue;
                    };
                    let json = short_json(s);
                    let clean = len <= 16 && bytes.iter().all(|&b| ESCAPE[b as usize] == 0);
                    assert_eq!(json.is_some(), clean, "json {bytes:?}");
                    if let Some(short) = json {
                        assert_eq!(store(&short), bytes, "json {bytes:?}");
                    }
                    let bare = short_bare(s);
                    let all_bare = len > 0
                        && len <= 16
                        && bytes
                            .iter()
                            .all(|&b| crate::format::schema::LOGFMT_BARE[b as usize]);
                    assert_eq!(bare.is_some(), all_bare, "logfmt {bytes:?}");
                    if let Some(short) = bare {
                        assert_eq!(store(&short), bytes, "logfmt {bytes:?}");
                    }
                }
            }
        }
        // Multi-byte characters, whole.
        for s in ["é", "ü-é", "日本", "→ ok", "emoji 😀!", "ßßßßßßßß"] {
            let short = short_json(s).unwrap();
            assert_eq!(store(&short), s.as_bytes());
        }
    }

    #[test]
    fn a_value_is_bare_exactly_as_the_table_says() {
        use crate::format::schema::LOGFMT_BARE;
        assert!(!put_if_bare(&mut Vec::new(), b""));
        for len in 1..=40usize {
            for at in 0..len {
                for byte in 0..=255u8 {
                    let mut value = vec![b'k'; len];
                    value[at] = byte;
                    let mut buf = b"x=".to_vec();
                    let bare = put_if_bare(&mut buf, &value);
                    assert_eq!(bare, LOGFMT_BARE[byte as usize], "{len} {at} {byte:#x}");
                    if bare {
                        assert_eq!(&buf[2..], &value[..], "{len} {at} {byte:#x}");
                    } else {
                        assert_eq!(buf, b"x=", "{len} {at} {byte:#x}");
                    }
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]
        #[test]
        fn any_string_survives_a_json_round_trip(s in any::<String>()) {
            let mut buf = vec![b'"'];
            write_escaped(&mut buf, &s);
            buf.push(b'"');
            let back: String = serde_json::from_slice(&buf).unwrap();
            prop_assert_eq!(back, s);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(50_000))]
        /// Byte for byte what `serde_json` writes, at every length around the block and
        /// word sizes, with escapes and multi-byte characters at every position (the
        /// first, the middle and the last block, the overlapping tail), after any prefix
        /// already in the buffer.
        #[test]
        fn escaped_as_serde_json_escapes(
            prefix in proptest::collection::vec(any::<u8>(), 0..20),
            chars in proptest::collection::vec(
                prop_oneof![
                    4 => proptest::char::range('a', 'z'),
                    1 => prop::sample::select(vec![
                        '\u{0}', '\u{1f}', '\n', '\t', '\u{8}', '\u{c}', '\r', '"', '\\', '/',
                        '\u{7f}', '\u{80}', 'é', '中', '😀', '\u{2028}',
                    ]),
                ],
                0..80,
            ),
        ) {
            let s = String::from_iter(chars);
            let mut buf = prefix.clone();
            write_escaped(&mut buf, &s);
            let quoted = serde_json::to_string(&s).unwrap();
            prop_assert_eq!(&buf[..prefix.len()], &prefix[..]);
            prop_assert_eq!(
                String::from_utf8_lossy(&buf[prefix.len()..]),
                &quoted[1..quoted.len() - 1]
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]
        /// The word-at-a-time check agrees with the table, byte by byte, at every length
        /// and position (strings built from the bytes that matter and their neighbours).
        #[test]
        fn word_check_agrees_with_the_table(
            bytes in proptest::collection::vec(
                prop_oneof![
                    Just(0u8), Just(0x1f), Just(0x20), Just(b'"'), Just(b'\\'),
                    Just(b'!'), Just(b'#'), Just(b'['), Just(b']'), Just(0x7f), Just(0x80),
                    Just(0xff), Just(0xa2), Just(0xdc), Just(b'a'),
                ],
                0..40,
            )
        ) {
            let expected = bytes.iter().any(|&b| ESCAPE[b as usize] != 0);
            prop_assert_eq!(needs_escape(&bytes), expected);
            let control = bytes.iter().any(|&b| b < 0x20 || b == 0x7f);
            prop_assert_eq!(has_control(&bytes), control);
        }
    }

    #[test]
    fn controls_and_quotes() {
        let mut buf = Vec::new();
        write_escaped(&mut buf, "a\"b\\c\n\u{1}\u{7f}é");
        assert_eq!(
            String::from_utf8(buf).unwrap(),
            "a\\\"b\\\\c\\n\\u0001\u{7f}é"
        );
    }
}
