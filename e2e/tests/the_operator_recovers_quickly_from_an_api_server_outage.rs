//! After an API-server outage (kube-apiserver stopped for a while, etcd kept), the
//! pods keep their policy, the operator recovers without a restart, and a policy
//! applied right after the server is back reaches the pods within 2 s: the watches
//! retry at most 1 s apart, whatever the outage's length, and list again at once when
//! the restarted server no longer knows their resource version.
//! `the_operator_recovers_quickly_after_the_api_server_is_killed` does the same after
//! a SIGKILL.
//!
//! The only test of its file (files run one at a time): it stops the API server every test talks to.

use std::time::Instant;

use logpolicy_e2e::process::wait_for;
use logpolicy_e2e::shop::{payment_policy, three_shops, wait_directive, wait_known, SEC};
use logpolicy_e2e::Scenario;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_applied_after_an_outage_reaches_the_pods_within_2_s() {
    let _file = crate::one_file_at_a_time(module_path!());
    let s = Scenario::new("outage").await.unwrap();
    let pods = s.pods(three_shops()).await.unwrap();
    wait_known(&pods).unwrap();
    s.apply(&payment_policy("raise", "debug")).unwrap();
    wait_directive(&pods, "shop::payment=debug", true, Instant::now(), 10 * SEC).unwrap();

    let outage = s.cluster.api_server_outage().unwrap();
    let down = Instant::now();
    // Long enough for kube's default watch backoff to grow past 10 s.
    tokio::time::sleep(12 * SEC).await;
    for p in &pods {
        let d = p.directives().unwrap();
        assert!(d.contains("shop::payment=debug"), "{}: {d}", p.name);
    }
    outage.end().unwrap();
    eprintln!("API server down for {:.1} s", down.elapsed().as_secs_f64());

    let start = Instant::now();
    s.apply(&payment_policy("raise", "trace")).unwrap();
    let waits = wait_directive(&pods, "shop::payment=trace", true, start, 60 * SEC).unwrap();
    eprintln!("server back -> policy applied -> in the pods: {waits:.3?} s");
    for w in &waits {
        assert!(*w <= 2.0, "{waits:?} s");
    }
    // The operator's status write got through too.
    wait_for(20 * SEC, "status of the new generation", || {
        let lp = s.policy("raise")?;
        let current = lp["status"]["observedGeneration"] == lp["metadata"]["generation"];
        Ok((current && lp["status"]["appliedPods"] == 3).then_some(()))
    })
    .unwrap();
}
