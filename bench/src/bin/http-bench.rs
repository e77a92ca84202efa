//! An HTTP service logging 0, 1 and 5 JSON lines per request with each logger, under a
//! keep-alive load generator on loopback.
//!
//! The service (this binary re-executed as `serve <logger> <lines> <cpu>`) is a hyper 1
//! HTTP/1.1 server (or, with `--service axum`, an axum `Router` with a route) on a tokio
//! current-thread runtime, pinned to one core with every thread it starts (the loggers' writer threads included), its stdout redirected to a
//! file in a temporary directory. The load generator ([`logpolicy_bench::load_generator`])
//! runs in this process, pinned to the other core. Per cell: a warm-up, then a
//! measurement window; then the service is told to quit, flushes its logger and reports
//! what it served, and the file's lines are counted against what was expected.
//! Results: a markdown table on stdout and `target/bench/http.json`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::convert::Infallible;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use axum::serve::ListenerExt;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use logpolicy_bench::load_generator::{self, LoadConfig};
use logpolicy_bench::service::{
    listening_port, log_shaped, pin_to, quantile, quit, stderr_lines, wait_bounded, Shape, BODY,
    LISTENING, LOAD_CPU, SERVICE_CPU, SHAPE_ENV,
};
use logpolicy_bench::{install, Installed, Logger};
use serde_json::{json, Value};

/// The whole run stops starting cells after this.
const RUN_BUDGET: Duration = Duration::from_secs(420);
/// A service still running this long after it was told to quit is killed.
const QUIT_TIMEOUT: Duration = Duration::from_secs(20);
/// The target: ours at 5 lines per request loses at most this share of its 0-line rate.
const TARGET_LOSS: f64 = 0.15;
/// The lines per request of the paired measurement (against 0).
/// Lines per request of the paired measurement's logging service, as judged.
const PAIRED_LINES: u32 = 5;

/// The path the load asks for.
const ORDERS: &str = "/api/orders";
/// How the parent tells the service which [`Server`] it is (`--service`).
const SERVER_ENV: &str = "LOGPOLICY_BENCH_SERVICE";

/// What serves the requests (`--service`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Server {
    /// hyper's `http1::Builder` with a `service_fn`: the least a Rust service does.
    Hyper,
    /// axum's `axum::serve` of a `Router` with the route: as a user would write it.
    Axum,
}

impl Server {
    fn name(self) -> &'static str {
        match self {
            Server::Hyper => "hyper",
            Server::Axum => "axum",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        match name {
            "hyper" => Some(Server::Hyper),
            "axum" => Some(Server::Axum),
            _ => None,
        }
    }

    /// For the report.
    fn describe(self) -> &'static str {
        match self {
            Server::Hyper => "hyper 1 (`http1` with a `service_fn`)",
            Server::Axum => "axum 0.8 (a `Router` with the route)",
        }
    }

    /// The server [`SERVER_ENV`] names ([`Server::Hyper`] when unset); exits with a
    /// message when it names none.
    fn from_env() -> Self {
        match std::env::var(SERVER_ENV) {
            Err(_) => Server::Hyper,
            Ok(v) => Server::parse(&v).unwrap_or_else(|| {
                eprintln!("{SERVER_ENV}={v:?}: expected hyper or axum");
                std::process::exit(2)
            }),
        }
    }
}

/// The loggers of this benchmark; `None` is the no-logging baseline.
const LOGGERS: [Option<Logger>; 4] = [
    None,
    Some(Logger::Ours),
    Some(Logger::Fmt),
    Some(Logger::NonBlockingLossy),
];

fn logger_name(logger: Option<Logger>) -> &'static str {
    logger.map_or("none", Logger::name)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("serve") {
        let logger = match args[2].as_str() {
            "none" => None,
            name => Some(name.parse::<Logger>().expect("logger")),
        };
        let lines: u32 = args[3].parse().expect("lines per request");
        let cpu: usize = args[4].parse().expect("cpu");
        serve(logger, lines, cpu, Shape::from_env(), Server::from_env());
        return;
    }
    parent(Options::parse(&args[1..]));
}

// ---------------------------------------------------------------- the service

static SERVED: AtomicU64 = AtomicU64::new(0);

fn serve(logger: Option<Logger>, lines: u32, cpu: usize, shape: Shape, server: Server) {
    // Before any thread exists, so the runtime and the logger's writer thread inherit it.
    let pinned = pin_to(cpu);
    let installed: Option<Installed> = logger.map(install);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("local addr").port();
        eprintln!("{LISTENING} {port}");
        let quit = Arc::new(tokio::sync::Notify::new());
        if server == Server::Axum {
            return serve_axum(listener, lines, shape, quit).await;
        }
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let Ok((stream, _)) = accepted else { continue };
                    let _ = stream.set_nodelay(true);
                    let quit = Arc::clone(&quit);
                    tokio::spawn(async move {
                        let service = service_fn(move |req| handle(req, lines, shape, Arc::clone(&quit)));
                        let _ = http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
                () = quit.notified() => break,
            }
        }
    });
    // Connections still open are dropped with the runtime.
    drop(runtime);
    let flush_start = Instant::now();
    let own = installed.map(Installed::finish);
    let report = json!({
        "served": SERVED.load(Ordering::Relaxed),
        "lines_per_request": lines,
        "shape": shape.name(),
        "service": server.name(),
        "pinned": pinned.is_ok(),
        "pin_error": pinned.err(),
        "flush_secs": flush_start.elapsed().as_secs_f64(),
        "own": own,
    });
    eprintln!("{report}");
}

async fn handle(
    req: Request<Incoming>,
    lines: u32,
    shape: Shape,
    quit: Arc<tokio::sync::Notify>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let start = Instant::now();
    let path = req.uri().path();
    if path == "/quit" {
        quit.notify_one();
    } else {
        serve_request(req.method().as_str(), path, lines, shape, start);
    }
    let mut response = Response::new(Full::new(Bytes::from_static(BODY)));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(response)
}

/// The same service as a user would write it with axum: a `Router` with the route the
/// load asks for (and `/quit`), served by `axum::serve` on the same runtime, Nagle off as
/// in the hyper service; the connections still open are dropped with the runtime.
async fn serve_axum(
    listener: tokio::net::TcpListener,
    lines: u32,
    shape: Shape,
    quit: Arc<tokio::sync::Notify>,
) {
    let on_quit = Arc::clone(&quit);
    let app = axum::Router::new()
        .route(
            ORDERS,
            axum::routing::get(move |method: axum::http::Method, uri: axum::http::Uri| {
                handle_axum(method, uri, lines, shape)
            }),
        )
        .route(
            "/quit",
            axum::routing::get(move || async move { on_quit.notify_one() }),
        );
    let listener = listener.tap_io(|stream| {
        let _ = stream.set_nodelay(true);
    });
    tokio::select! {
        served = axum::serve(listener, app) => {
            if let Err(e) = served {
                eprintln!("axum::serve: {e}");
            }
        }
        () = quit.notified() => {}
    }
}

async fn handle_axum(
    method: axum::http::Method,
    uri: axum::http::Uri,
    lines: u32,
    shape: Shape,
) -> impl axum::response::IntoResponse {
    serve_request(method.as_str(), uri.path(), lines, shape, Instant::now());
    ([(CONTENT_TYPE, "application/json")], BODY)
}

/// What either server does for a request it answers: counts it and logs its lines,
/// the latency read when a line is written, from `start`.
fn serve_request(method: &str, path: &str, lines: u32, shape: Shape, start: Instant) {
    let n = SERVED.fetch_add(1, Ordering::Relaxed);
    log_shaped(shape, method, path, lines, n, || {
        u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX)
    });
}

// ---------------------------------------------------------------- the parent

struct Options {
    rounds: usize,
    warmup: Duration,
    measure: Duration,
    connections: usize,
    pipeline: usize,
    lines: Vec<u32>,
    loggers: Vec<Option<Logger>>,
    /// The paired measurement: how many times per logger (fresh services each time),
    /// pairs of slices per run, each slice's length and unmeasured start.
    paired_runs: usize,
    pairs: usize,
    slice: Duration,
    settle: Duration,
    /// Lines per request of the paired logging service (a diagnostic unless
    /// [`PAIRED_LINES`]: what the first line of a request costs against the later ones).
    paired_lines: u32,
    /// The log file's preallocation, MiB (0: a new file per service).
    prealloc_mib: u64,
    /// Ours only, a diagnostic: `writer` (the default, as `logpolicy::init` builds it),
    /// `devnull` (the same, its stdout `/dev/null`: no page cache), `discard` (lines
    /// formatted into a sink that drops them: no queue, no writer thread), `filter-only`
    /// (no output layer).
    ours_output: String,
    /// The preallocated log file, once written.
    arena: Option<PathBuf>,
    /// Which load generators drive the cells: ours (`builtin`, and the paired
    /// measurement), `wrk` (the external tool, as a user would measure), or `both`.
    generator: String,
    /// Connections of `wrk` (one thread, pinned to the load generator's core).
    wrk_connections: usize,
    /// What each line carries (`--shape`): today's light lines or the standard shape.
    shape: Shape,
    /// What serves the requests (`--service`).
    server: Server,
}

impl Options {
    fn parse(args: &[String]) -> Self {
        let mut o = Options {
            rounds: 3,
            warmup: Duration::from_secs(1),
            measure: Duration::from_secs(4),
            connections: 64,
            pipeline: 1,
            lines: vec![0, 1, 5],
            loggers: LOGGERS.to_vec(),
            paired_runs: 3,
            pairs: 16,
            slice: Duration::from_millis(500),
            settle: Duration::from_millis(100),
            paired_lines: PAIRED_LINES,
            prealloc_mib: 0,
            ours_output: "writer".to_owned(),
            arena: None,
            generator: "builtin".to_owned(),
            wrk_connections: 8,
            shape: Shape::Light,
            server: Server::Hyper,
        };
        let mut it = args.iter();
        while let Some(flag) = it.next() {
            let mut value = || it.next().cloned().unwrap_or_else(|| usage(flag));
            match flag.as_str() {
                "--rounds" => o.rounds = value().parse().unwrap_or_else(|_| usage(flag)),
                "--warmup" => o.warmup = secs(&value()).unwrap_or_else(|| usage(flag)),
                "--measure" => o.measure = secs(&value()).unwrap_or_else(|| usage(flag)),
                "--connections" => {
                    o.connections = value().parse().unwrap_or_else(|_| usage(flag));
                }
                "--pipeline" => o.pipeline = value().parse().unwrap_or_else(|_| usage(flag)),
                "--pairs" => o.pairs = value().parse().unwrap_or_else(|_| usage(flag)),
                "--paired-runs" => {
                    o.paired_runs = value().parse().unwrap_or_else(|_| usage(flag));
                }
                "--paired-lines" => {
                    o.paired_lines = value().parse().unwrap_or_else(|_| usage(flag));
                    if o.paired_lines == 0 {
                        usage(flag);
                    }
                }
                "--slice" => o.slice = secs(&value()).unwrap_or_else(|| usage(flag)),
                "--settle" => o.settle = secs(&value()).unwrap_or_else(|| usage(flag)),
                "--ours-output" => {
                    o.ours_output = value();
                    if !["writer", "devnull", "discard", "filter-only"]
                        .contains(&o.ours_output.as_str())
                    {
                        usage(flag);
                    }
                }
                "--prealloc-mib" => {
                    o.prealloc_mib = value().parse().unwrap_or_else(|_| usage(flag));
                }
                "--generator" => {
                    o.generator = value();
                    if !["builtin", "wrk", "both"].contains(&o.generator.as_str()) {
                        usage(flag);
                    }
                }
                "--shape" => o.shape = Shape::parse(&value()).unwrap_or_else(|| usage(flag)),
                "--service" => o.server = Server::parse(&value()).unwrap_or_else(|| usage(flag)),
                "--wrk-connections" => {
                    o.wrk_connections = value().parse().unwrap_or_else(|_| usage(flag));
                }
                "--lines" => {
                    o.lines = value()
                        .split(',')
                        .map(|l| l.parse().unwrap_or_else(|_| usage(flag)))
                        .collect();
                }
                "--loggers" => {
                    o.loggers = value()
                        .split(',')
                        .map(|l| match l {
                            "none" => None,
                            l => Some(l.parse().unwrap_or_else(|_| usage(flag))),
                        })
                        .collect();
                }
                _ => usage(flag),
            }
        }
        if o.settle >= o.slice {
            eprintln!(
                "--settle ({:?}) must be shorter than --slice ({:?}): nothing would be measured",
                o.settle, o.slice
            );
            std::process::exit(2);
        }
        o
    }
}

fn secs(s: &str) -> Option<Duration> {
    s.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v > 0.0)
        .map(Duration::from_secs_f64)
}

fn usage(flag: &str) -> ! {
    eprintln!(
        "bad argument {flag:?}\nusage: http-bench [--rounds 3] [--warmup 1] [--measure 4] \
         [--connections 64] [--pipeline 1] [--lines 0,1,5] \
         [--loggers none,logpolicy,fmt-stdout,non_blocking-lossy] \
         [--paired-runs 3] [--paired-lines 5] [--pairs 16] [--slice 0.5] [--settle 0.1] [--prealloc-mib 0 (N: write over a preallocated N MiB file)] \
         [--ours-output writer|devnull|discard|filter-only (diagnostics of ours)] \
         [--generator builtin|wrk|both] [--wrk-connections 8] [--shape light|standard] [--service hyper|axum]"
    );
    std::process::exit(2)
}

/// The cells of one round: the baseline at 0 lines, every logger at every line count.
fn cells(o: &Options) -> Vec<(Option<Logger>, u32)> {
    let mut cells = Vec::new();
    for &logger in &o.loggers {
        for &lines in &o.lines {
            if logger.is_none() && lines > 0 {
                continue; // with no subscriber, a line costs nothing: the 0-line cell says it all
            }
            cells.push((logger, lines));
        }
    }
    cells
}

fn parent(mut o: Options) {
    let run_start = Instant::now();
    let pinned = pin_to(LOAD_CPU);
    if let Err(e) = &pinned {
        eprintln!("warning: {e}; running unpinned");
    }
    let dir = std::env::temp_dir().join(format!("logpolicy-http-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    if o.prealloc_mib > 0 {
        let path = dir.join("arena.log");
        match preallocate(&path, o.prealloc_mib << 20) {
            Ok(()) => o.arena = Some(path),
            Err(e) => eprintln!(
                "warning: could not preallocate the log file ({e}); a new file per service"
            ),
        }
    }
    let load_before = loadavg();
    let probe_before = page_cache_probe(&dir);
    let cells = cells(&o);
    eprintln!(
        "{} cells x {} rounds, {:?} warm-up + {:?} measured each, {} connections, pipeline {}; load average {load_before}",
        cells.len(),
        o.rounds,
        o.warmup,
        o.measure,
        o.connections,
        o.pipeline
    );
    // The paired measurement first: the target is judged on it. Each logger's pair of
    // services runs `paired_runs` times, fresh each time, the loggers taking turns (every
    // other turn in reverse), so that neither a drift of the machine nor the state of one
    // pair of services (its log file's pages) decides a logger's figure.
    let mut paired_runs: Vec<Value> = Vec::new();
    let loggers: Vec<Logger> = o.loggers.iter().flatten().copied().collect();
    let generators: Vec<bool> = match o.generator.as_str() {
        "wrk" => vec![true],
        "both" => vec![false, true],
        _ => vec![false],
    };
    let mut paired_runs_wrk: Vec<Value> = Vec::new();
    for turn in 0..o.paired_runs {
        let order: Vec<Logger> = if turn % 2 == 0 {
            loggers.clone()
        } else {
            loggers.iter().rev().copied().collect()
        };
        for logger in order {
            // Under both generators back to back, so a drift weighs on both alike.
            for &wrk in &generators {
                let secs = if wrk {
                    2 * o.warmup + Duration::from_secs(2 * o.pairs as u64 + 5)
                } else {
                    o.warmup + o.slice * (2 * o.pairs as u32) + Duration::from_secs(5)
                };
                if run_start.elapsed() + secs > RUN_BUDGET {
                    continue;
                }
                let mut run = run_paired(&o, &dir, logger, wrk);
                run["turn"] = json!(turn);
                run["generator"] = json!(if wrk { "wrk" } else { "builtin" });
                eprintln!("paired{}: {run}", if wrk { " (wrk)" } else { "" });
                if wrk {
                    paired_runs_wrk.push(run);
                } else {
                    paired_runs.push(run);
                }
            }
        }
    }
    let paired: Vec<Value> = loggers
        .iter()
        .map(|l| pool_paired(l.name(), &paired_runs))
        .collect();
    let paired_wrk: Vec<Value> = loggers
        .iter()
        .map(|l| pool_paired(l.name(), &paired_runs_wrk))
        .collect();
    let mut runs: Vec<Value> = Vec::new();
    let mut wrk_runs: Vec<Value> = Vec::new();
    let mut skipped = 0;
    for round in 0..o.rounds {
        // Every other round in reverse, so a drift in the machine's load spreads evenly.
        let order: Vec<_> = if round % 2 == 0 {
            cells.clone()
        } else {
            cells.iter().rev().copied().collect()
        };
        for (logger, lines) in order {
            if run_start.elapsed() + o.warmup + o.measure + Duration::from_secs(5) > RUN_BUDGET {
                skipped += 1;
                continue;
            }
            // Both generators on the same cell back to back, so a drift of the machine
            // weighs on both alike.
            for &wrk in &generators {
                let run = run_cell(&o, &dir, logger, lines, wrk);
                eprintln!("round {round}{}: {run}", if wrk { " (wrk)" } else { "" });
                let into = if wrk { &mut wrk_runs } else { &mut runs };
                into.push(json!({"round": round, "run": run}));
            }
        }
    }
    let probe_after = page_cache_probe(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    let load_after = loadavg();

    let summary = summarise(&cells, &runs);
    let summary_wrk = summarise(&cells, &wrk_runs);
    let mut out = String::new();
    out.push_str(&format!(
        "\n## HTTP service: req/s by logger x lines per request ({} lines)\n\n\
         {}\n\n\
         {}, tokio current-thread, service pinned to cpu {SERVICE_CPU}, load generator to cpu {LOAD_CPU}; \
         {} keep-alive connections, pipeline {}; {:?} warm-up + {:?} measured, best of {} round(s); \
         log file: {}; load average before {load_before}, after {load_after}; \
         writing a new file cost {} before the run, {} after (see the README: the log file)\n\n",
        o.shape.name(),
        match o.shape {
            Shape::Light => "Light lines (`--shape light`): `lines - 1` lines with `method`, `path`, `step`, then the access line with `method`, `path`, `status`, `latency_us`, `bytes`.",
            Shape::Standard => "The standard shape (`--shape standard`): every line with `request_id`, `method`, `path`, `status`, `latency_us`, `user` and a message, from a callsite of its own.",
        },
        o.server.describe(),
        o.connections, o.pipeline, o.warmup, o.measure, o.rounds, log_file(&o),
        probe_text(probe_before), probe_text(probe_after),
    ));
    out.push_str(&table(&summary));
    if !wrk_runs.is_empty() {
        out.push_str(&format!(
            "\n## The same cells under wrk\n\n\
             `wrk -t1 -c{} -d{}s --latency` (after a {}s run not counted), pinned to cpu {LOAD_CPU}, \
             each right after the same cell under the built-in generator\n\n",
            o.wrk_connections,
            wrk_secs(o.measure),
            wrk_secs(o.warmup),
        ));
        out.push_str(&table(&summary_wrk));
    }
    out.push_str(&format!(
        "\n## Paired: {} lines vs 0 lines per request, load alternating between the two services\n\n\
         Both services of a logger run side by side on cpu {SERVICE_CPU}; the load moves from one to the other every {:?} \
         (the first {:?} of a slice not counted), {} pairs of adjacent slices after {:?} of warm-up; {} such run(s) per \
         logger, with fresh services, the loggers taking turns; the loss is the median of all their pairs.\n\n",
        o.paired_lines, o.slice, o.settle, o.pairs, o.warmup, o.paired_runs
    ));
    if generators.contains(&false) {
        out.push_str(&paired_table(&paired));
    } else {
        out.push_str("Not run: `--generator wrk`.\n");
    }
    if generators.contains(&true) {
        out.push_str(&format!(
            "\n## Paired under wrk\n\n\
             The same pairs of services, `wrk -t1 -c{}` moving between them: one 1 s wrk run per slice \
             (its shortest), in the same A B, B A order, after a {}s run against each; {} pairs; the \
             loss is the median of all pairs.\n\n",
            o.wrk_connections,
            wrk_secs(o.warmup),
            o.pairs,
        ));
        out.push_str(&paired_table(&paired_wrk));
    }
    let target = target(&o, &paired, &runs);
    out.push_str(&format!(
        "\n| target | measured | met |\n|---|---|---|\n| ours at 5 lines/request loses ≤ {:.0}% of its 0-line req/s | {} | {} |\n",
        TARGET_LOSS * 100.0,
        target.1,
        if target.0 == Some(true) { "yes" } else if target.0 == Some(false) { "**no**" } else { "not run" }
    ));
    if let Some(row) = wrk_target_row(&o, &paired_wrk) {
        out.push_str(&row);
    }
    if skipped > 0 {
        out.push_str(&format!(
            "\n{skipped} cell run(s) skipped to keep the run under {RUN_BUDGET:?}.\n"
        ));
    }
    println!("{out}");

    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    std::fs::create_dir_all(&dir).expect("target/bench");
    let report = json!({
        "benchmark": "http",
        "service": format!("{}, tokio current-thread runtime, 9-byte JSON body", o.server.describe()),
        "shape": o.shape.name(),
        "service_cpu": SERVICE_CPU,
        "load_generator_cpu": LOAD_CPU,
        "load_generator_pinned": pinned.is_ok(),
        "connections": o.connections,
        "pipeline": o.pipeline,
        "log_file": log_file(&o),
        "ours_output": o.ours_output,
        "warmup_secs": o.warmup.as_secs_f64(),
        "measure_secs": o.measure.as_secs_f64(),
        "rounds": o.rounds,
        "skipped_runs": skipped,
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        "page_cache_probe_ns_per_kib": {"before": probe_before, "after": probe_after},
        "total_secs": run_start.elapsed().as_secs_f64(),
        "cells": summary,
        "generator": o.generator,
        "wrk_connections": o.wrk_connections,
        "cells_wrk": summary_wrk,
        "runs_wrk": wrk_runs,
        "paired": paired,
        "paired_runs": paired_runs,
        "paired_wrk": paired_wrk,
        "paired_runs_wrk": paired_runs_wrk,
        "target": {"name": "ours at 5 lines/request loses <= 15% of its 0-line req/s",
                   "measured": target.1, "met": target.0},
        "runs": runs,
    });
    let path = dir.join("http.json");
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&report).expect("json") + "\n",
    )
    .expect("write http.json");
    eprintln!("wrote {}", path.display());
}

/// What appending to a new file costs this machine now, in ns per KiB: 64 MiB written
/// in 256 KiB writes (on the load generator's core, idle then), then deleted. On a VM
/// whose free memory is handed back to its host, a fresh page-cache page can fault in
/// the host, and this moves from about 250 to over 2,000 ns/KiB; every logger at 5
/// lines per request writes 30–80 MB/s, so it shows in their figures.
fn page_cache_probe(dir: &Path) -> Option<f64> {
    const TOTAL: usize = 64 << 20;
    const WRITE: usize = 256 << 10;
    let path = dir.join("page-cache-probe");
    let block = vec![b'x'; WRITE];
    let mut file = File::create(&path).ok()?;
    let start = Instant::now();
    for _ in 0..TOTAL / WRITE {
        file.write_all(&block).ok()?;
    }
    let elapsed = start.elapsed();
    drop(file);
    let _ = std::fs::remove_file(&path);
    Some(elapsed.as_nanos() as f64 / (TOTAL / 1024) as f64)
}

fn probe_text(ns_per_kib: Option<f64>) -> String {
    ns_per_kib.map_or_else(|| "unknown".to_owned(), |ns| format!("{ns:.0} ns/KiB"))
}

fn log_file(o: &Options) -> String {
    let file = match &o.arena {
        Some(_) => format!(
            "preallocated ({} MiB, in the page cache) and written over from its start",
            o.prealloc_mib
        ),
        None => "a new file per service".to_owned(),
    };
    match o.ours_output.as_str() {
        "writer" => file,
        "devnull" => format!("{file} (ours at 1 and 5 lines: /dev/null, a diagnostic)"),
        mode => format!("{file} (ours at 1 and 5 lines: `{mode}`, a diagnostic)"),
    }
}

/// Writes `bytes` of zeros to `path` and waits until they are on disk, so that the
/// services that log write over pages already in the page cache (`--prealloc-mib`, a
/// diagnostic). On a VM whose balloon reports free pages to the host (as this kind of
/// machine does), a page the kernel allocates for a growing file can cost a fault in the
/// host, on the service's core: `dd` writing 400 MiB measured 0.5 GB/s the first time and
/// 4.5 GB/s right after. Writing over cached pages takes that out, but it is not what a
/// log file does, and it makes small writes dearer (fmt at 5 lines: -74% instead of -64%),
/// so the default is a new file per service.
fn preallocate(path: &Path, bytes: u64) -> std::io::Result<()> {
    let mut file = File::create(path)?;
    let zeros = vec![0u8; 1 << 20];
    let mut left = bytes;
    while left > 0 {
        let n = left.min(zeros.len() as u64) as usize;
        file.write_all(&zeros[..n])?;
        left -= n as u64;
    }
    file.sync_data()
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// A started service: its process, its log file, what it printed on stderr so far.
struct Service {
    logger: Option<Logger>,
    lines: u32,
    child: Child,
    file_path: PathBuf,
    /// Writing over the preallocated log file: a descriptor sharing the service's file
    /// offset, which says where its output ends.
    arena: Option<File>,
    addr: SocketAddr,
    stderr_lines: Vec<String>,
    rx: mpsc::Receiver<String>,
    stderr_reader: thread::JoinHandle<()>,
}

impl Service {
    /// Starts `serve <logger> <lines>` with its stdout redirected to a new file in `dir`
    /// named after `tag`, or, for a service that logs, over the preallocated `arena` from
    /// its start; waits until it listens. On failure, the JSON to report.
    fn start(
        o: &Options,
        dir: &Path,
        logger: Option<Logger>,
        lines: u32,
        tag: &str,
    ) -> Result<Self, Value> {
        let name = logger_name(logger);
        let diagnostic = (logger == Some(Logger::Ours) && lines > 0)
            .then_some(o.ours_output.as_str())
            .filter(|&v| v != "writer");
        let (file_path, file, arena) = match o.arena.as_deref().filter(|_| lines > 0) {
            Some(path) => {
                let file = File::options().write(true).open(path).expect("log arena");
                // What an earlier service wrote goes to disk first: a page still being
                // written back would make this one wait to write over it.
                file.sync_data().expect("sync the log arena");
                let end = file.try_clone().expect("dup the log arena");
                (path.to_owned(), file, Some(end))
            }
            None => {
                let path = dir.join(format!("{name}-{lines}{tag}.log"));
                let file = File::create(&path).expect("log file");
                (path, file, None)
            }
        };
        let file = match diagnostic {
            Some("devnull") => File::options()
                .write(true)
                .open("/dev/null")
                .expect("/dev/null"),
            _ => file,
        };
        let exe = std::env::current_exe().expect("current exe");
        let mut command = Command::new(exe);
        command
            .args(["serve", name, &lines.to_string(), &SERVICE_CPU.to_string()])
            .env(SHAPE_ENV, o.shape.name())
            .env(SERVER_ENV, o.server.name())
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(Stdio::piped());
        if let Some(mode) = diagnostic {
            command.env(logpolicy_bench::OURS_OUTPUT_ENV, mode);
        }
        let mut child = command.spawn().expect("spawn service");
        let (rx, stderr_reader) = stderr_lines(&mut child);
        let mut stderr_lines = Vec::new();
        let port = listening_port(&rx, &mut stderr_lines);
        let Some(port) = port else {
            let _ = child.kill();
            let _ = child.wait();
            if arena.is_none() {
                let _ = std::fs::remove_file(&file_path);
            }
            return Err(
                json!({"logger": name, "lines_per_request": lines, "error": "the service did not start", "stderr": stderr_lines}),
            );
        };
        Ok(Service {
            logger,
            lines,
            child,
            file_path,
            arena,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            stderr_lines,
            rx,
            stderr_reader,
        })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Tells the service to quit, waits for it (bounded), counts its file against what it
    /// says it served: the fields every run reports.
    fn finish(mut self) -> Value {
        let name = logger_name(self.logger);
        let quit_error = quit(self.addr).err().map(|e| e.to_string());
        let exit = wait_bounded(&mut self.child, QUIT_TIMEOUT);
        let _ = self.stderr_reader.join();
        self.stderr_lines.extend(self.rx.try_iter());
        let service: Value = self
            .stderr_lines
            .iter()
            .rev()
            .find_map(|l| serde_json::from_str(l).ok())
            .unwrap_or(Value::Null);
        let file = match &mut self.arena {
            // The service's output ends at its file offset (the arena's bytes beyond
            // are an earlier service's or the preallocation's).
            Some(end) => count_file(&self.file_path, end.stream_position().ok()),
            None => {
                let count = count_file(&self.file_path, None);
                let _ = std::fs::remove_file(&self.file_path);
                count
            }
        };

        let served = service["served"].as_u64();
        let expected = served.map(|s| s * u64::from(self.lines));
        let own_dropped = service["own"]["dropped_counted"].as_u64().unwrap_or(0);
        // Ours reports in-band; `non_blocking` only through its counter (printed by the child).
        let counted = if self.logger == Some(Logger::Ours) {
            file.reported_dropped
        } else {
            own_dropped
        };
        let uncounted = expected.map(|e| e as i64 - file.request_lines as i64 - counted as i64);
        json!({
            "logger": name,
            "lines_per_request": self.lines,
            "service": service,
            "service_exit": exit,
            "quit_error": quit_error,
            "file": {
                "bytes": file.bytes,
                "lines": file.lines,
                "request_lines": file.request_lines,
                "summary_lines": file.summary_lines,
                "reported_dropped": file.reported_dropped,
                "other_lines": file.other_lines,
            },
            "lines_expected": expected,
            "lines_delivered": file.request_lines,
            "dropped_counted": counted,
            "own_dropped_counted": own_dropped,
            "lost_uncounted": uncounted,
            "stderr_other": self.stderr_lines.iter().filter(|l| serde_json::from_str::<Value>(l).is_err()).collect::<Vec<_>>(),
        })
    }
}

fn load_json(l: &load_generator::LoadReport, service_cores: Option<f64>) -> Value {
    json!({
        "requests_per_sec": l.requests_per_sec(),
        // Requests per second of the service's own CPU time (its logger's threads
        // included): what it would serve on a core of its own, whatever else ran.
        "requests_per_cpu_sec": service_cores
            .filter(|c| *c > 0.0)
            .map(|c| l.requests_per_sec() / c),
        "ok_in_window": l.ok_in_window,
        "responses_total": l.responses_total,
        "non_200": l.non_200,
        "bad_body": l.bad_body,
        "connection_errors": l.connection_errors,
        "first_error": l.first_error,
        "p50_us": l.latency.quantile_ns(0.5) as f64 / 1e3,
        "p99_us": l.latency.quantile_ns(0.99) as f64 / 1e3,
        "max_us": l.latency.max_ns() as f64 / 1e3,
    })
}

/// Whole seconds for `wrk -d` (at least one).
fn wrk_secs(d: Duration) -> u64 {
    d.as_secs_f64().ceil().max(1.0) as u64
}

/// Loads the service at `addr` with `wrk` (one thread, `o.wrk_connections` connections,
/// pinned to the load generator's core as this process is): a run of `o.warmup` not
/// counted, then one of `o.measure`. Returns what [`load_json`] returns, from wrk's own
/// report.
fn wrk_load(o: &Options, addr: SocketAddr) -> Result<Value, String> {
    wrk_run(o, addr, o.warmup)?;
    wrk_report(&wrk_run(o, addr, o.measure)?)
}

/// One `wrk` run against `addr` for `d` (whole seconds, at least one): its output.
fn wrk_run(o: &Options, addr: SocketAddr, d: Duration) -> Result<String, String> {
    let url = format!("http://{addr}{ORDERS}");
    let out = Command::new("wrk")
        .args([
            "-t1",
            &format!("-c{}", o.wrk_connections),
            &format!("-d{}s", wrk_secs(d)),
            "--latency",
            &url,
        ])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run wrk (apt-get install wrk): {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "wrk failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// What [`load_json`] returns, from `wrk`'s report `text`.
fn wrk_report(text: &str) -> Result<Value, String> {
    let field = |prefix: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(prefix).map(str::trim))
            .map(str::to_owned)
    };
    let rps: f64 = field("Requests/sec:")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("no Requests/sec in wrk's output:\n{text}"))?;
    let p99_us = field("99%").and_then(|v| {
        let (num, unit) = v.split_at(v.find(|c: char| c.is_ascii_alphabetic())?);
        let n: f64 = num.parse().ok()?;
        Some(match unit {
            "us" => n,
            "ms" => n * 1e3,
            "s" => n * 1e6,
            _ => return None,
        })
    });
    let non_200: u64 = field("Non-2xx or 3xx responses:")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    // "Socket errors: connect 0, read 0, write 0, timeout 0"
    let socket_errors: u64 = field("Socket errors:").map_or(0, |v| {
        v.split(',')
            .filter_map(|p| p.split_whitespace().last()?.parse::<u64>().ok())
            .sum()
    });
    Ok(json!({
        "requests_per_sec": rps,
        "p99_us": p99_us,
        "non_200": non_200,
        "connection_errors": socket_errors,
        "bad_body": 0,
        "wrk_output": text,
    }))
}

/// Runs one (logger, lines) cell: starts the service, loads it (with our generator, or
/// `wrk`), stops it, counts its file.
fn run_cell(o: &Options, dir: &Path, logger: Option<Logger>, lines: u32, wrk: bool) -> Value {
    let service = match Service::start(o, dir, logger, lines, "") {
        Ok(s) => s,
        Err(report) => return report,
    };
    let child_pid = service.pid();
    let config = LoadConfig {
        addr: service.addr,
        path: ORDERS.to_owned(),
        connections: o.connections,
        pipeline: o.pipeline,
        warmup: o.warmup,
        measure: o.measure,
        io_timeout: Duration::from_secs(5),
    };
    // CPU use over the measurement window, sampled from another thread.
    let start = Instant::now();
    let (from, until) = (start + o.warmup, start + o.warmup + o.measure);
    let sampler = thread::spawn(move || {
        sleep_until(from);
        let a = CpuSample::take(child_pid);
        sleep_until(until);
        let b = CpuSample::take(child_pid);
        b.since(&a)
    });
    let load = if wrk {
        wrk_load(o, config.addr)
    } else {
        load_generator::run(&config, BODY.len())
            .map_err(|e| e.to_string())
            .map(|l| load_json(&l, None))
    };
    let cpu = sampler.join().expect("sampler");
    let mut run = service.finish();
    let service_cores = cpu["service_running_cores"]
        .as_f64()
        .filter(|v| *v > 0.0)
        .or_else(|| cpu["service_cores"].as_f64());
    run["load"] = match load {
        Ok(mut l) => {
            // Per service CPU-second, as `load_json` says, for either generator.
            l["requests_per_cpu_sec"] = json!(service_cores
                .filter(|c| *c > 0.0)
                .and_then(|c| l["requests_per_sec"].as_f64().map(|r| r / c)));
            l
        }
        Err(e) => json!({"error": e}),
    };
    run["generator"] = json!(if wrk { "wrk" } else { "builtin" });
    run["cpu"] = cpu;
    run
}

/// The paired measurement of one logger: its 0-line and its 5-line service run side by
/// side (both pinned to the service core, only one loaded at a time), and the load
/// alternates between them slice by slice. Each pair of adjacent slices gives one loss;
/// the loss is their median.
///
/// Under `wrk` (`wrk`: true), which cannot move its load between two services, each
/// slice is one `wrk` run of one second (its shortest) against one service, in the same
/// A B, B A order, after a warm-up run against each: the other service only finishes
/// what it was asked, and nothing of a slice is left out.
fn run_paired(o: &Options, dir: &Path, logger: Logger, wrk: bool) -> Value {
    let name = logger.name();
    let a = match Service::start(o, dir, Some(logger), 0, "-paired") {
        Ok(s) => s,
        Err(report) => return json!({"logger": name, "error": report}),
    };
    let b = match Service::start(o, dir, Some(logger), o.paired_lines, "-paired") {
        Ok(s) => s,
        Err(report) => {
            let _ = a.finish();
            return json!({"logger": name, "error": report});
        }
    };
    if wrk {
        let slices = wrk_alternating(o, [a.addr, b.addr]);
        let runs = [a.finish(), b.finish()];
        return match slices {
            Ok(slices) => paired_report(name, &slices, runs.into(), None),
            Err(e) => json!({"logger": name, "error": e, "services": runs}),
        };
    }
    let config = load_generator::AlternatingConfig {
        addrs: [a.addr, b.addr],
        path: ORDERS.to_owned(),
        connections: o.connections,
        pipeline: o.pipeline,
        warmup: o.warmup,
        slice: o.slice,
        settle: o.settle,
        pairs: o.pairs,
        io_timeout: Duration::from_secs(5),
    };
    let load = load_generator::run_alternating(&config, BODY.len());
    let runs = [a.finish(), b.finish()];
    let load = match load {
        Ok(l) => l,
        Err(e) => return json!({"logger": name, "error": e.to_string(), "services": runs}),
    };
    let slices: Vec<(usize, f64)> = load
        .slices
        .iter()
        .map(|x| (x.service, if x.ok > 0 { x.requests_per_sec() } else { 0.0 }))
        .collect();
    let services: Vec<Value> = runs
        .into_iter()
        .zip(&load.services)
        .map(|(mut run, l)| {
            run["load"] = load_json(l, None);
            run
        })
        .collect();
    let rps = [
        load.services[0].requests_per_sec(),
        load.services[1].requests_per_sec(),
    ];
    paired_report(name, &slices, services, Some(rps))
}

/// `wrk`'s alternating load on `addrs` (see [`run_paired`]): each slice's service and
/// req/s, in order.
fn wrk_alternating(o: &Options, addrs: [SocketAddr; 2]) -> Result<Vec<(usize, f64)>, String> {
    for addr in addrs {
        wrk_run(o, addr, o.warmup)?;
    }
    let mut slices = Vec::with_capacity(2 * o.pairs);
    for pair in 0..o.pairs {
        let order = if pair % 2 == 0 { [0, 1] } else { [1, 0] };
        for service in order {
            let report = wrk_report(&wrk_run(o, addrs[service], Duration::from_secs(1))?)?;
            let rps = report["requests_per_sec"].as_f64().unwrap_or(0.0);
            slices.push((service, rps));
        }
    }
    Ok(slices)
}

/// One paired run's report from its slices (service 0 or 1, req/s), in order: each pair
/// of adjacent slices gives one loss, the run's figure is their median. `rps`: each
/// service's rate over the run, when known (else the mean of its slices).
fn paired_report(
    name: &str,
    slices: &[(usize, f64)],
    services: Vec<Value>,
    rps: Option<[f64; 2]>,
) -> Value {
    let mut losses: Vec<f64> = slices
        .chunks_exact(2)
        .filter_map(|pair| {
            let (zero, five) = if pair[0].0 == 0 {
                (pair[0].1, pair[1].1)
            } else {
                (pair[1].1, pair[0].1)
            };
            (zero > 0.0).then(|| 1.0 - five / zero)
        })
        .collect();
    let in_order = losses.clone();
    losses.sort_by(f64::total_cmp);
    let q = |p: f64| quantile(&losses, p);
    let slice_rps = [0, 1].map(|s| {
        slices
            .iter()
            .filter(|x| x.0 == s)
            .map(|x| (x.1 / 100.0).round() * 100.0)
            .collect::<Vec<f64>>()
    });
    let rps = rps.unwrap_or_else(|| {
        slice_rps
            .clone()
            .map(|v| v.iter().sum::<f64>() / v.len().max(1) as f64)
    });
    json!({
        "logger": name,
        "pairs": losses.len(),
        "loss_median": q(0.5),
        "loss_p25": q(0.25),
        "loss_p75": q(0.75),
        "losses": in_order,
        // Each slice's req/s, in order, for the 0-line service and the other one: a
        // drift within a run shows here (whether the logging service slows or the
        // other speeds up).
        "slice_rps": slice_rps,
        "requests_per_sec": rps,
        "services": services,
    })
}

/// One logger's paired runs pooled: the quantiles of all their pairs' losses, each run's
/// median, and the 5-line services' line accounting summed.
fn pool_paired(name: &str, runs: &[Value]) -> Value {
    let mine: Vec<&Value> = runs.iter().filter(|r| r["logger"] == name).collect();
    let failed: Vec<&Value> = mine
        .iter()
        .filter(|r| !r["error"].is_null())
        .copied()
        .collect();
    if let Some(f) = failed.first() {
        return json!({"logger": name, "error": f["error"], "runs": mine.len()});
    }
    if mine.is_empty() {
        return json!({"logger": name, "error": "not run (time budget)", "runs": 0});
    }
    let mut losses: Vec<f64> = mine
        .iter()
        .flat_map(|r| r["losses"].as_array().into_iter().flatten())
        .filter_map(Value::as_f64)
        .collect();
    losses.sort_by(f64::total_cmp);
    let q = |p: f64| quantile(&losses, p);
    let sum =
        |f: &dyn Fn(&Value) -> &Value| -> u64 { mine.iter().filter_map(|r| f(r).as_u64()).sum() };
    let mean_rps = |i: usize| {
        mine.iter()
            .filter_map(|r| r["requests_per_sec"][i].as_f64())
            .sum::<f64>()
            / mine.len() as f64
    };
    json!({
        "logger": name,
        "runs": mine.len(),
        "pairs": losses.len(),
        "loss_median": q(0.5),
        "loss_p25": q(0.25),
        "loss_p75": q(0.75),
        "run_medians": mine.iter().map(|r| r["loss_median"].clone()).collect::<Vec<_>>(),
        "requests_per_sec": [mean_rps(0), mean_rps(1)],
        "lines_expected": sum(&|r| &r["services"][1]["lines_expected"]),
        "lines_delivered": sum(&|r| &r["services"][1]["lines_delivered"]),
        "dropped_counted": sum(&|r| &r["services"][1]["dropped_counted"]),
        "lost_uncounted": sum(&|r| &r["services"][1]["lost_uncounted"]),
    })
}

fn sleep_until(t: Instant) {
    if let Some(left) = t.checked_duration_since(Instant::now()) {
        thread::sleep(left);
    }
}

/// One core's busy time, in clock ticks.
#[derive(Clone, Copy)]
struct CoreTicks {
    /// Processes (user, nice, system).
    task: u64,
    /// Interrupts and softirqs (here mostly the loopback traffic's).
    irq: u64,
    /// Taken by the hypervisor.
    steal: u64,
}

/// CPU time, in clock ticks: per core, the service process, this process.
struct CpuSample {
    at: Instant,
    core_busy: Vec<CoreTicks>,
    service: u64,
    this: u64,
    /// Summed over the service's threads, in ns: on a cpu, waiting on a run queue.
    service_sched: (u64, u64),
}

impl CpuSample {
    fn take(service_pid: u32) -> Self {
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let core_busy = stat
            .lines()
            .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
            .map(|l| {
                // user nice system idle iowait irq softirq steal ...
                let v: Vec<u64> = l
                    .split_whitespace()
                    .skip(1)
                    .filter_map(|x| x.parse().ok())
                    .collect();
                let sum = |fields: &[usize]| fields.iter().filter_map(|&i| v.get(i)).sum();
                CoreTicks {
                    task: sum(&[0, 1, 2]),
                    irq: sum(&[5, 6]),
                    steal: sum(&[7]),
                }
            })
            .collect();
        CpuSample {
            at: Instant::now(),
            core_busy,
            service: process_ticks(&format!("/proc/{service_pid}/stat")),
            this: process_ticks("/proc/self/stat"),
            service_sched: schedstat(&format!("/proc/{service_pid}/task")),
        }
    }

    /// Cores used over the interval (1.0 = one core all the time).
    fn since(&self, before: &CpuSample) -> Value {
        let hz = rustix::param::clock_ticks_per_second() as f64;
        let secs = (self.at - before.at).as_secs_f64().max(1e-9);
        let cores = |a: u64, b: u64| a.saturating_sub(b) as f64 / hz / secs;
        let delta = |i: usize| {
            let (a, b) = (self.core_busy.get(i), before.core_busy.get(i));
            match (a, b) {
                (Some(a), Some(b)) => [
                    cores(a.task, b.task),
                    cores(a.irq, b.irq),
                    cores(a.steal, b.steal),
                ],
                _ => [0.0; 3],
            }
        };
        let service = cores(self.service, before.service);
        let this = cores(self.this, before.this);
        let (s, l) = (delta(SERVICE_CPU), delta(LOAD_CPU));
        let ns = |a: u64, b: u64| a.saturating_sub(b) as f64 / 1e9 / secs;
        json!({
            // From the scheduler's own accounting (ns): the service's threads on a cpu,
            // and runnable but waiting for one (another task had the core: contention).
            "service_running_cores": ns(self.service_sched.0, before.service_sched.0),
            "service_waiting_cores": ns(self.service_sched.1, before.service_sched.1),
            "service_cores": service,
            "load_generator_cores": this,
            // Per core: processes, interrupts, stolen by the hypervisor.
            "service_core": {"tasks": s[0], "irq": s[1], "steal": s[2]},
            "load_core": {"tasks": l[0], "irq": l[1], "steal": l[2]},
            // What other processes ran on each core: the machine's other load.
            "other_on_service_core": (s[0] - service).max(0.0),
            "other_on_load_core": (l[0] - this).max(0.0),
        })
    }
}

/// `/proc/<pid>/task/*/schedstat` summed: (ns on a cpu, ns waiting on a run queue).
fn schedstat(task_dir: &str) -> (u64, u64) {
    let Ok(tasks) = std::fs::read_dir(task_dir) else {
        return (0, 0);
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .fold((0, 0), |(run, wait), line| {
            let mut v = line
                .split_whitespace()
                .map(|x| x.parse::<u64>().unwrap_or(0));
            (run + v.next().unwrap_or(0), wait + v.next().unwrap_or(0))
        })
}

/// utime + stime of a process (all its threads), in clock ticks.
fn process_ticks(path: &str) -> u64 {
    let stat = std::fs::read_to_string(path).unwrap_or_default();
    // Fields after the command name (which may contain spaces) start at ") ".
    let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
        return 0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state); utime and stime are fields 14 and 15.
    let get = |n: usize| {
        fields
            .get(n - 3)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    get(14) + get(15)
}

#[derive(Default)]
struct FileCount {
    bytes: u64,
    lines: u64,
    request_lines: u64,
    summary_lines: u64,
    reported_dropped: u64,
    other_lines: u64,
}

/// Counts the service's output: request lines (target `http`), our in-band "dropped
/// events" lines (and the drops they report), anything else.
fn count_file(path: &Path, len: Option<u64>) -> FileCount {
    let mut count = FileCount::default();
    let Ok(file) = File::open(path) else {
        return count;
    };
    let file = file.take(len.unwrap_or(u64::MAX));
    let request = memchr::memmem::Finder::new(b"\"target\":\"http\"");
    let summary = memchr::memmem::Finder::new(b"\"msg\":\"dropped events\"");
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut line = Vec::with_capacity(1024);
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(n) => count.bytes += n as u64,
        }
        count.lines += 1;
        if request.find(&line).is_some() {
            count.request_lines += 1;
        } else if summary.find(&line).is_some() {
            count.summary_lines += 1;
            let v: Value = serde_json::from_slice(&line).unwrap_or(Value::Null);
            count.reported_dropped += v["total"].as_u64().unwrap_or(0);
        } else {
            count.other_lines += 1;
        }
    }
    count
}

// ---------------------------------------------------------------- the report

/// A cell, its best round's run, and every round's req/s.
type BestRun<'a> = (Option<Logger>, u32, Option<&'a Value>, Vec<f64>);

/// One cell's figures: the best round's run (highest req/s), with every round's req/s.
fn summarise(cells: &[(Option<Logger>, u32)], runs: &[Value]) -> Vec<Value> {
    let rps = |r: &Value| r["run"]["load"]["requests_per_sec"].as_f64().unwrap_or(0.0);
    let best: Vec<BestRun<'_>> = cells
        .iter()
        .map(|&(logger, lines)| {
            let mine: Vec<&Value> = runs
                .iter()
                .filter(|r| {
                    r["run"]["logger"] == logger_name(logger)
                        && r["run"]["lines_per_request"] == lines
                })
                .collect();
            let all = mine.iter().map(|r| rps(r)).collect();
            let best = mine.into_iter().max_by(|a, b| rps(a).total_cmp(&rps(b)));
            (logger, lines, best.map(|r| &r["run"]), all)
        })
        .collect();
    let rate_of = |logger: Option<Logger>, lines: u32| {
        best.iter()
            .find(|(l, n, _, _)| *l == logger && *n == lines)
            .and_then(|(_, _, r, _)| *r)
            .and_then(|r| r["load"]["requests_per_sec"].as_f64())
            .filter(|v| *v > 0.0)
    };
    let cpu_rate_of = |logger: Option<Logger>, lines: u32| {
        best.iter()
            .find(|(l, n, _, _)| *l == logger && *n == lines)
            .and_then(|(_, _, r, _)| *r)
            .and_then(|r| r["load"]["requests_per_cpu_sec"].as_f64())
            .filter(|v| *v > 0.0)
    };
    let baseline = rate_of(None, 0);
    best.iter()
        .map(|(logger, lines, run, all)| {
            let Some(run) = run else {
                return json!({"logger": logger_name(*logger), "lines_per_request": lines, "runs": 0});
            };
            let rate = run["load"]["requests_per_sec"].as_f64().unwrap_or(0.0);
            let loss = |base: Option<f64>| base.map(|b| 1.0 - rate / b);
            let per_cpu = run["load"]["requests_per_cpu_sec"].as_f64();
            let per_cpu_loss = per_cpu.and_then(|v| cpu_rate_of(*logger, 0).map(|b| 1.0 - v / b));
            json!({
                "logger": logger_name(*logger),
                "lines_per_request": lines,
                "requests_per_sec": rate,
                "requests_per_sec_rounds": all,
                "loss_vs_own_0_lines": loss(rate_of(*logger, 0)),
                "loss_vs_no_logging": loss(baseline),
                "requests_per_cpu_sec": per_cpu,
                "cpu_loss_vs_own_0_lines": per_cpu_loss,
                "p99_us": run["load"]["p99_us"],
                "service_cores": run["cpu"]["service_running_cores"],
                "load_generator_cores": run["cpu"]["load_generator_cores"],
                "other_on_service_core": run["cpu"]["other_on_service_core"],
                "service_waiting_cores": run["cpu"]["service_waiting_cores"],
                "lines_expected": run["lines_expected"],
                "lines_delivered": run["lines_delivered"],
                "dropped_counted": run["dropped_counted"],
                "summary_lines": run["file"]["summary_lines"],
                "lost_uncounted": run["lost_uncounted"],
                "file_bytes": run["file"]["bytes"],
                "errors": run["load"]["connection_errors"].as_u64().unwrap_or(0)
                    + run["load"]["non_200"].as_u64().unwrap_or(0)
                    + run["load"]["bad_body"].as_u64().unwrap_or(0),
                "service_exit": run["service_exit"],
            })
        })
        .collect()
}

/// A loss as the change in req/s it is: 0.29 → "-29.0%".
fn pct(v: &Value) -> String {
    match v.as_f64() {
        None => "–".to_owned(),
        Some(0.0) => "(base)".to_owned(),
        Some(x) => format!("{:+.1}%", -x * 100.0),
    }
}

fn int(v: &Value) -> String {
    v.as_i64().map_or_else(|| "–".to_owned(), |x| x.to_string())
}

fn table(cells: &[Value]) -> String {
    let mut out = String::from(
        "| logger | lines/req | req/s | vs own 0-line | vs no logging | req per service CPU-s | vs own 0-line | p99 latency | service CPU | service waiting for its core | lines expected | lines delivered | dropped (counted) | lost uncounted | log MB | HTTP errors |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for c in cells {
        if c["runs"] == 0 {
            out.push_str(&format!(
                "| {} | {} | not run |||||||||||||\n",
                c["logger"].as_str().unwrap_or(""),
                c["lines_per_request"]
            ));
            continue;
        }
        let dropped = if c["summary_lines"].as_u64().unwrap_or(0) > 0 {
            format!(
                "{} ({} in-band lines)",
                int(&c["dropped_counted"]),
                c["summary_lines"]
            )
        } else {
            int(&c["dropped_counted"])
        };
        out.push_str(&format!(
            "| {} | {} | {:.0} | {} | {} | {:.0} | {} | {:.0} µs | {:.2} cores | {:.2} cores | {} | {} | {} | {} | {:.1} | {} |\n",
            c["logger"].as_str().unwrap_or(""),
            c["lines_per_request"],
            c["requests_per_sec"].as_f64().unwrap_or(0.0),
            pct(&c["loss_vs_own_0_lines"]),
            pct(&c["loss_vs_no_logging"]),
            c["requests_per_cpu_sec"].as_f64().unwrap_or(0.0),
            pct(&c["cpu_loss_vs_own_0_lines"]),
            c["p99_us"].as_f64().unwrap_or(0.0),
            c["service_cores"].as_f64().unwrap_or(0.0),
            c["service_waiting_cores"].as_f64().unwrap_or(0.0),
            int(&c["lines_expected"]),
            int(&c["lines_delivered"]),
            dropped,
            int(&c["lost_uncounted"]),
            c["file_bytes"].as_f64().unwrap_or(0.0) / 1e6,
            c["errors"],
        ));
    }
    out
}

fn paired_table(paired: &[Value]) -> String {
    let mut out = String::from(
        "| logger | loss: median of pairs | p25 – p75 | each run's median | pairs | req/s at 0 / 5 lines (mean of runs) | lines expected | lines delivered | dropped (counted) | lost uncounted |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for p in paired {
        let name = p["logger"].as_str().unwrap_or("");
        if !p["error"].is_null() {
            out.push_str(&format!("| {name} | failed: {} |||||||||\n", p["error"]));
            continue;
        }
        let medians: Vec<String> = p["run_medians"]
            .as_array()
            .into_iter()
            .flatten()
            .map(pct)
            .collect();
        out.push_str(&format!(
            "| {name} | {} | {} – {} | {} | {} | {:.0} / {:.0} | {} | {} | {} | {} |\n",
            pct(&p["loss_median"]),
            pct(&p["loss_p25"]),
            pct(&p["loss_p75"]),
            medians.join(", "),
            p["pairs"],
            p["requests_per_sec"][0].as_f64().unwrap_or(0.0),
            p["requests_per_sec"][1].as_f64().unwrap_or(0.0),
            int(&p["lines_expected"]),
            int(&p["lines_delivered"]),
            int(&p["dropped_counted"]),
            int(&p["lost_uncounted"]),
        ));
    }
    out
}

/// The target's row under `wrk` (paired), when ours ran paired under it.
fn wrk_target_row(o: &Options, paired_wrk: &[Value]) -> Option<String> {
    let ours = paired_wrk
        .iter()
        .find(|p| p["logger"] == Logger::Ours.name())?;
    let median = ours["loss_median"].as_f64()?;
    let complete = ours["lost_uncounted"] == 0 && ours["dropped_counted"] == 0;
    let judged = o.ours_output == "writer" && o.paired_lines == PAIRED_LINES;
    Some(format!(
        "| the same under `wrk -c{}` | paired: median {:+.1}% (p25 – p75: {} – {}) over {} pairs in {} run(s){} | {} |\n",
        o.wrk_connections,
        -median * 100.0,
        pct(&ours["loss_p25"]),
        pct(&ours["loss_p75"]),
        ours["pairs"],
        ours["runs"],
        if complete { ", every line delivered" } else { ", NOT every line delivered" },
        match (judged, median <= TARGET_LOSS && complete) {
            (false, _) => "not judged (diagnostic options)",
            (true, true) => "yes",
            (true, false) => "**no**",
        }
    ))
}

/// Whether ours at 5 lines per request kept ≥ 85% of its 0-line rate, judged on the
/// paired measurement: the median over pairs of adjacent slices of the loss (the machine's
/// speed drifts by 10% and more between runs seconds apart, which separate runs would
/// count as the logger's cost or gain). The rounds' per-round median is given beside it.
fn target(o: &Options, paired: &[Value], runs: &[Value]) -> (Option<bool>, String) {
    let rps_of = |round: u64, lines: u64| {
        runs.iter()
            .find(|r| {
                r["round"] == round
                    && r["run"]["logger"] == Logger::Ours.name()
                    && r["run"]["lines_per_request"] == lines
            })
            .and_then(|r| r["run"]["load"]["requests_per_sec"].as_f64())
    };
    let rounds = runs.iter().filter_map(|r| r["round"].as_u64()).max();
    let mut losses: Vec<f64> = (0..=rounds.unwrap_or(0))
        .filter_map(|round| match (rps_of(round, 0), rps_of(round, 5)) {
            (Some(base), Some(five)) if base > 0.0 => Some(1.0 - five / base),
            _ => None,
        })
        .collect();
    losses.sort_by(f64::total_cmp);
    let rounds = quantile(&losses, 0.5).map_or_else(String::new, |m| {
        format!(
            "; separate runs: median of per-round losses {:+.1}% over {} round(s)",
            -m * 100.0,
            losses.len()
        )
    });
    let ours = paired.iter().find(|p| p["logger"] == Logger::Ours.name());
    let Some(median) = ours.and_then(|p| p["loss_median"].as_f64()) else {
        return (None, format!("not measured{rounds}"));
    };
    let ours = ours.expect("found above");
    if o.ours_output != "writer" || o.paired_lines != PAIRED_LINES {
        return (
            None,
            format!(
                "not judged: `--ours-output {}` and `--paired-lines {}` are diagnostics (paired median {:+.1}% over {} pairs){rounds}",
                o.ours_output,
                o.paired_lines,
                -median * 100.0,
                ours["pairs"],
            ),
        );
    }
    let complete = ours["lost_uncounted"] == 0 && ours["dropped_counted"] == 0;
    (
        Some(median <= TARGET_LOSS && complete),
        format!(
            "paired: median {:+.1}% (p25 – p75: {} – {}) over {} pairs in {} run(s){}{rounds}",
            -median * 100.0,
            pct(&ours["loss_p25"]),
            pct(&ours["loss_p75"]),
            ours["pairs"],
            ours["runs"],
            if complete {
                ", every line delivered"
            } else {
                ", NOT every line delivered"
            },
        ),
    )
}
