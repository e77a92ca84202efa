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
