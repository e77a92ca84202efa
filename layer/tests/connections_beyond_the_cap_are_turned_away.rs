//! Beyond the connection cap a connection gets 503 at once and is closed; the slots
//! free up when the held connections time out.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin_fixture;

use std::net::TcpStream;
use std::time::{Duration, Instant};

use admin_fixture::{read_reply, Fixture};
use logpolicy::admin::AdminLimits;

#[test]
fn connections_beyond_the_cap_are_turned_away() {
    let limits = AdminLimits {
        max_connections: 3,
        header_timeout: Duration::from_millis(600),
        ..AdminLimits::default()
    };
    let f = Fixture::with_limits("info", limits);
    let idle: Vec<TcpStream> = (0..3)
        .map(|_| TcpStream::connect(f.addr()).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    let mut extra = TcpStream::connect(f.addr()).unwrap();
    extra
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let r = read_reply(&mut extra);
    assert!(r.refused(503, "busy").contains("too many connections"));

    let start = Instant::now();
    loop {
        let r = admin_fixture::send(f.addr(), "GET", "/healthz", &[], b"");
        if r.status == 200 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "slots never freed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(idle);
    let metrics = f.get("/metrics").body;
    assert!(
        metrics.lines().any(
            |l| l.starts_with("logpolicy_admin_requests_total{status=\"503\"}")
                && !l.ends_with(" 0")
        ),
        "{metrics}"
    );
}
