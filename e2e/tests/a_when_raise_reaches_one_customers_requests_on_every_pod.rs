//! `kubectl apply` of a LogPolicy with `when: {spanField: user_id, equals: ["42"]}`
//! raising `shop::payment` to debug, on three shop pods serving customers 40..49 in
//! turn: on every pod, every request of customer 42 gets its debug line, and no other
//! customer's request gets one. On the real API server, with the real operator.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers: a failure is a test failure

use std::collections::BTreeSet;
use std::time::SystemTime;

use logpolicy_e2e::logs::Line;
use logpolicy_e2e::scenario::{wait_lines, wait_past};
use logpolicy_e2e::shop::{payment_debug, served, three_shops, wait_known, SEC};
use logpolicy_e2e::Scenario;

const POLICY: &str = r#"
apiVersion: logpolicy.dev/v1alpha1
kind: LogPolicy
metadata: {name: customer-42}
spec:
  selector: {matchLabels: {app: shop}}
  reason: "INC-4300: customer 42's payments fail"
  duration: 2m
  when: {spanField: user_id, equals: ["42"]}
  targets:
  - {target: "shop::payment", level: debug}
"#;

fn user(l: &Line) -> Option<u64> {
    l.json["span"]["user_id"].as_u64()
}

fn request(l: &Line) -> Option<u64> {
    l.json["span"]["id"].as_u64()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_when_raise_reaches_one_customers_requests_on_every_pod() {
    let _file = crate::one_file_at_a_time(module_path!());
    let s = Scenario::new("when").await.unwrap();
    let specs: Vec<_> = three_shops().into_iter().map(|p| p.self_load(50)).collect();
    let mut pods = s.pods(specs).await.unwrap();
    wait_known(&pods).unwrap();

    let t0 = SystemTime::now();
    s.apply(POLICY).unwrap();
    let firsts = wait_lines(
        &mut pods,
        t0,
        10 * SEC,
        "customer 42's debug lines",
        payment_debug,
    )
    .unwrap();
    // From a second after the last pod started, for three seconds.
    let from = firsts.iter().max().copied().unwrap() + SEC;
    let to = from + 3 * SEC;
    wait_past(&mut pods, to + SEC, 20 * SEC).unwrap();

    for p in &mut pods {
        p.refresh().unwrap();
        let window: Vec<&Line> = p
            .log
            .lines()
            .iter()
            .filter(|l| l.ts >= from && l.ts < to)
            .collect();
        let debug: Vec<&Line> = window
            .iter()
            .copied()
            .filter(|l| payment_debug(l))
            .collect();
        let others: Vec<&&Line> = debug.iter().filter(|l| user(l) != Some(42)).collect();
        assert!(
            others.is_empty(),
            "{}: debug lines of other customers: {:?}",
            p.name,
            others.iter().map(|l| &l.json).take(3).collect::<Vec<_>>()
        );
        let raised: BTreeSet<u64> = debug.iter().filter_map(|l| request(l)).collect();
        let served_42: BTreeSet<u64> = window
            .iter()
            .filter(|l| served(l) && user(l) == Some(42))
            .filter_map(|l| request(l))
            .collect();
        let served_all = window.iter().filter(|l| served(l)).count();
        assert!(
            served_42.len() >= 5 && served_all >= 5 * served_42.len(),
            "{}: {} requests of customer 42 among {served_all} served",
            p.name,
            served_42.len()
        );
        let missing: Vec<&u64> = served_42.difference(&raised).collect();
        assert!(
            missing.is_empty(),
            "{}: requests of customer 42 without their debug line: {missing:?}",
            p.name
        );
        eprintln!(
            "{}: {} of customer 42's requests at debug, {} requests served, no other customer's debug line",
            p.name,
            served_42.len(),
            served_all
        );
    }
}
