//! Setting up logging in one line.

use std::io::IsTerminal;

use tracing_core::Subscriber;
use tracing_subscriber::prelude::*;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{Layer, Registry};

#[cfg(feature = "admin")]
use crate::admin::{AdminConfig, AdminError, AdminServer, ADMIN_ADDR_ENV};
#[cfg(feature = "admin")]
use crate::admin::{AdminProblem, NOT_RUNNING, SKIPPED_SETTING};
use crate::enforce::{PolicyFilter, PolicyHandle};
use crate::format::own_line::{self, write_skipped, write_skipped_directive};
use crate::format::{
    Format, FormatLayer, ParseFormatError, ResourceError, Service, Spans, Style,
    RESOURCE_ATTRIBUTES_VAR,
};
use crate::ledger::Sites;
use crate::log_bridge::{LogBridge, LogBridgeError, LogRecords};
use crate::policy::{DirectiveError, Directives, FieldName, FieldNameError, Policy, PolicyLayer};
use crate::recorder::RecordLimits;
use crate::writer::{
    install_panic_hook, ReplayReport, ReplayRequest, Writer, WriterConfig, WriterError,
    WriterGuard, WriterStats,
};

/// The environment variables read for the baseline, first found wins.
pub const ENV_VARS: [&str; 2] = ["LOGPOLICY", "RUST_LOG"];

/// The environment variable naming the Google Cloud project of the traces (read by
/// [`Builder::from_env`] for `json-gcp` lines).
pub const GCP_PROJECT_VAR: &str = "GOOGLE_CLOUD_PROJECT";

/// How long [`Logging`] waits, when it stops, for what is queued to be written before
/// it writes the line that names the callsites that wrote the most bytes.
const SUMMARY_DRAIN: std::time::Duration = std::time::Duration::from_millis(100);

/// The environment variable that turns the `SIGTERM` flush off (`false`, `0`, `off`,
/// `no`) or on (`true`, `1`, `on`, `yes`; the default): see [`Builder::flush_on_sigterm`].
pub const FLUSH_ON_SIGTERM_VAR: &str = "LOGPOLICY_FLUSH_ON_SIGTERM";

/// Reads a yes or a no (`true`, `1`, `on`, `yes` / `false`, `0`, `off`, `no`, in any
/// case), or names what it got.
fn parse_on_off(value: &str) -> Result<bool, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "on" | "yes" => Ok(true),
        "false" | "0" | "off" | "no" => Ok(false),
        _ => Err(format!(
            "{:?} is neither true, 1, on, yes nor false, 0, off, no",
            value.trim()
        )),
    }
}

/// The target of logpolicy's own lines.
const OWN_TARGET: &str = "logpolicy";

/// The baseline when neither variable is set.
pub const DEFAULT_DIRECTIVES: &str = "info";

/// Why logging could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// An environment variable holds directives that do not parse (only with
    /// [`Builder::strict`]; otherwise the invalid entries are skipped and reported).
    #[error("{var}: {source}")]
    Directives {
        /// The variable.
        var: &'static str,
        /// What is wrong with it.
        source: DirectiveError,
    },
    /// `LOGPOLICY_FORMAT` names no format (only with [`Builder::strict`]; otherwise it
    /// is reported and the default format is used).
    #[error("{var}: {source}")]
    Format {
        /// The variable.
        var: &'static str,
        /// What is wrong with it.
        source: ParseFormatError,
    },
    /// `OTEL_RESOURCE_ATTRIBUTES` has an entry that does not parse (only with
    /// [`Builder::strict`]; otherwise the entry is skipped and reported).
    #[error("{var}: {source}")]
    Resource {
        /// The variable.
        var: &'static str,
        /// The first entry that does not parse.
        source: ResourceError,
    },
    /// Directives given to [`Builder::directives`] do not parse.
    #[error("directives: {0}")]
    Given(DirectiveError),
    /// `LOGPOLICY_RECORD_BYTES` or `LOGPOLICY_RECORD_MAX_AGE` is not a valid limit
    /// (only with [`Builder::strict`]; otherwise it is reported and the default is kept).
    #[error("{var}: {message}")]
    RecordLimits {
        /// The variable.
        var: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// The writer could not be started (bad configuration, a file that cannot be opened).
    #[error("writer: {0}")]
    Writer(#[from] WriterError),
    /// The admin endpoint could not be configured or started (only with
    /// [`Builder::strict`]; otherwise the service starts without it, or with an endpoint
    /// that refuses pushes until it can accept them, and says so: see
    /// [`Logging::admin_problems`]).
    #[cfg(feature = "admin")]
    #[error("admin endpoint: {0}")]
    Admin(#[from] AdminError),
    /// A name given to [`Builder::redact`] or [`Builder::unredact`] is not a field name.
    #[error("redaction: {0}")]
    Redact(#[from] FieldNameError),
    /// Another global `log` logger was set first (see [`Builder::log_bridge`]): from
    /// [`Builder::try_init`] only ([`Builder::layer`] leaves a logger set first alone).
    #[error(transparent)]
    LogBridge(#[from] LogBridgeError),
    /// An environment variable holds a value its setting does not take (only with
    /// [`Builder::strict`]; otherwise it is reported and the default is used).
    #[error("{var}: {error}")]
    Setting {
        /// The variable.
        var: &'static str,
        /// What is wrong with it.
        error: String,
    },
    /// Another global subscriber was set first.
    #[error("a global tracing subscriber is already set: {0}")]
    AlreadySet(String),
    /// [`Builder::layer`] was asked for after [`Builder::with_layer`]: the layers given
    /// there belong to the subscriber that [`Builder::build`] makes; with
    /// [`Builder::layer`], add them to your own subscriber.
    #[error(
        "Builder::with_layer adds layers to the subscriber Builder::build makes; \
         with Builder::layer, add them to your own subscriber"
    )]
    LayersGivenTwice,
}

/// Configures logging: the baseline policy, the format, and where lines go.
///
/// # Examples
///
/// ```
/// use logpolicy::{Builder, Format};
/// let (dispatch, logging) = Builder::new()
///     .directives("info,shop::payment=debug")
///     .format(Format::Json)
///     .build()
///     .unwrap();
/// tracing::dispatcher::with_default(&dispatch, || tracing::info!(target: "shop::http", "up"));
/// assert_eq!(logging.handle().effective().to_string(), "info,shop::payment=debug,@always_keep=warn");
/// ```
#[derive(Debug, Default)]
pub struct Builder {
    /// Layers under logpolicy's, in the order given: [`Builder::with_layer`].
    extra: ExtraLayers,
    directives: Option<String>,
    from_env: bool,
    format: Option<Format>,
    service: Service,
    gcp_project: Option<String>,
    spans: Option<Spans>,
    writer: Option<WriterConfig>,
    #[cfg(feature = "admin")]
    admin: Option<AdminConfig>,
    redact: Vec<String>,
    unredact: Vec<String>,
    redact_values: bool,
    strict: bool,
    leave_log_alone: bool,
    record_limits: Option<RecordLimits>,
    flush_on_sigterm: Option<bool>,
}

/// The environment variable of the recorder's byte limit, in bytes (see
/// [`crate::recorder`]; default 8 MiB, at most 256 MiB).
pub const RECORD_BYTES_VAR: &str = "LOGPOLICY_RECORD_BYTES";

/// The environment variable of the recorder's age limit, in seconds (default 900).
pub const RECORD_MAX_AGE_VAR: &str = "LOGPOLICY_RECORD_MAX_AGE";

/// Layers a [`Builder`] puts under its own, boxed (shown by number: a layer need not be
/// `Debug`).
#[derive(Default)]
struct ExtraLayers(Vec<Box<dyn Layer<Registry> + Send + Sync>>);

impl std::fmt::Debug for ExtraLayers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} layers", self.0.len())
    }
}

/// A setting from the environment that was skipped: what (the line's message), the
/// variable, and what is wrong with it.
type Skipped = (&'static str, &'static str, String);

/// The baseline and what was skipped to get it: `(variable, error)` per invalid entry.
type Baseline = (Directives, Vec<(&'static str, DirectiveError)>);

/// Running logging: changes the policy at runtime, and owns the writer's thread.
/// Keep it for the life of the program: dropping it flushes what is queued (within
/// the writer's `flush_timeout`) and stops the writer.
#[must_use = "keep the returned Logging alive for the program's lifetime: dropping it stops the writer"]
#[derive(Debug)]
pub struct Logging {
    /// Declared first: stops before the writer.
    #[cfg(feature = "admin")]
    admin: Option<AdminServer>,
    /// What kept the admin endpoint from starting, or from accepting pushes, at start.
    #[cfg(feature = "admin")]
    admin_problems: Vec<AdminError>,
    handle: PolicyHandle,
    writer: Writer,
    /// The format of logpolicy's own lines.
    style: Style,
    /// Taken when logging stops.
    guard: Option<WriterGuard>,
    /// Whether the global paths install the termination flush (see [`crate::sigterm`]).
    flush_on_sigterm: bool,
    /// Whether they did.
    sigterm_installed: bool,
}

impl Logging {
    /// The handle that changes the policy.
    pub fn handle(&self) -> &PolicyHandle {
        &self.handle
    }

    /// Waits until every line logged so far is written, or `timeout`; returns whether
    /// it was.
    pub fn flush(&self, timeout: std::time::Duration) -> bool {
        self.writer.flush(timeout)
    }

    /// The address the admin endpoint listens on, if it runs (see [`crate::admin`]).
    #[cfg(feature = "admin")]
    pub fn admin_addr(&self) -> Option<std::net::SocketAddr> {
        self.admin.as_ref().map(AdminServer::local_addr)
    }

    /// What was wrong with the admin endpoint's settings when logging started, each
    /// reported then in a `warn` line from target `logpolicy` (without
    /// [`Builder::strict`], none of it stops the service from starting): an address that
    /// does not parse or cannot be bound (the endpoint does not run: [`admin_addr`]
    /// is `None`), no trusted key or a keys file that cannot be read yet, an incomplete
    /// pod identity (the endpoint runs and refuses every push, a keys file until it can
    /// be read; `/metrics` says so in `logpolicy_admin_push_blocked`), a setting that was
    /// skipped. Empty when the endpoint started as configured, or is not configured.
    /// For a health check or a metric of the service's own where the endpoint's
    /// `/metrics` cannot be read.
    ///
    /// [`admin_addr`]: Logging::admin_addr
    ///
    /// ```
    /// use logpolicy::admin::AdminError;
    /// # std::env::set_var("LOGPOLICY_ADMIN_ADDR", "localhost:9090");
    /// // LOGPOLICY_ADMIN_ADDR=localhost:9090 (a name, not an address)
    /// let (_dispatch, logging) = logpolicy::Builder::from_env().build()?;
    /// assert_eq!(logging.admin_addr(), None);
    /// let [AdminError::Env { var, .. }] = logging.admin_problems() else { panic!() };
    /// assert_eq!(*var, "LOGPOLICY_ADMIN_ADDR");
    ///
    /// assert!(logpolicy::Builder::from_env().strict(true).build().is_err());
    /// # std::env::remove_var("LOGPOLICY_ADMIN_ADDR");
    /// # Ok::<(), logpolicy::InitError>(())
    /// ```
    #[cfg(feature = "admin")]
    pub fn admin_problems(&self) -> &[AdminError] {
        &self.admin_problems
    }

    /// Whether `SIGTERM` flushes what is queued (within 2 s) before it ends the process:
    /// logpolicy's handler was installed, because the process had none when logging
    /// started and [`Builder::flush_on_sigterm`] did not turn it off (see
    /// [`crate::sigterm`]). Only [`init`], [`Builder::try_init`] and [`Builder::layer`]
    /// install it; always `false` off Unix.
    ///
    /// ```
    /// let (_dispatch, logging) = logpolicy::Builder::new().build()?;
    /// assert!(!logging.flushes_on_sigterm()); // `build` installs nothing global
    /// # Ok::<(), logpolicy::InitError>(())
    /// ```
    pub fn flushes_on_sigterm(&self) -> bool {
        self.sigterm_installed
    }

    /// Installs the termination flush if asked and the process has no `SIGTERM`
    /// handler of its own (the global paths only).
    fn install_sigterm(&mut self) {
        #[cfg(unix)]
        if self.flush_on_sigterm {
            self.sigterm_installed =
                crate::sigterm::install(&self.writer) == crate::sigterm::Installed::Ours;
        }
        // Off Unix there is no SIGTERM to handle.
        #[cfg(not(unix))]
        let _ = self.flush_on_sigterm;
    }

    /// What the writer has written, dropped and still holds.
    pub fn writer_stats(&self) -> WriterStats {
        self.writer.stats()
    }

    /// What each callsite cost so far, biggest in bytes first: lines and bytes written,
    /// events held back by the policy and lines dropped by the writer, per callsite (see
    /// [`crate::ledger`]). The filter and the writer count in one ledger, so after a
    /// [`flush`](Logging::flush) the rows' bytes plus [`Sites::own`]'s equal
    /// [`WriterStats::bytes_written`].
    pub fn sites(&self) -> Sites {
        self.handle.sites()
    }

    /// The store of the lines recording rules keep instead of writing (see
    /// [`crate::recorder`]).
    pub fn recorder(&self) -> crate::recorder::Recorder {
        self.handle.recorder()
    }

    /// Writes the recorded lines of the window `request` asks for (see
    /// [`crate::recorder`]), paced, between two lines of target `logpolicy` that say who
    /// asked and what the store still held, and returns what it did once the last line
    /// is queued. Each line is replayed at most once.
    ///
    /// # Examples
    ///
    /// ```
    /// use logpolicy::writer::{Output, ReplayRequest, WriterConfig};
    /// use std::time::Duration;
    ///
    /// let path = std::env::temp_dir().join(format!("replay-doc-{}.log", std::process::id()));
    /// let (dispatch, logging) = logpolicy::Builder::new()
    ///     .directives("info,@record(shop::payment)=debug")
    ///     .writer(WriterConfig::new(Output::File(path.clone())))
    ///     .build()?;
    /// tracing::dispatcher::with_default(&dispatch, || {
    ///     tracing::debug!(target: "shop::payment", card = "visa", "authorising"); // recorded
    ///     tracing::info!(target: "shop::payment", "declined"); // written
    /// });
    /// let report = logging.replay(&ReplayRequest::new("on-call", Duration::from_secs(300)));
    /// assert_eq!((report.lines, report.queued), (1, 1));
    /// assert!(logging.flush(Duration::from_secs(5)));
    /// let out = std::fs::read_to_string(&path)?;
    /// let replayed = out.lines().find(|l| l.contains("authorising")).unwrap();
    /// assert!(replayed.ends_with(r#","replayed":true}"#));
    /// // Nothing is replayed twice.
    /// assert_eq!(logging.replay(&ReplayRequest::new("on-call", Duration::from_secs(300))).lines, 0);
    /// # drop(logging);
    /// # std::fs::remove_file(path)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn replay(&self, request: &ReplayRequest) -> ReplayReport {
        let now = self
            .handle
            .now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        self.writer.replay(&self.handle.recorder(), request, now)
    }

    /// Stops logging as dropping it does (the admin endpoint first, then the writer,
    /// flushed within its `flush_timeout`), and returns the writer's final counters:
    /// every line counted once as written or dropped, with what could not be delivered
    /// at the end as `shutdown` drops, also reported in one last line where possible
    /// (see [`WriterGuard::finish`]).
    ///
    /// ```
    /// use logpolicy::writer::{Output, WriterConfig};
    /// let path = std::env::temp_dir().join(format!("logging-finish-{}.log", std::process::id()));
    /// let (dispatch, logging) = logpolicy::Builder::new()
    ///     .writer(WriterConfig::new(Output::File(path.clone())))
    ///     .build()?;
    /// tracing::dispatcher::with_default(&dispatch, || tracing::info!("last words"));
    /// let stats = logging.finish();
    /// assert!(std::fs::read_to_string(&path)?.contains("last words"));
    /// assert_eq!(stats.emitted_total(), stats.written_total() + stats.dropped_total());
    /// # std::fs::remove_file(path)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn finish(mut self) -> WriterStats {
        self.stop()
    }

    /// Stops the admin endpoint, writes the line that names the callsites that wrote
    /// the most bytes, and stops the writer.
    fn stop(&mut self) -> WriterStats {
        #[cfg(feature = "admin")]
        drop(self.admin.take());
        let Some(guard) = self.guard.take() else {
            return self.writer.stats();
        };
        // What is queued is counted in the ledger once written: give the writer a
        // moment to write it, so that the line counts it (bounded: behind a stalled
        // output it could not be written anyway, and the guard's own wait follows).
        // The line is an `info` line of target `logpolicy`: written only where the
        // policy in force writes those (`RUST_LOG=warn`, or `logpolicy=warn`, turns it
        // off, as it would any `info` line).
        if self
            .handle
            .effective()
            .level_for(OWN_TARGET)
            .enables(&tracing_core::Level::INFO)
        {
            self.writer.flush(SUMMARY_DRAIN);
            let mut line = Vec::with_capacity(512);
            let sites = self.handle.sites();
            if own_line::write_top_sites(&mut line, &self.style, self.handle.now(), &sites)
                .is_some()
            {
                self.writer
                    .write_line(tracing_core::Level::INFO, true, &line);
            }
        }
        guard.finish()
    }
}

impl Drop for Logging {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Builder {
    /// A builder with the baseline `info`, JSON when stdout is not a terminal.
    pub fn new() -> Self {
        Builder::default()
    }

    /// A builder whose baseline comes from `LOGPOLICY`, else `RUST_LOG`, else `info`.
    ///
    /// The environment never stops the service from starting: invalid entries are
    /// skipped (as `EnvFilter::from_default_env` skips them) and each is reported in a
    /// `warn` line from target `logpolicy`, the first lines written, whatever the
    /// policy. A variable with no valid level in it leaves the baseline `info`.
    /// [`Builder::strict`] refuses instead.
    ///
    /// ```
    /// # std::env::set_var("LOGPOLICY", "info,*=debug,shop=verbose");
    /// let (_dispatch, logging) = logpolicy::Builder::from_env().build().unwrap();
    /// assert_eq!(logging.handle().effective().to_string(), "info,@always_keep=warn");
    ///
    /// let err = logpolicy::Builder::from_env().strict(true).build().unwrap_err();
    /// assert!(err.to_string().starts_with("LOGPOLICY: 2 invalid directives: "), "{err}");
    /// ```
    pub fn from_env() -> Self {
        Builder {
            from_env: true,
            ..Builder::default()
        }
    }

    /// Uses these directives as the baseline (overrides the environment).
    #[must_use]
    pub fn directives(mut self, directives: impl Into<String>) -> Self {
        self.directives = Some(directives.into());
        self
    }

    /// Forces a format (overrides the environment). Default: `LOGPOLICY_FORMAT` with
    /// [`Builder::from_env`], else JSON unless stdout is a terminal (then text).
    ///
    /// A `LOGPOLICY_FORMAT` that names no format does not stop the service: it is
    /// reported in a `warn` line (`"source":"LOGPOLICY_FORMAT"`, the error naming the
    /// value and the formats) and the default is used; [`Builder::strict`] refuses.
    ///
    /// ```
    /// # std::env::set_var("LOGPOLICY_FORMAT", "xml");
    /// let err = logpolicy::Builder::from_env().strict(true).build().unwrap_err();
    /// assert!(err.to_string().starts_with("LOGPOLICY_FORMAT: unknown format \"xml\" (expected one of: json,"), "{err}");
    /// # std::env::remove_var("LOGPOLICY_FORMAT");
    /// ```
    #[must_use]
    pub fn format(mut self, format: Format) -> Self {
        self.format = Some(format);
        self
    }

    /// Names the service on every line (overrides the environment, field by field).
    /// Default with [`Builder::from_env`]: `OTEL_SERVICE_NAME`, else `service.name` in
    /// `OTEL_RESOURCE_ATTRIBUTES`, and `service.version` from the latter (see
    /// [`Service::from_vars`]).
    ///
    /// ```
    /// use logpolicy::format::Service;
    /// let (_dispatch, _logging) = logpolicy::Builder::new()
    ///     .service(Service::named("shop").version(env!("CARGO_PKG_VERSION")))
    ///     .build()
    ///     .unwrap();
    /// ```
    #[must_use]
    pub fn service(mut self, service: Service) -> Self {
        self.service = service;
        self
    }

    /// Names the Google Cloud project of the traces, for `json-gcp`'s trace field (see
    /// [`FormatLayer::gcp_project`]). Default with [`Builder::from_env`]:
    /// `GOOGLE_CLOUD_PROJECT`.
    #[must_use]
    pub fn gcp_project(mut self, project: impl Into<String>) -> Self {
        self.gcp_project = Some(project.into());
        self
    }

    /// Which spans' fields each line carries. The default, [`Spans::All`], writes every
    /// span the event is in, root first, as `tracing_subscriber::fmt`'s JSON does, so a
    /// request span's `user_id` is on the lines of the spans nested in it (a service
    /// moved from `fmt` keeps every field its queries read). [`Spans::Innermost`]
    /// writes the event's own span only: shorter lines, for a service whose queries
    /// need no outer span's fields (see docs/coming-from-envfilter.md).
    ///
    /// # Examples
    ///
    /// ```
    /// let (dispatch, logging) = logpolicy::Builder::new().build().unwrap();
    /// tracing::dispatcher::with_default(&dispatch, || {
    ///     let _request = tracing::info_span!("request", user_id = 42).entered();
    ///     let _charge = tracing::info_span!("charge").entered();
    ///     tracing::info!("charged"); // "spans":[{"name":"request","user_id":42},{"name":"charge"}]
    /// });
    /// # drop(logging);
    /// ```
    #[must_use]
    pub fn spans(mut self, spans: Spans) -> Self {
        self.spans = Some(spans);
        self
    }

    /// Configures the writer (default: stdout, 4 MiB queue, drop mode with a reserve for
    /// `alwaysKeep` lines; see [`crate::writer`]).
    #[must_use]
    pub fn writer(mut self, config: WriterConfig) -> Self {
        self.writer = Some(config);
        self
    }

    /// Serves the admin endpoint with this configuration (overrides the environment).
    /// [`Builder::from_env`] starts it from `LOGPOLICY_ADMIN_ADDR` and friends when that
    /// is set; see [`crate::admin`]. An endpoint that cannot start does not stop the
    /// service unless [`Builder::strict`] (see [`Logging::admin_problems`]).
    #[cfg(feature = "admin")]
    #[must_use]
    pub fn admin(mut self, config: AdminConfig) -> Self {
        self.admin = Some(config);
        self
    }

    /// How much the recorder may keep (see [`crate::recorder`]): bytes and age. By
    /// default 8 MiB and 15 minutes, or what `LOGPOLICY_RECORD_BYTES` and
    /// `LOGPOLICY_RECORD_MAX_AGE` (seconds) say with [`Builder::from_env`]. Nothing is
    /// allocated until a recording rule records a line.
    ///
    /// ```
    /// use logpolicy::recorder::RecordLimits;
    /// use std::time::Duration;
    /// let limits = RecordLimits::new(64 << 20, Duration::from_secs(1800)).unwrap();
    /// let (_dispatch, logging) = logpolicy::Builder::new().record_limits(limits).build().unwrap();
    /// assert_eq!(logging.recorder().limits(), limits);
    /// ```
    pub fn record_limits(mut self, limits: RecordLimits) -> Self {
        self.record_limits = Some(limits);
        self
    }

    /// The recorder's limits: given, else from the environment (an invalid variable is
    /// refused when strict, else added to `skipped`), else the defaults.
    fn choose_record_limits(&self, skipped: &mut Vec<Skipped>) -> Result<RecordLimits, InitError> {
        if let Some(limits) = self.record_limits {
            return Ok(limits);
        }
        let defaults = RecordLimits::default();
        if !self.from_env {
            return Ok(defaults);
        }
        let read = |var: &'static str| -> Result<Option<u64>, InitError> {
            match std::env::var(var) {
                Ok(v) if !v.trim().is_empty() => {
                    v.trim()
                        .parse::<u64>()
                        .map(Some)
                        .map_err(|_| InitError::RecordLimits {
                            var,
                            message: format!("{v:?} is not a whole number"),
                        })
                }
                _ => Ok(None),
            }
        };
        let mut limits = defaults;
        for var in [RECORD_BYTES_VAR, RECORD_MAX_AGE_VAR] {
            let checked = read(var).and_then(|value| {
                let Some(value) = value else {
                    return Ok(limits);
                };
                let (bytes, age) = if var == RECORD_BYTES_VAR {
                    (
                        usize::try_from(value).unwrap_or(usize::MAX),
                        limits.max_age(),
                    )
                } else {
                    (limits.max_bytes(), std::time::Duration::from_secs(value))
                };
                RecordLimits::new(bytes, age).map_err(|e| InitError::RecordLimits {
                    var,
                    message: e.to_string(),
                })
            });
            match checked {
                Ok(l) => limits = l,
                Err(e) if self.strict => return Err(e),
                Err(InitError::RecordLimits { var, message }) => {
                    skipped.push(("skipped an invalid recorder limit", var, message));
                }
                Err(_) => {}
            }
        }
        Ok(limits)
    }

    /// Refuses to build over the environment (default: work around it and report it
    /// in-band, in a `warn` line from target `logpolicy` per problem, among the first
    /// lines written): an invalid directive, format or resource attribute (the default
    /// is used, as without it), or an admin endpoint that cannot start as configured
    /// (the service starts without it, or with an endpoint that refuses pushes until it
    /// can accept them; see [`Logging::admin_problems`]). Directives given to
    /// [`Builder::directives`] and pushed policies are always strict.
    ///
    /// ```
    /// # std::env::set_var("LOGPOLICY_ADMIN_ADDR", "127.0.0.1:0");
    /// # std::env::set_var("LOGPOLICY_TRUSTED_KEYS_FILE", "/nonexistent/trusted-keys");
    /// // The trust ConfigMap is not mounted yet: the endpoint waits for its keys file.
    /// let (_dispatch, logging) = logpolicy::Builder::from_env().build()?;
    /// assert!(logging.admin_addr().is_some());
    /// assert!(logging.admin_problems()[0].to_string().contains("/nonexistent/trusted-keys"));
    ///
    /// let err = logpolicy::Builder::from_env().strict(true).build().unwrap_err();
    /// assert!(err.to_string().starts_with("admin endpoint: trusted keys: /nonexistent/trusted-keys"), "{err}");
    /// # std::env::remove_var("LOGPOLICY_ADMIN_ADDR");
    /// # std::env::remove_var("LOGPOLICY_TRUSTED_KEYS_FILE");
    /// # Ok::<(), logpolicy::InitError>(())
    /// ```
    #[must_use]
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// Whether [`Builder::try_init`] installs the `log` bridge as the global `log` logger
    /// (default `true`): records of crates that log through `log` are then written under
    /// the same policy, their module path as target (see [`crate::log_bridge`]). `false`
    /// leaves the global `log` logger alone, for a program that sets its own.
    #[must_use]
    pub fn log_bridge(mut self, install: bool) -> Self {
        self.leave_log_alone = !install;
        self
    }

    /// Whether [`Builder::try_init`] and [`Builder::layer`] install a `SIGTERM` handler
    /// that writes what is queued, within 2 s, before the process ends as `SIGTERM`
    /// would have ended it (default `true`; only where the process has no handler of its
    /// own when logging starts, and one it installs later replaces it; see
    /// [`crate::sigterm`] for exactly what happens). Default with [`Builder::from_env`]:
    /// `LOGPOLICY_FLUSH_ON_SIGTERM` (`false`, `0`, `off`, `no` turn it off). Without it,
    /// a service that does not handle `SIGTERM` loses what is queued when it is stopped.
    ///
    /// ```
    /// let logging = logpolicy::Builder::new().flush_on_sigterm(false).try_init()?;
    /// assert!(!logging.flushes_on_sigterm());
    /// # Ok::<(), logpolicy::InitError>(())
    /// ```
    #[must_use]
    pub fn flush_on_sigterm(mut self, on: bool) -> Self {
        self.flush_on_sigterm = Some(on);
        self
    }

    /// Adds `layer` to the subscriber that [`Builder::build`] and [`Builder::try_init`]
    /// make, under logpolicy's: it sees the spans and events the policy enables (as a
    /// layer behind `EnvFilter` does), before logpolicy writes them. For an
    /// OpenTelemetry layer, a layer of metrics, or one of your own; layers added in turn
    /// see events in the order they were added. To put logpolicy into a subscriber you
    /// build yourself, use [`Builder::layer`] instead.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// use tracing_subscriber::layer::{Context, Layer};
    ///
    /// /// Counts the events it sees.
    /// struct Count(Arc<AtomicUsize>);
    /// impl<S: tracing::Subscriber> Layer<S> for Count {
    ///     fn on_event(&self, _: &tracing::Event<'_>, _: Context<'_, S>) {
    ///         self.0.fetch_add(1, Ordering::Relaxed);
    ///     }
    /// }
    ///
    /// let seen = Arc::new(AtomicUsize::new(0));
    /// let (dispatch, logging) = logpolicy::Builder::new()
    ///     .directives("info")
    ///     .with_layer(Count(seen.clone()))
    ///     .build()
    ///     .unwrap();
    /// tracing::dispatcher::with_default(&dispatch, || {
    ///     tracing::info!(target: "shop::http", "written, and counted");
    ///     tracing::debug!(target: "shop::http", "neither: the policy says info");
    /// });
    /// assert_eq!(seen.load(Ordering::Relaxed), 1);
    /// assert_eq!(logging.handle().stats().total().written, 1); // events written
    /// ```
    #[must_use]
    pub fn with_layer<L>(mut self, layer: L) -> Self
    where
        L: Layer<Registry> + Send + Sync + 'static,
    {
        self.extra.0.push(Box::new(layer));
        self
    }

    /// Also redacts the values of fields called `name` (or ending in `.name`, `_name`),
    /// at every level, whatever a pushed policy says (see
    /// [`redact`](crate::policy::redact)).
    ///
    /// # Examples
    ///
    /// ```
    /// use logpolicy::Builder;
    /// let (_, logging) = Builder::new().redact("card_token").unredact("cookie").build().unwrap();
    /// let redaction = logging.handle().effective().redaction();
    /// assert!(redaction.redacts("card_token") && redaction.redacts("password"));
    /// assert!(!redaction.redacts("cookie"));
    /// assert!(Builder::new().redact("card token").build().is_err());
    /// ```
    #[must_use]
    pub fn redact(mut self, name: impl Into<String>) -> Self {
        self.redact.push(name.into());
        self
    }

    /// Stops redacting a built-in name (`cookie`, `token`, ...) for this service: the
    /// baseline is the only place a name can be removed; a pushed policy cannot.
    #[must_use]
    pub fn unredact(mut self, name: impl Into<String>) -> Self {
        self.unredact.push(name.into());
        self
    }

    /// Also redacts values shaped like secrets (bearer tokens, JWTs, private keys)
    /// inside every string, the message included (default off: it renders every
    /// string-like value once more to search it).
    #[must_use]
    pub fn redact_values(mut self, on: bool) -> Self {
        self.redact_values = on;
        self
    }

    fn baseline(&self) -> Result<Baseline, InitError> {
        let (mut d, skipped) = self.baseline_directives()?;
        for name in &self.redact {
            let name = FieldName::new(name)?;
            if !d.redact.contains(&name) {
                d.redact.push(name);
            }
        }
        for name in &self.unredact {
            let name = FieldName::new(name)?;
            if !d.unredact.contains(&name) {
                d.unredact.push(name);
            }
        }
        d.redact_values |= self.redact_values;
        Ok((d, skipped))
    }

    fn baseline_directives(&self) -> Result<Baseline, InitError> {
        if let Some(d) = &self.directives {
            return Ok((d.parse().map_err(InitError::Given)?, Vec::new()));
        }
        if self.from_env {
            for var in ENV_VARS {
                if let Ok(value) = std::env::var(var) {
                    if self.strict {
                        let d = value
                            .parse()
                            .map_err(|source| InitError::Directives { var, source })?;
                        return Ok((d, Vec::new()));
                    }
                    let (d, errors) = Directives::parse_lossy(&value);
                    let skipped = errors.into_iter().map(|e| (var, e)).collect();
                    if d.default_level.is_none() && d.targets.is_empty() {
                        let mut fallback: Directives =
                            DEFAULT_DIRECTIVES.parse().map_err(InitError::Given)?;
                        // The settings (`@...`) stay.
                        fallback.always_keep = d.always_keep;
                        fallback.sampling = d.sampling;
                        fallback.burst = d.burst;
                        fallback.max_bytes_per_second = d.max_bytes_per_second;
                        fallback.redact = d.redact;
                        fallback.unredact = d.unredact;
                        fallback.redact_values = d.redact_values;
                        return Ok((fallback, skipped));
                    }
                    return Ok((d, skipped));
                }
            }
        }
        Ok((
            DEFAULT_DIRECTIVES.parse().map_err(InitError::Given)?,
            Vec::new(),
        ))
    }

    /// The format: given, else from `LOGPOLICY_FORMAT`, else by the terminal. A value
    /// that names no format is refused when strict, else added to `skipped`.
    fn choose_format(&self, skipped: &mut Vec<Skipped>) -> Result<Format, InitError> {
        if let Some(format) = self.format {
            return Ok(format);
        }
        let var = Format::ENV_VAR;
        if let Some(value) = self.from_env.then(|| std::env::var(var).ok()).flatten() {
            if !value.trim().is_empty() {
                match value.parse() {
                    Ok(format) => return Ok(format),
                    Err(source) if self.strict => return Err(InitError::Format { var, source }),
                    Err(e) => skipped.push(("skipped an invalid format", var, e.to_string())),
                }
            }
        }
        Ok(if std::io::stdout().is_terminal() {
            Format::Text
        } else {
            Format::Json
        })
    }

    /// Whether to flush at `SIGTERM`: given, else from `LOGPOLICY_FLUSH_ON_SIGTERM`, else
    /// yes. A value that is not a yes or a no is refused when strict, else added to
    /// `skipped` (and the default holds).
    fn choose_flush_on_sigterm(&self, skipped: &mut Vec<Skipped>) -> Result<bool, InitError> {
        if let Some(on) = self.flush_on_sigterm {
            return Ok(on);
        }
        let var = FLUSH_ON_SIGTERM_VAR;
        if let Some(value) = self.from_env.then(|| std::env::var(var).ok()).flatten() {
            if !value.trim().is_empty() {
                match parse_on_off(&value) {
                    Ok(on) => return Ok(on),
                    Err(error) if self.strict => return Err(InitError::Setting { var, error }),
                    Err(error) => skipped.push(("skipped an invalid setting", var, error)),
                }
            }
        }
        Ok(true)
    }

    /// The service: given, else (field by field) from the environment. Entries of
    /// `OTEL_RESOURCE_ATTRIBUTES` that do not parse are refused when strict, else added
    /// to `skipped`.
    fn choose_service(&self, skipped: &mut Vec<Skipped>) -> Result<Service, InitError> {
        let mut service = Service::default();
        if self.from_env {
            let (env, errors) = Service::from_env();
            let var = RESOURCE_ATTRIBUTES_VAR;
            if let (true, Some(source)) = (self.strict, errors.first()) {
                let source = source.clone();
                return Err(InitError::Resource { var, source });
            }
            for e in errors {
                skipped.push(("skipped an invalid resource attribute", var, e.to_string()));
            }
            service = env;
        }
        if let Some(name) = &self.service.name {
            service.name = Some(name.clone());
        }
        if let Some(version) = &self.service.version {
            service.version = Some(version.clone());
        }
        Ok(service)
    }

    /// Builds the subscriber without installing it: a [`Registry`] with the layers given
    /// to [`Builder::with_layer`], and logpolicy's on top.
    pub fn build(mut self) -> Result<(tracing_core::Dispatch, Logging), InitError> {
        let extra = std::mem::take(&mut self.extra.0);
        let (filter, output, logging) = self.parts()?;
        // Without extra layers, nothing boxed stands between the registry and ours.
        let dispatch = if extra.is_empty() {
            tracing_core::Dispatch::new(tracing_subscriber::registry().with(filter).with(output))
        } else {
            tracing_core::Dispatch::new(
                tracing_subscriber::registry()
                    .with(extra)
                    .with(filter)
                    .with(output),
            )
        };
        Ok((dispatch, logging))
    }

    /// Logpolicy as one [`Layer`] (the policy's filter, and the format linked to it,
    /// writing through the [`Writer`]) for a subscriber you build yourself, with
    /// everything [`init`] gives but the global subscriber: the `log` bridge (unless
    /// [`Builder::log_bridge`] says not to), the panic hook that flushes what is queued,
    /// the admin endpoint, and the in-band warnings about skipped settings.
    ///
    /// The filter in it filters the whole subscriber, as an `EnvFilter` layer does: a
    /// layer under it sees only what the policy enables. Put layers that must see
    /// everything beside it with a per-layer filter of their own.
    ///
    /// This is the one way to compose logpolicy by hand with everything it does: a
    /// [`FormatLayer`] made alone is a formatter without the policy's request sampling,
    /// byte budget and write counts (see [`FormatLayer::with_policy`]).
    ///
    /// # Examples
    ///
    /// With another layer (here `fmt`'s, writing to a buffer; an OpenTelemetry layer
    /// composes the same way, and its trace ids are on logpolicy's lines):
    ///
    /// ```
    /// use tracing_subscriber::prelude::*;
    ///
    /// let (layer, logging) = logpolicy::Builder::new()
    ///     .directives("info")
    ///     .log_bridge(false)
    ///     .layer()
    ///     .unwrap();
    /// let subscriber = tracing_subscriber::registry()
    ///     .with(tracing_subscriber::fmt::layer().with_writer(std::io::sink))
    ///     .with(layer);
    /// tracing::subscriber::with_default(subscriber, || {
    ///     tracing::info!(target: "shop::http", "listening");
    /// });
    /// assert_eq!(logging.handle().stats().total().written, 1); // events written
    /// ```
    ///
    /// As the global subscriber: `tracing_subscriber`'s `.init()` (or `.try_init()`), or
    /// `tracing::subscriber::set_global_default(subscriber)`. Either way `log` records
    /// are written once, as the bridge writes them: the layer makes the bridge the `log`
    /// logger at the first span or event it sees, unless a logger is set by then; when
    /// that is `tracing-log`'s (`.init()` sets it right after the subscriber, with
    /// `tracing-subscriber`'s default `tracing-log` feature), the layer hands each record
    /// it dispatches to the bridge. A record logged before the first span or event is not
    /// written.
    pub fn layer<S>(self) -> Result<(impl Layer<S> + Send + Sync + 'static, Logging), InitError>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        if !self.extra.0.is_empty() {
            return Err(InitError::LayersGivenTwice);
        }
        let bridge = !self.leave_log_alone;
        let (filter, output, mut logging) = self.parts()?;
        // The bridge becomes the `log` logger at the first span or event, not now:
        // `.init()` sets `tracing-log`'s logger right after the subscriber (see
        // `LogRecords`).
        let records = bridge.then(|| LogRecords::new(&logging.handle));
        install_panic_hook(logging.writer.clone());
        logging.install_sigterm();
        Ok((filter.and_then(output).and_then(records), logging))
    }

    /// What [`Builder::build`] and [`Builder::layer`] assemble: the filter, the format
    /// layer linked to it, and the running parts (writer, admin endpoint), with the
    /// in-band warnings about skipped settings written.
    fn parts(self) -> Result<(PolicyFilter, FormatLayer<Writer>, Logging), InitError> {
        let (baseline, skipped_directives) = self.baseline()?;
        let mut skipped = Vec::new();
        let format = self.choose_format(&mut skipped)?;
        let service = self.choose_service(&mut skipped)?;
        let record_limits = self.choose_record_limits(&mut skipped)?;
        let flush_on_sigterm = self.choose_flush_on_sigterm(&mut skipped)?;
        let filter = PolicyFilter::new(Policy::new(vec![PolicyLayer::baseline(baseline)]));
        filter.handle().recorder().set_limits(record_limits);
        let handle = filter.handle();
        #[cfg(feature = "admin")]
        let (admin, mut admin_problems) = match self.admin {
            Some(config) => (Some(config), Vec::new()),
            None if self.from_env && self.strict => (AdminConfig::from_env()?, Vec::new()),
            None if self.from_env => AdminConfig::from_env_lenient(),
            None => (None, Vec::new()),
        };
        let config = self.writer.unwrap_or_default();
        // One ledger: the filter counts what it holds back, the writer what it writes
        // and drops.
        let config = config
            .lines(format, service.clone())
            .ledger(handle.ledger());
        let (writer, guard) = Writer::new(config)?;
        let style = Style::new(format, &service);
        let now = filter.handle().now();
        for (var, error) in &skipped_directives {
            let mut line = Vec::with_capacity(256);
            write_skipped_directive(&mut line, &style, now, var, &error.to_string());
            writer.write_line(tracing_core::Level::WARN, true, &line);
        }
        // One `warn` line from target `logpolicy` per setting worked around.
        let warn_skipped = |what: &str, source: &str, error: &str| {
            let mut line = Vec::with_capacity(256);
            write_skipped(&mut line, &style, now, what, source, error);
            writer.write_line(tracing_core::Level::WARN, true, &line);
        };
        for (what, var, error) in &skipped {
            warn_skipped(what, var, error);
        }
        #[cfg(feature = "admin")]
        let admin = match admin {
            Some(config) if self.strict => Some(AdminServer::start(
                config,
                handle.clone(),
                Some(writer.clone()),
            )?),
            Some(mut config) => {
                admin_problems.extend(config.tolerate_missing_identity());
                match AdminServer::start(config, handle.clone(), Some(writer.clone())) {
                    Ok(server) => Some(server),
                    Err(error) => {
                        // Whatever else was wrong, the endpoint does not run: that is
                        // what the service needs to know.
                        admin_problems.retain(|p| p.what == SKIPPED_SETTING);
                        admin_problems.push(AdminProblem {
                            what: NOT_RUNNING,
                            source: ADMIN_ADDR_ENV.to_owned(),
                            error,
                        });
                        None
                    }
                }
            }
            None => None,
        };
        #[cfg(feature = "admin")]
        let admin_problems: Vec<AdminError> = admin_problems
            .into_iter()
            .map(|p| {
                warn_skipped(p.what, &p.source, &p.error.to_string());
                p.error
            })
            .collect();
        let mut layer = FormatLayer::new(format, writer.clone())
            .service(&service)
            .spans(self.spans.unwrap_or(Spans::All));
        let gcp_project = self.gcp_project.clone().or_else(|| {
            let var = self.from_env.then(|| std::env::var(GCP_PROJECT_VAR).ok());
            var.flatten().filter(|p| !p.trim().is_empty())
        });
        if let Some(project) = gcp_project {
            layer = layer.gcp_project(project);
        }
        let output = layer.with_policy(&filter);
        let logging = Logging {
            #[cfg(feature = "admin")]
            admin,
            #[cfg(feature = "admin")]
            admin_problems,
            handle,
            writer,
            style,
            guard: Some(guard),
            flush_on_sigterm,
            sigterm_installed: false,
        };
        Ok((filter, output, logging))
    }

    /// Builds the subscriber and installs it as the global default, and the `log`
    /// bridge as the global `log` logger unless [`Builder::log_bridge`] says not to.
    pub fn try_init(self) -> Result<Logging, InitError> {
        let bridge = !self.leave_log_alone;
        let (dispatch, mut logging) = self.build()?;
        if bridge {
            LogBridge::install(&logging.handle)?;
        }
        tracing_core::dispatcher::set_global_default(dispatch)
            .map_err(|e| InitError::AlreadySet(e.to_string()))?;
        install_panic_hook(logging.writer.clone());
        logging.install_sigterm();
        Ok(logging)
    }
}

/// Sets up logging in one line: baseline from `LOGPOLICY` or `RUST_LOG` (default
/// `info`), JSON lines to stdout when it is not a terminal, text otherwise, through the
/// non-blocking [`Writer`] (a flood never stalls the service; every drop is counted),
/// with a panic hook that flushes what is queued, and records of the `log` crate
/// written under the same policy (see [`crate::log_bridge`]).
///
/// # Examples
///
/// ```
/// let logging = logpolicy::init().expect("logging");
/// tracing::info!(target: "shop::http", "listening");
/// // Later, from any thread:
/// logging.handle().set_directives("info,shop::payment=debug").unwrap();
/// ```
pub fn init() -> Result<Logging, InitError> {
    Builder::from_env().try_init()
}
