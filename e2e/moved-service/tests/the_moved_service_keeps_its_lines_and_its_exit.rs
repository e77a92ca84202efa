//! A service moved from `EnvFilter` + `fmt` JSON + OpenTelemetry + `log` (`before`) to
//! logpolicy by the README alone (`after`: logpolicy's layer in their place, the same
//! `.init()`), run side by side, real processes and pipes:
//!
//! 1. SIGTERM with the reader paused: every request that was answered has its line, and
//!    both end by SIGTERM;
//! 2. trace ids: on every line in a span with the OpenTelemetry logpolicy reads; with
//!    the service's older one, a `warn` line says why there are none;
//! 3. `.init()` installs both without a panic, and each `log` record is written once;
//! 4. the request span's `user_id` is on the nested span's lines, with no setting;
//! 5. the same `RUST_LOG` writes the same events, logpolicy's own lines included;
//! 6. `log` records carry `fmt`'s `log.*` keys with the same values.
//!
//! `cargo test --manifest-path e2e/moved-service/Cargo.toml --target-dir target`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const BEFORE: &str = env!("CARGO_BIN_EXE_before");
const AFTER: &str = env!("CARGO_BIN_EXE_after");

/// A running service: its address, its stdout's read end, its stderr.
struct Service {
    child: Child,
    addr: String,
    stdout: Option<std::process::ChildStdout>,
    stderr: BufReader<std::process::ChildStderr>,
}

impl Service {
    /// Starts `bin` with `env`, its stdout a pipe this process reads when it likes.
    fn start(bin: &str, env: &[(&str, &str)]) -> Service {
        let mut child = Command::new(bin)
            .env_remove("RUST_LOG")
            .env_remove("LOGPOLICY")
            .env_remove("LOGPOLICY_FORMAT")
            .env_remove("OTEL_VERSION")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        let addr = loop {
            line.clear();
            assert!(
                stderr.read_line(&mut line).unwrap() > 0,
                "{bin} ended early"
            );
            if let Some(addr) = line.trim().strip_prefix("listening on ") {
                break addr.to_owned();
            }
        };
        let stdout = child.stdout.take();
        Service {
            child,
            addr,
            stdout,
            stderr,
        }
    }

    /// `GET /checkout?user=U&order=O`; whether it was answered 200 within `timeout`.
    fn checkout(&self, user: u64, order: u64, timeout: Duration) -> bool {
        let Ok(mut s) = TcpStream::connect(&self.addr) else {
            return false;
        };
        s.set_read_timeout(Some(timeout)).unwrap();
        let request = format!(
            "GET /checkout?user={user}&order={order} HTTP/1.1\r\nhost: shop\r\nconnection: close\r\n\r\n"
        );
        if s.write_all(request.as_bytes()).is_err() {
            return false;
        }
        let mut reply = String::new();
        s.read_to_string(&mut reply).is_ok() && reply.starts_with("HTTP/1.1 200")
    }

    fn signal(&self, name: &str) {
        let ok = Command::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok);
    }

    fn wait(&mut self, limit: Duration) -> ExitStatus {
        let until = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < until, "did not end within {limit:?}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Every JSON line on stdout (the service has ended, or ends while this reads).
    fn lines(&mut self) -> Vec<Value> {
        let mut text = String::new();
        self.stdout
            .take()
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }

    fn stderr(&mut self) -> String {
        let mut rest = String::new();
        self.stderr.read_to_string(&mut rest).unwrap();
        rest
    }
}

/// A line in a neutral shape: `(level, target, message)`; `fmt`'s keys read as its
/// JSON writes them (`fields.message`), logpolicy's as it writes them (`msg`).
fn event(line: &Value) -> (String, String, String) {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let msg = if line["fields"].is_object() {
        &line["fields"]["message"]
    } else {
        &line["msg"]
    };
    (s(&line["level"]), s(&line["target"]), s(msg))
}

/// A field of a line: `fmt`'s under `fields`, logpolicy's at the top level.
fn field<'a>(line: &'a Value, name: &str) -> &'a Value {
    if line["fields"].is_object() {
        &line["fields"][name]
    } else {
        &line[name]
    }
}

/// Runs `bin` with `RUST_LOG=rust_log`: three checkouts (user 13's warns), then ctrl-c.
fn run_requests(
    bin: &str,
    rust_log: &str,
    env: &[(&str, &str)],
) -> (ExitStatus, Vec<Value>, String) {
    let mut vars = vec![("RUST_LOG", rust_log)];
    vars.extend_from_slice(env);
    let mut service = Service::start(bin, &vars);
    for (user, order) in [(42, 1), (13, 2), (42, 3)] {
        assert!(service.checkout(user, order, Duration::from_secs(10)));
    }
    service.signal("INT");
    let status = service.wait(Duration::from_secs(20));
    let lines = service.lines();
    (status, lines, service.stderr())
}

#[test]
fn the_same_events_with_the_same_keys_and_span_fields() {
    let (before_status, before, _) = run_requests(BEFORE, "info", &[]);
    let (after_status, after, stderr) = run_requests(AFTER, "info", &[]);
    // 3: both installed by `.init()`, without a panic, and ended by ctrl-c.
    assert_eq!(before_status.code(), Some(0));
    assert_eq!(after_status.code(), Some(0), "{stderr}");
    // 5 (info) and 3 (each `log` record once): the same events in the same order,
    // logpolicy's exit summary (an `info` line of target `logpolicy`) aside.
    let events = |lines: &[Value]| -> Vec<(String, String, String)> {
        lines
            .iter()
            .map(event)
            .filter(|e| e.1 != "logpolicy")
            .collect()
    };
    assert_eq!(events(&after), events(&before));
    assert_eq!(
        events(&after)
            .iter()
            .filter(|e| e.2.starts_with("authorised order"))
            .count(),
        3
    );
    assert!(
        after.iter().any(|l| l["target"] == "logpolicy"),
        "the exit summary at info"
    );
    for (b, a) in before
        .iter()
        .zip(after.iter().filter(|l| l["target"] != "logpolicy"))
    {
        // 4: the request span's user_id on the nested span's lines, as fmt has it.
        let user = |l: &Value| -> Vec<Value> {
            l["spans"]
                .as_array()
                .map(|s| s.iter().map(|s| s["user_id"].clone()).collect())
                .unwrap_or_default()
        };
        assert_eq!(user(a), user(b), "spans of {a}");
        // 6: the `log` records' keys, as fmt writes them.
        for key in ["log.target", "log.module_path", "log.file", "log.line"] {
            assert_eq!(field(a, key), field(b, key), "{key} of {a}");
        }
        // 2: a trace id on every line inside a span.
        if a["spans"].is_array() {
            let id = a["trace_id"].as_str().unwrap_or_default();
            assert_eq!(id.len(), 32, "trace_id on {a}");
        }
    }
    let charged: Vec<_> = after.iter().filter(|l| event(l).2 == "charged").collect();
    assert_eq!(charged.len(), 3);
    assert_eq!(charged[0]["spans"][0]["user_id"], 42);
    assert!(before.iter().any(|l| field(l, "log.target").is_string()));
}

#[test]
fn the_same_rust_log_writes_the_same_lines_ours_included() {
    let (_, before, _) = run_requests(BEFORE, "warn", &[]);
    let (status, after, _) = run_requests(AFTER, "warn", &[]);
    assert_eq!(status.code(), Some(0));
    let events = |lines: &[Value]| lines.iter().map(event).collect::<Vec<_>>();
    // One warning each, and nothing else: no `info` line of logpolicy's either.
    assert_eq!(events(&after), events(&before));
    assert_eq!(
        events(&after),
        vec![(
            "WARN".to_owned(),
            "shop::checkout".to_owned(),
            "card declined, retried".to_owned()
        )]
    );
    // `logpolicy=warn` turns logpolicy's exit summary off and leaves the rest at info.
    let (_, after, _) = run_requests(AFTER, "info,logpolicy=warn", &[]);
    assert!(after.iter().all(|l| l["target"] != "logpolicy"));
    assert!(after.iter().any(|l| event(l).2 == "checkout done"));
}

#[test]
fn an_opentelemetry_logpolicy_does_not_read_says_so() {
    let (status, after, _) = run_requests(AFTER, "info", &[("OTEL_VERSION", "0.32")]);
    assert_eq!(status.code(), Some(0));
    let warnings: Vec<_> = after
        .iter()
        .filter(|l| l["target"] == "logpolicy" && l["level"] == "WARN")
        .collect();
    assert_eq!(warnings.len(), 1, "{after:?}");
    assert_eq!(warnings[0]["source"], "opentelemetry");
    assert!(warnings[0]["error"].as_str().unwrap().contains("0.34"));
    assert!(after.iter().all(|l| l["trace_id"].is_null()));
}

#[test]
fn at_sigterm_every_answered_request_has_its_line_and_both_end_by_sigterm() {
    for (bin, name) in [(BEFORE, "before"), (AFTER, "after")] {
        let mut service = Service::start(bin, &[("RUST_LOG", "info")]);
        // The reader is paused (nothing reads stdout) while the requests come, and
        // when SIGTERM does; fmt's writes wait for it, logpolicy's do not.
        let started = Instant::now();
        let mut answered = Vec::new();
        for order in 0..300 {
            if started.elapsed() > Duration::from_secs(3) {
                break;
            }
            if !service.checkout(42, order, Duration::from_millis(300)) {
                break;
            }
            answered.push(order);
        }
        service.signal("TERM");
        std::thread::sleep(Duration::from_millis(500));
        let stdout = service.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut text = String::new();
            let mut stdout = stdout;
            stdout.read_to_string(&mut text).unwrap();
            text
        });
        let status = service.wait(Duration::from_secs(10));
        let text = reader.join().unwrap();
        assert_eq!(
            status.signal(),
            Some(15),
            "{name} ends by SIGTERM: {status:?}"
        );
        let done: Vec<u64> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|l| event(l).2 == "checkout done")
            .map(|l| field(&l, "order").as_u64().unwrap())
            .collect();
        for order in &answered {
            assert!(
                done.contains(order),
                "{name}: order {order} answered, its line lost"
            );
        }
        eprintln!(
            "{name}: {} requests answered before SIGTERM, {} `checkout done` lines read",
            answered.len(),
            done.len()
        );
        if name == "after" {
            assert_eq!(answered.len(), 300, "logpolicy never waits for the reader");
        }
    }
}
