//! krew's rules for a plugin manifest, so that the release's `logpolicy.yaml` is checked
//! as `kubectl krew install --manifest=logpolicy.yaml --archive=ARCHIVE` and the
//! krew-index's `validate-krew-manifest` would check it, without krew.
//!
//! Ported from kubernetes-sigs/krew: the structural rules of
//! `pkg/index/validation/validate.go` (apiVersion, kind, a safe name equal to the file's
//! name, a short description, a `v`-prefixed semantic version, platforms each with a
//! URI, a lowercase sha256, a bin, file operations and a selector on `os`/`arch` only),
//! those of `cmd/validate-krew-manifest` (a `.yaml` file, every platform selects a
//! platform krew runs on, no two select the same one, line lengths), and the install
//! of `internal/installation` (the archive's sha256 is the manifest's, the file
//! operations move files as krew moves them, the bin is then a file of the install
//! directory). Stricter than krew, where krew only warns or accepts what we would not
//! publish: an unknown field, an over-long line and a URI that is not https are errors.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::cluster::{Error, Result};

/// The `apiVersion` krew reads.
pub const API_VERSION: &str = "krew.googlecontainertools.github.com/v1alpha2";

/// A plugin manifest: krew's `index.Plugin`, with the fields krew defines and no other.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Plugin {
    /// `krew.googlecontainertools.github.com/v1alpha2`.
    pub api_version: String,
    /// `Plugin`.
    pub kind: String,
    /// Its name.
    pub metadata: Metadata,
    /// What it is and where to get it.
    pub spec: Spec,
}

/// A manifest's `metadata`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metadata {
    /// The plugin's name: `kubectl NAME` runs it.
    pub name: String,
}

/// A manifest's `spec`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Spec {
    /// `vMAJOR.MINOR.PATCH`.
    #[serde(default)]
    pub version: String,
    /// One line for `kubectl krew search`.
    #[serde(default)]
    pub short_description: String,
    /// What `kubectl krew info` shows.
    #[serde(default)]
    pub description: String,
    /// Shown after the install.
    #[serde(default)]
    pub caveats: String,
    /// The plugin's home page.
    #[serde(default)]
    pub homepage: String,
    /// One archive per platform.
    #[serde(default)]
    pub platforms: Vec<Platform>,
}

/// One platform's archive.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Platform {
    /// Where krew downloads the archive.
    #[serde(default)]
    pub uri: String,
    /// The archive's sha256, 64 lowercase hex digits.
    #[serde(default)]
    pub sha256: String,
    /// Which `os`/`arch` it is for.
    pub selector: Option<Selector>,
    /// What to install from the archive, in order.
    #[serde(default)]
    pub files: Vec<FileOperation>,
    /// The executable, relative to the install directory.
    #[serde(default)]
    pub bin: String,
}

/// A `metav1.LabelSelector` over the labels `os` and `arch`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Selector {
    /// Labels that must be equal.
    pub match_labels: Option<BTreeMap<String, String>>,
    /// Requirements that must hold.
    pub match_expressions: Option<Vec<Requirement>>,
}

/// One requirement of a selector's `matchExpressions`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Requirement {
    /// `os` or `arch`.
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
    pub operator: String,
    /// For `In` and `NotIn`.
    #[serde(default)]
    pub values: Vec<String>,
}

/// Move `from` (a path or a glob in the unpacked archive) to `to` (a path in the install
/// directory; `.` keeps the name).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileOperation {
    /// A path or a glob (`*`, `?`) in the unpacked archive.
    pub from: String,
    /// A clean path in the install directory.
    pub to: String,
}

/// The `os`/`arch` pairs krew runs on (krew's list, and the arm64 and other Linux
/// platforms that krew releases since v0.4 run on).
pub const PLATFORMS: &[(&str, &str)] = &[
    ("windows", "386"),
    ("windows", "amd64"),
    ("windows", "arm64"),
    ("linux", "386"),
    ("linux", "amd64"),
    ("linux", "arm"),
    ("linux", "arm64"),
    ("linux", "ppc64le"),
    ("linux", "s390x"),
    ("darwin", "amd64"),
    ("darwin", "arm64"),
];

/// Reads a manifest (an unknown field is an error, as krew's strict decoding makes it).
pub fn read(path: &Path) -> Result<Plugin> {
    let text =
        std::fs::read_to_string(path).map_err(|e| Error(format!("{}: {e}", path.display())))?;
    serde_yaml::from_str(&text).map_err(|e| Error(format!("{}: {e}", path.display())))
}

/// Every rule a manifest read from `path` must follow; the first broken one, named.
pub fn validate(path: &Path, plugin: &Plugin) -> Result<()> {
    let fail = |why: String| Err(Error(format!("{}: {why}", path.display())));
    let file = path.file_name().unwrap_or_default().to_string_lossy();
    let Some(name) = file.strip_suffix(".yaml") else {
        return fail("a krew manifest's file name ends with .yaml".into());
    };
    if plugin.api_version != API_VERSION {
        return fail(format!(
            "apiVersion is {:?}, krew reads {API_VERSION:?}",
            plugin.api_version
        ));
    }
    if plugin.kind != "Plugin" {
        return fail(format!("kind is {:?}, krew reads \"Plugin\"", plugin.kind));
    }
    if !is_safe_name(name) {
        return fail(format!(
            "the plugin name {name:?} is not allowed (letters, digits, _ and -; no Windows device name)"
        ));
    }
    if plugin.metadata.name != name {
        return fail(format!(
            "metadata.name is {:?}, the file is named for {name:?}",
            plugin.metadata.name
        ));
    }
    let spec = &plugin.spec;
    if spec.short_description.is_empty() {
        return fail("spec.shortDescription is empty".into());
    }
    if spec.platforms.is_empty() {
        return fail("spec.platforms is empty".into());
    }
    if let Err(why) = parse_version(&spec.version) {
        return fail(format!("spec.version {:?}: {why}", spec.version));
    }
    for (field, text, max) in [
        ("description", &spec.description, 80),
        ("shortDescription", &spec.short_description, 70),
        ("caveats", &spec.caveats, 80),
    ] {
        // krew allows a longer line if it is one word (a URL).
        if let Some(line) = text
            .lines()
            .find(|l| l.len() > max && l.trim().contains(' '))
        {
            return fail(format!(
                "spec.{field} has a line longer than {max} characters: {line:?}"
            ));
        }
    }
    for (i, p) in spec.platforms.iter().enumerate() {
        if let Err(why) = validate_platform(p) {
            return fail(format!("spec.platforms[{i}]: {why}"));
        }
        if !PLATFORMS
            .iter()
            .any(|(os, arch)| matches(p.selector.as_ref(), os, arch))
        {
            return fail(format!(
                "spec.platforms[{i}]'s selector matches no platform krew runs on"
            ));
        }
    }
    for (os, arch) in PLATFORMS {
        let selecting: Vec<usize> = (0..spec.platforms.len())
            .filter(|&i| matches(spec.platforms[i].selector.as_ref(), os, arch))
            .collect();
        if selecting.len() > 1 {
            return fail(format!(
                "spec.platforms {selecting:?} all select os={os}, arch={arch}"
            ));
        }
    }
    Ok(())
}

fn validate_platform(p: &Platform) -> std::result::Result<(), String> {
    if p.uri.is_empty() {
        return Err("uri is empty".into());
    }
    if !p.uri.starts_with("https://") {
        return Err(format!("uri {:?} is not https", p.uri));
    }
    if !(p.sha256.len() == 64
        && p.sha256
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
    {
        return Err(format!(
            "sha256 {:?} is not 64 lowercase hex digits",
            p.sha256
        ));
    }
    if p.bin.is_empty() {
        return Err("bin is empty".into());
    }
    if p.files.is_empty() {
        return Err("files is empty: krew installs nothing".into());
    }
    let Some(selector) = &p.selector else {
        return Err("no selector".into());
    };
    let expressions = selector.match_expressions.as_deref();
    if selector.match_labels.is_none() && expressions.is_none_or(<[_]>::is_empty) {
        return Err("the selector is empty".into());
    }
    let keys = selector
        .match_labels
        .iter()
        .flat_map(|m| m.keys())
        .chain(expressions.into_iter().flatten().map(|r| &r.key));
    for key in keys {
        if key != "os" && key != "arch" {
            return Err(format!("the selector's key {key:?} is not os or arch"));
        }
    }
    if selector
        .match_labels
        .as_ref()
        .is_some_and(BTreeMap::is_empty)
    {
        return Err("matchLabels is given but empty".into());
    }
    if expressions.is_some_and(<[_]>::is_empty) {
        return Err("matchExpressions is given but empty".into());
    }
    for r in expressions.into_iter().flatten() {
        let ok = match r.operator.as_str() {
            "In" | "NotIn" => !r.values.is_empty(),
            "Exists" | "DoesNotExist" => r.values.is_empty(),
            _ => false,
        };
        if !ok {
            return Err(format!(
                "matchExpressions: operator {:?} with values {:?}",
                r.operator, r.values
            ));
        }
    }
    Ok(())
}

/// A name krew accepts: `^[\w-]+$` and no Windows device name.
fn is_safe_name(name: &str) -> bool {
    const WINDOWS: &[&str] = &[
        "CON", "PRN", "AUX", "NUL", "COM1", "COM2", "COM3", "COM4", "COM5", "COM6", "COM7", "COM8",
        "COM9", "LPT1", "LPT2", "LPT3", "LPT4", "LPT5", "LPT6", "LPT7", "LPT8", "LPT9",
    ];
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        && !WINDOWS.iter().any(|w| w.eq_ignore_ascii_case(name))
}

/// `vMAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]` (semver 2.0.0): the numbers.
pub fn parse_version(v: &str) -> std::result::Result<(u64, u64, u64), String> {
    let rest = v.strip_prefix('v').ok_or("does not start with v")?;
    let (rest, build) = match rest.split_once('+') {
        Some((r, b)) => (r, Some(b)),
        None => (rest, None),
    };
    let (core, pre) = match rest.split_once('-') {
        Some((c, p)) => (c, Some(p)),
        None => (rest, None),
    };
    let identifiers_ok = |s: &str, numeric_no_zero: bool| {
        s.split('.').all(|id| {
            !id.is_empty()
                && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !(numeric_no_zero
                    && id.len() > 1
                    && id.starts_with('0')
                    && id.bytes().all(|b| b.is_ascii_digit()))
        })
    };
    if pre.is_some_and(|p| !identifiers_ok(p, true)) {
        return Err("a malformed pre-release".into());
    }
    if build.is_some_and(|b| !identifiers_ok(b, false)) {
        return Err("malformed build metadata".into());
    }
    let numbers: Vec<&str> = core.split('.').collect();
    let [major, minor, patch] = numbers[..] else {
        return Err("not MAJOR.MINOR.PATCH".into());
    };
    let number = |n: &str| -> std::result::Result<u64, String> {
        if n.is_empty()
            || !n.bytes().all(|b| b.is_ascii_digit())
            || (n.len() > 1 && n.starts_with('0'))
        {
            return Err(format!("{n:?} is not a number without leading zeros"));
        }
        n.parse().map_err(|e| format!("{n:?}: {e}"))
    };
    Ok((number(major)?, number(minor)?, number(patch)?))
}

/// Whether `selector` selects `os`/`arch` (a missing selector selects nothing).
pub fn matches(selector: Option<&Selector>, os: &str, arch: &str) -> bool {
    let Some(selector) = selector else {
        return false;
    };
    let label = |key: &str| match key {
        "os" => Some(os),
        "arch" => Some(arch),
        _ => None,
    };
    let labels_ok = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| label(k) == Some(v.as_str()));
    let expressions_ok = selector.match_expressions.iter().flatten().all(|r| {
        let value = label(&r.key);
        match r.operator.as_str() {
            "In" => value.is_some_and(|v| r.values.iter().any(|x| x == v)),
            "NotIn" => value.is_none_or(|v| !r.values.iter().any(|x| x == v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            _ => false,
        }
    });
    labels_ok && expressions_ok
}

/// The platform of `plugin` that selects `os`/`arch`.
pub fn platform<'a>(plugin: &'a Plugin, os: &str, arch: &str) -> Result<&'a Platform> {
    plugin
        .spec
        .platforms
        .iter()
        .find(|p| matches(p.selector.as_ref(), os, arch))
        .ok_or_else(|| Error(format!("no platform of the manifest selects {os}/{arch}")))
}

/// Installs `archive` (a `.tar.gz`) for `platform` into `dir` as
/// `kubectl krew install --manifest=... --archive=ARCHIVE` does: checks its sha256
/// against the manifest's, unpacks it into `dir/unpacked`, moves the files of the file
/// operations into `dir/install`; returns the path of the bin there, which must be an
/// executable file.
pub fn install(platform: &Platform, archive: &Path, dir: &Path) -> Result<PathBuf> {
    let bytes = std::fs::read(archive).map_err(|e| Error(format!("{}: {e}", archive.display())))?;
    let sha = sha256_hex(&bytes);
    if sha != platform.sha256 {
        return Err(Error(format!(
            "{}: sha256 {sha}, the manifest says {}",
            archive.display(),
            platform.sha256
        )));
    }
    let unpacked = dir.join("unpacked");
    let installed = dir.join("install");
    for d in [&unpacked, &installed] {
        let _ = std::fs::remove_dir_all(d);
        std::fs::create_dir_all(d).map_err(|e| Error(format!("{}: {e}", d.display())))?;
    }
    crate::image::run(
        Command::new("tar")
            .arg("-xzf")
            .arg(archive)
            .arg("-C")
            .arg(&unpacked),
    )?;
    for (i, op) in platform.files.iter().enumerate() {
        for (from, to) in move_targets(&unpacked, &installed, op)
            .map_err(|why| Error(format!("files[{i}] {op:?}: {why}")))?
        {
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| Error(format!("{}: {e}", parent.display())))?;
            }
            std::fs::rename(&from, &to).map_err(|e| {
                Error(format!(
                    "files[{i}]: {} -> {}: {e}",
                    from.display(),
                    to.display()
                ))
            })?;
        }
    }
    let bin = clean(Path::new(&platform.bin))
        .filter(|p| p.is_relative())
        .ok_or_else(|| {
            Error(format!(
                "bin {:?} leaves the install directory",
                platform.bin
            ))
        })?;
    let bin = installed.join(bin);
    let meta = std::fs::metadata(&bin).map_err(|e| {
        Error(format!(
            "bin {:?} is not in the installed files ({}): {e}",
            platform.bin,
            bin.display()
        ))
    })?;
    use std::os::unix::fs::PermissionsExt;
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return Err(Error(format!(
            "bin {:?} is not an executable file",
            platform.bin
        )));
    }
    Ok(bin)
}

/// The moves of one file operation (krew's `findMoveTargets`): `from` names a file (moved
/// to `to`, or to its own name under `.`), else it is a glob whose matches move into the
/// directory `to` by their names. Nothing may leave the two directories.
fn move_targets(
    from_dir: &Path,
    to_dir: &Path,
    op: &FileOperation,
) -> std::result::Result<Vec<(PathBuf, PathBuf)>, String> {
    if !is_clean(&op.to) {
        return Err(format!("`to` {:?} is not a clean path", op.to));
    }
    let to = clean(Path::new(&op.to))
        .filter(|p| p.is_relative())
        .ok_or("`to` leaves the install directory")?;
    let from = clean(Path::new(&op.from))
        .filter(|p| p.is_relative())
        .ok_or("`from` leaves the archive")?;
    let direct = from_dir.join(&from);
    if !from.as_os_str().is_empty() && direct.exists() {
        let target = if to.as_os_str().is_empty() {
            to_dir.join(from.file_name().ok_or("`from` has no file name")?)
        } else {
            to_dir.join(&to)
        };
        return Ok(vec![(direct, target)]);
    }
    let matched = glob(from_dir, &op.from)?;
    if matched.is_empty() {
        return Err(format!(
            "no file of the archive matches the glob {:?}",
            op.from
        ));
    }
    Ok(matched
        .into_iter()
        .filter_map(|m| {
            let name = m.file_name()?.to_owned();
            Some((m, to_dir.join(&to).join(name)))
        })
        .collect())
}

/// Whether Go's `filepath.Clean` leaves `path` as it is: `.`, or no empty or `.`
/// component, no trailing `/`, and `..` only at the start.
fn is_clean(path: &str) -> bool {
    if path == "." || path == "/" {
        return true;
    }
    let parts: Vec<&str> = path.strip_prefix('/').unwrap_or(path).split('/').collect();
    let leading_parents = parts.iter().take_while(|p| **p == "..").count();
    let above_the_root = path.starts_with('/') && leading_parents > 0;
    !path.is_empty()
        && !above_the_root
        && parts[leading_parents..]
            .iter()
            .all(|p| !p.is_empty() && *p != "." && *p != "..")
}

/// `path` without `.` and with `..` applied; `None` if it goes above its start.
fn clean(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(n) => out.push(n),
            Component::RootDir | Component::Prefix(_) => out.push(c.as_os_str()),
        }
    }
    Some(out)
}

/// The paths under `dir` that `pattern` matches, component by component (`*` and `?`
/// within one component, as Go's `filepath.Glob`; character classes are not supported).
fn glob(dir: &Path, pattern: &str) -> std::result::Result<Vec<PathBuf>, String> {
    if pattern.contains(['[', '\\']) {
        return Err(format!(
            "the glob {pattern:?} uses a character class or escape, which this check does not support"
        ));
    }
    let mut found = vec![dir.to_owned()];
    for part in pattern.split('/').filter(|p| !p.is_empty() && *p != ".") {
        if part == ".." {
            return Err("`from` leaves the archive".into());
        }
        let mut next = Vec::new();
        for d in &found {
            let Ok(entries) = std::fs::read_dir(d) else {
                continue;
            };
            let mut names: Vec<_> = entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name())
                .collect();
            names.sort();
            for name in names {
                if wildcard(part.as_bytes(), name.to_string_lossy().as_bytes()) {
                    next.push(d.join(name));
                }
            }
        }
        found = next;
    }
    Ok(found)
}

fn wildcard(pattern: &[u8], name: &[u8]) -> bool {
    match (pattern.first(), name.first()) {
        (None, None) => true,
        (Some(b'*'), _) => {
            wildcard(&pattern[1..], name) || (!name.is_empty() && wildcard(pattern, &name[1..]))
        }
        (Some(b'?'), Some(_)) => wildcard(&pattern[1..], &name[1..]),
        (Some(p), Some(n)) if p == n => wildcard(&pattern[1..], &name[1..]),
        _ => false,
    }
}

/// The SHA-256 of `bytes`, in lowercase hex (as krew's `sha256` and `sha256sum` write it).
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failure is a test failure
mod tests {
    use super::*;

    const SHA: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn manifest(edit: impl FnOnce(&mut serde_yaml::Value)) -> Plugin {
        let mut value: serde_yaml::Value = serde_yaml::from_str(&format!(
            "apiVersion: {API_VERSION}
kind: Plugin
metadata: {{name: logpolicy}}
spec:
  version: v0.1.0
  homepage: https://example.com
  shortDescription: Raise log levels for a while
  platforms:
  - selector: {{matchLabels: {{os: linux, arch: amd64}}}}
    uri: https://example.com/p.tar.gz
    sha256: {SHA}
    bin: kubectl-logpolicy
    files: [{{from: kubectl-logpolicy, to: .}}]
"
        ))
        .unwrap();
        edit(&mut value);
        serde_yaml::from_value(value).unwrap()
    }

    fn check(plugin: &Plugin) -> std::result::Result<(), String> {
        validate(Path::new("dist/logpolicy.yaml"), plugin).map_err(|e| e.0)
    }

    #[test]
    fn a_complete_manifest_passes() {
        check(&manifest(|_| {})).unwrap();
    }

    #[test]
    fn each_broken_rule_is_named() {
        type Edit = Box<dyn FnOnce(&mut serde_yaml::Value)>;
        let cases: Vec<(&str, Edit)> = vec![
            (
                "apiVersion",
                Box::new(|m| m["apiVersion"] = "krew/v1".into()),
            ),
            ("kind", Box::new(|m| m["kind"] = "Plug".into())),
            (
                "the file is named",
                Box::new(|m| m["metadata"]["name"] = "other".into()),
            ),
            (
                "shortDescription is empty",
                Box::new(|m| m["spec"]["shortDescription"] = "".into()),
            ),
            (
                "does not start with v",
                Box::new(|m| m["spec"]["version"] = "0.1.0".into()),
            ),
            (
                "MAJOR.MINOR.PATCH",
                Box::new(|m| m["spec"]["version"] = "v0.1".into()),
            ),
            (
                "leading zeros",
                Box::new(|m| m["spec"]["version"] = "v0.01.0".into()),
            ),
            (
                "platforms is empty",
                Box::new(|m| m["spec"]["platforms"] = serde_yaml::Value::Sequence(vec![])),
            ),
            (
                "lowercase hex",
                Box::new(|m| m["spec"]["platforms"][0]["sha256"] = SHA.to_uppercase().into()),
            ),
            (
                "lowercase hex",
                Box::new(|m| m["spec"]["platforms"][0]["sha256"] = SHA[1..].into()),
            ),
            (
                "not https",
                Box::new(|m| {
                    m["spec"]["platforms"][0]["uri"] = "http://example.com/p.tar.gz".into()
                }),
            ),
            (
                "bin is empty",
                Box::new(|m| m["spec"]["platforms"][0]["bin"] = "".into()),
            ),
            (
                "files is empty",
                Box::new(|m| {
                    m["spec"]["platforms"][0]["files"] = serde_yaml::Value::Sequence(vec![])
                }),
            ),
            (
                "not os or arch",
                Box::new(|m| {
                    m["spec"]["platforms"][0]["selector"]["matchLabels"]["libc"] = "gnu".into()
                }),
            ),
            (
                "no platform krew runs on",
                Box::new(|m| {
                    m["spec"]["platforms"][0]["selector"]["matchLabels"]["os"] = "plan9".into()
                }),
            ),
            (
                "longer than 70",
                Box::new(|m| m["spec"]["shortDescription"] = "word ".repeat(15).into()),
            ),
            (
                "all select os=linux, arch=amd64",
                Box::new(|m| {
                    let p = m["spec"]["platforms"][0].clone();
                    let mut q = p.clone();
                    q["selector"] = serde_yaml::from_str(
                        "{matchExpressions: [{key: os, operator: In, values: [linux]}]}",
                    )
                    .unwrap();
                    m["spec"]["platforms"] = serde_yaml::Value::Sequence(vec![p, q]);
                }),
            ),
        ];
        for (expected, edit) in cases {
            let err = check(&manifest(edit)).unwrap_err();
            assert!(err.contains(expected), "expected {expected:?} in: {err}");
        }
        let err = validate(Path::new("dist/kubectl-logpolicy.yaml"), &manifest(|_| {}))
            .unwrap_err()
            .0;
        assert!(err.contains("the file is named"), "{err}");
        let err = validate(Path::new("dist/logpolicy.yml"), &manifest(|_| {}))
            .unwrap_err()
            .0;
        assert!(err.contains("ends with .yaml"), "{err}");
    }

    #[test]
    fn an_unknown_field_is_refused() {
        let mut value: serde_yaml::Value = serde_yaml::from_str(&format!(
            "apiVersion: {API_VERSION}\nkind: Plugin\nmetadata: {{name: a}}\n\
             spec: {{version: v1.0.0, shortDescription: x, platform: []}}\n"
        ))
        .unwrap();
        let err = serde_yaml::from_value::<Plugin>(value.clone()).unwrap_err();
        assert!(err.to_string().contains("platform"), "{err}");
        value["spec"] = serde_yaml::from_str("{version: v1.0.0, shortDescription: x}").unwrap();
        serde_yaml::from_value::<Plugin>(value).unwrap();
    }

    #[test]
    fn clean_paths_are_what_go_leaves_as_they_are() {
        for clean in [".", "a", "a/b", "../a", "/a", "bin"] {
            assert!(is_clean(clean), "{clean}");
        }
        for unclean in ["", "./a", "a/", "a//b", "a/./b", "a/../b", "/../a", "a/.."] {
            assert!(!is_clean(unclean), "{unclean}");
        }
    }

    #[test]
    fn versions_are_semver_with_a_v() {
        assert_eq!(parse_version("v1.2.3"), Ok((1, 2, 3)));
        assert_eq!(parse_version("v0.1.0-rc.1+build.5"), Ok((0, 1, 0)));
        for bad in [
            "1.2.3",
            "v1.2",
            "v1.2.3.4",
            "v01.2.3",
            "v1.2.3-",
            "v1.2.3-01",
            "v1.2.x",
            "v",
        ] {
            assert!(parse_version(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn selectors_match_as_label_selectors() {
        let s = |yaml: &str| serde_yaml::from_str::<Selector>(yaml).unwrap();
        let both = s("{matchLabels: {os: linux, arch: amd64}}");
        assert!(matches(Some(&both), "linux", "amd64"));
        assert!(!matches(Some(&both), "linux", "arm64"));
        let not_windows = s("{matchExpressions: [{key: os, operator: NotIn, values: [windows]}]}");
        assert!(matches(Some(&not_windows), "darwin", "arm64"));
        assert!(!matches(Some(&not_windows), "windows", "amd64"));
        assert!(!matches(None, "linux", "amd64"));
    }

    /// An archive made with tar in a fresh directory, and that directory.
    fn archive(files: &[(&str, u32)]) -> (PathBuf, crate::process::TestDir) {
        use std::os::unix::fs::PermissionsExt;
        let dir = crate::process::TestDir::new("krew").unwrap();
        let src = dir.join("src");
        for (name, mode) in files {
            let path = src.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, name).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(*mode)).unwrap();
        }
        let tgz = dir.join("a.tar.gz");
        let ok = Command::new("tar")
            .arg("-czf")
            .arg(&tgz)
            .arg("-C")
            .arg(&src)
            .arg(".")
            .status()
            .unwrap()
            .success();
        assert!(ok);
        (tgz, dir)
    }

    fn platform_for(tgz: &Path, bin: &str, files: &[(&str, &str)]) -> Platform {
        Platform {
            uri: "https://example.com/a.tar.gz".into(),
            sha256: sha256_hex(&std::fs::read(tgz).unwrap()),
            selector: None,
            files: files
                .iter()
                .map(|(from, to)| FileOperation {
                    from: (*from).into(),
                    to: (*to).into(),
                })
                .collect(),
            bin: bin.into(),
        }
    }

    #[test]
    fn install_moves_files_as_krew_does_and_finds_the_bin() {
        let (tgz, dir) = archive(&[("build/kubectl-x", 0o755), ("LICENSE", 0o644)]);
        let p = platform_for(
            &tgz,
            "bin/kubectl-x",
            &[("build/*", "bin"), ("LICENSE", ".")],
        );
        let bin = install(&p, &tgz, dir.path()).unwrap();
        assert!(bin.ends_with("install/bin/kubectl-x"), "{}", bin.display());
        assert!(dir.join("install/LICENSE").is_file());
        let p = platform_for(&tgz, "kubectl-y", &[("build/kubectl-x", "kubectl-y")]);
        assert!(install(&p, &tgz, dir.path())
            .unwrap()
            .ends_with("install/kubectl-y"));
    }

    #[test]
    fn install_refuses_a_wrong_sha_a_missing_bin_and_escapes() {
        let (tgz, dir) = archive(&[("kubectl-x", 0o755), ("README", 0o644)]);
        let install_err = |p: &Platform| install(p, &tgz, dir.path()).unwrap_err().0;

        let mut p = platform_for(&tgz, "kubectl-x", &[("kubectl-x", ".")]);
        p.sha256 = SHA.into();
        assert!(install_err(&p).contains("the manifest says"));
        let p = platform_for(&tgz, "kubectl-z", &[("kubectl-x", ".")]);
        assert!(install_err(&p).contains("not in the installed files"));
        let p = platform_for(&tgz, "README", &[("README", ".")]);
        assert!(install_err(&p).contains("not an executable"));
        let p = platform_for(&tgz, "kubectl-x", &[("nothing-*", ".")]);
        assert!(install_err(&p).contains("no file of the archive matches"));
        let p = platform_for(&tgz, "kubectl-x", &[("kubectl-x", "../x")]);
        assert!(install_err(&p).contains("leaves the install directory"));
        let p = platform_for(&tgz, "kubectl-x", &[("kubectl-x", "a/")]);
        assert!(install_err(&p).contains("not a clean path"));
        let p = platform_for(&tgz, "../kubectl-x", &[("kubectl-x", ".")]);
        assert!(install_err(&p).contains("leaves the install directory"));
    }
}
