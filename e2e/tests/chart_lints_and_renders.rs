//! The chart `charts/logpolicy-operator` lints in strict mode and renders what the
//! operator needs, and only that, for each way it is configured (offline: no cluster).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers: a failure is a test failure

use logpolicy_e2e::helm::{self, find, installed, one, render, render_for, E2E_KUBE_VERSION};
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
    let _file = crate::one_file_at_a_time(module_path!());
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
        &[
            ("prometheusRule.enabled", "true"),
            ("podMonitor.enabled", "true"),
            ("dashboard.enabled", "true"),
        ],
        &[("signingKey.existingSecret", "my-key")],
        &[("crds.install", "false")],
        &[("tests.enabled", "false")],
        &[
            ("serviceMonitor.enabled", "true"),
            ("serviceMonitor.tokenSecret.name", "scraper-token"),
            (
                "metrics.auth.readers[0].namespace",
                "monitoring,metrics.auth.readers[0].name=prometheus-k8s",
            ),
        ],
        &[
            ("metrics.auth.enabled", "false"),
            ("serviceMonitor.enabled", "true"),
        ],
        &[("maxDuration", "")],
        &[("maxDuration", "90m"), ("aggregateRoles", "false")],
        &[
            ("replicaCount", "2"),
            ("podDisruptionBudget.maxUnavailable", "1"),
            (
                "topologySpreadConstraints[0].maxSkew",
                "1,topologySpreadConstraints[0].topologyKey=kubernetes.io/hostname,topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway",
            ),
        ],
    ]
}

#[test]
fn users_bound_to_edit_admin_or_view_get_logpolicies_through_aggregated_roles() {
    let _file = crate::one_file_at_a_time(module_path!());
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
    let objects = installed(rendered(&[("aggregateRoles", "false")]));
    let mut names: Vec<&str> = find(&objects, "ClusterRole", None)
        .iter()
        .map(|r| r["metadata"]["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            FULLNAME,
            &format!("{FULLNAME}-metrics-auth"),
            &format!("{FULLNAME}-metrics-reader")
        ]
    );
}

#[test]
fn max_duration_is_passed_to_the_operator_and_can_be_lifted() {
    let _file = crate::one_file_at_a_time(module_path!());
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
    let _file = crate::one_file_at_a_time(module_path!());
    // What `helm install` creates (`helm test`'s check: below).
    let objects = installed(rendered(&[]));
    assert_eq!(
        kinds(&objects),
        [
            "ClusterRole",
            "ClusterRole",
            "ClusterRole",
            "ClusterRole",
            "ClusterRole",
            "ClusterRoleBinding",
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
        find(&objects, "ClusterRoleBinding", Some(FULLNAME))[0],
        "ClusterRole",
        FULLNAME,
    );
    let role = one(&objects, "Role").unwrap();
    assert_eq!(role["metadata"]["name"], format!("{FULLNAME}-self"));
    // The Lease with one replica too: a heartbeat without an election.
    let mut own = secret_rules();
    own.extend(lease_rules());
    assert_eq!(role["rules"], Value::Array(own));
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
    // By tag: Always (a tag may be pushed again); by digest: IfNotPresent (below).
    assert_eq!(c["imagePullPolicy"], "Always");
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
    // The metrics port speaks TLS: the kubelet probes it so (without verifying).
    assert_eq!(
        c["livenessProbe"]["httpGet"],
        json!({"path": "/healthz", "port": "metrics", "scheme": "HTTPS"})
    );
    assert_eq!(
        c["readinessProbe"]["httpGet"],
        json!({"path": "/readyz", "port": "metrics", "scheme": "HTTPS"})
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
            "--metrics-auth=token".into(),
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
    let _file = crate::one_file_at_a_time(module_path!());
    let objects = rendered(&[("watchNamespaces", "{shop,payments}")]);
    assert!(find(&objects, "ClusterRole", Some(FULLNAME)).is_empty());
    // The only cluster-scoped RBAC: the users' aggregated ClusterRoles, and the token
    // checks of /metrics (TokenReviews and SubjectAccessReviews are cluster-scoped) with
    // the scrapers' role. Both can go.
    let names = |objects: &[Value], kind: &str| -> Vec<String> {
        let mut names: Vec<String> = find(objects, kind, None)
            .iter()
            .map(|r| r["metadata"]["name"].as_str().unwrap().to_owned())
            .collect();
        names.sort_unstable();
        names
    };
    assert_eq!(
        names(&objects, "ClusterRole"),
        [
            format!("{FULLNAME}-edit"),
            format!("{FULLNAME}-metrics-auth"),
            format!("{FULLNAME}-metrics-reader"),
            format!("{FULLNAME}-view")
        ]
    );
    assert_eq!(
        names(&objects, "ClusterRoleBinding"),
        [format!("{FULLNAME}-metrics-auth")]
    );
    let objects = installed(rendered(&[
        ("watchNamespaces", "{shop,payments}"),
        ("aggregateRoles", "false"),
        ("metrics.auth.enabled", "false"),
    ]));
    assert!(find(&objects, "ClusterRole", None).is_empty());
    assert!(find(&objects, "ClusterRoleBinding", None).is_empty());
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
    // The operator's own namespace keeps its Role for the key and its Lease (kept even
    // with one replica: `kubectl logpolicy check` reads it to tell the operator runs).
    let own = find(&objects, "Role", Some(&format!("{FULLNAME}-self")));
    assert_eq!(own.len(), 1);
    assert_eq!(own[0]["metadata"]["namespace"], NS);
    let mut rules = secret_rules();
    rules.extend(lease_rules());
    assert_eq!(own[0]["rules"], Value::Array(rules));
    assert_eq!(find(&objects, "Role", None).len(), 3);
    assert_eq!(find(&objects, "RoleBinding", None).len(), 3);
    assert!(args(&objects).contains(&"--watch-namespaces=shop,payments".to_owned()));
}

#[test]
fn two_replicas_elect_a_leader_and_have_a_disruption_budget() {
    let _file = crate::one_file_at_a_time(module_path!());
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
    let _file = crate::one_file_at_a_time(module_path!());
    let objects = installed(rendered(&[
        ("signingKey.existingSecret", "my-key"),
        ("signingKey.existingSecretKey", "key"),
    ]));
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
    // No Secret rule: in its namespace the operator needs only its Lease (a heartbeat
    // with one replica).
    assert_eq!(
        one(&objects, "Role").unwrap()["rules"],
        Value::Array(lease_rules())
    );

    let objects = installed(rendered(&[
        ("signingKey.existingSecret", "my-key"),
        ("replicaCount", "3"),
    ]));
    assert_eq!(
        one(&objects, "Role").unwrap()["rules"],
        Value::Array(lease_rules())
    );
}

#[test]
fn the_network_policy_opens_the_metrics_port_and_egress_to_the_api_server_and_admin_ports() {
    let _file = crate::one_file_at_a_time(module_path!());
    let objects = installed(rendered(&[("networkPolicy.enabled", "true")]));
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

    let objects = installed(rendered(&[
        ("networkPolicy.enabled", "true"),
        ("networkPolicy.apiServerCidrs", "{10.0.0.10/32}"),
        ("networkPolicy.apiServerPorts", "{6443}"),
        ("networkPolicy.adminPorts", "{9090,9191}"),
        (
            "networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.name",
            "monitoring",
        ),
        ("watchNamespaces", "{shop}"),
    ]));
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
    let _file = crate::one_file_at_a_time(module_path!());
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
                           "podSelector": {"matchLabels": selector}},
                          // `helm test`'s check pod, which reads the pods' views.
                          {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NS}},
                           "podSelector": {"matchLabels": check_selector()}}]},
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
fn the_pod_monitor_scrapes_the_opted_in_pods_admin_port() {
    let _file = crate::one_file_at_a_time(module_path!());
    assert!(find(&rendered(&[]), "PodMonitor", None).is_empty());
    let objects = rendered(&[
        ("podMonitor.enabled", "true"),
        ("podMonitor.labels.release", "prom"),
        ("podMonitor.interval", "15s"),
    ]);
    let pm = one(&objects, "PodMonitor").unwrap();
    assert_eq!(pm["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(pm["metadata"]["name"], format!("{FULLNAME}-workloads"));
    assert_eq!(pm["metadata"]["namespace"], NS);
    assert_eq!(pm["metadata"]["labels"]["release"], "prom");
    assert_eq!(
        pm["spec"]["selector"],
        json!({"matchLabels": {"logpolicy.dev/enabled": "true"}})
    );
    assert_eq!(pm["spec"]["namespaceSelector"], json!({"any": true}));
    let endpoints = pm["spec"]["podMetricsEndpoints"].as_array().unwrap();
    assert_eq!(endpoints.len(), 1);
    let endpoint = &endpoints[0];
    assert_eq!(endpoint["path"], "/metrics");
    assert_eq!(endpoint["interval"], "15s");
    assert_eq!(endpoint["scrapeTimeout"], "10s");
    // The address comes from the pod's IP and its port annotation (9090 without one),
    // not from a container port: e2e/tests/prometheus_answers_every_alert_and_panel.rs
    // runs these relabelings in a real Prometheus.
    let relabelings = endpoint["relabelings"].as_array().unwrap();
    assert!(relabelings
        .iter()
        .any(|r| r["targetLabel"] == "__address__"));
    assert!(relabelings
        .iter()
        .any(|r| r["replacement"] == "9090" && r["regex"] == ""));

    // The watched namespaces, or the ones given.
    let objects = rendered(&[
        ("podMonitor.enabled", "true"),
        ("watchNamespaces", "{shop,payments}"),
    ]);
    assert_eq!(
        one(&objects, "PodMonitor").unwrap()["spec"]["namespaceSelector"],
        json!({"matchNames": ["shop", "payments"]})
    );
    let objects = rendered(&[
        ("podMonitor.enabled", "true"),
        ("watchNamespaces", "{shop,payments}"),
        ("podMonitor.namespaces", "{shop}"),
    ]);
    assert_eq!(
        one(&objects, "PodMonitor").unwrap()["spec"]["namespaceSelector"],
        json!({"matchNames": ["shop"]})
    );
}

#[test]
fn the_workload_network_policy_lets_the_scrapers_reach_the_admin_port_when_asked() {
    let _file = crate::one_file_at_a_time(module_path!());
    let base = [
        ("workloadNetworkPolicy.enabled", "true"),
        ("workloadNetworkPolicy.namespaces", "{shop}"),
        ("workloadNetworkPolicy.servicePorts", "{8080}"),
    ];
    let ingress = |set: &[(&str, &str)]| {
        let objects = rendered(set);
        one(&objects, "NetworkPolicy").unwrap()["spec"]["ingress"].clone()
    };
    assert_eq!(ingress(&base).as_array().unwrap().len(), 2);
    let mut set = base.to_vec();
    set.push((
        "workloadNetworkPolicy.metricsFrom[0].namespaceSelector.matchLabels.name",
        "monitoring",
    ));
    let rules = ingress(&set);
    assert_eq!(rules.as_array().unwrap().len(), 3);
    assert_eq!(
        rules[1],
        json!({
            "ports": [{"port": 9090, "protocol": "TCP"}],
            "from": [{"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}],
        })
    );
}

#[test]
fn the_dashboard_config_map_holds_the_grafana_dashboard_for_the_sidecar() {
    let _file = crate::one_file_at_a_time(module_path!());
    assert!(find(&rendered(&[]), "ConfigMap", None).is_empty());
    let file = std::fs::read_to_string(
        logpolicy_e2e::cluster::repo_root().join("charts/logpolicy-operator/files/dashboard.json"),
    )
    .unwrap();
    let objects = rendered(&[("dashboard.enabled", "true")]);
    let cm = one(&objects, "ConfigMap").unwrap();
    assert_eq!(cm["metadata"]["name"], format!("{FULLNAME}-dashboard"));
    assert_eq!(cm["metadata"]["namespace"], NS);
    assert_eq!(cm["metadata"]["labels"]["grafana_dashboard"], "1");
    assert!(cm["metadata"].get("annotations").is_none());
    assert_eq!(
        cm["data"]["logpolicy.json"].as_str().unwrap(),
        file.trim_end()
    );

    let objects = rendered(&[
        ("dashboard.enabled", "true"),
        ("dashboard.namespace", "monitoring"),
        ("dashboard.labels.grafana_dashboard", "logpolicy"),
        ("dashboard.annotations.grafana_folder", "Logging"),
    ]);
    let cm = one(&objects, "ConfigMap").unwrap();
    assert_eq!(cm["metadata"]["namespace"], "monitoring");
    assert_eq!(cm["metadata"]["labels"]["grafana_dashboard"], "logpolicy");
    assert_eq!(
        cm["metadata"]["annotations"],
        json!({"grafana_folder": "Logging"})
    );

    // Grafana's dashboard model: a uid, a schema version, a data source variable that
    // every panel and query uses, unique panel ids, panels that do not overlap.
    let dashboard: Value = serde_json::from_str(&file).expect("dashboard.json is JSON");
    assert_eq!(dashboard["uid"], "logpolicy-overview");
    assert!(dashboard["schemaVersion"].as_u64().unwrap() >= 36);
    let variables = dashboard["templating"]["list"].as_array().unwrap();
    assert_eq!(variables[0]["name"], "datasource");
    assert_eq!(variables[0]["type"], "datasource");
    assert_eq!(variables[0]["query"], "prometheus");
    let ours = json!({"type": "prometheus", "uid": "${datasource}"});
    for v in &variables[1..] {
        assert_eq!(v["datasource"], ours, "variable {}", v["name"]);
    }
    let panels = dashboard["panels"].as_array().unwrap();
    let mut ids = std::collections::BTreeSet::new();
    let mut cells = std::collections::BTreeSet::new();
    let mut queries = 0;
    for p in panels {
        assert!(
            ids.insert(p["id"].as_u64().unwrap()),
            "panel id {}",
            p["id"]
        );
        let g = &p["gridPos"];
        let (x, y, w, h) = (
            g["x"].as_u64().unwrap(),
            g["y"].as_u64().unwrap(),
            g["w"].as_u64().unwrap(),
            g["h"].as_u64().unwrap(),
        );
        assert!(x + w <= 24, "{}: wider than the grid", p["title"]);
        for cx in x..x + w {
            for cy in y..y + h {
                assert!(cells.insert((cx, cy)), "{} overlaps", p["title"]);
            }
        }
        if p["type"] == "row" {
            continue;
        }
        assert!(p["title"].as_str().is_some_and(|t| !t.is_empty()));
        assert!(p["description"].as_str().is_some_and(|t| !t.is_empty()));
        assert_eq!(p["datasource"], ours, "{}", p["title"]);
        let targets = p["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "{}: no query", p["title"]);
        for t in targets {
            assert_eq!(t["datasource"], ours, "{}", p["title"]);
            assert!(t["expr"].as_str().is_some_and(|e| !e.is_empty()));
            queries += 1;
        }
    }
    assert!(queries >= 18, "{queries} queries");
}

#[test]
fn the_service_monitor_scrapes_the_metrics_service() {
    let _file = crate::one_file_at_a_time(module_path!());
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
    // Metrics auth is on: Prometheus sends its own ServiceAccount's token, as
    // kubebuilder's scaffolded ServiceMonitor does, inside TLS (the operator's
    // self-signed certificate, not verified, as that scaffold does).
    assert_eq!(
        sm["spec"]["endpoints"],
        json!([{"port": "metrics", "path": "/metrics", "interval": "30s", "scrapeTimeout": "10s",
                "scheme": "https", "tlsConfig": {"insecureSkipVerify": true},
                "bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token"}])
    );
    assert_eq!(sm["spec"]["namespaceSelector"], json!({"matchNames": [NS]}));
    assert!(args(&objects).contains(&"--metrics-addr=0.0.0.0:9100".to_owned()));
    assert_eq!(
        one(&objects, "Service").unwrap()["spec"]["ports"][0]["port"],
        9100
    );
}

#[test]
fn metrics_need_a_token_by_default_and_scrapers_get_a_reader_role() {
    let _file = crate::one_file_at_a_time(module_path!());
    let objects = rendered(&[]);
    assert!(args(&objects).contains(&"--metrics-auth=token".to_owned()));
    // The operator may review tokens, cluster-wide (the reviews are cluster-scoped).
    let auth = format!("{FULLNAME}-metrics-auth");
    assert_eq!(
        find(&objects, "ClusterRole", Some(&auth))[0]["rules"],
        json!([
            {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
            {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
        ])
    );
    binding_is_to_the_service_account(
        find(&objects, "ClusterRoleBinding", Some(&auth))[0],
        "ClusterRole",
        &auth,
    );
    // The scrapers' role, bound to nobody unless asked.
    let reader = format!("{FULLNAME}-metrics-reader");
    assert_eq!(
        find(&objects, "ClusterRole", Some(&reader))[0]["rules"],
        json!([{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}])
    );
    assert!(find(&objects, "ClusterRoleBinding", Some(&reader)).is_empty());
    // One --set: a second one for the same list item would replace the item.
    let objects = rendered(&[(
        "metrics.auth.readers[0].namespace",
        "monitoring,metrics.auth.readers[0].name=prometheus-k8s",
    )]);
    let binding = find(&objects, "ClusterRoleBinding", Some(&reader))[0];
    assert_eq!(
        binding["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": reader})
    );
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"}])
    );

    // A Secret's token for the ServiceMonitor instead of Prometheus's own.
    let objects = rendered(&[
        ("serviceMonitor.enabled", "true"),
        ("serviceMonitor.tokenSecret.name", "scraper-token"),
    ]);
    let endpoint = &one(&objects, "ServiceMonitor").unwrap()["spec"]["endpoints"][0];
    assert_eq!(
        endpoint["authorization"],
        json!({"type": "Bearer", "credentials": {"name": "scraper-token", "key": "token"}})
    );
    assert!(endpoint.get("bearerTokenFile").is_none());

    // Off: open metrics, no token in the ServiceMonitor, no RBAC for it.
    let objects = rendered(&[
        ("metrics.auth.enabled", "false"),
        ("serviceMonitor.enabled", "true"),
    ]);
    assert!(args(&objects).contains(&"--metrics-auth=none".to_owned()));
    for o in &objects {
        let name = o["metadata"]["name"].as_str().unwrap();
        assert!(
            !name.contains("-metrics-auth") && !name.contains("-metrics-reader"),
            "{name}"
        );
    }
    assert_eq!(
        one(&objects, "ServiceMonitor").unwrap()["spec"]["endpoints"],
        json!([{"port": "metrics", "path": "/metrics", "interval": "30s", "scrapeTimeout": "10s",
                "scheme": "https", "tlsConfig": {"insecureSkipVerify": true}}])
    );

    // Bad values are refused by name.
    for (set, path) in [
        (("metrics.auth.enabled", "yes"), "/metrics/auth/enabled"),
        (
            ("metrics.auth.readers[0].name", "prometheus"),
            "/metrics/auth/readers/0",
        ),
        (
            ("serviceMonitor.tokenSecret.name", "Not_A_Name"),
            "/serviceMonitor/tokenSecret/name",
        ),
    ] {
        let err = helm::template(RELEASE, NS, &[set]).unwrap_err().to_string();
        assert!(err.contains(path), "{set:?}: {err}");
    }
}

#[test]
fn the_scrape_token_never_crosses_the_network_in_the_clear() {
    let _file = crate::one_file_at_a_time(module_path!());
    // Default: TLS with a self-signed certificate, no flag needed.
    let objects = rendered(&[("serviceMonitor.enabled", "true")]);
    let a = args(&objects);
    assert!(
        !a.iter()
            .any(|a| a.starts_with("--metrics-secure") || a.starts_with("--metrics-cert-dir")),
        "{a:?}"
    );
    assert!(container(&objects)["volumeMounts"].is_null());

    // A certificate of a Secret (cert-manager's): mounted, served, and verified by the
    // ServiceMonitor with its CA and the Service's name; a token for an audience of
    // its own, from a file in the Prometheus pod.
    let objects = rendered(&[
        ("serviceMonitor.enabled", "true"),
        ("metrics.tls.secretName", "operator-tls"),
        ("metrics.auth.audiences", "{logpolicy-operator}"),
        (
            "serviceMonitor.tokenFile",
            "/var/run/secrets/logpolicy/token",
        ),
    ]);
    let a = args(&objects);
    for flag in [
        "--metrics-cert-dir=/var/run/secrets/logpolicy-metrics-tls",
        "--metrics-token-audiences=logpolicy-operator",
    ] {
        assert!(a.contains(&flag.to_owned()), "{flag} in {a:?}");
    }
    let c = container(&objects);
    assert_eq!(
        c["volumeMounts"],
        json!([{"name": "metrics-tls", "mountPath": "/var/run/secrets/logpolicy-metrics-tls", "readOnly": true}])
    );
    let deployment = one(&objects, "Deployment").unwrap();
    assert_eq!(
        deployment["spec"]["template"]["spec"]["volumes"],
        json!([{"name": "metrics-tls", "secret": {"secretName": "operator-tls", "defaultMode": 288,
                "items": [{"key": "tls.crt", "path": "tls.crt"}, {"key": "tls.key", "path": "tls.key"}]}}])
    );
    assert_eq!(
        one(&objects, "ServiceMonitor").unwrap()["spec"]["endpoints"][0],
        json!({"port": "metrics", "path": "/metrics", "interval": "30s", "scrapeTimeout": "10s",
               "scheme": "https",
               "tlsConfig": {"ca": {"secret": {"name": "operator-tls", "key": "ca.crt"}},
                             "serverName": format!("{FULLNAME}-metrics.{NS}.svc")},
               "bearerTokenFile": "/var/run/secrets/logpolicy/token"})
    );

    // Turned off: plain HTTP, said so to the operator, the probes and the scraper.
    let objects = rendered(&[
        ("serviceMonitor.enabled", "true"),
        ("metrics.tls.enabled", "false"),
    ]);
    assert!(args(&objects).contains(&"--metrics-secure=false".to_owned()));
    assert_eq!(
        container(&objects)["livenessProbe"]["httpGet"]["scheme"],
        "HTTP"
    );
    let endpoint = &one(&objects, "ServiceMonitor").unwrap()["spec"]["endpoints"][0];
    assert_eq!(endpoint["scheme"], "http");
    assert!(endpoint.get("tlsConfig").is_none());

    for (set, path) in [
        (("metrics.tls.enabled", "yes"), "/metrics/tls/enabled"),
        (
            ("metrics.tls.secretName", "Not_A_Name"),
            "/metrics/tls/secretName",
        ),
        (
            ("metrics.auth.audiences", "{a b}"),
            "/metrics/auth/audiences/0",
        ),
    ] {
        let err = helm::template(RELEASE, NS, &[set]).unwrap_err().to_string();
        assert!(err.contains(path), "{set:?}: {err}");
    }
}

#[test]
fn a_digest_pins_the_image_and_overrides_the_tag() {
    let _file = crate::one_file_at_a_time(module_path!());
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
    // A digest never moves: no registry round trip on each start.
    assert_eq!(container(&objects)["imagePullPolicy"], "IfNotPresent");
    // `helm test`'s check runs the same image.
    let check = one(&objects, "Pod").unwrap();
    assert_eq!(
        check["spec"]["containers"][0]["image"],
        format!("registry.example/lp@{digest}")
    );
    assert_eq!(
        check["spec"]["containers"][0]["imagePullPolicy"],
        "IfNotPresent"
    );
    let objects = rendered(&[("image.digest", &digest), ("image.pullPolicy", "Always")]);
    assert_eq!(container(&objects)["imagePullPolicy"], "Always", "set wins");
}

#[test]
fn topology_spread_constraints_reach_the_pod_and_count_the_operators_pods_by_default() {
    let _file = crate::one_file_at_a_time(module_path!());
    let pod_spec =
        |objects: &[Value]| one(objects, "Deployment").unwrap()["spec"]["template"]["spec"].clone();
    assert!(pod_spec(&rendered(&[]))
        .get("topologySpreadConstraints")
        .is_none());

    let file =
        std::env::temp_dir().join(format!("logpolicy-chart-tsc-{}.yaml", std::process::id()));
    std::fs::write(
        &file,
        "replicaCount: 2\ntopologySpreadConstraints:\n\
         - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}\n\
         - {maxSkew: 2, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, \
            labelSelector: {matchLabels: {team: platform}}, matchLabelKeys: [pod-template-hash]}\n",
    )
    .unwrap();
    let objects = helm::render_with_values(RELEASE, NS, &[&file], &[]).unwrap();
    std::fs::remove_file(&file).unwrap();
    let selector = &one(&objects, "Deployment").unwrap()["spec"]["selector"];
    assert_eq!(
        pod_spec(&objects)["topologySpreadConstraints"],
        json!([
            {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway",
             "labelSelector": selector},
            {"maxSkew": 2, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchLabels": {"team": "platform"}}, "matchLabelKeys": ["pod-template-hash"]},
        ])
    );

    let err = helm::template(
        RELEASE,
        NS,
        &[("topologySpreadConstraints[0].maxSkew", "1")],
    )
    .expect_err("a constraint needs topologyKey and whenUnsatisfiable")
    .0;
    assert!(
        err.contains("/topologySpreadConstraints/0") && err.contains("topologyKey"),
        "{err}"
    );
}

#[test]
fn the_disruption_budget_takes_max_unavailable_or_min_available_not_both() {
    let _file = crate::one_file_at_a_time(module_path!());
    let pdb_spec = |set: &[(&str, &str)]| {
        let mut set = set.to_vec();
        set.push(("replicaCount", "3"));
        let spec = one(&rendered(&set), "PodDisruptionBudget").unwrap()["spec"].clone();
        (spec["minAvailable"].clone(), spec["maxUnavailable"].clone())
    };
    assert_eq!(
        pdb_spec(&[]),
        (json!(1), Value::Null),
        "neither: minAvailable 1"
    );
    assert_eq!(
        pdb_spec(&[("podDisruptionBudget.minAvailable", "2")]),
        (json!(2), Value::Null)
    );
    assert_eq!(
        pdb_spec(&[("podDisruptionBudget.maxUnavailable", "1")]),
        (Value::Null, json!(1))
    );
    assert_eq!(
        pdb_spec(&[("podDisruptionBudget.maxUnavailable", "50%")]),
        (Value::Null, json!("50%"))
    );
    // Over a values file that sets minAvailable: null it.
    assert_eq!(
        pdb_spec(&[
            ("podDisruptionBudget.minAvailable", "null"),
            ("podDisruptionBudget.maxUnavailable", "0"),
        ]),
        (Value::Null, json!(0))
    );

    for (set, expected) in [
        (
            [
                ("podDisruptionBudget.minAvailable", "1"),
                ("podDisruptionBudget.maxUnavailable", "1"),
            ],
            "/podDisruptionBudget/maxUnavailable",
        ),
        (
            [
                ("podDisruptionBudget.minAvailable", "half"),
                ("replicaCount", "2"),
            ],
            "/podDisruptionBudget/minAvailable",
        ),
    ] {
        let err = helm::template(RELEASE, NS, &set)
            .expect_err(&format!("{set:?} must be refused"))
            .0;
        assert!(err.contains(expected), "{set:?}: {err}");
    }
}

#[test]
fn values_reach_the_pod() {
    let _file = crate::one_file_at_a_time(module_path!());
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
        find(&objects, "ServiceAccount", Some("custom")).len(),
        1,
        "the operator's"
    );
    // `helm test`'s check pod pulls the same image, where the operator may run, as the
    // same user (its account is its own).
    let check = &one(&objects, "Pod").unwrap()["spec"];
    assert_eq!(check["containers"][0]["image"], "registry.example/lp:1.2.3");
    assert_eq!(check["imagePullSecrets"], json!([{"name": "pull"}]));
    assert_eq!(check["nodeSelector"], json!({"kubernetes.io/os": "linux"}));
    assert_eq!(check["tolerations"], json!([{"operator": "Exists"}]));
    assert_eq!(check["securityContext"]["runAsUser"], 1000);
    assert_eq!(check["serviceAccountName"], format!("{FULLNAME}-check"));
    for binding in [FULLNAME, &format!("{FULLNAME}-metrics-auth")] {
        assert_eq!(
            find(&objects, "ClusterRoleBinding", Some(binding))[0]["subjects"][0]["name"],
            "custom",
            "{binding}"
        );
    }
}

#[test]
fn the_crd_can_be_left_out_or_deleted_on_uninstall() {
    let _file = crate::one_file_at_a_time(module_path!());
    let objects = rendered(&[("crds.install", "false")]);
    assert!(find(&objects, "CustomResourceDefinition", None).is_empty());
    let objects = rendered(&[("crds.keep", "false")]);
    let crd = one(&objects, "CustomResourceDefinition").unwrap();
    assert!(crd["metadata"].get("annotations").is_none());
}

#[test]
fn the_values_schema_rejects_bad_values_by_name() {
    let _file = crate::one_file_at_a_time(module_path!());
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
        (("podMonitor.interval", "often"), "/podMonitor/interval"),
        (("dashboard.namespace", "Grafana"), "/dashboard/namespace"),
        (("tests.enabled", "yes"), "/tests/enabled"),
        (("tests.enable", "true"), "enable"),
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

/// The labels that select `helm test`'s check pod: not the operator's, so that neither
/// its Service, disruption budget and NetworkPolicy nor its spread constraints count it.
fn check_selector() -> Value {
    json!({"app.kubernetes.io/name": "logpolicy-operator-check", "app.kubernetes.io/instance": RELEASE})
}

/// What `kubectl logpolicy check` reads in each namespace it checks
/// (plugin/src/check.rs, plugin/src/cluster.rs): the pods, each opted-in pod's
/// `GET /logpolicy` through the pod proxy, and the trust ConfigMap.
fn check_namespace_rules() -> Vec<Value> {
    vec![
        json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}),
        json!({"apiGroups": [""], "resources": ["pods/proxy"], "verbs": ["get"]}),
        json!({"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["logpolicy-trust"], "verbs": ["get"]}),
    ]
}

/// The same across every namespace, less the pod proxy (it would reach any port of any
/// pod of the cluster): the check reads the pods at their IPs.
fn check_cluster_rules() -> Vec<Value> {
    let mut rules = check_namespace_rules();
    rules.retain(|r| r["resources"] != json!(["pods/proxy"]));
    rules
}

/// `kind name` of each hook, sorted.
fn hook_names(objects: &[Value]) -> Vec<String> {
    let mut names: Vec<String> = objects
        .iter()
        .filter(|o| helm::is_hook(o))
        .map(|o| {
            let ns = o["metadata"]["namespace"].as_str().unwrap_or("");
            format!(
                "{} {ns}/{}",
                o["kind"].as_str().unwrap(),
                o["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
    names.sort();
    names
}

/// The check pod's containers: (name, command, args).
fn check_containers(objects: &[Value]) -> Vec<(String, Value, Value)> {
    let pod = one(objects, "Pod").unwrap();
    pod["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_owned(),
                c["command"].clone(),
                c["args"].clone(),
            )
        })
        .collect()
}

#[test]
fn helm_test_runs_kubectl_logpolicy_check_from_the_operator_image_with_only_what_it_reads() {
    let _file = crate::one_file_at_a_time(module_path!());
    let objects = rendered(&[]);
    let check = format!("{FULLNAME}-check");
    assert_eq!(
        hook_names(&objects),
        [
            format!("ClusterRole /{check}"),
            format!("ClusterRoleBinding /{check}"),
            format!("Pod {NS}/{check}"),
            format!("Role {NS}/{check}-lease"),
            format!("RoleBinding {NS}/{check}-lease"),
            format!("ServiceAccount {NS}/{check}"),
        ]
    );
    for o in objects.iter().filter(|o| helm::is_hook(o)) {
        let what = format!("{} {}", o["kind"], o["metadata"]["name"]);
        // The account and its roles first; all gone once the test ran, passed or
        // failed, the failed check's report printed first.
        let mut annotations = json!({
            "helm.sh/hook": "test",
            "helm.sh/hook-weight": "-1",
            "helm.sh/hook-delete-policy": "before-hook-creation,hook-succeeded,hook-failed",
        });
        if o["kind"] == "Pod" {
            annotations["helm.sh/hook-weight"] = json!("0");
            annotations["helm.sh/hook-output-log-policy"] = json!("hook-failed");
        }
        assert_eq!(o["metadata"]["annotations"], annotations, "{what}");
        let labels = &o["metadata"]["labels"];
        for (k, v) in check_selector().as_object().unwrap() {
            assert_eq!(&labels[k], v, "{what}: {k}");
        }
        assert_eq!(labels["app.kubernetes.io/component"], "check", "{what}");
    }

    let pod = one(&objects, "Pod").unwrap();
    let operator = one(&objects, "Deployment").unwrap();
    let selector = operator["spec"]["selector"]["matchLabels"]
        .as_object()
        .unwrap();
    assert!(
        selector
            .iter()
            .any(|(k, v)| &pod["metadata"]["labels"][k] != v),
        "the operator's selector must not select the check pod"
    );
    let spec = &pod["spec"];
    assert_eq!(spec["restartPolicy"], "Never");
    assert_eq!(spec["serviceAccountName"], check.as_str());
    assert_eq!(spec["automountServiceAccountToken"], true);
    assert_eq!(
        spec["securityContext"],
        json!({"runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532,
               "seccompProfile": {"type": "RuntimeDefault"}})
    );
    assert_eq!(
        check_containers(&objects),
        [(
            "check".to_owned(),
            json!(["/usr/local/bin/kubectl-logpolicy"]),
            json!(["check", format!("--operator-namespace={NS}"), "-A"])
        )]
    );
    let c = &spec["containers"][0];
    let operator_container = container(&objects);
    assert_eq!(c["image"], operator_container["image"]);
    assert_eq!(c["imagePullPolicy"], operator_container["imagePullPolicy"]);
    assert_eq!(c["securityContext"], operator_container["securityContext"]);
    for r in ["requests", "limits"] {
        for k in ["cpu", "memory"] {
            assert!(c["resources"][r][k].is_string(), "resources.{r}.{k}");
        }
    }

    let sa = *find(&objects, "ServiceAccount", Some(&check))
        .first()
        .unwrap();
    assert_eq!(sa["automountServiceAccountToken"], false);
    let subjects = json!([{"kind": "ServiceAccount", "name": check, "namespace": NS}]);
    // Cluster-wide: the CRD, and the pods and trust ConfigMaps of every namespace; no
    // pod proxy.
    let mut rules = vec![
        json!({"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"],
                                "resourceNames": ["logpolicies.logpolicy.dev"], "verbs": ["get"]}),
    ];
    rules.extend(check_cluster_rules());
    assert_eq!(
        find(&objects, "ClusterRole", Some(&check))[0]["rules"],
        Value::Array(rules)
    );
    let binding = find(&objects, "ClusterRoleBinding", Some(&check))[0];
    assert_eq!(
        binding["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": check})
    );
    assert_eq!(binding["subjects"], subjects);
    // The operator's Lease, by name, in the release namespace.
    let lease = format!("{check}-lease");
    assert_eq!(
        find(&objects, "Role", Some(&lease))[0]["rules"],
        json!([{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                "resourceNames": ["logpolicy-operator"], "verbs": ["get"]}])
    );
    let binding = find(&objects, "RoleBinding", Some(&lease))[0];
    assert_eq!(
        binding["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": lease})
    );
    assert_eq!(binding["subjects"], subjects);
}

#[test]
fn in_namespaced_mode_helm_test_checks_each_watched_namespace_with_roles_there_only() {
    let _file = crate::one_file_at_a_time(module_path!());
    let objects = rendered(&[("watchNamespaces", "{shop,payments}")]);
    let check = format!("{FULLNAME}-check");
    // No cluster-scoped object: the check finds the CRD by discovery.
    assert_eq!(
        hook_names(&objects),
        [
            format!("Pod {NS}/{check}"),
            format!("Role {NS}/{check}-lease"),
            format!("Role payments/{check}"),
            format!("Role shop/{check}"),
            format!("RoleBinding {NS}/{check}-lease"),
            format!("RoleBinding payments/{check}"),
            format!("RoleBinding shop/{check}"),
            format!("ServiceAccount {NS}/{check}"),
        ]
    );
    // One container per namespace, named after it: the roles are per namespace.
    let command = json!(["/usr/local/bin/kubectl-logpolicy"]);
    let operator_ns = format!("--operator-namespace={NS}");
    assert_eq!(
        check_containers(&objects),
        [
            (
                "shop".to_owned(),
                command.clone(),
                json!(["check", operator_ns, "-n", "shop"])
            ),
            (
                "payments".to_owned(),
                command,
                json!(["check", operator_ns, "-n", "payments"])
            ),
        ]
    );
    for ns in ["shop", "payments"] {
        let role = find(&objects, "Role", Some(&check))
            .into_iter()
            .find(|r| r["metadata"]["namespace"] == ns)
            .unwrap();
        assert_eq!(role["rules"], Value::Array(check_namespace_rules()), "{ns}");
        let binding = find(&objects, "RoleBinding", Some(&check))
            .into_iter()
            .find(|r| r["metadata"]["namespace"] == ns)
            .unwrap();
        assert_eq!(
            binding["subjects"],
            json!([{"kind": "ServiceAccount", "name": check, "namespace": NS}]),
            "{ns}"
        );
    }
}

#[test]
fn a_cluster_wide_operators_helm_test_gets_the_pod_proxy_only_in_the_namespaces_named() {
    let _file = crate::one_file_at_a_time(module_path!());
    let objects = rendered(&[("tests.namespaces", "{shop}")]);
    let check = format!("{FULLNAME}-check");
    // The namespaces named: a Role there, nothing cluster-scoped.
    assert_eq!(
        hook_names(&objects),
        [
            format!("Pod {NS}/{check}"),
            format!("Role {NS}/{check}-lease"),
            format!("Role shop/{check}"),
            format!("RoleBinding {NS}/{check}-lease"),
            format!("RoleBinding shop/{check}"),
            format!("ServiceAccount {NS}/{check}"),
        ]
    );
    let role = find(&objects, "Role", Some(&check))[0];
    assert_eq!(role["metadata"]["namespace"], "shop");
    assert_eq!(role["rules"], Value::Array(check_namespace_rules()));
    assert_eq!(
        check_containers(&objects),
        [(
            "shop".to_owned(),
            json!(["/usr/local/bin/kubectl-logpolicy"]),
            json!(["check", format!("--operator-namespace={NS}"), "-n", "shop"])
        )]
    );
    // The operator still watches every namespace.
    assert_eq!(find(&objects, "ClusterRole", Some(FULLNAME)).len(), 1);
}

#[test]
fn with_network_policies_the_check_pod_reaches_the_api_server_and_the_admin_ports_only() {
    let _file = crate::one_file_at_a_time(module_path!());
    let objects = rendered(&[
        ("networkPolicy.enabled", "true"),
        ("networkPolicy.apiServerCidrs", "{10.0.0.10/32}"),
        ("watchNamespaces", "{shop}"),
    ]);
    let check = format!("{FULLNAME}-check");
    let operator = find(&objects, "NetworkPolicy", Some(FULLNAME))[0];
    let np = find(&objects, "NetworkPolicy", Some(&check))[0];
    assert!(helm::is_hook(np));
    assert_eq!(
        np["spec"]["podSelector"],
        json!({"matchLabels": check_selector()})
    );
    assert_eq!(np["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
    assert!(
        np["spec"].get("ingress").is_none(),
        "nothing connects to it"
    );
    assert_eq!(np["spec"]["egress"], operator["spec"]["egress"]);
}

#[test]
fn helm_test_can_be_left_out() {
    let _file = crate::one_file_at_a_time(module_path!());
    let objects = rendered(&[
        ("tests.enabled", "false"),
        ("networkPolicy.enabled", "true"),
        ("workloadNetworkPolicy.enabled", "true"),
        ("workloadNetworkPolicy.namespaces", "{shop}"),
        ("workloadNetworkPolicy.servicePorts", "{8080}"),
    ]);
    assert_eq!(hook_names(&objects), Vec::<String>::new());
    let admin = find(
        &objects,
        "NetworkPolicy",
        Some(&format!("{FULLNAME}-admin-port")),
    )[0];
    assert_eq!(
        admin["spec"]["ingress"][0]["from"]
            .as_array()
            .unwrap()
            .len(),
        1,
        "the operator's pods only"
    );
}
