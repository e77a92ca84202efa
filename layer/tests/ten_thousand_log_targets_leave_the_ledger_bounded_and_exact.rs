//! `log` records of 10,000 distinct targets, through the bridge: the ledger gives rows
//! up to its cap and counts the rest in its `other` row, so its memory stays bounded
//! (10,000 more targets add nothing to it) and its totals stay exact: every line the
//! writer wrote is in a row, in `other` or in logpolicy's own lines, to the byte.
//!
//! Run in a child process of its own: the ledger's index is the process's.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::time::Duration;

use logpolicy::ledger::{SiteKind, MAX_ROWS};
use logpolicy::writer::{Output, Overflow, WriterConfig};

const CHILD: &str = "LEDGER_OVERFLOW_CHILD";

fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

fn log_targets(from: usize, to: usize) {
    for i in from..to {
        let target = format!("crate_{i}::module");
        log::info!(target: &target, "record {i}");
    }
}

fn child() {
    let path = std::env::temp_dir().join(format!("ledger-overflow-{}.log", std::process::id()));
    let logging = logpolicy::Builder::new()
        .directives("info")
        .writer(
            // A small queue in block mode: its memory is all in use after the first
            // round, and no line is dropped.
            WriterConfig::new(Output::File(path.clone()))
                .capacity_bytes(256 << 10)
                .overflow(Overflow::Block)
                .flush_timeout(Duration::from_secs(30)),
        )
        .try_init()
        .unwrap();
    log_targets(0, 10_000);
    assert!(logging.flush(Duration::from_secs(30)));
    let sites = logging.sites();
    let stats = logging.writer_stats();
    let rss_after_first = rss_kb();

    let log_rows = sites
        .rows
        .iter()
        .filter(|r| r.kind == SiteKind::Log)
        .count();
    eprintln!(
        "log rows {log_rows}, other {} lines ({} sites), rows in all {}, rss {rss_after_first} kB",
        sites.other.lines,
        sites.other_sites,
        sites.rows.len()
    );
    // Every row was given (up to the cap), the rest is in `other`.
    assert!(sites.rows.len() <= MAX_ROWS - 2, "{}", sites.rows.len());
    assert!(
        log_rows > 1_000,
        "records got rows of their own: {log_rows}"
    );
    assert!(
        sites.other.lines > 0,
        "targets past the cap are counted in other"
    );
    let in_rows: u64 = sites
        .rows
        .iter()
        .filter(|r| r.kind == SiteKind::Log)
        .map(|r| r.counts.lines)
        .sum();
    assert_eq!(
        in_rows + sites.other.lines,
        10_000,
        "every record counted once"
    );
    // Exact: the rows, `other` and logpolicy's own lines make up what was written.
    assert_eq!(
        sites.totals.lines + sites.own.lines,
        stats.written_total() + stats.summary_lines
    );
    assert_eq!(sites.totals.bytes + sites.own.bytes, stats.bytes_written);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), stats.bytes_written);

    // More targets: no more rows, and the memory levels off. 8 rounds of 20,000 more
    // targets, the process's resident memory read after each (the first rounds bring
    // the writer's queue and the allocator to their steady state): a ledger that kept
    // even 10 bytes per target would grow by 1.2 MB over the last six.
    let mut rss = Vec::new();
    for round in 0..8 {
        let from = 10_000 + round * 20_000;
        log_targets(from, from + 20_000);
        assert!(logging.flush(Duration::from_secs(30)));
        rss.push(rss_kb());
    }
    eprintln!("resident memory after each round of 20,000 more targets (kB): {rss:?}");
    let more = logging.sites();
    assert_eq!(more.rows.len(), sites.rows.len(), "no row past the cap");
    assert_eq!(more.other.lines, sites.other.lines + 160_000);
    let stats = logging.writer_stats();
    assert_eq!(
        more.totals.lines + more.own.lines,
        stats.written_total() + stats.summary_lines
    );
    assert_eq!(more.totals.bytes + more.own.bytes, stats.bytes_written);
    let grew = rss[7].saturating_sub(rss[1]);
    assert!(
        grew < 256,
        "120,000 targets past the cap took {grew} kB: {rss:?}"
    );
    drop(logging);
    let _ = std::fs::remove_file(path);
}

#[test]
fn ten_thousand_targets() {
    if std::env::var_os(CHILD).is_some() {
        child();
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["ten_thousand_targets", "--exact", "--nocapture"])
        .env(CHILD, "1")
        .env_remove("LOGPOLICY")
        .env_remove("RUST_LOG")
        .env_remove("LOGPOLICY_ADMIN_ADDR")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stderr}");
    assert!(out.status.success(), "child failed: {stderr}");
}
