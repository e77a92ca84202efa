//! The index, driven directly: apply and delete pods and policies, assert what it
//! publishes. No API server, no mocks, no sleeps: time is an argument.

use super::*;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

/// The condition `type_` of a status.
fn condition<'a>(
    status: &'a logpolicy_api::crd::LogPolicyStatus,
    type_: &str,
) -> &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
    status.conditions.iter().find(|c| c.type_ == type_).unwrap()
}

fn t0() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn spec(v: serde_json::Value) -> LogPolicySpec {
    serde_json::from_value(v).unwrap()
}

fn policy(name: &str, v: serde_json::Value) -> PolicyInput {
    PolicyInput::new("shop", name, spec(v))
}

fn web_debug() -> serde_json::Value {
    serde_json::json!({"selector": {"matchLabels": {"app": "web"}},
        "targets": [{"target": "shop::payment", "level": "debug"}]})
}

fn pod(name: &str, ip: u8, labels: &[(&str, &str)]) -> PodInfo {
    let mut p = PodInfo::new(
        "shop",
        name,
        &format!("uid-{name}"),
        Some(IpAddr::V4(Ipv4Addr::new(127, 0, 0, ip))),
        9090,
    );
    for (k, v) in labels {
        p = p.label(k, v);
    }
    p
}

fn key(name: &str) -> PodKey {
    PodKey::new("shop", name)
}

fn pkey(name: &str) -> PolicyKey {
    PolicyKey::new("shop", name)
}

/// A failed push, as the pusher's outcomes convert (`push/tests.rs` holds the conversion).
fn failed(label: &'static str, reason: &str) -> PushResult {
    PushResult::Failed {
        label,
        reason: reason.to_owned(),
        held: None,
        retry: match label {
            "timeout" => Retry::Later,
            "rejected" => Retry::No,
            _ => Retry::Soon,
        },
    }
}

/// The pods pushed, by name, with their layer sources.
fn pushed(index: &mut Index, now: SystemTime) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = index
        .take_pushes(now)
        .into_iter()
        .map(|p| {
            (
                p.pod.name,
                p.document.layers.into_iter().map(|l| l.source).collect(),
            )
        })
        .collect();
    out.sort();
    out
}

fn ack_all(index: &mut Index, now: SystemTime) -> Vec<Push> {
    let pushes = index.take_pushes(now);
    for p in &pushes {
        assert!(index.record_push(&p.pod, p.ticket, PushResult::Applied));
    }
    pushes
}

fn names(v: &[(&str, &[&str])]) -> Vec<(String, Vec<String>)> {
    v.iter()
        .map(|(n, s)| (n.to_string(), s.iter().map(|s| s.to_string()).collect()))
        .collect()
}

#[test]
fn every_opted_in_pod_gets_its_document_once_it_has_an_address() {
    let mut index = Index::new();
    index.apply_pod(pod("web-1", 1, &[("app", "web")]), t0());
    index.apply_pod(pod("web-2", 2, &[("app", "web")]), t0());
    index.apply_pod(pod("db-1", 3, &[("app", "db")]), t0());
    let mut no_ip = pod("web-3", 4, &[("app", "web")]);
    no_ip.ip = None;
    index.apply_pod(no_ip, t0());
    index.apply_policy(policy("debug", web_debug()), t0());
    assert_eq!(
        pushed(&mut index, t0()),
        names(&[
            ("db-1", &[]),
            ("web-1", &["shop/debug"]),
            ("web-2", &["shop/debug"])
        ])
    );
    let view = index.policy_view(&pkey("debug")).unwrap();
    assert_eq!(
        (view.matched, view.applied, view.failed, view.pending),
        (3, 0, 0, 3)
    );

    // The third gets an IP: it is pushed now.
    index.apply_pod(pod("web-3", 4, &[("app", "web")]), t0());
    assert_eq!(
        pushed(&mut index, t0()),
        names(&[("web-3", &["shop/debug"])])
    );
    // Nothing changed: nothing to push.
    index.apply_pod(pod("web-3", 4, &[("app", "web")]), t0());
    index.apply_policy(policy("debug", web_debug()), t0());
    assert!(pushed(&mut index, t0()).is_empty());
}

#[test]
fn the_document_carries_the_layer_the_policy_describes() {
    let mut index = Index::new();
    index.apply_pod(pod("web-1", 1, &[("app", "web")]), t0());
    index.apply_policy(
        policy(
            "raise",
            serde_json::json!({"selector": {"matchLabels": {"app": "web"}},
            "defaultLevel": "info", "targets": [{"target": "shop::payment", "level": "debug"}],
            "sampling": [{"target": "shop::http", "keepOneIn": 100, "scope": "request"}],
            "priority": 5, "expirationTime": "2027-06-01T08:00:00Z"}),
        ),
        t0(),
    );
    let push = index.take_pushes(t0()).remove(0);
    assert_eq!(push.addr, "127.0.0.1:9090".parse().unwrap());
    let doc = push.document;
    assert_eq!(doc.pod, PodRef::new("shop", "web-1", "uid-web-1"));
    assert_eq!(doc.issued_at, t0());
    // The pod's own parser takes it.
    let back = PolicyDocument::from_json(doc.to_json().as_bytes()).unwrap();
    let layers = back.policy_layers().unwrap();
    assert_eq!(layers[0].source(), "shop/raise");
    assert_eq!(layers[0].priority, 5);
    assert_eq!(
        layers[0].expires_at,
        logpolicy::clock::parse_rfc3339("2027-06-01T08:00:00Z").ok()
    );
    assert_eq!(
        layers[0].directives.to_string(),
        "info,shop::payment=debug,@sample(shop::http)=1/100:request"
    );
}

#[test]
fn a_standing_policy_reaches_pods_with_an_end_and_is_renewed_while_the_operator_runs() {
    let mut index = Index::new();
    index.apply_pod(pod("web-1", 1, &[("app", "web")]), t0());
    index.apply_pod(pod("db-1", 2, &[("app", "db")]), t0());
    index.apply_policy(policy("standing", web_debug()), t0());
    let pushes = ack_all(&mut index, t0());
    let web = pushes.iter().find(|p| p.pod.name == "web-1").unwrap();
    // A pod refuses a layer that never ends: the document gives it a day.
    assert_eq!(
        web.document.layers[0].expires_at,
        Some(t0() + STANDING_LEASE)
    );
    let first = web.ticket.version;
    // Nothing until the renewal is due; the controller is woken for it.
    assert_eq!(index.next_retry(), Some(t0() + STANDING_RENEWAL));
    assert!(pushed(&mut index, t0() + STANDING_RENEWAL - secs(1)).is_empty());
    // Then a new version, issued then and ending a day later; not to the pod without it.
    let at = t0() + STANDING_RENEWAL;
    let renewed = index.take_pushes(at);
    assert_eq!(renewed.len(), 1, "{renewed:?}");
    assert_eq!(renewed[0].pod.name, "web-1");
    assert!(renewed[0].ticket.version > first);
    assert_eq!(renewed[0].document.issued_at, at);
    assert_eq!(
        renewed[0].document.layers[0].expires_at,
        Some(at + STANDING_LEASE)
    );
    // A failed renewal is retried with backoff as any push; the next renewal is
    // counted from the acknowledgement.
    index.record_push(
        &renewed[0].pod,
        renewed[0].ticket,
        failed("timeout", "no answer"),
    );
    let retry = index.next_retry().unwrap();
    assert!(retry > at && retry < at + secs(60), "{retry:?}");
    let again = index.take_pushes(retry);
    assert_eq!(again.len(), 1);
    index.record_push(&again[0].pod, again[0].ticket, PushResult::Applied);
    assert_eq!(index.next_retry(), Some(retry + STANDING_RENEWAL));

    // Once the policy has a duration, nothing is renewed.
    let mut raise = web_debug();
    raise["duration"] = "15m".into();
    index.apply_policy(policy("standing", raise), retry);
    ack_all(&mut index, retry);
    assert_eq!(index.next_retry(), None);
    assert_eq!(index.next_expiry(), Some(retry + secs(900)));
}

#[test]
fn narrowing_a_selector_reverts_exactly_the_pods_no_longer_covered() {
    let mut index = Index::new();
    index.apply_pod(pod("web-1", 1, &[("app", "web"), ("tier", "canary")]), t0());
    index.apply_pod(pod("web-2", 2, &[("app", "web"), ("tier", "canary")]), t0());
    index.apply_pod(pod("web-3", 3, &[("app", "web")]), t0());
    index.apply_policy(policy("debug", web_debug()), t0());
    ack_all(&mut index, t0());
    let before = index.document(&key("web-1")).unwrap().version;

    let mut narrow = web_debug();
    narrow["selector"] = serde_json::json!({"matchLabels": {"app": "web", "tier": "canary"}});
    let mut input = policy("debug", narrow);
    input.generation = 2;
    index.apply_policy(input, t0() + secs(1));
    assert_eq!(pushed(&mut index, t0() + secs(1)), names(&[("web-3", &[])]));
    assert_eq!(index.document(&key("web-1")).unwrap().version, before);
    let view = index.policy_view(&pkey("debug")).unwrap();
    assert_eq!((view.matched, view.applied), (2, 2));

    // Deleting the policy reverts the rest.
    index.delete_policy(&pkey("debug"));
    assert_eq!(
        pushed(&mut index, t0() + secs(2)),
        names(&[("web-1", &[]), ("web-2", &[])])
    );
    assert!(index.policy_view(&pkey("debug")).is_none());
    assert!(index.take_changed_policies().contains(&pkey("debug")));
}

/// A write of a policy's status comes back as a watch event with the same input: it
/// changes nothing, and no pod is looked at (at 50,000 pods each such event walked
/// every pod, 25-35 times a change). Pods that came since are covered all the same.
#[test]
fn the_input_in_force_again_changes_nothing() {
    let mut index = Index::new();
    index.apply_pod(pod("web-1", 1, &[("app", "web")]), t0());
    index.apply_policy(policy("debug", web_debug()), t0());
    ack_all(&mut index, t0());
    assert!(index.take_changed_policies().contains(&pkey("debug")));

    index.apply_policy(policy("debug", web_debug()), t0() + secs(1));
    assert!(index.take_changed_policies().is_empty());
    assert!(pushed(&mut index, t0() + secs(1)).is_empty());

    index.apply_pod(pod("web-2", 2, &[("app", "web")]), t0() + secs(2));
    index.apply_policy(policy("debug", web_debug()), t0() + secs(3));
    assert_eq!(
        pushed(&mut index, t0() + secs(3)),
        names(&[("web-2", &["shop/debug"])])
    );
    assert_eq!(index.policy_view(&pkey("debug")).unwrap().matched, 2);

    // Anything else in the input is applied: here, its expiry as a status recorded it.
    let mut recorded = policy("debug", web_debug());
    recorded.recorded_expiration = Some(t0() + secs(600));
    index.apply_policy(recorded, t0() + secs(4));
    assert!(index.take_changed_policies().contains(&pkey("debug")));
}

#[test]
fn a_pod_whose_labels_change_joins_or_leaves_policies() {
    let mut index = Index::new();
    index.apply_pod(pod("web-1", 1, &[("app", "web")]), t0());
    index.apply_policy(policy("debug", web_debug()), t0());
    ack_all(&mut index, t0());
    index.apply_pod(pod("web-1", 1, &[("app", "web"), ("extra", "x")]), t0());
    assert!(
        pushed(&mut index, t0()).is_empty(),
        "a label that changes no match pushes nothing"
    );
    index.apply_pod(pod("web-1", 1, &[("app", "api")]), t0());
    assert_eq!(pushed(&mut index, t0()), names(&[("web-1", &[])]));
    assert_eq!(index.policy_view(&pkey("debug")).unwrap().matched, 0);
    index.apply_pod(pod("web-1", 1, &[("app", "web")]), t0());
    assert_eq!(
        pushed(&mut index, t0()),
        names(&[("web-1", &["shop/debug"])])
    );
}

#[test]
fn layers_are_ordered_by_priority_then_age_then_name() {
    let mut index = Index::new();
    index.apply_pod(pod("web-1", 1, &[("app", "web")]), t0());
    let add = |index: &mut Index, name: &str, priority: i32, created: u64| {
        let mut v = web_debug();
        v["priority"] = priority.into();
        let mut input = policy(name, v);
        input.created = t0() + secs(created);
        index.apply_policy(input, t0() + secs(100));
    };
    add(&mut index, "low", -5, 1);
    add(&mut index, "b-high-young", 10, 50);
    add(&mut index, "z-high-old", 10, 2);
    add(&mut index, "a-high-young", 10, 50);
    add(&mut index, "zero", 0, 0);
    let doc = index.document(&key("web-1")).unwrap();
    let order: Vec<&str> = doc.layers.iter().map(|l| l.source.as_str()).collect();
    assert_eq!(
        order,
        [
            "shop/z-high-old",
            "shop/a-high-young",
            "shop/b-high-young",
            "shop/zero",
            "shop/low"
        ]
    );
    // The pod's merge agrees: the first of equal priority wins.
    let layers = doc.policy_layers().unwrap();
    assert!(layers.windows(2).all(|w| w[0].priority >= w[1].priority));
}

#[test]
fn a_higher_priority_policy_wins_and_removing_it_restores_the_lower() {
    let mut index = Index::new();
    index.apply_pod(pod("web-1", 1, &[("app", "web")]), t0());
    index.apply_policy(policy("low", web_debug()), t0());
    let mut high = web_debug();
    high["priority"] = 10.into();
    high["targets"] = serde_json::json!([{"target": "shop::payment", "level": "trace"}]);
    index.apply_policy(policy("high", high), t0());
    let effective = |index: &Index| {
        let doc = index.document(&key("web-1")).unwrap();
        logpolicy::Policy::new(doc.policy_layers().unwrap())
            .effective_at(t0())
            .level_for("shop::payment")
    };
    assert_eq!(effective(&index), logpolicy::Level::Trace);
    index.delete_policy(&pkey("high"));
    assert_eq!(effective(&index), logpolicy::Level::Debug);
}

#[test]
fn expiry_happens_at_the_exact_instant() {
    let mut index = Index::new();
    index.apply_pod(pod("web-1", 1, &[("app", "web")]), t0());
    let mut v = web_debug();
    v["duration"] = "10s".into();
    index.apply_policy(policy("raise", v), t0());
    let pushes = ack_all(&mut index, t0());
    assert_eq!(
        pushes[0].document.layers[0].expires_at,
        Some(t0() + secs(10))
    );
    assert_eq!(index.next_expiry(), Some(t0() + secs(10)));

    let just_before = t0() + secs(10) - Duration::from_nanos(1);
    index.tick(just_before);
    assert!(index.take_pushes(just_before).is_empty());
    assert!(!index.policy_view(&pkey("raise")).unwrap().expired);

    index.tick(t0() + secs(10));
    assert_eq!(
        pushed(&mut index, t0() + secs(10)),
        names(&[("web-1", &[])])
    );
    let view = index.policy_view(&pkey("raise")).unwrap();
    assert!(view.expired);
    assert_eq!((view.matched, view.applied), (1, 0));
    // `kubectl get lp` reads "expired" in APPLIED, and still shows what it set.
    let status = view.status(None, t0() + secs(10));
    assert_eq!(status.summary.as_deref(), Some("expired"));
    assert_eq!(status.levels.as_deref(), Some("shop::payment=debug"));
    assert_eq!(index.next_expiry(), None);
    // Time does not run backwards in the index.
    index.tick(t0());
    assert!(index.policy_view(&pkey("raise")).unwrap().expired);
}

#[test]
fn an_expiration_time_past_at_creation_is_never_pushed_and_the_status_says_so() {
    let mut index = Index::new();
    index.apply_pod(pod("web-1", 1, &[("app", "web")]), t0());
    let mut v = web_debug();
    v["expirationTime"] = "2027-01-15T07:00:00Z".into(); // t0() - 1 h
    let mut late = policy("late", v.clone());
    late.created = t0();
    index.apply_policy(late, t0());
    // The pod gets its document, without the policy's layer.
    assert_eq!(pushed(&mut index, t0()), names(&[("web-1", &[])]));
    let view = index.policy_view(&pkey("late")).unwrap();
    assert!(view.expired && view.expired_before_creation, "{view:?}");
    let status = view.status(None, t0());
    let cond = condition(&status, "Expired");
    assert_eq!(
        (cond.status.as_str(), cond.reason.as_str()),
        ("True", "ExpiredBeforeCreation")
    );
    assert_eq!(
        cond.message,
        "expirationTime 2027-01-15T07:00:00Z was already past when the policy was created: it never applied"
    );

    // Created before its expirationTime, seen after it (an operator that was down):
    // it applied while it could, an ordinary expiry.
    let mut early = policy("early", v);
    early.created = t0() - secs(7200);
    index.apply_policy(early, t0());
    let view = index.policy_view(&pkey("early")).unwrap();
    assert!(view.expired && !view.expired_before_creation);
    let status = view.status(None, t0());
    let cond = condition(&status, "Expired");
    assert_eq!(cond.reason, "Expired");
}

#[test]
fn a_duration_is_resolved_once_per_generation() {
    let mut index = Index::new();
    let mut v = web_debug();
    v["duration"] = "15m".into();
    index.apply_policy(policy("raise", v.clone()), t0());
    let exp = |index: &Index| index.policy_view(&pkey("raise")).unwrap().expires_at;
    assert_eq!(exp(&index), Some(t0() + secs(900)));
    // A resync of the same generation does not extend it.
    index.apply_policy(policy("raise", v.clone()), t0() + secs(60));
    assert_eq!(exp(&index), Some(t0() + secs(900)));
    // A new generation counts from when it is seen.
    let mut input = policy("raise", v.clone());
    input.generation = 2;
    index.apply_policy(input, t0() + secs(120));
    assert_eq!(exp(&index), Some(t0() + secs(1020)));

    // A restarted operator takes the expiry its status recorded for this generation.
    let mut fresh = Index::new();
    let mut input = policy("raise", v);
    input.recorded_expiration = Some(t0() + secs(900));
    fresh.apply_policy(input, t0() + secs(300));
    assert_eq!(exp(&fresh), Some(t0() + secs(900)));
}

/// An index with `web-1` (one container, never restarted) holding the `debug` policy:
/// the index, the pod, and the push it acknowledged.
fn one_container_pod_with_its_policy_acknowledged() -> (Index, PodInfo, Push) {
    let mut index = Index::new();
    let mut p = pod("web-1", 1, &[("app", "web")]);
    p.containers = vec![crate::pods::ContainerRun {
        name: "main".into(),
        restart_count: 0,
        started_at: Some("2026-11-29T20:00:00Z".into()),
    }];
    index.apply_pod(p.clone(), t0());
    index.apply_policy(policy("debug", web_debug()), t0());
    let first = ack_all(&mut index, t0()).remove(0);
    (index, p, first)
}

/// `layers` as the policies say them: a standing layer without the end a document gives
/// it.
fn standing(layers: &[LayerSpec]) -> Vec<LayerSpec> {
    layers
        .iter()
        .map(|l| LayerSpec {
            expires_at: None,
            ..l.clone()
        })
        .collect()
}

#[test]
fn a_restarted_process_or_a_new_address_is_pushed_again() {
    let (mut index, mut p, first) = one_container_pod_with_its_policy_acknowledged();
    assert_eq!(index.policy_view(&pkey("debug")).unwrap().applied, 1);

    // The container restarted: same document, same version, pushed again.
    p.containers[0].restart_count = 1;
    p.containers[0].started_at = Some("2026-11-29T20:05:00Z".into());
    index.apply_pod(p.clone(), t0() + secs(5));
    let again = index.take_pushes(t0() + secs(5)).remove(0);
    assert_eq!(again.document.version, first.document.version);
    // The same layers; the standing one ends a day after this document.
    assert_eq!(
        standing(&again.document.layers),
        standing(&first.document.layers)
    );
    assert_eq!(
        again.document.layers[0].expires_at,
        Some(t0() + secs(5) + STANDING_LEASE)
    );
    // It says what the previous process held, for the pod's `ended: restart` lines.
    assert_eq!(again.document.lost, standing(&first.document.layers));
    assert!(first.document.lost.is_empty());
    assert_ne!(again.ticket, first.ticket);
    assert_eq!(index.policy_view(&pkey("debug")).unwrap().applied, 0);
    // A late answer to the old push counts for nothing.
    assert!(!index.record_push(&key("web-1"), first.ticket, PushResult::Applied));
    assert_eq!(index.policy_view(&pkey("debug")).unwrap().applied, 0);
    assert!(index.record_push(&key("web-1"), again.ticket, PushResult::Applied));

    // A new IP: pushed again; not a restart, and the restart was said once.
    p.ip = Some(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 9)));
    index.apply_pod(p.clone(), t0() + secs(6));
    let moved = index.take_pushes(t0() + secs(6)).remove(0);
    assert_eq!(moved.addr, "127.0.0.9:9090".parse().unwrap());
    assert!(moved.document.lost.is_empty());
    // A new pod under the same name (new uid).
    p.uid = "uid-web-1-b".into();
    index.apply_pod(p, t0() + secs(7));
    let recreated = index.take_pushes(t0() + secs(7)).remove(0);
    assert_eq!(recreated.document.pod.uid, "uid-web-1-b");
}

#[test]
fn what_a_restart_lost_is_sent_until_acknowledged_and_dropped_if_refused() {
    let (mut index, mut p, first) = one_container_pod_with_its_policy_acknowledged();
    let restart = |p: &mut PodInfo, n: i32| {
        p.containers[0].restart_count = n;
        p.containers[0].started_at = Some(format!("2026-11-29T20:0{n}:00Z"));
    };

    // Restarted; the new process is not up yet: the retry still says it.
    restart(&mut p, 1);
    index.apply_pod(p.clone(), t0() + secs(1));
    let a = index.take_pushes(t0() + secs(1)).remove(0);
    assert_eq!(a.document.lost, standing(&first.document.layers));
    assert!(index.record_push(&key("web-1"), a.ticket, failed("unreachable", "refused")));
    index.tick(t0() + secs(30));
    let b = index.take_pushes(t0() + secs(30)).remove(0);
    assert_eq!(b.document.lost, standing(&first.document.layers));
    // Restarted again before it answered: still what the last acknowledging process
    // held.
    restart(&mut p, 2);
    index.apply_pod(p.clone(), t0() + secs(31));
    let c = index.take_pushes(t0() + secs(31)).remove(0);
    assert_eq!(c.document.lost, standing(&first.document.layers));
    assert!(index.record_push(&key("web-1"), c.ticket, PushResult::Applied));

    // Refused (a layer too old to know `lost`): sent again at once without it.
    restart(&mut p, 3);
    index.apply_pod(p.clone(), t0() + secs(40));
    let d = index.take_pushes(t0() + secs(40)).remove(0);
    assert!(!d.document.lost.is_empty());
    let refused = failed("rejected", "layers: unknown field `lost`");
    assert!(index.record_push(&key("web-1"), d.ticket, refused));
    let e = index.take_pushes(t0() + secs(40)).remove(0);
    assert!(e.document.lost.is_empty());
    assert_eq!(
        standing(&e.document.layers),
        standing(&first.document.layers)
    );
    assert!(index.record_push(&key("web-1"), e.ticket, PushResult::Applied));
    assert_eq!(index.policy_view(&pkey("debug")).unwrap().applied, 1);
}

#[test]
fn versions_increase_strictly_whenever_the_content_changes() {
    let mut index = Index::new();
    index.apply_pod(pod("web-1", 1, &[("app", "web")]), t0());
    let mut versions = vec![index.document(&key("web-1")).unwrap().version];
    let mut now = t0();
    for i in 0..20 {
        let mut v = web_debug();
        v["targets"][0]["level"] = if i % 2 == 0 { "trace" } else { "debug" }.into();
        // Time may stand still or even step back; versions still increase.
        now = if i % 3 == 0 {
            now
        } else {
            now + Duration::from_millis(1)
        };
        let mut input = policy("debug", v);
        input.generation = i + 2;
        index.apply_policy(
            input,
            now - Duration::from_millis(if i == 5 { 10_000 } else { 0 }),
        );
        versions.push(index.document(&key("web-1")).unwrap().version);
    }
    assert!(versions.windows(2).all(|w| w[0] < w[1]), "{versions:?}");
    // Versions come from the clock, so a restarted operator issues newer ones.
    assert!(versions[0] >= 1_800_000_000_000);
}

#[test]
fn failures_are_counted_and_a_sample_named() {
    let mut index = Index::new();
    for i in 0..15u8 {
        index.apply_pod(pod(&format!("web-{i:02}"), i + 1, &[("app", "web")]), t0());
    }
    index.apply_policy(policy("debug", web_debug()), t0());
    for (i, p) in index.take_pushes(t0()).into_iter().enumerate() {
        let outcome = match i {
            0..=2 => PushResult::Applied,
            3 => failed("rejected", "rejected (401): untrusted_key"),
            _ => failed("timeout", "timeout after 2s"),
        };
        index.record_push(&p.pod, p.ticket, outcome);
    }
    let view = index.policy_view(&pkey("debug")).unwrap();
    assert_eq!(
        (view.matched, view.applied, view.failed, view.pending),
        (15, 3, 12, 0)
    );
    assert_eq!(view.failing.len(), MAX_FAILING_PODS);
    assert_eq!(
        view.failing[0],
        (
            "web-03".to_owned(),
            "rejected (401): untrusted_key".to_owned()
        )
    );
    let status = view.status(None, t0());
    assert_eq!(status.summary.as_deref(), Some("3/15"));
    assert_eq!(status.levels.as_deref(), Some("shop::payment=debug"));
    let applied = condition(&status, "Applied");
    assert_eq!(
        (applied.status.as_str(), applied.message.as_str()),
        ("False", "3/15 pods, 12 failed")
    );

    // A resync queues the failed pods again and reads back the others: the refused
    // one is pushed at once, the ones that timed out when their retry is due.
    let reads = index.resync();
    assert_eq!(reads.len(), 3);
    assert_eq!(index.take_pushes(t0()).len(), 1);
    assert_eq!(index.take_pushes(t0() + RETRY_CAP_LATER).len(), 11);
}

#[test]
fn drift_found_by_a_read_back_is_pushed_again() {
    let mut index = Index::new();
    index.apply_pod(pod("web-1", 1, &[("app", "web")]), t0());
    index.apply_policy(policy("debug", web_debug()), t0());
    let push = ack_all(&mut index, t0()).remove(0);
    let read = index.resync().remove(0);
    assert!(!index.record_read_back(&read.pod, read.ticket, Some(push.document.version)));
    assert!(index.take_pushes(t0()).is_empty());
    assert!(index.record_read_back(&read.pod, read.ticket, None));
    assert_eq!(index.take_pushes(t0()).len(), 1);
}

#[test]
fn a_pod_holding_a_newer_version_gets_a_newer_one() {
    let mut index = Index::new();
    index.apply_pod(pod("web-1", 1, &[("app", "web")]), t0());
    let push = index.take_pushes(t0()).remove(0);
    let held = push.document.version + 1000;
    index.record_push(
        &push.pod,
        push.ticket,
        PushResult::Failed {
            label: "stale",
            reason: format!("stale: pod holds version {held}: stale_version"),
            held: Some(held),
            retry: Retry::No,
        },
    );
    let again = index.take_pushes(t0()).remove(0);
    assert!(again.document.version > held);
    assert_eq!(index.next_retry(), None);
    // Acknowledged: a later 409 of the same kind is moved past again, at once.
    assert!(index.record_push(&again.pod, again.ticket, PushResult::Applied));
    index.apply_policy(policy("debug", web_debug()), t0() + secs(1));
    let p = index.take_pushes(t0() + secs(1)).remove(0);
    let held = p.document.version + 5;
    index.record_push(&p.pod, p.ticket, stale(held));
    let again = index.take_pushes(t0() + secs(1)).remove(0);
    assert_eq!(again.document.version, held + 1);
}

/// A 409 as the pusher converts it: the pod holds `held`.
fn stale(held: u64) -> PushResult {
    PushResult::Failed {
        label: "stale",
        reason: format!("stale: pod holds version {held}: stale_version"),
        held: Some(held),
        retry: Retry::No,
    }
}

/// Drives the index against one pod that answers every push with `answer(version sent)`
/// for `span` of its time (retries moving the time); the versions pushed, with when.
fn drive(
    index: &mut Index,
    span: Duration,
    answer: impl Fn(u64) -> PushResult,
) -> Vec<(Duration, u64)> {
    let mut now = t0();
    let mut pushed = Vec::new();
    while now < t0() + span {
        let pushes = index.take_pushes(now);
        if pushes.is_empty() {
            match index.next_retry() {
                Some(at) => now = at,
                None => break,
            }
            continue;
        }
        for p in pushes {
            pushed.push((now.duration_since(t0()).unwrap(), p.document.version));
            assert!(index.record_push(&p.pod, p.ticket, answer(p.document.version)));
        }
        assert!(pushed.len() < 1000, "a push loop: {:?}", &pushed[..20]);
    }
    pushed
}

#[test]
fn a_pod_that_keeps_claiming_a_newer_version_is_backed_off_and_reported() {
    let mut index = Index::new();
    index.apply_pod(pod("web-1", 1, &[("app", "web")]), t0());
    index.apply_policy(policy("debug", web_debug()), t0());
    // It claims to hold whatever it is sent, plus one.
    let pushed = drive(&mut index, secs(60), |v| stale(v + 1));
    // Each attempt: the version sent, then once past the one it claims at once; then
    // the retries back off, doubling, up to the cap.
    let times: Vec<f64> = pushed.iter().map(|(t, _)| t.as_secs_f64()).collect();
    assert!(pushed.len() <= 16, "{times:?}");
    let in_6s = times.iter().filter(|t| **t < 6.0).count();
    assert!((2..=8).contains(&in_6s), "{times:?}");
    let attempts: Vec<f64> = times
        .windows(2)
        .filter(|w| w[1] > w[0])
        .map(|w| w[1] - w[0])
        .collect();
    assert!(
        attempts.windows(2).all(|w| w[1] >= w[0] * 0.5),
        "{attempts:?}"
    );
    assert!(
        attempts.iter().all(|w| *w < RETRY_CAP_LATER.as_secs_f64()),
        "{attempts:?}"
    );
    // Two pushes per attempt: the version due, then once past the one it claims.
    let attempt_count = times
        .iter()
        .collect::<Vec<_>>()
        .chunk_by(|a, b| a == b)
        .count();
    assert_eq!(pushed.len(), 2 * attempt_count, "{times:?}");
    let view = index.policy_view(&pkey("debug")).unwrap();
    assert_eq!((view.failed, view.applied), (1, 0));
    let reason = &view.failing[0].1;
    assert!(reason.contains("newer than the operator's"), "{reason}");
    assert!(
        reason.contains("again after the operator moved past the version it held"),
        "{reason}"
    );
    assert!(reason.contains("restart the pod"), "{reason}");
    let pod_view = &index.pod_views()[0];
    assert!(!pod_view.in_sync);
    assert_eq!(pod_view.last_push.as_ref().unwrap().outcome, "stale");

    // Restarted, its new process is pushed at once, takes the document, and is no
    // longer reported.
    let mut restarted = pod("web-1", 1, &[("app", "web")]);
    restarted.uid = "uid-web-1-b".into();
    let now = t0() + secs(61);
    index.apply_pod(restarted, now);
    let p = index.take_pushes(now).remove(0);
    assert!(index.record_push(&p.pod, p.ticket, PushResult::Applied));
    let view = index.policy_view(&pkey("debug")).unwrap();
    assert_eq!((view.failed, view.applied), (0, 1));
    // No retry left: only the standing policy's renewal.
    assert_eq!(index.next_retry(), Some(now + STANDING_RENEWAL));
}

#[test]
fn a_held_version_no_operator_issues_is_not_followed() {
    let mut index = Index::new();
    index.apply_pod(pod("web-1", 1, &[("app", "web")]), t0());
    index.apply_policy(policy("debug", web_debug()), t0());
    let ahead = u64::try_from((2 * MAX_HELD_AHEAD).as_millis()).unwrap();
    for held in [MAX_DOCUMENT_VERSION, unix_millis(t0()) + ahead] {
        let mut index = Index::new();
        index.apply_pod(pod("web-1", 1, &[("app", "web")]), t0());
        index.apply_policy(policy("debug", web_debug()), t0());
        let pushed = drive(&mut index, secs(6), |_| stale(held));
        // Never past it: every push is of the version first decided.
        assert!(pushed.iter().all(|(_, v)| *v == pushed[0].1), "{pushed:?}");
        assert!((2..=5).contains(&pushed.len()), "{pushed:?}");
        let view = index.policy_view(&pkey("debug")).unwrap();
        let reason = &view.failing[0].1;
        assert!(
            reason.starts_with(&format!("the pod holds version {held}, newer than")),
            "{reason}"
        );
        assert!(
            reason.contains("beyond any version the operator issues"),
            "{reason}"
        );
        assert!(reason.contains("restart the pod"), "{reason}");
    }
    // A version a little ahead (an earlier operator process with its clock ahead) is
    // still moved past, once, at once.
    let held = unix_millis(t0()) + 3_600_000;
    let p = index.take_pushes(t0()).remove(0);
    index.record_push(&p.pod, p.ticket, stale(held));
    let again = index.take_pushes(t0()).remove(0);
    assert_eq!(again.document.version, held + 1);
    assert!(index.record_push(&again.pod, again.ticket, PushResult::Applied));
}

#[test]
fn an_invalid_update_keeps_the_last_valid_generation_in_force() {
    let mut index = Index::new();
    index.apply_pod(pod("web-1", 1, &[("app", "web")]), t0());
    index.apply_policy(policy("debug", web_debug()), t0());
    ack_all(&mut index, t0());
    let mut bad = web_debug();
    bad["selector"] = serde_json::json!({});
    let mut input = policy("debug", bad);
    input.generation = 2;
    index.apply_policy(input, t0());
    assert!(index.take_pushes(t0()).is_empty());
    let view = index.policy_view(&pkey("debug")).unwrap();
    assert_eq!(view.errors[0].field, "spec.selector");
    assert_eq!(view.in_force_generation, Some(1));
    assert_eq!(view.applied, 1);
    let status = view.status(None, t0());
    let ready = &status.conditions[0];
    assert_eq!(
        (
            ready.type_.as_str(),
            ready.status.as_str(),
            ready.reason.as_str()
        ),
        ("Ready", "False", "Invalid")
    );
    assert!(
        ready
            .message
            .starts_with("spec.selector: must not be empty"),
        "{}",
        ready.message
    );
    assert!(ready.message.ends_with("(generation 1 stays in force)"));

    // A policy invalid from the start selects nothing.
    let mut v = web_debug();
    v["sampling"] = serde_json::json!([{"target": "x", "keepOneIn": 3, "span": "s"}]);
    index.apply_policy(policy("broken", v), t0());
    let view = index.policy_view(&pkey("broken")).unwrap();
    assert_eq!((view.matched, view.in_force_generation), (0, None));
}

#[test]
fn policies_see_only_pods_of_their_namespace() {
    let mut index = Index::new();
    index.apply_pod(pod("web-1", 1, &[("app", "web")]), t0());
    let mut other = pod("web-1", 2, &[("app", "web")]);
    other.namespace = "other".into();
    index.apply_pod(other, t0());
    index.apply_policy(policy("debug", web_debug()), t0());
    let pushes = index.take_pushes(t0());
    let with_layers: Vec<String> = pushes
        .iter()
        .filter(|p| !p.document.layers.is_empty())
        .map(|p| p.pod.to_string())
        .collect();
    assert_eq!(with_layers, ["shop/web-1"]);
}

#[test]
fn a_bad_port_annotation_is_a_failure_not_a_push() {
    let mut index = Index::new();
    let mut p = pod("web-1", 1, &[("app", "web")]);
    p.port = Err(crate::pods::BadPortAnnotation {
        value: "http".into(),
    });
    index.apply_pod(p, t0());
    index.apply_policy(policy("debug", web_debug()), t0());
    assert!(index.take_pushes(t0()).is_empty());
    let view = index.policy_view(&pkey("debug")).unwrap();
    assert_eq!(view.failed, 1);
    assert!(view.failing[0].1.contains("logpolicy.dev/port"));
}

#[test]
fn more_policies_than_a_document_holds_fail_the_lowest() {
    let mut index = Index::new();
    index.apply_pod(pod("web-1", 1, &[("app", "web")]), t0());
    for i in 0..(MAX_DOCUMENT_LAYERS + 2) {
        let mut v = web_debug();
        v["priority"] = i32::try_from(i).unwrap().into();
        index.apply_policy(policy(&format!("p{i:03}"), v), t0());
    }
    let doc = index.document(&key("web-1")).unwrap();
    assert_eq!(doc.layers.len(), MAX_DOCUMENT_LAYERS);
    assert!(doc.validate().is_ok());
    assert_eq!(index.policy_view(&pkey("p000")).unwrap().failed, 1);
    assert_eq!(index.policy_view(&pkey("p064")).unwrap().failed, 0);
}

#[test]
fn resets_delete_what_a_relist_no_longer_has() {
    let mut index = Index::new();
    index.apply_pod(pod("web-1", 1, &[("app", "web")]), t0());
    index.apply_pod(pod("web-2", 2, &[("app", "web")]), t0());
    index.apply_policy(policy("debug", web_debug()), t0());
    index.apply_policy(policy("other", web_debug()), t0());
    ack_all(&mut index, t0());
    index.reset_pods(vec![pod("web-2", 2, &[("app", "web")])], t0());
    assert_eq!(index.pod_count(), 1);
    index.reset_policies(vec![policy("other", web_debug())], t0());
    assert_eq!(
        index.policy_keys().cloned().collect::<Vec<_>>(),
        [pkey("other")]
    );
    // web-1 left while holding layers: it is sent its baseline.
    assert_eq!(
        pushed(&mut index, t0()),
        names(&[("web-1", &[]), ("web-2", &["shop/other"])])
    );
}

#[test]
fn only_policies_whose_view_may_change_are_reported() {
    let mut index = Index::new();
    index.apply_pod(pod("web-1", 1, &[("app", "web")]), t0());
    index.apply_pod(pod("db-1", 2, &[("app", "db")]), t0());
    index.apply_policy(policy("web", web_debug()), t0());
    let mut db = web_debug();
    db["selector"] = serde_json::json!({"matchLabels": {"app": "db"}});
    index.apply_policy(policy("db", db), t0());
    let pushes = index.take_pushes(t0());
    assert_eq!(index.take_changed_policies(), [pkey("db"), pkey("web")]);

    // A relist that changes nothing reports nothing.
    index.apply_pod(pod("db-1", 2, &[("app", "db")]), t0());
    index.apply_pod(pod("web-1", 1, &[("app", "web"), ("extra", "x")]), t0());
    assert!(index.take_changed_policies().is_empty());

    let web = pushes.iter().find(|p| p.pod.name == "web-1").unwrap();
    index.record_push(&web.pod, web.ticket, PushResult::Applied);
    assert_eq!(index.take_changed_policies(), [pkey("web")]);

    index.apply_pod(pod("web-1", 1, &[("app", "db")]), t0());
    assert_eq!(index.take_changed_policies(), [pkey("db"), pkey("web")]);
}

#[test]
fn the_per_pod_view_shows_version_layers_and_the_last_push() {
    let mut index = Index::new();
    index.apply_policy(policy("debug", web_debug()), t0());
    index.apply_pod(pod("web-1", 5, &[("app", "web")]), t0());
    index.apply_pod(pod("api-1", 6, &[("app", "api")]), t0());
    let pushes = index.take_pushes(t0());
    assert_eq!(pushes.len(), 2);
    let web = pushes
        .iter()
        .find(|p| p.pod.name == "web-1")
        .map(|p| p.ticket)
        .unwrap();
    let api = pushes
        .iter()
        .find(|p| p.pod.name == "api-1")
        .map(|p| p.ticket)
        .unwrap();
    index.tick(t0() + secs(1));
    index.record_push(&key("web-1"), web, PushResult::Applied);
    index.record_push(&key("api-1"), api, failed("timeout", "timeout after 2s"));

    let views = index.pod_views();
    assert_eq!(
        views.iter().map(|v| v.name.as_str()).collect::<Vec<_>>(),
        ["api-1", "web-1"],
        "in key order (the server looks pods up by binary search)"
    );
    let json = serde_json::to_value(&views).unwrap();
    assert_eq!(
        json[1],
        serde_json::json!({
            "namespace": "shop",
            "name": "web-1",
            "uid": "uid-web-1",
            "ip": "127.0.0.5",
            "port": 9090,
            "version": web.version,
            "layers": ["debug"],
            "acknowledgedVersion": web.version,
            "inSync": true,
            "lastPush": {"at": "2027-01-15T08:00:01Z", "version": web.version, "outcome": "applied", "error": null},
            "error": null,
        })
    );
    assert_eq!(json[0]["layers"], serde_json::json!([]));
    assert_eq!(json[0]["inSync"], false);
    assert_eq!(json[0]["lastPush"]["outcome"], "timeout");
    assert_eq!(json[0]["error"], "timeout after 2s");
    assert!(json[0].get("portError").is_none());

    // A stale report (an older version) changes nothing.
    index.apply_policy(policy("debug", serde_json::json!({"selector": {"matchLabels": {"app": "web"}}, "defaultLevel": "warn"})), t0() + secs(2));
    index.record_push(&key("web-1"), web, failed("timeout", "timeout after 2s"));
    let v = &index.pod_views()[1];
    assert_eq!(v.last_push.as_ref().map(|p| p.outcome), Some("applied"));
    assert!(!v.in_sync, "a newer version is due");
}

#[test]
fn pod_namespaces_lists_each_namespace_once() {
    let mut index = Index::new();
    index.apply_pod(pod("a", 1, &[]), t0());
    index.apply_pod(pod("b", 2, &[]), t0());
    index.apply_pod(PodInfo::new("other", "c", "u", None, 9090), t0());
    assert_eq!(
        index.pod_namespaces().into_iter().collect::<Vec<_>>(),
        ["other", "shop"]
    );
    assert_eq!(index.policy_count(), 0);
    // A namespace leaves with its last pod, not before.
    index.delete_pod(&PodKey::new("shop", "a"));
    index.delete_pod(&PodKey::new("other", "c"));
    index.delete_pod(&PodKey::new("other", "c"));
    assert_eq!(
        index.pod_namespaces().into_iter().collect::<Vec<_>>(),
        ["shop"]
    );
    index.reset_pods(Vec::new(), t0());
    assert!(index.pod_namespaces().is_empty());
}

#[test]
fn a_pod_that_leaves_while_raised_is_sent_its_baseline() {
    let mut index = Index::new();
    for (name, ip) in [("web-1", 1), ("web-2", 2)] {
        index.apply_pod(pod(name, ip, &[("app", "web")]), t0());
    }
    index.apply_pod(pod("db-1", 3, &[("app", "db")]), t0());
    index.apply_policy(policy("debug", web_debug()), t0());
    let first = ack_all(&mut index, t0());
    let raised = first.iter().find(|p| p.pod.name == "web-1").unwrap();

    // web-1 opts out (the filtered watch reports it deleted); db-1, holding nothing,
    // leaves too.
    index.delete_pod(&key("web-1"));
    index.delete_pod(&key("db-1"));
    assert_eq!(index.pod_count(), 1);
    assert_eq!(index.departed_count(), 1);
    let withdraw = index.take_pushes(t0() + secs(1));
    assert_eq!(withdraw.len(), 1, "{withdraw:?}");
    let w = &withdraw[0];
    assert_eq!(w.pod, key("web-1"));
    assert_eq!(w.addr, raised.addr);
    assert!(w.document.layers.is_empty());
    assert_eq!(w.document.pod, raised.document.pod, "bound to the same uid");
    assert!(w.document.version > raised.document.version);
    // The policy no longer counts it.
    assert_eq!(index.policy_view(&pkey("debug")).unwrap().matched, 1);
    assert!(index.record_push(&w.pod, w.ticket, PushResult::Applied));
    assert_eq!(index.departed_count(), 0);
    assert!(index.take_pushes(t0() + secs(2)).is_empty());
}

#[test]
fn a_withdrawal_is_retried_a_few_times_then_forgotten() {
    let mut index = Index::new();
    index.apply_pod(pod("web-1", 1, &[("app", "web")]), t0());
    index.apply_policy(policy("debug", web_debug()), t0());
    ack_all(&mut index, t0());
    index.delete_pod(&key("web-1"));
    let mut now = t0();
    for attempt in 1..=WITHDRAW_ATTEMPTS {
        let w = index.take_pushes(now);
        assert_eq!(w.len(), 1, "attempt {attempt}");
        assert!(index.record_push(&w[0].pod, w[0].ticket, failed("unreachable", "refused")));
        match index.next_retry() {
            Some(t) => {
                assert!(attempt < WITHDRAW_ATTEMPTS);
                assert!(index.take_pushes(now).is_empty(), "backing off");
                now = t;
            }
            None => assert_eq!(attempt, WITHDRAW_ATTEMPTS),
        }
    }
    assert_eq!(index.departed_count(), 0);
    assert!(index.take_pushes(now + secs(60)).is_empty());
}

#[test]
fn a_pod_that_comes_back_gets_a_newer_version_than_its_withdrawal() {
    let mut index = Index::new();
    index.apply_pod(pod("web-1", 1, &[("app", "web")]), t0());
    index.apply_policy(policy("debug", web_debug()), t0());
    ack_all(&mut index, t0());
    index.delete_pod(&key("web-1"));
    let w = index.take_pushes(t0()).remove(0);
    index.apply_pod(pod("web-1", 1, &[("app", "web")]), t0());
    assert_eq!(index.departed_count(), 0);
    // The withdrawal's report is about a process the index no longer tracks.
    assert!(!index.record_push(&w.pod, w.ticket, PushResult::Applied));
    let again = index.take_pushes(t0()).remove(0);
    assert_eq!(again.document.layers.len(), 1);
    assert!(again.document.version > w.document.version);
}

#[test]
fn a_failed_push_is_retried_per_pod_with_capped_backoff() {
    let mut index = Index::new();
    index.apply_pod(pod("web-1", 1, &[("app", "web")]), t0());
    index.apply_pod(pod("web-2", 2, &[("app", "web")]), t0());
    index.apply_policy(policy("debug", web_debug()), t0());
    let mut now = t0();
    let mut waits = Vec::new();
    for _ in 0..8 {
        let pushes = index.take_pushes(now);
        let web1: Vec<&Push> = pushes.iter().filter(|p| p.pod.name == "web-1").collect();
        assert_eq!(web1.len(), 1, "{pushes:?}");
        assert_eq!(web1[0].lane, Lane::Unproven);
        for p in &pushes {
            let result = if p.pod.name == "web-1" {
                failed("unreachable", "connection refused")
            } else {
                PushResult::Applied
            };
            index.record_push(&p.pod, p.ticket, result);
        }
        let at = index.next_retry().unwrap();
        let wait = at.duration_since(now).unwrap();
        waits.push(wait);
        // Nothing before it is due; a change of policy waits for it too.
        assert!(index.take_pushes(at - Duration::from_millis(1)).is_empty());
        now = at;
    }
    assert!(
        waits[0] >= RETRY_BASE / 2 && waits[0] < RETRY_BASE,
        "{waits:?}"
    );
    assert!(waits.iter().all(|w| *w < RETRY_CAP_SOON), "{waits:?}");
    assert!(waits[7] >= RETRY_CAP_SOON / 2, "{waits:?}");
    // The pod that acknowledged is in the known lane.
    index.apply_policy(policy("debug", serde_json::json!({"selector": {"matchLabels": {"app": "web"}}, "defaultLevel": "warn"})), now);
    let pushes = index.take_pushes(now);
    let web2 = pushes.iter().find(|p| p.pod.name == "web-2").unwrap();
    assert_eq!(web2.lane, Lane::Known);

    // A pod that does not answer backs off up to a longer cap.
    let mut index = Index::new();
    index.apply_pod(pod("web-1", 1, &[("app", "web")]), t0());
    index.apply_policy(policy("debug", web_debug()), t0());
    let mut now = t0();
    let mut last = Duration::ZERO;
    for _ in 0..10 {
        let p = index.take_pushes(now).remove(0);
        index.record_push(&p.pod, p.ticket, failed("timeout", "timeout after 1s"));
        let at = index.next_retry().unwrap();
        last = at.duration_since(now).unwrap();
        now = at;
    }
    assert!(
        last >= RETRY_CAP_LATER / 2 && last < RETRY_CAP_LATER,
        "{last:?}"
    );
    let view = index.policy_view(&pkey("debug")).unwrap();
    assert_eq!(
        (view.failed, view.failing[0].1.as_str()),
        (1, "timeout after 1s")
    );

    // A refusal is not retried before something changes.
    let mut index = Index::new();
    index.apply_pod(pod("web-1", 1, &[("app", "web")]), t0());
    index.apply_policy(policy("debug", web_debug()), t0());
    let p = index.take_pushes(t0()).remove(0);
    index.record_push(
        &p.pod,
        p.ticket,
        failed("rejected", "rejected (401): untrusted_key"),
    );
    assert_eq!(index.next_retry(), None);
}

#[test]
fn a_pod_turning_ready_is_pushed_at_once() {
    let mut index = Index::new();
    let mut starting = pod("web-1", 1, &[("app", "web")]);
    starting.ready = false;
    index.apply_pod(starting.clone(), t0());
    index.apply_policy(policy("debug", web_debug()), t0());
    let p = index.take_pushes(t0()).remove(0);
    index.record_push(
        &p.pod,
        p.ticket,
        failed("unreachable", "connection refused"),
    );
    assert!(index.take_pushes(t0()).is_empty(), "backing off");
    // Nothing changed: still backing off.
    index.apply_pod(starting.clone(), t0());
    assert!(index.take_pushes(t0()).is_empty());
    let mut ready = starting;
    ready.ready = true;
    index.apply_pod(ready.clone(), t0());
    let again = index.take_pushes(t0());
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].ticket, p.ticket, "the same document");
    index.record_push(&again[0].pod, again[0].ticket, PushResult::Applied);
    // Ready again while in sync: nothing to do.
    let mut not_ready = ready.clone();
    not_ready.ready = false;
    index.apply_pod(not_ready, t0());
    index.apply_pod(ready, t0());
    assert!(index.take_pushes(t0()).is_empty());
}

#[test]
fn under_a_limit_a_policy_without_an_expiry_is_refused_and_the_last_valid_one_stays() {
    let limit: logpolicy_api::validate::MaxDuration = "1h".parse().unwrap();
    let mut index = Index::with_max_duration(limit);
    index.apply_pod(pod("web-1", 1, &[("app", "web")]), t0());
    ack_all(&mut index, t0());

    // Forever: refused, nothing pushed.
    index.apply_policy(policy("debug", web_debug()), t0());
    assert!(pushed(&mut index, t0()).is_empty());
    let view = index.policy_view(&pkey("debug")).unwrap();
    let fields: Vec<&str> = view.errors.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(fields, ["spec.duration"]);
    assert_eq!(view.in_force_generation, None);

    // Within the limit: applied.
    let mut short = web_debug();
    short["duration"] = "30m".into();
    index.apply_policy(policy("debug", short), t0());
    assert_eq!(
        pushed(&mut index, t0()),
        names(&[("web-1", &["shop/debug"])])
    );
    assert!(index.policy_view(&pkey("debug")).unwrap().errors.is_empty());

    // Generation 2 asks for two hours: refused; generation 1 stays in force, untouched.
    let mut long = web_debug();
    long["duration"] = "2h".into();
    let mut input = policy("debug", long);
    input.generation = 2;
    index.apply_policy(input, t0() + secs(1));
    assert!(pushed(&mut index, t0() + secs(1)).is_empty());
    let view = index.policy_view(&pkey("debug")).unwrap();
    assert_eq!(view.errors[0].field, "spec.duration");
    assert!(
        view.errors[0]
            .message
            .starts_with("2h is longer than the 1h"),
        "{:?}",
        view.errors
    );
    assert_eq!(view.in_force_generation, Some(1));

    // Without a limit, the same spec applies.
    let mut index = Index::new();
    index.apply_pod(pod("web-1", 1, &[("app", "web")]), t0());
    index.apply_policy(policy("debug", web_debug()), t0());
    assert_eq!(
        pushed(&mut index, t0()),
        names(&[("web-1", &["shop/debug"])])
    );
}

#[test]
fn under_a_limit_a_policy_that_only_lowers_may_stand_and_one_that_raises_may_not() {
    let limit: logpolicy_api::validate::MaxDuration = "24h".parse().unwrap();
    let mut index = Index::with_max_duration(limit);
    index.apply_pod(pod("web-1", 1, &[("app", "web")]), t0());
    ack_all(&mut index, t0());

    // Sampling, a burst limit and a byte budget, no expiry: applied, standing.
    let saving = serde_json::json!({
        "selector": {"matchLabels": {"app": "web"}},
        "sampling": [{"target": "shop::http", "keepOneIn": 10}],
        "burst": {"perSecond": 100, "thenOneIn": 10},
        "maxBytesPerSecond": 1048576,
    });
    index.apply_policy(policy("saving", saving.clone()), t0());
    assert_eq!(
        pushed(&mut index, t0()),
        names(&[("web-1", &["shop/saving"])])
    );
    assert!(index
        .policy_view(&pkey("saving"))
        .unwrap()
        .errors
        .is_empty());

    // What can make a pod write more keeps the limit, each for its own reason.
    let raises = [
        ("defaultLevel", serde_json::json!("info")),
        (
            "targets",
            serde_json::json!([{"target": "shop", "level": "debug"}]),
        ),
        ("alwaysKeep", serde_json::json!("error")),
        (
            "sampling",
            serde_json::json!([{"target": "shop::http", "keepOneIn": 1}]),
        ),
    ];
    for (field, value) in raises {
        let mut spec = saving.clone();
        spec[field] = value;
        let name = format!("raise-{}", field.to_lowercase());
        index.apply_policy(policy(&name, spec), t0());
        let view = index.policy_view(&pkey(&name)).unwrap();
        let fields: Vec<&str> = view.errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["spec.duration"], "{field}");
        assert!(
            view.errors[0].message.contains("only samples"),
            "the reason says what may stand: {}",
            view.errors[0].message
        );
    }
    assert!(pushed(&mut index, t0()).is_empty());
}

/// kstatus's rules for a resource with no type-specific rule (as `kubectl wait`, Flux
/// and Argo CD's kstatus-based checks apply them; ported from cli-utils
/// `pkg/kstatus/status`): a generation not observed yet, or `Reconciling=True`, is
/// InProgress; `Stalled=True` is Failed; then a `Ready` condition decides (False:
/// InProgress); without one the resource is Current.
fn kstatus(generation: i64, status: &logpolicy_api::crd::LogPolicyStatus) -> &'static str {
    let true_ = |type_: &str| {
        status
            .conditions
            .iter()
            .any(|c| c.type_ == type_ && c.status == "True")
    };
    if status.observed_generation.is_some_and(|g| g != generation) {
        return "InProgress";
    }
    if true_("Reconciling") {
        return "InProgress";
    }
    if true_("Stalled") {
        return "Failed";
    }
    match status.conditions.iter().find(|c| c.type_ == "Ready") {
        Some(c) if c.status == "False" => "InProgress",
        _ => "Current",
    }
}

/// The states a policy goes through, as the e2e tests reach them: `(what, generation
/// of the object, its status, its pods not acknowledged yet)`.
type State = (&'static str, i64, logpolicy_api::crd::LogPolicyStatus, u32);

fn gitops_states() -> Vec<State> {
    let mut index = Index::new();
    let now = t0();
    let mut states = Vec::new();
    let mut state = |index: &Index, what: &'static str, name: &str, generation: i64, at| {
        let view = index.policy_view(&pkey(name)).unwrap();
        let status = view.status(None, at);
        states.push((what, generation, status, view.pods_unacknowledged()));
    };
    index.apply_pod(pod("web-1", 1, &[("app", "web")]), now);
    index.apply_pod(pod("web-2", 2, &[("app", "web")]), now);
    let mut v = web_debug();
    v["duration"] = "10m".into();
    index.apply_policy(policy("raise", v), now);
    state(&index, "pending", "raise", 1, now);

    let pushes = index.take_pushes(now);
    index.record_push(&pushes[0].pod, pushes[0].ticket, PushResult::Applied);
    index.record_push(
        &pushes[1].pod,
        pushes[1].ticket,
        failed("timeout", "timeout after 2s"),
    );
    state(&index, "a pod failed", "raise", 1, now);

    let retry = now + secs(30);
    index.tick(retry);
    ack_all(&mut index, retry);
    state(&index, "applied", "raise", 1, retry);
    state(&index, "a new generation not observed", "raise", 2, retry);

    let end = now + secs(600);
    index.tick(end);
    ack_all(&mut index, end);
    state(&index, "expired", "raise", 1, end);

    let mut none = web_debug();
    none["selector"] = serde_json::json!({"matchLabels": {"app": "nothing"}});
    none["duration"] = "10m".into();
    index.apply_policy(policy("idle", none), now);
    state(&index, "no pod selected", "idle", 1, now);

    let mut bad = web_debug();
    bad["selector"] = serde_json::json!({});
    index.apply_policy(policy("broken", bad), now);
    state(&index, "invalid", "broken", 1, now);
    states
}

#[test]
fn gitops_tools_read_each_state_as_in_progress_current_or_failed() {
    let states = gitops_states();
    // (state, kstatus, Reconciling's reason, Ready's status and reason)
    let expected = [
        (
            "pending",
            "InProgress",
            "PodsPending",
            ("False", "PodsPending"),
        ),
        (
            "a pod failed",
            "InProgress",
            "PodsFailed",
            ("False", "PodsFailed"),
        ),
        (
            "applied",
            "Current",
            "AllPodsApplied",
            ("True", "AllPodsApplied"),
        ),
        (
            "a new generation not observed",
            "InProgress",
            "AllPodsApplied",
            ("True", "AllPodsApplied"),
        ),
        ("expired", "Current", "Expired", ("True", "Expired")),
        (
            "no pod selected",
            "Current",
            "NoPodsSelected",
            ("True", "NoPodsSelected"),
        ),
        ("invalid", "Failed", "Invalid", ("False", "Invalid")),
    ];
    assert_eq!(states.len(), expected.len());
    for ((what, generation, status, _), (want, result, reconciling, ready)) in
        states.iter().zip(expected)
    {
        assert_eq!(*what, want);
        assert_eq!(kstatus(*generation, status), result, "{what}: {status:?}");
        let r = condition(status, "Reconciling");
        assert_eq!(r.reason, reconciling, "{what}");
        let c = condition(status, "Ready");
        assert_eq!((c.status.as_str(), c.reason.as_str()), ready, "{what}");
        assert_eq!(c.observed_generation, Some(1), "{what}");
        assert_eq!(r.observed_generation, Some(1), "{what}");
        assert_eq!(condition(status, "Stalled").observed_generation, Some(1));
    }
    let (_, _, invalid, _) = &states[6];
    let stalled = condition(invalid, "Stalled");
    assert_eq!(
        (stalled.status.as_str(), stalled.reason.as_str()),
        ("True", "Invalid")
    );
    assert!(
        stalled.message.starts_with("spec.selector"),
        "{}",
        stalled.message
    );
    let (_, _, expired, _) = &states[4];
    assert_eq!(condition(expired, "Expired").status, "True");
}

/// `value` as a Lua 5.1 table constructor.
fn lua(value: &serde_json::Value) -> String {
    use serde_json::Value;
    match value {
        Value::Null => "nil".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => {
            let mut out = String::from("\"");
            for c in s.chars() {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    '\n' => out.push_str("\\n"),
                    c => out.push(c),
                }
            }
            out + "\""
        }
        Value::Array(items) => format!(
            "{{{}}}",
            items.iter().map(lua).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(map) => format!(
            "{{{}}}",
            map.iter()
                .map(|(k, v)| format!("[{}] = {}", lua(&Value::String(k.clone())), lua(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The chart's Argo CD health check, run by a real Lua 5.1 interpreter (the dialect
/// Argo CD runs, Debian's `lua5.1`) against each state's object; the chart README shows
/// the same script.
#[test]
fn the_argo_cd_health_check_reads_each_state() {
    let chart =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../charts/logpolicy-operator");
    let script = chart.join("health/argocd-logpolicy.lua");
    let text = std::fs::read_to_string(&script).unwrap();
    let readme = std::fs::read_to_string(chart.join("README.md")).unwrap();
    let indented: String = text.lines().map(|l| format!("    {l}\n")).collect();
    assert!(
        readme.contains(&indented.replace("    \n", "\n")),
        "the chart README shows health/argocd-logpolicy.lua as it is"
    );
    let run = |object: &serde_json::Value| {
        let chunk = format!(
            "obj = {}\nlocal hs = assert(loadfile({:?}))()\nio.write(hs.status, \"\\t\", tostring(hs.message))",
            lua(object),
            script.to_str().unwrap()
        );
        let out = std::process::Command::new("lua5.1")
            .args(["-e", &chunk])
            .output()
            .expect("lua5.1 (Debian package lua5.1; scripts/test installs it)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let out = String::from_utf8(out.stdout).unwrap();
        let (status, message) = out.split_once('\t').unwrap();
        (status.to_owned(), message.to_owned())
    };
    let expected = [
        ("pending", "Progressing"),
        ("a pod failed", "Progressing"),
        ("applied", "Healthy"),
        ("a new generation not observed", "Progressing"),
        ("expired", "Healthy"),
        ("no pod selected", "Healthy"),
        ("invalid", "Degraded"),
    ];
    for ((what, generation, status, _), (want, health)) in gitops_states().into_iter().zip(expected)
    {
        assert_eq!(what, want);
        let object = serde_json::json!({
            "metadata": {"name": "raise", "generation": generation},
            "status": status,
        });
        let (got, message) = run(&object);
        assert_eq!(got, health, "{what}: {message}");
        if what == "invalid" {
            assert!(message.starts_with("spec.selector"), "{message}");
        }
        if what == "a pod failed" {
            assert!(message.contains("1 failed"), "{message}");
        }
    }
    let (got, _) = run(&serde_json::json!({"metadata": {"name": "new", "generation": 1}}));
    assert_eq!(got, "Progressing", "no status yet");
}

#[test]
fn the_backlog_counts_pods_whose_document_is_not_acknowledged() {
    let mut index = Index::new();
    index.apply_pod(pod("web-1", 1, &[("app", "web")]), t0());
    index.apply_pod(pod("web-2", 2, &[("app", "web")]), t0());
    index.apply_pod(pod("db-1", 3, &[("app", "db")]), t0());
    index.apply_policy(policy("debug", web_debug()), t0());
    let pushes = index.take_pushes(t0());
    assert_eq!(index.backlog(), pushes.len());
    index.record_push(&pushes[0].pod, pushes[0].ticket, PushResult::Applied);
    assert_eq!(index.backlog(), pushes.len() - 1);
    for p in &pushes[1..] {
        index.record_push(&p.pod, p.ticket, PushResult::Applied);
    }
    assert_eq!(index.backlog(), 0);
}

#[test]
fn the_unacknowledged_pods_are_what_ready_waits_for() {
    let counts: Vec<(&str, u32)> = gitops_states()
        .iter()
        .map(|(what, _, status, unacknowledged)| {
            let ready = condition(status, "Ready");
            let waiting = matches!(ready.reason.as_str(), "PodsPending" | "PodsFailed");
            assert_eq!(*unacknowledged > 0, waiting, "{what}: {ready:?}");
            (*what, *unacknowledged)
        })
        .collect();
    let expected = [
        ("pending", 2),
        ("a pod failed", 1),
        ("applied", 0),
        ("a new generation not observed", 0),
        ("expired", 0),
        ("no pod selected", 0),
        ("invalid", 0),
    ];
    assert_eq!(counts, expected);
}

#[test]
fn a_replay_is_asked_once_per_generation_and_what_the_pods_replayed_is_summed() {
    let mut index = Index::new();
    for (name, ip) in [("web-1", 1), ("web-2", 2)] {
        index.apply_pod(pod(name, ip, &[("app", "web")]), t0());
    }
    // A standing policy that records: no replay asked.
    index.apply_policy(
        policy(
            "record",
            serde_json::json!({"selector": {"matchLabels": {"app": "web"}},
                "record": [{"target": "shop::payment", "level": "debug"}]}),
        ),
        t0(),
    );
    let pushes = ack_all(&mut index, t0());
    let layer = &pushes[0].document.layers[0];
    assert_eq!(layer.record[0].target, "shop::payment");
    assert_eq!(layer.replay, None);
    assert_eq!(index.policy_view(&pkey("record")).unwrap().replay, None);

    // A raise with `replay: {since: 2m}`: the id is the object's uid and generation.
    let mut raise = policy(
        "raise",
        serde_json::json!({"selector": {"matchLabels": {"app": "web"}},
            "targets": [{"target": "shop::payment", "level": "debug"}],
            "replay": {"since": "2m"}, "duration": "15m"}),
    );
    raise.uid = "7c1e".into();
    raise.generation = 3;
    index.apply_policy(raise.clone(), t0());
    let pushes = ack_all(&mut index, t0());
    assert_eq!(pushes.len(), 2);
    let asked = pushes[0]
        .document
        .layers
        .iter()
        .find(|l| l.source == "shop/raise")
        .and_then(|l| l.replay.clone())
        .unwrap();
    assert_eq!((asked.since_seconds, asked.id.as_str()), (120, "7c1e/3"));
    let view = index.policy_view(&pkey("raise")).unwrap();
    assert_eq!(
        view.replay,
        Some(ReplaySummary {
            generation: 3,
            matched: 2,
            ..ReplaySummary::default()
        })
    );

    // The pods say what they replayed: one held the whole window, one less.
    let replay = |id: &str, lines: u64, held: u64| ReplayView {
        policy: "shop/raise".into(),
        id: id.into(),
        at: t0(),
        asked_from: t0() - secs(120),
        held_from: Some(t0() - secs(held)),
        first_at: Some(t0() - secs(held)),
        lines,
        complete: held >= 120,
    };
    let ticket = |p: &Push| p.ticket;
    index.take_changed_policies();
    assert!(index.record_replays(
        &pushes[0].pod,
        ticket(&pushes[0]),
        vec![replay("7c1e/3", 40, 120)]
    ));
    assert!(index.record_replays(
        &pushes[1].pod,
        ticket(&pushes[1]),
        vec![replay("7c1e/3", 25, 50)]
    ));
    assert_eq!(index.take_changed_policies(), [pkey("raise")]);
    // The same report again changes nothing.
    assert!(!index.record_replays(
        &pushes[1].pod,
        ticket(&pushes[1]),
        vec![replay("7c1e/3", 25, 50)]
    ));
    let summary = index.policy_view(&pkey("raise")).unwrap().replay.unwrap();
    assert_eq!(
        summary,
        ReplaySummary {
            generation: 3,
            pods: 2,
            matched: 2,
            lines: 65,
            asked_from: Some(t0() - secs(120)),
            held_from: Some(t0() - secs(50)),
            pods_held_less: 1,
        }
    );
    let status = index
        .policy_view(&pkey("raise"))
        .unwrap()
        .status(None, t0());
    let replay_status = status.replay.unwrap();
    assert_eq!(
        replay_status.summary.as_deref(),
        Some("65 lines, 2/2 pods, 1 held less")
    );
    assert_eq!((replay_status.lines, replay_status.pods_held_less), (65, 1));

    // A push of the same generation (a resync, a renewal) asks the same id: the pods
    // replay nothing again. A new generation asks a new one, and an old generation's
    // replays no longer count.
    raise.generation = 4;
    raise.spec.reason = Some("INC-1: again".into());
    index.apply_policy(raise, t0() + secs(1));
    let pushes = ack_all(&mut index, t0() + secs(1));
    let asked = pushes[0]
        .document
        .layers
        .iter()
        .find_map(|l| l.replay.clone())
        .unwrap();
    assert_eq!(asked.id, "7c1e/4");
    let summary = index.policy_view(&pkey("raise")).unwrap().replay.unwrap();
    assert_eq!((summary.generation, summary.pods, summary.lines), (4, 0, 0));

    // Replays of a policy the pod was not pushed are not kept.
    index.record_replays(
        &pushes[0].pod,
        ticket(&pushes[0]),
        vec![ReplayView {
            policy: "shop/other".into(),
            ..replay("x/1", 3, 10)
        }],
    );
    assert!(!index.record_replays(&pushes[0].pod, ticket(&pushes[0]), Vec::new()));
}

#[test]
fn a_resync_does_not_push_a_pod_whose_push_is_on_the_way() {
    let mut index = Index::new();
    index.apply_pod(pod("web-1", 1, &[("app", "web")]), t0());
    index.apply_policy(policy("debug", web_debug()), t0());
    let push = index.take_pushes(t0()).remove(0);
    // A resync while the push is in flight: neither read back nor pushed again (a
    // second push of the same version would come back stale, and the pod get a third).
    assert!(index.resync().is_empty());
    assert!(index.take_pushes(t0()).is_empty());
    // Its report says it applied: the next resync reads it back.
    index.record_push(&push.pod, push.ticket, PushResult::Applied);
    assert_eq!(index.resync().len(), 1);
    assert!(index.take_pushes(t0()).is_empty());
    let view = index.policy_view(&pkey("debug")).unwrap();
    assert_eq!((view.applied, view.pending), (1, 0));
}

#[test]
fn a_resync_pushes_again_a_pod_whose_push_reported_a_failure() {
    let mut index = Index::new();
    index.apply_pod(pod("web-1", 1, &[("app", "web")]), t0());
    let push = index.take_pushes(t0()).remove(0);
    index.record_push(
        &push.pod,
        push.ticket,
        PushResult::Failed {
            label: "rejected",
            reason: "rejected (401): untrusted_key".to_owned(),
            held: None,
            retry: Retry::No,
        },
    );
    assert!(index.resync().is_empty());
    let again = index.take_pushes(t0());
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].ticket, push.ticket, "the same document, once");
}
