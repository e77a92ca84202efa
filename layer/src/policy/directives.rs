//! The settings of one policy layer, and their `RUST_LOG`-style text form.

use std::fmt;
use std::str::FromStr;

use std::num::NonZeroU64;

use super::redact::{FieldName, MAX_REDACT_NAMES};
use super::sampling::{self, Burst, SamplingRule, Scope, MAX_SAMPLING_RULES};
use super::target::{Target, TargetError};
use super::when::{has_room, set_entry, When, WhenSampling, WhenTarget, MAX_WHEN_TARGETS};
use crate::level::Level;

/// The most per-target entries one layer may have.
pub const MAX_TARGETS: usize = 512;

/// What one policy layer says: a default level, per-target levels, and which of the
/// enabled events below `alwaysKeep` are written (sampling, a burst limit, a byte
/// budget).
///
/// The text form is the one `RUST_LOG` uses, read as `EnvFilter` 0.3 reads it:
/// comma-separated directives, each a bare level (the default; when there are several,
/// the last wins), `target=level`, or a bare `target` (meaning `trace` for it). A level
/// is a name in any case or a number, `0` (off) to `5` (trace); an empty level (`a=`)
/// is `trace`. A target matches itself and the targets below it at a `::` boundary
/// (see [`Target`]). Settings beyond levels start with `@`:
///
/// | directive | meaning |
/// |---|---|
/// | `@always_keep=warn` | events at or above this level are never sampled or dropped for budget (default `warn`) |
/// | `@sample(http::access)=1/100` | keep one `http::access` event in 100 |
/// | `@sample(http::access)=1/100:request` | keep one request in 100, whole; hold the others' lines until an error |
/// | `@sample(shop)=1/10:request(handle)` | the same, with spans named `handle` marking a request |
/// | `@sample(shop)=1/10@when(user_id=42)` | keep one `shop` event in 10 in requests that recorded `user_id=42` (see [`WhenSampling`]) |
/// | `@burst=100/s:1/10` | after 100 events in a second from one callsite, keep one in 10 |
/// | `@max_bytes_per_second=1048576` | write at most this many bytes per second below `alwaysKeep` |
/// | `@redact=card_token` | write the values of fields called `card_token` (or `*.card_token`, `*_card_token`) as `[redacted]` |
/// | `@redact=-cookie` | stop redacting a built-in name (the service's baseline only; see [`redact`](crate::policy::redact)) |
/// | `@redact_values=on` | also redact values shaped like secrets (bearer tokens, JWTs, private keys) in every string |
/// | `@record(shop::payment)=debug` | keep in memory the `shop::payment` events down to `debug` that the levels do not write, for a raise to replay (see [`crate::recorder`]) |
///
/// A target entry may apply only within requests: `shop::payment=debug@when(user_id=42|43)`
/// sets `shop::payment` to `debug` for events in a span (or below one) that recorded the
/// field `user_id` as `42` or `43` (see [`When`]); everywhere else it has no effect.
///
/// Whitespace around directives is ignored, as are empty directives (a trailing comma
/// or newline from a ConfigMap does no harm). When a target (or a sampling target) is
/// named twice the last one wins. Span filters (`target[span{field=value}]=level`)
/// are refused. [`FromStr`] refuses a string with any invalid entry and names every one;
/// [`Directives::parse_lossy`] skips them. [`Display`](fmt::Display) writes the canonical form,
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
/// let d: Directives = "info,warn,shop=4,db=".parse().unwrap();
/// assert_eq!(d.to_string(), "warn,shop=debug,db=trace");
///
/// let err = "info,shop=verbose".parse::<Directives>().unwrap_err();
/// assert_eq!(err.to_string(), r#"invalid level "verbose" in directive "shop=verbose" (expected off, error, warn, info, debug, trace (any case), 0-5, or empty for trace)"#);
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
    /// Target levels that apply only under a condition (`target=level@when(field=v|w)`),
    /// at most one per target and condition, in the order first given.
    pub when: Vec<WhenTarget>,
    /// Event sampling that applies only under a condition
    /// (`@sample(target)=1/N@when(field=v|w)`), at most one per target and condition.
    pub when_sampling: Vec<WhenSampling>,
    /// Recording rules (`@record(target)=level`): events of the target down to the
    /// level that the levels in force do not write are kept in memory instead (see
    /// [`crate::recorder`]). At most one per target ([`MAX_RECORD_RULES`] in all), in the
    /// order first given; never `off`.
    pub record: Vec<(Target, Level)>,
}

/// The most recording rules one layer may have.
pub const MAX_RECORD_RULES: usize = 64;

/// The most characters of an entry an error message quotes.
pub const MAX_QUOTED_LEN: usize = 80;

/// The most errors [`DirectiveError::Several`] lists one by one.
pub const MAX_LISTED_ERRORS: usize = 10;

/// The levels a directive accepts, as error messages list them.
pub const VALID_LEVELS: &str =
    "off, error, warn, info, debug, trace (any case), 0-5, or empty for trace";

/// A directive string that could not be parsed; names the offending directive.
///
/// Messages quote at most 80 characters of an entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DirectiveError {
    /// `target=level` with a level that is not one.
    #[error("invalid level {level:?} in directive {directive:?} (expected {VALID_LEVELS})")]
    InvalidLevel {
        /// The directive (at most 80 characters of it).
        directive: String,
        /// The part that should have been a level (at most 80 characters).
        level: String,
    },
    /// The target part is not a valid target.
    #[error("invalid target in directive {directive:?}: {source}")]
    InvalidTarget {
        /// The directive (at most 80 characters of it).
        directive: String,
        /// What is wrong with the target.
        source: TargetError,
    },
    /// The directive starts with a character no target or level starts with (the rule
    /// is EnvFilter's; quotes are part of the value, never removed).
    #[error("directive {directive:?} starts with {ch:?}: a directive starts with a letter, a digit, '-', ':' or '_'")]
    BadStart {
        /// The directive (at most 80 characters of it).
        directive: String,
        /// Its first character.
        ch: char,
    },
    /// Span and field filters (`target[span{field=value}]=level`) are not supported.
    #[error("span filters are not supported in directive {0:?}: they make every disabled event in the program costly; use a target instead")]
    SpanFilter(String),
    /// An `@` setting that is unknown or out of range.
    #[error("invalid setting in directive {directive:?}: {reason}")]
    InvalidSetting {
        /// The directive (at most 80 characters of it).
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
    /// More than one entry is invalid: every one of them, in order.
    #[error("{}", several(.0))]
    Several(Vec<DirectiveError>),
}

fn several(errors: &[DirectiveError]) -> String {
    let mut out = format!("{} invalid directives: ", errors.len());
    for (i, e) in errors.iter().take(MAX_LISTED_ERRORS).enumerate() {
        if i > 0 {
            out.push_str("; ");
        }
        out.push_str(&e.to_string());
    }
    if errors.len() > MAX_LISTED_ERRORS {
        out.push_str(&format!("; and {} more", errors.len() - MAX_LISTED_ERRORS));
    }
    out
}

impl DirectiveError {
    /// The single errors this one stands for: itself, or each of [`DirectiveError::Several`].
    pub fn entries(&self) -> &[DirectiveError] {
        match self {
            DirectiveError::Several(errors) => errors,
            one => std::slice::from_ref(one),
        }
    }
}

/// At most 80 characters of `s`, with `...` when cut.
pub(crate) fn quoted(s: &str) -> String {
    match s.char_indices().nth(MAX_QUOTED_LEN) {
        Some((cut, _)) => format!("{}...", &s[..cut]),
        None => s.to_owned(),
    }
}

/// A level as EnvFilter 0.3 reads one: a number 0 (off) to 5 (trace), which Rust's
/// integer parser reads (`+3`, `003`), or a level name in any case. `warning` is not one.
pub(crate) fn parse_level(s: &str) -> Option<Level> {
    // `Level::ALL` is in the order of EnvFilter's numbers: off 0 ... trace 5.
    if let Some(level) = s.parse::<usize>().ok().and_then(|n| Level::ALL.get(n)) {
        return Some(*level);
    }
    Level::ALL
        .into_iter()
        .find(|l| s.eq_ignore_ascii_case(l.as_str()))
}

/// Sets `target`'s level in `list`, replacing an earlier entry for it.
fn set_level_entry(list: &mut Vec<(Target, Level)>, target: Target, level: Level) {
    match list.iter_mut().find(|(t, _)| *t == target) {
        Some(entry) => entry.1 = level,
        None => list.push((target, level)),
    }
}

/// The level of the longest entry of `list` that matches `target`.
fn longest_match(list: &[(Target, Level)], target: &str) -> Option<Level> {
    list.iter()
        .filter(|(t, _)| t.matches(target))
        .max_by_key(|(t, _)| t.as_str().len())
        .map(|(_, l)| *l)
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
        set_level_entry(&mut self.targets, target, level);
    }

    /// The level these directives give `target` on their own: the longest matching
    /// target entry, else the default level, else `None` (no opinion).
    pub fn level_for(&self, target: &str) -> Option<Level> {
        longest_match(&self.targets, target).or(self.default_level)
    }

    /// Records `target`'s events down to `level` that are not written, replacing an
    /// earlier rule for it.
    ///
    /// # Examples
    ///
    /// ```
    /// use logpolicy::{Directives, Level, Target};
    /// let mut d = Directives::with_default(Level::Info);
    /// d.set_record(Target::new("shop::payment").unwrap(), Level::Debug);
    /// assert_eq!(d.to_string(), "info,@record(shop::payment)=debug");
    /// assert_eq!(d.record_level_for("shop::payment::card"), Some(Level::Debug));
    /// assert_eq!(d.record_level_for("shop::cart"), None);
    /// ```
    pub fn set_record(&mut self, target: Target, level: Level) {
        set_level_entry(&mut self.record, target, level);
    }

    /// The level down to which these directives record `target` (longest match), if a
    /// rule names it.
    pub fn record_level_for(&self, target: &str) -> Option<Level> {
        longest_match(&self.record, target)
    }

    /// Sets the level of `target` under `when`, replacing an earlier entry for both.
    pub fn set_when_target(&mut self, entry: WhenTarget) {
        set_entry(&mut self.when, entry);
    }

    /// Sets the sampling of `target` under `when`, replacing an earlier rule for both.
    pub fn set_when_sampling(&mut self, rule: WhenSampling) {
        set_entry(&mut self.when_sampling, rule);
    }

    /// Whether these directives say nothing at all.
    pub fn is_empty(&self) -> bool {
        *self == Directives::default()
    }

    /// Parses one `@name=value` directive into `self`.
    fn parse_setting(&mut self, directive: &str) -> Result<(), DirectiveError> {
        let bad = |reason: String| DirectiveError::InvalidSetting {
            directive: quoted(directive),
            reason,
        };
        let (name, value) = directive[1..]
            .split_once('=')
            .ok_or_else(|| bad("expected @name=value".into()))?;
        let (name, value) = (name.trim(), value.trim());
        // `@sample(target)=1/N@when(field=value)`: the rule applies under a condition.
        let (value, when) = match value.find("@when") {
            Some(at) if name.starts_with("sample(") => {
                let when = parse_condition(&value[at..], "@sample(target)=1/N").map_err(bad)?;
                (value[..at].trim(), Some(when))
            }
            Some(_) => {
                return Err(bad(
                    "@when applies to target levels (target=level@when(...)) and sampling (@sample(target)=1/N@when(...)) only".into(),
                ))
            }
            None => (value, None),
        };
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
            _ if name.starts_with("record(") && name.ends_with(')') => {
                let target = Target::new(&name["record(".len()..name.len() - 1]).map_err(|e| bad(e.to_string()))?;
                let level = parse_level(value).ok_or_else(|| {
                    bad(format!("invalid level {:?} (expected {VALID_LEVELS})", quoted(value)))
                })?;
                if level == Level::Off {
                    return Err(bad("a recording rule records down to a level: off records nothing".into()));
                }
                if !self.record.iter().any(|(t, _)| *t == target) && self.record.len() >= MAX_RECORD_RULES {
                    return Err(bad(format!("too many recording rules (at most {MAX_RECORD_RULES})")));
                }
                self.set_record(target, level);
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
                if let Some(when) = when {
                    if scope != Scope::Event {
                        return Err(bad(
                            "sampling is per event only under when: a request that satisfies a condition is always kept whole".into(),
                        ));
                    }
                    let rule = WhenSampling {
                        when,
                        target,
                        keep_one_in,
                    };
                    if !has_room(&self.when_sampling, &rule) {
                        return Err(bad(format!("too many @sample entries with @when (at most {MAX_WHEN_TARGETS})")));
                    }
                    self.set_when_sampling(rule);
                    return Ok(());
                }
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
                    "unknown setting {name:?} (expected always_keep, sample(target), record(target), burst, max_bytes_per_second, redact or redact_values)"
                )))
            }
        }
        Ok(())
    }
}

impl Directives {
    /// Parses what is valid and reports the rest: every invalid entry is skipped (as
    /// `EnvFilter::from_default_env` skips it) and returned as an error, in order. This
    /// is what [`crate::init`] does with the environment; [`FromStr`] refuses the whole
    /// string instead.
    ///
    /// # Examples
    ///
    /// ```
    /// use logpolicy::{Directives, Level};
    /// let (d, errors) = Directives::parse_lossy("info,*=debug,shop=verbose,db=debug");
    /// assert_eq!(d.to_string(), "info,db=debug");
    /// assert_eq!(errors.len(), 2);
    /// assert!(errors[1].to_string().starts_with(r#"invalid level "verbose" in directive "shop=verbose""#));
    /// ```
    pub fn parse_lossy(s: &str) -> (Directives, Vec<DirectiveError>) {
        let mut out = Directives::default();
        let mut errors = Vec::new();
        if s.len() > MAX_DIRECTIVES_LEN {
            errors.push(DirectiveError::TooLong(MAX_DIRECTIVES_LEN));
            return (out, errors);
        }
        let mut too_many = false;
        for raw in s.split(',') {
            let directive = raw.trim();
            if directive.is_empty() {
                continue;
            }
            let result = if directive.starts_with('@') {
                out.parse_setting(directive)
            } else if let Some(at) = directive.find("@when") {
                parse_when_directive(directive, at).and_then(|entry| {
                    if !has_room(&out.when, &entry) {
                        return Err(DirectiveError::InvalidSetting {
                            directive: quoted(directive),
                            reason: format!("too many @when entries (at most {MAX_WHEN_TARGETS})"),
                        });
                    }
                    out.set_when_target(entry);
                    Ok(())
                })
            } else {
                parse_level_directive(directive).map(|(target, level)| match target {
                    None => out.default_level = Some(level),
                    Some(target)
                        if out.targets.len() >= MAX_TARGETS
                            && !out.targets.iter().any(|(t, _)| *t == target) =>
                    {
                        too_many = true;
                    }
                    Some(target) => out.set_target(target, level),
                })
            };
            if let Err(e) = result {
                errors.push(e);
            }
        }
        if too_many {
            errors.push(DirectiveError::TooManyTargets);
        }
        (out, errors)
    }
}

/// `@when(field=value|value...)` at the end of an entry whose form before it is `form`
/// (for the error).
fn parse_condition(text: &str, form: &str) -> Result<When, String> {
    let condition = text
        .strip_prefix("@when(")
        .and_then(|c| c.strip_suffix(')'))
        .ok_or_else(|| format!("expected {form}@when(field=value|value...)"))?;
    condition
        .parse()
        .map_err(|e: super::when::WhenError| e.to_string())
}

/// `target=level@when(field=value|value...)`, `at` being where `@when` starts.
fn parse_when_directive(directive: &str, at: usize) -> Result<WhenTarget, DirectiveError> {
    let bad = |reason: String| DirectiveError::InvalidSetting {
        directive: quoted(directive),
        reason,
    };
    let when = parse_condition(&directive[at..], "target=level").map_err(bad)?;
    match parse_level_directive(&directive[..at])? {
        (Some(target), level) => Ok(WhenTarget {
            when,
            target,
            level,
        }),
        (None, _) => Err(bad(
            "a @when entry names a target: target=level@when(field=value)".into(),
        )),
    }
}

/// One level directive, read as EnvFilter 0.3 reads it: `target=level`, a bare level,
/// or a bare target (`trace` for it). `None` for the target is a bare level.
fn parse_level_directive(directive: &str) -> Result<(Option<Target>, Level), DirectiveError> {
    let first = directive.chars().next().unwrap_or(' ');
    if first == '[' {
        return Err(DirectiveError::SpanFilter(quoted(directive)));
    }
    if !(first.is_alphanumeric() || matches!(first, '-' | ':' | '_')) {
        return Err(DirectiveError::BadStart {
            directive: quoted(directive),
            ch: first,
        });
    }
    // EnvFilter reads up to the first '=' (a target, then a level) or '[' (a span).
    match directive.find(['=', '[']) {
        Some(i) if directive.as_bytes()[i] == b'[' => {
            Err(DirectiveError::SpanFilter(quoted(directive)))
        }
        Some(i) => {
            let (target, level) = (&directive[..i], &directive[i + 1..]);
            let target = Target::new(target).map_err(|source| DirectiveError::InvalidTarget {
                directive: quoted(directive),
                source,
            })?;
            let level = match level {
                "" => Level::Trace,
                level => parse_level(level).ok_or_else(|| DirectiveError::InvalidLevel {
                    directive: quoted(directive),
                    level: quoted(level),
                })?,
            };
            Ok((Some(target), level))
        }
        None => match parse_level(directive) {
            Some(level) => Ok((None, level)),
            None => Target::new(directive)
                .map(|t| (Some(t), Level::Trace))
                .map_err(|source| DirectiveError::InvalidTarget {
                    directive: quoted(directive),
                    source,
                }),
        },
    }
}

impl FromStr for Directives {
    type Err = DirectiveError;

    /// Parses the whole string or refuses it, naming every invalid entry.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (out, mut errors) = Directives::parse_lossy(s);
        match errors.len() {
            0 => Ok(out),
            1 => Err(errors.remove(0)),
            _ => Err(DirectiveError::Several(errors)),
        }
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
        for entry in &self.when {
            write!(f, "{sep}{entry}")?;
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
        for rule in &self.when_sampling {
            write!(f, "{sep}{rule}")?;
            sep = ",";
        }
        for (target, level) in &self.record {
            write!(f, "{sep}@record({target})={level}")?;
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
        assert_eq!(d.default_level, None);
        assert_eq!(d.level_for("my_crate::x"), Some(Level::Trace));
        assert_eq!(d.level_for("other"), None);
        let d: Directives = " info , a=warn , ,a=error,\n".parse().unwrap();
        assert_eq!(d.to_string(), "info,a=error");
        assert_eq!("".parse::<Directives>().unwrap(), Directives::default());
    }

    #[test]
    fn env_filter_forms() {
        let p = |s: &str| s.parse::<Directives>().unwrap().to_string();
        // Several bare levels: the last wins (scripts append `,debug`).
        assert_eq!(p("info,warn"), "warn");
        assert_eq!(p("off,info"), "info");
        assert_eq!(p("warn, info"), "info");
        assert_eq!(p("error,trace,warn"), "warn");
        // Numbers are levels, as Rust's integer parser reads them.
        assert_eq!(
            p("a=0,b=1,c=2,d=3,e=4,f=5,g=+3,h=003"),
            "a=off,b=error,c=warn,d=info,e=debug,f=trace,g=info,h=info"
        );
        assert_eq!(p("4"), "debug");
        assert_eq!(p("6"), "6=trace");
        // An empty level is trace; case does not matter; `warning` is a target.
        assert_eq!(p("a=,B=INFO"), "a=trace,B=info");
        assert_eq!(p("warning"), "warning=trace");
        // Braces are part of a target; only `[` starts a span filter.
        assert_eq!(p("a{b}=info"), "a{b}=info");
        assert_eq!(
            p("a{b}=info").parse::<Directives>().unwrap().to_string(),
            "a{b}=info"
        );
    }

    #[test]
    fn errors_name_the_directive() {
        let e = |s: &str| s.parse::<Directives>().unwrap_err().to_string();
        assert_eq!(
            e("info,shop=verbose"),
            format!(
                r#"invalid level "verbose" in directive "shop=verbose" (expected {VALID_LEVELS})"#
            )
        );
        assert!(e("a=warning").contains("0-5"));
        assert_eq!(
            e("info,=debug"),
            r#"directive "=debug" starts with '=': a directive starts with a letter, a digit, '-', ':' or '_'"#
        );
        for bad in ["*=info", "'info'", "\"info\"", "!", "+3", ".a=info"] {
            assert!(
                matches!(
                    bad.parse::<Directives>(),
                    Err(DirectiveError::BadStart { .. })
                ),
                "{bad}"
            );
        }
        assert!(e("info,a b=debug").contains(r#"directive "a b=debug""#));
        assert!(e("x[span{id=1}]=debug").starts_with("span filters are not supported"));
        assert!(e("[span]").starts_with("span filters are not supported"));
        assert!(e("a=b=c").contains("invalid level \"b=c\""));
        // Long entries are quoted in part.
        let long = format!("{}=debug", "x".repeat(10_000));
        assert!(e(&long).len() < 300, "{}", e(&long));
        let long = format!("a={}", "x".repeat(10_000));
        assert!(e(&long).len() < 400, "{}", e(&long));
    }

    #[test]
    fn every_bad_entry_is_reported() {
        let err = "*=info,info,a=verbose,b c"
            .parse::<Directives>()
            .unwrap_err();
        assert_eq!(err.entries().len(), 3);
        assert!(
            err.to_string()
                .starts_with("3 invalid directives: directive \"*=info\" starts with '*'"),
            "{err}"
        );
        let many = (0..25)
            .map(|i| format!("t{i}=bad"))
            .collect::<Vec<_>>()
            .join(",");
        let err = many.parse::<Directives>().unwrap_err();
        assert_eq!(err.entries().len(), 25);
        assert!(err.to_string().ends_with("; and 15 more"), "{err}");
        let (d, errors) = Directives::parse_lossy("*=info,info,a=verbose,b c,db=debug");
        assert_eq!(d.to_string(), "info,db=debug");
        assert_eq!(errors.len(), 3);
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
