//! A recording rule keeps the events of its target below the level in force in memory,
//! formatted and redacted, and writes none of them until a replay asks. A replay writes
//! the window's lines in order, with their original timestamps and a replay marker,
//! between two lines of target `logpolicy` that say who asked and what the store held;
//! a second replay finds none of them. Every step is counted: per level in the stats,
//! per callsite in the ledger (`recorded = replayed + expired + held`), and the ledger's
//! identity `events = lines + not_written + recorded - replayed` holds.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use logpolicy::recorder::RecordLimits;
use logpolicy::writer::{Output, ReplayRequest, WriterConfig};

fn authorising(i: u32) {
    tracing::debug!(target: "shop::payment", attempt = i, password = "hunter2", "authorising");
}

fn tracing_detail() {
    tracing::trace!(target: "shop::payment", "below the recording level");
}

fn declined(i: u32) {
    tracing::info!(target: "shop::payment", attempt = i, "declined");
}

fn other_debug() {
    tracing::debug!(target: "shop::cart", "never enabled, never recorded");
}

fn read_lines(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn recorded_lines_come_back_once_in_order_with_their_time() {
    let path = std::env::temp_dir().join(format!("recorder-replay-{}.log", std::process::id()));
    let (dispatch, logging) = logpolicy::Builder::new()
        .directives("info,@record(shop::payment)=debug")
        .writer(WriterConfig::new(Output::File(path.clone())))
        .build()
        .unwrap();
    tracing::dispatcher::with_default(&dispatch, || {
        assert!(tracing::enabled!(target: "shop::payment", tracing::Level::DEBUG));
        assert!(!tracing::enabled!(target: "shop::payment", tracing::Level::TRACE));
        assert!(!tracing::enabled!(target: "shop::cart", tracing::Level::DEBUG));
        for i in 0..50 {
            authorising(i);
            tracing_detail();
            other_debug();
            declined(i);
        }
    });
    assert!(logging.flush(Duration::from_secs(5)));
    // Nothing recorded is written until a replay asks.
    let before = read_lines(&path);
    assert_eq!(before.len(), 50, "only the info lines: {before:?}");
    assert!(before.iter().all(|l| l["msg"] == "declined"));

    let stats = logging.handle().stats();
    let debug = stats.level(&tracing::Level::DEBUG);
    assert_eq!((debug.recorded, debug.written), (50, 0));
    assert_eq!(stats.level(&tracing::Level::INFO).written, 50);
    assert_eq!(stats.level(&tracing::Level::TRACE).emitted(), 0);
    let held = logging.recorder().stats(now(&logging));
    assert_eq!((held.lines, held.recorded, held.expired), (50, 50, 0));

    let report = logging.replay(
        &ReplayRequest::new("shop/raise-payments", Duration::from_secs(300)).reason("INC-4211"),
    );
    assert_eq!((report.lines, report.queued, report.dropped), (50, 50, 0));
    assert!(report.complete);
    assert!(logging.flush(Duration::from_secs(5)));
    let lines = read_lines(&path);
    assert_eq!(lines.len(), 50 + 1 + 50 + 1);
    let open = &lines[50];
    assert_eq!(open["target"], "logpolicy");
    assert_eq!(open["msg"], "replaying recorded lines");
    assert_eq!(open["policy"], "shop/raise-payments");
    assert_eq!(open["reason"], "INC-4211");
    assert_eq!(open["lines"], 50);
    assert!(open["asked_from"].as_str().unwrap() < open["held_from"].as_str().unwrap());
    let replayed = &lines[51..101];
    for (i, l) in replayed.iter().enumerate() {
        assert_eq!(l["msg"], "authorising");
        assert_eq!(l["level"], "DEBUG");
        assert_eq!(l["attempt"], i as u64, "in the order they were emitted");
        assert_eq!(l["replayed"], true);
        assert_eq!(
            l["password"], "[redacted]",
            "recorded as it would have been written"
        );
        // The original time: before the replay's opening line, and the i-th authorising
        // came before the i-th declined.
        let ts = l["ts"].as_str().unwrap();
        assert!(ts <= open["ts"].as_str().unwrap());
        assert!(ts <= before[i]["ts"].as_str().unwrap());
    }
    let close = &lines[101];
    assert_eq!(close["msg"], "replayed recorded lines");
    assert_eq!(
        (close["queued"].as_u64(), close["dropped"].as_u64()),
        (Some(50), Some(0))
    );

    // Once only.
    let again = logging.replay(&ReplayRequest::new(
        "shop/raise-payments",
        Duration::from_secs(300),
    ));
    assert_eq!(again.lines, 0);
    assert_eq!(again.held_from, None);

    // The ledger: the recorded callsite's row.
    assert!(logging.flush(Duration::from_secs(5)));
    let sites = logging.sites();
    let row = sites
        .rows
        .iter()
        .find(|r| r.target == "shop::payment" && r.level == logpolicy::Level::Debug)
        .unwrap();
    let c = row.counts;
    assert_eq!(
        (c.recorded, c.replayed, c.expired, c.lines),
        (50, 50, 0, 50)
    );
    assert_eq!(c.events(), 50, "each event counted once");
    assert_eq!(c.held_recorded(), 0);
    let written: u64 = sites.rows.iter().map(|r| r.counts.bytes).sum::<u64>() + sites.own.bytes;
    assert_eq!(written, logging.writer_stats().bytes_written);
    assert!(!sites.rows.iter().any(|r| r.target == "shop::payment"
        && r.level == logpolicy::Level::Trace
        && r.counts.events() > 0));
    drop(logging);
    let _ = std::fs::remove_file(path);
}

fn now(logging: &logpolicy::Logging) -> Duration {
    logging
        .handle()
        .now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
}

#[test]
fn ten_times_the_limit_expires_the_oldest_and_counts_them() {
    let path = std::env::temp_dir().join(format!("recorder-limit-{}.log", std::process::id()));
    let limit = 256 << 10;
    let (dispatch, logging) = logpolicy::Builder::new()
        .directives("warn,@record(shop)=debug")
        .record_limits(RecordLimits::new(limit, Duration::from_secs(900)).unwrap())
        .writer(WriterConfig::new(Output::File(path.clone())))
        .build()
        .unwrap();
    let filler = "x".repeat(200);
    let mut offered = 0usize;
    let mut n = 0u64;
    tracing::dispatcher::with_default(&dispatch, || {
        while offered < 10 * limit {
            tracing::info!(target: "shop::cart", n, filler = filler.as_str(), "added");
            n += 1;
            offered += 300;
            assert!(logging.recorder().heap_bytes() <= limit + logpolicy::recorder::MEMORY_SLACK);
        }
    });
    let held = logging.recorder().stats(now(&logging));
    assert!(held.bytes <= limit);
    assert_eq!(held.recorded, n);
    assert_eq!(held.expired + held.lines as u64, n);
    assert!(held.expired > 8 * held.lines as u64, "{held:?}");
    let sites = logging.sites();
    let row = sites
        .rows
        .iter()
        .find(|r| r.target == "shop::cart")
        .unwrap();
    assert_eq!((row.counts.recorded, row.counts.expired), (n, held.expired));
    assert_eq!(row.counts.held_recorded(), held.lines as u64);
    // The newest are held: a replay of everything writes the last ones, in order.
    let report = logging.replay(&ReplayRequest::new("test", Duration::from_secs(3600)));
    assert_eq!(report.lines, held.lines as u64);
    assert!(
        !report.complete,
        "the oldest lines of the window had expired"
    );
    assert!(report.held_from.is_some());
    assert!(logging.flush(Duration::from_secs(5)));
    let lines = read_lines(&path);
    let ns: Vec<u64> = lines.iter().filter_map(|l| l["n"].as_u64()).collect();
    assert_eq!(ns.len(), held.lines);
    assert_eq!(*ns.last().unwrap(), n - 1);
    assert!(ns.windows(2).all(|w| w[1] == w[0] + 1));
    drop(logging);
    let _ = std::fs::remove_file(path);
}

#[test]
fn a_recording_rule_from_a_raise_stops_recording_what_the_raise_writes() {
    let filter = logpolicy::PolicyFilter::from_directives("info,@record(shop)=debug").unwrap();
    let handle = filter.handle();
    let subscriber = {
        use tracing_subscriber::prelude::*;
        tracing_subscriber::registry().with(filter.clone()).with(
            logpolicy::FormatLayer::new(logpolicy::Format::Json, logpolicy::NullSink)
                .with_policy(&filter),
        )
    };
    tracing::subscriber::with_default(subscriber, || {
        tracing::debug!(target: "shop", "recorded");
        handle
            .set_directives("info,shop=debug,@record(shop)=debug")
            .unwrap();
        tracing::debug!(target: "shop", "written");
        handle.set_directives("info").unwrap();
        tracing::debug!(target: "shop", "neither");
    });
    let debug = handle.stats().level(&tracing::Level::DEBUG);
    assert_eq!((debug.recorded, debug.written), (1, 1));
}

/// One callsite, decided again under each policy: its memory of whether it is recorded
/// belongs to the policy that decided it, so a raise writes its next event and the
/// fall-back records the one after.
#[test]
fn one_callsite_follows_each_policy_change_between_recorded_and_written() {
    fn payment_debug(step: &str) {
        tracing::debug!(target: "shop::payment", step, "authorising");
    }
    let filter =
        logpolicy::PolicyFilter::from_directives("info,@record(shop::payment)=debug").unwrap();
    let handle = filter.handle();
    let subscriber = {
        use tracing_subscriber::prelude::*;
        tracing_subscriber::registry().with(filter.clone()).with(
            logpolicy::FormatLayer::new(logpolicy::Format::Json, logpolicy::NullSink)
                .with_policy(&filter),
        )
    };
    let counts = || {
        let debug = handle.stats().level(&tracing::Level::DEBUG);
        (debug.recorded, debug.written)
    };
    tracing::subscriber::with_default(subscriber, || {
        payment_debug("recorded");
        payment_debug("recorded again, as the callsite remembers");
        assert_eq!(counts(), (2, 0));
        handle
            .set_directives("info,shop::payment=debug,@record(shop::payment)=debug")
            .unwrap();
        payment_debug("written under the raise");
        assert_eq!(counts(), (2, 1));
        handle
            .set_directives("info,@record(shop::payment)=debug")
            .unwrap();
        payment_debug("recorded after the fall-back");
        assert_eq!(counts(), (3, 1));
        handle
            .set_directives("info,@record(shop::db)=debug")
            .unwrap();
        payment_debug("neither: another target records");
        assert_eq!(counts(), (3, 1));
        handle
            .set_directives("info,@record(shop::payment)=debug")
            .unwrap();
        payment_debug("recorded again");
        assert_eq!(counts(), (4, 1));
    });
}
