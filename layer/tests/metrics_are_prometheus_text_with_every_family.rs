//! `GET /metrics` is OpenMetrics text that parses, and names every family: events by
//! level and outcome, writer bytes, queue and drops, policy version, generation and
//! next expiry, admin requests by status, and whether the endpoint can accept a push.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, SystemTime};

use logpolicy::admin::{AdminConfig, AdminServer};
use logpolicy::clock::format_rfc3339;
use logpolicy::wire::{self, SigningKey, TrustedKeys};
use logpolicy::writer::{Output, Writer, WriterConfig};
use logpolicy::{Format, FormatLayer, PolicyFilter};
use tracing_subscriber::prelude::*;

fn http(addr: std::net::SocketAddr, req: &str) -> (u16, String, String) {
    let mut c = TcpStream::connect(addr).unwrap();
    c.write_all(req.as_bytes()).unwrap();
    let mut s = String::new();
    c.read_to_string(&mut s).unwrap();
    let (head, body) = s.split_once("\r\n\r\n").unwrap();
    (
        head[9..12].parse().unwrap(),
        head.to_owned(),
        body.to_owned(),
    )
}

/// Parses sample lines `name{labels} value` into name+labels → value; checks the
/// comments and the closing `# EOF`.
fn parse(text: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    let mut lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.pop(), Some("# EOF"));
    for line in lines {
        if let Some(rest) = line.strip_prefix("# ") {
            let kind = rest.split(' ').next().unwrap();
            assert!(["HELP", "TYPE", "UNIT"].contains(&kind), "{line}");
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line}"));
        let name_end = series.find('{').unwrap_or(series.len());
        let name = &series[..name_end];
        assert!(
            name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "{line}"
        );
        if name_end < series.len() {
            assert!(series.ends_with('}'), "{line}");
        }
        let v: f64 = value.parse().unwrap_or_else(|_| panic!("{line}"));
        out.insert(series.to_owned(), v);
    }
    out
}

#[test]
fn metrics_are_prometheus_text_with_every_family() {
    let file = std::env::temp_dir().join(format!("metrics-test-{}.log", std::process::id()));
    let (writer, guard) = Writer::new(WriterConfig::new(Output::File(file.clone()))).unwrap();
    let filter = PolicyFilter::from_directives("info,@sample(shop::http)=1/10").unwrap();
    let dispatch = tracing::Dispatch::new(
        tracing_subscriber::registry()
            .with(filter.clone())
            .with(FormatLayer::new(Format::Json, writer.clone()).with_policy(&filter)),
    );
    let key = SigningKey::from_bytes(&[3; 32]);
    let admin = AdminServer::start(
        AdminConfig::new(
            "127.0.0.1:0".parse().unwrap(),
            TrustedKeys::new([key.verifying_key()]),
        )
        .any_pod(),
        filter.handle(),
        Some(writer.clone()),
    )
    .unwrap();
    tracing::dispatcher::with_default(&dispatch, || {
        for i in 0..100 {
            tracing::info!(target: "shop::http", i, "served");
        }
        tracing::error!(target: "shop::payment", "failed");
    });
    assert!(writer.flush(Duration::from_secs(5)));

    let expires = format_rfc3339(SystemTime::now() + Duration::from_secs(600));
    let issued = format_rfc3339(SystemTime::now());
    let body = format!(
        r#"{{"pod":{{"namespace":"a","name":"b","uid":"c"}},"version":17,"issuedAt":"{issued}","layers":[{{"source":"ops/x","expiresAt":"{expires}","defaultLevel":"debug"}}]}}"#
    );
    let req = format!(
        "PUT /logpolicy HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n{}: {}\r\n\r\n{body}",
        body.len(),
        wire::SIGNATURE_HEADER,
        wire::sign(body.as_bytes(), &key)
    );
    assert_eq!(http(admin.local_addr(), &req).0, 200);
    // The push wrote the line saying `ops/x` started applying.
    assert!(writer.flush(Duration::from_secs(5)));
    assert_eq!(filter.handle().stats().policy_lines, 1);
    assert_eq!(
        http(admin.local_addr(), "GET /nope HTTP/1.1\r\nhost: x\r\n\r\n").0,
        404
    );

    let (status, head, text) = http(
        admin.local_addr(),
        "GET /metrics HTTP/1.1\r\nhost: x\r\n\r\n",
    );
    assert_eq!(status, 200);
    assert!(head.contains("application/openmetrics-text"), "{head}");
    let m = parse(&text);
    let get = |k: &str| *m.get(k).unwrap_or_else(|| panic!("no {k} in\n{text}"));
    assert_eq!(
        get(r#"logpolicy_events_total{level="info",outcome="written"}"#),
        10.0
    );
    assert_eq!(
        get(r#"logpolicy_events_total{level="info",outcome="sampled"}"#),
        90.0
    );
    assert_eq!(
        get(r#"logpolicy_events_total{level="error",outcome="written"}"#),
        1.0
    );
    assert_eq!(
        get(r#"logpolicy_events_total{level="debug",outcome="budget"}"#),
        0.0
    );
    assert_eq!(get(r#"logpolicy_events_held{level="info"}"#), 0.0);
    assert!(get("logpolicy_writer_bytes_written_total") > 0.0);
    assert_eq!(get("logpolicy_writer_queue_bytes"), 0.0);
    assert_eq!(
        get(r#"logpolicy_writer_lines_written_total{level="info"}"#),
        11.0,
        "the 10 info events kept, and the line saying ops/x started applying"
    );
    assert_eq!(
        get(r#"logpolicy_writer_dropped_total{level="info",reason="queue_full"}"#),
        0.0
    );
    assert_eq!(get("logpolicy_writer_io_errors_total"), 0.0);
    assert_eq!(get("logpolicy_writer_rotations_total"), 0.0);
    assert_eq!(get("logpolicy_policy_version"), 17.0);
    assert_eq!(
        get("logpolicy_policy_generation"),
        filter.handle().generation() as f64
    );
    assert_eq!(get("logpolicy_policy_active_layers"), 2.0);
    let next = get("logpolicy_policy_next_expiry_timestamp_seconds");
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(next > now + 500.0 && next < now + 700.0, "{next}");
    assert_eq!(get(r#"logpolicy_admin_requests_total{status="200"}"#), 1.0);
    assert_eq!(get(r#"logpolicy_admin_requests_total{status="404"}"#), 1.0);
    assert_eq!(get(r#"logpolicy_admin_requests_total{status="401"}"#), 0.0);
    assert_eq!(get("logpolicy_admin_trusted_keys"), 1.0);
    for reason in ["no_trusted_keys", "no_pod_identity"] {
        let series = format!(r#"logpolicy_admin_push_blocked{{reason="{reason}"}}"#);
        assert_eq!(get(&series), 0.0, "{series}");
    }

    drop(admin);
    drop(guard);
    let _ = std::fs::remove_file(file);
}
