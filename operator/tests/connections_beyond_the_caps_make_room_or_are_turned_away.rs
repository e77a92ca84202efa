//! The operator's HTTP server holds its connections within caps, as the pod's admin
//! endpoint does: one address cannot hold more than its own cap (503, "from this
//! address"); when the slots run out, a new connection takes the place of the oldest
//! idle one; connections in the middle of a request are never cut for it, and when
//! every slot is such, a new one is answered 503; a connection that sends no head is
//! closed after the header timeout, freeing its slot.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure is a test failure

mod fixtures;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use logpolicy_operator::access::TokenAccess;
use logpolicy_operator::http::{serve_on, Endpoints, ServerLimits};
use logpolicy_operator::metrics::Metrics;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::watch;

/// Serves endpoints (with token access through `client`, when given) within `limits`
/// on a free port of 127.0.0.1.
async fn server(limits: ServerLimits, client: Option<kube::Client>) -> SocketAddr {
    let (source, views) = logpolicy_operator::controller::pod_views();
    source.answer_with(Vec::new());
    let mut endpoints = Endpoints::new(Arc::default(), Metrics::default().registry(), views);
    if let Some(client) = client {
        let access = Arc::new(TokenAccess::default());
        access.set_client(client);
        endpoints = endpoints.token_access(access);
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop_tx, stop) = watch::channel(false);
    tokio::spawn(async move {
        serve_on(listener, endpoints, limits, None, stop).await;
        drop(stop_tx);
    });
    addr
}

/// A connection to `addr` from the loopback address `from`.
async fn connect_from(from: [u8; 4], addr: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket
        .bind(SocketAddr::from((Ipv4Addr::from(from), 0)))
        .unwrap();
    socket.connect(addr).await.unwrap()
}

/// What the server sends on `conn` until it closes it (at most 10 s).
async fn read_all(conn: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), conn.read_to_end(&mut out));
    match read.await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        other => panic!("no answer: {other:?}"),
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `GET path` on a new connection from `from`: the whole answer.
async fn get(from: [u8; 4], addr: SocketAddr, path: &str, token: Option<&str>) -> String {
    let mut conn = connect_from(from, addr).await;
    let auth = token.map_or(String::new(), |t| format!("authorization: Bearer {t}\r\n"));
    let head = format!("GET {path} HTTP/1.1\r\nhost: x\r\n{auth}connection: close\r\n\r\n");
    conn.write_all(head.as_bytes()).await.unwrap();
    read_all(&mut conn).await
}

/// Whether the server closed `conn` within `within`.
async fn closed(conn: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 64];
    match tokio::time::timeout(within, conn.read(&mut buf)).await {
        Ok(Ok(0)) => true,
        Ok(Err(e)) => e.kind() == std::io::ErrorKind::ConnectionReset,
        Ok(Ok(_)) | Err(_) => false,
    }
}

#[tokio::test]
async fn one_address_gets_its_own_cap_and_no_more() {
    let limits = ServerLimits {
        max_connections: 10,
        max_connections_per_peer: 3,
        header_timeout: Duration::from_millis(600),
        ..ServerLimits::default()
    };
    let addr = server(limits, None).await;
    let a = [127, 0, 0, 2];
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(connect_from(a, addr).await);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut extra = connect_from(a, addr).await;
    let answer = read_all(&mut extra).await;
    assert!(
        answer.starts_with("HTTP/1.1 503")
            && answer.ends_with("too many connections from this address\n"),
        "{answer}"
    );
    // Another address is served meanwhile.
    let answer = get([127, 0, 0, 3], addr, "/healthz", None).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    // The held connections send no head: closed after the header timeout, and the
    // address is served again.
    for conn in &mut held {
        assert!(
            closed(conn, Duration::from_secs(5)).await,
            "a held connection stayed open"
        );
    }
    let answer = get(a, addr, "/healthz", None).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[tokio::test]
async fn a_new_connection_takes_the_place_of_the_oldest_idle_one() {
    let limits = ServerLimits {
        max_connections: 4,
        header_timeout: Duration::from_secs(30),
        ..ServerLimits::default()
    };
    let addr = server(limits, None).await;
    let mut held = Vec::new();
    for i in 2..6 {
        held.push(connect_from([127, 0, 0, i], addr).await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let answer = get([127, 0, 0, 9], addr, "/healthz", None).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // The oldest made room; the others are still open.
    assert!(closed(&mut held[0], Duration::from_secs(2)).await);
    for conn in &mut held[1..] {
        assert!(!closed(conn, Duration::from_millis(200)).await);
    }
}

#[tokio::test]
async fn connections_in_a_request_are_never_cut_and_the_next_gets_503() {
    let limits = ServerLimits {
        max_connections: 4,
        ..ServerLimits::default()
    };
    // An API server that takes every review and never answers: each /metrics request
    // with a new token stays in its request (up to the review timeout, 5 s).
    let (client, api) = fixtures::client();
    let addr = server(limits, Some(client)).await;
    let mut in_request = Vec::new();
    for i in 0..4u8 {
        let mut conn = connect_from([127, 0, 1, i + 1], addr).await;
        let head = format!(
            "GET /metrics HTTP/1.1\r\nhost: x\r\nauthorization: Bearer t{i}\r\nconnection: close\r\n\r\n"
        );
        conn.write_all(head.as_bytes()).await.unwrap();
        in_request.push(conn);
    }
    let held = tokio::spawn(async move {
        let mut api = api;
        let mut held = Vec::new();
        for _ in 0..4 {
            held.push(api.next_call().await);
        }
        (api, held)
    });
    let (_api, _held) = held.await.unwrap();
    let answer = get([127, 0, 0, 9], addr, "/healthz", None).await;
    assert!(
        answer.starts_with("HTTP/1.1 503")
            && answer.ends_with("too many connections to the operator's endpoints\n"),
        "{answer}"
    );
    for conn in &mut in_request {
        assert!(!closed(conn, Duration::from_millis(100)).await);
    }
    // Their reviews time out: each gets its 503 from the token check, not a cut.
    for conn in &mut in_request {
        let answer = read_all(conn).await;
        assert!(answer.contains("did not answer within 5 s"), "{answer}");
    }
}
