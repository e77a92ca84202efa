//! `logpolicy-operator`: wires the controller (see `controller.rs`), the signing key,
//! the health and metrics endpoints and shutdown.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::api::PostParams;
use kube::{Api, Client};
use logpolicy::wire::{encode_signing_key, generate_signing_key, parse_signing_key, SigningKey};
use logpolicy_operator::controller::{self, ControllerConfig, Health, Metrics, Outputs, Readiness};
use logpolicy_operator::events::EventSink;
use logpolicy_operator::lease::{self, LeaseConfig};
use logpolicy_operator::trust::TrustPublisher;
use logpolicy_operator::{PodKey, PodView, Pusher, PusherConfig};
use prometheus_client::registry::Registry;
use tokio::sync::watch;

const TARGET: &str = "logpolicy_operator";
/// The Secret holding the signing key when no key file is given.
const KEY_SECRET: &str = "logpolicy-signing-key";
/// Its data key.
const KEY_SECRET_FIELD: &str = "signing-key";

#[derive(Debug, Parser)]
#[command(name = "logpolicy-operator", version, about)]
struct Args {
    /// The operator's own namespace (where its key Secret lives).
    #[arg(long, env = "POD_NAMESPACE", default_value = "logpolicy-system")]
    namespace: String,
    /// A file holding the signing key (base64 of the 32-byte seed). Without it, the key
    /// is read from (or created in) the Secret `logpolicy-signing-key`.
    #[arg(long)]
    signing_key_file: Option<PathBuf>,
    /// Where `/healthz`, `/readyz`, `/metrics` and `/pods` are served.
    #[arg(long, default_value = "0.0.0.0:8080")]
    metrics_addr: SocketAddr,
    /// Elect one leader among the replicas with the Lease `logpolicy-operator` in
    /// `--namespace`; only the leader pushes and writes status. Needed with more than
    /// one replica.
    #[arg(long, env = "LOGPOLICY_LEADER_ELECTION", default_value_t = false)]
    leader_election: bool,
    /// Watch only these namespaces (comma-separated), with one watch per namespace, so
    /// that namespaced Roles suffice. Empty: every namespace.
    #[arg(
        long,
        env = "LOGPOLICY_WATCH_NAMESPACES",
        value_delimiter = ',',
        default_value = ""
    )]
    watch_namespaces: Vec<String>,
    /// This replica's identity in the Lease and in Events: the pod name.
    #[arg(long, env = "POD_NAME")]
    pod_name: Option<String>,
}

/// The Lease's name.
const LEASE_NAME: &str = "logpolicy-operator";

fn identity(args: &Args) -> String {
    args.pod_name
        .clone()
        .filter(|n| !n.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()))
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
                .filter(|h| !h.is_empty())
        })
        .unwrap_or_else(|| format!("logpolicy-operator-{}", std::process::id()))
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let logging = match logpolicy::init() {
        Ok(l) => Some(l),
        Err(e) => {
            eprintln!("logpolicy-operator: logging: {e}");
            None
        }
    };
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!(target: TARGET, "shutting down");
        let _ = stop_tx.send(true);
    });

    let health = Arc::new(Health::default());
    health.set_standby_ready(args.leader_election);
    let metrics = Metrics::default();
    let mut registry = Registry::default();
    metrics.register(&mut registry);
    let registry = Arc::new(registry);
    let (views_tx, views_rx) = watch::channel(Arc::new(Vec::<PodView>::new()));
    tokio::spawn(serve_http(
        args.metrics_addr,
        health.clone(),
        registry,
        views_rx,
        stop_rx.clone(),
    ));

    let mut stop = stop_rx.clone();
    let client = tokio::select! {
        c = retry("kubernetes client", Client::try_default) => c,
        _ = stop.changed() => return flush(logging),
    };
    let key = tokio::select! {
        k = retry("signing key", || load_key(&client, &args)) => k,
        _ = stop.changed() => return flush(logging),
    };
    let public = key.verifying_key();
    tracing::info!(target: TARGET, key_id = %logpolicy::wire::key_id(&public), "signing key loaded");
    let pusher = Pusher::new(key, PusherConfig::default());
    let me = identity(&args);
    let outputs = Outputs {
        events: EventSink::spawn(client.clone(), me.clone(), 256, metrics.events.clone()),
        trust: TrustPublisher::spawn(client.clone(), public, metrics.trust_writes.clone()),
        pod_views: views_tx,
        metrics: metrics.clone(),
        health: health.clone(),
    };
    let config = ControllerConfig {
        namespaces: args.watch_namespaces.clone(),
        ..ControllerConfig::default()
    };
    let scopes = controller::watch_scopes(&config.namespaces);
    tracing::info!(target: TARGET, identity = %me, leader_election = args.leader_election,
        namespaces = ?scopes.iter().map(|s| s.as_deref().unwrap_or("*")).collect::<Vec<_>>(), "starting");

    let (leader_tx, mut leader_rx) = watch::channel(!args.leader_election);
    // Without leader election the sender stays here, and this replica always leads.
    let (election, _always_leader) = if args.leader_election {
        let task = tokio::spawn(lease::run(
            client.clone(),
            LeaseConfig::new(&args.namespace, LEASE_NAME, &me),
            leader_tx,
            stop_rx.clone(),
        ));
        (Some(task), None)
    } else {
        (None, Some(leader_tx))
    };
    loop {
        // Wait to lead (at once without leader election).
        let leading = tokio::select! {
            r = leader_rx.wait_for(|l| *l) => r.is_ok(),
            _ = stop.changed() => false,
        };
        if !leading || *stop.borrow() {
            break;
        }
        metrics.leader.set(1);
        tracing::info!(target: TARGET, identity = %me, "leading: starting the controller");
        controller::run(
            client.clone(),
            pusher.clone(),
            config.clone(),
            outputs.clone(),
            stop_rx.clone(),
            leader_rx.clone(),
        )
        .await;
        metrics.leader.set(0);
        if *stop.borrow() {
            break;
        }
    }
    if let Some(election) = election {
        // Releases the Lease, so a successor takes over at once.
        let _ = tokio::time::timeout(Duration::from_secs(5), election).await;
    }
    flush(logging);
}

fn flush(logging: Option<logpolicy::Logging>) {
    if let Some(l) = logging {
        l.flush(Duration::from_secs(2));
    }
}

/// Calls `f` until it succeeds, logging each failure, with a capped backoff.
async fn retry<T, E, F, Fut>(what: &str, mut f: F) -> T
where
    E: std::fmt::Display,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    let mut wait = Duration::from_millis(500);
    loop {
        match f().await {
            Ok(v) => return v,
            Err(e) => {
                tracing::warn!(target: TARGET, what, error = %e, retry_in = ?wait, "failed; retrying");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(30));
            }
        }
    }
}

async fn load_key(client: &Client, args: &Args) -> Result<SigningKey, String> {
    if let Some(path) = &args.signing_key_file {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        return parse_signing_key(&text).map_err(|e| format!("{}: {e}", path.display()));
    }
    let api: Api<Secret> = Api::namespaced(client.clone(), &args.namespace);
    let from_secret = |s: &Secret| -> Result<Option<SigningKey>, String> {
        match s.data.as_ref().and_then(|d| d.get(KEY_SECRET_FIELD)) {
            None => Ok(None),
            Some(b) => {
                let text = std::str::from_utf8(&b.0)
                    .map_err(|e| format!("Secret {KEY_SECRET}: not UTF-8: {e}"))?;
                parse_signing_key(text)
                    .map(Some)
                    .map_err(|e| format!("Secret {KEY_SECRET}: {e}"))
            }
        }
    };
    if let Some(s) = api.get_opt(KEY_SECRET).await.map_err(|e| e.to_string())? {
        return from_secret(&s)?
            .ok_or_else(|| format!("Secret {KEY_SECRET} has no `{KEY_SECRET_FIELD}`"));
    }
    let key = generate_signing_key().map_err(|e| e.to_string())?;
    let mut secret = Secret::default();
    secret.metadata.name = Some(KEY_SECRET.to_owned());
    secret.metadata.namespace = Some(args.namespace.clone());
    secret.data = Some(
        [(
            KEY_SECRET_FIELD.to_owned(),
            ByteString(encode_signing_key(&key).into_bytes()),
        )]
        .into(),
    );
    match api.create(&PostParams::default(), &secret).await {
        Ok(_) => {
            tracing::info!(target: TARGET, namespace = %args.namespace, "created the signing key Secret");
            Ok(key)
        }
        // Another replica created it first: use theirs (the next attempt reads it).
        Err(kube::Error::Api(s)) if s.code == 409 => Err(format!(
            "Secret {KEY_SECRET} created concurrently; reading it"
        )),
        Err(e) => Err(e.to_string()),
    }
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(e) => {
                tracing::warn!(target: TARGET, error = %e, "cannot watch SIGTERM");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

async fn serve_http(
    addr: SocketAddr,
    health: Arc<Health>,
    registry: Arc<Registry>,
    views: watch::Receiver<Arc<Vec<PodView>>>,
    mut stop: watch::Receiver<bool>,
) {
    let listener = loop {
        match tokio::net::TcpListener::bind(addr).await {
            Ok(l) => break l,
            Err(e) => {
                tracing::warn!(target: TARGET, %addr, error = %e, "cannot listen; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(5)) => {}
                    _ = stop.changed() => return,
                }
            }
        }
    };
    tracing::info!(target: TARGET, %addr, "serving /healthz, /readyz, /metrics, /pods");
    loop {
        let stream = tokio::select! {
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(e) => {
                    tracing::warn!(target: TARGET, error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = stop.changed() => return,
        };
        let health = health.clone();
        let registry = registry.clone();
        let views = views.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let reply = if req.method() != hyper::Method::GET {
                    reply(
                        StatusCode::METHOD_NOT_ALLOWED,
                        "text/plain",
                        "GET only\n".to_owned(),
                    )
                } else {
                    respond(req.uri().path(), &health, &registry, &views)
                };
                async move { Ok::<_, Infallible>(reply) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            let _ = tokio::time::timeout(Duration::from_secs(30), conn).await;
        });
    }
}

fn respond(
    path: &str,
    health: &Health,
    registry: &Registry,
    views: &watch::Receiver<Arc<Vec<PodView>>>,
) -> Response<Full<Bytes>> {
    if path == "/pods" || path == "/pods/" {
        let snapshot = views.borrow().clone();
        return json_reply(StatusCode::OK, &*snapshot);
    }
    if let Some(rest) = path.strip_prefix("/pods/") {
        let snapshot = views.borrow().clone();
        return match rest.split_once('/') {
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
        };
    }
    let (status, content_type, body) = match path {
        "/healthz" => (StatusCode::OK, "text/plain", "ok\n".to_owned()),
        "/readyz" => match health.readiness() {
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
            match prometheus_client::encoding::text::encode(&mut text, registry) {
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
