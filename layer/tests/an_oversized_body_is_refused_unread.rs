//! A body over 64 KiB gets 413: by its Content-Length without being read, or while it is
//! read when it comes chunked.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin_fixture;

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use admin_fixture::{read_reply, Fixture};
use logpolicy::wire;

#[test]
fn an_oversized_body_is_refused_unread() {
    let f = Fixture::new("info");

    // Announced as 10 MiB, never sent: the answer comes at once.
    let mut conn = TcpStream::connect(f.addr()).unwrap();
    conn.write_all(b"PUT /logpolicy HTTP/1.1\r\nhost: pod\r\ncontent-length: 10485760\r\nx-logpolicy-signature: ed25519=0011223344556677:AAAA\r\n\r\n{\"pod\":")
        .unwrap();
    let started = Instant::now();
    let r = read_reply(&mut conn);
    assert!(r.refused(413, "body_too_large").contains("65536"));
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );

    // Sent whole, 100 KiB, properly signed.
    let padding = " ".repeat(100 * 1024);
    let body = format!("{}{padding}", f.doc(1, "[]"));
    let r = f.signed("PUT", &body);
    r.refused(413, "body_too_large");

    // Chunked, no length announced: cut once past the limit.
    let mut conn = TcpStream::connect(f.addr()).unwrap();
    let header = wire::sign(body.as_bytes(), &f.key);
    let mut req = format!("PUT /logpolicy HTTP/1.1\r\nhost: pod\r\ntransfer-encoding: chunked\r\n{}: {header}\r\n\r\n", wire::SIGNATURE_HEADER).into_bytes();
    for chunk in body.as_bytes().chunks(8192) {
        req.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        req.extend_from_slice(chunk);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"0\r\n\r\n");
    let _ = conn.write_all(&req);
    read_reply(&mut conn).refused(413, "body_too_large");

    assert_eq!(f.handle.generation(), 0);
    // Just under the limit is fine.
    let fits = format!("{}{}", f.doc(1, "[]"), " ".repeat(60 * 1024));
    assert_eq!(f.signed("PUT", &fits).status, 200);
}
