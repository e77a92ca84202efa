//! `GET /metrics`: Prometheus (OpenMetrics) text, read from the live counters at each
//! scrape.
//!
//! # Per target
//!
//! `logpolicy_target_lines_total{target,level}` and
//! `logpolicy_target_bytes_total{target,level}` add up the ledger's rows (see
//! [`crate::ledger`]) by target and callsite level, for a bounded set of targets that
//! only grows ([`ListedTargets`]): at each scrape the targets already listed stay, and
//! free places (up to [`AdminConfig::metric_targets`](super::AdminConfig::metric_targets),
//! default 50) go to the targets that wrote the most bytes so far. A listed target has
//! one series per level its callsites have. Every other target is summed under
//! `target="other"`, one series per level, always present. Two more series have an
//! empty `level` (absent in Prometheus), where the ledger counts without a level:
//! `target="other"` for callsites past the ledger's row cap, and `target="logpolicy"`
//! for logpolicy's own lines (policy changes, summaries, warnings). So after a flush
//! the bytes series add up to `logpolicy_writer_bytes_written_total`. The names `other`
//! and `logpolicy` are never given to a target of the service (one so named is summed
//! under `other`).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};
use std::time::UNIX_EPOCH;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use super::service::{Admin, Reply};
use crate::enforce::Stats;
use crate::ledger::{Sites, TargetSites};
use crate::level::{Level, LEVEL_NAMES};
use crate::recorder::RecorderStats;
use crate::writer::{DropReason, WriterStats};

/// The content type of the metrics text.
pub(crate) const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// One scrape's values.
#[derive(Debug)]
struct Snapshot {
    stats: Stats,
    writer: Option<WriterStats>,
    version: Option<u64>,
    generation: u64,
    next_expiry: Option<i64>,
    active_layers: usize,
    requests: Vec<(u16, u64)>,
    targets: Vec<TargetSeries>,
    trusted_keys: usize,
    /// Whether every push is refused, by reason (see [`PUSH_BLOCKED_REASONS`]).
    push_blocked: [bool; 2],
    recorder: RecorderStats,
    /// Seconds since the oldest recorded line was emitted (0 when none is held).
    recorder_oldest_age: u64,
}

/// The reasons of `logpolicy_admin_push_blocked`, each a series always present: no key
/// is trusted (none configured, or a keys file that cannot be read or parsed), or the
/// pod's identity is unknown. The same codes as the refusals' `error`.
const PUSH_BLOCKED_REASONS: [&str; 2] = ["no_trusted_keys", "no_pod_identity"];

/// The label value of the targets not listed, and of callsites past the row cap.
const OTHER_TARGET: &str = "other";
/// The label value of logpolicy's own lines.
const OWN_TARGET: &str = "logpolicy";

/// The targets `/metrics` lists by name: at most `max`, and once listed, listed for the
/// endpoint's life, so that series do not come and go from scrape to scrape.
#[derive(Debug)]
pub(crate) struct ListedTargets {
    max: usize,
    listed: Mutex<Vec<&'static str>>,
}

impl ListedTargets {
    pub(crate) fn new(max: usize) -> Self {
        ListedTargets {
            max,
            listed: Mutex::new(Vec::with_capacity(max.min(64))),
        }
    }

    /// Keeps the targets listed and gives the free places to the targets of `targets`
    /// that wrote the most bytes (a target that wrote nothing is not listed); returns
    /// the targets listed now.
    pub(crate) fn update(&self, targets: &[TargetSites]) -> Vec<&'static str> {
        let mut listed = self.listed.lock().unwrap_or_else(PoisonError::into_inner);
        if listed.len() < self.max {
            let mut candidates: Vec<&TargetSites> = targets
                .iter()
                .filter(|t| {
                    t.counts.bytes > 0 && t.target != OTHER_TARGET && t.target != OWN_TARGET
                })
                .filter(|t| !listed.contains(&t.target))
                .collect();
            candidates.sort_by(|a, b| {
                b.counts
                    .bytes
                    .cmp(&a.counts.bytes)
                    .then(a.target.cmp(b.target))
            });
            let free = self.max - listed.len();
            listed.extend(candidates.iter().take(free).map(|t| t.target));
        }
        listed.clone()
    }
}

/// One series of the per-target families.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TargetSeries {
    /// The label value, escaped.
    target: String,
    /// The level's name, or empty where the ledger does not know it.
    level: &'static str,
    lines: u64,
    bytes: u64,
}

/// The per-target series of `sites` for the targets `listed` (in target order, each by
/// level, most severe first), then `other` by level, then the two series without a
/// level (see the [module documentation](self)).
fn target_series(sites: &Sites, listed: &[&'static str]) -> Vec<TargetSeries> {
    const EVENT_LEVELS: [Level; 5] = [
        Level::Error,
        Level::Warn,
        Level::Info,
        Level::Debug,
        Level::Trace,
    ];
    let mut named: BTreeMap<(&'static str, Level), (u64, u64)> = BTreeMap::new();
    let mut rest: BTreeMap<Level, (u64, u64)> = BTreeMap::new();
    for row in &sites.rows {
        let sum = if listed.contains(&row.target) {
            named.entry((row.target, row.level)).or_default()
        } else {
            rest.entry(row.level).or_default()
        };
        sum.0 += row.counts.lines;
        sum.1 += row.counts.bytes;
    }
    let mut out: Vec<TargetSeries> = named
        .into_iter()
        .map(|((target, level), (lines, bytes))| TargetSeries {
            target: label_value(target).into_owned(),
            level: level.as_str(),
            lines,
            bytes,
        })
        .collect();
    for level in EVENT_LEVELS {
        let (lines, bytes) = rest.get(&level).copied().unwrap_or_default();
        out.push(TargetSeries {
            target: OTHER_TARGET.into(),
            level: level.as_str(),
            lines,
            bytes,
        });
    }
    for (target, counts) in [(OTHER_TARGET, &sites.other), (OWN_TARGET, &sites.own)] {
        out.push(TargetSeries {
            target: target.into(),
            level: "",
            lines: counts.lines,
            bytes: counts.bytes,
        });
    }
    out
}

/// `s` as an OpenMetrics label value: `\`, `"` and newlines escaped (the encoder writes
/// label values as they are; a `log` record's target may hold anything).
fn label_value(s: &str) -> Cow<'_, str> {
    if !s.contains(['\\', '"', '\n']) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// The label value of the level at index `i` of a per-level table.
fn level_name(i: usize) -> &'static str {
    LEVEL_NAMES.get(i).copied().unwrap_or("unknown")
}

fn gauge(v: u64) -> ConstGauge<i64> {
    ConstGauge::new(i64::try_from(v).unwrap_or(i64::MAX))
}

impl Collector for Snapshot {
    fn encode(&self, mut enc: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        {
            let mut m = enc.encode_descriptor(
                "logpolicy_events",
                "Events the levels enabled, by level and outcome: written, or not written because sampled, over the burst limit or over the byte budget, or recorded (kept in memory by a recording rule)",
                None,
                MetricType::Counter,
            )?;
            for (i, l) in self.stats.levels.iter().enumerate() {
                for (outcome, v) in [
                    ("written", l.written),
                    ("sampled", l.sampled),
                    ("burst", l.burst),
                    ("budget", l.budget),
                    ("recorded", l.recorded),
                ] {
                    let labels = [("level", level_name(i)), ("outcome", outcome)];
                    ConstCounter::new(v).encode(m.encode_family(&labels)?)?;
                }
            }
        }
        {
            let mut m = enc.encode_descriptor(
                "logpolicy_events_held",
                "Events held now with a request that was not kept (written if an error follows)",
                None,
                MetricType::Gauge,
            )?;
            for (i, l) in self.stats.levels.iter().enumerate() {
                gauge(l.held).encode(m.encode_family(&[("level", level_name(i))])?)?;
            }
        }
        {
            let mut m = enc.encode_descriptor(
                "logpolicy_redactions",
                "Values written as [redacted], by reason: the field's name is redacted, or the value had the shape of a secret",
                None,
                MetricType::Counter,
            )?;
            for (reason, v) in [
                ("name", self.stats.redacted.by_name),
                ("value", self.stats.redacted.by_value),
            ] {
                ConstCounter::new(v).encode(m.encode_family(&[("reason", reason)])?)?;
            }
        }
        if let Some(w) = &self.writer {
            let m = enc.encode_descriptor(
                "logpolicy_writer_bytes_written",
                "Bytes the output took",
                None,
                MetricType::Counter,
            )?;
            ConstCounter::new(w.bytes_written).encode(m)?;
            let m = enc.encode_descriptor(
                "logpolicy_writer_queue_bytes",
                "Bytes queued for the output now",
                None,
                MetricType::Gauge,
            )?;
            gauge(w.queue_bytes as u64).encode(m)?;
            {
                let mut m = enc.encode_descriptor(
                    "logpolicy_writer_lines_written",
                    "Lines the output took, by level",
                    None,
                    MetricType::Counter,
                )?;
                for (i, l) in w.levels.iter().enumerate() {
                    ConstCounter::new(l.written)
                        .encode(m.encode_family(&[("level", level_name(i))])?)?;
                }
            }
            {
                let mut m = enc.encode_descriptor(
                    "logpolicy_writer_dropped",
                    "Lines the writer dropped, by level and reason",
                    None,
                    MetricType::Counter,
                )?;
                for (i, l) in w.levels.iter().enumerate() {
                    for reason in DropReason::ALL {
                        let labels = [("level", level_name(i)), ("reason", reason.as_str())];
                        ConstCounter::new(l.dropped.get(reason))
                            .encode(m.encode_family(&labels)?)?;
                    }
                }
            }
            let m = enc.encode_descriptor(
                "logpolicy_writer_io_errors",
                "Failed writes to the output",
                None,
                MetricType::Counter,
            )?;
            ConstCounter::new(w.io_errors).encode(m)?;
            let m = enc.encode_descriptor(
                "logpolicy_writer_rotations",
                "Files rotated (a rotating file output)",
                None,
                MetricType::Counter,
            )?;
            ConstCounter::new(w.rotations).encode(m)?;
        }
        for (name, help, value) in [
            (
                "logpolicy_target_lines",
                "Lines written, by target and callsite level (a bounded set of targets, the rest as other; see the docs)",
                (|t: &TargetSeries| t.lines) as fn(&TargetSeries) -> u64,
            ),
            (
                "logpolicy_target_bytes",
                "Bytes written, by target and callsite level (a bounded set of targets, the rest as other; see the docs)",
                |t: &TargetSeries| t.bytes,
            ),
        ] {
            let mut m = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
            for t in &self.targets {
                let labels = [("target", t.target.as_str()), ("level", t.level)];
                ConstCounter::new(value(t)).encode(m.encode_family(&labels)?)?;
            }
        }
        if let Some(v) = self.version {
            let m = enc.encode_descriptor(
                "logpolicy_policy_version",
                "The version of the policy document held (absent before the first push)",
                None,
                MetricType::Gauge,
            )?;
            gauge(v).encode(m)?;
        }
        let m = enc.encode_descriptor(
            "logpolicy_policy_generation",
            "Compiled policy changes since start, expiries included",
            None,
            MetricType::Gauge,
        )?;
        gauge(self.generation).encode(m)?;
        let m = enc.encode_descriptor(
            "logpolicy_policy_active_layers",
            "Policy layers in force, the baseline included",
            None,
            MetricType::Gauge,
        )?;
        gauge(self.active_layers as u64).encode(m)?;
        if let Some(at) = self.next_expiry {
            let m = enc.encode_descriptor(
                "logpolicy_policy_next_expiry_timestamp_seconds",
                "When the next layer in force expires, Unix seconds (absent if none does)",
                None,
                MetricType::Gauge,
            )?;
            ConstGauge::new(at).encode(m)?;
        }
        let m = enc.encode_descriptor(
            "logpolicy_admin_trusted_keys",
            "Keys whose signatures the admin endpoint accepts now (0: every push is refused)",
            None,
            MetricType::Gauge,
        )?;
        gauge(self.trusted_keys as u64).encode(m)?;
        {
            let mut m = enc.encode_descriptor(
                "logpolicy_admin_push_blocked",
                "1 while the admin endpoint refuses every push for this reason: no_trusted_keys (none configured, or the keys file cannot be read or parsed yet), no_pod_identity (POD_UID, POD_NAME or POD_NAMESPACE unset)",
                None,
                MetricType::Gauge,
            )?;
            for (reason, blocked) in PUSH_BLOCKED_REASONS.iter().zip(self.push_blocked) {
                gauge(u64::from(blocked)).encode(m.encode_family(&[("reason", *reason)])?)?;
            }
        }
        {
            let r = &self.recorder;
            for (name, help, v) in [
                (
                    "logpolicy_recorder_bytes",
                    "Bytes the recorder holds now (each line's length and its mark)",
                    r.bytes as u64,
                ),
                (
                    "logpolicy_recorder_max_bytes",
                    "The recorder's byte limit",
                    r.max_bytes as u64,
                ),
                (
                    "logpolicy_recorder_held_lines",
                    "Recorded lines held now",
                    r.lines as u64,
                ),
                (
                    "logpolicy_recorder_oldest_age_seconds",
                    "Seconds since the oldest line held was emitted (0 when none is held)",
                    self.recorder_oldest_age,
                ),
            ] {
                let m = enc.encode_descriptor(name, help, None, MetricType::Gauge)?;
                gauge(v).encode(m)?;
            }
            let mut m = enc.encode_descriptor(
                "logpolicy_recorder_lines",
                "Lines the recorder took (recorded), gave to replays (replayed), and let go unreplayed, too old or pushed out by its byte limit (expired)",
                None,
                MetricType::Counter,
            )?;
            for (outcome, v) in [
                ("recorded", r.recorded),
                ("replayed", r.replayed),
                ("expired", r.expired),
            ] {
                ConstCounter::new(v).encode(m.encode_family(&[("outcome", outcome)])?)?;
            }
            let m = enc.encode_descriptor(
                "logpolicy_recorder_replays",
                "Replays asked for",
                None,
                MetricType::Counter,
            )?;
            ConstCounter::new(r.replays).encode(m)?;
        }
        let mut m = enc.encode_descriptor(
            "logpolicy_admin_requests",
            "Requests the admin endpoint answered, by status",
            None,
            MetricType::Counter,
        )?;
        for (status, v) in &self.requests {
            let status = status.to_string();
            ConstCounter::new(*v).encode(m.encode_family(&[("status", status.as_str())])?)?;
        }
        Ok(())
    }
}

/// Renders the metrics text.
/// `/metrics`; the per-target series only `with_targets`.
pub(crate) fn render(admin: &Admin, with_targets: bool) -> Reply {
    let handle = admin.handle();
    let effective = handle.effective();
    let sites = handle.sites();
    let listed = admin.metric_targets().update(&sites.targets());
    let trusted_keys = admin.trusted_keys();
    let now = handle.now();
    let recorder = handle
        .recorder()
        .stats(now.duration_since(UNIX_EPOCH).unwrap_or_default());
    let recorder_oldest_age = recorder
        .oldest
        .and_then(|t| now.duration_since(t).ok())
        .map_or(0, |d| d.as_secs());
    let snapshot = Snapshot {
        stats: handle.stats(),
        writer: admin.writer().map(|w| w.stats()),
        version: admin.held_version(),
        generation: handle.generation(),
        next_expiry: effective.next_expiry.map(|t| {
            t.duration_since(UNIX_EPOCH)
                .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
                .unwrap_or(0)
        }),
        active_layers: effective.sources.len(),
        requests: admin.requests().to_vec(),
        targets: if with_targets {
            target_series(&sites, &listed)
        } else {
            Default::default()
        },
        trusted_keys,
        push_blocked: [trusted_keys == 0, admin.refuses_for_identity()],
        recorder,
        recorder_oldest_age,
    };
    let mut registry = Registry::default();
    registry.register_collector(Box::new(snapshot));
    let mut body = String::with_capacity(8 * 1024);
    match prometheus_client::encoding::text::encode(&mut body, &registry) {
        Ok(()) => Reply {
            status: 200,
            content_type: OPENMETRICS,
            body,
            allow: None,
            signed: false,
        },
        Err(_) => Reply::error(500, "metrics_failed", "the metrics could not be encoded"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::SiteCounts;

    fn target(name: &'static str, bytes: u64) -> TargetSites {
        TargetSites {
            target: name,
            levels: vec![Level::Info],
            callsites: 1,
            counts: SiteCounts {
                lines: 1,
                bytes,
                ..SiteCounts::default()
            },
        }
    }

    #[test]
    fn a_listed_target_stays_listed_and_free_places_go_to_the_biggest() {
        let listed = ListedTargets::new(2);
        assert_eq!(
            listed.update(&[target("a", 10), target("quiet", 0)]),
            ["a"],
            "a target that wrote nothing takes no place"
        );
        assert_eq!(
            listed.update(&[target("a", 10), target("b", 30), target("c", 20)]),
            ["a", "b"]
        );
        // c and d grow past a and b: the listed stay.
        assert_eq!(
            listed.update(&[
                target("d", 900),
                target("c", 500),
                target("b", 30),
                target("a", 10)
            ]),
            ["a", "b"]
        );
        assert!(ListedTargets::new(0).update(&[target("a", 1)]).is_empty());
        assert!(
            ListedTargets::new(5)
                .update(&[target("other", 9), target("logpolicy", 9)])
                .is_empty(),
            "the two reserved label values are never a target's"
        );
    }

    #[test]
    fn label_values_are_escaped() {
        assert!(matches!(label_value("shop::http"), Cow::Borrowed(_)));
        assert_eq!(label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
