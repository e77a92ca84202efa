//! `suggest`: from measured rates, the sampling that cuts the selected pods' bytes by at
//! least a share, touching nothing at or above `warn`.
//!
//! The plan is pure: [`plan`] takes each target's measured bytes per second (split into
//! what is below `warn`, which sampling may cut, and the rest, which it never touches:
//! the policy model keeps every warning and error whatever a sampling rule says) and
//! returns a `keepOneIn` per target, or the largest cut that can be reached.
//!
//! How it chooses, so that the result is easy to explain and never harsher than needed:
//! - the biggest targets (by bytes below `warn`) first: the fewest targets that can make
//!   the cut with one common `keepOneIn` no larger than [`MAX_KEEP_ONE_IN`];
//! - that smallest common `keepOneIn` (a target sampled one in N writes 1/N of what it
//!   wrote unsampled);
//! - then each chosen target, smallest first, is given the smallest `keepOneIn` that
//!   still makes the cut with the others as they are;
//! - a target that is already sampled is measured after its sampling: its unsampled rate
//!   is its written rate times (written + sampled) / written, and the new rule replaces
//!   the old one (a higher-priority layer), so the plan never asks for a gentler rule than
//!   the one in force (that would raise it, not cut it).
//!
//! A rule set on a target also governs its child targets (`shop` governs `shop::db`)
//! unless a rule names them: the plan names every target it samples, and a chosen
//! target's projection counts only its own events.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use logpolicy::policy::{SamplingScope, SamplingSpec};
use logpolicy::Level;
use logpolicy_api::{LogPolicy, LogPolicySpec, OPT_IN_LABEL};
use serde::Serialize;

use crate::ack::wait_for_pods_telling;
use crate::cli::SuggestArgs;
use crate::cluster::Connection;
use crate::exit::{Failure, Result};
use std::time::Duration;

use crate::fleet::{self, Coverage, Subject, Window};
use crate::naming::random_suffix;
use crate::output::short_duration;
use crate::output::{data, yaml, Format};
use crate::prometheus::{self, Prometheus, DRILL_DOWN_PODS};

/// The largest `keepOneIn` the plan proposes: sampling harder than one in 1,000 keeps so
/// little that the target had better be raised to `warn` by hand.
pub const MAX_KEEP_ONE_IN: u32 = 1000;

/// What one target writes now, per second.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetRate {
    /// The target.
    pub target: String,
    /// Bytes per second of its events below `warn` (what sampling may cut).
    pub below_warn: f64,
    /// Bytes per second of its warnings and errors (never cut).
    pub warn_and_above: f64,
    /// The share of its events below `warn` that its current sampling keeps (1.0: not
    /// sampled), from the counts: written / (written + sampled).
    pub kept_share: f64,
}

impl TargetRate {
    /// Its bytes per second now.
    pub fn total(&self) -> f64 {
        self.below_warn + self.warn_and_above
    }

    /// What it would write below `warn` unsampled.
    fn unsampled(&self) -> f64 {
        if self.kept_share > 0.0 {
            self.below_warn / self.kept_share
        } else {
            self.below_warn
        }
    }

    /// The `keepOneIn` of its sampling now (1: none), rounded.
    fn current_keep(&self) -> u32 {
        if self.kept_share > 0.0 && self.kept_share < 1.0 {
            (1.0 / self.kept_share)
                .round()
                .clamp(1.0, f64::from(u32::MAX)) as u32
        } else {
            1
        }
    }

    /// Its bytes per second with its events below `warn` kept one in `n`.
    fn projected(&self, n: u32) -> f64 {
        self.unsampled() / f64::from(n) + self.warn_and_above
    }
}

/// One line of the plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Sample {
    /// The target.
    pub target: String,
    /// Bytes per second now.
    pub now: f64,
    /// Keep one event below `warn` in this many.
    pub keep_one_in: u32,
    /// Bytes per second projected.
    pub projected: f64,
}

/// A plan that makes the cut.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// The targets to sample, biggest first.
    pub samples: Vec<Sample>,
    /// Bytes per second of the selection now.
    pub now: f64,
    /// Bytes per second projected.
    pub projected: f64,
}

impl Plan {
    /// The share of the bytes it cuts, 0 to 1.
    pub fn cut(&self) -> f64 {
        if self.now > 0.0 {
            1.0 - self.projected / self.now
        } else {
            0.0
        }
    }
}

/// Why no plan makes the cut.
#[derive(Debug, Clone, PartialEq)]
pub enum PlanError {
    /// Nothing was written in the window.
    NothingWritten,
    /// The cut needs more than sampling below `warn` can give.
    OutOfReach {
        /// The cut asked for, in percent.
        wanted: f64,
        /// The largest cut that can be reached, in percent.
        largest: f64,
    },
}

impl std::fmt::Display for PlanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PlanError::NothingWritten => {
                f.write_str("the selected pods wrote nothing in the window: nothing to cut")
            }
            PlanError::OutOfReach { wanted, largest } => write!(
                f,
                "a {wanted:.0}% cut cannot be reached without touching warnings and errors: the most sampling can cut is {largest:.1}% (every target's events below warn kept one in {MAX_KEEP_ONE_IN})"
            ),
        }
    }
}

impl std::error::Error for PlanError {}

/// The sampling that cuts the bytes of `rates` by at least `cut` (0 to 1).
///
/// ```
/// use kubectl_logpolicy::suggest::{plan, TargetRate};
/// let t = |target: &str, below: f64, above: f64| TargetRate {
///     target: target.into(), below_warn: below, warn_and_above: above, kept_share: 1.0,
/// };
/// // shop::http writes 80% of the bytes: one in 3 of it cuts 53%.
/// let p = plan(&[t("shop::http", 800.0, 0.0), t("shop::db", 150.0, 50.0)], 0.5).unwrap();
/// assert_eq!(p.samples.len(), 1);
/// assert_eq!((p.samples[0].target.as_str(), p.samples[0].keep_one_in), ("shop::http", 3));
/// assert!(p.cut() >= 0.5);
/// ```
pub fn plan(rates: &[TargetRate], cut: f64) -> Result<Plan, PlanError> {
    let now: f64 = rates.iter().map(TargetRate::total).sum();
    if now <= 0.0 {
        return Err(PlanError::NothingWritten);
    }
    let goal = now * (1.0 - cut.clamp(0.0, 1.0));
    // Candidates: what they write below warn, biggest first.
    let mut order: Vec<&TargetRate> = rates.iter().filter(|r| r.below_warn > 0.0).collect();
    order.sort_by(|a, b| {
        b.below_warn
            .total_cmp(&a.below_warn)
            .then_with(|| a.target.cmp(&b.target))
    });
    let projected = |keeps: &[u32]| -> f64 {
        let chosen: f64 = order
            .iter()
            .zip(keeps)
            .map(|(r, &n)| r.projected(n.max(r.current_keep())))
            .sum();
        let rest: f64 = order.iter().skip(keeps.len()).map(|r| r.total()).sum();
        let untouched: f64 = rates
            .iter()
            .filter(|r| r.below_warn <= 0.0)
            .map(TargetRate::total)
            .sum();
        chosen + rest + untouched
    };
    // The fewest biggest targets that can make it with one common keepOneIn.
    let mut keeps: Option<Vec<u32>> = None;
    for k in 1..=order.len() {
        let common = smallest_keep(|n| projected(&vec![n; k]) <= goal);
        if let Some(n) = common {
            keeps = Some(vec![n; k]);
            break;
        }
    }
    let Some(mut keeps) = keeps else {
        let largest = projected(&vec![MAX_KEEP_ONE_IN; order.len()]);
        return Err(PlanError::OutOfReach {
            wanted: cut * 100.0,
            largest: (1.0 - largest / now) * 100.0,
        });
    };
    // No harsher than needed: the smallest chosen target first.
    for i in (0..keeps.len()).rev() {
        let mut trial = keeps.clone();
        if let Some(n) = smallest_keep(|n| {
            trial[i] = n;
            projected(&trial) <= goal
        }) {
            keeps[i] = n.min(keeps[i]);
        }
    }
    let samples = order
        .iter()
        .zip(&keeps)
        .map(|(r, &n)| {
            let n = n.max(r.current_keep());
            Sample {
                target: r.target.clone(),
                now: r.total(),
                keep_one_in: n,
                projected: r.projected(n),
            }
        })
        .collect();
    Ok(Plan {
        samples,
        now,
        projected: projected(&keeps),
    })
}

/// The smallest `n` in 2..=[`MAX_KEEP_ONE_IN`] for which `ok(n)` holds, given that `ok`
/// only ever turns true as `n` grows (binary search).
fn smallest_keep(mut ok: impl FnMut(u32) -> bool) -> Option<u32> {
    if !ok(MAX_KEEP_ONE_IN) {
        return None;
    }
    let (mut lo, mut hi) = (2u32, MAX_KEEP_ONE_IN);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if ok(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Some(lo)
}

/// Each target's bytes per second in `window`, split at `warn`, with the share of its
/// events below `warn` its current sampling keeps; then the writes no target rule can
/// sample (callsites past the ledgers' row cap, logpolicy's own lines) as untouchable
/// entries. Pure: what `suggest` plans from.
pub fn target_rates(window: &Window) -> Vec<TargetRate> {
    #[derive(Default)]
    struct Acc {
        below: f64,
        above: f64,
        lines_below: f64,
        sampled_below: f64,
    }
    let mut by: BTreeMap<String, Acc> = BTreeMap::new();
    for pod in &window.pods {
        for (subject, rates) in &pod.sites {
            let (name, below) = match subject {
                Subject::Callsite { target, level, .. } => (target.clone(), *level > Level::Warn),
                other => (other.label(false), false),
            };
            let acc = by.entry(name).or_default();
            if below {
                acc.below += rates.bytes;
                acc.lines_below += rates.lines;
                acc.sampled_below += rates.sampled;
            } else {
                acc.above += rates.bytes;
            }
        }
    }
    by.into_iter()
        .filter(|(_, a)| a.below + a.above > 0.0)
        .map(|(target, a)| TargetRate {
            target,
            below_warn: a.below,
            warn_and_above: a.above,
            kept_share: if a.lines_below + a.sampled_below > 0.0 {
                a.lines_below / (a.lines_below + a.sampled_below)
            } else {
                1.0
            },
        })
        .collect()
}

/// What `suggest --prometheus` plans from: each target's bytes per second below `warn` and at or
/// above it, from `bytes` (by `target, level`), and the share its sampling keeps now,
/// from `kept` (the pods read, [`target_rates`]; 1 for a target none of
/// them wrote).
pub fn target_rates_from(bytes: &[prometheus::Sample], kept: &[TargetRate]) -> Vec<TargetRate> {
    let mut by: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for s in bytes {
        let name = crate::prometheus::subject_of(s).label(false);
        let (below, above) = by.entry(name).or_default();
        match s.label("level").parse::<Level>() {
            Ok(level) if level > Level::Warn => *below += s.value,
            _ => *above += s.value,
        }
    }
    by.into_iter()
        .filter(|(_, (below, above))| below + above > 0.0)
        .map(|(target, (below_warn, warn_and_above))| TargetRate {
            kept_share: kept
                .iter()
                .find(|k| k.target == target)
                .map_or(1.0, |k| k.kept_share),
            target,
            below_warn,
            warn_and_above,
        })
        .collect()
}

/// The targets of `rates` that a rule of the plan samples without naming them: a rule
/// on `shop` governs `shop::db` unless a rule names `shop::db` (the most specific rule
/// wins), with the rule's target.
pub fn governed_children<'a>(
    rates: &'a [TargetRate],
    plan: &'a Plan,
) -> Vec<(&'a str, &'a Sample)> {
    rates
        .iter()
        .filter(|r| !plan.samples.iter().any(|s| s.target == r.target))
        .filter_map(|r| governing(&r.target, plan).map(|s| (r.target.as_str(), s)))
        .collect()
}

/// The rule of `plan` that governs `target`: the longest rule target it is under.
fn governing<'a>(target: &str, plan: &'a Plan) -> Option<&'a Sample> {
    plan.samples
        .iter()
        .filter(|s| logpolicy::Target::new(&s.target).is_ok_and(|t| t.matches(target)))
        .max_by_key(|s| s.target.len())
}

/// What `rates` would write per second under `plan`, each target under the rule that
/// governs it (its own, or a parent's: see [`governed_children`]); at most
/// [`Plan::projected`], since a parent's rule can only sample its children more.
pub fn projected_with_children(rates: &[TargetRate], plan: &Plan) -> f64 {
    rates
        .iter()
        .map(|r| match governing(&r.target, plan) {
            Some(s) => r.projected(s.keep_one_in.max(r.current_keep())),
            None => r.total(),
        })
        .sum()
}

/// The LogPolicy that applies `plan` to the pods `selector` selects: one `keepOneIn` per
/// target (per event: warnings and errors are kept whatever it says), standing unless
/// `duration` is given.
pub fn sampling_policy(
    plan: &Plan,
    args: &SuggestArgs,
    namespace: &str,
    name: &str,
    selector: LabelSelector,
) -> LogPolicy {
    let spec = LogPolicySpec {
        selector,
        default_level: None,
        targets: Vec::new(),
        when: None,
        sampling: plan
            .samples
            .iter()
            .map(|s| SamplingSpec {
                target: s.target.clone(),
                keep_one_in: u64::from(s.keep_one_in),
                scope: SamplingScope::Event,
                span: None,
                when: None,
            })
            .collect(),
        always_keep: None,
        burst: None,
        max_bytes_per_second: None,
        redact: Vec::new(),
        redact_values: false,
        priority: args.priority,
        duration: args.duration.as_ref().map(|d| d.text.clone()),
        expiration_time: None,
        reason: Some(args.reason.clone().unwrap_or_else(|| {
            format!(
                "kubectl logpolicy suggest: cut {:.0}% of {}",
                args.cut * 100.0,
                crate::top::bytes_per_second(plan.now)
            )
        })),
        record: Vec::new(),
        replay: None,
    };
    crate::raise::managed_policy(name, namespace, spec)
}

/// The plan as `suggest` prints it: target, bytes per second now, keep one in N,
/// projected; a total row; then the children that a rule samples too.
pub fn plan_table(plan: &Plan, rates: &[TargetRate], cut: f64) -> String {
    use crate::top::bytes_per_second;
    let mut rows: Vec<Vec<String>> = plan
        .samples
        .iter()
        .map(|s| {
            vec![
                s.target.clone(),
                bytes_per_second(s.now),
                format!("1 in {}", s.keep_one_in),
                bytes_per_second(s.projected),
            ]
        })
        .collect();
    let projected = projected_with_children(rates, plan);
    let cut_now = if plan.now > 0.0 {
        1.0 - projected / plan.now
    } else {
        0.0
    };
    rows.push(vec![
        "total (every target)".to_owned(),
        bytes_per_second(plan.now),
        String::new(),
        format!("{} (-{:.1}%)", bytes_per_second(projected), cut_now * 100.0),
    ]);
    let mut out = crate::output::table(&["TARGET", "BYTES/S NOW", "KEEP", "PROJECTED"], &rows);
    for (child, rule) in governed_children(rates, plan) {
        out.push_str(&format!(
            "note: the rule on {} also samples {child} (no rule names it)\n",
            rule.target
        ));
    }
    out.push_str(&format!(
        "Keeps every warning and error; cuts at least {:.0}% of the bytes at the rates measured.\n",
        cut * 100.0
    ));
    out
}

/// What `suggest -o json|yaml` prints.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct SuggestOutput<'a> {
    /// The cut asked for, 0 to 1.
    cut: f64,
    /// The plan.
    plan: &'a Plan,
    /// Bytes per second projected, every target under the rule that governs it.
    projected: f64,
    /// The pods measured, of those selected.
    pods: crate::fleet::Coverage,
    /// The policy.
    policy: &'a LogPolicy,
}

/// `suggest`.
pub async fn suggest(connection: &Connection, args: &SuggestArgs) -> Result<()> {
    args.source.check()?;
    let kube = connection.connect().await?;
    let p = &args.pods;
    let selector = match (&p.workload, &p.selector) {
        (Some(w), _) => kube.workload_selector(w).await?,
        (None, Some(s)) => s.clone(),
        (None, None) => LabelSelector {
            match_labels: Some([(OPT_IN_LABEL.to_owned(), "true".to_owned())].into()),
            ..LabelSelector::default()
        },
    };
    let (rates, coverage, line, waiting) = match &args.source.prometheus {
        Some(url) => from_prometheus(&kube, args, url).await?,
        None => {
            let pods = fleet::select_noting(&kube, p).await?;
            let (pods, note) = fleet::bounded(pods, args.source.sample_pods.map(usize::from))?;
            if let Some(note) = note {
                eprintln!("{note}");
            }
            let window_length = args.source.window(args.window.as_ref(), true);
            eprintln!(
                "measuring {} pods of {} over {} ...",
                pods.pods.len(),
                pods.which,
                short_duration(window_length)
            );
            let window = fleet::measure(&kube, &pods.pods, window_length).await;
            let fleet_total = fleet::aggregate(&window, fleet::By::Target);
            let line = fleet::pods_line(fleet_total.pods, &fleet_total.left_out, p.all_namespaces);
            if window.pods.is_empty() {
                return Err(Failure::error(format!("no pod could be measured: {line}")));
            }
            (
                target_rates(&window),
                fleet_total.pods,
                line,
                pods.pods.len(),
            )
        }
    };
    let plan =
        plan(&rates, args.cut).map_err(|e| Failure::error(format!("{e}; nothing was created")))?;
    let subject = match &p.workload {
        Some(w) => w.name.clone(),
        None => selector
            .match_labels
            .as_ref()
            .and_then(|m| m.values().next().cloned())
            .unwrap_or_else(|| "pods".to_owned()),
    };
    let name = match &args.name {
        Some(n) => n.clone(),
        None => sampling_policy_name(
            &subject,
            args.cut,
            &random_suffix().map_err(Failure::error)?,
        ),
    };
    let lp = sampling_policy(&plan, args, &kube.namespace, &name, selector.clone());
    crate::raise::check_as_the_pods_would(&lp.spec)?;
    match args.output {
        Format::Table => {
            print!("{}", plan_table(&plan, &rates, args.cut));
            println!("{line}");
            println!();
            print!("{}", yaml(&lp)?);
        }
        format => print!(
            "{}",
            data(
                format,
                &SuggestOutput {
                    cut: args.cut,
                    plan: &plan,
                    projected: projected_with_children(&rates, &plan),
                    pods: coverage,
                    policy: &lp,
                }
            )?
        ),
    }
    if !args.apply {
        return Ok(());
    }
    let created = crate::raise::create_policy(&kube, &lp).await?;
    eprintln!(
        "lp/{name} created in namespace {}: {} {}; waiting for {} pods",
        kube.namespace,
        crate::raise::levels_text(&lp.spec),
        match &args.duration {
            Some(d) => format!("for {d}"),
            None => "until deleted".to_owned(),
        },
        waiting
    );
    let generation = created.metadata.generation.unwrap_or(1);
    wait_for_pods_telling(
        &kube,
        &name,
        generation,
        &selector,
        args.wait.value,
        args.output != Format::Table,
    )
    .await
}

/// `suggest --prometheus`: each target's bytes per second over the window (below
/// `warn` and at or above it) from Prometheus, and the share its sampling keeps now from
/// the [`DRILL_DOWN_PODS`] pods writing the most bytes, read twice 10 s apart; the pods
/// the rates cover, their line, and how many pods a `--apply` waits for.
async fn from_prometheus(
    kube: &crate::cluster::Kube,
    args: &SuggestArgs,
    url: &crate::flags::PrometheusUrl,
) -> Result<(Vec<TargetRate>, Coverage, String, usize)> {
    let selection = prometheus::select(kube, &args.pods).await?;
    let window = args.source.window(args.window.as_ref(), false);
    let prom = Prometheus::now(url);
    eprintln!(
        "reading the rates of {} over the last {} from Prometheus at {url}, and the sampling in force from the {DRILL_DOWN_PODS} pods writing the most ...",
        selection.which,
        short_duration(window)
    );
    let fleet = prom.fleet(&selection, fleet::By::Target, window).await?;
    let q = prometheus::Query::new(selection.scope.clone(), window);
    let bytes = prom
        .query(&q.sum_rate(prometheus::BYTES, "", &["target", "level"]))
        .await
        .map_err(Failure::error)?;
    let drilled = prom.biggest_pods(kube, &selection, &q).await?;
    let kept = target_rates(&fleet::measure(kube, &drilled, Duration::from_secs(10)).await);
    let line = fleet::pods_line(fleet.pods, &fleet.left_out, args.pods.all_namespaces);
    let line = match &fleet.source {
        Some(source) => format!("{line}\n{}", source.line()),
        None => line,
    };
    Ok((
        target_rates_from(&bytes, &kept),
        fleet.pods,
        line,
        fleet.pods.read,
    ))
}

/// `sample-<subject>-cut<PERCENT>-<suffix>`, at most 63 characters.
pub fn sampling_policy_name(subject: &str, cut: f64, suffix: &str) -> String {
    let cleaned: String = subject
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let mut head = format!("sample-{}", cleaned.trim_matches('-'));
    let tail = format!("-cut{:.0}-{suffix}", cut * 100.0);
    head.truncate(63 - tail.len());
    while head.ends_with('-') {
        head.pop();
    }
    format!("{head}{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggest_rates_split_at_warn_and_keep_the_sampling_the_pods_read_say() {
        let t = |target: &str, level: &str, v: f64| prometheus::Sample {
            labels: [("target", target), ("level", level)]
                .into_iter()
                .filter(|(_, v)| !v.is_empty())
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            value: v,
        };
        let bytes = [
            t("shop::http", "info", 1_000.0),
            t("shop::http", "error", 10.0),
            t("shop::db", "warn", 100.0),
            t("logpolicy", "", 5.0),
            t("shop::idle", "debug", 0.0),
        ];
        let kept = [TargetRate {
            target: "shop::http".into(),
            below_warn: 1.0,
            warn_and_above: 0.0,
            kept_share: 0.1,
        }];
        let r = target_rates_from(&bytes, &kept);
        let got: Vec<(&str, f64, f64, f64)> = r
            .iter()
            .map(|r| {
                (
                    r.target.as_str(),
                    r.below_warn,
                    r.warn_and_above,
                    r.kept_share,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("logpolicy (own lines)", 0.0, 5.0, 1.0),
                ("shop::db", 0.0, 100.0, 1.0),
                ("shop::http", 1_000.0, 10.0, 0.1),
            ]
        );
    }

    fn t(target: &str, below: f64, above: f64) -> TargetRate {
        TargetRate {
            target: target.into(),
            below_warn: below,
            warn_and_above: above,
            kept_share: 1.0,
        }
    }

    #[test]
    fn the_biggest_targets_first_with_the_smallest_keep_that_makes_the_cut() {
        // 40% and 30% below warn: neither alone can cut 50%, so both, one in 4 (cut
        // 52.5%), then the smaller eased as far as the cut allows (one in 3: 50.0%).
        let rates = [t("a", 400.0, 0.0), t("b", 300.0, 0.0), t("c", 200.0, 100.0)];
        let p = plan(&rates, 0.5).unwrap();
        let keeps: Vec<(&str, u32)> = p
            .samples
            .iter()
            .map(|s| (s.target.as_str(), s.keep_one_in))
            .collect();
        assert_eq!(keeps, [("a", 4), ("b", 3)]);
        assert!(p.cut() >= 0.5, "{}", p.cut());
        // b at one in 2 would not make it: the plan is as gentle as it can be.
        let gentler = 400.0 / 4.0 + 300.0 / 2.0 + 300.0;
        assert!(gentler > 1000.0 * 0.5);
        assert!((p.projected - (100.0 + 100.0 + 300.0)).abs() < 1e-9);
    }

    #[test]
    fn warnings_and_errors_are_never_cut_and_an_unreachable_cut_says_the_largest() {
        let rates = [t("a", 100.0, 900.0)];
        let e = plan(&rates, 0.5).unwrap_err();
        let PlanError::OutOfReach { largest, .. } = e else {
            panic!("{e}")
        };
        assert!((largest - 9.99).abs() < 1e-9, "{largest}");
        assert!(
            e.to_string().contains("the most sampling can cut is 10.0%"),
            "{e}"
        );
        assert_eq!(
            plan(&[t("a", 0.0, 0.0)], 0.5),
            Err(PlanError::NothingWritten)
        );
    }

    #[test]
    fn a_target_sampled_already_is_planned_from_its_unsampled_rate_and_never_eased() {
        // Kept one in 10 now: it writes 100 B/s of 1,000 unsampled. A 50% cut of its
        // 100 B/s needs one in 20 of the 1,000.
        let sampled = TargetRate {
            target: "a".into(),
            below_warn: 100.0,
            warn_and_above: 0.0,
            kept_share: 0.1,
        };
        let p = plan(std::slice::from_ref(&sampled), 0.5).unwrap();
        assert_eq!(p.samples[0].keep_one_in, 20);
        assert!((p.projected - 50.0).abs() < 1e-9);
        // A tiny cut: never gentler than one in 10, the rule in force.
        let p = plan(&[sampled, t("b", 1000.0, 0.0)], 0.01).unwrap();
        assert_eq!(p.samples.len(), 1);
        assert_eq!(p.samples[0].target, "b");
    }

    #[test]
    fn rates_by_target_split_at_warn_with_the_share_kept() {
        use crate::fleet::fixtures::{counts, pod, site, view};
        use crate::fleet::{window, Reads};
        use logpolicy::wire::CountsView;
        const START: u64 = 1_800_000_000_000;
        let http = |c| site("shop::http", Level::Info, "src/http.rs", 1, c);
        let db = |c| site("shop::db", Level::Debug, "src/db.rs", 2, c);
        let db_err = |c| site("shop::db", Level::Error, "src/db.rs", 3, c);
        let at =
            |ms, rows| Reads::from([(pod("a"), Ok(view(START, START + ms, rows, counts(0, 0))))]);
        let before = at(
            60_000,
            vec![http(counts(0, 0)), db(counts(0, 0)), db_err(counts(0, 0))],
        );
        let after = at(
            70_000,
            vec![
                http(counts(1000, 100_000)),
                // Kept one in 4 now: 100 written, 300 sampled.
                db(CountsView {
                    sampled: 300,
                    ..counts(100, 20_000)
                }),
                db_err(counts(10, 3_000)),
            ],
        );
        let rates = target_rates(&window(&before, &after));
        let by = |t: &str| rates.iter().find(|r| r.target == t).unwrap().clone();
        let http = by("shop::http");
        assert_eq!(
            (http.below_warn, http.warn_and_above, http.kept_share),
            (10_000.0, 0.0, 1.0)
        );
        let db = by("shop::db");
        assert_eq!(
            (db.below_warn, db.warn_and_above, db.kept_share),
            (2_000.0, 300.0, 0.25)
        );
        assert_eq!(rates.len(), 2, "{rates:?}");
    }

    #[test]
    fn a_rule_on_a_parent_samples_its_unnamed_children_and_the_projection_says_so() {
        let rates = [
            t("shop", 800.0, 0.0),
            t("shop::db", 100.0, 0.0),
            t("http", 100.0, 0.0),
        ];
        let p = plan(&rates, 0.5).unwrap();
        assert_eq!(p.samples[0].target, "shop");
        let children = governed_children(&rates, &p);
        assert_eq!(children.len(), 1);
        assert_eq!(
            (children[0].0, children[0].1.target.as_str()),
            ("shop::db", "shop")
        );
        let with = projected_with_children(&rates, &p);
        assert!(with < p.projected, "{with} vs {}", p.projected);
        let text = plan_table(&p, &rates, 0.5);
        assert!(
            text.contains("note: the rule on shop also samples shop::db"),
            "{text}"
        );
        assert!(text.contains("Keeps every warning and error"), "{text}");
    }

    #[test]
    fn names_fit_and_say_what_the_policy_is() {
        assert_eq!(
            sampling_policy_name("shop", 0.5, "x7k2p"),
            "sample-shop-cut50-x7k2p"
        );
        let long = sampling_policy_name(&"a".repeat(80), 0.25, "x7k2p");
        assert!(long.len() <= 63 && long.ends_with("-cut25-x7k2p"), "{long}");
        assert_eq!(
            sampling_policy_name("Shop_API", 0.3, "aaaaa"),
            "sample-shop-api-cut30-aaaaa"
        );
    }
}
