//! The commands that only read: `list`, `status`, `effective`.

use std::time::SystemTime;

use kube::api::ListParams;
use kube::core::{Selector, SelectorExt};
use kube::Api;
use logpolicy_api::conditions::EXPIRED;
use logpolicy_api::{LogPolicy, OPT_IN_LABEL};
use serde::Serialize;

use crate::cli::{EffectiveArgs, ListArgs, StatusArgs};
use crate::cluster::{opted_in, Connection};
use crate::exit::{self, api_failure, Failure, Result};
use crate::output::{data, expires_in, table, Format};
use crate::progress::{condition, pod_rows, pod_table};
use crate::raise::levels_text;

/// One row of `list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRow {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// What it sets, as directives (`debug,shop::payment=debug,shop::http=1/100`).
    pub targets: String,
    /// `applied/matched` from the status, `expired`, or `-` before the operator saw it.
    pub applied: String,
    /// Time left, `expired`, `never` (no expiry) or `-` (no status yet).
    pub expires_in: String,
    /// `spec.reason`.
    pub reason: String,
    /// `spec.priority`.
    pub priority: i32,
    /// What the raise was measured to cost when it applied (`raise --measure`): the bytes
    /// per second it adds, `+12.3 KiB/s`, else `-`.
    pub cost: String,
}

/// `lp` as a row of `list`, at `now`.
pub fn policy_row(lp: &LogPolicy, now: SystemTime) -> PolicyRow {
    let status = lp.status.as_ref();
    let expired = condition(lp, EXPIRED).is_some_and(|c| c.status == "True");
    let expires = match status.and_then(|s| s.expiration_time.as_deref()) {
        _ if expired => "expired".to_owned(),
        Some(t) => expires_in(t, now),
        None if status.is_some_and(|s| s.observed_generation.is_some()) => "never".to_owned(),
        None => "-".to_owned(),
    };
    PolicyRow {
        namespace: lp.metadata.namespace.clone().unwrap_or_default(),
        name: lp.metadata.name.clone().unwrap_or_default(),
        targets: levels_text(&lp.spec),
        applied: status
            .and_then(|s| s.summary.clone())
            .unwrap_or_else(|| "-".to_owned()),
        expires_in: expires,
        reason: lp.spec.reason.clone().unwrap_or_default(),
        priority: lp.spec.priority,
        cost: crate::cost::cost_cell(
            crate::cost::recorded(lp.metadata.annotations.as_ref()).as_ref(),
        ),
    }
}

/// `list`.
pub async fn list(connection: &Connection, args: &ListArgs) -> Result<()> {
    let kube = connection.connect().await?;
    let api: Api<LogPolicy> = if args.all_namespaces {
        Api::all(kube.client.clone())
    } else {
        Api::namespaced(kube.client.clone(), &kube.namespace)
    };
    let mut items = api
        .list(&ListParams::default())
        .await
        .map_err(|e| api_failure("listing LogPolicies", e))?
        .items;
    items.sort_by(|a, b| {
        (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
    });
    if args.output != Format::Table {
        print!("{}", data(args.output, &items)?);
        return Ok(());
    }
    if items.is_empty() {
        let scope = if args.all_namespaces {
            "any namespace".to_owned()
        } else {
            format!("namespace {}", kube.namespace)
        };
        println!("no LogPolicy in {scope}");
        return Ok(());
    }
    let now = SystemTime::now();
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|lp| {
            let r = policy_row(lp, now);
            let mut cells = vec![r.name, r.targets, r.applied, r.expires_in, r.cost, r.reason];
            if args.all_namespaces {
                cells.insert(0, r.namespace);
            }
            cells
        })
        .collect();
    let mut header = vec!["NAME", "TARGETS", "APPLIED", "EXPIRES IN", "COST", "REASON"];
    if args.all_namespaces {
        header.insert(0, "NAMESPACE");
    }
    print!("{}", table(&header, &rows));
    Ok(())
}

/// `status`.
pub async fn status(connection: &Connection, args: &StatusArgs) -> Result<()> {
    let kube = connection.connect().await?;
    let api: Api<LogPolicy> = Api::namespaced(kube.client.clone(), &kube.namespace);
    let name = &args.name;
    let lp = api
        .get(name)
        .await
        .map_err(|e| api_failure(&format!("lp/{name}"), e))?;
    let pods = kube.selected_pods(&lp.spec.selector).await?;
    let holds = kube
        .holds(&pods.opted_in_pods, &format!("{}/{name}", kube.namespace))
        .await;
    let rows = pod_rows(&lp, &pods.opted_in, &holds);
    if args.output != Format::Table {
        #[derive(Serialize)]
        struct Status<'a> {
            policy: &'a LogPolicy,
            pods: &'a [crate::progress::PodRow],
        }
        print!(
            "{}",
            data(
                args.output,
                &Status {
                    policy: &lp,
                    pods: &rows
                }
            )?
        );
        return Ok(());
    }
    let row = policy_row(&lp, SystemTime::now());
    println!("Name:        {}", row.name);
    println!("Namespace:   {}", row.namespace);
    println!(
        "Selector:    {}",
        crate::selector::selector_string(&lp.spec.selector)
    );
    println!("Sets:        {}", row.targets);
    println!("Priority:    {}", row.priority);
    println!("Applied:     {}", row.applied);
    println!("Expires in:  {}", row.expires_in);
    if !row.reason.is_empty() {
        println!("Reason:      {}", row.reason);
    }
    if let Some(window) = &lp.spec.replay {
        let replayed = lp
            .status
            .as_ref()
            .and_then(|s| s.replay.as_ref())
            .and_then(|r| {
                let summary = r.summary.clone()?;
                Some(match &r.held_from {
                    Some(held) => format!("{summary} (held from {held})"),
                    None => summary,
                })
            })
            .unwrap_or_else(|| "not yet".to_owned());
        println!(
            "Replayed:    {replayed}, of the last {} asked",
            window.since
        );
    }
    if let Some(cost) = crate::cost::recorded(lp.metadata.annotations.as_ref()) {
        println!(
            "Cost:        {} (measured over {} on {} pods at {})",
            crate::cost::summary_line(&cost, None),
            cost.window,
            cost.pods,
            cost.measured_at
        );
    }
    println!();
    let conditions: Vec<Vec<String>> = lp
        .status
        .iter()
        .flat_map(|s| &s.conditions)
        .map(|c| {
            vec![
                c.type_.clone(),
                c.status.clone(),
                c.reason.clone(),
                c.message.clone(),
            ]
        })
        .collect();
    if conditions.is_empty() {
        println!("No status yet: the operator has not seen this policy.");
    } else {
        print!(
            "{}",
            table(&["CONDITION", "STATUS", "REASON", "MESSAGE"], &conditions)
        );
    }
    println!();
    if rows.is_empty() {
        println!(
            "No opted-in pod ({OPT_IN_LABEL}=true) matches the selector; {} pods that match have not opted in.",
            pods.not_opted_in.len()
        );
    } else {
        print!("{}", pod_table(&lp, &rows));
    }
    Ok(())
}

/// One policy that applies to a pod, in `effective`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Source {
    /// The LogPolicy.
    pub policy: String,
    /// Its priority.
    pub priority: i32,
    /// What it sets.
    pub sets: String,
    /// Time left.
    pub expires_in: String,
    /// Its reason.
    pub reason: String,
}

/// The policies of `policies` that select a pod with `labels` and are in force, highest
/// priority first, then oldest first (as the pods merge them).
pub fn sources_for(
    policies: &[LogPolicy],
    labels: &std::collections::BTreeMap<String, String>,
    now: SystemTime,
) -> Vec<Source> {
    let mut active: Vec<&LogPolicy> = policies
        .iter()
        .filter(|lp| Selector::try_from(lp.spec.selector.clone()).is_ok_and(|s| s.matches(labels)))
        .filter(|lp| condition(lp, EXPIRED).is_none_or(|c| c.status != "True"))
        // Refused with nothing in force (`Applied` reason `Invalid`); a refused new
        // generation leaves the previous one in force, and `Ready=False` alone may only
        // mean pushes in flight.
        .filter(|lp| {
            condition(lp, logpolicy_api::conditions::APPLIED)
                .is_none_or(|c| c.reason != logpolicy_api::conditions::INVALID)
        })
        .collect();
    active.sort_by(|a, b| {
        b.spec.priority.cmp(&a.spec.priority).then_with(|| {
            a.metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0)
                .cmp(&b.metadata.creation_timestamp.as_ref().map(|t| t.0))
        })
    });
    active
        .into_iter()
        .map(|lp| {
            let row = policy_row(lp, now);
            Source {
                policy: row.name,
                priority: row.priority,
                sets: row.targets,
                expires_in: row.expires_in,
                reason: row.reason,
            }
        })
        .filter(|s| s.expires_in != "expired")
        .collect()
}

/// `effective`.
pub async fn effective(connection: &Connection, args: &EffectiveArgs) -> Result<()> {
    let kube = connection.connect().await?;
    let pod = kube.pod(&args.pod).await?;
    let name = &args.pod;
    if !opted_in(&pod.metadata) {
        return Err(Failure::new(
            exit::NOT_OPTED_IN,
            format!(
                "pod {name} has not opted in: no LogPolicy changes it. Add the label {OPT_IN_LABEL}=true:\n  kubectl label pod -n {} {name} {OPT_IN_LABEL}=true\nor set it in the pod template of its workload",
                kube.namespace
            ),
        ));
    }
    let api: Api<LogPolicy> = Api::namespaced(kube.client.clone(), &kube.namespace);
    let policies = api
        .list(&ListParams::default())
        .await
        .map_err(|e| api_failure("listing LogPolicies", e))?
        .items;
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    let sources = sources_for(&policies, &labels, SystemTime::now());
    let enforced = kube.pod_policy(&pod).await;
    if args.output != Format::Table {
        #[derive(Serialize)]
        struct Effective<'a> {
            pod: &'a str,
            policies: &'a [Source],
            #[serde(skip_serializing_if = "Option::is_none")]
            enforced: Option<&'a serde_json::Value>,
            #[serde(skip_serializing_if = "Option::is_none")]
            unreachable: Option<&'a str>,
        }
        let out = Effective {
            pod: name,
            policies: &sources,
            enforced: enforced.as_ref().ok(),
            unreachable: enforced.as_ref().err().map(String::as_str),
        };
        print!("{}", data(args.output, &out)?);
        return Ok(());
    }
    match &enforced {
        Ok(policy) => {
            let directives = policy["effective"]["directives"].as_str().unwrap_or("-");
            let from: Vec<&str> = policy["effective"]["sources"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s.as_str())
                .collect();
            println!("pod {name} enforces: {directives}");
            println!("from its layers: {}", from.join(", "));
        }
        Err(e) => println!("pod {name}: its admin endpoint cannot be read ({e})"),
    }
    if sources.is_empty() {
        println!(
            "No LogPolicy in force selects pod {name}: it logs as its environment (RUST_LOG) says."
        );
        return Ok(());
    }
    println!();
    let rows: Vec<Vec<String>> = sources
        .iter()
        .map(|s| {
            vec![
                s.policy.clone(),
                s.priority.to_string(),
                s.sets.clone(),
                s.expires_in.clone(),
                s.reason.clone(),
            ]
        })
        .collect();
    print!(
        "{}",
        table(
            &["POLICY", "PRIORITY", "SETS", "EXPIRES IN", "REASON"],
            &rows
        )
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lp(name: &str, priority: i32, created: &str, status: serde_json::Value) -> LogPolicy {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "logpolicy.dev/v1beta1", "kind": "LogPolicy",
            "metadata": {"name": name, "namespace": "shop", "generation": 1, "creationTimestamp": created},
            "spec": {"selector": {"matchLabels": {"app": "shop"}}, "priority": priority,
                     "targets": [{"target": "shop::payment", "level": "debug"}], "reason": "INC-1"},
            "status": status,
        }))
        .unwrap()
    }

    fn cond(t: &str, s: &str) -> serde_json::Value {
        cond_r(t, s, "R")
    }

    fn cond_r(t: &str, s: &str, reason: &str) -> serde_json::Value {
        serde_json::json!({"type": t, "status": s, "reason": reason, "message": "",
            "lastTransitionTime": "2026-12-03T07:00:00Z"})
    }

    #[test]
    fn rows_say_what_applies_and_for_how_long() {
        let now = logpolicy::clock::parse_rfc3339("2026-12-03T07:00:00Z").unwrap();
        let active = lp(
            "a",
            0,
            "2026-12-03T06:50:00Z",
            serde_json::json!({"observedGeneration": 1, "summary": "3/3",
                "expirationTime": "2026-12-03T07:14:00Z",
                "conditions": [cond("Ready", "True"), cond("Expired", "False")]}),
        );
        let row = policy_row(&active, now);
        assert_eq!(
            (
                row.targets.as_str(),
                row.applied.as_str(),
                row.expires_in.as_str(),
                row.reason.as_str()
            ),
            ("shop::payment=debug", "3/3", "14m0s", "INC-1")
        );
        let unseen = lp("b", 0, "2026-12-03T06:50:00Z", serde_json::json!({}));
        let row = policy_row(&unseen, now);
        assert_eq!((row.applied.as_str(), row.expires_in.as_str()), ("-", "-"));
        let forever = lp(
            "c",
            0,
            "2026-12-03T06:50:00Z",
            serde_json::json!({"observedGeneration": 1}),
        );
        assert_eq!(policy_row(&forever, now).expires_in, "never");
        let expired = lp(
            "d",
            0,
            "2026-12-03T06:50:00Z",
            serde_json::json!({"observedGeneration": 1, "summary": "expired",
                "expirationTime": "2026-12-03T06:55:00Z", "conditions": [cond("Expired", "True")]}),
        );
        assert_eq!(policy_row(&expired, now).expires_in, "expired");
    }

    #[test]
    fn effective_sources_are_the_matching_active_policies_by_priority() {
        let now = logpolicy::clock::parse_rfc3339("2026-12-03T07:00:00Z").unwrap();
        let status = |exp: &str| {
            serde_json::json!({"observedGeneration": 1, "expirationTime": exp,
                "conditions": [cond("Ready", "True"), cond("Expired", "False")]})
        };
        let policies = vec![
            lp(
                "old-low",
                0,
                "2026-12-03T06:00:00Z",
                status("2026-12-03T08:00:00Z"),
            ),
            lp(
                "new-low",
                0,
                "2026-12-03T06:30:00Z",
                status("2026-12-03T08:00:00Z"),
            ),
            lp(
                "high",
                10,
                "2026-12-03T06:40:00Z",
                status("2026-12-03T08:00:00Z"),
            ),
            lp(
                "past",
                50,
                "2026-12-03T06:40:00Z",
                status("2026-12-03T06:59:00Z"),
            ),
            lp(
                "invalid",
                50,
                "2026-12-03T06:40:00Z",
                serde_json::json!({"observedGeneration": 1, "conditions": [
                    cond_r("Ready", "False", "Invalid"), cond_r("Applied", "False", "Invalid"),
                    cond_r("Stalled", "True", "Invalid")]}),
            ),
            // Pushes in flight: Ready=False, and in force.
            lp(
                "pending",
                5,
                "2026-12-03T06:45:00Z",
                serde_json::json!({"observedGeneration": 1, "expirationTime": "2026-12-03T08:00:00Z",
                    "conditions": [cond_r("Ready", "False", "PodsPending"),
                    cond_r("Applied", "False", "PodsPending"), cond("Expired", "False")]}),
            ),
        ];
        let shop = [("app".to_owned(), "shop".to_owned())].into();
        let names: Vec<String> = sources_for(&policies, &shop, now)
            .into_iter()
            .map(|s| s.policy)
            .collect();
        assert_eq!(names, ["high", "pending", "old-low", "new-low"]);
        let other = [("app".to_owned(), "ledger".to_owned())].into();
        assert!(sources_for(&policies, &other, now).is_empty());
    }
}
