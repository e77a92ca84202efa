//! Unsigned, garbled, untrusted and tampered pushes get 401 with the reason, and change
//! nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin_fixture;

use admin_fixture::Fixture;
use logpolicy::wire::{self, SigningKey};
use logpolicy::Level;

#[test]
fn pushes_without_a_trusted_signature_are_refused() {
    let f = Fixture::new("info");
    let body = f.doc(1, r#"[{"source":"ops/raise","defaultLevel":"trace"}]"#);
    let before = f.handle.generation();

    let r = f.send("PUT", "/logpolicy", &[], &body);
    assert!(r
        .refused(401, "missing_signature")
        .contains("x-logpolicy-signature"));

    for garbled in [
        "",
        "ed25519",
        "rsa=abc:def",
        "ed25519=nothex!!nothex!!:AAAA",
        "ed25519=0011223344556677:%%%",
    ] {
        let r = f.send(
            "PUT",
            "/logpolicy",
            &[(wire::SIGNATURE_HEADER, garbled)],
            &body,
        );
        r.refused(401, "malformed_signature");
    }

    let stranger = SigningKey::from_bytes(&[7; 32]);
    let header = wire::sign(body.as_bytes(), &stranger);
    let r = f.send(
        "PUT",
        "/logpolicy",
        &[(wire::SIGNATURE_HEADER, &header)],
        &body,
    );
    let reason = r.refused(401, "untrusted_key");
    assert!(
        reason.contains(&wire::key_id(&stranger.verifying_key()).to_string()),
        "{reason}"
    );

    // Signed by the trusted key, then one byte changed on the way.
    let header = wire::sign(body.as_bytes(), &f.key);
    let tampered = body.replace("trace", "debug");
    let r = f.send(
        "PUT",
        "/logpolicy",
        &[(wire::SIGNATURE_HEADER, &header)],
        &tampered,
    );
    r.refused(401, "bad_signature");
    // A valid signature of another document does not carry over either.
    let other = f.doc(2, "[]");
    let r = f.send(
        "PUT",
        "/logpolicy",
        &[(
            wire::SIGNATURE_HEADER,
            &wire::sign(other.as_bytes(), &f.key),
        )],
        &body,
    );
    r.refused(401, "bad_signature");
    // DELETE is signed too.
    let r = f.send("DELETE", "/logpolicy", &[], &f.doc(3, "[]"));
    r.refused(401, "missing_signature");

    assert_eq!(f.handle.generation(), before);
    assert_eq!(f.handle.effective().level_for("app"), Level::Info);
    assert_eq!(f.policy_json()["document"], serde_json::Value::Null);

    // The real thing still works.
    assert_eq!(f.signed("PUT", &body).status, 200);
    assert_eq!(f.handle.effective().level_for("app"), Level::Trace);
}
