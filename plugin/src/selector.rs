//! Which pods a raise is for: a label selector in kubectl's syntax (`-l`), or the
//! `spec.selector` of a workload (`deploy/NAME`, `sts/NAME`, `ds/NAME`, `rs/NAME`).
//! Both become the `metav1.LabelSelector` the LogPolicy holds.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use logpolicy_api::validate::{label_key, label_value};

/// Parses kubectl's label selector syntax: requirements separated by `,`, each one of
/// `key=value`, `key==value`, `key!=value`, `key in (a,b)`, `key notin (a,b)`, `key`
/// (exists) or `!key` (does not exist). Equalities become `matchLabels`, the rest
/// `matchExpressions`.
pub fn parse_label_selector(s: &str) -> Result<LabelSelector, String> {
    let mut labels = BTreeMap::new();
    let mut exprs = Vec::new();
    let parts = split_requirements(s)?;
    if parts.is_empty() {
        return Err(
            "the selector is empty: give at least one requirement, e.g. app=shop".to_owned(),
        );
    }
    for part in parts {
        let req = part.trim();
        if req.is_empty() {
            return Err(format!(
                "{s:?}: an empty requirement (two commas in a row?)"
            ));
        }
        let key = |k: &str| -> Result<String, String> {
            let k = k.trim();
            label_key(k).map_err(|e| format!("in {req:?}: {e}"))?;
            Ok(k.to_owned())
        };
        let value = |v: &str| -> Result<String, String> {
            let v = v.trim();
            label_value(v).map_err(|e| format!("in {req:?}: {e}"))?;
            Ok(v.to_owned())
        };
        let expr = |k: String, op: &str, values: Option<Vec<String>>| LabelSelectorRequirement {
            key: k,
            operator: op.to_owned(),
            values,
        };
        if let Some(k) = req.strip_prefix('!') {
            exprs.push(expr(key(k)?, "DoesNotExist", None));
        } else if let Some((k, v)) = req.split_once("!=") {
            exprs.push(expr(key(k)?, "NotIn", Some(vec![value(v)?])));
        } else if let Some((k, v)) = req.split_once("==").or_else(|| req.split_once('=')) {
            let (k, v) = (key(k)?, value(v)?);
            if let Some(old) = labels.insert(k.clone(), v.clone()) {
                if old != v {
                    return Err(format!(
                        "{s:?}: {k} is required to equal both {old:?} and {v:?}"
                    ));
                }
            }
        } else if let Some((k, op, rest)) = set_operator(req) {
            let values = set_values(rest, req)?
                .iter()
                .map(|v| value(v))
                .collect::<Result<Vec<_>, _>>()?;
            exprs.push(expr(key(k)?, op, Some(values)));
        } else {
            if req.contains(char::is_whitespace) || req.contains(['(', ')', '<', '>']) {
                return Err(format!(
                    "{req:?} is not a requirement: use key=value, key!=value, key in (a,b), key notin (a,b), key or !key"
                ));
            }
            exprs.push(expr(key(req)?, "Exists", None));
        }
    }
    Ok(LabelSelector {
        match_labels: (!labels.is_empty()).then_some(labels),
        match_expressions: (!exprs.is_empty()).then_some(exprs),
    })
}

/// Splits at the commas outside parentheses.
fn split_requirements(s: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0u32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| format!("{s:?}: a ')' without its '('"))?;
            }
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth > 0 {
        return Err(format!("{s:?}: a '(' without its ')'"));
    }
    if !s.trim().is_empty() {
        parts.push(&s[start..]);
    }
    Ok(parts)
}

/// `key in (...)` / `key notin (...)`: the key, the operator and what follows it.
fn set_operator(req: &str) -> Option<(&str, &'static str, &str)> {
    let mut words = req.splitn(2, char::is_whitespace);
    let key = words.next()?;
    let rest = words.next()?.trim_start();
    for (word, op) in [("notin", "NotIn"), ("in", "In")] {
        if let Some(after) = rest.strip_prefix(word) {
            if after.starts_with([' ', '(']) {
                return Some((key, op, after));
            }
        }
    }
    None
}

fn set_values(rest: &str, req: &str) -> Result<Vec<String>, String> {
    let inner = rest
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| format!("{req:?}: the values must be in parentheses, e.g. (a,b)"))?;
    let values: Vec<String> = inner
        .split(',')
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .collect();
    if values.is_empty() {
        return Err(format!(
            "{req:?}: give at least one value in the parentheses"
        ));
    }
    Ok(values)
}

/// A label selector in kubectl's syntax, as the API's `labelSelector` parameter takes
/// it.
pub fn selector_string(sel: &LabelSelector) -> String {
    let mut parts: Vec<String> = sel
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    for e in sel.match_expressions.iter().flatten() {
        let values = e.values.clone().unwrap_or_default().join(",");
        parts.push(match e.operator.as_str() {
            "In" => format!("{} in ({values})", e.key),
            "NotIn" => format!("{} notin ({values})", e.key),
            "Exists" => e.key.clone(),
            _ => format!("!{}", e.key),
        });
    }
    parts.join(",")
}

/// The kinds of workload whose pods a raise can select.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkloadKind {
    /// `deploy`, `deployment`.
    Deployment,
    /// `sts`, `statefulset`.
    StatefulSet,
    /// `ds`, `daemonset`.
    DaemonSet,
    /// `rs`, `replicaset`.
    ReplicaSet,
}

impl WorkloadKind {
    /// The short name, as in `deploy/shop`.
    pub fn short(self) -> &'static str {
        match self {
            WorkloadKind::Deployment => "deploy",
            WorkloadKind::StatefulSet => "sts",
            WorkloadKind::DaemonSet => "ds",
            WorkloadKind::ReplicaSet => "rs",
        }
    }
}

/// `KIND/NAME`, e.g. `deploy/shop`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadRef {
    /// The kind.
    pub kind: WorkloadKind,
    /// The name.
    pub name: String,
}

impl FromStr for WorkloadRef {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (kind, name) = s.split_once('/').ok_or_else(|| {
            format!("{s:?}: expected KIND/NAME, e.g. deploy/shop (or -l SELECTOR)")
        })?;
        let kind = match kind.to_ascii_lowercase().as_str() {
            "deploy" | "deployment" | "deployments" | "deployment.apps" => WorkloadKind::Deployment,
            "sts" | "statefulset" | "statefulsets" | "statefulset.apps" => {
                WorkloadKind::StatefulSet
            }
            "ds" | "daemonset" | "daemonsets" | "daemonset.apps" => WorkloadKind::DaemonSet,
            "rs" | "replicaset" | "replicasets" | "replicaset.apps" => WorkloadKind::ReplicaSet,
            _ => {
                return Err(format!(
                    "{s:?}: {kind:?} is not a workload kind: use deploy, sts, ds or rs"
                ))
            }
        };
        let name = crate::flags::parse_policy_name(name)
            .or_else(|_| {
                // Workload names are DNS subdomains: dots allowed.
                let ok = !name.is_empty()
                    && name.len() <= 253
                    && name
                        .split('.')
                        .all(|p| crate::flags::parse_policy_name(p).is_ok());
                ok.then(|| name.to_owned()).ok_or(())
            })
            .map_err(|()| format!("{s:?}: {name:?} is not a valid object name"))?;
        Ok(WorkloadRef { kind, name })
    }
}

impl fmt::Display for WorkloadRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.kind.short(), self.name)
    }
}

/// A workload as read from the API.
#[derive(Debug, Clone)]
pub enum Workload {
    /// A Deployment.
    Deployment(Deployment),
    /// A StatefulSet.
    StatefulSet(StatefulSet),
    /// A DaemonSet.
    DaemonSet(DaemonSet),
    /// A ReplicaSet.
    ReplicaSet(ReplicaSet),
}

/// The workload's `spec.selector` (its `matchLabels` and `matchExpressions`); an error
/// when it is empty (it would select every pod).
pub fn workload_selector(w: &Workload) -> Result<LabelSelector, String> {
    let (what, name, selector) = match w {
        Workload::Deployment(d) => ("deploy", d.metadata.name.clone(), &d.spec.selector),
        Workload::StatefulSet(s) => ("sts", s.metadata.name.clone(), &s.spec.selector),
        Workload::DaemonSet(d) => ("ds", d.metadata.name.clone(), &d.spec.selector),
        Workload::ReplicaSet(r) => ("rs", r.metadata.name.clone(), &r.spec.selector),
    };
    let name = name.unwrap_or_default();
    let empty = selector
        .match_labels
        .as_ref()
        .is_none_or(BTreeMap::is_empty)
        && selector
            .match_expressions
            .as_ref()
            .is_none_or(Vec::is_empty);
    if empty {
        return Err(format!(
            "{what}/{name} has an empty spec.selector: it would select every pod; use -l"
        ));
    }
    Ok(selector.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{
        DaemonSetSpec, DeploymentSpec, ReplicaSetSpec, StatefulSetSpec,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kube::core::SelectorExt;

    fn req(key: &str, op: &str, values: Option<&[&str]>) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: values.map(|v| v.iter().map(|s| (*s).to_owned()).collect()),
        }
    }

    #[test]
    fn kubectl_syntax_becomes_match_labels_and_expressions() {
        let sel = parse_label_selector("a=b,c!=d,e in (x, y),!f,g,h==i,j notin (k)").unwrap();
        assert_eq!(
            sel.match_labels,
            Some(BTreeMap::from([
                ("a".to_owned(), "b".to_owned()),
                ("h".to_owned(), "i".to_owned())
            ]))
        );
        assert_eq!(
            sel.match_expressions,
            Some(vec![
                req("c", "NotIn", Some(&["d"])),
                req("e", "In", Some(&["x", "y"])),
                req("f", "DoesNotExist", None),
                req("g", "Exists", None),
                req("j", "NotIn", Some(&["k"])),
            ])
        );
        assert_eq!(
            selector_string(&sel),
            "a=b,h=i,c notin (d),e in (x,y),!f,g,j notin (k)"
        );
        // The string form reads back the same.
        assert_eq!(parse_label_selector(&selector_string(&sel)).unwrap(), sel);
        let only = parse_label_selector("app.kubernetes.io/name=shop").unwrap();
        assert_eq!(only.match_expressions, None);

        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        let sel: kube::core::Selector = parse_label_selector("app=shop,tier in (web,api),!canary")
            .unwrap()
            .try_into()
            .unwrap();
        assert!(sel.matches(&labels(&[("app", "shop"), ("tier", "web")])));
        assert!(!sel.matches(&labels(&[("app", "shop"), ("tier", "db")])));
        assert!(!sel.matches(&labels(&[
            ("app", "shop"),
            ("tier", "web"),
            ("canary", "1")
        ])));
    }

    #[test]
    fn bad_selectors_are_refused_naming_the_bad_part() {
        for (bad, says) in [
            ("", "the selector is empty"),
            ("a=b,,c=d", "an empty requirement"),
            ("a=b,c in (x", "a '(' without its ')'"),
            ("a=b)", "a ')' without its '('"),
            ("e in x,y", "the values must be in parentheses"),
            ("e in ()", "at least one value"),
            ("app=sh op", "\"sh op\" is not a valid label value"),
            ("-app=shop", "\"-app\" is not a valid label key"),
            ("a=b,a=c", "a is required to equal both \"b\" and \"c\""),
            ("tier in (web,-x)", "\"-x\" is not a valid label value"),
            ("a b", "\"a b\" is not a requirement"),
            ("a>1", "\"a>1\" is not a requirement"),
        ] {
            let err = parse_label_selector(bad).unwrap_err();
            assert!(err.contains(says), "{bad:?}: {err}");
        }
    }

    #[test]
    fn workload_references() {
        for (s, kind) in [
            ("deploy/shop", WorkloadKind::Deployment),
            ("deployment/shop", WorkloadKind::Deployment),
            ("sts/shop", WorkloadKind::StatefulSet),
            ("statefulset/shop", WorkloadKind::StatefulSet),
            ("ds/shop", WorkloadKind::DaemonSet),
            ("daemonset/shop", WorkloadKind::DaemonSet),
            ("rs/shop", WorkloadKind::ReplicaSet),
            ("replicaset/shop", WorkloadKind::ReplicaSet),
        ] {
            let w: WorkloadRef = s.parse().unwrap();
            assert_eq!((w.kind, w.name.as_str()), (kind, "shop"), "{s}");
        }
        assert_eq!(
            "Deployment/shop.v2"
                .parse::<WorkloadRef>()
                .unwrap()
                .to_string(),
            "deploy/shop.v2"
        );
        let err = "pod/shop".parse::<WorkloadRef>().unwrap_err();
        assert!(err.contains("\"pod\" is not a workload kind"), "{err}");
        let err = "shop".parse::<WorkloadRef>().unwrap_err();
        assert!(err.contains("expected KIND/NAME"), "{err}");
        let err = "deploy/Shop".parse::<WorkloadRef>().unwrap_err();
        assert!(err.contains("\"Shop\" is not a valid object name"), "{err}");
    }

    fn selector() -> LabelSelector {
        LabelSelector {
            match_labels: Some(BTreeMap::from([("app".to_owned(), "shop".to_owned())])),
            match_expressions: Some(vec![req("track", "NotIn", Some(&["canary"]))]),
        }
    }

    fn meta() -> ObjectMeta {
        ObjectMeta {
            name: Some("shop".into()),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn the_selector_of_each_workload_kind() {
        let workloads = [
            Workload::Deployment(Deployment {
                metadata: meta(),
                spec: DeploymentSpec {
                    selector: selector(),
                    ..DeploymentSpec::default()
                },
                status: None,
            }),
            Workload::StatefulSet(StatefulSet {
                metadata: meta(),
                spec: StatefulSetSpec {
                    selector: selector(),
                    ..StatefulSetSpec::default()
                },
                status: None,
            }),
            Workload::DaemonSet(DaemonSet {
                metadata: meta(),
                spec: DaemonSetSpec {
                    selector: selector(),
                    ..DaemonSetSpec::default()
                },
                status: None,
            }),
            Workload::ReplicaSet(ReplicaSet {
                metadata: meta(),
                spec: ReplicaSetSpec {
                    selector: selector(),
                    ..ReplicaSetSpec::default()
                },
                status: None,
            }),
        ];
        for w in &workloads {
            assert_eq!(workload_selector(w), Ok(selector()), "{w:?}");
        }
        let empty = Workload::Deployment(Deployment {
            metadata: meta(),
            spec: DeploymentSpec::default(),
            status: None,
        });
        let err = workload_selector(&empty).unwrap_err();
        assert!(
            err.contains("deploy/shop has an empty spec.selector"),
            "{err}"
        );
    }
}
