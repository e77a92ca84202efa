//! Formatting events into lines, in the format the log pipeline reads without a
//! remapping rule: [`Format`], chosen with [`Builder::format`](crate::Builder::format)
//! or `LOGPOLICY_FORMAT`.
//!
//! A `json` line looks like this (one line; wrapped here):
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
//! line's own keys (`ts`, `level`, `target`, `msg`, `span`, `service.name`,
//! `service.version`, and with the `opentelemetry` feature `trace_id` and `span_id`) is
//! written as `field.<name>`, so a line never has two equal keys.
//!
//! # Where each format puts what
//!
//! Every format keeps those value rules (JSON formats) and the one-event-one-line and
//! redaction guarantees; each renames a field named like one of its own keys (listed
//! below) to `field.<name>`.
//!
//! | | time | level | target | message | event fields | span | service |
//! |---|---|---|---|---|---|---|---|
//! | `json` | `ts`: RFC 3339, µs, `Z` | `level`: `TRACE` ... `ERROR` | `target` | `msg` | top level | `span`: `{"name",fields}` | `service.name`, `service.version` |
//! | `json-otel` | `Timestamp`: ns since the epoch, as a string | `SeverityText`: `TRACE` ... `ERROR`; `SeverityNumber`: 1, 5, 9, 13, 17 | `InstrumentationScope.Name` | `Body` | in `Attributes` | `Attributes.span` | `Resource`: `service.name`, `service.version` |
//! | `json-ecs` | `@timestamp`: RFC 3339 | `log.level`: `trace` ... `error` | `log.logger` | `message` | top level | `tracing.span` | `service.name`, `service.version` |
//! | `json-gcp` | `time`: RFC 3339 | `severity`: `DEBUG` (trace, debug), `INFO`, `WARNING`, `ERROR` | `target` | `message` | top level (`jsonPayload`) | `span` | `serviceContext`: `service`, `version` |
//! | `json-datadog` | `timestamp`: RFC 3339 | `status`: `trace` ... `error` | `logger.name` | `message` | top level | `span` | `service`, `version` |
//! | `logfmt` | `ts`: RFC 3339 | `level`: `trace` ... `error` | `target` | `msg` | ` key=value` | `span=NAME span.key=value` | `service.name=`, `service.version=` |
//! | `text` | RFC 3339 | `TRACE` ... `ERROR` | `target:` | bare | ` key=value` | `name{fields}:` | not written |
//!
//! `json-ecs` lines also carry `"ecs.version":"1.6.0"` (ecs-logging's required field).
//! Reserved names (written `field.<name>` when a field has them): `json-otel`: `span`
//! (inside `Attributes`); `json-ecs`: `@timestamp`, `log.level`, `log.logger`,
//! `ecs.version`, `message`, `tracing.span`, `service.name`, `service.version`,
//! `trace.id`, `span.id`; `json-gcp`: `time`, `severity`, `target`, `message`, `span`,
//! `serviceContext` and every `logging.googleapis.com/...`; `json-datadog`: `timestamp`,
//! `status`, `logger.name`, `message`, `span`, `service`, `version`, `dd.trace_id`,
//! `dd.span_id`; `logfmt`: those of `json` and every `span.<key>`.
//!
//! # Trace ids
//!
//! With the cargo feature `opentelemetry`, an event whose span has an OpenTelemetry
//! context (the span extension of `tracing-opentelemetry` 0.34, with `opentelemetry`
//! 0.33; they require `tracing-subscriber` 0.3.22 or newer) carries the trace id and
//! span id of that span, in W3C hex (32 and 16 digits), where its format's pipeline
//! joins lines with traces: `json` and `logfmt`: `trace_id`, `span_id`; `json-otel`:
//! `TraceId`, `SpanId`; `json-ecs`: `trace.id`, `span.id`; `json-gcp`:
//! `logging.googleapis.com/trace` (`projects/PROJECT/traces/ID` when
//! [`FormatLayer::gcp_project`] names the project) and `logging.googleapis.com/spanId`;
//! `json-datadog`: `dd.trace_id`, `dd.span_id` as Datadog correlates them (the lower 64
//! bits, in decimal). `text` lines carry none. Without the feature nothing of
//! OpenTelemetry is compiled.
//!
//! Inside the span object of the JSON formats the span's fields follow `json`'s rules.
//!
//! `logfmt` values are written bare when they hold nothing but printable characters
//! other than `"`, `=` and `\`, else quoted with JSON's escapes (which `strconv.Unquote`,
//! used by Loki's and Go's logfmt readers, reads); numbers and booleans bare. A key's
//! characters that would end it (whitespace, `=`, `"`, control characters) are written
//! as `_`.
//!
//! The layer's own lines (burst notices, the summary of what was not written, the
//! writer's report of dropped lines, skipped settings) use the same format, with target
//! `logpolicy`; their fields are where the format puts an event's fields, except in
//! `json-ecs`, where they are under `logpolicy` (clear of ECS's own field sets), and in
//! `logfmt`, where counts are flattened (`sampled.info=90`).
//!
//! The text form is `TIMESTAMP LEVEL target: span{fields}: message key=value ...`, with
//! control characters escaped so one event is always one line.
//!
//! Values of redacted fields are written as `"[redacted]"` (see
//! [`redact`](crate::policy::redact)): which fields of a callsite are redacted is
//! computed once per callsite and redaction, kept beside the callsite's rendered keys,
//! so a line none of whose names match pays one load and one comparison.
//!
//! Lines are built in a per-thread buffer that is reused: formatting allocates nothing
//! in the steady state.

mod callsite;
mod escape;
mod fields;
pub(crate) mod own_line;
mod redact;
mod room;
mod schema;
mod service;
mod trace_ids;

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use tracing_core::field::Visit;
use tracing_core::span::{Attributes, Id, Record};
use tracing_core::{Event, Metadata, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use crate::clock::{write_since_epoch, Clock, SystemClock};
use crate::enforce::{
    ActiveRedaction, Decision, FieldMask, OutputGate, PolicyFilter, RequestLimits,
};
use crate::level::Level;
use crate::policy::Redaction;
use crate::sink::LineSink;
use callsite::{cached_site, cached_site_of, message_index, CachedSite};
pub(crate) use escape::write_escaped;
use fields::{JsonFields, LogfmtFields, OtelAttributes, OtelFields, TextFields, Tracked};
use redact::{Counts, Redacting};
use schema::{span_open, spans_open, write_head, write_logfmt_str, write_time, Keys};
pub use schema::{Format, ParseFormatError};
pub use service::{ResourceError, Service, RESOURCE_ATTRIBUTES_VAR, SERVICE_NAME_VAR};

/// A format and the service its lines name, rendered for it: what every line of an
/// output shares.
#[derive(Debug, Clone)]
pub(crate) struct Style {
    pub(crate) format: Format,
    /// The service's fields as `format` writes them (empty when none is set).
    pub(crate) service: Arc<[u8]>,
    /// The Google Cloud project of the traces (`json-gcp`'s trace field names it).
    pub(crate) gcp_project: Option<Arc<str>>,
}

impl Style {
    pub(crate) fn new(format: Format, service: &Service) -> Self {
        let mut bytes = Vec::new();
        schema::write_service(
            &mut bytes,
            format,
            service.name.as_deref(),
            service.version.as_deref(),
        );
        Style {
            format,
            service: bytes.into(),
            gcp_project: None,
        }
    }
}

/// Lines longer than this are not kept in the per-thread buffer afterwards, so one huge
/// event does not pin its memory for the life of the thread.
const KEEP_BUFFER: usize = 64 * 1024;

thread_local! {
    static BUF: RefCell<Vec<u8>> = RefCell::new(Vec::with_capacity(1024));
    /// How many spans this thread is in, as the format layers were told (the sum over
    /// every format layer of the process): while it is 0, an event that takes its span
    /// from the context has none, and no format layer asks the registry for it. A
    /// format layer is told of every span entered while it is in the subscriber; one
    /// added later through `tracing_subscriber::reload` (where none was) does not know
    /// of the spans a thread was already in: until the thread leaves them, its lines
    /// in none of the spans entered since are written without them.
    static ENTERED: Cell<usize> = const { Cell::new(0) };
}

/// The span an event is in, if any.
type SpanOf<'a, S> = Option<tracing_subscriber::registry::SpanRef<'a, S>>;

/// The span `event` is in, as [`Context::event_span`] finds it: without asking the
/// registry when the event takes its span from the context and the thread is in none.
#[inline(always)]
fn event_span<'a, S>(ctx: &'a Context<'_, S>, event: &Event<'_>) -> SpanOf<'a, S>
where
    S: Subscriber + for<'l> LookupSpan<'l>,
{
    if event.is_contextual() && ENTERED.with(Cell::get) == 0 {
        return None;
    }
    registry_span(ctx, event)
}

/// [`Context::event_span`], out of line: the registry is asked only inside a span or for
/// an event with an explicit parent.
#[inline(never)]
fn registry_span<'a, S>(ctx: &'a Context<'_, S>, event: &Event<'_>) -> SpanOf<'a, S>
where
    S: Subscriber + for<'l> LookupSpan<'l>,
{
    ctx.event_span(event)
}

/// A layer that formats every event it sees and hands the line to a [`LineSink`].
///
/// Put a [`PolicyFilter`] in front of it (as a global layer or as
/// its per-layer filter) to decide what it sees.
///
/// # Made by hand, it is only a formatter
///
/// Logpolicy is [`Builder::layer`](crate::Builder::layer) (or [`init`](crate::init)):
/// use that. A `FormatLayer` made with [`FormatLayer::new`] writes what the filter in
/// front of it enables and **nothing of the policy that needs the line or the
/// request**, until [`FormatLayer::with_policy`] links it to that filter:
///
/// | without `with_policy` | with it |
/// |---|---|
/// | request-scope sampling keeps every line | lines of a request not kept are held, written if it fails |
/// | no byte budget (`@max_bytes_per_second`) | the budget is enforced, warnings and errors exempt |
/// | `Stats` count no written events, the ledger no held-back lines | both count |
/// | no in-band burst notices or summaries | both written |
/// | the built-in redaction, or what [`FormatLayer::redaction`] sets | the policy's redaction, pushed changes included |
///
/// It stays public, unlinked, for what it is good at alone: a formatter behind
/// `EnvFilter` or a per-layer filter, and the formats' benchmarks.
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
    style: Style,
    /// The keys of events' fields, and of spans' fields.
    event_keys: Keys,
    span_keys: Keys,
    sink: K,
    clock: Arc<dyn Clock>,
    /// What the policy decides about each event this layer receives.
    gate: OutputGate,
    /// Not linked, and told to redact nothing: fields are written as given.
    unredacted: bool,
    /// Where the trace ids of spans come from.
    trace: trace_ids::Source,
    /// Which spans' fields a line carries.
    spans: Spans,
    /// This layer's own, among the layers of a subscriber that render span fields the
    /// same way (see [`SpanFieldsAs`]).
    id: usize,
}

/// Which spans' fields a line carries: [`FormatLayer::spans`], [`Builder::spans`](crate::Builder::spans).
///
/// # Examples
///
/// ```
/// use logpolicy::format::Spans;
/// use logpolicy::{Format, FormatLayer};
/// use std::sync::{Arc, Mutex};
/// use tracing_subscriber::prelude::*;
///
/// let out = Arc::new(Mutex::new(Vec::<u8>::new()));
/// let subscriber = tracing_subscriber::registry()
///     .with(FormatLayer::new(Format::Json, out.clone()).spans(Spans::All));
/// tracing::subscriber::with_default(subscriber, || {
///     let _request = tracing::info_span!("request", user_id = 42).entered();
///     let _charge = tracing::info_span!("charge", cents = 1250).entered();
///     tracing::info!("charged");
/// });
/// let line: serde_json::Value = serde_json::from_slice(&out.lock().unwrap()).unwrap();
/// assert_eq!(line["span"]["name"], "charge");
/// assert_eq!(line["spans"][0]["name"], "request");
/// assert_eq!(line["spans"][0]["user_id"], 42);
/// assert_eq!(line["spans"][1]["cents"], 1250);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Spans {
    /// The event's own span (its explicit parent, else the current span), as `span`:
    /// the default, the shortest line; a field of an outer span is not on it.
    #[default]
    Innermost,
    /// Also every span the event is in, root first, as `spans` (`tracing.spans` in
    /// `json-ecs`; in `Attributes` in `json-otel`): `tracing_subscriber::fmt`'s JSON
    /// shape, so a request span's `user_id` is on every line inside it. Text lines
    /// write `outer{..}:inner{..}:` as `fmt` does; `logfmt` keeps the innermost span.
    All,
}

impl<K: LineSink> FormatLayer<K> {
    /// A layer writing `format` lines to `sink`, timestamps from the system clock.
    pub fn new(format: Format, sink: K) -> Self {
        SystemClock::warm_up();
        FormatLayer {
            style: Style::new(format, &Service::default()),
            event_keys: Keys::of(format, false),
            span_keys: Keys::of(format, true),
            sink,
            clock: Arc::new(SystemClock),
            gate: OutputGate::new(),
            unredacted: false,
            trace: trace_ids::Source::default(),
            spans: Spans::Innermost,
            id: NEXT_LAYER.fetch_add(1, Ordering::Relaxed),
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
        self.clock = self.gate.link(filter);
        self.unredacted = false;
        self
    }

    /// Bounds the lines held per request that was not kept (default 64 lines, 16 KiB)
    /// and the number of requests holding lines at once (default 1,024); see
    /// [`RequestLimits`].
    #[must_use]
    pub fn request_limits(mut self, limits: RequestLimits) -> Self {
        self.gate.set_request_limits(limits);
        self
    }

    /// Writes the summary of events not written at most once per `secs` seconds
    /// (default 10, at least 1).
    #[must_use]
    pub fn summary_interval(mut self, secs: u64) -> Self {
        self.gate.set_summary_interval(secs);
        self
    }

    /// Names `service` on every line, in its format's place (see the [module
    /// documentation](crate::format)).
    ///
    /// # Examples
    ///
    /// ```
    /// use logpolicy::format::Service;
    /// use logpolicy::{Format, FormatLayer};
    /// use std::sync::{Arc, Mutex};
    /// use tracing_subscriber::prelude::*;
    ///
    /// let out = Arc::new(Mutex::new(Vec::<u8>::new()));
    /// let layer = FormatLayer::new(Format::JsonGcp, out.clone())
    ///     .service(&Service::named("shop").version("1.4.2"));
    /// tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
    ///     tracing::warn!(order = 7, "stock low");
    /// });
    /// let line: serde_json::Value = serde_json::from_slice(&out.lock().unwrap()).unwrap();
    /// assert_eq!(line["severity"], "WARNING");
    /// assert_eq!(line["message"], "stock low");
    /// assert_eq!(line["serviceContext"]["service"], "shop");
    /// assert_eq!(line["serviceContext"]["version"], "1.4.2");
    /// ```
    #[must_use]
    pub fn service(mut self, service: &Service) -> Self {
        let project = self.style.gcp_project.take();
        self.style = Style::new(self.style.format, service);
        self.style.gcp_project = project;
        self
    }

    /// Names the Google Cloud project the traces belong to: `json-gcp` lines then carry
    /// `logging.googleapis.com/trace` as `projects/PROJECT/traces/TRACE_ID`, the form
    /// Cloud Logging links to Cloud Trace (only lines in a span with an OpenTelemetry
    /// context carry one: cargo feature `opentelemetry`).
    #[must_use]
    pub fn gcp_project(mut self, project: impl Into<String>) -> Self {
        self.style.gcp_project = Some(project.into().into());
        self
    }

    /// Which spans' fields each line carries (default [`Spans::Innermost`]; see
    /// [`Spans`]).
    #[must_use]
    pub fn spans(mut self, spans: Spans) -> Self {
        self.spans = spans;
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
        self.gate.set_always_keep(level);
        self
    }

    /// What this layer redacts when it is not linked to a policy (default
    /// [`Redaction::builtin`]; [`Redaction::none`] writes every value as given); a
    /// linked filter's policy decides otherwise (see [`redact`](crate::policy::redact)).
    ///
    /// # Examples
    ///
    /// ```
    /// use logpolicy::policy::{FieldName, Redaction};
    /// use logpolicy::{Format, FormatLayer};
    /// use std::sync::{Arc, Mutex};
    /// use tracing_subscriber::prelude::*;
    ///
    /// let out = Arc::new(Mutex::new(Vec::<u8>::new()));
    /// let redaction = Redaction::builtin().with([FieldName::new("card").unwrap()]);
    /// let subscriber = tracing_subscriber::registry()
    ///     .with(FormatLayer::new(Format::Json, out.clone()).redaction(redaction));
    /// tracing::subscriber::with_default(subscriber, || {
    ///     tracing::info!(card = "4111 1111 1111 1111", password = "hunter2", user = 42, "paid");
    /// });
    /// let line: serde_json::Value = serde_json::from_slice(&out.lock().unwrap()).unwrap();
    /// assert_eq!(line["card"], "[redacted]");
    /// assert_eq!(line["password"], "[redacted]");
    /// assert_eq!(line["user"], 42);
    /// ```
    #[must_use]
    pub fn redaction(mut self, redaction: Redaction) -> Self {
        self.unredacted = redaction.is_empty() && self.gate.linked().is_none();
        self.gate.set_redaction(redaction);
        self
    }

    /// The sink.
    pub fn sink(&self) -> &K {
        &self.sink
    }

    /// Records fields through `record` into `inner`, redacted as `r` says: one load and
    /// one comparison when the callsite's fields are known to match no redacted name.
    #[inline]
    fn record_redacted<V: Visit>(
        &self,
        record: impl FnOnce(&mut dyn Visit),
        mut inner: V,
        meta: &'static Metadata<'static>,
        callsite: Option<&'static CachedSite>,
        r: ActiveRedaction,
    ) -> Counts {
        let mask = if self.unredacted {
            FieldMask::NONE
        } else {
            match callsite.and_then(|c| c.mask(r.id)) {
                Some(mask) => mask,
                None => self.compute_mask(meta, callsite),
            }
        };
        if mask.is_empty() && !r.values {
            record(&mut inner);
            return Counts::default();
        }
        let set = mask.by_name.then(|| self.gate.redaction_set());
        let mut v = Redacting {
            inner,
            mask,
            set: set.as_deref(),
            values: r.values,
            counts: Counts::default(),
        };
        record(&mut v);
        v.counts
    }

    /// Which of `meta`'s fields the redaction in force hides, computed (and kept with the
    /// callsite): once per callsite and redaction.
    #[cold]
    fn compute_mask(
        &self,
        meta: &'static Metadata<'static>,
        callsite: Option<&'static CachedSite>,
    ) -> FieldMask {
        let set = self.gate.redaction_set();
        match callsite {
            Some(c) => c.compute_mask(&set),
            None => set.mask(meta.fields()),
        }
    }

    /// Formats `event` into `buf` (cleared first), stamped `now` (since the Unix epoch),
    /// redacted as `r` says; returns what it redacted. The event path looks its callsite
    /// up once and calls [`FormatLayer::format_site`]; this is the entry for a line made
    /// apart from that path.
    #[allow(dead_code)]
    fn format_into<S>(
        &self,
        buf: &mut Vec<u8>,
        event: &Event<'_>,
        ctx: &Context<'_, S>,
        now: Duration,
        r: ActiveRedaction,
    ) -> Counts
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let callsite = cached_site_of(event, self.event_keys);
        self.format_site(buf, event, callsite, ctx, now, r)
    }

    /// [`FormatLayer::format_into`] with the event's callsite's rendered parts already
    /// looked up (`callsite`: [`cached_site_of`] with this layer's event keys).
    #[inline]
    fn format_site<S>(
        &self,
        buf: &mut Vec<u8>,
        event: &Event<'_>,
        callsite: Option<&'static CachedSite>,
        ctx: &Context<'_, S>,
        now: Duration,
        r: ActiveRedaction,
    ) -> Counts
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        buf.clear();
        let meta = event.metadata();
        let format = self.style.format;
        if format == Format::Text {
            return self.format_text(buf, event, callsite, event_span(ctx, event), now, r);
        }
        let keys = self.event_keys;
        write_time(buf, format, now);
        match callsite {
            Some(c) => buf.extend_from_slice(&c.head),
            None => write_head(buf, keys, meta.level(), meta.target()),
        }
        if !self.style.service.is_empty() {
            buf.extend_from_slice(&self.style.service);
        }
        let record = |v: &mut dyn Visit| event.record(v);
        let counts = match format {
            Format::Logfmt => {
                let fields = LogfmtFields {
                    buf: &mut *buf,
                    callsite,
                    keys,
                };
                let counts = self.record_redacted(record, fields, meta, callsite, r);
                if let Some(span) = event_span(ctx, event) {
                    buf.extend_from_slice(span_open(format));
                    write_logfmt_str(buf, span.name());
                    self.put_span_fields::<LOGFMT, S>(&span, buf, r);
                    self.put_trace_ids::<LOGFMT, S>(buf, &span);
                }
                buf.push(b'\n');
                return counts;
            }
            Format::JsonOtel => {
                let message = callsite.map_or_else(|| message_index(meta), |c| c.message_index());
                let mut attributes = OtelAttributes::default();
                if message != 0 {
                    // No message, or one that comes later: the fields open `Attributes`.
                    attributes.open(buf);
                }
                let fields = OtelFields {
                    inner: JsonFields {
                        buf: &mut *buf,
                        callsite,
                        keys,
                    },
                    message,
                    attributes: &mut attributes,
                };
                let counts = self.record_redacted(record, fields, meta, callsite, r);
                let span = event_span(ctx, event);
                if let Some(span) = &span {
                    attributes.put_span_open(buf, span_open(format));
                    self.put_json_span(buf, span, r);
                    if self.spans == Spans::All {
                        self.put_json_spans(buf, span, r);
                    }
                }
                match span.as_ref().and_then(|s| self.trace_ids::<JSON, S>(s)) {
                    Some(ids) => {
                        attributes.close(buf);
                        trace_ids::write(buf, format, &ids, None);
                    }
                    None => {
                        attributes.finish(buf);
                        return counts;
                    }
                }
                counts
            }
            _ => {
                let fields = JsonFields {
                    buf: &mut *buf,
                    callsite,
                    keys,
                };
                let counts = self.record_redacted(record, fields, meta, callsite, r);
                if let Some(span) = event_span(ctx, event) {
                    buf.extend_from_slice(span_open(format));
                    self.put_json_span(buf, &span, r);
                    if self.spans == Spans::All {
                        self.put_json_spans(buf, &span, r);
                    }
                    self.put_trace_ids::<JSON, S>(buf, &span);
                }
                counts
            }
        };
        buf.extend_from_slice(b"}\n");
        counts
    }

    /// Appends the trace id and span id of `span`'s OpenTelemetry context, if it has
    /// one (only with the `opentelemetry` feature).
    #[inline]
    fn put_trace_ids<const KIND: u8, S>(
        &self,
        buf: &mut Vec<u8>,
        span: &tracing_subscriber::registry::SpanRef<'_, S>,
    ) where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        if let Some(ids) = self.trace_ids::<KIND, S>(span) {
            let project = self.style.gcp_project.as_deref();
            trace_ids::write(buf, self.style.format, &ids, project);
        }
    }

    /// The trace ids of `span`: read once, then kept with its fields (`KIND`'s).
    #[inline]
    fn trace_ids<const KIND: u8, S>(
        &self,
        span: &tracing_subscriber::registry::SpanRef<'_, S>,
    ) -> Option<trace_ids::TraceIds>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        if !trace_ids::ENABLED {
            return None;
        }
        let cached = |span: &tracing_subscriber::registry::SpanRef<'_, S>| {
            let ext = span.extensions();
            ext.get::<SpanFieldsAs<KIND>>()
                .and_then(|f| f.of(self.id))
                .and_then(|f| f.trace.get())
        };
        if let Some(ids) = cached(span) {
            return ids;
        }
        // Not holding the extensions: reading the context locks them.
        let ids = self.trace.of(span);
        if let Some(f) = span
            .extensions()
            .get::<SpanFieldsAs<KIND>>()
            .and_then(|f| f.of(self.id))
        {
            f.trace.set(ids);
        }
        if ids.is_none() && self.trace.missing_context() {
            let [what, source, error] = trace_ids::NO_CONTEXT_WARNING;
            let mut line = Vec::with_capacity(512);
            own_line::write_skipped(
                &mut line,
                &self.style,
                self.clock.now(),
                what,
                source,
                error,
            );
            self.sink
                .write_line(&tracing_core::Level::WARN, true, &line);
        }
        ids
    }

    /// Appends the name of `span` (its opening quote written), the rest of its JSON
    /// object and its closing brace.
    fn put_json_span<S>(
        &self,
        buf: &mut Vec<u8>,
        span: &tracing_subscriber::registry::SpanRef<'_, S>,
        r: ActiveRedaction,
    ) where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        write_escaped(buf, span.name());
        buf.push(b'"');
        self.put_span_fields::<JSON, S>(span, buf, r);
        buf.push(b'}');
    }

    /// Appends the list of every span from the root to `leaf`, each as its JSON object
    /// ([`Spans::All`]).
    #[cold]
    fn put_json_spans<S>(
        &self,
        buf: &mut Vec<u8>,
        leaf: &tracing_subscriber::registry::SpanRef<'_, S>,
        r: ActiveRedaction,
    ) where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        buf.extend_from_slice(spans_open(self.style.format));
        for_each_from_root(leaf, |i, span| {
            if i > 0 {
                buf.push(b',');
            }
            buf.extend_from_slice(b"{\"name\":\"");
            self.put_json_span(buf, span, r);
        });
        buf.push(b']');
    }

    /// [`FormatLayer::format_into`] for [`Format::Text`], the event in `span`.
    fn format_text<S: Subscriber + for<'a> LookupSpan<'a>>(
        &self,
        buf: &mut Vec<u8>,
        event: &Event<'_>,
        callsite: Option<&'static CachedSite>,
        span: Option<tracing_subscriber::registry::SpanRef<'_, S>>,
        now: Duration,
        r: ActiveRedaction,
    ) -> Counts {
        let meta = event.metadata();
        write_since_epoch(buf, now);
        match callsite {
            Some(c) => buf.extend_from_slice(&c.head),
            None => write_head(buf, Keys::Text, meta.level(), meta.target()),
        }
        if let Some(span) = span {
            buf.push(b' ');
            if let (Spans::All, Some(parent)) = (self.spans, span.parent()) {
                for_each_from_root(&parent, |_, outer| self.put_text_span(buf, outer, r));
            }
            self.put_text_span(buf, &span, r);
        }
        let counts = self.record_redacted(
            |v| event.record(v),
            TextFields {
                buf: &mut *buf,
                callsite,
            },
            meta,
            callsite,
            r,
        );
        buf.push(b'\n');
        counts
    }

    /// Appends `span` as text lines write it: `name{fields}:`.
    fn put_text_span<S: Subscriber + for<'a> LookupSpan<'a>>(
        &self,
        buf: &mut Vec<u8>,
        span: &tracing_subscriber::registry::SpanRef<'_, S>,
        r: ActiveRedaction,
    ) {
        buf.extend_from_slice(span.name().as_bytes());
        buf.push(b'{');
        let at = buf.len();
        self.put_span_fields::<TEXT, S>(span, buf, r);
        if buf.get(at) == Some(&b' ') {
            buf.remove(at);
        }
        buf.extend_from_slice(b"}:");
    }

    /// Appends the pre-rendered fields of `span`, rendered again first if what is
    /// redacted changed since (a name added by a policy pushed while the span was open).
    fn put_span_fields<const KIND: u8, S>(
        &self,
        span: &tracing_subscriber::registry::SpanRef<'_, S>,
        buf: &mut Vec<u8>,
        r: ActiveRedaction,
    ) where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        {
            let ext = span.extensions();
            match ext.get::<SpanFieldsAs<KIND>>().and_then(|f| f.of(self.id)) {
                None => return,
                Some(f) if f.redaction_id == r.id => {
                    buf.extend_from_slice(&f.bytes);
                    return;
                }
                Some(_) => {}
            }
        }
        let mut ext = span.extensions_mut();
        if let Some(f) = ext
            .get_mut::<SpanFieldsAs<KIND>>()
            .and_then(|f| f.of_mut(self.id))
        {
            let set = self.gate.redaction_set();
            let n = f.redact_again(span.metadata(), &set, self.style.format);
            self.gate.redacted(n, 0);
            buf.extend_from_slice(&f.bytes);
        }
    }

    /// Records span fields (at creation or later) into `fields`, redacted as now.
    fn record_span_fields(
        &self,
        record: impl FnOnce(&mut dyn Visit),
        holds: impl FnOnce(&CachedSite) -> bool,
        fields: &mut SpanFields,
        meta: &'static Metadata<'static>,
    ) {
        let r = self.gate.active_redaction();
        if fields.redaction_id != r.id && !fields.bytes.is_empty() {
            let set = self.gate.redaction_set();
            let n = fields.redact_again(meta, &set, self.style.format);
            self.gate.redacted(n, 0);
        }
        fields.redaction_id = r.id;
        let keys = self.span_keys;
        // The rendered keys only for values of the span's own callsite.
        let callsite = cached_site(meta, keys).filter(|c| holds(c));
        let SpanFields { bytes, entries, .. } = fields;
        let counts = match span_kind(self.style.format) {
            JSON => {
                let inner = JsonFields {
                    buf: bytes,
                    callsite,
                    keys,
                };
                self.record_redacted(record, Tracked { inner, entries }, meta, callsite, r)
            }
            LOGFMT => {
                let inner = LogfmtFields {
                    buf: bytes,
                    callsite,
                    keys,
                };
                self.record_redacted(record, Tracked { inner, entries }, meta, callsite, r)
            }
            _ => {
                let inner = TextFields {
                    buf: bytes,
                    callsite,
                };
                self.record_redacted(record, Tracked { inner, entries }, meta, callsite, r)
            }
        };
        self.gate.redacted(counts.by_name, counts.by_value);
    }
}

impl<K> std::fmt::Debug for FormatLayer<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FormatLayer")
            .field("format", &self.style.format)
            .finish()
    }
}

/// A span's fields, pre-formatted when recorded, with where each one is (to redact one
/// again when a policy adds its name while the span is open).
#[derive(Default)]
struct SpanFields {
    bytes: Vec<u8>,
    /// Per field recorded: its index in the span's field set and its bytes.
    entries: Vec<fields::Entry>,
    /// The redaction they were rendered with.
    redaction_id: u32,
    /// The trace ids of the span, once read.
    trace: trace_ids::Cached,
}

impl SpanFields {
    /// Renders again, as `format` renders span fields, the fields `set` redacts that
    /// were written; returns how many.
    fn redact_again(
        &mut self,
        meta: &'static Metadata<'static>,
        set: &crate::enforce::RedactionSet,
        format: Format,
    ) -> u64 {
        let keys = Keys::of(format, true);
        self.redaction_id = set.id;
        let names = meta.fields();
        let hide = |e: &fields::Entry| {
            names
                .iter()
                .nth(usize::from(e.index))
                .filter(|f| set.redaction.redacts(f.name()))
        };
        if !self
            .entries
            .iter()
            .any(|e| !e.redacted && hide(e).is_some())
        {
            return 0;
        }
        let mut n = 0;
        let mut bytes = Vec::with_capacity(self.bytes.len());
        for e in &mut self.entries {
            let start = bytes.len();
            match hide(e) {
                Some(field) if !e.redacted => {
                    let marker = crate::policy::redact::REDACTED;
                    let buf = &mut bytes;
                    match span_kind(format) {
                        LOGFMT => LogfmtFields {
                            buf,
                            callsite: None,
                            keys,
                        }
                        .record_str(&field, marker),
                        TEXT => TextFields {
                            buf,
                            callsite: None,
                        }
                        .record_str(&field, marker),
                        _ => JsonFields {
                            buf,
                            callsite: None,
                            keys,
                        }
                        .record_str(&field, marker),
                    }
                    e.redacted = true;
                    n += 1;
                }
                _ => bytes.extend_from_slice(&self.bytes[e.start as usize..e.end as usize]),
            }
            e.start = start as u32;
            e.end = bytes.len() as u32;
        }
        self.bytes = bytes;
        n
    }
}

/// The kinds of pre-rendered span fields: JSON (`,"k":v...`, every JSON format), logfmt
/// (` span.k=v...`) and text (` k=v...`).
const JSON: u8 = 0;
const LOGFMT: u8 = 1;
const TEXT: u8 = 2;

/// The kind of span fields `format`'s lines carry.
const fn span_kind(format: Format) -> u8 {
    match format {
        Format::Logfmt => LOGFMT,
        Format::Text => TEXT,
        _ => JSON,
    }
}

/// The ids of format layers, each its own.
static NEXT_LAYER: AtomicUsize = AtomicUsize::new(0);

/// A span's fields rendered as `KIND`: the span extension of the formats of that kind.
/// Each format layer of the subscriber keeps its own (two may redact differently): the
/// first one's inline, any other's beside it.
struct SpanFieldsAs<const KIND: u8> {
    first: (usize, SpanFields),
    more: Vec<(usize, SpanFields)>,
}

impl<const KIND: u8> SpanFieldsAs<KIND> {
    /// The fields the layer `id` rendered.
    #[inline]
    fn of(&self, id: usize) -> Option<&SpanFields> {
        if self.first.0 == id {
            return Some(&self.first.1);
        }
        self.more.iter().find(|(i, _)| *i == id).map(|(_, f)| f)
    }

    /// [`SpanFieldsAs::of`], to change.
    fn of_mut(&mut self, id: usize) -> Option<&mut SpanFields> {
        if self.first.0 == id {
            return Some(&mut self.first.1);
        }
        self.more.iter_mut().find(|(i, _)| *i == id).map(|(_, f)| f)
    }

    /// Keeps `fields` as the layer `id`'s, in the span's extensions.
    fn insert(
        ext: &mut tracing_subscriber::registry::ExtensionsMut<'_>,
        id: usize,
        fields: SpanFields,
    ) {
        match ext.get_mut::<Self>() {
            Some(all) => match all.of_mut(id) {
                Some(mine) => *mine = fields,
                None => all.more.push((id, fields)),
            },
            None => ext.insert(SpanFieldsAs::<KIND> {
                first: (id, fields),
                more: Vec::new(),
            }),
        }
    }
}

impl<S, K> tracing_subscriber::Layer<S> for FormatLayer<K>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    K: LineSink,
{
    fn on_register_dispatch(&self, subscriber: &tracing_core::Dispatch) {
        self.trace.register(subscriber);
    }

    fn on_enter(&self, _: &Id, _: Context<'_, S>) {
        let _ = ENTERED.try_with(|n| n.set(n.get() + 1));
    }

    fn on_exit(&self, _: &Id, _: Context<'_, S>) {
        let _ = ENTERED.try_with(|n| n.set(n.get().saturating_sub(1)));
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        self.gate.open_span(attrs, &span);
        let mut fields = SpanFields::default();
        self.record_span_fields(
            |v| attrs.record(v),
            |c| c.holds_values(attrs.values()),
            &mut fields,
            attrs.metadata(),
        );
        let mut ext = span.extensions_mut();
        match span_kind(self.style.format) {
            JSON => SpanFieldsAs::<JSON>::insert(&mut ext, self.id, fields),
            LOGFMT => SpanFieldsAs::<LOGFMT>::insert(&mut ext, self.id, fields),
            _ => SpanFieldsAs::<TEXT>::insert(&mut ext, self.id, fields),
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut ext = span.extensions_mut();
        let fields = match span_kind(self.style.format) {
            JSON => ext
                .get_mut::<SpanFieldsAs<JSON>>()
                .and_then(|f| f.of_mut(self.id)),
            LOGFMT => ext
                .get_mut::<SpanFieldsAs<LOGFMT>>()
                .and_then(|f| f.of_mut(self.id)),
            _ => ext
                .get_mut::<SpanFieldsAs<TEXT>>()
                .and_then(|f| f.of_mut(self.id)),
        };
        if let Some(fields) = fields {
            self.record_span_fields(
                |v| values.record(v),
                |c| c.holds_record(values),
                fields,
                span.metadata(),
            );
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        with_buffer(|buf| self.write_event(buf, event, &ctx));
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(&id) {
            self.gate.close_span(&span);
        }
    }
}

impl<K: LineSink> FormatLayer<K> {
    /// Writes what the gate decides about `event`: its line, the lines that must come
    /// before it (notices, the context its request held) and the summary due after it.
    fn write_event<S>(&self, buf: &mut Vec<u8>, event: &Event<'_>, ctx: &Context<'_, S>)
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let now = self.clock.since_epoch();
        let meta = event.metadata();
        let level = meta.level();
        // One lookup of the callsite: its rendered keys, its redaction mask and its row
        // in the ledger (where the writer counts the line).
        let callsite = cached_site_of(event, self.event_keys);
        let row = match callsite {
            Some(c) => c.row(),
            None => crate::ledger::row_of_static(meta),
        };
        let Some(gate) = self.gate.linked() else {
            // No policy linked: every event is written.
            let r = self.gate.active_redaction();
            self.format_site(buf, event, callsite, ctx, now, r);
            self.sink
                .write_row_line(row, level, self.gate.keeps_always(level), buf);
            return;
        };
        if let Some(notices) = gate.take_notices() {
            for notice in notices {
                buf.clear();
                own_line::write_notice(buf, &self.style, UNIX_EPOCH + now, &notice);
                self.sink.write_line(&tracing_core::Level::WARN, true, buf);
            }
        }
        // Most events are written with no request rule, budget or recording rule in
        // force: for them no `Decision` is built and moved.
        let mut write = match gate.plain_write(level) {
            Some(write) => write,
            None => match gate.decide(event, ctx, now, callsite.map(|c| &c.record)) {
                Decision::Write(write) => write,
                Decision::Hold(holder) => {
                    let r = holder.redaction;
                    let redacted = self.format_site(buf, event, callsite, ctx, now, r);
                    self.gate.redacted(redacted.by_name, redacted.by_value);
                    holder.hold(buf, row);
                    return;
                }
                Decision::Drop(reason) => return gate.dropped(level, row, reason),
                Decision::Record(recording) => {
                    // Redacted as written, but not counted: the counts are of values
                    // written (a recorded line may never be).
                    self.format_site(buf, event, callsite, ctx, now, recording.redaction);
                    mark_replayed(self.style.format, buf);
                    return recording.record(now, row, buf);
                }
            },
        };
        if let Some(held) = write.context.as_mut() {
            for (lvl, held_row, line) in held.lines() {
                self.sink.write_row_line(held_row, &lvl, true, line);
            }
        }
        let redacted = self.format_site(buf, event, callsite, ctx, now, write.redaction);
        self.sink.write_row_line(row, level, write.always_keep, buf);
        gate.written(&write, level, buf.len());
        self.gate.redacted(redacted.by_name, redacted.by_value);
        if let Some(summary) = gate.summary_due(now) {
            buf.clear();
            own_line::write_not_written(buf, &self.style, UNIX_EPOCH + now, &summary);
            self.sink.write_line(&summary.level(), true, buf);
        }
    }
}

/// Marks a formatted line as replayed: a recorded line is written only by a replay, so
/// it is recorded with the key `"replayed":true` closing its JSON object
/// (` replayed=true` ending a logfmt or text line). A line without the end its format
/// gives it is left as it is.
#[inline]
pub(crate) fn mark_replayed(format: Format, line: &mut Vec<u8>) {
    // Each end a constant, so that each is copied by a fixed-size store.
    if matches!(format, Format::Logfmt | Format::Text) {
        if line.last() == Some(&b'\n') {
            line.pop();
            line.extend_from_slice(b" replayed=true\n");
        }
    } else if line.ends_with(b"}\n") {
        line.truncate(line.len() - 2);
        line.extend_from_slice(b",\"replayed\":true}\n");
    }
}

/// Runs `f` on every span from the root to `leaf` (with its position): without
/// allocating for up to 16 spans (`Scope::from_root` collects them into a `Vec`), the
/// allocating way for deeper ones.
fn for_each_from_root<'a, S>(
    leaf: &tracing_subscriber::registry::SpanRef<'a, S>,
    mut f: impl FnMut(usize, &tracing_subscriber::registry::SpanRef<'a, S>),
) where
    S: Subscriber + for<'l> LookupSpan<'l>,
{
    let mut spans: [Option<tracing_subscriber::registry::SpanRef<'a, S>>; 16] = Default::default();
    let mut n = 0;
    for span in leaf.scope() {
        let Some(slot) = spans.get_mut(n) else {
            for (i, span) in leaf.scope().from_root().enumerate() {
                f(i, &span);
            }
            return;
        };
        *slot = Some(span);
        n += 1;
    }
    for (i, span) in spans[..n].iter().rev().flatten().enumerate() {
        f(i, span);
    }
}

/// Runs `f` with the per-thread line buffer (or a fresh one if re-entered).
fn with_buffer(f: impl FnOnce(&mut Vec<u8>)) {
    BUF.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => {
            f(&mut buf);
            if buf.capacity() > KEEP_BUFFER {
                *buf = Vec::with_capacity(1024);
            }
        }
        // Re-entered (a sink that logs): use a fresh buffer rather than fail.
        Err(_) => f(&mut Vec::with_capacity(256)),
    });
}

#[cfg(test)]
mod tests;
