//! When the slots run out, a new connection takes the place of the oldest one that is
//! still sending its request; one address cannot hold more than its own cap (503, "from
//! this address"); held connections free their slots by the header timeout; evictions
//! and connections that never made a request are counted.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin_fixture;

use std::io::Write;
use std::net::{Ipv4Addr, TcpStream};
use std::time::{Duration, Instant};

use admin_fixture::{closed_by_server, connect_from, read_reply, Fixture};
use logpolicy::admin::AdminLimits;

fn metric(f: &Fixture, status: u16) -> u64 {
    let metrics = f.get("/metrics").body;
    let prefix = format!("logpolicy_admin_requests_total{{status=\"{status}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {prefix} in {metrics}"))
}

#[test]
fn one_address_gets_its_own_cap_and_no_more() {
    let limits = AdminLimits {
        max_connections: 10,
        max_connections_per_peer: 3,
        header_timeout: Duration::from_millis(600),
        ..AdminLimits::default()
    };
    let f = Fixture::with_limits("info", limits);
    let a = Ipv4Addr::new(127, 0, 0, 2);
    let held: Vec<TcpStream> = (0..3).map(|_| connect_from(a, f.addr())).collect();
    std::thread::sleep(Duration::from_millis(100));
    let mut extra = connect_from(a, f.addr());
    let r = read_reply(&mut extra);
    assert!(
        r.refused(503, "busy").contains("from this address"),
        "{r:?}"
    );
    // Another address is served meanwhile.
    let mut other = connect_from(Ipv4Addr::new(127, 0, 0, 3), f.addr());
    other
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .unwrap();
    assert_eq!(read_reply(&mut other).status, 200);

    // The held connections time out (no head within 600 ms): the address is served again.
    let start = Instant::now();
    loop {
        let mut c = connect_from(a, f.addr());
        c.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
            .unwrap();
        if read_reply(&mut c).status == 200 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "slots never freed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(held);
    assert!(metric(&f, 503) >= 1);
    // Each held connection ended without a request, after the header timeout.
    assert!(metric(&f, 408) >= 3, "{}", metric(&f, 408));
}

#[test]
fn a_new_connection_takes_the_place_of_the_oldest_still_sending_its_head() {
    let limits = AdminLimits {
        max_connections: 3,
        max_connections_per_peer: 3,
        header_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_secs(10),
        ..AdminLimits::default()
    };
    let f = Fixture::with_limits("info", limits);
    let mut held = Vec::new();
    for i in 0..3 {
        let mut c = connect_from(Ipv4Addr::new(127, 0, 0, 10 + i), f.addr());
        c.write_all(b"PUT /logpolicy HTTP/1.1\r\n").unwrap();
        held.push(c);
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut new = connect_from(Ipv4Addr::new(127, 0, 0, 20), f.addr());
    new.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .unwrap();
    assert_eq!(read_reply(&mut new).status, 200);
    // The oldest was closed; the two others still hold their slots.
    assert!(closed_by_server(&mut held[0], Duration::from_secs(2)));
    assert!(!closed_by_server(&mut held[1], Duration::from_millis(200)));
    assert!(!closed_by_server(&mut held[2], Duration::from_millis(200)));
    // The eviction is counted as a request not made in time (408), and the
    // `/metrics` request itself evicts the next oldest.
    assert!(metric(&f, 408) >= 1);
}

#[test]
fn a_head_over_the_limit_and_garbage_are_counted() {
    let f = Fixture::new("info");
    let before = (metric(&f, 431), metric(&f, 400));
    let mut c = TcpStream::connect(f.addr()).unwrap();
    let huge = format!(
        "GET /healthz HTTP/1.1\r\nx-filler: {}\r\n\r\n",
        "a".repeat(40 * 1024)
    );
    let _ = c.write_all(huge.as_bytes());
    let _ = closed_by_server(&mut c, Duration::from_secs(5));
    let mut c = TcpStream::connect(f.addr()).unwrap();
    c.write_all(b"\x16\x03\x01 not http at all\r\n\r\n")
        .unwrap();
    let _ = closed_by_server(&mut c, Duration::from_secs(5));
    // hyper answers these itself; the counters move once the connection is gone.
    let start = Instant::now();
    while (metric(&f, 431), metric(&f, 400)) == before {
        assert!(start.elapsed() < Duration::from_secs(5), "not counted");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(metric(&f, 431), before.0 + 1);
    assert_eq!(metric(&f, 400), before.1 + 1);
}
