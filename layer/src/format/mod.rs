//! Formatting events into lines: JSON (one object per line) or compact text.
//!
//! A JSON line looks like this (one line; wrapped here):
//!
//! ```text
//! {"ts":"2026-11-29T20:06:15.123456Z","level":"INFO","target":"shop::http","msg":"served",
//!  "status":200,"path":"/cart","span":{"name":"request","method":"GET"}}
//! ```
//!
//! `ts` is RFC 3339 UTC with microseconds; `level`, `target` and `msg` (the event's
//! message) come next, then the event's fields in the order given, then `span`: the
//! name and fields of the event's span (its explicit parent, else the current span).
//! Strings are escaped for JSON (quotes, backslashes, control characters); `Debug`
//! values are written as strings; integers and booleans as JSON numbers and booleans;
//! floats as numbers (`NaN` and infinities as strings). A field whose name is one of the
//! line's own keys (`ts`, `level`, `target`, `msg`, `span`) is written as
//! `field.<name>`, so a line never has two equal keys.
//!
//! The text form is `TIMESTAMP LEVEL target: span{fields}: message key=value ...`, with
//! control characters escaped so one event is always one line.
//!
//! Lines are built in a per-thread buffer that is reused: formatting allocates nothing
//! in the steady state.

mod callsite;
mod escape;
mod fields;
mod request;
mod timestamp;

use std::cell::RefCell;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use tracing_core::span::{Attributes, Id, Record};
use tracing_core::{Event, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use crate::clock::{Clock, SystemClock};
use crate::filter::{Compiled, PolicyFilter};
use crate::level::Level;
use crate::sink::LineSink;
use crate::stats::StatsCells;
use callsite::{json_callsite, write_head};
pub(crate) use escape::write_escaped;
use fields::{JsonFields, TextFields};
pub use request::RequestLimits;
use request::{HoldOutcome, RequestState, Summary};
use timestamp::write_since_epoch;
pub(crate) use timestamp::write_timestamp;

/// The line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One JSON object per line.
    Json,
    /// Compact text for terminals.
    Text,
}

/// Lines longer than this are not kept in the per-thread buffer afterwards, so one huge
/// event does not pin its memory for the life of the thread.
const KEEP_BUFFER: usize = 64 * 1024;

thread_local! {
    static BUF: RefCell<Vec<u8>> = RefCell::new(Vec::with_capacity(1024));
}

/// A layer that formats every event it sees and hands the line to a [`LineSink`].
///
/// Put a [`PolicyFilter`](crate::PolicyFilter) in front of it (as a global layer or as
/// its per-layer filter) to decide what it sees.
///
/// # Examples
///
/// ```
/// use logpolicy::{Format, FormatLayer, PolicyFilter};
/// use std::sync::{Arc, Mutex};
/// use tracing_subscriber::prelude::*;
///
/// let out = Arc::new(Mutex::new(Vec::<u8>::new()));
/// let subscriber = tracing_subscriber::registry()
///     .with(PolicyFilter::from_directives("info").unwrap())
///     .with(FormatLayer::new(Format::Json, out.clone()));
/// tracing::subscriber::with_default(subscriber, || {
///     let span = tracing::info_span!("request", method = "GET");
///     let _enter = span.enter();
///     tracing::info!(status = 200u16, "served \"cart\"");
///     tracing::debug!("not written");
/// });
/// let out = String::from_utf8(out.lock().unwrap().clone()).unwrap();
/// let line: serde_json::Value = serde_json::from_str(out.trim_end()).unwrap();
/// assert_eq!(line["msg"], "served \"cart\"");
/// assert_eq!(line["status"], 200);
/// assert_eq!(line["span"]["name"], "request");
/// assert_eq!(line["span"]["method"], "GET");
/// assert_eq!(out.lines().count(), 1);
/// ```
pub struct FormatLayer<K> {
    format: Format,
    sink: K,
    clock: Arc<dyn Clock>,
    always_keep: Level,
    policy: Option<PolicyFilter>,
    requests: RequestLimits,
    tracked: Arc<std::sync::atomic::AtomicUsize>,
    summary: Arc<Summary>,
}

impl<K: LineSink> FormatLayer<K> {
    /// A layer writing `format` lines to `sink`, timestamps from the system clock.
    pub fn new(format: Format, sink: K) -> Self {
        SystemClock::warm_up();
        FormatLayer {
            format,
            sink,
            clock: Arc::new(SystemClock),
            always_keep: Level::Warn,
            policy: None,
            requests: RequestLimits::default(),
            tracked: Arc::default(),
            summary: Arc::new(Summary::new(request::DEFAULT_SUMMARY_INTERVAL_SECS)),
        }
    }

    /// Links this layer with the filter in front of it, which turns on everything in the
    /// policy that needs the formatted line or the request: `alwaysKeep` from the policy,
    /// request-scope sampling (lines of a request that was not kept are held, and written
    /// before the first event at `alwaysKeep` or above in it), the byte budget, the
    /// counting of written events in the filter's [`Stats`](crate::Stats), and the in-band
    /// reports (burst notices and a periodic summary of what was not written).
    ///
    /// The layer takes timestamps from the filter's clock.
    #[must_use]
    pub fn with_policy(mut self, filter: &PolicyFilter) -> Self {
        self.clock = filter.clock();
        self.policy = Some(filter.clone());
        self
    }

    /// Bounds the lines held per request that was not kept (default 64 lines, 16 KiB)
    /// and the number of requests holding lines at once (default 1,024); see
    /// [`RequestLimits`].
    #[must_use]
    pub fn request_limits(mut self, limits: RequestLimits) -> Self {
        self.requests = limits;
        self
    }

    /// Writes the summary of events not written at most once per `secs` seconds
    /// (default 10, at least 1).
    #[must_use]
    pub fn summary_interval(mut self, secs: u64) -> Self {
        self.summary = Arc::new(Summary::new(secs.max(1)));
        self
    }

    /// Takes timestamps from `clock`.
    #[must_use]
    pub fn with_clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Events at or above `level` are passed to the sink as `always_keep` (default `warn`).
    #[must_use]
    pub fn always_keep(mut self, level: Level) -> Self {
        self.always_keep = level;
        self
    }

    /// The sink.
    pub fn sink(&self) -> &K {
        &self.sink
    }

    /// Formats `event` into `buf` (cleared first), stamped `now` (since the Unix epoch).
    fn format_into<S>(
        &self,
        buf: &mut Vec<u8>,
        event: &Event<'_>,
        ctx: &Context<'_, S>,
        now: Duration,
    ) where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        buf.clear();
        let meta = event.metadata();
        match self.format {
            Format::Json => {
                buf.extend_from_slice(b"{\"ts\":\"");
                write_since_epoch(buf, now);
                let callsite = json_callsite(meta);
                match callsite {
                    Some(c) => buf.extend_from_slice(&c.head),
                    None => write_head(buf, meta),
                }
                event.record(&mut JsonFields {
                    buf: &mut *buf,
                    callsite,
                });
                if let Some(span) = ctx.event_span(event) {
                    buf.extend_from_slice(b",\"span\":{\"name\":\"");
                    write_escaped(buf, span.name());
                    buf.push(b'"');
                    if let Some(fields) = span.extensions().get::<JsonSpanFields>() {
                        buf.extend_from_slice(&fields.0);
                    }
                    buf.push(b'}');
                }
                buf.extend_from_slice(b"}\n");
            }
            Format::Text => {
                write_since_epoch(buf, now);
                buf.extend_from_slice(match *meta.level() {
                    tracing_core::Level::ERROR => b" ERROR ",
                    tracing_core::Level::WARN => b"  WARN ",
                    tracing_core::Level::INFO => b"  INFO ",
                    tracing_core::Level::DEBUG => b" DEBUG ",
                    _ => b" TRACE ",
                });
                buf.extend_from_slice(meta.target().as_bytes());
                buf.push(b':');
                if let Some(span) = ctx.event_span(event) {
                    buf.push(b' ');
                    buf.extend_from_slice(span.name().as_bytes());
                    buf.push(b'{');
                    if let Some(fields) = span.extensions().get::<TextSpanFields>() {
                        buf.extend_from_slice(fields.0.strip_prefix(b" ").unwrap_or(&fields.0));
                    }
                    buf.extend_from_slice(b"}:");
                }
                event.record(&mut TextFields { buf: &mut *buf });
                buf.push(b'\n');
            }
        }
    }
}

impl<K> std::fmt::Debug for FormatLayer<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FormatLayer")
            .field("format", &self.format)
            .finish()
    }
}

/// A span's fields, pre-formatted as `,"k":v...` when the span was created.
struct JsonSpanFields(Vec<u8>);
/// A span's fields, pre-formatted as ` k=v...`.
struct TextSpanFields(Vec<u8>);

impl<S, K> tracing_subscriber::Layer<S> for FormatLayer<K>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    K: LineSink,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        if let Some(policy) = &self.policy {
            let compiled: arc_swap::Guard<Arc<Compiled>> = policy.compiled();
            if compiled.has_request_rules {
                if let Some(state) =
                    RequestState::decide(&compiled, attrs, &span, &self.requests, &self.tracked)
                {
                    span.extensions_mut().insert(state);
                }
            }
        }
        let mut buf = Vec::new();
        match self.format {
            Format::Json => {
                attrs.record(&mut JsonFields {
                    buf: &mut buf,
                    callsite: json_callsite(attrs.metadata()),
                });
                span.extensions_mut().insert(JsonSpanFields(buf));
            }
            Format::Text => {
                attrs.record(&mut TextFields { buf: &mut buf });
                span.extensions_mut().insert(TextSpanFields(buf));
            }
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut ext = span.extensions_mut();
        match self.format {
            Format::Json => {
                if let Some(f) = ext.get_mut::<JsonSpanFields>() {
                    values.record(&mut JsonFields {
                        buf: &mut f.0,
                        callsite: json_callsite(span.metadata()),
                    });
                }
            }
            Format::Text => {
                if let Some(f) = ext.get_mut::<TextSpanFields>() {
                    values.record(&mut TextFields { buf: &mut f.0 });
                }
            }
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        with_buffer(|buf| match &self.policy {
            None => {
                let level = event.metadata().level();
                self.format_into(buf, event, &ctx, self.clock.since_epoch());
                self.sink
                    .write_line(level, Level::of(level) <= self.always_keep, buf);
            }
            Some(policy) => self.on_policy_event(policy, buf, event, &ctx),
        });
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let (Some(policy), Some(span)) = (&self.policy, ctx.span(&id)) else {
            return;
        };
        let state = span.extensions_mut().remove::<RequestState>();
        if let Some(state) = state {
            state.discard(policy.stats_cells(), &self.tracked);
        }
    }
}

impl<K: LineSink> FormatLayer<K> {
    /// The event path when linked with a policy: notices, request scope, budget, write,
    /// count, and the periodic summary.
    fn on_policy_event<S>(
        &self,
        policy: &PolicyFilter,
        buf: &mut Vec<u8>,
        event: &Event<'_>,
        ctx: &Context<'_, S>,
    ) where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let path = policy.event_path();
        // Request rules and a byte budget need the compiled policy; most events need
        // neither, and do not load it.
        let compiled = path.needs_compiled().then(|| policy.compiled());
        let stats = policy.stats_cells();
        let since_epoch = self.clock.since_epoch();
        if let Some(notices) = policy.notices().take() {
            for notice in notices {
                request::write_notice(buf, self.format, UNIX_EPOCH + since_epoch, &notice);
                self.sink.write_line(&tracing_core::Level::WARN, true, buf);
            }
        }
        let meta = event.metadata();
        let level = meta.level();
        let keep = path.keeps_always(level);
        let budget = compiled.as_ref().and_then(|c| c.max_bytes_per_second);
        if let Some(compiled) = compiled.as_ref().filter(|c| c.has_request_rules) {
            if keep {
                // The context of an error: what its request held, in order, first.
                request::promote(event, ctx, |lvl, line| {
                    self.sink.write_line(&lvl, true, line);
                    StatsCells::sub(&stats.held, &lvl, 1);
                    StatsCells::add(&stats.written, &lvl, 1);
                    if budget.is_some() {
                        policy.budget().charge(line.len());
                    }
                });
            } else {
                match request::hold(compiled, event, ctx, &self.requests, buf, |b| {
                    self.format_into(b, event, ctx, since_epoch)
                }) {
                    HoldOutcome::Write => {}
                    HoldOutcome::Held { evicted } => {
                        StatsCells::add(&stats.held, level, 1);
                        for lvl in evicted {
                            StatsCells::sub(&stats.held, &lvl, 1);
                            StatsCells::add(&stats.sampled, &lvl, 1);
                        }
                        return;
                    }
                    HoldOutcome::Sampled => {
                        StatsCells::add(&stats.sampled, level, 1);
                        return;
                    }
                }
            }
        }
        if let (Some(rate), false) = (budget, keep) {
            let now_ns = u64::try_from(since_epoch.as_nanos()).unwrap_or(u64::MAX);
            if !policy.budget().admit(now_ns, rate) {
                StatsCells::add(&stats.budget, level, 1);
                return;
            }
        }
        self.format_into(buf, event, ctx, since_epoch);
        self.sink.write_line(level, keep, buf);
        StatsCells::add(&stats.written, level, 1);
        if budget.is_some() {
            policy.budget().charge(buf.len());
        }
        if self.summary.due(since_epoch.as_secs()) {
            let now = UNIX_EPOCH + since_epoch;
            if let Some(line_level) = self.summary.write(buf, self.format, now, &stats.snapshot()) {
                self.sink.write_line(&line_level, true, buf);
            }
        }
        drop(compiled);
    }
}

/// Runs `f` with the per-thread line buffer (or a fresh one if re-entered).
fn with_buffer(f: impl FnOnce(&mut Vec<u8>)) {
    let mut f = Some(f);
    BUF.with(|cell| {
        if let Ok(mut buf) = cell.try_borrow_mut() {
            if let Some(f) = f.take() {
                f(&mut buf);
            }
            if buf.capacity() > KEEP_BUFFER {
                *buf = Vec::with_capacity(1024);
            }
        }
    });
    if let Some(f) = f {
        // Re-entered (a sink that logs): use a fresh buffer rather than fail.
        f(&mut Vec::with_capacity(256));
    }
}

#[cfg(test)]
mod tests;
