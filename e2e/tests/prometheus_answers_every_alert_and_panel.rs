//! A real Prometheus server, set up as the chart sets up the Prometheus Operator's:
//! it scrapes the operator's `/metrics` with its ServiceAccount's token (as the
//! ServiceMonitor does; the chart binds that account to its metrics-reader ClusterRole
//! through `metrics.auth.readers`, and a scrape without the token gets 401), finds the opted-in pods through the real API server and
//! scrapes their admin endpoint with the chart's PodMonitor relabelings (as the
//! Prometheus Operator turns a PodMonitor into a scrape configuration), and evaluates
//! the rules of the chart's PrometheusRule. Then every query of the Grafana dashboard
//! answers with data, every rule evaluates without error, the alerts of a healthy
//! installation stay quiet, a raise in force past the (shortened) maximum fires
//! `LogPolicyRaiseOutstanding` for each raised pod, and killing the operator fires
//! `LogPolicyOperatorDown`.
//!
//! There is no Prometheus Operator here: the scrape configuration is written the way it
//! generates one (`job`, `namespace`, `container`, `pod` from service discovery, then
//! the PodMonitor's relabelings, which the test takes from the rendered chart). Nor is
//! there Kubernetes service discovery (Debian builds Prometheus without it): the test
//! reads the Pod objects from the API server and hands Prometheus, through a discovery
//! file, the targets and `__meta_kubernetes_pod_*` labels that discovery would make of
//! them (one target per container port, or per container without ports).

use std::collections::BTreeSet;
use std::time::Duration;

use logpolicy_e2e::cluster::repo_root;
use logpolicy_e2e::operator::{Operator, OperatorOptions};
use logpolicy_e2e::process::wait_for;
use logpolicy_e2e::prometheus::{
    chart_monitoring, pod_discovery, pod_monitor_job, Prometheus, Sample, Target,
};
use logpolicy_e2e::shop::{payment_policy, wait_known};
use logpolicy_e2e::{Error, PodSpec, Result, Scenario};
use serde_json::{json, Value};

/// Scrapes and rule evaluations every second: rates over this window have samples.
const RATE_WINDOW: &str = "10s";

/// Every query of the dashboard, with its panel's title, Grafana's variables
/// substituted as a user picking `namespace` (and every pod) would see them.
fn dashboard_queries(namespace: &str) -> Result<Vec<(String, String)>> {
    let path = repo_root().join("charts/logpolicy-operator/files/dashboard.json");
    let text =
        std::fs::read_to_string(&path).map_err(|e| Error(format!("{}: {e}", path.display())))?;
    let dashboard: Value =
        serde_json::from_str(&text).map_err(|e| Error(format!("{}: {e}", path.display())))?;
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().into_iter().flatten() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().unwrap_or_default();
            let expr = expr
                .replace("$__rate_interval", RATE_WINDOW)
                .replace("$namespace", namespace)
                .replace("$pod", ".*");
            assert!(!expr.contains('$'), "a variable left in {expr}");
            queries.push((panel["title"].as_str().unwrap_or("?").to_owned(), expr));
        }
    }
    Ok(queries)
}

/// The values of `samples` by the label `label`.
fn by(samples: &[Sample], label: &str) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = samples
        .iter()
        .map(|s| (s.labels.get(label).cloned().unwrap_or_default(), s.value))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The alerts Prometheus holds now (`/api/v1/alerts`): name, state and labels.
fn alerts(prometheus: &mut Prometheus) -> Result<Vec<(String, String, Value)>> {
    let data = prometheus.api("alerts", "")?;
    Ok(data["alerts"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| {
            (
                a["labels"]["alertname"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                a["state"].as_str().unwrap_or_default().to_owned(),
                a["labels"].clone(),
            )
        })
        .collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_answers_every_alert_and_panel() {
    let _file = crate::one_file_at_a_time(module_path!());
    let s = Scenario::without_operator("prom").await.unwrap();
    let ns = s.namespace().to_owned();
    // The chart binds its metrics-reader ClusterRole (get on /metrics) to Prometheus's
    // ServiceAccount.
    let mut operator = Operator::start(OperatorOptions {
        set: vec![
            ("watchNamespaces".to_owned(), format!("{{{ns}}}")),
            // One --set for both fields: a second one naming readers[0] replaces it.
            (
                "metrics.auth.readers[0].namespace".to_owned(),
                format!("{ns},metrics.auth.readers[0].name=prometheus"),
            ),
        ],
        ..OperatorOptions::default()
    })
    .unwrap();

    // Prometheus's ServiceAccount (allowed to list the pods, as its service discovery
    // would be).
    s.apply(&format!(
        r#"
apiVersion: v1
kind: ServiceAccount
metadata: {{name: prometheus}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: prometheus-discovery}}
rules:
- {{apiGroups: [""], resources: [pods], verbs: [get, list, watch]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: prometheus-discovery}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: prometheus-discovery}}
subjects: [{{kind: ServiceAccount, name: prometheus, namespace: {ns}}}]
"#
    ))
    .unwrap();
    let token = s
        .kubectl(&["create", "token", "prometheus", "--duration=1h"])
        .unwrap();

    let pods = s
        .pods(vec![PodSpec::shop("shop-0"), PodSpec::shop("shop-1")])
        .await
        .unwrap();
    wait_known(&pods).unwrap();
    // A raise with an expiry: what LogPolicyRaiseOutstanding watches.
    let raise = payment_policy("incident", "debug") + "  duration: 10m\n";
    s.apply(&raise).unwrap();
    s.wait_condition("incident", "Applied", "True", Duration::from_secs(20))
        .unwrap();

    // The alerts as the chart renders them, two `for`s shortened so that they fire
    // within the test: a raise in force for 5 s is past its maximum, an operator not
    // scraped for 2 s is down.
    let (pod_monitor, rule) = chart_monitoring(&[
        ("prometheusRule.alerts.LogPolicyRaiseOutstanding.for", "5s"),
        ("prometheusRule.alerts.LogPolicyOperatorDown.for", "2s"),
    ])
    .unwrap();
    let rules = json!({"groups": rule["spec"]["groups"]});
    let operator_target = operator.metrics_addr.to_string();
    let config = json!({
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "rule_files": ["rules.yaml"],
        "scrape_configs": [
            {
                // As the ServiceMonitor: the token of Prometheus's ServiceAccount, and the
                // labels the Prometheus Operator gives an endpoint's target.
                "job_name": "logpolicy-operator",
                "authorization": {"credentials_file": "token"},
                "static_configs": [{"targets": [operator_target], "labels": {
                    "namespace": operator.namespace, "pod": operator.pod_name}}],
            },
            {
                "job_name": "without-a-token",
                "static_configs": [{"targets": [operator_target]}],
            },
            pod_monitor_job(&pod_monitor, "logpolicy-system").unwrap(),
        ],
    });
    let listed: Value =
        serde_json::from_str(&s.kubectl(&["get", "pods", "-o", "json"]).unwrap()).unwrap();
    let discovered = pod_discovery(&listed);
    let mut prometheus = Prometheus::start(
        &config.to_string(),
        &[
            ("rules.yaml", &rules.to_string()),
            ("token", token.trim()),
            ("pods.json", &discovered.to_string()),
        ],
    )
    .unwrap();

    // The operator with the token, without it refused; one target per pod, at the
    // address of its port annotation, with the labels the PodMonitor gives it.
    let shop_urls: BTreeSet<String> = pods
        .iter()
        .map(|p| format!("http://{}/metrics", p.admin))
        .collect();
    let scraped = |targets: &[Target], job: &str| -> BTreeSet<String> {
        targets
            .iter()
            .filter(|t| t.job == job && t.health == "up")
            .map(|t| t.url.clone())
            .collect()
    };
    let workloads_job = format!(
        "logpolicy-system/{}",
        pod_monitor["metadata"]["name"].as_str().unwrap()
    );
    let targets = wait_for(Duration::from_secs(30), "every target scraped", || {
        let targets = prometheus.targets()?;
        let refused = targets
            .iter()
            .any(|t| t.job == "without-a-token" && t.health == "down");
        Ok((scraped(&targets, "logpolicy-operator").len() == 1
            && scraped(&targets, &workloads_job) == shop_urls
            && refused)
            .then_some(targets))
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", prometheus.tail(20)));
    let workload_targets: Vec<&Target> =
        targets.iter().filter(|t| t.job == workloads_job).collect();
    assert_eq!(workload_targets.len(), 2, "one target per pod: {targets:?}");
    let mut labelled: Vec<(String, String)> = workload_targets
        .iter()
        .map(|t| {
            (
                t.labels["namespace"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                t.labels["pod"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    labelled.sort();
    assert_eq!(
        labelled,
        [
            (ns.clone(), "shop-0".to_owned()),
            (ns.clone(), "shop-1".to_owned())
        ]
    );
    let refused = targets.iter().find(|t| t.job == "without-a-token").unwrap();
    assert!(
        refused.last_error.contains("401"),
        "the operator's /metrics without a token: {refused:?}"
    );

    // Every panel's every query answers with data.
    let queries = dashboard_queries(&ns).unwrap();
    assert!(queries.len() >= 18, "{queries:?}");
    wait_for(
        Duration::from_secs(30),
        "every dashboard query to answer with data",
        || {
            let mut empty = Vec::new();
            for (title, expr) in &queries {
                if prometheus.query(expr)?.is_empty() {
                    empty.push(format!("{title}: {expr}"));
                }
            }
            if empty.is_empty() {
                Ok(Some(()))
            } else {
                Err(Error(format!("no data for:\n{}", empty.join("\n"))))
            }
        },
    )
    .unwrap();
    eprintln!(
        "{} queries of the dashboard answered with data",
        queries.len()
    );
    // What a few of them say (once each pod has been scraped twice: a rate needs two
    // samples).
    let bytes_query = format!(
        "sum by (pod) (rate(logpolicy_target_bytes_total{{namespace=\"{ns}\", target=\"shop::http\"}}[{RATE_WINDOW}]))"
    );
    let bytes = wait_for(
        Duration::from_secs(30),
        "shop::http bytes per second from both pods",
        || {
            let bytes = prometheus.query(&bytes_query)?;
            let pods: Vec<String> = by(&bytes, "pod").into_iter().map(|b| b.0).collect();
            Ok(
                (pods == ["shop-0", "shop-1"] && bytes.iter().all(|b| b.value > 0.0))
                    .then_some(bytes),
            )
        },
    )
    .unwrap();
    eprintln!("shop::http bytes/s by pod: {:?}", by(&bytes, "pod"));
    let layers = prometheus
        .query(&format!(
            "logpolicy_policy_active_layers{{namespace=\"{ns}\"}} - 1"
        ))
        .unwrap();
    assert_eq!(
        by(&layers, "pod"),
        [("shop-0".to_owned(), 1.0), ("shop-1".to_owned(), 1.0)],
        "one raise in force on each pod"
    );
    let leaders = prometheus.query("sum(logpolicy_operator_leader)").unwrap();
    assert_eq!(leaders.first().map(|l| l.value), Some(1.0));
    // The policy's own series: both pods acknowledged it, under the policy's namespace
    // (not the scrape's `namespace`).
    let unacknowledged = prometheus
        .query(&format!(
            "logpolicy_operator_policy_pods_unacknowledged{{policy_namespace=\"{ns}\", policy=\"incident\"}}"
        ))
        .unwrap();
    assert_eq!(
        unacknowledged.iter().map(|u| u.value).collect::<Vec<_>>(),
        [0.0],
        "one series for the policy, every pod acknowledged"
    );

    // Every rule loads and evaluates without error.
    let groups = prometheus.rule_groups().unwrap();
    let names: Vec<&str> = groups.iter().filter_map(|g| g["name"].as_str()).collect();
    assert_eq!(names, ["logpolicy-operator", "logpolicy-workloads"]);
    for group in &groups {
        for rule in group["rules"].as_array().unwrap() {
            assert_eq!(rule["health"], "ok", "{rule}");
            assert_eq!(rule["lastError"].as_str().unwrap_or_default(), "", "{rule}");
        }
    }

    // The raise has been in force for longer than 5 s on both pods: that alert fires,
    // for each pod, and no other does.
    let firing = wait_for(
        Duration::from_secs(30),
        "LogPolicyRaiseOutstanding to fire for both pods",
        || {
            let firing: Vec<_> = alerts(&mut prometheus)?
                .into_iter()
                .filter(|a| a.1 == "firing")
                .collect();
            Ok((firing
                .iter()
                .filter(|a| a.0 == "LogPolicyRaiseOutstanding")
                .count()
                == 2)
                .then_some(firing))
        },
    )
    .unwrap();
    let mut raised: Vec<(String, String)> = firing
        .iter()
        .map(|a| {
            assert_eq!(a.0, "LogPolicyRaiseOutstanding", "{firing:?}");
            (
                a.2["namespace"].as_str().unwrap_or_default().to_owned(),
                a.2["pod"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    raised.sort();
    assert_eq!(
        raised,
        [
            (ns.clone(), "shop-0".to_owned()),
            (ns.clone(), "shop-1".to_owned())
        ]
    );

    // The operator killed: down within the 2 s of its `for` and a few scrapes.
    let killed = std::time::Instant::now();
    operator.kill();
    wait_for(
        Duration::from_secs(30),
        "LogPolicyOperatorDown to fire",
        || {
            Ok(alerts(&mut prometheus)?
                .iter()
                .any(|a| a.0 == "LogPolicyOperatorDown" && a.1 == "firing")
                .then_some(()))
        },
    )
    .unwrap();
    eprintln!(
        "LogPolicyOperatorDown firing {:.1} s after the operator was killed",
        killed.elapsed().as_secs_f64()
    );
    drop(pods);
}
