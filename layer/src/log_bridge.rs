//! Records of crates that log through the `log` crate (rustls, reqwest and many more),
//! as events of the same policy and output.
//!
//! [`crate::init`] installs [`LogBridge`] as the global `log` logger (turn it off with
//! [`Builder::log_bridge`](crate::Builder::log_bridge)). A record becomes a tracing event
//! whose target is the record's target (for `log`'s macros, the module path), whose level
//! is the record's level and whose message is the record's message; the policy decides
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

const FIELDS: &[&str] = &["message"];
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
        let site = MAX_LEVEL_SITE.get_or_init(|| MaxLevelSite {
            handle: handle.clone(),
        });
        site.sync();
        callsite::register(&MaxLevelProxy);
        Ok(())
    }
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
            if let Some(message) = fields.field("message") {
                let args: &dyn Value = record.args();
                Event::dispatch(meta, &fields.value_set(&[(&message, Some(args))]));
            }
        });
    }

    fn flush(&self) {}
}
