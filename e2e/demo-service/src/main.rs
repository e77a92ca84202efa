//! A small HTTP shop that logs through `logpolicy` and serves its admin endpoint: what
//! the end-to-end tests, the benchmarks and the README demo run.
//!
//! Every request logs at every level from `shop::http`, `shop::payment` and `shop::db`
//! inside a `request` span; every `--fail-every`th request fails with an error (500), as
//! does every request asking `?decline=1` (a payment incident on demand). A failing
//! payment first logs the gateway's answer at debug: the line an incident needs.
//!
//! The shop counts the `shop::payment` debug events it emits, written or not, and says
//! so on `GET /stats` (`{"requests":N,"paymentDebug":N}`): what a test compares with the
//! lines a raise (or a replay) wrote.
//! Logging is configured by the environment, as in a pod: `LOGPOLICY`/`RUST_LOG` for the
//! baseline, `LOGPOLICY_ADMIN_ADDR`, `LOGPOLICY_TRUSTED_KEYS` (or `_FILE`), `POD_UID`,
//! `POD_NAME`, `POD_NAMESPACE` for the admin endpoint (see `logpolicy::admin`).
//!
//! With `--self-load N` it sends itself N requests per second over one keep-alive
//! connection (light, steady traffic for demos and end-to-end tests).
//!
//! On start it prints one line to stderr:
//! `logpolicy-demo-service: shop on http://ADDR, admin on http://ADDR` (or `admin off`).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

/// A small shop that logs at every level through logpolicy.
#[derive(Debug, Parser)]
#[command(name = "logpolicy-demo-service", version)]
struct Args {
    /// Address the shop listens on (port 0: any free port).
    #[arg(long, env = "DEMO_ADDR", default_value = "127.0.0.1:8080")]
    addr: SocketAddr,
    /// Fail every Nth request with an error and a 500 (0: never).
    #[arg(long, env = "DEMO_FAIL_EVERY", default_value_t = 20)]
    fail_every: u64,
    /// Worker threads of the shop's runtime.
    #[arg(long, env = "DEMO_THREADS", default_value_t = 2)]
    threads: usize,
    /// Send itself this many requests per second (0: none).
    #[arg(long, env = "DEMO_SELF_LOAD", default_value_t = 0)]
    self_load: u32,
}

#[derive(Debug)]
struct Shop {
    requests: AtomicU64,
    /// `shop::payment` debug events emitted (whatever the policy does with them).
    payment_debug: AtomicU64,
    fail_every: u64,
}

impl Shop {
    /// One request. Its span carries the customer, `user_id`: the `user` of the query
    /// (`/checkout?user=42`), else one of 40..49 in turn, so that `kubectl logpolicy
    /// raise deploy/shop --target shop=debug --when user_id=42` has a customer to follow.
    fn checkout(&self, path: &str, query: Option<&str>) -> (StatusCode, String) {
        let id = self.requests.fetch_add(1, Ordering::Relaxed) + 1;
        let started = Instant::now();
        let param = |name: &str| {
            query
                .into_iter()
                .flat_map(|q| q.split('&'))
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
        };
        let user_id = param("user")
            .and_then(|u| u.parse::<u64>().ok())
            .unwrap_or(40 + id % 10);
        let decline = param("decline") == Some("1");
        let span = tracing::info_span!("request", id, method = "GET", path, user_id);
        let _entered = span.enter();
        tracing::trace!(target: "shop::db", pool_size = 8u64, "pool checkout");
        tracing::debug!(target: "shop::db", sql = "SELECT * FROM carts WHERE id = $1", "query");
        // What services really log at debug: the card's token and the upstream call's
        // credentials. The layer writes both as "[redacted]" at every level.
        tracing::debug!(
            target: "shop::payment",
            card = "4242…",
            card_token = "tok_visa_4242424242424242",
            authorization = "Bearer sk_live_51HqLyjWDarjtT1zdp7dc",
            amount_cents = 1999u64,
            "authorising"
        );
        self.payment_debug.fetch_add(1, Ordering::Relaxed);
        if id % 7 == 0 {
            tracing::warn!(target: "shop::db", slow_ms = 412u64, "slow query");
        }
        let failed = decline || (self.fail_every > 0 && id % self.fail_every == 0);
        if failed {
            tracing::debug!(
                target: "shop::payment",
                gateway = "acquirer-eu-2",
                response = "05 do not honour",
                retry_after_ms = 0u64,
                "gateway answered"
            );
            self.payment_debug.fetch_add(1, Ordering::Relaxed);
            tracing::error!(target: "shop::payment", code = "card_declined", "payment failed");
        }
        let status = if failed {
            StatusCode::INTERNAL_SERVER_ERROR
        } else {
            StatusCode::OK
        };
        let latency_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        tracing::info!(target: "shop::http", status = status.as_u16(), latency_us, "served");
        (
            status,
            format!("{{\"id\":{id},\"status\":{}}}\n", status.as_u16()),
        )
    }
}

async fn serve(
    req: Request<Incoming>,
    shop: Arc<Shop>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (status, body) = match req.uri().path() {
        "/healthz" => (StatusCode::OK, "{\"status\":\"ok\"}\n".to_owned()),
        "/stats" => (
            StatusCode::OK,
            format!(
                "{{\"requests\":{},\"paymentDebug\":{}}}\n",
                shop.requests.load(Ordering::Relaxed),
                shop.payment_debug.load(Ordering::Relaxed)
            ),
        ),
        path => shop.checkout(path, req.uri().query()),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    Ok(response)
}

async fn run(listener: tokio::net::TcpListener, shop: Arc<Shop>) {
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((stream, _)) = accepted else {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        let shop = shop.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| serve(req, shop.clone()));
            if let Err(e) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(target: "shop::http", error = %e, "connection ended");
            }
        });
    }
}

/// Requests `GET /checkout` from `addr` `per_second` times a second, over one
/// keep-alive connection (reopened when it fails).
async fn self_load(addr: SocketAddr, per_second: u32) {
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(1) / per_second.max(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sender = None;
    loop {
        tick.tick().await;
        if sender.is_none() {
            sender = connect(addr).await;
        }
        let Some(s) = sender.as_mut() else {
            continue;
        };
        let request = Request::get("/checkout")
            .header(hyper::header::HOST, addr.to_string())
            .body(Full::new(Bytes::new()));
        let Ok(request) = request else {
            return;
        };
        let ok = match s.send_request(request).await {
            Ok(response) => response.into_body().collect().await.is_ok(),
            Err(_) => false,
        };
        if !ok {
            sender = None;
        }
    }
}

async fn connect(addr: SocketAddr) -> Option<hyper::client::conn::http1::SendRequest<Full<Bytes>>> {
    let stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    let _ = stream.set_nodelay(true);
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .ok()?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Some(sender)
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = term.recv() => {},
                _ = tokio::signal::ctrl_c() => {},
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

fn main() -> ExitCode {
    let args = Args::parse();
    let logging = match logpolicy::init() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("logpolicy-demo-service: logging: {e}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads.max(1))
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("logpolicy-demo-service: runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let shop = Arc::new(Shop {
        requests: AtomicU64::new(0),
        payment_debug: AtomicU64::new(0),
        fail_every: args.fail_every,
    });
    let code = runtime.block_on(async {
        let listener = match tokio::net::TcpListener::bind(args.addr).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!(
                    "logpolicy-demo-service: cannot listen on {}: {e}",
                    args.addr
                );
                return ExitCode::FAILURE;
            }
        };
        let addr = listener.local_addr().unwrap_or(args.addr);
        let admin = logging.admin_addr().map_or_else(
            || "admin off".to_owned(),
            |a| format!("admin on http://{a}"),
        );
        eprintln!("logpolicy-demo-service: shop on http://{addr}, {admin}");
        tracing::info!(target: "shop::http", %addr, "listening");
        if args.self_load > 0 {
            let target = if addr.ip().is_unspecified() {
                SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), addr.port())
            } else {
                addr
            };
            tokio::spawn(self_load(target, args.self_load));
        }
        run(listener, shop).await;
        tracing::info!(target: "shop::http", "shutting down");
        ExitCode::SUCCESS
    });
    drop(runtime);
    drop(logging);
    code
}
