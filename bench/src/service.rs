//! What `http-bench` and `http-ab` share about the service they start (their own binary
//! re-executed as `serve <logger> <lines> <cpu>`): the cores, how it says where it
//! listens, how it is told to quit, and the bounded waits on it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Child;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// The body the service answers with.
pub const BODY: &[u8] = b"{\"ok\":1}\n";

/// Logs one request's `lines` lines, as the service does: `lines - 1` along the way,
/// then the access line, whose latency `latency_us` gives when it is written.
#[inline]
pub fn log_request(method: &str, path: &str, lines: u32, latency_us: impl FnOnce() -> u64) {
    for step in 1..lines {
        tracing::info!(target: "http", method, path, step, "handling request");
    }
    if lines > 0 {
        let latency_us = latency_us();
        tracing::info!(
            target: "http",
            method,
            path,
            status = 200u16,
            latency_us,
            bytes = BODY.len(),
            "request completed"
        );
    }
}

/// The environment variable that carries the service's [`Shape`] (`light`, the
/// default, or `standard`) from `http-bench --shape` (or the caller of `http-ab`) to
/// the service it starts.
pub const SHAPE_ENV: &str = "LOGPOLICY_BENCH_SHAPE";

/// What a request's lines carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// [`log_request`]: `lines - 1` lines with three fields, then the access line with
    /// five (about 145 bytes of JSON each with ours).
    Light,
    /// [`log_standard`]: every line with the six fields services really write
    /// (`request_id`, `method`, `path`, `status`, `latency_us`, `user`) and a message
    /// (about 220 bytes of JSON each with ours).
    Standard,
}

impl Shape {
    /// `light` or `standard`.
    pub fn name(self) -> &'static str {
        match self {
            Shape::Light => "light",
            Shape::Standard => "standard",
        }
    }

    /// The shape `name` names.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "light" => Some(Shape::Light),
            "standard" => Some(Shape::Standard),
            _ => None,
        }
    }

    /// The shape [`SHAPE_ENV`] names ([`Shape::Light`] when unset); exits with a message
    /// when it names none.
    pub fn from_env() -> Self {
        match std::env::var(SHAPE_ENV) {
            Err(_) => Shape::Light,
            Ok(v) => Shape::parse(&v).unwrap_or_else(|| {
                eprintln!("{SHAPE_ENV}={v:?}: expected light or standard");
                std::process::exit(2)
            }),
        }
    }
}

/// A request's id as services carry it: 16 lowercase hex digits, made from a counter
/// without allocating (what the service does whether it logs or not).
#[derive(Debug, Clone, Copy)]
pub struct RequestId([u8; 16]);

impl RequestId {
    /// The id of the `n`th request (its bits scrambled, as random ids look).
    pub fn new(n: u64) -> Self {
        let mut x = n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let mut digits = [0u8; 16];
        for d in digits.iter_mut().rev() {
            *d = b"0123456789abcdef"[(x & 0xf) as usize];
            x >>= 4;
        }
        RequestId(digits)
    }

    /// The 16 hex digits.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

/// The users the standard shape's requests come from, by request.
const USERS: [&str; 4] = ["cust-40721", "cust-18842", "cust-77310", "cust-52094"];

/// Logs one request's `lines` lines (at most 5) of the standard shape: each with
/// `request_id`, `method`, `path`, `status`, `latency_us` (read when the line is
/// written) and `user`, and a message of its own, from five callsites, as a handler
/// logs its steps.
#[inline]
pub fn log_standard(
    method: &str,
    path: &str,
    lines: u32,
    id: &RequestId,
    n: u64,
    latency_us: impl Fn() -> u64,
) {
    let request_id = id.as_str();
    let user = USERS[(n % USERS.len() as u64) as usize];
    let status = 200u16;
    macro_rules! line {
        ($msg:literal) => {{
            let latency_us = latency_us();
            tracing::info!(target: "http", request_id, method, path, status, latency_us, user, $msg);
        }};
    }
    if lines > 0 {
        line!("request received");
    }
    if lines > 1 {
        line!("session authenticated");
    }
    if lines > 2 {
        line!("orders loaded");
    }
    if lines > 3 {
        line!("response encoded");
    }
    if lines > 4 {
        line!("request completed");
    }
}

/// Logs the `n`th request's `lines` lines in `shape` ([`log_request`] or
/// [`log_standard`]; the standard shape's request id is made whether it logs or not, as
/// a service's is).
#[inline]
pub fn log_shaped(
    shape: Shape,
    method: &str,
    path: &str,
    lines: u32,
    n: u64,
    latency_us: impl Fn() -> u64,
) {
    match shape {
        Shape::Light => log_request(method, path, lines, latency_us),
        Shape::Standard => log_standard(method, path, lines, &RequestId::new(n), n, latency_us),
    }
}

/// The core the service (every thread of it) is pinned to.
pub const SERVICE_CPU: usize = 0;
/// The core the load generator is pinned to.
pub const LOAD_CPU: usize = 1;
/// The service's first stderr line: `LISTENING <port>`.
pub const LISTENING: &str = "LISTENING";
/// How long a service may take to say where it listens.
pub const START_TIMEOUT: Duration = Duration::from_secs(10);

/// Pins the calling thread (and every thread it starts afterwards) to `cpu`.
pub fn pin_to(cpu: usize) -> Result<(), String> {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set).map_err(|e| format!("pin to cpu {cpu}: {e}"))
}

/// Reads `child`'s stderr lines on a thread of their own, so the child never blocks on
/// it; they arrive on the returned channel.
pub fn stderr_lines(child: &mut Child) -> (mpsc::Receiver<String>, thread::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel::<String>();
    let stderr = child.stderr.take().expect("stderr piped");
    let reader = thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (rx, reader)
}

/// The port the service says it listens on, within [`START_TIMEOUT`]; the lines before
/// that go to `before`. `None` if it exits or says nothing in time.
pub fn listening_port(rx: &mpsc::Receiver<String>, before: &mut Vec<String>) -> Option<u16> {
    let until = Instant::now() + START_TIMEOUT;
    loop {
        let left = until.checked_duration_since(Instant::now())?;
        let line = rx.recv_timeout(left).ok()?;
        if let Some(port) = line.strip_prefix(LISTENING) {
            return port.trim().parse::<u16>().ok();
        }
        before.push(line);
    }
}

/// Tells the service to quit (its connections from the load generator are closed by then).
pub fn quit(addr: SocketAddr) -> std::io::Result<()> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.write_all(b"GET /quit HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")?;
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    Ok(())
}

/// Waits up to `timeout` for `child` to exit, then kills it; how it ended.
pub fn wait_bounded(child: &mut Child, timeout: Duration) -> String {
    let until = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return status.to_string(),
            Ok(None) if Instant::now() < until => thread::sleep(Duration::from_millis(10)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return format!("killed after {timeout:?}");
            }
        }
    }
}

/// The `p` quantile of sorted values (linear between neighbours); `None` if empty.
pub fn quantile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let at = p * (sorted.len() - 1) as f64;
    let (lo, hi) = (at.floor() as usize, at.ceil() as usize);
    Some(sorted[lo] + (sorted[hi] - sorted[lo]) * (at - lo as f64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_are_sixteen_hex_digits_and_differ_from_request_to_request() {
        let ids: Vec<String> = (0..1000)
            .map(|n| RequestId::new(n).as_str().to_owned())
            .collect();
        for id in &ids {
            assert_eq!(id.len(), 16, "{id}");
            assert!(
                id.bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
                "{id}"
            );
        }
        let distinct: std::collections::BTreeSet<&String> = ids.iter().collect();
        assert_eq!(distinct.len(), ids.len());
    }

    #[test]
    fn a_standard_request_logs_five_lines_of_six_fields_and_a_message_each() {
        use tracing_subscriber::prelude::*;
        let out = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let layer = logpolicy::FormatLayer::new(logpolicy::Format::Json, out.clone());
        let id = RequestId::new(7);
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
            log_standard("GET", "/api/orders", 5, &id, 7, || 1234);
        });
        let text = String::from_utf8(out.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let messages = [
            "request received",
            "session authenticated",
            "orders loaded",
            "response encoded",
            "request completed",
        ];
        assert_eq!(lines.len(), messages.len(), "{text}");
        for (line, msg) in lines.iter().zip(messages) {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            assert_eq!(v["msg"], msg, "{line}");
            assert_eq!(v["request_id"], id.as_str(), "{line}");
            assert_eq!(v["method"], "GET", "{line}");
            assert_eq!(v["path"], "/api/orders", "{line}");
            assert_eq!(v["status"], 200, "{line}");
            assert_eq!(v["latency_us"], 1234, "{line}");
            assert_eq!(v["user"], USERS[7 % USERS.len()], "{line}");
            // The README's figure: 208-216 bytes a line with ours (the timestamp's
            // width and the latency's digits vary).
            assert!(
                (200..=220).contains(&(line.len() + 1)),
                "{}: {line}",
                line.len()
            );
        }
        // Fewer lines: the first ones, in order.
        let out = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let layer = logpolicy::FormatLayer::new(logpolicy::Format::Json, out.clone());
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
            log_standard("GET", "/api/orders", 2, &id, 7, || 1234);
        });
        let text = String::from_utf8(out.lock().unwrap().clone()).unwrap();
        let got: Vec<String> = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["msg"].to_string())
            .collect();
        assert_eq!(got, ["\"request received\"", "\"session authenticated\""]);
    }

    #[test]
    fn shapes_are_named_and_parsed_back() {
        for shape in [Shape::Light, Shape::Standard] {
            assert_eq!(Shape::parse(shape.name()), Some(shape));
        }
        assert_eq!(Shape::parse("heavy"), None);
    }
}
