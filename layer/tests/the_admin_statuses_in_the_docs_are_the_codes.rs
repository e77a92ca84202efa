//! The admin endpoint's documented answers are the ones its code gives. This reads the
//! status table of `logpolicy::admin` (`| status | `error` | when |`) and every
//! "NNN `reason`" written in the endpoint's docs (the module's, docs/admin-endpoint.md),
//! and the pairs the code answers with (`Reply::error(NNN, "reason", ..)`,
//! `Reply::conflict` for 409, the signature's codes for 401, the canned 503s), and
//! fails on a pair documented that the code never answers, or a pair the code answers
//! that the table does not list.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::Path;

type Pairs = BTreeSet<(u16, String)>;

fn read(rel: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(root.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// `reason` codes in backquotes in `cell`.
fn codes(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .filter(|c| !c.is_empty() && c.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
        .map(str::to_owned)
        .collect()
}

/// The rows of the status table in the docs of `logpolicy::admin`.
fn table() -> Pairs {
    let docs = read("src/admin/mod.rs");
    let mut pairs = Pairs::new();
    let mut in_table = false;
    for line in docs.lines() {
        let line = line.trim_start_matches("//!").trim();
        if line.starts_with("| status | `error` | when |") {
            in_table = true;
            continue;
        }
        if in_table && !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if let (true, Some(Ok(status))) = (in_table, cells.get(1).map(|c| c.parse::<u16>())) {
            for code in codes(cells[2]) {
                pairs.insert((status, code));
            }
        }
    }
    assert!(pairs.len() > 15, "the table was found: {pairs:?}");
    pairs
}

/// Every "NNN `code`" in `text` (a status, then a backquoted code).
fn mentioned(text: &str) -> Pairs {
    let mut pairs = Pairs::new();
    let words: Vec<&str> = text.split_whitespace().collect();
    for w in words.windows(2) {
        let status = w[0].trim_start_matches('(');
        let Ok(status) = status.parse::<u16>() else {
            continue;
        };
        if !(400..600).contains(&status) {
            continue;
        }
        if let Some(code) = codes(w[1]).into_iter().next() {
            if w[1].starts_with('`') {
                pairs.insert((status, code));
            }
        }
    }
    pairs
}

/// The pairs the code answers with.
fn answered() -> Pairs {
    let mut pairs = Pairs::new();
    for file in [
        "src/admin/service.rs",
        "src/admin/server.rs",
        "src/admin/metrics.rs",
    ] {
        let code: String = read(file)
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join(" ");
        let compact: String = code.split_whitespace().collect::<Vec<_>>().join("");
        for (at, _) in compact.match_indices("Reply::error(") {
            let rest = &compact[at + "Reply::error(".len()..];
            let mut parts = rest.splitn(3, ',');
            let (Some(status), Some(reason)) = (parts.next(), parts.next()) else {
                continue;
            };
            let (Ok(status), Some(reason)) = (
                status.parse::<u16>(),
                reason.strip_prefix('"').and_then(|r| r.strip_suffix('"')),
            ) else {
                continue; // `Reply::error(401, e.code(), ..)`: the signature's codes below
            };
            pairs.insert((status, reason.to_owned()));
        }
        for (at, _) in compact.match_indices("Reply::conflict(\"") {
            let rest = &compact[at + "Reply::conflict(\"".len()..];
            pairs.insert((409, rest[..rest.find('"').unwrap()].to_owned()));
        }
        for (at, _) in compact.match_indices("HTTP/1.1") {
            let status: u16 = compact[at + 8..at + 11].parse().unwrap();
            let body = &compact[at..];
            let key = "{\\\"error\\\":\\\"";
            let start = body.find(key).unwrap() + key.len();
            let code = &body[start..start + body[start..].find('\\').unwrap()];
            pairs.insert((status, code.to_owned()));
        }
    }
    // `Reply::error(401, e.code(), ..)` for a signature that does not verify.
    let service = read("src/admin/service.rs");
    assert!(service.contains("Reply::error(401, e.code(), e.to_string())"));
    for line in read("src/wire/signature.rs").lines() {
        if let Some((_, code)) = line.split_once("=> \"") {
            if line.trim_start().starts_with("VerifyError::") {
                pairs.insert((401, code.trim_end_matches(['"', ',']).to_owned()));
            }
        }
    }
    pairs
}

#[test]
fn every_documented_status_and_reason_is_what_the_code_answers() {
    let table = table();
    let answered = answered();
    // Answers the table leaves out on purpose: a failure of the endpoint itself.
    let unlisted: Pairs = [(500, "metrics_failed".to_owned())].into();
    let missing: Vec<_> = table.difference(&answered).collect();
    assert!(
        missing.is_empty(),
        "documented, never answered: {missing:?}"
    );
    let undocumented: Vec<_> = answered
        .difference(&table)
        .filter(|p| !unlisted.contains(p))
        .collect();
    assert!(
        undocumented.is_empty(),
        "answered, not in the table: {undocumented:?}"
    );
    for (name, text) in [
        ("src/admin/mod.rs", read("src/admin/mod.rs")),
        ("docs/admin-endpoint.md", read("../docs/admin-endpoint.md")),
        ("src/admin/config.rs", read("src/admin/config.rs")),
    ] {
        let wrong: Vec<_> = mentioned(&text).difference(&table).cloned().collect();
        assert!(
            wrong.is_empty(),
            "{name} names answers the table does not: {wrong:?}"
        );
    }
}
