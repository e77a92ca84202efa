//! The attack: clients without a key hold every slot of the endpoint with connections
//! that send a bare request line and nothing more, and open new ones as fast as theirs
//! are closed, from several addresses. A signed push must still get through, every
//! time: the oldest connection still sending its head makes room, an address holds at
//! most its own cap, and a peer that signed is never evicted.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin_fixture;

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use admin_fixture::{connect_from, Fixture};

/// Keeps `n` connections from `from` open, each having sent only a request line,
/// replacing each one the server closes, until `stop`.
fn hold(from: Ipv4Addr, addr: SocketAddr, n: usize, stop: &AtomicBool, opened: &AtomicU64) {
    let open = |opened: &AtomicU64| {
        let mut c = connect_from(from, addr);
        let _ = c.write_all(b"PUT /logpolicy HTTP/1.1\r\n");
        c.set_nonblocking(true).unwrap();
        opened.fetch_add(1, Ordering::Relaxed);
        c
    };
    let mut conns: Vec<TcpStream> = (0..n).map(|_| open(opened)).collect();
    while !stop.load(Ordering::Relaxed) {
        for c in &mut conns {
            let mut buf = [0u8; 512];
            let closed = match std::io::Read::read(c, &mut buf) {
                Ok(_) => true,
                Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
            };
            if closed {
                *c = open(opened);
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn signed_pushes_get_through_while_clients_hold_connections() {
    let f = Fixture::new("info");
    let stop = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(AtomicU64::new(0));
    // 6 addresses x 16 connections: more than the 64 slots, each address at its cap.
    let attackers: Vec<_> = (0..6)
        .map(|i| {
            let (stop, opened, addr) = (stop.clone(), opened.clone(), f.addr());
            std::thread::spawn(move || {
                hold(Ipv4Addr::new(127, 0, 9, 1 + i), addr, 16, &stop, &opened)
            })
        })
        .collect();
    // Let them take every slot.
    while opened.load(Ordering::Relaxed) < 96 {
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(200));

    let mut applied = 0;
    let mut answers = Vec::new();
    for version in 1..=40u64 {
        let layers = format!(
            r#"[{{"source":"shop/raise","priority":10,"targets":[{{"target":"shop","level":"debug"}},{{"target":"x{version}","level":"info"}}]}}]"#
        );
        let r = f.signed("PUT", &f.doc(version, &layers));
        if r.status == 200 {
            applied += 1;
        } else {
            answers.push(format!("{version}: {} {}", r.status, r.body));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::Relaxed);
    for a in attackers {
        a.join().unwrap();
    }
    let opened = opened.load(Ordering::Relaxed);
    eprintln!(
        "pushes applied under the attack: {applied} of 40; attacker connections opened: {opened}"
    );
    assert_eq!(applied, 40, "{answers:#?}");
    let view = f.policy_json();
    assert_eq!(view["document"]["version"], 40, "{view}");
    // The attackers were evicted (408) or turned away at their cap (503), not served.
    let metrics = f.get("/metrics").body;
    assert!(
        metrics.contains("logpolicy_admin_requests_total{status=\"408\"}"),
        "{metrics}"
    );
}
