//! A per-thread cache of the timestamp's seconds, so a line pays only for the
//! microseconds.

use std::cell::Cell;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::clock::rfc3339_seconds;

thread_local! {
    static CACHE: Cell<(u64, [u8; 20])> = const { Cell::new((u64::MAX, [0; 20])) };
}

/// Appends `t` as `2026-11-29T20:06:15.123456Z`.
#[inline]
pub(crate) fn write_timestamp(buf: &mut Vec<u8>, t: SystemTime) {
    write_since_epoch(buf, t.duration_since(UNIX_EPOCH).unwrap_or_default());
}

/// Appends the time `d` after the Unix epoch as `2026-11-29T20:06:15.123456Z`.
#[inline]
pub(crate) fn write_since_epoch(buf: &mut Vec<u8>, d: Duration) {
    let secs = d.as_secs();
    let prefix = CACHE.with(|c| {
        let (cached, prefix) = c.get();
        if cached == secs {
            prefix
        } else {
            let mut p = [0u8; 20];
            rfc3339_seconds(secs, &mut p);
            p[19] = b'.';
            c.set((secs, p));
            p
        }
    });
    buf.extend_from_slice(&prefix);
    let mut micros = d.subsec_micros();
    let mut digits = [b'0'; 7];
    for slot in digits[..6].iter_mut().rev() {
        *slot = b'0' + (micros % 10) as u8;
        micros /= 10;
    }
    digits[6] = b'Z';
    buf.extend_from_slice(&digits);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_never_serves_another_second() {
        // Alternate between seconds (and a day and a year boundary) on one thread:
        // every line must carry its own second, parsed back exactly.
        for s in [
            0u64,
            1,
            59,
            86_399,
            86_400,
            1_800_000_000,
            1_800_000_001,
            1_798_761_599,
            1_798_761_600,
        ] {
            for us in [0u32, 1, 999_999] {
                let t = UNIX_EPOCH + Duration::new(s, us * 1000);
                let mut a = Vec::new();
                write_timestamp(&mut a, t);
                assert_eq!(a.len(), 27);
                let text = String::from_utf8(a).unwrap();
                assert_eq!(crate::clock::parse_rfc3339(&text).unwrap(), t, "{text}");
            }
        }
        let mut b = Vec::new();
        write_timestamp(&mut b, UNIX_EPOCH + Duration::from_secs(1_798_761_600));
        assert_eq!(b, b"2027-01-01T00:00:00.000000Z");
    }
}
