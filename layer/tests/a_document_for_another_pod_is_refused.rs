//! A correctly signed document for another pod (uid, name or namespace) gets 403.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin_fixture;

use admin_fixture::{doc_for, Fixture};
use logpolicy::Level;

#[test]
fn a_document_for_another_pod_is_refused() {
    let f = Fixture::new("info");
    let layers = r#"[{"source":"ops/raise","defaultLevel":"debug"}]"#;
    let r = f.signed("PUT", &doc_for("uid-of-another-pod", 1, layers));
    let reason = r.refused(403, "wrong_pod");
    assert!(
        reason.contains("pod.uid") && reason.contains("uid-of-another-pod"),
        "{reason}"
    );

    let renamed = f.doc(1, layers).replace("\"web-1\"", "\"web-2\"");
    assert!(f
        .signed("PUT", &renamed)
        .refused(403, "wrong_pod")
        .contains("pod.name"));

    assert_eq!(f.handle.effective().level_for("app"), Level::Info);
    assert_eq!(f.handle.generation(), 0);
    assert_eq!(f.signed("PUT", &f.doc(1, layers)).status, 200);
}
