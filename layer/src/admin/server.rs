//! The endpoint's thread, runtime, listener and connection limits.

use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ALLOW, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, Semaphore};

use super::config::{AdminConfig, AdminError, AdminLimits};
use super::service::{Admin, Reply, Route};
use crate::enforce::PolicyHandle;
use crate::wire::SIGNATURE_HEADER;
use crate::writer::Writer;

/// The answer to a connection beyond the cap, written without reading anything.
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: 70\r\nconnection: close\r\n\r\n{\"error\":\"busy\",\"reason\":\"too many connections to the admin endpoint\"}";

/// The largest request head (request line and headers) read.
const MAX_HEAD_BYTES: usize = 16 * 1024;

/// A running admin endpoint. Dropping it (or [`AdminServer::shutdown`]) stops it: the
/// listener closes and connections in progress are cut.
///
/// # Examples
///
/// ```
/// use logpolicy::admin::{AdminConfig, AdminServer};
/// use logpolicy::wire::{SigningKey, TrustedKeys};
/// use logpolicy::PolicyFilter;
/// use std::io::{Read, Write};
///
/// let filter = PolicyFilter::from_directives("info").unwrap();
/// let keys = TrustedKeys::new([SigningKey::from_bytes(&[1; 32]).verifying_key()]);
/// let admin = AdminServer::start(
///     AdminConfig::new("127.0.0.1:0".parse().unwrap(), keys).any_pod(), filter.handle(), None).unwrap();
///
/// let mut conn = std::net::TcpStream::connect(admin.local_addr()).unwrap();
/// conn.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
/// let mut response = String::new();
/// conn.read_to_string(&mut response).unwrap();
/// assert!(response.starts_with("HTTP/1.1 200 OK"));
/// ```
#[must_use = "the admin endpoint stops when this is dropped"]
#[derive(Debug)]
pub struct AdminServer {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl AdminServer {
    /// Binds `config`'s address and serves on a thread of its own (`logpolicy-admin`)
    /// with a single-threaded runtime of its own: never the service's. `writer`, if
    /// given, adds its counters to `/metrics`.
    pub fn start(
        config: AdminConfig,
        handle: PolicyHandle,
        writer: Option<Writer>,
    ) -> Result<Self, AdminError> {
        config.check_identity()?;
        let addr = config.addr;
        let listener =
            StdListener::bind(addr).map_err(|source| AdminError::Bind { addr, source })?;
        let local = listener
            .local_addr()
            .map_err(|source| AdminError::Bind { addr, source })?;
        listener
            .set_nonblocking(true)
            .map_err(|source| AdminError::Bind { addr, source })?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(AdminError::Thread)?;
        let limits = config.limits;
        let admin = Arc::new(Admin::new(config, handle, writer));
        let (stop, stopped) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("logpolicy-admin".into())
            .spawn(move || runtime.block_on(serve(listener, admin, limits, stopped)))
            .map_err(AdminError::Thread)?;
        Ok(AdminServer {
            addr: local,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The address it listens on (with the port the system chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops the endpoint and waits for its thread.
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for AdminServer {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

async fn serve(
    listener: StdListener,
    admin: Arc<Admin>,
    limits: AdminLimits,
    mut stopped: oneshot::Receiver<()>,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    loop {
        let accepted = tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            // Out of file descriptors and the like: let it pass, do not spin.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        match slots.clone().try_acquire_owned() {
            Ok(slot) => {
                let admin = admin.clone();
                tokio::spawn(async move {
                    connection(stream, admin, limits).await;
                    drop(slot);
                });
            }
            Err(_) => {
                admin.count(503);
                let _ = stream.try_write(BUSY);
            }
        }
    }
}

/// Serves one connection: one request (no keep-alive), within the header and
/// whole-connection timeouts.
async fn connection(stream: TcpStream, admin: Arc<Admin>, limits: AdminLimits) {
    let _ = stream.set_nodelay(true);
    let service = service_fn(move |req| {
        let admin = admin.clone();
        async move { Ok::<_, Infallible>(request(req, &admin).await) }
    });
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(false)
        .max_buf_size(MAX_HEAD_BYTES)
        .serve_connection(TokioIo::new(stream), service);
    // On timeout the connection future is dropped, which closes the socket.
    let _ = tokio::time::timeout(limits.request_timeout, conn).await;
}

async fn request(req: Request<Incoming>, admin: &Admin) -> Response<Full<Bytes>> {
    let route = Route::of(req.method().as_str(), req.uri().path());
    let head = req.method() == hyper::Method::HEAD;
    let reply = if route.takes_body() {
        read_and_respond(req, route, admin).await
    } else {
        admin.respond(route, None, &[])
    };
    admin.count(reply.status);
    to_response(reply, head)
}

async fn read_and_respond(req: Request<Incoming>, route: Route, admin: &Admin) -> Reply {
    let max = admin.max_body_bytes;
    let too_large = || {
        Reply::error(
            413,
            "body_too_large",
            format!("the body is larger than {max} bytes"),
        )
    };
    let declared = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return too_large();
    }
    // A header that is not visible ASCII cannot be a signature; it is refused as malformed.
    let signature = req
        .headers()
        .get(SIGNATURE_HEADER)
        .map(|v| v.to_str().unwrap_or("(not ASCII)").to_owned());
    let body = match Limited::new(req.into_body(), max).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => return too_large(),
        Err(e) => {
            return Reply::error(
                400,
                "bad_request",
                format!("the body could not be read: {e}"),
            )
        }
    };
    admin.respond(route, signature.as_deref(), &body)
}

fn to_response(reply: Reply, head: bool) -> Response<Full<Bytes>> {
    let status = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let len = reply.body.len();
    let body = if head {
        Bytes::new()
    } else {
        Bytes::from(reply.body)
    };
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(reply.content_type));
    headers.insert(CONNECTION, HeaderValue::from_static("close"));
    if head {
        headers.insert(CONTENT_LENGTH, HeaderValue::from(len));
    }
    if let Some(allow) = reply.allow {
        headers.insert(ALLOW, HeaderValue::from_static(allow));
    }
    response
}
