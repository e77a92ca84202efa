//! JSON string escaping straight into a byte buffer.

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

/// Appends `s` to `buf` escaped for the inside of a JSON string: quotes, backslashes and
/// control characters are escaped; everything else (valid UTF-8) is copied in runs.
#[inline]
pub(crate) fn write_escaped(buf: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
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
