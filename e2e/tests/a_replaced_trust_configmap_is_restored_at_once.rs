//! Whoever may write ConfigMaps in a namespace tries to make its pods trust another key,
//! on the real API server, against the real operator running with exactly the chart's
//! RBAC: the `logpolicy-trust` ConfigMap's data replaced with an attacker's key, the
//! attacker's key added beside the operator's (and as a file of its own), the map made
//! `immutable` with the attacker's key, and the map deleted. Each time the operator puts
//! back exactly what it writes, within `BOUND` (each time measured and printed), counts
//! each restore in `logpolicy_operator_trust_configmap_restores_total`, and records a
//! `TrustRestored` Event on the ConfigMap. The operator may list ConfigMaps only by that
//! name (the chart's `resourceNames`), and does.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure is a test failure

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::Api;
use logpolicy::wire::{encode_public_key, key_id, SigningKey};
use logpolicy_e2e::net::{next_pod_ip, Unanswering};
use logpolicy_e2e::operator::{TRUST_CONFIG_MAP, TRUST_DATA_KEY};
use logpolicy_e2e::pod::create_running_pods;
use logpolicy_e2e::process::wait_for;
use logpolicy_e2e::{Operator, Scenario};
use serde_json::{json, Value};

/// The longest a restore may take, from the attacker's write returning.
const BOUND: Duration = Duration::from_secs(2);

/// The restores counter in `/metrics` text.
fn restores(metrics: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| {
            l.strip_prefix("logpolicy_operator_trust_configmap_restores_total ")
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// What the operator writes: its data and its label (others' labels do not matter).
fn content(cm: &ConfigMap) -> (BTreeMap<String, String>, bool, bool, Option<String>) {
    (
        cm.data.clone().unwrap_or_default(),
        cm.binary_data.as_ref().is_some_and(|b| !b.is_empty()),
        cm.immutable == Some(true),
        cm.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("app.kubernetes.io/managed-by"))
            .cloned(),
    )
}

/// Polls the ConfigMap every 5 ms from `start` until it holds `expected` again; the
/// time it took.
async fn restored_within(
    api: &Api<ConfigMap>,
    expected: &ConfigMap,
    start: Instant,
    what: &str,
) -> Duration {
    let want = content(expected);
    loop {
        if let Some(cm) = api.get_opt(TRUST_CONFIG_MAP).await.unwrap() {
            if content(&cm) == want {
                let took = start.elapsed();
                eprintln!("{what}: restored after {:.1} ms", took.as_secs_f64() * 1e3);
                return took;
            }
        }
        assert!(
            start.elapsed() < BOUND,
            "{what}: not restored within {BOUND:?}: {:?}",
            api.get_opt(TRUST_CONFIG_MAP)
                .await
                .unwrap()
                .map(|c| content(&c))
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// An attacker's JSON merge patch of the ConfigMap; the time it returned.
async fn merge_patch(api: &Api<ConfigMap>, patch: Value) -> Instant {
    api.patch(
        TRUST_CONFIG_MAP,
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .unwrap();
    Instant::now()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replaced_trust_configmap_is_restored_at_once() {
    let _file = crate::one_file_at_a_time(module_path!());
    let operator = Operator::shared().unwrap();
    let s = Scenario::new("trust").await.unwrap();
    // One opted-in pod: the operator writes the ConfigMap into its namespace. Its
    // address never answers (this test is about the ConfigMap, not the pushes).
    let unanswering = Unanswering::bind(next_pod_ip()).await.unwrap();
    let labels = BTreeMap::from([("app".to_owned(), "shop".to_owned())]);
    create_running_pods(
        &s.client,
        s.namespace(),
        "p",
        1,
        &labels,
        unanswering.addr().unwrap(),
    )
    .await
    .unwrap();
    s.trust_config_map().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(s.client.clone(), s.namespace());
    let expected = api.get(TRUST_CONFIG_MAP).await.unwrap();
    let before = restores(&operator.metrics().unwrap());

    let attacker = SigningKey::from_bytes(&[0xA7; 32]).verifying_key();
    let attacker_keys = format!(
        "# attacker, id {}\n{}\n",
        key_id(&attacker),
        encode_public_key(&attacker)
    );
    let ours = expected.data.as_ref().unwrap()[TRUST_DATA_KEY].clone();
    let mut took = Vec::new();

    // 1. Replaced (PUT) with the attacker's key only, the label gone.
    let mut replaced = api.get(TRUST_CONFIG_MAP).await.unwrap();
    replaced.metadata.labels = None;
    replaced.data = Some(BTreeMap::from([(
        TRUST_DATA_KEY.to_owned(),
        attacker_keys.clone(),
    )]));
    api.replace(TRUST_CONFIG_MAP, &PostParams::default(), &replaced)
        .await
        .unwrap();
    let start = Instant::now();
    took.push(restored_within(&api, &expected, start, "replaced").await);

    // 2. The attacker's key added beside the operator's, and as a file of its own.
    let patch = json!({"data": {
        TRUST_DATA_KEY: format!("{ours}{attacker_keys}"),
        "attacker-keys": attacker_keys,
    }});
    let start = merge_patch(&api, patch).await;
    took.push(restored_within(&api, &expected, start, "added").await);

    // 3. Made immutable with the attacker's key: no write can change it back.
    let patch = json!({"immutable": true, "data": {TRUST_DATA_KEY: attacker_keys}});
    let start = merge_patch(&api, patch).await;
    took.push(restored_within(&api, &expected, start, "immutable").await);

    // 4. Deleted.
    api.delete(TRUST_CONFIG_MAP, &DeleteParams::default())
        .await
        .unwrap();
    let start = Instant::now();
    took.push(restored_within(&api, &expected, start, "deleted").await);

    let ms: Vec<String> = took
        .iter()
        .map(|d| format!("{:.1}", d.as_secs_f64() * 1e3))
        .collect();
    eprintln!("time to restore (ms): replaced, added, immutable, deleted: {ms:?}");

    // Each restore counted once (the operator's own deletion of the immutable map is
    // not a restore of its own).
    let counted = wait_for(Duration::from_secs(5), "4 restores counted", || {
        let n = restores(&operator.metrics()?) - before;
        Ok((n >= 4).then_some(n))
    })
    .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let settled = restores(&operator.metrics().unwrap()) - before;
    assert_eq!((counted, settled), (4, 4));

    // Recorded as an Event on the ConfigMap (repeats of the same reason within minutes
    // are one Event whose series counts them), and in the log, naming what was found.
    let events = wait_for(Duration::from_secs(10), "a TrustRestored Event", || {
        let events: Vec<String> = s
            .events_about("ConfigMap", TRUST_CONFIG_MAP)?
            .into_iter()
            .filter(|e| e.starts_with("TrustRestored: "))
            .collect();
        Ok((!events.is_empty()).then_some(events))
    })
    .unwrap();
    eprintln!("{events:#?}");
    assert!(
        events[0].starts_with(
            "TrustRestored: changed by someone else (data.trusted-keys is not the operator's key"
        ),
        "{events:?}"
    );
    let log = operator.tail(400);
    for what in [
        r#""what":"data.trusted-keys is not the operator's key; the label"#,
        r#"data has keys the operator does not write: [\"attacker-keys\"]"#,
        "it is immutable",
        r#""what":"deleted""#,
    ] {
        assert!(log.contains(what), "{what}: {log}");
    }
    assert_eq!(operator.forbidden_lines(), Vec::<String>::new());

    // The chart lets the operator list (and watch) ConfigMaps only by that name: the API
    // server authorizes a list with the field selector `metadata.name=NAME` as a
    // request for NAME (what its `resourceNames` rule matches), in one namespace and
    // across all; without the selector it is refused.
    let cluster = s.cluster;
    let as_operator = |args: &[&str]| cluster.kubectl_as(&operator.kubeconfig, args);
    let by_name = format!("--field-selector=metadata.name={TRUST_CONFIG_MAP}");
    for scope in ["-A", "--namespace"] {
        let mut args = vec!["get", "configmaps", "-o", "name", by_name.as_str(), scope];
        if scope == "--namespace" {
            args.push(s.namespace());
        }
        let listed = as_operator(&args).unwrap();
        assert!(listed.contains(TRUST_CONFIG_MAP), "{args:?}: {listed}");
        args.retain(|a| *a != by_name);
        let refused = as_operator(&args).unwrap_err().0;
        assert!(refused.contains("forbidden"), "{args:?}: {refused}");
    }
}
