//! The settings of one policy layer, and their `RUST_LOG`-style text form.

use std::fmt;
use std::str::FromStr;

use super::target::{Target, TargetError};
use crate::level::{Level, ParseLevelError};

/// The most per-target entries one layer may have.
pub const MAX_TARGETS: usize = 512;

/// What one policy layer says about levels: a default level and per-target levels.
///
/// The text form is the one `RUST_LOG` uses: comma-separated directives, each a bare
/// level (the default), `target=level`, or a bare `target` (meaning `trace` for it).
/// Whitespace around directives is ignored, as are empty directives (a trailing comma
/// or newline from a ConfigMap does no harm). When a target is named twice the last
/// one wins. [`Display`](fmt::Display) writes the canonical form, which parses back to
/// an equal value.
///
/// # Examples
///
/// ```
/// use logpolicy::{Directives, Level};
///
/// let d: Directives = "info, hyper=warn,shop::payment=debug\n".parse().unwrap();
/// assert_eq!(d.default_level, Some(Level::Info));
/// assert_eq!(d.level_for("shop::payment::card"), Some(Level::Debug));
/// assert_eq!(d.level_for("hyper::proto"), Some(Level::Warn));
/// assert_eq!(d.level_for("shop::db"), Some(Level::Info));
/// assert_eq!(d.to_string(), "info,hyper=warn,shop::payment=debug");
/// assert_eq!(d.to_string().parse::<Directives>().unwrap(), d);
///
/// let err = "info,shop=verbose".parse::<Directives>().unwrap_err();
/// assert_eq!(err.to_string(), r#"invalid level "verbose" in directive "shop=verbose""#);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Directives {
    /// The level of targets no entry matches; `None` leaves them to lower layers.
    pub default_level: Option<Level>,
    /// Per-target levels, at most one per target, in the order first given.
    pub targets: Vec<(Target, Level)>,
}

/// A directive string that could not be parsed; names the offending directive.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DirectiveError {
    /// `target=level` with a level that is not one.
    #[error("invalid level {level:?} in directive {directive:?}")]
    InvalidLevel {
        /// The whole directive.
        directive: String,
        /// The part that should have been a level.
        level: String,
    },
    /// The target part is not a valid target.
    #[error("invalid target in directive {directive:?}: {source}")]
    InvalidTarget {
        /// The whole directive.
        directive: String,
        /// What is wrong with the target.
        source: TargetError,
    },
    /// Span and field filters (`target[span{field=value}]=level`) are not supported.
    #[error("span filters are not supported in directive {0:?}: they make every disabled event in the program costly; use a target instead")]
    SpanFilter(String),
    /// Two bare levels.
    #[error("two default levels: {first:?} and {second:?}")]
    TwoDefaults {
        /// The first bare level.
        first: String,
        /// The second bare level.
        second: String,
    },
    /// More than [`MAX_TARGETS`] targets.
    #[error("too many target directives (at most {MAX_TARGETS})")]
    TooManyTargets,
    /// The input is unreasonably long.
    #[error("directives are longer than {0} bytes")]
    TooLong(usize),
}

/// The longest directive string accepted, in bytes.
pub const MAX_DIRECTIVES_LEN: usize = 64 * 1024;

impl Directives {
    /// Directives with only a default level.
    pub fn with_default(level: Level) -> Self {
        Directives {
            default_level: Some(level),
            targets: Vec::new(),
        }
    }

    /// Sets the level of `target`, replacing an earlier entry for it.
    ///
    /// # Examples
    ///
    /// ```
    /// use logpolicy::{Directives, Level, Target};
    /// let mut d = Directives::with_default(Level::Warn);
    /// d.set_target(Target::new("shop").unwrap(), Level::Debug);
    /// assert_eq!(d.to_string(), "warn,shop=debug");
    /// ```
    pub fn set_target(&mut self, target: Target, level: Level) {
        match self.targets.iter_mut().find(|(t, _)| *t == target) {
            Some(entry) => entry.1 = level,
            None => self.targets.push((target, level)),
        }
    }

    /// The level these directives give `target` on their own: the longest matching
    /// target entry, else the default level, else `None` (no opinion).
    pub fn level_for(&self, target: &str) -> Option<Level> {
        self.targets
            .iter()
            .filter(|(t, _)| t.matches(target))
            .max_by_key(|(t, _)| t.as_str().len())
            .map(|(_, l)| *l)
            .or(self.default_level)
    }

    /// Whether these directives say nothing at all.
    pub fn is_empty(&self) -> bool {
        self.default_level.is_none() && self.targets.is_empty()
    }
}

impl FromStr for Directives {
    type Err = DirectiveError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.len() > MAX_DIRECTIVES_LEN {
            return Err(DirectiveError::TooLong(MAX_DIRECTIVES_LEN));
        }
        let mut out = Directives::default();
        let mut first_default: Option<&str> = None;
        for raw in s.split(',') {
            let directive = raw.trim();
            if directive.is_empty() {
                continue;
            }
            if directive.contains(['[', '{']) {
                return Err(DirectiveError::SpanFilter(directive.to_owned()));
            }
            match directive.split_once('=') {
                Some((target, level)) => {
                    let target = Target::new(target.trim()).map_err(|source| {
                        DirectiveError::InvalidTarget {
                            directive: directive.to_owned(),
                            source,
                        }
                    })?;
                    let level =
                        level
                            .trim()
                            .parse::<Level>()
                            .map_err(|ParseLevelError(level)| DirectiveError::InvalidLevel {
                                directive: directive.to_owned(),
                                level,
                            })?;
                    out.set_target(target, level);
                }
                None => match directive.parse::<Level>() {
                    Ok(level) => {
                        if let Some(first) = first_default {
                            return Err(DirectiveError::TwoDefaults {
                                first: first.to_owned(),
                                second: directive.to_owned(),
                            });
                        }
                        first_default = Some(directive);
                        out.default_level = Some(level);
                    }
                    Err(_) => {
                        let target = Target::new(directive).map_err(|source| {
                            DirectiveError::InvalidTarget {
                                directive: directive.to_owned(),
                                source,
                            }
                        })?;
                        out.set_target(target, Level::Trace);
                    }
                },
            }
            if out.targets.len() > MAX_TARGETS {
                return Err(DirectiveError::TooManyTargets);
            }
        }
        Ok(out)
    }
}

impl fmt::Display for Directives {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut sep = "";
        if let Some(level) = self.default_level {
            f.write_str(level.as_str())?;
            sep = ",";
        }
        for (target, level) in &self.targets {
            write!(f, "{sep}{target}={level}")?;
            sep = ",";
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rust_log_forms() {
        let d: Directives = "debug".parse().unwrap();
        assert_eq!(d, Directives::with_default(Level::Debug));
        let d: Directives = "off".parse().unwrap();
        assert_eq!(d.level_for("anything"), Some(Level::Off));
        let d: Directives = "my_crate".parse().unwrap();
        assert_eq!(d.level_for("my_crate::x"), Some(Level::Trace));
        assert_eq!(d.level_for("other"), None);
        let d: Directives = " info , a=warn , ,a=error,\n".parse().unwrap();
        assert_eq!(d.to_string(), "info,a=error");
        assert_eq!("".parse::<Directives>().unwrap(), Directives::default());
    }

    #[test]
    fn errors_name_the_directive() {
        let e = |s: &str| s.parse::<Directives>().unwrap_err().to_string();
        assert_eq!(
            e("info,shop=verbose"),
            r#"invalid level "verbose" in directive "shop=verbose""#
        );
        assert_eq!(
            e("info,=debug"),
            r#"invalid target in directive "=debug": empty target"#
        );
        assert!(e("info,a b=debug").contains(r#"directive "a b=debug""#));
        assert!(e("x[span{id=1}]=debug").starts_with("span filters are not supported"));
        assert_eq!(e("info,warn"), r#"two default levels: "info" and "warn""#);
        assert!(e("a=b=c").contains("invalid level \"b=c\""));
    }

    #[test]
    fn longest_prefix_wins() {
        let d: Directives = "warn,a=info,a::b=debug,a::b::c=error".parse().unwrap();
        assert_eq!(d.level_for("a::b::c::d"), Some(Level::Error));
        assert_eq!(d.level_for("a::b::x"), Some(Level::Debug));
        assert_eq!(d.level_for("a::bc"), Some(Level::Info));
        assert_eq!(d.level_for("ab"), Some(Level::Warn));
    }

    fn arb_target() -> impl Strategy<Value = Target> {
        "[a-z_][a-z0-9_]{0,6}(::[a-z_][a-z0-9_]{0,6}){0,3}".prop_map(|s| Target::new(&s).unwrap())
    }

    fn arb_level() -> impl Strategy<Value = Level> {
        prop::sample::select(Level::ALL.to_vec())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]

        #[test]
        fn display_round_trips(default in prop::option::of(arb_level()), targets in prop::collection::vec((arb_target(), arb_level()), 0..8)) {
            let mut d = Directives { default_level: default, targets: Vec::new() };
            for (t, l) in targets { d.set_target(t, l); }
            prop_assert_eq!(d.to_string().parse::<Directives>().unwrap(), d);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(50_000))]

        /// Any string: an error or a value whose canonical form is a fixed point; never a panic.
        #[test]
        fn any_string_parses_or_errors(s in "\\PC{0,40}|[a-z:=, \\[\\]{}\n\t]{0,30}") {
            if let Ok(d) = s.parse::<Directives>() {
                let canon = d.to_string();
                prop_assert_eq!(canon.parse::<Directives>().unwrap(), d);
            }
        }
    }
}
