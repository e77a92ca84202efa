//! The docs name only the reasons the code writes: every `Ready=True|False ... reason X`
//! (and `Applied=`, `Expired=`) in the READMEs, the chart's values and NOTES, the guides
//! and the operator's `--help` text is a reason `status.rs` gives that condition, and
//! every "`X` Event" is a reason `events.rs` records. (The condition reason of an invalid
//! policy is `Invalid`; its Event is `InvalidSpec`: docs mixed the two up once.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::Path;

use regex::Regex;

const DOCS: [&str; 8] = [
    "README.md",
    "operator/README.md",
    "operator/src/flags.rs",
    "api/src/validate.rs",
    "charts/logpolicy-operator/README.md",
    "charts/logpolicy-operator/values.yaml",
    "charts/logpolicy-operator/templates/NOTES.txt",
    "plugin/README.md",
];

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Every file the test reads: the fixed ones and the guides in `docs/`.
fn docs() -> Vec<(String, String)> {
    let mut files: Vec<String> = DOCS.iter().map(|s| (*s).to_owned()).collect();
    for entry in std::fs::read_dir(repo().join("docs")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".md") {
            files.push(format!("docs/{name}"));
        }
    }
    files.into_iter().map(|f| (read(&f), f)).collect()
}

/// The reasons `status.rs` gives each condition: `condition(READY, false, "PodsPending", ..`
/// or, with a reason it names as a constant, `condition(READY, false, INVALID, ..`. The
/// constants are the shared crate's (`api/src/conditions.rs`), which the plugin reads too.
fn condition_reasons() -> BTreeSet<(String, String)> {
    let source = read("operator/src/status.rs");
    let constants: Vec<(String, String)> = Regex::new(r#"pub const (\w+): &str = "(\w+)";"#)
        .unwrap()
        .captures_iter(&read("api/src/conditions.rs"))
        .map(|c| (c[1].to_owned(), c[2].to_owned()))
        .collect();
    let value = |name: &str| {
        constants
            .iter()
            .find(|(k, _)| k == name)
            .unwrap_or_else(|| panic!("conditions.rs has no `pub const {name}: &str`"))
            .1
            .clone()
    };
    let call = Regex::new(
        r#"condition\(\s*(READY|APPLIED|EXPIRED),\s*(?:true|false),\s*(?:"(\w+)"|([A-Z_]+)\b)"#,
    )
    .unwrap();
    call.captures_iter(&source)
        .map(|c| {
            let reason = match c.get(2) {
                Some(literal) => literal.as_str().to_owned(),
                None => value(&c[3]),
            };
            (value(&c[1]), reason)
        })
        .collect()
}

#[test]
fn the_docs_name_only_the_condition_and_event_reasons_the_code_writes() {
    let conditions = condition_reasons();
    assert!(
        conditions.contains(&("Ready".to_owned(), "Invalid".to_owned())),
        "the scan of status.rs found {conditions:?}"
    );
    let events: BTreeSet<String> = Regex::new(r#"pub const REASON_\w+: &str = "(\w+)""#)
        .unwrap()
        .captures_iter(&read("operator/src/events.rs"))
        .map(|c| c[1].to_owned())
        .collect();
    assert!(events.contains("InvalidSpec"), "{events:?}");

    // `Ready=False` then, before the sentence or the parenthesis ends, `reason X`.
    let mention =
        Regex::new(r"(Ready|Applied|Expired)=(?:True|False)`?[^.;)]{0,40}?reason:? `?(\w+)")
            .unwrap();
    let event = Regex::new(r"`(\w+)` Events?\b").unwrap();
    let mut wrong = Vec::new();
    let mut seen = 0;
    for (text, file) in docs() {
        for c in mention.captures_iter(&text) {
            seen += 1;
            if !conditions.contains(&(c[1].to_owned(), c[2].to_owned())) {
                wrong.push(format!("{file}: {}: no such {} reason", &c[0], &c[1]));
            }
        }
        for c in event.captures_iter(&text) {
            let kind = matches!(&c[1], "Warning" | "Normal"); // the Event's type, not its reason
            if !kind
                && c[1].chars().next().is_some_and(char::is_uppercase)
                && !events.contains(&c[1])
            {
                wrong.push(format!("{file}: {}: no such Event reason", &c[0]));
            }
        }
    }
    assert!(
        seen >= 3,
        "the scan found {seen} condition mentions: the pattern is stale"
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The chart's install notes raise with one pasteable line (no heredoc: an indented
/// terminator hangs a shell it is pasted into) whose LogPolicy is one the operator takes.
#[test]
fn the_install_notes_policy_is_valid_and_pasteable() {
    let notes = read("charts/logpolicy-operator/templates/NOTES.txt");
    assert!(!notes.contains("<<"), "a heredoc in NOTES.txt");
    assert!(
        notes.contains("kubectl logpolicy raise"),
        "NOTES.txt names the plugin"
    );
    let json = notes
        .lines()
        .find_map(|l| l.trim().strip_prefix("echo '"))
        .and_then(|l| l.split_once("' | kubectl apply -f -"))
        .map(|(json, _)| json)
        .expect("the echo ... | kubectl apply line");
    let policy: logpolicy_operator::LogPolicy = serde_json::from_str(json).unwrap();
    logpolicy_operator::validate::validate(&policy.spec)
        .unwrap_or_else(|e| panic!("the notes' LogPolicy is refused: {e:?}"));
}
