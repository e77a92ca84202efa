//! A pod whose admin endpoint was down when its policy was pushed gets it soon after
//! the endpoint comes up, without waiting for the periodic resync (60 s): by the
//! operator's per-pod retry (backoff capped at 5 s for a refused connection) when
//! nothing in the pod changes, and at once when the pod turns Ready.

#![allow(clippy::unwrap_used)] // test helpers: a failure is a test failure

use std::time::Instant;

use logpolicy_e2e::process::wait_for;
use logpolicy_e2e::shop::{payment_policy, wait_directive, wait_known, SEC};
use logpolicy_e2e::{Operator, PodSpec, Scenario};

/// Waits until the operator saw the push of the pod's current document fail.
fn wait_failed(operator: &Operator, s: &Scenario, pod: &str) {
    wait_for(10 * SEC, &format!("{pod}: a failed push"), || {
        let view = operator.pod_view(s.namespace(), pod)?;
        let failed = view["error"].is_string() && view["layers"] == serde_json::json!(["raise"]);
        Ok(failed.then_some(()))
    })
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_whose_endpoint_was_down_gets_its_policy_soon_after_it_is_up() {
    let _file = crate::one_file_at_a_time(module_path!());
    let s = Scenario::new("late").await.unwrap();
    let operator = Operator::shared().unwrap();
    let mut pods = s
        .pods(vec![PodSpec::shop("late-0"), PodSpec::shop("unready-0")])
        .await
        .unwrap();
    wait_known(&pods).unwrap();
    // Both endpoints go down; unready-0's readiness probe fails too.
    for p in pods.iter_mut() {
        p.kill();
    }
    pods[1].set_ready(false).await.unwrap();
    s.apply(&payment_policy("raise", "debug")).unwrap();
    for p in &pods {
        wait_failed(&operator, &s, &p.name);
    }
    // Long enough for the retries to back off to their cap.
    tokio::time::sleep(6 * SEC).await;

    // Both come back; only unready-0's status says so (it turns Ready).
    let start = Instant::now();
    for p in pods.iter_mut() {
        p.respawn().unwrap();
    }
    pods[1].set_ready(true).await.unwrap();
    let raised = "shop::payment=debug";
    let waits = wait_directive(&pods, raised, true, start, 30 * SEC).unwrap();
    let (late, unready) = (waits[0], waits[1]);
    eprintln!("endpoint up -> policy: unchanged pod {late:.3} s, pod turned Ready {unready:.3} s");
    assert!(unready < 3.0, "turned Ready: {unready:.3} s");
    assert!(late < 8.0, "endpoint back, nothing changed: {late:.3} s");
}
