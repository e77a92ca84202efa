//! `maxBytesPerSecond` caps the bytes written per second by events below `alwaysKeep`;
//! what is over is dropped (never formatted) and counted; `alwaysKeep` events always pass
//! and are charged; the budget refills with time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use support::Harness;
use tracing::Level;

#[test]
fn caps_info_and_keeps_every_error() {
    let h = Harness::new("info,@max_bytes_per_second=4096");
    let flood = || {
        for i in 0..200 {
            tracing::info!(target: "shop::http", i, path = "/api/cart/42", "served");
            if i % 20 == 0 {
                tracing::error!(target: "shop::http", i, "failed");
            }
        }
    };
    h.run(flood);
    let bytes: usize = {
        let out = h.out.lock().unwrap();
        out.len()
    };
    let s = h.handle.stats();
    let info = s.level(&Level::INFO);
    assert_eq!(info.emitted(), 200);
    assert!(info.budget > 150, "{info:?}");
    assert_eq!(s.level(&Level::ERROR).written, 10);
    // A second's budget (plus at most one line of debt) and the errors: no more.
    assert!(bytes < 4096 + 200 + 10 * 200, "{bytes}");

    // Half a second later, about half a second's worth more.
    h.clock.advance(Duration::from_millis(500));
    let before = info.written;
    h.run(flood);
    let after = h.handle.stats().level(&Level::INFO).written;
    let more = after - before;
    assert!(
        (10..=16).contains(&more),
        "{more} more lines after 0.5 s at ~150 bytes a line"
    );
}
