//! `revert`: delete LogPolicies, then wait until their pods dropped them.
//!
//! The operator keeps no finalizer on a LogPolicy: it is gone from the API at once, and
//! its status with it, while the operator pushes each pod its new document. What says a
//! pod dropped the policy is the pod itself: its `GET /logpolicy` no longer lists a layer
//! from `namespace/name`. It is read through the API server's pod proxy, else at the
//! pod's IP.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams};
use kube::Api;
use logpolicy_api::{LogPolicy, PolicyKey, OPT_IN_LABEL};

use crate::cli::RevertArgs;
use crate::cluster::{holds_layer, Connection, Kube};
use crate::exit::{self, api_failure, Failure, Result};
use crate::output::table;

/// How often the pods are read while waiting.
const POLL: Duration = Duration::from_millis(200);
/// How many pods are read at a time.
const CONCURRENCY: usize = 32;

/// A pod's state in a revert.
#[derive(Debug, Clone, PartialEq, Eq)]
enum PodState {
    Reverted,
    Pending,
    Unreachable(String),
}

/// `revert`.
pub async fn revert(connection: &Connection, args: &RevertArgs) -> Result<()> {
    let kube = connection.connect().await?;
    let api: Api<LogPolicy> = Api::namespaced(kube.client.clone(), &kube.namespace);
    let policies: Vec<LogPolicy> = if args.all {
        api.list(&ListParams::default())
            .await
            .map_err(|e| api_failure("listing LogPolicies", e))?
            .items
    } else {
        let mut found = Vec::new();
        for name in &args.names {
            found.push(
                api.get(name)
                    .await
                    .map_err(|e| api_failure(&format!("lp/{name}"), e))?,
            );
        }
        found
    };
    if policies.is_empty() {
        println!("no LogPolicy in namespace {}", kube.namespace);
        return Ok(());
    }
    // Each pod, with the policies it must drop.
    let pod_api: Api<Pod> = Api::namespaced(kube.client.clone(), &kube.namespace);
    let mut waiting: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for lp in &policies {
        let name = lp.metadata.name.clone().unwrap_or_default();
        let source = PolicyKey {
            namespace: kube.namespace.clone(),
            name: name.clone(),
        }
        .to_string();
        for pod in kube.selected_pods(&lp.spec.selector).await?.opted_in {
            waiting.entry(pod).or_default().push(source.clone());
        }
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => println!("lp/{name} deleted"),
            Err(kube::Error::Api(s)) if s.code == 404 => println!("lp/{name} was already gone"),
            Err(e) => return Err(api_failure(&format!("deleting lp/{name}"), e)),
        }
    }
    let started = Instant::now();
    let mut states: BTreeMap<String, PodState> = waiting
        .keys()
        .map(|p| (p.clone(), PodState::Pending))
        .collect();
    let opted_in_pods = ListParams::default().labels(&format!("{OPT_IN_LABEL}=true"));
    loop {
        // The pods as they are now: one that left, or opted out, has nothing to drop.
        let live: BTreeMap<String, Pod> = pod_api
            .list(&opted_in_pods)
            .await
            .map_err(|e| api_failure("listing pods", e))?
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .map(|p| (p.metadata.name.clone().unwrap_or_default(), p))
            .collect();
        let checks = waiting
            .iter()
            .filter(|(pod, _)| states.get(*pod) != Some(&PodState::Reverted))
            .map(|(pod_name, sources)| {
                let (kube, pod) = (&kube, live.get(pod_name));
                async move {
                    let state = match pod {
                        None => PodState::Reverted,
                        Some(pod) => pod_state(kube, pod, sources).await,
                    };
                    (pod_name.clone(), state)
                }
            });
        let results: Vec<(String, PodState)> = futures::stream::iter(checks)
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await;
        states.extend(results);
        let done = states.values().all(|s| *s == PodState::Reverted);
        if done || started.elapsed() >= args.wait.value {
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    let rows: Vec<Vec<String>> = states
        .iter()
        .map(|(pod, s)| match s {
            PodState::Reverted => vec![pod.clone(), "reverted".into(), String::new()],
            PodState::Pending => vec![pod.clone(), "pending".into(), String::new()],
            PodState::Unreachable(e) => vec![pod.clone(), "unknown".into(), e.clone()],
        })
        .collect();
    if !rows.is_empty() {
        print!("{}", table(&["POD", "STATE", "ERROR"], &rows));
    }
    let left = states
        .values()
        .filter(|s| **s != PodState::Reverted)
        .count();
    let secs = started.elapsed().as_secs_f64();
    if left == 0 {
        println!(
            "every pod ({}) dropped the policy in {secs:.1} s",
            states.len()
        );
        Ok(())
    } else {
        Err(Failure::new(
            exit::NOT_ACKNOWLEDGED,
            format!(
                "{left} of {} pods did not confirm within {}: the LogPolicy is deleted; they drop it when the operator reaches them, and at its expiry in any case",
                states.len(),
                crate::output::short_duration(args.wait.value)
            ),
        ))
    }
}

async fn pod_state(kube: &Kube, pod: &Pod, sources: &[String]) -> PodState {
    match kube.pod_policy(pod).await {
        Ok(policy) if sources.iter().any(|s| holds_layer(&policy, s)) => PodState::Pending,
        Ok(_) => PodState::Reverted,
        Err(e) => PodState::Unreachable(e),
    }
}
