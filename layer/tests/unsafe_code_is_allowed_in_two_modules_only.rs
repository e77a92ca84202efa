//! The workspace denies `unsafe_code`; two modules may allow it: the `SIGTERM` handler
//! (`layer/src/sigterm.rs`, for `sigaction` and `raise`, which have no safe interface),
//! and the formatter's `Room` (`layer/src/format/room.rs`: stores into a buffer's spare
//! capacity checked once, which `Vec` has no safe interface for). This test reads every
//! Rust file of the workspace and fails on an allowance of `unsafe_code` anywhere else,
//! and on an `unsafe` block or function there without a `SAFETY:` comment in the lines
//! just above it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

const ALLOWED: [&str; 2] = ["layer/src/format/room.rs", "layer/src/sigterm.rs"];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy();
        if path.is_dir() {
            if !name.starts_with('.') && name != "target" {
                rust_files(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

#[test]
fn only_two_modules_allow_unsafe_code_and_say_why_each_time() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut files = Vec::new();
    rust_files(root, &mut files);
    let needle = ["allow(", "unsafe_code)"].concat();
    let mut allowing = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        if text.contains(&needle) {
            allowing.push(
                file.strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned(),
            );
        }
    }
    allowing.sort();
    assert_eq!(allowing, ALLOWED.map(str::to_owned));

    for allowed in ALLOWED {
        let text = std::fs::read_to_string(root.join(allowed)).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let mut blocks = 0;
        for (i, line) in lines.iter().enumerate() {
            let code = line.split("//").next().unwrap();
            if !code.contains("unsafe {") && !code.contains("unsafe fn") {
                continue;
            }
            blocks += 1;
            let above = &lines[i.saturating_sub(6)..i];
            assert!(
                above
                    .iter()
                    .any(|l| l.trim_start().starts_with("// SAFETY:")),
                "{allowed}:{}: unsafe without a SAFETY: comment above it",
                i + 1
            );
        }
        assert!(blocks > 0, "{allowed}");
    }
}
