//! Scenario 4: the operator is killed right after it pushed a temporary raise; the
//! services fall back on time by themselves. Its own operator (the chart with
//! `watchNamespaces` set to the test's namespace: a Role there, no ClusterRole), since
//! this test kills it.

use logpolicy_e2e::operator::OperatorOptions;
use logpolicy_e2e::shop::{temporary_raise, three_shops, wait_known};
use logpolicy_e2e::{Operator, Scenario};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_fall_back_on_time_without_the_operator() {
    let _file = crate::one_file_at_a_time(module_path!());
    let s = Scenario::without_operator("down").await.unwrap();
    let mut operator = Operator::start(OperatorOptions {
        set: vec![(
            "watchNamespaces".to_owned(),
            format!("{{{}}}", s.namespace()),
        )],
        ..OperatorOptions::default()
    })
    .unwrap();
    let mut pods = s.pods(three_shops()).await.unwrap();
    wait_known(&pods).unwrap();
    temporary_raise(&s, &mut pods, || {
        operator.kill();
        eprintln!("operator killed");
    })
    .await
    .unwrap();
    assert!(
        operator.check_running().is_err(),
        "the operator was not killed"
    );
}
