//! A signed body that is not JSON gets 400; JSON that is not a valid document gets 422
//! naming the field (`layers[1].targets[0].level: invalid level "verbose" ...`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin_fixture;

use admin_fixture::Fixture;
use logpolicy::Level;

#[test]
fn malformed_and_invalid_documents_are_refused_with_the_field_named() {
    let f = Fixture::new("info");
    for body in ["", "{", "{\"pod\":", "not json at all", "\u{0}\u{1}"] {
        f.signed("PUT", body).refused(400, "malformed_json");
    }
    let cases = [
        (f.doc(1, r#"[{"source":"a/b"},{"source":"c/d","targets":[{"target":"shop","level":"verbose"}]}]"#),
         r#"layers[1].targets[0].level: invalid level "verbose""#),
        (f.doc(1, r#"[{"source":"a/b","sampling":[{"target":"x","keepOneIn":0}]}]"#),
         "layers[0].sampling[0].keepOneIn: keepOneIn 0 is out of range"),
        (f.doc(1, r#"[{"source":"a/b","colour":"red"}]"#), "layers[0].colour: unknown field `colour`"),
        (f.doc(1, r#"[{"source":"env","defaultLevel":"trace"}]"#), "layers[0].source: source \"env\" is reserved"),
        (f.doc(1, r#"[{"source":"a/b","expiresAt":"tomorrow"}]"#), "layers[0].expiresAt: invalid RFC 3339 timestamp"),
        (f.doc(1, r#"[{"source":"a/b"},{"source":"a/b"}]"#), "layers: duplicate layer source"),
        (f.doc(1, r#"[{"source":"a/b","targets":[{"target":"shop payment","level":"debug"}]}]"#), "layers[0].targets[0].target:"),
        (r#"{"pod":{"namespace":"shop","name":"web-1","uid":"x"},"version":"7","issuedAt":"2026-11-29T20:06:15Z"}"#.to_owned(), "version: invalid type"),
        (r#"[1,2,3]"#.to_owned(), "[0]: invalid type: integer `1`, expected struct PodRef"),
    ];
    for (body, expected) in &cases {
        let reason = f.signed("PUT", body).refused(422, "invalid_document");
        assert!(
            reason.starts_with(expected),
            "{reason:?} should start with {expected:?}"
        );
    }
    // DELETE takes no layers.
    let reason = f
        .signed("DELETE", &f.doc(1, r#"[{"source":"a/b"}]"#))
        .refused(422, "invalid_document");
    assert!(reason.starts_with("layers:"), "{reason}");

    assert_eq!(f.handle.generation(), 0);
    assert_eq!(f.handle.effective().level_for("shop"), Level::Info);
}
