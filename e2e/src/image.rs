//! The container images that `scripts/images` builds, read from their OCI archives the
//! way a container runtime reads them (the manifest, the config, the layers), and run:
//! the layers unpacked into a root filesystem, the config's entrypoint started in it
//! with `chroot --userspec` as the config's user, with the config's environment and
//! nothing of the host's.
//!
//! [`Runtime`] is where the harness runs the operator and the demo service: the
//! workspace's binaries on the host (the default), or these images.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use serde_json::Value;

use crate::binaries::{without_test_env, Binaries};
use crate::cluster::repo_root;
use crate::{Error, Result};

/// The operator's and the demo service's images.
#[derive(Debug)]
pub struct Images {
    /// `logpolicy/logpolicy-operator:VERSION`.
    pub operator: Image,
    /// `logpolicy/logpolicy-demo-service:VERSION`.
    pub demo_service: Image,
}

/// Set to `1` (as `scripts/test` does), a machine where buildah cannot run fails the
/// image tests instead of skipping them.
pub const REQUIRE_VAR: &str = "LOGPOLICY_E2E_REQUIRE_IMAGES";

impl Images {
    /// Whether buildah can build images here: `Err` with the reason when it cannot
    /// (not installed, or no storage it can use).
    pub fn buildable() -> Result<()> {
        let storage = storage_dir();
        let out = Command::new("buildah")
            .args(["--storage-driver", "vfs", "--root"])
            .arg(storage.join("root"))
            .arg("--runroot")
            .arg(storage.join("run"))
            .arg("info")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| Error(format!("buildah cannot run: {e} (apt-get install buildah)")))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(Error(format!(
                "`buildah info` failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )))
        }
    }

    /// Both images, built once per process with `scripts/images` (its own buildah
    /// storage in `target/images/storage`), read from the archives it writes.
    pub fn get() -> Result<&'static Images> {
        static BUILT: OnceLock<Result<Images>> = OnceLock::new();
        BUILT.get_or_init(build).as_ref().map_err(Clone::clone)
    }
}

pub(crate) fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| repo_root().join("target"), PathBuf::from)
}

pub(crate) fn storage_dir() -> PathBuf {
    target_dir().join("images").join("storage")
}

/// Runs `scripts/NAME ARGS` from the repository's root with the image tests' buildah
/// storage, its stderr shown as it goes; its stdout, or an error holding it.
pub(crate) fn run_repo_script(name: &str, args: &[&str]) -> Result<String> {
    run_repo_script_to(name, args, Stdio::inherit())
}

/// As [`run_repo_script`], with the script's stderr going to `stderr` (e.g. a file
/// opened to append).
pub(crate) fn run_repo_script_to(name: &str, args: &[&str], stderr: Stdio) -> Result<String> {
    let started = std::time::Instant::now();
    let mut cmd = Command::new(repo_root().join("scripts").join(name));
    without_test_env(&mut cmd);
    let out = cmd
        .args(args)
        .current_dir(repo_root())
        .env("LOGPOLICY_IMAGES_STORAGE", storage_dir())
        .stdin(Stdio::null())
        .stderr(stderr)
        .output()
        .map_err(|e| Error(format!("running scripts/{name}: {e}")))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return Err(Error(format!(
            "scripts/{name} failed ({}):\n{stdout}",
            out.status
        )));
    }
    eprintln!(
        "e2e: scripts/{name}: {:.1} s\n{stdout}",
        started.elapsed().as_secs_f64()
    );
    Ok(stdout)
}

fn build() -> Result<Images> {
    let stdout = run_repo_script("images", &[])?;
    // `TAG<tab>ARCHIVE<tab>SIZE bytes` per image.
    let mut images = BTreeMap::new();
    for line in stdout.lines() {
        let fields: Vec<&str> = line.split('\t').collect();
        if let [tag, archive, _] = fields[..] {
            let image = Image::open(tag, &repo_root().join(archive))?;
            images.insert(image.name().to_owned(), image);
        }
    }
    let mut take = |name: &str| {
        images.remove(name).ok_or_else(|| {
            Error(format!(
                "scripts/images reported no {name} image:\n{stdout}"
            ))
        })
    };
    Ok(Images {
        operator: take("logpolicy-operator")?,
        demo_service: take("logpolicy-demo-service")?,
    })
}

/// One image, unpacked from its OCI archive into `target/images/unpacked/`.
#[derive(Debug)]
pub struct Image {
    /// Its reference, `logpolicy/NAME:VERSION`.
    pub tag: String,
    /// The OCI archive.
    pub archive: PathBuf,
    /// Its config (`config` of the OCI image config: `User`, `Entrypoint`, `Env`,
    /// `Labels`, ...).
    pub config: Value,
    /// Its layers (tar files, possibly compressed), bottom first, with their
    /// compressed sizes.
    pub layers: Vec<(PathBuf, u64)>,
}

impl Image {
    /// Reads the archive: `index.json`, its one manifest, the config and the layers.
    pub fn open(tag: &str, archive: &Path) -> Result<Image> {
        let name = tag.rsplit('/').next().unwrap_or(tag).replace(':', "-");
        let dir = target_dir().join("images").join("unpacked").join(name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| Error(format!("{}: {e}", dir.display())))?;
        run(Command::new("tar")
            .arg("-xf")
            .arg(archive)
            .arg("-C")
            .arg(&dir))?;
        let json = |path: PathBuf| -> Result<Value> {
            let text = std::fs::read_to_string(&path)
                .map_err(|e| Error(format!("{}: {e}", path.display())))?;
            serde_json::from_str(&text).map_err(|e| Error(format!("{}: {e}", path.display())))
        };
        let blob = |descriptor: &Value| -> Result<PathBuf> {
            let digest = descriptor["digest"].as_str().unwrap_or_default();
            let hex = digest.strip_prefix("sha256:").ok_or_else(|| {
                Error(format!(
                    "{}: no sha256 digest in {descriptor}",
                    archive.display()
                ))
            })?;
            Ok(dir.join("blobs").join("sha256").join(hex))
        };
        let index = json(dir.join("index.json"))?;
        let manifests = index["manifests"].as_array().cloned().unwrap_or_default();
        let [manifest] = &manifests[..] else {
            return Err(Error(format!(
                "{}: {} manifests in index.json, expected one",
                archive.display(),
                manifests.len()
            )));
        };
        let manifest = json(blob(manifest)?)?;
        let config = json(blob(&manifest["config"])?)?;
        let layers = manifest["layers"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|l| Ok((blob(l)?, l["size"].as_u64().unwrap_or(0))))
            .collect::<Result<Vec<_>>>()?;
        Ok(Image {
            tag: tag.to_owned(),
            archive: archive.to_owned(),
            config: config["config"].clone(),
            layers,
        })
    }

    /// `NAME` of `logpolicy/NAME:VERSION`.
    pub fn name(&self) -> &str {
        let repository = self.tag.split(':').next().unwrap_or(&self.tag);
        repository.rsplit('/').next().unwrap_or(repository)
    }

    /// A label of its config.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.config["Labels"][key].as_str()
    }

    /// Its config's `User`.
    pub fn user(&self) -> &str {
        self.config["User"].as_str().unwrap_or("")
    }

    /// Its config's `Entrypoint`.
    pub fn entrypoint(&self) -> Vec<String> {
        strings(&self.config["Entrypoint"])
    }

    /// Every entry of its layers (`tar -t`): a directory ends with `/`.
    pub fn entries(&self) -> Result<Vec<String>> {
        let mut all = Vec::new();
        for (layer, _) in &self.layers {
            let list = run(Command::new("tar").arg("-tf").arg(layer))?;
            all.extend(list.lines().map(|l| l.trim_start_matches("./").to_owned()));
        }
        Ok(all)
    }

    /// The bytes of its layers, compressed as stored (what a registry holds and a node
    /// pulls) and uncompressed (what it takes on a node's disk).
    pub fn sizes(&self) -> Result<(u64, u64)> {
        let mut compressed = 0;
        let mut uncompressed = 0;
        for (layer, size) in &self.layers {
            compressed += size;
            // gzip -dcf passes an uncompressed layer through as it is.
            let text = run(Command::new("sh")
                .arg("-c")
                .arg("gzip -dcf <\"$0\" | wc -c")
                .arg(layer))?;
            uncompressed += text
                .trim()
                .parse::<u64>()
                .map_err(|e| Error(format!("size of {}: {e}", layer.display())))?;
        }
        Ok((compressed, uncompressed))
    }

    /// Unpacks its layers into `root` (a whiteout, which a layer on top of another
    /// would need, is refused: these images have one layer on scratch), and makes the
    /// device nodes a container runtime provides in `/dev`.
    pub fn unpack(&self, root: &Path) -> Result<()> {
        if let Some(w) = self.entries()?.iter().find(|e| e.contains(".wh.")) {
            return Err(Error(format!("{}: a whiteout {w}", self.tag)));
        }
        std::fs::create_dir_all(root).map_err(|e| Error(format!("{}: {e}", root.display())))?;
        for (layer, _) in &self.layers {
            run(Command::new("tar")
                .args(["--same-owner", "-xpf"])
                .arg(layer)
                .arg("-C")
                .arg(root))?;
        }
        // The devices every container gets (the OCI runtime spec's default devices);
        // a static binary's randomness reads /dev/urandom when it cannot find the
        // getrandom function of a dynamic libc.
        let dev = root.join("dev");
        std::fs::create_dir_all(&dev).map_err(|e| Error(format!("{}: {e}", dev.display())))?;
        for (name, major, minor) in [
            ("null", 1, 3),
            ("zero", 1, 5),
            ("full", 1, 7),
            ("random", 1, 8),
            ("urandom", 1, 9),
            ("tty", 5, 0),
        ] {
            run(Command::new("mknod")
                .args(["-m", "666"])
                .arg(dev.join(name))
                .arg("c")
                .arg(major.to_string())
                .arg(minor.to_string()))?;
        }
        Ok(())
    }

    /// The command that runs its entrypoint with `args` in `root` (unpacked with
    /// [`Image::unpack`]) as its user: `chroot --userspec=USER ROOT ENTRYPOINT... ARGS...`
    /// with its config's `Env` and `env`, and no variable of the host.
    pub fn command(&self, root: &Path, args: &[String], env: &[(String, String)]) -> Command {
        let mut cmd = Command::new("chroot");
        cmd.arg(format!("--userspec={}", self.user()))
            .arg(root)
            .args(self.entrypoint())
            .args(args)
            .env_clear();
        for kv in strings(&self.config["Env"]) {
            if let Some((k, v)) = kv.split_once('=') {
                cmd.env(k, v);
            }
        }
        cmd.envs(env.iter().map(|(k, v)| (k, v)));
        cmd
    }
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_owned))
        .collect()
}

/// Runs `cmd`; its stdout, or an error with its stderr.
pub(crate) fn run(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Error(format!("{cmd:?}: {e}")))?;
    if !out.status.success() {
        return Err(Error(format!(
            "{cmd:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A command (split at whitespace) put in front of the operator binary on the host
/// when set: a profiler, e.g. `heaptrack -o /tmp/operator` (bench/README.md). An
/// image's entrypoint is its own.
pub const OPERATOR_WRAPPER_VAR: &str = "LOGPOLICY_E2E_OPERATOR_WRAPPER";

/// Which program a [`Launch`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Program {
    /// `logpolicy-operator`.
    Operator,
    /// `logpolicy-demo-service`.
    DemoService,
}

/// Where the harness runs the operator and the demo service.
#[derive(Debug, Clone, Copy, Default)]
pub enum Runtime {
    /// The workspace's binaries ([`Binaries`]), as processes of the host.
    #[default]
    Host,
    /// The images' entrypoints, each in a root filesystem of its own unpacked from the
    /// image, as the image's user (sharing the host's network, as `hostNetwork` pods).
    Images(&'static Images),
}

/// How to start a program, wherever it runs: args, environment, and the files it reads.
#[derive(Debug, Default)]
pub struct Launch {
    args: Vec<String>,
    env: Vec<(String, String)>,
    /// Host variables a process on the host must not inherit.
    unset: Vec<String>,
    /// (the file on the host, the path of its copy in an image's root filesystem, the
    /// variable naming it)
    files: Vec<(PathBuf, String, Option<String>)>,
}

impl Launch {
    /// With these args.
    pub fn args<S: Into<String>>(mut self, args: impl IntoIterator<Item = S>) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// With a variable.
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// Without a variable of the host's environment (a program in an image inherits
    /// none anyway).
    pub fn unset(mut self, key: &str) -> Self {
        self.unset.push(key.to_owned());
        self
    }

    /// With a variable naming a file: `host` on the host; in an image the file is copied
    /// to `inside` and the variable names that.
    pub fn file_env(mut self, key: &str, host: &Path, inside: &str) -> Self {
        self.files
            .push((host.to_owned(), inside.to_owned(), Some(key.to_owned())));
        self
    }

    /// With a file at a fixed path in an image (`inside`), such as a service account's
    /// token; a program on the host does not get it.
    pub fn file(mut self, host: &Path, inside: &str) -> Self {
        self.files.push((host.to_owned(), inside.to_owned(), None));
        self
    }

    /// The command that starts `program` in `runtime`. For an image, its root
    /// filesystem is `dir/NAME.root` (unpacked on first use, kept for a restart), and
    /// the files are copied into it (readable by the image's user) now.
    pub fn command(
        &self,
        runtime: Runtime,
        program: Program,
        dir: &Path,
        name: &str,
    ) -> Result<Command> {
        match runtime {
            Runtime::Host => {
                let binaries = Binaries::get()?;
                let binary = match program {
                    Program::Operator => binaries.operator(),
                    Program::DemoService => binaries.demo_service(),
                };
                let wrapper = std::env::var(OPERATOR_WRAPPER_VAR).unwrap_or_default();
                let mut cmd = match wrapper.split_whitespace().collect::<Vec<_>>()[..] {
                    [first, ref rest @ ..] if program == Program::Operator => {
                        let mut cmd = Command::new(first);
                        cmd.args(rest).arg(binary);
                        cmd
                    }
                    _ => Command::new(binary),
                };
                cmd.args(&self.args);
                for key in &self.unset {
                    cmd.env_remove(key);
                }
                for (host, _, key) in &self.files {
                    if let Some(key) = key {
                        cmd.env(key, host);
                    }
                }
                cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
                Ok(cmd)
            }
            Runtime::Images(images) => {
                let image = match program {
                    Program::Operator => &images.operator,
                    Program::DemoService => &images.demo_service,
                };
                let root = dir.join(format!("{name}.root"));
                if !root.exists() {
                    image.unpack(&root)?;
                }
                let mut env = self.env.clone();
                for (host, inside, key) in &self.files {
                    let to = root.join(inside.trim_start_matches('/'));
                    if let Some(parent) = to.parent() {
                        std::fs::create_dir_all(parent)
                            .map_err(|e| Error(format!("{}: {e}", parent.display())))?;
                    }
                    std::fs::copy(host, &to).map_err(|e| {
                        Error(format!("{} -> {}: {e}", host.display(), to.display()))
                    })?;
                    if let Some(key) = key {
                        env.push((key.clone(), inside.clone()));
                    }
                }
                Ok(image.command(&root, &self.args, &env))
            }
        }
    }
}

/// The uid and gid of a running process (`Uid:`/`Gid:` of `/proc/PID/status`: real,
/// effective, saved, filesystem).
pub fn process_ids(pid: u32) -> Result<(Vec<u32>, Vec<u32>)> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).map_err(|e| Error(format!("{path}: {e}")))?;
    let ids = |field: &str| -> Vec<u32> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .map(|rest| {
                rest.split_whitespace()
                    .filter_map(|n| n.parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    Ok((ids("Uid:"), ids("Gid:")))
}
