//! After kube-apiserver is killed with SIGKILL (a crash: no graceful close of its
//! connections, no goodbye to its watches), down for 20 s and started again on the
//! same address, a policy applied as soon as the server is ready reaches every pod
//! within 12 s; usually within 2 s, as after a graceful restart (8 runs: 0.17-0.33 s).
//!
//! Not yet asserted at 2 s: in one run of nine (a CI run, both cores busy), requests
//! the operator sent while the restarted server was still starting (its LogPolicy
//! watch, a status write) were held by the server for 10 s and answered then (the
//! watch with `410 Gone`), so the policy arrived 8.7 s after `/readyz`. Requests sent
//! after readiness are not held. The watches now start again (a fresh list) when they
//! stay silent after an error (`operator/src/watches.rs`, `backed_off`), so a held
//! watch no longer waits for the server; 6 runs since, 3 with both cores busy:
//! 0.21-0.63 s, the hold not seen again. Tighten to 2 s once runs under load show it.
//!
//! The only test of its process: it kills the API server every test talks to. It runs
//! its own operator, logging at debug, so that a failure shows where the time went.

use std::time::Instant;

use logpolicy_e2e::operator::OperatorOptions;
use logpolicy_e2e::process::wait_for;
use logpolicy_e2e::shop::{payment_policy, three_shops, wait_directive, wait_known, SEC};
use logpolicy_e2e::{Operator, Scenario};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_applied_after_the_api_server_was_killed_reaches_the_pods_within_12_s() {
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
    for w in &waits {
        assert!(
            *w <= 12.0,
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
