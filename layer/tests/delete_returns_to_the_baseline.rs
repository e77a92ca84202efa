//! A signed DELETE removes every pushed layer and keeps the baseline.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin_fixture;

use admin_fixture::{sources, Fixture};
use logpolicy::{Level, PolicyLayer};

#[test]
fn delete_returns_to_the_baseline() {
    let f = Fixture::new("info,shop::db=warn");
    let layers = r#"[{"source":"ops/a","priority":5,"defaultLevel":"debug"},
                     {"source":"ops/b","priority":9,"targets":[{"target":"shop::db","level":"trace"}]}]"#;
    assert_eq!(f.signed("PUT", &f.doc(1, layers)).status, 200);
    assert_eq!(f.handle.effective().level_for("shop::db"), Level::Trace);
    assert_eq!(f.handle.policy().layers().len(), 3);

    // A later PUT replaces the pushed layers, it does not add to them.
    let one = r#"[{"source":"ops/c","targets":[{"target":"shop::http","level":"debug"}]}]"#;
    assert_eq!(f.signed("PUT", &f.doc(2, one)).status, 200);
    assert_eq!(sources(&f.handle), ["env", "ops/c"]);

    // A layer added in-process is a pushed layer too: DELETE removes it.
    f.handle
        .upsert_layer(PolicyLayer::new("local/x", 1, "trace".parse().unwrap()).unwrap())
        .unwrap();
    let r = f.signed("DELETE", &f.doc(3, "[]"));
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        r.json()["effective"]["directives"],
        "info,shop::db=warn,@always_keep=warn"
    );
    assert_eq!(sources(&f.handle), ["env"]);
    assert_eq!(f.handle.effective().level_for("shop::db"), Level::Warn);

    // Without a layers field at all, too; and versioned like a PUT.
    let bare = f.doc(4, "[]").replace(r#","layers":[]"#, "");
    assert!(!bare.contains("layers"), "{bare}");
    assert_eq!(f.signed("DELETE", &bare).status, 200);
    f.signed("DELETE", &f.doc(2, "[]"))
        .refused(409, "stale_version");
}
