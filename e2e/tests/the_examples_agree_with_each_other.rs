//! The two examples users copy agree: the incident policy selects the opted-in pods of
//! the example workload, in its namespace, and the pod count its comment tells the
//! reader to expect (`APPLIED N/N`) is the workload's replicas. (The comment once said
//! 3/3 of a workload of 2.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use logpolicy_e2e::cluster::repo_root;
use serde::Deserialize;
use serde_yaml::Value;

fn documents(path: &str) -> (String, Vec<Value>) {
    let text = std::fs::read_to_string(repo_root().join(path)).unwrap();
    let docs = serde_yaml::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).unwrap())
        .filter(|d| !d.is_null())
        .collect();
    (text, docs)
}

#[test]
fn the_incident_policy_selects_the_workloads_pods_and_expects_as_many() {
    let (_, workload) = documents("e2e/examples/workload.yaml");
    let deployment = workload
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("workload.yaml has a Deployment");
    let replicas = deployment["spec"]["replicas"].as_u64().unwrap();
    let namespace = deployment["metadata"]["namespace"].as_str().unwrap();
    let labels = deployment["spec"]["template"]["metadata"]["labels"]
        .as_mapping()
        .unwrap();
    assert_eq!(
        labels.get("logpolicy.dev/enabled").and_then(Value::as_str),
        Some("true"),
        "the example workload opts in"
    );

    let (text, policy) = documents("e2e/examples/incident-debug-payments.yaml");
    let policy = &policy[0];
    assert_eq!(policy["kind"], "LogPolicy");
    for (k, v) in policy["spec"]["selector"]["matchLabels"]
        .as_mapping()
        .unwrap()
    {
        assert_eq!(
            labels.get(k),
            Some(v),
            "the policy selects {k:?}={v:?}: {labels:?}"
        );
    }
    // Applied where the workload runs: `kubectl -n NAMESPACE apply`.
    assert!(
        text.contains(&format!(
            "kubectl -n {namespace} apply -f e2e/examples/incident-debug-payments.yaml"
        )),
        "the example is applied in {namespace}"
    );
    let applied = text
        .split("APPLIED ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the comment says what APPLIED shows");
    assert_eq!(
        applied,
        format!("{replicas}/{replicas}"),
        "workload replicas: {replicas}"
    );
}
