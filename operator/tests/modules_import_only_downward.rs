//! Every module of the operator, and of the crate it shares with the plugin
//! (`logpolicy-api`, in `api/`), imports only modules below it. Each crate's order is
//! written once, here, bottom to top, in tiers: a module may import the modules of the
//! tiers below its own, not those of its own tier nor above. (The operator uses the
//! shared crate from outside, as `logpolicy_api::..`: a crate below all of its modules.)
//!
//! The test reads `operator/src/**.rs` and `api/src/**.rs` (not `lib.rs`, the table of contents, nor the
//! binaries, which use the crate from outside) and finds every `use crate::..`,
//! `use super::..` (resolved from the file and its inline modules) and `crate::x::` path
//! in code. An import through the crate root's re-exports (`crate::Index`) hides the
//! module and is refused too.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure is a test failure

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The operator's modules, bottom to top.
const ORDER: &[&[&str]] = &[
    // Leaves: they import nothing of the crate.
    &["log", "metrics", "health", "ownership", "pods", "simulated"],
    // The pure index.
    &["index"],
    &["status", "push"],
    // The Kubernetes (and process) edges.
    &[
        "watches",
        "status_writer",
        "trust",
        "events",
        "lease",
        "signing_key",
        "shutdown",
        "access",
        "serving_cert",
    ],
    // The loop.
    &["controller"],
    &["http"],
    // The command line, configuring the parts.
    &["flags"],
];

/// The shared crate's modules (`api/src`), bottom to top.
const API_ORDER: &[&[&str]] = &[
    // Leaves: they import nothing of the crate.
    &[
        "text",
        "labels",
        "selector",
        "conditions",
        "keys",
        "trust",
        "crd",
    ],
    &["validate"],
];

/// A crate to check: its directory beside this one, its order, and at least how many
/// imports between its modules are expected (fewer means the scan stopped seeing them).
struct Crate {
    dir: &'static str,
    order: &'static [&'static [&'static str]],
    min_imports: usize,
}

/// 43 imports in the operator and 2 in the shared crate when this was written.
const CRATES: [Crate; 2] = [
    Crate {
        dir: "operator",
        order: ORDER,
        min_imports: 35,
    },
    Crate {
        dir: "api",
        order: API_ORDER,
        min_imports: 2,
    },
];

fn tier(order: &[&[&str]], module: &str) -> Option<usize> {
    order.iter().position(|t| t.contains(&module))
}

/// One module's use of another.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Import {
    file: String,
    line: usize,
    from: String,
    /// The top-level module named, or `crate::Name` for a root re-export.
    to: String,
}

/// `src/x.rs` and `src/x/mod.rs` -> `[x]`, `src/x/y.rs` -> `[x, y]`.
fn module_path(file: &str) -> Vec<String> {
    let mut parts: Vec<String> = file
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_owned)
        .collect();
    if parts.last().map(String::as_str) == Some("mod") {
        parts.pop();
    }
    parts
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The identifier at the start of `s`.
fn ident(s: &str) -> &str {
    let end = s.find(|c: char| !is_ident_char(c)).unwrap_or(s.len());
    &s[..end]
}

/// The first segments of the paths of a use tree: `a::X` -> `[a]`,
/// `{a::X, b::{Y, Z}, c}` -> `[a, b, c]`.
fn first_segments(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(inner) = tree.strip_prefix('{') else {
        return vec![ident(tree).to_owned()];
    };
    let inner = inner.strip_suffix('}').unwrap_or(inner);
    let mut out = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(ident(inner[start..i].trim()).to_owned());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(ident(inner[start..].trim()).to_owned());
    out.retain(|s| !s.is_empty());
    out
}

/// The top-level modules that a use path (after `use `) names, from a file whose module
/// path (inline modules included) is `here`; empty for paths outside the crate.
fn use_targets(path: &str, here: &[String]) -> Vec<String> {
    let mut rest = path.trim();
    let mut at: Vec<String> = here.to_vec();
    if let Some(r) = rest.strip_prefix("crate::") {
        at.clear();
        rest = r;
    } else if rest.starts_with("super::") {
        while let Some(r) = rest.strip_prefix("super::") {
            at.pop();
            rest = r;
        }
    } else if let Some(r) = rest.strip_prefix("self::") {
        rest = r;
    } else {
        return Vec::new();
    }
    match at.first() {
        // Inside a top-level module: the path stays in it.
        Some(top) => vec![top.clone()],
        // At the crate root: the first segment names the module.
        None => first_segments(rest),
    }
}

/// `line` without a trailing ` // comment`.
fn code_of(line: &str) -> &str {
    match line.find(" //") {
        Some(i) => &line[..i],
        None => line,
    }
}

/// Every import in `source` (the file `file`, relative to `src/`).
fn imports_of(file: &str, source: &str) -> Vec<Import> {
    let base = module_path(file);
    let from = base[0].clone();
    let mut out = Vec::new();
    // Inline modules open (`mod tests {`): their indentation.
    let mut inline: Vec<(usize, String)> = Vec::new();
    // A `use` statement spanning lines: its first line and text so far.
    let mut statement: Option<(usize, String)> = None;
    for (n, raw) in source.lines().enumerate() {
        let line_no = n + 1;
        let trimmed = raw.trim_start();
        let indent = raw.len() - trimmed.len();
        if trimmed.starts_with("//") {
            continue;
        }
        if let Some((open, _)) = inline.last() {
            if *open == indent && trimmed.starts_with('}') {
                inline.pop();
                continue;
            }
        }
        let code = code_of(trimmed);
        let head = code
            .trim_start_matches("pub(crate) ")
            .trim_start_matches("pub(super) ")
            .trim_start_matches("pub ");
        if let Some(name) = head.strip_prefix("mod ") {
            if code.ends_with('{') {
                inline.push((indent, ident(name).to_owned()));
            }
            continue;
        }
        let here: Vec<String> = base
            .iter()
            .cloned()
            .chain(inline.iter().map(|(_, m)| m.clone()))
            .collect();
        if statement.is_none() && head.starts_with("use ") {
            statement = Some((line_no, String::new()));
        }
        if let Some((first, text)) = &mut statement {
            text.push_str(code);
            text.push(' ');
            if code.contains(';') {
                let path = text
                    .trim_start_matches("pub(crate) ")
                    .trim_start_matches("pub ")
                    .trim_start_matches("use ")
                    .trim_end()
                    .trim_end_matches(';');
                for to in use_targets(path, &here) {
                    out.push(Import {
                        file: file.to_owned(),
                        line: *first,
                        from: from.clone(),
                        to,
                    });
                }
                statement = None;
            }
            continue;
        }
        // `crate::x::..` in code (not `$crate`, a macro's own crate).
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            let before = rest[..i].chars().last();
            let after = &rest[i + "crate::".len()..];
            if before != Some('$') && !before.is_some_and(is_ident_char) {
                let to = ident(after);
                if !to.is_empty() {
                    out.push(Import {
                        file: file.to_owned(),
                        line: line_no,
                        from: from.clone(),
                        to: to.to_owned(),
                    });
                }
            }
            rest = after;
        }
    }
    out
}

/// What is wrong with `imports`: each upward or sideways import, and each import of
/// something that is not a module of the order.
fn violations(order: &[&[&str]], imports: &[Import]) -> Vec<String> {
    let mut out = Vec::new();
    for i in imports {
        if i.to == i.from {
            continue;
        }
        let place = format!("src/{}:{}", i.file, i.line);
        match (tier(order, &i.from), tier(order, &i.to)) {
            (None, _) => out.push(format!(
                "{place}: module `{}` is not in the order of this test",
                i.from
            )),
            (_, None) if i.to.starts_with(char::is_uppercase) => out.push(format!(
                "{place}: `{}` uses `crate::{}` through the crate root's re-exports: name its module",
                i.from, i.to
            )),
            (_, None) => out.push(format!(
                "{place}: `{}` imports `{}`, which is not in the order of this test",
                i.from, i.to
            )),
            (Some(a), Some(b)) if b >= a => out.push(format!(
                "{place}: `{}` imports `{}`, which is {} it (`{}` is in tier {a}, `{}` in tier {b})",
                i.from,
                i.to,
                if a == b { "beside" } else { "above" },
                i.from,
                i.to
            )),
            _ => {}
        }
    }
    out
}

fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            source_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The directory of the crate `dir` (`operator`, `api`).
fn crate_dir(dir: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(dir)
}

/// A crate's module files, relative to its `src/`, with their text.
fn modules(dir: &str) -> Vec<(String, String)> {
    let src = crate_dir(dir).join("src");
    let mut files = Vec::new();
    source_files(&src, &mut files);
    let mut out: Vec<(String, String)> = files
        .into_iter()
        .map(|p| {
            let rel = p
                .strip_prefix(&src)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            (rel, std::fs::read_to_string(&p).unwrap())
        })
        .filter(|(rel, _)| rel != "lib.rs" && rel != "main.rs" && !rel.starts_with("bin/"))
        .collect();
    out.sort();
    out
}

#[test]
fn every_module_imports_only_modules_below_it() {
    for c in &CRATES {
        let files = modules(c.dir);
        let imports: Vec<Import> = files
            .iter()
            .flat_map(|(file, source)| imports_of(file, source))
            .collect();
        let found = violations(c.order, &imports);
        assert!(
            found.is_empty(),
            "{}: imports against the order (bottom to top: {:?}):\n{}",
            c.dir,
            c.order,
            found.join("\n")
        );
        let between: Vec<&Import> = imports.iter().filter(|i| i.from != i.to).collect();
        assert!(
            between.len() >= c.min_imports,
            "{}: only {} imports between modules found: the scan misses some",
            c.dir,
            between.len()
        );
        // Every tier above the leaves imports something: the scan sees each of them.
        for module in c.order.iter().skip(1).flat_map(|t| t.iter()) {
            assert!(
                between.iter().any(|i| i.from == *module),
                "{}: no import found in `{module}`",
                c.dir
            );
        }
    }
}

#[test]
fn the_order_names_every_module_once_and_nothing_else() {
    for c in &CRATES {
        let on_disk: BTreeSet<String> = modules(c.dir)
            .iter()
            .map(|(file, _)| module_path(file)[0].clone())
            .collect();
        let listed: Vec<&str> = c.order.iter().flat_map(|t| t.iter().copied()).collect();
        let unique: BTreeSet<String> = listed.iter().map(|m| (*m).to_owned()).collect();
        assert_eq!(
            unique.len(),
            listed.len(),
            "{}: a module is listed twice",
            c.dir
        );
        assert_eq!(
            on_disk, unique,
            "{}: the modules in src/ and the order differ",
            c.dir
        );
        // And lib.rs declares exactly these.
        let lib = std::fs::read_to_string(crate_dir(c.dir).join("src/lib.rs")).unwrap();
        let declared: BTreeSet<String> = lib
            .lines()
            .filter_map(|l| l.trim().strip_prefix("pub mod "))
            .map(|m| m.trim_end_matches(';').to_owned())
            .collect();
        assert_eq!(declared, unique, "{}: lib.rs declares other modules", c.dir);
    }
}

/// The checker finds what it is for, in every form an import takes.
#[test]
fn an_upward_import_is_named_with_its_file_line_and_modules() {
    let files = [
        (
            "index.rs",
            "//! doc: crate::push in a comment does not count\nuse std::fmt;\nuse crate::push::PushOutcome;\nuse crate::pods::PodInfo;\n",
        ),
        (
            "watches.rs",
            "use crate::{\n    pods::PodInfo,\n    controller::Controller,\n};\n",
        ),
        ("status.rs", "fn f() {\n    crate::http::serve();\n    crate::index::Index::new();\n}\n"),
        ("push.rs", "use crate::status::truncate;\nuse crate::Index;\n"),
        ("controller/apply.rs", "use super::super::http::Endpoints;\nuse super::Debounce;\n"),
        (
            "index/tests.rs",
            "use super::*;\n\nmod inner {\n    use super::super::Index;\n}\n",
        ),
        (
            "log.rs",
            "macro_rules! info { () => { ::tracing::info!(target: $crate::log::TARGET) } }\n",
        ),
        ("trust.rs", "#[cfg(test)]\nmod tests {\n    use super::*;\n}\n"),
        ("newcomer.rs", "use crate::crd::LogPolicy;\n"),
    ];
    let imports: Vec<Import> = files
        .iter()
        .flat_map(|(file, source)| imports_of(file, source))
        .collect();
    let found = violations(ORDER, &imports);
    let expect = [
        "src/index.rs:3: `index` imports `push`, which is above it (`index` is in tier 1, `push` in tier 2)",
        "src/watches.rs:1: `watches` imports `controller`, which is above it (`watches` is in tier 3, `controller` in tier 4)",
        "src/status.rs:2: `status` imports `http`, which is above it (`status` is in tier 2, `http` in tier 5)",
        "src/push.rs:1: `push` imports `status`, which is beside it (`push` is in tier 2, `status` in tier 2)",
        "src/push.rs:2: `push` uses `crate::Index` through the crate root's re-exports: name its module",
        "src/controller/apply.rs:1: `controller` imports `http`, which is above it (`controller` is in tier 4, `http` in tier 5)",
        "src/newcomer.rs:1: module `newcomer` is not in the order of this test",
    ];
    assert_eq!(found, expect, "{imports:#?}");
    // The downward and inner imports were seen too, and are fine.
    for (file, line, to) in [
        ("index.rs", 4, "pods"),
        ("watches.rs", 1, "pods"),
        ("status.rs", 3, "index"),
        ("controller/apply.rs", 2, "controller"),
        ("index/tests.rs", 1, "index"),
        ("index/tests.rs", 4, "index"),
        ("trust.rs", 3, "trust"),
    ] {
        assert!(
            imports
                .iter()
                .any(|i| i.file == file && i.line == line && i.to == to),
            "{file}:{line} -> {to} not seen: {imports:#?}"
        );
    }
    assert!(
        !imports.iter().any(|i| i.file == "log.rs"),
        "$crate is the macro's own crate"
    );
}
