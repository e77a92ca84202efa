//! Scenario 1: the CRD as a platform engineer meets it: `kubectl apply -f crds/`,
//! `kubectl explain`, `kubectl get lp` with its printer columns, and its two versions
//! (`v1beta1` stored, `v1alpha1` served): an object created in either reads the same in
//! the other.

use std::time::Duration;

use logpolicy_e2e::cluster::repo_root;
use logpolicy_e2e::process::wait_for;
use logpolicy_e2e::Cluster;

#[test]
fn crd_applies_explains_its_fields_and_prints_its_columns() {
    let _file = crate::one_file_at_a_time(module_path!());
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
            "SAMPLING", "REPLAYED", "REASON"
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

    // Two versions, one schema: an object created in either reads the same in the other.
    let policy = |version: &str, name: &str| {
        format!(
            "apiVersion: logpolicy.dev/{version}\nkind: LogPolicy\nmetadata: {{name: {name}}}\nspec:\n  selector: {{matchLabels: {{app: shop}}}}\n  targets:\n  - {{target: \"shop::payment\", level: debug}}\n  sampling:\n  - {{target: \"shop::http\", keepOneIn: 10, scope: request}}\n  duration: 10m\n  reason: \"written as {version}\"\n"
        )
    };
    let read = |resource: &str, name: &str| -> serde_json::Value {
        let out = cluster
            .kubectl(&["get", resource, name, "-n", &ns.name, "-o", "json"])
            .unwrap();
        serde_json::from_str(&out).unwrap()
    };
    for (written, other) in [("v1alpha1", "v1beta1"), ("v1beta1", "v1alpha1")] {
        let name = format!("written-as-{written}");
        cluster
            .kubectl_input(
                &["apply", "-n", &ns.name, "-f", "-"],
                &policy(written, &name),
            )
            .unwrap();
        let as_written = read(&format!("logpolicies.{written}.logpolicy.dev"), &name);
        let as_other = read(&format!("logpolicies.{other}.logpolicy.dev"), &name);
        assert_eq!(as_written["apiVersion"], format!("logpolicy.dev/{written}"));
        assert_eq!(as_other["apiVersion"], format!("logpolicy.dev/{other}"));
        assert_eq!(as_written["spec"], as_other["spec"], "{name}");
        assert_eq!(
            as_other["spec"]["sampling"][0]["scope"], "request",
            "{as_other}"
        );
        assert_eq!(as_other["spec"]["reason"], format!("written as {written}"));
    }
    // Stored as v1beta1; kubectl's default (the preferred version) is v1beta1 too.
    let crd: serde_json::Value = serde_json::from_str(
        &cluster
            .kubectl(&["get", "crd", "logpolicies.logpolicy.dev", "-o", "json"])
            .unwrap(),
    )
    .unwrap();
    let stored: Vec<&str> = crd["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["storage"] == true)
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(stored, ["v1beta1"], "{crd}");
    assert_eq!(
        read("lp", "written-as-v1alpha1")["apiVersion"],
        "logpolicy.dev/v1beta1"
    );
}
