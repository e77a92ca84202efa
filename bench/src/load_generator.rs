//! A small keep-alive HTTP/1.1 load generator: `GET` requests over raw TCP connections,
//! optionally pipelined, parsing just enough of each response (the status line and
//! `Content-Length`) to find where the next one starts.
//!
//! It runs on the calling thread, polling non-blocking sockets without ever sleeping, so
//! pinning that thread pins the whole generator. Every connection keeps `pipeline`
//! requests in flight; responses that complete inside the measurement window (after the warm-up)
//! are counted and their latency recorded.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::Histogram;

/// What to run.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    /// The server, a loopback address.
    pub addr: SocketAddr,
    /// The path requested.
    pub path: String,
    /// Concurrent keep-alive connections.
    pub connections: usize,
    /// Requests in flight per connection (1: no pipelining).
    pub pipeline: usize,
    /// Requests before this are not counted.
    pub warmup: Duration,
    /// The measurement window, after the warm-up.
    pub measure: Duration,
    /// A connection that receives nothing for this long gives up.
    pub io_timeout: Duration,
}

/// What one run measured.
#[derive(Clone, Default)]
pub struct LoadReport {
    /// Responses `200` completed inside the measurement window.
    pub ok_in_window: u64,
    /// Every response received, warm-up and drain included.
    pub responses_total: u64,
    /// Responses with another status (inside or outside the window).
    pub non_200: u64,
    /// Responses whose body was not the expected length.
    pub bad_body: u64,
    /// Connections that failed (connect, IO error, timeout, unparsable response).
    pub connection_errors: u64,
    /// The first connection error, if any.
    pub first_error: Option<String>,
    /// The measurement window's actual length, in seconds.
    pub window_secs: f64,
    /// Latency (request written to response parsed) of the window's responses.
    pub latency: Histogram,
}

impl LoadReport {
    /// `200` responses per second inside the window.
    pub fn requests_per_sec(&self) -> f64 {
        if self.window_secs > 0.0 {
            self.ok_in_window as f64 / self.window_secs
        } else {
            0.0
        }
    }
}

/// The request every connection sends, pipelined as is.
fn request_bytes(path: &str, addr: SocketAddr) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: logpolicy-bench\r\n\r\n")
        .into_bytes()
}

/// Runs the load on the calling thread; returns once every connection has drained the
/// responses it was waiting for (bounded by `io_timeout`).
///
/// The connections are non-blocking sockets polled in a loop that never sleeps: the
/// generator has a core of its own, and a generator that sleeps in `epoll_wait` has to be
/// woken by the service's core for every batch of responses (on loopback the service's
/// core runs the receive path of both ends). On a VM that wake-up is an inter-processor
/// interrupt, and its cost, charged to the service, grows as the service gets slower (the
/// generator idles more), which would be counted as the logger's cost.
pub fn run(config: &LoadConfig, expected_body_len: usize) -> std::io::Result<LoadReport> {
    let start = Instant::now();
    let window = Window {
        from: start + config.warmup,
        until: start + config.warmup + config.measure,
    };
    let request = request_bytes(&config.path, config.addr);
    let mut report = LoadReport {
        window_secs: config.measure.as_secs_f64(),
        ..LoadReport::default()
    };
    let mut connections = Vec::with_capacity(config.connections);
    for _ in 0..config.connections {
        match Connection::open(config.addr, config.io_timeout) {
            Ok(c) => connections.push(c),
            Err(e) => {
                report.connection_errors += 1;
                report.first_error.get_or_insert(e.to_string());
            }
        }
    }
    let how = Requests {
        request: &request,
        pipeline: config.pipeline.max(1),
        timeout: config.io_timeout,
        expected_body_len,
    };
    let mut open = connections.len();
    while open > 0 {
        open = 0;
        let now = Instant::now();
        let send = now < window.until;
        for c in connections.iter_mut().filter(|c| !c.done) {
            c.step_or_fail(&how, now, send, window);
            c.done |= !send && c.in_flight.is_empty();
            if !c.done {
                open += 1;
            }
        }
    }
    for c in connections {
        report.add(c.stats);
    }
    Ok(report)
}

impl LoadReport {
    fn add(&mut self, stats: ConnectionStats) {
        self.ok_in_window += stats.ok_in_window;
        self.responses_total += stats.responses;
        self.non_200 += stats.non_200;
        self.bad_body += stats.bad_body;
        self.latency.merge(&stats.latency);
        if let Some(e) = stats.error {
            self.connection_errors += 1;
            self.first_error.get_or_insert(e);
        }
    }
}

/// Two services loaded in turn, for a paired comparison.
#[derive(Debug, Clone)]
pub struct AlternatingConfig {
    /// The two services (loopback addresses).
    pub addrs: [SocketAddr; 2],
    /// The path requested.
    pub path: String,
    /// Keep-alive connections to each service.
    pub connections: usize,
    /// Requests in flight per connection while its service is loaded.
    pub pipeline: usize,
    /// Both services are loaded in turn for this long before slices are counted.
    pub warmup: Duration,
    /// How long each service is loaded at a time.
    pub slice: Duration,
    /// Responses in the first `settle` of a slice are not counted: the other service is
    /// still answering its last requests and its logger writing its last lines.
    pub settle: Duration,
    /// Pairs of slices measured.
    pub pairs: usize,
    /// A connection waiting for a response this long gives up.
    pub io_timeout: Duration,
}

/// One counted slice: which service was loaded and what it answered.
#[derive(Debug, Clone, Copy)]
pub struct Slice {
    /// 0 or 1: the index in [`AlternatingConfig::addrs`].
    pub service: usize,
    /// `200` responses in the counted part of the slice.
    pub ok: u64,
    /// The counted part's length, in seconds.
    pub secs: f64,
}

impl Slice {
    /// `200` responses per second in the counted part.
    pub fn requests_per_sec(&self) -> f64 {
        self.ok as f64 / self.secs
    }
}

/// What an alternating run measured: the slices in order (pairs in the order A B, B A,
/// A B, ..., so each pair is adjacent in time and a steady drift favours neither), and
/// per service the totals over every counted slice.
pub struct AlternatingReport {
    /// Every counted slice, two per pair.
    pub slices: Vec<Slice>,
    /// Per service, over its counted slices (`window_secs` is their total length).
    pub services: [LoadReport; 2],
}

/// Loads two services in turn, one slice at a time, on the calling thread: while one
/// is loaded the other only answers what it was already asked. Comparing adjacent
/// slices cancels the drift in the machine's speed (on a VM, 10% and more within a
/// minute) that separate runs seconds apart cannot.
pub fn run_alternating(
    config: &AlternatingConfig,
    expected_body_len: usize,
) -> std::io::Result<AlternatingReport> {
    let mut sets: [Vec<Connection>; 2] = [Vec::new(), Vec::new()];
    let mut requests: [Vec<u8>; 2] = [Vec::new(), Vec::new()];
    for (i, addr) in config.addrs.iter().enumerate() {
        requests[i] = request_bytes(&config.path, *addr);
        for _ in 0..config.connections {
            sets[i].push(Connection::open(*addr, config.io_timeout)?);
        }
    }
    let how = requests.each_ref().map(|request| Requests {
        request,
        pipeline: config.pipeline.max(1),
        timeout: config.io_timeout,
        expected_body_len,
    });
    let warmup_slices = (config.warmup.as_nanos() / config.slice.as_nanos().max(1)) as usize;
    // Warm-up slices alternate A B; counted pairs go A B, B A, A B, ...
    let mut schedule: Vec<(usize, bool)> = (0..warmup_slices).map(|i| (i % 2, false)).collect();
    for p in 0..config.pairs {
        let first = p % 2;
        schedule.push((first, true));
        schedule.push((1 - first, true));
    }
    let mut report = AlternatingReport {
        slices: Vec::new(),
        services: [LoadReport::default(), LoadReport::default()],
    };
    let never = Window {
        from: Instant::now(),
        until: Instant::now(),
    };
    for (service, counted) in schedule {
        let start = Instant::now();
        let end = start + config.slice;
        let window = Window {
            from: start + config.settle,
            until: end,
        };
        let before: u64 = sets[service].iter().map(|c| c.stats.ok_in_window).sum();
        loop {
            let now = Instant::now();
            if now >= end {
                break;
            }
            for (i, set) in sets.iter_mut().enumerate() {
                let active = i == service;
                let w = if active && counted { window } else { never };
                for c in set.iter_mut().filter(|c| !c.done) {
                    c.step_or_fail(&how[i], now, active, w);
                    if c.done {
                        return Err(std::io::Error::other(format!(
                            "service {i}: {}",
                            c.stats.error.clone().unwrap_or_default()
                        )));
                    }
                }
            }
        }
        if counted {
            let after: u64 = sets[service].iter().map(|c| c.stats.ok_in_window).sum();
            report.slices.push(Slice {
                service,
                ok: after - before,
                secs: (config.slice - config.settle).as_secs_f64(),
            });
        }
    }
    // Drain what is still in flight, counting nothing.
    let drain_until = Instant::now() + config.io_timeout;
    while sets
        .iter()
        .flatten()
        .any(|c| !c.done && !c.in_flight.is_empty())
        && Instant::now() < drain_until
    {
        let now = Instant::now();
        for (i, set) in sets.iter_mut().enumerate() {
            for c in set.iter_mut().filter(|c| !c.done) {
                c.step_or_fail(&how[i], now, false, never);
            }
        }
    }
    for (i, set) in sets.into_iter().enumerate() {
        for c in set {
            report.services[i].add(c.stats);
        }
        report.services[i].window_secs = report
            .slices
            .iter()
            .filter(|s| s.service == i)
            .map(|s| s.secs)
            .sum();
    }
    Ok(report)
}

#[derive(Debug, Clone, Copy)]
struct Window {
    from: Instant,
    until: Instant,
}

#[derive(Default)]
struct ConnectionStats {
    ok_in_window: u64,
    responses: u64,
    non_200: u64,
    bad_body: u64,
    latency: Histogram,
    error: Option<String>,
}

/// What every connection to one service sends and expects.
#[derive(Clone, Copy)]
struct Requests<'a> {
    request: &'a [u8],
    pipeline: usize,
    timeout: Duration,
    expected_body_len: usize,
}

/// One keep-alive connection: requests written but not yet answered, bytes not yet
/// written, bytes read but not yet parsed.
struct Connection {
    stream: TcpStream,
    in_flight: VecDeque<Instant>,
    out: Vec<u8>,
    written: usize,
    buf: Vec<u8>,
    filled: usize,
    last_progress: Instant,
    done: bool,
    stats: ConnectionStats,
}

impl Connection {
    fn open(addr: SocketAddr, timeout: Duration) -> std::io::Result<Self> {
        let stream = TcpStream::connect_timeout(&addr, timeout)?;
        stream.set_nodelay(true)?;
        stream.set_nonblocking(true)?;
        Ok(Connection {
            stream,
            in_flight: VecDeque::new(),
            out: Vec::new(),
            written: 0,
            buf: vec![0u8; 64 * 1024],
            filled: 0,
            last_progress: Instant::now(),
            done: false,
            stats: ConnectionStats::default(),
        })
    }

    /// [`step`](Self::step); an error marks the connection done and is kept in its stats.
    fn step_or_fail(&mut self, how: &Requests<'_>, now: Instant, send: bool, window: Window) {
        if let Err(e) = self.step(how, now, send, window) {
            self.done = true;
            self.stats.error = Some(e.to_string());
        }
    }

    /// Tops up the pipeline (if `send`), writes what it can and parses what has arrived,
    /// counting the responses that complete inside `window`. Never blocks.
    fn step(
        &mut self,
        how: &Requests<'_>,
        now: Instant,
        send: bool,
        window: Window,
    ) -> std::io::Result<()> {
        let Requests {
            request,
            pipeline,
            timeout,
            expected_body_len,
        } = *how;
        if send {
            while self.in_flight.len() < pipeline {
                self.out.extend_from_slice(request);
                self.in_flight.push_back(now);
            }
        }
        while self.written < self.out.len() {
            match self.stream.write(&self.out[self.written..]) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => self.written += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.written == self.out.len() {
            self.out.clear();
            self.written = 0;
        }
        if self.in_flight.is_empty() {
            self.last_progress = now;
            return Ok(());
        }
        if self.filled == self.buf.len() {
            self.buf.resize(self.buf.len() * 2, 0);
        }
        let n = match self.stream.read(&mut self.buf[self.filled..]) {
            Ok(0) => {
                return Err(std::io::Error::new(
                    ErrorKind::UnexpectedEof,
                    "server closed the connection",
                ))
            }
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
                if now.duration_since(self.last_progress) > timeout {
                    return Err(std::io::Error::new(ErrorKind::TimedOut, "read timed out"));
                }
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        self.last_progress = now;
        self.filled += n;
        let mut pos = 0;
        while let Some(parsed) = parse_response(&self.buf[pos..self.filled])? {
            pos += parsed.len;
            let sent = self.in_flight.pop_front().ok_or_else(|| {
                std::io::Error::new(ErrorKind::InvalidData, "unsolicited response")
            })?;
            let done = Instant::now();
            let stats = &mut self.stats;
            stats.responses += 1;
            if parsed.status != 200 {
                stats.non_200 += 1;
            } else if parsed.body_len != expected_body_len {
                stats.bad_body += 1;
            } else if done >= window.from && done < window.until {
                stats.ok_in_window += 1;
                stats
                    .latency
                    .record(u64::try_from((done - sent).as_nanos()).unwrap_or(u64::MAX));
            }
        }
        self.buf.copy_within(pos..self.filled, 0);
        self.filled -= pos;
        Ok(())
    }
}

/// One complete response at the start of a buffer.
#[derive(Debug, PartialEq, Eq)]
pub struct Parsed {
    /// The status code.
    pub status: u16,
    /// The body's length (`Content-Length`).
    pub body_len: usize,
    /// The whole response's length: head and body.
    pub len: usize,
}

/// Parses the response at the start of `buf`: `Ok(None)` while it is incomplete. Only
/// `Content-Length` bodies are supported (what the benchmarked service sends).
pub fn parse_response(buf: &[u8]) -> std::io::Result<Option<Parsed>> {
    let invalid =
        |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned());
    let Some(head_end) = memchr::memmem::find(buf, b"\r\n\r\n") else {
        if buf.len() > 16 * 1024 {
            return Err(invalid("response head longer than 16 KiB"));
        }
        return Ok(None);
    };
    let head = &buf[..head_end];
    let mut lines = head.split(|&b| b == b'\n');
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .strip_prefix(b"HTTP/1.1 ")
        .or_else(|| status_line.strip_prefix(b"HTTP/1.0 "))
        .and_then(|rest| rest.get(..3))
        .and_then(|code| std::str::from_utf8(code).ok())
        .and_then(|code| code.parse::<u16>().ok())
        .ok_or_else(|| invalid("bad status line"))?;
    let mut body_len = None;
    for line in lines {
        let Some(colon) = memchr::memchr(b':', line) else {
            continue;
        };
        if line[..colon].eq_ignore_ascii_case(b"content-length") {
            body_len = std::str::from_utf8(&line[colon + 1..])
                .ok()
                .and_then(|v| v.trim().parse::<usize>().ok());
            if body_len.is_none() {
                return Err(invalid("bad Content-Length"));
            }
        } else if line[..colon].eq_ignore_ascii_case(b"transfer-encoding") {
            return Err(invalid("chunked responses are not supported"));
        }
    }
    let body_len = body_len.ok_or_else(|| invalid("no Content-Length"))?;
    let len = head_end + 4 + body_len;
    if buf.len() < len {
        return Ok(None);
    }
    Ok(Some(Parsed {
        status,
        body_len,
        len,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pipelined_responses_and_waits_for_whole_bodies() {
        let one = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 9\r\ndate: Thu, 01 Jan 2026 00:00:00 GMT\r\n\r\n{\"ok\":1}\n";
        let mut two = one.to_vec();
        two.extend_from_slice(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n");
        let first = parse_response(&two).unwrap().unwrap();
        assert_eq!(
            first,
            Parsed {
                status: 200,
                body_len: 9,
                len: one.len()
            }
        );
        let second = parse_response(&two[first.len..]).unwrap().unwrap();
        assert_eq!((second.status, second.body_len), (503, 0));
        assert_eq!(first.len + second.len, two.len());
        for cut in 0..one.len() {
            assert_eq!(parse_response(&one[..cut]).unwrap(), None, "{cut}");
        }
    }

    #[test]
    fn rejects_what_it_cannot_frame() {
        assert!(parse_response(b"HTTP/1.1 200 OK\r\n\r\n").is_err());
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n").is_err());
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n").is_err());
        assert!(parse_response(b"SSH-2.0\r\n\r\n").is_err());
    }
}
