//! The pusher against real HTTP servers on loopback addresses, each answering one way:
//! 200, 4xx with a JSON reason, 5xx, garbage, slowly, or not at all.

use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::SystemTime;

use logpolicy::policy::LayerSpec;
use logpolicy::wire::{verify, PodRef, PolicyDocument, TrustedKeys};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// How a test server answers the n-th request (0-based).
#[derive(Clone)]
enum Answer {
    /// Raw bytes (a whole HTTP response, or garbage).
    Raw(Vec<u8>),
    /// Wait this long, then say nothing and close.
    Sleep(Duration),
}

fn http(status: &str, body: &str) -> Answer {
    Answer::Raw(
        format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

struct Received {
    method: String,
    signature: Option<String>,
    body: Vec<u8>,
}

struct Server {
    addr: SocketAddr,
    hits: Arc<AtomicUsize>,
    received: Arc<tokio::sync::Mutex<Vec<Received>>>,
}

/// A server on 127.0.0.`host` (a port chosen by the system) answering request n with
/// `answers[min(n, len-1)]`.
async fn server(host: u8, answers: Vec<Answer>) -> Server {
    let listener = TcpListener::bind((std::net::Ipv4Addr::new(127, 0, 0, host), 0))
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let hits = Arc::new(AtomicUsize::new(0));
    let received = Arc::new(tokio::sync::Mutex::new(Vec::new()));
    let (h, r) = (hits.clone(), received.clone());
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let n = h.fetch_add(1, Ordering::SeqCst);
            let answer = answers[n.min(answers.len() - 1)].clone();
            let r = r.clone();
            tokio::spawn(async move {
                let Some(req) = read_request(&mut stream).await else {
                    return;
                };
                r.lock().await.push(req);
                match answer {
                    Answer::Raw(bytes) => {
                        let _ = stream.write_all(&bytes).await;
                        let _ = stream.shutdown().await;
                    }
                    Answer::Sleep(d) => tokio::time::sleep(d).await,
                }
            });
        }
    });
    Server {
        addr,
        hits,
        received,
    }
}

async fn read_request(stream: &mut TcpStream) -> Option<Received> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let header = |name: &str| {
        head.lines().find_map(|l| {
            l.split_once(':')
                .filter(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.trim().to_owned())
        })
    };
    let len: usize = header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + len {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Some(Received {
        method: head.split(' ').next().unwrap_or_default().to_owned(),
        signature: header(SIGNATURE_HEADER),
        body: buf[head_end..head_end + len].to_vec(),
    })
}

fn key() -> SigningKey {
    SigningKey::from_bytes(&[42; 32])
}

fn fast() -> PusherConfig {
    PusherConfig {
        concurrency: 8,
        connect_timeout: Duration::from_millis(500),
        timeout: Duration::from_millis(500),
        attempts: 3,
        backoff_base: Duration::from_millis(10),
        backoff_max: Duration::from_millis(40),
        max_reply_bytes: 4096,
    }
}

fn push_to(addr: SocketAddr, name: &str) -> Push {
    let layer =
        LayerSpec::from_directives("shop/debug", 10, "shop::payment=debug".parse().unwrap());
    Push {
        pod: PodKey::new("shop", name),
        addr,
        ticket: PushTicket {
            version: 7,
            epoch: 0,
        },
        document: PolicyDocument {
            pod: PodRef::new("shop", name, "uid-1"),
            version: 7,
            issued_at: SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
            layers: vec![layer],
            lost: Vec::new(),
        },
        lane: Lane::Unproven,
    }
}

/// An address that neither answers nor refuses: a listener that accepts nothing, its
/// one-connection backlog filled, so that the kernel drops further SYNs.
async fn hanging(host: u8) -> (tokio::net::TcpListener, tokio::net::TcpStream) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket
        .bind((std::net::Ipv4Addr::new(127, 0, 0, host), 0).into())
        .unwrap();
    let listener = socket.listen(0).unwrap();
    let filler = TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    (listener, filler)
}

#[tokio::test]
async fn a_signed_document_is_applied() {
    let s = server(11, vec![http("200 OK", r#"{"version":7}"#)]).await;
    let pusher = Pusher::new(key(), fast());
    let push = push_to(s.addr, "web-1");
    let report = pusher.push(&push).await;
    assert_eq!((report.outcome, report.attempts), (PushOutcome::Applied, 1));
    let received = s.received.lock().await;
    assert_eq!(received[0].method, "PUT");
    // The pod's side: the signature verifies over the exact bytes, which parse back.
    let trusted = TrustedKeys::new([key().verifying_key()]);
    verify(
        &received[0].body,
        received[0].signature.as_deref(),
        &trusted,
    )
    .unwrap();
    assert_eq!(
        PolicyDocument::from_json(&received[0].body).unwrap(),
        push.document
    );
}

#[tokio::test]
async fn a_refusal_is_final_and_carries_the_pods_reason() {
    let s = server(
        12,
        vec![http(
            "401 Unauthorized",
            r#"{"error":"untrusted_key","reason":"key 0011 is not trusted"}"#,
        )],
    )
    .await;
    let report = Pusher::new(key(), fast())
        .push(&push_to(s.addr, "web-1"))
        .await;
    assert_eq!(
        report.outcome,
        PushOutcome::Rejected {
            status: 401,
            reason: "untrusted_key: key 0011 is not trusted".into()
        }
    );
    assert_eq!(report.attempts, 1);
    assert_eq!(s.hits.load(Ordering::SeqCst), 1);

    let s = server(
        12,
        vec![http("422 Unprocessable Entity", "not json at all")],
    )
    .await;
    let report = Pusher::new(key(), fast())
        .push(&push_to(s.addr, "web-1"))
        .await;
    assert_eq!(
        report.outcome,
        PushOutcome::Rejected {
            status: 422,
            reason: "not json at all".into()
        }
    );
}

#[tokio::test]
async fn a_server_error_is_retried_with_backoff() {
    let s = server(
        13,
        vec![
            http("503 Service Unavailable", r#"{"error":"busy"}"#),
            http("200 OK", "{}"),
        ],
    )
    .await;
    let report = Pusher::new(key(), fast())
        .push(&push_to(s.addr, "web-1"))
        .await;
    assert_eq!((report.outcome, report.attempts), (PushOutcome::Applied, 2));
    assert!(
        report.elapsed >= Duration::from_millis(5),
        "{:?}",
        report.elapsed
    );

    let s = server(
        13,
        vec![http("500 Internal Server Error", r#"{"error":"boom"}"#)],
    )
    .await;
    let report = Pusher::new(key(), fast())
        .push(&push_to(s.addr, "web-1"))
        .await;
    assert_eq!(
        report.outcome,
        PushOutcome::ServerError {
            status: 500,
            reason: "boom".into()
        }
    );
    assert_eq!((report.attempts, s.hits.load(Ordering::SeqCst)), (3, 3));
}

#[tokio::test]
async fn garbage_is_a_bad_reply() {
    for (host, answer) in [
        (14, Answer::Raw(b"SSH-2.0-OpenSSH_9.6\r\n".to_vec())),
        (15, http("200 OK", "<html>an app's own port</html>")),
        (16, http("200 OK", &"x".repeat(10_000))),
        (
            17,
            Answer::Raw(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{\"ver".to_vec()),
        ),
    ] {
        let s = server(host, vec![answer]).await;
        let report = Pusher::new(key(), fast())
            .push(&push_to(s.addr, "web-1"))
            .await;
        assert!(
            matches!(report.outcome, PushOutcome::BadReply(_)),
            "{host}: {:?}",
            report.outcome
        );
        assert_eq!(report.attempts, 3);
    }
}

#[tokio::test]
async fn a_slow_pod_times_out() {
    let s = server(18, vec![Answer::Sleep(Duration::from_secs(10))]).await;
    let cfg = PusherConfig {
        timeout: Duration::from_millis(200),
        attempts: 2,
        ..fast()
    };
    times_out_once(
        cfg,
        s.addr,
        Duration::from_millis(200),
        Duration::from_secs(2),
    )
    .await;
}

/// Pushes to `addr` and checks that the push timed out after `after`, in one attempt
/// (a timeout is retried by the index later, not by the pusher), within `within`.
async fn times_out_once(
    cfg: PusherConfig,
    addr: SocketAddr,
    after: Duration,
    within: Duration,
) -> PushReport {
    let start = Instant::now();
    let report = Pusher::new(key(), cfg).push(&push_to(addr, "web-1")).await;
    assert_eq!(report.outcome, PushOutcome::Timeout(after));
    assert_eq!(report.attempts, 1);
    assert!(start.elapsed() < within, "{:?}", start.elapsed());
    report
}

#[tokio::test]
async fn nothing_listening_is_unreachable() {
    // Bind then drop: a port on which nothing listens.
    let addr = TcpListener::bind("127.0.0.19:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    let report = Pusher::new(key(), fast())
        .push(&push_to(addr, "web-1"))
        .await;
    assert!(
        matches!(report.outcome, PushOutcome::Unreachable(ref e) if e.contains("refused")),
        "{:?}",
        report.outcome
    );
    assert_eq!(report.attempts, 3);
}

#[tokio::test]
async fn a_stale_version_learns_what_the_pod_holds() {
    let stale = "version 7 is older than the version held, 9000";
    // The layer's endpoint says in its 409 which version it holds (its typed reply):
    // the PUT is the only request.
    let typed = serde_json::to_string(&logpolicy::wire::ErrorReply {
        held_version: Some(9000),
        ..logpolicy::wire::ErrorReply::new("stale_version", stale)
    })
    .unwrap();
    // A pod whose 409 does not say: the pusher asks with a GET.
    let untyped = format!(r#"{{"error":"stale_version","reason":"{stale}"}}"#);
    let held = r#"{"document":{"version":9000},"layers":[{"source":"shop/other"}]}"#;
    for (host, answers, requests) in [
        (27, vec![http("409 Conflict", &typed)], &["PUT"][..]),
        (
            20,
            vec![http("409 Conflict", &untyped), http("200 OK", held)],
            &["PUT", "GET"][..],
        ),
    ] {
        let s = server(host, answers).await;
        let report = Pusher::new(key(), fast())
            .push(&push_to(s.addr, "web-1"))
            .await;
        assert_eq!(
            report.outcome,
            PushOutcome::Stale {
                held: Some(9000),
                reason: format!("stale_version: {stale}")
            }
        );
        assert_eq!(report.attempts, 1);
        let methods: Vec<String> = s
            .received
            .lock()
            .await
            .iter()
            .map(|r| r.method.clone())
            .collect();
        assert_eq!(methods, requests, "{host}");
        assert_eq!(s.hits.load(Ordering::SeqCst), requests.len());
    }
}

#[tokio::test]
async fn read_back_reports_the_version_and_layers() {
    let s = server(
        21,
        vec![http(
            "200 OK",
            r#"{"document":{"version":12},"layers":[{"source":"shop/a"},{"source":"env"}],"nextExpiry":null}"#,
        )],
    )
    .await;
    let read = Pusher::new(key(), fast()).read_back(s.addr).await.unwrap();
    assert_eq!(
        read,
        ReadBack {
            version: Some(12),
            sources: vec!["shop/a".into(), "env".into()],
            replays: Vec::new(),
        }
    );
    // The layer's own shape: the held document's version under `document`; the
    // baseline is a layer too.
    let s = server(25, vec![http("200 OK", r#"{"effective":{},"layers":[{"source":"env"},{"source":"shop/a","active":true}],
        "document":{"version":1800000000123,"issuedAt":"2027-01-15T08:00:00Z","pod":{"namespace":"shop","name":"web-1","uid":"u"}},
        "nextExpiry":null,"generation":4}"#)]).await;
    let read = Pusher::new(key(), fast()).read_back(s.addr).await.unwrap();
    assert_eq!(read.version, Some(1_800_000_000_123));
    let s = server(
        26,
        vec![http(
            "200 OK",
            r#"{"layers":[{"source":"env"}],"document":null}"#,
        )],
    )
    .await;
    assert_eq!(
        Pusher::new(key(), fast())
            .read_back(s.addr)
            .await
            .unwrap()
            .version,
        None
    );
    let s = server(22, vec![http("200 OK", "nope")]).await;
    assert!(matches!(
        Pusher::new(key(), fast()).read_back(s.addr).await,
        Err(PushOutcome::BadReply(_))
    ));
}

#[tokio::test]
async fn slow_and_dead_pods_never_hold_up_the_others() {
    let cfg = PusherConfig {
        concurrency: 4,
        timeout: Duration::from_millis(1500),
        attempts: 2,
        ..fast()
    };
    let pusher = Pusher::new(key(), cfg);
    let slow1 = server(23, vec![Answer::Sleep(Duration::from_secs(10))]).await;
    let slow2 = server(24, vec![Answer::Sleep(Duration::from_secs(10))]).await;
    let mut pushes = vec![push_to(slow1.addr, "slow-1"), push_to(slow2.addr, "slow-2")];
    let mut fast_servers = Vec::new();
    for i in 0..20u8 {
        let s = server(30 + i, vec![http("200 OK", "{}")]).await;
        pushes.push(push_to(s.addr, &format!("fast-{i}")));
        fast_servers.push(s);
    }
    let (tx, mut rx) = mpsc::channel(64);
    let start = Instant::now();
    pusher.spawn_all(pushes, &tx);
    let mut fast_done = 0;
    while fast_done < 20 {
        let report = rx.recv().await.unwrap();
        assert!(report.pod.name.starts_with("fast"), "{report:?}");
        assert_eq!(report.outcome, PushOutcome::Applied);
        fast_done += 1;
    }
    assert!(
        start.elapsed() < Duration::from_millis(1000),
        "{:?}",
        start.elapsed()
    );
    for _ in 0..2 {
        let report = rx.recv().await.unwrap();
        assert!(matches!(report.outcome, PushOutcome::Timeout(_)));
    }
}

#[tokio::test]
async fn an_address_that_never_answers_costs_the_connect_timeout() {
    let (listener, _filler) = hanging(40).await;
    let cfg = PusherConfig {
        connect_timeout: Duration::from_millis(200),
        timeout: Duration::from_secs(5),
        ..fast()
    };
    let addr = listener.local_addr().unwrap();
    let millis = Duration::from_millis(200);
    let report = times_out_once(cfg, addr, millis, Duration::from_secs(4)).await;
    assert_eq!(
        PushResult::from(&report.outcome),
        PushResult::Failed {
            label: "timeout",
            reason: "timeout after 200ms".into(),
            held: None,
            retry: Retry::Later,
        }
    );
}

#[tokio::test]
async fn known_pods_never_wait_behind_unproven_ones() {
    let cfg = PusherConfig {
        concurrency: 2,
        connect_timeout: Duration::from_secs(3),
        timeout: Duration::from_secs(3),
        ..fast()
    };
    let pusher = Pusher::new(key(), cfg);
    let (listener, _filler) = hanging(41).await;
    let hung = listener.local_addr().unwrap();
    // The hanging pods are pushed first, and fill their lane many times over.
    let mut pushes: Vec<Push> = (0..10)
        .map(|i| push_to(hung, &format!("hung-{i}")))
        .collect();
    let mut known = Vec::new();
    for i in 0..5u8 {
        let s = server(42 + i, vec![http("200 OK", "{}")]).await;
        let mut push = push_to(s.addr, &format!("known-{i}"));
        push.lane = Lane::Known;
        pushes.push(push);
        known.push(s);
    }
    let (tx, mut rx) = mpsc::channel(64);
    pusher.spawn_all(pushes, &tx);
    for _ in 0..5 {
        let report = rx.recv().await.unwrap();
        assert!(report.pod.name.starts_with("known"), "{report:?}");
        assert_eq!(report.outcome, PushOutcome::Applied);
    }
}

#[test]
fn backoff_grows_is_capped_and_jittered() {
    let cfg = PusherConfig {
        backoff_base: Duration::from_millis(100),
        backoff_max: Duration::from_secs(1),
        ..fast()
    };
    for attempt in 1..40 {
        let d = backoff(&cfg, attempt);
        let cap = Duration::from_millis(100 * (1u64 << (attempt - 1).min(16)))
            .min(Duration::from_secs(1));
        assert!(d >= cap / 2 && d < cap, "{attempt}: {d:?}");
    }
}

#[test]
fn the_index_records_an_outcome_as_its_label_and_its_text() {
    let failed = |label: &'static str, reason: &str, held: Option<u64>| PushResult::Failed {
        label,
        reason: reason.to_owned(),
        held,
        retry: match label {
            "timeout" => Retry::Later,
            "rejected" | "stale" => Retry::No,
            _ => Retry::Soon,
        },
    };
    let cases = [
        (PushOutcome::Applied, PushResult::Applied),
        (
            PushOutcome::Rejected {
                status: 401,
                reason: "untrusted_key".into(),
            },
            failed("rejected", "rejected (401): untrusted_key", None),
        ),
        (
            PushOutcome::Timeout(Duration::from_secs(2)),
            failed("timeout", "timeout after 2s", None),
        ),
        (
            PushOutcome::Stale {
                held: Some(7),
                reason: "stale_version".into(),
            },
            failed(
                "stale",
                "stale: pod holds version 7: stale_version",
                Some(7),
            ),
        ),
        (
            PushOutcome::Stale {
                held: None,
                reason: "stale_version".into(),
            },
            failed("stale", "stale: stale_version", None),
        ),
        (
            PushOutcome::ServerError {
                status: 503,
                reason: "busy".into(),
            },
            failed("server_error", "pod error (503): busy", None),
        ),
        (
            PushOutcome::Unreachable("connect: refused".into()),
            failed("unreachable", "unreachable: connect: refused", None),
        ),
        (
            PushOutcome::BadReply("not JSON".into()),
            failed("bad_reply", "bad reply: not JSON", None),
        ),
    ];
    for (outcome, result) in cases {
        assert_eq!(PushResult::from(&outcome), result, "{outcome:?}");
        assert_eq!(result.label(), outcome.metric_label());
    }
}

/// `spawn_all` signs in chunks on blocking threads; each pod still gets its own
/// document, signed over its exact bytes: its name, uid and version in it, nothing
/// shared between pods but the key.
#[tokio::test]
async fn documents_signed_in_chunks_are_each_pods_own() {
    let s = server(60, vec![http("200 OK", "{}")]).await;
    let pusher = Pusher::new(key(), fast());
    let n = 3 * SIGN_CHUNK + 5;
    let pushes: Vec<Push> = (0..n)
        .map(|i| {
            let mut p = push_to(s.addr, &format!("web-{i}"));
            p.document.pod = PodRef::new("shop", format!("web-{i}"), format!("uid-{i}"));
            p.document.version = 7 + i as u64;
            p.ticket.version = p.document.version;
            p
        })
        .collect();
    let (tx, mut rx) = mpsc::channel(n);
    pusher.spawn_all(pushes.clone(), &tx);
    for _ in 0..n {
        let report = rx.recv().await.unwrap();
        assert_eq!(report.outcome, PushOutcome::Applied, "{report:?}");
    }
    let trusted = TrustedKeys::new([key().verifying_key()]);
    let received = s.received.lock().await;
    assert_eq!(received.len(), n);
    let mut seen = std::collections::BTreeMap::new();
    for r in received.iter() {
        verify(&r.body, r.signature.as_deref(), &trusted).unwrap();
        let doc = PolicyDocument::from_json(&r.body).unwrap();
        seen.insert(doc.pod.name.clone(), doc);
    }
    assert_eq!(seen.len(), n, "a pod was sent another pod's document");
    for p in &pushes {
        assert_eq!(seen[&p.pod.name], p.document);
    }
    // A signature does not carry over to another pod's body.
    let (a, b) = (&received[0], &received[1]);
    assert!(verify(&b.body, a.signature.as_deref(), &trusted).is_err());
}

#[tokio::test]
async fn signing_stays_a_bounded_distance_ahead_of_each_lanes_pushes() {
    let cfg = PusherConfig {
        concurrency: 2,
        connect_timeout: Duration::from_secs(5),
        timeout: Duration::from_secs(5),
        ..fast()
    };
    let pusher = Pusher::new(key(), cfg);
    let (listener, _filler) = hanging(70).await;
    let hung = listener.local_addr().unwrap();
    // Twenty chunks for pods that hang: only the lane's room is signed.
    let n = 20 * SIGN_CHUNK;
    let pushes: Vec<Push> = (0..n)
        .map(|i| push_to(hung, &format!("hung-{i}")))
        .collect();
    let (tx, mut rx) = mpsc::channel(n + 1);
    pusher.spawn_all(pushes, &tx);
    let bound = 2 + AHEAD;
    let deadline = Instant::now() + Duration::from_secs(3);
    while pusher.signed_unreported(Lane::Unproven) < bound && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(pusher.signed_unreported(Lane::Unproven), bound);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        pusher.signed_unreported(Lane::Unproven),
        bound,
        "signed past the lane's room"
    );
    assert_eq!(pusher.signed_unreported(Lane::Known), 0);
    // The known lane has its own room: its pod is signed and applied at once.
    let s = server(71, vec![http("200 OK", "{}")]).await;
    let mut known = push_to(s.addr, "known");
    known.lane = Lane::Known;
    pusher.spawn_all(vec![known], &tx);
    let report = rx.recv().await.unwrap();
    assert_eq!(report.pod.name, "known", "{report:?}");
    assert_eq!(report.outcome, PushOutcome::Applied);
    // Its place comes back once its task has handed the report over.
    let deadline = Instant::now() + Duration::from_secs(1);
    while pusher.signed_unreported(Lane::Known) > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        pusher.signed_unreported(Lane::Known),
        0,
        "its place is back"
    );
}
