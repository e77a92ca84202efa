//! Time: the clocks, injected, and RFC 3339 read and written.
//!
//! Everything in this crate that depends on time (layer expiry, rates, budgets, the
//! timestamp of a line) reads it through a [`Clock`], so tests advance a
//! [`ManualClock`] instead of sleeping. This module is also the one place times are
//! written and read as text: a line's timestamp ([`write_rfc3339`], with the seconds
//! rendered once per second per thread), and the times of policy documents
//! ([`format_rfc3339`], [`parse_rfc3339`]).

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A source of wall-clock time.
///
/// # Examples
///
/// ```
/// use logpolicy::clock::{Clock, SystemClock};
/// let now = SystemClock.now();
/// assert!(now > std::time::UNIX_EPOCH);
/// ```
pub trait Clock: Send + Sync + std::fmt::Debug + 'static {
    /// The current wall-clock time.
    fn now(&self) -> SystemTime;

    /// Whole seconds since the Unix epoch, as cheaply as the clock can say it (the
    /// burst limiter reads it per event). Defaults to [`Clock::now`].
    fn unix_seconds(&self) -> u64 {
        self.now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0)
    }

    /// The current wall-clock time as the time since the Unix epoch (zero before it), as
    /// cheaply as the clock can say it (every line's timestamp reads it). Defaults to
    /// [`Clock::now`].
    fn since_epoch(&self) -> Duration {
        self.now().duration_since(UNIX_EPOCH).unwrap_or_default()
    }
}

/// The operating system's wall clock.
///
/// [`Clock::since_epoch`], which stamps every line, reads the real-time clock at most
/// once per [`SystemClock::ANCHOR_TTL`] per thread and, in between, adds the time
/// elapsed since that read as measured by the CPU's time-stamp counter (through
/// `quanta`, which calibrates it against the OS clock and uses the OS clock instead
/// wherever the counter is not reliable). Inside a busy service that costs about a third
/// of a clock read. The counter's rate error over one anchor period puts a line's
/// timestamp within microseconds of the real-time clock, and a thread's timestamps never
/// go backwards, even when the real-time clock is stepped back (they hold until it
/// catches up). [`Clock::now`] always reads the real-time clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl SystemClock {
    /// How long a thread extrapolates from its last read of the real-time clock.
    pub const ANCHOR_TTL: Duration = Duration::from_millis(50);

    /// Calibrates the time-stamp counter now (about half a millisecond, once per
    /// process), so that the first line logged does not pay for it.
    pub fn warm_up() {
        counter();
    }
}

/// The time-stamp counter, calibrated once per process.
fn counter() -> &'static quanta::Clock {
    static COUNTER: OnceLock<quanta::Clock> = OnceLock::new();
    COUNTER.get_or_init(quanta::Clock::new)
}

/// A thread's last read of the real-time clock (`wall`, nanoseconds since the epoch; 0:
/// none yet) with the counter's value then, and the thread's last timestamp.
#[derive(Clone, Copy)]
struct Anchor {
    raw: u64,
    wall: u64,
    last: u64,
}

thread_local! {
    static ANCHOR: Cell<Anchor> = const { Cell::new(Anchor { raw: 0, wall: 0, last: 0 }) };
}

/// The real-time clock, read straight from the vDSO, in nanoseconds since the epoch.
#[cfg(unix)]
#[inline]
fn realtime_nanos() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Realtime);
    match (u64::try_from(t.tv_sec), u64::try_from(t.tv_nsec)) {
        (Ok(secs), Ok(nanos)) => secs.saturating_mul(1_000_000_000).saturating_add(nanos),
        _ => 0,
    }
}

/// The real-time clock, in nanoseconds since the epoch (through the standard library
/// where `clock_gettime` is not there).
#[cfg(not(unix))]
#[inline]
fn realtime_nanos() -> u64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
}

/// Whole seconds since the epoch from the kernel's coarse real-time clock (updated
/// every tick, read without a syscall): a few nanoseconds instead of the tens a precise
/// read costs.
#[cfg(target_os = "linux")]
#[inline]
fn coarse_unix_seconds() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::RealtimeCoarse);
    u64::try_from(t.tv_sec).unwrap_or(0)
}

/// Whole seconds since the epoch from the real-time clock (no coarse clock here).
#[cfg(not(target_os = "linux"))]
#[inline]
fn coarse_unix_seconds() -> u64 {
    realtime_nanos() / 1_000_000_000
}

impl Clock for SystemClock {
    #[inline]
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }

    /// The real-time clock, extrapolated by the time-stamp counter for up to
    /// [`SystemClock::ANCHOR_TTL`] after each read (see [`SystemClock`]).
    #[inline]
    fn since_epoch(&self) -> Duration {
        const TTL_NANOS: u64 = SystemClock::ANCHOR_TTL.as_nanos() as u64;
        let clock = counter();
        let raw = clock.raw();
        let nanos = ANCHOR.with(|cell| {
            let a = cell.get();
            let elapsed = clock.delta_as_nanos(a.raw, raw);
            let next = if a.wall != 0 && raw >= a.raw && elapsed < TTL_NANOS {
                Anchor {
                    last: (a.wall + elapsed).max(a.last),
                    ..a
                }
            } else {
                // First use, the period is over, or the counter went back (another
                // core's counter): read the real-time clock again.
                let wall = realtime_nanos();
                Anchor {
                    raw,
                    wall,
                    last: wall.max(a.last),
                }
            };
            cell.set(next);
            next.last
        });
        Duration::from_nanos(nanos)
    }

    /// On Linux the kernel's coarse real-time clock (updated every tick, read without a
    /// syscall): a few nanoseconds instead of the tens a precise read costs. Elsewhere
    /// the real-time clock.
    #[inline]
    fn unix_seconds(&self) -> u64 {
        coarse_unix_seconds()
    }
}

/// A clock that only moves when told to; clones share the same time.
///
/// # Examples
///
/// ```
/// use logpolicy::clock::{Clock, ManualClock};
/// use std::time::{Duration, UNIX_EPOCH};
///
/// let clock = ManualClock::new(UNIX_EPOCH + Duration::from_secs(1_000));
/// let other = clock.clone();
/// clock.advance(Duration::from_millis(1_500));
/// assert_eq!(other.now(), UNIX_EPOCH + Duration::from_millis(1_001_500));
/// ```
#[derive(Debug, Clone)]
pub struct ManualClock {
    nanos_since_epoch: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock stopped at `start` (times before the Unix epoch are clamped to it).
    pub fn new(start: SystemTime) -> Self {
        Self {
            nanos_since_epoch: Arc::new(AtomicU64::new(nanos_since_epoch(start))),
        }
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        self.nanos_since_epoch.fetch_add(by, Ordering::SeqCst);
    }

    /// Sets the clock to `to` (which may be earlier than now: wall clocks step back).
    pub fn set(&self, to: SystemTime) {
        self.nanos_since_epoch
            .store(nanos_since_epoch(to), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        UNIX_EPOCH + self.since_epoch()
    }

    fn since_epoch(&self) -> Duration {
        Duration::from_nanos(self.nanos_since_epoch.load(Ordering::SeqCst))
    }

    fn unix_seconds(&self) -> u64 {
        self.nanos_since_epoch.load(Ordering::SeqCst) / 1_000_000_000
    }
}

fn nanos_since_epoch(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Writes `t` as an RFC 3339 UTC timestamp with microseconds,
/// e.g. `2026-11-29T20:06:15.123456Z` (always 27 bytes).
///
/// Times before the Unix epoch are written as the epoch.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
/// let mut buf = Vec::new();
/// logpolicy::clock::write_rfc3339(&mut buf, UNIX_EPOCH + Duration::from_micros(1_796_069_175_123_456));
/// assert_eq!(buf, b"2026-11-30T20:06:15.123456Z");
/// ```
pub fn write_rfc3339(buf: &mut Vec<u8>, t: SystemTime) {
    write_since_epoch(buf, t.duration_since(UNIX_EPOCH).unwrap_or_default());
}

thread_local! {
    /// The last second written on this thread, rendered: a line pays only for its
    /// microseconds.
    static SECONDS: Cell<(u64, [u8; 20])> = const { Cell::new((u64::MAX, [0; 20])) };
}

/// Appends the time `d` after the Unix epoch as `2026-11-29T20:06:15.123456Z` (the form
/// of [`write_rfc3339`]); the seconds are rendered once per second per thread.
#[inline]
pub(crate) fn write_since_epoch(buf: &mut Vec<u8>, d: Duration) {
    let secs = d.as_secs();
    let prefix = SECONDS.with(|c| {
        let (cached, prefix) = c.get();
        if cached == secs {
            prefix
        } else {
            let mut p = [0u8; 20];
            rfc3339_seconds(secs, &mut p);
            p[19] = b'.';
            c.set((secs, p));
            p
        }
    });
    // The whole timestamp in one 32-byte block, stored as one fixed-size move, then cut
    // to its 27 bytes.
    let mut block = [0u8; 32];
    block[..20].copy_from_slice(&prefix);
    let micros = d.subsec_micros() as usize;
    let (high, low) = (micros / 10_000, micros % 10_000);
    let (mid, low) = (low / 100, low % 100);
    for (at, pair) in [(20, high), (22, mid), (24, low)] {
        block[at] = DIGIT_PAIRS[2 * pair];
        block[at + 1] = DIGIT_PAIRS[2 * pair + 1];
    }
    block[26] = b'Z';
    let at = buf.len();
    buf.extend_from_slice(&block);
    buf.truncate(at + 27);
}

thread_local! {
    /// The last second written in nanoseconds on this thread: its digits and how many.
    static NANO_SECONDS: Cell<(u64, [u8; 20], u8)> = const { Cell::new((0, [0; 20], 0)) };
}

/// Appends the time `d` after the Unix epoch in nanoseconds, in decimal
/// (`1796069175123456789`); the seconds' digits are rendered once per second per thread.
#[inline]
pub(crate) fn write_nanos_since_epoch(buf: &mut Vec<u8>, d: Duration) {
    let secs = d.as_secs();
    if secs == 0 || secs >= u64::MAX / 1_000_000_000 {
        // Before the first second there are no seconds' digits to put the nanoseconds
        // after; after the year 2554 the number stops at `u64::MAX`.
        let nanos = secs
            .saturating_mul(1_000_000_000)
            .saturating_add(u64::from(d.subsec_nanos()));
        buf.extend_from_slice(itoa::Buffer::new().format(nanos).as_bytes());
        return;
    }
    let (digits, len) = NANO_SECONDS.with(|c| {
        let (cached, digits, len) = c.get();
        if cached == secs {
            (digits, len)
        } else {
            let mut digits = [0u8; 20];
            let mut b = itoa::Buffer::new();
            let s = b.format(secs).as_bytes();
            digits[..s.len()].copy_from_slice(s);
            c.set((secs, digits, s.len() as u8));
            (digits, s.len() as u8)
        }
    });
    // All 20 bytes, then cut: a copy of known size, not a call to `memcpy`.
    let at = buf.len();
    buf.extend_from_slice(&digits);
    buf.truncate(at + usize::from(len));
    // Nine digits, two at a time.
    let nanos = d.subsec_nanos();
    let mut frac = [b'0'; 9];
    let (mut high, low) = (nanos / 10, nanos % 10);
    frac[8] = b'0' + low as u8;
    for pair in frac[..8].rchunks_exact_mut(2) {
        let i = (high % 100) as usize * 2;
        pair.copy_from_slice(&DIGIT_PAIRS[i..i + 2]);
        high /= 100;
    }
    buf.extend_from_slice(&frac);
}

/// `00`, `01`, ... `99`: the decimal digits of a number below 100 at `2 * n` and
/// `2 * n + 1` (timestamps and the formats' integers take digits two at a time).
pub(crate) static DIGIT_PAIRS: [u8; 200] = {
    let mut t = [0u8; 200];
    let mut i = 0;
    while i < 100 {
        t[2 * i] = b'0' + (i / 10) as u8;
        t[2 * i + 1] = b'0' + (i % 10) as u8;
        i += 1;
    }
    t
};

/// Fills `out[..19]` with `YYYY-MM-DDTHH:MM:SS` for `secs` since the epoch.
fn rfc3339_seconds(secs: u64, out: &mut [u8; 20]) {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days as i64);
    let y = y.clamp(0, 9999) as u32;
    let (hh, mm, ss) = (
        (rem / 3600) as u32,
        ((rem / 60) % 60) as u32,
        (rem % 60) as u32,
    );
    let put2 = |o: &mut [u8], v: u32| {
        o[0] = b'0' + (v / 10) as u8;
        o[1] = b'0' + (v % 10) as u8;
    };
    out[0] = b'0' + (y / 1000) as u8;
    out[1] = b'0' + ((y / 100) % 10) as u8;
    out[2] = b'0' + ((y / 10) % 10) as u8;
    out[3] = b'0' + (y % 10) as u8;
    out[4] = b'-';
    put2(&mut out[5..7], m);
    out[7] = b'-';
    put2(&mut out[8..10], d);
    out[10] = b'T';
    put2(&mut out[11..13], hh);
    out[13] = b':';
    put2(&mut out[14..16], mm);
    out[16] = b':';
    put2(&mut out[17..19], ss);
}

/// Howard Hinnant's `civil_from_days`: days since 1970-01-01 to (year, month, day).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// A timestamp that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimeError {
    /// Not an RFC 3339 timestamp (or not a real date).
    #[error("invalid RFC 3339 timestamp {0:?} (expected e.g. \"2026-11-29T20:06:15Z\")")]
    Invalid(String),
    /// A time before the Unix epoch.
    #[error("timestamp {0:?} is before 1970")]
    BeforeEpoch(String),
}

/// Parses an RFC 3339 timestamp (`2026-11-29T20:06:15Z`, fractional seconds and a
/// numeric offset allowed) into a `SystemTime`.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
/// let t = logpolicy::clock::parse_rfc3339("1970-01-02T00:00:01.5+01:00").unwrap();
/// assert_eq!(t, UNIX_EPOCH + Duration::from_millis(82_801_500));
/// assert!(logpolicy::clock::parse_rfc3339("yesterday").is_err());
/// ```
pub fn parse_rfc3339(s: &str) -> Result<SystemTime, TimeError> {
    let bad = || TimeError::Invalid(s.to_owned());
    let b = s.as_bytes();
    if b.len() < 20 || !s.is_ascii() {
        return Err(bad());
    }
    let num = |r: std::ops::Range<usize>| -> Result<i64, TimeError> {
        let part = &s[r];
        if part.bytes().all(|c| c.is_ascii_digit()) {
            part.parse::<i64>().map_err(|_| bad())
        } else {
            Err(bad())
        }
    };
    if b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return Err(bad());
    }
    let (y, mo, d, h, mi, se) = (
        num(0..4)?,
        num(5..7)?,
        num(8..10)?,
        num(11..13)?,
        num(14..16)?,
        num(17..19)?,
    );
    if !(1..=12).contains(&mo) || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || se > 60
    {
        return Err(bad());
    }
    let mut i = 19;
    let mut nanos: u64 = 0;
    if b[i] == b'.' {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            if i - start < 9 {
                nanos = nanos * 10 + u64::from(b[i] - b'0');
            }
            i += 1;
        }
        let n = i - start;
        if n == 0 {
            return Err(bad());
        }
        for _ in n..9 {
            nanos *= 10;
        }
    }
    let offset_secs: i64 = match &s[i..] {
        "Z" | "z" => 0,
        rest if rest.len() == 6
            && (rest.starts_with('+') || rest.starts_with('-'))
            && &rest[3..4] == ":" =>
        {
            let oh = num(i + 1..i + 3)?;
            let om = num(i + 4..i + 6)?;
            if oh > 23 || om > 59 {
                return Err(bad());
            }
            let o = oh * 3600 + om * 60;
            if rest.starts_with('-') {
                -o
            } else {
                o
            }
        }
        _ => return Err(bad()),
    };
    let days = days_from_civil(y, mo as u32, d as u32);
    let secs = days * 86_400 + h * 3600 + mi * 60 + se.min(59) - offset_secs;
    if secs < 0 {
        return Err(TimeError::BeforeEpoch(s.to_owned()));
    }
    Ok(UNIX_EPOCH + Duration::new(secs as u64, nanos as u32))
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        _ => 28,
    }
}

fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Formats a time as RFC 3339 UTC, the form used in policy documents and the admin
/// endpoint: whole seconds as `2026-11-29T20:06:15Z`, otherwise with nanoseconds
/// (`2026-11-29T20:06:15.000000001Z`), so that [`parse_rfc3339`] gives back the same time.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
/// use logpolicy::clock::{format_rfc3339, parse_rfc3339};
/// assert_eq!(format_rfc3339(UNIX_EPOCH + Duration::from_secs(86_400)), "1970-01-02T00:00:00Z");
/// let t = UNIX_EPOCH + Duration::new(5, 1);
/// assert_eq!(parse_rfc3339(&format_rfc3339(t)).unwrap(), t);
/// ```
pub fn format_rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let mut out = [0u8; 20];
    rfc3339_seconds(d.as_secs(), &mut out);
    let mut s = String::from_utf8_lossy(&out[..19]).into_owned();
    if d.subsec_nanos() != 0 {
        s.push_str(&format!(".{:09}", d.subsec_nanos()));
    }
    s.push('Z');
    s
}

/// `#[serde(with = "crate::clock::serde_rfc3339")]` for a `SystemTime` written as
/// [`format_rfc3339`] and read with [`parse_rfc3339`] (used by the wire documents).
#[cfg(feature = "admin")]
pub(crate) mod serde_rfc3339 {
    use super::{format_rfc3339, parse_rfc3339};
    use std::time::SystemTime;

    pub(crate) fn serialize<S: serde::Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_rfc3339(*t))
    }

    pub(crate) fn deserialize<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<SystemTime, D::Error> {
        let s: std::borrow::Cow<'de, str> = serde::Deserialize::deserialize(d)?;
        parse_rfc3339(&s).map_err(serde::de::Error::custom)
    }
}

/// The same for an `Option<SystemTime>`.
pub(crate) mod serde_rfc3339_opt {
    use super::{format_rfc3339, parse_rfc3339};
    use std::time::SystemTime;

    pub(crate) fn serialize<S: serde::Serializer>(
        t: &Option<SystemTime>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => s.serialize_str(&format_rfc3339(*t)),
            None => s.serialize_none(),
        }
    }

    pub(crate) fn deserialize<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<Option<SystemTime>, D::Error> {
        let s: Option<std::borrow::Cow<'de, str>> = serde::Deserialize::deserialize(d)?;
        s.map(|s| parse_rfc3339(&s).map_err(serde::de::Error::custom))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn system_timestamps_follow_the_real_time_clock_and_never_go_back() {
        let mut last = Duration::ZERO;
        let start = std::time::Instant::now();
        // Several anchor periods, with reads inside each and across their ends.
        while start.elapsed() < SystemClock::ANCHOR_TTL * 4 {
            let before = Duration::from_nanos(realtime_nanos());
            let t = SystemClock.since_epoch();
            let after = Duration::from_nanos(realtime_nanos());
            assert!(t >= last, "went back: {t:?} after {last:?}");
            let slack = Duration::from_millis(1);
            assert!(
                t + slack >= before && t <= after + slack,
                "{t:?} not within 1 ms of [{before:?}, {after:?}]"
            );
            last = t;
            std::thread::sleep(Duration::from_micros(700));
        }
    }

    #[test]
    fn the_cache_never_serves_another_second() {
        // Alternate between seconds (and a day and a year boundary) on one thread:
        // every line must carry its own second, parsed back exactly.
        for s in [
            0u64,
            1,
            59,
            86_399,
            86_400,
            1_800_000_000,
            1_800_000_001,
            1_798_761_599,
            1_798_761_600,
        ] {
            for us in [0u32, 1, 999_999] {
                let t = UNIX_EPOCH + Duration::new(s, us * 1000);
                let mut a = Vec::new();
                write_rfc3339(&mut a, t);
                assert_eq!(a.len(), 27);
                let text = String::from_utf8(a).unwrap();
                assert_eq!(parse_rfc3339(&text).unwrap(), t, "{text}");
            }
        }
        let mut b = Vec::new();
        write_rfc3339(&mut b, UNIX_EPOCH + Duration::from_secs(1_798_761_600));
        assert_eq!(b, b"2027-01-01T00:00:00.000000Z");
    }

    #[test]
    fn known_dates() {
        let mut b = Vec::new();
        write_rfc3339(&mut b, UNIX_EPOCH);
        assert_eq!(b, b"1970-01-01T00:00:00.000000Z");
        assert_eq!(
            format_rfc3339(UNIX_EPOCH + Duration::from_secs(951_782_400)),
            "2000-02-29T00:00:00Z"
        );
    }

    #[test]
    fn rejects_bad_dates() {
        for s in [
            "2026-02-30T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-11-29T24:00:00Z",
            "2026-11-29T20:06:15",
            "2026-11-29T20:06:15.Z",
            "２026-11-29T20:06:15Z",
        ] {
            assert!(parse_rfc3339(s).is_err(), "{s}");
        }
    }

    proptest! {
        #[test]
        fn format_then_parse_round_trips(secs in 0u64..253_402_300_799, micros in 0u32..1_000_000) {
            let t = UNIX_EPOCH + Duration::new(secs, micros * 1000);
            let mut b = Vec::new();
            write_rfc3339(&mut b, t);
            let s = String::from_utf8(b).unwrap();
            prop_assert_eq!(parse_rfc3339(&s).unwrap(), t);
        }
    }
}
