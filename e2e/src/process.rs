//! Child processes of a test: output captured to files in the test's directory, killed
//! when their handle drops (also when the test process dies), and the tail of their
//! output printed when a test fails.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::{Error, Result};

/// A directory for one test's files (process output, kubeconfigs, keys), under
/// `$TMPDIR/logpolicy-e2e-runs/`. Removed when dropped, unless the test is failing
/// (then its path is printed).
#[derive(Debug)]
pub struct TestDir {
    path: PathBuf,
}

impl TestDir {
    /// A fresh directory `NAME-<pid>-<n>`.
    pub fn new(name: &str) -> Result<TestDir> {
        static N: AtomicU32 = AtomicU32::new(0);
        let path = std::env::temp_dir()
            .join("logpolicy-e2e-runs")
            .join(format!(
                "{name}-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
        std::fs::create_dir_all(&path)
            .map_err(|e| Error(format!("creating {}: {e}", path.display())))?;
        Ok(TestDir { path })
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A path inside it.
    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("e2e: the test's files are kept in {}", self.path.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// A running child process: stdout and stderr go to `NAME.stdout` / `NAME.stderr` in a
/// directory; SIGKILL when dropped. A watchdog (`sh`) kills it too if the test process
/// dies without dropping it (e.g. a process held in a `static`).
#[derive(Debug)]
pub struct Process {
    name: String,
    child: Option<Child>,
    watchdog: Option<Child>,
    /// Where its stdout goes.
    pub stdout: PathBuf,
    /// Where its stderr goes.
    pub stderr: PathBuf,
}

impl Process {
    /// Starts `cmd` with its output in `dir/NAME.stdout` and `dir/NAME.stderr` (appended
    /// to, so a restarted process continues the same files).
    pub fn spawn(name: &str, dir: &Path, mut cmd: Command) -> Result<Process> {
        let stdout = dir.join(format!("{name}.stdout"));
        let stderr = dir.join(format!("{name}.stderr"));
        let open = |p: &Path| {
            File::options()
                .create(true)
                .append(true)
                .open(p)
                .map_err(|e| Error(format!("{}: {e}", p.display())))
        };
        cmd.stdin(Stdio::null())
            .stdout(open(&stdout)?)
            .stderr(open(&stderr)?);
        let child = cmd
            .spawn()
            .map_err(|e| Error(format!("starting {name} ({cmd:?}): {e}")))?;
        let script = format!(
            "while kill -0 {parent} 2>/dev/null && kill -0 {child} 2>/dev/null; do sleep 0.5; done; kill -9 {child} 2>/dev/null",
            parent = std::process::id(),
            child = child.id()
        );
        let watchdog = watchdog(&script);
        Ok(Process {
            name: name.to_owned(),
            child: Some(child),
            watchdog,
            stdout,
            stderr,
        })
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its pid, while it runs.
    pub fn id(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether it is still running (an exit is reported as an error with the tail of
    /// its output).
    pub fn check_running(&mut self) -> Result<()> {
        let Some(child) = self.child.as_mut() else {
            return Err(Error(format!("{} was stopped", self.name)));
        };
        match child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(Error(format!(
                "{} exited ({status}):\n{}",
                self.name,
                self.tail(30)
            ))),
            Err(e) => Err(Error(format!("{}: {e}", self.name))),
        }
    }

    /// SIGKILL, and waits for it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(mut w) = self.watchdog.take() {
            let _ = w.kill();
            let _ = w.wait();
        }
    }

    /// SIGTERM, and waits up to `timeout` for it to exit (then SIGKILL).
    pub fn terminate(&mut self, timeout: Duration) {
        if let Some(child) = self.child.as_mut() {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let deadline = Instant::now() + timeout;
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        self.kill();
    }

    /// The last `n` lines of its stderr and stdout.
    pub fn tail(&self, n: usize) -> String {
        let mut out = String::new();
        for (what, path) in [("stderr", &self.stderr), ("stdout", &self.stdout)] {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let from = lines.len().saturating_sub(n);
            out.push_str(&format!(
                "---- {} {what} (last {} of {} lines, {})\n",
                self.name,
                lines.len() - from,
                lines.len(),
                path.display()
            ));
            for l in &lines[from..] {
                out.push_str(l);
                out.push('\n');
            }
        }
        out
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{}", self.tail(25));
        }
        self.kill();
    }
}

/// Polls `f` every 20 ms until it returns `Some`, or fails after `timeout` with an
/// error naming `what` (and the last error `f` reported, if any).
pub fn wait_for<T>(
    timeout: Duration,
    what: &str,
    mut f: impl FnMut() -> Result<Option<T>>,
) -> Result<T> {
    let deadline = Instant::now() + timeout;
    let mut last_error = None;
    loop {
        match f() {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => {}
            Err(e) => last_error = Some(e),
        }
        if Instant::now() >= deadline {
            return Err(timed_out(timeout, what, last_error));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The error of a wait that ran out of time, with the last error the condition gave.
fn timed_out(timeout: Duration, what: &str, last_error: Option<Error>) -> Error {
    Error(match last_error {
        Some(e) => format!("timed out after {timeout:?} waiting for {what}; last error: {e}"),
        None => format!("timed out after {timeout:?} waiting for {what}"),
    })
}

/// The async form of [`wait_for`], for conditions that need the kube client.
pub async fn wait_for_async<T, F, Fut>(timeout: Duration, what: &str, mut f: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>>>,
{
    let deadline = Instant::now() + timeout;
    let mut last_error = None;
    loop {
        match f().await {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => {}
            Err(e) => last_error = Some(e),
        }
        if Instant::now() >= deadline {
            return Err(timed_out(timeout, what, last_error));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Starts `sh -c script` detached from this process's stdio: a watchdog that cleans up
/// after a test process killed before its `Drop` ran. `None` if `sh` cannot start (the
/// cleanup is then the `Drop`'s alone).
pub fn watchdog(script: &str) -> Option<Child> {
    Command::new("sh")
        .args(["-c", script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()
}
