//! How the admin endpoint is configured: in code, or from the environment.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::wire::{read_keys_file, KeyError, TrustedKeys, TRUSTED_KEYS_ENV, TRUSTED_KEYS_FILE_ENV};

/// The variable that turns the endpoint on, with the address it listens on
/// (`0.0.0.0:9090`, `[::]:9090`, `127.0.0.1:0`, or `:9090` for every IPv4 address).
pub const ADMIN_ADDR_ENV: &str = "LOGPOLICY_ADMIN_ADDR";
/// The pod's uid (downward API `metadata.uid`); documents for another uid are refused.
pub const POD_UID_ENV: &str = "POD_UID";
/// The pod's name (downward API `metadata.name`); documents for another name are refused.
pub const POD_NAME_ENV: &str = "POD_NAME";
/// The pod's namespace (downward API `metadata.namespace`); documents for another
/// namespace are refused.
pub const POD_NAMESPACE_ENV: &str = "POD_NAMESPACE";

/// Set to `1` (or `true`) to start the endpoint without the pod's identity, outside
/// Kubernetes: documents are then accepted whatever pod they name, where the identity is
/// unknown. In a cluster, never: one operator key signs for every namespace, and the
/// identity check is what keeps a document for one pod out of another.
pub const ANY_POD_ENV: &str = "LOGPOLICY_ADMIN_ANY_POD";

/// How many targets `/metrics` lists by name in `logpolicy_target_lines_total` and
/// `logpolicy_target_bytes_total` (default [`DEFAULT_METRIC_TARGETS`]); the rest are
/// summed under `target="other"`. `0` lists none.
pub const METRIC_TARGETS_ENV: &str = "LOGPOLICY_METRIC_TARGETS";

/// The targets `/metrics` lists by name unless told otherwise.
pub const DEFAULT_METRIC_TARGETS: usize = 50;

/// Who is shown what each callsite costs ([`Views`]): `any` (the default) or
/// `local-and-signers`.
pub const VIEWS_ENV: &str = "LOGPOLICY_ADMIN_VIEWS";

/// Set to `0` (or `false`) where something in the pod connects from loopback on behalf
/// of other pods (a service mesh's sidecar: Istio's connects from 127.0.0.6): loopback
/// peers are then peers like any other (see [`AdminConfig::trust_loopback`]).
pub const TRUST_LOOPBACK_ENV: &str = "LOGPOLICY_ADMIN_TRUST_LOOPBACK";

/// Who is shown what each callsite costs: `GET /logpolicy/sites` (every callsite's
/// target, file and line, with its counts) and the per-target series of `/metrics`
/// (`logpolicy_target_lines_total`, `logpolicy_target_bytes_total`).
///
/// ```
/// use logpolicy::admin::Views;
/// assert_eq!("local-and-signers".parse::<Views>(), Ok(Views::LocalAndSigners));
/// assert_eq!(Views::default().to_string(), "any");
/// assert!("everyone".parse::<Views>().unwrap_err().contains("any or local-and-signers"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Views {
    /// Any peer that reaches the port (the fleet view, `kubectl logpolicy top`, reads
    /// the pods through the API server's pod proxy).
    #[default]
    Any,
    /// Only a peer on loopback (the pod itself, `kubectl port-forward`; unless
    /// [`AdminConfig::trust_loopback`] is off) or one that sent a validly signed push
    /// in the last 10 minutes (the operator). Others get 403 `views_restricted` for
    /// the sites, and `/metrics` without the per-target series. `kubectl logpolicy top`
    /// and `targets` then read nothing through the pod proxy.
    LocalAndSigners,
}

impl std::str::FromStr for Views {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "any" => Ok(Views::Any),
            "local-and-signers" => Ok(Views::LocalAndSigners),
            other => Err(format!(
                "invalid value {other:?} (expected any or local-and-signers)"
            )),
        }
    }
}

impl std::fmt::Display for Views {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Views::Any => "any",
            Views::LocalAndSigners => "local-and-signers",
        })
    }
}

/// The most targets `/metrics` may be told to list by name: each costs up to five
/// series per family.
pub const MAX_METRIC_TARGETS: usize = 1000;

/// Why the admin endpoint could not be configured or started.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// An environment variable with a value that does not parse.
    #[error("{var}: {message}")]
    Env {
        /// The variable.
        var: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The endpoint is on but there is no trusted key: it could never accept a push.
    #[error("{ADMIN_ADDR_ENV} is set but no trusted key is: set {TRUSTED_KEYS_ENV} or {TRUSTED_KEYS_FILE_ENV}")]
    NoTrustedKeys,
    /// Trusted keys that cannot be read.
    #[error("trusted keys: {0}")]
    Keys(#[from] KeyError),
    /// The address cannot be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The pod's identity is incomplete and [`AdminConfig::any_pod`] (or
    /// [`ANY_POD_ENV`]) was not given: the endpoint would accept documents signed for
    /// other pods.
    #[error("the admin endpoint needs the pod's identity to refuse documents signed for other pods, and {missing} unset: set them from the downward API (metadata.uid, metadata.name, metadata.namespace), or {ANY_POD_ENV}=1 outside Kubernetes")]
    NoPodIdentity {
        /// The variables missing, e.g. `POD_UID and POD_NAME are`.
        missing: String,
    },
    /// The endpoint's thread or runtime could not be started.
    #[error("cannot start the admin thread: {0}")]
    Thread(std::io::Error),
}

/// Who this pod is, as far as it knows: a document naming another pod is refused (403).
/// Unknown fields (`None`) are not checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodIdentity {
    /// `metadata.uid`.
    pub uid: Option<String>,
    /// `metadata.name`.
    pub name: Option<String>,
    /// `metadata.namespace`.
    pub namespace: Option<String>,
}

impl PodIdentity {
    /// From [`POD_UID_ENV`], [`POD_NAME_ENV`], [`POD_NAMESPACE_ENV`] (unset or empty:
    /// unknown).
    pub fn from_env() -> Self {
        let get = |var: &str| {
            std::env::var(var)
                .ok()
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        PodIdentity {
            uid: get(POD_UID_ENV),
            name: get(POD_NAME_ENV),
            namespace: get(POD_NAMESPACE_ENV),
        }
    }

    /// The variables of the fields not known, in the order uid, name, namespace.
    pub fn missing(&self) -> Vec<&'static str> {
        [
            (POD_UID_ENV, &self.uid),
            (POD_NAME_ENV, &self.name),
            (POD_NAMESPACE_ENV, &self.namespace),
        ]
        .into_iter()
        .filter(|(_, v)| v.is_none())
        .map(|(var, _)| var)
        .collect()
    }
}

/// Bounds on what a client can make the endpoint hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdminLimits {
    /// The largest request body (default 64 KiB); a larger one is answered 413 without
    /// being read.
    pub max_body_bytes: usize,
    /// How long a client has to send the request line and headers (default 2 s).
    pub header_timeout: Duration,
    /// How long one connection may last, body and response included (default 5 s).
    pub request_timeout: Duration,
    /// Connections served at once (default 64). When all are taken, a new connection
    /// takes the place of the oldest one still sending its request (head first, then
    /// body); only when every connection is past that does it get a 503. A peer that sent
    /// a validly signed request in the last 10 minutes (the operator) is never evicted,
    /// and finds 8 more slots kept for it.
    pub max_connections: usize,
    /// Connections from one IP address at once (default 16); beyond it that address gets
    /// a 503, except a peer that sent a validly signed request in the last 10 minutes.
    pub max_connections_per_peer: usize,
    /// How far a document's `issuedAt` may be from this pod's clock, either way (default
    /// 5 minutes): older, it may be a replayed capture; newer, a clock far off. Either
    /// way it is refused (`not_fresh`). Clocks of nodes drift by seconds, not minutes.
    pub document_window: Duration,
    /// The longest a pushed layer may last, from its document's `issuedAt` to its
    /// `expiresAt` (default 7 days); longer is refused (`lifetime_too_long`).
    pub max_layer_lifetime: Duration,
}

impl Default for AdminLimits {
    fn default() -> Self {
        AdminLimits {
            max_body_bytes: 64 * 1024,
            header_timeout: Duration::from_secs(2),
            request_timeout: Duration::from_secs(5),
            max_connections: 64,
            max_connections_per_peer: 16,
            document_window: Duration::from_secs(5 * 60),
            max_layer_lifetime: Duration::from_secs(7 * 24 * 3600),
        }
    }
}

/// Where the trusted keys come from: fixed, or a file (a mounted ConfigMap is updated in
/// place) read by a thread of its own, never by the endpoint's; or nowhere (a setting
/// that is missing or does not parse, worked around at start): every push is refused,
/// for this reason.
#[derive(Debug)]
pub(crate) enum KeySource {
    Fixed(TrustedKeys),
    File(Arc<KeyFile>),
    Missing(String),
}

/// How often the keys file is read again.
pub(crate) const KEYS_REREAD: Duration = Duration::from_millis(500);
/// A read of the keys file that takes longer than this leaves nothing trusted until it
/// completes (a file that cannot be read now may hold a revocation).
const KEYS_READ_LIMIT: Duration = Duration::from_secs(5);

/// A keys file and what was last read from it: the keys follow the file's content (not
/// its time or size), and a failed read is retried at the next one.
#[derive(Debug)]
pub(crate) struct KeyFile {
    path: PathBuf,
    state: Mutex<KeyState>,
}

#[derive(Debug)]
struct KeyState {
    /// The bytes the keys were parsed from (`None` after a failed read).
    content: Option<Vec<u8>>,
    keys: Result<TrustedKeys, String>,
    reading_since: Option<Instant>,
}

/// What a read of the keys file changed in the keys in force (see [`KeyFile::refresh`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeysChange {
    /// Keys are trusted where none were, or other keys than before: how many now.
    Trusted(usize),
    /// No key is trusted any longer, and why.
    Untrusted(String),
}

impl KeyFile {
    /// Reads `path` once (in the caller's thread: never waits on a FIFO or a device).
    fn open(path: PathBuf) -> Result<Self, AdminError> {
        let bytes = read_keys_file(&path)?;
        let keys = TrustedKeys::from_bytes(&bytes, &path)?;
        Ok(KeyFile {
            path,
            state: Mutex::new(KeyState {
                content: Some(bytes),
                keys: Ok(keys),
                reading_since: None,
            }),
        })
    }

    /// Reads `path` once, as [`open`](Self::open) does, but a file that cannot be read
    /// or parsed is not an error: nothing is trusted until a later read succeeds. The
    /// error, if any, is returned beside it.
    fn open_or_wait(path: PathBuf) -> (Self, Option<AdminError>) {
        match Self::open(path.clone()) {
            Ok(file) => (file, None),
            Err(e) => {
                let file = KeyFile {
                    path,
                    state: Mutex::new(KeyState {
                        content: None,
                        keys: Err(e.to_string()),
                        reading_since: None,
                    }),
                };
                (file, Some(e))
            }
        }
    }

    /// The file's path.
    pub(crate) fn path(&self) -> &std::path::Path {
        &self.path
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, KeyState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reads the file again (on the keys thread): parses it if its content changed or
    /// the last read failed. Returns what changed in the keys in force: keys trusted
    /// where none were or other keys than before, or none trusted where some were (a
    /// read that fails as the last one did changes nothing).
    pub(crate) fn refresh(&self) -> Option<KeysChange> {
        self.lock().reading_since = Some(Instant::now());
        let read = read_keys_file(&self.path);
        let mut state = self.lock();
        state.reading_since = None;
        let trusted_before = state.keys.is_ok();
        match read {
            Ok(bytes) => {
                if state.content.as_ref() != Some(&bytes) || state.keys.is_err() {
                    state.keys =
                        TrustedKeys::from_bytes(&bytes, &self.path).map_err(|e| e.to_string());
                    state.content = Some(bytes);
                    return match &state.keys {
                        Ok(keys) => Some(KeysChange::Trusted(keys.len())),
                        Err(e) if trusted_before => Some(KeysChange::Untrusted(e.clone())),
                        Err(_) => None,
                    };
                }
                None
            }
            Err(e) => {
                state.keys = Err(e.to_string());
                state.content = None;
                trusted_before.then(|| KeysChange::Untrusted(e.to_string()))
            }
        }
    }

    fn current(&self) -> Result<TrustedKeys, String> {
        let state = self.lock();
        if let Some(since) = state.reading_since {
            let waited = since.elapsed();
            if waited > KEYS_READ_LIMIT {
                return Err(format!(
                    "{}: a read has not completed in {:.0?}",
                    self.path.display(),
                    waited
                ));
            }
        }
        state.keys.clone()
    }
}

impl KeySource {
    /// The keys in force: for a file, as last read (at most [`KEYS_REREAD`] ago). A file
    /// that cannot be read or parsed trusts nothing until it is fixed (never a stale,
    /// maybe revoked, key).
    pub(crate) fn current(&self) -> Result<TrustedKeys, String> {
        match self {
            KeySource::Fixed(k) => Ok(k.clone()),
            KeySource::File(file) => file.current(),
            KeySource::Missing(why) => Err(why.clone()),
        }
    }
}

/// The admin endpoint's configuration.
///
/// # Examples
///
/// ```
/// use logpolicy::admin::{AdminConfig, AdminLimits, PodIdentity};
/// use logpolicy::wire::{SigningKey, TrustedKeys};
///
/// let keys = TrustedKeys::new([SigningKey::from_bytes(&[1; 32]).verifying_key()]);
/// let config = AdminConfig::new("127.0.0.1:0".parse().unwrap(), keys)
///     .pod(PodIdentity { uid: Some("0b1c".into()), ..Default::default() })
///     .limits(AdminLimits { max_connections: 8, ..Default::default() });
/// assert_eq!(config.limits_ref().max_body_bytes, 64 * 1024);
/// ```
#[derive(Debug)]
pub struct AdminConfig {
    pub(crate) addr: SocketAddr,
    pub(crate) keys: KeySource,
    pub(crate) pod: PodIdentity,
    pub(crate) any_pod: bool,
    pub(crate) limits: AdminLimits,
    pub(crate) metric_targets: usize,
    pub(crate) views: Views,
    pub(crate) trust_loopback: bool,
    /// Whether [`AdminServer::start`](super::AdminServer::start) refuses an incomplete
    /// identity (else the endpoint starts and refuses every push, `no_pod_identity`).
    pub(crate) identity_required: bool,
}

/// A setting of the admin endpoint that does not work, and what the endpoint does
/// without it: what [`Builder`](crate::Builder) reports in a `warn` line and starts the
/// service anyway, unless [`strict`](crate::Builder::strict).
#[derive(Debug)]
pub(crate) struct AdminProblem {
    /// What the endpoint does about it: the line's message.
    pub(crate) what: &'static str,
    /// The variables at fault: the line's `source`.
    pub(crate) source: String,
    /// What is wrong: the line's `error`.
    pub(crate) error: AdminError,
}

/// The message of the line that says the endpoint does not run.
pub(crate) const NOT_RUNNING: &str = "the admin endpoint is not running";
/// The message of the line that says the keys file cannot be read yet.
pub(crate) const WAITING_FOR_KEYS: &str =
    "the admin endpoint refuses pushes until its keys file can be read";
/// The message of the line that says no key is configured.
pub(crate) const NO_KEYS: &str = "the admin endpoint refuses every push: it trusts no key";
/// The message of the line that says the pod's identity is incomplete.
pub(crate) const NO_IDENTITY: &str =
    "the admin endpoint refuses every push: it does not know the pod's identity";
/// The message of the line that says a setting was skipped.
pub(crate) const SKIPPED_SETTING: &str = "skipped an invalid admin endpoint setting";

impl AdminProblem {
    fn new(what: &'static str, source: impl Into<String>, error: AdminError) -> Self {
        AdminProblem {
            what,
            source: source.into(),
            error,
        }
    }
}

impl AdminConfig {
    fn with_source(addr: SocketAddr, keys: KeySource) -> Self {
        AdminConfig {
            addr,
            keys,
            pod: PodIdentity::default(),
            any_pod: false,
            limits: AdminLimits::default(),
            metric_targets: DEFAULT_METRIC_TARGETS,
            views: Views::Any,
            trust_loopback: true,
            identity_required: true,
        }
    }

    /// Listen on `addr`, trusting `keys`; pod identity unknown, default limits.
    pub fn new(addr: SocketAddr, keys: TrustedKeys) -> Self {
        Self::with_source(addr, KeySource::Fixed(keys))
    }

    /// Listen on `addr`, trusting the keys in the file at `path`, read again every
    /// 500 ms on a thread of its own (`logpolicy-keys`) and followed by content: a
    /// rewrite is seen whatever its time and size, and a failed read is retried. Reads
    /// it once now: a missing or invalid file, or one that is not a regular file (a FIFO,
    /// a device), or larger than 64 KiB, is an error. To start without it and wait for
    /// it, see [`waiting_for_keys_file`](Self::waiting_for_keys_file).
    pub fn with_keys_file(addr: SocketAddr, path: impl Into<PathBuf>) -> Result<Self, AdminError> {
        let file = KeyFile::open(path.into())?;
        Ok(Self::with_source(addr, KeySource::File(Arc::new(file))))
    }

    /// Listen on `addr`, trusting the keys in the file at `path` as
    /// [`with_keys_file`](Self::with_keys_file) does, but a file that cannot be read or
    /// parsed yet is no error: until a read of it succeeds (every 500 ms), every push is
    /// refused (401 `no_trusted_keys`, naming why) and `/metrics` says
    /// `logpolicy_admin_trusted_keys 0`. This is what a pod needs whose keys come from
    /// a ConfigMap mounted `optional: true`, which may appear after the pod starts.
    ///
    /// # Examples
    ///
    /// ```
    /// use logpolicy::admin::{AdminConfig, AdminServer};
    /// use logpolicy::PolicyFilter;
    /// use std::io::{Read, Write};
    ///
    /// let missing = std::env::temp_dir().join("logpolicy-doc-keys-not-there-yet");
    /// # let _ = std::fs::remove_file(&missing);
    /// let config = AdminConfig::waiting_for_keys_file("127.0.0.1:0".parse()?, &missing).any_pod();
    /// let filter = PolicyFilter::from_directives("info")?;
    /// let admin = AdminServer::start(config, filter.handle(), None)?;
    ///
    /// let mut conn = std::net::TcpStream::connect(admin.local_addr())?;
    /// conn.write_all(b"GET /metrics HTTP/1.1\r\nhost: pod\r\n\r\n")?;
    /// let mut response = String::new();
    /// conn.read_to_string(&mut response)?;
    /// assert!(response.contains("\nlogpolicy_admin_trusted_keys 0\n"), "{response}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn waiting_for_keys_file(addr: SocketAddr, path: impl Into<PathBuf>) -> Self {
        let (file, _) = KeyFile::open_or_wait(path.into());
        Self::with_source(addr, KeySource::File(Arc::new(file)))
    }

    /// The configuration from the environment (see [the module](super) for the table):
    /// `Ok(None)` when [`ADMIN_ADDR_ENV`] is unset or empty. The first setting that does
    /// not work is the error ([`Builder`](crate::Builder) starts without it and reports
    /// it instead, unless [`strict`](crate::Builder::strict)).
    pub fn from_env() -> Result<Option<Self>, AdminError> {
        let (config, problems) = Self::from_env_lenient();
        match problems.into_iter().next() {
            Some(problem) => Err(problem.error),
            None => Ok(config),
        }
    }

    /// The configuration from the environment, each setting that does not work worked
    /// around and listed, in the order of the table: an address that does not parse
    /// leaves no configuration; keys that cannot be read leave an endpoint that refuses
    /// every push (for a keys file: until it can be read); an invalid
    /// [`METRIC_TARGETS_ENV`] or [`ANY_POD_ENV`] is taken as unset.
    pub(crate) fn from_env_lenient() -> (Option<Self>, Vec<AdminProblem>) {
        let mut problems = Vec::new();
        let Some(addr) = std::env::var(ADMIN_ADDR_ENV)
            .ok()
            .filter(|a| !a.trim().is_empty())
        else {
            return (None, problems);
        };
        let addr = match parse_addr(&addr) {
            Ok(addr) => addr,
            Err(message) => {
                let error = AdminError::Env {
                    var: ADMIN_ADDR_ENV,
                    message,
                };
                problems.push(AdminProblem::new(NOT_RUNNING, ADMIN_ADDR_ENV, error));
                return (None, problems);
            }
        };
        let mut no_keys = |source: &str, error: AdminError| {
            let why = error.to_string();
            problems.push(AdminProblem::new(NO_KEYS, source, error));
            KeySource::Missing(why)
        };
        let keys = if std::env::var_os(TRUSTED_KEYS_ENV).is_some() {
            match TrustedKeys::from_env() {
                Ok(Some(keys)) => KeySource::Fixed(keys),
                Ok(None) => no_keys(TRUSTED_KEYS_ENV, AdminError::NoTrustedKeys),
                Err(e) => no_keys(TRUSTED_KEYS_ENV, AdminError::Keys(e)),
            }
        } else if let Some(path) = std::env::var_os(TRUSTED_KEYS_FILE_ENV) {
            let (file, error) = KeyFile::open_or_wait(PathBuf::from(path));
            if let Some(error) = error {
                problems.push(AdminProblem::new(
                    WAITING_FOR_KEYS,
                    TRUSTED_KEYS_FILE_ENV,
                    error,
                ));
            }
            KeySource::File(Arc::new(file))
        } else {
            let source = format!("{TRUSTED_KEYS_ENV}, {TRUSTED_KEYS_FILE_ENV}");
            no_keys(&source, AdminError::NoTrustedKeys)
        };
        let mut config = Self::with_source(addr, keys).pod(PodIdentity::from_env());
        if let Some(n) = std::env::var(METRIC_TARGETS_ENV)
            .ok()
            .filter(|v| !v.trim().is_empty())
        {
            match parse_metric_targets(&n) {
                Ok(n) => config.metric_targets = n,
                Err(message) => {
                    let var = METRIC_TARGETS_ENV;
                    let error = AdminError::Env { var, message };
                    problems.push(AdminProblem::new(SKIPPED_SETTING, var, error));
                }
            }
        }
        match std::env::var(ANY_POD_ENV).ok().as_deref().map(str::trim) {
            None | Some("" | "0" | "false") => {}
            Some("1" | "true") => config.any_pod = true,
            Some(other) => {
                let var = ANY_POD_ENV;
                let message = format!("invalid value {other:?} (expected 1, true, 0 or false)");
                let error = AdminError::Env { var, message };
                problems.push(AdminProblem::new(SKIPPED_SETTING, var, error));
            }
        }
        if let Some(v) = std::env::var(VIEWS_ENV)
            .ok()
            .filter(|v| !v.trim().is_empty())
        {
            match v.parse() {
                Ok(views) => config.views = views,
                Err(message) => {
                    let var = VIEWS_ENV;
                    let error = AdminError::Env { var, message };
                    problems.push(AdminProblem::new(SKIPPED_SETTING, var, error));
                }
            }
        }
        match std::env::var(TRUST_LOOPBACK_ENV)
            .ok()
            .as_deref()
            .map(str::trim)
        {
            None | Some("" | "1" | "true") => {}
            Some("0" | "false") => config.trust_loopback = false,
            Some(other) => {
                let var = TRUST_LOOPBACK_ENV;
                let message = format!("invalid value {other:?} (expected 1, true, 0 or false)");
                let error = AdminError::Env { var, message };
                problems.push(AdminProblem::new(SKIPPED_SETTING, var, error));
            }
        }
        (Some(config), problems)
    }

    /// For a start that must not fail over the identity: an incomplete identity (and no
    /// [`any_pod`](Self::any_pod)) no longer stops the endpoint from starting; it then
    /// refuses every push (403 `no_pod_identity`). Returns the problem, if there is one.
    pub(crate) fn tolerate_missing_identity(&mut self) -> Option<AdminProblem> {
        let error = self.identity_error()?;
        self.identity_required = false;
        let source = self.pod.missing().join(", ");
        Some(AdminProblem::new(NO_IDENTITY, source, error))
    }

    /// Starts without a complete pod identity (outside Kubernetes): documents are
    /// accepted whatever pod they name, where the identity is unknown. Without it,
    /// [`AdminServer::start`](super::AdminServer::start) refuses an incomplete identity
    /// ([`AdminError::NoPodIdentity`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use logpolicy::admin::{AdminConfig, AdminError, AdminServer};
    /// use logpolicy::wire::{SigningKey, TrustedKeys};
    /// use logpolicy::PolicyFilter;
    ///
    /// let keys = || TrustedKeys::new([SigningKey::from_bytes(&[1; 32]).verifying_key()]);
    /// let filter = PolicyFilter::from_directives("info").unwrap();
    /// let config = AdminConfig::new("127.0.0.1:0".parse().unwrap(), keys());
    /// let err = AdminServer::start(config, filter.handle(), None).unwrap_err();
    /// assert!(matches!(err, AdminError::NoPodIdentity { .. }), "{err}");
    ///
    /// let config = AdminConfig::new("127.0.0.1:0".parse().unwrap(), keys()).any_pod();
    /// let admin = AdminServer::start(config, filter.handle(), None).unwrap();
    /// # drop(admin);
    /// ```
    #[must_use]
    pub fn any_pod(mut self) -> Self {
        self.any_pod = true;
        self
    }

    /// The identity is complete, or [`any_pod`](Self::any_pod) was given, or an
    /// incomplete one is [tolerated](Self::tolerate_missing_identity).
    pub(crate) fn check_identity(&self) -> Result<(), AdminError> {
        match self.identity_error() {
            Some(e) if self.identity_required => Err(e),
            _ => Ok(()),
        }
    }

    /// Why the endpoint cannot check which pod a document is for: the identity is
    /// incomplete and [`any_pod`](Self::any_pod) was not given.
    pub(crate) fn identity_error(&self) -> Option<AdminError> {
        let missing = self.pod.missing();
        if self.any_pod || missing.is_empty() {
            return None;
        }
        let missing = match missing.as_slice() {
            [one] => format!("{one} is"),
            [init @ .., last] => format!("{} and {last} are", init.join(", ")),
            [] => String::new(),
        };
        Some(AdminError::NoPodIdentity { missing })
    }

    /// The pod's identity, for checking documents.
    #[must_use]
    pub fn pod(mut self, pod: PodIdentity) -> Self {
        self.pod = pod;
        self
    }

    /// The limits.
    #[must_use]
    pub fn limits(mut self, limits: AdminLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The limits in force.
    pub fn limits_ref(&self) -> &AdminLimits {
        &self.limits
    }

    /// How many targets `/metrics` lists by name in `logpolicy_target_lines_total` and
    /// `logpolicy_target_bytes_total` (default [`DEFAULT_METRIC_TARGETS`], at most
    /// [`MAX_METRIC_TARGETS`]: more is taken as that). The first `n` targets to write
    /// anything by the time of a scrape, biggest in bytes first, are listed, and stay
    /// listed for the life of the endpoint (series do not come and go); every other
    /// target is summed under `target="other"`. `0`: only `other`.
    ///
    /// ```
    /// use logpolicy::admin::AdminConfig;
    /// use logpolicy::wire::{SigningKey, TrustedKeys};
    ///
    /// let keys = TrustedKeys::new([SigningKey::from_bytes(&[1; 32]).verifying_key()]);
    /// let config = AdminConfig::new("127.0.0.1:0".parse().unwrap(), keys).metric_targets(5);
    /// assert_eq!(config.metric_targets_ref(), 5);
    /// ```
    #[must_use]
    pub fn metric_targets(mut self, n: usize) -> Self {
        self.metric_targets = n.min(MAX_METRIC_TARGETS);
        self
    }

    /// How many targets `/metrics` lists by name (see
    /// [`metric_targets`](Self::metric_targets)).
    pub fn metric_targets_ref(&self) -> usize {
        self.metric_targets
    }

    /// Who is shown what each callsite costs (default [`Views::Any`]; from the
    /// environment, [`VIEWS_ENV`]).
    ///
    /// ```
    /// use logpolicy::admin::{AdminConfig, Views};
    /// use logpolicy::wire::{SigningKey, TrustedKeys};
    ///
    /// let keys = TrustedKeys::new([SigningKey::from_bytes(&[1; 32]).verifying_key()]);
    /// let config = AdminConfig::new("127.0.0.1:0".parse().unwrap(), keys)
    ///     .views(Views::LocalAndSigners);
    /// assert_eq!(config.views_ref(), Views::LocalAndSigners);
    /// ```
    #[must_use]
    pub fn views(mut self, views: Views) -> Self {
        self.views = views;
        self
    }

    /// Who is shown what each callsite costs (see [`views`](Self::views)).
    pub fn views_ref(&self) -> Views {
        self.views
    }

    /// Whether a loopback peer counts as the pod itself (the default: the whole policy
    /// view, and with [`Views::LocalAndSigners`] the sites). Turn it off where
    /// something in the pod connects from loopback on behalf of other pods: a service
    /// mesh's sidecar proxy (Istio's connects to the application from 127.0.0.6,
    /// others from 127.0.0.1), through which every peer would count as the pod. From
    /// the environment, [`TRUST_LOOPBACK_ENV`].
    ///
    /// ```
    /// use logpolicy::admin::AdminConfig;
    /// use logpolicy::wire::{SigningKey, TrustedKeys};
    ///
    /// let keys = TrustedKeys::new([SigningKey::from_bytes(&[1; 32]).verifying_key()]);
    /// let config = AdminConfig::new("127.0.0.1:0".parse().unwrap(), keys).trust_loopback(false);
    /// assert!(!config.trusts_loopback());
    /// ```
    #[must_use]
    pub fn trust_loopback(mut self, trust: bool) -> Self {
        self.trust_loopback = trust;
        self
    }

    /// Whether a loopback peer counts as the pod itself (see
    /// [`trust_loopback`](Self::trust_loopback)).
    pub fn trusts_loopback(&self) -> bool {
        self.trust_loopback
    }

    /// The address to listen on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

/// `host:port`, `[v6]:port`, or `:port` (every IPv4 address).
pub(crate) fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    let s = s.trim();
    if let Some(port) = s.strip_prefix(':') {
        return port
            .parse::<u16>()
            .map(|p| SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), p))
            .map_err(|_| format!("invalid port {port:?}"));
    }
    s.parse().map_err(|_| {
        format!("invalid address {s:?} (expected e.g. 0.0.0.0:9090, [::]:9090 or :9090)")
    })
}

/// The value of [`METRIC_TARGETS_ENV`]: a whole number from 0 to [`MAX_METRIC_TARGETS`].
pub(crate) fn parse_metric_targets(s: &str) -> Result<usize, String> {
    let s = s.trim();
    match s.parse::<usize>() {
        Ok(n) if n <= MAX_METRIC_TARGETS => Ok(n),
        _ => Err(format!(
            "invalid value {s:?} (expected a whole number of targets from 0 to {MAX_METRIC_TARGETS}, e.g. {DEFAULT_METRIC_TARGETS})"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_targets() {
        assert_eq!(parse_metric_targets(" 2 "), Ok(2));
        assert_eq!(parse_metric_targets("0"), Ok(0));
        assert_eq!(
            parse_metric_targets("1000"),
            Ok(MAX_METRIC_TARGETS),
            "the most allowed"
        );
        for bad in ["-1", "1001", "ten", "2.5", "1e3"] {
            let e = parse_metric_targets(bad).unwrap_err();
            assert!(
                e.contains(&format!("{bad:?}")) && e.contains("from 0 to 1000"),
                "{e}"
            );
        }
        let e = AdminError::Env {
            var: METRIC_TARGETS_ENV,
            message: parse_metric_targets("x").unwrap_err(),
        };
        assert!(
            e.to_string()
                .starts_with("LOGPOLICY_METRIC_TARGETS: invalid value \"x\""),
            "{e}"
        );
    }

    #[test]
    fn addresses() {
        assert_eq!(
            parse_addr(":9090").unwrap(),
            "0.0.0.0:9090".parse().unwrap()
        );
        assert_eq!(
            parse_addr(" [::1]:80 ").unwrap(),
            "[::1]:80".parse().unwrap()
        );
        assert!(parse_addr("localhost:80").is_err());
        assert!(parse_addr(":99999").is_err());
    }
}
