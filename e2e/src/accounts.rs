//! ServiceAccounts and their tokens, for callers of the operator's `/metrics` (the chart
//! turns `--metrics-auth token` on): a scraper is a ServiceAccount bound to the chart's
//! `RELEASE-logpolicy-operator-metrics-reader` ClusterRole, and sends a token that the
//! API server issued for it (TokenRequest, as `kubectl create token` asks).

use serde_json::json;

use crate::cluster::Cluster;
use crate::Result;

/// Creates the ServiceAccount `namespace/name` if absent, binds it to each of
/// `cluster_roles` (see [`bind_cluster_role`]) and returns a token of it, valid for a day.
pub fn service_account_token(
    cluster: &Cluster,
    namespace: &str,
    name: &str,
    cluster_roles: &[&str],
) -> Result<String> {
    let account = json!({
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": namespace},
    });
    let mut items = vec![account];
    items.extend(
        cluster_roles
            .iter()
            .map(|role| binding(role, namespace, name)),
    );
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    cluster.kubectl_input(&["apply", "-f", "-"], &list.to_string())?;
    let token = cluster.kubectl(&["create", "token", name, "-n", namespace, "--duration=24h"])?;
    Ok(token.trim().to_owned())
}

/// Binds the ServiceAccount `namespace/name` to the ClusterRole `cluster_role` with a
/// ClusterRoleBinding (a RoleBinding cannot grant `nonResourceURLs`) named
/// `<cluster_role>-<namespace>-<name>`; idempotent.
pub fn bind_cluster_role(
    cluster: &Cluster,
    cluster_role: &str,
    namespace: &str,
    name: &str,
) -> Result<()> {
    let binding = binding(cluster_role, namespace, name);
    cluster.kubectl_input(&["apply", "-f", "-"], &binding.to_string())?;
    Ok(())
}

fn binding(cluster_role: &str, namespace: &str, name: &str) -> serde_json::Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": format!("{cluster_role}-{namespace}-{name}")},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
    })
}
