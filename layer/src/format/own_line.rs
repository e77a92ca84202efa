//! The layer's own lines (target `logpolicy`), in the line format of the output: the
//! burst limiter's notices, the periodic summary of events not written, the writer's
//! report of dropped lines, and the lines that say when a pushed layer started and
//! stopped applying. One writer for all of them, so they read alike.

use std::fmt::Write as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::escape::{write_escaped, Raw};
use super::schema::{write_head, write_key, write_logfmt_str, write_time, Keys};
use super::{Format, Style};
use crate::clock::format_rfc3339;
#[cfg(feature = "admin")]
use crate::enforce::LayerChange;
use crate::enforce::{NotWritten, Notice};
use crate::level::{LEVELS, LEVEL_NAMES};

/// A value in one of the layer's own lines.
enum Val<'a> {
    Str(&'a str),
    Num(u64),
    /// A signed number (only the admin endpoint's lines have one).
    #[cfg_attr(not(feature = "admin"), allow(dead_code))]
    Int(i64),
    /// Per-level counts, the levels with a count only: `{"info":3}` (JSON), `{info:3}`
    /// (text) or `key.info=3` (logfmt).
    Levels(&'a [u64; LEVELS]),
    /// Named counts, every one: `{"a":0,"b":3}` (JSON), `{a:0,b:3}` (text) or
    /// `key.a=0 key.b=3` (logfmt).
    Counts(&'a [(&'a str, u64)]),
}

/// Appends one of the layer's own lines (with its `\n`) to `buf`, in `style`: the head
/// of an event of `level` from target `logpolicy` with message `msg`, then `fields`
/// where the format puts an event's fields (`json-otel`: in `Attributes`; `json-ecs`:
/// under `logpolicy`, clear of ECS's own field sets).
fn write_own_line(
    buf: &mut Vec<u8>,
    style: &Style,
    now: SystemTime,
    level: tracing_core::Level,
    msg: &str,
    fields: &[(&str, Val<'_>)],
) {
    let format = style.format;
    write_time(
        buf,
        format,
        now.duration_since(UNIX_EPOCH).unwrap_or_default(),
    );
    let keys = Keys::of(format, false);
    match format {
        Format::Text => {
            let _ = write!(Raw(buf), " {:>5} logpolicy: {msg}", level.as_str());
        }
        Format::Logfmt => {
            write_head(buf, keys, &level, "logpolicy");
            buf.extend_from_slice(&style.service);
            write_key(buf, keys, "message");
            write_logfmt_str(buf, msg);
        }
        _ => {
            write_head(buf, keys, &level, "logpolicy");
            buf.extend_from_slice(&style.service);
            write_key(buf, keys, "message");
            buf.push(b'"');
            write_escaped(buf, msg);
            buf.push(b'"');
        }
    }
    let nest: Option<&[u8]> = match format {
        Format::JsonOtel => Some(b",\"Attributes\":{"),
        Format::JsonEcs => Some(b",\"logpolicy\":{"),
        _ => None,
    };
    let mut first = nest.is_some();
    if let (Some(open), false) = (nest, fields.is_empty()) {
        buf.extend_from_slice(open);
    }
    for (k, v) in fields {
        match format {
            Format::Logfmt => write_logfmt_field(buf, k, v),
            Format::Text => write_nested_field(buf, k, v, " ", "=", ""),
            _ => {
                let sep = if first { "\"" } else { ",\"" };
                first = false;
                write_nested_field(buf, k, v, sep, "\":", "\"");
            }
        }
    }
    if nest.is_some() && !fields.is_empty() {
        buf.push(b'}');
    }
    buf.extend_from_slice(if format.is_json() { b"}\n" } else { b"\n" });
}

/// Appends `k` and `v` in JSON or text: `{sep}k{assign}v`, counts as an object whose
/// names are quoted with `quote`.
fn write_nested_field(
    buf: &mut Vec<u8>,
    k: &str,
    v: &Val<'_>,
    sep: &str,
    assign: &str,
    quote: &str,
) {
    let _ = write!(Raw(buf), "{sep}{k}{assign}");
    let mut counts = |pairs: &mut dyn Iterator<Item = (&str, u64)>| {
        buf.push(b'{');
        let mut sep = "";
        for (name, n) in pairs {
            let _ = write!(Raw(buf), "{sep}{quote}");
            if quote.is_empty() {
                buf.extend_from_slice(name.as_bytes());
            } else {
                write_escaped(buf, name);
            }
            let _ = write!(Raw(buf), "{quote}:{n}");
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
        Val::Int(n) => {
            let _ = write!(Raw(buf), "{n}");
        }
        Val::Levels(levels) => counts(&mut nonzero_levels(levels)),
        Val::Counts(pairs) => counts(&mut pairs.iter().copied()),
    }
}

/// Appends `k` and `v` in logfmt: ` k=v`, counts flattened to ` k.name=n`.
fn write_logfmt_field(buf: &mut Vec<u8>, k: &str, v: &Val<'_>) {
    let mut counts = |pairs: &mut dyn Iterator<Item = (&str, u64)>| {
        for (name, n) in pairs {
            let _ = write!(Raw(buf), " {k}.");
            // Characters that would end a key are written as `_`.
            buf.extend(name.bytes().map(|b| match b {
                b' ' | b'=' | b'"' | 0..=0x1f | 0x7f => b'_',
                b => b,
            }));
            let _ = write!(Raw(buf), "={n}");
        }
    };
    match v {
        Val::Str(s) => {
            let _ = write!(Raw(buf), " {k}=");
            write_logfmt_str(buf, s);
        }
        Val::Num(n) => {
            let _ = write!(Raw(buf), " {k}={n}");
        }
        Val::Int(n) => {
            let _ = write!(Raw(buf), " {k}={n}");
        }
        Val::Levels(levels) => counts(&mut nonzero_levels(levels)),
        Val::Counts(pairs) => counts(&mut pairs.iter().copied()),
    }
}

/// The levels with a count, and their count.
fn nonzero_levels(levels: &[u64; LEVELS]) -> impl Iterator<Item = (&'static str, u64)> + '_ {
    LEVEL_NAMES
        .iter()
        .copied()
        .zip(levels.iter().copied())
        .filter(|(_, n)| *n > 0)
}

/// Appends a notice of the burst limiter.
pub(crate) fn write_notice(buf: &mut Vec<u8>, style: &Style, now: SystemTime, notice: &Notice) {
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
            style,
            now,
            tracing_core::Level::WARN,
            "burst limit reached: keeping one in thenOneIn for the rest of this second",
            &[
                ("callsite", Val::Str(&site(meta))),
                ("perSecond", Val::Num(u64::from(burst.per_second.get()))),
                ("thenOneIn", Val::Num(u64::from(burst.then_one_in.get()))),
            ],
        ),
        Notice::BurstEnded { meta, summary } => write_own_line(
            buf,
            style,
            now,
            tracing_core::Level::WARN,
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

/// Appends the line that says a pushed layer started, changed or stopped applying, e.g.
/// `{"ts":"…","level":"INFO","target":"logpolicy","msg":"policy started applying","policy":"shop/debug-payments","reason":"INC-4211: card declines at checkout","changes":"shop::payment=debug","priority":10,"expires":"2026-11-29T20:21:15Z"}`;
/// a line that stops it adds `"ended":"expired"` or `"ended":"removed"`. `reason` and
/// `expires` are left out when the layer has none.
#[cfg(feature = "admin")]
pub(crate) fn write_layer_change(
    buf: &mut Vec<u8>,
    style: &Style,
    now: SystemTime,
    change: &LayerChange,
) {
    let layer = &change.layer;
    let changes = layer.directives.to_string();
    let expires = layer.expires_at.map(format_rfc3339);
    let priority = i64::from(layer.priority);
    let mut fields = vec![("policy", Val::Str(layer.source()))];
    if let Some(reason) = &layer.reason {
        fields.push(("reason", Val::Str(reason)));
    }
    fields.push(("changes", Val::Str(&changes)));
    fields.push(("priority", Val::Int(priority)));
    if let Some(expires) = &expires {
        fields.push(("expires", Val::Str(expires)));
    }
    if let Some(ended) = change.kind.ended() {
        fields.push(("ended", Val::Str(ended)));
    }
    write_own_line(
        buf,
        style,
        now,
        tracing_core::Level::INFO,
        change.kind.message(),
        &fields,
    );
}

/// Appends the line that says a policy push was refused, e.g.
/// `{"ts":"…","level":"WARN","target":"logpolicy","msg":"refused a policy push","status":401,"error":"bad_signature","reason":"…","suppressed":4}`:
/// the answer's status, error code and reason, and how many refusals since the last such
/// line were not written (`suppressed`, left out when none).
#[cfg(feature = "admin")]
pub(crate) fn write_push_refused(
    buf: &mut Vec<u8>,
    style: &Style,
    now: SystemTime,
    status: u16,
    error: &str,
    reason: &str,
    suppressed: u64,
) {
    let mut fields = vec![
        ("status", Val::Num(u64::from(status))),
        ("error", Val::Str(error)),
        ("reason", Val::Str(reason)),
    ];
    if suppressed > 0 {
        fields.push(("suppressed", Val::Num(suppressed)));
    }
    write_own_line(
        buf,
        style,
        now,
        tracing_core::Level::WARN,
        "refused a policy push",
        &fields,
    );
}

/// Appends the line that says the admin endpoint trusts the keys of its keys file now
/// (where it trusted none, or other keys), e.g.
/// `{"ts":"…","level":"INFO","target":"logpolicy","msg":"the admin endpoint trusts the keys of its keys file","source":"/etc/logpolicy/trusted-keys","keys":1}`.
#[cfg(feature = "admin")]
pub(crate) fn write_keys_trusted(
    buf: &mut Vec<u8>,
    style: &Style,
    now: SystemTime,
    path: &str,
    keys: usize,
) {
    write_own_line(
        buf,
        style,
        now,
        tracing_core::Level::INFO,
        "the admin endpoint trusts the keys of its keys file",
        &[("source", Val::Str(path)), ("keys", Val::Num(keys as u64))],
    );
}

/// Appends the report of a directive from the environment that was skipped, e.g.
/// `{"ts":"…","level":"WARN","target":"logpolicy","msg":"skipped an invalid directive","source":"RUST_LOG","error":"invalid level \"verbose\" in directive \"shop=verbose\" (…)"}`.
pub(crate) fn write_skipped_directive(
    buf: &mut Vec<u8>,
    style: &Style,
    now: SystemTime,
    source: &str,
    error: &str,
) {
    write_skipped(
        buf,
        style,
        now,
        "skipped an invalid directive",
        source,
        error,
    );
}

/// Appends the report of a setting from the environment that was skipped (`what`, e.g.
/// "skipped an invalid format"), naming the variable and what is wrong with it.
pub(crate) fn write_skipped(
    buf: &mut Vec<u8>,
    style: &Style,
    now: SystemTime,
    what: &str,
    source: &str,
    error: &str,
) {
    write_own_line(
        buf,
        style,
        now,
        tracing_core::Level::WARN,
        what,
        &[("source", Val::Str(source)), ("error", Val::Str(error))],
    );
}

/// Appends the periodic summary of events not written, e.g.
/// `{"ts":"…","level":"INFO","target":"logpolicy","msg":"events not written","sampled":{"info":90},"burst":{},"budget":{}}`,
/// with `"redacted":{"name":3,"value":0}` at the end when values were redacted since
/// the last one.
pub(crate) fn write_not_written(
    buf: &mut Vec<u8>,
    style: &Style,
    now: SystemTime,
    summary: &NotWritten,
) {
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
    write_own_line(
        buf,
        style,
        now,
        summary.level(),
        "events not written",
        &fields,
    );
}

/// The callsites that wrote the most bytes, at most this many, in the line written when
/// logging stops.
pub(crate) const TOP_SITES: usize = 5;

/// Appends the line written when logging stops, naming the [`TOP_SITES`] callsites that
/// wrote the most bytes, e.g. in JSON
/// `{"ts":"…","level":"INFO","target":"logpolicy","msg":"bytes written by callsite","bytes":{"shop::cart@src/cart.rs:42":51234,…},"lines":{…},"total_bytes":73310}`
/// (each callsite as `target@file:line`, biggest first); `None` when nothing was written.
pub(crate) fn write_top_sites(
    buf: &mut Vec<u8>,
    style: &Style,
    now: SystemTime,
    sites: &crate::ledger::Sites,
) -> Option<()> {
    let top: Vec<(String, u64, u64)> = sites
        .top(TOP_SITES)
        .map(|s| {
            let name = match (s.file, s.line) {
                (Some(f), Some(l)) => format!("{}@{f}:{l}", s.target),
                (Some(f), None) => format!("{}@{f}", s.target),
                _ => s.target.to_owned(),
            };
            (name, s.counts.lines, s.counts.bytes)
        })
        .collect();
    if top.is_empty() {
        return None;
    }
    let bytes: Vec<(&str, u64)> = top.iter().map(|(n, _, b)| (n.as_str(), *b)).collect();
    let lines: Vec<(&str, u64)> = top.iter().map(|(n, l, _)| (n.as_str(), *l)).collect();
    write_own_line(
        buf,
        style,
        now,
        tracing_core::Level::INFO,
        "bytes written by callsite",
        &[
            ("bytes", Val::Counts(&bytes)),
            ("lines", Val::Counts(&lines)),
            ("total_bytes", Val::Num(sites.totals.bytes)),
            ("total_lines", Val::Num(sites.totals.lines)),
        ],
    );
    Some(())
}

/// Appends the writer's report of dropped lines, e.g. in JSON
/// `{"ts":"…","level":"WARN","target":"logpolicy","msg":"dropped events","reason":{"queue_full":31,…,"evicted":0},"trace":0,…,"error":0,"total":31}`:
/// every reason and every level, with their count (zero too), and the total.
pub(crate) fn write_dropped_events(
    buf: &mut Vec<u8>,
    style: &Style,
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
    write_own_line(
        buf,
        style,
        now,
        tracing_core::Level::WARN,
        "dropped events",
        &fields,
    );
}

/// Appends the line that opens (`end` false) or closes (`end` true) a replay of
/// recorded lines, e.g. `{"ts":"…","level":"INFO","target":"logpolicy","msg":"replaying
/// recorded lines","policy":"shop/raise","reason":"INC-4211","asked_from":"…",
/// "held_from":"…","lines":42}`: who asked, the window asked for and the one the store
/// still held (absent when it held nothing), and how many lines; the closing line adds
/// how many the writer took and dropped.
pub(crate) fn write_replay(
    buf: &mut Vec<u8>,
    style: &Style,
    now: SystemTime,
    request: &crate::recorder::ReplayRequest,
    report: &crate::recorder::ReplayReport,
    end: bool,
) {
    let asked_from = format_rfc3339(report.asked_from);
    let held_from = report.held_from.map(format_rfc3339);
    let mut fields = vec![("policy", Val::Str(&request.by))];
    if let Some(reason) = &request.reason {
        fields.push(("reason", Val::Str(reason)));
    }
    fields.push(("asked_from", Val::Str(&asked_from)));
    if let Some(held_from) = &held_from {
        fields.push(("held_from", Val::Str(held_from)));
    }
    fields.push(("lines", Val::Num(report.lines)));
    if !report.complete {
        // Lines of the window had expired before the replay: the pod held less.
        fields.push(("complete", Val::Str("false")));
    }
    let msg = if end {
        fields.push(("queued", Val::Num(report.queued)));
        fields.push(("dropped", Val::Num(report.dropped)));
        "replayed recorded lines"
    } else {
        "replaying recorded lines"
    };
    write_own_line(buf, style, now, tracing_core::Level::INFO, msg, &fields);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Service;

    /// The report of dropped lines in `format`, 31 `info` lines dropped for a full queue.
    fn dropped(format: Format) -> String {
        let mut buf = Vec::new();
        let style = Style::new(format, &Service::named("shop"));
        let now = UNIX_EPOCH + Duration::from_micros(1_796_069_175_123_456);
        let levels = [0, 0, 31, 0, 0];
        let reasons = [("queue_full", 31), ("shutdown", 0)];
        write_dropped_events(&mut buf, &style, now, &reasons, &levels);
        String::from_utf8(buf).unwrap()
    }

    #[test]
    fn own_lines_are_in_the_format_of_the_output() {
        for format in Format::ALL {
            let line = dropped(format);
            assert!(
                line.ends_with('\n') && line.matches('\n').count() == 1,
                "{line}"
            );
            if !format.is_json() {
                continue;
            }
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            let (msg, fields) = match format {
                Format::Json => (&v["msg"], &v),
                Format::JsonOtel => (&v["Body"], &v["Attributes"]),
                Format::JsonEcs => (&v["message"], &v["logpolicy"]),
                _ => (&v["message"], &v),
            };
            assert_eq!(msg, "dropped events", "{line}");
            assert_eq!(fields["reason"]["queue_full"], 31, "{line}");
            assert_eq!(fields["info"], 31, "{line}");
            assert_eq!(fields["total"], 31, "{line}");
        }
        assert_eq!(
            dropped(Format::Logfmt),
            "ts=2026-11-30T20:06:15.123456Z level=warn target=logpolicy service.name=shop \
             msg=\"dropped events\" reason.queue_full=31 reason.shutdown=0 trace=0 debug=0 \
             info=31 warn=0 error=0 total=31\n"
        );
        assert_eq!(
            dropped(Format::Text),
            "2026-11-30T20:06:15.123456Z  WARN logpolicy: dropped events \
             reason={queue_full:31,shutdown:0} trace=0 debug=0 info=31 warn=0 error=0 total=31\n"
        );
        let gcp: serde_json::Value = serde_json::from_str(&dropped(Format::JsonGcp)).unwrap();
        assert_eq!(gcp["severity"], "WARNING");
        assert_eq!(gcp["serviceContext"]["service"], "shop");
    }
}
