//! The committed CRD is what the types generate: a change to `crd.rs` without
//! regenerating `crds/` fails here.

use std::path::Path;

#[test]
fn committed_crd_matches_the_types() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(logpolicy_api::crd::CRD_FILE);
    let committed =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let generated = logpolicy_api::crd::crd_yaml().unwrap();
    // Compare as data first, for a readable failure, then byte for byte.
    let as_json = |y: &str| {
        serde_json::to_value(serde_yaml::from_str::<serde_yaml::Value>(y).unwrap()).unwrap()
    };
    assert_eq!(
        as_json(&committed),
        as_json(&generated),
        "{} is out of date: run `cargo run -p logpolicy-api --bin crdgen > {}`",
        logpolicy_api::crd::CRD_FILE,
        logpolicy_api::crd::CRD_FILE
    );
    assert_eq!(
        committed,
        generated,
        "{} differs in formatting: regenerate it",
        logpolicy_api::crd::CRD_FILE
    );
}
