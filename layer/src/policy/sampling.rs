//! Sampling rules, burst limits and byte budgets: the parts of a layer that decide which
//! of the enabled events below `alwaysKeep` are written.

use std::fmt;
use std::num::{NonZeroU32, NonZeroU64};

use super::target::{Target, TargetError};

/// The largest `keepOneIn` and `thenOneIn` accepted.
pub const MAX_ONE_IN: u32 = 1_000_000;
/// The largest burst `perSecond` accepted.
pub const MAX_PER_SECOND: u32 = 10_000_000;
/// The smallest and largest `maxBytesPerSecond` accepted (1 KiB, 1 TiB).
pub const BYTES_PER_SECOND_RANGE: (u64, u64) = (1024, 1 << 40);
/// The most sampling rules one layer may have.
pub const MAX_SAMPLING_RULES: usize = 64;
/// The longest span name a request rule may give.
pub const MAX_SPAN_NAME_LEN: usize = 128;

/// Where a sampling decision is made.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Every event is decided on its own: one in N is kept.
    Event,
    /// The decision is made once per request, when its span opens, and every event
    /// inside follows it; lines of a request that was not kept are held and written
    /// before the first event at `alwaysKeep` or above in it.
    Request {
        /// The name of the span that marks a request; `None` for the outermost span.
        span: Option<String>,
    },
}

/// Keep one event (or request) in `keep_one_in` of those whose target the rule governs.
///
/// # Examples
///
/// ```
/// use logpolicy::policy::{SamplingRule, Scope};
/// let rule = SamplingRule::new("http::access", 100, Scope::Request { span: None }).unwrap();
/// assert_eq!(rule.to_string(), "@sample(http::access)=1/100:request");
/// assert!(SamplingRule::new("http", 0, Scope::Event).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SamplingRule {
    /// The target prefix the rule governs (`::`-boundary match, longest wins).
    pub target: Target,
    /// One in this many is kept (1 keeps everything: a way to turn sampling off for a
    /// target in a higher-priority layer).
    pub keep_one_in: NonZeroU32,
    /// Per event or per request.
    pub scope: Scope,
}

/// After `per_second` events in one second from one callsite, keep one in `then_one_in`
/// for the rest of that second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Burst {
    /// Events per second per callsite written before the limit applies.
    pub per_second: NonZeroU32,
    /// Beyond it, one in this many is kept.
    pub then_one_in: NonZeroU32,
}

/// A sampling, burst or budget setting out of its range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} {value} is out of range ({range})")]
pub struct RangeError {
    /// Which setting.
    pub field: &'static str,
    /// The value given.
    pub value: String,
    /// What is accepted.
    pub range: String,
}

pub(crate) fn one_in(field: &'static str, v: u64) -> Result<NonZeroU32, RangeError> {
    u32::try_from(v)
        .ok()
        .filter(|v| (1..=MAX_ONE_IN).contains(v))
        .and_then(NonZeroU32::new)
        .ok_or_else(|| RangeError {
            field,
            value: v.to_string(),
            range: format!("1 to {MAX_ONE_IN}"),
        })
}

pub(crate) fn per_second(v: u64) -> Result<NonZeroU32, RangeError> {
    u32::try_from(v)
        .ok()
        .filter(|v| (1..=MAX_PER_SECOND).contains(v))
        .and_then(NonZeroU32::new)
        .ok_or_else(|| RangeError {
            field: "perSecond",
            value: v.to_string(),
            range: format!("1 to {MAX_PER_SECOND}"),
        })
}

pub(crate) fn bytes_per_second(v: u64) -> Result<NonZeroU64, RangeError> {
    let (lo, hi) = BYTES_PER_SECOND_RANGE;
    NonZeroU64::new(v)
        .filter(|v| (lo..=hi).contains(&v.get()))
        .ok_or_else(|| RangeError {
            field: "maxBytesPerSecond",
            value: v.to_string(),
            range: format!("{lo} to {hi}"),
        })
}

/// A span name a request rule cannot take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpanNameError {
    /// Empty, or longer than [`MAX_SPAN_NAME_LEN`].
    #[error("span name must be 1 to {MAX_SPAN_NAME_LEN} characters")]
    Length,
    /// A character other than letters, digits, `_`, `:`, `.` and `-`.
    #[error("span name {name:?} contains {ch:?}")]
    BadChar {
        /// The span name.
        name: String,
        /// The first offending character.
        ch: char,
    },
}

/// A sampling rule that is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    /// The target.
    #[error(transparent)]
    Target(#[from] TargetError),
    /// `keepOneIn`.
    #[error(transparent)]
    Range(#[from] RangeError),
    /// The span name of a request rule.
    #[error(transparent)]
    SpanName(#[from] SpanNameError),
}

/// Validates a span name given to a request rule.
pub(crate) fn span_name(s: &str) -> Result<String, SpanNameError> {
    if s.is_empty() || s.len() > MAX_SPAN_NAME_LEN {
        return Err(SpanNameError::Length);
    }
    match s
        .chars()
        .find(|c| !(c.is_alphanumeric() || matches!(c, '_' | ':' | '.' | '-')))
    {
        Some(ch) => Err(SpanNameError::BadChar {
            name: s.to_owned(),
            ch,
        }),
        None => Ok(s.to_owned()),
    }
}

impl SamplingRule {
    /// A validated rule.
    pub fn new(target: &str, keep_one_in: u64, scope: Scope) -> Result<Self, RuleError> {
        let target = Target::new(target)?;
        let keep_one_in = one_in("keepOneIn", keep_one_in)?;
        if let Scope::Request { span: Some(s) } = &scope {
            span_name(s)?;
        }
        Ok(SamplingRule {
            target,
            keep_one_in,
            scope,
        })
    }
}

impl fmt::Display for SamplingRule {
    /// The directive form: `@sample(target)=1/N`, `...:request` or `...:request(span)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "@sample({})=1/{}", self.target, self.keep_one_in)?;
        match &self.scope {
            Scope::Event => Ok(()),
            Scope::Request { span: None } => f.write_str(":request"),
            Scope::Request { span: Some(s) } => write!(f, ":request({s})"),
        }
    }
}

impl fmt::Display for Burst {
    /// The directive form: `@burst=N/s:1/M`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "@burst={}/s:1/{}", self.per_second, self.then_one_in)
    }
}
