//! Rendering and linting the Helm chart `charts/logpolicy-operator` offline.
//!
//! Everything goes through `scripts/helm` (the Helm v4 SDK of the PyPI package
//! `helm-python-sdk`, installed once into a cached virtualenv), so the tests see exactly
//! what `helm template` / `helm lint` would.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde::Deserialize;

use crate::cluster::{repo_root, Error, Result};

/// The chart, relative to the repository's root.
pub const CHART: &str = "charts/logpolicy-operator";

/// The Kubernetes version of the e2e cluster (`e2e/cluster`): render with it for a
/// server-side dry run there (it has no `policy/v1`).
pub const E2E_KUBE_VERSION: &str = "v1.20.2";

/// The chart's directory.
pub fn chart_dir() -> PathBuf {
    repo_root().join(CHART)
}

/// `helm template RELEASE charts/logpolicy-operator --namespace NAMESPACE --set k=v...`
/// with Helm's default capabilities (a current Kubernetes): the multi-document YAML.
pub fn template(release: &str, namespace: &str, set: &[(&str, &str)]) -> Result<String> {
    template_for(None, release, namespace, set)
}

/// Like [`template`], for a cluster of `kube_version` (e.g. [`E2E_KUBE_VERSION`]);
/// `None` is Helm's default.
pub fn template_for(
    kube_version: Option<&str>,
    release: &str,
    namespace: &str,
    set: &[(&str, &str)],
) -> Result<String> {
    let chart = chart_dir();
    let chart = chart.to_string_lossy();
    let mut args: Vec<String> = vec![
        "template".into(),
        release.into(),
        chart.into_owned(),
        "--namespace".into(),
        namespace.into(),
    ];
    if let Some(v) = kube_version {
        args.extend(["--kube-version".into(), v.into()]);
    }
    args.extend(set_args(set));
    run_helm(&args)
}

/// [`template`], parsed: one JSON value per object, empty documents skipped.
pub fn render(
    release: &str,
    namespace: &str,
    set: &[(&str, &str)],
) -> Result<Vec<serde_json::Value>> {
    parse_documents(&template(release, namespace, set)?)
}

/// [`template_for`], parsed.
pub fn render_for(
    kube_version: Option<&str>,
    release: &str,
    namespace: &str,
    set: &[(&str, &str)],
) -> Result<Vec<serde_json::Value>> {
    parse_documents(&template_for(kube_version, release, namespace, set)?)
}

/// `helm template RELEASE CHART --namespace NAMESPACE --set k=v...` of another chart,
/// a directory or a packaged `.tgz` (such as the release's), parsed.
pub fn render_chart(
    chart: &std::path::Path,
    release: &str,
    namespace: &str,
    set: &[(&str, &str)],
) -> Result<Vec<serde_json::Value>> {
    let mut args: Vec<String> = vec![
        "template".into(),
        release.into(),
        chart.to_string_lossy().into_owned(),
        "--namespace".into(),
        namespace.into(),
    ];
    args.extend(set_args(set));
    parse_documents(&run_helm(&args)?)
}

/// [`render`] with values files too (`-f FILE`, in order, before the `--set`s), as
/// `helm template` merges them: lists of objects are easier to give in a file.
pub fn render_with_values(
    release: &str,
    namespace: &str,
    files: &[&std::path::Path],
    set: &[(&str, &str)],
) -> Result<Vec<serde_json::Value>> {
    let mut args: Vec<String> = vec![
        "template".into(),
        release.into(),
        chart_dir().to_string_lossy().into_owned(),
        "--namespace".into(),
        namespace.into(),
    ];
    for f in files {
        args.extend(["-f".into(), f.to_string_lossy().into_owned()]);
    }
    args.extend(set_args(set));
    parse_documents(&run_helm(&args)?)
}

/// Whether a rendered object is a Helm hook (such as `helm test`'s check pod and its
/// ServiceAccount and roles): `helm template` renders them, `helm install` does not
/// create them.
pub fn is_hook(object: &serde_json::Value) -> bool {
    !object["metadata"]["annotations"]["helm.sh/hook"].is_null()
}

/// The objects of `objects` that `helm install` creates (not the hooks).
pub fn installed(objects: Vec<serde_json::Value>) -> Vec<serde_json::Value> {
    objects.into_iter().filter(|o| !is_hook(o)).collect()
}

/// `helm lint --strict charts/logpolicy-operator --set k=v...`: its report, or an error
/// holding it when the chart fails.
pub fn lint(set: &[(&str, &str)]) -> Result<String> {
    let chart = chart_dir();
    let mut args: Vec<String> = vec![
        "lint".into(),
        "--strict".into(),
        chart.to_string_lossy().into_owned(),
    ];
    args.extend(set_args(set));
    run_helm(&args)
}

/// [`lint`] of values files (`-f FILE`, in order).
pub fn lint_values(files: &[&std::path::Path]) -> Result<String> {
    let mut args: Vec<String> = vec![
        "lint".into(),
        "--strict".into(),
        chart_dir().to_string_lossy().into_owned(),
    ];
    for f in files {
        args.extend(["-f".into(), f.to_string_lossy().into_owned()]);
    }
    run_helm(&args)
}

/// Multi-document YAML into objects; empty (or comment-only) documents are skipped.
pub fn parse_documents(yaml: &str) -> Result<Vec<serde_json::Value>> {
    let mut objects = Vec::new();
    for (i, doc) in serde_yaml::Deserializer::from_str(yaml).enumerate() {
        let value = serde_json::Value::deserialize(doc)
            .map_err(|e| Error(format!("rendered document {i}: {e}")))?;
        if !value.is_null() {
            objects.push(value);
        }
    }
    Ok(objects)
}

/// The objects of `kind` (and `name`, if given).
pub fn find<'a>(
    objects: &'a [serde_json::Value],
    kind: &str,
    name: Option<&str>,
) -> Vec<&'a serde_json::Value> {
    objects
        .iter()
        .filter(|o| o["kind"] == kind)
        .filter(|o| name.is_none_or(|n| o["metadata"]["name"] == n))
        .collect()
}

/// The one object of `kind`, or an error naming how many there are.
pub fn one<'a>(objects: &'a [serde_json::Value], kind: &str) -> Result<&'a serde_json::Value> {
    match find(objects, kind, None).as_slice() {
        [o] => Ok(o),
        found => Err(Error(format!(
            "expected one {kind}, the chart rendered {}",
            found.len()
        ))),
    }
}

/// A multi-document YAML stream of `objects` (`kubectl apply -f -` input). Each document
/// is written as JSON (which is YAML): kubectl reads YAML 1.1, where a plain `off` or
/// `yes` would be a boolean, and a YAML serializer may leave such strings unquoted.
pub fn to_yaml(objects: &[&serde_json::Value]) -> Result<String> {
    let mut out = String::new();
    for o in objects {
        out.push_str("---\n");
        out.push_str(&serde_json::to_string(o).map_err(|e| Error(format!("to JSON: {e}")))?);
        out.push('\n');
    }
    Ok(out)
}

fn set_args(set: &[(&str, &str)]) -> Vec<String> {
    set.iter()
        .flat_map(|(k, v)| ["--set".to_owned(), format!("{k}={v}")])
        .collect()
}

fn run_helm(args: &[String]) -> Result<String> {
    let script = repo_root().join("scripts/helm");
    let out = Command::new("bash")
        .arg(&script)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Error(format!("running {}: {e}", script.display())))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(Error(format!(
            "scripts/helm {} failed ({}): {}{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim(),
            if stdout.trim().is_empty() {
                String::new()
            } else {
                format!("\n{}", stdout.trim())
            }
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_are_parsed_and_empty_ones_skipped() {
        let objects = parse_documents(
            "---\n# Source: a.yaml\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: a}\n---\n# only a comment\n---\napiVersion: v1\nkind: Service\nmetadata: {name: b}\n",
        )
        .unwrap();
        assert_eq!(objects.len(), 2);
        assert_eq!(one(&objects, "Service").unwrap()["metadata"]["name"], "b");
        assert!(one(&objects, "Deployment").is_err());
        assert_eq!(find(&objects, "ServiceAccount", Some("a")).len(), 1);
        assert_eq!(find(&objects, "ServiceAccount", Some("b")).len(), 0);
        let yaml = to_yaml(&[&objects[0]]).unwrap();
        assert_eq!(parse_documents(&yaml).unwrap(), vec![objects[0].clone()]);
    }

    #[test]
    fn yaml_for_kubectl_keeps_yaml_1_1_booleans_strings() {
        let o = serde_json::json!({"enum": ["off", "on", "yes", "n"]});
        let yaml = to_yaml(&[&o]).unwrap();
        assert!(yaml.contains(r#"["off","on","yes","n"]"#), "{yaml}");
        assert_eq!(parse_documents(&yaml).unwrap(), vec![o]);
    }

    #[test]
    fn set_pairs_become_set_flags() {
        assert_eq!(
            set_args(&[("replicaCount", "2"), ("watchNamespaces", "{a,b}")]),
            ["--set", "replicaCount=2", "--set", "watchNamespaces={a,b}"]
        );
    }
}
