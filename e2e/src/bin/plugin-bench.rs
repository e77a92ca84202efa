//! `plugin-bench`: how long `kubectl logpolicy raise`, `revert` and `top` take, start to
//! exit, with 1,000 opted-in pods, against the real API server and the real operator.
//!
//! ```sh
//! export LOGPOLICY_E2E_DIR=/tmp/logpolicy-e2e-bench; eval "$(e2e/cluster/up)"
//! cargo build --profile test -p logpolicy-operator -p logpolicy-demo-service -p kubectl-logpolicy --bins
//! cargo run --profile test -p logpolicy-e2e --bin plugin-bench          # 1,000 pods
//! cargo run --profile test -p logpolicy-e2e --bin plugin-bench -- 200   # fewer
//! ```
//!
//! The pods are Pod objects (Running, Ready, `podIP` 127.0.x.y) whose admin endpoints
//! are the simulated ones of the operator's `push-bench` (`push-bench agents 0 N N KEY 0 0`:
//! one process listening on N loopback addresses, verifying each signed document as the
//! layer does, answering `GET /logpolicy` with the layers it holds and
//! `GET /logpolicy/sites` with a ledger of a few callsites whose counts grow with time),
//! trusting the operator's key. The operator watches only the bench's namespace.
//!
//! Measured: `raise` from start to exit with every pod acknowledged (the operator's
//! status says N/N), and `revert` from start to exit with every pod confirmed, through
//! its admin endpoint, to no longer hold the policy; and the operator's RSS after each.
//! Then `top -l app=bench --window 2s --sample-pods 200 -o json` (the most pods `top`
//! reads through the pod proxy) from start to exit with every pod of the sample
//! measured: that time minus the window is what listing the pods and reading the
//! sample's ledgers (twice) add to the window (target: 3 s).
//! Results: a markdown table on stdout and `target/bench/kubectl-plugin.json`.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use logpolicy_e2e::bench::{self, status_mib, SimulatedPods};
use logpolicy_e2e::binaries::Binaries;
use logpolicy_e2e::cluster::repo_root;
use logpolicy_e2e::net::get_ok;
use logpolicy_e2e::operator::OperatorOptions;
use logpolicy_e2e::plugin::kubectl_logpolicy;
use logpolicy_e2e::pod::create_running_pods_at;
use logpolicy_e2e::process::wait_for;
use logpolicy_e2e::{Error, Operator, Result, Scenario};
use logpolicy_operator::simulated::{addr, pod_name};

fn main() -> ExitCode {
    let pods = match std::env::args().nth(1).map(|a| a.parse::<usize>()) {
        None => 1000,
        Some(Ok(n)) if (1..=1000).contains(&n) => n,
        Some(_) => {
            eprintln!("plugin-bench: the argument is the number of pods, 1 to 1000");
            return ExitCode::from(2);
        }
    };
    bench::run("plugin-bench", bench(pods))
}

/// `top --window`.
const TOP_WINDOW: Duration = Duration::from_secs(2);
/// `top --sample-pods`: the most pods it reads through the pod proxy.
const TOP_SAMPLE: usize = 200;

async fn bench(pods: usize) -> Result<()> {
    let s = Scenario::without_operator("plugin-bench").await?;
    let ns = s.namespace().to_owned();
    let operator = Operator::start(OperatorOptions {
        set: vec![("watchNamespaces".to_owned(), format!("{{{ns}}}"))],
        ..OperatorOptions::default()
    })?;
    let push_bench = Binaries::get()?.dir.join("push-bench");
    let n = pods.to_string();
    let (agents, _) = SimulatedPods::start(
        &push_bench,
        None,
        &["0", &n, &n, &operator.trusted_keys, "0", "0"],
    )?;

    let started = Instant::now();
    let labels = [("app".to_owned(), "bench".to_owned())].into();
    let specs = (0..pods).map(|i| (pod_name(i), addr(i))).collect();
    create_running_pods_at(&s.client, &ns, specs, &labels).await?;
    // The operator's first push to every pod (the empty document).
    wait_for(
        Duration::from_secs(60),
        "the operator to know every pod",
        || {
            let views = get_ok(operator.metrics_addr, "/pods")?.json()?;
            let known = views
                .as_array()
                .into_iter()
                .flatten()
                .filter(|v| v["namespace"] == ns.as_str() && v["inSync"] == true)
                .count();
            Ok((known == pods).then_some(()))
        },
    )?;
    eprintln!(
        "{pods} pods created and known to the operator in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let idle_rss = status_mib(operator.pid(), "VmRSS:");

    let raise = kubectl_logpolicy(
        &ns,
        Some(&operator.namespace),
        &[
            "raise",
            "-l",
            "app=bench",
            "--target",
            "bench=debug",
            "--for",
            "15m",
            "--wait",
            "60s",
            // Start to exit with every pod acknowledged: not the cost measure after it.
            "--measure",
            "0",
        ],
    )?;
    if raise.code != 0 {
        return Err(Error(format!("raise: {raise}")));
    }
    let name = raise.created_policy()?;
    let raised_rss = status_mib(operator.pid(), "VmRSS:");
    let revert = kubectl_logpolicy(
        &ns,
        Some(&operator.namespace),
        &["revert", &name, "--wait", "60s"],
    )?;
    if revert.code != 0 {
        return Err(Error(format!("revert: {revert}")));
    }
    let reverted_rss = status_mib(operator.pid(), "VmRSS:");
    let top = kubectl_logpolicy(
        &ns,
        None,
        &[
            "top",
            "-l",
            "app=bench",
            "--window",
            &format!("{}s", TOP_WINDOW.as_secs()),
            "--sample-pods",
            &TOP_SAMPLE.to_string(),
            "-o",
            "json",
        ],
    )?;
    if top.code != 0 {
        return Err(Error(format!("top: {top}")));
    }
    let measured: serde_json::Value =
        serde_json::from_str(&top.stdout).map_err(|e| Error(format!("top -o json: {e}: {top}")))?;
    let lines = measured["total"]["linesPerSecond"].as_f64();
    if measured["pods"]["read"] != pods.min(TOP_SAMPLE) || !lines.is_some_and(|l| l > 0.0) {
        return Err(Error(format!(
            "top did not measure every pod: pods {}, total {}; {}",
            measured["pods"], measured["total"], measured["leftOut"]
        )));
    }
    let top_reads = top.took.saturating_sub(TOP_WINDOW);
    drop(agents);

    println!("| pods | raise, start to exit (all acknowledged) | revert, start to exit (all confirmed) | top --window 2s --sample-pods 200, start to exit (all measured) | of which the reads (minus the window; target 3 s) | operator RSS idle / after raise / after revert |");
    println!("|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {pods} | {:.2} s | {:.2} s | {:.2} s | {:.2} s | {idle_rss:.1} / {raised_rss:.1} / {reverted_rss:.1} MiB |",
        raise.took.as_secs_f64(),
        revert.took.as_secs_f64(),
        top.took.as_secs_f64(),
        top_reads.as_secs_f64()
    );
    let json = serde_json::json!({
        "pods": pods,
        "raise_seconds": raise.took.as_secs_f64(),
        "revert_seconds": revert.took.as_secs_f64(),
        "top_window_seconds": TOP_WINDOW.as_secs_f64(),
        "top_seconds": top.took.as_secs_f64(),
        "top_reads_seconds": top_reads.as_secs_f64(),
        "operator_rss_mib": {"idle": idle_rss, "after_raise": raised_rss, "after_revert": reverted_rss},
        "targets": {"raise_seconds": 2, "revert_seconds": 2, "top_reads_seconds": 3},
    });
    let dir = repo_root().join("target/bench");
    let file = dir.join("kubectl-plugin.json");
    std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(&file, format!("{json:#}\n")))
        .map_err(|e| Error(format!("{}: {e}", file.display())))?;
    Ok(())
}
