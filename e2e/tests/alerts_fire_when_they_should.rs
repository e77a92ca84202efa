//! The chart's alerts (`charts/logpolicy-operator/files/prometheus-rules.yaml`) pass
//! `promtool check rules`, and `promtool test rules` (`prometheus-rules.test.yaml`:
//! each alert fires when it should and not otherwise, on the real metric names); the
//! chart's PrometheusRule ships exactly those groups with the default values, and with
//! its `for`, severity and thresholds changed by values it still checks and passes the
//! same tests where nothing changed. promtool is the Debian package `prometheus`'s.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers: a failure is a test failure

use logpolicy_e2e::cluster::repo_root;
use logpolicy_e2e::helm::{one, render};
use logpolicy_e2e::process::TestDir;
use logpolicy_e2e::prometheus::promtool;
use serde::Deserialize;
use serde_json::Value;

const FILES: &str = "charts/logpolicy-operator/files";
const RULES: &str = "prometheus-rules.yaml";
const TESTS: &str = "prometheus-rules.test.yaml";

fn files_dir() -> std::path::PathBuf {
    repo_root().join(FILES)
}

fn yaml(text: &str) -> Value {
    Value::deserialize(serde_yaml::Deserializer::from_str(text)).unwrap()
}

/// The rule groups of the chart's PrometheusRule rendered with `set`.
fn rendered_groups(set: &[(&str, &str)]) -> Value {
    let mut all = vec![("prometheusRule.enabled", "true")];
    all.extend_from_slice(set);
    let objects = render("lp", "logpolicy-system", &all).unwrap();
    one(&objects, "PrometheusRule").unwrap()["spec"]["groups"].clone()
}

/// The alert `name` of `groups`.
fn alert<'a>(groups: &'a Value, name: &str) -> Option<&'a Value> {
    groups
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .find(|r| r["alert"] == name)
}

/// A rule file holding `groups`, and the promtool tests beside it, in a fresh directory.
fn with_tests(groups: &Value) -> TestDir {
    let dir = TestDir::new("rules").unwrap();
    let file = serde_json::json!({ "groups": groups });
    // JSON is YAML: promtool reads it as it is.
    std::fs::write(dir.join(RULES), file.to_string()).unwrap();
    std::fs::copy(files_dir().join(TESTS), dir.join(TESTS)).unwrap();
    dir
}

#[test]
fn promtool_checks_the_rules_and_their_tests_pass() {
    let _file = crate::one_file_at_a_time(module_path!());
    let report = promtool(&files_dir(), &["check", "rules", RULES]).unwrap();
    assert!(report.contains("SUCCESS: 6 rules found"), "{report}");
    let report = promtool(&files_dir(), &["test", "rules", TESTS]).unwrap();
    assert!(report.contains("SUCCESS"), "{report}");
}

#[test]
fn every_alert_says_what_it_means_and_what_to_do() {
    let _file = crate::one_file_at_a_time(module_path!());
    let file = yaml(&std::fs::read_to_string(files_dir().join(RULES)).unwrap());
    let tests = std::fs::read_to_string(files_dir().join(TESTS)).unwrap();
    let groups = &file["groups"];
    let names: Vec<&str> = groups
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .map(|r| r["alert"].as_str().expect("alerting rules only"))
        .collect();
    assert_eq!(
        names,
        [
            "LogPolicyOperatorDown",
            "LogPolicyOperatorNoLeader",
            "LogPolicyNotAcknowledged",
            "LogPolicyPushesFailing",
            "LogPolicyWorkloadDroppingErrors",
            "LogPolicyRaiseOutstanding",
        ]
    );
    for name in names {
        let rule = alert(groups, name).unwrap();
        for key in ["summary", "description", "runbook"] {
            assert!(
                rule["annotations"][key]
                    .as_str()
                    .is_some_and(|s| s.len() > 20),
                "{name}: no {key}"
            );
        }
        assert!(
            ["critical", "warning"].contains(&rule["labels"]["severity"].as_str().unwrap()),
            "{name}"
        );
        // Each alert is tested firing (an expected alert) and quiet (`exp_alerts: []`).
        let cases: Vec<&str> = tests
            .split("- eval_time:")
            .filter(|case| case.contains(&format!("alertname: {name}\n")))
            .collect();
        assert!(
            cases.iter().any(|c| c.contains("exp_alerts: []")),
            "{name}: no test that it stays quiet"
        );
        assert!(
            cases.iter().any(|c| c.contains("exp_labels:")),
            "{name}: no test that it fires"
        );
    }
}

#[test]
fn the_chart_ships_the_rule_file_as_it_is_with_the_default_values() {
    let _file = crate::one_file_at_a_time(module_path!());
    let file = yaml(&std::fs::read_to_string(files_dir().join(RULES)).unwrap());
    let groups = rendered_groups(&[]);
    assert_eq!(
        groups, file["groups"],
        "the default values (prometheusRule.alerts, maxDuration) must be the file's"
    );
    // And so the promtool tests pass on what the chart renders.
    let dir = with_tests(&groups);
    let report = promtool(dir.path(), &["test", "rules", TESTS]).unwrap();
    assert!(report.contains("SUCCESS"), "{report}");
}

#[test]
fn values_set_the_for_severity_and_threshold_of_each_alert() {
    let _file = crate::one_file_at_a_time(module_path!());
    let groups = rendered_groups(&[
        (
            "prometheusRule.alerts.LogPolicyPushesFailing.threshold",
            "0.25",
        ),
        ("prometheusRule.alerts.LogPolicyPushesFailing.for", "1h"),
        (
            "prometheusRule.alerts.LogPolicyNotAcknowledged.threshold",
            "5",
        ),
        (
            "prometheusRule.alerts.LogPolicyOperatorNoLeader.severity",
            "page",
        ),
        (
            "prometheusRule.alerts.LogPolicyOperatorDown.enabled",
            "false",
        ),
        ("maxDuration", "90m"),
    ]);
    let pushes = alert(&groups, "LogPolicyPushesFailing").unwrap();
    assert!(
        pushes["expr"].as_str().unwrap().ends_with("> 0.25"),
        "{pushes}"
    );
    assert_eq!(pushes["for"], "1h");
    let backlog = alert(&groups, "LogPolicyNotAcknowledged").unwrap();
    assert_eq!(
        backlog["expr"],
        "max by (policy_namespace, policy) (logpolicy_operator_policy_pods_unacknowledged) > 5"
    );
    assert_eq!(
        alert(&groups, "LogPolicyOperatorNoLeader").unwrap()["labels"]["severity"],
        "page"
    );
    assert!(alert(&groups, "LogPolicyOperatorDown").is_none());
    // A raise in force for longer than a LogPolicy may apply.
    assert_eq!(
        alert(&groups, "LogPolicyRaiseOutstanding").unwrap()["for"],
        "90m"
    );
    let dir = with_tests(&groups);
    let report = promtool(dir.path(), &["check", "rules", RULES]).unwrap();
    assert!(report.contains("SUCCESS: 5 rules found"), "{report}");

    // Without a limit, or with the alert's own `for`, the raise alert waits as set.
    for (set, expected) in [
        (vec![("maxDuration", "")], "24h"),
        (vec![("maxDuration", "none")], "24h"),
        (
            vec![
                ("maxDuration", "2h"),
                ("prometheusRule.alerts.LogPolicyRaiseOutstanding.for", "3h"),
            ],
            "3h",
        ),
    ] {
        let groups = rendered_groups(&set);
        assert_eq!(
            alert(&groups, "LogPolicyRaiseOutstanding").unwrap()["for"],
            expected,
            "{set:?}"
        );
    }
}

#[test]
fn bad_alert_values_are_refused_by_name() {
    let _file = crate::one_file_at_a_time(module_path!());
    for (set, expected) in [
        (
            ("prometheusRule.alerts.LogPolicyOperatorDwn.for", "1m"),
            "LogPolicyOperatorDwn",
        ),
        (
            ("prometheusRule.alerts.LogPolicyOperatorDown.threshold", "1"),
            "/prometheusRule/alerts/LogPolicyOperatorDown",
        ),
        (
            (
                "prometheusRule.alerts.LogPolicyPushesFailing.threshold",
                "ten",
            ),
            "/prometheusRule/alerts/LogPolicyPushesFailing/threshold",
        ),
        (
            (
                "prometheusRule.alerts.LogPolicyPushesFailing.for",
                "5 minutes",
            ),
            "/prometheusRule/alerts/LogPolicyPushesFailing/for",
        ),
    ] {
        let err = render(
            "lp",
            "logpolicy-system",
            &[("prometheusRule.enabled", "true"), set],
        )
        .expect_err(&format!("{set:?} must be refused"))
        .0;
        assert!(err.contains(expected), "{set:?}: {err}");
    }
}
