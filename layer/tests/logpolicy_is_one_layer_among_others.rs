//! Logpolicy composes with other layers and keeps everything it does:
//! - `Builder::layer()` under a subscriber the user builds (with their own counting
//!   layer): the policy's levels filter the whole subscriber, the byte budget and the
//!   write counts work (the format is linked to the policy), `log` records are bridged,
//!   the admin endpoint serves the ledger, and the in-band warning about the admin
//!   settings is written;
//! - `Builder::with_layer()` adds a layer to the subscriber `build()` makes;
//! - a `FormatLayer` composed by hand without `with_policy` is only a formatter, as its
//!   documentation says (a section the test checks is there): no byte budget, no write
//!   counts; linked, it has both.
//!
//! (With OpenTelemetry: `trace_ids_in_lines_are_the_exported_spans.rs`, feature
//! `opentelemetry`.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};

use logpolicy::admin::AdminConfig;
use logpolicy::writer::{Output, WriterConfig};
use logpolicy::{Builder, Format, FormatLayer, PolicyFilter};
use serde_json::Value;
use tracing::Level;
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;

/// A field value that makes one line spend a second's budget of 1,024 bytes.
static PAD: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| "x".repeat(1200));

/// A user's own layer: counts the events it sees, per level.
#[derive(Clone, Default)]
struct Count(Arc<Mutex<Vec<Level>>>);

impl<S: tracing::Subscriber> Layer<S> for Count {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        self.0.lock().unwrap().push(*event.metadata().level());
    }
}

impl Count {
    fn seen(&self) -> Vec<Level> {
        self.0.lock().unwrap().clone()
    }
}

/// The JSON lines of `path`.
fn lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn get(addr: std::net::SocketAddr, path: &str) -> String {
    let mut c = TcpStream::connect(addr).unwrap();
    write!(
        c,
        "GET {path} HTTP/1.1\r\nhost: pod\r\nconnection: close\r\n\r\n"
    )
    .unwrap();
    let mut s = String::new();
    c.read_to_string(&mut s).unwrap();
    s
}

#[test]
fn as_a_layer_under_the_users_subscriber_it_keeps_everything_init_gives() {
    let dir = common::fresh_dir("one-layer-among-others");
    let out = dir.join("out.log");
    // No pod identity: the endpoint starts and refuses pushes, and says so in-band.
    let admin =
        AdminConfig::waiting_for_keys_file("127.0.0.1:0".parse().unwrap(), dir.join("keys"));
    let (layer, logging) = Builder::new()
        .directives("info,shop::db=warn,@max_bytes_per_second=1024")
        .format(Format::Json)
        .writer(WriterConfig::new(Output::File(out.clone())))
        .admin(admin)
        .layer()
        .unwrap();
    let count = Count::default();
    let subscriber = tracing_subscriber::registry()
        .with(count.clone())
        .with(layer);
    let sites = tracing::subscriber::with_default(subscriber, || {
        tracing::info!(target: "shop::http", pad = PAD.as_str(), "the first line takes the second's budget");
        tracing::info!(target: "shop::http", "held back by the byte budget");
        tracing::debug!(target: "shop::http", "disabled by the policy");
        tracing::info!(target: "shop::db", "disabled: shop::db is warn");
        tracing::error!(target: "shop::db", "an error: never held back by the budget");
        log::warn!(target: "legacy", "a log record, through the bridge");
        get(logging.admin_addr().unwrap(), "/logpolicy/sites")
    });

    // The user's layer saw what the policy enables, and only that.
    assert_eq!(
        count.seen(),
        [Level::INFO, Level::INFO, Level::ERROR, Level::WARN]
    );
    let stats = logging.handle().stats();
    assert_eq!(stats.level(&Level::INFO).written, 1, "{stats:?}");
    assert_eq!(stats.level(&Level::INFO).budget, 1, "{stats:?}");
    assert_eq!(stats.level(&Level::ERROR).written, 1, "{stats:?}");
    assert!(sites.starts_with("HTTP/1.1 200"), "{sites}");
    let body: Value = serde_json::from_str(sites.split_once("\r\n\r\n").unwrap().1).unwrap();
    let targets: Vec<&str> = body["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|row| row["target"].as_str())
        .collect();
    assert!(targets.contains(&"shop::http"), "{body}");
    logging.finish();

    let lines = lines(&out);
    let messages: Vec<&str> = lines.iter().filter_map(|l| l["msg"].as_str()).collect();
    assert!(
        lines[0]["target"] == "logpolicy" && lines[0]["level"] == "WARN",
        "the admin settings' warning first: {messages:?}"
    );
    let ours: Vec<&str> = lines
        .iter()
        .filter(|l| l["target"] != "logpolicy")
        .filter_map(|l| l["msg"].as_str())
        .collect();
    assert_eq!(
        ours,
        [
            "the first line takes the second's budget",
            "an error: never held back by the budget",
            "a log record, through the bridge"
        ],
        "{messages:?}"
    );
}

#[test]
fn a_layer_given_to_the_builder_sees_what_the_policy_enables() {
    let count = Count::default();
    let out = common::fresh_dir("with-layer").join("out.log");
    let (dispatch, logging) = Builder::new()
        .directives("info")
        .format(Format::Json)
        .writer(WriterConfig::new(Output::File(out.clone())))
        .with_layer(count.clone())
        .build()
        .unwrap();
    tracing::dispatcher::with_default(&dispatch, || {
        tracing::info!(target: "shop::http", "one");
        tracing::trace!(target: "shop::http", "disabled");
        tracing::warn!(target: "shop::payment", "two");
    });
    assert_eq!(count.seen(), [Level::INFO, Level::WARN]);
    // Events written (the writer's count would also hold the exit line naming the top
    // callsites, when the writer thread wrote the events before it).
    assert_eq!(logging.handle().stats().total().written, 2);
    logging.finish();
    // The exit line is written after what was queued, and counts both lines.
    let lines = lines(&out);
    let exit = lines.last().unwrap();
    assert_eq!(exit["msg"], "bytes written by callsite", "{lines:?}");
    let total: u64 = exit["lines"]
        .as_object()
        .unwrap()
        .values()
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert_eq!(total, 2, "{exit}");

    // A builder given layers cannot also be a layer of someone else's subscriber: the
    // layers would be lost, so it says so.
    let err = Builder::new()
        .with_layer(Count::default())
        .layer::<tracing_subscriber::Registry>()
        .map(|_| ())
        .unwrap_err();
    assert!(err.to_string().contains("with Builder::layer"), "{err}");
}

#[test]
fn a_format_layer_composed_by_hand_is_only_a_formatter_and_says_so() {
    // The documentation says so where a reader of `FormatLayer` looks.
    let docs = include_str!("../src/format/mod.rs");
    assert!(
        docs.contains("/// # Made by hand, it is only a formatter")
            && docs.contains("/// Logpolicy is [`Builder::layer`](crate::Builder::layer)"),
        "FormatLayer's documentation lost its section on hand composition"
    );

    // And what it says holds: unlinked, no byte budget and no write counts.
    let run = |linked: bool| {
        let filter = PolicyFilter::from_directives("info,@max_bytes_per_second=1024").unwrap();
        let handle = filter.handle();
        let out = Arc::new(Mutex::new(Vec::<u8>::new()));
        let mut format = FormatLayer::new(Format::Json, out.clone());
        if linked {
            format = format.with_policy(&filter);
        }
        let subscriber = tracing_subscriber::registry().with(filter).with(format);
        tracing::subscriber::with_default(subscriber, || {
            for i in 0..3 {
                tracing::info!(target: "shop::http", i, pad = PAD.as_str(), "served");
            }
        });
        let written = String::from_utf8(out.lock().unwrap().clone())
            .unwrap()
            .lines()
            .count();
        (written, handle.stats().level(&Level::INFO))
    };
    let (written, counts) = run(false);
    assert_eq!((written, counts.written, counts.budget), (3, 0, 0));
    let (written, counts) = run(true);
    assert_eq!((written, counts.written, counts.budget), (1, 1, 2));
}
