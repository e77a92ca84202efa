//! `GET /logpolicy` from a peer off the pod's loopback (another pod, the API server's
//! pod proxy, the operator) shows what is in force and since when; each layer's
//! settings and reason and the pod's identity only reach a peer on loopback (a process
//! of the pod, `kubectl port-forward`). Real sockets: the endpoint listens on every
//! address and is asked over loopback and over this machine's own non-loopback address.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin_fixture;

use std::net::{IpAddr, SocketAddr, UdpSocket};

use admin_fixture::{doc_for, pod_config_on, put_signed, send, POD_UID};
use logpolicy::admin::AdminServer;
use logpolicy::wire::{PolicyView, SigningKey, ViewScope};
use logpolicy::PolicyFilter;

/// This machine's address on the interface of its default route (no packet is sent:
/// connecting a UDP socket only picks the route).
fn non_loopback_address() -> IpAddr {
    let s = UdpSocket::bind("0.0.0.0:0").unwrap();
    s.connect("203.0.113.1:9")
        .expect("this test needs a non-loopback IPv4 address with a route (a default route)");
    let ip = s.local_addr().unwrap().ip();
    assert!(!ip.is_loopback() && !ip.is_unspecified(), "{ip}");
    ip
}

const REASON: &str = "INC-4211: card declines for customer 42";

#[test]
fn off_the_pod_the_view_shows_what_is_in_force_not_its_settings() {
    let key = SigningKey::from_bytes(&[7; 32]);
    let filter = PolicyFilter::from_directives("info,@redact=card_number").unwrap();
    let config = pod_config_on("0.0.0.0:0".parse().unwrap(), &key);
    let admin = AdminServer::start(config, filter.handle(), None).unwrap();
    let port = admin.local_addr().port();
    let loopback = SocketAddr::from(([127, 0, 0, 1], port));
    let network = SocketAddr::new(non_loopback_address(), port);

    let layers = format!(
        r#"[{{"source":"shop/debug-payments","priority":10,"reason":"{REASON}",
             "targets":[{{"target":"shop::payment","level":"debug"}}],"redact":["customer_email"]}}]"#
    );
    let pushed = put_signed(loopback, &key, &doc_for(POD_UID, 5, &layers));
    assert_eq!(pushed.status, 200, "{pushed:?}");

    let full = send(loopback, "GET", "/logpolicy", &[], b"");
    let reduced = send(network, "GET", "/logpolicy", &[], b"");
    assert_eq!((full.status, reduced.status), (200, 200));
    let (f, r) = (full.json(), reduced.json());

    // On loopback: everything.
    assert_eq!(f["scope"], "full");
    let raise = &f["layers"][1];
    assert_eq!(raise["source"], "shop/debug-payments");
    assert_eq!(raise["reason"], REASON);
    assert_eq!(raise["targets"][0]["target"], "shop::payment");
    assert_eq!(raise["redact"][0], "customer_email");
    assert_eq!(f["document"]["pod"]["uid"], POD_UID);

    // Off the pod: what is in force, the same as the full view says it.
    assert_eq!(r["scope"], "reduced");
    assert_eq!(r["effective"]["directives"], f["effective"]["directives"]);
    assert_eq!(r["effective"]["sources"], f["effective"]["sources"]);
    for key in ["generation", "nextExpiry", "trustedKeys"] {
        assert_eq!(r[key], f[key], "{key}");
    }
    // The ids of the keys it trusts (not secrets), and its clock, to every viewer.
    let id = logpolicy::wire::key_id(&key.verifying_key()).to_string();
    assert_eq!(r["trustedKeys"], serde_json::json!([id]));
    assert!(r["readAt"].is_string(), "{r}");
    for key in ["version", "issuedAt", "appliedAt"] {
        assert_eq!(r["document"][key], f["document"][key], "document.{key}");
    }
    let layers = r["layers"].as_array().unwrap();
    assert_eq!(layers.len(), f["layers"].as_array().unwrap().len());
    for (r, f) in layers.iter().zip(f["layers"].as_array().unwrap()) {
        for key in ["source", "priority", "expiresAt", "active"] {
            assert_eq!(r[key], f[key], "layers[].{key}");
        }
    }
    // Not its settings, its reason, or whom it was signed for. (The effective
    // directives name the redacted fields: they are in force.)
    assert!(r["effective"]["targets"].is_null() && r["layers"][1]["targets"].is_null());
    for secret in [REASON, POD_UID, "web-1"] {
        assert!(
            !reduced.body.contains(secret),
            "{secret} in {}",
            reduced.body
        );
    }
    assert!(
        reduced.body.len() < full.body.len(),
        "{} vs {}",
        reduced.body.len(),
        full.body.len()
    );

    // What the operator and the plugin read from it is there, in the same type.
    let view: PolicyView = serde_json::from_str(&reduced.body).unwrap();
    assert_eq!(view.scope, ViewScope::Reduced);
    assert_eq!(view.document.map(|d| d.version), Some(5));
    let sources: Vec<_> = view
        .layers
        .iter()
        .map(|l| l.layer.source.as_str())
        .collect();
    assert_eq!(sources, ["env", "shop/debug-payments"]);
    assert!(view.layers[1].active);
}
