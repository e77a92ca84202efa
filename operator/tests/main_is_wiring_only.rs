//! `main.rs` only wires the parts together: it stays under 100 lines before its tests,
//! and defines no types of its own (the flags and each part's configuration are
//! `flags.rs`'s, the parts the crate's modules).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure is a test failure

use std::path::Path;

/// The most lines `main.rs` may have before its tests.
const MAX_LINES: usize = 99;

fn wiring(source: &str) -> Vec<&str> {
    source
        .lines()
        .take_while(|l| !l.starts_with("#[cfg(test)]"))
        .collect()
}

/// What is wrong with `source` as a `main.rs`.
fn problems(source: &str) -> Vec<String> {
    let lines = wiring(source);
    let mut out = Vec::new();
    if lines.len() > MAX_LINES {
        out.push(format!(
            "{} lines before the tests, more than {MAX_LINES}: move what is not wiring into a module",
            lines.len()
        ));
    }
    for (n, line) in lines.iter().enumerate() {
        let code = line
            .trim_start_matches("pub ")
            .trim_start_matches("pub(crate) ");
        if ["struct ", "enum ", "impl ", "trait ", "mod "]
            .iter()
            .any(|k| code.starts_with(k))
        {
            out.push(format!(
                "line {}: `{line}`: a type or module belongs in the crate",
                n + 1
            ));
        }
    }
    out
}

#[test]
fn main_is_under_100_lines_of_wiring() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/main.rs");
    let source = std::fs::read_to_string(&path).unwrap();
    let found = problems(&source);
    assert!(
        found.is_empty(),
        "{}:\n{}",
        path.display(),
        found.join("\n")
    );
}

#[test]
fn a_long_main_or_one_with_types_is_named() {
    let long = "fn main() {}\n".repeat(100) + "#[cfg(test)]\nmod tests {}\n";
    assert_eq!(
        problems(&long),
        ["100 lines before the tests, more than 99: move what is not wiring into a module"]
    );
    let typed = "use clap::Parser;\n#[derive(Parser)]\nstruct Args {}\nfn main() {}\n";
    assert_eq!(
        problems(typed),
        ["line 3: `struct Args {}`: a type or module belongs in the crate"]
    );
    assert!(problems(&"fn main() {}\n".repeat(99)).is_empty());
}
