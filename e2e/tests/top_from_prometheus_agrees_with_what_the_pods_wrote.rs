//! `kubectl logpolicy top --prometheus` says what the pods wrote, without reading them:
//! three shop pods under a steady load (150 requests/s each), scraped every second by a
//! real Prometheus (Debian's `prometheus`) configured as the Prometheus Operator
//! configures it from the chart's PodMonitor (the pods found through the real API
//! server, the PodMonitor's relabelings, the `namespace` and `pod` labels). Then:
//! - `top -l app=shop --prometheus URL --window 20s -o json`: lines and bytes per second,
//!   per target and in total, agree within 5 % with the lines the pods wrote to stdout
//!   in the 20 s before the time the plugin evaluated its queries at (which its output
//!   says: `source.at`); every pod is covered (3/3);
//! - `--by pod`: each pod's bytes per second agree within 5 % with what it wrote;
//! - `targets --prometheus`: the three shop targets, each on 3 pods, with the level in
//!   force read from the pods;
//! - `--by callsite --prometheus`: the callsites, read from the pods writing the most
//!   (at most 20), and says so;
//! - `suggest --prometheus`: plans from the bytes per second the pods wrote (within 5 %);
//! - the same without `-l` (every pod Prometheus scrapes in the namespace, the API
//!   server not asked for pods) and through `$LOGPOLICY_PROMETHEUS_URL`;
//! - a Prometheus that cannot be reached, a path that is not its API (404), and a
//!   window too short to hold two scrapes are each a clear error naming the URL and
//!   what was asked (exit 1), never a panic.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::{Duration, UNIX_EPOCH};

use logpolicy_e2e::logs::relative;
use logpolicy_e2e::net::free_port;
use logpolicy_e2e::plugin::{kubectl_logpolicy, kubectl_logpolicy_with_env, PluginRun};
use logpolicy_e2e::process::wait_for;
use logpolicy_e2e::prometheus::{chart_monitoring, pod_discovery, pod_monitor_job, Prometheus};
use logpolicy_e2e::scenario::wait_past;
use logpolicy_e2e::shop::{three_shops, wait_known, SEC};
use logpolicy_e2e::{Operator, Scenario};
use serde_json::{json, Value};

/// Requests per second each pod sends itself.
const LOAD: u32 = 150;
/// `top --window`: the window of Prometheus's rate().
const WINDOW: Duration = Duration::from_secs(20);
/// How far apart the two sides may be, relative to the pods' side.
const TOLERANCE: f64 = 0.05;
/// The fewest lines a target must have written in the window to be compared on its own.
const MEANINGFUL_LINES: u64 = 100;
/// The demo's targets.
const SHOP_TARGETS: [&str; 3] = ["shop::http", "shop::db", "shop::payment"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_from_prometheus_agrees_with_what_the_pods_wrote() {
    let _file = crate::one_file_at_a_time(module_path!());
    let s = Scenario::without_operator("top-prometheus").await.unwrap();
    let _operator = Operator::watching(s.namespace()).unwrap();
    let specs = three_shops()
        .into_iter()
        .map(|p| p.self_load(LOAD))
        .collect();
    let mut pods = s.pods(specs).await.unwrap();
    wait_known(&pods).unwrap();

    // Prometheus, scraping the pods every second as the chart's PodMonitor would.
    let (pod_monitor, _) = chart_monitoring(&[]).unwrap();
    let config = json!({
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [pod_monitor_job(&pod_monitor, "logpolicy-system").unwrap()],
    });
    let listed: Value =
        serde_json::from_str(&s.kubectl(&["get", "pods", "-o", "json"]).unwrap()).unwrap();
    let mut prometheus = Prometheus::start(
        &config.to_string(),
        &[("pods.json", &pod_discovery(&listed).to_string())],
    )
    .unwrap();
    let url = format!("http://{}", prometheus.addr);
    let every_pod = format!(
        "count(count by (pod) (rate(logpolicy_target_bytes_total{{namespace=\"{}\"}}[{}s])))",
        s.namespace(),
        WINDOW.as_secs()
    );
    wait_for(
        Duration::from_secs(60),
        "Prometheus to rate every pod",
        || {
            let n = prometheus.query(&every_pod)?;
            Ok(n.first().filter(|n| n.value == 3.0).map(|_| ()))
        },
    )
    .unwrap();
    // A whole window of scrapes of every pod.
    std::thread::sleep(WINDOW + 2 * SEC);

    let run = plugin(
        &s,
        &[
            "top",
            "-l",
            "app=shop",
            "-o",
            "json",
            "--prometheus",
            &url,
            "--window",
            "20s",
        ],
    );
    run.expect_code(0).unwrap();
    let top: Value = serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {run}"));
    assert_eq!(top["by"], "target", "{run}");
    assert_eq!(top["pods"], json!({"read": 3, "selected": 3}), "{run}");
    assert_eq!(top["leftOut"], json!([]), "{run}");
    assert_eq!(top["source"]["prometheus"], json!(url), "{run}");
    assert_eq!(top["source"]["windowSeconds"], json!(20.0), "{run}");
    let at = UNIX_EPOCH
        + Duration::from_secs_f64(
            top["source"]["at"]
                .as_f64()
                .unwrap_or_else(|| panic!("{run}")),
        );
    let from = at - WINDOW;
    wait_past(&mut pods, at + SEC, 10 * SEC).unwrap();

    // What the pods wrote in the window, by target and by pod.
    let mut by_target: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut by_pod: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for p in &pods {
        for l in p.log.lines().iter().filter(|l| l.ts > from && l.ts <= at) {
            for (map, key) in [(&mut by_target, &l.target), (&mut by_pod, &p.name)] {
                let (lines, bytes) = map.entry(key.clone()).or_default();
                *lines += 1;
                *bytes += l.bytes as u64;
            }
        }
    }
    let seconds = WINDOW.as_secs_f64();
    let per_second = |(lines, bytes): (u64, u64)| (lines as f64 / seconds, bytes as f64 / seconds);
    let rate = |v: &Value| {
        (
            v["linesPerSecond"].as_f64().unwrap_or(f64::NAN),
            v["bytesPerSecond"].as_f64().unwrap_or(f64::NAN),
        )
    };
    let rows = |top: &Value, kind: &str, key: &str| -> BTreeMap<String, (f64, f64)> {
        top["rows"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| r["kind"] == kind)
            .map(|r| (r[key].as_str().unwrap_or_default().to_owned(), rate(r)))
            .collect()
    };

    let mut report = format!(
        "{seconds} s before {:?} (the queries' time); top --prometheus --window 20s\n\
         {:<16} {:>12} {:>12} {:>8}   {:>12} {:>12} {:>8}\n",
        at, "", "lines/s top", "pods", "diff", "bytes/s top", "pods", "diff"
    );
    let mut wrong = Vec::new();
    let mut compare =
        |name: &str, top: (f64, f64), pods: (f64, f64), lines: u64, report: &mut String| {
            report.push_str(&format!(
                "{name:<16} {:>12.1} {:>12.1} {:>+7.1}%   {:>12.1} {:>12.1} {:>+7.1}%\n",
                top.0,
                pods.0,
                relative(top.0, pods.0) * 100.0,
                top.1,
                pods.1,
                relative(top.1, pods.1) * 100.0
            ));
            if lines < MEANINGFUL_LINES {
                return;
            }
            for (what, t, p) in [("lines/s", top.0, pods.0), ("bytes/s", top.1, pods.1)] {
                let off = relative(t, p);
                if off.is_nan() || off.abs() > TOLERANCE {
                    wrong.push(format!(
                        "{name}: top says {t:.1} {what}, the pods wrote {p:.1} {what} ({:+.1} %)",
                        off * 100.0
                    ));
                }
            }
        };
    let top_targets = rows(&top, "target", "target");
    for target in SHOP_TARGETS {
        let counted = by_target.get(target).copied().unwrap_or_default();
        assert!(
            counted.0 >= MEANINGFUL_LINES,
            "{target}: fewer than {MEANINGFUL_LINES} lines in the window\n{run}"
        );
        let top_side = top_targets.get(target).copied().unwrap_or_default();
        compare(
            target,
            top_side,
            per_second(counted),
            counted.0,
            &mut report,
        );
    }
    let total = by_target
        .values()
        .fold((0, 0), |(l, b), (lines, bytes)| (l + lines, b + bytes));
    compare(
        "TOTAL",
        rate(&top["total"]),
        per_second(total),
        total.0,
        &mut report,
    );

    // By pod.
    let by_pod_run = plugin(
        &s,
        &[
            "top",
            "-l",
            "app=shop",
            "-o",
            "json",
            "--prometheus",
            &url,
            "--window",
            "20s",
            "--by",
            "pod",
        ],
    );
    by_pod_run.expect_code(0).unwrap();
    let top_pods: Value = serde_json::from_str(&by_pod_run.stdout).unwrap();
    let at_pods = top_pods["source"]["at"]
        .as_f64()
        .unwrap_or_else(|| panic!("{by_pod_run}"));
    let at_pods = UNIX_EPOCH + Duration::from_secs_f64(at_pods);
    wait_past(&mut pods, at_pods + SEC, 10 * SEC).unwrap();
    let pod_rows = rows(&top_pods, "pod", "pod");
    assert_eq!(pod_rows.len(), 3, "{by_pod_run}");
    for p in &pods {
        let written = p
            .log
            .lines()
            .iter()
            .filter(|l| l.ts > at_pods - WINDOW && l.ts <= at_pods)
            .fold((0u64, 0u64), |(n, b), l| (n + 1, b + l.bytes as u64));
        let top_side = pod_rows.get(&p.name).copied().unwrap_or_default();
        compare(
            &p.name,
            top_side,
            per_second(written),
            written.0,
            &mut report,
        );
    }
    eprintln!("{report}");
    assert!(
        wrong.is_empty(),
        "top --prometheus and the pods' stdout disagree by more than {:.0} %:\n{}\n\n{report}\n{run}",
        TOLERANCE * 100.0,
        wrong.join("\n")
    );

    // The table names its source; every pod of the namespace without -l.
    let table = plugin(&s, &["top", "--prometheus", &url, "--window", "20s"]);
    table.expect_code(0).unwrap();
    assert!(
        table
            .stdout
            .lines()
            .any(|l| l.starts_with("TOTAL (3/3 pods) ")),
        "{table}"
    );
    assert!(
        table
            .stdout
            .lines()
            .any(|l| l.starts_with(&format!("from Prometheus {url}: rates over 20s up to "))),
        "{table}"
    );
    assert!(
        table
            .stdout
            .lines()
            .any(|l| l.starts_with("shop::http ") && l.contains(" -  ")),
        "held back by target is not in Prometheus: `-`\n{table}"
    );

    // targets: from Prometheus, each shop target on the 3 pods, the level in force read
    // from them.
    let targets = plugin(
        &s,
        &[
            "targets",
            "-l",
            "app=shop",
            "-o",
            "json",
            "--prometheus",
            &url,
        ],
    );
    targets.expect_code(0).unwrap();
    let known: Value = serde_json::from_str(&targets.stdout).unwrap();
    for target in SHOP_TARGETS {
        let t = known["targets"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|t| t["target"] == target)
            .unwrap_or_else(|| panic!("no {target}: {targets}"));
        assert_eq!(t["pods"], 3, "{target}: {targets}");
        assert_eq!(
            t["levelNow"],
            json!([{"level": "info", "pods": 3}]),
            "{target}: {targets}"
        );
    }
    assert_eq!(
        known["pods"],
        json!({"read": 3, "selected": 3}),
        "{targets}"
    );
    assert!(
        targets
            .stderr
            .contains(&format!("from Prometheus at {url}")),
        "{targets}"
    );

    // By callsite: read from the pods writing the most, and said so.
    let callsites = plugin(
        &s,
        &[
            "top",
            "-l",
            "app=shop",
            "--by",
            "callsite",
            "--prometheus",
            &url,
            "--window",
            "2s",
        ],
    );
    callsites.expect_code(0).unwrap();
    assert!(
        callsites
            .stderr
            .contains("reading the callsites of the 3 pods of -l app=shop writing the most bytes"),
        "{callsites}"
    );
    assert!(callsites.stdout.contains("src/"), "{callsites}");

    // suggest: the rates from Prometheus (the pods' total within 5 % of what they
    // wrote), the sampling in force from the pods.
    let suggest = plugin(
        &s,
        &[
            "suggest",
            "-l",
            "app=shop",
            "--cut",
            "50%",
            "--prometheus",
            &url,
            "--window",
            "20s",
            "-o",
            "json",
        ],
    );
    suggest.expect_code(0).unwrap();
    let plan: Value = serde_json::from_str(&suggest.stdout).unwrap();
    assert_eq!(plan["pods"], json!({"read": 3, "selected": 3}), "{suggest}");
    assert!(
        plan["plan"]["samples"]
            .as_array()
            .is_some_and(|s| !s.is_empty()),
        "{suggest}"
    );
    let now = plan["plan"]["now"].as_f64().unwrap_or(f64::NAN);
    let written = per_second(total).1;
    assert!(
        relative(now, written).abs() <= TOLERANCE,
        "suggest plans from {now:.1} B/s, the pods wrote {written:.1} B/s\n{suggest}"
    );
    assert!(
        suggest
            .stderr
            .contains(&format!("from Prometheus at {url}")),
        "{suggest}"
    );

    // $LOGPOLICY_PROMETHEUS_URL names it when the flag does not.
    let env_run = plugin_env(
        &s,
        &["top", "-l", "app=shop", "-o", "json", "--window", "20s"],
        &url,
    );
    env_run.expect_code(0).unwrap();
    let v: Value =
        serde_json::from_str(&env_run.stdout).unwrap_or_else(|e| panic!("{e}: {env_run}"));
    assert_eq!(v["source"]["prometheus"], json!(url), "{env_run}");

    // Errors name the URL and what was asked.
    let nobody = format!("http://127.0.0.1:{}", free_port().unwrap());
    let unreachable = plugin(&s, &["top", "-l", "app=shop", "--prometheus", &nobody]);
    unreachable.expect_code(1).unwrap();
    assert!(
        unreachable
            .stderr
            .contains(&format!("Prometheus at {nobody}: cannot connect to"))
            && unreachable
                .stderr
                .contains("asked: count by (namespace, pod)"),
        "{unreachable}"
    );
    let not_api = format!("{url}/not-prometheus");
    let wrong_path = plugin(&s, &["targets", "--prometheus", &not_api]);
    wrong_path.expect_code(1).unwrap();
    assert!(
        wrong_path.stderr.contains(&format!(
            "Prometheus at {not_api}: HTTP 404, not an answer of Prometheus's API"
        )),
        "{wrong_path}"
    );
    let too_short = plugin(
        &s,
        &[
            "top",
            "-l",
            "app=shop",
            "--prometheus",
            &url,
            "--window",
            "1s",
        ],
    );
    too_short.expect_code(1).unwrap();
    assert!(
        too_short.stderr.contains(&format!(
            "Prometheus at {url} has no logpolicy_target_bytes_total series with a rate over the last 1s for -l app=shop (3 pods listed)"
        )),
        "{too_short}"
    );
    for run in [&unreachable, &wrong_path, &too_short] {
        assert!(!run.stderr.contains("panicked"), "{run}");
    }
    drop(prometheus);
}

fn plugin(s: &Scenario, args: &[&str]) -> PluginRun {
    kubectl_logpolicy(s.namespace(), None, args).unwrap()
}

/// The plugin with `LOGPOLICY_PROMETHEUS_URL=url`.
fn plugin_env(s: &Scenario, args: &[&str], url: &str) -> PluginRun {
    kubectl_logpolicy_with_env(
        s.namespace(),
        None,
        args,
        &[("LOGPOLICY_PROMETHEUS_URL", url)],
    )
    .unwrap()
}
