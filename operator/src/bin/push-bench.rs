//! From a policy change to every pod applied: the index and the pusher against 1,000
//! simulated pods.
//!
//! ```sh
//! cargo run --release -p logpolicy-operator --bin push-bench            # 1,000 pods
//! cargo run --release -p logpolicy-operator --bin push-bench -- 200     # fewer
//! ```
//!
//! The pods are a child process (this binary, re-executed with `agents`) listening on
//! 1,000 loopback addresses (127.0.1.1 to 127.0.4.250: all of 127/8 is loopback on
//! Linux), each answering like the layer's admin endpoint: it verifies the Ed25519
//! signature over the exact body, parses the document, checks the pod name and that the
//! version is newer than the one it holds, and answers JSON (200, 401, 403, 409, 422).
//! The parent is the operator's side alone (index, pusher, one multi-thread runtime of
//! two workers), so its RSS is the operator's. It drives the same loop a controller
//! runs: change the index, take its pushes, spawn them, record the reports, until
//! nothing is left to push.
//!
//! Results: a markdown table on stdout and `target/bench/operator-push.json`.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use logpolicy::wire::{self, PolicyDocument, TrustedKeys, SIGNATURE_HEADER};
use logpolicy_operator::{
    Index, PodInfo, PolicyInput, PolicyKey, PushReport, Pusher, PusherConfig,
};
use tokio::sync::mpsc;

const PORT: u16 = 19_090;
const NAMESPACE: &str = "bench";

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn addr(i: usize) -> SocketAddr {
    let third = u8::try_from(1 + i / 250).unwrap_or(u8::MAX);
    let fourth = u8::try_from(1 + i % 250).unwrap_or(u8::MAX);
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, third, fourth)), PORT)
}

fn pod_name(i: usize) -> String {
    format!("pod-{i:04}")
}

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("agents") {
        let pods: usize = args.get(1).ok_or("agents N KEY")?.parse()?;
        let key = args.get(2).ok_or("agents N KEY")?;
        return agents(pods, key);
    }
    let pods: usize = args.first().map(|a| a.parse()).transpose()?.unwrap_or(1000);
    if pods == 0 || pods > 250 * 250 {
        return Err("pods: 1 to 62500".into());
    }
    operator(pods)
}

// ---- the simulated pods --------------------------------------------------------------

struct Held {
    version: u64,
    sources: Vec<String>,
}

fn agents(pods: usize, public_key: &str) -> Result<(), BoxError> {
    let trusted = Arc::new(TrustedKeys::parse(public_key)?);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        for i in 0..pods {
            let listener = tokio::net::TcpListener::bind(addr(i)).await?;
            let held = Arc::new(Mutex::new(Held {
                version: 0,
                sources: Vec::new(),
            }));
            let trusted = trusted.clone();
            let name = pod_name(i);
            tokio::spawn(async move {
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        continue;
                    };
                    let (held, trusted, name) = (held.clone(), trusted.clone(), name.clone());
                    tokio::spawn(async move {
                        let service = hyper::service::service_fn(move |req| {
                            answer(req, held.clone(), trusted.clone(), name.clone())
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
            });
        }
        println!("ready");
        std::io::stdout().flush()?;
        // Until the parent closes our stdin.
        let mut line = String::new();
        let _ = tokio::task::spawn_blocking(move || std::io::stdin().read_line(&mut line)).await;
        Ok::<(), BoxError>(())
    })
}

fn json(status: StatusCode, body: serde_json::Value) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
    *r.status_mut() = status;
    r
}

async fn answer(
    req: Request<Incoming>,
    held: Arc<Mutex<Held>>,
    trusted: Arc<TrustedKeys>,
    name: String,
) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    // The layer's shape: `{"layers": [...], "document": {"version": N} | null}`.
    let read = |h: &Held| {
        let document = (h.version > 0).then(|| serde_json::json!({ "version": h.version }));
        let layers: Vec<serde_json::Value> = h
            .sources
            .iter()
            .map(|s| serde_json::json!({ "source": s }))
            .collect();
        serde_json::json!({ "layers": layers, "document": document })
    };
    if req.method() == Method::GET {
        let body = held.lock().map(|h| read(&h)).unwrap_or_default();
        return Ok(json(StatusCode::OK, body));
    }
    let signature = req
        .headers()
        .get(SIGNATURE_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = match Limited::new(req.into_body(), 64 * 1024).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            return Ok(json(
                StatusCode::PAYLOAD_TOO_LARGE,
                serde_json::json!({"error": "too_large"}),
            ))
        }
    };
    if let Err(e) = wire::verify(&body, signature.as_deref(), &trusted) {
        return Ok(json(
            StatusCode::UNAUTHORIZED,
            serde_json::json!({"error": e.code(), "reason": e.to_string()}),
        ));
    }
    let doc = match PolicyDocument::from_json(&body) {
        Ok(d) => d,
        Err(e) => {
            return Ok(json(
                StatusCode::UNPROCESSABLE_ENTITY,
                serde_json::json!({"error": "invalid_document", "reason": e.to_string()}),
            ))
        }
    };
    if doc.pod.name != name {
        return Ok(json(
            StatusCode::FORBIDDEN,
            serde_json::json!({"error": "wrong_pod"}),
        ));
    }
    let Ok(mut h) = held.lock() else {
        return Ok(json(
            StatusCode::INTERNAL_SERVER_ERROR,
            serde_json::json!({"error": "poisoned"}),
        ));
    };
    if doc.version < h.version {
        return Ok(json(
            StatusCode::CONFLICT,
            serde_json::json!({"error": "stale_version", "reason": format!("version {} is older than the version held, {}", doc.version, h.version)}),
        ));
    }
    h.version = doc.version;
    h.sources = doc.layers.into_iter().map(|l| l.source).collect();
    Ok(json(StatusCode::OK, read(&h)))
}

// ---- the operator's side ---------------------------------------------------------------

struct Row {
    scenario: &'static str,
    pods_pushed: usize,
    applied: usize,
    failed: usize,
    retries: u32,
    millis: f64,
    push_p50_ms: f64,
    push_max_ms: f64,
}

fn operator(pods: usize) -> Result<(), BoxError> {
    let key = wire::generate_signing_key()?;
    let public = wire::encode_public_key(&key.verifying_key());
    let mut child = Command::new(std::env::current_exe()?)
        .args(["agents", &pods.to_string(), &public])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut ready = String::new();
    BufReader::new(child.stdout.take().ok_or("child stdout")?).read_line(&mut ready)?;
    if ready.trim() != "ready" {
        let _ = child.kill();
        return Err(format!("agents did not start: {ready:?}").into());
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let rows = rt.block_on(scenarios(pods, key));
    let agents_rss = rss_kib(child.id()).map(|(_, hwm)| hwm);
    drop(child.stdin.take());
    let _ = child.wait();
    let rows = rows?;
    let (rss, hwm) = rss_kib(std::process::id()).unwrap_or((0, 0));

    println!("## operator push: {pods} simulated pods on loopback\n");
    println!("| scenario | pods pushed | applied | failed | retries | time to all applied | push p50 (queued + sent) | push max |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {} | {} | {:.0} ms | {:.1} ms | {:.1} ms |",
            r.scenario,
            r.pods_pushed,
            r.applied,
            r.failed,
            r.retries,
            r.millis,
            r.push_p50_ms,
            r.push_max_ms
        );
    }
    println!(
        "\noperator process RSS: {:.1} MiB now, {:.1} MiB peak (target <= 64 MiB); simulated pods' process peak: {}",
        rss as f64 / 1024.0,
        hwm as f64 / 1024.0,
        agents_rss.map_or("n/a".to_owned(), |k| format!("{:.1} MiB", k as f64 / 1024.0))
    );
    let worst = rows.iter().map(|r| r.millis).fold(0.0, f64::max);
    println!("slowest change to all applied: {worst:.0} ms (target <= 2000 ms)");

    let json = serde_json::json!({
        "pods": pods,
        "pusher": {"concurrency": PusherConfig::default().concurrency, "timeout_ms": PusherConfig::default().timeout.as_millis() as u64},
        "scenarios": rows.iter().map(|r| serde_json::json!({
            "scenario": r.scenario, "pods_pushed": r.pods_pushed, "applied": r.applied, "failed": r.failed,
            "retries": r.retries, "time_to_all_applied_ms": r.millis, "push_p50_ms": r.push_p50_ms, "push_max_ms": r.push_max_ms,
        })).collect::<Vec<_>>(),
        "slowest_change_ms": worst,
        "operator_rss_kib": rss,
        "operator_peak_rss_kib": hwm,
        "agents_peak_rss_kib": agents_rss,
        "targets": {"time_ms": 2000, "rss_mib": 64},
    });
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(
        dir.join("operator-push.json"),
        serde_json::to_string_pretty(&json)?,
    )?;
    println!("\nwritten: target/bench/operator-push.json");
    if worst > 2000.0 || hwm > 64 * 1024 || rows.iter().any(|r| r.failed > 0) {
        return Err("a target was missed".into());
    }
    Ok(())
}

/// `VmRSS` and `VmHWM` of a process, in KiB.
fn rss_kib(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

fn spec(v: serde_json::Value) -> Result<logpolicy_operator::LogPolicySpec, BoxError> {
    Ok(serde_json::from_value(v)?)
}

async fn scenarios(pods: usize, key: wire::SigningKey) -> Result<Vec<Row>, BoxError> {
    let pusher = Pusher::new(key, PusherConfig::default());
    let (tx, mut rx) = mpsc::channel(1024);
    let mut index = Index::new();
    let policy = PolicyKey::new(NAMESPACE, "incident");
    let mut rows = Vec::new();

    let start = Instant::now();
    for i in 0..pods {
        let half = if i % 2 == 0 { "a" } else { "b" };
        let info = PodInfo::new(
            NAMESPACE,
            &pod_name(i),
            &format!("uid-{i}"),
            Some(addr(i).ip()),
            PORT,
        )
        .label("app", "shop")
        .label("half", half);
        index.apply_pod(info, SystemTime::now());
    }
    rows.push(
        converge(
            "pods start (empty documents)",
            start,
            &mut index,
            &pusher,
            &tx,
            &mut rx,
            None,
        )
        .await?,
    );

    let expires = SystemTime::now() + Duration::from_secs(900);
    let raise = serde_json::json!({"selector": {"matchLabels": {"app": "shop"}}, "defaultLevel": "info",
        "targets": [{"target": "shop::payment", "level": "debug"}],
        "sampling": [{"target": "shop::http", "keepOneIn": 100, "scope": "request"}],
        "expirationTime": logpolicy::clock::format_rfc3339(expires)});
    let start = Instant::now();
    index.apply_policy(
        PolicyInput::new(NAMESPACE, "incident", spec(raise.clone())?),
        SystemTime::now(),
    );
    rows.push(
        converge(
            "apply a policy selecting all",
            start,
            &mut index,
            &pusher,
            &tx,
            &mut rx,
            Some(&policy),
        )
        .await?,
    );

    let mut more = raise.clone();
    more["targets"][0]["level"] = "trace".into();
    let mut input = PolicyInput::new(NAMESPACE, "incident", spec(more.clone())?);
    input.generation = 2;
    let start = Instant::now();
    index.apply_policy(input, SystemTime::now());
    rows.push(
        converge(
            "change its level",
            start,
            &mut index,
            &pusher,
            &tx,
            &mut rx,
            Some(&policy),
        )
        .await?,
    );

    let mut narrow = more;
    narrow["selector"] = serde_json::json!({"matchLabels": {"app": "shop", "half": "a"}});
    let mut input = PolicyInput::new(NAMESPACE, "incident", spec(narrow)?);
    input.generation = 3;
    let start = Instant::now();
    index.apply_policy(input, SystemTime::now());
    rows.push(
        converge(
            "narrow its selector to half",
            start,
            &mut index,
            &pusher,
            &tx,
            &mut rx,
            Some(&policy),
        )
        .await?,
    );

    // The index's clock reaches the expiration time (no waiting: time is an argument).
    let start = Instant::now();
    index.tick(expires);
    rows.push(
        converge(
            "it expires (back to baseline)",
            start,
            &mut index,
            &pusher,
            &tx,
            &mut rx,
            None,
        )
        .await?,
    );

    let second = PolicyKey::new(NAMESPACE, "no-expiry");
    let start = Instant::now();
    let mut forever = raise;
    if let Some(o) = forever.as_object_mut() {
        o.remove("expirationTime");
    }
    index.apply_policy(
        PolicyInput::new(NAMESPACE, "no-expiry", spec(forever)?),
        expires,
    );
    rows.push(
        converge(
            "apply another selecting all",
            start,
            &mut index,
            &pusher,
            &tx,
            &mut rx,
            Some(&second),
        )
        .await?,
    );

    let start = Instant::now();
    index.delete_policy(&second);
    rows.push(
        converge(
            "delete it (back to baseline)",
            start,
            &mut index,
            &pusher,
            &tx,
            &mut rx,
            None,
        )
        .await?,
    );

    // A periodic resync: read every pod back; nothing should have drifted.
    let start = Instant::now();
    let reads = index.resync();
    let n = reads.len();
    let mut set = tokio::task::JoinSet::new();
    for r in reads {
        let pusher = pusher.clone();
        set.spawn(async move { (r.clone(), pusher.read_back(r.addr).await) });
    }
    let mut drift = 0;
    let mut failed = 0;
    while let Some(done) = set.join_next().await {
        let (target, read) = done?;
        match read {
            Ok(read) => {
                drift +=
                    usize::from(index.record_read_back(&target.pod, target.ticket, read.version))
            }
            Err(_) => failed += 1,
        }
    }
    rows.push(Row {
        scenario: "resync: read back every pod",
        pods_pushed: n,
        applied: n - drift - failed,
        failed: failed + drift,
        retries: 0,
        millis: start.elapsed().as_secs_f64() * 1000.0,
        push_p50_ms: 0.0,
        push_max_ms: 0.0,
    });
    Ok(rows)
}

/// The controller's loop in miniature: push what the index says, record the reports,
/// until nothing is left to push.
async fn converge(
    scenario: &'static str,
    start: Instant,
    index: &mut Index,
    pusher: &Pusher,
    tx: &mpsc::Sender<PushReport>,
    rx: &mut mpsc::Receiver<PushReport>,
    policy: Option<&PolicyKey>,
) -> Result<Row, BoxError> {
    let deadline = start + Duration::from_secs(60);
    let mut in_flight = 0usize;
    let mut pushed = 0usize;
    let mut outcomes: HashMap<&'static str, usize> = HashMap::new();
    let mut latencies = Vec::new();
    let mut retries = 0;
    loop {
        let pushes = index.take_pushes(SystemTime::now());
        in_flight += pushes.len();
        pushed += pushes.len();
        pusher.spawn_all(pushes, tx);
        if in_flight == 0 {
            break;
        }
        let report = tokio::time::timeout_at(tokio::time::Instant::from_std(deadline), rx.recv())
            .await
            .map_err(|_| format!("{scenario}: not converged within 60 s"))?
            .ok_or("report channel closed")?;
        in_flight -= 1;
        retries += report.attempts.saturating_sub(1);
        latencies.push(report.elapsed.as_secs_f64() * 1000.0);
        *outcomes.entry(report.outcome.metric_label()).or_default() += 1;
        index.record_push(&report.pod, report.ticket, &report.outcome);
    }
    let millis = start.elapsed().as_secs_f64() * 1000.0;
    latencies.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        latencies
            .get(((latencies.len() as f64 - 1.0) * p) as usize)
            .copied()
            .unwrap_or(0.0)
    };
    let (applied, failed) = match policy.and_then(|p| index.policy_view(p)) {
        Some(view) => (view.applied as usize, view.failed as usize),
        None => (
            outcomes.get("applied").copied().unwrap_or(0),
            outcomes
                .iter()
                .filter(|(k, _)| **k != "applied")
                .map(|(_, v)| v)
                .sum(),
        ),
    };
    Ok(Row {
        scenario,
        pods_pushed: pushed,
        applied,
        failed,
        retries,
        millis,
        push_p50_ms: pct(0.5),
        push_max_ms: pct(1.0),
    })
}
