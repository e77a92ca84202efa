//! `plugin/README.md` says what `--help` says: each command of its table names exactly
//! the flags that command takes (besides the ones every command takes, which the
//! paragraph under the table names), every command has a row, and the exit codes table
//! lists each code of `exit.rs` once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use clap::CommandFactory;
use kubectl_logpolicy::cli::Cli;
use kubectl_logpolicy::exit;

const README: &str = include_str!("../README.md");

/// The flags every command takes, named once under the table.
const EVERY_COMMAND: [&str; 5] = [
    "namespace",
    "context",
    "kubeconfig",
    "operator-namespace",
    "help",
];

/// The `--flags` in `text`.
fn flags_in(text: &str) -> BTreeSet<String> {
    text.split("--")
        .skip(1)
        .filter_map(|rest| {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '-')
                .collect();
            (!name.is_empty()).then_some(name)
        })
        .collect()
}

/// The first cell of the command table's row for `command`.
fn row(command: &str) -> Option<&'static str> {
    README
        .lines()
        .find(|l| {
            l.starts_with(&format!("| `{command} ")) || l.starts_with(&format!("| `{command}`"))
        })
        .map(|l| {
            let cell = &l[2..];
            // The cell ends at the first `|` outside backquotes (table pipes inside code
            // are escaped as `\|`).
            let end = cell.find("` |").map_or(cell.len(), |i| i + 1);
            &cell[..end]
        })
}

#[test]
fn each_command_row_names_the_flags_its_help_lists() {
    let cli = Cli::command();
    let mut wrong = Vec::new();
    for command in cli.get_subcommands() {
        let name = command.get_name();
        if name == "help" {
            continue;
        }
        let Some(cell) = row(name) else {
            wrong.push(format!("`{name}` has no row in the command table"));
            continue;
        };
        // Each flag by its long name, or its short one (`-l`, `-A`, `-o`).
        let mut missing = Vec::new();
        let mut help = BTreeSet::new();
        for arg in command.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            if EVERY_COMMAND.contains(&long) {
                continue;
            }
            help.insert(long.to_owned());
            let short = arg.get_short().is_some_and(|c| {
                cell.match_indices(&format!("-{c}")).any(|(i, m)| {
                    !cell[i + m.len()..].starts_with(|n: char| n.is_ascii_alphanumeric())
                })
            });
            if !short && !flags_in(cell).contains(long) {
                missing.push(long.to_owned());
            }
        }
        let unknown: Vec<String> = flags_in(cell).difference(&help).cloned().collect();
        if !missing.is_empty() || !unknown.is_empty() {
            wrong.push(format!(
                "`{name}`: --help has {missing:?} the README lacks; the README has {unknown:?} --help lacks"
            ));
        }
    }
    let global: BTreeSet<String> = cli
        .get_arguments()
        .filter_map(|a| a.get_long().map(str::to_owned))
        .filter(|l| l != "help" && l != "version")
        .collect();
    for flag in &global {
        assert!(
            README.contains(&format!("`--{flag}`")) || README.contains(&format!("/--{flag}`")),
            "the README does not name the flag every command takes: --{flag}"
        );
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_exit_codes_table_lists_each_code_once() {
    let table: Vec<u8> = README
        .split("## Exit codes")
        .nth(1)
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("| "))
        .filter_map(|l| l.split(' ').next()?.parse().ok())
        .collect();
    let codes = [
        exit::OK,
        exit::ERROR,
        exit::USAGE,
        exit::NOT_OPTED_IN,
        exit::NOT_ACKNOWLEDGED,
        exit::NO_OPERATOR,
        exit::REFUSED,
        exit::UNKNOWN_TARGET,
        exit::CHECK_FAILED,
    ];
    assert_eq!(table, codes, "the README's exit codes");
}
