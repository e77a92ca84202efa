//! `GET /metrics`: Prometheus (OpenMetrics) text, read from the live counters at each
//! scrape.

use std::time::UNIX_EPOCH;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use super::service::{Admin, Reply};
use crate::enforce::Stats;
use crate::level::LEVEL_NAMES;
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
                "Events the levels enabled, by level and outcome: written, or not written because sampled, over the burst limit or over the byte budget",
                None,
                MetricType::Counter,
            )?;
            for (i, l) in self.stats.levels.iter().enumerate() {
                for (outcome, v) in [
                    ("written", l.written),
                    ("sampled", l.sampled),
                    ("burst", l.burst),
                    ("budget", l.budget),
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
pub(crate) fn render(admin: &Admin) -> Reply {
    let handle = admin.handle();
    let effective = handle.effective();
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
