//! The two examples users copy agree: the incident policy selects the opted-in pods of
//! the example workload, in its namespace, and the pod count its comment tells the
//! reader to expect (`APPLIED N/N`) is the workload's replicas. (The comment once said
//! 3/3 of a workload of 2.) The recording example selects the same pods, is valid,
//! and may stand (it only records).

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

/// The example workload's Deployment: its replicas, namespace and pod labels.
fn workload() -> (u64, String, serde_yaml::Mapping) {
    let (_, workload) = documents("e2e/examples/workload.yaml");
    let deployment = workload
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("workload.yaml has a Deployment");
    assert_eq!(deployment["metadata"]["name"], "shop", "deploy/shop");
    let replicas = deployment["spec"]["replicas"].as_u64().unwrap();
    let namespace = deployment["metadata"]["namespace"].as_str().unwrap();
    let labels = deployment["spec"]["template"]["metadata"]["labels"]
        .as_mapping()
        .unwrap();
    (replicas, namespace.to_owned(), labels.clone())
}

#[test]
fn the_incident_policy_selects_the_workloads_pods_and_expects_as_many() {
    let _file = crate::one_file_at_a_time(module_path!());
    let (replicas, namespace, labels) = workload();
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

#[test]
fn the_recording_policy_selects_the_workloads_pods_and_may_stand() {
    let _file = crate::one_file_at_a_time(module_path!());
    let (replicas, namespace, labels) = workload();
    let (text, docs) = documents("e2e/examples/record-payments.yaml");
    let policy: logpolicy_operator::LogPolicy = serde_yaml::from_value(docs[0].clone()).unwrap();
    for (k, v) in policy.spec.selector.match_labels.iter().flatten() {
        assert_eq!(
            labels.get(k.as_str()).and_then(Value::as_str),
            Some(v.as_str()),
            "the policy selects {k:?}={v:?}: {labels:?}"
        );
    }
    let valid = logpolicy_operator::validate(&policy.spec).unwrap();
    assert!(valid.records(), "it records");
    assert!(
        valid.only_lowers() && policy.spec.duration.is_none(),
        "it stands without a duration, whatever the operator's --max-duration"
    );
    assert!(
        text.contains(&format!(
            "kubectl -n {namespace} apply -f e2e/examples/record-payments.yaml"
        )),
        "the example is applied in {namespace}"
    );
    assert!(
        text.contains(&format!("APPLIED {replicas}/{replicas}")),
        "workload replicas: {replicas}"
    );
    assert!(text.contains(&format!("raise deploy/shop -n {namespace} ")));
}
