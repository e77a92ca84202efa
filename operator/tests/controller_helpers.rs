//! The controller's pure helpers, without an API server: watch events into the index,
//! relist buffering, malformed objects skipped, and the status debounce.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant, SystemTime};

use kube::api::DynamicObject;
use kube::runtime::watcher::Event;
use logpolicy_operator::controller::{
    apply_pod_event, apply_policy_event, Applied, Debounce, InitBuffer,
};
use logpolicy_operator::{Index, PodInfo, PolicyKey};

fn policy(name: &str, spec: serde_json::Value) -> DynamicObject {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "logpolicy.dev/v1beta1",
        "kind": "LogPolicy",
        "metadata": {"name": name, "namespace": "shop", "generation": 1},
        "spec": spec,
    }))
    .unwrap_or_else(|e| panic!("test object: {e}"))
}

fn pod(name: &str) -> PodInfo {
    PodInfo::new(
        "shop",
        name,
        &format!("uid-{name}"),
        Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))),
        9090,
    )
    .label("app", "checkout")
}

#[test]
fn relists_reset_the_index_once_complete_and_malformed_policies_are_skipped() {
    let now = SystemTime::now();
    let mut index = Index::new();
    let mut pods = InitBuffer::default();
    assert_eq!(
        apply_pod_event(&mut index, &mut pods, None, Event::Init, now),
        Applied::Buffered
    );
    for name in ["a", "b"] {
        let ev = Event::InitApply(Some(pod(name)));
        assert_eq!(
            apply_pod_event(&mut index, &mut pods, None, ev, now),
            Applied::Buffered
        );
    }
    assert_eq!(index.pod_count(), 0, "nothing applied before InitDone");
    assert_eq!(
        apply_pod_event(&mut index, &mut pods, None, Event::InitDone, now),
        Applied::InitDone
    );
    assert_eq!(index.pod_count(), 2);
    assert!(!pods.in_progress());
    assert_eq!(
        index.take_pushes(now).len(),
        2,
        "every opted-in pod gets its document"
    );

    let mut policies = InitBuffer::default();
    let mut statuses = HashMap::new();
    let good = policy(
        "debug",
        serde_json::json!({"selector": {"matchLabels": {"app": "checkout"}}, "defaultLevel": "debug"}),
    );
    let bad = policy("broken", serde_json::json!({"defaultLevel": 42}));
    let r = apply_policy_event(
        &mut index,
        &mut policies,
        &mut statuses,
        None,
        Event::Apply(bad),
        now,
    );
    assert!(matches!(r, Applied::Skipped(_)), "{r:?}");
    let r = apply_policy_event(
        &mut index,
        &mut policies,
        &mut statuses,
        None,
        Event::Apply(good.clone()),
        now,
    );
    assert_eq!(r, Applied::Changed);
    let key = PolicyKey::new("shop", "debug");
    assert!(index.policy_view(&key).is_some());
    assert!(index.take_changed_policies().contains(&key));
    assert_eq!(
        index.take_pushes(now).len(),
        2,
        "the policy reaches both pods"
    );

    let r = apply_pod_event(
        &mut index,
        &mut pods,
        None,
        Event::Delete(Some(pod("a"))),
        now,
    );
    assert_eq!(r, Applied::Changed);
    assert_eq!(index.pod_count(), 1);

    let r = apply_policy_event(
        &mut index,
        &mut policies,
        &mut statuses,
        None,
        Event::Delete(good),
        now,
    );
    assert_eq!(r, Applied::Changed);
    assert!(index.policy_view(&key).is_none());
    assert!(statuses.is_empty());
}

fn pod_in(ns: &str, name: &str) -> PodInfo {
    PodInfo::new(ns, name, &format!("uid-{name}"), None, 9090)
}

#[test]
fn a_namespaced_relist_replaces_only_its_namespace() {
    let now = SystemTime::now();
    let mut index = Index::new();
    let (mut a, mut b) = (InitBuffer::default(), InitBuffer::default());
    // Two watchers' relists interleave.
    apply_pod_event(&mut index, &mut a, Some("a"), Event::Init, now);
    apply_pod_event(&mut index, &mut b, Some("b"), Event::Init, now);
    let ev = Event::InitApply(Some(pod_in("a", "a1")));
    apply_pod_event(&mut index, &mut a, Some("a"), ev, now);
    let ev = Event::InitApply(Some(pod_in("b", "b1")));
    apply_pod_event(&mut index, &mut b, Some("b"), ev, now);
    apply_pod_event(&mut index, &mut b, Some("b"), Event::InitDone, now);
    apply_pod_event(&mut index, &mut a, Some("a"), Event::InitDone, now);
    assert_eq!(index.pod_count(), 2, "b's relist does not drop a's pods");
    // A restarted watch of a (empty now) drops a's pods only.
    apply_pod_event(&mut index, &mut a, Some("a"), Event::Init, now);
    apply_pod_event(&mut index, &mut a, Some("a"), Event::InitDone, now);
    let views = index.pod_views();
    assert_eq!(views.len(), 1);
    assert_eq!(views[0].namespace, "b");

    // The same for policies, and what is kept of them.
    let mut statuses = HashMap::new();
    let mut pa = InitBuffer::default();
    let pol = |ns: &str, name: &str| {
        let mut obj = policy(
            name,
            serde_json::json!({"selector": {"matchLabels": {"app": "x"}}, "defaultLevel": "debug"}),
        );
        obj.metadata.namespace = Some(ns.to_owned());
        obj
    };
    let other = pol("b", "kept");
    apply_policy_event(
        &mut index,
        &mut pa,
        &mut statuses,
        Some("b"),
        Event::Apply(other),
        now,
    );
    apply_policy_event(
        &mut index,
        &mut pa,
        &mut statuses,
        Some("a"),
        Event::Init,
        now,
    );
    let ev = Event::InitApply(pol("a", "new"));
    apply_policy_event(&mut index, &mut pa, &mut statuses, Some("a"), ev, now);
    apply_policy_event(
        &mut index,
        &mut pa,
        &mut statuses,
        Some("a"),
        Event::InitDone,
        now,
    );
    assert_eq!(index.policy_count(), 2);
    assert!(statuses.contains_key(&PolicyKey::new("b", "kept")));
    assert!(statuses.contains_key(&PolicyKey::new("a", "new")));
}

#[test]
fn watch_scopes_are_all_namespaces_or_each_one_named() {
    use logpolicy_operator::watches::watch_scopes;
    assert_eq!(watch_scopes(&[]), vec![None]);
    assert_eq!(watch_scopes(&[String::new()]), vec![None]);
    assert_eq!(
        watch_scopes(&["b".into(), " a ".into(), "b".into(), "".into()]),
        vec![Some("a".to_owned()), Some("b".to_owned())]
    );
}

#[test]
fn debounce_writes_a_key_at_most_once_per_interval() {
    let t0 = Instant::now();
    let ms = Duration::from_millis;
    let mut d = Debounce::new(ms(500));
    d.mark("p", t0);
    assert_eq!(d.take_due(t0), vec!["p"]);
    assert_eq!(d.next_due(), None);
    d.mark("p", t0 + ms(100));
    d.mark("p", t0 + ms(200));
    d.mark("q", t0 + ms(200));
    assert_eq!(
        d.take_due(t0 + ms(200)),
        vec!["q"],
        "p waits for its interval"
    );
    assert_eq!(d.next_due(), Some(t0 + ms(500)));
    assert!(d.take_due(t0 + ms(499)).is_empty());
    assert_eq!(d.take_due(t0 + ms(500)), vec!["p"]);
    assert!(d.take_due(t0 + ms(2000)).is_empty());
}
