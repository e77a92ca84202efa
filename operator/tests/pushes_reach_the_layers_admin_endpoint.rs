//! The index and the pusher against the layer's real admin endpoint (`logpolicy::admin`),
//! three of them on loopback: a policy reaches the pods' filters, its view counts them,
//! a read-back finds no drift, narrowing and deletion fall back to the baseline, and a
//! pod that is not who the document names, or a key it does not trust, is refused.

#![allow(clippy::unwrap_used)] // test helpers: a failure is a test failure

use std::time::{Duration, SystemTime};

use logpolicy::admin::{AdminConfig, AdminServer, PodIdentity};
use logpolicy::policy::LayerSpec;
use logpolicy::wire::{SigningKey, TrustedKeys};
use logpolicy::{Level, PolicyFilter, PolicyHandle};
use logpolicy_operator::{
    Index, PodInfo, PodKey, PolicyInput, PolicyKey, Push, PushOutcome, PushTicket, Pusher,
    PusherConfig,
};
use tokio::sync::mpsc;

struct Pod {
    name: String,
    admin: AdminServer,
    handle: PolicyHandle,
}

fn start_pod(name: &str, uid: &str, key: &SigningKey) -> Pod {
    let filter = PolicyFilter::from_directives("info").unwrap();
    let config = AdminConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        TrustedKeys::new([key.verifying_key()]),
    )
    .pod(PodIdentity {
        uid: Some(uid.into()),
        name: Some(name.into()),
        namespace: Some("shop".into()),
    });
    let admin = AdminServer::start(config, filter.handle(), None).unwrap();
    Pod {
        name: name.into(),
        admin,
        handle: filter.handle(),
    }
}

fn info(pod: &Pod, uid: &str, tier: &str) -> PodInfo {
    let addr = pod.admin.local_addr();
    PodInfo::new("shop", &pod.name, uid, Some(addr.ip()), addr.port())
        .label("app", "checkout")
        .label("tier", tier)
}

/// Pushes until nothing is left; returns the outcomes.
async fn converge(index: &mut Index, pusher: &Pusher) -> Vec<(String, PushOutcome)> {
    let (tx, mut rx) = mpsc::channel(16);
    let mut out = Vec::new();
    let mut in_flight = 0;
    loop {
        let pushes = index.take_pushes(SystemTime::now());
        in_flight += pushes.len();
        pusher.spawn_all(pushes, &tx);
        if in_flight == 0 {
            return out;
        }
        let report = tokio::time::timeout(Duration::from_secs(20), rx.recv())
            .await
            .unwrap()
            .unwrap();
        in_flight -= 1;
        index.record_push(&report.pod, report.ticket, &report.outcome);
        out.push((report.pod.name, report.outcome));
    }
}

fn spec(v: serde_json::Value) -> logpolicy_operator::LogPolicySpec {
    serde_json::from_value(v).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pushes_reach_the_layers_admin_endpoint() {
    let key = SigningKey::from_bytes(&[7; 32]);
    let pods = [
        start_pod("web-1", "uid-1", &key),
        start_pod("web-2", "uid-2", &key),
        start_pod("web-3", "uid-3", &key),
    ];
    let config = PusherConfig {
        backoff_base: Duration::from_millis(10),
        ..PusherConfig::default()
    };
    let pusher = Pusher::new(key.clone(), config.clone());
    let mut index = Index::new();
    index.apply_pod(info(&pods[0], "uid-1", "canary"), SystemTime::now());
    index.apply_pod(info(&pods[1], "uid-2", "canary"), SystemTime::now());
    index.apply_pod(info(&pods[2], "uid-3", "main"), SystemTime::now());

    let raise = serde_json::json!({"selector": {"matchLabels": {"app": "checkout"}},
        "targets": [{"target": "shop::payment", "level": "debug"}], "duration": "15m"});
    index.apply_policy(
        PolicyInput::new("shop", "debug-payments", spec(raise.clone())),
        SystemTime::now(),
    );
    let outcomes = converge(&mut index, &pusher).await;
    assert!(
        outcomes.iter().all(|(_, o)| *o == PushOutcome::Applied),
        "{outcomes:?}"
    );
    for pod in &pods {
        assert_eq!(
            pod.handle.effective().level_for("shop::payment"),
            Level::Debug,
            "{}",
            pod.name
        );
        assert_eq!(pod.handle.effective().level_for("shop::db"), Level::Info);
    }
    let key_of = PolicyKey::new("shop", "debug-payments");
    let view = index.policy_view(&key_of).unwrap();
    assert_eq!((view.matched, view.applied, view.failed), (3, 3, 0));

    // A resync reads every pod back: no drift.
    for target in index.resync() {
        let read = pusher.read_back(target.addr).await.unwrap();
        assert!(
            read.sources.contains(&"shop/debug-payments".to_owned()),
            "{read:?}"
        );
        assert!(!index.record_read_back(&target.pod, target.ticket, read.version));
    }

    // Narrowing reverts exactly the pod no longer covered.
    let mut narrow = raise;
    narrow["selector"] = serde_json::json!({"matchLabels": {"app": "checkout", "tier": "canary"}});
    let mut input = PolicyInput::new("shop", "debug-payments", spec(narrow));
    input.generation = 2;
    index.apply_policy(input, SystemTime::now());
    let outcomes = converge(&mut index, &pusher).await;
    assert_eq!(outcomes.iter().filter(|(n, _)| n == "web-3").count(), 1);
    assert_eq!(
        pods[2].handle.effective().level_for("shop::payment"),
        Level::Info
    );

    // Deleting the policy: every pod back to its baseline.
    index.delete_policy(&key_of);
    converge(&mut index, &pusher).await;
    for pod in &pods {
        assert_eq!(
            pod.handle.effective().level_for("shop::payment"),
            Level::Info,
            "{}",
            pod.name
        );
    }

    // A document naming another uid is refused by the pod, and reported with its reason.
    index.apply_pod(
        info(&pods[0], "uid-someone-else", "canary"),
        SystemTime::now(),
    );
    let outcomes = converge(&mut index, &pusher).await;
    assert!(
        matches!(&outcomes[..], [(_, PushOutcome::Rejected { status: 403, reason })] if reason.starts_with("wrong_pod")),
        "{outcomes:?}"
    );

    // A key the pods do not trust is refused, and changes nothing.
    let forged = Pusher::new(SigningKey::from_bytes(&[8; 32]), config);
    let pod = PodKey::new("shop", "web-2");
    let mut document = index.document(&pod).unwrap();
    document.version += 1;
    document.layers = vec![LayerSpec::from_directives(
        "shop/forged",
        0,
        "trace".parse().unwrap(),
    )];
    let push = Push {
        pod,
        addr: pods[1].admin.local_addr(),
        ticket: PushTicket {
            version: document.version,
            epoch: 0,
        },
        document,
        lane: logpolicy_operator::index::Lane::Unproven,
    };
    let report = forged.push(&push).await;
    assert!(
        matches!(&report.outcome, PushOutcome::Rejected { status: 401, reason } if reason.starts_with("untrusted_key")),
        "{:?}",
        report.outcome
    );
    assert_eq!(report.attempts, 1);
    assert_eq!(
        pods[1].handle.effective().level_for("shop::db"),
        Level::Info
    );
}
