//! Unknown paths get 404, other methods on known paths 405 with `Allow`; both JSON.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin_fixture;

use admin_fixture::Fixture;

#[test]
fn unknown_paths_and_methods_are_refused() {
    let f = Fixture::new("info");
    for path in ["/", "/logpolicy/", "/admin", "/metrics/x", "/../etc/passwd"] {
        f.get(path).refused(404, "not_found");
    }
    let r = f.send("POST", "/logpolicy", &[], "{}");
    r.refused(405, "method_not_allowed");
    assert!(
        r.head
            .to_ascii_lowercase()
            .contains("allow: get, head, put, delete"),
        "{}",
        r.head
    );
    f.send("PUT", "/metrics", &[], "")
        .refused(405, "method_not_allowed");
    f.send("DELETE", "/healthz", &[], "")
        .refused(405, "method_not_allowed");
    assert_eq!(f.get("/healthz").json()["status"], "ok");
    assert_eq!(f.get("/logpolicy?pretty").status, 200);
}
