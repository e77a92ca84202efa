//! The service both binaries run, whatever logs it: an axum shop with one route.
//!
//! `GET /checkout?user=42&order=7`: tower-http's `TraceLayer` makes a `request` span
//! (method, path, an empty `user_id`), the handler records the user on it, charges in a
//! nested `#[instrument]` span (`charge`, an `info` line), asks a payments client that
//! logs through the `log` crate (an `info` record), warns for user 13 (declined), and
//! logs `checkout done` with the order; tower-http writes its `info` access line. It
//! handles ctrl-c (SIGINT) only, as many services do: SIGTERM ends it as the platform
//! does by default.
//!
//! The first line on stderr says where it listens: `listening on 127.0.0.1:PORT`.

use axum::extract::{Query, Request};
use axum::routing::get;
use axum::Router;
use serde::Deserialize;
use tower_http::trace::{DefaultOnResponse, TraceLayer};

/// A dependency that logs through `log` only.
pub mod payments_client {
    /// Authorises the order's payment.
    pub fn authorise(order: u64) {
        log::info!("authorised order {order}");
        log::debug!("card network answered in 3 ms");
    }
}

/// The query of `GET /checkout`.
#[derive(Debug, Deserialize)]
struct Checkout {
    user: u64,
    order: u64,
}

async fn checkout(Query(Checkout { user, order }): Query<Checkout>) -> String {
    tracing::Span::current().record("user_id", user);
    charge(1999).await;
    payments_client::authorise(order);
    if user == 13 {
        tracing::warn!(target: "shop::checkout", order, "card declined, retried");
    }
    tracing::info!(target: "shop::checkout", order, "checkout done");
    format!("order {order} done\n")
}

#[tracing::instrument(target = "shop::payment")]
async fn charge(amount_cents: u64) {
    tracing::info!(target: "shop::payment", amount_cents, "charged");
}

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
        .on_response(DefaultOnResponse::new().level(tracing::Level::INFO));
    Router::new().route("/checkout", get(checkout)).layer(trace)
}

/// Serves until ctrl-c (SIGINT), then returns.
pub fn run() -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        tracing::info!(target: "shop::http", %addr, "listening");
        eprintln!("listening on {addr}");
        axum::serve(listener, app())
            .with_graceful_shutdown(async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await?;
        tracing::info!(target: "shop::http", "stopped");
        Ok(())
    })
}
