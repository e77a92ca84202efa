//! What `scripts/release` writes to `target/dist/`, checked as its users would use it:
//! the checksums with `sha256sum -c`; the crates' manifests as crates.io would read
//! them; the krew manifest by krew's rules, installing the plugin archive it names and
//! running the binary; the packaged chart rendered with `image.digest` set to the
//! digest of the operator image built; the SBOMs against the crates of each binary.
//!
//! Needs buildah (the images); skipped (with the reason) where it cannot run, unless
//! `LOGPOLICY_E2E_REQUIRE_IMAGES=1` (as `scripts/test` sets) makes that a failure.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers: a failure is a test failure

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};

use logpolicy_e2e::cluster::repo_root;
use logpolicy_e2e::helm::{chart_dir, one, render, render_chart};
use logpolicy_e2e::image::{Images, REQUIRE_VAR};
use logpolicy_e2e::krew;
use logpolicy_e2e::release::{Dist, LOG_HEAD};

/// The release, or `None` (the test is skipped) when buildah cannot run here.
fn dist() -> Option<&'static Dist> {
    if let Err(why) = Images::buildable() {
        assert!(
            std::env::var(REQUIRE_VAR).as_deref() != Ok("1"),
            "{REQUIRE_VAR}=1, but buildah cannot build the images here: {why}"
        );
        eprintln!("SKIPPED: the release's images need buildah: {why}");
        return None;
    }
    Some(Dist::get().unwrap())
}

/// krew's and Go's name of the host's architecture.
fn arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => panic!("no release for {other}"),
    }
}

fn plugin_archive(dist: &Dist) -> String {
    format!(
        "kubectl-logpolicy_v{}_linux_{}.tar.gz",
        dist.version,
        arch()
    )
}

/// Runs `cmd`; its stdout, or a panic with its stderr.
fn run(cmd: &mut Command) -> String {
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// One file of a tar archive (`tar -xOf`).
fn tar_file(archive: &Path, member: &str) -> Vec<u8> {
    let out = Command::new("tar")
        .arg("-xOf")
        .arg(archive)
        .arg(member)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tar -xOf {} {member}: {}",
        archive.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn tar_list(archive: &Path) -> Vec<String> {
    run(Command::new("tar").arg("-tf").arg(archive))
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_checksums_cover_every_artifact_and_hold() {
    let _file = crate::one_file_at_a_time(module_path!());
    let Some(dist) = dist() else { return };
    let v = &dist.version;
    let archive = plugin_archive(dist);
    let expected: BTreeSet<String> = [
        format!("logpolicy-{v}.crate"),
        format!("logpolicy-api-{v}.crate"),
        format!("logpolicy-operator-{v}.crate"),
        format!("kubectl-logpolicy-{v}.crate"),
        archive.clone(),
        format!("{archive}.sha256"),
        "logpolicy.yaml".to_owned(),
        format!("logpolicy-operator-{v}.tgz"),
        format!("logpolicy-operator-{v}.oci.tar"),
        format!("logpolicy-demo-service-{v}.oci.tar"),
        "images.txt".to_owned(),
        format!("logpolicy-operator-{v}.spdx.json"),
        format!("logpolicy-demo-service-{v}.spdx.json"),
        "SHA256SUMS".to_owned(),
    ]
    .into_iter()
    .collect();
    let files: BTreeSet<String> = dist.files().unwrap().into_iter().collect();
    assert_eq!(files, expected, "the files of {}", dist.dir.display());

    // As a user checks a download.
    let report = run(Command::new("sha256sum")
        .args(["--strict", "-c", "SHA256SUMS"])
        .current_dir(&dist.dir));
    let checked: BTreeSet<String> = report
        .lines()
        .map(|l| {
            let name = l.strip_suffix(": OK").unwrap_or_else(|| panic!("{l}"));
            name.to_owned()
        })
        .collect();
    let mut all_but_sums = expected.clone();
    all_but_sums.remove("SHA256SUMS");
    assert_eq!(checked, all_but_sums, "what SHA256SUMS covers");

    // The sums are the files' (not only consistent with what sha256sum reads back).
    let sums = std::fs::read_to_string(dist.path("SHA256SUMS")).unwrap();
    for line in sums.lines() {
        let (sum, name) = line.split_once("  ").unwrap();
        assert_eq!(
            sum,
            krew::sha256_hex(&std::fs::read(dist.path(name)).unwrap()),
            "{name}"
        );
    }
    let own = std::fs::read_to_string(dist.path(&format!("{archive}.sha256"))).unwrap();
    assert!(
        sums.lines().any(|l| l == own.trim_end()),
        "{archive}.sha256 ({own}) is not the line of SHA256SUMS"
    );
}

#[test]
fn the_release_log_file_keeps_what_it_held_and_gets_every_step() {
    let _file = crate::one_file_at_a_time(module_path!());
    let Some(dist) = dist() else { return };
    let log = std::fs::read_to_string(&dist.log).unwrap();
    assert!(
        log.starts_with(LOG_HEAD),
        "{}: what it held before scripts/release ran is gone; it starts with:\n{}",
        dist.log.display(),
        log.lines().take(5).collect::<Vec<_>>().join("\n")
    );
    // What went to stderr before scripts/images (cargo package's progress), what
    // scripts/images wrote there, and the lines of its stdout that scripts/release shows
    // as it reads them (where `tee /dev/stderr` cut the file). (scripts/release's own
    // headings go to its stdout.)
    for step in [
        "Packaging logpolicy v",
        "== cargo auditable build",
        "== buildah bud logpolicy/logpolicy-operator:",
    ] {
        assert!(
            log.contains(step),
            "{step:?} is not in {}",
            dist.log.display()
        );
    }
    let v = &dist.version;
    assert!(
        log.contains(&format!("logpolicy/logpolicy-operator:{v}\t")),
        "the images' lines are not in {}",
        dist.log.display()
    );
}

/// Whether `haystack` holds `needle`.
fn holds(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn the_shipped_binaries_name_no_directory_of_the_build_host() {
    let _file = crate::one_file_at_a_time(module_path!());
    let Some(dist) = dist() else { return };
    let canonical = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_owned());
    let cargo_home = std::env::var_os("CARGO_HOME").map_or_else(
        || Path::new(&std::env::var_os("HOME").unwrap()).join(".cargo"),
        std::path::PathBuf::from,
    );
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| repo_root().join("target"), std::path::PathBuf::from);
    let directories: BTreeSet<String> = [repo_root(), cargo_home, target.clone()]
        .iter()
        .flat_map(|p| [p.clone(), canonical(p)])
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    // The plugin as the release ships it; the operator and the demo service as
    // scripts/images copied them into the images.
    let host = run(Command::new("rustc").arg("-vV"))
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_owned))
        .unwrap();
    let built = canonical(&target).join(host).join("image");
    let binaries = [
        (
            "kubectl-logpolicy (the plugin archive)".to_owned(),
            tar_file(&dist.path(&plugin_archive(dist)), "kubectl-logpolicy"),
        ),
        (
            "logpolicy-operator".to_owned(),
            std::fs::read(built.join("logpolicy-operator")).unwrap(),
        ),
        (
            "logpolicy-demo-service".to_owned(),
            std::fs::read(built.join("logpolicy-demo-service")).unwrap(),
        ),
    ];
    for (name, bytes) in &binaries {
        assert!(bytes.len() > 1_000_000, "{name}: {} bytes", bytes.len());
        // The remapped names are there instead (panic locations in dependencies).
        assert!(
            holds(bytes, b"/cargo/registry/src/"),
            "{name} names no /cargo/registry/src/ path: are the paths remapped?"
        );
        for dir in &directories {
            assert!(
                !holds(bytes, format!("{dir}/").as_bytes()),
                "{name} names the build host's directory {dir}"
            );
        }
    }
}

/// The dependency sections of a normalized Cargo.toml (`[dependencies.NAME]`) and their
/// `key = value` lines.
fn dependencies(cargo_toml: &str) -> Vec<(String, Vec<String>)> {
    let mut sections = Vec::new();
    let mut current: Option<(String, Vec<String>)> = None;
    for line in cargo_toml.lines() {
        if line.starts_with('[') {
            sections.extend(current.take());
            if let Some(name) = line
                .strip_prefix("[dependencies.")
                .and_then(|n| n.strip_suffix(']'))
            {
                current = Some((name.trim_matches('"').to_owned(), Vec::new()));
            }
        } else if let Some((_, lines)) = current.as_mut() {
            if !line.trim().is_empty() {
                lines.push(line.trim().to_owned());
            }
        }
    }
    sections.extend(current);
    sections
}

#[test]
fn the_crates_name_their_workspace_dependencies_by_version_in_publishing_order() {
    let _file = crate::one_file_at_a_time(module_path!());
    let Some(dist) = dist() else { return };
    let v = &dist.version;
    // In the order to publish, each with the workspace crates it depends on: only
    // crates before it. The plugin builds on the shared API types, not the operator.
    let order: [(&str, &[&str]); 4] = [
        ("logpolicy", &[]),
        ("logpolicy-api", &["logpolicy"]),
        ("logpolicy-operator", &["logpolicy", "logpolicy-api"]),
        ("kubectl-logpolicy", &["logpolicy", "logpolicy-api"]),
    ];
    let names: Vec<&str> = order.iter().map(|(n, _)| *n).collect();
    for (i, (name, expected)) in order.iter().enumerate() {
        let krate = dist.path(&format!("{name}-{v}.crate"));
        let manifest =
            String::from_utf8(tar_file(&krate, &format!("{name}-{v}/Cargo.toml"))).unwrap();
        assert!(
            !manifest.lines().any(|l| l.trim() == "publish = false"),
            "{name}: publish = false"
        );
        let workspace_deps: Vec<(String, Vec<String>)> = dependencies(&manifest)
            .into_iter()
            .filter(|(dep, _)| names.contains(&dep.as_str()))
            .collect();
        let mut found: Vec<&str> = workspace_deps.iter().map(|(d, _)| d.as_str()).collect();
        found.sort_unstable();
        assert_eq!(
            found, *expected,
            "{name}: its dependencies on the workspace"
        );
        assert!(
            found.iter().all(|d| names[..i].contains(d)),
            "{name} depends on a crate published after it: {found:?}"
        );
        for (dep, lines) in &workspace_deps {
            assert!(
                lines.contains(&format!("version = \"{v}\"")),
                "{name} -> {dep}: no version {v}: {lines:?}"
            );
            assert!(
                !lines.iter().any(|l| l.starts_with("path")),
                "{name} -> {dep}: a path in the package: {lines:?}"
            );
        }
    }
}

#[test]
fn the_krew_manifest_follows_krews_rules_and_installs_the_static_plugin() {
    let _file = crate::one_file_at_a_time(module_path!());
    let Some(dist) = dist() else { return };
    let v = &dist.version;
    let path = dist.path("logpolicy.yaml");
    let manifest = krew::read(&path).unwrap();
    krew::validate(&path, &manifest).unwrap();
    assert_eq!(manifest.spec.version, format!("v{v}"));
    assert_eq!(manifest.spec.homepage, env!("CARGO_PKG_REPOSITORY"));

    let archive_name = plugin_archive(dist);
    let platform = krew::platform(&manifest, "linux", arch()).unwrap();
    assert_eq!(
        platform.uri,
        format!(
            "{}/releases/download/v{v}/{archive_name}",
            env!("CARGO_PKG_REPOSITORY")
        )
    );
    let archive = dist.path(&archive_name);
    let mut entries = tar_list(&archive);
    entries.sort();
    assert_eq!(entries, ["LICENSE", "kubectl-logpolicy"]);
    assert_eq!(
        tar_file(&archive, "LICENSE"),
        std::fs::read(repo_root().join("LICENSE")).unwrap()
    );

    // `kubectl krew install --manifest=logpolicy.yaml --archive=ARCHIVE`, as krew does it.
    let dir = dist.dir.parent().unwrap().join("krew-install-test");
    let bin = krew::install(platform, &archive, &dir).unwrap();
    assert!(dir.join("install/LICENSE").is_file());
    let ldd = Command::new("ldd").arg(&bin).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&ldd.stdout).contains("=>"),
        "the plugin is dynamically linked:\n{}",
        String::from_utf8_lossy(&ldd.stdout)
    );
    let version = run(Command::new(&bin).arg("--version"));
    assert_eq!(version.trim(), format!("kubectl-logpolicy {v}"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `blobs/sha256/HEX` of an OCI archive, checked against its name.
fn blob(archive: &Path, digest: &str) -> Vec<u8> {
    let hex = digest.strip_prefix("sha256:").unwrap();
    let bytes = tar_file(archive, &format!("blobs/sha256/{hex}"));
    assert_eq!(
        krew::sha256_hex(&bytes),
        hex,
        "{}: blob {digest}",
        archive.display()
    );
    bytes
}

#[test]
fn the_packaged_chart_pins_the_operator_image_built_by_its_digest() {
    let _file = crate::one_file_at_a_time(module_path!());
    let Some(dist) = dist() else { return };
    let v = &dist.version;
    // images.txt: NAME:VERSION@DIGEST, the digest of each archive's one manifest.
    let images = std::fs::read_to_string(dist.path("images.txt")).unwrap();
    let mut references = Vec::new();
    for name in ["logpolicy-operator", "logpolicy-demo-service"] {
        let archive = dist.path(&format!("{name}-{v}.oci.tar"));
        let index: serde_json::Value =
            serde_json::from_slice(&tar_file(&archive, "index.json")).unwrap();
        let manifests = index["manifests"].as_array().unwrap();
        assert_eq!(manifests.len(), 1, "{name}: {index}");
        let digest = manifests[0]["digest"].as_str().unwrap();
        let manifest: serde_json::Value = serde_json::from_slice(&blob(&archive, digest)).unwrap();
        for layer in manifest["layers"].as_array().unwrap() {
            blob(&archive, layer["digest"].as_str().unwrap());
        }
        let reference = format!("logpolicy/{name}:{v}@{digest}");
        assert!(
            images.lines().any(|l| l == reference),
            "images.txt has no {reference}:\n{images}"
        );
        references.push((name, digest.to_owned()));
    }
    assert_eq!(images.lines().count(), 2, "{images}");

    let chart = dist.path(&format!("logpolicy-operator-{v}.tgz"));
    // Helm reads Chart.yaml first.
    assert_eq!(tar_list(&chart)[0], "logpolicy-operator/Chart.yaml");
    // The chart's default image is the tag; image.digest pins the image built.
    let (_, digest) = &references[0];
    let image = |set: &[(&str, &str)]| {
        let objects = render_chart(&chart, "lp", "logpolicy-system", set).unwrap();
        let deployment = one(&objects, "Deployment").unwrap();
        deployment["spec"]["template"]["spec"]["containers"][0]["image"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(image(&[]), format!("logpolicy/logpolicy-operator:{v}"));
    assert_eq!(
        image(&[("image.digest", digest)]),
        format!("logpolicy/logpolicy-operator@{digest}")
    );
    // The packaged chart is the chart: it renders as charts/logpolicy-operator does.
    let set = [("image.digest", digest.as_str()), ("replicaCount", "2")];
    assert_eq!(
        render_chart(&chart, "lp", "logpolicy-system", &set).unwrap(),
        render("lp", "logpolicy-system", &set).unwrap(),
        "{} renders otherwise than {}",
        chart.display(),
        chart_dir().display()
    );
}

/// `name = "NAME"` then `version = "V"` in Cargo.lock: the versions of NAME.
fn locked_versions(name: &str) -> Vec<String> {
    let lock = std::fs::read_to_string(repo_root().join("Cargo.lock")).unwrap();
    let lines: Vec<&str> = lock.lines().collect();
    lines
        .windows(2)
        .filter(|w| w[0] == format!("name = \"{name}\""))
        .filter_map(|w| w[1].strip_prefix("version = \""))
        .map(|v| v.trim_end_matches('"').to_owned())
        .collect()
}

#[test]
fn each_image_has_an_sbom_of_the_crates_in_its_binary() {
    let _file = crate::one_file_at_a_time(module_path!());
    let Some(dist) = dist() else { return };
    let v = &dist.version;
    for (name, present, absent) in [
        (
            // With the kubectl plugin, which the chart's `helm test` runs.
            "logpolicy-operator",
            &[
                "logpolicy-operator",
                "kubectl-logpolicy",
                "logpolicy-api",
                "logpolicy",
                "kube-client",
                "rustls",
                "clap_complete",
            ][..],
            &["logpolicy-demo-service", "proptest"][..],
        ),
        (
            "logpolicy-demo-service",
            &["logpolicy-demo-service", "logpolicy"][..],
            &[
                "kube-client",
                "logpolicy-operator",
                "logpolicy-api",
                "proptest",
            ][..],
        ),
    ] {
        let path = dist.path(&format!("{name}-{v}.spdx.json"));
        let sbom: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(sbom["spdxVersion"], "SPDX-2.3", "{}", path.display());
        let packages = sbom["packages"].as_array().unwrap();
        let crates: Vec<(&str, &str)> = packages
            .iter()
            .filter(|p| {
                p["externalRefs"].as_array().into_iter().flatten().any(|r| {
                    r["referenceLocator"]
                        .as_str()
                        .is_some_and(|l| l.starts_with("pkg:cargo/"))
                })
            })
            .map(|p| {
                (
                    p["name"].as_str().unwrap(),
                    p["versionInfo"].as_str().unwrap_or(""),
                )
            })
            .collect();
        assert!(
            crates.len() > 20,
            "{name}: {} crates in its SBOM: {crates:?}",
            crates.len()
        );
        for krate in present {
            let found: Vec<&str> = crates
                .iter()
                .filter(|(n, _)| n == krate)
                .map(|(_, v)| *v)
                .collect();
            assert!(!found.is_empty(), "{name}: no {krate} in its SBOM");
            let locked = locked_versions(krate);
            for version in found {
                assert!(
                    locked.iter().any(|l| l == version),
                    "{name}: {krate} {version} in the SBOM, Cargo.lock has {locked:?}"
                );
            }
        }
        for krate in absent {
            assert!(
                !crates.iter().any(|(n, _)| n == krate),
                "{name}: {krate} in its SBOM"
            );
        }
    }
}

/// The README's push, `skopeo copy --preserve-digests oci-archive:... DEST`, keeps the
/// digest `images.txt` gives (so the chart's `image.digest` finds the pushed image):
/// run with an OCI layout as the destination (no registry here), the digest skopeo
/// reads back from it is the one in `images.txt`.
#[test]
fn pushing_with_skopeo_as_the_readme_says_keeps_the_digest() {
    let _file = crate::one_file_at_a_time(module_path!());
    let Some(dist) = dist() else { return };
    if Command::new("skopeo").arg("--version").output().is_err() {
        assert!(
            std::env::var(REQUIRE_VAR).as_deref() != Ok("1"),
            "{REQUIRE_VAR}=1, but skopeo is not installed (apt-get install skopeo)"
        );
        eprintln!("SKIPPED: skopeo is not installed");
        return;
    }
    let v = &dist.version;
    let images = std::fs::read_to_string(dist.path("images.txt")).unwrap();
    let dest = std::env::temp_dir().join(format!("logpolicy-skopeo-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dest);
    std::fs::create_dir_all(&dest).unwrap();
    for name in ["logpolicy-operator", "logpolicy-demo-service"] {
        let archive = dist.path(&format!("{name}-{v}.oci.tar"));
        let layout = format!("oci:{}:{v}", dest.join(name).display());
        run(Command::new("skopeo").args([
            "copy",
            "--quiet",
            "--preserve-digests",
            &format!("oci-archive:{}", archive.display()),
            &layout,
        ]));
        let inspected: serde_json::Value =
            serde_json::from_str(&run(Command::new("skopeo").args(["inspect", &layout]))).unwrap();
        let digest = inspected["Digest"].as_str().unwrap();
        let reference = format!("logpolicy/{name}:{v}@{digest}");
        assert!(
            images.lines().any(|l| l == reference),
            "skopeo pushed {reference}, images.txt says:\n{images}"
        );
    }
    let _ = std::fs::remove_dir_all(&dest);
}
