//! A small axum service that logs through logpolicy, the way a real one is wired.
//!
//! Each request runs in a `request` span made by tower-http's `TraceLayer` (method, path
//! and an empty `user_id`); the handler records the user on it once it has read the
//! query, and the payment runs in a nested `charge` span (`#[tracing::instrument]`).
//! With [`Spans::All`] every line written inside carries the fields of every span it is
//! in, root first, so the payment's line says whose request it was:
//!
//! ```json
//! {"ts":"…","level":"INFO","target":"shop::payment","msg":"charged","amount_cents":1999,
//!  "span":{"name":"charge","amount_cents":1999},
//!  "spans":[{"name":"request","method":"GET","path":"/checkout","user_id":42},
//!           {"name":"charge","amount_cents":1999}]}
//! ```
//!
//! and so does tower-http's access line (`"finished processing request"`, at `info`
//! here), under the `request` span.
//!
//! Run it, then send it a request from another terminal:
//!
//! ```sh
//! LOGPOLICY_FORMAT=json cargo run -p logpolicy --example axum
//! curl 'localhost:3000/checkout?user=42'
//! ```
//!
//! What it reads (every setting of logging comes from the environment, through
//! `Builder::from_env`; none of it stops the service from starting):
//!
//! - `--addr ADDR`, else `ADDR`, else `127.0.0.1:3000`: where it listens (port 0 picks a
//!   free port). The first line on stderr says where: `listening on http://127.0.0.1:3000`.
//! - `LOGPOLICY`, else `RUST_LOG`: the levels, with `RUST_LOG`'s syntax (default `info`).
//!   `LOGPOLICY=info,tower_http=debug` adds tower-http's line when a request starts.
//! - `LOGPOLICY_FORMAT`: `json`, `json-otel`, `logfmt`, `text`, ... (default JSON, text on
//!   a terminal).
//! - `LOGPOLICY_ADMIN_ADDR` (e.g. `127.0.0.1:9090`) with `LOGPOLICY_TRUSTED_KEYS` or
//!   `LOGPOLICY_TRUSTED_KEYS_FILE`, and the pod's identity (`POD_UID`, `POD_NAME`,
//!   `POD_NAMESPACE`, or `LOGPOLICY_ADMIN_ANY_POD=1` off a cluster): the admin endpoint
//!   the operator pushes policies to (see `docs/admin-endpoint.md`). Unset, it does not
//!   run.
//!
//! SIGTERM or ctrl-c stops it gracefully: the requests in flight are answered, then
//! dropping the `Logging` flushes the lines still queued.

use std::error::Error;

use axum::extract::{Query, Request};
use axum::routing::get;
use axum::Router;
use logpolicy::format::Spans;
use serde::Deserialize;
use tower_http::trace::{DefaultOnResponse, TraceLayer};
use tracing::Level;

/// Where it listens unless told otherwise.
const DEFAULT_ADDR: &str = "127.0.0.1:3000";

/// The query of `GET /checkout`.
#[derive(Debug, Deserialize)]
struct Checkout {
    /// Whose cart it is.
    user: u64,
}

/// `GET /checkout?user=42`: charges the user's cart.
async fn checkout(Query(Checkout { user }): Query<Checkout>) -> String {
    // The request span was made before the query was read: it gets the user now, and
    // every line written under it from here on (the payment's among them) carries it.
    tracing::Span::current().record("user_id", user);
    let amount_cents = 1999;
    charge(amount_cents).await;
    format!("charged {amount_cents} cents to user {user}\n")
}

/// Charges the card: a span of its own, nested in the request's.
#[tracing::instrument(target = "shop::payment")]
async fn charge(amount_cents: u64) {
    tracing::info!(target: "shop::payment", amount_cents, "charged");
}

/// The service's routes, each request in a `request` span.
fn app() -> Router {
    let trace = TraceLayer::new_for_http()
        .make_span_with(|request: &Request| {
            tracing::info_span!(
                target: "shop::http",
                "request",
                method = %request.method(),
                path = request.uri().path(),
                user_id = tracing::field::Empty,
            )
        })
        // One access line per request, with its status and latency.
        .on_response(DefaultOnResponse::new().level(Level::INFO));
    Router::new().route("/checkout", get(checkout)).layer(trace)
}

/// The address to listen on: `--addr ADDR` (or `--addr=ADDR`), else `ADDR`, else the
/// default.
fn listen_addr() -> Result<String, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = || format!("unexpected arguments {args:?} (usage: axum [--addr ADDR])");
    match args.as_slice() {
        [] => Ok(std::env::var("ADDR").unwrap_or_else(|_| DEFAULT_ADDR.to_owned())),
        [flag, addr] if flag == "--addr" => Ok(addr.clone()),
        [arg] => arg
            .strip_prefix("--addr=")
            .map(str::to_owned)
            .ok_or_else(usage),
        _ => Err(usage()),
    }
}

/// Resolves on SIGTERM (what Kubernetes sends to stop a pod) or ctrl-c.
#[cfg(unix)]
fn shutdown_signal() -> std::io::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    // Installed now, before the service says it listens: a SIGTERM that comes early
    // stops it gracefully too rather than killing it with lines still queued.
    let mut term = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = interrupt.recv() => {}
        }
    })
}

/// Resolves on ctrl-c.
#[cfg(not(unix))]
fn shutdown_signal() -> std::io::Result<impl std::future::Future<Output = ()>> {
    Ok(async {
        // Without a handler, ctrl-c still stops the process.
        let _ = tokio::signal::ctrl_c().await;
    })
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    // Keep `logging` until the end: dropping it flushes what is queued.
    let logging = logpolicy::Builder::from_env()
        .spans(Spans::All)
        .try_init()?;

    let shutdown = shutdown_signal()?;
    let listener = tokio::net::TcpListener::bind(listen_addr()?).await?;
    let addr = listener.local_addr()?;
    eprintln!("listening on http://{addr}");
    tracing::info!(target: "shop::http", %addr, "listening");

    axum::serve(listener, app())
        .with_graceful_shutdown(async move {
            shutdown.await;
            tracing::info!(target: "shop::http", "shutting down");
        })
        .await?;

    tracing::info!(target: "shop::http", "stopped");
    drop(logging);
    Ok(())
}
