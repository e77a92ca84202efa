//! The chart and the opt-in example agree with the code they configure: the RBAC is the
//! operator README's *Permissions* tables, the names the chart hard-codes are the
//! operator's constants, the Deployment's flags exist, and the example workload uses
//! the layer's environment variables and the operator's label, annotation and trust
//! ConfigMap (mounted `optional: true`), as every workload snippet of the docs does.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers: a failure is a test failure

use std::collections::BTreeSet;

use logpolicy_e2e::cluster::repo_root;
use logpolicy_e2e::helm::{find, installed, one, parse_documents, render};
use serde_json::Value;

const RELEASE: &str = "lp";
const NS: &str = "logpolicy-system";

fn read(path: &str) -> String {
    std::fs::read_to_string(repo_root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `pub const NAME: &str = "value";` (or `: u16 = 9090;`) in an operator source file.
fn operator_const(file: &str, name: &str) -> String {
    let src = read(file);
    let line = src
        .lines()
        .find(|l| {
            let l = l.trim_start();
            l.starts_with(&format!("pub const {name}:")) || l.starts_with(&format!("const {name}:"))
        })
        .unwrap_or_else(|| panic!("{file} defines no const {name}"));
    let value = line.split_once('=').unwrap().1.trim().trim_end_matches(';');
    value.trim_matches('"').to_owned()
}

/// A rule as a comparable string: groups, resources, sorted verbs, sorted names.
fn rule_key(rule: &Value) -> String {
    let list = |k: &str| {
        let mut v: Vec<String> = rule[k]
            .as_array()
            .map(|a| a.iter().map(|s| s.as_str().unwrap().to_owned()).collect())
            .unwrap_or_default();
        v.sort();
        v.join(",")
    };
    format!(
        "groups=[{}] resources=[{}] verbs=[{}] names=[{}]",
        list("apiGroups"),
        list("resources"),
        list("verbs"),
        list("resourceNames")
    )
}

fn rule_keys(rules: &Value) -> BTreeSet<String> {
    rules.as_array().unwrap().iter().map(rule_key).collect()
}

/// A row of a Permissions table and its "why" column.
struct Row {
    rule: Value,
    why: String,
}

/// The `backticked` items of a table cell (`""` is the core group).
fn ticked(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(|t| {
            if t == "\"\"" {
                String::new()
            } else {
                t.to_owned()
            }
        })
        .collect()
}

/// The tables of operator/README.md's "## Permissions" section, in order.
fn permission_tables() -> Vec<Vec<Row>> {
    let readme = read("operator/README.md");
    let section = readme
        .split("\n## Permissions")
        .nth(1)
        .expect("operator/README.md has a Permissions section");
    let section = section.split("\n## ").next().unwrap();
    let mut tables: Vec<Vec<Row>> = Vec::new();
    let mut in_table = false;
    for line in section.lines() {
        if !line.starts_with('|') {
            in_table = false;
            continue;
        }
        if !in_table {
            tables.push(Vec::new());
            in_table = true;
        }
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        if cells[0] == "apiGroups" || cells[0].starts_with("---") {
            continue;
        }
        assert!(cells.len() >= 5, "a Permissions row: {line}");
        let mut rule = serde_json::json!({
            "apiGroups": ticked(cells[0]),
            "resources": ticked(cells[1]),
            "verbs": ticked(cells[2]),
        });
        let names = ticked(cells[3]);
        if !names.is_empty() {
            rule["resourceNames"] = names.into();
        }
        tables.last_mut().unwrap().push(Row {
            rule,
            why: cells[4].to_owned(),
        });
    }
    assert_eq!(
        tables.len(),
        3,
        "three Permissions tables: watched, own namespace, metrics auth"
    );
    tables
}

#[test]
fn the_rbac_is_the_operator_readmes_permissions_table() {
    let _file = crate::one_file_at_a_time(module_path!());
    let tables = permission_tables();
    let watched: BTreeSet<String> = tables[0].iter().map(|r| rule_key(&r.rule)).collect();
    // The Lease rows hold with one replica too: without an election it is a heartbeat.
    let own_all: BTreeSet<String> = tables[1].iter().map(|r| rule_key(&r.rule)).collect();
    for row in tables.iter().flatten() {
        assert!(
            !row.why.trim().is_empty(),
            "a row without a why: {}",
            row.rule
        );
    }

    // What `helm install` creates: `helm test`'s check has roles of its own.
    let objects = installed(render(RELEASE, NS, &[]).unwrap());
    assert_eq!(
        rule_keys(&find(&objects, "ClusterRole", Some("lp-logpolicy-operator"))[0]["rules"]),
        watched
    );
    // `--metrics-auth token`, the chart's default.
    let metrics_auth: BTreeSet<String> = tables[2].iter().map(|r| rule_key(&r.rule)).collect();
    assert_eq!(
        rule_keys(
            &find(
                &objects,
                "ClusterRole",
                Some("lp-logpolicy-operator-metrics-auth")
            )[0]["rules"]
        ),
        metrics_auth
    );
    assert_eq!(rule_keys(&one(&objects, "Role").unwrap()["rules"]), own_all);

    let objects = installed(render(RELEASE, NS, &[("replicaCount", "2")]).unwrap());
    assert_eq!(rule_keys(&one(&objects, "Role").unwrap()["rules"]), own_all);

    let objects = render(RELEASE, NS, &[("watchNamespaces", "{shop,payments}")]).unwrap();
    for role in find(&objects, "Role", Some("lp-logpolicy-operator")) {
        assert_eq!(
            rule_keys(&role["rules"]),
            watched,
            "{}",
            role["metadata"]["namespace"]
        );
    }
}

#[test]
fn the_names_the_chart_hard_codes_are_the_operators() {
    let _file = crate::one_file_at_a_time(module_path!());
    let key_secret = operator_const("operator/src/signing_key.rs", "KEY_SECRET");
    let key_field = operator_const("operator/src/signing_key.rs", "KEY_SECRET_FIELD");
    let lease = operator_const("api/src/labels.rs", "LEASE_NAME");
    let trust = operator_const("api/src/trust.rs", "TRUST_CONFIG_MAP");

    let objects = render(RELEASE, NS, &[("replicaCount", "2")]).unwrap();
    let names = |resource: &str| -> BTreeSet<String> {
        objects
            .iter()
            .filter(|o| matches!(o["kind"].as_str(), Some("Role" | "ClusterRole")))
            .flat_map(|o| o["rules"].as_array().unwrap().clone())
            .filter(|r| r["resources"][0] == resource)
            .flat_map(|r| r["resourceNames"].as_array().cloned().unwrap_or_default())
            .map(|n| n.as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(names("secrets"), BTreeSet::from([key_secret]));
    assert_eq!(names("leases"), BTreeSet::from([lease]));
    assert_eq!(names("configmaps"), BTreeSet::from([trust]));

    let values = read("charts/logpolicy-operator/values.yaml");
    assert!(
        values.contains(&format!("existingSecretKey: {key_field}")),
        "signingKey.existingSecretKey defaults to the operator's data key {key_field}"
    );
}

#[test]
fn every_flag_the_deployment_passes_is_an_operator_flag() {
    let _file = crate::one_file_at_a_time(module_path!());
    let main = read("operator/src/flags.rs");
    let args_struct = main
        .split("struct Args {")
        .nth(1)
        .and_then(|s| s.split("\n}").next())
        .expect("operator/src/flags.rs has struct Args");
    let objects = render(
        RELEASE,
        NS,
        &[
            ("replicaCount", "2"),
            ("watchNamespaces", "{a,b}"),
            ("signingKey.existingSecret", "k"),
        ],
    )
    .unwrap();
    let deployment = one(&objects, "Deployment").unwrap();
    let args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap();
    assert_eq!(args.len(), 8);
    for arg in args {
        let flag = arg.as_str().unwrap().trim_start_matches("--");
        let field = flag.split('=').next().unwrap().replace('-', "_");
        assert!(
            args_struct.contains(&format!("    pub {field}: ")),
            "--{flag}: no field {field} in the operator's Args"
        );
    }
    // The env the Deployment sets is what the operator and the layer read.
    assert!(args_struct.contains("env = \"POD_NAMESPACE\""));
    assert!(args_struct.contains("env = \"POD_NAME\""));
    assert_eq!(logpolicy::ENV_VARS[0], "LOGPOLICY");
    let env: Vec<&str> = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(env, ["POD_NAME", "POD_NAMESPACE", logpolicy::ENV_VARS[0]]);
}

fn env_value<'a>(container: &'a Value, name: &str) -> &'a Value {
    container["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("the example sets no {name}"))
}

#[test]
fn the_opt_in_example_uses_the_layers_variables_and_the_operators_names() {
    let _file = crate::one_file_at_a_time(module_path!());
    use logpolicy::admin::{ADMIN_ADDR_ENV, POD_NAMESPACE_ENV, POD_NAME_ENV, POD_UID_ENV};
    use logpolicy::wire::TRUSTED_KEYS_FILE_ENV;

    let objects = parse_documents(&read("e2e/examples/workload.yaml")).unwrap();
    let deployment = one(&objects, "Deployment").unwrap();
    let pod = &deployment["spec"]["template"];
    let label = operator_const("api/src/labels.rs", "OPT_IN_LABEL");
    let annotation = operator_const("api/src/labels.rs", "PORT_ANNOTATION");
    let port = operator_const("api/src/labels.rs", "DEFAULT_ADMIN_PORT");
    let trust = operator_const("api/src/trust.rs", "TRUST_CONFIG_MAP");
    let data_key = operator_const("api/src/trust.rs", "TRUST_DATA_KEY");

    assert_eq!(pod["metadata"]["labels"][&label], "true");
    assert_eq!(pod["metadata"]["annotations"][&annotation], port.as_str());
    let c = &pod["spec"]["containers"][0];
    assert!(c["image"]
        .as_str()
        .unwrap()
        .contains("logpolicy-demo-service"));
    assert_eq!(env_value(c, ADMIN_ADDR_ENV)["value"], format!(":{port}"));
    for (var, field) in [
        (POD_UID_ENV, "metadata.uid"),
        (POD_NAME_ENV, "metadata.name"),
        (POD_NAMESPACE_ENV, "metadata.namespace"),
    ] {
        assert_eq!(
            env_value(c, var)["valueFrom"]["fieldRef"]["fieldPath"],
            field,
            "{var}"
        );
    }
    let volume = pod["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["configMap"]["name"] == trust.as_str())
        .expect("the trust ConfigMap is a volume");
    let mount = c["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == volume["name"])
        .expect("and it is mounted");
    assert_eq!(mount["readOnly"], true);
    assert_eq!(
        env_value(c, TRUSTED_KEYS_FILE_ENV)["value"],
        format!("{}/{data_key}", mount["mountPath"].as_str().unwrap())
    );
    assert!(
        c["ports"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["containerPort"] == port.parse::<u64>().unwrap()),
        "the admin port is declared"
    );
}

/// The pod spec in a parsed snippet: a Deployment's template, a pod template's `spec`,
/// or the fragment itself (`containers` and `volumes` at its top).
fn pod_spec(v: &Value) -> &Value {
    [&v["spec"]["template"]["spec"], &v["spec"], v]
        .into_iter()
        .find(|s| s.get("containers").is_some())
        .unwrap_or_else(|| panic!("no containers in {v}"))
}

/// What a workload needs for logpolicy, in a pod spec: the layer's variables (sorted by
/// name) and the trust ConfigMap's volume and mount.
fn opt_in_essentials(spec: &Value) -> (Vec<Value>, Value, Value) {
    use logpolicy::admin::{ADMIN_ADDR_ENV, POD_NAMESPACE_ENV, POD_NAME_ENV, POD_UID_ENV};
    use logpolicy::wire::TRUSTED_KEYS_FILE_ENV;
    let vars = [
        ADMIN_ADDR_ENV,
        TRUSTED_KEYS_FILE_ENV,
        POD_UID_ENV,
        POD_NAME_ENV,
        POD_NAMESPACE_ENV,
    ];
    let container = &spec["containers"][0];
    let mut env: Vec<Value> = container["env"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| vars.contains(&e["name"].as_str().unwrap()))
        .cloned()
        .collect();
    env.sort_by_key(|e| e["name"].as_str().unwrap().to_owned());
    let volume = spec["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["configMap"]["name"] == "logpolicy-trust")
        .unwrap_or_else(|| panic!("no trust volume in {spec}"))
        .clone();
    let mount = container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == volume["name"])
        .unwrap_or_else(|| panic!("the trust volume is not mounted in {spec}"))
        .clone();
    (env, volume, mount)
}

/// The ```yaml blocks of a Markdown file that mention `needle`.
fn yaml_blocks(markdown: &str, needle: &str) -> Vec<Value> {
    markdown
        .split("```yaml\n")
        .skip(1)
        .filter_map(|rest| rest.split_once("\n```").map(|(block, _)| block))
        .filter(|block| block.contains(needle))
        .map(|block| parse_documents(block).unwrap().remove(0))
        .collect()
}

#[test]
fn the_documented_workload_snippets_are_the_example_the_tests_run() {
    let _file = crate::one_file_at_a_time(module_path!());
    let objects = parse_documents(&read("e2e/examples/workload.yaml")).unwrap();
    let example = opt_in_essentials(pod_spec(one(&objects, "Deployment").unwrap()));
    // Logging never holds a pod back: the trust ConfigMap may not exist yet.
    assert_eq!(example.1["configMap"]["optional"], true, "{}", example.1);
    assert_eq!(example.0.len(), 5, "{:?}", example.0);

    let mut snippets = Vec::new();
    for file in ["operator/README.md", "charts/logpolicy-operator/README.md"] {
        let blocks = yaml_blocks(&read(file), "logpolicy-trust");
        assert!(!blocks.is_empty(), "{file} shows no workload snippet");
        snippets.extend(blocks.into_iter().map(|b| (file, b)));
    }
    // The chart's install notes: the indented pod template after "full example):".
    let notes = read("charts/logpolicy-operator/templates/NOTES.txt");
    let (_, rest) = notes.split_once("full example):\n").unwrap();
    let (block, _) = rest.split_once("\nThe operator writes").unwrap();
    let block: String = block
        .lines()
        .map(|l| l.strip_prefix("  ").unwrap_or(l))
        .map(|l| format!("{l}\n"))
        .collect();
    snippets.push(("NOTES.txt", parse_documents(&block).unwrap().remove(0)));

    for (file, snippet) in &snippets {
        let (env, volume, mount) = opt_in_essentials(pod_spec(snippet));
        assert_eq!(env, example.0, "{file}: the layer's variables");
        assert_eq!(
            volume["configMap"], example.1["configMap"],
            "{file}: the trust volume"
        );
        assert_eq!(
            (&mount["mountPath"], &mount["readOnly"]),
            (&example.2["mountPath"], &example.2["readOnly"]),
            "{file}: the mount"
        );
    }
}
