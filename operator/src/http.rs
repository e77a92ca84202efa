//! The operator's own HTTP endpoints (`--metrics-addr`): `/healthz`, `/readyz`,
//! `/metrics` and the per-pod view, `/pods` and `/pods/<namespace>/<name>`. GET only;
//! connections are capped in all and per address, must send a request's head within
//! 5 s and are closed after 30 s ([`ServerLimits`]). The per-pod view is the snapshot
//! the controller last published: the server never reads the index.
//!
//! The per-pod view names every tracked pod's uid, IP and push errors: it answers only
//! connections from the operator's own network namespace (a loopback peer: `kubectl
//! port-forward`, `kubectl exec`), others get 403, unless
//! [`PodsView::Network`] (`--pods-view network`) opens it to the network as well.
//! Behind a sidecar that connects from loopback, `--trust-loopback=false`
//! ([`Endpoints::trust_loopback`]) makes every peer the network.
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
use tokio_rustls::TlsAcceptor;

use crate::access::{Check, TokenAccess};
use crate::controller::{BuiltViews, PodViews};
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
    views: PodViews,
    pods_view: PodsView,
    access: Option<Arc<TokenAccess>>,
    trust_loopback: bool,
}

impl Endpoints {
    /// Health and readiness from `health`, metrics from `registry`, the per-pod view
    /// asked of the controller through `views` (see [`crate::controller::pod_views`]).
    pub fn new(health: Arc<Health>, registry: Arc<Registry>, views: PodViews) -> Self {
        Endpoints {
            health,
            registry,
            views,
            pods_view: PodsView::Local,
            access: None,
            trust_loopback: true,
        }
    }

    /// Whether a loopback peer counts as the operator's own pod (the default: `kubectl
    /// port-forward`, `kubectl exec`). `false` where something else in the pod connects
    /// from loopback on behalf of the network: a service mesh's sidecar proxy (Istio's
    /// connects from 127.0.0.6, others from 127.0.0.1). Every peer is then the
    /// network: `/pods` needs [`PodsView::Network`] and, with token access, a token.
    #[must_use]
    pub fn trust_loopback(mut self, trust: bool) -> Self {
        self.trust_loopback = trust;
        self
    }

    fn local(&self, peer: IpAddr) -> bool {
        self.trust_loopback && is_local_peer(peer)
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
        if pods && self.pods_view == PodsView::Local && !self.local(peer) {
            return json_reply(
                StatusCode::FORBIDDEN,
                &serde_json::json!({"error": format!(
                    "the per-pod view (pod uids, addresses, push errors) answers only the \
                     operator's own pod (e.g. kubectl port-forward), not {peer}{}; \
                     --pods-view network opens it",
                    if self.trust_loopback {
                        ""
                    } else {
                        " (--trust-loopback=false: no peer is)"
                    }
                )}),
            );
        }
        let guarded = path == "/metrics" || (pods && !self.local(peer));
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
        if pods {
            let views = match self.views().await {
                Ok(views) => views,
                Err(why) => {
                    return json_reply(
                        StatusCode::SERVICE_UNAVAILABLE,
                        &serde_json::json!({ "error": why }),
                    )
                }
            };
            return match path.strip_prefix("/pods").unwrap_or_default() {
                "" | "/" => json_reply(StatusCode::OK, &views.pods),
                rest => pod(&views.pods, &rest[1..]),
            };
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

    /// The per-pod view, asked of the controller; a standby replica says it is one.
    async fn views(&self) -> Result<Arc<BuiltViews>, String> {
        if self.health.readiness() == Readiness::Standby {
            return Err(
                "this replica is on standby: the leading replica (the holder of \
                        the operator's Lease) serves the per-pod view"
                    .to_owned(),
            );
        }
        self.views
            .current(VIEW_WAIT)
            .await
            .map_err(|why| why.to_string())
    }
}

/// How long `/pods` waits for the controller to build the per-pod view (at 50,000 pods
/// a build takes about 0.1 s, and the loop may be busy with a change).
const VIEW_WAIT: Duration = Duration::from_secs(10);

/// `/pods/<namespace>/<name>` from the view `views` (sorted by namespace and name):
/// `rest` is what follows `/pods/`.
fn pod(views: &[PodView], rest: &str) -> Response<Full<Bytes>> {
    match rest.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
            let key = PodKey::new(ns, name);
            match views.binary_search_by(|v| {
                (v.namespace.as_str(), v.name.as_str())
                    .cmp(&(key.namespace.as_str(), key.name.as_str()))
            }) {
                Ok(i) => json_reply(StatusCode::OK, &views[i]),
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

/// The server's bounds on connections, as the pod's admin endpoint has them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// The most connections open at once. A new connection beyond it takes the place
    /// of the oldest one that is not in the middle of a request (idle or still sending
    /// its head); when there is none, it is answered 503 and closed.
    pub max_connections: usize,
    /// The most connections open at once from one address; one more is answered 503
    /// and closed.
    pub max_connections_per_peer: usize,
    /// How long a connection may take to send a request's head.
    pub header_timeout: Duration,
    /// How long a connection may last.
    pub connection_timeout: Duration,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_connections: 64,
            max_connections_per_peer: 16,
            header_timeout: Duration::from_secs(5),
            connection_timeout: Duration::from_secs(30),
        }
    }
}

/// The answer to a connection beyond the cap, written without reading anything.
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\ncontent-length: 49\r\nconnection: close\r\n\r\ntoo many connections to the operator's endpoints\n";
/// The answer to a peer over its own cap.
const BUSY_PEER: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\ncontent-length: 39\r\nconnection: close\r\n\r\ntoo many connections from this address\n";

/// One connection open.
struct Open {
    peer: IpAddr,
    since: tokio::time::Instant,
    /// In the middle of a request (from its head to the end of the answer).
    busy: Arc<std::sync::atomic::AtomicBool>,
    abort: Option<tokio::task::AbortHandle>,
}

/// The connections open, by id and by peer.
#[derive(Default)]
struct Slots {
    next: u64,
    open: std::collections::HashMap<u64, Open>,
    per_peer: std::collections::HashMap<IpAddr, usize>,
}

enum Admit {
    Yes,
    Evicting(u64),
    BusyPeer,
    Busy,
}

impl Slots {
    fn admit(&self, peer: IpAddr, limits: &ServerLimits) -> Admit {
        let mine = self.per_peer.get(&peer).copied().unwrap_or(0);
        if mine >= limits.max_connections_per_peer.max(1) {
            return Admit::BusyPeer;
        }
        if self.open.len() < limits.max_connections.max(1) {
            return Admit::Yes;
        }
        let idle = std::sync::atomic::Ordering::Relaxed;
        self.open
            .iter()
            .filter(|(_, o)| !o.busy.load(idle))
            .min_by_key(|(_, o)| o.since)
            .map_or(Admit::Busy, |(id, _)| Admit::Evicting(*id))
    }

    fn insert(&mut self, peer: IpAddr, busy: Arc<std::sync::atomic::AtomicBool>) -> u64 {
        let id = self.next;
        self.next += 1;
        let since = tokio::time::Instant::now();
        let open = Open {
            peer,
            since,
            busy,
            abort: None,
        };
        self.open.insert(id, open);
        *self.per_peer.entry(peer).or_default() += 1;
        id
    }

    fn remove(&mut self, id: u64) -> Option<Open> {
        let open = self.open.remove(&id)?;
        if let Some(n) = self.per_peer.get_mut(&open.peer) {
            *n -= 1;
            if *n == 0 {
                self.per_peer.remove(&open.peer);
            }
        }
        Some(open)
    }
}

type SharedSlots = Arc<std::sync::Mutex<Slots>>;

fn lock(slots: &SharedSlots) -> std::sync::MutexGuard<'_, Slots> {
    slots
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Frees a connection's slot when its task ends, however it ends (aborted included).
struct SlotGuard {
    slots: SharedSlots,
    id: u64,
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        lock(&self.slots).remove(self.id);
    }
}

/// Serves `endpoints` on `addr` until `stop` turns true; a failed bind is retried every
/// 5 s.
pub async fn serve(
    addr: SocketAddr,
    endpoints: Endpoints,
    limits: ServerLimits,
    tls: Option<TlsAcceptor>,
    mut stop: watch::Receiver<bool>,
) {
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
    let scheme = if tls.is_some() { "https" } else { "http" };
    log::info!(%addr, scheme, metrics_auth = auth, "serving /healthz, /readyz, /metrics, /pods");
    serve_on(listener, endpoints, limits, tls, stop).await;
}

/// Serves `endpoints` on `listener` within `limits`, over TLS with `tls`, until `stop`
/// turns true.
pub async fn serve_on(
    listener: tokio::net::TcpListener,
    endpoints: Endpoints,
    limits: ServerLimits,
    tls: Option<TlsAcceptor>,
    mut stop: watch::Receiver<bool>,
) {
    let slots = SharedSlots::default();
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
        let mut open = lock(&slots);
        match open.admit(peer, &limits) {
            Admit::Yes => {}
            Admit::Evicting(id) => {
                if let Some(abort) = open.remove(id).and_then(|o| o.abort) {
                    abort.abort();
                }
            }
            Admit::BusyPeer => {
                let _ = stream.try_write(BUSY_PEER);
                continue;
            }
            Admit::Busy => {
                let _ = stream.try_write(BUSY);
                continue;
            }
        }
        let busy = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let id = open.insert(peer, busy.clone());
        let guard = SlotGuard {
            slots: slots.clone(),
            id,
        };
        let (endpoints, tls) = (endpoints.clone(), tls.clone());
        let task = tokio::spawn(async move {
            let _slot = guard;
            let connection = async {
                match tls {
                    // The handshake within the header timeout, as a request's head.
                    Some(tls) => {
                        let handshake = tls.accept(stream);
                        if let Ok(Ok(stream)) =
                            tokio::time::timeout(limits.header_timeout, handshake).await
                        {
                            serve_connection(stream, endpoints, peer, busy, limits).await;
                        }
                    }
                    None => serve_connection(stream, endpoints, peer, busy, limits).await,
                }
            };
            let _ = tokio::time::timeout(limits.connection_timeout, connection).await;
        });
        if let Some(o) = open.open.get_mut(&id) {
            o.abort = Some(task.abort_handle());
        }
    }
}

/// Serves the requests of one connection (`io`, plain or TLS) from `peer`; `busy` is
/// set while a request is answered.
async fn serve_connection<I>(
    io: I,
    endpoints: Endpoints,
    peer: IpAddr,
    busy: Arc<std::sync::atomic::AtomicBool>,
    limits: ServerLimits,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let (endpoints, busy) = (endpoints.clone(), busy.clone());
        async move {
            busy.store(true, std::sync::atomic::Ordering::Relaxed);
            let response = endpoints.respond(&req, peer).await;
            busy.store(false, std::sync::atomic::Ordering::Relaxed);
            Ok::<_, Infallible>(response)
        }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .serve_connection(TokioIo::new(io), service)
        .await;
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
    use crate::controller::pod_views;
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
        let (source, views) = pod_views();
        source.answer_with(vec![view("a", "p"), view("shop", "web-1")]);
        let endpoints = Endpoints::new(health.clone(), Metrics::default().registry(), views);

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
        // A standby replica has no view: it says which replica has.
        let (status, _, body) = get(&endpoints, Method::GET, "/pods/shop/web-1").await;
        assert_eq!(status, 503);
        assert!(
            body.contains("on standby") && body.contains("Lease"),
            "{body}"
        );
        health.set_standby_ready(false);

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

    /// Without a controller to build it (between two leadership terms), `/pods` says so
    /// once the wait is over, rather than answering an empty view.
    #[tokio::test(start_paused = true)]
    async fn an_unanswered_view_is_a_clear_error() {
        let (_source, views) = pod_views();
        let endpoints = Endpoints::new(Arc::default(), Metrics::default().registry(), views);
        let (status, _, body) = get(&endpoints, Method::GET, "/pods").await;
        assert_eq!(status, 503);
        assert!(body.contains("no controller answered within 10s"), "{body}");
    }

    /// Every ask gets a view built after it was made, or the last one while it is
    /// recent: asks made together share one build.
    #[tokio::test]
    async fn asks_made_together_share_one_view() {
        let (source, views) = pod_views();
        source.answer_with(vec![view("shop", "web-1")]);
        let asks = (0..8).map(|_| views.current(Duration::from_secs(5)));
        for got in futures::future::join_all(asks).await {
            assert_eq!(got.unwrap().pods.len(), 1);
        }
    }

    #[tokio::test]
    async fn the_per_pod_view_answers_only_the_operators_own_pod_unless_opened() {
        let (source, views) = pod_views();
        source.answer_with(vec![view("shop", "web-1")]);
        let endpoints = Endpoints::new(Arc::default(), Metrics::default().registry(), views);
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
        // Not trusting loopback (a mesh sidecar connects from it): no peer is local.
        let untrusting = endpoints.clone().trust_loopback(false);
        for peer in ["127.0.0.1", "127.0.0.6", "::1"] {
            let peer: IpAddr = peer.parse().unwrap();
            let (status, _, body) = get_from(&untrusting, Method::GET, "/pods", peer).await;
            assert_eq!(status, 403, "{peer}");
            assert!(body.contains("--trust-loopback=false"), "{body}");
        }
        let open = endpoints.pods_view(PodsView::Network);
        assert_eq!(
            get_from(&open, Method::GET, "/pods/shop/web-1", remote)
                .await
                .0,
            200
        );
    }
}
