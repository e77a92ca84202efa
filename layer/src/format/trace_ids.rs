//! The trace id and span id of an event's span, written in each format's fields for
//! them. They are read from `tracing-opentelemetry`'s context of the span with the cargo
//! feature `opentelemetry`; without it no span has any, and nothing of OpenTelemetry is
//! compiled.

use tracing_core::Subscriber;
use tracing_subscriber::registry::{LookupSpan, SpanRef};

use super::escape::write_escaped;
use super::Format;

/// Whether spans can carry ids (the `opentelemetry` feature): without it nothing is
/// looked up.
pub(crate) const ENABLED: bool = cfg!(feature = "opentelemetry");

/// A span's W3C trace context ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TraceIds {
    pub(crate) trace: [u8; 16],
    pub(crate) span: [u8; 8],
}

/// Where a layer reads the ids of a span: the subscriber it is part of, whose
/// `tracing-opentelemetry` layer keeps each span's context.
#[derive(Debug, Default)]
pub(crate) struct Source {
    #[cfg(feature = "opentelemetry")]
    dispatch: std::sync::OnceLock<tracing_core::dispatcher::WeakDispatch>,
    /// A span had no OpenTelemetry context ([`NO_CONTEXT`]), and that was reported
    /// ([`REPORTED`]).
    #[cfg(feature = "opentelemetry")]
    missing: std::sync::atomic::AtomicU8,
}

#[cfg(feature = "opentelemetry")]
const NO_CONTEXT: u8 = 1;
#[cfg(feature = "opentelemetry")]
const REPORTED: u8 = 2;

/// What the warning about spans without an OpenTelemetry context says: the message, its
/// source, and what is wrong (see [`Source::missing_context`]).
pub(crate) const NO_CONTEXT_WARNING: [&str; 3] = [
    "no trace ids on the lines: spans carry no OpenTelemetry context",
    "opentelemetry",
    concat!(
        "the `opentelemetry` feature reads the span context of tracing-opentelemetry 0.34 ",
        "(opentelemetry 0.33); this subscriber has no layer of that version (a layer of ",
        "another version, such as 0.32 with opentelemetry 0.31, is not read: use 0.34)"
    ),
];

impl Source {
    /// Remembers the subscriber the layer was registered with.
    #[inline]
    pub(crate) fn register(&self, _subscriber: &tracing_core::Dispatch) {
        #[cfg(feature = "opentelemetry")]
        let _ = self.dispatch.set(_subscriber.downgrade());
    }

    /// The ids of `span`'s OpenTelemetry context, if it has a valid one.
    #[cfg(feature = "opentelemetry")]
    pub(crate) fn of<S>(&self, span: &SpanRef<'_, S>) -> Option<TraceIds>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        use opentelemetry::trace::TraceContextExt;
        // Not `dispatcher::get_default`: while an event is dispatched it is `none`.
        let dispatch = self.dispatch.get()?.upgrade()?;
        let Some(cx) = tracing_opentelemetry::get_otel_context(&span.id(), &dispatch) else {
            // No layer of the version this feature reads (or none at all).
            let _ = self.missing.compare_exchange(
                0,
                NO_CONTEXT,
                std::sync::atomic::Ordering::Relaxed,
                std::sync::atomic::Ordering::Relaxed,
            );
            return None;
        };
        let otel = cx.span();
        let ids = otel.span_context();
        ids.is_valid().then(|| TraceIds {
            trace: ids.trace_id().to_bytes(),
            span: ids.span_id().to_bytes(),
        })
    }

    /// Whether a span was found without an OpenTelemetry context and this was not said
    /// yet: true once, for one `warn` line ([`NO_CONTEXT_WARNING`]), so that trace ids
    /// missing for a layer of another version do not go unnoticed.
    #[inline]
    pub(crate) fn missing_context(&self) -> bool {
        #[cfg(feature = "opentelemetry")]
        return self.missing.load(std::sync::atomic::Ordering::Relaxed) == NO_CONTEXT
            && self
                .missing
                .compare_exchange(
                    NO_CONTEXT,
                    REPORTED,
                    std::sync::atomic::Ordering::Relaxed,
                    std::sync::atomic::Ordering::Relaxed,
                )
                .is_ok();
        #[cfg(not(feature = "opentelemetry"))]
        return false;
    }

    /// Without the `opentelemetry` feature no span carries ids.
    #[cfg(not(feature = "opentelemetry"))]
    #[inline(always)]
    pub(crate) fn of<S>(&self, _: &SpanRef<'_, S>) -> Option<TraceIds>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        None
    }
}

/// A span's ids once read: they do not change after (reading them starts the
/// OpenTelemetry span, whose parent can no longer be set), and reading them costs about
/// a microsecond (the context is cloned under a lock) where this costs a copy.
#[derive(Debug, Default)]
pub(crate) struct Cached {
    #[cfg(feature = "opentelemetry")]
    ids: std::sync::OnceLock<Option<TraceIds>>,
}

impl Cached {
    /// The ids, if they were read.
    #[inline(always)]
    pub(crate) fn get(&self) -> Option<Option<TraceIds>> {
        #[cfg(feature = "opentelemetry")]
        return self.ids.get().copied();
        #[cfg(not(feature = "opentelemetry"))]
        return Some(None);
    }

    /// Keeps the ids read.
    #[inline(always)]
    pub(crate) fn set(&self, _ids: Option<TraceIds>) {
        #[cfg(feature = "opentelemetry")]
        let _ = self.ids.set(_ids);
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn write_hex(buf: &mut Vec<u8>, bytes: &[u8]) {
    for b in bytes {
        buf.push(HEX[usize::from(b >> 4)]);
        buf.push(HEX[usize::from(b & 0xf)]);
    }
}

/// The lower 64 bits of a trace id or a span id, as Datadog correlates them (decimal).
fn write_low64(buf: &mut Vec<u8>, bytes: &[u8]) {
    let mut low = [0u8; 8];
    low.copy_from_slice(&bytes[bytes.len() - 8..]);
    buf.extend_from_slice(
        itoa::Buffer::new()
            .format(u64::from_be_bytes(low))
            .as_bytes(),
    );
}

/// Appends `ids` where `format` puts them (`gcp_project`: the Google Cloud project the
/// trace belongs to, for `json-gcp`'s `projects/PROJECT/traces/ID` form). `text` lines
/// carry none.
pub(crate) fn write(buf: &mut Vec<u8>, format: Format, ids: &TraceIds, gcp_project: Option<&str>) {
    let (trace_key, span_key): (&[u8], &[u8]) = match format {
        Format::Json => (b",\"trace_id\":\"", b"\",\"span_id\":\""),
        Format::JsonOtel => (b",\"TraceId\":\"", b"\",\"SpanId\":\""),
        Format::JsonEcs => (b",\"trace.id\":\"", b"\",\"span.id\":\""),
        Format::JsonGcp => (
            b",\"logging.googleapis.com/trace\":\"",
            b"\",\"logging.googleapis.com/spanId\":\"",
        ),
        Format::JsonDatadog => {
            buf.extend_from_slice(b",\"dd.trace_id\":\"");
            write_low64(buf, &ids.trace);
            buf.extend_from_slice(b"\",\"dd.span_id\":\"");
            write_low64(buf, &ids.span);
            buf.push(b'"');
            return;
        }
        Format::Logfmt => {
            buf.extend_from_slice(b" trace_id=");
            write_hex(buf, &ids.trace);
            buf.extend_from_slice(b" span_id=");
            write_hex(buf, &ids.span);
            return;
        }
        Format::Text => return,
    };
    buf.extend_from_slice(trace_key);
    if let (Format::JsonGcp, Some(project)) = (format, gcp_project) {
        buf.extend_from_slice(b"projects/");
        write_escaped(buf, project);
        buf.extend_from_slice(b"/traces/");
    }
    write_hex(buf, &ids.trace);
    buf.extend_from_slice(span_key);
    write_hex(buf, &ids.span);
    buf.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_written_as_each_pipeline_correlates_them() {
        let ids = TraceIds {
            trace: *b"\x4b\xf9\x2f\x35\x77\xb3\x4d\xa6\xa3\xce\x92\x9d\x0e\x0e\x47\x36",
            span: *b"\x00\xf0\x67\xaa\x0b\xa9\x02\xb7",
        };
        let line = |format, project| {
            let mut buf = Vec::new();
            write(&mut buf, format, &ids, project);
            String::from_utf8(buf).unwrap()
        };
        assert_eq!(
            line(Format::Json, None),
            ",\"trace_id\":\"4bf92f3577b34da6a3ce929d0e0e4736\",\"span_id\":\"00f067aa0ba902b7\""
        );
        assert_eq!(
            line(Format::JsonGcp, Some("shop-prod")),
            ",\"logging.googleapis.com/trace\":\"projects/shop-prod/traces/4bf92f3577b34da6a3ce929d0e0e4736\",\"logging.googleapis.com/spanId\":\"00f067aa0ba902b7\""
        );
        assert_eq!(
            line(Format::JsonDatadog, None),
            format!(
                ",\"dd.trace_id\":\"{}\",\"dd.span_id\":\"{}\"",
                0xa3ce929d0e0e4736u64, 0x00f067aa0ba902b7u64
            )
        );
        assert_eq!(
            line(Format::Logfmt, None),
            " trace_id=4bf92f3577b34da6a3ce929d0e0e4736 span_id=00f067aa0ba902b7"
        );
        assert_eq!(line(Format::Text, None), "");
    }
}
