//! `GET /logpolicy/sites` names every callsite that ran (one that was never enabled
//! too) with exactly the lines and bytes it wrote and the events sampled out, the
//! totals that add up to the writer's bytes with logpolicy's own lines, every target
//! with the level in force for it now, and the times that make two reads a rate. A peer
//! off the pod's loopback gets the same view; no field value is in it; other methods
//! get 405. Real sockets, a real writer to a file: the bytes the reader is told are the
//! bytes in the file.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin_fixture;

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::time::Duration;

use admin_fixture::{pod_config_on, send};
use logpolicy::clock::parse_rfc3339;
use logpolicy::wire::{CallsiteKind, CountsView, SigningKey, SitesView};
use logpolicy::writer::{Output, WriterConfig};
use logpolicy::Level;

/// A value no view of the ledger may show (one a redactor would take for a secret).
const SECRET: &str = "sk_live_4eC39HqLyjWDarjtT1zdp7dc";
/// A value no redactor would touch: absent all the same.
const CUSTOMER: &str = "ada-lovelace-4411";
const CART_MESSAGE: &str = "added to cart 9f3e";

/// This machine's address on the interface of its default route (no packet is sent).
fn non_loopback_address() -> IpAddr {
    let s = UdpSocket::bind("0.0.0.0:0").unwrap();
    s.connect("203.0.113.1:9")
        .expect("this test needs a non-loopback IPv4 address with a route (a default route)");
    let ip = s.local_addr().unwrap().ip();
    assert!(!ip.is_loopback() && !ip.is_unspecified(), "{ip}");
    ip
}

#[test]
fn the_sites_view_names_every_callsite_and_what_it_cost() {
    let dir = std::env::temp_dir().join(format!("sites-view-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("out.log");
    let key = SigningKey::from_bytes(&[9; 32]);
    let (dispatch, logging) = logpolicy::Builder::new()
        .directives("info,shop::pay=warn,@sample(app)=1/4")
        .writer(WriterConfig::new(Output::File(file.clone())))
        .admin(pod_config_on("0.0.0.0:0".parse().unwrap(), &key))
        .build()
        .unwrap();
    let port = logging.admin_addr().unwrap().port();
    let loopback = SocketAddr::from(([127, 0, 0, 1], port));
    let network = SocketAddr::new(non_loopback_address(), port);

    // The callsites, by (target, level), with the line each is on.
    let mut at: BTreeMap<(&str, Level), u32> = BTreeMap::new();
    tracing::dispatcher::with_default(&dispatch, || {
        for i in 0..40u32 {
            at.insert(("app::orders", Level::Info), line!() + 1);
            tracing::info!(target: "app::orders", i, "order placed");
        }
        for i in 0..3u32 {
            at.insert(("shop::cart", Level::Info), line!() + 1);
            tracing::info!(target: "shop::cart", i, api_key = SECRET, customer = CUSTOMER, "{}", CART_MESSAGE);
        }
        // Below the level in force for its target (but not below every target's, so
        // the callsite registers): a row of zeros.
        for _ in 0..5 {
            at.insert(("shop::pay", Level::Info), line!() + 1);
            tracing::info!(target: "shop::pay", customer = CUSTOMER, "never enabled");
        }
        for _ in 0..2 {
            at.insert(("shop::pay", Level::Warn), line!() + 1);
            tracing::warn!(target: "shop::pay", customer = CUSTOMER, "declined");
        }
    });
    // A refused push: logpolicy's own line, counted in `own`.
    let refused = send(loopback, "PUT", "/logpolicy", &[], b"{}");
    assert_eq!(refused.status, 401, "{refused:?}");
    assert!(logging.flush(Duration::from_secs(5)));

    // What the file holds, per (target, level): lines and bytes (newline included).
    let text = std::fs::read_to_string(&file).unwrap();
    let mut in_file: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let key = (
            v["target"].as_str().unwrap().to_owned(),
            v["level"].as_str().unwrap().to_ascii_lowercase(),
        );
        let e = in_file.entry(key).or_default();
        e.0 += 1;
        e.1 += line.len() as u64 + 1;
    }
    let file_has = |target: &str, level: &str| {
        in_file
            .get(&(target.to_owned(), level.to_owned()))
            .copied()
            .unwrap_or_default()
    };
    assert!(
        text.contains(CART_MESSAGE),
        "the lines were written: {text}"
    );

    let full = send(loopback, "GET", "/logpolicy/sites", &[], b"");
    assert_eq!(full.status, 200, "{full:?}");
    assert!(
        full.head
            .to_ascii_lowercase()
            .contains("content-type: application/json"),
        "{}",
        full.head
    );
    let view: SitesView = serde_json::from_str(&full.body).unwrap();
    let json = full.json();

    // Every callsite, exactly.
    let row = |target: &str, level: Level| {
        let rows: Vec<_> = view
            .rows
            .iter()
            .filter(|r| r.target == target && r.level == level)
            .collect();
        assert_eq!(rows.len(), 1, "{target} {level:?}: {rows:?}");
        rows[0].clone()
    };
    let expected = [
        // (target, level, lines, sampled)
        ("app::orders", Level::Info, 10, 30),
        ("shop::cart", Level::Info, 3, 0),
        ("shop::pay", Level::Warn, 2, 0),
        ("shop::pay", Level::Info, 0, 0),
    ];
    for (target, level, lines, sampled) in expected {
        let r = row(target, level);
        let (file_lines, file_bytes) = file_has(target, level.as_str());
        assert_eq!(file_lines, lines, "{target} {level:?}");
        // Every other count is zero: nothing else was held back or dropped.
        assert_eq!(
            r.counts,
            CountsView {
                lines,
                bytes: file_bytes,
                sampled,
                ..CountsView::default()
            },
            "{target} {level:?}"
        );
        assert_eq!(r.kind, CallsiteKind::Event);
        assert_eq!(r.file.as_deref(), Some(file!()));
        assert_eq!(r.line, Some(at[&(target, level)]), "{target} {level:?}");
        assert_eq!(
            r.module_path.as_deref(),
            Some("the_sites_view_names_every_callsite_and_what_it_cost")
        );
        assert_eq!(
            r.name,
            format!("event {}:{}", file!(), at[&(target, level)])
        );
    }
    assert_eq!(
        view.rows.len(),
        4,
        "only this test's callsites: {:?}",
        view.rows
    );
    assert!(
        view.rows
            .windows(2)
            .all(|w| w[0].counts.bytes >= w[1].counts.bytes),
        "biggest first"
    );
    // Counts are flattened into the row, in camelCase.
    let first = &json["rows"][0];
    for key in [
        "lines",
        "bytes",
        "sampled",
        "queueFull",
        "outputClosed",
        "modulePath",
    ] {
        assert!(first.get(key).is_some(), "rows[0].{key}: {first}");
    }

    // The totals add up, with logpolicy's own line, to what the writer wrote: the file.
    let writer = view.writer.expect("the endpoint has the writer");
    let file_len = std::fs::metadata(&file).unwrap().len();
    assert_eq!(view.own.lines, 1, "the refused push");
    assert_eq!(view.own.bytes, file_has("logpolicy", "warn").1);
    assert_eq!(view.totals.bytes + view.own.bytes, writer.bytes_written);
    assert_eq!(view.totals.lines + view.own.lines, writer.lines_written);
    assert_eq!(writer.bytes_written, file_len);
    assert_eq!(writer.bytes_written, logging.writer_stats().bytes_written);
    assert_eq!(view.totals.lines, 15);
    assert_eq!(view.totals.sampled, 30);
    assert_eq!((view.other.sites, view.other.counts.lines), (0, 0));
    assert_eq!(view.max_rows, logpolicy::ledger::MAX_ROWS);

    // Targets: their callsites' levels, the level in force now, their sums.
    let targets: BTreeMap<&str, _> = view
        .targets
        .iter()
        .map(|t| (t.target.as_str(), t))
        .collect();
    assert_eq!(
        targets.keys().copied().collect::<Vec<_>>(),
        ["app::orders", "shop::cart", "shop::pay"]
    );
    assert_eq!(targets["shop::pay"].levels, [Level::Warn, Level::Info]);
    assert_eq!(targets["shop::pay"].callsites, 2);
    assert_eq!(targets["shop::cart"].callsites, 1);
    assert_eq!(
        targets["shop::cart"].counts.bytes,
        file_has("shop::cart", "info").1
    );
    assert_eq!(targets["shop::cart"].level_now, Level::Info);
    assert_eq!(targets["shop::pay"].level_now, Level::Warn);
    assert_eq!(targets["app::orders"].counts.sampled, 30);
    assert_eq!(json["targets"][0]["levelNow"], "info");

    // Times: the ledger's start, the read, both as RFC 3339 and as Unix milliseconds.
    for (text, ms, t) in [
        ("startedAt", "startedAtUnixMs", view.started_at),
        ("readAt", "readAtUnixMs", view.read_at),
    ] {
        let parsed = parse_rfc3339(json[text].as_str().unwrap()).unwrap();
        assert_eq!(parsed, t);
        let since = t.duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
        assert_eq!(json[ms].as_u64().unwrap() as u128, since, "{ms}");
    }
    assert!(view.started_at <= view.read_at);

    // Off the pod's loopback: the same rows, totals and targets; a later read.
    std::thread::sleep(Duration::from_millis(5));
    let reduced = send(network, "GET", "/logpolicy/sites", &[], b"");
    assert_eq!(reduced.status, 200, "{reduced:?}");
    let again: SitesView = serde_json::from_str(&reduced.body).unwrap();
    assert_eq!(again.rows, view.rows);
    assert_eq!(again.targets, view.targets);
    assert_eq!(
        (again.totals, again.own, again.other),
        (view.totals, view.own, view.other)
    );
    assert_eq!(again.writer, view.writer);
    assert_eq!(again.started_at, view.started_at);
    assert!(again.read_at > view.read_at, "a second read is later");
    assert!(again.read_at_unix_ms > view.read_at_unix_ms);

    // No field value, whoever asks.
    for body in [&full.body, &reduced.body] {
        for value in [
            SECRET,
            CUSTOMER,
            CART_MESSAGE,
            "order placed",
            "declined",
            "never enabled",
        ] {
            assert!(!body.contains(value), "{value} in {body}");
        }
    }

    // HEAD like GET, without the body; other methods 405; the 404 names the path.
    let head = send(loopback, "HEAD", "/logpolicy/sites", &[], b"");
    assert_eq!((head.status, head.body.as_str()), (200, ""));
    for method in ["PUT", "POST", "DELETE"] {
        let r = send(loopback, method, "/logpolicy/sites", &[], b"{}");
        r.refused(405, "method_not_allowed");
        assert!(
            r.head.to_ascii_lowercase().contains("allow: get, head"),
            "{}",
            r.head
        );
    }
    let reason = send(loopback, "GET", "/logpolicy/site", &[], b"").refused(404, "not_found");
    assert!(reason.contains("/logpolicy/sites"), "{reason}");

    drop(logging);
    let _ = std::fs::remove_dir_all(dir);
}
