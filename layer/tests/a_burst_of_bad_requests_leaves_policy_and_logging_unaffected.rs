//! 1,000 bad requests in a burst, while the service logs: each gets its status and
//! reason, the policy does not change, and logging goes on (every event written).
//! Prints the service's log throughput without and with the burst.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin_fixture;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use admin_fixture::{doc_for, send, Fixture};
use logpolicy::wire::{self, SigningKey};

/// CPU time (user + system) of the endpoint's thread so far, from `/proc` (Linux), in
/// clock ticks of 10 ms.
fn admin_thread_ticks() -> Option<u64> {
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let path = task.ok()?.path();
        if std::fs::read_to_string(path.join("comm")).ok()?.trim() == "logpolicy-admin" {
            let stat = std::fs::read_to_string(path.join("stat")).ok()?;
            let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
            return Some(
                fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?,
            );
        }
    }
    None
}

/// Logs as fast as it can until `stop`; returns (events, elapsed).
fn log_until(f: &Fixture, stop: &AtomicBool) -> (u64, Duration) {
    let start = Instant::now();
    let mut n = 0u64;
    tracing::dispatcher::with_default(&f.dispatch, || {
        while !stop.load(Ordering::Relaxed) {
            for _ in 0..64 {
                tracing::info!(target: "shop::http", n, status = 200u16, "served");
                tracing::debug!(target: "shop::db", n, "not enabled");
                n += 1;
            }
        }
    });
    (n, start.elapsed())
}

#[test]
fn a_burst_of_bad_requests_leaves_policy_and_logging_unaffected() {
    let f = Arc::new(Fixture::new("info"));
    f.lines.keep.store(false, Ordering::Relaxed);
    let good = f.doc(
        10,
        r#"[{"source":"ops/a","targets":[{"target":"shop::payment","level":"debug"}]}]"#,
    );
    assert_eq!(f.signed("PUT", &good).status, 200);
    let generation = f.handle.generation();
    let effective = f.handle.effective();

    // Baseline: the same logging for as long as the burst will take, without it.
    let run = |with_burst: bool| -> (u64, Duration, u64) {
        let stop = Arc::new(AtomicBool::new(false));
        let before = f.lines.count.load(Ordering::Relaxed);
        let (events, elapsed) = std::thread::scope(|s| {
            let logger = s.spawn(|| log_until(&f, &stop));
            if with_burst {
                burst(&f);
            } else {
                std::thread::sleep(Duration::from_millis(1500));
            }
            stop.store(true, Ordering::Relaxed);
            logger.join().unwrap()
        });
        let written = f.lines.count.load(Ordering::Relaxed) - before;
        (events, elapsed, written)
    };
    let (quiet_events, quiet_time, quiet_written) = run(false);
    let ticks_before = admin_thread_ticks();
    let burst_start = Instant::now();
    let (busy_events, busy_time, busy_written) = run(true);
    let burst_time = burst_start.elapsed();
    if let (Some(a), Some(b)) = (ticks_before, admin_thread_ticks()) {
        println!(
            "endpoint thread CPU for 1,000 bad requests: {} ms, ~{} us per request",
            (b - a) * 10,
            (b - a) * 10
        );
    }
    assert_eq!(
        quiet_written, quiet_events,
        "every event enabled is written"
    );
    assert_eq!(
        busy_written, busy_events,
        "every event enabled is written during the burst"
    );

    let rate = |n: u64, t: Duration| n as f64 / t.as_secs_f64();
    let (quiet, busy) = (rate(quiet_events, quiet_time), rate(busy_events, busy_time));
    println!(
        "log throughput (1 logging thread; 4 client threads and the endpoint share the same 2 cores): {quiet:.0} events/s quiet, {busy:.0} events/s during 1,000 bad requests ({:.2}x, burst took {burst_time:?})",
        busy / quiet
    );
    assert!(busy > 0.0);

    assert_eq!(f.handle.generation(), generation);
    assert_eq!(f.handle.effective(), effective);
    assert_eq!(f.policy_json()["document"]["version"], 10);
    let metrics = f.get("/metrics").body;
    for (status, n) in [
        ("401", 222),
        ("400", 111),
        ("403", 111),
        ("404", 111),
        ("405", 111),
        ("409", 111),
        ("413", 111),
        ("422", 111),
    ] {
        let line = format!("logpolicy_admin_requests_total{{status=\"{status}\"}} ");
        let got = metrics
            .lines()
            .find_map(|l| l.strip_prefix(line.as_str()))
            .unwrap_or("missing");
        assert!(got.parse::<u64>().unwrap_or(0) >= n, "{status}: {got}");
    }
}

/// 1,000 bad requests from 4 threads; each must get its own status and error code.
fn burst(f: &Fixture) {
    let stranger = SigningKey::from_bytes(&[9; 32]);
    let addr = f.addr();
    std::thread::scope(|s| {
        for t in 0..4 {
            let stranger = stranger.clone();
            s.spawn(move || {
                for i in 0..250 {
                    let kind = (t * 250 + i) % 9;
                    let doc = f.doc(11, r#"[{"source":"ops/b","defaultLevel":"trace"}]"#);
                    let (method, path, body, header, status, code): (
                        &str,
                        &str,
                        String,
                        Option<String>,
                        u16,
                        &str,
                    ) = match kind {
                        0 => ("PUT", "/logpolicy", doc, None, 401, "missing_signature"),
                        1 => {
                            let h = wire::sign(doc.as_bytes(), &stranger);
                            ("PUT", "/logpolicy", doc, Some(h), 401, "untrusted_key")
                        }
                        2 => (
                            "PUT",
                            "/logpolicy",
                            "{\"pod\":".into(),
                            None,
                            400,
                            "malformed_json",
                        ),
                        3 => (
                            "PUT",
                            "/logpolicy",
                            doc_for("other", 11, "[]"),
                            None,
                            403,
                            "wrong_pod",
                        ),
                        4 => (
                            "PUT",
                            "/logpolicy",
                            " ".repeat(70 * 1024),
                            None,
                            413,
                            "body_too_large",
                        ),
                        5 => ("GET", "/nope", String::new(), None, 404, "not_found"),
                        6 => (
                            "POST",
                            "/logpolicy",
                            String::new(),
                            None,
                            405,
                            "method_not_allowed",
                        ),
                        7 => (
                            "PUT",
                            "/logpolicy",
                            f.doc(9, "[]"),
                            None,
                            409,
                            "stale_version",
                        ),
                        _ => (
                            "PUT",
                            "/logpolicy",
                            f.doc(11, r#"[{"source":"a/b","defaultLevel":"verbose"}]"#),
                            None,
                            422,
                            "invalid_document",
                        ),
                    };
                    // Kinds 2, 3, 7 and 8 are signed with the trusted key: bad content, not bad signatures.
                    let header = match (kind, header) {
                        (2 | 3 | 7 | 8, _) => Some(wire::sign(body.as_bytes(), &f.key)),
                        (_, h) => h,
                    };
                    let headers: Vec<(&str, &str)> = header
                        .iter()
                        .map(|h| (wire::SIGNATURE_HEADER, h.as_str()))
                        .collect();
                    let r = send(addr, method, path, &headers, body.as_bytes());
                    r.refused(status, code);
                }
            });
        }
    });
}
