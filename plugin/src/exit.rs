//! How the plugin ends: its exit codes, and the failure that carries one.

use std::fmt;

/// Every selected pod acknowledged (or, for commands that only read, it worked).
pub const OK: u8 = 0;
/// Anything else that went wrong: the API server cannot be reached, an object is not
/// found, a kubeconfig cannot be read.
pub const ERROR: u8 = 1;
/// Bad arguments (clap's own code).
pub const USAGE: u8 = 2;
/// None of the selected pods has opted in (`logpolicy.dev/enabled=true`).
pub const NOT_OPTED_IN: u8 = 3;
/// Some pods did not acknowledge within `--wait` (the policy stays).
pub const NOT_ACKNOWLEDGED: u8 = 4;
/// The operator is not running: no status for the policy within `--wait`.
pub const NO_OPERATOR: u8 = 5;
/// Refused by the API server or by the operator (`Stalled=True`).
pub const REFUSED: u8 = 6;
/// `raise`: no selected pod knows a target it names (no callsite of it, or under it,
/// has run); nothing was created. `--allow-unknown-target` goes ahead.
pub const UNKNOWN_TARGET: u8 = 7;
/// `check`: a check failed (each failure is a `FAIL` line saying what to do).
pub const CHECK_FAILED: u8 = 8;

/// A failure: what to say on stderr, and the exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The exit code.
    pub code: u8,
    /// The message (without the program's name).
    pub message: String,
}

impl Failure {
    /// A failure with `code`.
    pub fn new(code: u8, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
        }
    }

    /// An [`ERROR`].
    pub fn error(message: impl Into<String>) -> Self {
        Self::new(ERROR, message)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

/// What the commands return.
pub type Result<T, E = Failure> = std::result::Result<T, E>;

/// A kube error as a failure: the API server's refusals (4xx other than 404) with
/// [`REFUSED`], the rest with [`ERROR`], `what` saying what was being done.
pub fn api_failure(what: &str, e: kube::Error) -> Failure {
    match e {
        kube::Error::Api(s) if s.code == 404 => Failure::error(format!("{what}: not found")),
        kube::Error::Api(s) if (400..500).contains(&s.code) => Failure::new(
            REFUSED,
            format!(
                "{what}: refused by the API server ({}): {}",
                s.code, s.message
            ),
        ),
        other => Failure::error(format!("{what}: {other}")),
    }
}
