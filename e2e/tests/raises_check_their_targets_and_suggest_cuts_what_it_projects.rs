//! What logging costs, seen through the plugin, against the real API server, the real
//! operator and real demo services:
//! - a raise of a misspelt target exits 7, creates nothing, and names the right target;
//!   `--allow-unknown-target` goes ahead; a raise of a real target prints what it adds
//!   (close to the lines its callsites write on the pods' stdout), records it on the
//!   policy, and `list` shows it;
//! - `suggest --cut 50% --apply` on the shop pods: the bytes per second measured
//!   afterwards are within 10% of its projection, and every warning and error the pods
//!   emitted is still written (their stdout against their own count of events).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, SystemTime};

use logpolicy_e2e::net::get_ok;
use logpolicy_e2e::plugin::{kubectl_logpolicy, PluginRun};
use logpolicy_e2e::shop::{three_shops, wait_known, wait_target_known};
use logpolicy_e2e::{DemoPod, Operator, Scenario};
use serde_json::Value;

/// A namespace with its own operator and three shop pods whose `shop::payment` has run
/// (its error line, on every 20th request).
async fn world(name: &str) -> (Scenario, Operator, Vec<DemoPod>) {
    let s = Scenario::without_operator(name).await.unwrap();
    let operator = Operator::watching(s.namespace()).unwrap();
    let pods = s.pods(three_shops()).await.unwrap();
    wait_known(&pods).unwrap();
    wait_target_known(&pods, "shop::payment").unwrap();
    (s, operator, pods)
}

fn plugin(s: &Scenario, operator: &Operator, args: &[&str]) -> PluginRun {
    kubectl_logpolicy(s.namespace(), Some(operator.namespace.as_str()), args).unwrap()
}

/// A pod's ledger (`GET /logpolicy/sites` at its admin endpoint).
fn sites(pod: &DemoPod) -> Value {
    get_ok(pod.admin, "/logpolicy/sites")
        .unwrap()
        .json()
        .unwrap()
}

/// The LogPolicies of the namespace, by name.
fn policies(s: &Scenario) -> String {
    s.kubectl(&["get", "lp", "-o", "name"]).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_misspelt_raise_is_refused_and_a_real_one_says_what_it_costs() {
    let _file = crate::one_file_at_a_time(module_path!());
    let (s, operator, mut pods) = world("plugin-cost").await;

    // The misspelt target: exit 7, the right name, nothing created.
    let run = plugin(
        &s,
        &operator,
        &[
            "raise",
            "-l",
            "app=shop",
            "--target",
            "shop::payments=debug",
        ],
    );
    run.expect_code(7).unwrap();
    assert!(
        run.stderr.contains("did you mean `shop::payment`?"),
        "{run}"
    );
    assert!(run.stderr.contains("Nothing was created."), "{run}");
    assert!(run.stderr.contains("--allow-unknown-target"), "{run}");
    assert!(!policies(&s).contains("logpolic"), "{}", policies(&s));

    // A target whose code has not run: refused, then allowed.
    let run = plugin(
        &s,
        &operator,
        &["raise", "-l", "app=shop", "--target", "shop::refund=debug"],
    );
    run.expect_code(7).unwrap();
    let run = plugin(
        &s,
        &operator,
        &[
            "raise",
            "-l",
            "app=shop",
            "--target",
            "shop::refund=debug",
            "--allow-unknown-target",
            "--measure",
            "0",
            "--name",
            "refund",
        ],
    );
    run.expect_code(0).unwrap();
    assert!(
        !run.stdout.contains("ADDED"),
        "--measure 0 measures nothing: {run}"
    );
    plugin(&s, &operator, &["revert", "refund"])
        .expect_code(0)
        .unwrap();

    // The real one: what it adds is shop::payment's debug line, one per request.
    let run = plugin(
        &s,
        &operator,
        &[
            "raise",
            "-l",
            "app=shop",
            "--target",
            "shop::payment=debug",
            "--measure",
            "4s",
            "--for",
            "10m",
            "--name",
            "payments",
        ],
    );
    run.expect_code(0).unwrap();
    let measured_from = SystemTime::now() - Duration::from_secs(4);
    assert!(run.stdout.contains("ADDED BYTES/S"), "{run}");
    let total: Vec<&str> = run
        .stdout
        .lines()
        .find(|l| l.starts_with("total"))
        .unwrap_or_else(|| panic!("no total row: {run}"))
        .split_whitespace()
        .collect();
    // total  LINES/S  BYTES/S (2 cells)  ADDED LINES/S  ADDED BYTES/S (2 cells)
    let added_lines: f64 = total[4].parse().unwrap_or_else(|_| panic!("{total:?}"));
    // Three pods at 20 requests a second each: one debug `authorising` line a request.
    // What their stdout shows over the same seconds, per second.
    let mut written = 0usize;
    for p in &mut pods {
        p.refresh().unwrap();
        written += p
            .log
            .lines()
            .iter()
            .filter(|l| {
                l.ts >= measured_from
                    && l.ts < measured_from + Duration::from_secs(4)
                    && l.is("shop::payment", "DEBUG")
            })
            .count();
    }
    let on_stdout = written as f64 / 4.0;
    assert!(
        (added_lines - on_stdout).abs() <= 0.2 * on_stdout,
        "added {added_lines} lines/s, the pods' stdout shows {on_stdout}/s of shop::payment debug\n{run}"
    );
    assert!(run.stdout.contains("about "), "{run}");
    assert!(run.stdout.contains("more over its 10m"), "{run}");

    // Recorded on the policy; list and status show it.
    let lp = s.policy("payments").unwrap();
    let recorded: Value = serde_json::from_str(
        lp["metadata"]["annotations"]["logpolicy.dev/measured-cost"]
            .as_str()
            .unwrap_or_else(|| panic!("no cost annotation: {lp}")),
    )
    .unwrap();
    assert_eq!(recorded["pods"], 3, "{recorded}");
    assert!(
        recorded["bytesPerSecond"].as_f64().unwrap()
            > recorded["beforeBytesPerSecond"].as_f64().unwrap(),
        "{recorded}"
    );
    let list = plugin(&s, &operator, &["list"]);
    list.expect_code(0).unwrap();
    assert!(list.stdout.contains("COST"), "{list}");
    let row = list
        .stdout
        .lines()
        .find(|l| l.starts_with("payments "))
        .unwrap_or_else(|| panic!("{list}"));
    assert!(row.contains(" +"), "{list}");
    let status = plugin(&s, &operator, &["status", "payments"]);
    assert!(
        status.stdout.contains("Cost:        before the raise"),
        "{status}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suggest_cuts_what_it_projects_and_keeps_every_warning_and_error() {
    let _file = crate::one_file_at_a_time(module_path!());
    let (s, operator, mut pods) = world("plugin-suggest").await;

    let run = plugin(
        &s,
        &operator,
        &[
            "suggest", "-l", "app=shop", "--cut", "50%", "--window", "5s", "--apply", "--name",
            "halve", "-o", "json",
        ],
    );
    run.expect_code(0).unwrap();
    // The JSON document comes first; the waiting for the pods follows on stderr.
    let plan: Value = serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {run}"));
    let projected = plan["projected"].as_f64().unwrap();
    let now = plan["plan"]["now"].as_f64().unwrap();
    assert!(projected <= now * 0.5 + 1e-6, "{plan}");
    let samples = plan["plan"]["samples"].as_array().unwrap();
    assert!(
        samples.iter().any(|x| x["target"] == "shop::http"),
        "the access log is the biggest: {plan}"
    );
    assert!(
        samples
            .iter()
            .all(|x| x["keepOneIn"].as_u64().unwrap() >= 2),
        "{plan}"
    );
    let lp = s.policy("halve").unwrap();
    assert!(lp["spec"].get("duration").is_none(), "standing: {lp}");

    // What the pods write now, over 10 s, from their ledgers.
    let warn_error_before: Vec<(u64, u64)> = pods.iter().map(warn_error_counts).collect();
    let top = plugin(
        &s,
        &operator,
        &["top", "-l", "app=shop", "--window", "10s", "-o", "json"],
    );
    top.expect_code(0).unwrap();
    let measured: Value = serde_json::from_str(&top.stdout).unwrap();
    let after = measured["total"]["bytesPerSecond"].as_f64().unwrap();
    eprintln!("suggest --cut 50%: {now:.0} B/s before, projected {projected:.0} B/s, measured {after:.0} B/s");
    assert!(
        (after - projected).abs() <= 0.10 * projected,
        "projected {projected:.0} B/s, measured {after:.0} B/s afterwards\n{top}"
    );

    // Every warning and error emitted is written: per pod, nothing at those levels was
    // held back or dropped (its ledger), and its stdout has at least as many as its
    // ledger counted emitted (read first), and more than before the policy.
    for (p, before) in pods.iter_mut().zip(&warn_error_before) {
        let (emitted, lost) = warn_error_counts(p);
        assert_eq!(lost, 0, "{}: a warning or error was not written", p.name);
        assert!(
            emitted > before.0,
            "{}: no warning or error emitted since",
            p.name
        );
        // What the writer counted is on its way out: give it a moment.
        std::thread::sleep(Duration::from_millis(300));
        p.refresh().unwrap();
        let on_stdout = p
            .log
            .lines()
            .iter()
            .filter(|l| l.level == "WARN" || l.level == "ERROR")
            .filter(|l| l.target.starts_with("shop"))
            .count() as u64;
        assert!(
            on_stdout >= emitted,
            "{}: {on_stdout} warnings and errors on stdout, {emitted} emitted",
            p.name
        );
    }
}

/// A pod's warn and error events of the shop's targets as its ledger counts them:
/// (emitted: written + held back + dropped, held back + dropped).
fn warn_error_counts(pod: &DemoPod) -> (u64, u64) {
    let view = sites(pod);
    let mut emitted = 0;
    let mut lost = 0;
    for row in view["rows"].as_array().unwrap() {
        let level = row["level"].as_str().unwrap_or_default();
        let target = row["target"].as_str().unwrap_or_default();
        if !target.starts_with("shop") || !(level == "warn" || level == "error") {
            continue;
        }
        // The counts are the row's own fields (`lines`, `bytes`, `sampled`, ...).
        let n = |k: &str| row[k].as_u64().unwrap_or(0);
        let not_written = n("sampled")
            + n("burst")
            + n("budget")
            + n("queueFull")
            + n("reserveFull")
            + n("outputClosed")
            + n("shutdown")
            + n("contended")
            + n("evicted");
        emitted += n("lines") + not_written;
        lost += not_written;
    }
    (emitted, lost)
}
