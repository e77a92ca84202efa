//! Every object the chart renders, with the default values and each other value set,
//! passes a server-side dry run (`kubectl apply --dry-run=server`) on the e2e cluster's
//! real kube-apiserver (Kubernetes 1.20): schemas, defaults and admission, not just YAML.
//! So does the opt-in example `e2e/examples/workload.yaml`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers: a failure is a test failure

use std::sync::OnceLock;

use logpolicy_e2e::cluster::repo_root;
use logpolicy_e2e::helm::{parse_documents, render_for, to_yaml, E2E_KUBE_VERSION};
use logpolicy_e2e::{Cluster, Namespace};
use serde_json::Value;

const RELEASE: &str = "lp";

fn cluster() -> &'static Cluster {
    Cluster::shared().expect("the e2e cluster (e2e/cluster/up)")
}

/// The ServiceMonitor's CRD (the Prometheus Operator's) is not part of Kubernetes: when
/// the cluster has none, a stand-in with the same names and an open schema is created,
/// so the ServiceMonitor is still checked for its API group, version, kind, metadata and
/// namespace.
fn ensure_service_monitor_crd() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let c = cluster();
        let name = "servicemonitors.monitoring.coreos.com";
        if c.kubectl(&["get", "crd", name]).is_err() {
            eprintln!("creating a stand-in {name} CRD (open schema) for the ServiceMonitor's dry run");
            let crd = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: servicemonitors.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  names: {kind: ServiceMonitor, listKind: ServiceMonitorList, plural: servicemonitors, singular: servicemonitor}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;
            if let Err(e) = c.kubectl_input(&["create", "-f", "-"], crd) {
                assert!(e.0.contains("AlreadyExists"), "{e}");
            }
        }
        c.kubectl(&[
            "wait",
            "--for=condition=Established",
            "--timeout=30s",
            &format!("crd/{name}"),
        ])
        .expect("the ServiceMonitor CRD is established");
    });
}

/// Renders for Kubernetes 1.20 into a fresh release namespace (and `extra` watched
/// namespaces when `watch` is set) and dry-runs every object.
fn dry_run(set: &[(&str, &str)], watch: usize) {
    let c = cluster();
    let release_ns = c.namespace("chart").unwrap();
    let watched: Vec<Namespace> = (0..watch)
        .map(|_| c.namespace("chart-watched").unwrap())
        .collect();
    let list = format!(
        "{{{}}}",
        watched
            .iter()
            .map(|n| n.name.as_str())
            .collect::<Vec<_>>()
            .join(",")
    );
    let mut set: Vec<(&str, &str)> = set.to_vec();
    if watch > 0 {
        set.push(("watchNamespaces", &list));
    }
    let objects = render_for(Some(E2E_KUBE_VERSION), RELEASE, &release_ns.name, &set)
        .unwrap_or_else(|e| panic!("render {set:?}: {e}"));
    if objects.iter().any(|o| o["kind"] == "ServiceMonitor") {
        ensure_service_monitor_crd();
    }
    let refs: Vec<&Value> = objects.iter().collect();
    let out = c
        .kubectl_input(
            &["apply", "--dry-run=server", "-f", "-"],
            &to_yaml(&refs).unwrap(),
        )
        .unwrap_or_else(|e| panic!("dry run of the chart with {set:?}: {e}"));
    let accepted = out
        .lines()
        .filter(|l| l.contains("(server dry run)"))
        .count();
    assert_eq!(
        accepted,
        objects.len(),
        "{set:?}: every object accepted:\n{out}"
    );
}

#[test]
fn defaults_pass_a_server_side_dry_run() {
    let _file = crate::one_file_at_a_time(module_path!());
    dry_run(&[], 0);
}

#[test]
fn namespaced_mode_passes_a_server_side_dry_run() {
    let _file = crate::one_file_at_a_time(module_path!());
    dry_run(&[], 2);
}

#[test]
fn two_replicas_pass_a_server_side_dry_run() {
    let _file = crate::one_file_at_a_time(module_path!());
    dry_run(&[("replicaCount", "2")], 0);
}

#[test]
fn network_policy_passes_a_server_side_dry_run() {
    let _file = crate::one_file_at_a_time(module_path!());
    dry_run(
        &[
            ("networkPolicy.enabled", "true"),
            ("networkPolicy.apiServerCidrs", "{127.0.0.1/32}"),
            (
                "networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.name",
                "monitoring",
            ),
        ],
        1,
    );
}

#[test]
fn service_monitor_passes_a_server_side_dry_run() {
    let _file = crate::one_file_at_a_time(module_path!());
    dry_run(&[("serviceMonitor.enabled", "true")], 0);
}

#[test]
fn topology_spread_and_max_unavailable_pass_a_server_side_dry_run() {
    let _file = crate::one_file_at_a_time(module_path!());
    dry_run(
        &[
            ("replicaCount", "2"),
            ("podDisruptionBudget.maxUnavailable", "50%"),
            // One --set for the whole constraint: each --set replaces a list.
            (
                "topologySpreadConstraints[0].maxSkew",
                "1,topologySpreadConstraints[0].topologyKey=kubernetes.io/hostname,topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway",
            ),
        ],
        0,
    );
}

#[test]
fn existing_signing_key_passes_a_server_side_dry_run() {
    let _file = crate::one_file_at_a_time(module_path!());
    dry_run(
        &[
            ("signingKey.existingSecret", "my-key"),
            ("replicaCount", "2"),
        ],
        0,
    );
}

#[test]
fn everything_at_once_passes_a_server_side_dry_run() {
    let _file = crate::one_file_at_a_time(module_path!());
    dry_run(
        &[
            ("replicaCount", "3"),
            ("networkPolicy.enabled", "true"),
            ("serviceMonitor.enabled", "true"),
            ("signingKey.existingSecret", "my-key"),
            ("crds.keep", "false"),
            ("podLabels.team", "platform"),
            ("tolerations[0].operator", "Exists"),
            (
                "metrics.auth.readers[0].namespace",
                "monitoring,metrics.auth.readers[0].name=prometheus-k8s",
            ),
            ("serviceMonitor.tokenSecret.name", "scraper-token"),
        ],
        2,
    );
}

/// The dry run does check versions: a PodDisruptionBudget rendered for a current
/// Kubernetes (policy/v1) is refused by 1.20.
#[test]
fn the_dry_run_refuses_what_1_20_lacks() {
    let _file = crate::one_file_at_a_time(module_path!());
    let c = cluster();
    let ns = c.namespace("chart").unwrap();
    let objects = render_for(None, RELEASE, &ns.name, &[("replicaCount", "2")]).unwrap();
    let pdb: Vec<&Value> = objects
        .iter()
        .filter(|o| o["kind"] == "PodDisruptionBudget")
        .collect();
    assert_eq!(pdb[0]["apiVersion"], "policy/v1");
    let err = c
        .kubectl_input(
            &["apply", "--dry-run=server", "-f", "-"],
            &to_yaml(&pdb).unwrap(),
        )
        .expect_err("policy/v1 is not served by 1.20");
    assert!(err.0.contains("policy/v1"), "{err}");
}

#[test]
fn the_workload_example_passes_a_server_side_dry_run() {
    let _file = crate::one_file_at_a_time(module_path!());
    let c = cluster();
    let ns = c.namespace("workload").unwrap();
    let path = repo_root().join("e2e/examples/workload.yaml");
    let mut objects = parse_documents(&std::fs::read_to_string(path).unwrap()).unwrap();
    // The example names its own namespace (not `default`); here it is this test's.
    for o in &mut objects {
        assert_eq!(o["metadata"]["namespace"], "shop", "{o}");
        o["metadata"]["namespace"] = Value::from(ns.name.as_str());
    }
    let out = c
        .kubectl_input(
            &["apply", "--dry-run=server", "-f", "-"],
            &to_yaml(&objects.iter().collect::<Vec<_>>()).unwrap(),
        )
        .unwrap();
    for created in [
        "deployment.apps/shop",
        "networkpolicy.networking.k8s.io/shop",
    ] {
        assert!(
            out.contains(&format!("{created} created (server dry run)")),
            "{out}"
        );
    }
}

/// The CRD reaches the API server as generated: its enum value `off` stays a string.
#[test]
fn the_crd_keeps_its_off_level_through_the_dry_run() {
    let _file = crate::one_file_at_a_time(module_path!());
    let c = cluster();
    let objects = render_for(Some(E2E_KUBE_VERSION), RELEASE, "logpolicy-system", &[]).unwrap();
    let crd: Vec<&Value> = objects
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
        .collect();
    let out = c
        .kubectl_input(
            &["apply", "--dry-run=server", "-o", "json", "-f", "-"],
            &to_yaml(&crd).unwrap(),
        )
        .unwrap();
    let stored: Value = serde_json::from_str(&out).unwrap();
    let level = &stored["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        ["properties"]["defaultLevel"];
    assert!(
        level["enum"]
            .as_array()
            .unwrap()
            .contains(&Value::from("off")),
        "{level}"
    );
    assert_eq!(
        stored["metadata"]["annotations"]["helm.sh/resource-policy"],
        "keep"
    );
}
