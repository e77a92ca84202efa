//! A LogPolicy with a `reason` and `duration: 5s`: each selected pod writes one line
//! from target `logpolicy` when the policy starts applying there, naming the policy, its
//! reason, what it changes and its expiry, and one when it expires; `kubectl get lp -o
//! wide` shows the reason.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers: a failure is a test failure

use std::time::{Duration, SystemTime};

use logpolicy::clock::parse_rfc3339;
use logpolicy_e2e::logs::{secs_between, Line};
use logpolicy_e2e::scenario::wait_lines;
use logpolicy_e2e::shop::{wait_known, SEC};
use logpolicy_e2e::{PodSpec, Scenario};

const REASON: &str = "INC-4211: card declines at checkout";

const POLICY: &str = r#"
apiVersion: logpolicy.dev/v1alpha1
kind: LogPolicy
metadata: {name: why}
spec:
  selector: {matchLabels: {app: shop}}
  reason: "INC-4211: card declines at checkout"
  duration: 5s
  targets:
  - {target: "shop::payment", level: debug}
"#;

fn is_policy_line(l: &Line, policy: &str, msg: &str) -> bool {
    l.target == "logpolicy"
        && l.level == "INFO"
        && l.msg == msg
        && l.json["policy"] == policy
        && l.json["reason"] == REASON
        && l.json["changes"] == "shop::payment=debug"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_pod_says_why_a_policy_started_and_when_it_stopped() {
    let _file = crate::one_file_at_a_time(module_path!());
    let s = Scenario::new("why").await.unwrap();
    let mut pods = s
        .pods(vec![PodSpec::shop("shop-0"), PodSpec::shop("shop-1")])
        .await
        .unwrap();
    wait_known(&pods).unwrap();
    let policy = format!("{}/why", s.namespace());

    let t0 = SystemTime::now();
    s.apply(POLICY).unwrap();
    let started = wait_lines(&mut pods, t0, 10 * SEC, "the start lines", |l| {
        is_policy_line(l, &policy, "policy started applying")
    })
    .unwrap();
    let lp = s.policy("why").unwrap();
    let expiration = lp["status"]["expirationTime"].as_str().unwrap().to_owned();
    let expiration = parse_rfc3339(&expiration).unwrap();

    let ended = wait_lines(&mut pods, t0, 15 * SEC, "the end lines", |l| {
        is_policy_line(l, &policy, "policy stopped applying") && l.json["ended"] == "expired"
    })
    .unwrap();
    for ((p, start), end) in pods.iter().zip(&started).zip(&ended) {
        let lasted = secs_between(*end, *start);
        eprintln!("{}: applied for {lasted:.3} s", p.name);
        assert!((4.0..6.5).contains(&lasted), "{}: {lasted:.3} s", p.name);
        // The end comes at the expiry the operator computed, on the pod's clock.
        let off = secs_between(*end, expiration).abs();
        assert!(off < 1.0, "{}: ended {off:.3} s from the expiry", p.name);
    }

    // One line each, however many events the pods wrote meanwhile; the expiry in them is
    // the policy's.
    let after = SystemTime::now() + Duration::from_secs(1);
    logpolicy_e2e::scenario::wait_past(&mut pods, after, 5 * SEC).unwrap();
    for p in &pods {
        for msg in ["policy started applying", "policy stopped applying"] {
            let lines: Vec<&Line> = p
                .log
                .lines()
                .iter()
                .filter(|l| l.ts >= t0 && is_policy_line(l, &policy, msg))
                .collect();
            assert_eq!(lines.len(), 1, "{}: {msg}: {lines:#?}", p.name);
            let expires = parse_rfc3339(lines[0].json["expires"].as_str().unwrap()).unwrap();
            let off = secs_between(expires, expiration).abs();
            assert!(off < 1.0, "{}: {msg}: expires {off:.3} s off", p.name);
        }
    }

    // The reason in `kubectl get lp -o wide`, and only there.
    let wide = s.kubectl(&["get", "lp", "-o", "wide"]).unwrap();
    let header = wide.lines().next().unwrap();
    assert!(header.split_whitespace().any(|c| c == "REASON"), "{wide}");
    let row = wide.lines().find(|l| l.starts_with("why ")).unwrap();
    assert!(row.ends_with(REASON), "{wide}");
    let narrow = s.kubectl(&["get", "lp"]).unwrap();
    assert!(
        !narrow.contains("REASON") && !narrow.contains(REASON),
        "{narrow}"
    );
}
