//! `SIGTERM`, as Kubernetes stops a pod, with lines still queued behind a paused reader.
//! A child process (this test binary again) logs through `logpolicy::Builder::from_env()
//! .try_init()` to its stdout, a pipe this process shrinks to four pages and does not read,
//! so that most lines wait in logpolicy's queue; then it waits, and this process sends it
//! `SIGTERM` with `kill`:
//! - no handler of the service's own, the reader back within the 2 s bound: every line
//!   arrives, and the child dies by `SIGTERM`, as it would have without logpolicy;
//! - no handler, a reader that does not come back in time: the child still dies by
//!   `SIGTERM` within the bound, and what did not get out is reported on stderr, one
//!   `dropped events` line whose `shutdown` count plus the lines the reader got make
//!   every line logged;
//! - the service's own tokio `SIGTERM` handler, installed after logging started: its
//!   graceful path runs (it logs its last line, drops `Logging`, exits 0) and every line
//!   arrives;
//! - `LOGPOLICY_FLUSH_ON_SIGTERM=false`: nothing is installed, `SIGTERM` ends the child
//!   at once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const ROLE: &str = "SIGTERM_CHILD";
const LINES: u64 = 3_000;

/// The child: logs [`LINES`] lines, says `ready` on stderr, and waits for `SIGTERM`
/// (with a handler of its own in the `tokio` role).
fn child(role: &str) {
    let logging = logpolicy::Builder::from_env()
        .directives("info")
        .log_bridge(false)
        .try_init()
        .unwrap();
    let installed = logging.flushes_on_sigterm();
    if role == "tokio" {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            use tokio::signal::unix::{signal, SignalKind};
            let mut terminate = signal(SignalKind::terminate()).unwrap();
            log_lines();
            eprintln!("ready installed={installed}");
            terminate.recv().await;
            tracing::info!(target: "shop::main", "graceful shutdown");
        });
        let stats = logging.finish();
        eprintln!("finished written={}", stats.written_total());
        std::process::exit(0);
    }
    log_lines();
    eprintln!("ready installed={installed}");
    loop {
        std::thread::sleep(Duration::from_secs(60));
    }
}

fn log_lines() {
    for order in 0..LINES {
        tracing::info!(target: "shop::checkout", order, user_id = 42, "checkout done");
    }
}

/// The child started, its stdout a four-page pipe nobody reads yet.
struct Run {
    child: Child,
    stdout: File,
    stderr: BufReader<std::process::ChildStderr>,
    installed: bool,
}

// The child is waited for through the `Run` that owns it.
#[allow(clippy::zombie_processes)]
fn start(test: &str, role: &str, env: &[(&str, &str)]) -> Run {
    let (read, write) = rustix::pipe::pipe().unwrap();
    // Four pages: most lines wait in the queue, not in the pipe.
    rustix::pipe::fcntl_setpipe_size(&write, 16 * 1024).unwrap();
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        test,
        "--exact",
        "--nocapture",
        "--quiet",
        "--test-threads=1",
    ])
    .env(ROLE, role)
    .env_remove("RUST_LOG")
    .env_remove("LOGPOLICY")
    .env_remove("LOGPOLICY_FORMAT")
    .stdin(Stdio::null())
    .stdout(Stdio::from(write))
    .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "child ended early"
        );
        if let Some(rest) = line.trim().strip_prefix("ready installed=") {
            let installed = rest == "true";
            return Run {
                child,
                stdout: File::from(read),
                stderr,
                installed,
            };
        }
    }
}

impl Run {
    fn terminate(&self) -> Instant {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        Instant::now()
    }

    /// Waits for the child to end, at most `limit`; `None` if it has not.
    fn wait_at_most(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let until = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            if Instant::now() >= until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Reads stdout to its end (the child has ended): the `checkout done` orders, in
    /// order, and the other JSON lines.
    fn read_stdout(&mut self) -> (Vec<u64>, Vec<Value>) {
        let mut text = String::new();
        self.stdout.read_to_string(&mut text).unwrap();
        let (mut orders, mut others) = (Vec::new(), Vec::new());
        for line in text.lines() {
            let Ok(v) = serde_json::from_str::<Value>(line) else {
                continue; // the test harness's own lines
            };
            if v["msg"] == "checkout done" {
                orders.push(v["order"].as_u64().unwrap());
            } else {
                others.push(v);
            }
        }
        (orders, others)
    }

    fn rest_of_stderr(&mut self) -> String {
        let mut rest = String::new();
        self.stderr.read_to_string(&mut rest).unwrap();
        rest
    }
}

fn role() -> Option<String> {
    std::env::var(ROLE).ok()
}

#[test]
fn without_a_handler_a_reader_back_in_time_gets_every_line() {
    if let Some(role) = role() {
        return child(&role);
    }
    let mut run = start(
        "without_a_handler_a_reader_back_in_time_gets_every_line",
        "plain",
        &[],
    );
    assert!(run.installed, "the process had no SIGTERM handler");
    let sent = run.terminate();
    // The reader comes back after 500 ms, well within the 2 s bound.
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        run.child.try_wait().unwrap().is_none(),
        "waits for the reader"
    );
    let reader = {
        let mut stdout = run.stdout.try_clone().unwrap();
        std::thread::spawn(move || {
            let mut all = Vec::new();
            stdout.read_to_end(&mut all).unwrap();
            all
        })
    };
    let status = run.wait_at_most(Duration::from_secs(5)).expect("ended");
    let took = sent.elapsed();
    assert_eq!(status.signal(), Some(15), "ended by SIGTERM: {status:?}");
    run.stdout = tempfile_with(reader.join().unwrap());
    let (orders, _) = run.read_stdout();
    assert_eq!(
        orders,
        (0..LINES).collect::<Vec<_>>(),
        "every line, in order"
    );
    assert!(
        took < Duration::from_secs(2),
        "ended {took:?} after SIGTERM"
    );
    let stderr = run.rest_of_stderr();
    assert!(!stderr.contains("dropped events"), "nothing lost: {stderr}");
    eprintln!("reader back after 500 ms: {LINES} of {LINES} lines, ended {took:?} after SIGTERM");
}

#[test]
fn without_a_handler_what_a_stalled_reader_did_not_get_is_reported() {
    if let Some(role) = role() {
        return child(&role);
    }
    let mut run = start(
        "without_a_handler_what_a_stalled_reader_did_not_get_is_reported",
        "plain",
        &[],
    );
    assert!(run.installed);
    let sent = run.terminate();
    let status = run.wait_at_most(Duration::from_secs(5)).expect("ended");
    let took = sent.elapsed();
    assert_eq!(status.signal(), Some(15), "ended by SIGTERM: {status:?}");
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_millis(3000),
        "waited the 2 s bound, no longer: {took:?}"
    );
    let (orders, others) = run.read_stdout();
    let stderr = run.rest_of_stderr();
    let report: Value = stderr
        .lines()
        .find_map(|l| {
            serde_json::from_str::<Value>(l)
                .ok()
                .filter(|v| v["msg"] == "dropped events")
        })
        .unwrap_or_else(|| {
            panic!(
                "a report on stderr: {stderr}; stdout had {} lines, others {others:?}",
                orders.len()
            )
        });
    let shutdown = report["reason"]["shutdown"].as_u64().unwrap();
    assert!(shutdown > 0, "{report}");
    assert_eq!(report["info"].as_u64().unwrap(), shutdown, "{report}");
    // The reader got a prefix of the lines (at most one torn line, not counted in it);
    // the report counts every other one.
    assert_in_order(&orders, orders.len() as u64);
    assert_eq!(orders.len() as u64 + shutdown, LINES, "{report}");
    assert!(others.is_empty(), "{others:?}");
    eprintln!(
        "reader stalled: {} lines got out, {shutdown} reported lost on stderr, ended {took:?} after SIGTERM",
        orders.len()
    );
}

#[test]
fn a_service_with_its_own_tokio_handler_shuts_down_its_way() {
    if let Some(role) = role() {
        return child(&role);
    }
    let mut run = start(
        "a_service_with_its_own_tokio_handler_shuts_down_its_way",
        "tokio",
        &[],
    );
    // Logging started before the service's handler: logpolicy's was installed, and
    // tokio's replaced it.
    assert!(run.installed);
    run.terminate();
    let reader = {
        let mut stdout = run.stdout.try_clone().unwrap();
        std::thread::spawn(move || {
            // The reader comes back after 500 ms.
            std::thread::sleep(Duration::from_millis(500));
            let mut all = Vec::new();
            stdout.read_to_end(&mut all).unwrap();
            all
        })
    };
    let status = run.wait_at_most(Duration::from_secs(15)).expect("ended");
    assert_eq!(status.code(), Some(0), "the service's own exit: {status:?}");
    run.stdout = tempfile_with(reader.join().unwrap());
    let (orders, others) = run.read_stdout();
    assert_in_order(&orders, LINES);
    assert!(
        others.iter().any(|v| v["msg"] == "graceful shutdown"),
        "{others:?}"
    );
    // Every line the reader got was counted as written, and no other: the orders, the
    // graceful line, and the exit line naming the top callsites when the writer drained
    // the queue in time for it (the reader's return races the service's shutdown).
    let stderr = run.rest_of_stderr();
    let got = orders.len() + others.len();
    assert!(
        stderr.contains(&format!("finished written={got}")),
        "{got} lines read: {stderr}"
    );
}

#[test]
fn turned_off_sigterm_ends_the_process_at_once() {
    if let Some(role) = role() {
        return child(&role);
    }
    let mut run = start(
        "turned_off_sigterm_ends_the_process_at_once",
        "plain",
        &[("LOGPOLICY_FLUSH_ON_SIGTERM", "false")],
    );
    assert!(!run.installed);
    let sent = run.terminate();
    let status = run.wait_at_most(Duration::from_secs(5)).expect("ended");
    assert_eq!(status.signal(), Some(15));
    assert!(
        sent.elapsed() < Duration::from_millis(500),
        "{:?}",
        sent.elapsed()
    );
    let (orders, _) = run.read_stdout();
    assert!(
        (orders.len() as u64) < LINES,
        "queued lines lost, as before"
    );
}

/// `orders` is 0, 1, ... `n - 1`.
fn assert_in_order(orders: &[u64], n: u64) {
    let first_wrong = orders.iter().zip(0..).position(|(o, i)| *o != i);
    assert!(
        orders.len() as u64 == n && first_wrong.is_none(),
        "{} of {n} lines, the first out of place at {first_wrong:?}",
        orders.len()
    );
}

/// A file holding `bytes`, read from its start.
fn tempfile_with(bytes: Vec<u8>) -> File {
    let path = std::env::temp_dir().join(format!(
        "sigterm-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::write(&path, bytes).unwrap();
    let file = File::open(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    file
}
