//! An admin endpoint on loopback with a real filter and formatter behind it, a signing
//! key, and a raw HTTP/1.1 client (so tests can send exactly the bytes they mean).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use logpolicy::admin::{AdminConfig, AdminLimits, AdminServer, PodIdentity};
use logpolicy::wire::{self, SigningKey, TrustedKeys};
use logpolicy::{Format, FormatLayer, LineSink, PolicyFilter, PolicyHandle};
use tracing_subscriber::prelude::*;

pub const POD_UID: &str = "0b1c6a2e-uid-of-this-pod";

/// Counts and keeps the lines written.
#[derive(Default)]
pub struct Lines {
    pub count: AtomicU64,
    pub kept: Mutex<Vec<String>>,
    pub keep: std::sync::atomic::AtomicBool,
}

impl LineSink for Lines {
    fn write_line(&self, _: &tracing_core::Level, _: bool, line: &[u8]) {
        self.count.fetch_add(1, Ordering::Relaxed);
        if self.keep.load(Ordering::Relaxed) {
            self.kept
                .lock()
                .unwrap()
                .push(String::from_utf8_lossy(line).into_owned());
        }
    }
}

pub struct Fixture {
    pub key: SigningKey,
    pub admin: AdminServer,
    pub handle: PolicyHandle,
    pub dispatch: tracing::Dispatch,
    pub lines: Arc<Lines>,
}

/// An endpoint on a free loopback port for the pod `shop/web-1` ([`POD_UID`]), trusting
/// `key`.
pub fn pod_config(key: &SigningKey) -> AdminConfig {
    pod_config_on("127.0.0.1:0".parse().unwrap(), key)
}

/// The same endpoint listening on `addr`.
pub fn pod_config_on(addr: SocketAddr, key: &SigningKey) -> AdminConfig {
    AdminConfig::new(addr, TrustedKeys::new([key.verifying_key()])).pod(PodIdentity {
        uid: Some(POD_UID.into()),
        name: Some("web-1".into()),
        namespace: Some("shop".into()),
    })
}

/// The sources of `handle`'s layers, in the policy's order (`env` is the baseline).
pub fn sources(handle: &PolicyHandle) -> Vec<String> {
    handle
        .policy()
        .layers()
        .iter()
        .map(|l| l.source().to_owned())
        .collect()
}

impl Fixture {
    pub fn new(directives: &str) -> Self {
        Self::with_limits(directives, AdminLimits::default())
    }

    pub fn with_limits(directives: &str, limits: AdminLimits) -> Self {
        let key = SigningKey::from_bytes(&[42; 32]);
        let filter = PolicyFilter::from_directives(directives).unwrap();
        let lines = Arc::new(Lines::default());
        lines.keep.store(true, Ordering::Relaxed);
        let dispatch = tracing::Dispatch::new(
            tracing_subscriber::registry()
                .with(filter.clone())
                .with(FormatLayer::new(Format::Json, lines.clone()).with_policy(&filter)),
        );
        let config = pod_config(&key).limits(limits);
        let admin = AdminServer::start(config, filter.handle(), None).unwrap();
        Fixture {
            key,
            admin,
            handle: filter.handle(),
            dispatch,
            lines,
        }
    }

    /// Makes this fixture's subscriber the global default, as in a service. (With only a
    /// scoped dispatcher in the process, `tracing-core` rebuilds interest against the
    /// default of the thread that changed the policy, here the endpoint's, which has none.)
    pub fn install_global(&self) {
        tracing::dispatcher::set_global_default(self.dispatch.clone()).unwrap();
    }

    pub fn addr(&self) -> SocketAddr {
        self.admin.local_addr()
    }

    /// A document body for this pod.
    pub fn doc(&self, version: u64, layers: &str) -> String {
        doc_for(POD_UID, version, layers)
    }

    /// Signs `body` with the trusted key and sends it.
    pub fn signed(&self, method: &str, body: &str) -> Reply {
        let header = wire::sign(body.as_bytes(), &self.key);
        self.send(
            method,
            "/logpolicy",
            &[(wire::SIGNATURE_HEADER, &header)],
            body,
        )
    }

    pub fn send(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
        send(self.addr(), method, path, headers, body.as_bytes())
    }

    pub fn get(&self, path: &str) -> Reply {
        self.send("GET", path, &[], "")
    }

    pub fn policy_json(&self) -> serde_json::Value {
        serde_json::from_str(&self.get("/logpolicy").body).unwrap()
    }
}

/// A document body for the pod `uid`, issued now. A layer without `expiresAt` is given
/// one an hour away, as the operator gives a standing policy one (a pod refuses a layer
/// that never ends); `layers` that are not a JSON array are sent as they are.
pub fn doc_for(uid: &str, version: u64, layers: &str) -> String {
    let now = std::time::SystemTime::now();
    let issued = logpolicy::clock::format_rfc3339(now);
    let in_an_hour = logpolicy::clock::format_rfc3339(now + std::time::Duration::from_secs(3600));
    let layers = match serde_json::from_str::<serde_json::Value>(layers) {
        Ok(serde_json::Value::Array(mut all)) => {
            for layer in &mut all {
                if let Some(l) = layer.as_object_mut() {
                    l.entry("expiresAt").or_insert(in_an_hour.clone().into());
                }
            }
            serde_json::Value::Array(all).to_string()
        }
        _ => layers.to_owned(),
    };
    format!(
        r#"{{"pod":{{"namespace":"shop","name":"web-1","uid":"{uid}"}},"version":{version},"issuedAt":"{issued}","layers":{layers}}}"#
    )
}

#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }

    /// Asserts the status and the error code, and returns the reason.
    pub fn refused(&self, status: u16, code: &str) -> String {
        assert_eq!(self.status, status, "{self:?}");
        let v = self.json();
        assert_eq!(v["error"], code, "{self:?}");
        v["reason"].as_str().unwrap().to_owned()
    }
}

pub fn request_bytes(method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nhost: pod\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    let mut bytes = req.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

pub fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    send_raw(addr, &request_bytes(method, path, headers, body))
}

pub fn send_raw(addr: SocketAddr, request: &[u8]) -> Reply {
    let mut conn = TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    conn.set_nodelay(true).unwrap();
    // The server may answer (and close) before it has read everything: that is fine.
    let _ = conn.write_all(request);
    read_reply(&mut conn)
}

pub fn read_reply(conn: &mut TcpStream) -> Reply {
    let mut raw = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        match conn.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(e) if !raw.is_empty() && e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!(
                "reading the reply: {e} after {:?}",
                String::from_utf8_lossy(&raw)
            ),
        }
    }
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {text:?}"));
    Reply {
        status,
        head: head.to_owned(),
        body: body.to_owned(),
    }
}

/// Median and 99th percentile.
pub fn percentiles(mut v: Vec<Duration>) -> (Duration, Duration) {
    v.sort();
    let at = |q: f64| v[((v.len() as f64 - 1.0) * q).round() as usize];
    (at(0.5), at(0.99))
}

/// A connection to `addr` from the loopback address `from` (e.g. 127.0.0.7): another
/// peer, as far as the endpoint can tell.
pub fn connect_from(from: std::net::Ipv4Addr, addr: SocketAddr) -> TcpStream {
    use rustix::net::{bind, connect, socket, AddressFamily, SocketType};
    let fd = socket(AddressFamily::INET, SocketType::STREAM, None).unwrap();
    bind(&fd, &SocketAddr::new(from.into(), 0)).unwrap();
    connect(&fd, &addr).unwrap();
    let conn = TcpStream::from(fd);
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    conn
}

/// Whether the server closed `conn` (reads end of stream or a reset) within `within`.
pub fn closed_by_server(conn: &mut TcpStream, within: Duration) -> bool {
    conn.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 256];
    loop {
        match conn.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

/// `body` signed with `key`, sent as `PUT /logpolicy` to `addr`.
pub fn put_signed(addr: SocketAddr, key: &wire::SigningKey, body: &str) -> Reply {
    let sig = wire::sign(body.as_bytes(), key);
    send(
        addr,
        "PUT",
        "/logpolicy",
        &[(wire::SIGNATURE_HEADER, &sig)],
        body.as_bytes(),
    )
}
