//! Two builds of the HTTP benchmark's service, compared the way `http-bench` compares
//! 0 and 5 lines per request: both services run side by side on the service core, the
//! load alternates between them slice by slice, and each pair of adjacent slices gives
//! one ratio. A change to the logger too small to tell apart across separate runs (the
//! machine's speed drifts by more than it between runs) shows here.
//!
//! ```text
//! cp target/release/http-bench /tmp/http-bench-before   # build A
//! # ... change the logger, cargo build --release -p logpolicy-bench ...
//! cargo run --release -p logpolicy-bench --bin http-ab -- \
//!     /tmp/http-bench-before target/release/http-bench [--lines 5] [--pairs 64] [--runs 2]
//! ```
//!
//! It prints the median, over all pairs, of `B's req/s / A's - 1` and its quartiles;
//! each run starts both services afresh, and every other run swaps which is loaded
//! first. Logger `logpolicy` unless `--logger NAME` (any logger `http-bench` knows);
//! `--b-output devnull|discard|filter-only` runs B (ours) in that diagnostic mode of
//! `http-bench --ours-output` (A and B may then be the same binary).

// A benchmark driver: a failure to start a service or to parse an argument ends the run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use logpolicy_bench::load_generator::{run_alternating, AlternatingConfig};
use logpolicy_bench::service::{
    listening_port, pin_to, quantile, quit, stderr_lines, wait_bounded, LOAD_CPU, SERVICE_CPU,
};

const BODY_LEN: usize = 9;

struct Service {
    child: Child,
    addr: SocketAddr,
}

/// Starts `exe serve`, its stdout `log` (or `/dev/null` in mode `devnull`); `mode` other
/// than `writer` is passed to ours as its diagnostic output mode.
fn start(exe: &Path, logger: &str, lines: u32, log: &Path, mode: &str) -> Service {
    let file = if mode == "devnull" {
        File::options()
            .write(true)
            .open("/dev/null")
            .expect("/dev/null")
    } else {
        File::create(log).expect("log file")
    };
    let mut command = Command::new(exe);
    command
        .args([
            "serve",
            logger,
            &lines.to_string(),
            &SERVICE_CPU.to_string(),
        ])
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(Stdio::piped());
    if mode != "writer" {
        command.env(logpolicy_bench::OURS_OUTPUT_ENV, mode);
    }
    let mut child = command
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", exe.display()));
    // The reader thread keeps draining stderr (the service's report at exit).
    let (rx, _reader) = stderr_lines(&mut child);
    let mut before = Vec::new();
    let Some(port) = listening_port(&rx, &mut before) else {
        let exit = wait_bounded(&mut child, Duration::ZERO);
        panic!("{} did not start ({exit}): {before:?}", exe.display());
    };
    Service {
        child,
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
    }
}

fn stop(mut s: Service) {
    let _ = quit(s.addr);
    wait_bounded(&mut s.child, Duration::from_secs(20));
}

/// The `p` quantile of sorted values that are known not to be empty.
fn q(sorted: &[f64], p: f64) -> f64 {
    quantile(sorted, p).unwrap_or(f64::NAN)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut exes: Vec<PathBuf> = Vec::new();
    let (mut lines, mut pairs, mut runs, mut logger) =
        (5u32, 64usize, 2usize, "logpolicy".to_owned());
    let mut b_output = "writer".to_owned();
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--lines" => lines = value().parse().expect("--lines N"),
            "--pairs" => pairs = value().parse().expect("--pairs N"),
            "--runs" => runs = value().parse().expect("--runs N"),
            "--logger" => logger = value(),
            "--b-output" => {
                b_output = value();
                assert!(
                    ["writer", "devnull", "discard", "filter-only"].contains(&b_output.as_str()),
                    "--b-output writer|devnull|discard|filter-only"
                );
            }
            _ => exes.push(PathBuf::from(a)),
        }
    }
    let [a, b] = <[PathBuf; 2]>::try_from(exes).unwrap_or_else(|_| {
        panic!("usage: http-ab EXE_A EXE_B [--lines 5] [--pairs 64] [--runs 2] [--logger NAME] [--b-output MODE]")
    });
    if let Err(e) = pin_to(LOAD_CPU) {
        eprintln!("warning: {e}");
    }
    let dir = std::env::temp_dir().join(format!("logpolicy-http-ab-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut ratios: Vec<f64> = Vec::new();
    let mut rps = [0.0f64; 2];
    for run in 0..runs {
        let order: [&PathBuf; 2] = if run % 2 == 0 { [&a, &b] } else { [&b, &a] };
        // By position, not by path: A and B may be the same binary.
        let services = [0, 1].map(|i| {
            let is_a = (i == 0) == (run % 2 == 0);
            let (tag, mode) = if is_a {
                ("a", "writer")
            } else {
                ("b", b_output.as_str())
            };
            start(
                order[i],
                &logger,
                lines,
                &dir.join(format!("{tag}-{run}.log")),
                mode,
            )
        });
        let config = AlternatingConfig {
            addrs: [services[0].addr, services[1].addr],
            path: "/api/orders".to_owned(),
            connections: 64,
            pipeline: 1,
            warmup: Duration::from_secs(1),
            slice: Duration::from_millis(500),
            settle: Duration::from_millis(100),
            pairs,
            io_timeout: Duration::from_secs(5),
        };
        let report = run_alternating(&config, BODY_LEN).expect("load");
        for s in services {
            stop(s);
        }
        for d in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let _ = std::fs::remove_file(d.path());
        }
        // Index 0 of `order` is A on even runs, B on odd ones.
        let (ia, ib) = if run % 2 == 0 { (0, 1) } else { (1, 0) };
        let mut mine = Vec::new();
        for pair in report.slices.chunks_exact(2) {
            let of = |i: usize| {
                pair.iter()
                    .find(|s| s.service == i)
                    .map(|s| s.requests_per_sec())
            };
            if let (Some(ra), Some(rb)) = (of(ia), of(ib)) {
                if ra > 0.0 {
                    mine.push(rb / ra - 1.0);
                }
            }
        }
        rps[0] += report.services[ia].requests_per_sec() / runs as f64;
        rps[1] += report.services[ib].requests_per_sec() / runs as f64;
        mine.sort_by(f64::total_cmp);
        eprintln!(
            "run {run}: B vs A median {:+.2}% over {} pairs",
            100.0 * q(&mine, 0.5),
            mine.len()
        );
        ratios.extend(mine);
    }
    let _ = std::fs::remove_dir_all(&dir);
    ratios.sort_by(f64::total_cmp);
    println!(
        "{logger}, {lines} lines/request: B vs A {:+.2}% (median of {} pairs; p25 {:+.2}%, p75 {:+.2}%); req/s A {:.0}, B {:.0}",
        100.0 * q(&ratios, 0.5),
        ratios.len(),
        100.0 * q(&ratios, 0.25),
        100.0 * q(&ratios, 0.75),
        rps[0],
        rps[1]
    );
}
