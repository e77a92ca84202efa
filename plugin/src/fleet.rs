//! The fleet view: what the selected pods' callsites cost, as rates, from their ledgers.
//!
//! Every pod that runs the logpolicy layer keeps a ledger, one row per callsite, and
//! serves it at `GET /logpolicy/sites` ([`SitesView`]). Its counts only grow while the
//! process lives, so two reads of a pod, a window apart, make rates: the difference of
//! a count divided by the difference of the pod's own `readAt`. A pod whose `startedAt`
//! changed in between restarted (its counts began again): it is left out, and says so.
//!
//! The reading is at the edge, the arithmetic is pure:
//! - [`select`] picks the pods (a workload's, a selector's, or every opted-in pod of the
//!   namespace or of all namespaces), [`read_sites`] reads their views [`FLEET_READS`]
//!   at a time (each read bounded by the pod read's timeouts, [`Kube::pod_get`]), and
//!   [`measure`] reads them twice, each pod's reads a window apart ([`read_round`]);
//! - [`window`] turns two reads ([`Reads`]) into each pod's rates per callsite
//!   ([`Window`]), listing the pods it cannot measure with why ([`Skipped`]);
//! - [`aggregate`] adds a window up by target, callsite or pod ([`By`]), biggest
//!   bytes per second first, with a total and the pods it covers ([`Fleet`]);
//! - [`known_targets`] says, from one read, every target the pods know, the levels of
//!   its callsites, the level in force for it now, and on how many pods.
//!
//! ```
//! use std::collections::BTreeMap;
//! use kubectl_logpolicy::fleet::{aggregate, window, By, PodId, Reads};
//! use logpolicy::wire::SitesView;
//!
//! let read = |at: u64, bytes: u64| -> SitesView {
//!     serde_json::from_value(serde_json::json!({
//!         "startedAtUnixMs": 1_000, "readAtUnixMs": at,
//!         "rows": [{"target": "shop::http", "level": "info", "name": "event src/http.rs:42",
//!                   "file": "src/http.rs", "line": 42, "lines": bytes / 100, "bytes": bytes}]
//!     })).unwrap()
//! };
//! let pod = PodId { namespace: "shop".into(), name: "shop-0".into() };
//! let before: Reads = BTreeMap::from([(pod.clone(), Ok(read(10_000, 1_000)))]);
//! let after: Reads = BTreeMap::from([(pod, Ok(read(20_000, 51_000)))]);
//! let fleet = aggregate(&window(&before, &after), By::Target);
//! // 50,000 bytes in 10 s.
//! assert_eq!(fleet.rows[0].rates.bytes, 5_000.0);
//! assert_eq!(fleet.rows[0].rates.lines, 50.0);
//! assert_eq!(fleet.pods.to_string(), "1/1 pods");
//! ```

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::ops::AddAssign;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use logpolicy::wire::{CallsiteKind, CountsView, SiteView, SitesView};
use logpolicy::Level;
use logpolicy_api::OPT_IN_LABEL;
use serde::Serialize;

use crate::cluster::{Kube, Selected};
use crate::exit::{self, Failure, Result};
use crate::selector::{selector_string, WorkloadRef};

/// The path of a pod's ledger on its admin endpoint.
pub const SITES_PATH: &str = "/logpolicy/sites";

/// How many pods' views are read at a time.
pub const FLEET_READS: usize = 64;

/// A pod, by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct PodId {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl PodId {
    /// `pod`'s namespace (else `namespace`) and name.
    pub fn of(pod: &Pod, namespace: &str) -> PodId {
        PodId {
            namespace: pod
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| namespace.to_owned()),
            name: pod.metadata.name.clone().unwrap_or_default(),
        }
    }

    /// Its name, or `namespace/name` when `qualified` (pods of several namespaces).
    pub fn label(&self, qualified: bool) -> String {
        if qualified {
            format!("{}/{}", self.namespace, self.name)
        } else {
            self.name.clone()
        }
    }
}

/// One read of each pod: its view, or why it could not be read.
pub type Reads = BTreeMap<PodId, std::result::Result<SitesView, String>>;

/// The pods a fleet command reads.
#[derive(Debug, Clone, Default)]
pub struct Pods {
    /// The opted-in pods, by name (by namespace first with `-A`).
    pub pods: Vec<Pod>,
    /// The pods selected that have not opted in (`namespace/name` with `-A`).
    pub not_opted_in: Vec<String>,
    /// What selected them, for messages: `deploy/shop`, `-l app=shop`, or `the opted-in
    /// pods of namespace shop`.
    pub which: String,
}

impl Pods {
    /// What to say about the selected pods that keep no ledger, if any.
    pub fn not_opted_in_note(&self) -> Option<String> {
        (!self.not_opted_in.is_empty()).then(|| {
            format!(
                "note: {} pods of {} have not opted in ({OPT_IN_LABEL}=true) and are not read: {}",
                self.not_opted_in.len(),
                self.which,
                self.not_opted_in.join(" ")
            )
        })
    }
}

/// The pods some arguments select, opted in or not, before any is read.
#[derive(Debug)]
pub struct Resolved {
    /// The pods, by whether they opted in.
    pub selected: Selected,
    /// What selected them (`deployment/web`, `-l app=web`, or `the opted-in pods of
    /// namespace shop`).
    pub which: String,
    /// `namespace NS` or `every namespace`.
    pub scope: String,
    /// Whether they come from every namespace (their names are then `NS/NAME`).
    pub all_namespaces: bool,
    /// Whether a workload or a selector named them (not every opted-in pod).
    pub named: bool,
}

impl Resolved {
    /// The command that opts `names` (of [`Resolved::selected`]) in.
    pub fn opt_in_how(&self, namespace: &str, names: &[String]) -> String {
        if self.all_namespaces {
            format!("kubectl label pod -n NAMESPACE NAME {OPT_IN_LABEL}=true")
        } else {
            format!(
                "kubectl label pod -n {namespace} {} {OPT_IN_LABEL}=true",
                names.join(" ")
            )
        }
    }
}

/// The pods of `workload` (its `spec.selector`), of `selector`, or, with neither, every
/// pod, in the command's namespace or, with `all_namespaces`, in every namespace (not
/// with a workload: it is in one namespace).
pub async fn resolve(
    kube: &Kube,
    workload: Option<&WorkloadRef>,
    selector: Option<&LabelSelector>,
    all_namespaces: bool,
) -> Result<Resolved> {
    let all_namespaces = all_namespaces && workload.is_none();
    let scope = if all_namespaces {
        "every namespace".to_owned()
    } else {
        format!("namespace {}", kube.namespace)
    };
    let (selector, which) = match (workload, selector) {
        (Some(w), _) => (Some(kube.workload_selector(w).await?), w.to_string()),
        (None, Some(s)) => (Some(s.clone()), format!("-l {}", selector_string(s))),
        (None, None) => (None, format!("the opted-in pods of {scope}")),
    };
    let selected = kube.pods(selector.as_ref(), all_namespaces).await?;
    Ok(Resolved {
        selected,
        which,
        scope,
        all_namespaces,
        named: selector.is_some(),
    })
}

/// The opted-in pods [`resolve`] finds. None opted in: exit 3, with how to opt in.
pub async fn select(
    kube: &Kube,
    workload: Option<&WorkloadRef>,
    selector: Option<&LabelSelector>,
    all_namespaces: bool,
) -> Result<Pods> {
    let resolved = resolve(kube, workload, selector, all_namespaces).await?;
    let (selected, which) = (&resolved.selected, &resolved.which);
    if selected.opted_in_pods.is_empty() {
        let message = if selected.not_opted_in.is_empty() {
            format!(
                "no pod {} matches {which}: nothing to read (pods opt in with the label {OPT_IN_LABEL}=true)",
                if resolved.all_namespaces { "of any namespace".to_owned() } else { format!("of {}", resolved.scope) }
            )
        } else {
            format!(
                "none of the {} pods of {which} has opted in: they keep no ledger to read.\n\
                 Pods opt in with the label {OPT_IN_LABEL}=true (and run the logpolicy layer's admin endpoint):\n  {}",
                selected.not_opted_in.len(),
                resolved.opt_in_how(&kube.namespace, &selected.not_opted_in),
            )
        };
        return Err(Failure::new(exit::NOT_OPTED_IN, message));
    }
    Ok(Pods {
        pods: resolved.selected.opted_in_pods,
        not_opted_in: resolved.selected.not_opted_in,
        which: resolved.which,
    })
}

/// [`select`] with the pods a fleet command's arguments name, saying on stderr which
/// selected pods have not opted in.
pub async fn select_noting(kube: &Kube, p: &crate::cli::PodsArgs) -> Result<Pods> {
    let pods = select(
        kube,
        p.workload.as_ref(),
        p.selector.as_ref(),
        p.all_namespaces,
    )
    .await?;
    if let Some(note) = pods.not_opted_in_note() {
        eprintln!("{note}");
    }
    Ok(pods)
}

/// The most pods a fleet command reads through the API server's pod proxy (each two or
/// three times): more asks for a narrower selection, a sample (`--sample-pods`) or a
/// Prometheus (`--prometheus`).
pub const MAX_POD_READS: usize = 200;

/// The indices of `n` of `len` items, spread evenly from the first (all of them when
/// `n >= len`).
///
/// ```
/// use kubectl_logpolicy::fleet::spread;
/// assert_eq!(spread(10, 3), [0, 3, 6]);
/// assert_eq!(spread(3, 5), [0, 1, 2]);
/// ```
pub fn spread(len: usize, n: usize) -> Vec<usize> {
    if n >= len {
        return (0..len).collect();
    }
    (0..n).map(|i| i * len / n).collect()
}

/// `pods` within [`MAX_POD_READS`]: all of them when they are that many or fewer (or
/// `sample` is at least their number); `sample` of them spread over the list (by
/// namespace and name), with a note naming them; else a usage failure that names the
/// flags that help.
pub fn bounded(mut pods: Pods, sample: Option<usize>) -> Result<(Pods, Option<String>)> {
    let len = pods.pods.len();
    match sample {
        Some(n) if n < len => {
            let picked: Vec<Pod> = spread(len, n)
                .into_iter()
                .map(|i| pods.pods[i].clone())
                .collect();
            let names: Vec<String> = picked
                .iter()
                .map(|p| {
                    format!(
                        "{}/{}",
                        p.metadata.namespace.as_deref().unwrap_or("-"),
                        p.metadata.name.as_deref().unwrap_or("-")
                    )
                })
                .collect();
            let note = format!(
                "reading a sample of {n} of the {len} pods of {} (--sample-pods {n}, spread by namespace and name): {}",
                pods.which,
                names.join(" ")
            );
            pods.which = format!("a sample of {n} of the {len} pods of {}", pods.which);
            pods.pods = picked;
            Ok((pods, Some(note)))
        }
        Some(_) => Ok((pods, None)),
        None if len > MAX_POD_READS => Err(Failure::new(
            exit::USAGE,
            format!(
                "{len} pods of {} are selected: more than {MAX_POD_READS} are not read one by one through the API server's pod proxy.\n\
                 Name fewer (a workload, or -l SELECTOR), read a sample of them (--sample-pods N, at most {MAX_POD_READS}), \
                 or read the rates from Prometheus (--prometheus URL, or ${})",
                pods.which,
                crate::flags::PROMETHEUS_URL_ENV
            ),
        )),
        None => Ok((pods, None)),
    }
}

/// Each pod's `GET /logpolicy/sites`, [`FLEET_READS`] at a time; each read is bounded
/// by the timeouts of [`Kube::pod_get`].
pub async fn read_sites(kube: &Kube, pods: &[Pod]) -> Reads {
    read_round(kube, pods, None).await.reads
}

/// One read of each pod, and when each read ended (what the next read of the pod is
/// timed from).
#[derive(Debug, Clone, Default)]
pub struct Round {
    /// What each pod answered.
    pub reads: Reads,
    /// When each pod's read ended.
    pub ended: BTreeMap<PodId, tokio::time::Instant>,
}

/// Reads each pod's `GET /logpolicy/sites`, [`FLEET_READS`] at a time, each read
/// bounded by the timeouts of [`Kube::pod_get`]. With `after` (an earlier round and a
/// window), each pod is read a window after its read in that round ended (at once if
/// that is past, or if it was not in it), so that every pod's two reads are at least
/// a window apart however long the earlier round took (a pod that made the round
/// wait for its timeouts does not shorten the others' windows).
pub async fn read_round(kube: &Kube, pods: &[Pod], after: Option<(&Round, Duration)>) -> Round {
    let now = tokio::time::Instant::now();
    let mut due: Vec<(tokio::time::Instant, PodId, &Pod)> = pods
        .iter()
        .map(|pod| {
            let id = PodId::of(pod, &kube.namespace);
            let at = after
                .and_then(|(round, window)| round.ended.get(&id).map(|t| *t + window))
                .unwrap_or(now);
            (at, id, pod)
        })
        .collect();
    // The earliest due first: a read waiting for its time holds a place that no read
    // due earlier is waiting for.
    due.sort_by_key(|(at, _, _)| *at);
    let reads = due.into_iter().map(|(at, id, pod)| async move {
        tokio::time::sleep_until(at).await;
        let read = kube.pod_get::<SitesView>(pod, SITES_PATH).await;
        (id, read, tokio::time::Instant::now())
    });
    let mut round = Round::default();
    let mut answers = futures::stream::iter(reads).buffer_unordered(FLEET_READS);
    while let Some((id, read, ended)) = answers.next().await {
        round.ended.insert(id.clone(), ended);
        round.reads.insert(id, read);
    }
    round
}

/// Reads `pods` twice, each pod's second read a window after its first one ended, and
/// measures the rates in between ([`window`]).
///
/// A pod whose first read failed is not read again (it has no rate): it is listed with
/// why its first read failed.
pub async fn measure(kube: &Kube, pods: &[Pod], window_length: Duration) -> Window {
    let before = read_round(kube, pods, None).await;
    let again: Vec<Pod> = pods
        .iter()
        .filter(|p| {
            matches!(
                before.reads.get(&PodId::of(p, &kube.namespace)),
                Some(Ok(_))
            )
        })
        .cloned()
        .collect();
    let mut after = read_round(kube, &again, Some((&before, window_length))).await;
    for (pod, read) in &before.reads {
        if read.is_err() {
            after.reads.insert(
                pod.clone(),
                Err("not read again: the first read failed".into()),
            );
        }
    }
    window(&before.reads, &after.reads)
}

/// Rates per second: what was written, what policy held back, what the writer dropped.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Rates {
    /// Lines written per second.
    #[serde(rename = "linesPerSecond")]
    pub lines: f64,
    /// Bytes written per second.
    #[serde(rename = "bytesPerSecond")]
    pub bytes: f64,
    /// Events sampled out per second.
    #[serde(rename = "sampledPerSecond")]
    pub sampled: f64,
    /// Events over a burst limit per second.
    #[serde(rename = "burstPerSecond")]
    pub burst: f64,
    /// Events over the byte budget per second.
    #[serde(rename = "budgetPerSecond")]
    pub budget: f64,
    /// Lines the writer dropped per second, for any reason (queue full, reserve full,
    /// output closed, shutdown, contended, evicted).
    #[serde(rename = "droppedPerSecond")]
    pub dropped: f64,
}

impl Rates {
    /// `counts` (what grew in a window) over `seconds`.
    pub fn of(counts: &CountsView, seconds: f64) -> Rates {
        let per = |n: u64| {
            if seconds > 0.0 {
                n as f64 / seconds
            } else {
                0.0
            }
        };
        Rates {
            lines: per(counts.lines),
            bytes: per(counts.bytes),
            sampled: per(counts.sampled),
            burst: per(counts.burst),
            budget: per(counts.budget),
            dropped: per(dropped(counts)),
        }
    }

    /// Whether nothing happened: every rate is zero.
    pub fn is_quiet(&self) -> bool {
        *self == Rates::default()
    }
}

impl AddAssign<&Rates> for Rates {
    fn add_assign(&mut self, r: &Rates) {
        self.lines += r.lines;
        self.bytes += r.bytes;
        self.sampled += r.sampled;
        self.burst += r.burst;
        self.budget += r.budget;
        self.dropped += r.dropped;
    }
}

/// What the writer dropped, every reason added up.
pub fn dropped(c: &CountsView) -> u64 {
    [
        c.queue_full,
        c.reserve_full,
        c.output_closed,
        c.shutdown,
        c.contended,
        c.evicted,
    ]
    .iter()
    .fold(0u64, |sum, n| sum.saturating_add(*n))
}

/// What grew from `before` to `after`, count by count (a count that went down, which a
/// live process does not do, grew by 0).
pub fn growth(after: &CountsView, before: &CountsView) -> CountsView {
    CountsView {
        lines: after.lines.saturating_sub(before.lines),
        bytes: after.bytes.saturating_sub(before.bytes),
        sampled: after.sampled.saturating_sub(before.sampled),
        burst: after.burst.saturating_sub(before.burst),
        budget: after.budget.saturating_sub(before.budget),
        queue_full: after.queue_full.saturating_sub(before.queue_full),
        reserve_full: after.reserve_full.saturating_sub(before.reserve_full),
        output_closed: after.output_closed.saturating_sub(before.output_closed),
        shutdown: after.shutdown.saturating_sub(before.shutdown),
        contended: after.contended.saturating_sub(before.contended),
        evicted: after.evicted.saturating_sub(before.evicted),
        recorded: after.recorded.saturating_sub(before.recorded),
        replayed: after.replayed.saturating_sub(before.replayed),
        expired: after.expired.saturating_sub(before.expired),
    }
}

/// What a row of the fleet view adds up.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Subject {
    /// Every callsite of a target.
    Target {
        /// The target.
        target: String,
    },
    /// One callsite (the same `file:line`, level, name and target on every pod).
    Callsite {
        /// Its target.
        target: String,
        /// Its level.
        level: Level,
        /// Its name (`event src/http.rs:42`, or `log record`).
        name: String,
        /// Its source file, when known.
        #[serde(skip_serializing_if = "Option::is_none")]
        file: Option<String>,
        /// The line in it, when known.
        #[serde(skip_serializing_if = "Option::is_none")]
        line: Option<u32>,
    },
    /// Every callsite of a pod.
    Pod {
        /// Its namespace.
        namespace: String,
        /// Its name.
        pod: String,
    },
    /// The callsites past the ledgers' row cap, together.
    Other,
    /// logpolicy's own lines (policy changes, summaries, warnings).
    Own,
}

impl Subject {
    /// A callsite's subject.
    pub fn callsite(row: &SiteView) -> Subject {
        Subject::Callsite {
            target: row.target.clone(),
            level: row.level,
            name: row.name.clone(),
            file: row.file.clone(),
            line: row.line,
        }
    }

    /// A pod's subject.
    pub fn pod(pod: &PodId) -> Subject {
        Subject::Pod {
            namespace: pod.namespace.clone(),
            pod: pod.name.clone(),
        }
    }

    /// What a row of `by` this callsite-level subject counts in: its target, itself, or
    /// the pod `pod` (`Other` and `Own` stay themselves, except by pod).
    pub fn within(&self, by: By, pod: &PodId) -> Subject {
        match (by, self) {
            (By::Pod, _) => Subject::pod(pod),
            (By::Target, Subject::Callsite { target, .. }) => Subject::Target {
                target: target.clone(),
            },
            _ => self.clone(),
        }
    }

    /// Its name in a table's first column: the target, `file:line` (else the
    /// callsite's name), the pod (`namespace/name` when `qualified`), `other (past the
    /// row cap)` or `logpolicy (own lines)`.
    pub fn label(&self, qualified: bool) -> String {
        match self {
            Subject::Target { target } => target.clone(),
            Subject::Callsite {
                file: Some(file),
                line: Some(line),
                ..
            } => format!("{file}:{line}"),
            Subject::Callsite { name, .. } => name.clone(),
            Subject::Pod { namespace, pod } if qualified => format!("{namespace}/{pod}"),
            Subject::Pod { pod, .. } => pod.clone(),
            Subject::Other => "other (past the row cap)".to_owned(),
            Subject::Own => "logpolicy (own lines)".to_owned(),
        }
    }
}

/// How a fleet view adds up: `--by`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum By {
    /// One row per target.
    #[default]
    Target,
    /// One row per callsite (`file:line`, level, name, target).
    Callsite,
    /// One row per pod.
    Pod,
}

/// One pod's rates over its window: one entry per callsite of its ledger, then `Other`
/// and `Own`.
#[derive(Debug, Clone, PartialEq)]
pub struct PodWindow {
    /// The pod.
    pub pod: PodId,
    /// Its window: the time between its two reads, by its clock.
    pub seconds: f64,
    /// Its callsites ([`Subject::Callsite`]), [`Subject::Other`] and [`Subject::Own`],
    /// with their rates.
    pub sites: Vec<(Subject, Rates)>,
}

/// Why a pod is not measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum SkipReason {
    /// A read failed, or its times make no window.
    Unreadable,
    /// Its process restarted between the reads: its counts began again.
    Restarted,
    /// It was not among the pods of the earlier read (`--watch`: measured from the next
    /// refresh).
    New,
}

/// A pod left out of the totals, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    /// The pod.
    #[serde(flatten)]
    pub pod: PodId,
    /// What kept it out.
    pub reason: SkipReason,
    /// In words.
    pub why: String,
}

/// Every pod's rates over a window, and the pods left out.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Window {
    /// The pods measured, by pod.
    pub pods: Vec<PodWindow>,
    /// The pods left out, with why, by pod.
    pub skipped: Vec<Skipped>,
    /// How many pods were selected (those of the later read).
    pub selected: usize,
}

/// The rates of each pod of `after` from its read in `before` to its read in `after`:
/// per callsite, the growth of each count over the pod's own `readAt` difference. A pod
/// is left out, with why, when either read failed, when it is not in `before`, when its
/// `startedAt` changed (it restarted), or when its read times do not advance.
///
/// A callsite new in `after` counts from zero.
pub fn window(before: &Reads, after: &Reads) -> Window {
    let mut out = Window {
        selected: after.len(),
        ..Window::default()
    };
    for (pod, later) in after {
        let skip = |reason: SkipReason, why: String| Skipped {
            pod: pod.clone(),
            reason,
            why,
        };
        let earlier = match before.get(pod) {
            None => {
                out.skipped.push(skip(
                    SkipReason::New,
                    "new: read once, measured from the next read".to_owned(),
                ));
                continue;
            }
            Some(Err(e)) => {
                out.skipped.push(skip(
                    SkipReason::Unreadable,
                    format!("at the window's start: {e}"),
                ));
                continue;
            }
            Some(Ok(v)) => v,
        };
        let later = match later {
            Err(e) => {
                out.skipped.push(skip(
                    SkipReason::Unreadable,
                    format!("at the window's end: {e}"),
                ));
                continue;
            }
            Ok(v) => v,
        };
        if later.started_at_unix_ms != earlier.started_at_unix_ms
            || later.started_at != earlier.started_at
        {
            out.skipped.push(skip(
                SkipReason::Restarted,
                format!(
                    "restarted between the reads (started {}, then {}): its counts began again",
                    logpolicy::clock::format_rfc3339(earlier.started_at),
                    logpolicy::clock::format_rfc3339(later.started_at)
                ),
            ));
            continue;
        }
        if later.read_at_unix_ms <= earlier.read_at_unix_ms {
            out.skipped.push(skip(
                SkipReason::Unreadable,
                format!(
                    "its read times do not advance ({} ms, then {} ms since the epoch)",
                    earlier.read_at_unix_ms, later.read_at_unix_ms
                ),
            ));
            continue;
        }
        let seconds = (later.read_at_unix_ms - earlier.read_at_unix_ms) as f64 / 1000.0;
        out.pods.push(pod_window(pod, earlier, later, seconds));
    }
    out
}

/// The identity of a ledger row within one pod.
type RowKey<'a> = (
    u8,
    &'a str,
    Level,
    &'a str,
    Option<&'a str>,
    Option<u32>,
    Option<&'a str>,
);

fn row_key(r: &SiteView) -> RowKey<'_> {
    let kind = match r.kind {
        CallsiteKind::Event => 0,
        CallsiteKind::Log => 1,
        CallsiteKind::Unknown => 2,
    };
    (
        kind,
        &r.target,
        r.level,
        &r.name,
        r.file.as_deref(),
        r.line,
        r.module_path.as_deref(),
    )
}

fn pod_window(pod: &PodId, earlier: &SitesView, later: &SitesView, seconds: f64) -> PodWindow {
    let mut base: HashMap<RowKey<'_>, CountsView> = HashMap::with_capacity(earlier.rows.len());
    for r in &earlier.rows {
        let c = base.entry(row_key(r)).or_default();
        *c = sum(c, &r.counts);
    }
    let mut sites: Vec<(Subject, Rates)> = later
        .rows
        .iter()
        .map(|r| {
            let before = base.get(&row_key(r)).copied().unwrap_or_default();
            (
                Subject::callsite(r),
                Rates::of(&growth(&r.counts, &before), seconds),
            )
        })
        .collect();
    sites.push((
        Subject::Other,
        Rates::of(&growth(&later.other.counts, &earlier.other.counts), seconds),
    ));
    sites.push((
        Subject::Own,
        Rates::of(&growth(&later.own, &earlier.own), seconds),
    ));
    PodWindow {
        pod: pod.clone(),
        seconds,
        sites,
    }
}

fn sum(a: &CountsView, b: &CountsView) -> CountsView {
    CountsView {
        lines: a.lines.saturating_add(b.lines),
        bytes: a.bytes.saturating_add(b.bytes),
        sampled: a.sampled.saturating_add(b.sampled),
        burst: a.burst.saturating_add(b.burst),
        budget: a.budget.saturating_add(b.budget),
        queue_full: a.queue_full.saturating_add(b.queue_full),
        reserve_full: a.reserve_full.saturating_add(b.reserve_full),
        output_closed: a.output_closed.saturating_add(b.output_closed),
        shutdown: a.shutdown.saturating_add(b.shutdown),
        contended: a.contended.saturating_add(b.contended),
        evicted: a.evicted.saturating_add(b.evicted),
        recorded: a.recorded.saturating_add(b.recorded),
        replayed: a.replayed.saturating_add(b.replayed),
        expired: a.expired.saturating_add(b.expired),
    }
}

/// How many pods a view covers, of those selected: `3/3 pods`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Coverage {
    /// Pods read (and, for rates, measured).
    pub read: usize,
    /// Pods selected.
    pub selected: usize,
}

impl fmt::Display for Coverage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{} pods", self.read, self.selected)
    }
}

/// One row of a fleet view.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// What it adds up.
    #[serde(flatten)]
    pub subject: Subject,
    /// On how many of the pods measured it exists (`other` and `own`: on how many they
    /// counted something).
    pub pods: usize,
    /// Its rates, added up over those pods.
    #[serde(flatten)]
    pub rates: Rates,
    /// Its share of the total bytes per second, from 0 to 1.
    pub share: f64,
}

/// A window added up.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Fleet {
    /// How it is added up.
    pub by: By,
    /// The rows, biggest bytes per second first; by target or callsite, only the rows
    /// where something happened (see `quiet`).
    pub rows: Vec<Row>,
    /// Every row added up (quiet ones are zero).
    pub total: Rates,
    /// How many rows are left out because nothing happened in them (by target or
    /// callsite; by pod, every pod measured has a row).
    pub quiet: usize,
    /// The pods the rates cover, of those selected.
    pub pods: Coverage,
    /// The pods left out, with why.
    pub left_out: Vec<Skipped>,
    /// Where the rates come from when not from the pods' ledgers: a Prometheus.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<Source>,
}

/// What the answers of a view were read from, shown with it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Source {
    /// The Prometheus.
    pub prometheus: String,
    /// The time every query was evaluated at, seconds since the epoch.
    pub at: f64,
    /// The window of `rate()`, in seconds.
    pub window_seconds: f64,
}

impl Source {
    /// The line under a table: `from Prometheus http://…: rates over 2m0s up to
    /// 2026-12-06T21:30:05.250Z`.
    pub fn line(&self) -> String {
        let at = std::time::UNIX_EPOCH + Duration::from_secs_f64(self.at.max(0.0));
        format!(
            "from Prometheus {}: rates over {} up to {}",
            self.prometheus,
            crate::output::short_duration(Duration::from_secs_f64(self.window_seconds)),
            logpolicy::clock::format_rfc3339(at)
        )
    }
}

/// `window` added up `by` target, callsite or pod: each row's rates summed over the
/// pods (each pod over its own window), its share of the total bytes, biggest bytes per
/// second first (ties: most lines first, then by name).
pub fn aggregate(window: &Window, by: By) -> Fleet {
    let mut rows: BTreeMap<Subject, (Rates, BTreeSet<&PodId>)> = BTreeMap::new();
    for pod in &window.pods {
        if by == By::Pod {
            // A pod measured has its row even when quiet.
            let (_, pods) = rows.entry(Subject::pod(&pod.pod)).or_default();
            pods.insert(&pod.pod);
        }
        for (subject, rates) in &pod.sites {
            let callsite = matches!(subject, Subject::Callsite { .. });
            if !callsite && rates.is_quiet() && by != By::Pod {
                // `other` and `own` exist on every pod: listed only when they count.
                continue;
            }
            let (sum, pods) = rows.entry(subject.within(by, &pod.pod)).or_default();
            *sum += rates;
            pods.insert(&pod.pod);
        }
    }
    let mut total = Rates::default();
    for (rates, _) in rows.values() {
        total += rates;
    }
    let rows = rows
        .into_iter()
        .map(|(subject, (rates, pods))| (subject, (rates, pods.len())));
    let (rows, quiet) = ranked(rows, by, &total);
    Fleet {
        by,
        quiet,
        rows,
        total,
        pods: Coverage {
            read: window.pods.len(),
            selected: window.selected,
        },
        left_out: window.skipped.clone(),
        source: None,
    }
}

/// The rows of a view `by` target, callsite or pod from each subject's rates and pods:
/// by target or callsite only those where something happened, each with its share of
/// `total`'s bytes, biggest bytes per second first (ties: most lines first, then by
/// name); and how many were left out as quiet.
pub fn ranked(
    rows: impl IntoIterator<Item = (Subject, (Rates, usize))>,
    by: By,
    total: &Rates,
) -> (Vec<Row>, usize) {
    let mut quiet = 0;
    let mut rows: Vec<Row> = rows
        .into_iter()
        .filter(|(_, (rates, _))| {
            let keep = by == By::Pod || !rates.is_quiet();
            quiet += usize::from(!keep);
            keep
        })
        .map(|(subject, (rates, pods))| Row {
            subject,
            pods,
            rates,
            share: if total.bytes > 0.0 {
                rates.bytes / total.bytes
            } else {
                0.0
            },
        })
        .collect();
    rows.sort_by(|a, b| {
        b.rates
            .bytes
            .total_cmp(&a.rates.bytes)
            .then_with(|| b.rates.lines.total_cmp(&a.rates.lines))
            .then_with(|| a.subject.cmp(&b.subject))
    });
    (rows, quiet)
}

/// What ends a fleet command's table: `2/3 pods read; unreadable: shop-x (why)`, then
/// `; restarted: …` and `; new: …` for the pods left out so (`namespace/name` when
/// `qualified`).
pub fn pods_line(pods: Coverage, left_out: &[Skipped], qualified: bool) -> String {
    let mut line = format!("{pods} read");
    for (reason, word) in [
        (SkipReason::Unreadable, "unreadable"),
        (SkipReason::Restarted, "restarted"),
        (SkipReason::New, "new"),
    ] {
        let these: Vec<String> = left_out
            .iter()
            .filter(|s| s.reason == reason)
            .map(|s| format!("{} ({})", s.pod.label(qualified), s.why))
            .collect();
        if !these.is_empty() {
            line.push_str(&format!("; {word}: {}", these.join(", ")));
        }
    }
    line
}

/// A level in force for a target, and on how many pods.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LevelCount {
    /// The level.
    pub level: Level,
    /// On how many pods it is the level in force.
    pub pods: usize,
}

/// A target some pod knows (some callsite of it ran).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KnownTarget {
    /// The target.
    pub target: String,
    /// The levels its callsites have on any pod, least verbose first.
    pub levels: Vec<Level>,
    /// The level in force for it now, each distinct value with the pods that have it,
    /// most pods first.
    pub level_now: Vec<LevelCount>,
    /// On how many of the pods read it is known.
    pub pods: usize,
}

/// Every target the pods read know.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KnownTargets {
    /// The targets, by name.
    pub targets: Vec<KnownTarget>,
    /// The pods read, of those selected.
    pub pods: Coverage,
    /// The pods that could not be read, with why.
    pub left_out: Vec<Skipped>,
}

impl KnownTargets {
    /// The names of the targets.
    pub fn names(&self) -> Vec<&str> {
        self.targets.iter().map(|t| t.target.as_str()).collect()
    }
}

/// Every target of the views in `reads` (their `targets`): the levels of its callsites,
/// the level in force for it now on each pod, and on how many pods it is known.
pub fn known_targets(reads: &Reads) -> KnownTargets {
    #[derive(Default)]
    struct Acc {
        levels: BTreeSet<Level>,
        now: BTreeMap<Level, usize>,
        pods: usize,
    }
    let mut targets: BTreeMap<&str, Acc> = BTreeMap::new();
    let mut left_out = Vec::new();
    let mut read = 0;
    for (pod, view) in reads {
        let view = match view {
            Ok(v) => v,
            Err(e) => {
                left_out.push(Skipped {
                    pod: pod.clone(),
                    reason: SkipReason::Unreadable,
                    why: e.clone(),
                });
                continue;
            }
        };
        read += 1;
        let mut seen = BTreeSet::new();
        for t in &view.targets {
            let acc = targets.entry(&t.target).or_default();
            acc.levels.extend(t.levels.iter().copied());
            // A target listed twice by one pod counts once.
            if seen.insert(t.target.as_str()) {
                *acc.now.entry(t.level_now).or_default() += 1;
                acc.pods += 1;
            }
        }
    }
    let targets = targets
        .into_iter()
        .map(|(target, acc)| {
            let mut level_now: Vec<LevelCount> = acc
                .now
                .into_iter()
                .map(|(level, pods)| LevelCount { level, pods })
                .collect();
            level_now.sort_by(|a, b| b.pods.cmp(&a.pods).then(a.level.cmp(&b.level)));
            KnownTarget {
                target: target.to_owned(),
                levels: acc.levels.into_iter().collect(),
                level_now,
                pods: acc.pods,
            }
        })
        .collect();
    KnownTargets {
        targets,
        pods: Coverage {
            read,
            selected: reads.len(),
        },
        left_out,
    }
}

/// Views and pods for the tests of the modules that compute from reads.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::*;
    use logpolicy::wire::{CallsiteKind, OtherSitesView, SiteView, TargetView};
    use std::time::{Duration, UNIX_EPOCH};

    pub(crate) fn pod(name: &str) -> PodId {
        PodId {
            namespace: "shop".into(),
            name: name.into(),
        }
    }

    pub(crate) fn counts(lines: u64, bytes: u64) -> CountsView {
        CountsView {
            lines,
            bytes,
            ..CountsView::default()
        }
    }

    pub(crate) fn site(
        target: &str,
        level: Level,
        file: &str,
        line: u32,
        c: CountsView,
    ) -> SiteView {
        SiteView {
            kind: CallsiteKind::Event,
            target: target.into(),
            level,
            name: format!("event {file}:{line}"),
            file: Some(file.into()),
            line: Some(line),
            module_path: Some(target.into()),
            counts: c,
        }
    }

    /// A view read at `read_ms` of a process started at `started_ms`.
    pub(crate) fn view(
        started_ms: u64,
        read_ms: u64,
        rows: Vec<SiteView>,
        own: CountsView,
    ) -> SitesView {
        let at = |ms: u64| UNIX_EPOCH + Duration::from_millis(ms);
        let mut targets: Vec<TargetView> = Vec::new();
        for r in &rows {
            match targets.iter_mut().find(|t| t.target == r.target) {
                Some(t) => {
                    t.levels.push(r.level);
                    t.levels.sort();
                    t.callsites += 1;
                }
                None => targets.push(TargetView {
                    target: r.target.clone(),
                    levels: vec![r.level],
                    level_now: Level::Info,
                    callsites: 1,
                    counts: CountsView::default(),
                }),
            }
        }
        SitesView {
            started_at: at(started_ms),
            started_at_unix_ms: started_ms,
            read_at: at(read_ms),
            read_at_unix_ms: read_ms,
            max_rows: 4096,
            writer: None,
            totals: CountsView::default(),
            own,
            other: OtherSitesView::default(),
            targets,
            rows,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::*;
    use super::*;

    const START: u64 = 1_800_000_000_000;

    /// Pod a: a 10 s window; pod b: a 5 s window, and a callsite new in it.
    fn two_pods() -> (Reads, Reads) {
        let http = |c| site("shop::http", Level::Info, "src/http.rs", 42, c);
        let db_debug = |c| site("shop::db", Level::Debug, "src/db.rs", 7, c);
        let db_warn = |c| site("shop::db", Level::Warn, "src/db.rs", 9, c);
        let before = Reads::from([
            (
                pod("a"),
                Ok(view(
                    START,
                    START + 60_000,
                    vec![
                        http(counts(100, 10_000)),
                        db_debug(CountsView {
                            sampled: 50,
                            ..counts(10, 1_000)
                        }),
                        db_warn(counts(1, 100)),
                    ],
                    counts(1, 150),
                )),
            ),
            (
                pod("b"),
                Ok(view(
                    START + 5,
                    START + 60_000,
                    vec![http(counts(0, 0))],
                    counts(1, 150),
                )),
            ),
        ]);
        let after = Reads::from([
            (
                pod("a"),
                Ok(view(
                    START,
                    START + 70_000,
                    vec![
                        // +200 lines, +20,000 bytes, +30 dropped (queue full, evicted).
                        http(CountsView {
                            queue_full: 20,
                            evicted: 10,
                            ..counts(300, 30_000)
                        }),
                        // +5 lines, +500 bytes, +150 sampled, +20 over budget.
                        db_debug(CountsView {
                            sampled: 200,
                            budget: 20,
                            ..counts(15, 1_500)
                        }),
                        // Nothing new.
                        db_warn(counts(1, 100)),
                    ],
                    // +5 lines of its own, +150 bytes.
                    counts(6, 300),
                )),
            ),
            (
                pod("b"),
                Ok(view(
                    START + 5,
                    START + 65_000,
                    vec![
                        // +50 lines, +5,000 bytes, +10 over the burst limit in 5 s.
                        http(CountsView {
                            burst: 10,
                            ..counts(50, 5_000)
                        }),
                        // New in the window: from zero, +5 lines, +400 bytes.
                        db_warn(counts(5, 400)),
                    ],
                    counts(1, 150),
                )),
            ),
        ]);
        (before, after)
    }

    fn rates(lines: f64, bytes: f64) -> Rates {
        Rates {
            lines,
            bytes,
            ..Rates::default()
        }
    }

    #[test]
    fn each_pod_is_measured_over_its_own_window() {
        let (before, after) = two_pods();
        let w = window(&before, &after);
        assert_eq!((w.selected, w.skipped.len()), (2, 0));
        assert_eq!(w.pods[0].seconds, 10.0);
        assert_eq!(w.pods[1].seconds, 5.0);
        let b: Vec<(String, Rates)> = w.pods[1]
            .sites
            .iter()
            .map(|(s, r)| (s.label(false), *r))
            .collect();
        assert_eq!(
            b,
            [
                (
                    "src/http.rs:42".to_owned(),
                    Rates {
                        burst: 2.0,
                        ..rates(10.0, 1_000.0)
                    }
                ),
                ("src/db.rs:9".to_owned(), rates(1.0, 80.0)),
                ("other (past the row cap)".to_owned(), Rates::default()),
                ("logpolicy (own lines)".to_owned(), Rates::default()),
            ]
        );
    }

    #[test]
    fn by_target_adds_up_the_callsites_of_every_pod_biggest_first() {
        let (before, after) = two_pods();
        let fleet = aggregate(&window(&before, &after), By::Target);
        // shop::http: a 20,000 B / 10 s + b 5,000 B / 5 s = 3,000 B/s; 20 + 10 lines/s.
        // shop::db: a 500 B / 10 s + b 400 B / 5 s = 130 B/s; 0.5 + 1 lines/s.
        // own: a 150 B / 10 s = 15 B/s, 0.5 lines/s.
        let got: Vec<(String, usize, Rates)> = fleet
            .rows
            .iter()
            .map(|r| (r.subject.label(false), r.pods, r.rates))
            .collect();
        assert_eq!(
            got,
            [
                (
                    "shop::http".to_owned(),
                    2,
                    Rates {
                        burst: 2.0,
                        dropped: 3.0,
                        ..rates(30.0, 3_000.0)
                    }
                ),
                (
                    "shop::db".to_owned(),
                    2,
                    Rates {
                        sampled: 15.0,
                        budget: 2.0,
                        ..rates(1.5, 130.0)
                    }
                ),
                ("logpolicy (own lines)".to_owned(), 1, rates(0.5, 15.0)),
            ]
        );
        assert_eq!(
            fleet.total,
            Rates {
                sampled: 15.0,
                burst: 2.0,
                budget: 2.0,
                dropped: 3.0,
                ..rates(32.0, 3_145.0)
            }
        );
        assert_eq!(fleet.rows[0].share, 3_000.0 / 3_145.0);
        assert_eq!(fleet.rows[2].share, 15.0 / 3_145.0);
        let shares: f64 = fleet.rows.iter().map(|r| r.share).sum();
        assert!((shares - 1.0).abs() < 1e-12, "{shares}");
        assert_eq!(fleet.pods.to_string(), "2/2 pods");
        assert_eq!(fleet.quiet, 0);
        assert_eq!(
            pods_line(fleet.pods, &fleet.left_out, false),
            "2/2 pods read"
        );
    }

    #[test]
    fn by_callsite_keeps_file_line_level_and_target_and_counts_quiet_rows() {
        let (mut before, mut after) = two_pods();
        // A callsite of a that wrote before the window and not in it: quiet.
        let pay = || {
            site(
                "shop::payment",
                Level::Error,
                "src/pay.rs",
                9,
                counts(3, 300),
            )
        };
        for reads in [&mut before, &mut after] {
            if let Some(Ok(v)) = reads.get_mut(&pod("a")) {
                v.rows.push(pay());
            }
        }
        let fleet = aggregate(&window(&before, &after), By::Callsite);
        assert_eq!(fleet.quiet, 1);
        let got: Vec<(String, f64)> = fleet
            .rows
            .iter()
            .map(|r| (r.subject.label(false), r.rates.bytes))
            .collect();
        assert_eq!(
            got,
            [
                ("src/http.rs:42".to_owned(), 3_000.0),
                ("src/db.rs:9".to_owned(), 80.0),
                ("src/db.rs:7".to_owned(), 50.0),
                ("logpolicy (own lines)".to_owned(), 15.0),
            ]
        );
        // src/db.rs:9 wrote nothing new on a: it counts on b alone, but exists on both.
        assert_eq!(fleet.rows[1].pods, 2);
        assert_eq!(
            fleet.rows[2].subject,
            Subject::Callsite {
                target: "shop::db".into(),
                level: Level::Debug,
                name: "event src/db.rs:7".into(),
                file: Some("src/db.rs".into()),
                line: Some(7),
            }
        );
        assert_eq!(fleet.total.bytes, 3_145.0);
        let json = serde_json::to_value(&fleet).unwrap();
        assert_eq!(json["by"], "callsite");
        assert_eq!(json["rows"][0]["kind"], "callsite");
        assert_eq!(json["rows"][0]["file"], "src/http.rs");
        assert_eq!(json["rows"][0]["line"], 42);
        assert_eq!(json["rows"][0]["level"], "info");
        assert_eq!(json["rows"][0]["bytesPerSecond"], 3_000.0);
        assert_eq!(json["rows"][3]["kind"], "own");
        assert_eq!(json["total"]["linesPerSecond"], 32.0);
        assert_eq!(json["pods"]["read"], 2);
    }

    #[test]
    fn by_pod_has_a_row_for_every_pod_measured_even_a_quiet_one() {
        let (mut before, mut after) = two_pods();
        // c: read twice, wrote nothing.
        before.insert(
            pod("c"),
            Ok(view(START, START + 60_000, vec![], counts(1, 150))),
        );
        after.insert(
            pod("c"),
            Ok(view(START, START + 70_000, vec![], counts(1, 150))),
        );
        let fleet = aggregate(&window(&before, &after), By::Pod);
        let got: Vec<(String, f64, f64)> = fleet
            .rows
            .iter()
            .map(|r| (r.subject.label(true), r.rates.lines, r.rates.bytes))
            .collect();
        assert_eq!(
            got,
            [
                // a: (20,000 + 500 + 150) B / 10 s; (200 + 5 + 5) lines / 10 s.
                ("shop/a".to_owned(), 21.0, 2_065.0),
                // b: (5,000 + 400) B / 5 s; 55 lines / 5 s.
                ("shop/b".to_owned(), 11.0, 1_080.0),
                ("shop/c".to_owned(), 0.0, 0.0),
            ]
        );
        assert!(fleet.rows.iter().all(|r| r.pods == 1));
        assert_eq!(fleet.pods.to_string(), "3/3 pods");
        assert_eq!(fleet.quiet, 0);
        assert_eq!(serde_json::to_value(&fleet).unwrap()["rows"][2]["pod"], "c");
    }

    #[test]
    fn a_restarted_pod_is_left_out_with_why() {
        let (before, mut after) = two_pods();
        // b restarted: a later start, counts from zero (smaller than before).
        let restarted = view(
            START + 62_000,
            START + 65_000,
            vec![site(
                "shop::http",
                Level::Info,
                "src/http.rs",
                42,
                counts(1, 100),
            )],
            counts(1, 150),
        );
        after.insert(pod("b"), Ok(restarted));
        let fleet = aggregate(&window(&before, &after), By::Target);
        assert_eq!(fleet.pods.to_string(), "1/2 pods");
        assert_eq!(fleet.left_out.len(), 1);
        assert_eq!(fleet.left_out[0].pod, pod("b"));
        assert_eq!(fleet.left_out[0].reason, SkipReason::Restarted);
        assert_eq!(
            fleet.left_out[0].why,
            "restarted between the reads (started 2027-01-15T08:00:00.005000000Z, then 2027-01-15T08:01:02Z): its counts began again"
        );
        // Only a's rates: shop::http 20,000 B / 10 s.
        assert_eq!(fleet.rows[0].rates.bytes, 2_000.0);
        assert_eq!(fleet.total.bytes, 2_065.0);
        let line = pods_line(fleet.pods, &fleet.left_out, false);
        assert!(
            line.starts_with("1/2 pods read; restarted: b (restarted between the reads"),
            "{line}"
        );
    }

    #[test]
    fn an_unreadable_pod_is_left_out_with_why() {
        let (mut before, mut after) = two_pods();
        before.insert(
            pod("c"),
            Err("pod proxy: no answer in 3 s; 10.0.0.3:9095: no answer in 2 s".into()),
        );
        after.insert(
            pod("c"),
            Ok(view(START, START + 70_000, vec![], counts(0, 0))),
        );
        after.insert(pod("b"), Err("pod proxy: 503 Service Unavailable".into()));
        after.insert(
            pod("d"),
            Ok(view(START, START + 70_000, vec![], counts(0, 0))),
        );
        let w = window(&before, &after);
        assert_eq!(w.selected, 4);
        let fleet = aggregate(&w, By::Target);
        assert_eq!(fleet.pods.to_string(), "1/4 pods");
        assert_eq!(fleet.total.bytes, 2_065.0);
        assert_eq!(
            pods_line(fleet.pods, &fleet.left_out, false),
            "1/4 pods read; unreadable: b (at the window's end: pod proxy: 503 Service Unavailable), \
             c (at the window's start: pod proxy: no answer in 3 s; 10.0.0.3:9095: no answer in 2 s); \
             new: d (new: read once, measured from the next read)"
        );
        // Read times that do not advance make no window.
        let same = Reads::from([(
            pod("a"),
            Ok(view(START, START + 1_000, vec![], counts(0, 0))),
        )]);
        let w = window(&same, &same);
        assert_eq!(w.skipped[0].reason, SkipReason::Unreadable);
        assert!(
            w.skipped[0].why.contains("do not advance"),
            "{:?}",
            w.skipped
        );
        // No pod measured: every rate is zero, no share is claimed.
        let fleet = aggregate(&w, By::Target);
        assert!(fleet.rows.is_empty() && fleet.total.is_quiet());
        assert_eq!(fleet.pods.to_string(), "0/1 pods");
    }

    #[test]
    fn known_targets_give_levels_the_level_in_force_per_pod_and_how_many_pods() {
        let (_, after) = two_pods();
        let mut reads = after;
        // b runs shop::http at debug now; c cannot be read.
        if let Some(Ok(v)) = reads.get_mut(&pod("b")) {
            v.targets[0].level_now = Level::Debug;
        }
        reads.insert(pod("c"), Err("pod proxy: 404 Not Found".into()));
        let known = known_targets(&reads);
        assert_eq!(known.names(), ["shop::db", "shop::http"]);
        let db = &known.targets[0];
        assert_eq!(db.levels, [Level::Warn, Level::Debug]);
        assert_eq!(
            db.level_now,
            [LevelCount {
                level: Level::Info,
                pods: 2
            }]
        );
        assert_eq!(db.pods, 2);
        let http = &known.targets[1];
        assert_eq!(
            http.level_now,
            [
                LevelCount {
                    level: Level::Info,
                    pods: 1
                },
                LevelCount {
                    level: Level::Debug,
                    pods: 1
                }
            ]
        );
        assert_eq!(known.pods.to_string(), "2/3 pods");
        assert_eq!(
            pods_line(known.pods, &known.left_out, false),
            "2/3 pods read; unreadable: c (pod proxy: 404 Not Found)"
        );
        let json = serde_json::to_value(&known).unwrap();
        assert_eq!(json["targets"][1]["levelNow"][1]["level"], "debug");
        assert_eq!(json["leftOut"][0]["name"], "c");
        assert_eq!(json["leftOut"][0]["reason"], "unreadable");
    }

    #[test]
    fn more_pods_than_the_bound_ask_for_a_selector_or_read_a_sample_naming_it() {
        let pods = |n: usize| Pods {
            pods: (0..n)
                .map(|i| {
                    let mut p = Pod::default();
                    p.metadata.namespace = Some("shop".into());
                    p.metadata.name = Some(format!("shop-{i:03}"));
                    p
                })
                .collect(),
            not_opted_in: vec![],
            which: "-l app=shop".into(),
        };
        let (all, note) = bounded(pods(MAX_POD_READS), None).unwrap();
        assert_eq!((all.pods.len(), note), (MAX_POD_READS, None));
        let e = bounded(pods(MAX_POD_READS + 1), None).unwrap_err();
        assert_eq!(e.code, exit::USAGE);
        assert!(
            e.message
                .starts_with("201 pods of -l app=shop are selected"),
            "{}",
            e.message
        );
        for flag in [
            "-l SELECTOR",
            "--sample-pods N",
            "--prometheus URL",
            "LOGPOLICY_PROMETHEUS_URL",
        ] {
            assert!(e.message.contains(flag), "{flag}: {}", e.message);
        }
        let (some, note) = bounded(pods(1_000), Some(4)).unwrap();
        let names: Vec<&str> = some
            .pods
            .iter()
            .filter_map(|p| p.metadata.name.as_deref())
            .collect();
        assert_eq!(names, ["shop-000", "shop-250", "shop-500", "shop-750"]);
        assert_eq!(some.which, "a sample of 4 of the 1000 pods of -l app=shop");
        assert_eq!(
            note.unwrap(),
            "reading a sample of 4 of the 1000 pods of -l app=shop (--sample-pods 4, spread by namespace and name): \
             shop/shop-000 shop/shop-250 shop/shop-500 shop/shop-750"
        );
        // A sample as large as the selection reads it all, without a note.
        let (all, note) = bounded(pods(3), Some(5)).unwrap();
        assert_eq!((all.pods.len(), note), (3, None));
    }

    #[test]
    fn dropped_adds_up_every_writer_reason() {
        let c = CountsView {
            queue_full: 1,
            reserve_full: 2,
            output_closed: 4,
            shutdown: 8,
            contended: 16,
            evicted: 32,
            sampled: 1_000,
            ..CountsView::default()
        };
        assert_eq!(dropped(&c), 63);
        assert_eq!(Rates::of(&c, 0.0), Rates::default());
    }
}
