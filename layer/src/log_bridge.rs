//! Records of crates that log through the `log` crate (rustls, reqwest and many more),
//! as events of the same policy and output.
//!
//! [`crate::init`] installs [`LogBridge`] as the global `log` logger (turn it off with
//! [`Builder::log_bridge`](crate::Builder::log_bridge)). A record becomes a tracing event
//! whose target is the record's target (for `log`'s macros, the module path), whose level
//! is the record's level and whose message is the record's message, with the fields
//! `log.target`, `log.module_path`, `log.file` and `log.line` (each when the record has
//! it: the keys `tracing_subscriber::fmt`'s JSON writes for a `log` record); the policy decides
//! about it as about any event (levels, sampling, budget), and it is written in the
//! output's format.
//!
//! Each distinct target gets a callsite of its own (registered with tracing, so a
//! policy change reaches it like any callsite), at most [`MAX_LOG_TARGETS`] of them;
//! records of further targets share one callsite per level, with target `log`.
//! `log`'s own max level follows the policy's most verbose level, so a disabled
//! `log::debug!` costs the same one comparison it costs without any logger.
//!
//! ```
//! let logging = logpolicy::Builder::new().directives("info,shop=debug").try_init().unwrap();
//! assert_eq!(log::max_level(), log::LevelFilter::Debug);
//! log::debug!(target: "shop::cart", "written, as {{\"target\":\"shop::cart\",\"msg\":...}}");
//! logging.handle().set_directives("warn").unwrap();
//! assert_eq!(log::max_level(), log::LevelFilter::Warn);
//! ```

use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{OnceLock, RwLock};

use tracing_core::callsite::{self, Callsite, Identifier};
use tracing_core::field::{FieldSet, Value};
use tracing_core::metadata::Kind;
use tracing_core::subscriber::Interest;
use tracing_core::{dispatcher, Event, Level, Metadata};

use crate::enforce::PolicyHandle;
use crate::ledger;
use crate::level;

/// The most distinct `log` targets that get a callsite of their own.
pub const MAX_LOG_TARGETS: usize = 1024;

/// The target of records beyond [`MAX_LOG_TARGETS`] distinct targets.
pub const OVERFLOW_TARGET: &str = "log";

/// The fields of a record's event: its message, and where it came from under the keys
/// `tracing_subscriber::fmt`'s JSON gives `log` records (through `tracing-log`), so that
/// queries that read them keep working. The last three are left out when the record
/// does not have them.
const FIELDS: &[&str] = &[
    "message",
    "log.target",
    "log.module_path",
    "log.file",
    "log.line",
];
const NEVER: u8 = 0;
const SOMETIMES: u8 = 1;
const ALWAYS: u8 = 2;

/// The callsite of one `(target, level)` of `log` records.
struct LogSite {
    meta: OnceLock<Metadata<'static>>,
    interest: AtomicU8,
}

impl Callsite for LogSite {
    fn set_interest(&self, interest: Interest) {
        let code = if interest.is_never() {
            NEVER
        } else if interest.is_always() {
            ALWAYS
        } else {
            SOMETIMES
        };
        self.interest.store(code, Ordering::Relaxed);
    }

    fn metadata(&self) -> &Metadata<'_> {
        self.meta.get().unwrap_or(&UNSET_META)
    }
}

/// The metadata of a site whose own is not set yet (never seen: it is set before the
/// site is registered).
struct UnsetSite;
static UNSET_SITE: UnsetSite = UnsetSite;
static UNSET_META: Metadata<'static> = Metadata::new(
    "log record",
    OVERFLOW_TARGET,
    Level::TRACE,
    None,
    None,
    None,
    FieldSet::new(FIELDS, Identifier(&UNSET_SITE)),
    Kind::EVENT,
);
impl Callsite for UnsetSite {
    fn set_interest(&self, _: Interest) {}
    fn metadata(&self) -> &Metadata<'_> {
        &UNSET_META
    }
}

/// Every site, by target, one per level (trace 0 ... error 4).
type Sites = HashMap<Box<str>, [Option<&'static LogSite>; 5]>;

fn sites() -> &'static RwLock<Sites> {
    static SITES: OnceLock<RwLock<Sites>> = OnceLock::new();
    SITES.get_or_init(|| RwLock::new(HashMap::new()))
}

/// The site of `(target, level)`, made (and registered with tracing) on first use.
fn site(target: &str, level: Level) -> &'static LogSite {
    let i = level::level_index(level);
    if let Some(site) = sites()
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .get(target)
        .and_then(|levels| levels[i])
    {
        return site;
    }
    let (site, new) = {
        let mut map = sites().write().unwrap_or_else(|p| p.into_inner());
        let key = if map.len() >= MAX_LOG_TARGETS && !map.contains_key(target) {
            OVERFLOW_TARGET
        } else {
            target
        };
        match map.get(key).and_then(|levels| levels[i]) {
            Some(site) => (site, false),
            None => {
                let name: &'static str = Box::leak(Box::from(key));
                let site: &'static LogSite = Box::leak(Box::new(LogSite {
                    meta: OnceLock::new(),
                    interest: AtomicU8::new(SOMETIMES),
                }));
                let _ = site.meta.set(Metadata::new(
                    "log record",
                    name,
                    level,
                    None,
                    None,
                    None,
                    FieldSet::new(FIELDS, Identifier(site)),
                    Kind::EVENT,
                ));
                map.entry(Box::from(key)).or_default()[i] = Some(site);
                (site, true)
            }
        }
    };
    if new {
        // Its events are counted in the ledger rows of their records (target, file,
        // line), not in a row of its own.
        if let Some(meta) = site.meta.get() {
            ledger::register_log_site(meta);
        }
        // Outside the lock: a subscriber asked about the callsite may log through `log`.
        callsite::register(site);
    }
    site
}

fn tracing_level(level: log::Level) -> Level {
    match level {
        log::Level::Error => Level::ERROR,
        log::Level::Warn => Level::WARN,
        log::Level::Info => Level::INFO,
        log::Level::Debug => Level::DEBUG,
        log::Level::Trace => Level::TRACE,
    }
}

/// Sets `log`'s max level to the policy's most verbose level, now and after every
/// change (a registered callsite is told of every change: its `set_interest` runs).
struct MaxLevelSite {
    handle: PolicyHandle,
}

static MAX_LEVEL_META: Metadata<'static> = Metadata::new(
    "log max level",
    "logpolicy::log_bridge",
    Level::TRACE,
    None,
    None,
    None,
    FieldSet::new(&[], Identifier(&MaxLevelProxy)),
    Kind::HINT,
);

/// The static face of the installed [`MaxLevelSite`] (a callsite is `'static`).
struct MaxLevelProxy;
static MAX_LEVEL_SITE: OnceLock<MaxLevelSite> = OnceLock::new();

impl Callsite for MaxLevelProxy {
    fn set_interest(&self, _: Interest) {
        if let Some(site) = MAX_LEVEL_SITE.get() {
            site.sync();
        }
    }
    fn metadata(&self) -> &Metadata<'_> {
        &MAX_LEVEL_META
    }
}

impl MaxLevelSite {
    fn sync(&self) {
        let max = self.handle.max_level();
        log::set_max_level(match max {
            crate::Level::Off => log::LevelFilter::Off,
            crate::Level::Error => log::LevelFilter::Error,
            crate::Level::Warn => log::LevelFilter::Warn,
            crate::Level::Info => log::LevelFilter::Info,
            crate::Level::Debug => log::LevelFilter::Debug,
            crate::Level::Trace => log::LevelFilter::Trace,
        });
    }
}

/// The `log` logger that hands records to the current tracing dispatcher as events.
///
/// [`crate::init`] installs it; install it yourself with [`LogBridge::install`] when you
/// build the subscriber with [`Builder::build`](crate::Builder::build).
#[derive(Debug, Default, Clone, Copy)]
pub struct LogBridge;

/// Another `log` logger was installed first.
#[derive(Debug, thiserror::Error)]
#[error("a global `log` logger is already set (leave it with Builder::log_bridge(false))")]
pub struct LogBridgeError;

impl LogBridge {
    /// Installs the bridge as the global `log` logger, `log`'s max level following the
    /// policy of `handle`. Fails if a `log` logger is already set (only one can be).
    pub fn install(handle: &PolicyHandle) -> Result<(), LogBridgeError> {
        log::set_logger(&LogBridge).map_err(|_| LogBridgeError)?;
        follow_max_level(handle);
        Ok(())
    }
}

/// Makes `log`'s max level follow the policy of `handle`, now and after every change.
fn follow_max_level(handle: &PolicyHandle) {
    let site = MAX_LEVEL_SITE.get_or_init(|| MaxLevelSite {
        handle: handle.clone(),
    });
    site.sync();
    callsite::register(&MaxLevelProxy);
}

/// [`LogRecords`] has not looked at the `log` logger yet.
const UNDECIDED: u8 = 0;
/// The bridge is the `log` logger.
const BRIDGED: u8 = 1;
/// Another logger was set first: `tracing-log`'s `LogTracer` (as
/// `tracing_subscriber`'s `.init()` sets it), or the program's own.
const OTHER: u8 = 2;

/// The `log` records of a subscriber built around [`Builder::layer`](crate::Builder::layer),
/// however it is installed: a layer that, at the first span or event it sees, installs
/// the bridge as the `log` logger unless a logger is set by then, and, when that logger
/// is `tracing-log`'s `LogTracer` (set by `tracing_subscriber`'s `.init()` right after
/// the subscriber), hands each record it dispatches to the bridge instead, so that it is
/// written once, as the bridge writes it.
///
/// Not at once: `.init()` sets the subscriber, then `LogTracer`, and fails (panics) if a
/// `log` logger is set by then. A record logged through `log` before the first span or
/// event is not written (no logger has it yet).
pub(crate) struct LogRecords {
    handle: PolicyHandle,
    state: AtomicU8,
}

impl LogRecords {
    pub(crate) fn new(handle: &PolicyHandle) -> Self {
        LogRecords {
            handle: handle.clone(),
            state: AtomicU8::new(UNDECIDED),
        }
    }

    #[inline]
    fn state(&self) -> u8 {
        match self.state.load(Ordering::Relaxed) {
            UNDECIDED => self.decide(),
            state => state,
        }
    }

    #[cold]
    fn decide(&self) -> u8 {
        let state = match LogBridge::install(&self.handle) {
            Ok(()) => BRIDGED,
            // Left alone: `log`'s max level follows the policy only once a record shows
            // that the logger is `LogTracer` (see `event_enabled`).
            Err(LogBridgeError) => OTHER,
        };
        match self
            .state
            .compare_exchange(UNDECIDED, state, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => state,
            Err(first) => first,
        }
    }
}

impl<S: tracing_core::Subscriber> tracing_subscriber::Layer<S> for LogRecords {
    fn on_new_span(
        &self,
        _: &tracing_core::span::Attributes<'_>,
        _: &tracing_core::span::Id,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) {
        self.state();
    }

    #[inline]
    fn event_enabled(
        &self,
        event: &Event<'_>,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) -> bool {
        if self.state() == OTHER && is_log_tracers(event.metadata()) {
            if MAX_LEVEL_SITE.get().is_none() {
                // `LogTracer` hands records over: `log`'s max level, which it set to the
                // policy's when it was installed, follows the policy from now on.
                follow_max_level(&self.handle);
            }
            reroute(event);
            return false;
        }
        true
    }
}

/// Whether `meta` is the callsite of `tracing-log`'s records (`LogTracer`'s events).
fn is_log_tracers(meta: &Metadata<'_>) -> bool {
    meta.target() == OVERFLOW_TARGET
        && meta.name() == "log event"
        && meta.fields().field("log.target").is_some()
}

/// A `tracing-log` record's fields.
#[derive(Default)]
struct RecordFields {
    message: String,
    target: Option<String>,
    module_path: Option<String>,
    file: Option<String>,
    line: Option<u32>,
}

impl tracing_core::field::Visit for RecordFields {
    fn record_str(&mut self, field: &tracing_core::Field, value: &str) {
        match field.name() {
            "message" => value.clone_into(&mut self.message),
            "log.target" => self.target = Some(value.to_owned()),
            "log.module_path" => self.module_path = Some(value.to_owned()),
            "log.file" => self.file = Some(value.to_owned()),
            _ => {}
        }
    }

    fn record_u64(&mut self, field: &tracing_core::Field, value: u64) {
        if field.name() == "log.line" {
            self.line = u32::try_from(value).ok();
        }
    }

    fn record_debug(&mut self, field: &tracing_core::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            use std::fmt::Write as _;
            self.message.clear();
            let _ = write!(self.message, "{value:?}");
        }
    }
}

/// Hands a record `LogTracer` dispatched to the bridge, as if `log` had called it.
fn reroute(event: &Event<'_>) {
    let mut fields = RecordFields::default();
    event.record(&mut fields);
    let meta = event.metadata();
    let level = match *meta.level() {
        Level::ERROR => log::Level::Error,
        Level::WARN => log::Level::Warn,
        Level::INFO => log::Level::Info,
        Level::DEBUG => log::Level::Debug,
        _ => log::Level::Trace,
    };
    let target = fields.target.as_deref().unwrap_or(OVERFLOW_TARGET);
    log::Log::log(
        &LogBridge,
        &log::Record::builder()
            .args(format_args!("{}", fields.message))
            .level(level)
            .target(target)
            .module_path(fields.module_path.as_deref())
            .file(fields.file.as_deref())
            .line(fields.line)
            .build(),
    );
}

impl log::Log for LogBridge {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        let level = tracing_level(metadata.level());
        if level > tracing_core::LevelFilter::current() {
            return false;
        }
        let site = site(metadata.target(), level);
        match site.interest.load(Ordering::Relaxed) {
            NEVER => false,
            ALWAYS => true,
            _ => dispatcher::get_default(|d| d.enabled(site.metadata())),
        }
    }

    fn log(&self, record: &log::Record<'_>) {
        let level = tracing_level(record.level());
        if level > tracing_core::LevelFilter::current() {
            return;
        }
        let site = site(record.target(), level);
        let interest = site.interest.load(Ordering::Relaxed);
        if interest == NEVER {
            return;
        }
        let Some(meta) = site.meta.get() else {
            return;
        };
        // The record's own row in the ledger (by target, file, line and level): what the
        // filter and the writer count for this record goes there.
        let row = ledger::record_row(record.target(), record.file(), record.line(), &level);
        ledger::with_record(row, || {
            if interest == SOMETIMES && !dispatcher::get_default(|d| d.enabled(meta)) {
                return;
            }
            let fields = meta.fields();
            let mut names = fields.iter();
            let (Some(message), Some(target), Some(module), Some(file), Some(line)) = (
                names.next(),
                names.next(),
                names.next(),
                names.next(),
                names.next(),
            ) else {
                return;
            };
            let record_target = record.target();
            let record_module = record.module_path();
            let record_file = record.file();
            let record_line = record.line().map(u64::from);
            let args: &dyn Value = record.args();
            Event::dispatch(
                meta,
                &fields.value_set(&[
                    (&message, Some(args)),
                    (&target, Some(&record_target as &dyn Value)),
                    (&module, record_module.as_ref().map(|m| m as &dyn Value)),
                    (&file, record_file.as_ref().map(|f| f as &dyn Value)),
                    (&line, record_line.as_ref().map(|l| l as &dyn Value)),
                ]),
            );
        });
    }

    fn flush(&self) {}
}
