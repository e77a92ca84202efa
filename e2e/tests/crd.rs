//! Scenario 1: the CRD as a platform engineer meets it: `kubectl apply -f crds/`,
//! `kubectl explain`, `kubectl get lp` with its printer columns.

use std::time::Duration;

use logpolicy_e2e::cluster::repo_root;
use logpolicy_e2e::process::wait_for;
use logpolicy_e2e::Cluster;

#[test]
fn crd_applies_explains_its_fields_and_prints_its_columns() {
    let cluster = Cluster::shared().unwrap();
    let crds = repo_root().join("crds");
    let out = cluster
        .kubectl(&["apply", "-f", &crds.to_string_lossy()])
        .unwrap();
    assert!(
        out.contains("customresourcedefinition.apiextensions.k8s.io/logpolicies.logpolicy.dev"),
        "{out}"
    );
    cluster
        .kubectl(&[
            "wait",
            "--for=condition=Established",
            "--timeout=30s",
            "crd/logpolicies.logpolicy.dev",
        ])
        .unwrap();

    // The OpenAPI of a new CRD is published a moment after it is established.
    let spec = wait_for(
        Duration::from_secs(30),
        "kubectl explain logpolicy.spec",
        || Ok(cluster.kubectl(&["explain", "logpolicy.spec"]).ok()),
    )
    .unwrap();
    for field in [
        "selector",
        "defaultLevel",
        "targets",
        "sampling",
        "alwaysKeep",
        "burst",
        "maxBytesPerSecond",
        "priority",
        "duration",
        "expirationTime",
    ] {
        assert!(
            spec.lines()
                .any(|l| l.trim_start().starts_with(&format!("{field}\t"))),
            "`kubectl explain logpolicy.spec` lacks {field}:\n{spec}"
        );
    }
    assert!(
        spec.contains("<Object> -required-") || spec.contains("-required-"),
        "{spec}"
    );
    let targets = cluster.kubectl(&["explain", "lp.spec.targets"]).unwrap();
    for field in ["target", "level"] {
        assert!(
            targets
                .lines()
                .any(|l| l.trim_start().starts_with(&format!("{field}\t"))),
            "{targets}"
        );
    }
    let duration = cluster
        .kubectl(&["explain", "logpol.spec.duration"])
        .unwrap();
    assert!(
        duration.contains("15m"),
        "the duration's doc shows an example: {duration}"
    );

    // kubectl get lp: the columns, also in the categories.
    let ns = cluster.namespace("crd").unwrap();
    cluster
        .kubectl_input(
            &["apply", "-n", &ns.name, "-f", "-"],
            r#"
apiVersion: logpolicy.dev/v1alpha1
kind: LogPolicy
metadata: {name: debug-payments}
spec:
  selector: {matchLabels: {app: shop}}
  defaultLevel: info
  targets:
  - {target: "shop::payment", level: debug}
  sampling:
  - {target: "shop::http", keepOneIn: 100}
  priority: 5
  duration: 15m
"#,
        )
        .unwrap();
    let table = cluster.kubectl(&["get", "lp", "-n", &ns.name]).unwrap();
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "READY", "LEVELS", "APPLIED", "EXPIRES", "AGE"],
        "{table}"
    );
    // LEVELS and APPLIED come from the status the operator writes (none runs here).
    assert!(table.contains("debug-payments"), "{table}");
    let wide = cluster
        .kubectl(&["get", "logpolicies", "-n", &ns.name, "-o", "wide"])
        .unwrap();
    let header: Vec<&str> = wide.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME", "READY", "LEVELS", "APPLIED", "EXPIRES", "AGE", "PRIORITY", "TARGETS",
            "SAMPLING", "REASON"
        ],
        "{wide}"
    );
    assert!(
        wide.contains("shop::payment") && wide.contains("shop::http") && wide.contains(" 5 "),
        "{wide}"
    );
    // The example the demo applies is valid.
    let example = repo_root().join("e2e/examples/incident-debug-payments.yaml");
    let out = cluster
        .kubectl(&[
            "apply",
            "--dry-run=server",
            "-n",
            &ns.name,
            "-f",
            &example.to_string_lossy(),
        ])
        .unwrap();
    assert!(
        out.contains("incident-debug-payments created (server dry run)"),
        "{out}"
    );
    for category in ["observability", "logging"] {
        let listed = cluster.kubectl(&["get", category, "-n", &ns.name]).unwrap();
        assert!(
            listed.contains("debug-payments"),
            "kubectl get {category}: {listed}"
        );
    }
}
