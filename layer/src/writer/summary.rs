//! The in-band "dropped events" line.

use std::time::SystemTime;

use super::stats::{DropReason, LEVELS, REASONS};
use crate::clock::write_rfc3339;

/// Lines dropped but not yet reported, `[reason][level]`.
pub(crate) type Unreported = [[u64; LEVELS]; REASONS];

/// The level names used as keys of the summary line, in counter order.
const LEVEL_KEYS: [&str; LEVELS] = ["trace", "debug", "info", "warn", "error"];

/// The total of an [`Unreported`] table.
pub(crate) fn total(counts: &Unreported) -> u64 {
    counts.iter().flatten().sum()
}

/// Appends one summary line (with its `\n`) to `buf`, e.g.
/// `{"ts":"…","level":"WARN","target":"logpolicy","msg":"dropped events","reason":{"queue_full":31,…,"contended":0},"trace":0,…,"total":31}`.
pub(crate) fn write_summary_line(buf: &mut Vec<u8>, ts: SystemTime, counts: &Unreported) {
    let mut num = itoa::Buffer::new();
    buf.extend_from_slice(b"{\"ts\":\"");
    write_rfc3339(buf, ts);
    buf.extend_from_slice(
        b"\",\"level\":\"WARN\",\"target\":\"logpolicy\",\"msg\":\"dropped events\",\"reason\":{",
    );
    for (i, reason) in DropReason::ALL.iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        buf.push(b'"');
        buf.extend_from_slice(reason.as_str().as_bytes());
        buf.extend_from_slice(b"\":");
        let n: u64 = counts[reason.index()].iter().sum();
        buf.extend_from_slice(num.format(n).as_bytes());
    }
    buf.push(b'}');
    for (level, key) in LEVEL_KEYS.iter().enumerate() {
        buf.extend_from_slice(b",\"");
        buf.extend_from_slice(key.as_bytes());
        buf.extend_from_slice(b"\":");
        let n: u64 = counts.iter().map(|by_level| by_level[level]).sum();
        buf.extend_from_slice(num.format(n).as_bytes());
    }
    buf.extend_from_slice(b",\"total\":");
    buf.extend_from_slice(num.format(total(counts)).as_bytes());
    buf.extend_from_slice(b"}\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn summary_is_one_json_line() {
        let mut counts: Unreported = [[0; LEVELS]; REASONS];
        counts[DropReason::QueueFull.index()][2] = 31;
        counts[DropReason::ReserveFull.index()][4] = 2;
        counts[DropReason::OutputClosed.index()][3] = 5;
        let mut buf = b"previous\n".to_vec();
        let ts = UNIX_EPOCH + Duration::from_micros(1_796_069_175_123_456);
        write_summary_line(&mut buf, ts, &counts);
        let line = buf
            .strip_prefix(b"previous\n".as_slice())
            .unwrap_or_default();
        assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
        assert_eq!(line.last(), Some(&b'\n'));
        let v: serde_json::Value = serde_json::from_slice(line).unwrap();
        assert_eq!(v["ts"], "2026-11-30T20:06:15.123456Z");
        assert_eq!(v["level"], "WARN");
        assert_eq!(v["target"], "logpolicy");
        assert_eq!(v["msg"], "dropped events");
        assert_eq!(v["reason"]["queue_full"], 31);
        assert_eq!(v["reason"]["reserve_full"], 2);
        assert_eq!(v["reason"]["output_closed"], 5);
        assert_eq!(v["reason"]["shutdown"], 0);
        assert_eq!(v["reason"]["contended"], 0);
        assert_eq!(v["info"], 31);
        assert_eq!(v["warn"], 5);
        assert_eq!(v["error"], 2);
        assert_eq!(v["trace"], 0);
        assert_eq!(v["total"], 38);
    }

    proptest! {
        #[test]
        fn summary_totals_add_up(flat in proptest::collection::vec(0u64..u64::MAX / 64, LEVELS * REASONS)) {
            let mut counts: Unreported = [[0; LEVELS]; REASONS];
            for (i, n) in flat.iter().enumerate() {
                counts[i / LEVELS][i % LEVELS] = *n;
            }
            let mut buf = Vec::new();
            write_summary_line(&mut buf, UNIX_EPOCH, &counts);
            let v: serde_json::Value = serde_json::from_slice(&buf).unwrap();
            let by_level: u64 = LEVEL_KEYS.iter().map(|k| v[*k].as_u64().unwrap()).sum();
            let by_reason: u64 = DropReason::ALL
                .iter()
                .map(|r| v["reason"][r.as_str()].as_u64().unwrap())
                .sum();
            prop_assert_eq!(by_level, flat.iter().sum::<u64>());
            prop_assert_eq!(by_reason, by_level);
            prop_assert_eq!(v["total"].as_u64().unwrap(), by_level);
        }
    }
}
