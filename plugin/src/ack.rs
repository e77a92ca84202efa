//! Waiting for a LogPolicy's pods to acknowledge its current generation (after `raise`
//! and `extend`), and the exit code that ends the wait.

use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::Api;
use logpolicy_api::LogPolicy;

use crate::cluster::Kube;
use crate::exit::{self, api_failure, Failure, Result};
use crate::progress::{pod_rows, pod_table, progress, Progress};

/// How often the policy is read while waiting.
const POLL: Duration = Duration::from_millis(100);
/// With no status after this long, the operator's Lease is looked at.
const LEASE_CHECK_AFTER: Duration = Duration::from_secs(2);

/// Waits up to `wait` until every pod acknowledged `name`'s generation `generation`;
/// prints the pods' table; returns `Ok` when all did, else the failure with its code
/// (4 pending, 5 no operator, 6 refused).
pub async fn wait_for_pods(
    kube: &Kube,
    name: &str,
    generation: i64,
    selector: &LabelSelector,
    wait: Duration,
) -> Result<()> {
    wait_for_pods_telling(kube, name, generation, selector, wait, false).await
}

/// [`wait_for_pods`], printing the pods' table on stderr when `to_stderr` (a command
/// whose stdout is a JSON or YAML document).
pub async fn wait_for_pods_telling(
    kube: &Kube,
    name: &str,
    generation: i64,
    selector: &LabelSelector,
    wait: Duration,
    to_stderr: bool,
) -> Result<()> {
    let say = |text: String| {
        if to_stderr {
            eprint!("{text}");
        } else {
            print!("{text}");
        }
    };
    let api: Api<LogPolicy> = Api::namespaced(kube.client.clone(), &kube.namespace);
    let started = Instant::now();
    let mut lease_checked = false;
    let lp = loop {
        let mut lp = api
            .get(name)
            .await
            .map_err(|e| api_failure(&format!("lp/{name}"), e))?;
        // Never judge by a status of an older generation than the one written.
        let current = lp.metadata.generation.unwrap_or(1).max(generation);
        lp.metadata.generation = Some(current);
        match progress(&lp) {
            Progress::Applied => break lp,
            Progress::Refused(why) => {
                return Err(Failure::new(
                    exit::REFUSED,
                    format!(
                        "the operator refused lp/{name}: Stalled=True {why}\nthe LogPolicy stays; fix it with kubectl edit lp/{name} or delete it with kubectl logpolicy revert {name}"
                    ),
                ))
            }
            Progress::Unseen if !lease_checked && started.elapsed() >= LEASE_CHECK_AFTER => {
                lease_checked = true;
                if let Some(why) = kube.lease_says_down().await {
                    return Err(not_running(name, wait, started, &why));
                }
            }
            _ => {}
        }
        if started.elapsed() >= wait {
            if progress(&lp) == Progress::Unseen {
                let why = kube.lease_note().await;
                return Err(not_running(name, wait, started, &why));
            }
            break lp;
        }
        tokio::time::sleep(POLL).await;
    };
    let pods = kube.selected_pods(selector).await?;
    // What each pod says it holds: the document's version and when it applied it.
    let holds = kube
        .holds(&pods.opted_in_pods, &format!("{}/{name}", kube.namespace))
        .await;
    let rows = pod_rows(&lp, &pods.opted_in, &holds);
    say(pod_table(&lp, &rows));
    let secs = started.elapsed().as_secs_f64();
    match progress(&lp) {
        Progress::Applied => {
            say(format!(
                "lp/{name}: acknowledged by every selected pod ({}) in {secs:.1} s\n",
                rows.len()
            ));
            Ok(())
        }
        Progress::Pending {
            applied,
            matched,
            failed,
        } => Err(Failure::new(
            exit::NOT_ACKNOWLEDGED,
            format!(
                "lp/{name}: {applied}/{matched} pods acknowledged within {} ({failed} failed); the LogPolicy stays and the operator keeps pushing it: see kubectl logpolicy status {name}, or kubectl logpolicy revert {name}",
                crate::output::short_duration(wait)
            ),
        )),
        // Not reached: Applied breaks, Refused and Unseen returned above.
        other => Err(Failure::error(format!("lp/{name}: {other:?}"))),
    }
}

fn not_running(name: &str, wait: Duration, started: Instant, why: &str) -> Failure {
    Failure::new(
        exit::NO_OPERATOR,
        format!(
            "the logpolicy operator is not running: it wrote no status for lp/{name} in {:.1} s (--wait {}); {why}\nthe LogPolicy stays and applies once the operator runs; delete it with kubectl logpolicy revert {name}",
            started.elapsed().as_secs_f64(),
            crate::output::short_duration(wait),
        ),
    )
}
