//! The trust publisher against a scripted API server: the `logpolicy-trust` ConfigMap is
//! one server-side apply per namespace asked for (each namespace once however often it
//! is asked), under the operator's field manager, forced, holding the public key in the
//! format the layer reads; a failed apply is retried 5 s later and counted.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure is a test failure

mod fixtures;

use std::time::Duration;

use fixtures::{answer, counted, failure, finished, ApiServerVerifier, APPLY_PATCH};
use hyper::Method;
use logpolicy::wire::{key_id, SigningKey, TrustedKeys, VerifyingKey};
use logpolicy_operator::metrics::ByResult;
use logpolicy_operator::trust::TrustPublisher;

const APPLY: &[(&str, &str)] = &[("fieldManager", "logpolicy-operator"), ("force", "true")];

fn key() -> VerifyingKey {
    SigningKey::from_bytes(&[7; 32]).verifying_key()
}

fn path(namespace: &str) -> String {
    format!("/api/v1/namespaces/{namespace}/configmaps/logpolicy-trust")
}

/// What the API server expects of each call, in order.
enum Step {
    /// An apply of the ConfigMap in this namespace, accepted.
    Applied(&'static str),
    /// An apply in this namespace, answered 500.
    Fails(&'static str),
}

/// Asserts one apply of the trust ConfigMap in `namespace`; returns its answer channel.
async fn expect_apply(
    api: &mut ApiServerVerifier,
    namespace: &str,
) -> tower_test::mock::SendResponse<hyper::Response<kube::client::Body>> {
    let (call, send) = api.expect(Method::PATCH, &path(namespace), APPLY).await;
    assert_eq!(call.content_type.as_deref(), Some(APPLY_PATCH));
    let cm = &call.body;
    assert_eq!(
        (&cm["apiVersion"], &cm["kind"]),
        (&"v1".into(), &"ConfigMap".into())
    );
    assert_eq!(cm["metadata"]["name"], "logpolicy-trust");
    assert_eq!(cm["metadata"]["namespace"], namespace);
    assert_eq!(
        cm["metadata"]["labels"],
        serde_json::json!({"app.kubernetes.io/managed-by": "logpolicy-operator"})
    );
    let data = cm["data"].as_object().unwrap();
    assert_eq!(data.len(), 1, "{cm:#}");
    let keys = TrustedKeys::parse(data["trusted-keys"].as_str().unwrap()).unwrap();
    assert_eq!(keys.len(), 1);
    assert!(keys.get(&key_id(&key())).is_some(), "the operator's key");
    send
}

fn run(steps: Vec<Step>, mut api: ApiServerVerifier) -> tokio::task::JoinHandle<ApiServerVerifier> {
    tokio::spawn(async move {
        for step in steps {
            match step {
                Step::Applied(ns) => {
                    let send = expect_apply(&mut api, ns).await;
                    let mut cm = serde_json::to_value(logpolicy_operator::trust::trust_config_map(
                        ns,
                        &key(),
                    ))
                    .unwrap();
                    cm["metadata"]["resourceVersion"] = "1".into();
                    send.send_response(answer(200, &cm));
                }
                Step::Fails(ns) => {
                    let send = expect_apply(&mut api, ns).await;
                    send.send_response(failure(500, "InternalError", "etcdserver: leader changed"));
                }
            }
        }
        api
    })
}

#[tokio::test(start_paused = true)]
async fn each_namespace_asked_for_gets_one_apply() {
    let (client, api) = fixtures::client();
    let writes = ByResult::default();
    let trust = TrustPublisher::spawn(client, key(), writes.clone());
    // Asked for before the publisher's task runs: one apply each, in name order.
    for ns in ["shop", "payments", "shop", "shop"] {
        trust.publish(ns);
    }
    let scenario = run(vec![Step::Applied("payments"), Step::Applied("shop")], api);
    let mut api = finished(scenario).await;
    api.no_more_calls(Duration::from_secs(60)).await;
    assert_eq!((counted(&writes, "ok"), counted(&writes, "error")), (2, 0));
}

#[tokio::test(start_paused = true)]
async fn a_failed_apply_is_retried_five_seconds_later() {
    let (client, api) = fixtures::client();
    let writes = ByResult::default();
    let trust = TrustPublisher::spawn(client, key(), writes.clone());
    trust.publish("shop");
    let scenario = run(vec![Step::Fails("shop")], api);
    let api = finished(scenario).await;
    let failed_at = tokio::time::Instant::now();
    let scenario = run(vec![Step::Applied("shop")], api);
    let mut api = finished(scenario).await;
    let waited = failed_at.elapsed();
    assert!(
        waited >= Duration::from_secs(5) && waited < Duration::from_secs(6),
        "retried after {waited:?}"
    );
    api.no_more_calls(Duration::from_secs(60)).await;
    assert_eq!((counted(&writes, "ok"), counted(&writes, "error")), (1, 1));
}
