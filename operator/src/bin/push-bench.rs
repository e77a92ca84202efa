//! From a policy change to every pod applied: the index and the pusher against 1,000
//! simulated pods.
//!
//! ```sh
//! cargo run --release -p logpolicy-operator --bin push-bench            # 1,000 pods
//! cargo run --release -p logpolicy-operator --bin push-bench -- 200     # fewer
//! # 10,000 pods of which 1,000 hang and 1,000 refuse:
//! cargo run --release -p logpolicy-operator --bin push-bench -- 10000 1000 1000
//! # 50,000 pods of which 1% hang and 1% refuse:
//! cargo run --release -p logpolicy-operator --bin push-bench -- 50000 500 500
//! ```
//!
//! With `PODS HANG REFUSE`, the last `HANG + REFUSE` pods do not answer: the first `HANG`
//! have a listener that accepts nothing (the kernel completes the handshake, nobody
//! reads: the push times out), the others have no listener (connection refused). The
//! figure that counts is then "last live pod applied": the time from the change until
//! every answering pod has acknowledged it (target <= 2 s after the pods' first contact;
//! at first contact every pod is new, and the live ones share a lane with the hanging
//! ones). A change ends when every pod pushed for it has reported once (applied, refused,
//! or timed out), so with 1,000 hanging pods each change takes 30-90 s to close (they
//! time out 64 at a time, behind the retries of the hanging pods of the change before)
//! and the whole run about 5 minutes; "all answered or timed out" says how long. The
//! live pods' figure does not wait for them: they are in the lane of pods that
//! acknowledged. The simulated pods are split among child processes of at most 12,500
//! pods each, so that each needs at most about 12,800 open files (`ulimit -n`, which an
//! unprivileged user cannot raise past the hard limit): the bench says so and stops if
//! the limit is lower. The operator's targets: 64 MiB peak RSS up to 1,000 pods, 128 MiB
//! up to 10,000, 256 MiB beyond; 2 s to the last live pod up to 10,000 pods, 5 s beyond
//! (50,000 pods: a 5,000-node cluster with a tenth of its pods opted in). The operator's
//! CPU seconds are reported per change and for the run, from `/proc/self/stat`.
//!
//! The pods are child processes (this binary, re-executed with `agents FROM TO ...`)
//! listening on loopback addresses (127.0.1.1 upwards, 250 per /24: all of 127/8 is
//! loopback on Linux), each answering like the layer's admin endpoint: it verifies the Ed25519
//! signature over the exact body, parses the document, checks the pod name and that the
//! version is newer than the one it holds, and answers JSON (200, 401, 403, 409, 422).
//! `GET /logpolicy/sites` answers a ledger ([`SitesView`]) of a few callsites whose
//! counts grow at fixed rates from the process's start (the plugin's bench reads it
//! with `kubectl logpolicy top`).
//! The parent is the operator's side alone (index, pusher, one multi-thread runtime of
//! two workers), so its RSS is the operator's. It drives the same loop a controller
//! runs: change the index, take its pushes, spawn them, record the reports, until
//! nothing is left to push.
//!
//! Results: a markdown table on stdout and `target/bench/operator-push.json`.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use logpolicy::wire::{
    self, CallsiteKind, CountsView, OtherSitesView, PolicyDocument, SiteView, SitesView,
    TargetView, TrustedKeys, WriterTotals, SIGNATURE_HEADER,
};
use logpolicy::Level;
use logpolicy_operator::simulated::{addr, pod_name, PORT};
use logpolicy_operator::{
    Index, PodInfo, PodKey, PolicyInput, PolicyKey, PushReport, PushTicket, Pusher, PusherConfig,
};
use tokio::sync::mpsc;

const NAMESPACE: &str = "bench";

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("agents") {
        let usage = "agents FROM TO N KEY HANG REFUSE [report]";
        let arg = |i: usize| args.get(i).ok_or(usage);
        let range = arg(1)?.parse()?..arg(2)?.parse()?;
        let pods: usize = arg(3)?.parse()?;
        let key = arg(4)?;
        let dead = Dead {
            hang: arg(5)?.parse()?,
            refuse: arg(6)?.parse()?,
        };
        // `report`: a line `applied POD UNIX_MS` on stdout for each document accepted
        // (for a parent that reads them; `scale-bench` does).
        let _ = REPORT.set(args.get(7).map(String::as_str) == Some("report"));
        return agents(range, pods, key, dead);
    }
    let number = |i: usize, default: usize| -> Result<usize, BoxError> {
        Ok(args
            .get(i)
            .map(|a| a.parse())
            .transpose()?
            .unwrap_or(default))
    };
    let pods = number(0, 1000)?;
    let dead = Dead {
        hang: number(1, 0)?,
        refuse: number(2, 0)?,
    };
    if pods == 0 || pods > 250 * 250 {
        return Err("pods: 1 to 62500".into());
    }
    if dead.hang + dead.refuse >= pods {
        return Err("HANG + REFUSE must leave live pods".into());
    }
    operator(pods, dead)
}

/// Pods that do not answer: the last `hang + refuse` of them.
#[derive(Clone, Copy)]
struct Dead {
    hang: usize,
    refuse: usize,
}

impl Dead {
    fn total(self) -> usize {
        self.hang + self.refuse
    }
}

/// The soft limit of open files, which must leave room for one listener per answering
/// or hanging pod in the simulated pods' process (which inherits it).
fn check_nofile_limit(needed: usize) -> Result<u64, BoxError> {
    let limits = std::fs::read_to_string("/proc/self/limits")?;
    let soft = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|v| v.parse::<u64>().ok())
        .ok_or("cannot read the limit of open files")?;
    if soft < needed as u64 {
        return Err(format!(
            "the simulated pods need about {needed} open files, the limit is {soft}: raise it (ulimit -n {needed}) or simulate fewer pods"
        )
        .into());
    }
    Ok(soft)
}

// ---- the simulated pods --------------------------------------------------------------

/// Where simulated pod `i` listens: [`addr`], on the port `PUSH_BENCH_AGENTS_PORT` names
/// if set (so that two benches can run at once).
fn agent_addr(i: usize) -> std::net::SocketAddr {
    let mut a = addr(i);
    if let Some(port) = std::env::var("PUSH_BENCH_AGENTS_PORT")
        .ok()
        .and_then(|p| p.parse().ok())
    {
        a.set_port(port);
    }
    a
}

/// Whether each accepted document is reported on stdout (`agents ... report`).
static REPORT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

struct Held {
    version: u64,
    sources: Vec<String>,
}

/// The simulated pods `range` of `pods` (the last `dead.total()` of which do not answer).
fn agents(
    range: std::ops::Range<usize>,
    pods: usize,
    public_key: &str,
    dead: Dead,
) -> Result<(), BoxError> {
    let trusted = Arc::new(TrustedKeys::parse(public_key)?);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let live = pods - dead.total();
    let started = SystemTime::now();
    rt.block_on(async move {
        // Hanging pods: a listener that never accepts (held until the end).
        let mut hanging = Vec::new();
        for i in live.max(range.start)..(live + dead.hang).min(range.end) {
            hanging.push(std::net::TcpListener::bind(agent_addr(i))?);
        }
        // Refusing pods (the rest): no listener at all.
        for i in range.start..live.min(range.end) {
            let listener = tokio::net::TcpListener::bind(agent_addr(i)).await?;
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
                            answer(req, held.clone(), trusted.clone(), name.clone(), started)
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
        drop(hanging);
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
    started: SystemTime,
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
    if req.method() == Method::GET && req.uri().path() == "/logpolicy/sites" {
        let view = sites(started, SystemTime::now());
        return Ok(json(
            StatusCode::OK,
            serde_json::to_value(view).unwrap_or_default(),
        ));
    }
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
    if REPORT.get() == Some(&true) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "applied {name} {}", unix_ms(SystemTime::now()));
        let _ = out.flush();
    }
    Ok(json(StatusCode::OK, read(&h)))
}

/// Milliseconds since the Unix epoch.
fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A simulated pod's ledger at `now`, its process started at `started`: four
/// callsites, each writing a fixed number of lines of a fixed length per second since
/// the start (one of them never enabled: a row of zeros), and a policy change's line of
/// logpolicy's own.
fn sites(started: SystemTime, now: SystemTime) -> SitesView {
    let elapsed_ms = unix_ms(now).saturating_sub(unix_ms(started));
    // (target, level, file, line, lines per second, bytes per line)
    let callsites: [(&str, Level, &str, u32, u64, u64); 4] = [
        ("bench::http", Level::Info, "src/http.rs", 42, 100, 220),
        ("bench::db", Level::Warn, "src/db.rs", 17, 5, 180),
        ("bench::payment", Level::Error, "src/payment.rs", 88, 1, 200),
        ("bench::db", Level::Debug, "src/db.rs", 12, 0, 0),
    ];
    let rows: Vec<SiteView> = callsites
        .iter()
        .map(|&(target, level, file, line, per_second, line_bytes)| {
            let lines = per_second * elapsed_ms / 1000;
            SiteView {
                kind: CallsiteKind::Event,
                target: target.to_owned(),
                level,
                name: format!("event {file}:{line}"),
                file: Some(file.to_owned()),
                line: Some(line),
                module_path: Some(target.to_owned()),
                counts: CountsView {
                    lines,
                    bytes: lines * line_bytes,
                    ..CountsView::default()
                },
            }
        })
        .collect();
    let mut targets: Vec<TargetView> = Vec::new();
    for r in &rows {
        let at = match targets.iter().position(|t| t.target == r.target) {
            Some(at) => at,
            None => {
                targets.push(TargetView {
                    target: r.target.clone(),
                    level_now: Level::Info,
                    ..TargetView::default()
                });
                targets.len() - 1
            }
        };
        let t = &mut targets[at];
        t.levels.push(r.level);
        t.callsites += 1;
        t.counts.lines += r.counts.lines;
        t.counts.bytes += r.counts.bytes;
    }
    let totals = CountsView {
        lines: rows.iter().map(|r| r.counts.lines).sum(),
        bytes: rows.iter().map(|r| r.counts.bytes).sum(),
        ..CountsView::default()
    };
    let own = CountsView {
        lines: 1,
        bytes: 310,
        ..CountsView::default()
    };
    SitesView {
        started_at: started,
        started_at_unix_ms: unix_ms(started),
        read_at: now,
        read_at_unix_ms: unix_ms(now),
        max_rows: logpolicy::ledger::MAX_ROWS,
        writer: Some(WriterTotals {
            lines_written: totals.lines + own.lines,
            bytes_written: totals.bytes + own.bytes,
        }),
        totals,
        own,
        other: OtherSitesView::default(),
        targets,
        rows,
    }
}

// ---- the operator's side ---------------------------------------------------------------

struct Row {
    scenario: &'static str,
    pods_pushed: usize,
    applied: usize,
    failed: usize,
    retries: u32,
    millis: f64,
    /// When the last `applied` report came in.
    last_applied_ms: f64,
    push_p50_ms: f64,
    push_max_ms: f64,
    /// The operator's CPU seconds from the change until it closed.
    cpu_seconds: f64,
}

/// At most this many simulated pods per process: each answering or hanging pod holds a
/// listener, and a process may not open more files than `ulimit -n` (which an
/// unprivileged user cannot raise past its hard limit, often 20,000 or less).
const PODS_PER_AGENT: usize = 12_500;

/// CPU seconds (user + system) a process has used, from `/proc/PID/stat` (in clock
/// ticks of 1/100 s, Linux's USER_HZ).
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name in parentheses: state is field 3, utime 14, stime 15.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i - 3)?.parse::<u64>().ok();
    Some((ticks(14)? + ticks(15)?) as f64 / 100.0)
}

fn operator(pods: usize, dead: Dead) -> Result<(), BoxError> {
    let per_agent = PODS_PER_AGENT.min(pods);
    let nofile = check_nofile_limit(per_agent + 256)?;
    let key = wire::generate_signing_key()?;
    let public = wire::encode_public_key(&key.verifying_key());
    let mut children = Vec::new();
    for from in (0..pods).step_by(per_agent) {
        let to = (from + per_agent).min(pods);
        let mut child = Command::new(std::env::current_exe()?)
            .args([
                "agents",
                &from.to_string(),
                &to.to_string(),
                &pods.to_string(),
                &public,
                &dead.hang.to_string(),
                &dead.refuse.to_string(),
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let mut ready = String::new();
        BufReader::new(child.stdout.take().ok_or("child stdout")?).read_line(&mut ready)?;
        children.push(child);
        if ready.trim() != "ready" {
            children.iter_mut().for_each(|c| drop(c.kill()));
            return Err(format!("agents {from}..{to} did not start: {ready:?}").into());
        }
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let cpu_before = cpu_seconds(std::process::id()).unwrap_or(0.0);
    let rows = rt.block_on(scenarios(pods, key));
    let cpu = cpu_seconds(std::process::id()).unwrap_or(0.0) - cpu_before;
    let agents_rss: Vec<u64> = children
        .iter()
        .filter_map(|c| rss_kib(c.id()).map(|(_, hwm)| hwm))
        .collect();
    let agents_cpu: f64 = children.iter().filter_map(|c| cpu_seconds(c.id())).sum();
    for mut child in children {
        drop(child.stdin.take());
        let _ = child.wait();
    }
    let rows = rows?;
    let (rss, hwm) = rss_kib(std::process::id()).unwrap_or((0, 0));
    let agents_rss = agents_rss.iter().max().copied();

    println!(
        "## operator push: {pods} simulated pods on loopback, {} hanging, {} refusing\n",
        dead.hang, dead.refuse
    );
    println!("open files limit: {nofile}\n");
    println!("| scenario | pods pushed | applied | failed | retries | last live pod applied | all answered or timed out | push p50 (queued + sent) | push max | operator CPU |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {} | {} | {:.0} ms | {:.0} ms | {:.1} ms | {:.1} ms | {:.2} s |",
            r.scenario,
            r.pods_pushed,
            r.applied,
            r.failed,
            r.retries,
            r.last_applied_ms,
            r.millis,
            r.push_p50_ms,
            r.push_max_ms,
            r.cpu_seconds
        );
    }
    // 64 MiB for the default 1,000 pods, 128 MiB at the scale of 10,000, 256 MiB beyond
    // (50,000 pods: a 5,000-node cluster with a tenth of its pods opted in).
    let rss_target_mib: u64 = match pods {
        ..=1000 => 64,
        1001..=10_000 => 128,
        _ => 256,
    };
    let time_target_ms = if pods <= 10_000 { 2000.0 } else { 5000.0 };
    println!(
        "\noperator process RSS: {:.1} MiB now, {:.1} MiB peak (target <= {rss_target_mib} MiB); {} simulated pods' process(es), the largest peak: {}",
        rss as f64 / 1024.0,
        hwm as f64 / 1024.0,
        pods.div_ceil(per_agent),
        agents_rss.map_or("n/a".to_owned(), |k| format!("{:.1} MiB", k as f64 / 1024.0))
    );
    println!(
        "CPU: operator {cpu:.1} s, simulated pods {agents_cpu:.1} s, over the whole run ({} cores)",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let worst = if dead.total() > 0 {
        rows.iter()
            .skip(1)
            .filter(|r| r.pods_pushed > 0 && r.applied > 0)
            .map(|r| r.last_applied_ms)
            .fold(0.0, f64::max)
    } else {
        rows.iter().map(|r| r.millis).fold(0.0, f64::max)
    };
    println!(
        "slowest change to all live pods applied: {worst:.0} ms (target <= {time_target_ms:.0} ms)"
    );

    let json = serde_json::json!({
        "pods": pods,
        "hanging": dead.hang,
        "refusing": dead.refuse,
        "pusher": {"concurrency": PusherConfig::default().concurrency, "timeout_ms": PusherConfig::default().timeout.as_millis() as u64},
        "scenarios": rows.iter().map(|r| serde_json::json!({
            "scenario": r.scenario, "pods_pushed": r.pods_pushed, "applied": r.applied, "failed": r.failed,
            "retries": r.retries, "time_to_all_applied_ms": r.millis, "last_applied_ms": r.last_applied_ms, "push_p50_ms": r.push_p50_ms, "push_max_ms": r.push_max_ms,
            "operator_cpu_seconds": r.cpu_seconds,
        })).collect::<Vec<_>>(),
        "operator_cpu_seconds": cpu,
        "agents_cpu_seconds": agents_cpu,
        "slowest_change_ms": worst,
        "operator_rss_kib": rss,
        "operator_peak_rss_kib": hwm,
        "agents_peak_rss_kib": agents_rss,
        "targets": {"time_ms": time_target_ms, "rss_mib": rss_target_mib},
    });
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(
        dir.join("operator-push.json"),
        serde_json::to_string_pretty(&json)?,
    )?;
    println!("\nwritten: target/bench/operator-push.json");
    if worst > time_target_ms
        || hwm > rss_target_mib * 1024
        || rows.iter().any(|r| r.failed > dead.total())
    {
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
    let mut in_flight = 0usize;

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
            &mut in_flight,
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
            &mut in_flight,
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
            &mut in_flight,
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
            &mut in_flight,
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
            &mut in_flight,
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
            &mut in_flight,
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
            &mut in_flight,
            None,
        )
        .await?,
    );

    // A periodic resync: read every pod back; nothing should have drifted.
    let start = Instant::now();
    let cpu_before = cpu_seconds(std::process::id()).unwrap_or(0.0);
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
        last_applied_ms: 0.0,
        push_p50_ms: 0.0,
        push_max_ms: 0.0,
        cpu_seconds: cpu_seconds(std::process::id()).unwrap_or(0.0) - cpu_before,
    });
    Ok(rows)
}

/// The controller's loop in miniature: push what the index says, record the reports,
/// until every pod pushed for this change has reported at least once. Pods that do not
/// answer stay in the index's retry schedule; their later attempts may still be in
/// flight when the next scenario starts (`in_flight` carries over, and their reports are
/// recorded like any other but not counted for that scenario).
#[allow(clippy::too_many_arguments)]
async fn converge(
    scenario: &'static str,
    start: Instant,
    index: &mut Index,
    pusher: &Pusher,
    tx: &mpsc::Sender<PushReport>,
    rx: &mut mpsc::Receiver<PushReport>,
    in_flight: &mut usize,
    policy: Option<&PolicyKey>,
) -> Result<Row, BoxError> {
    let deadline = start + Duration::from_secs(300);
    let cpu_before = cpu_seconds(std::process::id()).unwrap_or(0.0);
    // (300 s: a change with 1,000 hanging pods closes in 30-90 s.)
    let mut pushed = 0usize;
    // The pods pushed for this change, the tickets they were pushed with, and the
    // outcome of the last of those pushes that reported (a pod retried within the
    // change reports more than once; it counts once, with its latest outcome).
    let mut taken: HashMap<PodKey, (Vec<PushTicket>, Option<&'static str>)> = HashMap::new();
    let mut waiting = 0usize;
    let mut latencies = Vec::new();
    let mut retries = 0;
    let mut last_applied_ms = 0.0;
    loop {
        let pushes = index.take_pushes(SystemTime::now());
        for p in &pushes {
            let entry = taken.entry(p.pod.clone()).or_insert_with(|| {
                waiting += 1;
                (Vec::new(), None)
            });
            entry.0.push(p.ticket);
        }
        *in_flight += pushes.len();
        pushed += pushes.len();
        pusher.spawn_all(pushes, tx);
        if *in_flight == 0 || (waiting == 0 && !taken.is_empty()) {
            break;
        }
        let report = tokio::time::timeout_at(tokio::time::Instant::from_std(deadline), rx.recv())
            .await
            .map_err(|_| format!("{scenario}: {waiting} pods did not report within 300 s"))?
            .ok_or("report channel closed")?;
        *in_flight -= 1;
        index.record_push(&report.pod, report.ticket, &report.outcome);
        let Some((tickets, last_outcome)) = taken.get_mut(&report.pod) else {
            continue; // a retry of an earlier change
        };
        if !tickets.contains(&report.ticket) {
            continue;
        }
        if last_outcome.is_none() {
            waiting -= 1;
        }
        retries += report.attempts.saturating_sub(1);
        latencies.push(report.elapsed.as_secs_f64() * 1000.0);
        let label = report.outcome.metric_label();
        if label == "applied" {
            last_applied_ms = start.elapsed().as_secs_f64() * 1000.0;
        }
        *last_outcome = Some(label);
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
        None => taken.values().filter_map(|(_, outcome)| *outcome).fold(
            (0, 0),
            |(applied, failed), label| {
                if label == "applied" {
                    (applied + 1, failed)
                } else {
                    (applied, failed + 1)
                }
            },
        ),
    };
    Ok(Row {
        scenario,
        pods_pushed: pushed,
        applied,
        failed,
        retries,
        millis,
        last_applied_ms,
        push_p50_ms: pct(0.5),
        push_max_ms: pct(1.0),
        cpu_seconds: cpu_seconds(std::process::id()).unwrap_or(0.0) - cpu_before,
    })
}
