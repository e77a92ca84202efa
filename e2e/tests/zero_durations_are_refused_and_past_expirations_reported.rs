//! `duration: 0s` is refused by `kubectl apply`, naming the field; a LogPolicy created
//! with an `expirationTime` already past is accepted (the schema cannot compare times)
//! and the operator says, in the status and in a `Warning` Event, that it never applied.

use logpolicy_e2e::process::wait_for;
use logpolicy_e2e::scenario::condition;
use logpolicy_e2e::shop::{wait_known, SEC};
use logpolicy_e2e::{PodSpec, Scenario};

fn policy(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: logpolicy.dev/v1alpha1\nkind: LogPolicy\nmetadata: {{name: {name}}}\nspec:\n  selector: {{matchLabels: {{app: shop}}}}\n  targets:\n  - {{target: \"shop::payment\", level: debug}}\n{spec}"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zero_duration_is_refused_at_admission_naming_the_field() {
    let _file = crate::one_file_at_a_time(module_path!());
    let s = Scenario::new("zero-duration").await.unwrap();
    for (name, duration) in [("zero", "0s"), ("zeros", "0h0m0ms")] {
        let err = s
            .apply(&policy(name, &format!("  duration: {duration}\n")))
            .unwrap_err()
            .0;
        eprintln!("{name}: {err}");
        assert!(err.contains("spec.duration"), "{name}: {err}");
        assert!(
            s.kubectl(&["get", "lp", name]).is_err(),
            "{name} was created"
        );
    }
    // Zero parts around a positive one are fine.
    s.apply(&policy("positive", "  duration: 0h1m0s\n"))
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expiration_time_past_at_creation_is_reported_in_status_and_a_warning() {
    let _file = crate::one_file_at_a_time(module_path!());
    let s = Scenario::new("past-expiry").await.unwrap();
    let pods = s.pods(vec![PodSpec::shop("shop-0")]).await.unwrap();
    wait_known(&pods).unwrap();
    let at = "2020-01-01T00:00:00Z";
    s.apply(&policy(
        "too-late",
        &format!("  expirationTime: \"{at}\"\n"),
    ))
    .unwrap();

    let lp = s
        .wait_condition("too-late", "Expired", "True", 10 * SEC)
        .unwrap();
    let expired = condition(&lp, "Expired").unwrap();
    assert_eq!(expired["reason"], "ExpiredBeforeCreation", "{lp}");
    let message = expired["message"].as_str().unwrap();
    assert!(
        message.contains(at) && message.contains("never applied"),
        "{message}"
    );

    let events = wait_for(10 * SEC, "an Expired Event", || {
        let events = s.events("too-late")?;
        Ok(events
            .iter()
            .any(|e| e.starts_with("Expired:") && e.contains("never applied"))
            .then_some(events))
    })
    .unwrap();
    eprintln!("{message}; events: {events:?}");
    let types = s
        .kubectl(&[
            "get",
            "events",
            "--field-selector",
            "reason=Expired,involvedObject.name=too-late",
            "-o",
            "jsonpath={.items[*].type}",
        ])
        .unwrap();
    assert_eq!(types.trim(), "Warning", "one Warning Event: {types}");

    let directives = pods[0].directives().unwrap();
    assert!(!directives.contains("shop::payment"), "{directives}");
}
