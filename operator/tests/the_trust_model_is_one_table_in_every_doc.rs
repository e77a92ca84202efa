//! The trust model (who can reach which endpoint, with what) is one table, the same in
//! the admin endpoint's docs, the operator's README and the chart's README; and it
//! names every flag and variable that narrows it, each of which exists.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure is a test failure

use std::path::Path;

const HEADING: &str = "## Who can reach what\n";
const DOCS: &[&str] = &[
    "docs/admin-endpoint.md",
    "operator/README.md",
    "charts/logpolicy-operator/README.md",
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// What follows [`HEADING`] in `text`, up to the end of the first table after it.
fn section(path: &str, text: &str) -> String {
    let start = text
        .find(HEADING)
        .unwrap_or_else(|| panic!("{path} has no {HEADING:?}"));
    let mut out = Vec::new();
    let mut in_table = false;
    for line in text[start + HEADING.len()..].lines() {
        let row = line.starts_with('|');
        if in_table && !row {
            break;
        }
        in_table |= row;
        out.push(line);
    }
    out.join("\n").trim().to_owned()
}

#[test]
fn the_same_table_is_in_every_doc() {
    let first = section(DOCS[0], &read(DOCS[0]));
    assert!(
        first.lines().filter(|l| l.starts_with("| ")).count() > 10,
        "{first}"
    );
    for doc in &DOCS[1..] {
        assert_eq!(
            section(doc, &read(doc)),
            first,
            "{doc} differs from {}",
            DOCS[0]
        );
    }
}

#[test]
fn what_narrows_an_endpoint_exists() {
    let table = section(DOCS[0], &read(DOCS[0]));
    let operator = read("operator/src/flags.rs");
    let layer = read("layer/src/admin/config.rs");
    let values = read("charts/logpolicy-operator/values.yaml");
    for flag in ["--metrics-secure", "--trust-loopback", "--pods-view"] {
        assert!(table.contains(flag), "{flag}");
        let field = flag.trim_start_matches("--").replace('-', "_");
        assert!(
            operator.contains(&format!("    pub {field}:")),
            "{flag} is no flag of the operator"
        );
    }
    for var in ["LOGPOLICY_ADMIN_VIEWS", "LOGPOLICY_ADMIN_TRUST_LOOPBACK"] {
        assert!(table.contains(var), "{var}");
        assert!(
            layer.contains(&format!("\"{var}\"")),
            "{var} is read nowhere"
        );
    }
    for value in [
        "workloadNetworkPolicy",
        "metricsFrom",
        "secretName",
        "audiences",
        "namespaces",
    ] {
        assert!(table.contains(value), "{value}");
        assert!(
            values.contains(&format!("{value}:")),
            "{value} is no chart value"
        );
    }
}
