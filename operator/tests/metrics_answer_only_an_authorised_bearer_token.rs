//! `/metrics` with `--metrics-auth token` against a scripted API server: no token or an
//! unknown one gets 401 (`WWW-Authenticate: Bearer`) and a known token whose user may not
//! `get /metrics` 403, each from the TokenReview and SubjectAccessReview the operator
//! sends (asserted field by field); an allowed token is renewed in the background before
//! it expires, not reviewed per scrape; an API server that fails, refuses the operator
//! or does not answer gets 503, and is asked again next time. `/healthz` and `/readyz`
//! need no token; `/pods` needs one only from the network.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure is a test failure

mod fixtures;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use fixtures::{answer, failure, finished, ApiServerVerifier};
use http_body_util::BodyExt;
use hyper::{Method, Request};
use logpolicy_operator::access::TokenAccess;
use logpolicy_operator::http::{Endpoints, PodsView};
use logpolicy_operator::metrics::Metrics;
use serde_json::json;

const TOKEN_REVIEWS: &str = "/apis/authentication.k8s.io/v1/tokenreviews";
const ACCESS_REVIEWS: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
const PROMETHEUS: &str = "system:serviceaccount:monitoring:prometheus";

fn loopback() -> IpAddr {
    IpAddr::from([127, 0, 0, 1])
}

fn remote() -> IpAddr {
    IpAddr::from([10, 1, 2, 3])
}

/// Endpoints whose guarded paths are checked through the returned scripted API server.
fn endpoints(pods_view: PodsView) -> (Endpoints, ApiServerVerifier) {
    let (client, api) = fixtures::client();
    let access = Arc::new(TokenAccess::default());
    access.set_client(client);
    // No pods tracked: the view reads the last value even with the sender gone.
    let (source, views) = logpolicy_operator::controller::pod_views();
    source.answer_with(Vec::new());
    let endpoints = Endpoints::new(Arc::default(), Metrics::default().registry(), views)
        .pods_view(pods_view)
        .token_access(access);
    (endpoints, api)
}

/// A reply: status, `WWW-Authenticate`, body.
#[derive(Debug)]
struct Reply {
    status: u16,
    challenge: Option<String>,
    body: String,
}

async fn get(
    endpoints: &Endpoints,
    path: &str,
    authorization: Option<&str>,
    peer: IpAddr,
) -> Reply {
    let mut request = Request::builder().method(Method::GET).uri(path);
    if let Some(a) = authorization {
        request = request.header(hyper::header::AUTHORIZATION, a);
    }
    let response = endpoints.respond(&request.body(()).unwrap(), peer).await;
    let status = response.status().as_u16();
    let challenge = response
        .headers()
        .get(hyper::header::WWW_AUTHENTICATE)
        .map(|v| v.to_str().unwrap().to_owned());
    let body = response.into_body().collect().await.unwrap().to_bytes();
    Reply {
        status,
        challenge,
        body: String::from_utf8(body.to_vec()).unwrap(),
    }
}

/// What the API server answers a TokenReview with.
enum Token {
    /// Authenticated as `PROMETHEUS`.
    Known,
    /// Not authenticated, with this error.
    Unknown(&'static str),
}

/// Asserts the TokenReview of `token` and answers it.
async fn expect_token_review(api: &mut ApiServerVerifier, token: &str, answer_with: Token) {
    let (call, send) = api.expect(Method::POST, TOKEN_REVIEWS, &[]).await;
    let review = &call.body;
    assert_eq!(
        (&review["apiVersion"], &review["kind"]),
        (&json!("authentication.k8s.io/v1"), &json!("TokenReview"))
    );
    // The API server's own audiences: none asked for.
    assert_eq!(review["spec"], json!({"token": token}), "{review:#}");
    let status = match answer_with {
        Token::Known => json!({
            "authenticated": true,
            "user": {
                "username": PROMETHEUS,
                "uid": "4f1e",
                "groups": ["system:serviceaccounts", "system:serviceaccounts:monitoring", "system:authenticated"],
                "extra": {"authentication.kubernetes.io/pod-name": ["prometheus-0"]},
            },
            "audiences": ["https://kubernetes.default.svc.cluster.local"],
        }),
        Token::Unknown(error) => json!({"authenticated": false, "error": error}),
    };
    let mut reply = review.clone();
    reply["status"] = status;
    send.send_response(answer(201, &reply));
}

/// Asserts the SubjectAccessReview of `get path` for `PROMETHEUS` and answers it.
async fn expect_access_review(api: &mut ApiServerVerifier, path: &str, allowed: bool) {
    let (call, send) = api.expect(Method::POST, ACCESS_REVIEWS, &[]).await;
    let review = &call.body;
    assert_eq!(
        (&review["apiVersion"], &review["kind"]),
        (
            &json!("authorization.k8s.io/v1"),
            &json!("SubjectAccessReview")
        )
    );
    assert_eq!(
        review["spec"],
        json!({
            "user": PROMETHEUS,
            "uid": "4f1e",
            "groups": ["system:serviceaccounts", "system:serviceaccounts:monitoring", "system:authenticated"],
            "extra": {"authentication.kubernetes.io/pod-name": ["prometheus-0"]},
            "nonResourceAttributes": {"path": path, "verb": "get"},
        }),
        "{review:#}"
    );
    let mut reply = review.clone();
    reply["status"] = if allowed {
        json!({"allowed": true, "reason": "RBAC: allowed by ClusterRoleBinding \"scrape\""})
    } else {
        json!({"allowed": false})
    };
    send.send_response(answer(201, &reply));
}

fn scenario<F, Fut>(api: ApiServerVerifier, script: F) -> tokio::task::JoinHandle<ApiServerVerifier>
where
    F: FnOnce(ApiServerVerifier) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ApiServerVerifier> + Send + 'static,
{
    tokio::spawn(script(api))
}

/// The API server's part of one request with a known token: its TokenReview, then the
/// SubjectAccessReview for `path`, answered `allowed`.
fn reviews(
    api: ApiServerVerifier,
    token: &'static str,
    path: &'static str,
    allowed: bool,
) -> tokio::task::JoinHandle<ApiServerVerifier> {
    scenario(api, move |mut api| async move {
        expect_token_review(&mut api, token, Token::Known).await;
        expect_access_review(&mut api, path, allowed).await;
        api
    })
}

#[tokio::test(start_paused = true)]
async fn a_request_without_a_bearer_token_gets_401_and_costs_no_api_call() {
    let (endpoints, mut api) = endpoints(PodsView::Local);
    for (authorization, why) in [
        (
            None,
            "/metrics: no Authorization header: send `Authorization: Bearer <token>`",
        ),
        (
            Some("Basic dXNlcjpwYXNz"),
            "scheme is \"Basic\", not Bearer",
        ),
        (Some("Bearer "), "no token after Bearer"),
    ] {
        let reply = get(&endpoints, "/metrics", authorization, remote()).await;
        assert_eq!(
            (reply.status, reply.challenge.as_deref()),
            (401, Some("Bearer")),
            "{authorization:?}"
        );
        assert!(reply.body.contains(why), "{}", reply.body);
    }
    // Probes need no token; neither does the per-pod view from loopback.
    for path in ["/healthz", "/pods"] {
        assert_eq!(
            get(&endpoints, path, None, loopback()).await.status,
            200,
            "{path}"
        );
    }
    assert_eq!(get(&endpoints, "/readyz", None, remote()).await.status, 503);
    api.no_more_calls(Duration::from_secs(1)).await;
}

#[tokio::test(start_paused = true)]
async fn an_allowed_token_is_renewed_in_the_background_not_reviewed_per_scrape() {
    let (endpoints, api) = endpoints(PodsView::Local);
    let api = reviews(api, "scrape-token", "/metrics", true);
    let reply = get(
        &endpoints,
        "/metrics",
        Some("Bearer scrape-token"),
        remote(),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(
        reply.body.contains("logpolicy_operator_pods_tracked"),
        "{}",
        reply.body
    );
    let mut api = finished(api).await;

    // Scrapes every 15 s, younger than RENEW_AFTER: no API call.
    for _ in 0..2 {
        tokio::time::advance(Duration::from_secs(15)).await;
        let reply = get(
            &endpoints,
            "/metrics",
            Some("bearer scrape-token"),
            remote(),
        )
        .await;
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
    api.no_more_calls(Duration::from_millis(100)).await;

    // The scrape 45 s after the review is answered at once from the cache, and renews
    // the verdict in the background.
    tokio::time::advance(Duration::from_secs(15)).await;
    let api = reviews(api, "scrape-token", "/metrics", true);
    let started = tokio::time::Instant::now();
    let reply = get(
        &endpoints,
        "/metrics",
        Some("Bearer scrape-token"),
        remote(),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(started.elapsed(), Duration::ZERO);
    let mut api = finished(api).await;

    // Renewed: the scrapes a minute and more after the first review cost no call.
    for _ in 0..2 {
        tokio::time::advance(Duration::from_secs(15)).await;
        let reply = get(
            &endpoints,
            "/metrics",
            Some("Bearer scrape-token"),
            remote(),
        )
        .await;
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
    api.no_more_calls(Duration::from_millis(100)).await;
}

#[tokio::test(start_paused = true)]
async fn a_token_whose_user_may_not_get_metrics_gets_403_naming_the_user() {
    let (endpoints, api) = endpoints(PodsView::Local);
    let api = reviews(api, "t", "/metrics", false);
    let reply = get(&endpoints, "/metrics", Some("Bearer t"), remote()).await;
    assert_eq!((reply.status, reply.challenge), (403, None));
    assert!(
        reply
            .body
            .contains(&format!("{PROMETHEUS} may not get /metrics"))
            && reply.body.contains("metrics-reader")
            && !reply.body.contains("logpolicy_operator_"),
        "{}",
        reply.body
    );
    let mut api = finished(api).await;
    // The refusal is remembered for 10 s, then asked again.
    tokio::time::advance(Duration::from_secs(9)).await;
    assert_eq!(
        get(&endpoints, "/metrics", Some("Bearer t"), remote())
            .await
            .status,
        403
    );
    api.no_more_calls(Duration::from_millis(100)).await;
    tokio::time::advance(Duration::from_secs(1)).await;
    let api = reviews(api, "t", "/metrics", true);
    assert_eq!(
        get(&endpoints, "/metrics", Some("Bearer t"), remote())
            .await
            .status,
        200
    );
    finished(api).await;
}

#[tokio::test(start_paused = true)]
async fn a_token_the_api_server_does_not_know_gets_401_without_an_access_review() {
    let (endpoints, api) = endpoints(PodsView::Local);
    let api = scenario(api, |mut api| async move {
        expect_token_review(&mut api, "old", Token::Unknown("token has expired")).await;
        api
    });
    let reply = get(&endpoints, "/metrics", Some("Bearer old"), remote()).await;
    assert_eq!(
        (reply.status, reply.challenge.as_deref()),
        (401, Some("Bearer"))
    );
    assert!(
        reply
            .body
            .contains("does not accept this token: token has expired"),
        "{}",
        reply.body
    );
    finished(api)
        .await
        .no_more_calls(Duration::from_millis(100))
        .await;
}

#[tokio::test(start_paused = true)]
async fn an_api_server_that_fails_refuses_or_hangs_gets_503_and_is_asked_again() {
    let (endpoints, api) = endpoints(PodsView::Local);
    let (held_tx, held_rx) = tokio::sync::oneshot::channel();
    let api = scenario(api, |mut api| async move {
        // The operator may not create TokenReviews (the chart's RBAC is missing).
        let (_, send) = api.expect(Method::POST, TOKEN_REVIEWS, &[]).await;
        send.send_response(failure(
            403,
            "Forbidden",
            "tokenreviews.authentication.k8s.io is forbidden",
        ));
        // Then an internal error on the access review.
        expect_token_review(&mut api, "t", Token::Known).await;
        let (_, send) = api.expect(Method::POST, ACCESS_REVIEWS, &[]).await;
        send.send_response(failure(500, "InternalError", "etcdserver: leader changed"));
        // Then no answer at all.
        let (_, send) = api.expect(Method::POST, TOKEN_REVIEWS, &[]).await;
        let _ = held_tx.send(send);
        api
    });
    let reply = get(&endpoints, "/metrics", Some("Bearer t"), remote()).await;
    assert_eq!(reply.status, 503, "{}", reply.body);
    assert!(
        reply
            .body
            .contains("needs `create` on authentication.k8s.io tokenreviews"),
        "{}",
        reply.body
    );
    let reply = get(&endpoints, "/metrics", Some("Bearer t"), remote()).await;
    assert_eq!(reply.status, 503, "{}", reply.body);
    assert!(
        reply.body.contains("etcdserver: leader changed"),
        "{}",
        reply.body
    );
    let started = tokio::time::Instant::now();
    let reply = get(&endpoints, "/metrics", Some("Bearer t"), remote()).await;
    assert_eq!(reply.status, 503, "{}", reply.body);
    assert!(
        reply.body.contains("did not answer within 5 s"),
        "{}",
        reply.body
    );
    assert_eq!(started.elapsed(), Duration::from_secs(5));
    let _held = held_rx.await.unwrap();
    finished(api)
        .await
        .no_more_calls(Duration::from_millis(100))
        .await;
}

#[tokio::test(start_paused = true)]
async fn the_per_pod_view_opened_to_the_network_needs_a_token_for_its_own_path() {
    let (endpoints, api) = endpoints(PodsView::Network);
    assert_eq!(get(&endpoints, "/pods", None, loopback()).await.status, 200);
    let reply = get(&endpoints, "/pods", None, remote()).await;
    assert_eq!(
        (reply.status, reply.challenge.as_deref()),
        (401, Some("Bearer"))
    );
    let api = reviews(api, "t", "/pods/shop/web-1", false);
    let reply = get(&endpoints, "/pods/shop/web-1", Some("Bearer t"), remote()).await;
    assert_eq!(reply.status, 403, "{}", reply.body);
    assert!(
        reply.body.contains("may not get /pods/shop/web-1"),
        "{}",
        reply.body
    );
    let mut api = finished(api).await;
    // The same token for /metrics is another question.
    let api2 = reviews(api, "t", "/metrics", true);
    assert_eq!(
        get(&endpoints, "/metrics", Some("Bearer t"), remote())
            .await
            .status,
        200
    );
    api = finished(api2).await;
    api.no_more_calls(Duration::from_millis(100)).await;
}
