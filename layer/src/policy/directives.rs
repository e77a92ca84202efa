//! The settings of one policy layer, and their `RUST_LOG`-style text form.

use std::fmt;
use std::str::FromStr;

use std::num::NonZeroU64;

use super::redact::{FieldName, MAX_REDACT_NAMES};
use super::sampling::{self, Burst, SamplingRule, Scope, MAX_SAMPLING_RULES};
use super::target::{Target, TargetError};
use crate::level::{Level, ParseLevelError};

/// The most per-target entries one layer may have.
pub const MAX_TARGETS: usize = 512;

/// What one policy layer says: a default level, per-target levels, and which of the
/// enabled events below `alwaysKeep` are written (sampling, a burst limit, a byte
/// budget).
///
/// The text form is the one `RUST_LOG` uses: comma-separated directives, each a bare
/// level (the default), `target=level`, or a bare `target` (meaning `trace` for it).
/// Settings beyond levels start with `@`:
///
/// | directive | meaning |
/// |---|---|
/// | `@always_keep=warn` | events at or above this level are never sampled or dropped for budget (default `warn`) |
/// | `@sample(http::access)=1/100` | keep one `http::access` event in 100 |
/// | `@sample(http::access)=1/100:request` | keep one request in 100, whole; hold the others' lines until an error |
/// | `@sample(shop)=1/10:request(handle)` | the same, with spans named `handle` marking a request |
/// | `@burst=100/s:1/10` | after 100 events in a second from one callsite, keep one in 10 |
/// | `@max_bytes_per_second=1048576` | write at most this many bytes per second below `alwaysKeep` |
/// | `@redact=card_token` | write the values of fields called `card_token` (or `*.card_token`, `*_card_token`) as `[redacted]` |
/// | `@redact=-cookie` | stop redacting a built-in name (the service's baseline only; see [`redact`](crate::policy::redact)) |
/// | `@redact_values=on` | also redact values shaped like secrets (bearer tokens, JWTs, private keys) in every string |
///
/// Whitespace around directives is ignored, as are empty directives (a trailing comma
/// or newline from a ConfigMap does no harm). When a target (or a sampling target) is
/// named twice the last one wins. [`Display`](fmt::Display) writes the canonical form,
/// which parses back to an equal value.
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
///
/// let d: Directives = "info,@sample(http::access)=1/100:request,@burst=50/s:1/10".parse().unwrap();
/// assert_eq!(d.sampling_for("http::access::get").unwrap().keep_one_in.get(), 100);
/// assert_eq!(d.burst.unwrap().per_second.get(), 50);
/// let err = "@sample(http)=1/0".parse::<Directives>().unwrap_err();
/// assert_eq!(err.to_string(), r#"invalid setting in directive "@sample(http)=1/0": keepOneIn 0 is out of range (1 to 1000000)"#);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Directives {
    /// The level of targets no entry matches; `None` leaves them to lower layers.
    pub default_level: Option<Level>,
    /// Per-target levels, at most one per target, in the order first given.
    pub targets: Vec<(Target, Level)>,
    /// Events at or above this level are never sampled out or dropped for budget;
    /// `None` leaves it to lower layers (default `warn`).
    pub always_keep: Option<Level>,
    /// Sampling rules, at most one per target, in the order first given.
    pub sampling: Vec<SamplingRule>,
    /// A per-callsite burst limit.
    pub burst: Option<Burst>,
    /// A budget on the bytes written per second by events below `alwaysKeep`.
    pub max_bytes_per_second: Option<NonZeroU64>,
    /// Field names redacted besides the built-in ones (see [`redact`](crate::policy::redact)).
    pub redact: Vec<FieldName>,
    /// Built-in names no longer redacted: only the service's own baseline may say this;
    /// [`PolicyLayer::new`](crate::PolicyLayer::new) refuses it for any other layer.
    pub unredact: Vec<FieldName>,
    /// Values shaped like secrets are redacted in every string, the message included.
    /// Any active layer turns it on; none can turn it off for the others.
    pub redact_values: bool,
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
    /// An `@` setting that is unknown or out of range.
    #[error("invalid setting in directive {directive:?}: {reason}")]
    InvalidSetting {
        /// The whole directive.
        directive: String,
        /// What is wrong.
        reason: String,
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
            ..Directives::default()
        }
    }

    /// Adds a sampling rule, replacing an earlier rule for the same target.
    pub fn set_sampling(&mut self, rule: SamplingRule) {
        match self.sampling.iter_mut().find(|r| r.target == rule.target) {
            Some(slot) => *slot = rule,
            None => self.sampling.push(rule),
        }
    }

    /// The sampling rule these directives give `target` on their own (longest match).
    pub fn sampling_for(&self, target: &str) -> Option<&SamplingRule> {
        self.sampling
            .iter()
            .filter(|r| r.target.matches(target))
            .max_by_key(|r| r.target.as_str().len())
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
        *self == Directives::default()
    }

    /// Parses one `@name=value` directive into `self`.
    fn parse_setting(&mut self, directive: &str) -> Result<(), DirectiveError> {
        let bad = |reason: String| DirectiveError::InvalidSetting {
            directive: directive.to_owned(),
            reason,
        };
        let (name, value) = directive[1..]
            .split_once('=')
            .ok_or_else(|| bad("expected @name=value".into()))?;
        let (name, value) = (name.trim(), value.trim());
        let int = |field: &str, s: &str| -> Result<u64, DirectiveError> {
            s.trim()
                .parse::<u64>()
                .map_err(|_| bad(format!("{field} {s:?} is not a whole number")))
        };
        match name {
            "always_keep" => {
                let level = value.parse::<Level>().map_err(|e| bad(e.to_string()))?;
                if level == Level::Off {
                    return Err(bad("always_keep cannot be off: errors must always be kept".into()));
                }
                self.always_keep = Some(level);
            }
            "burst" => {
                let (rate, then) = value
                    .split_once(':')
                    .ok_or_else(|| bad("expected @burst=N/s:1/M".into()))?;
                let rate = rate
                    .strip_suffix("/s")
                    .ok_or_else(|| bad("expected @burst=N/s:1/M".into()))?;
                let then = then
                    .strip_prefix("1/")
                    .ok_or_else(|| bad("expected @burst=N/s:1/M".into()))?;
                self.burst = Some(Burst {
                    per_second: sampling::per_second(int("perSecond", rate)?).map_err(|e| bad(e.to_string()))?,
                    then_one_in: sampling::one_in("thenOneIn", int("thenOneIn", then)?)
                        .map_err(|e| bad(e.to_string()))?,
                });
            }
            "max_bytes_per_second" => {
                self.max_bytes_per_second = Some(
                    sampling::bytes_per_second(int("maxBytesPerSecond", value)?).map_err(|e| bad(e.to_string()))?,
                );
            }
            "redact" => {
                let (list, name) = match value.strip_prefix('-') {
                    Some(name) => (&mut self.unredact, name),
                    None => (&mut self.redact, value),
                };
                let name = FieldName::new(name).map_err(|e| bad(e.to_string()))?;
                if !list.contains(&name) {
                    if list.len() >= MAX_REDACT_NAMES {
                        return Err(bad(format!(
                            "too many redacted names (at most {MAX_REDACT_NAMES})"
                        )));
                    }
                    list.push(name);
                }
            }
            "redact_values" => {
                self.redact_values = match value {
                    "on" | "true" => true,
                    "off" | "false" => false,
                    other => {
                        return Err(bad(format!(
                            "redact_values is on or off, not {other:?}"
                        )))
                    }
                };
            }
            _ if name.starts_with("sample(") && name.ends_with(')') => {
                let target = Target::new(&name["sample(".len()..name.len() - 1]).map_err(|e| bad(e.to_string()))?;
                let (rate, scope) = match value.split_once(':') {
                    Some((rate, scope)) => (rate, Some(scope)),
                    None => (value, None),
                };
                let n = rate
                    .strip_prefix("1/")
                    .ok_or_else(|| bad("expected @sample(target)=1/N".into()))?;
                let keep_one_in = sampling::one_in("keepOneIn", int("keepOneIn", n)?).map_err(|e| bad(e.to_string()))?;
                let scope = match scope {
                    None | Some("event") => Scope::Event,
                    Some("request") => Scope::Request { span: None },
                    Some(s) if s.starts_with("request(") && s.ends_with(')') => Scope::Request {
                        span: Some(sampling::span_name(&s["request(".len()..s.len() - 1]).map_err(|e| bad(e.to_string()))?),
                    },
                    Some(other) => {
                        return Err(bad(format!(
                            "unknown scope {other:?} (expected event, request or request(span))"
                        )))
                    }
                };
                if !self.sampling.iter().any(|r| r.target == target) && self.sampling.len() >= MAX_SAMPLING_RULES {
                    return Err(bad(format!("too many sampling rules (at most {MAX_SAMPLING_RULES})")));
                }
                self.set_sampling(SamplingRule {
                    target,
                    keep_one_in,
                    scope,
                });
            }
            _ => {
                return Err(bad(format!(
                    "unknown setting {name:?} (expected always_keep, sample(target), burst, max_bytes_per_second, redact or redact_values)"
                )))
            }
        }
        Ok(())
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
            if directive.starts_with('@') {
                out.parse_setting(directive)?;
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
        if let Some(level) = self.always_keep {
            write!(f, "{sep}@always_keep={level}")?;
            sep = ",";
        }
        for rule in &self.sampling {
            write!(f, "{sep}{rule}")?;
            sep = ",";
        }
        if let Some(burst) = self.burst {
            write!(f, "{sep}{burst}")?;
            sep = ",";
        }
        if let Some(bytes) = self.max_bytes_per_second {
            write!(f, "{sep}@max_bytes_per_second={bytes}")?;
            sep = ",";
        }
        for name in &self.redact {
            write!(f, "{sep}@redact={name}")?;
            sep = ",";
        }
        for name in &self.unredact {
            write!(f, "{sep}@redact=-{name}")?;
            sep = ",";
        }
        if self.redact_values {
            write!(f, "{sep}@redact_values=on")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::sampling::MAX_ONE_IN;
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

    #[test]
    fn settings_errors_name_the_rule() {
        let e = |s: &str| s.parse::<Directives>().unwrap_err().to_string();
        assert_eq!(
            e("@sample(http)=1/0"),
            r#"invalid setting in directive "@sample(http)=1/0": keepOneIn 0 is out of range (1 to 1000000)"#
        );
        assert_eq!(
            e("@sample(http)=1/-5"),
            r#"invalid setting in directive "@sample(http)=1/-5": keepOneIn "-5" is not a whole number"#
        );
        assert_eq!(
            e("@sample(http)=1/99999999999"),
            r#"invalid setting in directive "@sample(http)=1/99999999999": keepOneIn 99999999999 is out of range (1 to 1000000)"#
        );
        assert_eq!(
            e("@sample(http)=1/10:session"),
            r#"invalid setting in directive "@sample(http)=1/10:session": unknown scope "session" (expected event, request or request(span))"#
        );
        assert_eq!(
            e("@burst=0/s:1/10"),
            r#"invalid setting in directive "@burst=0/s:1/10": perSecond 0 is out of range (1 to 10000000)"#
        );
        assert!(e("@burst=10:1/10").contains("expected @burst=N/s:1/M"));
        assert_eq!(
            e("@max_bytes_per_second=10"),
            r#"invalid setting in directive "@max_bytes_per_second=10": maxBytesPerSecond 10 is out of range (1024 to 1099511627776)"#
        );
        assert!(e("@always_keep=off").contains("cannot be off"));
        assert!(e("@colour=red").contains("unknown setting \"colour\""));
        assert!(e("@sample(a b)=1/2").contains("contains ' '"));
        assert!(e("@sample(a)=1/2:request(a b)").contains("span name"));
    }

    #[test]
    fn settings_parse() {
        let d: Directives = "info, @always_keep=error ,@sample(a)=1/5,@sample(a::b)=1/7:request(req),@burst=3/s:1/4,@max_bytes_per_second=2048".parse().unwrap();
        assert_eq!(d.always_keep, Some(Level::Error));
        assert_eq!(d.sampling_for("a::c").unwrap().keep_one_in.get(), 5);
        assert_eq!(
            d.sampling_for("a::b::c").unwrap().scope,
            Scope::Request {
                span: Some("req".into())
            }
        );
        assert!(d.sampling_for("ab").is_none());
        assert_eq!(d.burst.unwrap().then_one_in.get(), 4);
        assert_eq!(d.max_bytes_per_second.unwrap().get(), 2048);
        assert_eq!(d.to_string(), "info,@always_keep=error,@sample(a)=1/5,@sample(a::b)=1/7:request(req),@burst=3/s:1/4,@max_bytes_per_second=2048");
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
        fn display_round_trips(
            default in prop::option::of(arb_level()),
            targets in prop::collection::vec((arb_target(), arb_level()), 0..8),
            always_keep in prop::option::of(1usize..6),
            rules in prop::collection::vec((arb_target(), 1u64..=MAX_ONE_IN as u64, 0u8..3, "[a-z_]{1,8}"), 0..4),
            burst in prop::option::of((1u64..=10_000_000, 1u64..=1_000_000)),
            bytes in prop::option::of(1024u64..=1 << 40),
        ) {
            let mut d = Directives { default_level: default, ..Directives::default() };
            for (t, l) in targets { d.set_target(t, l); }
            d.always_keep = always_keep.map(|i| Level::ALL[i]);
            for (t, n, scope, span) in rules {
                let scope = match scope { 0 => Scope::Event, 1 => Scope::Request { span: None }, _ => Scope::Request { span: Some(span) } };
                d.set_sampling(SamplingRule::new(t.as_str(), n, scope).unwrap());
            }
            d.burst = burst.map(|(p, t)| Burst { per_second: sampling::per_second(p).unwrap(), then_one_in: sampling::one_in("thenOneIn", t).unwrap() });
            d.max_bytes_per_second = bytes.map(|b| sampling::bytes_per_second(b).unwrap());
            prop_assert_eq!(d.to_string().parse::<Directives>().unwrap(), d);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(50_000))]

        /// Any string: an error or a value whose canonical form is a fixed point; never a panic.
        #[test]
        fn any_string_parses_or_errors(s in "\\PC{0,40}|[a-z:=, \\[\\]{}\n\t]{0,30}|(@(sample\\([a-z:]{0,4}\\)|burst|always_keep|max_bytes_per_second|x)=[0-9a-z/:()-]{0,12},?){1,3}") {
            if let Ok(d) = s.parse::<Directives>() {
                let canon = d.to_string();
                prop_assert_eq!(canon.parse::<Directives>().unwrap(), d);
            }
        }
    }
}
