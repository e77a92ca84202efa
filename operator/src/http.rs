//! The operator's own HTTP endpoints (`--metrics-addr`): `/healthz`, `/readyz`,
//! `/metrics` and the per-pod view, `/pods` and `/pods/<namespace>/<name>`. GET only;
//! each connection is closed after 30 s. The per-pod view is the snapshot the controller
//! last published: the server never reads the index.
//!
//! The per-pod view names every tracked pod's uid, IP and push errors: it answers only
//! connections from the operator's own network namespace (a loopback peer: `kubectl
//! port-forward`, `kubectl exec`), others get 403, unless
//! [`PodsView::Network`] (`--pods-view network`) opens it to the network as well.
//!
//! With a [`TokenAccess`] (`--metrics-auth token`, the default) `/metrics`, and `/pods`
//! for a peer other than loopback, answer only a bearer token whose user may `get` the
//! path (see [`crate::access`]); `/healthz` and `/readyz` stay open (probes).

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use logpolicy::admin::is_local_peer;
use prometheus_client::registry::Registry;
use tokio::sync::watch;

use crate::access::{Check, TokenAccess};
use crate::health::{Health, Readiness};
use crate::index::{PodKey, PodView};
use crate::log;

/// Who may read the per-pod view (`/pods`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum PodsView {
    /// Loopback peers only: the operator's own pod (`kubectl port-forward`).
    #[default]
    Local,
    /// Any peer that reaches the port.
    Network,
}

/// What the endpoints serve. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Endpoints {
    health: Arc<Health>,
    registry: Arc<Registry>,
    views: watch::Receiver<Arc<Vec<PodView>>>,
    pods_view: PodsView,
    access: Option<Arc<TokenAccess>>,
}

impl Endpoints {
    /// Health and readiness from `health`, metrics from `registry`, the per-pod view from
    /// `views` (sorted by namespace and name, as the controller publishes it).
    pub fn new(
        health: Arc<Health>,
        registry: Arc<Registry>,
        views: watch::Receiver<Arc<Vec<PodView>>>,
    ) -> Self {
        Endpoints {
            health,
            registry,
            views,
            pods_view: PodsView::Local,
            access: None,
        }
    }

    /// These endpoints with `/metrics` (and `/pods` for peers other than loopback)
    /// answering only bearer tokens that `access` allows. Without it they are open.
    #[must_use]
    pub fn token_access(mut self, access: Arc<TokenAccess>) -> Self {
        self.access = Some(access);
        self
    }

    /// These endpoints with the per-pod view open to `who`.
    #[must_use]
    pub fn pods_view(mut self, who: PodsView) -> Self {
        self.pods_view = who;
        self
    }

    /// The reply to `request` from a connection whose peer is `peer`.
    pub async fn respond<B>(&self, request: &Request<B>, peer: IpAddr) -> Response<Full<Bytes>> {
        let (method, path) = (request.method(), request.uri().path());
        if method != Method::GET {
            return reply(
                StatusCode::METHOD_NOT_ALLOWED,
                "text/plain",
                "GET only\n".to_owned(),
            );
        }
        let pods = path == "/pods" || path.starts_with("/pods/");
        if pods && self.pods_view == PodsView::Local && !is_local_peer(peer) {
            return json_reply(
                StatusCode::FORBIDDEN,
                &serde_json::json!({"error": format!(
                    "the per-pod view (pod uids, addresses, push errors) answers only the \
                     operator's own pod (e.g. kubectl port-forward), not {peer}; \
                     --pods-view network opens it"
                )}),
            );
        }
        let guarded = path == "/metrics" || (pods && !is_local_peer(peer));
        if let (true, Some(access)) = (guarded, &self.access) {
            let authorization = request.headers().get(hyper::header::AUTHORIZATION);
            match access.check(authorization, path).await {
                Check::Allowed { .. } => {}
                Check::Unauthorized(why) => {
                    let mut response =
                        reply(StatusCode::UNAUTHORIZED, "text/plain", format!("{why}\n"));
                    response.headers_mut().insert(
                        hyper::header::WWW_AUTHENTICATE,
                        hyper::header::HeaderValue::from_static("Bearer"),
                    );
                    return response;
                }
                Check::Forbidden(why) => {
                    return reply(StatusCode::FORBIDDEN, "text/plain", format!("{why}\n"))
                }
                Check::Unavailable(why) => {
                    return reply(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "text/plain",
                        format!("{why}\n"),
                    )
                }
            }
        }
        if path == "/pods" || path == "/pods/" {
            let snapshot = self.views.borrow().clone();
            return json_reply(StatusCode::OK, &*snapshot);
        }
        if let Some(rest) = path.strip_prefix("/pods/") {
            return self.pod(rest);
        }
        let (status, content_type, body) = match path {
            "/healthz" => (StatusCode::OK, "text/plain", "ok\n".to_owned()),
            "/readyz" => match self.health.readiness() {
                Readiness::Leading => (StatusCode::OK, "text/plain", "ready\n".to_owned()),
                Readiness::Standby => (
                    StatusCode::OK,
                    "text/plain",
                    "ready (standby: another replica leads)\n".to_owned(),
                ),
                Readiness::NotReady => (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "text/plain",
                    "watches not listed yet\n".to_owned(),
                ),
            },
            "/metrics" => {
                let mut text = String::new();
                match prometheus_client::encoding::text::encode(&mut text, &self.registry) {
                    Ok(()) => (
                        StatusCode::OK,
                        "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        text,
                    ),
                    Err(e) => (
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "text/plain",
                        format!("{e}\n"),
                    ),
                }
            }
            _ => (
                StatusCode::NOT_FOUND,
                "text/plain",
                "not found\n".to_owned(),
            ),
        };
        reply(status, content_type, body)
    }

    /// `/pods/<namespace>/<name>`: `rest` is what follows `/pods/`.
    fn pod(&self, rest: &str) -> Response<Full<Bytes>> {
        let snapshot = self.views.borrow().clone();
        match rest.split_once('/') {
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
                let key = PodKey::new(ns, name);
                match snapshot.binary_search_by(|v| {
                    (v.namespace.as_str(), v.name.as_str())
                        .cmp(&(key.namespace.as_str(), key.name.as_str()))
                }) {
                    Ok(i) => json_reply(StatusCode::OK, &snapshot[i]),
                    Err(_) => json_reply(
                        StatusCode::NOT_FOUND,
                        &serde_json::json!({"error": format!("pod {key} is not tracked")}),
                    ),
                }
            }
            _ => json_reply(
                StatusCode::NOT_FOUND,
                &serde_json::json!({"error": "expected /pods/<namespace>/<name>"}),
            ),
        }
    }
}

/// Serves `endpoints` on `addr` until `stop` turns true; a failed bind is retried every
/// 5 s.
pub async fn serve(addr: SocketAddr, endpoints: Endpoints, mut stop: watch::Receiver<bool>) {
    let listener = loop {
        match tokio::net::TcpListener::bind(addr).await {
            Ok(l) => break l,
            Err(e) => {
                log::warn!(%addr, error = %e, "cannot listen; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(5)) => {}
                    _ = stop.changed() => return,
                }
            }
        }
    };
    let auth = if endpoints.access.is_some() {
        "bearer token"
    } else {
        "none"
    };
    log::info!(%addr, metrics_auth = auth, "serving /healthz, /readyz, /metrics, /pods");
    loop {
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok((s, peer)) => (s, peer.ip()),
                Err(e) => {
                    log::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = stop.changed() => return,
        };
        let endpoints = endpoints.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let endpoints = endpoints.clone();
                async move { Ok::<_, Infallible>(endpoints.respond(&req, peer).await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            let _ = tokio::time::timeout(Duration::from_secs(30), conn).await;
        });
    }
}

fn json_reply<T: serde::Serialize + ?Sized>(
    status: StatusCode,
    value: &T,
) -> Response<Full<Bytes>> {
    match serde_json::to_string_pretty(value) {
        Ok(mut body) => {
            body.push('\n');
            reply(status, "application/json", body)
        }
        Err(e) => reply(
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain",
            format!("{e}\n"),
        ),
    }
}

fn reply(status: StatusCode, content_type: &str, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if let Ok(v) = hyper::header::HeaderValue::from_str(content_type) {
        response
            .headers_mut()
            .insert(hyper::header::CONTENT_TYPE, v);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;
    use http_body_util::BodyExt;

    fn view(namespace: &str, name: &str) -> PodView {
        PodView {
            namespace: namespace.into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            ip: None,
            port: Some(9090),
            port_error: None,
            version: 7,
            layers: Vec::new(),
            acknowledged_version: None,
            in_sync: false,
            last_push: None,
            error: None,
        }
    }

    async fn get(endpoints: &Endpoints, method: Method, path: &str) -> (u16, String, String) {
        get_from(endpoints, method, path, IpAddr::from([127, 0, 0, 1])).await
    }

    async fn get_from(
        endpoints: &Endpoints,
        method: Method,
        path: &str,
        peer: IpAddr,
    ) -> (u16, String, String) {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .body(())
            .unwrap();
        let response = endpoints.respond(&request, peer).await;
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get(hyper::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (
            status,
            content_type,
            String::from_utf8(body.to_vec()).unwrap(),
        )
    }

    #[tokio::test]
    async fn each_path_answers_as_documented() {
        let health = Arc::new(Health::default());
        let views = vec![view("a", "p"), view("shop", "web-1")];
        let (_tx, rx) = watch::channel(Arc::new(views));
        let endpoints = Endpoints::new(health.clone(), Metrics::default().registry(), rx);

        assert_eq!(
            get(&endpoints, Method::GET, "/healthz").await,
            (200, "text/plain".into(), "ok\n".into())
        );
        assert_eq!(get(&endpoints, Method::GET, "/readyz").await.0, 503);
        health.set_standby_ready(true);
        let (status, _, body) = get(&endpoints, Method::GET, "/readyz").await;
        assert_eq!(
            (status, body.as_str()),
            (200, "ready (standby: another replica leads)\n")
        );

        let (status, content_type, body) = get(&endpoints, Method::GET, "/metrics").await;
        assert_eq!(status, 200);
        assert!(content_type.starts_with("application/openmetrics-text"));
        assert!(body.contains("logpolicy_operator_pods_tracked"), "{body}");
        for family in [
            "# TYPE logpolicy_operator_reconcile_errors counter",
            "# TYPE logpolicy_operator_reconcile_duration_seconds histogram",
            "# TYPE logpolicy_operator_push_backlog gauge",
        ] {
            assert!(body.contains(family), "{family} in {body}");
        }

        let (status, _, body) = get(&endpoints, Method::GET, "/pods").await;
        let all: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!((status, all.as_array().map(Vec::len)), (200, Some(2)));
        let (status, _, body) = get(&endpoints, Method::GET, "/pods/shop/web-1").await;
        let one: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            (status, &one["uid"]),
            (200, &serde_json::json!("uid-web-1"))
        );
        let (status, _, body) = get(&endpoints, Method::GET, "/pods/shop/web-2").await;
        assert_eq!(status, 404);
        assert!(body.contains("pod shop/web-2 is not tracked"), "{body}");
        let (status, _, body) = get(&endpoints, Method::GET, "/pods/shop").await;
        assert_eq!(status, 404);
        assert!(body.contains("expected /pods/<namespace>/<name>"), "{body}");

        assert_eq!(get(&endpoints, Method::GET, "/other").await.0, 404);
        assert_eq!(get(&endpoints, Method::PUT, "/healthz").await.0, 405);
    }

    #[tokio::test]
    async fn the_per_pod_view_answers_only_the_operators_own_pod_unless_opened() {
        let (_tx, rx) = watch::channel(Arc::new(vec![view("shop", "web-1")]));
        let endpoints = Endpoints::new(Arc::default(), Metrics::default().registry(), rx);
        let remote = IpAddr::from([10, 1, 2, 3]);
        for path in ["/pods", "/pods/", "/pods/shop/web-1", "/pods/x"] {
            let (status, _, body) = get_from(&endpoints, Method::GET, path, remote).await;
            assert_eq!(status, 403, "{path}");
            assert!(
                body.contains("not 10.1.2.3") && !body.contains("uid-web-1"),
                "{body}"
            );
        }
        // Health and metrics stay open to the network (probes, scrapes).
        assert_eq!(
            get_from(&endpoints, Method::GET, "/healthz", remote)
                .await
                .0,
            200
        );
        assert_eq!(
            get_from(&endpoints, Method::GET, "/metrics", remote)
                .await
                .0,
            200
        );
        // Loopback, IPv4, IPv6 and IPv4 mapped into IPv6.
        for peer in ["127.0.0.1", "127.8.9.1", "::1", "::ffff:127.0.0.1"] {
            let peer: IpAddr = peer.parse().unwrap();
            assert_eq!(
                get_from(&endpoints, Method::GET, "/pods", peer).await.0,
                200,
                "{peer}"
            );
        }
        let mapped_remote: IpAddr = "::ffff:10.1.2.3".parse().unwrap();
        assert_eq!(
            get_from(&endpoints, Method::GET, "/pods", mapped_remote)
                .await
                .0,
            403
        );
        let open = endpoints.pods_view(PodsView::Network);
        assert_eq!(
            get_from(&open, Method::GET, "/pods/shop/web-1", remote)
                .await
                .0,
            200
        );
    }
}
