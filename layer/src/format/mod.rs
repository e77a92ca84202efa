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

mod escape;
mod fields;
mod timestamp;

use std::cell::RefCell;
use std::sync::Arc;

use tracing_core::span::{Attributes, Id, Record};
use tracing_core::{Event, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use crate::clock::{Clock, SystemClock};
use crate::level::Level;
use crate::sink::LineSink;
pub(crate) use escape::write_escaped;
use fields::{JsonFields, TextFields};
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
}

impl<K: LineSink> FormatLayer<K> {
    /// A layer writing `format` lines to `sink`, timestamps from the system clock.
    pub fn new(format: Format, sink: K) -> Self {
        FormatLayer {
            format,
            sink,
            clock: Arc::new(SystemClock),
            always_keep: Level::Warn,
        }
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

    /// Formats `event` into `buf` (cleared first), with `span` as its span.
    fn format_into<S>(&self, buf: &mut Vec<u8>, event: &Event<'_>, ctx: &Context<'_, S>)
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let meta = event.metadata();
        let now = self.clock.now();
        match self.format {
            Format::Json => {
                buf.extend_from_slice(b"{\"ts\":\"");
                write_timestamp(buf, now);
                buf.extend_from_slice(b"\",\"level\":\"");
                buf.extend_from_slice(meta.level().as_str().as_bytes());
                buf.extend_from_slice(b"\",\"target\":\"");
                write_escaped(buf, meta.target());
                buf.push(b'"');
                event.record(&mut JsonFields { buf: &mut *buf });
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
                write_timestamp(buf, now);
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
        let mut buf = Vec::new();
        match self.format {
            Format::Json => {
                attrs.record(&mut JsonFields { buf: &mut buf });
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
                    values.record(&mut JsonFields { buf: &mut f.0 });
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
        let level = event.metadata().level();
        let always_keep = Level::of(level) <= self.always_keep;
        let write = |buf: &mut Vec<u8>| {
            buf.clear();
            self.format_into(buf, event, &ctx);
            self.sink.write_line(level, always_keep, buf);
        };
        let reused = BUF.with(|cell| match cell.try_borrow_mut() {
            Ok(mut buf) => {
                write(&mut buf);
                if buf.capacity() > KEEP_BUFFER {
                    *buf = Vec::with_capacity(1024);
                }
                true
            }
            Err(_) => false,
        });
        if !reused {
            // Re-entered (a sink that logs): use a fresh buffer rather than fail.
            write(&mut Vec::with_capacity(256));
        }
    }
}

#[cfg(test)]
mod tests;
