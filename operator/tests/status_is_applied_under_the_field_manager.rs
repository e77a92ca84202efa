//! The status writer against a scripted API server: a LogPolicy's status is one
//! server-side apply of the `status` subresource, under the operator's field manager,
//! forced; a policy deleted meanwhile is done with, a failed write is to be retried, and
//! each is counted.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure is a test failure

mod fixtures;

use std::time::Duration;

use fixtures::{answer, counted, failure, finished, ApiServerVerifier, APPLY_PATCH};
use hyper::Method;
use logpolicy_operator::metrics::ByResult;
use logpolicy_operator::status_writer::{StatusWrite, StatusWriter};
use logpolicy_operator::{LogPolicy, LogPolicyStatus, PolicyKey};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

const PATH: &str = "/apis/logpolicy.dev/v1beta1/namespaces/shop/logpolicies/debug-payments/status";
const APPLY: &[(&str, &str)] = &[("fieldManager", "logpolicy-operator"), ("force", "true")];

fn status() -> LogPolicyStatus {
    serde_json::from_value(serde_json::json!({
        "observedGeneration": 2,
        "conditions": [{"type": "Ready", "status": "True", "reason": "Valid",
            "message": "the policy is valid and in force", "observedGeneration": 2,
            "lastTransitionTime": "2026-11-29T20:00:00Z"}],
        "matchedPods": 3, "appliedPods": 2, "failedPods": 1,
        "failingPods": [{"name": "web-3", "reason": "timeout after 2s"}],
        "summary": "2/3",
        "expirationTime": "2026-11-29T20:15:00Z",
    }))
    .unwrap()
}

/// The object as the API server returns it after the apply.
fn policy_with(status: &LogPolicyStatus) -> serde_json::Value {
    let mut policy: LogPolicy = serde_json::from_value(serde_json::json!({
        "apiVersion": "logpolicy.dev/v1beta1", "kind": "LogPolicy",
        "metadata": {"name": "debug-payments", "namespace": "shop", "generation": 2},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "defaultLevel": "debug"},
    }))
    .unwrap();
    policy.status = Some(status.clone());
    serde_json::to_value(policy).unwrap()
}

/// Scenarios: what the API server answers to the status applies it expects.
enum Scenario {
    /// One apply of the status, accepted.
    Applied(Box<LogPolicyStatus>),
    /// One apply, answered 404: the policy is gone.
    PolicyGone,
    /// One apply, answered 500.
    ServerFails,
}

impl Scenario {
    fn run(self, mut api: ApiServerVerifier) -> tokio::task::JoinHandle<ApiServerVerifier> {
        tokio::spawn(async move {
            let (call, send) = api.expect(Method::PATCH, PATH, APPLY).await;
            assert_eq!(call.content_type.as_deref(), Some(APPLY_PATCH));
            assert_eq!(call.body["apiVersion"], "logpolicy.dev/v1beta1");
            assert_eq!(call.body["kind"], "LogPolicy");
            assert_eq!(
                call.body.as_object().map(|o| o.len()),
                Some(3),
                "only apiVersion, kind and status are applied: {:#}",
                call.body
            );
            let written: LogPolicyStatus =
                serde_json::from_value(call.body["status"].clone()).unwrap();
            assert_eq!(written, status(), "the status applied is the one given");
            send.send_response(match self {
                Scenario::Applied(status) => answer(200, &policy_with(&status)),
                Scenario::PolicyGone => {
                    failure(404, "NotFound", "logpolicies \"debug-payments\" not found")
                }
                Scenario::ServerFails => {
                    failure(500, "InternalError", "etcdserver: request timed out")
                }
            });
            api
        })
    }
}

#[tokio::test(start_paused = true)]
async fn a_status_is_one_forced_apply_of_the_status_subresource_under_the_field_manager() {
    let (client, api) = fixtures::client();
    let writes = ByResult::default();
    let writer = StatusWriter::new(client, 8, writes.clone());
    let scenario = Scenario::Applied(Box::new(status())).run(api);

    let key = PolicyKey::new("shop", "debug-payments");
    assert!(writer.write(&key, &status()).await, "written: done");
    let mut api = finished(scenario).await;
    api.no_more_calls(Duration::from_secs(1)).await;
    assert_eq!((counted(&writes, "ok"), counted(&writes, "error")), (1, 0));
}

#[tokio::test(start_paused = true)]
async fn a_deleted_policy_is_done_with_and_a_failed_write_is_to_be_retried() {
    let key = PolicyKey::new("shop", "debug-payments");

    let (client, api) = fixtures::client();
    let writes = ByResult::default();
    let writer = StatusWriter::new(client, 8, writes.clone());
    let scenario = Scenario::PolicyGone.run(api);
    assert!(
        writer.write(&key, &status()).await,
        "gone: nothing to retry"
    );
    finished(scenario).await;
    assert_eq!((counted(&writes, "ok"), counted(&writes, "error")), (0, 0));

    // Spawned as the controller does: the result comes back on the channel.
    let (client, api) = fixtures::client();
    let writer = StatusWriter::new(client, 8, writes.clone());
    let scenario = Scenario::ServerFails.run(api);
    let (results, mut written) = mpsc::channel(1);
    let mut tasks = JoinSet::new();
    writer.spawn(&mut tasks, &results, key.clone(), status());
    let result = written.recv().await.unwrap();
    assert_eq!(
        result,
        StatusWrite {
            key,
            status: status(),
            done: false
        },
        "a failed write is retried"
    );
    let mut api = finished(scenario).await;
    api.no_more_calls(Duration::from_secs(1)).await;
    assert_eq!((counted(&writes, "ok"), counted(&writes, "error")), (0, 1));
}
