//! A service whose admin endpoint settings do not work still starts, logs and serves:
//! `init()` works around each problem and says so in a `warn` line from target
//! `logpolicy`, the first line the service writes, in its format. A keys file that is
//! not there yet (a trust ConfigMap mounted `optional: true` before it exists) leaves
//! an endpoint that refuses pushes until the file appears, then takes them; an
//! incomplete pod identity leaves one that refuses every push; an address that does not
//! work leaves none. `/metrics` says whether a push can be accepted. With
//! `Builder::strict(true)` each of these stops the service instead, before it writes a
//! line.
//!
//! Each test runs the test binary again as the service, a real process logging to its
//! real stdout (a pipe) through `Builder::from_env()`, with the environment under test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin_fixture;

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use admin_fixture::{doc_for, put_signed, send, Reply, POD_UID};
use logpolicy::wire::{self, SigningKey};
use serde_json::Value;

const CHILD: &str = "LOGPOLICY_TEST_START_CHILD";
const STRICT: &str = "LOGPOLICY_TEST_START_STRICT";

/// Every variable that configures logging or the endpoint: unset in the service unless
/// the test sets it.
const VARS: [&str; 13] = [
    "LOGPOLICY",
    "RUST_LOG",
    "LOGPOLICY_FORMAT",
    "LOGPOLICY_ADMIN_ADDR",
    "LOGPOLICY_TRUSTED_KEYS",
    "LOGPOLICY_TRUSTED_KEYS_FILE",
    "LOGPOLICY_ADMIN_ANY_POD",
    "LOGPOLICY_METRIC_TARGETS",
    "POD_UID",
    "POD_NAME",
    "POD_NAMESPACE",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
];

/// The service: logging from the environment (strict if told), one line, then serving
/// until its stdin closes. A refusal ends it with status 1, as `init()?` in `main` would.
#[test]
fn child_service() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let strict = std::env::var_os(STRICT).is_some();
    let logging = match logpolicy::Builder::from_env().strict(strict).try_init() {
        Ok(logging) => logging,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    let admin = logging
        .admin_addr()
        .map_or_else(|| "off".to_owned(), |a| a.to_string());
    eprintln!("admin: {admin}");
    tracing::info!(target: "shop::http", "up");
    let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
    tracing::info!(target: "shop::http", "down");
    drop(logging);
    std::process::exit(0);
}

/// A running service.
struct Service {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    admin: Option<SocketAddr>,
}

/// How a start ended: the service runs, or it exited with this status, stderr and stdout.
enum Started {
    Running(Service),
    Exited(i32, String, String),
}

fn start(vars: &[(&str, &str)], strict: bool) -> Started {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "child_service", "--nocapture"])
        .env(CHILD, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for var in VARS {
        cmd.env_remove(var);
    }
    cmd.envs(vars.iter().copied());
    if strict {
        cmd.env(STRICT, "1");
    }
    let mut child = cmd.spawn().unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    stderr.read_line(&mut first).unwrap();
    if let Some(admin) = first.trim().strip_prefix("admin: ") {
        let (tx, lines) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        return Started::Running(Service {
            stdin: child.stdin.take(),
            child,
            lines,
            admin: admin.parse().ok(),
        });
    }
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    let status = child.wait().unwrap();
    Started::Exited(status.code().unwrap_or(-1), first + &rest, stdout)
}

fn running(vars: &[(&str, &str)]) -> Service {
    match start(vars, false) {
        Started::Running(service) => service,
        Started::Exited(code, stderr, stdout) => {
            panic!("the service exited with {code}:\n{stderr}\n{stdout}")
        }
    }
}

impl Service {
    /// The next line the service writes that is not the test harness's (within 10 s).
    fn next_line(&self) -> String {
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(10))
                .expect("a line within 10 s");
            if !line.starts_with("running ") && !line.trim().is_empty() {
                return line;
            }
        }
    }

    fn next_json(&self) -> Value {
        let line = self.next_line();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    fn admin(&self) -> SocketAddr {
        self.admin.expect("the endpoint runs")
    }

    /// A metric's value in `/metrics`.
    fn metric(&self, series: &str) -> f64 {
        let r = send(self.admin(), "GET", "/metrics", &[], b"");
        assert_eq!(r.status, 200, "{r:?}");
        r.body
            .lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("no {series} in\n{}", r.body))
            .parse()
            .unwrap()
    }

    fn push(&self, key: &SigningKey, version: u64) -> Reply {
        put_signed(self.admin(), key, &doc_for(POD_UID, version, "[]"))
    }

    /// Closes stdin: the service logs its last line and exits 0.
    fn stop(mut self) {
        drop(self.stdin.take());
        let status = self.child.wait().unwrap();
        assert!(status.success(), "{status}");
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn key() -> SigningKey {
    SigningKey::from_bytes(&[9; 32])
}

fn public_key() -> String {
    wire::encode_public_key(&key().verifying_key())
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("logpolicy-start-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

const IDENTITY: [(&str, &str); 3] = [
    ("POD_UID", POD_UID),
    ("POD_NAME", "web-1"),
    ("POD_NAMESPACE", "shop"),
];

/// Asserts `line` is logpolicy's `warn` line with this message and source; returns its
/// error.
fn warning(line: &Value, msg: &str, source: &str) -> String {
    assert_eq!(
        (
            &line["level"],
            &line["target"],
            &line["msg"],
            &line["source"]
        ),
        (
            &"WARN".into(),
            &"logpolicy".into(),
            &msg.into(),
            &source.into()
        ),
        "{line}"
    );
    line["error"].as_str().unwrap().to_owned()
}

fn up(line: &Value) {
    assert_eq!(
        (&line["target"], &line["msg"]),
        (&"shop::http".into(), &"up".into()),
        "{line}"
    );
}

#[test]
fn a_keys_file_not_there_yet_is_waited_for_and_then_trusted() {
    let dir = temp_dir("keys");
    let file = dir.join("trusted-keys");
    let path = file.to_str().unwrap();
    let mut vars = vec![
        ("LOGPOLICY_ADMIN_ADDR", "127.0.0.1:0"),
        ("LOGPOLICY_TRUSTED_KEYS_FILE", path),
    ];
    vars.extend(IDENTITY);
    let service = running(&vars);

    let error = warning(
        &service.next_json(),
        "the admin endpoint refuses pushes until its keys file can be read",
        "LOGPOLICY_TRUSTED_KEYS_FILE",
    );
    assert!(
        error.starts_with(&format!("trusted keys: {path}")),
        "{error}"
    );
    up(&service.next_json());

    // The endpoint serves, says it cannot take a push, and refuses one, naming why.
    assert_eq!(service.metric("logpolicy_admin_trusted_keys"), 0.0);
    assert_eq!(
        service.metric(r#"logpolicy_admin_push_blocked{reason="no_trusted_keys"}"#),
        1.0
    );
    assert_eq!(
        service.metric(r#"logpolicy_admin_push_blocked{reason="no_pod_identity"}"#),
        0.0
    );
    let reason = service.push(&key(), 1).refused(401, "no_trusted_keys");
    assert!(reason.contains(path), "{reason}");
    let refused = service.next_json();
    assert_eq!(refused["msg"], "refused a policy push", "{refused}");

    // The ConfigMap appears: within a read or two the key is trusted, and said so.
    std::fs::write(&file, format!("{}\n", public_key())).unwrap();
    let started = Instant::now();
    let trusted = service.next_json();
    assert_eq!(
        (&trusted["level"], &trusted["target"], &trusted["msg"]),
        (
            &"INFO".into(),
            &"logpolicy".into(),
            &"the admin endpoint trusts the keys of its keys file".into()
        ),
        "{trusted}"
    );
    assert_eq!(
        (&trusted["source"], &trusted["keys"]),
        (&path.into(), &1.into())
    );
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(service.push(&key(), 2).status, 200);
    assert_eq!(service.metric("logpolicy_admin_trusted_keys"), 1.0);
    assert_eq!(
        service.metric(r#"logpolicy_admin_push_blocked{reason="no_trusted_keys"}"#),
        0.0
    );

    // Gone again (a ConfigMap deleted): nothing is trusted, and that is said too.
    std::fs::remove_file(&file).unwrap();
    let error = warning(
        &service.next_json(),
        "the admin endpoint refuses every push: its keys file cannot be read",
        path,
    );
    assert!(error.contains(path), "{error}");
    service.push(&key(), 3).refused(401, "no_trusted_keys");
    service.stop();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn without_the_pods_identity_the_endpoint_runs_and_refuses_every_push() {
    let key = public_key();
    let service = running(&[
        ("LOGPOLICY_ADMIN_ADDR", "127.0.0.1:0"),
        ("LOGPOLICY_TRUSTED_KEYS", &key),
        ("POD_UID", POD_UID),
        ("POD_NAMESPACE", "shop"),
    ]);
    let error = warning(
        &service.next_json(),
        "the admin endpoint refuses every push: it does not know the pod's identity",
        "POD_NAME",
    );
    assert!(error.contains("POD_NAME is unset"), "{error}");
    up(&service.next_json());
    assert_eq!(
        send(service.admin(), "GET", "/healthz", &[], b"").status,
        200
    );
    assert_eq!(
        service.metric(r#"logpolicy_admin_push_blocked{reason="no_pod_identity"}"#),
        1.0
    );
    assert_eq!(service.metric("logpolicy_admin_trusted_keys"), 1.0);
    // Signed by the trusted key, for this very pod: refused all the same.
    let reason = service
        .push(&self::key(), 1)
        .refused(403, "no_pod_identity");
    assert!(reason.contains("POD_NAME is unset"), "{reason}");
    // Not signed: refused as any unsigned push is, telling nothing more.
    let unsigned = send(
        service.admin(),
        "PUT",
        "/logpolicy",
        &[],
        doc_for(POD_UID, 2, "[]").as_bytes(),
    );
    unsigned.refused(401, "missing_signature");
    service.stop();
}

#[test]
fn an_address_that_does_not_work_leaves_the_service_without_the_endpoint() {
    let key = public_key();
    // Not an address, and in the service's format (logfmt).
    let mut vars = vec![
        ("LOGPOLICY_ADMIN_ADDR", "localhost:9090"),
        ("LOGPOLICY_TRUSTED_KEYS", key.as_str()),
        ("LOGPOLICY_FORMAT", "logfmt"),
    ];
    vars.extend(IDENTITY);
    let service = running(&vars);
    assert_eq!(service.admin, None);
    let line = service.next_line();
    for part in [
        "level=warn",
        "target=logpolicy",
        r#"msg="the admin endpoint is not running""#,
        "source=LOGPOLICY_ADMIN_ADDR",
        r#"error="LOGPOLICY_ADMIN_ADDR: invalid address \"localhost:9090\""#,
    ] {
        assert!(line.contains(part), "{part} not in {line}");
    }
    let line = service.next_line();
    assert!(line.contains("msg=up"), "{line}");
    service.stop();

    // An address taken by another process.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let mut vars = vec![
        ("LOGPOLICY_ADMIN_ADDR", addr.as_str()),
        ("LOGPOLICY_TRUSTED_KEYS", key.as_str()),
    ];
    vars.extend(IDENTITY);
    let service = running(&vars);
    assert_eq!(service.admin, None);
    let error = warning(
        &service.next_json(),
        "the admin endpoint is not running",
        "LOGPOLICY_ADMIN_ADDR",
    );
    assert!(
        error.starts_with(&format!("cannot listen on {addr}: ")),
        "{error}"
    );
    up(&service.next_json());
    service.stop();
}

#[test]
fn an_invalid_setting_is_skipped_and_the_endpoint_starts_without_it() {
    let key = public_key();
    let mut vars = vec![
        ("LOGPOLICY_ADMIN_ADDR", "127.0.0.1:0"),
        ("LOGPOLICY_TRUSTED_KEYS", key.as_str()),
        ("LOGPOLICY_METRIC_TARGETS", "lots"),
    ];
    vars.extend(IDENTITY);
    let service = running(&vars);
    let error = warning(
        &service.next_json(),
        "skipped an invalid admin endpoint setting",
        "LOGPOLICY_METRIC_TARGETS",
    );
    assert!(error.contains("\"lots\""), "{error}");
    up(&service.next_json());
    assert_eq!(service.push(&self::key(), 1).status, 200);
    service.stop();
}

#[test]
fn strict_refuses_to_start_and_writes_nothing() {
    let dir = temp_dir("strict");
    let missing = dir.join("trusted-keys");
    let key = public_key();
    let cases: [(&[(&str, &str)], &str); 3] = [
        (
            &[("LOGPOLICY_TRUSTED_KEYS_FILE", missing.to_str().unwrap())],
            "error: admin endpoint: trusted keys: ",
        ),
        (
            &[("LOGPOLICY_TRUSTED_KEYS", &key), ("POD_NAME", "")],
            "error: admin endpoint: the admin endpoint needs the pod's identity",
        ),
        (
            &[
                ("LOGPOLICY_TRUSTED_KEYS", &key),
                ("LOGPOLICY_ADMIN_ADDR", "localhost:9090"),
            ],
            "error: admin endpoint: LOGPOLICY_ADMIN_ADDR: invalid address",
        ),
    ];
    for (vars, expected) in cases {
        let mut all = vec![("LOGPOLICY_ADMIN_ADDR", "127.0.0.1:0")];
        all.extend(IDENTITY);
        all.extend(vars.iter().copied());
        // Without strict, it starts.
        match start(&all, false) {
            Started::Running(service) => service.stop(),
            Started::Exited(code, stderr, _) => panic!("{vars:?}: exited {code}: {stderr}"),
        }
        let Started::Exited(code, stderr, stdout) = start(&all, true) else {
            panic!("{vars:?}: strict, and it started");
        };
        assert_eq!(code, 1, "{vars:?}: {stderr}");
        assert!(stderr.starts_with(expected), "{vars:?}: {stderr}");
        assert!(
            stdout
                .lines()
                .all(|l| l.starts_with("running ") || l.trim().is_empty()),
            "{vars:?}: the service wrote {stdout}"
        );
    }
    let _ = std::fs::remove_dir_all(dir);
}
