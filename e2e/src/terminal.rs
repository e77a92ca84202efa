//! A real terminal for programs that draw on one: a detached `tmux` session of a fixed
//! size, on a tmux server of its own (its own socket), whose screen a test reads as text
//! and types into.
//!
//! The server is configured so that what a test reads means what it says:
//! - the pane stays when its program ends (`remain-on-exit`), so that its exit status
//!   can be read;
//! - clearing the screen does not push it into the history (`scroll-on-clear off`, a
//!   tmux 3.3 option, on by default there): the history holds only lines that scrolled
//!   off the top, so a program that redraws in place leaves none;
//! - no status line: the pane is the whole terminal.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::{Error, Result};

/// The tmux configuration of every [`Terminal`].
const CONFIG: &str = "\
set -g remain-on-exit on
set -g scroll-on-clear off
set -g status off
set -g history-limit 5000
";

/// How a terminal's program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// It exited with this code.
    Code(i32),
    /// A signal killed it.
    Signal(i32),
}

/// A program running in a terminal of its own; the tmux server (and with it the
/// program) is stopped when dropped, or when the test process dies.
#[derive(Debug)]
pub struct Terminal {
    socket: String,
    config: PathBuf,
    /// Where the program's exit status is written when it ends (by the `sh` around it).
    status: PathBuf,
    watchdog: Option<Child>,
}

/// Runs the program (`"$@"`) and writes its exit status to `$0`: tmux's own
/// `#{pane_dead_status}` was seen empty for a pane whose program had ended (tmux 3.3a
/// under load). `trap : INT` keeps the shell alive through the Ctrl-C meant for the
/// program (a handler, not an ignore: the program gets the default disposition back).
const RECORD_STATUS: &str = "trap : INT; \"$@\"; echo $? > \"$0\"";

/// The session's name on its server.
const SESSION: &str = "main";

impl Terminal {
    /// Runs `command` (the program, then its arguments; no shell) in a terminal of
    /// `width` columns and `height` rows, with this process's environment except
    /// `KUBECONFIG` and `TMUX`. The configuration goes to `dir/tmux.conf`.
    pub fn start(dir: &Path, width: u16, height: u16, command: &[OsString]) -> Result<Terminal> {
        static N: AtomicU32 = AtomicU32::new(0);
        let socket = format!(
            "logpolicy-e2e-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let config = dir.join("tmux.conf");
        std::fs::write(&config, CONFIG).map_err(|e| Error(format!("{}: {e}", config.display())))?;
        let status = dir.join(format!("{socket}.status"));
        let _ = std::fs::remove_file(&status);
        let mut terminal = Terminal {
            socket,
            config,
            status,
            watchdog: None,
        };
        let mut args: Vec<OsString> = [
            "new-session",
            "-d",
            "-s",
            SESSION,
            "-x",
            &width.to_string(),
            "-y",
            &height.to_string(),
            "--",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        args.extend(["sh", "-c", RECORD_STATUS].map(OsString::from));
        args.push(terminal.status.clone().into_os_string());
        args.extend(command.iter().cloned());
        terminal.tmux(&args)?;
        // Stops the server if this process dies without dropping the terminal.
        let script = format!(
            "while kill -0 {parent} 2>/dev/null; do sleep 1; done; tmux -L {socket} kill-server 2>/dev/null",
            parent = std::process::id(),
            socket = terminal.socket
        );
        terminal.watchdog = crate::process::watchdog(&script);
        Ok(terminal)
    }

    /// The screen as it is now: one line per row, trailing spaces trimmed.
    pub fn screen(&self) -> Result<String> {
        self.tmux(&["capture-pane", "-p", "-t", SESSION])
    }

    /// What scrolled off the top of the screen (the history), then the screen.
    pub fn history_and_screen(&self) -> Result<String> {
        self.tmux(&["capture-pane", "-p", "-S", "-", "-t", SESSION])
    }

    /// Types `keys`, in tmux's names (`C-c`, `Enter`, or text).
    pub fn send_keys(&self, keys: &[&str]) -> Result<()> {
        let mut args = vec!["send-keys", "-t", SESSION];
        args.extend(keys);
        self.tmux(&args).map(drop)
    }

    /// How its program ended; `None` while it runs.
    pub fn ended(&self) -> Result<Option<Ended>> {
        let out = self.tmux(&[
            "display-message",
            "-p",
            "-t",
            SESSION,
            "#{pane_dead}:#{pane_dead_status}:#{pane_dead_signal}",
        ])?;
        let fields: Vec<&str> = out.trim().split(':').collect();
        let number = |i: usize| fields.get(i).and_then(|f| f.parse::<i32>().ok());
        // The shell wrote the program's status before it ended.
        if let Ok(code) = std::fs::read_to_string(&self.status) {
            if let Ok(code) = code.trim().parse::<i32>() {
                return Ok(Some(match code {
                    // The shell's way of saying a signal killed it.
                    129..=192 => Ended::Signal(code - 128),
                    code => Ended::Code(code),
                }));
            }
        }
        Ok(match fields.first() {
            Some(&"1") => match (number(1), number(2)) {
                (Some(code), _) => Some(Ended::Code(code)),
                (None, Some(signal)) => Some(Ended::Signal(signal)),
                (None, None) => {
                    return Err(Error(format!(
                        "tmux says the pane is dead, but not how: {out:?}"
                    )))
                }
            },
            _ => None,
        })
    }

    /// `tmux -L SOCKET -f CONFIG ARGS`; its stdout.
    fn tmux<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Result<String> {
        let out = Command::new("tmux")
            .arg("-u")
            .args(["-L", &self.socket])
            .arg("-f")
            .arg(&self.config)
            .args(args)
            .env_remove("KUBECONFIG")
            .env_remove("TMUX")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| {
                Error(format!(
                    "running tmux: {e} (the terminal tests need it: apt-get install tmux)"
                ))
            })?;
        if !out.status.success() {
            return Err(Error(format!(
                "tmux {:?} failed ({}): {}",
                args.iter()
                    .map(|a| a.as_ref().to_string_lossy())
                    .collect::<Vec<_>>(),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        if std::thread::panicking() {
            if let Ok(screen) = self.screen() {
                eprintln!("---- the terminal's screen\n{screen}----");
            }
        }
        let _ = self.tmux(&["kill-server"]);
        if let Some(mut w) = self.watchdog.take() {
            let _ = w.kill();
            let _ = w.wait();
        }
    }
}
