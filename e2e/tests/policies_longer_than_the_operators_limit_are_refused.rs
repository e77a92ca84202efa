//! An operator started with the chart's `maxDuration=1m` refuses a LogPolicy without an
//! expiry, or with a longer one (`Ready=False`, reason `Invalid`, naming `spec.duration`,
//! the limit and how to lift it; `Stalled=True`, which kstatus reads as failed; `READY`
//! False in `kubectl get lp`; an `InvalidSpec` Event) and pushes nothing of it; a
//! policy within the limit applies, and so does one without an expiry that can only make
//! pods write less (sampling, a byte budget: the limit is for raises).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers: a failure is a test failure

use logpolicy_e2e::operator::OperatorOptions;
use logpolicy_e2e::process::wait_for;
use logpolicy_e2e::scenario::condition;
use logpolicy_e2e::shop::{wait_known, SEC};
use logpolicy_e2e::{Operator, PodSpec, Scenario};

fn policy(name: &str, target: &str, expiry: &str) -> String {
    format!(
        "apiVersion: logpolicy.dev/v1alpha1\nkind: LogPolicy\nmetadata: {{name: {name}}}\nspec:\n  selector: {{matchLabels: {{app: shop}}}}\n  targets:\n  - {{target: \"{target}\", level: trace}}\n{expiry}"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policies_longer_than_the_operators_limit_are_refused() {
    let _file = crate::one_file_at_a_time(module_path!());
    let operator = Operator::start(OperatorOptions {
        set: vec![("maxDuration".into(), "1m".into())],
        ..OperatorOptions::default()
    })
    .unwrap();
    let s = Scenario::with_operator("max-duration", &operator)
        .await
        .unwrap();
    let pods = s.pods(vec![PodSpec::shop("shop-0")]).await.unwrap();
    wait_known(&pods).unwrap();

    for (name, target, expiry, field, says) in [
        ("forever", "shop::db", "", "spec.duration", "has no expiry"),
        (
            "too-long",
            "shop::http",
            "  duration: 2h\n",
            "spec.duration",
            "2h is longer than the 1m",
        ),
        (
            "too-far",
            "shop::cart",
            "  expirationTime: \"2099-01-01T00:00:00Z\"\n",
            "spec.expirationTime",
            "more than 1m from now",
        ),
    ] {
        s.apply(&policy(name, target, expiry)).unwrap();
        let lp = s.wait_condition(name, "Ready", "False", 10 * SEC).unwrap();
        let ready = condition(&lp, "Ready").unwrap();
        assert_eq!(ready["reason"], "Invalid", "{lp}");
        let message = ready["message"].as_str().unwrap();
        eprintln!("{name}: {message}");
        assert!(message.starts_with(&format!("{field}: ")), "{message}");
        for part in [
            says,
            "--max-duration",
            "maxDuration",
            "(nothing is applied)",
        ] {
            assert!(message.contains(part), "{part:?} in {message}");
        }
        wait_for(10 * SEC, "an InvalidSpec Event", || {
            let events = s.events(name)?;
            Ok(events
                .iter()
                .any(|e| e.starts_with("InvalidSpec:") && e.contains(field))
                .then_some(()))
        })
        .unwrap();
        assert_eq!(lp["status"]["appliedPods"].as_u64().unwrap_or(0), 0, "{lp}");
        // What kstatus (kubectl wait, Flux, Argo CD) reads as failed, not in progress.
        let stalled = condition(&lp, "Stalled").unwrap();
        assert_eq!(
            (&stalled["status"], &stalled["reason"]),
            (&"True".into(), &"Invalid".into()),
            "{lp}"
        );
        assert_eq!(stalled["message"], ready["message"], "{lp}");
        assert_eq!(
            condition(&lp, "Reconciling").unwrap()["status"],
            "False",
            "{lp}"
        );
        let (ready, table) = s.ready_column(name).unwrap();
        assert_eq!(ready, "False", "READY: {table}");
    }

    // Within the limit: applied; the refused ones never reached the pod.
    s.apply(&policy("short", "shop::payment", "  duration: 45s\n"))
        .unwrap();
    let lp = s
        .wait_condition("short", "Applied", "True", 10 * SEC)
        .unwrap();
    assert_eq!(
        condition(&lp, "Reconciling").unwrap()["reason"],
        "AllPodsApplied",
        "{lp}"
    );
    assert_eq!(
        condition(&lp, "Stalled").unwrap()["status"],
        "False",
        "{lp}"
    );
    let (ready, table) = s.ready_column("short").unwrap();
    assert_eq!(ready, "True", "READY: {table}");
    let directives = pods[0].directives().unwrap();
    assert!(directives.contains("shop::payment=trace"), "{directives}");
    for refused in ["shop::db", "shop::http", "shop::cart"] {
        assert!(!directives.contains(refused), "{refused} in {directives}");
    }

    // A standing saving (no expiry, no level set): applied despite the limit.
    s.apply(
        "apiVersion: logpolicy.dev/v1alpha1\nkind: LogPolicy\nmetadata: {name: saving}\nspec:\n  selector: {matchLabels: {app: shop}}\n  sampling:\n  - {target: \"shop::http\", keepOneIn: 10}\n  maxBytesPerSecond: 1048576\n",
    )
    .unwrap();
    s.wait_condition("saving", "Applied", "True", 10 * SEC)
        .unwrap();
    let directives = pods[0].directives().unwrap();
    assert!(
        directives.contains("@sample(shop::http)=1/10"),
        "{directives}"
    );
}
