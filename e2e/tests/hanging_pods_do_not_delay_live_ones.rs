//! Many opted-in pods whose admin address neither answers nor refuses (a listener
//! that accepts nothing: the kernel drops their SYNs) do not delay the live pods: a
//! new policy reaches the live ones within seconds, and the status counts the hanging
//! ones as failed, with the reason `timeout`.
//!
//! The hanging pods sort before the live ones, so that pushes made in order would
//! reach them first.

#![allow(clippy::unwrap_used)] // test helpers: a failure is a test failure

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use logpolicy_e2e::net::{next_pod_ip, Unanswering};
use logpolicy_e2e::pod::create_running_pods;
use logpolicy_e2e::process::wait_for;
use logpolicy_e2e::shop::{payment_policy, wait_directive, wait_known, SEC};
use logpolicy_e2e::{DemoPod, PodSpec, Scenario};

/// Hanging pods.
const HANGING: usize = 150;
/// Live demo services.
const LIVE: usize = 4;

/// Applies the policy at `level` and waits until every live pod holds it; the wait per
/// pod.
fn apply_and_wait(s: &Scenario, pods: &[DemoPod], level: &str, timeout: Duration) -> Vec<f64> {
    let start = Instant::now();
    s.apply(&payment_policy("raise", level)).unwrap();
    let directive = format!("shop::payment={level}");
    wait_directive(pods, &directive, true, start, timeout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_that_never_answer_do_not_delay_the_live_ones() {
    let _file = crate::one_file_at_a_time(module_path!());
    let s = Scenario::new("hang").await.unwrap();
    let live = s
        .pods(
            (0..LIVE)
                .map(|i| PodSpec::shop(&format!("shop-{i}")))
                .collect(),
        )
        .await
        .unwrap();
    wait_known(&live).unwrap();
    let hang = Unanswering::bind(next_pod_ip()).await.unwrap();
    let labels = BTreeMap::from([("app".to_owned(), "shop".to_owned())]);
    let created = Instant::now();
    create_running_pods(
        &s.client,
        s.namespace(),
        "a-hang",
        HANGING,
        &labels,
        hang.addr().unwrap(),
    )
    .await
    .unwrap();
    eprintln!(
        "{HANGING} hanging pods created in {:.1} s",
        created.elapsed().as_secs_f64()
    );

    // A first policy: every hanging pod is tried too.
    let first = apply_and_wait(&s, &live, "debug", 30 * SEC);
    eprintln!("first policy reached the live pods after {first:.3?} s");

    // The status counts the hanging pods as failed, naming the timeout.
    let started = Instant::now();
    let lp = wait_for(60 * SEC, "failedPods = HANGING", || {
        let lp = s.policy("raise")?;
        let failed = lp["status"]["failedPods"].as_u64().unwrap_or(0);
        Ok((failed == HANGING as u64).then_some(lp))
    })
    .unwrap();
    eprintln!(
        "failedPods = {HANGING} after {:.1} s more",
        started.elapsed().as_secs_f64()
    );
    let status = &lp["status"];
    assert_eq!(status["matchedPods"], HANGING + LIVE, "{status}");
    assert_eq!(status["appliedPods"], LIVE, "{status}");
    let summary = status["summary"].as_str().unwrap_or_default();
    assert!(
        summary.contains(&format!("{LIVE}/{}", HANGING + LIVE)),
        "{status}"
    );
    let failing = status["failingPods"].as_array().unwrap();
    assert!(!failing.is_empty(), "{status}");
    for f in failing {
        assert!(
            f["reason"].as_str().unwrap_or_default().contains("timeout"),
            "{f}"
        );
    }

    // A change reaches the live pods at once, whatever the hanging ones do.
    for level in ["trace", "info"] {
        let waits = apply_and_wait(&s, &live, level, 30 * SEC);
        eprintln!("{level}: reached the live pods after {waits:.3?} s");
        for w in &waits {
            assert!(*w < 3.0, "{level}: {waits:?} s");
        }
    }
}
