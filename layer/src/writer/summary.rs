//! The in-band "dropped events" line.

use std::time::SystemTime;

use super::stats::{DropReason, REASONS};
use crate::format::{own_line, Style};
use crate::level::LEVELS;

/// Lines dropped but not yet reported, `[reason][level]`.
pub(crate) type Unreported = [[u64; LEVELS]; REASONS];

/// The total of an [`Unreported`] table.
pub(crate) fn total(counts: &Unreported) -> u64 {
    counts.iter().flatten().sum()
}

/// Appends one summary line (with its `\n`) to `buf`, e.g.
/// `{"ts":"…","level":"WARN","target":"logpolicy","msg":"dropped events","reason":{"queue_full":31,…,"contended":0},"trace":0,…,"total":31}`.
pub(crate) fn write_summary_line(
    buf: &mut Vec<u8>,
    style: &Style,
    ts: SystemTime,
    counts: &Unreported,
) {
    let by_reason = DropReason::ALL.map(|r| (r.as_str(), counts[r.index()].iter().sum::<u64>()));
    let mut by_level = [0u64; LEVELS];
    for row in counts {
        for (total, n) in by_level.iter_mut().zip(row) {
            *total += n;
        }
    }
    own_line::write_dropped_events(buf, style, ts, &by_reason, &by_level);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::time::{Duration, UNIX_EPOCH};

    fn json() -> Style {
        Style::new(
            crate::format::Format::Json,
            &crate::format::Service::default(),
        )
    }

    #[test]
    fn summary_is_one_json_line() {
        let mut counts: Unreported = [[0; LEVELS]; REASONS];
        counts[DropReason::QueueFull.index()][2] = 31;
        counts[DropReason::ReserveFull.index()][4] = 2;
        counts[DropReason::OutputClosed.index()][3] = 5;
        let mut buf = b"previous\n".to_vec();
        let ts = UNIX_EPOCH + Duration::from_micros(1_796_069_175_123_456);
        write_summary_line(&mut buf, &json(), ts, &counts);
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
            write_summary_line(&mut buf, &json(), UNIX_EPOCH, &counts);
            let v: serde_json::Value = serde_json::from_slice(&buf).unwrap();
            let by_level: u64 = crate::level::LEVEL_NAMES.iter().map(|k| v[*k].as_u64().unwrap()).sum();
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
