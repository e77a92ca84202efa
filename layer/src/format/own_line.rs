//! The layer's own lines (target `logpolicy`), in the line format of the output: the
//! burst limiter's notices, the periodic summary of events not written, and the writer's
//! report of dropped lines. One writer for all of them, so they read alike.

use std::fmt::Write as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::escape::{write_escaped, Raw};
use super::Format;
use crate::clock::{format_rfc3339, write_rfc3339};
use crate::enforce::{NotWritten, Notice};
use crate::level::{LEVELS, LEVEL_NAMES};

/// A value in one of the layer's own lines.
enum Val<'a> {
    Str(&'a str),
    Num(u64),
    /// Per-level counts, the levels with a count only: `{"info":3}` (JSON) or
    /// `{info:3}` (text).
    Levels(&'a [u64; LEVELS]),
    /// Named counts, every one: `{"a":0,"b":3}` (JSON) or `{a:0,b:3}` (text).
    Counts(&'a [(&'a str, u64)]),
}

/// Appends one of the layer's own lines (with its `\n`) to `buf`.
fn write_own_line(
    buf: &mut Vec<u8>,
    format: Format,
    now: SystemTime,
    level: &str,
    msg: &str,
    fields: &[(&str, Val<'_>)],
) {
    let json = format == Format::Json;
    if json {
        buf.extend_from_slice(b"{\"ts\":\"");
        write_rfc3339(buf, now);
        let _ = write!(
            Raw(buf),
            "\",\"level\":\"{level}\",\"target\":\"logpolicy\",\"msg\":\""
        );
        write_escaped(buf, msg);
        buf.push(b'"');
    } else {
        write_rfc3339(buf, now);
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
        let mut counts = |pairs: &mut dyn Iterator<Item = (&str, u64)>| {
            buf.push(b'{');
            let mut sep = "";
            for (name, n) in pairs {
                let _ = write!(Raw(buf), "{sep}{quote}{name}{quote}:{n}");
                sep = ",";
            }
            buf.push(b'}');
        };
        match v {
            Val::Str(s) => {
                buf.push(b'"');
                write_escaped(buf, s);
                buf.push(b'"');
            }
            Val::Num(n) => {
                let _ = write!(Raw(buf), "{n}");
            }
            Val::Levels(levels) => counts(
                &mut LEVEL_NAMES
                    .iter()
                    .copied()
                    .zip(levels.iter().copied())
                    .filter(|(_, n)| *n > 0),
            ),
            Val::Counts(pairs) => counts(&mut pairs.iter().copied()),
        }
    }
    buf.extend_from_slice(if json { b"}\n" } else { b"\n" });
}

/// Appends a notice of the burst limiter.
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
                    Val::Str(&format_rfc3339(
                        UNIX_EPOCH + Duration::from_secs(summary.second),
                    )),
                ),
                ("events", Val::Num(summary.events)),
                ("dropped", Val::Num(summary.dropped)),
            ],
        ),
    }
}

/// Appends the report of a directive from the environment that was skipped, e.g.
/// `{"ts":"…","level":"WARN","target":"logpolicy","msg":"skipped an invalid directive","source":"RUST_LOG","error":"invalid level \"verbose\" in directive \"shop=verbose\" (…)"}`.
pub(crate) fn write_skipped_directive(
    buf: &mut Vec<u8>,
    format: Format,
    now: SystemTime,
    source: &str,
    error: &str,
) {
    write_own_line(
        buf,
        format,
        now,
        "WARN",
        "skipped an invalid directive",
        &[("source", Val::Str(source)), ("error", Val::Str(error))],
    );
}

/// Appends the periodic summary of events not written, e.g.
/// `{"ts":"…","level":"INFO","target":"logpolicy","msg":"events not written","sampled":{"info":90},"burst":{},"budget":{}}`,
/// with `"redacted":{"name":3,"value":0}` at the end when values were redacted since
/// the last one.
pub(crate) fn write_not_written(
    buf: &mut Vec<u8>,
    format: Format,
    now: SystemTime,
    summary: &NotWritten,
) {
    let name = if summary.level() == tracing_core::Level::WARN {
        "WARN"
    } else {
        "INFO"
    };
    let redacted = [
        ("name", summary.redacted.by_name),
        ("value", summary.redacted.by_value),
    ];
    let mut fields = vec![
        ("sampled", Val::Levels(&summary.counts[0])),
        ("burst", Val::Levels(&summary.counts[1])),
        ("budget", Val::Levels(&summary.counts[2])),
    ];
    if summary.redacted.total() > 0 {
        fields.push(("redacted", Val::Counts(&redacted)));
    }
    write_own_line(buf, format, now, name, "events not written", &fields);
}

/// Appends the writer's report of dropped lines (always JSON), e.g.
/// `{"ts":"…","level":"WARN","target":"logpolicy","msg":"dropped events","reason":{"queue_full":31,…,"evicted":0},"trace":0,…,"error":0,"total":31}`:
/// every reason and every level, with their count (zero too), and the total.
pub(crate) fn write_dropped_events(
    buf: &mut Vec<u8>,
    now: SystemTime,
    by_reason: &[(&str, u64)],
    by_level: &[u64; LEVELS],
) {
    let mut fields: Vec<(&str, Val<'_>)> = Vec::with_capacity(LEVELS + 2);
    fields.push(("reason", Val::Counts(by_reason)));
    fields.extend(
        LEVEL_NAMES
            .iter()
            .zip(by_level)
            .map(|(name, n)| (*name, Val::Num(*n))),
    );
    fields.push(("total", Val::Num(by_level.iter().sum())));
    write_own_line(buf, Format::Json, now, "WARN", "dropped events", &fields);
}
