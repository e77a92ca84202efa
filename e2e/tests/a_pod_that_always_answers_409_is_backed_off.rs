//! Pods whose admin endpoint answers every push `409` with a held version at least as
//! new as the one sent: one claims whatever it is sent plus one (broken or hostile:
//! moving past it never converges), one holds 2^53 - 1 (the highest version a pod
//! accepts: nothing is newer). Against the real operator on the real API server: each
//! receives a handful of PUTs in 6 s, not a loop of them, and the policy's status lists
//! both as failing, saying that the pod holds a newer version and to restart it.
//!
//! The endpoints are plain TCP listeners in this process that read each request and
//! answer as the layer's admin endpoint answers a conflict (`ErrorReply` with
//! `heldVersion`), counting the PUTs.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure is a test failure

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use logpolicy_e2e::net::next_pod_ip;
use logpolicy_e2e::pod::create_running_pods;
use logpolicy_e2e::process::wait_for;
use logpolicy_e2e::scenario::condition;
use logpolicy_e2e::shop::payment_policy;
use logpolicy_e2e::Scenario;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The window the PUTs are counted in, from the first one.
const WINDOW: Duration = Duration::from_secs(6);
/// The highest version a pod accepts.
const MAX_VERSION: u64 = (1 << 53) - 1;

/// What a conflicting endpoint says it holds, given the version sent.
#[derive(Debug, Clone, Copy)]
enum Holds {
    /// The version sent, plus one.
    OneMore,
    /// Always this version.
    Fixed(u64),
}

/// A fake admin endpoint answering every `PUT /logpolicy` with a `409`.
struct Conflicting {
    addr: SocketAddr,
    /// When each PUT arrived.
    puts: Arc<Mutex<Vec<Instant>>>,
    /// The last version sent.
    last_version: Arc<AtomicU64>,
}

impl Conflicting {
    async fn start(holds: Holds) -> Conflicting {
        let listener = TcpListener::bind(SocketAddr::new(next_pod_ip().into(), 0))
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let puts = Arc::new(Mutex::new(Vec::new()));
        let last_version = Arc::new(AtomicU64::new(0));
        let (p, v) = (puts.clone(), last_version.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (p, v) = (p.clone(), v.clone());
                tokio::spawn(async move {
                    let _ = answer(stream, holds, &p, &v).await;
                });
            }
        });
        Conflicting {
            addr,
            puts,
            last_version,
        }
    }

    /// The PUTs in the window from the first one, once the window is over.
    fn puts_in_window(&self) -> Option<usize> {
        let puts = self.puts.lock().unwrap();
        let first = *puts.first()?;
        (first.elapsed() >= WINDOW).then(|| puts.iter().filter(|t| **t - first < WINDOW).count())
    }
}

/// Reads one request (head, then a body of `Content-Length`) and answers it: a PUT with
/// a `409` naming the version held, anything else with a `404`.
async fn answer(
    mut stream: TcpStream,
    holds: Holds,
    puts: &Mutex<Vec<Instant>>,
    last_version: &AtomicU64,
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 || buf.len() > 128 * 1024 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + length {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let reply = if head.starts_with("put /logpolicy ") {
        puts.lock().unwrap().push(Instant::now());
        let body: serde_json::Value =
            serde_json::from_slice(&buf[head_end..head_end + length]).unwrap_or_default();
        let sent = body["version"].as_u64().unwrap_or(0);
        last_version.store(sent, Ordering::Relaxed);
        let held = match holds {
            Holds::OneMore => sent + 1,
            Holds::Fixed(v) => v,
        };
        let body = serde_json::json!({
            "error": "stale_version",
            "reason": format!("version {sent} is older than the version held, {held}"),
            "heldVersion": held,
        })
        .to_string();
        format!(
            "HTTP/1.1 409 Conflict\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
    } else {
        let body = r#"{"error":"not_found","reason":"not here"}"#;
        format!(
            "HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    stream.write_all(reply.as_bytes()).await?;
    stream.shutdown().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_that_always_answers_409_is_backed_off() {
    let _file = crate::one_file_at_a_time(module_path!());
    let s = Scenario::new("conflict").await.unwrap();
    s.apply(&payment_policy("raise", "debug")).unwrap();
    let one_more = Conflicting::start(Holds::OneMore).await;
    let at_max = Conflicting::start(Holds::Fixed(MAX_VERSION)).await;
    let labels = BTreeMap::from([("app".to_owned(), "shop".to_owned())]);
    for (prefix, pod) in [("one-more", &one_more), ("at-max", &at_max)] {
        create_running_pods(&s.client, s.namespace(), prefix, 1, &labels, pod.addr)
            .await
            .unwrap();
    }

    let counts = wait_for(WINDOW + Duration::from_secs(20), "6 s of PUTs", || {
        Ok(one_more.puts_in_window().zip(at_max.puts_in_window()))
    })
    .unwrap();
    eprintln!(
        "PUTs in {WINDOW:?} from the first: one-more {}, at 2^53-1 {} (last versions sent {}, {})",
        counts.0,
        counts.1,
        one_more.last_version.load(Ordering::Relaxed),
        at_max.last_version.load(Ordering::Relaxed)
    );
    // A handful: the first attempt, the push past the held version, and retries backing
    // off from 1 s (each moving past the held version once more).
    assert!((2..=10).contains(&counts.0), "{counts:?}");
    // Nothing is newer than 2^53 - 1: never moved past, retried with the backoff only.
    assert!((2..=5).contains(&counts.1), "{counts:?}");
    assert!(at_max.last_version.load(Ordering::Relaxed) < MAX_VERSION);

    // The status lists both as failing, with what to do.
    let lp = wait_for(Duration::from_secs(10), "failedPods = 2", || {
        let lp = s.policy("raise")?;
        Ok((lp["status"]["failedPods"] == 2).then_some(lp))
    })
    .unwrap();
    // Not Ready while its pods have not acknowledged it: in progress for kstatus
    // (Reconciling), not failed (the spec is valid), and READY False in `kubectl get lp`.
    for (type_, status, reason) in [
        ("Ready", "False", "PodsFailed"),
        ("Reconciling", "True", "PodsFailed"),
        ("Stalled", "False", "Valid"),
    ] {
        let c = condition(&lp, type_).unwrap();
        assert_eq!(
            (&c["status"], &c["reason"]),
            (&status.into(), &reason.into()),
            "{c}"
        );
    }
    let (ready, table) = s.ready_column("raise").unwrap();
    assert_eq!(ready, "False", "READY: {table}");
    let failing = lp["status"]["failingPods"].as_array().unwrap();
    eprintln!("{failing:#?}");
    assert_eq!(failing.len(), 2, "{failing:?}");
    for f in failing {
        let reason = f["reason"].as_str().unwrap_or_default();
        assert!(
            reason.contains("newer than the operator's") && reason.contains("restart the pod"),
            "{f}"
        );
    }
    let at_max_reason = failing
        .iter()
        .find(|f| f["name"] == "at-max-0")
        .and_then(|f| f["reason"].as_str())
        .unwrap_or_default();
    assert!(
        at_max_reason.contains(&format!("holds version {MAX_VERSION}"))
            && at_max_reason.contains("beyond any version the operator issues"),
        "{at_max_reason}"
    );
    let events = wait_for(Duration::from_secs(10), "a PushFailed Event", || {
        let events = s.events("raise")?;
        Ok(events
            .iter()
            .any(|e| e.starts_with("PushFailed"))
            .then_some(events))
    })
    .unwrap();
    assert!(
        events.iter().any(|e| e.contains("restart the pod")),
        "{events:?}"
    );
}
