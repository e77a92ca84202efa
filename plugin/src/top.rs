//! `top`: what the selected pods' logging costs now, by target, callsite or pod.
//!
//! The pods' ledgers are read twice, a window apart ([`crate::fleet::measure`]), and
//! added up ([`crate::fleet::aggregate`]); this module prints the result: a table as
//! `kubectl top` prints one (rates per second, bytes in binary units, each row's share
//! of the bytes, a total row and which pods it covers), JSON or YAML (the [`Fleet`]
//! itself: rates as numbers), or, with `--watch`, a frame redrawn in place every window
//! ([`frame`]) whose rows each carry a sparkline of their bytes per second over the
//! last minute ([`History`]). Under the table (not `--watch`), the pods that record
//! ([`crate::recording`]): their rules, bytes held and oldest line.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io::{IsTerminal, Write};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::cli::TopArgs;
use crate::cluster::{Connection, Kube};
use crate::exit::{Failure, Result};
use crate::flags::{PrometheusUrl, PROMETHEUS_WINDOW};
use crate::fleet::{self, aggregate, pods_line, By, Fleet, Pods, Rates, Subject};
use crate::output::{data, short_duration, table, Format};
use crate::prometheus::{self, Prometheus};

/// Moves the cursor home and clears the screen (ANSI).
pub const CLEAR: &str = "\x1b[H\x1b[2J";

/// The sparkline's bars, lowest first.
pub const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// How far back a sparkline looks.
pub const HISTORY_SPAN: Duration = Duration::from_secs(60);

/// How long `--watch` waits for the pods to be listed again before it reads the last
/// list.
pub const LIST_TIMEOUT: Duration = Duration::from_secs(10);

/// The most rows a `--watch` frame shows (the biggest; `-o json` has them all).
pub const WATCH_ROWS: usize = 40;

/// `top`.
pub async fn top(connection: &Connection, args: &TopArgs) -> Result<()> {
    args.source.check()?;
    let kube = connection.connect().await?;
    if let Some(url) = &args.source.prometheus {
        return from_prometheus(&kube, args, url).await;
    }
    let (pods, sample_note) = select(&kube, args).await?;
    if let Some(note) = pods.not_opted_in_note() {
        eprintln!("{note}");
    }
    if let Some(note) = sample_note {
        eprintln!("{note}");
    }
    let window = args.source.window(args.window.as_ref(), true);
    if args.watch {
        return watch(&kube, args, pods, window).await;
    }
    if args.output == Format::Table && std::io::stderr().is_terminal() {
        eprintln!(
            "reading {} ({} pods) twice, {} apart…",
            pods.which,
            pods.pods.len(),
            short_duration(window)
        );
    }
    let measured = fleet::measure(&kube, &pods.pods, window).await;
    let fleet = aggregate(&measured, args.by);
    print_fleet(&kube, args, &fleet, &pods.pods).await?;
    if fleet.pods.read == 0 {
        return Err(Failure::error(format!(
            "none of the {} pods ({}) could be measured (each is listed with why)",
            fleet.pods.selected, pods.which
        )));
    }
    Ok(())
}

/// Prints `fleet` as `args` ask; a table is followed by what `recording` pods record.
async fn print_fleet(
    kube: &Kube,
    args: &TopArgs,
    fleet: &Fleet,
    recording: &[k8s_openapi::api::core::v1::Pod],
) -> Result<()> {
    let qualified = args.pods.all_namespaces;
    match args.output {
        Format::Table => {
            print!("{}", fleet_table(fleet, qualified, None));
            let recording = crate::recording::read_recordings(kube, recording).await;
            print!(
                "{}",
                crate::recording::recording_table(&recording, qualified)
            );
        }
        format => print!("{}", data(format, fleet)?),
    }
    Ok(())
}

/// `top --prometheus`: by target or pod, the rates Prometheus holds over the window
/// (no pod is read); by callsite, the callsites of the
/// [`DRILL_DOWN_PODS`](crate::prometheus::DRILL_DOWN_PODS) pods writing the most
/// bytes, read twice a window apart. With `--watch`, a query every window.
async fn from_prometheus(kube: &Kube, args: &TopArgs, url: &PrometheusUrl) -> Result<()> {
    let selection = prometheus::select(kube, &args.pods).await?;
    let by_callsite = args.by == By::Callsite;
    let window = args.source.window(args.window.as_ref(), by_callsite);
    if by_callsite {
        let prom = Prometheus::now(url);
        let q = prometheus::Query::new(selection.scope.clone(), PROMETHEUS_WINDOW);
        let pods = prom.biggest_pods(kube, &selection, &q).await?;
        if pods.is_empty() {
            return Err(Failure::error(format!(
                "Prometheus at {url} names no pod of {} that wrote in the last {}: no callsite to read",
                selection.which,
                short_duration(PROMETHEUS_WINDOW)
            )));
        }
        eprintln!(
            "reading the callsites of the {} pods of {} writing the most bytes (per Prometheus at {url}, at most {}), twice, {} apart",
            pods.len(),
            selection.which,
            crate::prometheus::DRILL_DOWN_PODS,
            short_duration(window)
        );
        let drilled = Pods {
            pods,
            not_opted_in: Vec::new(),
            which: selection.which.clone(),
        };
        if args.watch {
            return watch(kube, args, drilled, window).await;
        }
        let measured = fleet::measure(kube, &drilled.pods, window).await;
        let fleet = aggregate(&measured, By::Callsite);
        return print_fleet(kube, args, &fleet, &[]).await;
    }
    if args.watch {
        return watch_prometheus(args, url, &selection, window).await;
    }
    let fleet = Prometheus::now(url)
        .fleet(&selection, args.by, window)
        .await?;
    print_fleet(kube, args, &fleet, &[]).await
}

/// `top --watch --prometheus` by target or pod: a query every window.
async fn watch_prometheus(
    args: &TopArgs,
    url: &PrometheusUrl,
    selection: &prometheus::Selection,
    window: std::time::Duration,
) -> Result<()> {
    let qualified = args.pods.all_namespaces;
    let mut history = History::new(window);
    let mut refreshes = 0u64;
    let heading = format!(
        "kubectl logpolicy top: {}, by {}, every {}, from Prometheus {url}; Ctrl-C to stop",
        selection.which,
        by_text(args.by),
        short_duration(window)
    );
    let mut next = tokio::time::Instant::now();
    loop {
        let prom = Prometheus::now(url);
        let fleet = tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            fleet = prom.fleet(selection, args.by, window) => fleet?,
        };
        history.record(&fleet);
        let text = match args.output {
            Format::Table => frame(
                &fleet,
                &history,
                qualified,
                &format!("{heading}; {}", utc_now()),
            ),
            Format::Json => data(Format::Json, &fleet)?,
            Format::Yaml => format!("---\n{}", data(Format::Yaml, &fleet)?),
        };
        if !emit(&text) {
            break;
        }
        refreshes += 1;
        if args.watch_count.is_some_and(|n| refreshes >= n) {
            break;
        }
        next += window;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            () = tokio::time::sleep_until(next) => {}
        }
    }
    Ok(())
}

/// The pods `args` name, within [`fleet::MAX_POD_READS`] (or the sample asked for),
/// and the note that names a sample's pods.
async fn select(kube: &Kube, args: &TopArgs) -> Result<(Pods, Option<String>)> {
    let p = &args.pods;
    let pods = fleet::select(
        kube,
        p.workload.as_ref(),
        p.selector.as_ref(),
        p.all_namespaces,
    )
    .await?;
    fleet::bounded(pods, args.source.sample_pods.map(usize::from))
}

/// `top --watch`: each pod read a window after its last read ended (the pods listed
/// again each time: they come and go), rates from each read to the next, a frame per
/// round of reads, until Ctrl-C or `--watch-count` refreshes.
async fn watch(
    kube: &Kube,
    args: &TopArgs,
    mut pods: Pods,
    window: std::time::Duration,
) -> Result<()> {
    let qualified = args.pods.all_namespaces;
    let stop = async {
        // Without a Ctrl-C handler, Ctrl-C ends the process as it would anyway.
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let mut stop = std::pin::pin!(stop);
    let which = pods.which.clone();
    let heading = |note: &str| {
        format!(
            "kubectl logpolicy top: {which}, by {}, every {}; {}; Ctrl-C to stop{note}",
            by_text(args.by),
            short_duration(window),
            utc_now()
        )
    };
    if args.output == Format::Table {
        let waiting = format!(
            "{CLEAR}{}\n\nreading {} pods; the first rates in {}\n",
            heading(""),
            pods.pods.len(),
            short_duration(window)
        );
        if !emit(&waiting) {
            return Ok(());
        }
    }
    let mut before = tokio::select! {
        () = &mut stop => return Ok(()),
        round = fleet::read_round(kube, &pods.pods, None) => round,
    };
    let mut history = History::new(window);
    let mut refreshes = 0u64;
    loop {
        // The pods come and go: listed again for each refresh (a new one is read at
        // once, and measured from the next refresh).
        let listed = tokio::select! {
            () = &mut stop => break,
            listed = tokio::time::timeout(LIST_TIMEOUT, select(kube, args)) => listed,
        };
        let note = match listed {
            // The drill-down pods of --prometheus --by callsite stay those first named.
            _ if args.source.prometheus.is_some() => String::new(),
            Ok(Ok((listed, _))) => {
                pods = listed;
                String::new()
            }
            Ok(Err(e)) => format!("\n(pods not listed again, the last list is read: {e})"),
            Err(_) => format!(
                "\n(pods not listed again in {} s, the last list is read)",
                LIST_TIMEOUT.as_secs()
            ),
        };
        let after = tokio::select! {
            () = &mut stop => break,
            round = fleet::read_round(kube, &pods.pods, Some((&before, window))) => round,
        };
        let fleet = aggregate(&fleet::window(&before.reads, &after.reads), args.by);
        history.record(&fleet);
        let text = match args.output {
            Format::Table => frame(&fleet, &history, qualified, &heading(&note)),
            Format::Json => data(Format::Json, &fleet)?,
            Format::Yaml => format!("---\n{}", data(Format::Yaml, &fleet)?),
        };
        if args.output != Format::Table && !note.is_empty() {
            eprintln!("{}", note.trim());
        }
        if !emit(&text) {
            // Whoever read the output is gone (e.g. `| head`): nothing more to show.
            break;
        }
        before = after;
        refreshes += 1;
        if args.watch_count.is_some_and(|n| refreshes >= n) {
            break;
        }
    }
    Ok(())
}

/// Writes `text` to stdout at once; `false` when stdout is closed.
fn emit(text: &str) -> bool {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .is_ok()
}

fn by_text(by: By) -> &'static str {
    match by {
        By::Target => "target",
        By::Callsite => "callsite",
        By::Pod => "pod",
    }
}

/// Now, in UTC to the second.
fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    logpolicy::clock::format_rfc3339(UNIX_EPOCH + Duration::from_secs(secs))
}

/// Each row's bytes per second over the last minute (one sample per refresh), for the
/// sparklines of `--watch`. Bounded: [`HISTORY_SPAN`] of samples per row, and only the
/// rows of the last minute.
#[derive(Debug, Clone, PartialEq)]
pub struct History {
    samples: usize,
    rows: BTreeMap<Subject, VecDeque<f64>>,
    total: VecDeque<f64>,
}

impl History {
    /// A history of refreshes every `window`: it keeps as many samples as fit in
    /// [`HISTORY_SPAN`] (at least one).
    pub fn new(window: Duration) -> Self {
        let window = window.max(Duration::from_millis(1));
        let samples = HISTORY_SPAN.as_millis().div_ceil(window.as_millis()).max(1);
        History {
            samples: usize::try_from(samples).unwrap_or(usize::MAX),
            rows: BTreeMap::new(),
            total: VecDeque::new(),
        }
    }

    /// Adds a refresh: each row's bytes per second, and 0 for the rows it no longer
    /// has (quiet now); a row quiet for the whole span is forgotten.
    pub fn record(&mut self, fleet: &Fleet) {
        let present: BTreeSet<&Subject> = fleet.rows.iter().map(|r| &r.subject).collect();
        for row in &fleet.rows {
            push(
                self.rows.entry(row.subject.clone()).or_default(),
                row.rates.bytes,
                self.samples,
            );
        }
        let samples = self.samples;
        self.rows.retain(|subject, values| {
            if present.contains(subject) {
                return true;
            }
            push(values, 0.0, samples);
            values.iter().any(|v| *v > 0.0)
        });
        push(&mut self.total, fleet.total.bytes, self.samples);
    }

    /// How many samples a row keeps.
    pub fn samples(&self) -> usize {
        self.samples
    }

    /// The sparkline of a row (of the total with `None`), oldest first, right-aligned
    /// to the samples a row keeps.
    pub fn sparkline(&self, subject: Option<&Subject>) -> String {
        let values = match subject {
            Some(s) => self.rows.get(s),
            None => Some(&self.total),
        };
        let line = values
            .map(|v| sparkline(v.iter().copied()))
            .unwrap_or_default();
        let pad = self.samples.saturating_sub(line.chars().count());
        " ".repeat(pad) + &line
    }
}

fn push(values: &mut VecDeque<f64>, v: f64, samples: usize) {
    values.push_back(v);
    while values.len() > samples {
        values.pop_front();
    }
}

/// One bar per value, scaled to the largest (all zero: the lowest bar).
///
/// ```
/// use kubectl_logpolicy::top::sparkline;
/// assert_eq!(sparkline([0.0, 50.0, 100.0]), "▁▅█");
/// assert_eq!(sparkline([0.0, 0.0]), "▁▁");
/// ```
pub fn sparkline(values: impl IntoIterator<Item = f64>) -> String {
    let values: Vec<f64> = values.into_iter().collect();
    let max = values.iter().copied().fold(0.0, f64::max);
    values
        .iter()
        .map(|v| {
            let top = (BARS.len() - 1) as f64;
            let i = if max > 0.0 {
                (v.max(0.0) / max * top).round()
            } else {
                0.0
            };
            BARS[(i as usize).min(BARS.len() - 1)]
        })
        .collect()
}

/// A rate: `0`, `0.25`, `12.5`, `1250`.
pub fn per_second(v: f64) -> String {
    if v <= 0.0 {
        "0".to_owned()
    } else if v < 1.0 {
        format!("{v:.2}")
    } else if v < 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

/// Bytes per second in binary units: `512 B/s`, `1.2 KiB/s`, `3.4 MiB/s`.
///
/// ```
/// use kubectl_logpolicy::top::bytes_per_second;
/// assert_eq!(bytes_per_second(0.0), "0 B/s");
/// assert_eq!(bytes_per_second(512.0), "512 B/s");
/// assert_eq!(bytes_per_second(1228.8), "1.2 KiB/s");
/// assert_eq!(bytes_per_second(3.4 * 1024.0 * 1024.0), "3.4 MiB/s");
/// ```
pub fn bytes_per_second(v: f64) -> String {
    const UNITS: [&str; 4] = ["KiB/s", "MiB/s", "GiB/s", "TiB/s"];
    if v < 1024.0 {
        return format!("{} B/s", per_second(v));
    }
    let mut v = v / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

fn share_text(share: f64, total: &Rates) -> String {
    if total.bytes > 0.0 {
        format!("{:.1}%", share * 100.0)
    } else {
        "-".to_owned()
    }
}

fn rate_cells(r: &Rates, share: String) -> [String; 7] {
    [
        per_second(r.lines),
        bytes_per_second(r.bytes),
        share,
        per_second(r.sampled),
        per_second(r.burst),
        per_second(r.budget),
        per_second(r.dropped),
    ]
}

/// `fleet` as a table: one row per target (callsite: `file:line`, level, target; pod),
/// the total row with the pods it covers, how many quiet rows are not shown, and the
/// pods read and left out. With `history` (`--watch`), each row ends with its
/// sparkline and only the [`WATCH_ROWS`] biggest rows are shown.
pub fn fleet_table(fleet: &Fleet, qualified: bool, history: Option<&History>) -> String {
    let mut header: Vec<&str> = match fleet.by {
        By::Target => vec!["TARGET"],
        By::Callsite => vec!["CALLSITE", "LEVEL", "TARGET"],
        By::Pod => vec!["POD"],
    };
    header.extend([
        "LINES/S",
        "BYTES/S",
        "SHARE",
        "SAMPLED/S",
        "BURST/S",
        "BUDGET/S",
        "DROPPED/S",
    ]);
    if history.is_some() {
        header.push("BYTES/S, LAST 1M");
    }
    let shown = match history {
        Some(_) => fleet.rows.len().min(WATCH_ROWS),
        None => fleet.rows.len(),
    };
    let mut rows: Vec<Vec<String>> = Vec::with_capacity(shown + 1);
    for row in &fleet.rows[..shown] {
        let mut cells = vec![row.subject.label(qualified)];
        if fleet.by == By::Callsite {
            let (level, target) = match &row.subject {
                Subject::Callsite { level, target, .. } => (level.to_string(), target.clone()),
                _ => ("-".to_owned(), "-".to_owned()),
            };
            cells.extend([level, target]);
        }
        let mut rates = rate_cells(&row.rates, share_text(row.share, &fleet.total));
        if fleet.source.is_some() && fleet.by != By::Pod {
            // Prometheus holds what was held back and dropped by pod, not by target.
            for cell in &mut rates[3..] {
                *cell = "-".to_owned();
            }
        }
        cells.extend(rates);
        if let Some(h) = history {
            cells.push(h.sparkline(Some(&row.subject)));
        }
        rows.push(cells);
    }
    let mut total = vec![format!("TOTAL ({})", fleet.pods)];
    if fleet.by == By::Callsite {
        total.extend([String::new(), String::new()]);
    }
    total.extend(rate_cells(&fleet.total, share_text(1.0, &fleet.total)));
    if let Some(h) = history {
        total.push(h.sparkline(None));
    }
    rows.push(total);
    let mut out = table(&header, &rows);
    if shown < fleet.rows.len() {
        out.push_str(&format!(
            "… {} more rows (-o json has them all)\n",
            fleet.rows.len() - shown
        ));
    }
    if fleet.quiet > 0 {
        let what = match (fleet.by, fleet.quiet) {
            (By::Callsite, 1) => "callsite",
            (By::Callsite, _) => "callsites",
            (_, 1) => "target",
            _ => "targets",
        };
        out.push_str(&format!(
            "{} quiet {what} (nothing written, held back or dropped in the window) not shown\n",
            fleet.quiet
        ));
    }
    out.push_str(&pods_line(fleet.pods, &fleet.left_out, qualified));
    out.push('\n');
    if let Some(source) = &fleet.source {
        out.push_str(&source.line());
        if fleet.by != By::Pod {
            out.push_str(" (what was held back and dropped: in the total only)");
        }
        out.push('\n');
    }
    out
}

/// A `--watch` frame: clear the screen, `heading`, a blank line, then the table of
/// `fleet` with each row's sparkline from `history`.
pub fn frame(fleet: &Fleet, history: &History, qualified: bool, heading: &str) -> String {
    format!(
        "{CLEAR}{heading}\n\n{}",
        fleet_table(fleet, qualified, Some(history))
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::{Coverage, PodId, Row, SkipReason, Skipped};

    fn target(name: &str) -> Subject {
        Subject::Target {
            target: name.into(),
        }
    }

    /// A fleet by target of `rows` (target, bytes per second).
    fn fleet(rows: &[(&str, f64)]) -> Fleet {
        let total: f64 = rows.iter().map(|r| r.1).sum();
        Fleet {
            by: By::Target,
            rows: rows
                .iter()
                .map(|(t, bytes)| Row {
                    subject: target(t),
                    pods: 2,
                    rates: Rates {
                        lines: bytes / 100.0,
                        bytes: *bytes,
                        ..Rates::default()
                    },
                    share: bytes / total,
                })
                .collect(),
            total: Rates {
                lines: total / 100.0,
                bytes: total,
                ..Rates::default()
            },
            quiet: 0,
            pods: Coverage {
                read: 2,
                selected: 3,
            },
            left_out: vec![Skipped {
                pod: PodId {
                    namespace: "shop".into(),
                    name: "shop-2".into(),
                },
                reason: SkipReason::Unreadable,
                why: "pod proxy: no answer in 3 s; the pod has no IP".into(),
            }],
            source: None,
        }
    }

    #[test]
    fn a_table_has_rates_in_units_shares_a_total_and_the_pods() {
        let mut f = fleet(&[("shop::http", 3.0 * 1024.0 * 1024.0), ("shop::db", 1228.8)]);
        f.rows[1].rates.sampled = 15.0;
        f.total.sampled = 15.0;
        f.rows[0].rates.dropped = 0.5;
        f.total.dropped = 0.5;
        f.quiet = 4;
        assert_eq!(
            fleet_table(&f, false, None),
            "TARGET             LINES/S   BYTES/S     SHARE    SAMPLED/S   BURST/S   BUDGET/S   DROPPED/S\n\
             shop::http         31457     3.0 MiB/s   100.0%   0           0         0          0.50\n\
             shop::db           12.3      1.2 KiB/s   0.0%     15.0        0         0          0\n\
             TOTAL (2/3 pods)   31470     3.0 MiB/s   100.0%   15.0        0         0          0.50\n\
             4 quiet targets (nothing written, held back or dropped in the window) not shown\n\
             2/3 pods read; unreadable: shop-2 (pod proxy: no answer in 3 s; the pod has no IP)\n"
        );
    }

    #[test]
    fn a_table_by_callsite_says_level_and_target_and_nothing_measured_claims_no_share() {
        let f = Fleet {
            by: By::Callsite,
            rows: vec![Row {
                subject: Subject::Callsite {
                    target: "shop::http".into(),
                    level: logpolicy::Level::Info,
                    name: "event src/http.rs:42".into(),
                    file: Some("src/http.rs".into()),
                    line: Some(42),
                },
                pods: 1,
                rates: Rates::default(),
                share: 0.0,
            }],
            total: Rates::default(),
            quiet: 0,
            pods: Coverage {
                read: 1,
                selected: 1,
            },
            left_out: vec![],
            source: None,
        };
        let text = fleet_table(&f, false, None);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with("CALLSITE           LEVEL   TARGET       LINES/S"),
            "{text}"
        );
        assert!(
            lines[1].starts_with("src/http.rs:42     info    shop::http   0         0 B/s     -"),
            "{text}"
        );
        assert!(
            lines[2].starts_with("TOTAL (1/1 pods)                        0         0 B/s     -"),
            "{text}"
        );
        assert_eq!(lines[3], "1/1 pods read");
    }

    #[test]
    fn a_watch_frame_redraws_in_place_with_a_sparkline_per_row() {
        let mut history = History::new(Duration::from_secs(10));
        assert_eq!(history.samples(), 6);
        for (http, db) in [(0.0, 400.0), (500.0, 400.0), (1000.0, 0.0)] {
            let rows: Vec<(&str, f64)> = [("shop::http", http), ("shop::db", db)]
                .into_iter()
                .filter(|r| r.1 > 0.0)
                .collect();
            history.record(&fleet(&rows));
        }
        let last = fleet(&[("shop::http", 1000.0)]);
        let heading = "kubectl logpolicy top: deploy/shop, by target, every 10s";
        let text = frame(&last, &history, false, heading);
        assert!(text.starts_with(CLEAR), "{text:?}");
        let lines: Vec<&str> = text[CLEAR.len()..].lines().collect();
        assert_eq!(lines[0], heading);
        assert_eq!(lines[1], "");
        assert!(lines[2].starts_with("TARGET ") && lines[2].ends_with("BYTES/S, LAST 1M"));
        // One line per row, then the total and the pods: shop::db is quiet now (it is
        // not a row), its history is kept but not drawn.
        assert_eq!(lines.len(), 6, "{text}");
        assert!(lines[3].starts_with("shop::http "), "{}", lines[3]);
        // Six samples a minute at 10 s; http was no row, then half, then all.
        assert!(lines[3].ends_with("    ▅█"), "{}", lines[3]);
        assert!(lines[4].starts_with("TOTAL (2/3 pods) "), "{}", lines[4]);
        // The total: 400, 900, 1000.
        assert!(lines[4].ends_with("   ▄▇█"), "{}", lines[4]);
        assert!(lines[5].starts_with("2/3 pods read; unreadable: shop-2"));
        assert!(text.chars().any(|c| BARS.contains(&c)));
        // db, quiet now, is kept while it was not quiet within the minute ...
        assert_eq!(history.sparkline(Some(&target("shop::db"))), "   ██▁");
        // ... and forgotten once quiet for the whole minute.
        for _ in 0..6 {
            history.record(&last);
        }
        assert_eq!(history.sparkline(Some(&target("shop::db"))), "      ");
        assert_eq!(history.sparkline(Some(&target("shop::http"))), "██████");
    }

    #[test]
    fn a_watch_frame_shows_the_biggest_rows() {
        let names: Vec<String> = (0..WATCH_ROWS + 5).map(|i| format!("t{i:02}")).collect();
        let rows: Vec<(&str, f64)> = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), (1000 - i) as f64))
            .collect();
        let f = fleet(&rows);
        let mut history = History::new(Duration::from_secs(1));
        assert_eq!(history.samples(), 60);
        history.record(&f);
        let text = frame(&f, &history, false, "top");
        let lines: Vec<&str> = text.lines().collect();
        // Heading, blank, header, the rows shown, the total, the rows left out, the pods.
        assert_eq!(lines.len(), 3 + WATCH_ROWS + 3, "{text}");
        assert!(
            text.contains("… 5 more rows (-o json has them all)"),
            "{text}"
        );
    }

    #[test]
    fn rates_in_words() {
        assert_eq!(per_second(0.0), "0");
        assert_eq!(per_second(0.25), "0.25");
        assert_eq!(per_second(12.345), "12.3");
        assert_eq!(per_second(1250.4), "1250");
        assert_eq!(bytes_per_second(1023.0), "1023 B/s");
        assert_eq!(bytes_per_second(1024.0), "1.0 KiB/s");
        assert_eq!(
            bytes_per_second(5.0 * 1024.0 * 1024.0 * 1024.0),
            "5.0 GiB/s"
        );
        assert_eq!(sparkline([]), "");
        assert_eq!(sparkline([3.0]), "█");
        let h = History::new(Duration::from_secs(3600));
        assert_eq!(h.samples(), 1);
    }
}
