//! Scenarios 2, 3, 5–10: LogPolicies applied with `kubectl` reach running demo
//! services through the real operator (one per test process, with the Helm chart's
//! RBAC), and what the services write changes, and changes back, on time.
//!
//! Every test has its own namespace and pods; they run in parallel.

use std::time::SystemTime;

use logpolicy_e2e::logs::secs_between;
use logpolicy_e2e::process::wait_for;
use logpolicy_e2e::scenario::{condition, wait_lines, wait_past};
use logpolicy_e2e::shop::{payment_debug, served, temporary_raise, three_shops, wait_known, SEC};
use logpolicy_e2e::{PodSpec, Scenario};

const DEBUG_PAYMENTS: &str = r#"
apiVersion: logpolicy.dev/v1alpha1
kind: LogPolicy
metadata: {name: debug-payments}
spec:
  selector: {matchLabels: {app: shop}}
  targets:
  - {target: "shop::payment", level: debug}
"#;

/// Scenario 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raise_reaches_every_selected_pod_within_a_second() {
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
    let firsts = wait_lines(
        &mut pods,
        t0,
        10 * SEC,
        "shop::payment debug lines",
        payment_debug,
    )
    .unwrap();
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
}

/// Scenario 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_temporary_raise_ends_on_time() {
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
    use logpolicy::wire::{self, PodRef, PolicyDocument, WireLayer};

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
        doc.layers = vec![WireLayer::from_directives(
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
