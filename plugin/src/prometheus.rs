//! The fleet view from a Prometheus: `top`, `targets` and `suggest` with `--prometheus
//! URL` (or `$LOGPOLICY_PROMETHEUS_URL`) read the rates from the series the pods'
//! `/metrics` export, not from each pod through the API server's pod proxy.
//!
//! The series (`logpolicy::admin`'s metrics, scraped by the chart's PodMonitor, which
//! gives each the pod's `namespace` and `pod` labels):
//! - `logpolicy_target_bytes_total{target,level}` and `logpolicy_target_lines_total`:
//!   what each target wrote, by callsite level; a pod lists its 50 biggest targets
//!   (`--metric-targets`), the rest as `target="other"` by level; `target="other"`
//!   without a level counts the callsites past the ledger's row cap, and
//!   `target="logpolicy"` (without a level, on every pod) logpolicy's own lines;
//! - `logpolicy_events_total{level,outcome}`: events `sampled`, over the `burst` limit or
//!   the byte `budget` (by pod, not by target);
//! - `logpolicy_writer_dropped_total{level,reason}`: lines the writer dropped.
//!
//! Every figure is one instant query (`POST /api/v1/query`, all at the same `time`) of
//! `rate()` over the window, summed in Prometheus: the plugin makes a handful of
//! requests whatever the number of pods. What Prometheus does not hold (each
//! callsite's `file:line`, the level in force now) comes from the pods themselves,
//! [`DRILL_DOWN_PODS`] at most: those writing the most bytes.
//!
//! The queries ([`Query`]) and the reading of the answers ([`vector`], [`fleet`],
//! [`known_targets`]) are pure; [`Prometheus::query`] is the I/O.
//!
//! ```
//! use kubectl_logpolicy::prometheus::{Query, Scope};
//! use std::time::Duration;
//!
//! let q = Query::new(Scope::Namespace("shop".into()), Duration::from_secs(120));
//! assert_eq!(
//!     q.sum_rate("logpolicy_target_bytes_total", "", &["target", "level"]),
//!     r#"sum by (target, level) (rate(logpolicy_target_bytes_total{namespace="shop"}[120s]))"#
//! );
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use logpolicy::Level;

use crate::cli::PodsArgs;
use crate::cluster::Kube;
use crate::exit::{Failure, Result};
use crate::flags::PrometheusUrl;
pub use crate::flags::PROMETHEUS_WINDOW;
use crate::fleet::{
    By, Coverage, Fleet, KnownTarget, KnownTargets, LevelCount, PodId, Rates, SkipReason, Skipped,
    Source, Subject,
};
use crate::output::printable;

/// The most pods read for what Prometheus does not hold (`top --by callsite`, the
/// levels in force of `targets`, the sampling in force of `suggest`): the pods writing
/// the most bytes.
pub const DRILL_DOWN_PODS: usize = 20;

/// How long Prometheus has to answer one query.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(30);

/// The largest answer read from Prometheus.
pub const MAX_ANSWER: usize = 256 << 20;

/// The series of what each target wrote.
pub const BYTES: &str = "logpolicy_target_bytes_total";
/// The series of the lines each target wrote.
pub const LINES: &str = "logpolicy_target_lines_total";
/// Events by level and outcome.
pub const EVENTS: &str = "logpolicy_events_total";
/// Lines the writer dropped.
pub const DROPPED: &str = "logpolicy_writer_dropped_total";

/// The `target` of the targets a pod does not list, and of the callsites past its
/// ledger's row cap (without a level).
const OTHER_TARGET: &str = "other";
/// The `target` of logpolicy's own lines.
const OWN_TARGET: &str = "logpolicy";

/// Which pods' series a query reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Every pod Prometheus holds series of in a namespace.
    Namespace(String),
    /// Every pod Prometheus holds series of.
    Every,
    /// These pods, by namespace (a workload's or a selector's, listed by the API server).
    Pods(BTreeMap<String, BTreeSet<String>>),
}

impl Scope {
    /// The scope of `pods`.
    pub fn pods<'a>(pods: impl IntoIterator<Item = &'a PodId>) -> Scope {
        let mut by: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for p in pods {
            by.entry(p.namespace.clone())
                .or_default()
                .insert(p.name.clone());
        }
        Scope::Pods(by)
    }

    /// Whether a pod is in it.
    pub fn holds(&self, pod: &PodId) -> bool {
        match self {
            Scope::Namespace(ns) => *ns == pod.namespace,
            Scope::Every => true,
            Scope::Pods(by) => by
                .get(&pod.namespace)
                .is_some_and(|n| n.contains(&pod.name)),
        }
    }

    /// The label matchers of each part of it (one per namespace for [`Scope::Pods`]).
    fn matchers(&self) -> Vec<String> {
        match self {
            Scope::Namespace(ns) => vec![format!("namespace=\"{}\"", quoted(ns))],
            Scope::Every => vec![String::new()],
            Scope::Pods(by) => by
                .iter()
                .map(|(ns, names)| {
                    let alternatives: Vec<String> =
                        names.iter().map(|n| regex_literal(n)).collect();
                    format!(
                        "namespace=\"{}\",pod=~\"{}\"",
                        quoted(ns),
                        quoted(&alternatives.join("|"))
                    )
                })
                .collect(),
        }
    }
}

/// `s` inside a PromQL double-quoted string.
fn quoted(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// `s` as a regular expression matching itself (RE2 syntax).
fn regex_literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 4);
    for c in s.chars() {
        if !c.is_ascii_alphanumeric() && c != '-' && c != '_' {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A PromQL range: `120s`, or `1500ms`.
fn range(window: Duration) -> String {
    let ms = window.as_millis().max(1);
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// The queries of one view: its scope and window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// The pods.
    pub scope: Scope,
    /// The window of `rate()`.
    pub window: Duration,
}

impl Query {
    /// The queries of `scope` over `window`.
    pub fn new(scope: Scope, window: Duration) -> Query {
        Query { scope, window }
    }

    /// `f(metric{scope,extra}[window])` for each part of the scope, joined by `or` (the
    /// parts are disjoint: one namespace each).
    pub fn over(&self, f: &str, metric: &str, extra: &str) -> String {
        let range = range(self.window);
        let parts: Vec<String> = self
            .scope
            .matchers()
            .into_iter()
            .map(|m| {
                let labels = [m.as_str(), extra]
                    .into_iter()
                    .filter(|s| !s.is_empty())
                    .collect::<Vec<_>>()
                    .join(",");
                format!("{f}({metric}{{{labels}}}[{range}])")
            })
            .collect();
        parts.join(" or ")
    }

    /// `sum by (by) (rate(metric{...}[window]))`: a rate per second, summed by `by`.
    pub fn sum_rate(&self, metric: &str, extra: &str, by: &[&str]) -> String {
        format!(
            "sum by ({}) ({})",
            by.join(", "),
            self.over("rate", metric, extra)
        )
    }

    /// The pods with a rate of their own lines over the window (every pod scraped at
    /// least twice in it): one sample per pod.
    pub fn pods_measured(&self) -> String {
        format!(
            "count by (namespace, pod) ({})",
            self.over("rate", BYTES, &format!("target=\"{OWN_TARGET}\""))
        )
    }

    /// On how many pods each target (and level, with `level`) has a series in the
    /// window.
    pub fn pods_per_target(&self, level: bool) -> String {
        let key = if level { "target, level" } else { "target" };
        format!(
            "count by ({key}) (count by (namespace, pod, {key}) ({}))",
            self.over("rate", BYTES, "")
        )
    }

    /// The pods writing the most bytes, at most `n`.
    pub fn biggest_pods(&self, n: usize) -> String {
        format!(
            "topk({n}, {})",
            self.sum_rate(BYTES, "", &["namespace", "pod"])
        )
    }
}

/// One sample of an instant query: its labels and value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Its labels (a label Prometheus leaves out is empty).
    pub labels: BTreeMap<String, String>,
    /// Its value.
    pub value: f64,
}

impl Sample {
    /// A label's value, empty when absent.
    pub fn label(&self, name: &str) -> &str {
        self.labels.get(name).map_or("", String::as_str)
    }

    /// Its `namespace` and `pod`.
    pub fn pod(&self) -> PodId {
        PodId {
            namespace: self.label("namespace").to_owned(),
            name: self.label("pod").to_owned(),
        }
    }
}

/// The samples of an instant query's answer (`status` and body of `/api/v1/query`);
/// `Err` says what is wrong: an error Prometheus reports (`bad_data: parse error…`),
/// a status other than 2xx, an answer that is not the API's JSON or not a vector.
/// Labels and values are made [`printable`]; a sample whose value is not a finite
/// number (`NaN`, `+Inf`) is left out.
pub fn vector(status: u16, body: &str) -> std::result::Result<Vec<Sample>, String> {
    let json: serde_json::Value = match serde_json::from_str(body) {
        Ok(v) => v,
        Err(_) => {
            let start: String = body.chars().take(200).collect();
            return Err(format!(
                "HTTP {status}, not an answer of Prometheus's API: {:?}",
                printable(start.trim())
            ));
        }
    };
    if json["status"] != "success" || !(200..300).contains(&status) {
        let kind = json["errorType"].as_str().unwrap_or("error");
        let error = json["error"].as_str().unwrap_or("no error message");
        return Err(format!("HTTP {status}: {kind}: {}", printable(error)));
    }
    let data = &json["data"];
    if data["resultType"] != "vector" {
        return Err(format!(
            "a {} answer, not a vector",
            printable(&data["resultType"].to_string())
        ));
    }
    let results = data["result"]
        .as_array()
        .ok_or_else(|| "an answer without a result list".to_owned())?;
    let mut out = Vec::with_capacity(results.len());
    for r in results {
        let labels = r["metric"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| {
                        (
                            printable(k).into_owned(),
                            printable(v.as_str().unwrap_or_default()).into_owned(),
                        )
                    })
                    .collect()
            })
            .ok_or_else(|| "a sample without labels".to_owned())?;
        let value = r["value"][1]
            .as_str()
            .and_then(|v| v.parse::<f64>().ok())
            .ok_or_else(|| "a sample without a value".to_owned())?;
        if value.is_finite() {
            out.push(Sample { labels, value });
        }
    }
    Ok(out)
}

/// The answers a `top` view is made of.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Answers {
    /// Bytes per second, by `target, level` (by `namespace, pod` for `--by pod`).
    pub bytes: Vec<Sample>,
    /// Lines per second, likewise.
    pub lines: Vec<Sample>,
    /// On how many pods each target has series (by `target`; empty for `--by pod`).
    pub pods_per_target: Vec<Sample>,
    /// The pods measured ([`Query::pods_measured`]).
    pub measured: Vec<Sample>,
    /// Events held back per second, by `outcome` (and `namespace, pod` for `--by pod`).
    pub held: Vec<Sample>,
    /// Lines dropped per second, in all (by `namespace, pod` for `--by pod`).
    pub dropped: Vec<Sample>,
}

/// The subject of a per-target series: the target, [`Subject::Other`] for `other`
/// without a level (callsites past the row cap), [`Subject::Own`] for `logpolicy`.
pub fn subject_of(s: &Sample) -> Subject {
    match (s.label("target"), s.label("level")) {
        (OWN_TARGET, _) => Subject::Own,
        (OTHER_TARGET, "") => Subject::Other,
        (target, _) => Subject::Target {
            target: target.to_owned(),
        },
    }
}

/// The pods measured and the pods left out: of `listed` (the pods the API server
/// listed, for a workload or a selector) those Prometheus has no rate of are left out
/// with why; without `listed`, every pod Prometheus measured is selected.
fn coverage(
    measured: &[Sample],
    listed: Option<&[PodId]>,
    window: Duration,
) -> (Coverage, Vec<Skipped>, BTreeSet<PodId>) {
    let measured: BTreeSet<PodId> = measured.iter().map(Sample::pod).collect();
    match listed {
        None => (
            Coverage {
                read: measured.len(),
                selected: measured.len(),
            },
            Vec::new(),
            measured,
        ),
        Some(listed) => {
            let left_out: Vec<Skipped> = listed
                .iter()
                .filter(|p| !measured.contains(p))
                .map(|p| Skipped {
                    pod: p.clone(),
                    reason: SkipReason::Unreadable,
                    why: format!(
                        "no rate in Prometheus over the last {}: not scraped twice in it (new, or not scraped)",
                        crate::output::short_duration(window)
                    ),
                })
                .collect();
            let read: BTreeSet<PodId> = listed
                .iter()
                .filter(|p| measured.contains(p))
                .cloned()
                .collect();
            (
                Coverage {
                    read: read.len(),
                    selected: listed.len(),
                },
                left_out,
                read,
            )
        }
    }
}

/// The view `top` prints from Prometheus's `answers`, `by` target or pod (by callsite
/// comes from the pods: [`DRILL_DOWN_PODS`]). By target, what policy held back and the
/// writer dropped is in the total only (Prometheus holds it by pod, not by target).
pub fn fleet(by: By, answers: &Answers, listed: Option<&[PodId]>, window: Duration) -> Fleet {
    let (pods, left_out, measured) = coverage(&answers.measured, listed, window);
    let keep = |p: &PodId| listed.is_none() || measured.contains(p);
    let mut rows: BTreeMap<Subject, (Rates, usize)> = BTreeMap::new();
    let mut total = Rates::default();
    match by {
        By::Pod => {
            for p in &measured {
                rows.insert(Subject::pod(p), (Rates::default(), 1));
            }
            let mut add = |samples: &[Sample], f: &dyn Fn(&mut Rates, f64, &Sample)| {
                for s in samples {
                    let pod = s.pod();
                    if !keep(&pod) {
                        continue;
                    }
                    let (r, _) = rows
                        .entry(Subject::pod(&pod))
                        .or_insert((Rates::default(), 1));
                    f(r, s.value, s);
                    f(&mut total, s.value, s);
                }
            };
            add(&answers.bytes, &|r, v, _| r.bytes += v);
            add(&answers.lines, &|r, v, _| r.lines += v);
            add(&answers.held, &add_held);
            add(&answers.dropped, &|r, v, _| r.dropped += v);
        }
        _ => {
            let pods_of: BTreeMap<Subject, usize> = answers
                .pods_per_target
                .iter()
                .map(|s| (subject_of(s), s.value as usize))
                .fold(BTreeMap::new(), |mut m, (k, v)| {
                    *m.entry(k).or_default() += v;
                    m
                });
            for (samples, bytes) in [(&answers.bytes, true), (&answers.lines, false)] {
                for s in samples {
                    let subject = subject_of(s);
                    let pods = pods_of.get(&subject).copied().unwrap_or_default();
                    let (r, _) = rows.entry(subject).or_insert((Rates::default(), pods));
                    if bytes {
                        r.bytes += s.value;
                        total.bytes += s.value;
                    } else {
                        r.lines += s.value;
                        total.lines += s.value;
                    }
                }
            }
            for s in &answers.held {
                add_held(&mut total, s.value, s);
            }
            for s in &answers.dropped {
                total.dropped += s.value;
            }
        }
    }
    let (rows, quiet) = crate::fleet::ranked(rows, by, &total);
    Fleet {
        by,
        quiet,
        rows,
        total,
        pods,
        left_out,
        source: None,
    }
}

fn add_held(r: &mut Rates, v: f64, s: &Sample) {
    match s.label("outcome") {
        "sampled" => r.sampled += v,
        "burst" => r.burst += v,
        "budget" => r.budget += v,
        _ => {}
    }
}

/// `targets` from Prometheus: every target with a series (but `other` and `logpolicy`),
/// its levels (those of its series, `per_level`), on how many pods (`per_target`); the level in force now from
/// `drill_down` (the pods read, [`crate::fleet::known_targets`] of their ledgers),
/// which also adds the targets they know that Prometheus does not list.
pub fn known_targets(
    per_level: &[Sample],
    per_target: &[Sample],
    measured: &[Sample],
    listed: Option<&[PodId]>,
    window: Duration,
    drill_down: &KnownTargets,
) -> KnownTargets {
    let (pods, left_out, _) = coverage(measured, listed, window);
    let mut by: BTreeMap<String, (BTreeSet<Level>, usize)> = BTreeMap::new();
    for s in per_level {
        let target = s.label("target");
        if target == OTHER_TARGET || target == OWN_TARGET {
            continue;
        }
        let (levels, _) = by.entry(target.to_owned()).or_default();
        if let Ok(level) = s.label("level").parse::<Level>() {
            levels.insert(level);
        }
    }
    for s in per_target {
        if let Some((_, pods)) = by.get_mut(s.label("target")) {
            *pods = s.value as usize;
        }
    }
    let drilled: BTreeMap<&str, &KnownTarget> = drill_down
        .targets
        .iter()
        .map(|t| (t.target.as_str(), t))
        .collect();
    let mut targets: Vec<KnownTarget> = by
        .into_iter()
        .map(|(target, (levels, count))| {
            let d = drilled.get(target.as_str());
            let mut levels = levels;
            if let Some(d) = d {
                levels.extend(d.levels.iter().copied());
            }
            KnownTarget {
                level_now: d.map(|d| d.level_now.clone()).unwrap_or_default(),
                levels: levels.into_iter().collect(),
                pods: count.max(d.map_or(0, |d| d.pods)),
                target,
            }
        })
        .collect();
    for d in &drill_down.targets {
        if !targets.iter().any(|t| t.target == d.target) {
            targets.push(d.clone());
        }
    }
    targets.sort_by(|a, b| a.target.cmp(&b.target));
    for t in &mut targets {
        t.level_now
            .sort_by(|a: &LevelCount, b| b.pods.cmp(&a.pods).then(a.level.cmp(&b.level)));
    }
    KnownTargets {
        targets,
        pods,
        left_out,
    }
}

/// A Prometheus to ask, and the time every query of a view is evaluated at.
#[derive(Debug, Clone)]
pub struct Prometheus {
    /// Where.
    pub url: PrometheusUrl,
    /// The evaluation time, seconds since the epoch.
    pub at: f64,
}

impl Prometheus {
    /// `url`, its queries evaluated at the time of this call.
    pub fn now(url: &PrometheusUrl) -> Prometheus {
        let at = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis() as f64
            / 1000.0;
        Prometheus {
            url: url.clone(),
            at,
        }
    }

    /// The source of what it answers, for `window`.
    pub fn source(&self, window: Duration) -> Source {
        Source {
            prometheus: self.url.url.clone(),
            at: self.at,
            window_seconds: window.as_secs_f64(),
        }
    }

    /// The samples of the instant query `promql` (`POST /api/v1/query`, within
    /// [`QUERY_TIMEOUT`]); `Err` names this Prometheus, the query, and what went wrong.
    pub async fn query(&self, promql: &str) -> std::result::Result<Vec<Sample>, String> {
        let body = format!("query={}&time={:.3}", form_encode(promql), self.at);
        let answer = tokio::time::timeout(QUERY_TIMEOUT, self.post("/api/v1/query", body))
            .await
            .unwrap_or_else(|_| Err(format!("no answer in {} s", QUERY_TIMEOUT.as_secs())))
            .and_then(|(status, body)| vector(status, &body));
        answer.map_err(|e| {
            let shown: String = promql.chars().take(300).collect();
            let more = if shown.len() < promql.len() {
                "…"
            } else {
                ""
            };
            format!("Prometheus at {}: {e}\n  asked: {shown}{more}", self.url)
        })
    }

    /// `POST path` with a form `body`: the status and the body read (at most
    /// [`MAX_ANSWER`] bytes).
    async fn post(&self, path: &str, body: String) -> std::result::Result<(u16, String), String> {
        use http_body_util::BodyExt;
        let url = &self.url;
        let stream = tokio::net::TcpStream::connect((url.host.as_str(), url.port))
            .await
            .map_err(|e| format!("cannot connect to {}:{}: {e}", url.host, url.port))?;
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .map_err(|e| format!("HTTP: {e}"))?;
        let connection = tokio::spawn(connection);
        let authority = if url.host.contains(':') {
            format!("[{}]:{}", url.host, url.port)
        } else {
            format!("{}:{}", url.host, url.port)
        };
        let request = http::Request::post(format!("{}{path}", url.prefix))
            .header(http::header::HOST, authority)
            .header(
                http::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(http_body_util::Full::<hyper::body::Bytes>::from(body))
            .map_err(|e| e.to_string())?;
        let reply = sender
            .send_request(request)
            .await
            .map_err(|e| format!("HTTP: {e}"))?;
        let status = reply.status().as_u16();
        let body = http_body_util::Limited::new(reply.into_body(), MAX_ANSWER)
            .collect()
            .await
            .map_err(|e| {
                if e.is::<http_body_util::LengthLimitError>() {
                    format!("the answer is larger than {} MiB", MAX_ANSWER >> 20)
                } else {
                    format!("reading the answer: {e}")
                }
            })?
            .to_bytes();
        connection.abort();
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    }
}

/// The pods a view from Prometheus covers.
#[derive(Debug, Clone)]
pub struct Selection {
    /// Their series.
    pub scope: Scope,
    /// The pods the API server listed, for a workload or a selector (`None`: every
    /// opted-in pod Prometheus holds series of in the scope, not listed).
    pub listed: Option<Vec<PodId>>,
    /// Those pods' objects (to read from, by the pod proxy).
    pub pods: Vec<Pod>,
    /// What selected them, for messages.
    pub which: String,
}

/// The pods `p` names: a workload's or a selector's, listed by the API server (one
/// request); without either, every opted-in pod Prometheus scrapes in the namespace (in
/// every namespace with `-A`), and the API server is not asked.
pub async fn select(kube: &Kube, p: &PodsArgs) -> Result<Selection> {
    if p.workload.is_none() && p.selector.is_none() {
        let (scope, where_) = if p.all_namespaces {
            (Scope::Every, "every namespace".to_owned())
        } else {
            (
                Scope::Namespace(kube.namespace.clone()),
                format!("namespace {}", kube.namespace),
            )
        };
        return Ok(Selection {
            scope,
            listed: None,
            pods: Vec::new(),
            which: format!("the pods Prometheus scrapes in {where_}"),
        });
    }
    let pods = crate::fleet::select_noting(kube, p).await?;
    let ids: Vec<PodId> = pods
        .pods
        .iter()
        .map(|pod| PodId::of(pod, &kube.namespace))
        .collect();
    Ok(Selection {
        scope: Scope::pods(&ids),
        listed: Some(ids),
        pods: pods.pods,
        which: pods.which,
    })
}

impl Prometheus {
    /// Every query of `queries`, at once; the first failure.
    async fn all(&self, queries: &[String]) -> Result<Vec<Vec<Sample>>> {
        let answers = futures::future::join_all(queries.iter().map(|q| self.query(q))).await;
        answers
            .into_iter()
            .collect::<std::result::Result<Vec<_>, String>>()
            .map_err(Failure::error)
    }

    /// The pods of `selection` Prometheus has a rate of over `window`; a failure when
    /// it has none, saying what to check.
    async fn measured(&self, q: &Query, selection: &Selection) -> Result<Vec<Sample>> {
        let measured = self
            .query(&q.pods_measured())
            .await
            .map_err(Failure::error)?;
        let any = measured.iter().any(|s| selection.scope.holds(&s.pod()));
        if !any {
            return Err(Failure::error(format!(
                "Prometheus at {} has no {BYTES} series with a rate over the last {} for {}{}: \
                 the pods are not scraped (the chart's podMonitor.enabled, and a Prometheus that \
                 selects its PodMonitor), or were scraped fewer than twice in the window (a longer \
                 --window).\n  asked: {}",
                self.url,
                crate::output::short_duration(q.window),
                selection.which,
                selection
                    .listed
                    .as_ref()
                    .map(|l| format!(" ({} pods listed)", l.len()))
                    .unwrap_or_default(),
                q.pods_measured()
            )));
        }
        Ok(measured)
    }

    /// `top` by target or pod over `window`, every figure from Prometheus.
    pub async fn fleet(&self, selection: &Selection, by: By, window: Duration) -> Result<Fleet> {
        let q = Query::new(selection.scope.clone(), window);
        let measured = self.measured(&q, selection).await?;
        let (key, held_key, dropped): (&[&str], &[&str], String) = if by == By::Pod {
            (
                &["namespace", "pod"],
                &["namespace", "pod", "outcome"],
                q.sum_rate(DROPPED, "", &["namespace", "pod"]),
            )
        } else {
            (
                &["target", "level"],
                &["outcome"],
                format!("sum({})", q.over("rate", DROPPED, "")),
            )
        };
        let mut queries = vec![
            q.sum_rate(BYTES, "", key),
            q.sum_rate(LINES, "", key),
            q.sum_rate(EVENTS, "outcome=~\"sampled|burst|budget\"", held_key),
            dropped,
        ];
        if by != By::Pod {
            queries.push(q.pods_per_target(false));
        }
        let mut answers = self.all(&queries).await?.into_iter();
        let mut next = || answers.next().unwrap_or_default();
        let answers = Answers {
            bytes: next(),
            lines: next(),
            held: next(),
            dropped: next(),
            pods_per_target: next(),
            measured,
        };
        let mut f = fleet(by, &answers, selection.listed.as_deref(), window);
        f.source = Some(self.source(window));
        Ok(f)
    }

    /// `targets`: the targets Prometheus holds series of, on how many pods, and what
    /// the pods writing the most bytes say of them ([`DRILL_DOWN_PODS`] read once);
    /// the pods read.
    pub async fn targets(
        &self,
        kube: &Kube,
        selection: &Selection,
    ) -> Result<(KnownTargets, Vec<Pod>)> {
        let q = Query::new(selection.scope.clone(), PROMETHEUS_WINDOW);
        let measured = self.measured(&q, selection).await?;
        let mut answers = self
            .all(&[q.pods_per_target(true), q.pods_per_target(false)])
            .await?
            .into_iter();
        let (per_level, per_target) = (
            answers.next().unwrap_or_default(),
            answers.next().unwrap_or_default(),
        );
        let pods = self.biggest_pods(kube, selection, &q).await?;
        let reads = crate::fleet::read_sites(kube, &pods).await;
        let drill = crate::fleet::known_targets(&reads);
        let known = known_targets(
            &per_level,
            &per_target,
            &measured,
            selection.listed.as_deref(),
            q.window,
            &drill,
        );
        Ok((known, pods))
    }

    /// The pods of `selection` writing the most bytes over `q`'s window, at most
    /// [`DRILL_DOWN_PODS`], biggest first: their objects (from the list, else one `get`
    /// each).
    pub async fn biggest_pods(
        &self,
        kube: &Kube,
        selection: &Selection,
        q: &Query,
    ) -> Result<Vec<Pod>> {
        let biggest = self
            .query(&q.biggest_pods(DRILL_DOWN_PODS))
            .await
            .map_err(Failure::error)?;
        let mut ranked: Vec<(f64, PodId)> = biggest
            .iter()
            .map(|s| (s.value, s.pod()))
            .filter(|(_, p)| selection.scope.holds(p))
            .collect();
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        let mut pods = Vec::with_capacity(ranked.len());
        for (_, id) in ranked.into_iter().take(DRILL_DOWN_PODS) {
            if let Some(p) = selection
                .pods
                .iter()
                .find(|p| PodId::of(p, &kube.namespace) == id)
            {
                pods.push(p.clone());
                continue;
            }
            let api: Api<Pod> = Api::namespaced(kube.client.clone(), &id.namespace);
            match api.get_opt(&id.name).await {
                Ok(Some(p)) => pods.push(p),
                // Gone since its last scrape: the next one is read instead.
                Ok(None) => {}
                Err(e) => {
                    return Err(crate::exit::api_failure(
                        &format!("pod {}/{}", id.namespace, id.name),
                        e,
                    ))
                }
            }
        }
        Ok(pods)
    }
}

/// `s` as a form value: every byte but the unreserved ones percent-encoded.
fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3 / 2);
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(char::from(b));
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(labels: &[(&str, &str)], value: f64) -> Sample {
        Sample {
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            value,
        }
    }

    fn pod(ns: &str, name: &str) -> PodId {
        PodId {
            namespace: ns.into(),
            name: name.into(),
        }
    }

    #[test]
    fn queries_select_the_scope_by_namespace_and_pod_names_as_literals() {
        let w = Duration::from_secs(10);
        let every = Query::new(Scope::Every, w);
        assert_eq!(
            every.sum_rate(LINES, "", &["target", "level"]),
            "sum by (target, level) (rate(logpolicy_target_lines_total{}[10s]))"
        );
        let pods = Query::new(
            Scope::pods(&[
                pod("shop", "shop-0"),
                pod("shop", "web.1"),
                pod("b\"x", "a"),
            ]),
            Duration::from_millis(1500),
        );
        assert_eq!(
            pods.sum_rate(EVENTS, "outcome=~\"sampled|burst|budget\"", &["outcome"]),
            "sum by (outcome) (rate(logpolicy_events_total{namespace=\"b\\\"x\",pod=~\"a\",outcome=~\"sampled|burst|budget\"}[1500ms]) \
             or rate(logpolicy_events_total{namespace=\"shop\",pod=~\"shop-0|web\\\\.1\",outcome=~\"sampled|burst|budget\"}[1500ms]))"
        );
        let ns = Query::new(Scope::Namespace("shop".into()), w);
        assert_eq!(
            ns.pods_measured(),
            "count by (namespace, pod) (rate(logpolicy_target_bytes_total{namespace=\"shop\",target=\"logpolicy\"}[10s]))"
        );
        assert_eq!(
            ns.pods_per_target(true),
            "count by (target, level) (count by (namespace, pod, target, level) (rate(logpolicy_target_bytes_total{namespace=\"shop\"}[10s])))"
        );
        assert_eq!(
            ns.biggest_pods(20),
            "topk(20, sum by (namespace, pod) (rate(logpolicy_target_bytes_total{namespace=\"shop\"}[10s])))"
        );
        assert!(Scope::Namespace("shop".into()).holds(&pod("shop", "x")));
        assert!(!pods.scope.holds(&pod("shop", "shop-1")));
        assert_eq!(form_encode("a b{c=\"d\"}"), "a%20b%7Bc%3D%22d%22%7D");
    }

    #[test]
    fn answers_parse_and_errors_say_what_prometheus_said() {
        let ok = r#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"target":"shop::http","level":"info"},"value":[1765000000.5,"12.5"]},
            {"metric":{"target":"logpolicy"},"value":[1765000000.5,"NaN"]},
            {"metric":{"target":"x\u001b[2J"},"value":[1765000000.5,"1e3"]}]}}"#;
        let v = vector(200, ok).unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].label("level"), "info");
        assert_eq!(v[0].value, 12.5);
        assert_eq!(v[1].label("target"), "x\\u{1b}[2J");
        assert_eq!(v[1].value, 1000.0);
        assert_eq!(v[1].label("level"), "");
        let bad = r#"{"status":"error","errorType":"bad_data","error":"1:14: parse error: unexpected \"}\""}"#;
        assert_eq!(
            vector(400, bad).unwrap_err(),
            "HTTP 400: bad_data: 1:14: parse error: unexpected \"}\""
        );
        assert_eq!(
            vector(503, "Service Unavailable").unwrap_err(),
            "HTTP 503, not an answer of Prometheus's API: \"Service Unavailable\""
        );
        let e = vector(
            200,
            r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#,
        )
        .unwrap_err();
        assert_eq!(e, "a \"matrix\" answer, not a vector");
        assert!(vector(
            200,
            r#"{"status":"success","data":{"resultType":"vector"}}"#
        )
        .unwrap_err()
        .contains("without a result list"));
        assert!(vector(
            200,
            r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{}}]}}"#
        )
        .unwrap_err()
        .contains("without a value"));
    }

    fn answers_by_target() -> Answers {
        let t =
            |target: &str, level: &str, v: f64| sample(&[("target", target), ("level", level)], v);
        Answers {
            bytes: vec![
                t("shop::http", "info", 3_000.0),
                t("shop::db", "debug", 50.0),
                t("shop::db", "warn", 80.0),
                t("other", "info", 0.0),
                t("other", "", 10.0),
                t("logpolicy", "", 15.0),
            ],
            lines: vec![
                t("shop::http", "info", 30.0),
                t("shop::db", "debug", 0.5),
                t("shop::db", "warn", 1.0),
                t("other", "info", 0.0),
                t("other", "", 0.1),
                t("logpolicy", "", 0.5),
            ],
            pods_per_target: vec![
                sample(&[("target", "shop::http")], 2.0),
                sample(&[("target", "shop::db")], 2.0),
                sample(&[("target", "other")], 2.0),
                sample(&[("target", "logpolicy")], 2.0),
            ],
            measured: vec![
                sample(&[("namespace", "shop"), ("pod", "a")], 1.0),
                sample(&[("namespace", "shop"), ("pod", "b")], 1.0),
                sample(&[("namespace", "shop"), ("pod", "gone")], 1.0),
            ],
            held: vec![
                sample(&[("outcome", "sampled")], 15.0),
                sample(&[("outcome", "burst")], 2.0),
            ],
            dropped: vec![sample(&[], 3.0)],
        }
    }

    #[test]
    fn by_target_adds_the_levels_up_and_holds_back_in_the_total_only() {
        let w = Duration::from_secs(120);
        let listed = [pod("shop", "a"), pod("shop", "b"), pod("shop", "c")];
        let f = fleet(By::Target, &answers_by_target(), Some(&listed), w);
        let got: Vec<(String, usize, f64, f64)> = f
            .rows
            .iter()
            .map(|r| (r.subject.label(false), r.pods, r.rates.lines, r.rates.bytes))
            .collect();
        assert_eq!(
            got,
            [
                ("shop::http".to_owned(), 2, 30.0, 3_000.0),
                ("shop::db".to_owned(), 2, 1.5, 130.0),
                ("logpolicy (own lines)".to_owned(), 2, 0.5, 15.0),
                ("other (past the row cap)".to_owned(), 2, 0.1, 10.0),
            ]
        );
        // `other` by level wrote nothing: a quiet row.
        assert_eq!(f.quiet, 1);
        assert_eq!(f.total.bytes, 3_155.0);
        assert_eq!(
            (f.total.sampled, f.total.burst, f.total.dropped),
            (15.0, 2.0, 3.0)
        );
        assert!(f.rows.iter().all(|r| r.rates.sampled == 0.0));
        // c has no rate; gone is not listed (a named selection reads only its pods).
        assert_eq!(f.pods.to_string(), "2/3 pods");
        assert_eq!(f.left_out.len(), 1);
        assert_eq!(f.left_out[0].pod, pod("shop", "c"));
        assert!(
            f.left_out[0].why.contains("over the last 2m"),
            "{:?}",
            f.left_out
        );
        // Without a list, every pod measured is selected.
        let f = fleet(By::Target, &answers_by_target(), None, w);
        assert_eq!(f.pods.to_string(), "3/3 pods");
    }

    #[test]
    fn by_pod_has_a_row_for_every_pod_measured() {
        let p = |name: &str, v: f64| sample(&[("namespace", "shop"), ("pod", name)], v);
        let a = Answers {
            bytes: vec![p("a", 2_000.0), p("x", 5.0)],
            lines: vec![p("a", 20.0)],
            measured: vec![p("a", 1.0), p("b", 1.0), p("x", 1.0)],
            held: vec![sample(
                &[("namespace", "shop"), ("pod", "a"), ("outcome", "budget")],
                4.0,
            )],
            dropped: vec![p("b", 1.0)],
            pods_per_target: vec![],
        };
        let listed = [pod("shop", "a"), pod("shop", "b")];
        let f = fleet(By::Pod, &a, Some(&listed), Duration::from_secs(60));
        let got: Vec<(String, f64, f64, f64)> = f
            .rows
            .iter()
            .map(|r| {
                (
                    r.subject.label(false),
                    r.rates.bytes,
                    r.rates.budget,
                    r.rates.dropped,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("a".to_owned(), 2_000.0, 4.0, 0.0),
                ("b".to_owned(), 0.0, 0.0, 1.0)
            ]
        );
        assert_eq!(f.total.bytes, 2_000.0);
        assert_eq!(f.pods.to_string(), "2/2 pods");
    }

    #[test]
    fn targets_take_levels_from_series_and_the_level_now_from_the_pods_read() {
        let t =
            |target: &str, level: &str, v: f64| sample(&[("target", target), ("level", level)], v);
        let per_level = [
            t("shop::http", "info", 3.0),
            t("shop::db", "warn", 3.0),
            t("shop::db", "debug", 1.0),
            t("other", "info", 3.0),
            t("logpolicy", "", 3.0),
        ];
        let measured = [
            sample(&[("namespace", "shop"), ("pod", "a")], 1.0),
            sample(&[("namespace", "shop"), ("pod", "b")], 1.0),
            sample(&[("namespace", "shop"), ("pod", "c")], 1.0),
        ];
        let drill = KnownTargets {
            targets: vec![
                KnownTarget {
                    target: "shop::http".into(),
                    levels: vec![Level::Info],
                    level_now: vec![
                        LevelCount {
                            level: Level::Info,
                            pods: 1,
                        },
                        LevelCount {
                            level: Level::Debug,
                            pods: 2,
                        },
                    ],
                    pods: 3,
                },
                KnownTarget {
                    target: "shop::rare".into(),
                    levels: vec![Level::Trace],
                    level_now: vec![LevelCount {
                        level: Level::Info,
                        pods: 1,
                    }],
                    pods: 1,
                },
            ],
            pods: Coverage {
                read: 3,
                selected: 3,
            },
            left_out: vec![],
        };
        let per_target = [
            sample(&[("target", "shop::http")], 3.0),
            sample(&[("target", "shop::db")], 3.0),
        ];
        let k = known_targets(
            &per_level,
            &per_target,
            &measured,
            None,
            Duration::from_secs(60),
            &drill,
        );
        assert_eq!(k.names(), ["shop::db", "shop::http", "shop::rare"]);
        assert_eq!(k.targets[0].levels, [Level::Warn, Level::Debug]);
        assert_eq!((k.targets[0].pods, k.targets[0].level_now.len()), (3, 0));
        assert_eq!(k.targets[1].level_now[0].level, Level::Debug);
        assert_eq!(k.targets[2].pods, 1);
        assert_eq!(k.pods.to_string(), "3/3 pods");
    }
}
