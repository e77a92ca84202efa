//! Two replicas with a leader Lease (the chart's `replicaCount: 2` turns
//! `--leader-election` on): the leader pushes and the standby does nothing; when the
//! leader dies without a goodbye (SIGKILL, its Lease left to expire), the standby takes
//! the Lease and pushes the next change. Both run as the chart's ServiceAccount with
//! its namespaced RBAC, so the Lease permissions are checked too.

use std::time::{Duration, Instant};

use logpolicy_e2e::operator::OperatorOptions;
use logpolicy_e2e::process::wait_for;
use logpolicy_e2e::shop::{three_shops, wait_known};
use logpolicy_e2e::{Operator, Scenario};

/// The `leader` gauge of a replica's `/metrics` (1 leads, 0 stands by).
fn leader_gauge(metrics: &str) -> Option<u64> {
    metrics
        .lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| {
            let (name, value) = l.split_once(' ')?;
            name.ends_with("leader")
                .then(|| value.trim().parse().ok())?
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standby_takes_over_when_the_leader_dies() {
    let _file = crate::one_file_at_a_time(module_path!());
    let s = Scenario::without_operator("lease").await.unwrap();
    let mut first = Operator::start(OperatorOptions {
        set: vec![
            ("replicaCount".to_owned(), "2".to_owned()),
            (
                "watchNamespaces".to_owned(),
                format!("{{{}}}", s.namespace()),
            ),
        ],
        ..OperatorOptions::default()
    })
    .unwrap();
    // The first replica created the Lease; the second stands by.
    wait_for(Duration::from_secs(10), "the first replica's Lease", || {
        Ok((first.lease_holder()? == first.pod_name).then_some(()))
    })
    .unwrap();
    let mut second = first.replica("1").unwrap();
    assert_eq!(leader_gauge(&first.metrics().unwrap()), Some(1));
    assert_eq!(
        leader_gauge(&second.metrics().unwrap()),
        Some(0),
        "{}",
        second.tail(20)
    );

    let pods = s.pods(three_shops()).await.unwrap();
    wait_known(&pods).unwrap();
    s.apply(
        r#"
apiVersion: logpolicy.dev/v1alpha1
kind: LogPolicy
metadata: {name: raise}
spec:
  selector: {matchLabels: {app: shop}}
  targets:
  - {target: "shop::payment", level: debug}
"#,
    )
    .unwrap();
    let holds = |want: bool| {
        wait_for(
            Duration::from_secs(5),
            if want {
                "every pod at shop::payment=debug"
            } else {
                "every pod back to its baseline"
            },
            || {
                for p in &pods {
                    if p.directives()?.contains("shop::payment=debug") != want {
                        return Ok(None);
                    }
                }
                Ok(Some(()))
            },
        )
    };
    holds(true).unwrap();

    // The leader dies without releasing the Lease: the standby takes it once it has
    // expired (15 s), and pushes the next change.
    first.kill();
    let killed = Instant::now();
    wait_for(Duration::from_secs(40), "the standby's Lease", || {
        second.check_running()?;
        Ok((first.lease_holder()? == second.pod_name).then_some(()))
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", second.tail(30)));
    let took_over = killed.elapsed();
    eprintln!(
        "e2e: the standby took the Lease {:.1} s after the leader was killed",
        took_over.as_secs_f64()
    );
    wait_for(Duration::from_secs(5), "the new leader's gauge", || {
        Ok((leader_gauge(&second.metrics()?) == Some(1)).then_some(()))
    })
    .unwrap();
    s.kubectl(&["delete", "lp", "raise"]).unwrap();
    holds(false).unwrap_or_else(|e| panic!("{e}\n{}", second.tail(30)));
}
