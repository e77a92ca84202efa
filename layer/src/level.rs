//! Levels, as a policy names them.

use std::fmt;
use std::str::FromStr;

use tracing_core::metadata::LevelFilter;

/// A verbosity threshold: `trace`, `debug`, `info`, `warn`, `error` or `off`.
///
/// Levels are ordered by verbosity: `Off < Error < Warn < Info < Debug < Trace`, so a
/// threshold `t` lets an event of level `l` through when `l <= t`.
///
/// # Examples
///
/// ```
/// use logpolicy::Level;
/// let l: Level = "DEBUG".parse().unwrap();
/// assert_eq!(l, Level::Debug);
/// assert_eq!(l.to_string(), "debug");
/// assert!(Level::Warn < Level::Info);
/// assert!(Level::Info.enables(&tracing_core::Level::WARN));
/// assert!(!Level::Info.enables(&tracing_core::Level::DEBUG));
/// assert_eq!("verbose".parse::<Level>().unwrap_err().to_string(),
///            "invalid level \"verbose\" (expected one of trace, debug, info, warn, error, off)");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[repr(u8)]
pub enum Level {
    /// Nothing is enabled.
    Off = 0,
    /// Only `ERROR`.
    Error = 1,
    /// `WARN` and above.
    Warn = 2,
    /// `INFO` and above.
    #[default]
    Info = 3,
    /// `DEBUG` and above.
    Debug = 4,
    /// Everything.
    Trace = 5,
}

impl Level {
    /// Every level, least verbose first.
    pub const ALL: [Level; 6] = [
        Level::Off,
        Level::Error,
        Level::Warn,
        Level::Info,
        Level::Debug,
        Level::Trace,
    ];

    /// The lowercase name used in directives and JSON.
    pub const fn as_str(self) -> &'static str {
        match self {
            Level::Off => "off",
            Level::Error => "error",
            Level::Warn => "warn",
            Level::Info => "info",
            Level::Debug => "debug",
            Level::Trace => "trace",
        }
    }

    /// The verbosity of a `tracing` event level, on the same scale.
    #[inline]
    pub fn of(level: &tracing_core::Level) -> Level {
        match *level {
            tracing_core::Level::ERROR => Level::Error,
            tracing_core::Level::WARN => Level::Warn,
            tracing_core::Level::INFO => Level::Info,
            tracing_core::Level::DEBUG => Level::Debug,
            _ => Level::Trace,
        }
    }

    /// Whether this threshold lets an event of `level` through.
    #[inline]
    pub fn enables(self, level: &tracing_core::Level) -> bool {
        Level::of(level) <= self
    }

    /// The equivalent `tracing` level filter.
    pub const fn to_level_filter(self) -> LevelFilter {
        match self {
            Level::Off => LevelFilter::OFF,
            Level::Error => LevelFilter::ERROR,
            Level::Warn => LevelFilter::WARN,
            Level::Info => LevelFilter::INFO,
            Level::Debug => LevelFilter::DEBUG,
            Level::Trace => LevelFilter::TRACE,
        }
    }

    /// The `tracing` level of an event of this verbosity (`Off`, which no event has, is
    /// `ERROR`).
    #[inline]
    pub(crate) const fn to_tracing(self) -> tracing_core::Level {
        match self {
            Level::Off | Level::Error => tracing_core::Level::ERROR,
            Level::Warn => tracing_core::Level::WARN,
            Level::Info => tracing_core::Level::INFO,
            Level::Debug => tracing_core::Level::DEBUG,
            Level::Trace => tracing_core::Level::TRACE,
        }
    }

    /// An index `0..6` for per-level tables (`Off` is 0, `Trace` is 5).
    #[inline]
    pub const fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// The number of event levels (`TRACE` to `ERROR`): the length of every per-level table
/// of counters, indexed by [`level_index`].
pub const LEVELS: usize = 5;

/// The event levels in the order of per-level tables: trace, debug, info, warn, error.
pub const LEVEL_ORDER: [tracing_core::Level; LEVELS] = [
    tracing_core::Level::TRACE,
    tracing_core::Level::DEBUG,
    tracing_core::Level::INFO,
    tracing_core::Level::WARN,
    tracing_core::Level::ERROR,
];

/// The lowercase names of the event levels, in [`LEVEL_ORDER`] (keys of in-band lines and
/// labels of metrics).
pub const LEVEL_NAMES: [&str; LEVELS] = ["trace", "debug", "info", "warn", "error"];

/// The index of an event level in every per-level table: trace 0 … error 4.
///
/// # Examples
///
/// ```
/// use logpolicy::{level_index, LEVEL_ORDER};
/// use tracing_core::Level;
/// assert_eq!(level_index(Level::TRACE), 0);
/// assert_eq!(level_index(Level::ERROR), 4);
/// assert!(LEVEL_ORDER.iter().enumerate().all(|(i, l)| level_index(*l) == i));
/// ```
#[inline]
pub fn level_index(level: tracing_core::Level) -> usize {
    match level {
        tracing_core::Level::TRACE => 0,
        tracing_core::Level::DEBUG => 1,
        tracing_core::Level::INFO => 2,
        tracing_core::Level::WARN => 3,
        _ => 4,
    }
}

/// A string that is not a level.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid level {0:?} (expected one of trace, debug, info, warn, error, off)")]
pub struct ParseLevelError(pub String);

impl FromStr for Level {
    type Err = ParseLevelError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        Level::ALL
            .into_iter()
            .find(|l| t.eq_ignore_ascii_case(l.as_str()))
            .or_else(|| t.eq_ignore_ascii_case("warning").then_some(Level::Warn))
            .ok_or_else(|| ParseLevelError(s.to_owned()))
    }
}

impl serde::Serialize for Level {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for Level {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The level names as the JSON schema of a `LogPolicy` (and of a policy document) gives
/// them: exactly the lowercase names, in order of verbosity.
#[cfg(feature = "schema")]
impl schemars::JsonSchema for Level {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Level".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "enum": ["trace", "debug", "info", "warn", "error", "off"],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_display_round_trips() {
        for l in Level::ALL {
            assert_eq!(l.to_string().parse::<Level>(), Ok(l));
            assert_eq!(l.as_str().to_uppercase().parse::<Level>(), Ok(l));
        }
    }

    #[test]
    fn ordering_matches_tracing() {
        for l in Level::ALL {
            assert_eq!(
                l.to_level_filter(),
                LevelFilter::from_level(tracing_core::Level::TRACE).min(l.to_level_filter())
            );
        }
        assert!(Level::Error.enables(&tracing_core::Level::ERROR));
        assert!(!Level::Off.enables(&tracing_core::Level::ERROR));
        assert!(Level::Trace.enables(&tracing_core::Level::TRACE));
    }
}
