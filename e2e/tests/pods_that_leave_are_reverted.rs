//! A pod that leaves the opted-in set while it holds a raise (its opt-in label
//! removed, or its Pod object deleted while the process still runs, as during a
//! termination grace period) is sent its baseline: it does not stay raised. Deleting
//! the LogPolicy reverts the pods it still covers.

use std::time::Instant;

use logpolicy_e2e::process::wait_for;
use logpolicy_e2e::shop::{payment_policy, three_shops, wait_directive, wait_known, SEC};
use logpolicy_e2e::Scenario;

const RAISED: &str = "shop::payment=debug";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_that_opts_out_or_is_deleted_is_reverted() {
    let _file = crate::one_file_at_a_time(module_path!());
    let s = Scenario::new("leave").await.unwrap();
    let pods = s.pods(three_shops()).await.unwrap();
    wait_known(&pods).unwrap();
    s.apply(&payment_policy("raise", "debug")).unwrap();
    wait_directive(&pods, RAISED, true, Instant::now(), 10 * SEC).unwrap();

    // shop-0 opts out; shop-1's Pod object is deleted (its process goes on).
    let start = Instant::now();
    s.kubectl(&["label", "pod", "shop-0", "logpolicy.dev/enabled-"])
        .unwrap();
    s.kubectl(&[
        "delete",
        "pod",
        "shop-1",
        "--grace-period=0",
        "--force",
        "--wait=false",
    ])
    .unwrap();
    let left = wait_directive(&pods[..2], RAISED, false, start, 10 * SEC).unwrap();
    eprintln!("reverted after leaving (opted out, deleted): {left:.3?} s");
    // The one that stays keeps its raise, and the policy counts only it.
    assert!(pods[2].directives().unwrap().contains(RAISED));
    let lp = wait_for(10 * SEC, "matchedPods = 1", || {
        let lp = s.policy("raise")?;
        Ok((lp["status"]["matchedPods"] == 1).then_some(lp))
    })
    .unwrap();
    assert_eq!(lp["status"]["appliedPods"], 1, "{lp}");

    // Deleting the policy reverts the pod it still covers; the others stay reverted.
    let start = Instant::now();
    s.kubectl(&["delete", "lp", "raise"]).unwrap();
    let deleted = wait_directive(&pods[2..], RAISED, false, start, 10 * SEC).unwrap();
    eprintln!("reverted after kubectl delete lp: {deleted:.3?} s");
    let layer = format!("\"{}/raise\"", s.namespace());
    for p in &pods {
        let held = p.policy().unwrap();
        assert!(!held.to_string().contains(&layer), "{}: {held}", p.name);
    }
}
