//! The endpoint's thread, runtime, listener and connection limits.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr, TcpListener as StdListener};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ALLOW, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::AbortHandle;

use super::config::{
    AdminConfig, AdminError, AdminLimits, KeyFile, KeySource, KeysChange, KEYS_REREAD,
};
use super::service::{Admin, Reply, Route, Viewer};
use crate::enforce::PolicyHandle;
use crate::format::own_line::{write_keys_trusted, write_skipped};
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
    /// The keys file's reader, when the keys come from a file.
    keys: Option<KeysThread>,
}

/// The thread that reads the keys file again and again; told to stop, never joined (a
/// read may hang on a broken file system: the endpoint does not wait for it).
#[derive(Debug)]
struct KeysThread {
    stop: Arc<AtomicBool>,
    thread: std::thread::Thread,
}

impl KeysThread {
    /// Starts reading `file` again and again; with a `writer`, each change of the keys
    /// in force (trusted where none were, other keys, none any longer) is one line of
    /// logpolicy's own, on `policy`'s clock.
    fn start(
        file: Arc<KeyFile>,
        writer: Option<Writer>,
        policy: PolicyHandle,
    ) -> Result<Self, AdminError> {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let handle = std::thread::Builder::new()
            .name("logpolicy-keys".into())
            .spawn(move || {
                while !stopped.load(Ordering::Relaxed) {
                    std::thread::park_timeout(KEYS_REREAD);
                    if stopped.load(Ordering::Relaxed) {
                        break;
                    }
                    if let (Some(change), Some(writer)) = (file.refresh(), &writer) {
                        write_keys_change(writer, &policy, file.path(), &change);
                    }
                }
            })
            .map_err(AdminError::Thread)?;
        Ok(KeysThread {
            stop,
            thread: handle.thread().clone(),
        })
    }

    fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.unpark();
    }
}

impl AdminServer {
    /// Binds `config`'s address and serves on a thread of its own (`logpolicy-admin`)
    /// with a single-threaded runtime of its own: never the service's. `writer`, if
    /// given, adds its counters to `/metrics`, and gets the lines that say when the
    /// keys of a keys file are trusted or no longer. An incomplete pod identity without
    /// [`AdminConfig::any_pod`] is an error ([`AdminError::NoPodIdentity`]), as an
    /// address that cannot be bound is ([`Builder`](crate::Builder) starts the service
    /// anyway unless strict: see [the module](super#when-a-setting-does-not-work)).
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
        let keys = match &config.keys {
            KeySource::File(file) => Some(KeysThread::start(
                file.clone(),
                writer.clone(),
                handle.clone(),
            )?),
            KeySource::Fixed(_) | KeySource::Missing(_) => None,
        };
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
            keys,
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
        if let Some(keys) = self.keys.take() {
            keys.stop();
        }
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

/// Writes the line that says the keys in force changed: `info` when keys are trusted,
/// `warn` when none is any longer.
fn write_keys_change(
    writer: &Writer,
    handle: &PolicyHandle,
    path: &std::path::Path,
    change: &KeysChange,
) {
    let mut line = Vec::with_capacity(256);
    let path = path.display().to_string();
    let level = match change {
        KeysChange::Trusted(keys) => {
            write_keys_trusted(&mut line, writer.style(), handle.now(), &path, *keys);
            tracing_core::Level::INFO
        }
        KeysChange::Untrusted(error) => {
            let what = "the admin endpoint refuses every push: its keys file cannot be read";
            write_skipped(&mut line, writer.style(), handle.now(), what, &path, error);
            tracing_core::Level::WARN
        }
    };
    writer.write_line(level, true, &line);
}

/// How long a peer that sent a validly signed request is remembered as a signer.
const SIGNER_MEMORY: Duration = Duration::from_secs(600);
/// Slots beyond [`AdminLimits::max_connections`] kept for signers.
const SIGNER_RESERVE: usize = 8;
/// Signers remembered at most (the oldest is forgotten first).
const MAX_SIGNERS: usize = 64;

/// The answer to a peer over its own cap.
const BUSY_PEER: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: 74\r\nconnection: close\r\n\r\n{\"error\":\"busy\",\"reason\":\"too many connections from this address at once\"}";

/// How far a connection got with its request.
const READING_HEAD: u8 = 0;
const READING_BODY: u8 = 1;
const ANSWERING: u8 = 2;

/// One connection in progress.
struct Open {
    peer: IpAddr,
    since: Instant,
    stage: Arc<AtomicU8>,
    signer: bool,
    abort: Option<AbortHandle>,
}

/// The connections in progress, per peer, and the peers that signed recently: what
/// decides who gets a slot when they run out.
#[derive(Default)]
struct Slots {
    next: u64,
    open: HashMap<u64, Open>,
    per_peer: HashMap<IpAddr, usize>,
    signers: HashMap<IpAddr, Instant>,
}

/// What to do with a new connection.
enum Admit {
    Yes,
    /// Yes, in the place of this connection (aborted).
    Evicting(u64),
    BusyPeer,
    Busy,
}

impl Slots {
    fn is_signer(&self, peer: IpAddr, now: Instant) -> bool {
        self.signers
            .get(&peer)
            .is_some_and(|t| now.duration_since(*t) < SIGNER_MEMORY)
    }

    fn signed(&mut self, peer: IpAddr, now: Instant) {
        if self.signers.len() >= MAX_SIGNERS && !self.signers.contains_key(&peer) {
            self.signers
                .retain(|_, t| now.duration_since(*t) < SIGNER_MEMORY);
            if self.signers.len() >= MAX_SIGNERS {
                if let Some(oldest) = self
                    .signers
                    .iter()
                    .min_by_key(|(_, t)| **t)
                    .map(|(p, _)| *p)
                {
                    self.signers.remove(&oldest);
                }
            }
        }
        self.signers.insert(peer, now);
    }

    fn admit(&self, peer: IpAddr, now: Instant, limits: &AdminLimits) -> Admit {
        let signer = self.is_signer(peer, now);
        let mine = self.per_peer.get(&peer).copied().unwrap_or(0);
        if !signer && mine >= limits.max_connections_per_peer.max(1) {
            return Admit::BusyPeer;
        }
        let max = limits.max_connections.max(1);
        if self.open.len() < max {
            return Admit::Yes;
        }
        // The oldest connection still sending its head, else its body; never a signer's
        // nor one being answered.
        let victim = self
            .open
            .iter()
            .filter(|(_, o)| !o.signer && o.stage.load(Ordering::Relaxed) < ANSWERING)
            .min_by_key(|(_, o)| (o.stage.load(Ordering::Relaxed), o.since))
            .map(|(id, _)| *id);
        match victim {
            Some(id) => Admit::Evicting(id),
            None if signer && self.open.len() < max + SIGNER_RESERVE => Admit::Yes,
            None => Admit::Busy,
        }
    }

    fn insert(&mut self, peer: IpAddr, now: Instant, stage: Arc<AtomicU8>) -> u64 {
        let id = self.next;
        self.next += 1;
        let signer = self.is_signer(peer, now);
        self.open.insert(
            id,
            Open {
                peer,
                since: now,
                stage,
                signer,
                abort: None,
            },
        );
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

/// Shared between the accept loop and the connections (all on the endpoint's one thread;
/// the lock is never contended).
type SharedSlots = Arc<Mutex<Slots>>;

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

async fn serve(
    listener: StdListener,
    admin: Arc<Admin>,
    limits: AdminLimits,
    mut stopped: oneshot::Receiver<()>,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    let slots = SharedSlots::default();
    loop {
        let accepted = tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            // Out of file descriptors and the like: let it pass, do not spin.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let peer = peer.ip();
        let now = Instant::now();
        let mut s = lock(&slots);
        match s.admit(peer, now, &limits) {
            Admit::Yes => {}
            Admit::Evicting(id) => {
                if let Some(abort) = s.remove(id).and_then(|o| o.abort) {
                    abort.abort();
                }
                admin.count(408);
            }
            Admit::BusyPeer => {
                admin.count(503);
                let _ = stream.try_write(BUSY_PEER);
                continue;
            }
            Admit::Busy => {
                admin.count(503);
                let _ = stream.try_write(BUSY);
                continue;
            }
        }
        let stage = Arc::new(AtomicU8::new(READING_HEAD));
        let id = s.insert(peer, now, stage.clone());
        let guard = SlotGuard {
            slots: slots.clone(),
            id,
        };
        let task = tokio::spawn(connection(
            stream,
            Conn {
                admin: admin.clone(),
                slots: slots.clone(),
                peer,
                stage,
            },
            limits,
            guard,
        ));
        if let Some(open) = s.open.get_mut(&id) {
            open.abort = Some(task.abort_handle());
        }
    }
}

/// What a connection's requests need besides the request.
#[derive(Clone)]
struct Conn {
    admin: Arc<Admin>,
    slots: SharedSlots,
    peer: IpAddr,
    stage: Arc<AtomicU8>,
}

/// Serves one connection: one request (no keep-alive), within the header and
/// whole-connection timeouts. A connection that ends without a request is counted: 431
/// for a head over the limit, 400 for one that does not parse, 408 for none in time.
async fn connection(stream: TcpStream, conn: Conn, limits: AdminLimits, _slot: SlotGuard) {
    let _ = stream.set_nodelay(true);
    let served = conn.clone();
    let service = service_fn(move |req| {
        let conn = served.clone();
        async move { Ok::<_, Infallible>(request(req, &conn).await) }
    });
    let http = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(false)
        .max_buf_size(MAX_HEAD_BYTES)
        .serve_connection(TokioIo::new(stream), service);
    // On timeout the connection future is dropped, which closes the socket.
    let outcome = tokio::time::timeout(limits.request_timeout, http).await;
    if conn.stage.load(Ordering::Relaxed) != READING_HEAD {
        return;
    }
    match outcome {
        Ok(Ok(())) => {} // closed before sending anything
        Ok(Err(e)) if e.is_parse_too_large() => conn.admin.count(431),
        Ok(Err(e)) if e.is_parse() => conn.admin.count(400),
        Ok(Err(e)) if e.is_timeout() => conn.admin.count(408),
        Ok(Err(_)) => {}
        Err(_) => conn.admin.count(408),
    }
}

async fn request(req: Request<Incoming>, conn: &Conn) -> Response<Full<Bytes>> {
    conn.stage.store(READING_BODY, Ordering::Relaxed);
    let admin = &conn.admin;
    let route = Route::of(req.method().as_str(), req.uri().path());
    let head = req.method() == hyper::Method::HEAD;
    let reply = if route.takes_body() {
        read_and_respond(req, route, admin, conn).await
    } else {
        conn.stage.store(ANSWERING, Ordering::Relaxed);
        admin.respond(route, viewer(conn), None, &[])
    };
    if reply.signed {
        lock(&conn.slots).signed(conn.peer, Instant::now());
    }
    admin.count(reply.status);
    to_response(reply, head)
}

async fn read_and_respond(
    req: Request<Incoming>,
    route: Route,
    admin: &Admin,
    conn: &Conn,
) -> Reply {
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
    conn.stage.store(ANSWERING, Ordering::Relaxed);
    admin.respond(route, viewer(conn), signature.as_deref(), &body)
}

/// Who the connection's peer is to the views.
fn viewer(conn: &Conn) -> Viewer {
    let signer = lock(&conn.slots).is_signer(conn.peer, Instant::now());
    Viewer::of(conn.peer, conn.admin.trust_loopback, signer)
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
