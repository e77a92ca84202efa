//! What a raise costs: the pods' rates once it applied, and the part of them that the
//! levels in force before it would not have written.
//!
//! The split needs no window before the raise (an incident should not wait for one):
//! the pods' ledgers read just before the policy is created say, per pod, which
//! callsites existed and the level then in force for each target. In the window measured
//! once every pod acknowledged, a callsite's lines are *added by the raise* when its level
//! is more verbose than the level its target had before, or when it had not run before at
//! all (a callsite is known once it has run at an enabled level: one that first runs now
//! is almost always one the raise enabled); the rest is what the pods would write
//! without it, in the same window, under the same load.
//!
//! All of it is pure: [`RaiseCost::of`] takes the reads and the window.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use logpolicy::wire::SitesView;
use logpolicy::Level;
use serde::{Deserialize, Serialize};

use crate::fleet::{PodId, Rates, Reads, Skipped, Subject, Window};

/// The annotation a raise records its measured cost in, on its LogPolicy.
pub const COST_ANNOTATION: &str = "logpolicy.dev/measured-cost";

/// One pod's rates once the raise applied.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodCost {
    /// The pod.
    #[serde(flatten)]
    pub pod: PodId,
    /// Lines per second written.
    pub lines_per_second: f64,
    /// Bytes per second written.
    pub bytes_per_second: f64,
    /// The part of `lines_per_second` added by the raise.
    pub added_lines_per_second: f64,
    /// The part of `bytes_per_second` added by the raise.
    pub added_bytes_per_second: f64,
}

/// What the raise costs, per pod and in all.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RaiseCost {
    /// The pods measured.
    pub pods: Vec<PodCost>,
    /// Them added up.
    pub total: Summary,
    /// The pods not measured, with why.
    pub left_out: Vec<Skipped>,
    /// How many pods were selected.
    pub selected: usize,
}

/// What a raise's measure adds up to: what the annotation records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// When the window ended (RFC 3339).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub measured_at: String,
    /// The window, as given (`5s`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub window: String,
    /// The pods measured.
    pub pods: usize,
    /// Lines per second the pods wrote before the raise (what the levels in force
    /// before it enabled, in the same window).
    pub before_lines_per_second: f64,
    /// Bytes per second, likewise.
    pub before_bytes_per_second: f64,
    /// Lines per second the pods write with it.
    pub lines_per_second: f64,
    /// Bytes per second, likewise.
    pub bytes_per_second: f64,
}

impl Summary {
    /// Bytes per second the raise adds.
    pub fn added_bytes_per_second(&self) -> f64 {
        (self.bytes_per_second - self.before_bytes_per_second).max(0.0)
    }

    /// Lines per second the raise adds.
    pub fn added_lines_per_second(&self) -> f64 {
        (self.lines_per_second - self.before_lines_per_second).max(0.0)
    }

    /// The bytes the raise adds over `d` at the measured rate.
    pub fn added_over(&self, d: Duration) -> f64 {
        self.added_bytes_per_second() * d.as_secs_f64()
    }
}

impl RaiseCost {
    /// The cost of a raise measured in `window`, from the pods' reads `before` it was
    /// created (see the [module documentation](self)). `measured_at` and `window_text`
    /// go into [`Summary`].
    pub fn of(
        before: &Reads,
        window: &Window,
        measured_at: SystemTime,
        window_text: &str,
    ) -> RaiseCost {
        let mut pods = Vec::new();
        let mut total = Summary {
            measured_at: logpolicy::clock::format_rfc3339(measured_at),
            window: window_text.to_owned(),
            ..Summary::default()
        };
        for pw in &window.pods {
            let earlier = before.get(&pw.pod).and_then(|r| r.as_ref().ok());
            let mut sum = Rates::default();
            let mut added = Rates::default();
            for (subject, rates) in &pw.sites {
                sum += rates;
                if added_by_the_raise(subject, earlier) {
                    added += rates;
                }
            }
            total.pods += 1;
            total.lines_per_second += sum.lines;
            total.bytes_per_second += sum.bytes;
            total.before_lines_per_second += sum.lines - added.lines;
            total.before_bytes_per_second += sum.bytes - added.bytes;
            pods.push(PodCost {
                pod: pw.pod.clone(),
                lines_per_second: sum.lines,
                bytes_per_second: sum.bytes,
                added_lines_per_second: added.lines,
                added_bytes_per_second: added.bytes,
            });
        }
        RaiseCost {
            pods,
            total,
            left_out: window.skipped.clone(),
            selected: window.selected,
        }
    }
}

/// Whether a callsite's lines are the raise's: the pod's read before the raise did not
/// have it, or the level then in force for its target did not enable its level.
/// (`other`, `own`, and every callsite of a pod not read before, are not.)
pub fn added_by_the_raise(subject: &Subject, before: Option<&SitesView>) -> bool {
    let (
        Subject::Callsite {
            target,
            level,
            name,
            file,
            line,
        },
        Some(before),
    ) = (subject, before)
    else {
        return false;
    };
    let known = before.rows.iter().any(|r| {
        r.target == *target
            && r.level == *level
            && r.name == *name
            && r.file == *file
            && r.line == *line
    });
    if !known {
        return true;
    }
    let level_then = before
        .targets
        .iter()
        .find(|t| t.target == *target)
        .map(|t| t.level_now);
    // More verbose than the level in force: `debug` under `info`.
    level_then.is_some_and(|then| *level > then)
}

/// The table `raise` prints: one row per pod, then the total and what the raise adds
/// over `duration` (its `--for`).
pub fn cost_table(cost: &RaiseCost, duration: Option<(&str, Duration)>) -> String {
    use crate::top::{bytes_per_second, per_second};
    let mut rows: Vec<Vec<String>> = cost
        .pods
        .iter()
        .map(|p| {
            vec![
                p.pod.name.clone(),
                per_second(p.lines_per_second),
                bytes_per_second(p.bytes_per_second),
                per_second(p.added_lines_per_second),
                bytes_per_second(p.added_bytes_per_second),
            ]
        })
        .collect();
    let t = &cost.total;
    rows.push(vec![
        "total".into(),
        per_second(t.lines_per_second),
        bytes_per_second(t.bytes_per_second),
        per_second(t.added_lines_per_second()),
        bytes_per_second(t.added_bytes_per_second()),
    ]);
    let mut out = crate::output::table(
        &[
            "POD",
            "LINES/S",
            "BYTES/S",
            "ADDED LINES/S",
            "ADDED BYTES/S",
        ],
        &rows,
    );
    out.push_str(&summary_line(t, duration));
    out.push('\n');
    if !cost.left_out.is_empty() {
        let names: Vec<String> = cost
            .left_out
            .iter()
            .map(|s| format!("{} ({})", s.pod.name, s.why))
            .collect();
        out.push_str(&format!(
            "{}/{} pods measured; not measured: {}\n",
            cost.pods.len(),
            cost.selected,
            names.join(", ")
        ));
    }
    out
}

/// `before the raise 8.1 KiB/s, with it 20.4 KiB/s (+12.3 KiB/s, +152%): about 10.8 MiB
/// more over its 15m`.
pub fn summary_line(t: &Summary, duration: Option<(&str, Duration)>) -> String {
    use crate::top::bytes_per_second;
    let added = t.added_bytes_per_second();
    let share = if t.before_bytes_per_second > 0.0 {
        format!(", +{:.0}%", added / t.before_bytes_per_second * 100.0)
    } else {
        String::new()
    };
    let mut line = format!(
        "before the raise {}, with it {} (+{}{share})",
        bytes_per_second(t.before_bytes_per_second),
        bytes_per_second(t.bytes_per_second),
        bytes_per_second(added),
    );
    if let Some((text, d)) = duration {
        line.push_str(&format!(
            ": about {} more over its {text}",
            bytes(t.added_over(d))
        ));
    }
    line
}

/// A byte count: `512 B`, `1.5 KiB`, `10.8 MiB`, `2.1 GiB`.
pub fn bytes(n: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n.max(0.0);
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{v:.0} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// The cost recorded on a LogPolicy, if any (an unreadable annotation is none), its
/// strings [`crate::output::printable`] (anyone who may edit the LogPolicy writes it).
pub fn recorded(annotations: Option<&BTreeMap<String, String>>) -> Option<Summary> {
    let value: serde_json::Value = serde_json::from_str(annotations?.get(COST_ANNOTATION)?).ok()?;
    serde_json::from_value(crate::output::printable_json(value)).ok()
}

/// `+12.3 KiB/s` for `list`'s COST column, `-` when not measured.
pub fn cost_cell(summary: Option<&Summary>) -> String {
    match summary {
        Some(s) => format!(
            "+{}",
            crate::top::bytes_per_second(s.added_bytes_per_second())
        ),
        None => "-".to_owned(),
    }
}

/// The level of `rates`' callsite subject, for callers that split by level.
pub fn level_of(subject: &Subject) -> Option<Level> {
    match subject {
        Subject::Callsite { level, .. } => Some(*level),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::fixtures::{counts, pod, site, view};
    use crate::fleet::window;
    use logpolicy::wire::CountsView;

    const START: u64 = 1_800_000_000_000;

    /// Before the raise (levels at info): an info callsite of shop::payment, and a debug
    /// one that ran under an earlier raise. Once raised to debug, for 10 s: the info one
    /// +100 lines, the old debug one +50, a debug one never seen before +25; own lines.
    fn raised() -> (Reads, Window) {
        let info = |c| site("shop::payment", Level::Info, "src/payment.rs", 10, c);
        let debug = |c| site("shop::payment", Level::Debug, "src/payment.rs", 20, c);
        let fresh = |c| site("shop::payment", Level::Debug, "src/payment.rs", 30, c);
        let before = Reads::from([(
            pod("a"),
            Ok(view(
                START,
                START + 60_000,
                vec![info(counts(1000, 100_000)), debug(counts(10, 2_000))],
                counts(1, 150),
            )),
        )]);
        let after = Reads::from([(
            pod("a"),
            Ok(view(
                START,
                START + 70_000,
                vec![
                    info(counts(1100, 110_000)),
                    debug(counts(60, 12_000)),
                    fresh(counts(25, 2_500)),
                ],
                counts(2, 300),
            )),
        )]);
        let w = window(&before, &after);
        (before, w)
    }

    #[test]
    fn what_the_levels_before_did_not_enable_is_the_raises() {
        let (before, w) = raised();
        let cost = RaiseCost::of(&before, &w, SystemTime::UNIX_EPOCH, "10s");
        let p = &cost.pods[0];
        // 100 + 50 + 25 lines, 10,000 + 10,000 + 2,500 + 150 (own) bytes, over 10 s.
        assert!((p.lines_per_second - 17.6).abs() < 1e-9, "{p:?}");
        assert!((p.bytes_per_second - 2265.0).abs() < 1e-9, "{p:?}");
        // Added: the debug callsite (info in force before) and the new one.
        assert!((p.added_lines_per_second - 7.5).abs() < 1e-9, "{p:?}");
        assert!((p.added_bytes_per_second - 1250.0).abs() < 1e-9, "{p:?}");
        let t = &cost.total;
        assert!((t.before_bytes_per_second - 1015.0).abs() < 1e-9, "{t:?}");
        assert!((t.added_bytes_per_second() - 1250.0).abs() < 1e-9);
        // Over 15 minutes: 1,250 B/s x 900 s.
        assert!((t.added_over(Duration::from_secs(900)) - 1_125_000.0).abs() < 1e-6);
        let text = cost_table(&cost, Some(("15m", Duration::from_secs(900))));
        assert!(text.starts_with("POD "), "{text}");
        assert!(text.contains("before the raise "), "{text}");
        assert!(text.contains(", +123%)"), "{text}");
        assert!(text.contains("about 1.1 MiB more over its 15m"), "{text}");
    }

    #[test]
    fn a_pod_not_read_before_adds_nothing_it_cannot_tell() {
        let (_, w) = raised();
        let cost = RaiseCost::of(&Reads::new(), &w, SystemTime::UNIX_EPOCH, "10s");
        assert_eq!(cost.pods[0].added_bytes_per_second, 0.0);
        assert!(!added_by_the_raise(&Subject::Own, None));
    }

    #[test]
    fn the_recorded_cost_reads_back_and_shows_in_list() {
        let s = Summary {
            measured_at: "2026-12-05T03:12:07Z".into(),
            window: "5s".into(),
            pods: 3,
            before_lines_per_second: 10.0,
            before_bytes_per_second: 1024.0,
            lines_per_second: 30.0,
            bytes_per_second: 3072.0,
        };
        let annotations = BTreeMap::from([(
            COST_ANNOTATION.to_owned(),
            serde_json::to_string(&s).unwrap(),
        )]);
        assert_eq!(recorded(Some(&annotations)), Some(s.clone()));
        assert_eq!(cost_cell(Some(&s)), "+2.0 KiB/s");
        assert_eq!(cost_cell(None), "-");
        let garbled = BTreeMap::from([(COST_ANNOTATION.to_owned(), "{".to_owned())]);
        assert_eq!(recorded(Some(&garbled)), None);
        assert_eq!(bytes(512.0), "512 B");
        assert_eq!(bytes(1_125_000.0), "1.1 MiB");
        let _ = CountsView::default();
    }
}
