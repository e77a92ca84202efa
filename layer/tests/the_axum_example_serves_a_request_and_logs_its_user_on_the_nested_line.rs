//! The axum example (`examples/axum.rs`) run as the service it is: a real process on a
//! free port, JSON lines to stdout (a file), one `GET /checkout?user=42` over TCP, then
//! SIGTERM. It answers 200 and stops by itself with every line flushed; the payment's
//! line, written in the nested `charge` span, carries the user the handler recorded on
//! the `request` span (its `spans` list, root first), and so does tower-http's access
//! line.
//!
//! The example's binary is the one `cargo test -p logpolicy` builds next to this test's
//! (`target/<profile>/examples/axum`); `--test` alone does not build examples.

#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long the service may take to start, answer, and stop.
const TIMEOUT: Duration = Duration::from_secs(30);

/// The example's binary, built beside this test's executable
/// (`target/<profile>/deps/<test>-<hash>`).
fn example_binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(Path::parent).unwrap();
    let bin = profile_dir
        .join("examples")
        .join(format!("axum{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.is_file(),
        "{} is missing: run `cargo test -p logpolicy`, which builds the examples \
         (or `cargo build -p logpolicy --example axum` before `--test`)",
        bin.display()
    );
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/axum.rs");
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).unwrap();
    assert!(
        modified(&bin) >= modified(&source),
        "{} is older than {}: run `cargo test -p logpolicy`, which builds the examples \
         (or `cargo build -p logpolicy --example axum` before `--test`)",
        bin.display(),
        source.display()
    );
    bin
}

/// The service's process, killed if the test ends before it stopped.
struct Service(Child);

impl Drop for Service {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Sends `GET path` with `Connection: close` and returns the whole response.
fn get(addr: &str, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(TIMEOUT)).unwrap();
    stream.set_write_timeout(Some(TIMEOUT)).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

/// The lines whose message is `msg`.
fn with_msg<'a>(lines: &'a [Value], msg: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["msg"] == msg).collect()
}

#[test]
fn the_axum_example_serves_a_request_and_logs_its_user_on_the_nested_line() {
    let bin = example_binary();
    let out_path = std::env::temp_dir().join(format!(
        "logpolicy-axum-example-{}.jsonl",
        std::process::id()
    ));
    let stdout = std::fs::File::create(&out_path).unwrap();
    let mut command = Command::new(&bin);
    for var in [
        "RUST_LOG",
        "LOGPOLICY_ADMIN_ADDR",
        "LOGPOLICY_TRUSTED_KEYS",
        "LOGPOLICY_TRUSTED_KEYS_FILE",
        "OTEL_SERVICE_NAME",
        "OTEL_RESOURCE_ATTRIBUTES",
    ] {
        command.env_remove(var);
    }
    let child = command
        .env("LOGPOLICY", "info")
        .env("LOGPOLICY_FORMAT", "json")
        .env("ADDR", "127.0.0.1:0")
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    let mut service = Service(child);
    let logged = || std::fs::read_to_string(&out_path).unwrap_or_default();

    // Its first line on stderr says where it listens.
    let stderr = service.0.stderr.take().unwrap();
    let (lines, stderr_lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let first = stderr_lines
        .recv_timeout(TIMEOUT)
        .unwrap_or_else(|e| panic!("no line on stderr ({e}); stdout:\n{}", logged()));
    let addr = first
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| panic!("first stderr line: {first:?}; stdout:\n{}", logged()))
        .to_owned();

    let response = get(&addr, "/checkout?user=42");
    assert!(
        response.starts_with("HTTP/1.1 200 "),
        "{response}\nstdout:\n{}",
        logged()
    );
    assert!(
        response.ends_with("\r\n\r\ncharged 1999 cents to user 42\n"),
        "{response}"
    );

    // SIGTERM: it stops by itself, gracefully, and flushes.
    let pid = service.0.id().to_string();
    let kill = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(kill.success(), "kill -TERM {pid}: {kill}");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = service.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            start.elapsed() < TIMEOUT,
            "still running {TIMEOUT:?} after SIGTERM; stdout:\n{}",
            logged()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let stderr_rest: Vec<String> = stderr_lines.try_iter().collect();
    let out = logged();
    assert!(
        status.success(),
        "{status}; stderr: {stderr_rest:?}; stdout:\n{out}"
    );
    std::fs::remove_file(&out_path).unwrap();

    // Every line is JSON, tower-http's included.
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let with_msg = |msg: &str| with_msg(&lines, msg);
    assert_eq!(with_msg("listening").len(), 1, "{out}");
    assert_eq!(
        with_msg("stopped").len(),
        1,
        "the last line before the Logging is dropped is missing: {out}"
    );

    // The payment's line: its own span is `charge`; the request's, with the user the
    // handler recorded on it after it was made, comes first in `spans`.
    let [charged] = with_msg("charged")[..] else {
        panic!("one \"charged\" line expected: {out}")
    };
    assert_eq!(charged["level"], "INFO", "{charged}");
    assert_eq!(charged["target"], "shop::payment", "{charged}");
    assert_eq!(charged["amount_cents"], 1999, "{charged}");
    assert_eq!(charged["span"]["name"], "charge", "{charged}");
    assert_eq!(charged["span"]["amount_cents"], 1999, "{charged}");
    let spans = charged["spans"]
        .as_array()
        .unwrap_or_else(|| panic!("no \"spans\" list (Spans::All): {charged}"));
    assert_eq!(spans.len(), 2, "{charged}");
    let (request, charge) = (&spans[0], &spans[1]);
    assert_eq!(request["name"], "request", "{charged}");
    assert_eq!(
        request["user_id"], 42,
        "the user recorded on the request span is not on the nested line: {charged}"
    );
    assert_eq!(request["method"], "GET", "{charged}");
    assert_eq!(request["path"], "/checkout", "{charged}");
    assert_eq!(charge["name"], "charge", "{charged}");
    assert_eq!(charge["amount_cents"], 1999, "{charged}");

    // tower-http's access line, at info in the example, in the request span.
    let tower: Vec<&Value> = lines
        .iter()
        .filter(|l| {
            l["target"]
                .as_str()
                .is_some_and(|t| t.starts_with("tower_http"))
        })
        .collect();
    let [access] = tower[..] else {
        panic!("one tower_http line expected at info: {out}")
    };
    assert_eq!(access["msg"], "finished processing request", "{access}");
    assert_eq!(access["level"], "INFO", "{access}");
    assert_eq!(access["status"], 200, "{access}");
    assert!(access["latency"].is_string(), "{access}");
    assert_eq!(access["span"]["name"], "request", "{access}");
    assert_eq!(access["span"]["user_id"], 42, "{access}");
    assert_eq!(access["spans"][0]["user_id"], 42, "{access}");
}
