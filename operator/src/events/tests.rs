use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::*;
use logpolicy_api::validate::FieldError;

fn view(name: &str) -> PolicyView {
    PolicyView {
        key: PolicyKey::new("shop", name),
        generation: 1,
        errors: Vec::new(),
        in_force_generation: Some(1),
        expires_at: None,
        expired: false,
        expired_before_creation: false,
        matched: 3,
        applied: 3,
        failed: 0,
        pending: 0,
        failing: Vec::new(),
        levels: Some("shop::payment=debug".to_owned()),
        replay: None,
    }
}

fn error(field: &str, message: &str) -> FieldError {
    FieldError {
        field: field.to_owned(),
        message: message.to_owned(),
    }
}

#[test]
fn the_limiter_allows_one_event_per_key_per_interval() {
    let t0 = Instant::now();
    let mut l = EventLimiter::new(Duration::from_secs(60));
    assert!(l.allow(&"a", t0));
    assert!(!l.allow(&"a", t0 + Duration::from_secs(1)));
    assert!(!l.allow(&"a", t0 + Duration::from_secs(59)));
    assert!(
        l.allow(&"b", t0 + Duration::from_secs(1)),
        "keys are independent"
    );
    assert!(l.allow(&"a", t0 + Duration::from_secs(60)));
    assert!(!l.allow(&"a", t0 + Duration::from_secs(119)));
    l.forget(&"a");
    assert!(l.allow(&"a", t0 + Duration::from_secs(119)));
}

#[test]
fn the_limiter_stays_bounded() {
    let t0 = Instant::now();
    let mut l = EventLimiter::new(Duration::from_secs(1));
    for i in 0..10_000u32 {
        assert!(l.allow(&i, t0 + Duration::from_millis(u64::from(i))));
    }
    assert!(l.last.len() <= 1024 + 1);
}

#[test]
fn an_invalid_spec_is_reported_once_per_set_of_errors_naming_the_field() {
    let t0 = Instant::now();
    let mut ev = PolicyEvents::new(Duration::from_secs(60));
    let mut v = view("p");
    assert!(ev.observe(&v, None, t0).is_empty());
    v.generation = 2;
    v.errors = vec![error("spec.targets[1].target", "empty")];
    let out = ev.observe(&v, None, t0);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].reason, REASON_INVALID);
    assert_eq!(out[0].severity, Severity::Warning);
    assert_eq!(
        out[0].note,
        "generation 2: spec.targets[1].target: empty (generation 1 stays in force)"
    );
    assert!(
        ev.observe(&v, None, t0).is_empty(),
        "same errors: no new Event"
    );
    v.errors.push(error("spec.selector", "selects nothing"));
    assert_eq!(ev.observe(&v, None, t0).len(), 1, "new errors: a new Event");
    v.errors.clear();
    assert!(ev.observe(&v, None, t0).is_empty());
    v.errors = vec![error("spec.targets[1].target", "empty")];
    assert_eq!(
        ev.observe(&v, None, t0).len(),
        1,
        "broken again: reported again"
    );
}

#[test]
fn failing_pods_are_reported_at_most_once_per_interval() {
    let t0 = Instant::now();
    let mut ev = PolicyEvents::new(Duration::from_secs(60));
    let mut v = view("p");
    v.applied = 1;
    v.failed = 12;
    v.failing = (0..10)
        .map(|i| (format!("web-{i}"), "timeout after 2s".to_owned()))
        .collect();
    v.matched = 13;
    let out = ev.observe(&v, None, t0);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].reason, REASON_PUSH_FAILED);
    assert!(out[0]
        .note
        .starts_with("12 of 13 pods failed: web-0: timeout after 2s; web-1"));
    assert!(out[0].note.ends_with("; and 2 more"), "{}", out[0].note);
    for s in 1..60 {
        assert!(
            ev.observe(&v, None, t0 + Duration::from_secs(s)).is_empty(),
            "a flapping pod cannot flood"
        );
    }
    assert_eq!(ev.observe(&v, None, t0 + Duration::from_secs(60)).len(), 1);
    // Another policy has its own budget.
    let mut w = v.clone();
    w.key = PolicyKey::new("shop", "q");
    assert_eq!(ev.observe(&w, None, t0 + Duration::from_secs(61)).len(), 1);
}

#[test]
fn expiry_is_reported_once_with_the_time_and_the_pods_reverted() {
    let t0 = Instant::now();
    let mut ev = PolicyEvents::new(Duration::from_secs(60));
    let mut v = view("p");
    v.expires_at = Some(UNIX_EPOCH + Duration::from_secs(1_800_000_000));
    assert!(ev.observe(&v, None, t0).is_empty());
    v.expired = true;
    let out = ev.observe(&v, None, t0);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].reason, REASON_EXPIRED);
    assert_eq!(out[0].severity, Severity::Normal);
    assert_eq!(
        out[0].note,
        "expired at 2027-01-15T08:00:00Z, 3 pods reverted"
    );
    assert!(ev.observe(&v, None, t0).is_empty());
    // Already expired when first seen (after a restart): no Event.
    let mut w = view("q");
    w.expired = true;
    assert!(ev.observe(&w, None, t0).is_empty());
    // Failures of an expired policy are not reported.
    w.failed = 1;
    w.failing = vec![("a".into(), "x".into())];
    assert!(ev.observe(&w, None, t0).is_empty());
}

#[test]
fn a_policy_created_already_expired_gets_a_warning_once_saying_it_never_applied() {
    let t0 = Instant::now();
    let mut ev = PolicyEvents::new(Duration::from_secs(60));
    let mut v = view("late");
    v.expires_at = Some(UNIX_EPOCH + Duration::from_secs(1_800_000_000));
    v.expired = true;
    v.expired_before_creation = true;
    v.matched = 2;
    v.applied = 0;
    let out = ev.observe(&v, None, t0);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].reason, REASON_EXPIRED);
    assert_eq!(out[0].severity, Severity::Warning);
    assert_eq!(
        out[0].note,
        "expirationTime 2027-01-15T08:00:00Z was already past when the policy was created: it never applied"
    );
    assert!(ev.observe(&v, None, t0).is_empty(), "reported once");

    // After an operator restart, the status written before says so: no second Event.
    let status = v.status(None, SystemTime::now());
    let mut restarted = PolicyEvents::new(Duration::from_secs(60));
    assert!(restarted.observe(&v, Some(&status), t0).is_empty());
    // A status of another generation does not count.
    let mut next = v.clone();
    next.generation = 2;
    assert_eq!(
        restarted.observe(&next, Some(&status), t0).len(),
        0,
        "seen now"
    );
    let mut other = PolicyEvents::new(Duration::from_secs(60));
    assert_eq!(other.observe(&next, Some(&status), t0).len(), 1);
}

#[test]
fn notes_are_cut_at_the_api_limit() {
    let s = truncate("é".repeat(2000), MAX_NOTE);
    assert!(s.len() <= MAX_NOTE);
    assert!(s.ends_with("..."));
    assert_eq!(truncate("short".into(), MAX_NOTE), "short");
}

#[test]
fn times_are_rfc3339_in_utc() {
    let t = UNIX_EPOCH + Duration::from_millis(1_800_000_000_400);
    assert_eq!(rfc3339(t), "2027-01-15T08:00:00Z");
    let _ = SystemTime::now();
}

#[test]
fn a_restored_trust_configmap_is_a_warning_naming_what_was_found() {
    let deleted = trust_restored(&[]);
    assert_eq!(
        (deleted.severity, deleted.reason, deleted.action),
        (Severity::Warning, REASON_TRUST_RESTORED, "Restore")
    );
    assert_eq!(
        deleted.note,
        "deleted; created anew with the operator's public key"
    );
    let changed = trust_restored(&["it is immutable".to_owned(), "x".repeat(2000)]);
    assert_eq!(changed.severity, Severity::Warning);
    assert!(changed
        .note
        .starts_with("changed by someone else (it is immutable; xxx"));
    assert!(changed.note.len() <= 1000, "{}", changed.note.len());
    let r = config_map_reference("shop", "logpolicy-trust", Some("u-1"));
    assert_eq!(
        (
            r.kind.as_deref(),
            r.api_version.as_deref(),
            r.uid.as_deref()
        ),
        (Some("ConfigMap"), Some("v1"), Some("u-1"))
    );
}
