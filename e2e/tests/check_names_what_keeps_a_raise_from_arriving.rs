//! `kubectl logpolicy check` against the real API server, the real operator (run with
//! the chart's RBAC, keeping its Lease as a heartbeat without `--leader-election`) and
//! real demo services: every check `ok` and exit 0 on a healthy namespace; a pod that
//! trusts another key than the operator's is a `FAIL` line naming the pod; the operator
//! stopped is a `FAIL` naming its Lease; the trust ConfigMap deleted (with the operator
//! stopped, so that nothing restores it) is a `FAIL` naming it. Each failure exits 8.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use logpolicy::wire::{encode_public_key, key_id, SigningKey};
use logpolicy_e2e::plugin::{kubectl_logpolicy, PluginRun};
use logpolicy_e2e::process::wait_for;
use logpolicy_e2e::{DemoPod, Operator, PodSpec, Scenario};

/// The exit code of a failed check (`exit::CHECK_FAILED`).
const CHECK_FAILED: i32 = 8;

fn check(s: &Scenario, operator: &Operator) -> PluginRun {
    kubectl_logpolicy(s.namespace(), Some(&operator.namespace), &["check"]).unwrap()
}

/// The line of `run` for `check` whose subject starts with `subject`.
fn line<'a>(run: &'a PluginRun, check: &str, subject: &str) -> Option<&'a str> {
    run.stdout.lines().find(|l| {
        let after_outcome = l.split_once(' ').map_or("", |(_, r)| r.trim_start());
        after_outcome
            .split_once(' ')
            .is_some_and(|(c, rest)| c == check && rest.trim_start().starts_with(subject))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_names_what_keeps_a_raise_from_arriving() {
    let _file = crate::one_file_at_a_time(module_path!());
    let s = Scenario::without_operator("check").await.unwrap();
    let mut operator = Operator::watching(s.namespace()).unwrap();
    let ns = s.namespace().to_owned();
    let lease = format!("{}/logpolicy-operator", operator.namespace);
    let ours = key_id(&operator.signing_key().unwrap().verifying_key()).to_string();
    let _pods = s
        .pods(vec![PodSpec::shop("shop-0"), PodSpec::shop("shop-1")])
        .await
        .unwrap();

    // Without --leader-election the operator keeps its Lease as a heartbeat, naming the
    // key it signs with.
    let annotation = wait_for(Duration::from_secs(10), "the operator's Lease", || {
        let key = s.cluster.kubectl(&[
            "get",
            "lease",
            "logpolicy-operator",
            "-n",
            &operator.namespace,
            "-o",
            r"jsonpath={.metadata.annotations.logpolicy\.dev/signing-key-id}",
        ])?;
        Ok((!key.trim().is_empty()).then(|| key.trim().to_owned()))
    })
    .unwrap();
    assert_eq!(annotation, ours);

    // Healthy: every check ok.
    let run = check(&s, &operator);
    eprintln!("e2e: healthy: {run}");
    run.expect_code(0).unwrap();
    assert!(run.stdout.lines().all(|l| l.starts_with("ok ")), "{run}");
    let operator_line = line(&run, "operator", &lease).unwrap_or_else(|| panic!("{run}"));
    assert!(
        operator_line.contains("running and leading") && operator_line.contains(&ours),
        "{run}"
    );
    let trust = line(&run, "trust-configmap", &format!("{ns}/logpolicy-trust"));
    assert!(trust.is_some_and(|l| l.contains(&ours)), "{run}");
    let pods = line(&run, "pod", &format!("{ns} (")).unwrap_or_else(|| panic!("{run}"));
    assert!(
        pods.contains("(2/2 pods)") && pods.contains("reachable"),
        "{run}"
    );
    let crd = line(&run, "crd", "logpolicies.logpolicy.dev").unwrap_or_else(|| panic!("{run}"));
    assert!(crd.contains("v1beta1"), "{run}");

    // A pod that trusts another key: the operator's pushes are refused there.
    let other = SigningKey::from_bytes(&[9; 32]).verifying_key();
    let other_keys = s.dir().join("other-trusted-keys");
    std::fs::write(&other_keys, format!("{}\n", encode_public_key(&other))).unwrap();
    let mut stranger = DemoPod::start(
        &s.client,
        s.dir(),
        &ns,
        PodSpec::shop("shop-stranger"),
        &other_keys,
    )
    .await
    .unwrap();
    let run = check(&s, &operator);
    run.expect_code(CHECK_FAILED).unwrap();
    let fail = line(&run, "pod", &format!("{ns}/shop-stranger")).unwrap_or_else(|| panic!("{run}"));
    assert!(
        fail.starts_with("FAIL")
            && fail.contains(&format!("does not trust the operator's key {ours}"))
            && fail.contains(&key_id(&other).to_string()),
        "{run}"
    );
    assert!(
        line(&run, "pod", &format!("{ns} (2/3 pods)")).is_some(),
        "{run}"
    );
    assert!(run.stderr.contains("1 of 6 checks failed"), "{run}");
    stranger.kill();
    s.kubectl(&["delete", "pod", "shop-stranger", "--wait=false"])
        .unwrap();

    // The operator stopped (no goodbye): its Lease is no longer renewed.
    operator.kill();
    let run = wait_for(
        Duration::from_secs(40),
        "check to see the operator down",
        || {
            let run = check(&s, &operator);
            Ok((run.code == CHECK_FAILED).then_some(run))
        },
    )
    .unwrap();
    eprintln!("e2e: operator stopped: {run}");
    let down = line(&run, "operator", &lease).unwrap_or_else(|| panic!("{run}"));
    assert!(
        down.starts_with("FAIL") && down.contains("not running") && down.contains("get pods"),
        "{run}"
    );

    // The trust ConfigMap deleted, and no operator to restore it.
    s.kubectl(&["delete", "configmap", "logpolicy-trust"])
        .unwrap();
    let run = check(&s, &operator);
    run.expect_code(CHECK_FAILED).unwrap();
    let missing = line(&run, "trust-configmap", &format!("{ns}/logpolicy-trust"))
        .unwrap_or_else(|| panic!("{run}"));
    assert!(
        missing.starts_with("FAIL") && missing.contains("missing"),
        "{run}"
    );
}
