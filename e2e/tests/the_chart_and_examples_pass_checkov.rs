//! checkov finds nothing in the chart (rendered with its defaults and with every option
//! on) or in `e2e/examples/` beyond the exceptions the chart README explains, and
//! `scripts/checkov` fails when a new finding appears or an exception is no longer
//! needed. The first run installs checkov from PyPI into a cached virtualenv.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers: a failure is a test failure

use std::path::PathBuf;
use std::process::{Command, Stdio};

use logpolicy_e2e::cluster::repo_root;
use logpolicy_e2e::helm::{self, one, render_with_values};
use serde::Deserialize;
use serde_json::Value;

const ALL_OPTIONS: &str = "charts/logpolicy-operator/ci/all-options-values.yaml";
const README: &str = "charts/logpolicy-operator/README.md";
const EXAMPLE: &str = "e2e/examples/workload.yaml";

/// `scripts/checkov ARGS`: its exit code and what it printed (stdout, then stderr).
fn checkov(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new("bash")
        .arg(repo_root().join("scripts/checkov"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("bash runs scripts/checkov");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

/// A fresh scratch directory of this test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "logpolicy-checkov-test-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo_root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `text` with `old` replaced by `new` once; `old` must be there.
fn replace_once(text: &str, old: &str, new: &str) -> String {
    assert_eq!(text.matches(old).count(), 1, "{old:?} is in the text once");
    text.replacen(old, new, 1)
}

#[test]
fn the_chart_and_the_examples_pass_checkov_beyond_the_documented_exceptions() {
    let _file = crate::one_file_at_a_time(module_path!());
    let (code, out) = checkov(&[]);
    eprintln!("{out}");
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("0 findings beyond the documented exceptions"),
        "{out}"
    );
    for scan in [
        "defaults (the chart)",
        "all options (the chart)",
        "examples",
    ] {
        assert!(out.contains(scan), "the {scan} scan ran: {out}");
    }
    // The operator's token is the one exception in every render of the chart.
    assert!(
        out.contains("CKV_K8S_38 'Ensure that Service Account Tokens are only mounted where necessary' failed: Deployment logpolicy-operator (all options"),
        "{out}"
    );
}

#[test]
fn a_finding_beyond_the_exceptions_fails_the_scan() {
    let _file = crate::one_file_at_a_time(module_path!());
    // The chart without a CPU limit; an example without probes, one of them skipped by an
    // inline annotation (which the README table, not the object, has to explain).
    let dir = scratch("findings");
    let mut example = read(EXAMPLE);
    for probe in ["livenessProbe", "readinessProbe"] {
        let start = example.find(&format!("          {probe}:\n")).unwrap();
        let len = example[start..].find("timeoutSeconds: 2\n").unwrap() + 18;
        example.replace_range(start..start + len, "");
    }
    let example = replace_once(
        &example,
        "  namespace: shop\n  labels:\n    app: shop\n",
        "  namespace: shop\n  annotations:\n    checkov.io/skip1: CKV_K8S_8=no liveness probe\n  labels:\n    app: shop\n",
    );
    std::fs::write(dir.join("workload.yaml"), example).unwrap();

    let (code, out) = checkov(&["--set", "resources.limits.cpu=null", &dir.to_string_lossy()]);
    assert_eq!(code, Some(1), "{out}");
    for finding in [
        "NEW FINDING: CKV_K8S_11 'CPU limits should be set' failed: Deployment logpolicy-operator (defaults: chart.yaml)",
        "NEW FINDING: CKV_K8S_11 'CPU limits should be set' failed: Deployment logpolicy-operator (all options: chart.yaml)",
        "NEW FINDING: CKV_K8S_9 'Readiness Probe Should be Configured' failed: Deployment shop (examples: workload.yaml)",
        "NEW FINDING: CKV_K8S_8 'Liveness Probe Should be Configured' skipped: Deployment shop (examples: workload.yaml)",
    ] {
        assert!(out.contains(finding), "{finding}\n{out}");
    }
    assert!(
        out.contains("4 finding(s) beyond the documented exceptions"),
        "{out}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn the_readme_table_is_the_list_the_scan_enforces() {
    let _file = crate::one_file_at_a_time(module_path!());
    // Without the operator's token row, its token is a finding; a row for a check that
    // passes is stale.
    let dir = scratch("table");
    let readme = read(README);
    let token_row = readme
        .lines()
        .find(|l| l.starts_with("| `CKV_K8S_38`"))
        .expect("the README explains the operator's token");
    let readme = replace_once(
        &readme,
        &format!("{token_row}\n"),
        "| `CKV_K8S_11` (CPU limits) | `Deployment logpolicy-operator` | defaults | it has one |\n",
    );
    let table = dir.join("README.md");
    std::fs::write(&table, readme).unwrap();

    let (code, out) = checkov(&["--exceptions", &table.to_string_lossy()]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("NEW FINDING: CKV_K8S_38 'Ensure that Service Account Tokens are only mounted where necessary' failed: Deployment logpolicy-operator (defaults: chart.yaml)"),
        "{out}"
    );
    assert!(
        out.contains("STALE EXCEPTION: ")
            && out
                .contains("CKV_K8S_11 Deployment logpolicy-operator (defaults) is no longer found"),
        "{out}"
    );

    // A row the script cannot read is an error, not a silent pass.
    let bad = dir.join("bad.md");
    std::fs::write(
        &bad,
        "## Scanners (checkov)\n\n| check | object | scans | why |\n|---|---|---|---|\n| `CKV_K8S_38` | `Deployment logpolicy-operator` | production | the token |\n",
    )
    .unwrap();
    let (code, out) = checkov(&["--exceptions", &bad.to_string_lossy()]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("bad.md:5: unknown scan 'production'"), "{out}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// The dotted paths of the values the schema describes: its leaves, and the objects
/// whose keys are free (maps such as `podLabels`).
fn schema_values(schema: &Value, prefix: &str, out: &mut Vec<String>) {
    match schema.get("properties").and_then(Value::as_object) {
        Some(properties) => {
            for (key, sub) in properties {
                schema_values(sub, &format!("{prefix}{key}."), out);
            }
        }
        None => out.push(prefix.trim_end_matches('.').to_owned()),
    }
}

fn is_set(values: &Value, path: &str) -> bool {
    let mut v = values;
    for key in path.split('.') {
        match v.get(key) {
            Some(next) => v = next,
            None => return false,
        }
    }
    !v.is_null()
}

#[test]
fn the_all_options_values_set_every_value_of_the_schema_and_lint() {
    let _file = crate::one_file_at_a_time(module_path!());
    let schema: Value =
        serde_json::from_str(&read("charts/logpolicy-operator/values.schema.json")).unwrap();
    let values = Value::deserialize(serde_yaml::Deserializer::from_str(&read(ALL_OPTIONS)))
        .expect("the all-options values parse");
    let mut paths = Vec::new();
    schema_values(&schema, "", &mut paths);
    assert!(paths.len() > 40, "{paths:?}");
    // Not values of this chart (global), or the other way to say one (not both).
    let alternatives = ["global", "podDisruptionBudget.minAvailable"];
    let missing: Vec<&String> = paths
        .iter()
        .filter(|p| !alternatives.contains(&p.as_str()) && !is_set(&values, p))
        .collect();
    assert!(
        missing.is_empty(),
        "{ALL_OPTIONS} does not set {missing:?}: add them, so that the scanners see every option"
    );

    let file = repo_root().join(ALL_OPTIONS);
    let report = helm::lint_values(&[&file]).unwrap();
    assert!(report.contains("0 chart(s) failed"), "{report}");
    let objects =
        render_with_values("logpolicy-operator", "logpolicy-system", &[&file], &[]).unwrap();
    let kinds: Vec<&str> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
    for kind in ["PodDisruptionBudget", "NetworkPolicy", "ServiceMonitor"] {
        assert!(kinds.contains(&kind), "{kind} in {kinds:?}");
    }
    let pod = &one(&objects, "Deployment").unwrap()["spec"]["template"]["spec"];
    assert!(pod["topologySpreadConstraints"].is_array(), "{pod}");
}
