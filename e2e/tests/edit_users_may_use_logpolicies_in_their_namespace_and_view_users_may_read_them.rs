//! The chart's aggregated ClusterRoles on the real API server (Kubernetes 1.20): a user
//! bound to the `edit` role of namespace A may create LogPolicies in A and is refused
//! in B; a user bound to `view` may list them and is refused creating one.
//!
//! The e2e cluster runs no kube-controller-manager, so its clusterrole-aggregation
//! controller never fills the built-in `edit` and `view` roles (the test checks that
//! they exist, with their `aggregationRule`, and reports whether their rules were
//! filled). What can be checked without the controller is checked: that the chart's
//! labels are exactly what the built-in roles' `aggregationRule` selects (so the
//! controller, where it runs, adds the chart's rules to them), and that the chart's
//! ClusterRoles grant what the built-in roles should then grant, by binding them
//! directly (a RoleBinding in A to `RELEASE-logpolicy-operator-edit` or `-view`) and
//! acting as the bound users through impersonation (`kubectl --as`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers: a failure is a test failure

use logpolicy_e2e::helm::{find, render_for, to_yaml, E2E_KUBE_VERSION};
use logpolicy_e2e::operator::apply_crds;
use logpolicy_e2e::Cluster;
use serde_json::Value;

fn policy(name: &str) -> String {
    format!(
        "apiVersion: logpolicy.dev/v1alpha1\nkind: LogPolicy\nmetadata: {{name: {name}}}\nspec:\n  selector: {{matchLabels: {{app: shop}}}}\n  reason: \"INC-1: checking access\"\n  duration: 5m\n  targets:\n  - {{target: \"shop::payment\", level: debug}}\n"
    )
}

/// The ClusterRoles the chart renders for `release` with the default values, by suffix.
fn chart_roles(release: &str) -> (Value, Value) {
    let objects = render_for(Some(E2E_KUBE_VERSION), release, "logpolicy-system", &[]).unwrap();
    let role = |suffix: &str| {
        let name = format!("{release}-logpolicy-operator-{suffix}");
        (*find(&objects, "ClusterRole", Some(&name)).first().unwrap()).clone()
    };
    (role("edit"), role("view"))
}

/// Whether the built-in role's `aggregationRule` selects a ClusterRole with `labels`.
fn aggregates(builtin: &Value, labels: &Value) -> bool {
    builtin["aggregationRule"]["clusterRoleSelectors"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|s| {
            s["matchLabels"]
                .as_object()
                .is_some_and(|m| m.iter().all(|(k, v)| labels[k] == *v))
        })
}

fn forbidden(result: logpolicy_e2e::Result<String>, what: &str) {
    let err = result.expect_err(&format!("{what} must be refused")).0;
    assert!(err.contains("forbidden"), "{what}: {err}");
}

#[test]
fn edit_users_may_use_logpolicies_in_their_namespace_and_view_users_may_read_them() {
    let _file = crate::one_file_at_a_time(module_path!());
    let c = Cluster::shared().unwrap();
    apply_crds(c).unwrap();
    let a = c.namespace("rbac-a").unwrap();
    let b = c.namespace("rbac-b").unwrap();
    let release = format!("r{}", a.name.trim_start_matches("rbac-a-"));
    let (edit, view) = chart_roles(&release);

    // The built-in roles select the chart's roles by their labels.
    for (builtin, role) in [("admin", &edit), ("edit", &edit), ("view", &view)] {
        let out = c
            .kubectl(&["get", "clusterrole", builtin, "-o", "json"])
            .unwrap();
        let builtin_role: Value = serde_json::from_str(&out).unwrap();
        assert!(
            aggregates(&builtin_role, &role["metadata"]["labels"]),
            "{builtin} aggregates {}: {builtin_role}",
            role["metadata"]["name"]
        );
        let filled = builtin_role["rules"]
            .as_array()
            .is_some_and(|r| !r.is_empty());
        eprintln!(
            "built-in ClusterRole {builtin}: rules {} (the aggregation controller {})",
            if filled { "filled" } else { "empty" },
            if filled { "runs" } else { "does not run here" }
        );
    }
    assert!(!aggregates(
        &serde_json::from_str::<Value>(
            &c.kubectl(&["get", "clusterrole", "view", "-o", "json"])
                .unwrap()
        )
        .unwrap(),
        &edit["metadata"]["labels"]
    ));

    c.kubectl_input(&["apply", "-f", "-"], &to_yaml(&[&edit, &view]).unwrap())
        .unwrap();
    let edit_name = edit["metadata"]["name"].as_str().unwrap();
    let view_name = view["metadata"]["name"].as_str().unwrap();
    let (editor, viewer) = (format!("editor-{release}"), format!("viewer-{release}"));
    for (user, role) in [(&editor, edit_name), (&viewer, view_name)] {
        c.kubectl(&[
            "create",
            "rolebinding",
            &format!("{user}-binding"),
            "-n",
            &a.name,
            &format!("--clusterrole={role}"),
            &format!("--user={user}"),
        ])
        .unwrap();
    }
    let as_user = |user: &str, ns: &str, args: &[&str]| {
        let mut all = vec!["--as", user, "-n", ns];
        all.extend_from_slice(args);
        c.kubectl(&all)
    };
    let create = |user: &str, ns: &str, name: &str| {
        c.kubectl_input(
            &["--as", user, "-n", ns, "create", "-f", "-"],
            &policy(name),
        )
    };

    // edit in A: create, read, change, delete there.
    create(&editor, &a.name, "raise").unwrap();
    let listed = as_user(&editor, &a.name, &["get", "lp", "-o", "name"]).unwrap();
    assert_eq!(listed.trim(), "logpolicy.logpolicy.dev/raise");
    as_user(
        &editor,
        &a.name,
        &[
            "patch",
            "lp",
            "raise",
            "--type=merge",
            "-p",
            r#"{"spec":{"duration":"10m"}}"#,
        ],
    )
    .unwrap();
    // ... and nowhere else.
    forbidden(create(&editor, &b.name, "raise"), "edit in A creating in B");
    forbidden(
        as_user(&editor, &b.name, &["get", "lp"]),
        "edit in A listing B",
    );

    // view in A: list and get, never create, change or delete.
    let listed = as_user(&viewer, &a.name, &["get", "lp", "-o", "name"]).unwrap();
    assert_eq!(listed.trim(), "logpolicy.logpolicy.dev/raise");
    as_user(&viewer, &a.name, &["get", "lp", "raise", "-o", "json"]).unwrap();
    forbidden(create(&viewer, &a.name, "mine"), "view creating");
    forbidden(
        as_user(&viewer, &a.name, &["delete", "lp", "raise"]),
        "view deleting",
    );
    forbidden(
        as_user(&viewer, &b.name, &["get", "lp"]),
        "view in A listing B",
    );

    as_user(&editor, &a.name, &["delete", "lp", "raise"]).unwrap();
    c.kubectl(&["delete", "clusterrole", edit_name, view_name])
        .unwrap();
}
