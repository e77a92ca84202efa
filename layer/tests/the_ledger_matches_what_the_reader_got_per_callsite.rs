//! The per-callsite ledger is exact: a child process logs through the whole stack
//! (filter, format, writer) to its real stdout, a pipe, from 2 threads at full speed and
//! from several callsites (info, debug, warn and error; short and long lines), while
//! this process reads the pipe slowly (1 MiB/s) or not at all for a while. The reader
//! parses every line and groups them by target, level and message; per callsite, the
//! lines and bytes it got must equal the ledger's row, the lines the writer dropped must
//! make up the rest of what the child emitted, and the ledger's bytes plus logpolicy's
//! own lines must equal the writer's `bytes_written` and what the reader got. Nothing
//! here depends on timing: however the machine schedules the threads, the counts agree.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use logpolicy::writer::{Output, WriterConfig};
use serde_json::{json, Value};

const CHILD: &str = "LEDGER_EXACT_CHILD";
const EVENTS_PER_THREAD: u64 = 200_000;

/// The callsites, by `(target, level)`: each has one message.
const SITES: [(&str, &str, &str); 5] = [
    ("exact::http", "INFO", "served"),
    ("exact::db", "DEBUG", "query"),
    ("exact::cache", "INFO", "miss with a long payload"),
    ("exact::pool", "WARN", "pool low"),
    ("exact::payment", "ERROR", "payment failed"),
];

/// Logs event `i` of a thread; returns the index in [`SITES`] of its callsite.
fn log_one(i: u64) -> usize {
    match i % 100 {
        0..=59 => {
            tracing::info!(target: "exact::http", status = 200u16, path = "/cart", i, "served");
            0
        }
        60..=89 => {
            tracing::debug!(target: "exact::db", rows = i % 7, table = "orders", "query");
            1
        }
        90..=96 => {
            let payload = "x".repeat(200 + (i % 50) as usize);
            tracing::info!(target: "exact::cache", key = i, payload = payload.as_str(), "miss with a long payload");
            2
        }
        97 | 98 => {
            tracing::warn!(target: "exact::pool", free = 1u8, "pool low");
            3
        }
        _ => {
            tracing::error!(target: "exact::payment", order = i, "payment failed");
            4
        }
    }
}

/// The child: logs, stops logging, and prints its emitted counts and the ledger to
/// stderr as one JSON line.
fn child() {
    let (dispatch, logging) = logpolicy::Builder::new()
        .directives("debug")
        .log_bridge(false)
        .writer(
            WriterConfig::new(Output::Stdout)
                .capacity_bytes(1 << 20)
                .flush_timeout(Duration::from_secs(60)),
        )
        .build()
        .unwrap();
    tracing::dispatcher::set_global_default(dispatch).unwrap();
    let threads: Vec<_> = (0..2)
        .map(|_| {
            std::thread::spawn(|| {
                let mut emitted = [0u64; SITES.len()];
                for i in 0..EVENTS_PER_THREAD {
                    emitted[log_one(i)] += 1;
                }
                emitted
            })
        })
        .collect();
    // Reads under load: the ledger never counts less than the writer had written before
    // the read, nor more than it had written after it plus one batch in flight (a
    // quarter of the queue, taken by the writer's thread and not yet counted in its
    // `bytes_written`).
    let reads = {
        let handle = logging.handle().clone();
        let writer_stats = {
            let logging = &logging;
            move || logging.writer_stats().bytes_written
        };
        let (mut n, mut off) = (0u64, Vec::new());
        while !threads.iter().all(|t| t.is_finished()) {
            let before = writer_stats();
            let sites = handle.sites();
            let after = writer_stats();
            let ledger = sites.totals.bytes + sites.own.bytes;
            if ledger < before || ledger > after + (1 << 20) / 4 {
                off.push((before, ledger, after));
            }
            n += 1;
            std::thread::sleep(Duration::from_millis(1));
        }
        (n, off)
    };
    let mut emitted = [0u64; SITES.len()];
    for t in threads {
        for (e, n) in emitted.iter_mut().zip(t.join().unwrap()) {
            *e += n;
        }
    }
    let handle = logging.handle().clone();
    // Stops logging: the line naming the top callsites is written, the queue drained.
    let stats = logging.finish();
    let sites = handle.sites();
    let rows: Vec<Value> = sites
        .rows
        .iter()
        .filter(|r| r.target.starts_with("exact::"))
        .map(|r| {
            json!({
                "target": r.target,
                "level": r.level.as_str().to_uppercase(),
                "lines": r.counts.lines,
                "bytes": r.counts.bytes,
                "dropped": r.counts.dropped(),
                "held_back": r.counts.held_back(),
                "events": r.counts.events(),
            })
        })
        .collect();
    let report = json!({
        "reads_under_load": reads.0,
        "reads_off": format!("{:?}", reads.1),
        "emitted": emitted,
        "rows": rows,
        "own_lines": sites.own.lines,
        "own_bytes": sites.own.bytes,
        "total_lines": sites.totals.lines,
        "total_bytes": sites.totals.bytes,
        "other_lines": sites.other.lines,
        "bytes_written": stats.bytes_written,
        "lines_written": stats.written_total() + stats.summary_lines,
        "dropped_total": stats.dropped_total(),
    });
    eprintln!("{report}");
    // Before the test harness could write to a stdout the reader is still counting.
    std::process::exit(0);
}

enum Reader {
    Paced(u64),
    PausedThenFast(Duration),
}

/// What the reader got, per `(target, level, msg)`: lines and bytes (each with its `\n`).
#[derive(Default, Debug)]
struct Got {
    by_site: BTreeMap<(String, String, String), (u64, u64)>,
    /// Every JSON line and its bytes.
    lines: u64,
    bytes: u64,
    malformed: Vec<String>,
}

fn run(test: &str, reader: Reader) -> (Got, Value) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            test,
            "--exact",
            "--nocapture",
            "--quiet",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .env_remove("LOGPOLICY")
        .env_remove("RUST_LOG")
        .env_remove("LOGPOLICY_ADMIN_ADDR")
        .env_remove("LOGPOLICY_FORMAT")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let mut out = child.stdout.take().unwrap();
    let mut got = Got::default();
    if let Reader::PausedThenFast(pause) = reader {
        // The paused reader is the scenario, not a wait for an event.
        std::thread::sleep(pause);
    }
    let started = Instant::now();
    let mut buf = vec![0u8; 16 * 1024];
    let (mut carry, mut read) = (Vec::new(), 0u64);
    loop {
        if let Reader::Paced(rate) = reader {
            let due = started + Duration::from_secs_f64(read as f64 / rate as f64);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait); // the reader's speed
            }
        }
        let n = match out.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        read += n as u64;
        carry.extend_from_slice(&buf[..n]);
        while let Some(pos) = carry.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = carry.drain(..=pos).collect();
            tally(&mut got, &line);
        }
    }
    if !carry.is_empty() {
        got.malformed
            .push(String::from_utf8_lossy(&carry).into_owned());
    }
    let status = child.wait().unwrap();
    let stderr = stderr.join().unwrap();
    assert!(status.success(), "child failed: {stderr}");
    let report = stderr
        .lines()
        .rev()
        .find_map(|l| {
            serde_json::from_str::<Value>(l)
                .ok()
                .filter(|v| v.get("rows").is_some())
        })
        .unwrap_or_else(|| panic!("no report from the child: {stderr}"));
    (got, report)
}

fn tally(got: &mut Got, line: &[u8]) {
    if line.starts_with(b"running ") || line == b"\n" {
        return; // the test harness's banner
    }
    let Ok(v) = serde_json::from_slice::<Value>(line) else {
        got.malformed
            .push(String::from_utf8_lossy(line).into_owned());
        return;
    };
    got.lines += 1;
    got.bytes += line.len() as u64;
    let s = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
    let e = got
        .by_site
        .entry((s("target"), s("level"), s("msg")))
        .or_default();
    e.0 += 1;
    e.1 += line.len() as u64;
}

fn check(got: &Got, report: &Value) {
    assert!(got.malformed.is_empty(), "malformed: {:?}", got.malformed);
    assert_eq!(
        report["reads_off"], "[]",
        "reads under load outside [written before, written after + a batch]"
    );
    eprintln!(
        "{} reads under load, all within bounds",
        report["reads_under_load"]
    );
    let n = |v: &Value| v.as_u64().unwrap();
    let emitted: Vec<u64> = report["emitted"]
        .as_array()
        .unwrap()
        .iter()
        .map(n)
        .collect();
    let rows = report["rows"].as_array().unwrap();
    let mut site_lines = 0;
    let mut site_bytes = 0;
    for (i, (target, level, msg)) in SITES.iter().enumerate() {
        let of_site: Vec<&Value> = rows
            .iter()
            .filter(|r| r["target"] == *target && r["level"] == *level)
            .collect();
        assert_eq!(of_site.len(), 1, "{target} {level}: one callsite, one row");
        let row = of_site[0];
        let (lines, bytes) = got
            .by_site
            .get(&(target.to_string(), level.to_string(), msg.to_string()))
            .copied()
            .unwrap_or_default();
        eprintln!(
            "{target} {level}: emitted {} | reader {lines} lines {bytes} B | ledger {} lines {} B, dropped {}",
            emitted[i], row["lines"], row["bytes"], row["dropped"]
        );
        assert_eq!(n(&row["lines"]), lines, "{target}: lines the reader got");
        assert_eq!(n(&row["bytes"]), bytes, "{target}: bytes the reader got");
        assert_eq!(n(&row["held_back"]), 0, "{target}: no policy held anything");
        assert_eq!(
            n(&row["lines"]) + n(&row["dropped"]),
            emitted[i],
            "{target}: every event written or dropped, once"
        );
        site_lines += lines;
        site_bytes += bytes;
    }
    // Only the test's callsites wrote events; the rest is logpolicy's own lines.
    assert_eq!(n(&report["other_lines"]), 0);
    assert_eq!(n(&report["total_lines"]), site_lines);
    assert_eq!(n(&report["total_bytes"]), site_bytes);
    let own_got: (u64, u64) = got
        .by_site
        .iter()
        .filter(|((t, _, _), _)| t == "logpolicy")
        .fold((0, 0), |a, (_, v)| (a.0 + v.0, a.1 + v.1));
    assert_eq!(
        (n(&report["own_lines"]), n(&report["own_bytes"])),
        own_got,
        "logpolicy's own lines"
    );
    assert_eq!(
        site_bytes + own_got.1,
        n(&report["bytes_written"]),
        "ledger + own == the writer's bytes_written"
    );
    assert_eq!(
        got.bytes,
        n(&report["bytes_written"]),
        "the reader got them all"
    );
    assert_eq!(got.lines, n(&report["lines_written"]));
    assert!(
        n(&report["dropped_total"]) > 0,
        "the scenario overloads the writer"
    );
}

#[test]
fn behind_a_reader_at_one_mib_per_second() {
    if std::env::var_os(CHILD).is_some() {
        return child();
    }
    let (got, report) = run(
        "behind_a_reader_at_one_mib_per_second",
        Reader::Paced(1 << 20),
    );
    check(&got, &report);
}

#[test]
fn behind_a_paused_reader() {
    if std::env::var_os(CHILD).is_some() {
        return child();
    }
    let (got, report) = run(
        "behind_a_paused_reader",
        Reader::PausedThenFast(Duration::from_secs(2)),
    );
    check(&got, &report);
}
