//! Addresses: a distinct 127.x.y.z per simulated pod, free ports, and a small HTTP/1.1
//! client for the admin endpoints and the shop.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::{Error, Result};

/// A loopback address no other pod of this process uses: `127.B.x.y` with `B` in
/// 100..=199 derived from the process id (test binaries and the demo do not collide
/// while they run side by side) and `x.y` counting up.
pub fn next_pod_ip() -> Ipv4Addr {
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let b = 100 + (std::process::id() % 100) as u8;
    let x = ((n / 250) % 256) as u8;
    let y = (n % 250 + 1) as u8;
    Ipv4Addr::new(127, b, x, y)
}

/// A port that is free on 127.0.0.1 right now.
pub fn free_port() -> Result<u16> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| Error(format!("finding a free port: {e}")))
}

/// An address that neither answers nor refuses, as a pod behind a NetworkPolicy that
/// drops, or on a node that is gone: a listener that accepts nothing, its
/// one-connection backlog filled, so that the kernel drops every further SYN and a
/// connect hangs until the client gives up.
#[derive(Debug)]
pub struct Unanswering {
    listener: tokio::net::TcpListener,
    _filler: tokio::net::TcpStream,
}

impl Unanswering {
    /// One on `ip` (a free port).
    pub async fn bind(ip: Ipv4Addr) -> Result<Unanswering> {
        let fail = |e: std::io::Error| Error(format!("an unanswering listener on {ip}: {e}"));
        let socket = tokio::net::TcpSocket::new_v4().map_err(fail)?;
        socket.bind(SocketAddr::new(ip.into(), 0)).map_err(fail)?;
        let listener = socket.listen(0).map_err(fail)?;
        let addr = listener.local_addr().map_err(fail)?;
        let filler = tokio::net::TcpStream::connect(addr).await.map_err(fail)?;
        Ok(Unanswering {
            listener,
            _filler: filler,
        })
    }

    /// Its address.
    pub fn addr(&self) -> Result<SocketAddr> {
        self.listener
            .local_addr()
            .map_err(|e| Error(format!("unanswering listener: {e}")))
    }
}

/// An HTTP reply.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// The body.
    pub body: String,
}

impl Reply {
    /// The body as JSON.
    pub fn json(&self) -> Result<serde_json::Value> {
        serde_json::from_str(&self.body)
            .map_err(|e| Error(format!("reply is not JSON ({e}): {}", self.body)))
    }
}

/// One request on a fresh connection (`connection: close`), 5 s timeouts.
pub fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Result<Reply> {
    let fail = |e: std::io::Error| Error(format!("{method} http://{addr}{path}: {e}"));
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(fail)?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(fail)?;
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).map_err(fail)?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).map_err(fail)?;
    let response = String::from_utf8_lossy(&response);
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| Error(format!("{method} http://{addr}{path}: not HTTP: {head}")))?;
    let chunked = head.lines().any(|l| {
        l.to_ascii_lowercase()
            .starts_with("transfer-encoding: chunked")
    });
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Ok(Reply { status, body })
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// `GET path`, expecting 200.
pub fn get_ok(addr: SocketAddr, path: &str) -> Result<Reply> {
    get_ok_with(addr, path, &[])
}

/// [`get_ok`] with these request headers (e.g. `authorization`).
pub fn get_ok_with(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Result<Reply> {
    let reply = http(addr, "GET", path, headers, "")?;
    if reply.status == 200 {
        Ok(reply)
    } else {
        Err(Error(format!(
            "GET http://{addr}{path}: {}: {}",
            reply.status, reply.body
        )))
    }
}
