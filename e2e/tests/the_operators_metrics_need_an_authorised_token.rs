//! The operator's `/metrics` as the chart deploys it (`metrics.auth.enabled`, on by
//! default: `--metrics-auth token`), against the real API server: without a token, or
//! with one the API server never issued, 401; with the token of a ServiceAccount not
//! bound to the chart's metrics-reader ClusterRole, 403 naming the account; once it is
//! bound, 200 with the metrics (within the 10 s a refusal is remembered). The operator
//! checks tokens with the chart's RBAC alone (no 403 in its log), and `/healthz` and
//! `/readyz` need no token. With `metrics.auth.enabled=false` anyone reads `/metrics`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure is a test failure

use std::time::{Duration, Instant};

use logpolicy_e2e::accounts::{bind_cluster_role, service_account_token};
use logpolicy_e2e::net::{http, Reply};
use logpolicy_e2e::operator::OperatorOptions;
use logpolicy_e2e::process::wait_for;
use logpolicy_e2e::{Cluster, Operator};

fn get(operator: &Operator, path: &str, token: Option<&str>) -> Reply {
    let authorization = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = authorization
        .as_deref()
        .map(|a| ("authorization", a))
        .into_iter()
        .collect();
    http(operator.metrics_addr, "GET", path, &headers, "").unwrap()
}

#[test]
fn metrics_answer_401_without_a_token_403_to_an_unbound_account_and_200_once_it_is_bound() {
    let _file = crate::one_file_at_a_time(module_path!());
    let cluster = Cluster::shared().unwrap();
    let ns = cluster.namespace("metricsauth").unwrap();
    let operator = Operator::watching(&ns.name).unwrap();

    let reply = get(&operator, "/metrics", None);
    assert_eq!(reply.status, 401, "{}", reply.body);
    assert!(
        reply.body.contains("no Authorization header"),
        "{}",
        reply.body
    );
    let reply = get(
        &operator,
        "/metrics",
        Some("not-a-token-the-api-server-issued"),
    );
    assert_eq!(reply.status, 401, "{}", reply.body);
    assert!(
        reply.body.contains("does not accept this token"),
        "{}",
        reply.body
    );

    // A real ServiceAccount token, of an account nobody let read metrics.
    let token = service_account_token(cluster, &operator.namespace, "nosy", &[]).unwrap();
    let reply = get(&operator, "/metrics", Some(&token));
    let user = format!("system:serviceaccount:{}:nosy", operator.namespace);
    assert_eq!(reply.status, 403, "{}", reply.body);
    assert!(
        reply.body.contains(&format!("{user} may not get /metrics")),
        "{}",
        reply.body
    );
    assert!(
        !reply.body.contains("logpolicy_operator_"),
        "{}",
        reply.body
    );

    // Bound to the chart's reader role: let in once the refusal is forgotten.
    let reader = format!("{}-logpolicy-operator-metrics-reader", operator.release);
    bind_cluster_role(cluster, &reader, &operator.namespace, "nosy").unwrap();
    let bound = Instant::now();
    let body = wait_for(Duration::from_secs(30), "/metrics to let nosy in", || {
        let reply = get(&operator, "/metrics", Some(&token));
        match reply.status {
            200 => Ok(Some(reply.body)),
            403 => Ok(None),
            other => panic!("{other}: {}", reply.body),
        }
    })
    .unwrap();
    assert!(
        bound.elapsed() < Duration::from_secs(15),
        "a refusal is remembered 10 s, not {:?}",
        bound.elapsed()
    );
    assert!(
        body.contains("# TYPE logpolicy_operator_pods_tracked gauge"),
        "{body}"
    );
    // The harness's own scraper (the same role) reads them too.
    assert!(operator
        .metrics()
        .unwrap()
        .contains("logpolicy_operator_pods_tracked"));

    // Probes need no token.
    for path in ["/healthz", "/readyz"] {
        assert_eq!(get(&operator, path, None).status, 200, "{path}");
    }
    // The chart's RBAC let the operator review every token.
    assert_eq!(operator.forbidden_lines(), Vec::<String>::new());
}

#[test]
fn with_metrics_auth_off_anyone_reads_metrics() {
    let _file = crate::one_file_at_a_time(module_path!());
    let cluster = Cluster::shared().unwrap();
    let ns = cluster.namespace("metricsopen").unwrap();
    let operator = Operator::start(OperatorOptions {
        set: vec![
            ("metrics.auth.enabled".to_owned(), "false".to_owned()),
            ("watchNamespaces".to_owned(), format!("{{{}}}", ns.name)),
        ],
        ..OperatorOptions::default()
    })
    .unwrap();
    assert_eq!(operator.metrics_token, None);
    let reply = get(&operator, "/metrics", None);
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(reply.body.contains("logpolicy_operator_pods_tracked"));
}
