//! The chart `charts/logpolicy-operator` lints in strict mode and renders what the
//! operator needs, and only that, for each way it is configured (offline: no cluster).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers: a failure is a test failure

use logpolicy_e2e::helm::{self, find, one, render, render_for, E2E_KUBE_VERSION};
use serde_json::{json, Value};

const RELEASE: &str = "lp";
const NS: &str = "logpolicy-system";
const FULLNAME: &str = "lp-logpolicy-operator";

fn rendered(set: &[(&str, &str)]) -> Vec<Value> {
    render(RELEASE, NS, set).unwrap_or_else(|e| panic!("render {set:?}: {e}"))
}

fn kinds(objects: &[Value]) -> Vec<String> {
    let mut kinds: Vec<String> = objects
        .iter()
        .map(|o| o["kind"].as_str().unwrap_or("?").to_owned())
        .collect();
    kinds.sort();
    kinds
}

fn container(objects: &[Value]) -> Value {
    let deployment = one(objects, "Deployment").unwrap();
    let containers = deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap();
    assert_eq!(containers.len(), 1, "one container");
    containers[0].clone()
}

fn args(objects: &[Value]) -> Vec<String> {
    container(objects)["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect()
}

/// The rules of operator/README.md, "Permissions": watched namespaces.
fn watch_rules() -> Value {
    json!([
        {"apiGroups": ["logpolicy.dev"], "resources": ["logpolicies"], "verbs": ["list", "watch"]},
        {"apiGroups": ["logpolicy.dev"], "resources": ["logpolicies/status"], "verbs": ["patch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
        {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["logpolicy-trust"], "verbs": ["create", "patch", "list", "watch", "delete"]},
    ])
}

fn secret_rules() -> Vec<Value> {
    vec![
        json!({"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["logpolicy-signing-key"], "verbs": ["get"]}),
        json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]}),
    ]
}

fn lease_rules() -> Vec<Value> {
    vec![
        json!({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["logpolicy-operator"], "verbs": ["get", "update"]}),
        json!({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]}),
    ]
}

fn binding_is_to_the_service_account(binding: &Value, role_kind: &str, role: &str) {
    assert_eq!(
        binding["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role})
    );
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": FULLNAME, "namespace": NS}])
    );
}

#[test]
fn the_chart_lints_strictly_with_every_value_set() {
    for set in value_sets() {
        let report = helm::lint(set).unwrap_or_else(|e| panic!("lint {set:?}: {e}"));
        assert!(report.contains("0 chart(s) failed"), "{set:?}: {report}");
    }
}

fn value_sets() -> Vec<&'static [(&'static str, &'static str)]> {
    vec![
        &[],
        &[("watchNamespaces", "{shop,payments}")],
        &[("replicaCount", "2")],
        &[("networkPolicy.enabled", "true")],
        &[
            ("workloadNetworkPolicy.enabled", "true"),
            ("workloadNetworkPolicy.namespaces", "{shop}"),
            ("workloadNetworkPolicy.servicePorts", "{8080,http}"),
        ],
        &[("serviceMonitor.enabled", "true")],
        &[("signingKey.existingSecret", "my-key")],
        &[("crds.install", "false")],
        &[("maxDuration", "")],
        &[("maxDuration", "90m"), ("aggregateRoles", "false")],
    ]
}

#[test]
fn users_bound_to_edit_admin_or_view_get_logpolicies_through_aggregated_roles() {
    let objects = rendered(&[]);
    let edit = *find(&objects, "ClusterRole", Some(&format!("{FULLNAME}-edit")))
        .first()
        .unwrap();
    let labels = &edit["metadata"]["labels"];
    assert_eq!(
        labels["rbac.authorization.k8s.io/aggregate-to-edit"],
        "true"
    );
    assert_eq!(
        labels["rbac.authorization.k8s.io/aggregate-to-admin"],
        "true"
    );
    assert!(labels
        .get("rbac.authorization.k8s.io/aggregate-to-view")
        .is_none());
    assert_eq!(
        edit["rules"],
        json!([
            {"apiGroups": ["logpolicy.dev"], "resources": ["logpolicies"],
             "verbs": ["create", "get", "list", "watch", "update", "patch", "delete"]},
            {"apiGroups": ["logpolicy.dev"], "resources": ["logpolicies/status"], "verbs": ["get"]},
        ])
    );
    let view = *find(&objects, "ClusterRole", Some(&format!("{FULLNAME}-view")))
        .first()
        .unwrap();
    assert_eq!(
        view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"],
        "true"
    );
    assert_eq!(
        view["rules"],
        json!([{"apiGroups": ["logpolicy.dev"], "resources": ["logpolicies", "logpolicies/status"],
                "verbs": ["get", "list", "watch"]}])
    );
    let objects = rendered(&[("aggregateRoles", "false")]);
    let names: Vec<&Value> = find(&objects, "ClusterRole", None)
        .iter()
        .map(|r| &r["metadata"]["name"])
        .collect();
    assert_eq!(names, [&json!(FULLNAME)]);
}

#[test]
fn max_duration_is_passed_to_the_operator_and_can_be_lifted() {
    let flag = |set: &[(&str, &str)]| -> Vec<String> {
        args(&rendered(set))
            .into_iter()
            .filter(|a| a.starts_with("--max-duration"))
            .collect()
    };
    assert_eq!(flag(&[]), ["--max-duration=24h"]);
    assert_eq!(flag(&[("maxDuration", "168h")]), ["--max-duration=168h"]);
    assert_eq!(flag(&[("maxDuration", "")]), ["--max-duration="]);
}

#[test]
fn defaults_are_a_cluster_wide_operator_with_its_crd() {
    let objects = rendered(&[]);
    assert_eq!(
        kinds(&objects),
        [
            "ClusterRole",
            "ClusterRole",
            "ClusterRole",
            "ClusterRoleBinding",
            "CustomResourceDefinition",
            "Deployment",
            "Role",
            "RoleBinding",
            "Service",
            "ServiceAccount"
        ]
    );

    // Labels and the release namespace on everything.
    for o in &objects {
        let labels = &o["metadata"]["labels"];
        let what = format!("{} {}", o["kind"], o["metadata"]["name"]);
        assert_eq!(
            labels["app.kubernetes.io/name"], "logpolicy-operator",
            "{what}"
        );
        assert_eq!(labels["app.kubernetes.io/instance"], RELEASE, "{what}");
        assert_eq!(labels["app.kubernetes.io/managed-by"], "Helm", "{what}");
        assert_eq!(
            labels["helm.sh/chart"], "logpolicy-operator-0.1.0",
            "{what}"
        );
        let cluster_scoped = matches!(
            o["kind"].as_str(),
            Some("ClusterRole" | "ClusterRoleBinding" | "CustomResourceDefinition")
        );
        if cluster_scoped {
            assert!(o["metadata"].get("namespace").is_none(), "{what}");
        } else {
            assert_eq!(o["metadata"]["namespace"], NS, "{what}");
        }
    }

    // RBAC: exactly the operator's table.
    let cluster_role = *find(&objects, "ClusterRole", Some(FULLNAME))
        .first()
        .unwrap();
    assert_eq!(cluster_role["metadata"]["name"], FULLNAME);
    assert_eq!(cluster_role["rules"], watch_rules());
    binding_is_to_the_service_account(
        one(&objects, "ClusterRoleBinding").unwrap(),
        "ClusterRole",
        FULLNAME,
    );
    let role = one(&objects, "Role").unwrap();
    assert_eq!(role["metadata"]["name"], format!("{FULLNAME}-self"));
    assert_eq!(
        role["rules"],
        Value::Array(secret_rules()),
        "no Lease rules"
    );
    binding_is_to_the_service_account(
        one(&objects, "RoleBinding").unwrap(),
        "Role",
        &format!("{FULLNAME}-self"),
    );

    let sa = one(&objects, "ServiceAccount").unwrap();
    assert_eq!(sa["metadata"]["name"], FULLNAME);
    assert_eq!(sa["automountServiceAccountToken"], false);

    // The Deployment: one replica, the restricted pod security profile, probes, env.
    let deployment = one(&objects, "Deployment").unwrap();
    assert_eq!(deployment["spec"]["replicas"], 1);
    let pod = &deployment["spec"]["template"];
    assert_eq!(
        deployment["spec"]["selector"]["matchLabels"],
        json!({"app.kubernetes.io/name": "logpolicy-operator", "app.kubernetes.io/instance": RELEASE})
    );
    assert_eq!(
        pod["metadata"]["labels"]["app.kubernetes.io/instance"],
        RELEASE
    );
    assert_eq!(pod["spec"]["serviceAccountName"], FULLNAME);
    assert_eq!(pod["spec"]["automountServiceAccountToken"], true);
    let pod_sc = &pod["spec"]["securityContext"];
    assert_eq!(pod_sc["runAsNonRoot"], true);
    assert!(pod_sc["runAsUser"].as_i64().unwrap() > 0);
    assert!(pod_sc["runAsGroup"].as_i64().unwrap() > 0);
    assert_eq!(pod_sc["seccompProfile"]["type"], "RuntimeDefault");
    assert!(pod["spec"].get("volumes").is_none());

    let c = container(&objects);
    assert_eq!(
        c["image"], "logpolicy/logpolicy-operator:0.1.0",
        "tag = appVersion"
    );
    assert_eq!(c["imagePullPolicy"], "IfNotPresent");
    let sc = &c["securityContext"];
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["runAsNonRoot"], true);
    assert_eq!(sc["capabilities"], json!({"drop": ["ALL"]}));
    assert_eq!(sc["seccompProfile"]["type"], "RuntimeDefault");
    assert_eq!(
        c["ports"],
        json!([{"name": "metrics", "containerPort": 8080, "protocol": "TCP"}])
    );
    assert_eq!(
        c["livenessProbe"]["httpGet"],
        json!({"path": "/healthz", "port": "metrics"})
    );
    assert_eq!(
        c["readinessProbe"]["httpGet"],
        json!({"path": "/readyz", "port": "metrics"})
    );
    for r in ["requests", "limits"] {
        for k in ["cpu", "memory"] {
            assert!(c["resources"][r][k].is_string(), "resources.{r}.{k}");
        }
    }
    let env = &c["env"];
    assert_eq!(
        env,
        &json!([
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "LOGPOLICY", "value": "info"},
        ])
    );
    assert_eq!(
        args(&objects),
        [
            format!("--namespace={NS}"),
            "--metrics-addr=0.0.0.0:8080".into(),
            "--pods-view=local".into(),
            "--max-duration=24h".into()
        ]
    );

    let service = one(&objects, "Service").unwrap();
    assert_eq!(service["metadata"]["name"], format!("{FULLNAME}-metrics"));
    assert_eq!(
        service["spec"]["ports"],
        json!([{"name": "metrics", "port": 8080, "targetPort": "metrics", "protocol": "TCP"}])
    );
    assert_eq!(
        service["spec"]["selector"],
        deployment["spec"]["selector"]["matchLabels"]
    );

    let crd = one(&objects, "CustomResourceDefinition").unwrap();
    assert_eq!(crd["metadata"]["name"], "logpolicies.logpolicy.dev");
    assert_eq!(
        crd["metadata"]["annotations"],
        json!({"helm.sh/resource-policy": "keep"})
    );
}

#[test]
fn namespaced_mode_has_a_role_per_watched_namespace_and_no_cluster_role() {
    let objects = rendered(&[("watchNamespaces", "{shop,payments}")]);
    assert!(find(&objects, "ClusterRole", Some(FULLNAME)).is_empty());
    assert!(find(&objects, "ClusterRoleBinding", None).is_empty());
    // The users' aggregated ClusterRoles are the only cluster-scoped RBAC, and can go.
    let names: Vec<&Value> = find(&objects, "ClusterRole", None)
        .iter()
        .map(|r| &r["metadata"]["name"])
        .collect();
    assert_eq!(
        names,
        [
            &json!(format!("{FULLNAME}-edit")),
            &json!(format!("{FULLNAME}-view"))
        ]
    );
    let objects = rendered(&[
        ("watchNamespaces", "{shop,payments}"),
        ("aggregateRoles", "false"),
    ]);
    assert!(find(&objects, "ClusterRole", None).is_empty());
    for ns in ["shop", "payments"] {
        let roles: Vec<_> = find(&objects, "Role", Some(FULLNAME))
            .into_iter()
            .filter(|r| r["metadata"]["namespace"] == ns)
            .collect();
        assert_eq!(roles.len(), 1, "one Role in {ns}");
        assert_eq!(roles[0]["rules"], watch_rules(), "{ns}");
        let bindings: Vec<_> = find(&objects, "RoleBinding", Some(FULLNAME))
            .into_iter()
            .filter(|r| r["metadata"]["namespace"] == ns)
            .collect();
        assert_eq!(bindings.len(), 1, "one RoleBinding in {ns}");
        binding_is_to_the_service_account(bindings[0], "Role", FULLNAME);
    }
    // The operator's own namespace keeps its Role for the key.
    let own = find(&objects, "Role", Some(&format!("{FULLNAME}-self")));
    assert_eq!(own.len(), 1);
    assert_eq!(own[0]["metadata"]["namespace"], NS);
    assert_eq!(own[0]["rules"], Value::Array(secret_rules()));
    assert_eq!(find(&objects, "Role", None).len(), 3);
    assert_eq!(find(&objects, "RoleBinding", None).len(), 3);
    assert!(args(&objects).contains(&"--watch-namespaces=shop,payments".to_owned()));
}

#[test]
fn two_replicas_elect_a_leader_and_have_a_disruption_budget() {
    let one_replica = rendered(&[]);
    assert!(find(&one_replica, "PodDisruptionBudget", None).is_empty());
    assert!(!args(&one_replica).contains(&"--leader-election".to_owned()));

    let objects = rendered(&[("replicaCount", "2")]);
    assert_eq!(one(&objects, "Deployment").unwrap()["spec"]["replicas"], 2);
    assert!(args(&objects).contains(&"--leader-election".to_owned()));
    let role = find(&objects, "Role", Some(&format!("{FULLNAME}-self")));
    let mut rules = secret_rules();
    rules.extend(lease_rules());
    assert_eq!(role[0]["rules"], Value::Array(rules));

    let pdb = one(&objects, "PodDisruptionBudget").unwrap();
    assert_eq!(
        pdb["apiVersion"], "policy/v1",
        "a current cluster has policy/v1"
    );
    assert_eq!(pdb["metadata"]["namespace"], NS);
    assert_eq!(pdb["spec"]["minAvailable"], 1);
    assert_eq!(
        pdb["spec"]["selector"]["matchLabels"],
        one(&objects, "Deployment").unwrap()["spec"]["selector"]["matchLabels"]
    );

    // Kubernetes 1.20 (the e2e cluster) has no policy/v1.
    let old = render_for(
        Some(E2E_KUBE_VERSION),
        RELEASE,
        NS,
        &[("replicaCount", "2")],
    )
    .unwrap();
    assert_eq!(
        one(&old, "PodDisruptionBudget").unwrap()["apiVersion"],
        "policy/v1beta1"
    );
}

#[test]
fn an_existing_signing_key_is_mounted_and_no_secret_is_accessible() {
    let objects = rendered(&[
        ("signingKey.existingSecret", "my-key"),
        ("signingKey.existingSecretKey", "key"),
    ]);
    assert!(args(&objects)
        .contains(&"--signing-key-file=/var/run/secrets/logpolicy/signing-key".to_owned()));
    let pod = &one(&objects, "Deployment").unwrap()["spec"]["template"]["spec"];
    assert_eq!(
        pod["volumes"],
        json!([{"name": "signing-key", "secret": {
            "secretName": "my-key", "defaultMode": 0o440,
            "items": [{"key": "key", "path": "signing-key"}]}}])
    );
    assert_eq!(
        container(&objects)["volumeMounts"],
        json!([{"name": "signing-key", "mountPath": "/var/run/secrets/logpolicy", "readOnly": true}])
    );
    // No Secret rule: with one replica the operator needs nothing in its namespace.
    assert!(find(&objects, "Role", None).is_empty());
    assert!(find(&objects, "RoleBinding", None).is_empty());

    let objects = rendered(&[
        ("signingKey.existingSecret", "my-key"),
        ("replicaCount", "3"),
    ]);
    assert_eq!(
        one(&objects, "Role").unwrap()["rules"],
        Value::Array(lease_rules())
    );
}

#[test]
fn the_network_policy_opens_the_metrics_port_and_egress_to_the_api_server_and_admin_ports() {
    let objects = rendered(&[("networkPolicy.enabled", "true")]);
    let np = one(&objects, "NetworkPolicy").unwrap();
    assert_eq!(np["metadata"]["namespace"], NS);
    assert_eq!(
        np["spec"]["podSelector"]["matchLabels"],
        one(&objects, "Deployment").unwrap()["spec"]["selector"]["matchLabels"]
    );
    assert_eq!(np["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
    assert_eq!(
        np["spec"]["ingress"],
        json!([{"ports": [{"port": "metrics", "protocol": "TCP"}]}])
    );
    assert_eq!(
        np["spec"]["egress"],
        json!([
            {"ports": [{"port": 443, "protocol": "TCP"}, {"port": 6443, "protocol": "TCP"}]},
            {"ports": [{"port": 9090, "protocol": "TCP"}],
             "to": [{"namespaceSelector": {}, "podSelector": {"matchLabels": {"logpolicy.dev/enabled": "true"}}}]},
        ])
    );

    let objects = rendered(&[
        ("networkPolicy.enabled", "true"),
        ("networkPolicy.apiServerCidrs", "{10.0.0.10/32}"),
        ("networkPolicy.apiServerPorts", "{6443}"),
        ("networkPolicy.adminPorts", "{9090,9191}"),
        (
            "networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.name",
            "monitoring",
        ),
        ("watchNamespaces", "{shop}"),
    ]);
    let np = one(&objects, "NetworkPolicy").unwrap();
    assert_eq!(
        np["spec"]["ingress"],
        json!([{"ports": [{"port": "metrics", "protocol": "TCP"}],
                "from": [{"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}]}])
    );
    assert_eq!(
        np["spec"]["egress"],
        json!([
            {"ports": [{"port": 6443, "protocol": "TCP"}], "to": [{"ipBlock": {"cidr": "10.0.0.10/32"}}]},
            {"ports": [{"port": 9090, "protocol": "TCP"}, {"port": 9191, "protocol": "TCP"}],
             "to": [{"namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["shop"]}]},
                     "podSelector": {"matchLabels": {"logpolicy.dev/enabled": "true"}}}]},
        ])
    );
}

#[test]
fn the_workload_network_policy_opens_the_admin_port_to_the_operator_only() {
    let objects = rendered(&[
        ("workloadNetworkPolicy.enabled", "true"),
        ("watchNamespaces", "{shop,payments}"),
        ("workloadNetworkPolicy.servicePorts", "{8080,http}"),
    ]);
    let policies: Vec<&Value> = objects
        .iter()
        .filter(|o| o["kind"] == "NetworkPolicy")
        .collect();
    assert_eq!(policies.len(), 2);
    let selector = one(&objects, "Deployment").unwrap()["spec"]["selector"]["matchLabels"].clone();
    for (np, ns) in policies.iter().zip(["shop", "payments"]) {
        assert_eq!(np["metadata"]["namespace"], ns);
        assert_eq!(
            np["spec"]["podSelector"],
            json!({"matchLabels": {"logpolicy.dev/enabled": "true"}})
        );
        assert_eq!(np["spec"]["policyTypes"], json!(["Ingress"]));
        assert_eq!(
            np["spec"]["ingress"],
            json!([
                {"ports": [{"port": 9090, "protocol": "TCP"}],
                 "from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NS}},
                           "podSelector": {"matchLabels": selector}}]},
                {"ports": [{"port": 8080, "protocol": "TCP"}, {"port": "http", "protocol": "TCP"}]},
            ])
        );
    }
    // Without the service's ports it would close them: refused, saying why.
    let err = helm::template(
        RELEASE,
        NS,
        &[
            ("workloadNetworkPolicy.enabled", "true"),
            ("workloadNetworkPolicy.namespaces", "{shop}"),
        ],
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("workloadNetworkPolicy.servicePorts"), "{err}");
    let err = helm::template(
        RELEASE,
        NS,
        &[
            ("workloadNetworkPolicy.enabled", "true"),
            ("workloadNetworkPolicy.servicePorts", "{8080}"),
        ],
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("workloadNetworkPolicy.namespaces"), "{err}");
}

#[test]
fn the_service_monitor_scrapes_the_metrics_service() {
    assert!(find(&rendered(&[]), "ServiceMonitor", None).is_empty());
    let objects = rendered(&[
        ("serviceMonitor.enabled", "true"),
        ("serviceMonitor.labels.release", "prom"),
        ("metrics.port", "9100"),
    ]);
    let sm = one(&objects, "ServiceMonitor").unwrap();
    assert_eq!(sm["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(sm["metadata"]["namespace"], NS);
    assert_eq!(sm["metadata"]["labels"]["release"], "prom");
    assert_eq!(
        sm["spec"]["selector"]["matchLabels"],
        one(&objects, "Service").unwrap()["metadata"]["labels"]
            .as_object()
            .map(|l| {
                json!({
                    "app.kubernetes.io/name": l["app.kubernetes.io/name"],
                    "app.kubernetes.io/instance": l["app.kubernetes.io/instance"],
                })
            })
            .unwrap()
    );
    assert_eq!(
        sm["spec"]["endpoints"],
        json!([{"port": "metrics", "path": "/metrics", "interval": "30s", "scrapeTimeout": "10s"}])
    );
    assert_eq!(sm["spec"]["namespaceSelector"], json!({"matchNames": [NS]}));
    assert!(args(&objects).contains(&"--metrics-addr=0.0.0.0:9100".to_owned()));
    assert_eq!(
        one(&objects, "Service").unwrap()["spec"]["ports"][0]["port"],
        9100
    );
}

#[test]
fn a_digest_pins_the_image_and_overrides_the_tag() {
    let digest = format!("sha256:{}", "0123456789abcdef".repeat(4));
    let objects = rendered(&[
        ("image.repository", "registry.example/lp"),
        ("image.tag", "1.2.3"),
        ("image.digest", &digest),
    ]);
    assert_eq!(
        container(&objects)["image"],
        format!("registry.example/lp@{digest}")
    );
}

#[test]
fn values_reach_the_pod() {
    let objects = rendered(&[
        ("image.repository", "registry.example/lp"),
        ("image.tag", "1.2.3"),
        ("image.pullPolicy", "Always"),
        ("imagePullSecrets[0].name", "pull"),
        ("logLevel", "debug"),
        ("priorityClassName", "system-cluster-critical"),
        ("nodeSelector.kubernetes\\.io/os", "linux"),
        ("tolerations[0].operator", "Exists"),
        ("podAnnotations.a", "b"),
        ("podLabels.team", "platform"),
        ("securityContext.runAsUser", "1000"),
        ("resources.limits.memory", "64Mi"),
        ("serviceAccount.name", "custom"),
    ]);
    let pod = &one(&objects, "Deployment").unwrap()["spec"]["template"];
    let c = container(&objects);
    assert_eq!(c["image"], "registry.example/lp:1.2.3");
    assert_eq!(c["imagePullPolicy"], "Always");
    assert_eq!(c["env"][2], json!({"name": "LOGPOLICY", "value": "debug"}));
    assert_eq!(c["resources"]["limits"]["memory"], "64Mi");
    assert_eq!(pod["spec"]["imagePullSecrets"], json!([{"name": "pull"}]));
    assert_eq!(pod["spec"]["priorityClassName"], "system-cluster-critical");
    assert_eq!(
        pod["spec"]["nodeSelector"],
        json!({"kubernetes.io/os": "linux"})
    );
    assert_eq!(pod["spec"]["tolerations"], json!([{"operator": "Exists"}]));
    assert_eq!(pod["metadata"]["annotations"], json!({"a": "b"}));
    assert_eq!(pod["metadata"]["labels"]["team"], "platform");
    assert_eq!(pod["spec"]["securityContext"]["runAsUser"], 1000);
    assert_eq!(pod["spec"]["serviceAccountName"], "custom");
    assert_eq!(
        one(&objects, "ServiceAccount").unwrap()["metadata"]["name"],
        "custom"
    );
    assert_eq!(
        one(&objects, "ClusterRoleBinding").unwrap()["subjects"][0]["name"],
        "custom"
    );
}

#[test]
fn the_crd_can_be_left_out_or_deleted_on_uninstall() {
    let objects = rendered(&[("crds.install", "false")]);
    assert!(find(&objects, "CustomResourceDefinition", None).is_empty());
    let objects = rendered(&[("crds.keep", "false")]);
    let crd = one(&objects, "CustomResourceDefinition").unwrap();
    assert!(crd["metadata"].get("annotations").is_none());
}

#[test]
fn the_values_schema_rejects_bad_values_by_name() {
    for (set, expected) in [
        (("replicaCont", "2"), "replicaCont"),
        (("image.pullPolicy", "Sometimes"), "/image/pullPolicy"),
        (("image.digest", "1.2.3"), "/image/digest"),
        (("replicaCount", "many"), "/replicaCount"),
        (("replicaCount", "-1"), "/replicaCount"),
        (("metrics.port", "70000"), "/metrics/port"),
        (
            ("watchNamespaces", "{Not_A_Namespace}"),
            "/watchNamespaces/0",
        ),
        (
            ("securityContext.runAsUser", "0"),
            "/securityContext/runAsUser",
        ),
        (("crds.keep", "maybe"), "/crds/keep"),
        (("networkPolicy.enable", "true"), "enable"),
        (("maxDuration", "1 day"), "/maxDuration"),
        (("aggregateRoles", "sometimes"), "/aggregateRoles"),
    ] {
        let err = helm::template(RELEASE, NS, &[set])
            .expect_err(&format!("{set:?} must be refused"))
            .0;
        assert!(err.contains(expected), "{set:?}: {err}");
        let err = helm::lint(&[set])
            .expect_err(&format!("lint {set:?} must fail"))
            .0;
        assert!(err.contains(expected), "lint {set:?}: {err}");
    }
}
