//! A pushed layer with `expiresAt` falls back on time by itself: no further request.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin_fixture;

use std::time::{Duration, Instant, SystemTime};

use admin_fixture::Fixture;
use logpolicy::clock::{format_rfc3339, parse_rfc3339};
use logpolicy::Level;

#[test]
fn a_pushed_layer_expires_without_another_request() {
    let f = Fixture::new("info");
    f.install_global();
    let expires = SystemTime::now() + Duration::from_millis(400);
    let layers = format!(
        r#"[{{"source":"ops/raise","priority":10,"expiresAt":"{}","targets":[{{"target":"shop","level":"trace"}}]}}]"#,
        format_rfc3339(expires)
    );
    let r = f.signed("PUT", &f.doc(1, &layers));
    assert_eq!(r.status, 200, "{r:?}");
    let v = r.json();
    assert_eq!(
        v["effective"]["directives"],
        "info,shop=trace,@always_keep=warn"
    );
    // The layer ends `expiresAt - issuedAt` after the pod received it (on the pod's
    // clock): here, within a few milliseconds of `expires`, never before.
    let next = parse_rfc3339(v["nextExpiry"].as_str().unwrap()).unwrap();
    assert!(
        next >= expires && next < expires + Duration::from_millis(300),
        "{v}"
    );
    assert_eq!(v["afterNextExpiry"]["directives"], "info,@always_keep=warn");
    assert_eq!(v["layers"][1]["active"], true);
    assert_eq!(f.handle.effective().level_for("shop::db"), Level::Trace);
    tracing::trace!(target: "shop::db", "raised");
    assert_eq!(f.lines.count.load(std::sync::atomic::Ordering::Relaxed), 1);

    let start = Instant::now();
    while f.handle.effective().level_for("shop::db") != Level::Info {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the layer did not expire"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(SystemTime::now() >= expires);
    let before = f.lines.count.load(std::sync::atomic::Ordering::Relaxed);
    tracing::debug!(target: "shop::db", "after expiry");
    tracing::info!(target: "shop::db", "still written");
    assert_eq!(
        f.lines.count.load(std::sync::atomic::Ordering::Relaxed) - before,
        1
    );
    let v = f.policy_json();
    assert_eq!(v["nextExpiry"], serde_json::Value::Null);
    assert_eq!(v["layers"][1]["active"], false);
    // The document is still held: an older version is still refused.
    assert_eq!(v["document"]["version"], 1);
}
