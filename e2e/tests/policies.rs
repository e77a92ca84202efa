//! Scenarios 2, 3, 5–10: LogPolicies applied with `kubectl` reach running demo
//! services through the real operator (one per test file, with the Helm chart's
//! RBAC), and what the services write changes, and changes back, on time.
//!
//! Every test has its own namespace and pods; they run in parallel.

use std::time::SystemTime;

use logpolicy_e2e::logs::{secs_between, Line};
use logpolicy_e2e::process::wait_for;
use logpolicy_e2e::scenario::{condition, wait_lines, wait_past};
use logpolicy_e2e::shop::{
    authorising_since, not_redacted, payment_debug, served, temporary_raise, three_shops,
    wait_known, wait_payment_debug, DEBUG_PAYMENTS, SEC,
};
use logpolicy_e2e::{PodSpec, Scenario};

/// Scenario 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raise_reaches_every_selected_pod_within_a_second() {
    let _file = crate::one_file_at_a_time(module_path!());
    let s = Scenario::new("raise").await.unwrap();
    let mut pods = s.pods(three_shops()).await.unwrap();
    wait_known(&pods).unwrap();
    let before = SystemTime::now();
    wait_past(&mut pods, before, 5 * SEC).unwrap();
    for p in &pods {
        assert_eq!(
            p.log.count(SystemTime::UNIX_EPOCH, before, payment_debug),
            0,
            "{}",
            p.name
        );
    }

    let t0 = SystemTime::now();
    s.apply(DEBUG_PAYMENTS).unwrap();
    let firsts = wait_payment_debug(&mut pods, t0, 10 * SEC).unwrap();
    let delays: Vec<f64> = firsts.iter().map(|t| secs_between(*t, t0)).collect();
    eprintln!("apply -> first shop::payment debug line per pod: {delays:.3?} s");
    for (p, d) in pods.iter().zip(&delays) {
        assert!(
            *d < 1.0,
            "{}: {d:.3} s from kubectl apply to debug lines",
            p.name
        );
    }

    // Nothing else changed: no debug from shop::db, access lines as before.
    let after = t0 + 2 * SEC;
    wait_past(&mut pods, after, 5 * SEC).unwrap();
    for p in &pods {
        assert_eq!(
            p.log.count(t0, after, |l| l.is("shop::db", "DEBUG")),
            0,
            "{}",
            p.name
        );
        assert_eq!(
            p.log.count(t0, after, |l| l.level == "TRACE"),
            0,
            "{}",
            p.name
        );
        assert!(p.log.count(t0, after, served) >= 10, "{}", p.name);
        assert!(
            p.log.count(t0 + SEC, after, payment_debug) >= 10,
            "{}",
            p.name
        );
        let directives = p.directives().unwrap();
        assert!(
            directives.contains("shop::payment=debug"),
            "{}: {directives}",
            p.name
        );
    }

    s.kubectl(&[
        "wait",
        "--for=condition=Applied",
        "lp/debug-payments",
        "--timeout=10s",
    ])
    .unwrap();
    let lp = s.policy("debug-payments").unwrap();
    assert_eq!(lp["status"]["matchedPods"], 3, "{lp}");
    assert_eq!(lp["status"]["appliedPods"], 3, "{lp}");
    let applied = condition(&lp, "Applied").unwrap();
    assert!(
        applied["message"].as_str().unwrap().contains("3/3"),
        "{applied}"
    );
    assert_eq!(condition(&lp, "Ready").unwrap()["status"], "True", "{lp}");
    let table = s.kubectl(&["get", "lp"]).unwrap();
    let row = table
        .lines()
        .find(|l| l.starts_with("debug-payments"))
        .unwrap();
    assert!(row.contains("3/3"), "{table}");
    // LEVELS: what the policy sets, as directives (it sets no default level).
    assert!(row.contains(" shop::payment=debug "), "{table}");

    // The operator's per-pod view agrees with what the pods hold.
    let operator = logpolicy_e2e::Operator::shared().unwrap();
    for p in &pods {
        let view = operator.pod_view(s.namespace(), &p.name).unwrap();
        assert_eq!(
            view["layers"],
            serde_json::json!(["debug-payments"]),
            "{view}"
        );
        assert_eq!(view["inSync"], true, "{view}");
        assert_eq!(view["uid"], p.uid.as_str(), "{view}");
        assert_eq!(view["version"], p.policy_version().unwrap(), "{view}");
    }
    // Everything it did, it was allowed to by the chart's RBAC.
    let forbidden = operator.forbidden_lines();
    assert!(
        forbidden.is_empty(),
        "the operator was refused: {forbidden:#?}"
    );
}

/// Scenario 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_temporary_raise_ends_on_time() {
    let _file = crate::one_file_at_a_time(module_path!());
    let s = Scenario::new("expiry").await.unwrap();
    let mut pods = s.pods(three_shops()).await.unwrap();
    wait_known(&pods).unwrap();
    temporary_raise(&s, &mut pods, || {}).await.unwrap();
    // The operator saw it expire, too.
    let lp = s
        .wait_condition("incident", "Expired", "True", 10 * SEC)
        .unwrap();
    assert_eq!(
        condition(&lp, "Applied").unwrap()["status"],
        "False",
        "{lp}"
    );
    // `kubectl get lp` says so in APPLIED, rather than a bare 0/3.
    let lp = wait_for(10 * SEC, "status.summary = expired", || {
        let lp = s.policy("incident")?;
        Ok((lp["status"]["summary"] == "expired").then_some(lp))
    })
    .unwrap();
    assert!(lp["status"]["expirationTime"].is_string(), "{lp}");
    let events = wait_for(10 * SEC, "an Expired Event", || {
        let events = s.events("incident")?;
        Ok(events
            .iter()
            .any(|e| e.starts_with("Expired:"))
            .then_some(events))
    })
    .unwrap();
    eprintln!("events: {events:?}");
}

/// Scenario 8: what the schema can say, `kubectl apply` refuses, naming the field;
/// what it cannot, the operator reports (`Ready=False` naming the field, an Event),
/// and the pods keep what they had.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_policies_are_refused_or_reported_naming_the_field() {
    let _file = crate::one_file_at_a_time(module_path!());
    let s = Scenario::new("invalid").await.unwrap();
    let pods = s.pods(vec![PodSpec::shop("shop-0")]).await.unwrap();
    wait_known(&pods).unwrap();
    let policy = |name: &str, spec: &str| {
        format!(
            "apiVersion: logpolicy.dev/v1alpha1\nkind: LogPolicy\nmetadata: {{name: {name}}}\nspec:\n{spec}"
        )
    };
    let refused = [
        (
            "bad-level",
            "  selector: {matchLabels: {app: shop}}\n  targets:\n  - {target: \"shop::payment\", level: verbose}\n",
            &["spec.targets", "level", "verbose"][..],
        ),
        (
            "bad-default",
            "  selector: {matchLabels: {app: shop}}\n  defaultLevel: loud\n",
            &["spec.defaultLevel", "loud"][..],
        ),
        (
            "keep-none",
            "  selector: {matchLabels: {app: shop}}\n  sampling:\n  - {target: \"shop::http\", keepOneIn: 0}\n",
            &["spec.sampling", "keepOneIn"][..],
        ),
        (
            "empty-selector",
            "  selector: {}\n  defaultLevel: debug\n",
            &["spec.selector"][..],
        ),
        (
            "bad-duration",
            "  selector: {matchLabels: {app: shop}}\n  defaultLevel: debug\n  duration: soon\n",
            &["spec.duration"][..],
        ),
        // Kubernetes 1.20 cannot name the fields of a `not` (1.25+ CEL could): the
        // message says the spec, and the CRD's doc of both fields says "not both".
        (
            "both-expiries",
            "  selector: {matchLabels: {app: shop}}\n  defaultLevel: debug\n  duration: 10m\n  expirationTime: \"2030-01-01T00:00:00Z\"\n",
            &["spec"][..],
        ),
    ];
    for (name, spec, words) in refused {
        let err = s.apply(&policy(name, spec)).unwrap_err().0;
        eprintln!("{name}: {err}");
        for w in words {
            assert!(
                err.contains(w),
                "{name}: the refusal does not name {w}: {err}"
            );
        }
        assert!(
            s.kubectl(&["get", "lp", name]).is_err(),
            "{name} was created"
        );
    }

    // Valid for the schema, not for the operator: an empty matchLabels selects
    // nothing (not everything, as a Kubernetes selector would).
    s.apply(&policy(
        "selects-nothing",
        "  selector: {matchLabels: {}}\n  targets:\n  - {target: \"shop::payment\", level: debug}\n",
    ))
    .unwrap();
    let lp = s
        .wait_condition("selects-nothing", "Ready", "False", 10 * SEC)
        .unwrap();
    let ready = condition(&lp, "Ready").unwrap();
    let message = ready["message"].as_str().unwrap();
    assert!(message.contains("spec.selector"), "{ready}");
    assert_eq!(
        lp["status"]["observedGeneration"], lp["metadata"]["generation"],
        "{lp}"
    );
    let events = wait_for(10 * SEC, "an InvalidSpec Event", || {
        let events = s.events("selects-nothing")?;
        Ok(events
            .iter()
            .any(|e| e.starts_with("InvalidSpec:") && e.contains("spec.selector"))
            .then_some(events))
    })
    .unwrap();
    eprintln!("Ready=False: {message}; events: {events:?}");
    let directives = pods[0].directives().unwrap();
    assert!(!directives.contains("shop::payment"), "{directives}");
}

/// Scenario 9: a push that the operator did not sign, or signed for another pod, sent
/// straight to a pod's admin endpoint, is refused, and the pod keeps its policy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_pushes_are_refused() {
    let _file = crate::one_file_at_a_time(module_path!());
    use logpolicy::policy::LayerSpec;
    use logpolicy::wire::{self, PodRef, PolicyDocument};

    let s = Scenario::new("forged").await.unwrap();
    let mut pods = s.pods(vec![PodSpec::shop("shop-0")]).await.unwrap();
    wait_known(&pods).unwrap();
    s.apply(DEBUG_PAYMENTS).unwrap();
    s.kubectl(&[
        "wait",
        "--for=condition=Applied",
        "lp/debug-payments",
        "--timeout=10s",
    ])
    .unwrap();
    let pod = &pods[0];
    let held = pod.policy().unwrap();
    assert!(held["effective"]["directives"]
        .as_str()
        .unwrap()
        .contains("shop::payment=debug"));

    let document = |uid: &str| {
        let mut doc = PolicyDocument::new(
            PodRef::new(&pod.namespace, &pod.name, uid),
            held["document"]["version"].as_u64().unwrap() + 1_000_000,
        );
        doc.issued_at = SystemTime::now();
        doc.layers = vec![LayerSpec::from_directives(
            "attacker/everything",
            1000,
            "trace".parse().unwrap(),
        )];
        doc.to_json()
    };
    let put = |body: &str, key: &wire::SigningKey| {
        let signature = wire::sign(body.as_bytes(), key);
        pod.admin_request(
            "PUT",
            "/logpolicy",
            &[
                ("content-type", "application/json"),
                (wire::SIGNATURE_HEADER, &signature),
            ],
            body,
        )
        .unwrap()
    };
    // Another key.
    let forger = wire::generate_signing_key().unwrap();
    let reply = put(&document(&pod.uid), &forger);
    assert_eq!(reply.status, 401, "{}", reply.body);
    // No signature at all.
    let reply = pod
        .admin_request("PUT", "/logpolicy", &[], &document(&pod.uid))
        .unwrap();
    assert_eq!(reply.status, 401, "{}", reply.body);
    // The operator's own key, for another pod (a replayed document).
    let operator_key = logpolicy_e2e::Operator::shared()
        .unwrap()
        .signing_key()
        .unwrap();
    let reply = put(&document("00000000-another-pod"), &operator_key);
    assert_eq!(reply.status, 403, "{}", reply.body);
    // A signed DELETE from the forger.
    let reply = pod
        .admin_request(
            "DELETE",
            "/logpolicy",
            &[(wire::SIGNATURE_HEADER, &wire::sign(b"", &forger))],
            "",
        )
        .unwrap();
    assert!(
        reply.status == 401 || reply.status == 400,
        "{}: {}",
        reply.status,
        reply.body
    );

    let after = pod.policy().unwrap();
    assert_eq!(after["document"], held["document"]);
    assert_eq!(after["effective"], held["effective"]);
    let t = SystemTime::now();
    wait_past(&mut pods, t + SEC, 5 * SEC).unwrap();
    assert_eq!(pods[0].log.count(t, t + SEC, |l| l.level == "TRACE"), 0);
}

/// Scenario 5: a restarted process holds nothing; the operator sees the new container
/// run in the pod's status and pushes the policy again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_pod_gets_its_policy_again_within_a_second() {
    let _file = crate::one_file_at_a_time(module_path!());
    let s = Scenario::new("restart").await.unwrap();
    let mut pods = s.pods(three_shops()).await.unwrap();
    wait_known(&pods).unwrap();
    let t0 = SystemTime::now();
    s.apply(DEBUG_PAYMENTS).unwrap();
    wait_lines(&mut pods, t0, 10 * SEC, "debug lines", payment_debug).unwrap();

    let killed = SystemTime::now();
    pods[1].restart().await.unwrap();
    let status_written = SystemTime::now();
    let (restarted, others) = {
        let (a, b) = pods.split_at_mut(1);
        let (r, c) = b.split_at_mut(1);
        (&mut r[0], [&mut a[0], &mut c[0]])
    };
    let first = wait_lines(
        std::slice::from_mut(restarted),
        status_written,
        10 * SEC,
        "debug lines from the restarted service",
        payment_debug,
    )
    .unwrap()[0];
    let delay = secs_between(first, status_written);
    eprintln!("restart (status written) -> debug lines again: {delay:.3} s");
    assert!(delay < 1.0, "{delay:.3} s");
    // The new process started at its baseline: it wrote access lines without debug
    // lines before the push.
    let baseline_lines = restarted.log.count(killed, first, served);
    let baseline_debug = restarted.log.count(killed, first, payment_debug);
    assert_eq!(baseline_debug, 0);
    eprintln!("the restarted service wrote {baseline_lines} access lines before the push");
    assert!(restarted.policy_version().unwrap() > 0);
    assert_eq!(restarted.restarts, 1);
    // The new process says the restart lost the policy (told by the operator's first
    // document), before it says the policy started applying again.
    let policy = format!("{}/debug-payments", s.namespace());
    let said = |msg: &'static str, ended: Option<&'static str>| {
        let policy = policy.clone();
        move |l: &Line| {
            l.is("logpolicy", "INFO")
                && l.msg == msg
                && l.json["policy"] == policy.as_str()
                && l.json["ended"].as_str() == ended
        }
    };
    let lost = restarted
        .log
        .first(killed, said("policy stopped applying", Some("restart")))
        .map(|l| l.ts)
        .expect("an `ended: restart` line from the restarted service");
    let again = restarted
        .log
        .first(killed, said("policy started applying", None))
        .map(|l| l.ts)
        .expect("a start line from the restarted service");
    assert!(lost <= again, "{lost:?} {again:?}");
    assert_eq!(
        restarted.log.count(
            killed,
            SystemTime::now(),
            said("policy stopped applying", Some("restart"))
        ),
        1
    );
    // The others were not disturbed.
    for p in others {
        p.refresh().unwrap();
        let n = p.log.count(killed, first, payment_debug);
        assert!(n > 0, "{}", p.name);
    }
}

/// Scenario 6: narrowing the selector reverts exactly the pods it no longer covers;
/// deleting the policy reverts the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn narrowing_or_deleting_reverts_exactly_the_pods_no_longer_covered() {
    let _file = crate::one_file_at_a_time(module_path!());
    let s = Scenario::new("narrow").await.unwrap();
    let mut pods = s
        .pods(vec![
            PodSpec::shop("front-0").label("tier", "front"),
            PodSpec::shop("front-1").label("tier", "front"),
            PodSpec::shop("back-0").label("tier", "back"),
        ])
        .await
        .unwrap();
    wait_known(&pods).unwrap();
    let t0 = SystemTime::now();
    s.apply(DEBUG_PAYMENTS).unwrap();
    wait_lines(&mut pods, t0, 10 * SEC, "debug lines", payment_debug).unwrap();

    let t1 = SystemTime::now();
    s.apply(&DEBUG_PAYMENTS.replace("{app: shop}", "{app: shop, tier: front}"))
        .unwrap();
    let settle = t1 + SEC;
    let end = settle + SEC;
    wait_past(&mut pods, end, 10 * SEC).unwrap();
    for p in &pods[..2] {
        assert!(
            p.log.count(settle, end, payment_debug) >= 10,
            "{} lost its policy",
            p.name
        );
    }
    let back = &pods[2];
    assert_eq!(
        back.log.count(settle, end, payment_debug),
        0,
        "back-0 kept debug"
    );
    assert!(back.log.count(settle, end, served) >= 10);
    let last = back.log.last(payment_debug).unwrap().ts;
    eprintln!(
        "narrowed -> back-0 reverted after {:.3} s",
        secs_between(last, t1)
    );
    assert!(!back.directives().unwrap().contains("shop::payment"));
    let lp = s
        .wait_condition("debug-payments", "Applied", "True", 10 * SEC)
        .unwrap();
    assert_eq!(lp["status"]["matchedPods"], 2, "{lp}");

    let t2 = SystemTime::now();
    s.kubectl(&["delete", "lp", "debug-payments"]).unwrap();
    let settle = t2 + SEC;
    let end = settle + SEC;
    wait_past(&mut pods, end, 10 * SEC).unwrap();
    for p in &pods {
        assert_eq!(
            p.log.count(settle, end, payment_debug),
            0,
            "{} kept debug",
            p.name
        );
        assert!(p.log.count(settle, end, served) >= 10, "{}", p.name);
        assert!(
            !p.directives().unwrap().contains("shop::payment"),
            "{}",
            p.name
        );
    }
    let lasts: Vec<f64> = pods[..2]
        .iter()
        .map(|p| secs_between(p.log.last(payment_debug).unwrap().ts, t2))
        .collect();
    eprintln!("deleted -> front pods reverted after {lasts:.3?} s");
}

/// Scenario 7: two policies on the same pods: the higher priority wins per target,
/// the lower still governs the targets the higher does not name; deleting the higher
/// restores the lower.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_higher_priority_wins_per_target_and_removing_it_restores_the_lower() {
    let _file = crate::one_file_at_a_time(module_path!());
    let s = Scenario::new("priority").await.unwrap();
    let mut pods = s
        .pods(vec![PodSpec::shop("shop-0"), PodSpec::shop("shop-1")])
        .await
        .unwrap();
    wait_known(&pods).unwrap();
    let db_debug = |l: &logpolicy_e2e::logs::Line| l.is("shop::db", "DEBUG");
    s.apply(
        r#"
apiVersion: logpolicy.dev/v1alpha1
kind: LogPolicy
metadata: {name: team-debug}
spec:
  selector: {matchLabels: {app: shop}}
  priority: 0
  targets:
  - {target: "shop::payment", level: debug}
  - {target: "shop::db", level: debug}
---
apiVersion: logpolicy.dev/v1alpha1
kind: LogPolicy
metadata: {name: quiet-payments}
spec:
  selector: {matchLabels: {app: shop}}
  priority: 10
  targets:
  - {target: "shop::payment", level: warn}
"#,
    )
    .unwrap();
    for name in ["team-debug", "quiet-payments"] {
        s.wait_condition(name, "Applied", "True", 10 * SEC).unwrap();
    }
    let t1 = SystemTime::now();
    let end = t1 + 2 * SEC;
    wait_past(&mut pods, end, 10 * SEC).unwrap();
    for p in &pods {
        assert_eq!(p.log.count(t1, end, payment_debug), 0, "{}", p.name);
        assert!(p.log.count(t1, end, db_debug) >= 20, "{}", p.name);
        // The payment errors are still written (warn lets them through).
        assert!(
            p.log.count(t1, end, |l| l.is("shop::payment", "ERROR")) >= 1,
            "{}",
            p.name
        );
        let d = p.directives().unwrap();
        assert!(
            d.contains("shop::payment=warn") && d.contains("shop::db=debug"),
            "{d}"
        );
    }

    let t2 = SystemTime::now();
    s.kubectl(&["delete", "lp", "quiet-payments"]).unwrap();
    let firsts = wait_lines(
        &mut pods,
        t2,
        10 * SEC,
        "payment debug lines again",
        payment_debug,
    )
    .unwrap();
    let delays: Vec<f64> = firsts.iter().map(|t| secs_between(*t, t2)).collect();
    eprintln!("higher priority deleted -> lower back in force: {delays:.3?} s");
    for d in &delays {
        assert!(*d < 1.0, "{d:.3} s");
    }
    let end = t2 + 2 * SEC;
    wait_past(&mut pods, end, 10 * SEC).unwrap();
    for p in &pods {
        assert!(p.log.count(t2 + SEC, end, db_debug) >= 10, "{}", p.name);
    }
}

/// Scenario 10: `keepOneIn: 100` on the access lines with `alwaysKeep: warn`: a
/// service under load writes one access line in a hundred, and every error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_keeps_one_access_line_in_a_hundred_and_every_error() {
    let _file = crate::one_file_at_a_time(module_path!());
    let s = Scenario::new("sampling").await.unwrap();
    let mut pods = s
        .pods(vec![PodSpec::shop("shop-0").self_load(0)])
        .await
        .unwrap();
    wait_known(&pods).unwrap();
    s.apply(
        r#"
apiVersion: logpolicy.dev/v1alpha1
kind: LogPolicy
metadata: {name: sample-access}
spec:
  selector: {matchLabels: {app: shop}}
  sampling:
  - {target: "shop::http", keepOneIn: 100}
  alwaysKeep: warn
"#,
    )
    .unwrap();
    s.kubectl(&[
        "wait",
        "--for=condition=Applied",
        "lp/sample-access",
        "--timeout=10s",
    ])
    .unwrap();
    let pod = &mut pods[0];
    pod.refresh().unwrap();
    let start = SystemTime::now();
    let requests = 3000u32;
    let mut failed = 0u32;
    for _ in 0..requests {
        let reply = logpolicy_e2e::net::http(pod.shop, "GET", "/checkout", &[], "").unwrap();
        match reply.status {
            200 => {}
            500 => failed += 1,
            other => panic!("unexpected status {other}"),
        }
    }
    let end = SystemTime::now() + SEC;
    // Request 3000 fails (every 20th does) and its error line is the last line the
    // load makes: once it is read, everything before it was written.
    assert_eq!(requests % 20, 0);
    wait_for(10 * SEC, "the last request's error line", || {
        pod.refresh()?;
        let errors = pod
            .log
            .count(start, SystemTime::now(), |l| l.is("shop::payment", "ERROR"));
        Ok((errors as u32 >= failed).then_some(()))
    })
    .unwrap();
    pod.refresh().unwrap();
    let access = pod.log.count(start, end, served);
    let errors = pod
        .log
        .count(start, end, |l| l.is("shop::payment", "ERROR"));
    let warns = pod.log.count(start, end, |l| l.is("shop::db", "WARN"));
    eprintln!(
        "{requests} requests, {failed} failed: {access} access lines, {errors} error lines, {warns} warn lines"
    );
    assert_eq!(failed, requests / 20);
    assert_eq!(errors as u32, failed, "every error is written");
    assert_eq!(warns as u32, requests / 7, "every warning is written");
    let expected = requests / 100;
    assert!(
        (expected - 1..=expected + 1).contains(&(access as u32)),
        "{access} access lines for {requests} requests, expected ~{expected}"
    );
}

/// Raising a service to trace writes the lines that carry credentials with their values
/// redacted, and a policy can add a name of its own (`redact`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raise_to_trace_writes_credentials_redacted() {
    let _file = crate::one_file_at_a_time(module_path!());
    let s = Scenario::new("redact").await.unwrap();
    let mut pods = s.pods(three_shops()).await.unwrap();
    wait_known(&pods).unwrap();
    let t0 = SystemTime::now();
    s.apply(
        r#"
apiVersion: logpolicy.dev/v1alpha1
kind: LogPolicy
metadata: {name: trace-shop}
spec:
  selector: {matchLabels: {app: shop}}
  targets:
  - {target: "shop", level: trace}
  redact: [amount_cents]
"#,
    )
    .unwrap();
    wait_payment_debug(&mut pods, t0, 10 * SEC).unwrap();
    wait_past(&mut pods, SystemTime::now() + SEC, 5 * SEC).unwrap();
    for p in &pods {
        let lines = authorising_since(p, t0);
        assert!(!lines.is_empty(), "{}", p.name);
        for l in &lines {
            assert_eq!(
                not_redacted(l),
                Vec::<String>::new(),
                "{}: {}",
                p.name,
                l.json
            );
            assert_eq!(l.json["card"], "4242…", "{}: {}", p.name, l.json);
        }
        // Trace lines too, and no value of either credential anywhere in the log.
        assert!(
            p.log.count(t0, SystemTime::now(), |l| l.level == "TRACE") > 0,
            "{}",
            p.name
        );
        for l in p.log.lines() {
            let text = l.json.to_string();
            assert!(
                !text.contains("tok_visa_4242") && !text.contains("sk_live_51H"),
                "{}: {text}",
                p.name
            );
        }
        let metrics = p.admin_request("GET", "/metrics", &[], "").unwrap().body;
        let redacted: f64 = metrics
            .lines()
            .find_map(|l| l.strip_prefix(r#"logpolicy_redactions_total{reason="name"} "#))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0);
        assert!(redacted >= 3.0, "{}: {metrics}", p.name);
    }
}
