//! Slow clients (trickling headers, or a body) neither block a good request nor keep
//! their connection past the timeouts.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin_fixture;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use admin_fixture::Fixture;
use logpolicy::admin::AdminLimits;

/// Sends `prefix` at once, then one byte every 100 ms until the server closes; returns
/// how long that took.
fn trickle(mut conn: TcpStream, prefix: &[u8], bytes: Vec<u8>) -> Duration {
    let start = Instant::now();
    conn.write_all(prefix).unwrap();
    conn.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut buf = [0u8; 1024];
    for b in bytes.iter().cycle() {
        if conn.write_all(&[*b]).is_err() {
            break;
        }
        match conn.read(&mut buf) {
            Ok(_) => break, // closed (0) or answered (e.g. 408) then closed
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => break,
        }
        if start.elapsed() > Duration::from_secs(10) {
            break;
        }
    }
    start.elapsed()
}

#[test]
fn a_slow_client_cannot_hold_the_endpoint() {
    let limits = AdminLimits {
        header_timeout: Duration::from_millis(500),
        request_timeout: Duration::from_millis(1500),
        ..AdminLimits::default()
    };
    let f = Fixture::with_limits("info", limits);
    let addr = f.addr();
    let mut slow = Vec::new();
    for i in 0..8 {
        let conn = TcpStream::connect(addr).unwrap();
        let (prefix, bytes): (&[u8], Vec<u8>) = if i % 2 == 0 {
            // Headers that never end.
            (
                b"PUT /logpolicy HTTP/1.1\r\n",
                b"x-a: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                    .to_vec(),
            )
        } else {
            // Complete headers, then a body that trickles.
            (
                b"PUT /logpolicy HTTP/1.1\r\nhost: pod\r\ncontent-length: 60000\r\n\r\n",
                b"{".to_vec(),
            )
        };
        slow.push(std::thread::spawn(move || {
            (i, trickle(conn, prefix, bytes))
        }));
    }
    std::thread::sleep(Duration::from_millis(200));
    // While they are held, good requests are answered at once.
    for _ in 0..5 {
        let start = Instant::now();
        let r = f.get("/logpolicy");
        assert_eq!(r.status, 200);
        assert!(
            start.elapsed() < Duration::from_millis(250),
            "{:?}",
            start.elapsed()
        );
    }
    let push = f.signed(
        "PUT",
        &f.doc(1, r#"[{"source":"ops/a","defaultLevel":"debug"}]"#),
    );
    assert_eq!(push.status, 200);
    for t in slow {
        let (i, held) = t.join().unwrap();
        let limit = if i % 2 == 0 {
            Duration::from_millis(500)
        } else {
            Duration::from_millis(1500)
        };
        assert!(
            held >= limit - Duration::from_millis(150),
            "slow client {i} cut early: {held:?}"
        );
        assert!(
            held < limit + Duration::from_millis(1000),
            "slow client {i} held {held:?}"
        );
    }
}
