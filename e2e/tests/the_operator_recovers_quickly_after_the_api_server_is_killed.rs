//! After kube-apiserver is killed with SIGKILL (a crash: no graceful close of its
//! connections, no goodbye to its watches), down for 20 s and started again on the
//! same address, a policy applied as soon as the server is ready reaches every pod
//! within 2 s, as after a graceful restart.
//!
//! Measured: 12 runs in a row, 6 of them with both cores busy (`yes > /dev/null`
//! twice): 0.19-0.36 s idle, 0.38-0.81 s loaded. Before the watches listed again at
//! once after a restarted server's `410 Gone`: 0.37-2.87 s. In one earlier CI run the
//! restarted server held the requests the operator sent while it was still starting
//! (its LogPolicy watch, a status write) for 10 s, and the policy arrived 8.7 s after
//! `/readyz`; since then a watch that stays silent for 1 s after an error is started
//! again with a fresh list (`operator/src/watches.rs`, `backed_off`, unit-tested on a
//! paused clock), so a held watch no longer waits for the server. The test prints how
//! many watches were started again that way (3-5 in most runs: the silence after the
//! outage, before the policy is applied).
//!
//! The only test of its file (files run one at a time): it kills the API server every test talks to. It runs
//! its own operator, logging at debug, so that a failure shows where the time went.

use std::time::Instant;

use logpolicy_e2e::operator::OperatorOptions;
use logpolicy_e2e::process::wait_for;
use logpolicy_e2e::shop::{payment_policy, three_shops, wait_directive, wait_known, SEC};
use logpolicy_e2e::{Operator, Scenario};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_applied_after_the_api_server_was_killed_reaches_the_pods_within_2_s() {
    let _file = crate::one_file_at_a_time(module_path!());
    let operator = Operator::start(OperatorOptions {
        set: vec![(
            "logLevel".to_owned(),
            r"info\,logpolicy_operator=debug".to_owned(),
        )],
        ..OperatorOptions::default()
    })
    .unwrap();
    let s = Scenario::with_operator("killed", &operator).await.unwrap();
    let pods = s.pods(three_shops()).await.unwrap();
    wait_known(&pods).unwrap();
    s.apply(&payment_policy("raise", "debug")).unwrap();
    wait_directive(&pods, "shop::payment=debug", true, Instant::now(), 10 * SEC).unwrap();

    let outage = s.cluster.api_server_crash().unwrap();
    let down = Instant::now();
    tokio::time::sleep(20 * SEC).await;
    for p in &pods {
        let d = p.directives().unwrap();
        assert!(d.contains("shop::payment=debug"), "{}: {d}", p.name);
    }
    outage.end().unwrap();
    // `end` returns once the server's /readyz says ok.
    let ready = Instant::now();
    eprintln!("API server down for {:.1} s", down.elapsed().as_secs_f64());

    s.apply(&payment_policy("raise", "trace")).unwrap();
    let waits = wait_directive(&pods, "shop::payment=trace", true, ready, 60 * SEC);
    let waits = waits.unwrap_or_else(|e| panic!("{e}\noperator:\n{}", operator.tail(80)));
    eprintln!("server ready -> policy applied -> in the pods: {waits:.3?} s");
    let restarts = operator.lines_containing("watch silent after an error");
    eprintln!("watches started again after silence: {}", restarts.len());
    for w in &waits {
        assert!(
            *w <= 2.0,
            "{waits:.3?} s from the server's readiness\noperator:\n{}",
            operator.tail(80)
        );
    }
    // The operator's status write got through too.
    wait_for(20 * SEC, "status of the new generation", || {
        let lp = s.policy("raise")?;
        let current = lp["status"]["observedGeneration"] == lp["metadata"]["generation"];
        Ok((current && lp["status"]["appliedPods"] == 3).then_some(()))
    })
    .unwrap();
}
