//! A pushed document is judged against the pod's own clock, whatever the signer's says:
//! it is accepted only while fresh (a capture replayed later, after a restart too, is
//! refused saying so), a layer lasts `expiresAt - issuedAt` from when the pod received
//! it (a signer ahead or behind changes nothing), an expired or too long-lived layer is
//! refused with a reason, and no version can freeze the later ones out.
//!
//! Clocks are injected: the pod's is a `ManualClock`, the signer's is whatever the test
//! writes into `issuedAt`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin_fixture;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use admin_fixture::{put_signed, Reply};
use logpolicy::admin::{AdminConfig, AdminServer, PodIdentity};
use logpolicy::clock::{parse_rfc3339, Clock, ManualClock};
use logpolicy::policy::LayerSpec;
use logpolicy::wire::{self, PodRef, PolicyDocument, SigningKey, TrustedKeys};
use logpolicy::{Level, Policy, PolicyFilter, PolicyHandle, PolicyLayer};

const S: Duration = Duration::from_secs(1);

struct Pod {
    clock: ManualClock,
    handle: PolicyHandle,
    admin: AdminServer,
    key: SigningKey,
}

fn pod() -> Pod {
    let clock = ManualClock::new(UNIX_EPOCH + Duration::from_secs(1_800_000_000));
    let baseline = PolicyLayer::baseline("info".parse().unwrap());
    let filter = PolicyFilter::with_clock(Policy::new(vec![baseline]), clock.clone());
    start(clock, filter.handle())
}

fn start(clock: ManualClock, handle: PolicyHandle) -> Pod {
    let key = SigningKey::from_bytes(&[3; 32]);
    let config = AdminConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        TrustedKeys::new([key.verifying_key()]),
    )
    .pod(PodIdentity {
        uid: Some("u-1".into()),
        name: Some("web-1".into()),
        namespace: Some("shop".into()),
    });
    let admin = AdminServer::start(config, handle.clone(), None).unwrap();
    Pod {
        clock,
        handle,
        admin,
        key,
    }
}

impl Pod {
    /// Pushes version `version` issued at `issued` (the signer's clock) with one layer
    /// raising `shop` to debug until `expires`.
    fn push(&self, version: u64, issued: SystemTime, expires: Option<SystemTime>) -> Reply {
        let mut layer = LayerSpec::from_directives("shop/raise", 10, "shop=debug".parse().unwrap());
        if let Some(e) = expires {
            layer = layer.expires_at(e);
        }
        let mut doc =
            PolicyDocument::new(PodRef::new("shop", "web-1", "u-1"), version).with_layer(layer);
        doc.issued_at = issued;
        put_signed(self.admin.local_addr(), &self.key, &doc.to_json())
    }

    fn now(&self) -> SystemTime {
        self.clock.now()
    }

    fn level(&self) -> Level {
        self.handle.refresh();
        self.handle.effective().level_for("shop::payment")
    }

    fn advance(&self, by: Duration) {
        self.clock.advance(by);
    }
}

#[test]
fn a_capture_replayed_later_is_refused_saying_so_even_after_a_restart() {
    let p = pod();
    let in_2020 = UNIX_EPOCH + Duration::from_secs(1_600_000_000);
    let r = p.push(1, in_2020, Some(in_2020 + 900 * S));
    let reason = r.refused(422, "not_fresh");
    assert!(
        reason.contains("before this pod's clock") && reason.contains("replayed"),
        "{reason}"
    );
    assert_eq!(p.level(), Level::Info);

    // Captured 10 minutes ago: refused too, and after a restart of the service.
    let ten_minutes_ago = p.now() - 600 * S;
    p.push(2, ten_minutes_ago, Some(p.now() + 900 * S))
        .refused(422, "not_fresh");
    let Pod {
        clock,
        handle,
        admin,
        ..
    } = p;
    drop(admin);
    let p = start(clock, handle);
    p.push(2, ten_minutes_ago, Some(p.now() + 900 * S))
        .refused(422, "not_fresh");
    // A document issued now is accepted.
    assert_eq!(p.push(3, p.now(), Some(p.now() + 900 * S)).status, 200);
    assert_eq!(p.level(), Level::Debug);
    // Issued later than the one held but with an earlier issuedAt: a replay.
    let r = p.push(4, p.now() - 60 * S, Some(p.now() + 900 * S));
    assert!(
        r.refused(409, "older_than_held").contains("a replay"),
        "{r:?}"
    );
}

#[test]
fn a_signer_ahead_or_behind_changes_nothing_about_how_long_a_raise_lasts() {
    // Signer 8 s ahead (a 3 s raise lasted 11 s), 8 s behind (it never applied, and
    // the push answered 200): 3 s on the pod's clock either way.
    for signer_ahead in [true, false] {
        let p = pod();
        let issued = if signer_ahead {
            p.now() + 8 * S
        } else {
            p.now() - 8 * S
        };
        assert_eq!(p.push(1, issued, Some(issued + 3 * S)).status, 200);
        assert_eq!(p.level(), Level::Debug);
        p.advance(2900 * Duration::from_millis(1));
        assert_eq!(p.level(), Level::Debug);
        p.advance(200 * Duration::from_millis(1));
        assert_eq!(p.level(), Level::Info);
    }

    // The pod's clock 120 s fast, a 60 s raise: it takes effect and lasts 60 s.
    let p = pod();
    let issued = p.now() - 120 * S;
    let r = p.push(1, issued, Some(issued + 60 * S));
    assert_eq!(r.status, 200, "{r:?}");
    let next = parse_rfc3339(r.json()["nextExpiry"].as_str().unwrap()).unwrap();
    assert_eq!(next, p.now() + 60 * S);
    p.advance(59 * S);
    assert_eq!(p.level(), Level::Debug);
    p.advance(2 * S);
    assert_eq!(p.level(), Level::Info);

    // The pod's clock 120 s slow, a 20 s raise: 20 s, not 140.
    let p = pod();
    let issued = p.now() + 120 * S;
    assert_eq!(p.push(1, issued, Some(issued + 20 * S)).status, 200);
    p.advance(21 * S);
    assert_eq!(p.level(), Level::Info);
}

#[test]
fn expired_over_long_and_endless_layers_are_refused_with_a_reason() {
    let p = pod();
    let now = p.now();
    let r = p.push(1, now, Some(now - S));
    assert!(
        r.refused(422, "expired").contains("layers[0].expiresAt"),
        "{r:?}"
    );
    let r = p.push(2, now, Some(now + 8 * 86_400 * S));
    let reason = r.refused(422, "lifetime_too_long");
    assert!(
        reason.contains("8d 0h") && reason.contains("7d 0h"),
        "{reason}"
    );
    // Year 9999.
    let far = parse_rfc3339("9999-12-31T23:59:59Z").unwrap();
    p.push(3, now, Some(far)).refused(422, "lifetime_too_long");
    // No expiry at all: it would never end.
    let reason = p.push(4, now, None).refused(422, "no_expiry");
    assert!(
        reason.contains("layers[0].expiresAt: absent") && reason.contains("7d 0h"),
        "{reason}"
    );
    assert_eq!(p.level(), Level::Info);
    // Within the bound: accepted.
    assert_eq!(p.push(5, now, Some(now + 7 * 86_400 * S)).status, 200);
}

#[test]
fn no_version_can_freeze_the_later_ones_out() {
    let p = pod();
    let r = p.push(u64::MAX, p.now(), Some(p.now() + 60 * S));
    assert!(
        r.refused(422, "version_too_large").contains("2^53"),
        "{r:?}"
    );
    p.push(wire::MAX_DOCUMENT_VERSION + 1, p.now(), None)
        .refused(422, "version_too_large");
    assert_eq!(p.push(5, p.now(), Some(p.now() + 60 * S)).status, 200);
    assert_eq!(
        p.push(wire::MAX_DOCUMENT_VERSION, p.now(), Some(p.now() + 60 * S))
            .status,
        200
    );
}
