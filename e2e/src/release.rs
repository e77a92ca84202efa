//! The release artifacts: `scripts/release --no-verify --allow-dirty` run once per test
//! process, with the buildah storage of the image tests ([`crate::image`]), so that the
//! images and the static binaries it reuses are built once.
//!
//! `--no-verify`: `./scripts/test` verifies the `logpolicy` package by building it from
//! its own files; the operator's and the plugin's would each be a debug build of kube
//! from scratch (minutes), and the images are built from the same sources.
//! `--allow-dirty`: a local run checks the work in progress; CI's tree is clean.
//!
//! Its stderr is appended to `target/dist-log/release.log`, a file that holds a line
//! before it starts ([`LOG_HEAD`]), as `scripts/release 2>>log` or a CI log kept as a
//! file would: the script must add to the file, never cut it.

use std::path::PathBuf;
use std::sync::OnceLock;

use crate::cluster::{repo_root, Error, Result};
use crate::image::{run_repo_script_to, target_dir};

/// The line the release's log file holds before `scripts/release` starts.
pub const LOG_HEAD: &str = "written before scripts/release started: it must stay\n";

/// What `scripts/release` wrote.
#[derive(Debug)]
pub struct Dist {
    /// `target/dist`.
    pub dir: PathBuf,
    /// The crates' version, e.g. `0.1.0`.
    pub version: String,
    /// The file its stderr was appended to, after [`LOG_HEAD`].
    pub log: PathBuf,
}

impl Dist {
    /// The release, made once per process.
    pub fn get() -> Result<&'static Dist> {
        static MADE: OnceLock<Result<Dist>> = OnceLock::new();
        MADE.get_or_init(make).as_ref().map_err(Clone::clone)
    }

    /// A file of the release.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The names of its files, sorted.
    pub fn files(&self) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&self.dir)
            .map_err(|e| Error(format!("{}: {e}", self.dir.display())))?
        {
            let entry = entry.map_err(|e| Error(format!("{}: {e}", self.dir.display())))?;
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        Ok(names)
    }
}

fn make() -> Result<Dist> {
    let log_dir = target_dir().join("dist-log");
    let log = log_dir.join("release.log");
    let io = |e: std::io::Error| Error(format!("{}: {e}", log.display()));
    std::fs::create_dir_all(&log_dir).map_err(io)?;
    std::fs::write(&log, LOG_HEAD).map_err(io)?;
    let stderr = std::fs::OpenOptions::new()
        .append(true)
        .open(&log)
        .map_err(io)?;
    let made = run_repo_script_to("release", &["--no-verify", "--allow-dirty"], stderr.into());
    if let Err(e) = made {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        return Err(Error(format!(
            "{e}\nits stderr ({}):\n{text}",
            log.display()
        )));
    }
    Ok(Dist {
        dir: target_dir().join("dist"),
        version: layer_version()?,
        log,
    })
}

/// The `logpolicy` crate's version, from `layer/Cargo.toml`.
fn layer_version() -> Result<String> {
    let path = repo_root().join("layer/Cargo.toml");
    let text =
        std::fs::read_to_string(&path).map_err(|e| Error(format!("{}: {e}", path.display())))?;
    text.lines()
        .find_map(|l| l.strip_prefix("version = "))
        .map(|v| v.trim().trim_matches('"').to_owned())
        .ok_or_else(|| Error(format!("{}: no version", path.display())))
}
