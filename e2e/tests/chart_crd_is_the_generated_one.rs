//! The chart ships the CRD that `crdgen` generates (`crds/logpolicy.dev_logpolicies.yaml`)
//! and renders it unchanged, only labelled and annotated.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers: a failure is a test failure

use logpolicy_e2e::cluster::repo_root;
use logpolicy_e2e::helm::{self, one, render};
use serde::Deserialize;
use serde_json::Value;

const GENERATED: &str = "crds/logpolicy.dev_logpolicies.yaml";
const CHART_COPY: &str = "charts/logpolicy-operator/files/logpolicy.dev_logpolicies.yaml";

fn read(path: &str) -> String {
    std::fs::read_to_string(repo_root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn the_charts_copy_of_the_crd_is_the_generated_one() {
    let _file = crate::one_file_at_a_time(module_path!());
    let generated = read(GENERATED);
    let copy = read(CHART_COPY);
    assert!(
        generated == copy,
        "{CHART_COPY} differs from {GENERATED}; after regenerating the CRD, copy it:\n  cp {GENERATED} {CHART_COPY}"
    );
}

#[test]
fn the_rendered_crd_is_the_generated_one_with_labels_and_the_keep_annotation() {
    let _file = crate::one_file_at_a_time(module_path!());
    let generated = Value::deserialize(serde_yaml::Deserializer::from_str(&read(GENERATED)))
        .expect("the generated CRD parses");
    let objects = render("lp", "logpolicy-system", &[]).unwrap();
    let mut rendered = one(&objects, "CustomResourceDefinition").unwrap().clone();
    let meta = rendered["metadata"].as_object_mut().unwrap();
    assert_eq!(
        meta.remove("annotations"),
        Some(serde_json::json!({"helm.sh/resource-policy": "keep"}))
    );
    let labels = meta.remove("labels").expect("labels");
    assert_eq!(labels["app.kubernetes.io/instance"], "lp");
    assert_eq!(rendered, generated);

    // The enum value `off` stays a string for YAML 1.1 readers (kubectl): quoted.
    let text = helm::template("lp", "logpolicy-system", &[]).unwrap();
    assert!(text.contains("- 'off'"), "the CRD's 'off' is quoted");
}
