//! Request-scope sampling (hold the lines of a request that was not kept; write them
//! before its first error), and the layer's own in-band lines.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::SystemTime;

use tracing_core::span::Attributes;
use tracing_core::{Event, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::{LookupSpan, SpanRef};

use super::escape::{write_escaped, Raw};
use super::timestamp::write_timestamp;
use super::Format;
use crate::filter::Compiled;
use crate::limits::Notice;
use crate::stats::{Reason, Stats, StatsCells};

/// The summary of events not written comes at most this often by default.
pub(crate) const DEFAULT_SUMMARY_INTERVAL_SECS: u64 = 10;

/// Bounds on what request-scope sampling holds.
///
/// Each request that was not kept holds at most `max_lines` lines and `max_bytes` bytes
/// (the oldest are dropped first, and counted as sampled), and at most `max_requests`
/// requests hold lines at once (the lines of further requests that were not kept are
/// counted as sampled at once, without being formatted). Held memory is therefore at
/// most `max_requests * max_bytes` (16 MiB by default), whatever happens to the spans:
/// a request's lines are freed when its span closes.
///
/// # Examples
///
/// ```
/// use logpolicy::format::RequestLimits;
/// let limits = RequestLimits { max_lines: 32, ..RequestLimits::default() };
/// assert_eq!(limits.max_bytes, 16 * 1024);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLimits {
    /// Lines held per request.
    pub max_lines: usize,
    /// Bytes held per request.
    pub max_bytes: usize,
    /// Requests holding lines at once.
    pub max_requests: usize,
}

impl Default for RequestLimits {
    fn default() -> Self {
        RequestLimits {
            max_lines: 64,
            max_bytes: 16 * 1024,
            max_requests: 1024,
        }
    }
}

/// Lines held by a request that was not kept: their bytes back to back in one ring
/// (one allocation per request, not per line) and their levels and lengths.
#[derive(Debug, Default)]
struct Held {
    lines: VecDeque<(tracing_core::Level, usize)>,
    bytes: VecDeque<u8>,
}

impl Held {
    /// Drops the oldest line; returns its level.
    fn pop_oldest(&mut self) -> Option<tracing_core::Level> {
        let (level, len) = self.lines.pop_front()?;
        self.bytes.drain(..len);
        Some(level)
    }
}

/// The sampling decisions of one request span (a span extension).
#[derive(Debug)]
pub(crate) struct RequestState {
    generation: u64,
    /// Request rules this span decides for (bit per rule).
    applies: u64,
    /// Of those, the ones that kept this request.
    kept: u64,
    /// An event at `alwaysKeep` or above happened: the rest of the request is kept.
    promoted: bool,
    /// Only the outermost request span of a request holds lines.
    holder: Option<Held>,
    /// Whether this request counts against `max_requests`.
    tracked: bool,
}

impl RequestState {
    /// Decides, once, as the span opens: for each request rule this span marks a
    /// request for, keep it or not (one in N, by the rule's counter).
    pub(crate) fn decide<'a, S>(
        compiled: &Compiled,
        attrs: &Attributes<'_>,
        span: &SpanRef<'a, S>,
        limits: &RequestLimits,
        tracked: &AtomicUsize,
    ) -> Option<RequestState>
    where
        S: Subscriber + LookupSpan<'a>,
    {
        let meta = attrs.metadata();
        let is_root = span.parent().is_none();
        let (mut applies, mut kept) = (0u64, 0u64);
        for rule in compiled.request_rules() {
            let Some(bit) = rule.request_bit else {
                continue;
            };
            let marks = match rule.request_span() {
                None => is_root,
                Some(name) => meta.name() == name,
            };
            if marks {
                applies |= 1 << bit;
                if rule.counters.keep(meta.level()) {
                    kept |= 1 << bit;
                }
            }
        }
        if applies == 0 {
            return None;
        }
        let has_outer = span
            .scope()
            .skip(1)
            .any(|s| s.extensions().get::<RequestState>().is_some());
        let (holder, is_tracked) = if has_outer {
            (None, false)
        } else if tracked.fetch_add(1, Ordering::AcqRel) < limits.max_requests {
            (Some(Held::default()), true)
        } else {
            tracked.fetch_sub(1, Ordering::AcqRel);
            (None, false)
        };
        Some(RequestState {
            generation: compiled.generation,
            applies,
            kept,
            promoted: false,
            holder,
            tracked: is_tracked,
        })
    }

    /// The request ended: what it still holds was sampled out.
    pub(crate) fn discard(self, stats: &StatsCells, tracked: &AtomicUsize) {
        if let Some(held) = self.holder {
            for (level, _) in held.lines {
                StatsCells::sub(&stats.held, &level, 1);
                StatsCells::add(&stats.sampled, &level, 1);
            }
        }
        if self.tracked {
            tracked.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// What to do with an event below `alwaysKeep`.
pub(crate) enum HoldOutcome {
    /// Not governed by a request rule, or in a kept request: write it.
    Write,
    /// Held with its request; these older held lines were dropped to make room.
    Held { evicted: Vec<tracing_core::Level> },
    /// In a request that was not kept and cannot hold lines: sampled out.
    Sampled,
}

/// Decides an event below `alwaysKeep` under request-scope sampling; formats it (with
/// `format`) only if it is held.
pub(crate) fn hold<S>(
    compiled: &Compiled,
    event: &Event<'_>,
    ctx: &Context<'_, S>,
    limits: &RequestLimits,
    buf: &mut Vec<u8>,
    format: impl FnOnce(&mut Vec<u8>),
) -> HoldOutcome
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let meta = event.metadata();
    let Some(bit) = compiled.rule_for(meta.target()).and_then(|r| r.request_bit) else {
        return HoldOutcome::Write;
    };
    let Some(scope) = ctx.event_scope(event) else {
        return HoldOutcome::Write;
    };
    let mut decision = None;
    let mut outermost = None;
    for span in scope {
        let ext = span.extensions();
        let Some(state) = ext.get::<RequestState>() else {
            continue;
        };
        if state.generation != compiled.generation {
            // The rules changed during this request: keep it rather than guess.
            return HoldOutcome::Write;
        }
        if decision.is_none() && (state.promoted || state.applies & (1 << bit) != 0) {
            decision = Some(state.promoted || state.kept & (1 << bit) != 0);
        }
        drop(ext);
        outermost = Some(span);
    }
    match (decision, outermost) {
        (Some(false), Some(span)) => {
            let can_hold = span
                .extensions()
                .get::<RequestState>()
                .is_some_and(|s| s.holder.is_some());
            if !can_hold {
                return HoldOutcome::Sampled;
            }
            // Format before taking the span's extensions for writing: formatting reads
            // the extensions of the event's span, which may be this one.
            format(buf);
            let mut ext = span.extensions_mut();
            let Some(held) = ext
                .get_mut::<RequestState>()
                .and_then(|s| s.holder.as_mut())
            else {
                return HoldOutcome::Sampled;
            };
            let mut evicted = Vec::new();
            if buf.len() > limits.max_bytes || limits.max_lines == 0 {
                // The line itself does not fit: it counts as held, then evicted.
                evicted.push(*meta.level());
                return HoldOutcome::Held { evicted };
            }
            while held.lines.len() + 1 > limits.max_lines
                || held.bytes.len() + buf.len() > limits.max_bytes
            {
                let Some(level) = held.pop_oldest() else {
                    break;
                };
                evicted.push(level);
            }
            held.bytes.extend(buf.iter().copied());
            held.lines.push_back((*meta.level(), buf.len()));
            HoldOutcome::Held { evicted }
        }
        _ => HoldOutcome::Write,
    }
}

/// An event at `alwaysKeep` or above: its request is kept from now on, and the lines it
/// held are handed to `write`, oldest first.
pub(crate) fn promote<S>(
    event: &Event<'_>,
    ctx: &Context<'_, S>,
    mut write: impl FnMut(tracing_core::Level, &[u8]),
) where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let Some(scope) = ctx.event_scope(event) else {
        return;
    };
    let mut taken = None;
    for span in scope {
        let mut ext = span.extensions_mut();
        if let Some(state) = ext.get_mut::<RequestState>() {
            state.promoted = true;
            if let Some(held) = state.holder.as_mut() {
                if !held.lines.is_empty() {
                    taken = Some(std::mem::take(held));
                }
            }
        }
    }
    // Written with no span lock held (the sink may take its time).
    if let Some(mut held) = taken {
        let bytes = held.bytes.make_contiguous();
        let mut at = 0;
        for (level, len) in held.lines {
            write(level, &bytes[at..at + len]);
            at += len;
        }
    }
}

/// A value in one of the layer's own lines.
enum Val<'a> {
    Str(&'a str),
    Num(u64),
    /// Per-level counts, written as an object (JSON) or `{info:3,...}` (text).
    Levels([u64; 5]),
}

/// Writes one of the layer's own lines (target `logpolicy`) into `buf`.
fn write_own_line(
    buf: &mut Vec<u8>,
    format: Format,
    now: SystemTime,
    level: &str,
    msg: &str,
    fields: &[(&str, Val<'_>)],
) {
    buf.clear();
    let json = format == Format::Json;
    if json {
        buf.extend_from_slice(b"{\"ts\":\"");
        write_timestamp(buf, now);
        let _ = write!(
            Raw(buf),
            "\",\"level\":\"{level}\",\"target\":\"logpolicy\",\"msg\":\""
        );
        write_escaped(buf, msg);
        buf.push(b'"');
    } else {
        write_timestamp(buf, now);
        let _ = write!(Raw(buf), " {level:>5} logpolicy: {msg}");
    }
    // JSON: `,"key":value` and `{"info":3}`; text: ` key=value` and `{info:3}`.
    let quote = if json { "\"" } else { "" };
    for (k, v) in fields {
        if json {
            let _ = write!(Raw(buf), ",\"{k}\":");
        } else {
            let _ = write!(Raw(buf), " {k}=");
        }
        match v {
            Val::Str(s) => {
                buf.push(b'"');
                write_escaped(buf, s);
                buf.push(b'"');
            }
            Val::Num(n) => {
                let _ = write!(Raw(buf), "{n}");
            }
            Val::Levels(counts) => {
                let names = ["trace", "debug", "info", "warn", "error"];
                buf.push(b'{');
                let mut sep = "";
                for (name, n) in names.iter().zip(counts).filter(|(_, n)| **n > 0) {
                    let _ = write!(Raw(buf), "{sep}{quote}{name}{quote}:{n}");
                    sep = ",";
                }
                buf.push(b'}');
            }
        }
    }
    buf.extend_from_slice(if json { b"}\n" } else { b"\n" });
}

/// Writes a notice of the burst limiter.
pub(crate) fn write_notice(buf: &mut Vec<u8>, format: Format, now: SystemTime, notice: &Notice) {
    let site = |meta: &tracing_core::Metadata<'_>| {
        format!(
            "{} {}:{}",
            meta.target(),
            meta.file().unwrap_or("?"),
            meta.line().unwrap_or(0)
        )
    };
    match notice {
        Notice::BurstStarted { meta, burst } => write_own_line(
            buf,
            format,
            now,
            "WARN",
            "burst limit reached: keeping one in thenOneIn for the rest of this second",
            &[
                ("callsite", Val::Str(&site(meta))),
                ("perSecond", Val::Num(u64::from(burst.per_second.get()))),
                ("thenOneIn", Val::Num(u64::from(burst.then_one_in.get()))),
            ],
        ),
        Notice::BurstEnded { meta, summary } => write_own_line(
            buf,
            format,
            now,
            "WARN",
            "burst limit summary",
            &[
                ("callsite", Val::Str(&site(meta))),
                (
                    "second",
                    Val::Str(&crate::clock::format_rfc3339(
                        std::time::UNIX_EPOCH + std::time::Duration::from_secs(summary.second),
                    )),
                ),
                ("events", Val::Num(summary.events)),
                ("dropped", Val::Num(summary.dropped)),
            ],
        ),
    }
}

/// The periodic summary of events not written.
#[derive(Debug)]
pub(crate) struct Summary {
    interval: u64,
    next_due: AtomicU64,
    last: Mutex<Stats>,
}

impl Summary {
    pub(crate) fn new(interval: u64) -> Self {
        Summary {
            interval,
            next_due: AtomicU64::new(0),
            last: Mutex::new(Stats::default()),
        }
    }

    /// Whether this thread should write the summary now (at most one per interval).
    #[inline]
    pub(crate) fn due(&self, secs: u64) -> bool {
        let next = self.next_due.load(Ordering::Relaxed);
        secs >= next
            && self
                .next_due
                .compare_exchange(
                    next,
                    secs + self.interval,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok()
    }

    /// Writes the counts since the last summary into `buf`; returns the line's level,
    /// or `None` when nothing went unwritten since.
    pub(crate) fn write(
        &self,
        buf: &mut Vec<u8>,
        format: Format,
        now: SystemTime,
        stats: &Stats,
    ) -> Option<tracing_core::Level> {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let mut delta = [[0u64; 5]; 3];
        for (row, reason) in delta.iter_mut().zip(Reason::ALL) {
            for (cell, (now, before)) in row.iter_mut().zip(stats.levels.iter().zip(&last.levels)) {
                *cell = now
                    .by_reason(reason)
                    .saturating_sub(before.by_reason(reason));
            }
        }
        *last = *stats;
        if delta.iter().flatten().all(|n| *n == 0) {
            return None;
        }
        let lossy = delta[1].iter().chain(&delta[2]).any(|n| *n > 0);
        let (level, name) = if lossy {
            (tracing_core::Level::WARN, "WARN")
        } else {
            (tracing_core::Level::INFO, "INFO")
        };
        write_own_line(
            buf,
            format,
            now,
            name,
            "events not written",
            &[
                ("sampled", Val::Levels(delta[0])),
                ("burst", Val::Levels(delta[1])),
                ("budget", Val::Levels(delta[2])),
            ],
        );
        Some(level)
    }
}
