//! The line formats, and where each puts what: the names of the line's own keys, its
//! level names and numbers, its timestamp and where the service goes. Everything here is
//! rendered once (per callsite, per layer) or on the slow path; the hot path copies it.

use std::cell::Cell;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use super::escape::{put_if_bare, write_escaped};
use super::fields::write_controls_escaped;
use crate::clock::{write_nanos_since_epoch, write_since_epoch, DIGIT_PAIRS};
use crate::level::level_index;

/// The line format: which fields a line has and where, for the pipeline that reads it.
///
/// Every format writes one event per line, escapes every string so that no value can
/// break the line or forge a field, and redacts what the policy redacts. The field
/// placement of each is in the [module documentation](crate::format).
///
/// A format is named as `LOGPOLICY_FORMAT` takes it, and parses back from its name:
///
/// ```
/// use logpolicy::Format;
/// for format in Format::ALL {
///     assert_eq!(format.to_string().parse::<Format>(), Ok(format));
/// }
/// assert_eq!("json-gcp".parse::<Format>(), Ok(Format::JsonGcp));
/// let err = "xml".parse::<Format>().unwrap_err();
/// assert!(err.to_string().starts_with("unknown format \"xml\" (expected one of: json, json-otel,"), "{err}");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// `json`: one JSON object per line, `{"ts","level","target","msg",...,"span":{...}}`.
    Json,
    /// `json-otel`: the OpenTelemetry logs data model (`Timestamp`, `SeverityText`,
    /// `SeverityNumber`, `Body`, `Attributes`, `Resource`, `InstrumentationScope`).
    JsonOtel,
    /// `json-ecs`: Elastic Common Schema (`@timestamp`, `log.level`, `log.logger`,
    /// `message`, `ecs.version`).
    JsonEcs,
    /// `json-gcp`: Google Cloud Logging's structured payload (`time`, `severity`,
    /// `message`, `serviceContext`).
    JsonGcp,
    /// `json-datadog`: Datadog's reserved attributes (`timestamp`, `status`, `message`,
    /// `logger.name`, `service`).
    JsonDatadog,
    /// `logfmt`: `ts=... level=info target=... msg="..." key=value ...`.
    Logfmt,
    /// `text`: compact text for terminals.
    Text,
}

impl Format {
    /// Every format, in the order of their names in errors.
    pub const ALL: [Format; 7] = [
        Format::Json,
        Format::JsonOtel,
        Format::JsonEcs,
        Format::JsonGcp,
        Format::JsonDatadog,
        Format::Logfmt,
        Format::Text,
    ];

    /// The environment variable [`Builder::from_env`](crate::Builder::from_env) reads the
    /// format from.
    pub const ENV_VAR: &'static str = "LOGPOLICY_FORMAT";

    /// The format's name, as `LOGPOLICY_FORMAT` takes it.
    pub const fn name(self) -> &'static str {
        match self {
            Format::Json => "json",
            Format::JsonOtel => "json-otel",
            Format::JsonEcs => "json-ecs",
            Format::JsonGcp => "json-gcp",
            Format::JsonDatadog => "json-datadog",
            Format::Logfmt => "logfmt",
            Format::Text => "text",
        }
    }

    /// Whether lines are JSON objects.
    pub const fn is_json(self) -> bool {
        !matches!(self, Format::Logfmt | Format::Text)
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A format name that is not one of [`Format::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown format {value:?} (expected one of: json, json-otel, json-ecs, json-gcp, json-datadog, logfmt, text)")]
pub struct ParseFormatError {
    /// The value given (at most 80 characters of it).
    pub value: String,
}

impl FromStr for Format {
    type Err = ParseFormatError;

    /// A format's name, in any case, surrounding whitespace ignored.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let name = s.trim();
        Format::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| ParseFormatError {
                value: s.chars().take(80).collect(),
            })
    }
}

/// The key rules of one kind of line part: each event format's, and the span fields'
/// of logfmt (`span.<key>=`). The span fields of every JSON format use [`Keys::Json`];
/// text lines use [`Keys::Text`] for events and spans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keys {
    Json,
    Otel,
    Ecs,
    Gcp,
    Datadog,
    Logfmt,
    LogfmtSpan,
    Text,
}

impl Keys {
    /// How many kinds there are (one callsite table each).
    pub(crate) const COUNT: usize = 8;

    /// The keys of `format`'s events (`span: false`) or span fields.
    pub(crate) const fn of(format: Format, span: bool) -> Keys {
        match (format, span) {
            (Format::Logfmt, false) => Keys::Logfmt,
            (Format::Logfmt, true) => Keys::LogfmtSpan,
            (Format::Text, _) => Keys::Text,
            (_, true) | (Format::Json, _) => Keys::Json,
            (Format::JsonOtel, _) => Keys::Otel,
            (Format::JsonEcs, _) => Keys::Ecs,
            (Format::JsonGcp, _) => Keys::Gcp,
            (Format::JsonDatadog, _) => Keys::Datadog,
        }
    }

    /// The key the event's message is written under.
    const fn message(self) -> &'static str {
        match self {
            Keys::Json | Keys::Logfmt => "msg",
            Keys::Otel => "Body",
            Keys::Ecs | Keys::Gcp | Keys::Datadog => "message",
            Keys::LogfmtSpan | Keys::Text => "message",
        }
    }

    /// The keys the line itself writes at the level of the fields: a field named like
    /// one of them is written as `field.<name>`.
    const fn reserved(self) -> &'static [&'static str] {
        match self {
            Keys::Json | Keys::Logfmt => &PLAIN_RESERVED,
            // Fields go in `Attributes`, beside the span.
            Keys::Otel => &["span", "spans"],
            Keys::Ecs => &[
                "@timestamp",
                "log.level",
                "log.logger",
                "ecs.version",
                "message",
                "tracing.span",
                "tracing.spans",
                "service.name",
                "service.version",
                "trace.id",
                "span.id",
            ],
            Keys::Gcp => &[
                "time",
                "severity",
                "target",
                "message",
                "span",
                "spans",
                "serviceContext",
            ],
            Keys::Datadog => &[
                "timestamp",
                "status",
                "logger.name",
                "message",
                "span",
                "spans",
                "service",
                "version",
                "dd.trace_id",
                "dd.span_id",
            ],
            Keys::LogfmtSpan | Keys::Text => &[],
        }
    }

    /// Whether a field called `name` is written as `field.<name>`.
    fn renames(self, name: &str) -> bool {
        self.reserved().contains(&name)
            || (self == Keys::Logfmt && name.starts_with("span."))
            // Google reads its own keys from the payload.
            || (self == Keys::Gcp && name.starts_with("logging.googleapis.com/"))
    }
}

/// The keys `json` and `logfmt` lines write themselves. `trace_id` and `span_id` only
/// with the `opentelemetry` feature (the only build that writes them): without it, a
/// service that logs its own `trace_id` field keeps that key, as before formats came.
#[cfg(feature = "opentelemetry")]
const PLAIN_RESERVED: [&str; 10] = [
    "ts",
    "level",
    "target",
    "msg",
    "span",
    "spans",
    "service.name",
    "service.version",
    "trace_id",
    "span_id",
];
#[cfg(not(feature = "opentelemetry"))]
const PLAIN_RESERVED: [&str; 8] = [
    "ts",
    "level",
    "target",
    "msg",
    "span",
    "spans",
    "service.name",
    "service.version",
];

/// Appends the key of the field `name` as `keys` writes it: `,"<key>":` (JSON) or
/// ` <key>=` (logfmt, text). The message has its format's key (`msg`, `Body`,
/// `message`; text: a space, the message is bare).
pub(crate) fn write_key(buf: &mut Vec<u8>, keys: Keys, name: &str) {
    if keys == Keys::Text {
        buf.push(b' ');
        if name != "message" {
            write_controls_escaped(buf, name);
            buf.push(b'=');
        }
        return;
    }
    let (name, prefix) = if name == "message" && keys != Keys::LogfmtSpan {
        (keys.message(), "")
    } else if keys.renames(name) {
        (name, "field.")
    } else {
        (name, "")
    };
    match keys {
        Keys::Logfmt | Keys::LogfmtSpan => {
            buf.push(b' ');
            if keys == Keys::LogfmtSpan {
                buf.extend_from_slice(b"span.");
            }
            buf.extend_from_slice(prefix.as_bytes());
            write_logfmt_key(buf, name);
            buf.push(b'=');
        }
        _ => {
            buf.extend_from_slice(b",\"");
            buf.extend_from_slice(prefix.as_bytes());
            write_escaped(buf, name);
            buf.extend_from_slice(b"\":");
        }
    }
}

/// Appends `name` as a logfmt key: what would end the key (whitespace, `=`, `"`, control
/// characters) is written as `_`.
fn write_logfmt_key(buf: &mut Vec<u8>, name: &str) {
    if name.is_empty() {
        buf.push(b'_');
    }
    buf.extend(
        name.bytes()
            .map(|b| if LOGFMT_BARE[b as usize] { b } else { b'_' }),
    );
}

/// For each byte: whether a logfmt value (or key) may hold it unquoted.
pub(crate) static LOGFMT_BARE: [bool; 256] = {
    let mut t = [true; 256];
    let mut i = 0;
    while i <= 0x20 {
        t[i] = false;
        i += 1;
    }
    t[0x7f] = false;
    t[b'"' as usize] = false;
    t[b'=' as usize] = false;
    t[b'\\' as usize] = false;
    t
};

/// Appends `s` as a logfmt value: as is when nothing in it needs quoting, else quoted
/// with JSON's escapes (which Go's `strconv.Unquote`, used by logfmt readers, reads).
#[inline(always)]
pub(crate) fn write_logfmt_str(buf: &mut Vec<u8>, s: &str) {
    if !put_if_bare(buf, s.as_bytes()) {
        buf.push(b'"');
        write_escaped(buf, s);
        buf.push(b'"');
    }
}

/// The level names of the line formats, by [`level_index`] (trace first).
const UPPER: [&str; 5] = ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"];
const LOWER: [&str; 5] = ["trace", "debug", "info", "warn", "error"];
/// The text format's level column.
const TEXT_LEVEL: [&str; 5] = [" TRACE ", " DEBUG ", "  INFO ", "  WARN ", " ERROR "];
/// Google Cloud Logging's `LogSeverity` names.
const GCP: [&str; 5] = ["DEBUG", "DEBUG", "INFO", "WARNING", "ERROR"];
/// The OpenTelemetry `SeverityNumber` of each level (the first of its range).
const OTEL_NUMBER: [&str; 5] = ["1", "5", "9", "13", "17"];

/// Appends what follows the timestamp up to the fields, for an event of `level` from
/// `target`: the level and the target under `keys`' names.
pub(crate) fn write_head(buf: &mut Vec<u8>, keys: Keys, level: &tracing_core::Level, target: &str) {
    let i = level_index(*level);
    let json = |buf: &mut Vec<u8>, parts: [&str; 3], close: &str| {
        buf.extend_from_slice(parts[0].as_bytes());
        buf.extend_from_slice(parts[1].as_bytes());
        buf.extend_from_slice(parts[2].as_bytes());
        write_escaped(buf, target);
        buf.extend_from_slice(close.as_bytes());
    };
    match keys {
        Keys::Json => json(buf, ["\",\"level\":\"", UPPER[i], "\",\"target\":\""], "\""),
        Keys::Otel => {
            buf.extend_from_slice(b"\",\"SeverityText\":\"");
            buf.extend_from_slice(UPPER[i].as_bytes());
            buf.extend_from_slice(b"\",\"SeverityNumber\":");
            buf.extend_from_slice(OTEL_NUMBER[i].as_bytes());
            json(
                buf,
                ["", "", ",\"InstrumentationScope\":{\"Name\":\""],
                "\"}",
            );
        }
        Keys::Ecs => json(
            buf,
            ["\",\"log.level\":\"", LOWER[i], "\",\"log.logger\":\""],
            "\",\"ecs.version\":\"1.6.0\"",
        ),
        Keys::Gcp => json(
            buf,
            ["\",\"severity\":\"", GCP[i], "\",\"target\":\""],
            "\"",
        ),
        Keys::Datadog => json(
            buf,
            ["\",\"status\":\"", LOWER[i], "\",\"logger.name\":\""],
            "\"",
        ),
        Keys::Text => {
            buf.extend_from_slice(TEXT_LEVEL[i].as_bytes());
            write_controls_escaped(buf, target);
            buf.push(b':');
        }
        Keys::Logfmt | Keys::LogfmtSpan => {
            buf.extend_from_slice(b" level=");
            buf.extend_from_slice(LOWER[i].as_bytes());
            buf.extend_from_slice(b" target=");
            write_logfmt_str(buf, target);
        }
    }
}

/// Appends the start of a line of `format` and its timestamp, `now` after the Unix
/// epoch: RFC 3339 UTC with microseconds, except `json-otel`'s nanoseconds since the
/// epoch (as a string, the data model's `uint64`).
#[inline(always)]
pub(crate) fn write_time(buf: &mut Vec<u8>, format: Format, now: Duration) {
    // One literal per arm: each is copied as a constant, without a call to `memcpy`.
    match format {
        Format::Json => buf.extend_from_slice(b"{\"ts\":\""),
        Format::JsonOtel => return write_otel_time(buf, now),
        Format::JsonEcs => buf.extend_from_slice(b"{\"@timestamp\":\""),
        Format::JsonGcp => buf.extend_from_slice(b"{\"time\":\""),
        Format::JsonDatadog => buf.extend_from_slice(b"{\"timestamp\":\""),
        Format::Logfmt => buf.extend_from_slice(b"ts="),
        Format::Text => {}
    }
    write_since_epoch(buf, now);
}

thread_local! {
    /// `{"Timestamp":"` and the digits of the last second a `json-otel` line was
    /// stamped with on this thread, and their length.
    static OTEL_SECONDS: Cell<(u64, [u8; 48], u8)> = const { Cell::new((u64::MAX, [0; 48], 0)) };
}

/// What a `json-otel` line opens with.
const OTEL_OPEN: &[u8; 14] = b"{\"Timestamp\":\"";

/// `json-otel`'s start of a line: `{"Timestamp":"` and the nanoseconds since the epoch.
/// The opening and the second's digits are kept per thread as one block; a line adds
/// its nine digits of nanoseconds to it and stores it whole (one fixed-size move), then
/// the buffer is cut back to its length. Inlined into the line's formatting, as the other
/// formats' times are (a call of its own cost a fifth of its instructions).
#[inline(always)]
fn write_otel_time(buf: &mut Vec<u8>, now: Duration) {
    let secs = now.as_secs();
    let (cached, mut block, len) = OTEL_SECONDS.with(Cell::get);
    if cached == secs && usize::from(len) == OTEL_OPEN.len() + 10 {
        // Ten digits of seconds (2001 to 2286), as on every line but the first of each
        // second: the nanoseconds' places are constants, stored as pairs, with no bounds
        // to check.
        let nanos = now.subsec_nanos() as usize;
        let (pairs, last) = (nanos / 10, nanos % 10);
        let (p0, rest) = (pairs / 1_000_000, pairs % 1_000_000);
        let (p1, rest) = (rest / 10_000, rest % 10_000);
        let (p2, p3) = (rest / 100, rest % 100);
        for (at, pair) in [(24, p0), (26, p1), (28, p2), (30, p3)] {
            block[at] = DIGIT_PAIRS[2 * pair];
            block[at + 1] = DIGIT_PAIRS[2 * pair + 1];
        }
        block[32] = b'0' + last as u8;
        let at = buf.len();
        buf.extend_from_slice(&block);
        buf.truncate(at + 33);
        return;
    }
    write_otel_time_slow(buf, now);
}

/// [`write_otel_time`] for the first line of a second on a thread, and for times with
/// other than ten digits of seconds.
#[inline(never)]
fn write_otel_time_slow(buf: &mut Vec<u8>, now: Duration) {
    let secs = now.as_secs();
    if secs == 0 || secs >= u64::MAX / 1_000_000_000 {
        // No second's digits to put the nanoseconds after (see write_nanos_since_epoch).
        buf.extend_from_slice(OTEL_OPEN);
        return write_nanos_since_epoch(buf, now);
    }
    let mut block = [0u8; 48];
    block[..OTEL_OPEN.len()].copy_from_slice(OTEL_OPEN);
    let mut digits = itoa::Buffer::new();
    let digits = digits.format(secs).as_bytes();
    let len = OTEL_OPEN.len() + digits.len();
    block[OTEL_OPEN.len()..len].copy_from_slice(digits);
    OTEL_SECONDS.with(|c| c.set((secs, block, len as u8)));
    let nanos = now.subsec_nanos();
    let (mut high, low) = (nanos / 10, nanos % 10);
    let frac = &mut block[len..len + 9];
    frac[8] = b'0' + low as u8;
    for pair in frac[..8].rchunks_exact_mut(2) {
        let i = (high % 100) as usize * 2;
        pair.copy_from_slice(&DIGIT_PAIRS[i..i + 2]);
        high /= 100;
    }
    let at = buf.len();
    buf.extend_from_slice(&block);
    buf.truncate(at + len + 9);
}

/// What opens a line's span (its name follows, then its fields): in `json-otel` inside
/// `Attributes` (the caller opens it).
pub(crate) const fn span_open(format: Format) -> &'static [u8] {
    match format {
        Format::JsonEcs => b",\"tracing.span\":{\"name\":\"",
        Format::Logfmt => b" span=",
        _ => b",\"span\":{\"name\":\"",
    }
}

/// Opens the list of every span of an event ([`Spans::All`](super::Spans::All)).
pub(crate) const fn spans_open(format: Format) -> &'static [u8] {
    match format {
        Format::JsonEcs => b",\"tracing.spans\":[",
        _ => b",\"spans\":[",
    }
}

/// Where the builder's (or the environment's) service is written: its name and version,
/// each when set, from [`Service`](crate::format::Service).
pub(crate) fn write_service(
    buf: &mut Vec<u8>,
    format: Format,
    name: Option<&str>,
    version: Option<&str>,
) {
    if name.is_none() && version.is_none() {
        return;
    }
    let (open, keys, close): (&str, [&str; 2], &str) = match format {
        Format::Json | Format::JsonEcs => ("", ["service.name", "service.version"], ""),
        Format::JsonOtel => (",\"Resource\":{", ["service.name", "service.version"], "}"),
        Format::JsonGcp => (",\"serviceContext\":{", ["service", "version"], "}"),
        Format::JsonDatadog => ("", ["service", "version"], ""),
        Format::Logfmt => ("", ["service.name", "service.version"], ""),
        Format::Text => return,
    };
    buf.extend_from_slice(open.as_bytes());
    let mut first = !open.is_empty();
    for (key, value) in keys.iter().zip([name, version]) {
        let Some(value) = value else { continue };
        if format == Format::Logfmt {
            buf.push(b' ');
            buf.extend_from_slice(key.as_bytes());
            buf.push(b'=');
            write_logfmt_str(buf, value);
            continue;
        }
        if !first {
            buf.push(b',');
        }
        first = false;
        buf.push(b'"');
        buf.extend_from_slice(key.as_bytes());
        buf.extend_from_slice(b"\":\"");
        write_escaped(buf, value);
        buf.push(b'"');
    }
    buf.extend_from_slice(close.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The nanoseconds since the epoch, as `json-otel` opens a line with them, the same
    /// whichever of its paths writes them: the first line of a second, the next ones, a
    /// change of second, and times with other than ten digits of seconds.
    #[test]
    fn otel_times_are_the_nanoseconds_since_the_epoch_on_every_path() {
        let cases = [
            (1_796_069_175, 123_456_789),
            (1_796_069_175, 0),
            (1_796_069_175, 999_999_999),
            (1_796_069_176, 5),
            (1_796_069_175, 10),
            (946_684_800, 120_000_000),
            (946_684_800, 7),
            (1_796_069_175, 100_000_000),
            (99_999_999_999, 1),
            (1, 2),
            (0, 42),
            (u64::MAX / 1_000_000_000, 3),
            (1_796_069_177, 900_000_001),
        ];
        for (secs, nanos) in cases {
            for _ in 0..2 {
                let mut buf = b"x".to_vec();
                write_otel_time(&mut buf, Duration::new(secs, nanos));
                let want = u128::from(secs) * 1_000_000_000 + u128::from(nanos);
                let want = format!("x{{\"Timestamp\":\"{}", want.min(u128::from(u64::MAX)));
                assert_eq!(String::from_utf8(buf).unwrap(), want, "{secs}.{nanos:09}");
            }
        }
    }

    #[test]
    fn names_round_trip_and_others_are_named_in_the_error() {
        for f in Format::ALL {
            assert_eq!(f.name().parse::<Format>(), Ok(f));
            assert_eq!(f.to_string().to_uppercase().parse::<Format>(), Ok(f));
            assert_eq!(format!(" {f}\n").parse::<Format>(), Ok(f));
        }
        for bad in ["", "JSON_OTEL", "otel", "json-", "logfmt2"] {
            let err = bad.parse::<Format>().unwrap_err();
            assert_eq!(err.value, bad);
            assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
        }
        let long = "x".repeat(500);
        assert_eq!(long.parse::<Format>().unwrap_err().value.len(), 80);
    }

    #[test]
    fn nanoseconds_are_one_number() {
        for (d, s) in [
            (Duration::new(1_800_000_000, 42_000), "1800000000000042000"),
            (Duration::new(1, 0), "1000000000"),
            (Duration::new(0, 42), "42"),
            (Duration::new(u64::MAX, 999_999_999), "18446744073709551615"),
        ] {
            let mut buf = Vec::new();
            write_nanos_since_epoch(&mut buf, d);
            assert_eq!(String::from_utf8(buf).unwrap(), s);
        }
    }

    #[test]
    fn otel_timestamps_are_the_nanoseconds_after_their_opening() {
        // Seconds changing and coming back, the first second, the last one that fits.
        for d in [
            Duration::new(1_800_000_000, 7),
            Duration::new(1_800_000_000, 999_999_999),
            Duration::new(1_800_000_001, 10_000_000),
            Duration::new(999, 123_456_789),
            Duration::new(1_800_000_000, 0),
            Duration::new(0, 42),
            Duration::new(1, 0),
            Duration::new(18_446_744_072, 1),
            Duration::new(18_446_744_073, 1),
            Duration::new(u64::MAX, 999_999_999),
        ] {
            let mut buf = b"x".to_vec();
            write_time(&mut buf, Format::JsonOtel, d);
            let mut nanos = Vec::new();
            write_nanos_since_epoch(&mut nanos, d);
            let expected = format!("x{{\"Timestamp\":\"{}", String::from_utf8(nanos).unwrap());
            assert_eq!(String::from_utf8(buf).unwrap(), expected, "{d:?}");
        }
    }

    #[test]
    fn nanoseconds_stay_right_when_the_second_changes_and_comes_back() {
        // The seconds' digits are kept per thread: each line must still have its own.
        for (d, s) in [
            (Duration::new(1_800_000_000, 7), "1800000000000000007"),
            (
                Duration::new(1_800_000_000, 999_999_999),
                "1800000000999999999",
            ),
            (
                Duration::new(1_800_000_001, 10_000_000),
                "1800000001010000000",
            ),
            (Duration::new(999, 123_456_789), "999123456789"),
            (Duration::new(1_800_000_000, 0), "1800000000000000000"),
            (Duration::new(18_446_744_072, 1), "18446744072000000001"),
        ] {
            let mut buf = b"x".to_vec();
            write_nanos_since_epoch(&mut buf, d);
            assert_eq!(String::from_utf8(buf).unwrap(), format!("x{s}"));
        }
    }

    #[test]
    fn logfmt_keys_cannot_end_early_or_forge_a_field() {
        let mut k = Vec::new();
        write_key(&mut k, Keys::Logfmt, "a b=\"c\"\n");
        write_key(&mut k, Keys::Logfmt, "span.x");
        write_key(&mut k, Keys::Logfmt, "message");
        write_key(&mut k, Keys::LogfmtSpan, "id");
        assert_eq!(
            String::from_utf8(k).unwrap(),
            " a_b__c__= field.span.x= msg= span.id="
        );
    }
}
