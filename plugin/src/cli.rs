//! The command line: `kubectl logpolicy
//! raise|list|status|extend|revert|effective|top|targets|suggest|check|completion`.

use clap::{ArgGroup, Args, Parser, Subcommand};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use logpolicy::policy::{SamplingSpec, TargetSpec, WhenSpec};
use logpolicy::Level;

use crate::cluster::Connection;
use crate::flags::{
    parse_level, parse_policy_name, parse_prometheus_url, parse_reason, parse_redact, parse_sample,
    parse_target, parse_when, PolicyDuration, PrometheusUrl, PROMETHEUS_URL_ENV, PROMETHEUS_WINDOW,
};
use crate::fleet::By;
use crate::output::Format;
use crate::selector::{parse_label_selector, WorkloadRef};

const ABOUT: &str = "Raise a workload's log levels for a while, and see it applied in its pods";

const LONG_ABOUT: &str = "\
Raise a workload's log levels for a while with a LogPolicy, and wait until every pod
of it has applied the change; list, extend and revert those policies.

Only pods labelled logpolicy.dev/enabled=true are changed (they run the logpolicy
layer with its admin endpoint); the logpolicy operator pushes each policy into them.

Exit codes: 0 done (every selected pod acknowledged); 1 other errors (the API server
cannot be reached, an object is not found); 2 bad arguments; 3 none of the selected
pods has opted in; 4 some pods did not acknowledge within --wait (the policy stays);
5 the operator is not running; 6 refused by the API server or the operator; 7 raise:
no selected pod knows a --target (nothing was created); 8 check: a check failed.";

const RAISE_EXAMPLES: &str = "\
Examples:
  # shop::payment at debug in the pods of deploy/shop for 15 minutes
  kubectl logpolicy raise deploy/shop --target shop::payment=debug --reason 'INC-4211: card declines'

  # ... and first write the debug lines the pods recorded in the last 5 minutes
  # (a standing LogPolicy with record: [{target: shop::payment, level: debug}])
  kubectl logpolicy raise deploy/shop --target shop::payment=debug --since 5m

  # Pods by label, trace for 10 minutes, one request in 100 of the access log kept
  kubectl logpolicy raise -l app=shop,tier!=canary --target shop=trace \\
      --sample shop::http=1/100:request --for 10m

  # Also write the field card_token as [redacted]
  kubectl logpolicy raise sts/ledger --target ledger=debug --redact card_token

  # Print the LogPolicy it would create, and create nothing
  kubectl logpolicy raise deploy/shop --target shop::payment=debug --dry-run

  # A target whose code has not run yet on any pod (no callsite of it is known)
  kubectl logpolicy raise deploy/shop --target shop::refund=debug --allow-unknown-target

  # Do not measure what the raise costs once applied
  kubectl logpolicy raise deploy/shop --target shop::payment=debug --measure 0";

const SUGGEST_EXAMPLES: &str = "\
Examples:
  # The sampling that halves what deploy/shop's pods write, and its LogPolicy
  kubectl logpolicy suggest deploy/shop --cut 50%

  # Create it (standing: it lasts until deleted); or for a day
  kubectl logpolicy suggest deploy/shop --cut 50% --apply
  kubectl logpolicy suggest -l app=shop --cut 30% --apply --for 24h

  # The plan as JSON, measured over 30 seconds
  kubectl logpolicy suggest -n shop --cut 50% --window 30s -o json";

const TOP_EXAMPLES: &str = "\
Examples:
  # Every opted-in pod of the namespace, by target, over 10 seconds
  kubectl logpolicy top -n shop

  # The callsites of deploy/shop's pods that write the most, over 30 seconds
  kubectl logpolicy top deploy/shop --by callsite --window 30s

  # Each pod of every namespace, refreshed every 10 seconds until Ctrl-C
  kubectl logpolicy top -A --by pod --watch

  # As JSON (rates as numbers per second, shares from 0 to 1)
  kubectl logpolicy top -l app=shop -o json";

const CHECK_EXAMPLES: &str = "\
Examples:
  # Why a raise may not reach the opted-in pods of namespace shop
  kubectl logpolicy check -n shop

  # The pods of deploy/shop only; the operator installed in namespace ops
  kubectl logpolicy check deploy/shop --operator-namespace ops

  # Every namespace, as JSON
  kubectl logpolicy check -A -o json";

const TARGETS_EXAMPLES: &str = "\
Examples:
  kubectl logpolicy targets deploy/shop
  kubectl logpolicy targets -l app=shop -o yaml
  kubectl logpolicy targets -A";

/// `kubectl logpolicy`.
#[derive(Debug, Parser)]
#[command(
    name = "kubectl-logpolicy",
    bin_name = "kubectl logpolicy",
    version,
    about = ABOUT,
    long_about = LONG_ABOUT
)]
pub struct Cli {
    /// Where and as whom.
    #[command(flatten)]
    pub connection: Connection,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create a temporary LogPolicy for a workload's pods and wait until they applied it.
    #[command(after_help = RAISE_EXAMPLES)]
    Raise(Box<RaiseArgs>),
    /// List the LogPolicies: targets and levels, pods applied, time left, reason.
    #[command(
        after_help = "Examples:\n  kubectl logpolicy list\n  kubectl logpolicy list -A -o yaml"
    )]
    List(ListArgs),
    /// A LogPolicy's pods (applied, pending, failed) and conditions.
    #[command(
        after_help = "Examples:\n  kubectl logpolicy status raise-shop-payment-debug-x7k2p\n  kubectl logpolicy status raise-shop-payment-debug-x7k2p -o json"
    )]
    Status(StatusArgs),
    /// Make a LogPolicy last a given time from now, and wait until the pods applied it.
    #[command(
        after_help = "Examples:\n  # 10 more minutes from now\n  kubectl logpolicy extend raise-shop-payment-debug-x7k2p --for 10m"
    )]
    Extend(ExtendArgs),
    /// Delete LogPolicies and wait until their pods dropped them.
    #[command(
        after_help = "Examples:\n  kubectl logpolicy revert raise-shop-payment-debug-x7k2p\n  # Every LogPolicy of the namespace\n  kubectl logpolicy revert --all -n shop"
    )]
    Revert(RevertArgs),
    /// What a pod enforces now, and the LogPolicies it comes from.
    #[command(after_help = "Examples:\n  kubectl logpolicy effective shop-7d9c5b-x2x4q -n shop")]
    Effective(EffectiveArgs),
    /// What the pods' logging costs now: lines and bytes per second by target, callsite
    /// or pod, and what policy held back or the writer dropped.
    #[command(after_help = TOP_EXAMPLES)]
    Top(TopArgs),
    /// Every target the pods know: its callsites' levels, the level in force now, and on
    /// how many pods.
    #[command(after_help = TARGETS_EXAMPLES)]
    Targets(TargetsArgs),
    /// The sampling that cuts what the pods write by a share, from their measured rates,
    /// never touching warnings and errors; --apply creates it.
    #[command(after_help = SUGGEST_EXAMPLES)]
    Suggest(SuggestArgs),
    /// Whether a raise can reach the pods: the CRD, the operator running and its key, the
    /// trust ConfigMap, and each pod opted in, reachable, trusting the key, its clock;
    /// one line each, exit 8 on a failure.
    #[command(after_help = CHECK_EXAMPLES)]
    Check(CheckArgs),
    /// Print a shell completion script.
    #[command(
        after_help = "Examples:\n  kubectl logpolicy completion bash > /etc/bash_completion.d/kubectl-logpolicy\n  kubectl logpolicy completion zsh > \"${fpath[1]}/_kubectl-logpolicy\"\n  kubectl logpolicy completion fish > ~/.config/fish/completions/kubectl-logpolicy.fish"
    )]
    Completion {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// `raise`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("pods").required(true).args(["workload", "selector"])))]
#[command(group(ArgGroup::new("what").required(true).multiple(true).args(["targets", "default_level", "samples"])))]
pub struct RaiseArgs {
    /// The workload whose pods to raise: deploy/NAME, sts/NAME, ds/NAME or rs/NAME (its
    /// spec.selector selects the pods).
    pub workload: Option<WorkloadRef>,
    /// The pods to raise, by label, in kubectl's syntax: a=b,c!=d,e in (x,y),!f,g.
    #[arg(short = 'l', long = "selector", value_parser = parse_label_selector)]
    pub selector: Option<LabelSelector>,
    /// A target's level, TARGET=LEVEL (e.g. shop::payment=debug); repeatable. Levels:
    /// trace, debug, info, warn, error, off.
    #[arg(long = "target", value_name = "T=LEVEL", value_parser = parse_target)]
    pub targets: Vec<TargetSpec>,
    /// Only in requests whose span recorded FIELD with one of these values (e.g.
    /// user_id=42, or tenant=acme,globex): the --target levels (and per-event --sample
    /// rules) apply to those requests alone, on every selected pod, and to no other.
    /// Requires --target.
    #[arg(
        long,
        value_name = "FIELD=V[,V...]",
        value_parser = parse_when,
        requires = "targets",
        conflicts_with_all = ["default_level", "always_keep", "redact"]
    )]
    pub when: Option<WhenSpec>,
    /// The level of every target no --target names.
    #[arg(long, value_name = "LEVEL", value_parser = parse_level)]
    pub default_level: Option<Level>,
    /// Keep one in N events of a target (or whole requests, with :request), below
    /// --always-keep: T=1/N[:request]; repeatable.
    #[arg(long = "sample", value_name = "T=1/N[:request]", value_parser = parse_sample)]
    pub samples: Vec<SamplingSpec>,
    /// Events at or above this level are never sampled out (the pods' default: warn).
    #[arg(long, value_name = "LEVEL", value_parser = parse_level)]
    pub always_keep: Option<Level>,
    /// A field name whose values the pods write as [redacted]; repeatable.
    #[arg(long = "redact", value_name = "NAME", value_parser = parse_redact)]
    pub redact: Vec<String>,
    /// How long the policy applies (e.g. 15m, 1h30m, 90s; at most 8760h).
    #[arg(long = "for", value_name = "DURATION", default_value = "15m")]
    pub duration: PolicyDuration,
    /// First write the lines the pods' recording rules kept from this long before the
    /// raise (e.g. 5m; at most 24h): each pod replays what it still holds, once, with the
    /// lines' own times, and the table says how many lines and from when.
    #[arg(long, value_name = "DURATION", value_parser = parse_since)]
    pub since: Option<PolicyDuration>,
    /// Why, in one line (e.g. an incident number): shown by list and kubectl get lp -o wide.
    #[arg(long, value_parser = parse_reason)]
    pub reason: Option<String>,
    /// The LogPolicy's name (default: raise-<workload>-<target>-<level>-<5 random>).
    #[arg(long, value_parser = parse_policy_name)]
    pub name: Option<String>,
    /// Higher wins per target over other policies, from -1000 to 1000.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(i32).range(-1000..=1000))]
    pub priority: i32,
    /// How long to wait for the pods to acknowledge.
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub wait: PolicyDuration,
    /// Print the LogPolicy as YAML and create nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Create the policy even if no selected pod knows a --target or --sample target (its
    /// code has not run yet: a target is known once one of its callsites has run).
    #[arg(long)]
    pub allow_unknown_target: bool,
    /// Once every pod acknowledged, measure what the pods write over this long and print
    /// it beside what they would write without the raise; 0 skips it.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_measure)]
    pub measure: PolicyDuration,
}

/// `list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Every namespace.
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t)]
    pub output: Format,
}

/// `status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The LogPolicy.
    pub name: String,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t)]
    pub output: Format,
}

/// `extend`.
#[derive(Debug, Args)]
pub struct ExtendArgs {
    /// The LogPolicy.
    pub name: String,
    /// How long from now it applies (e.g. 10m).
    #[arg(long = "for", value_name = "DURATION")]
    pub duration: PolicyDuration,
    /// How long to wait for the pods to acknowledge.
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub wait: PolicyDuration,
}

/// `revert`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("which").required(true).args(["names", "all"])))]
pub struct RevertArgs {
    /// The LogPolicies to delete.
    pub names: Vec<String>,
    /// Every LogPolicy of the namespace.
    #[arg(long)]
    pub all: bool,
    /// How long to wait for the pods to drop them.
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub wait: PolicyDuration,
}

/// `effective`.
#[derive(Debug, Args)]
pub struct EffectiveArgs {
    /// The pod.
    pub pod: String,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t)]
    pub output: Format,
}

/// Which pods a fleet command (`top`, `targets`) reads: a workload's, a selector's, or
/// every opted-in pod of the namespace (of every namespace with `-A`).
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("pods").args(["workload", "selector"])))]
pub struct PodsArgs {
    /// The workload whose pods to read: deploy/NAME, sts/NAME, ds/NAME or rs/NAME
    /// (default: every pod that opted in).
    pub workload: Option<WorkloadRef>,
    /// The pods to read, by label, in kubectl's syntax: a=b,c!=d,e in (x,y),!f,g.
    #[arg(short = 'l', long = "selector", value_parser = parse_label_selector)]
    pub selector: Option<LabelSelector>,
    /// The pods of every namespace.
    #[arg(short = 'A', long, conflicts_with = "workload")]
    pub all_namespaces: bool,
}

/// Where a fleet command (`top`, `targets`, `suggest`) reads the rates: a Prometheus,
/// or the pods themselves through the API server's pod proxy (at most
/// [`crate::fleet::MAX_POD_READS`] of them, or a sample).
#[derive(Debug, Args)]
pub struct SourceArgs {
    /// Read the rates from this Prometheus (http://HOST[:PORT][/PATH]), which scrapes the
    /// pods' /metrics (the chart's PodMonitor), not from each pod; the per-callsite
    /// figures come from the 20 pods writing the most.
    #[arg(long, value_name = "URL", env = PROMETHEUS_URL_ENV, value_parser = parse_prometheus_url)]
    pub prometheus: Option<PrometheusUrl>,
    /// Without --prometheus: read N of the selected pods, spread over them (by namespace
    /// and name), when more than 200 are selected; at most 200.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=200))]
    pub sample_pods: Option<u16>,
}

impl SourceArgs {
    /// The window: `given`, else 10 s reading the pods (and, with `--prometheus`, for
    /// what comes from the pods: `pods`), else [`PROMETHEUS_WINDOW`].
    pub fn window(&self, given: Option<&PolicyDuration>, pods: bool) -> std::time::Duration {
        match given {
            Some(w) => w.value,
            None if self.prometheus.is_none() || pods => std::time::Duration::from_secs(10),
            None => PROMETHEUS_WINDOW,
        }
    }

    /// `Err` when both `--prometheus` (or its variable) and `--sample-pods` are given.
    pub fn check(&self) -> crate::exit::Result<()> {
        if self.prometheus.is_some() && self.sample_pods.is_some() {
            return Err(crate::exit::Failure::new(
                crate::exit::USAGE,
                format!(
                    "--sample-pods reads a sample of the pods, --prometheus (or ${PROMETHEUS_URL_ENV}) reads Prometheus: give one of them"
                ),
            ));
        }
        Ok(())
    }
}

/// `top`.
#[derive(Debug, Args)]
pub struct TopArgs {
    /// Which pods.
    #[command(flatten)]
    pub pods: PodsArgs,
    /// Where the rates come from.
    #[command(flatten)]
    pub source: SourceArgs,
    /// The time between the two reads the rates come from (1s to 1h; default 10s); with
    /// --prometheus, the window of rate() (default 2m); with --watch, the time between
    /// refreshes.
    #[arg(long, value_name = "DURATION", value_parser = parse_window)]
    pub window: Option<PolicyDuration>,
    /// One row per target, per callsite (file:line, level, target) or per pod.
    #[arg(long, value_enum, default_value_t)]
    pub by: By,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t)]
    pub output: Format,
    /// Refresh every window until Ctrl-C, each row with its bytes per second over the
    /// last minute (with -o json or yaml: one document per refresh).
    #[arg(short = 'w', long)]
    pub watch: bool,
    /// With --watch, stop after this many refreshes.
    #[arg(long, value_name = "N", requires = "watch", value_parser = clap::value_parser!(u64).range(1..))]
    pub watch_count: Option<u64>,
}

/// `targets`.
#[derive(Debug, Args)]
pub struct TargetsArgs {
    /// Which pods.
    #[command(flatten)]
    pub pods: PodsArgs,
    /// Where the targets come from.
    #[command(flatten)]
    pub source: SourceArgs,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t)]
    pub output: Format,
}

/// `check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Which pods (default: every opted-in pod of the namespace).
    #[command(flatten)]
    pub pods: PodsArgs,
    /// Output format (a line per check, or the report as data).
    #[arg(short = 'o', long, value_enum, default_value_t)]
    pub output: Format,
}

/// `suggest`.
#[derive(Debug, Args)]
pub struct SuggestArgs {
    /// Which pods.
    #[command(flatten)]
    pub pods: PodsArgs,
    /// Where the rates come from.
    #[command(flatten)]
    pub source: SourceArgs,
    /// The share of the bytes to cut, in percent (e.g. 50%, or 50), from 1 to 99.
    #[arg(long, value_name = "PERCENT", value_parser = parse_cut)]
    pub cut: f64,
    /// The time between the two reads the rates come from (1s to 1h; default 10s); with
    /// --prometheus, the window of rate() (default 2m).
    #[arg(long, value_name = "DURATION", value_parser = parse_window)]
    pub window: Option<PolicyDuration>,
    /// Create the LogPolicy (standing, unless --for), and wait for its pods.
    #[arg(long, conflicts_with = "all_namespaces")]
    pub apply: bool,
    /// With --apply: how long it applies (default: until deleted).
    #[arg(long = "for", value_name = "DURATION", requires = "apply")]
    pub duration: Option<PolicyDuration>,
    /// The LogPolicy's name (default: sample-<workload>-cut<PERCENT>-<5 random>).
    #[arg(long, value_parser = parse_policy_name)]
    pub name: Option<String>,
    /// Higher wins per target over other policies, from -1000 to 1000.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(i32).range(-1000..=1000))]
    pub priority: i32,
    /// Why, in one line: shown by list and kubectl get lp -o wide.
    #[arg(long, value_parser = parse_reason)]
    pub reason: Option<String>,
    /// With --apply: how long to wait for the pods to acknowledge.
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub wait: PolicyDuration,
    /// Output format (the plan and its LogPolicy).
    #[arg(short = 'o', long, value_enum, default_value_t)]
    pub output: Format,
}

/// `suggest --cut`: a percentage from 1 to 99 (`50%` or `50`), as a share from 0.01 to
/// 0.99.
pub fn parse_cut(s: &str) -> Result<f64, String> {
    let n = s.trim().strip_suffix('%').unwrap_or(s.trim());
    let v: f64 = n
        .parse()
        .map_err(|_| format!("{s:?} is not a percentage (e.g. 50%)"))?;
    if !(1.0..=99.0).contains(&v) {
        return Err(format!(
            "{s:?}: the cut must be from 1% to 99% (all of it would mean no logs: set the level instead)"
        ));
    }
    Ok(v / 100.0)
}

/// `raise --since`: from 1s to 24h (what a pod's recorder may keep), as
/// `spec.replay.since` takes it.
pub fn parse_since(s: &str) -> Result<PolicyDuration, String> {
    let text = s.trim();
    let value = logpolicy_api::validate::replay_window(text)
        .map_err(|e| format!("{e}; use numbers with units s, m, h, e.g. 5m, 90s"))?;
    Ok(PolicyDuration {
        text: text.to_owned(),
        value,
    })
}

/// `raise --measure`: 0 (skip), or from 1s to 10m.
pub fn parse_measure(s: &str) -> Result<PolicyDuration, String> {
    let t = s.trim();
    if matches!(t, "0" | "0s" | "0ms" | "0m" | "0h") {
        return Ok(PolicyDuration {
            text: t.to_owned(),
            value: std::time::Duration::ZERO,
        });
    }
    let d: PolicyDuration = s.parse()?;
    if !d.value.is_zero()
        && (d.value < std::time::Duration::from_secs(1)
            || d.value > std::time::Duration::from_secs(600))
    {
        return Err(format!(
            "{:?}: the measure must be 0 (skip it) or from 1s to 10m",
            d.text
        ));
    }
    Ok(d)
}

/// The shortest and longest `top --window`.
pub const WINDOW_RANGE: (std::time::Duration, std::time::Duration) = (
    std::time::Duration::from_secs(1),
    std::time::Duration::from_secs(3600),
);

/// `--window`: a duration from 1s to 1h.
pub fn parse_window(s: &str) -> Result<PolicyDuration, String> {
    let d: PolicyDuration = s.parse()?;
    let (min, max) = WINDOW_RANGE;
    if d.value < min || d.value > max {
        return Err(format!(
            "{:?}: the window must be from 1s to 1h (the pods' read times are in milliseconds, and counts need time to grow)",
            d.text
        ));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use std::time::Duration;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("kubectl-logpolicy").chain(args.iter().copied()))
    }

    fn raise(args: &[&str]) -> RaiseArgs {
        match parse(args).unwrap().command {
            Command::Raise(r) => *r,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn raise_takes_a_workload_or_a_selector_and_defaults_to_15m() {
        let r = raise(&["raise", "deploy/shop", "--target", "shop::payment=debug"]);
        assert_eq!(r.workload.unwrap().to_string(), "deploy/shop");
        assert_eq!(r.duration.value, Duration::from_secs(900));
        assert_eq!(r.wait.value, Duration::from_secs(10));
        assert_eq!(r.targets[0].target, "shop::payment");
        let r = raise(&[
            "raise",
            "-l",
            "app=shop,tier in (web)",
            "--default-level",
            "debug",
            "--for",
            "10s",
            "--sample",
            "shop::http=1/10:request",
            "--redact",
            "card_token",
            "--priority",
            "5",
            "--reason",
            "INC-1",
            "--name",
            "mine",
            "--wait",
            "5s",
            "--dry-run",
            "-n",
            "shop",
        ]);
        assert!(r.selector.is_some() && r.workload.is_none());
        assert_eq!(r.samples[0].keep_one_in, 10);
        assert_eq!((r.priority, r.dry_run), (5, true));
        assert_eq!(r.name.as_deref(), Some("mine"));
    }

    #[test]
    fn bad_raises_are_refused_with_the_flag_and_the_bad_part() {
        for (args, says) in [
            (&["raise", "--target", "a=debug"][..], "required"),
            (&["raise", "deploy/shop"][..], "required"),
            (
                &["raise", "deploy/shop", "-l", "a=b", "--target", "a=debug"][..],
                "cannot be used with",
            ),
            (
                &["raise", "deploy/shop", "--target", "a=loud"][..],
                "\"loud\" is not a level",
            ),
            (
                &["raise", "pod/shop", "--target", "a=debug"][..],
                "\"pod\" is not a workload kind",
            ),
            (
                &["raise", "-l", "a in b", "--target", "a=debug"][..],
                "parentheses",
            ),
            (
                &["raise", "deploy/shop", "--target", "a=debug", "--for", "0s"][..],
                "--for <DURATION>",
            ),
            (
                &["raise", "deploy/shop", "--target", "a=debug", "--for", "1d"][..],
                "\"1d\"",
            ),
            (
                &[
                    "raise",
                    "deploy/shop",
                    "--target",
                    "a=debug",
                    "--priority",
                    "2000",
                ][..],
                "2000",
            ),
            (
                &[
                    "raise",
                    "deploy/shop",
                    "--target",
                    "a=debug",
                    "--sample",
                    "a=1/0",
                ][..],
                "N in 1/0",
            ),
            (
                &[
                    "raise",
                    "deploy/shop",
                    "--target",
                    "a=debug",
                    "--name",
                    "Bad_Name",
                ][..],
                "not a valid name",
            ),
        ] {
            let err = parse(args).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{args:?}");
            let text = err.to_string();
            assert!(text.contains(says), "{args:?}: {text}");
        }
    }

    #[test]
    fn other_commands() {
        let Command::Revert(r) = parse(&["revert", "--all", "--wait", "3s"]).unwrap().command
        else {
            panic!()
        };
        assert!(r.all && r.names.is_empty());
        assert!(parse(&["revert"]).is_err());
        assert!(parse(&["revert", "a", "--all"]).is_err());
        let Command::Extend(e) = parse(&["extend", "x", "--for", "10m"]).unwrap().command else {
            panic!()
        };
        assert_eq!(e.duration.value, Duration::from_secs(600));
        assert!(parse(&["extend", "x"]).is_err());
        let Command::List(l) = parse(&["list", "-A", "-o", "yaml"]).unwrap().command else {
            panic!()
        };
        assert!(l.all_namespaces && l.output == Format::Yaml);
        assert!(parse(&["list", "-o", "xml"]).is_err());
        assert!(parse(&["completion", "zsh"]).is_ok());
        assert!(parse(&["completion", "tcsh"]).is_err());
        let help = Cli::command()
            .find_subcommand_mut("raise")
            .unwrap()
            .render_long_help()
            .to_string();
        assert!(
            help.contains("kubectl logpolicy raise deploy/shop"),
            "{help}"
        );
    }

    #[test]
    fn top_and_targets_take_a_workload_a_selector_or_every_opted_in_pod() {
        let Command::Top(t) = parse(&["top"]).unwrap().command else {
            panic!()
        };
        assert!(t.pods.workload.is_none() && t.pods.selector.is_none());
        assert!(t.window.is_none() && t.source.prometheus.is_none());
        assert_eq!(
            t.source.window(t.window.as_ref(), false),
            Duration::from_secs(10)
        );
        assert_eq!(
            (t.by, t.output, t.watch),
            (By::Target, Format::Table, false)
        );
        let Command::Top(t) = parse(&[
            "top",
            "deploy/shop",
            "--window",
            "30s",
            "--by",
            "callsite",
            "-o",
            "json",
            "--watch",
            "--watch-count",
            "2",
            "-n",
            "shop",
        ])
        .unwrap()
        .command
        else {
            panic!()
        };
        assert_eq!(t.pods.workload.unwrap().to_string(), "deploy/shop");
        assert_eq!(
            t.window.as_ref().map(|w| w.value),
            Some(Duration::from_secs(30))
        );
        assert_eq!((t.by, t.output), (By::Callsite, Format::Json));
        assert_eq!((t.watch, t.watch_count), (true, Some(2)));
        let Command::Top(t) = parse(&["top", "-A", "-l", "app=shop", "--by", "pod"])
            .unwrap()
            .command
        else {
            panic!()
        };
        assert!(t.pods.all_namespaces && t.pods.selector.is_some() && t.by == By::Pod);
        let Command::Targets(t) = parse(&["targets", "sts/ledger", "-o", "yaml"])
            .unwrap()
            .command
        else {
            panic!()
        };
        assert_eq!(t.pods.workload.unwrap().to_string(), "sts/ledger");
        assert_eq!(t.output, Format::Yaml);
        for (args, says) in [
            (&["top", "deploy/shop", "-A"][..], "cannot be used with"),
            (
                &["top", "deploy/shop", "-l", "a=b"][..],
                "cannot be used with",
            ),
            (&["top", "--window", "500ms"][..], "from 1s to 1h"),
            (&["top", "--window", "2h"][..], "from 1s to 1h"),
            (&["top", "--by", "level"][..], "level"),
            (&["top", "--watch-count", "3"][..], "--watch"),
            (&["top", "--watch", "--watch-count", "0"][..], "0"),
            (&["targets", "deploy/shop", "-A"][..], "cannot be used with"),
            (&["targets", "pod/x"][..], "\"pod\" is not a workload kind"),
        ] {
            let err = parse(args).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{args:?}");
            let text = err.to_string();
            assert!(text.contains(says), "{args:?}: {text}");
        }
        for command in ["top", "targets"] {
            let help = Cli::command()
                .find_subcommand_mut(command)
                .unwrap()
                .render_long_help()
                .to_string();
            assert!(
                help.contains(&format!("kubectl logpolicy {command} ")),
                "{help}"
            );
        }
    }

    #[test]
    fn suggest_takes_a_cut_in_percent_and_raise_a_measure() {
        let Command::Suggest(a) = parse(&["suggest", "deploy/shop", "--cut", "50%"])
            .unwrap()
            .command
        else {
            panic!()
        };
        assert_eq!(a.cut, 0.5);
        assert!(!a.apply && a.duration.is_none());
        assert!(a.window.is_none());
        assert_eq!(parse_cut("25").unwrap(), 0.25);
        for bad in ["0%", "100%", "fifty", "-5"] {
            assert!(parse_cut(bad).is_err(), "{bad}");
        }
        let e = parse(&["suggest", "--cut", "50%", "--for", "1h"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--apply"), "{e}");
        let e = parse(&["suggest", "--cut", "50%", "-A", "--apply"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot be used with"), "{e}");
        let r = raise(&["raise", "deploy/shop", "--target", "shop=debug"]);
        assert_eq!(r.measure.value, Duration::from_secs(5));
        assert!(!r.allow_unknown_target);
        let r = raise(&[
            "raise",
            "deploy/shop",
            "--target",
            "shop=debug",
            "--measure",
            "0",
            "--allow-unknown-target",
        ]);
        assert!(r.measure.value.is_zero() && r.allow_unknown_target);
        let e = parse(&[
            "raise",
            "deploy/shop",
            "--target",
            "shop=debug",
            "--measure",
            "2h",
        ])
        .unwrap_err()
        .to_string();
        assert!(e.contains("from 1s to 10m"), "{e}");
    }
}
