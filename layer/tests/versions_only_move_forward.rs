//! A replayed older version gets 409; the same version again with identical content is
//! an idempotent 200 that changes nothing; the same version with other content is 409.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin_fixture;

use admin_fixture::Fixture;
use logpolicy::Level;

#[test]
fn versions_only_move_forward() {
    let f = Fixture::new("info");
    let v5 = f.doc(
        5,
        r#"[{"source":"ops/a","targets":[{"target":"shop","level":"debug"}]}]"#,
    );
    let r = f.signed("PUT", &v5);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["unchanged"], false);
    let generation = f.handle.generation();

    // Identical again (e.g. a retry after a lost response): 200, nothing recompiled.
    let r = f.signed("PUT", &v5);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["unchanged"], true);
    assert_eq!(f.handle.generation(), generation);

    let same_version = f.doc(
        5,
        r#"[{"source":"ops/a","targets":[{"target":"shop","level":"trace"}]}]"#,
    );
    let reason = f
        .signed("PUT", &same_version)
        .refused(409, "version_conflict");
    assert!(reason.contains("version 5"), "{reason}");

    // A replay of an older, genuinely signed document.
    let v4 = f.doc(4, r#"[{"source":"ops/old","defaultLevel":"trace"}]"#);
    let reason = f.signed("PUT", &v4).refused(409, "stale_version");
    assert!(reason.contains("4") && reason.contains("5"), "{reason}");
    f.signed("DELETE", &f.doc(3, "[]"))
        .refused(409, "stale_version");

    assert_eq!(f.handle.generation(), generation);
    assert_eq!(f.handle.effective().level_for("shop::db"), Level::Debug);
    assert_eq!(f.policy_json()["document"]["version"], 5);

    let v6 = f.doc(
        6,
        r#"[{"source":"ops/a","targets":[{"target":"shop","level":"trace"}]}]"#,
    );
    assert_eq!(f.signed("PUT", &v6).status, 200);
    assert_eq!(f.handle.effective().level_for("shop::db"), Level::Trace);
}
