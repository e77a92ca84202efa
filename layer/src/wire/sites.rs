//! The body of `GET /logpolicy/sites`, typed: what each callsite of a pod cost, as the
//! pod's [ledger](crate::ledger) counted it. The pod writes it, a fleet tool reads it
//! (twice, a window apart, to make rates), from one definition.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::ledger::{Site, SiteCounts, SiteKind, TargetSites};
use crate::level::Level;

/// The body of `GET /logpolicy/sites`: every callsite the process registered and what
/// it cost, with the times that make two reads into rates.
///
/// Counts only grow while the process lives: between two reads with the same
/// `startedAt`, the difference of a count divided by the difference of `readAt` is its
/// rate. A later `startedAt` means the counters started again (a restarted container).
///
/// Every peer gets the same view: counts and callsite names are not secrets, and no
/// field value is ever in it (the ledger keeps none).
///
/// A reader takes what it finds: a field that is missing reads as its default.
///
/// # Examples
///
/// ```
/// use logpolicy::wire::SitesView;
///
/// let view: SitesView = serde_json::from_str(r#"{
///   "startedAt": "2026-11-29T20:00:00Z", "startedAtUnixMs": 1795982400000,
///   "readAt": "2026-11-29T20:06:15.250000000Z", "readAtUnixMs": 1795982775250,
///   "maxRows": 4096,
///   "writer": {"linesWritten": 12, "bytesWritten": 2048},
///   "totals": {"lines": 11, "bytes": 1900, "sampled": 30},
///   "own": {"lines": 1, "bytes": 148},
///   "other": {"sites": 0, "lines": 0, "bytes": 0},
///   "targets": [{"target": "shop::http", "levels": ["info"], "levelNow": "info",
///                "callsites": 1, "lines": 11, "bytes": 1900, "sampled": 30}],
///   "rows": [{"kind": "event", "target": "shop::http", "level": "info",
///             "name": "event src/http.rs:42", "file": "src/http.rs", "line": 42,
///             "modulePath": "shop::http", "lines": 11, "bytes": 1900, "sampled": 30}]
/// }"#)?;
/// assert_eq!(view.rows[0].counts.bytes, 1900);
/// assert_eq!(view.totals.bytes + view.own.bytes, view.writer.unwrap().bytes_written);
/// assert_eq!(view.read_at_unix_ms - view.started_at_unix_ms, 375_250);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SitesView {
    /// When the ledger started counting (the process's start, near enough).
    #[serde(default = "unix_epoch", with = "crate::clock::serde_rfc3339")]
    pub started_at: SystemTime,
    /// The same, in milliseconds since the Unix epoch.
    #[serde(default)]
    pub started_at_unix_ms: u64,
    /// When these counts were read.
    #[serde(default = "unix_epoch", with = "crate::clock::serde_rfc3339")]
    pub read_at: SystemTime,
    /// The same, in milliseconds since the Unix epoch.
    #[serde(default)]
    pub read_at_unix_ms: u64,
    /// The most rows the ledger keeps ([`MAX_ROWS`](crate::ledger::MAX_ROWS)); callsites
    /// past it are counted in `other`.
    #[serde(default)]
    pub max_rows: usize,
    /// What the writer took, when the endpoint has one: after a flush,
    /// `totals.bytes + own.bytes == writer.bytesWritten`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writer: Option<WriterTotals>,
    /// The rows and `other` added up (not `own`).
    #[serde(default)]
    pub totals: CountsView,
    /// logpolicy's own lines (policy changes, summaries, warnings about settings).
    #[serde(default)]
    pub own: CountsView,
    /// The callsites past the row cap, together.
    #[serde(default)]
    pub other: OtherSitesView,
    /// Every target, biggest in bytes first: its callsites' levels, the level in force
    /// for it now, and its callsites' counts added up.
    #[serde(default)]
    pub targets: Vec<TargetView>,
    /// Every callsite, biggest in bytes first (a callsite that ran but was never enabled
    /// has a row of zeros: it exists).
    #[serde(default)]
    pub rows: Vec<SiteView>,
}

/// What the writer took, in lines and bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct WriterTotals {
    /// Lines the output took.
    pub lines_written: u64,
    /// Their bytes.
    pub bytes_written: u64,
}

/// What a callsite (or a sum of them) counted: lines and bytes written, and events not
/// written, by reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct CountsView {
    /// Lines written.
    pub lines: u64,
    /// Their bytes, exactly as written.
    pub bytes: u64,
    /// Not written: sampled out.
    pub sampled: u64,
    /// Not written: over the callsite's burst limit.
    pub burst: u64,
    /// Not written: over the byte budget.
    pub budget: u64,
    /// Dropped by the writer: its share of the queue was full.
    pub queue_full: u64,
    /// Dropped by the writer: an `alwaysKeep` line found the reserve full.
    pub reserve_full: u64,
    /// Dropped by the writer: the output refused it.
    pub output_closed: u64,
    /// Dropped by the writer: still queued at shutdown.
    pub shutdown: u64,
    /// Dropped by the writer: the queue's lock was held while the output was behind.
    pub contended: u64,
    /// Dropped by the writer: evicted from the queue for a more severe line.
    pub evicted: u64,
    /// Kept in memory by a recording rule instead of written (absent from pods of
    /// earlier versions).
    pub recorded: u64,
    /// Recorded lines a replay took (then counted as written or dropped).
    pub replayed: u64,
    /// Recorded lines that left the recorder unreplayed (too old, or pushed out).
    pub expired: u64,
}

impl From<&SiteCounts> for CountsView {
    fn from(c: &SiteCounts) -> Self {
        CountsView {
            lines: c.lines,
            bytes: c.bytes,
            sampled: c.sampled,
            burst: c.burst,
            budget: c.budget,
            queue_full: c.queue_full,
            reserve_full: c.reserve_full,
            output_closed: c.output_closed,
            shutdown: c.shutdown,
            contended: c.contended,
            evicted: c.evicted,
            recorded: c.recorded,
            replayed: c.replayed,
            expired: c.expired,
        }
    }
}

/// The callsites past the row cap: how many, and what they counted together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct OtherSitesView {
    /// How many callsites and `log` sites are counted here.
    pub sites: u64,
    /// What they counted.
    #[serde(flatten)]
    pub counts: CountsView,
}

/// Where a row's lines come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CallsiteKind {
    /// A `tracing` event callsite.
    #[default]
    Event,
    /// A `log` record's site (target, file, line), through the bridge.
    Log,
    /// A kind this reader does not know (from a pod of a later version).
    #[serde(other)]
    Unknown,
}

impl From<SiteKind> for CallsiteKind {
    fn from(k: SiteKind) -> Self {
        match k {
            SiteKind::Event => CallsiteKind::Event,
            SiteKind::Log => CallsiteKind::Log,
        }
    }
}

/// One callsite and what it counted.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SiteView {
    /// A `tracing` event or a `log` record.
    pub kind: CallsiteKind,
    /// Its target.
    pub target: String,
    /// Its level.
    pub level: Level,
    /// Its name (`tracing`'s, e.g. `event src/cart.rs:42`; `log record` for `log`).
    pub name: String,
    /// The source file, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The line in it, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// The module path, when known (`tracing` callsites).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub module_path: Option<String>,
    /// What it counted.
    #[serde(flatten)]
    pub counts: CountsView,
}

impl From<&Site> for SiteView {
    fn from(s: &Site) -> Self {
        SiteView {
            kind: s.kind.into(),
            target: s.target.to_owned(),
            level: s.level,
            name: s.name.to_owned(),
            file: s.file.map(str::to_owned),
            line: s.line,
            module_path: s.module_path.map(str::to_owned),
            counts: (&s.counts).into(),
        }
    }
}

/// A target the pod knows (some callsite of it ran), what its callsites counted, and
/// the level in force for it now.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct TargetView {
    /// The target.
    pub target: String,
    /// The levels its callsites have, least verbose first.
    pub levels: Vec<Level>,
    /// The level the effective policy gives it now (its longest matching directive, or
    /// the default level).
    pub level_now: Level,
    /// How many callsites it has.
    pub callsites: usize,
    /// What they counted, added up.
    #[serde(flatten)]
    pub counts: CountsView,
}

impl TargetView {
    /// `t`, with `level_now` the level in force for it now.
    pub fn new(t: &TargetSites, level_now: Level) -> Self {
        TargetView {
            target: t.target.to_owned(),
            levels: t.levels.clone(),
            level_now,
            callsites: t.callsites,
            counts: (&t.counts).into(),
        }
    }
}

/// Milliseconds since the Unix epoch (0 before it).
pub(crate) fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

fn unix_epoch() -> SystemTime {
    UNIX_EPOCH
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_view_round_trips_in_camel_case_with_counts_flattened() {
        let t = UNIX_EPOCH + Duration::from_millis(1_800_000_000_250);
        let counts = CountsView {
            lines: 3,
            bytes: 300,
            queue_full: 2,
            ..CountsView::default()
        };
        let view = SitesView {
            started_at: t,
            started_at_unix_ms: unix_ms(t),
            read_at: t + Duration::from_secs(1),
            read_at_unix_ms: unix_ms(t + Duration::from_secs(1)),
            max_rows: 4096,
            writer: Some(WriterTotals {
                lines_written: 4,
                bytes_written: 400,
            }),
            totals: counts,
            own: CountsView {
                lines: 1,
                bytes: 100,
                ..CountsView::default()
            },
            other: OtherSitesView::default(),
            targets: vec![TargetView {
                target: "shop::http".into(),
                levels: vec![Level::Warn, Level::Info],
                level_now: Level::Info,
                callsites: 2,
                counts,
            }],
            rows: vec![SiteView {
                kind: CallsiteKind::Log,
                target: "shop::http".into(),
                level: Level::Info,
                name: "log record".into(),
                file: Some("src/http.rs".into()),
                line: Some(7),
                module_path: None,
                counts,
            }],
        };
        let json = serde_json::to_value(&view).unwrap();
        assert_eq!(json["startedAt"], "2027-01-15T08:00:00.250000000Z");
        assert_eq!(json["startedAtUnixMs"], 1_800_000_000_250u64);
        assert_eq!(json["readAtUnixMs"], 1_800_000_001_250u64);
        assert_eq!(json["writer"]["bytesWritten"], 400);
        assert_eq!(json["rows"][0]["kind"], "log");
        assert_eq!(json["rows"][0]["queueFull"], 2);
        assert!(json["rows"][0].get("modulePath").is_none());
        assert_eq!(json["targets"][0]["levelNow"], "info");
        assert_eq!(json["targets"][0]["levels"][0], "warn");
        assert_eq!(json["other"]["sites"], 0);
        assert_eq!(serde_json::from_value::<SitesView>(json).unwrap(), view);
    }

    #[test]
    fn a_reader_takes_what_it_finds() {
        let view: SitesView =
            serde_json::from_str(r#"{"rows": [{"kind": "span", "target": "a", "lines": 1}]}"#)
                .unwrap();
        assert_eq!(view.started_at, UNIX_EPOCH);
        assert_eq!(view.rows[0].kind, CallsiteKind::Unknown);
        assert_eq!(view.rows[0].counts.lines, 1);
        assert_eq!(view.writer, None);
    }
}
