//! The crate's modules form layers: each imports only the modules below it. The order
//! is written here, once; the test reads every `crate::`/`super::` path in `src/` (in
//! `use` lines and in code; comments are skipped) and fails naming each file and line
//! that reaches a module above its own.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Bottom to top.
const ORDER: &[&str] = &[
    "level",
    "clock",
    "sites",
    "ledger",
    "recorder",
    "policy",
    "enforce",
    "sink",
    "format",
    "writer",
    "wire",
    "admin",
    "log_bridge",
    "sigterm",
    "init",
];

/// One reference from a file to a module of the crate.
#[derive(Debug)]
struct Import {
    file: String,
    line: usize,
    from: String,
    to: String,
}

/// The top-level module of a source file (`None` for the crate root).
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_owned());
    }
    parts
}

/// The code of a line, without its comment (`//`, doc comments included) and without
/// the contents of string literals.
fn code_of(line: &str) -> String {
    let mut out = String::new();
    let mut in_str = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if in_str {
            if c == '\\' {
                chars.next();
            } else if c == '"' {
                in_str = false;
                out.push('"');
            }
            continue;
        }
        if c == '"' {
            in_str = true;
            out.push('"');
            continue;
        }
        if c == '/' && chars.peek() == Some(&'/') {
            break;
        }
        out.push(c);
    }
    out
}

/// What `lib.rs` re-exports at the root: name -> module (`pub use module::{A, B}`).
fn root_reexports(lib: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    let joined: String = lib.lines().map(code_of).collect::<Vec<_>>().join(" ");
    for stmt in joined.split(';') {
        let Some(rest) = stmt.trim().strip_prefix("pub use ") else {
            continue;
        };
        let Some((module, names)) = rest.split_once("::") else {
            continue;
        };
        for name in names
            .trim_matches(|c: char| c == '{' || c == '}' || c.is_whitespace())
            .split(',')
        {
            let name = name.trim();
            if !name.is_empty() {
                map.insert(name.to_owned(), module.trim().to_owned());
            }
        }
    }
    map
}

/// The identifier `s` starts with.
fn ident(s: &str) -> Option<&str> {
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    (end > 0).then(|| &s[..end])
}

/// Every top-level module `code` (a file of module `path`) refers to, per line.
fn references(
    path: &[String],
    code: &str,
    reexports: &BTreeMap<String, String>,
) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_block_comment = false;
    // Inline modules (`mod tests { ... }`) nest deeper: (brace depth at their start).
    let mut inline: Vec<usize> = Vec::new();
    let mut depth = 0usize;
    for (n, raw) in code.lines().enumerate() {
        let mut line = raw.to_owned();
        if in_block_comment {
            match line.find("*/") {
                Some(i) => {
                    line = line[i + 2..].to_owned();
                    in_block_comment = false;
                }
                None => continue,
            }
        }
        if let Some(i) = line.find("/*") {
            in_block_comment = !line[i..].contains("*/");
            line.truncate(i);
        }
        let line = code_of(&line);
        // The module this line is in: the file's, plus the inline modules open here.
        let path_len = path.len() + inline.len();
        let words: Vec<&str> = line.split_whitespace().collect();
        let opens_mod = words
            .iter()
            .position(|w| *w == "mod")
            .is_some_and(|i| words.get(i + 2) == Some(&"{"));
        if opens_mod {
            inline.push(depth);
        }
        for c in line.chars() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    if inline.last() == Some(&depth) {
                        inline.pop();
                    }
                }
                _ => {}
            }
        }
        let mut push = |name: &str| {
            let name = name.trim();
            let top = reexports
                .get(name)
                .cloned()
                .unwrap_or_else(|| name.to_owned());
            out.push((n + 1, top));
        };
        // `crate::x`, `crate::{x, y::z}`.
        for (i, _) in line.match_indices("crate::") {
            let before = line[..i].chars().last();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue; // e.g. `my_crate::`
            }
            let rest = &line[i + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let group = group.split('}').next().unwrap_or("");
                for item in group.split(',') {
                    let first = item.trim().split("::").next().unwrap_or("");
                    if !first.is_empty() && first != "self" {
                        push(first);
                    }
                }
            } else if let Some(name) = ident(rest) {
                push(name);
            }
        }
        // `super::x` from a file directly below the root reaches the root.
        for (i, _) in line.match_indices("super::") {
            let before = line[..i].chars().last();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue; // counted with the first `super::` of a chain
            }
            let mut rest = &line[i..];
            let mut up = 0;
            while let Some(r) = rest.strip_prefix("super::") {
                rest = r;
                up += 1;
            }
            if up >= path_len {
                if let Some(name) = ident(rest) {
                    push(name);
                }
            }
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// Every reference from one top-level module to another in `src`.
fn imports(src: &Path) -> Vec<Import> {
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let reexports = root_reexports(&lib);
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let path = module_path(src, &file);
        let Some(from) = path.first() else {
            continue; // lib.rs: the root re-exports everything
        };
        let code = std::fs::read_to_string(&file).unwrap();
        for (line, to) in references(&path, &code, &reexports) {
            if to != *from {
                out.push(Import {
                    file: file.strip_prefix(src).unwrap().display().to_string(),
                    line,
                    from: from.clone(),
                    to,
                });
            }
        }
    }
    out
}

/// The imports that break the order: to a module above, or to one not in the order.
fn violations(imports: &[Import], order: &[&str]) -> Vec<String> {
    let rank = |m: &str| order.iter().position(|o| *o == m);
    imports
        .iter()
        .filter_map(|i| match (rank(&i.from), rank(&i.to)) {
            (Some(from), Some(to)) if to < from => None,
            (Some(_), Some(_)) => Some(format!(
                "{}:{}: `{}` imports `{}`, which is above it",
                i.file, i.line, i.from, i.to
            )),
            _ => Some(format!(
                "{}:{}: `{}` -> `{}`: a module missing from ORDER",
                i.file, i.line, i.from, i.to
            )),
        })
        .collect()
}

#[test]
fn every_module_imports_only_modules_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = imports(&src);
    // Not vacuous: every module of the order exists, and the layers do use each other.
    for m in ORDER {
        assert!(
            src.join(format!("{m}.rs")).exists() || src.join(m).join("mod.rs").exists(),
            "module {m} of ORDER has no file"
        );
    }
    assert!(
        found.len() >= 50,
        "only {} imports between modules found",
        found.len()
    );
    for m in [
        "policy", "enforce", "format", "writer", "wire", "admin", "init",
    ] {
        assert!(
            found.iter().any(|i| i.from == m),
            "no import found from `{m}`: is the reader broken?"
        );
    }
    let bad = violations(&found, ORDER);
    assert!(
        bad.is_empty(),
        "imports against the order:\n{}",
        bad.join("\n")
    );
}

#[test]
fn an_upward_import_is_caught() {
    let reexports = root_reexports("pub use format::{Format, FormatLayer};\npub use level::Level;");
    let path = vec!["enforce".to_owned(), "gate".to_owned()];
    let code = "use crate::level::Level;\n\
                // use crate::writer::Writer; (a comment)\n\
                let s = \"crate::admin\";\n\
                fn f() { crate::FormatLayer::new(); }\n\
                use crate::{clock, writer::Writer};\n";
    let refs = references(&path, code, &reexports);
    assert_eq!(
        refs,
        [
            (1, "level".to_owned()),
            (4, "format".to_owned()),
            (5, "clock".to_owned()),
            (5, "writer".to_owned())
        ]
    );
    let imports: Vec<Import> = refs
        .into_iter()
        .map(|(line, to)| Import {
            file: "enforce/gate.rs".into(),
            line,
            from: "enforce".into(),
            to,
        })
        .collect();
    let bad = violations(&imports, ORDER);
    assert_eq!(bad.len(), 2, "{bad:?}");
    assert!(bad[0].starts_with("enforce/gate.rs:4: `enforce` imports `format`"));
    // `super::` from a file just below the root names a top-level module.
    let refs = references(
        &["sink".to_owned()],
        "use super::writer::Writer;",
        &reexports,
    );
    assert_eq!(refs, [(1, "writer".to_owned())]);
    let refs = references(
        &["writer".to_owned(), "queue".to_owned()],
        "use super::stats::LEVELS;",
        &reexports,
    );
    assert!(refs.is_empty());
    // An inline module is one level deeper: `super::super` from `sink`'s tests is the
    // root.
    let code = "mod tests {\n    use super::super::writer::Writer;\n    use super::Sink;\n}\nuse super::clock;";
    let refs = references(&["sink".to_owned()], code, &reexports);
    assert_eq!(refs, [(2, "writer".to_owned()), (5, "clock".to_owned())]);
}
