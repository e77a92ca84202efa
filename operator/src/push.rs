//! The pusher: signed `PUT /logpolicy` to a pod's admin endpoint, and `GET /logpolicy`
//! read-backs.
//!
//! - **Bounded, in two lanes**: at most [`PusherConfig::concurrency`] requests in flight
//!   per [`Lane`]: pods that acknowledged their last push ([`Lane::Known`]) never wait
//!   behind pods that are new or failing ([`Lane::Unproven`]), which may hang until the
//!   timeout. A push waiting for its retry holds no slot.
//! - **Timed out**: the connection must be up within [`PusherConfig::connect_timeout`]
//!   (an address that neither answers nor refuses costs that long, not more), and each
//!   attempt (connect, request, reply) is bounded by [`PusherConfig::timeout`]; replies
//!   are read up to [`PusherConfig::max_reply_bytes`].
//! - **Signed on every core**: [`Pusher::spawn_all`] signs its documents in chunks of
//!   [`SIGN_CHUNK`] on blocking threads, as many chunks at once as the machine has
//!   cores, in the order given within each lane, and sends each chunk's pushes as soon
//!   as it is signed: the runtime's workers only send, and the first pods are sent
//!   while later ones are signed. Each pod still gets its own document, signed over
//!   its exact bytes (its identity, version and expiry in it); nothing is batched
//!   under one signature.
//!   Signing stays at most [`AHEAD`] documents ahead of each lane's pushes: a change
//!   to 50,000 pods holds a few hundred signed documents and push tasks at once, not
//!   50,000.
//! - **Retried**: network failures, 5xx, 408/429 and garbage replies are retried up to
//!   [`PusherConfig::attempts`] times with exponential backoff and jitter; a timeout is
//!   not retried here (the index retries the pod later, with a backoff of its own, see
//!   [`Retry`]); a pod's refusal (4xx) is final and carries the pod's reason.
//!
//! HTTP/1.1 on a fresh connection per attempt, with hyper's low-level client: pods are
//! many distinct hosts that are each pushed rarely, so a connection pool would only hold
//! idle sockets (a thousand of them, for a thousand pods), and a connection per attempt
//! makes the timeout cover everything. No TLS: the document is signed (integrity and
//! origin) and holds no secret.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use logpolicy::wire::{sign, ErrorReply, PolicyView, ReplayView, SigningKey, SIGNATURE_HEADER};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinSet;

use crate::index::{Lane, PodKey, Push, PushResult, PushTicket, Retry};

/// How many documents one blocking task signs ([`Pusher::spawn_all`]): a thread hop per
/// 64 signatures (an Ed25519 signature costs tens of microseconds), and the first chunk
/// is on the wire after 64 signatures, not after all of them.
pub const SIGN_CHUNK: usize = 64;

/// How many documents of one lane may be signed and not yet reported, beyond the
/// lane's [`PusherConfig::concurrency`]: eight chunks (a few MiB), so that a signer
/// that waits for a core (a busy node) does not leave the lane's requests idle.
pub const AHEAD: usize = 8 * SIGN_CHUNK;

/// How many documents of one lane may be signed and not yet reported.
fn lane_room(config: &PusherConfig) -> usize {
    config.concurrency.max(1) + AHEAD
}

/// The path of the admin endpoint's policy resource.
pub const POLICY_PATH: &str = "/logpolicy";

/// How the pusher behaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PusherConfig {
    /// Requests in flight at most, per lane (default 64).
    pub concurrency: usize,
    /// The deadline to connect (default 1 s).
    pub connect_timeout: Duration,
    /// One attempt's deadline: connect, send, and read the whole reply (default 2 s).
    pub timeout: Duration,
    /// Attempts per push, the first included (default 2).
    pub attempts: u32,
    /// The wait before the first retry; doubled for each next one (default 200 ms).
    pub backoff_base: Duration,
    /// The longest wait between attempts (default 5 s).
    pub backoff_max: Duration,
    /// The largest reply read (default 64 KiB); a longer one is a bad reply.
    pub max_reply_bytes: usize,
}

impl Default for PusherConfig {
    fn default() -> Self {
        PusherConfig {
            concurrency: 64,
            connect_timeout: Duration::from_secs(1),
            timeout: Duration::from_secs(2),
            attempts: 2,
            backoff_base: Duration::from_millis(200),
            backoff_max: Duration::from_secs(5),
            max_reply_bytes: 64 * 1024,
        }
    }
}

/// How a push ended (after the pusher's retries).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushOutcome {
    /// The pod answered 2xx with JSON: it holds the document.
    Applied,
    /// The pod refused the document (4xx) and said why.
    Rejected {
        /// The HTTP status.
        status: u16,
        /// The pod's reason.
        reason: String,
    },
    /// The pod holds a newer version (409); `held` is the version it reported, if any.
    Stale {
        /// The version the pod holds.
        held: Option<u64>,
        /// The pod's reason.
        reason: String,
    },
    /// The pod failed (5xx).
    ServerError {
        /// The HTTP status.
        status: u16,
        /// What it said.
        reason: String,
    },
    /// No connection (refused, reset, no route).
    Unreachable(String),
    /// No complete answer within the timeout.
    Timeout(Duration),
    /// Not HTTP, or a 2xx that is not the layer's JSON.
    BadReply(String),
}

impl PushOutcome {
    /// Whether another attempt may succeed (network trouble, 5xx, 429).
    pub fn is_retryable(&self) -> bool {
        match self {
            PushOutcome::Applied | PushOutcome::Stale { .. } => false,
            PushOutcome::Rejected { status, .. } => *status == 429 || *status == 408,
            PushOutcome::ServerError { .. }
            | PushOutcome::Unreachable(_)
            | PushOutcome::Timeout(_)
            | PushOutcome::BadReply(_) => true,
        }
    }

    /// A short, bounded label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            PushOutcome::Applied => "applied",
            PushOutcome::Rejected { .. } => "rejected",
            PushOutcome::Stale { .. } => "stale",
            PushOutcome::ServerError { .. } => "server_error",
            PushOutcome::Unreachable(_) => "unreachable",
            PushOutcome::Timeout(_) => "timeout",
            PushOutcome::BadReply(_) => "bad_reply",
        }
    }
}

impl fmt::Display for PushOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PushOutcome::Applied => write!(f, "applied"),
            PushOutcome::Rejected { status, reason } => write!(f, "rejected ({status}): {reason}"),
            PushOutcome::Stale { held, reason } => match held {
                Some(v) => write!(f, "stale: pod holds version {v}: {reason}"),
                None => write!(f, "stale: {reason}"),
            },
            PushOutcome::ServerError { status, reason } => {
                write!(f, "pod error ({status}): {reason}")
            }
            PushOutcome::Unreachable(e) => write!(f, "unreachable: {e}"),
            PushOutcome::Timeout(d) => write!(f, "timeout after {d:?}"),
            PushOutcome::BadReply(e) => write!(f, "bad reply: {e}"),
        }
    }
}

/// What the index records of an outcome: the pod holds the document, or why not (with the
/// version it holds, when it refused a stale one).
impl From<&PushOutcome> for PushResult {
    fn from(outcome: &PushOutcome) -> Self {
        match outcome {
            PushOutcome::Applied => PushResult::Applied,
            other => PushResult::Failed {
                label: other.metric_label(),
                reason: other.to_string(),
                held: match other {
                    PushOutcome::Stale { held, .. } => *held,
                    _ => None,
                },
                retry: match other {
                    PushOutcome::Timeout(_) => Retry::Later,
                    o if o.is_retryable() => Retry::Soon,
                    _ => Retry::No,
                },
            },
        }
    }
}

/// How a push ended, for [`Index::record_push`](crate::index::Index::record_push) and metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushReport {
    /// Which pod.
    pub pod: PodKey,
    /// The push's ticket.
    pub ticket: PushTicket,
    /// The last attempt's outcome.
    pub outcome: PushOutcome,
    /// Attempts made.
    pub attempts: u32,
    /// From the first attempt to the outcome, backoff included.
    pub elapsed: Duration,
    /// The replays the pod reported in its answer (`PolicyView.replays`; empty unless
    /// applied).
    pub replays: Vec<ReplayView>,
}

/// What `GET /logpolicy` says a pod holds.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReadBack {
    /// The version of the document it holds, if any.
    pub version: Option<u64>,
    /// The sources of its layers, in order.
    pub sources: Vec<String>,
    /// The replays it reports (`PolicyView.replays`).
    pub replays: Vec<ReplayView>,
}

/// Pushes signed documents. Cheap to clone (shared state).
#[derive(Clone)]
pub struct Pusher {
    inner: Arc<Inner>,
}

struct Inner {
    key: SigningKey,
    config: PusherConfig,
    known: Semaphore,
    unproven: Semaphore,
    /// Chunks being signed at once: one per core.
    signers: Semaphore,
    /// Documents signed and not yet reported, per lane ([`AHEAD`]): known, unproven.
    ahead: [Arc<Semaphore>; 2],
}

impl Inner {
    fn ahead(&self, lane: Lane) -> &Arc<Semaphore> {
        match lane {
            Lane::Known => &self.ahead[0],
            Lane::Unproven => &self.ahead[1],
        }
    }
}

/// A push's document as sent: its JSON and the signature over exactly those bytes.
/// Made once per push; its retries send the same bytes.
struct Signed {
    body: Bytes,
    signature: String,
}

fn sign_document(push: &Push, key: &SigningKey) -> Signed {
    let body = Bytes::from(push.document.to_json());
    let signature = sign(&body, key);
    Signed { body, signature }
}

impl std::fmt::Debug for Pusher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pusher")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

/// Aborts a spawned connection task when the request using it is done or dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Pusher {
    /// A pusher signing with `key`.
    pub fn new(key: SigningKey, config: PusherConfig) -> Self {
        let permits = || Semaphore::new(config.concurrency.max(1));
        let ahead = || Arc::new(Semaphore::new(lane_room(&config)));
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Pusher {
            inner: Arc::new(Inner {
                key,
                known: permits(),
                unproven: permits(),
                signers: Semaphore::new(cores),
                ahead: [ahead(), ahead()],
                config,
            }),
        }
    }

    /// Its configuration.
    pub fn config(&self) -> &PusherConfig {
        &self.inner.config
    }

    /// How many documents of `lane` [`spawn_all`](Self::spawn_all) has signed (or is
    /// signing) that have not reported yet: at most the lane's concurrency plus
    /// [`AHEAD`].
    pub fn signed_unreported(&self, lane: Lane) -> usize {
        lane_room(&self.inner.config) - self.inner.ahead(lane).available_permits()
    }

    /// Pushes one document: signs its JSON once, then attempts, retries and backs off
    /// as configured. Never panics, whatever the pod answers.
    pub async fn push(&self, push: &Push) -> PushReport {
        let start = Instant::now();
        let signed = sign_document(push, &self.inner.key);
        self.push_signed(push, signed, start).await
    }

    /// [`push`](Self::push) with its document signed already (at `start`).
    async fn push_signed(&self, push: &Push, signed: Signed, start: Instant) -> PushReport {
        let Signed { body, signature } = signed;
        let cfg = &self.inner.config;
        let mut attempts = 0;
        loop {
            attempts += 1;
            let (mut outcome, replays) = self
                .put_in(push.lane, push.addr, body.clone(), &signature)
                .await;
            if let PushOutcome::Stale { held: None, reason } = &outcome {
                // A pod that did not say which version it holds (its 409 has no
                // `heldVersion`): ask, so the index can go past it.
                if let Ok(read) = self.read_back_in(push.lane, push.addr).await {
                    outcome = PushOutcome::Stale {
                        held: read.version,
                        reason: reason.clone(),
                    };
                }
            }
            let timed_out = matches!(outcome, PushOutcome::Timeout(_));
            if !outcome.is_retryable() || timed_out || attempts >= cfg.attempts.max(1) {
                return PushReport {
                    pod: push.pod.clone(),
                    ticket: push.ticket,
                    outcome,
                    attempts,
                    elapsed: start.elapsed(),
                    replays,
                };
            }
            tokio::time::sleep(backoff(cfg, attempts)).await;
        }
    }

    /// Pushes each document in its own (detached) task and sends every report to
    /// `reports` (a report is dropped only if the receiver is gone). The documents are
    /// signed [`SIGN_CHUNK`] at a time on blocking threads, one chunk per core at once,
    /// in the order given within each lane, at most [`AHEAD`] ahead of the lane's
    /// pushes; each chunk's pushes start when it is signed.
    pub fn spawn_all(&self, pushes: Vec<Push>, reports: &mpsc::Sender<PushReport>) {
        let mut tasks = JoinSet::new();
        self.spawn_all_in(pushes, reports, &mut tasks);
        tasks.detach_all();
    }

    /// [`spawn_all`](Self::spawn_all), each task in `tasks`: dropping the set (or
    /// `abort_all`) stops every push at once.
    pub fn spawn_all_in(
        &self,
        pushes: Vec<Push>,
        reports: &mpsc::Sender<PushReport>,
        tasks: &mut JoinSet<()>,
    ) {
        // Each lane's chunks wait for that lane's room only: known pods are never
        // signed behind unproven ones that hang.
        let (known, unproven): (Vec<Push>, Vec<Push>) =
            pushes.into_iter().partition(|p| p.lane == Lane::Known);
        for lane in [known, unproven] {
            let mut pushes = lane.into_iter().peekable();
            while pushes.peek().is_some() {
                let chunk: Vec<Push> = pushes.by_ref().take(SIGN_CHUNK).collect();
                let pusher = self.clone();
                let reports = reports.clone();
                tasks.spawn(async move { pusher.sign_and_push(chunk, reports).await });
            }
        }
    }

    /// Signs `chunk` on a blocking thread (when one of the per-core slots is free), then
    /// pushes each of its documents in a task of its own, which owns its push (a pod
    /// that hangs keeps only its own document); ends when all have reported. Aborted,
    /// it aborts them.
    async fn sign_and_push(&self, chunk: Vec<Push>, reports: mpsc::Sender<PushReport>) {
        let Some(lane) = chunk.first().map(|p| p.lane) else {
            return;
        };
        // Room for the whole chunk in its lane (the semaphore is fair: chunks go in
        // the order they were spawned); each push gives its place back when it reports.
        let n = u32::try_from(chunk.len()).unwrap_or(u32::MAX);
        let Ok(mut room) = self.inner.ahead(lane).clone().acquire_many_owned(n).await else {
            return; // never closed
        };
        let start = Instant::now();
        let slot = self.inner.signers.acquire().await;
        let pusher = self.clone();
        let signed = tokio::task::spawn_blocking(move || {
            let key = &pusher.inner.key;
            chunk
                .into_iter()
                .map(|p| {
                    // Signing does not fail; were it to panic, the push signs its own
                    // document in its task and still reports.
                    let signed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        sign_document(&p, key)
                    }));
                    (p, signed.ok())
                })
                .collect::<Vec<_>>()
        })
        .await;
        drop(slot);
        let Ok(signed) = signed else {
            return; // the closure catches every panic: not reached
        };
        let mut tasks = JoinSet::new();
        for (push, signed) in signed {
            let (pusher, reports) = (self.clone(), reports.clone());
            let place = room.split(1);
            tasks.spawn(async move {
                let _place = place;
                let report = match signed {
                    Some(signed) => pusher.push_signed(&push, signed, start).await,
                    None => pusher.push(&push).await,
                };
                let _ = reports.send(report).await;
            });
        }
        while tasks.join_next().await.is_some() {}
    }

    /// One signed `PUT`, classified (in the [`Lane::Unproven`] lane).
    pub async fn put_once(&self, addr: SocketAddr, body: Bytes, signature: &str) -> PushOutcome {
        self.put_in(Lane::Unproven, addr, body, signature).await.0
    }

    async fn put_in(
        &self,
        lane: Lane,
        addr: SocketAddr,
        body: Bytes,
        signature: &str,
    ) -> (PushOutcome, Vec<ReplayView>) {
        let request = Request::builder()
            .method(Method::PUT)
            .uri(POLICY_PATH)
            .header(hyper::header::HOST, addr.to_string())
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .header(SIGNATURE_HEADER, signature)
            .body(Full::new(body));
        let request = match request {
            Ok(r) => r,
            Err(e) => {
                let e = PushOutcome::BadReply(format!("cannot build the request: {e}"));
                return (e, Vec::new());
            }
        };
        match self.exchange(lane, addr, request).await {
            Ok((status, body)) => classify_put(status, &body),
            Err(outcome) => (outcome, Vec::new()),
        }
    }

    /// `GET /logpolicy`: what the pod holds. One attempt, in the [`Lane::Known`] lane
    /// (read-backs go to pods that acknowledged).
    pub async fn read_back(&self, addr: SocketAddr) -> Result<ReadBack, PushOutcome> {
        self.read_back_in(Lane::Known, addr).await
    }

    /// [`Pusher::read_back`] of each target, as many at a time as the known lane has
    /// permits: a request is built only when its turn comes (a task per pod, each with
    /// its request built, held 2 KiB a pod at once). Yields each target that answered,
    /// with what it holds; one that did not is left to the next resync.
    pub fn read_backs<T: Send + 'static>(
        &self,
        targets: Vec<(SocketAddr, T)>,
    ) -> impl futures::Stream<Item = (T, ReadBack)> + Send + 'static {
        use futures::StreamExt;
        let pusher = self.clone();
        let at_once = self.inner.config.concurrency.max(1);
        futures::stream::iter(targets)
            .map(move |(addr, target)| {
                let pusher = pusher.clone();
                async move { pusher.read_back(addr).await.ok().map(|read| (target, read)) }
            })
            .buffer_unordered(at_once)
            .filter_map(std::future::ready)
    }

    async fn read_back_in(&self, lane: Lane, addr: SocketAddr) -> Result<ReadBack, PushOutcome> {
        let request = Request::builder()
            .method(Method::GET)
            .uri(POLICY_PATH)
            .header(hyper::header::HOST, addr.to_string())
            .header(hyper::header::ACCEPT, "application/json")
            .body(Full::new(Bytes::new()))
            .map_err(|e| PushOutcome::BadReply(format!("cannot build the request: {e}")))?;
        let (status, body) = self.exchange(lane, addr, request).await?;
        if !status.is_success() {
            return Err(classify_put(status, &body).0);
        }
        let view: PolicyView = serde_json::from_slice(&body).map_err(|e| {
            PushOutcome::BadReply(format!(
                "GET {POLICY_PATH} reply is not the policy view: {e}"
            ))
        })?;
        Ok(ReadBack {
            version: view.document.map(|d| d.version),
            sources: view.layers.into_iter().map(|l| l.layer.source).collect(),
            replays: view.replays,
        })
    }

    /// One request on a fresh connection, within one permit of `lane` and one deadline.
    async fn exchange(
        &self,
        lane: Lane,
        addr: SocketAddr,
        request: Request<Full<Bytes>>,
    ) -> Result<(StatusCode, Bytes), PushOutcome> {
        let cfg = &self.inner.config;
        let permits = match lane {
            Lane::Known => &self.inner.known,
            Lane::Unproven => &self.inner.unproven,
        };
        let _permit = permits
            .acquire()
            .await
            .map_err(|_| PushOutcome::Unreachable("pusher closed".into()))?;
        let max = cfg.max_reply_bytes;
        let connect_timeout = cfg.connect_timeout.min(cfg.timeout);
        let attempt = async move {
            let stream = tokio::time::timeout(connect_timeout, TcpStream::connect(addr))
                .await
                .map_err(|_| PushOutcome::Timeout(connect_timeout))?
                .map_err(|e| PushOutcome::Unreachable(format!("connect {addr}: {e}")))?;
            let _ = stream.set_nodelay(true);
            let (mut sender, connection) =
                hyper::client::conn::http1::handshake(TokioIo::new(stream))
                    .await
                    .map_err(|e| PushOutcome::Unreachable(format!("{addr}: {e}")))?;
            let _connection = AbortOnDrop(tokio::spawn(async move {
                let _ = connection.await;
            }));
            let response = sender
                .send_request(request)
                .await
                .map_err(|e| hyper_error(addr, &e))?;
            let status = response.status();
            let body = Limited::new(response.into_body(), max)
                .collect()
                .await
                .map_err(|e| PushOutcome::BadReply(format!("reply body: {e}")))?
                .to_bytes();
            Ok((status, body))
        };
        match tokio::time::timeout(cfg.timeout, attempt).await {
            Ok(result) => result,
            Err(_) => Err(PushOutcome::Timeout(cfg.timeout)),
        }
    }
}

fn hyper_error(addr: SocketAddr, e: &hyper::Error) -> PushOutcome {
    if e.is_parse() || e.is_parse_status() || e.is_incomplete_message() {
        PushOutcome::BadReply(format!("{addr}: {e}"))
    } else {
        PushOutcome::Unreachable(format!("{addr}: {e}"))
    }
}

/// The wait before attempt `attempt + 1`: `base * 2^(attempt-1)`, capped, then scaled
/// by a random factor in [0.5, 1) so that pods failing together do not retry together.
fn backoff(cfg: &PusherConfig, attempt: u32) -> Duration {
    let exp = cfg
        .backoff_base
        .saturating_mul(1u32 << attempt.saturating_sub(1).min(16))
        .min(cfg.backoff_max);
    exp.mul_f64(rand::random_range(0.5..1.0))
}

/// What a pod's answer to a `PUT` means, read with the endpoint's own reply types: a
/// [`PolicyView`] when applied (with the replays it reports), an [`ErrorReply`] (with
/// the held version on a `409`) otherwise.
fn classify_put(status: StatusCode, body: &[u8]) -> (PushOutcome, Vec<ReplayView>) {
    let code = status.as_u16();
    if status.is_success() {
        return match serde_json::from_slice::<PolicyView>(body) {
            Ok(view) => (PushOutcome::Applied, view.replays),
            Err(_) => (
                PushOutcome::BadReply(format!(
                    "{code} without the endpoint's JSON: {}",
                    snippet(body)
                )),
                Vec::new(),
            ),
        };
    }
    (classify_refusal(code, body), Vec::new())
}

fn classify_refusal(code: u16, body: &[u8]) -> PushOutcome {
    let reply = serde_json::from_slice::<ErrorReply>(body).ok();
    let reason = match &reply {
        Some(r) => snippet(r.to_string().as_bytes()),
        None => snippet(body),
    };
    match code {
        409 => PushOutcome::Stale {
            held: reply.and_then(|r| r.held_version),
            reason,
        },
        400..=499 => PushOutcome::Rejected {
            status: code,
            reason,
        },
        500..=599 => PushOutcome::ServerError {
            status: code,
            reason,
        },
        _ => PushOutcome::BadReply(format!("unexpected status {code}: {reason}")),
    }
}

/// At most 300 bytes of a reply, lossily decoded, for a reason.
fn snippet(body: &[u8]) -> String {
    const MAX: usize = 300;
    let s = String::from_utf8_lossy(&body[..body.len().min(MAX)]);
    let s: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let s = s.trim().to_owned();
    if body.len() > MAX {
        format!("{s}...")
    } else if s.is_empty() {
        "(empty reply)".to_owned()
    } else {
        s
    }
}

#[cfg(test)]
mod tests;
