//! The recorder: the lines a recording rule keeps in memory instead of writing, bounded in
//! bytes and age, for a raise to replay.
//!
//! A recording rule (`@record(shop::payment)=debug`, see
//! [`Directives`](crate::Directives)) makes the events of its target down to its level
//! that the levels in force do not write go here instead: formatted by the same code as a
//! written line (redaction applied, so nothing unredacted is ever held), with a replay
//! marker (`"replayed":true`, `replayed=true` in logfmt and text), and never written
//! unless a replay asks for them ([`Logging::replay`](crate::init::Logging::replay), or a
//! pushed policy whose layer asks for one).
//!
//! The store knows no policy: it takes lines with their time, level and ledger row, keeps
//! them in order, and gives up the newest on request. Lines leave it three ways, each
//! counted in the [ledger](crate::ledger) row of the callsite that emitted it:
//!
//! - **expired**: older than [`RecordLimits::max_age`] (checked whenever the store is
//!   touched), or pushed out, oldest first, to make room under
//!   [`RecordLimits::max_bytes`] (a line longer than the whole limit is never kept);
//! - **replayed**: taken by a replay, at most once: a replay takes every line of its
//!   window, so a second one finds none of them;
//! - still held: `recorded - replayed - expired`.
//!
//! # Memory
//!
//! A line costs its length plus [`LINE_OVERHEAD`] bytes against
//! [`RecordLimits::max_bytes`]. Lines are packed into chunks of [`CHUNK_BYTES`], allocated
//! as the store fills and freed as the oldest lines leave, so the store's heap never
//! exceeds `max_bytes` plus [`MEMORY_SLACK`] (the chunk being filled, the chunk whose
//! oldest lines already left, and their marks' spare capacity), under any load. With no
//! recording rule in force nothing is allocated.
//!
//! # Cost
//!
//! A recorded event costs its thread the formatting of its line (what a written line
//! costs) and one short critical section: a `memcpy` into the current chunk and one
//! mark, the same work as the writer's queue. Events of targets no rule names are not
//! touched: their callsites keep their interest (see [`crate::enforce`]).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::ledger::{Col, Ledger, RowId};
use crate::level::Level;

/// The default byte limit of the store: 8 MiB.
pub const DEFAULT_RECORD_BYTES: usize = 8 << 20;

/// The largest byte limit a service may set: 256 MiB.
pub const MAX_RECORD_BYTES: usize = 256 << 20;

/// The smallest byte limit: 64 KiB.
pub const MIN_RECORD_BYTES: usize = 64 << 10;

/// The default age after which a recorded line expires: 15 minutes.
pub const DEFAULT_RECORD_MAX_AGE: Duration = Duration::from_secs(15 * 60);

/// The longest age a service may set: 24 hours.
pub const MAX_RECORD_MAX_AGE: Duration = Duration::from_secs(24 * 3600);

/// Bytes each line costs against the limit besides its own: its mark (time, end, level
/// and ledger row).
pub const LINE_OVERHEAD: usize = std::mem::size_of::<Mark>();

/// Lines are packed into chunks of this size (a longer line gets a chunk of its own).
pub const CHUNK_BYTES: usize = 64 << 10;

/// What the store's heap may hold beyond [`RecordLimits::max_bytes`]: two chunks (the one
/// being filled and the one whose oldest lines already left) and the spare capacity of
/// their marks.
pub const MEMORY_SLACK: usize = 2 * CHUNK_BYTES + 2 * (CHUNK_BYTES / 16) * LINE_OVERHEAD;

/// How much the recorder keeps: bytes and age.
///
/// # Examples
///
/// ```
/// use logpolicy::recorder::RecordLimits;
/// use std::time::Duration;
///
/// let limits = RecordLimits::new(32 << 20, Duration::from_secs(600)).unwrap();
/// assert_eq!(limits.max_bytes(), 32 << 20);
/// assert_eq!(RecordLimits::default().max_bytes(), 8 << 20);
/// let err = RecordLimits::new(1 << 30, Duration::from_secs(600)).unwrap_err();
/// assert_eq!(err.to_string(), "record bytes 1073741824 is out of range (65536 to 268435456)");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordLimits {
    max_bytes: usize,
    max_age: Duration,
}

/// A [`RecordLimits`] out of range; names the setting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordLimitsError {
    /// The byte limit is out of range.
    #[error("record bytes {0} is out of range ({MIN_RECORD_BYTES} to {MAX_RECORD_BYTES})")]
    Bytes(usize),
    /// The age is zero or longer than [`MAX_RECORD_MAX_AGE`].
    #[error("record max age {0:?} is out of range (1s to 24h)")]
    Age(Duration),
}

impl Default for RecordLimits {
    fn default() -> Self {
        RecordLimits {
            max_bytes: DEFAULT_RECORD_BYTES,
            max_age: DEFAULT_RECORD_MAX_AGE,
        }
    }
}

impl RecordLimits {
    /// Limits of `max_bytes` (from [`MIN_RECORD_BYTES`] to [`MAX_RECORD_BYTES`]) and
    /// `max_age` (from 1 s to [`MAX_RECORD_MAX_AGE`]).
    pub fn new(max_bytes: usize, max_age: Duration) -> Result<Self, RecordLimitsError> {
        if !(MIN_RECORD_BYTES..=MAX_RECORD_BYTES).contains(&max_bytes) {
            return Err(RecordLimitsError::Bytes(max_bytes));
        }
        if max_age < Duration::from_secs(1) || max_age > MAX_RECORD_MAX_AGE {
            return Err(RecordLimitsError::Age(max_age));
        }
        Ok(RecordLimits { max_bytes, max_age })
    }

    /// The most bytes the lines (with [`LINE_OVERHEAD`] each) may take.
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// The age at which a line expires.
    pub fn max_age(&self) -> Duration {
        self.max_age
    }

    #[inline]
    fn max_age_us(&self) -> u64 {
        us_of(self.max_age)
    }
}

/// Where one line ends in its chunk, and what it is.
#[derive(Debug, Clone, Copy)]
struct Mark {
    /// Microseconds since the Unix epoch when the event was emitted.
    at_us: u64,
    /// One past its last byte in the chunk.
    end: u32,
    row: RowId,
    level: Level,
}

#[derive(Debug, Default)]
struct Chunk {
    buf: Vec<u8>,
    marks: Vec<Mark>,
    /// The first mark still held (the ones before it left).
    first: usize,
}

impl Chunk {
    fn start_of(&self, i: usize) -> usize {
        if i == 0 {
            0
        } else {
            self.marks[i - 1].end as usize
        }
    }

    fn held(&self) -> &[Mark] {
        &self.marks[self.first..]
    }
}

#[derive(Debug, Default)]
struct Store {
    limits: RecordLimits,
    chunks: VecDeque<Chunk>,
    /// Held lines' bytes plus their overhead.
    bytes: usize,
    lines: usize,
    recorded: u64,
    replayed: u64,
    expired: u64,
    /// Replays asked for.
    replays: u64,
    /// When the newest line that ever expired was emitted (microseconds since the
    /// epoch; 0: none expired): a window starting before it was not held whole.
    last_expired_us: u64,
    /// When a recorded line last made the lines past the age limit expire
    /// (microseconds since the epoch): lines recorded within [`AGE_CHECK_US`] of it
    /// do not look again.
    age_checked_us: u64,
}

/// How often recording looks for lines past the age limit: at most once per this many
/// microseconds of emission time (a line leaves at most this late; reads and replays
/// always look first).
const AGE_CHECK_US: u64 = 1_000;

/// What the recorder holds and has done (for metrics and views).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecorderStats {
    /// Bytes held, with [`LINE_OVERHEAD`] per line.
    pub bytes: usize,
    /// Lines held.
    pub lines: usize,
    /// When the oldest line held was emitted.
    pub oldest: Option<SystemTime>,
    /// The byte limit.
    pub max_bytes: usize,
    /// The age limit.
    pub max_age: Duration,
    /// Lines recorded since the start.
    pub recorded: u64,
    /// Lines taken by replays since the start.
    pub replayed: u64,
    /// Lines that expired (aged out or pushed out by the byte limit) since the start.
    pub expired: u64,
    /// Replays since the start.
    pub replays: u64,
}

/// Lines taken from the store by one replay, in the order they were recorded.
#[derive(Debug, Default)]
pub struct Taken {
    /// The lines, back to back.
    bytes: Vec<u8>,
    /// Per line: where it ends in `bytes`, its time, level and row.
    marks: Vec<Mark>,
    /// When the oldest line the store held (before this replay) was emitted: what it
    /// could give back from.
    pub held_from: Option<SystemTime>,
    /// Whether the store held every line recorded in the window: no line emitted in it
    /// had expired (aged out, or pushed out by the byte limit).
    pub complete: bool,
}

impl Taken {
    /// How many lines.
    pub fn len(&self) -> usize {
        self.marks.len()
    }

    /// Whether no line was taken.
    pub fn is_empty(&self) -> bool {
        self.marks.is_empty()
    }

    /// The lines' bytes in all.
    pub fn byte_len(&self) -> usize {
        self.bytes.len()
    }

    /// When the first line taken was emitted.
    pub fn first_at(&self) -> Option<SystemTime> {
        self.marks.first().map(|m| time_of(m.at_us))
    }

    /// Each line with its ledger row and level, in order.
    pub(crate) fn lines(&self) -> impl Iterator<Item = (RowId, Level, &[u8])> + '_ {
        self.marks.iter().scan(0usize, move |start, m| {
            let line = &self.bytes[*start..m.end as usize];
            *start = m.end as usize;
            Some((m.row, m.level, line))
        })
    }
}

fn time_of(at_us: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_micros(at_us)
}

/// Microseconds of `d`, in u64 arithmetic (saturating past 584,000 years).
#[inline]
fn us_of(d: Duration) -> u64 {
    d.as_secs()
        .saturating_mul(1_000_000)
        .saturating_add(u64::from(d.subsec_micros()))
}

struct Inner {
    store: Mutex<Store>,
    ledger: Ledger,
}

/// The bounded in-memory store of recorded lines. Clones share it.
///
/// Services reach it through [`Logging::replay`](crate::init::Logging::replay) and
/// [`PolicyHandle::recorder`](crate::PolicyHandle::recorder); it is filled by the
/// [`FormatLayer`](crate::FormatLayer) linked to the policy.
///
/// # Examples
///
/// ```
/// use logpolicy::ledger::{Ledger, RowId};
/// use logpolicy::recorder::Recorder;
/// use logpolicy::Level;
/// use std::time::{Duration, UNIX_EPOCH};
///
/// let recorder = Recorder::new(Ledger::new());
/// let at = |s| Duration::from_secs(s);
/// recorder.record(at(100), RowId::OTHER, Level::Debug, b"{\"msg\":\"one\"}\n");
/// recorder.record(at(160), RowId::OTHER, Level::Debug, b"{\"msg\":\"two\"}\n");
/// // The last 30 seconds at 170 s: the second line only, and only once.
/// let taken = recorder.take_since(at(140), at(170));
/// assert_eq!(taken.len(), 1);
/// assert_eq!(taken.held_from, Some(UNIX_EPOCH + at(100)));
/// assert!(recorder.take_since(at(140), at(170)).is_empty());
/// assert_eq!(recorder.stats(at(170)).lines, 1);
/// ```
#[derive(Clone)]
pub struct Recorder {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("limits", &self.limits())
            .finish_non_exhaustive()
    }
}

impl Recorder {
    /// An empty store with the default limits, counting in `ledger`.
    pub fn new(ledger: Ledger) -> Self {
        Recorder {
            inner: Arc::new(Inner {
                store: Mutex::new(Store::default()),
                ledger,
            }),
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> RecordLimits {
        self.store().limits
    }

    /// Sets the limits; lines beyond the new ones expire at once.
    pub fn set_limits(&self, limits: RecordLimits) {
        let mut store = self.store();
        store.limits = limits;
        self.make_room(&mut store, 0, limits);
    }

    fn store(&self) -> std::sync::MutexGuard<'_, Store> {
        self.inner
            .store
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps `line` (an event of `level` and ledger row `row`, emitted at `now` since the
    /// Unix epoch), making room by expiring the oldest lines. A line longer than the
    /// whole limit expires at once. Counted as recorded in the row.
    pub fn record(&self, now: Duration, row: RowId, level: Level, line: &[u8]) {
        let at_us = us_of(now);
        let len = line.len();
        let cost = len + LINE_OVERHEAD;
        let ledger = &self.inner.ledger;
        let mut store = self.store();
        // Counted under the lock the recording threads take anyway: one shared add.
        ledger.add_shared(row, Col::Recorded as usize, 1);
        let limits = store.limits;
        store.recorded += 1;
        if at_us >= store.age_checked_us.saturating_add(AGE_CHECK_US) {
            store.age_checked_us = at_us;
            self.expire_older(&mut store, at_us.saturating_sub(limits.max_age_us()));
        }
        if cost > limits.max_bytes || len > u32::MAX as usize / 2 {
            store.expired += 1;
            store.last_expired_us = store.last_expired_us.max(at_us);
            ledger.add_shared(row, Col::Expired as usize, 1);
            return;
        }
        self.make_room(&mut store, cost, limits);
        store.bytes += cost;
        store.lines += 1;
        let chunk = match store.chunks.back_mut() {
            Some(c) if c.buf.capacity() - c.buf.len() >= len => c,
            _ => {
                store.chunks.push_back(Chunk {
                    buf: Vec::with_capacity(len.max(CHUNK_BYTES)),
                    marks: Vec::with_capacity(CHUNK_BYTES / 256),
                    first: 0,
                });
                match store.chunks.back_mut() {
                    Some(c) => c,
                    None => return,
                }
            }
        };
        chunk.buf.extend_from_slice(line);
        let end = chunk.buf.len() as u32;
        chunk.marks.push(Mark {
            at_us,
            end,
            row,
            level,
        });
    }

    /// Expires the oldest lines until `extra` more bytes fit under the limit.
    fn make_room(&self, store: &mut Store, extra: usize, limits: RecordLimits) {
        while store.bytes + extra > limits.max_bytes && store.lines > 0 {
            self.expire_front(store);
        }
    }

    /// Expires the lines emitted before `before_us` (microseconds since the epoch).
    fn expire_older(&self, store: &mut Store, before_us: u64) {
        while store
            .chunks
            .front()
            .and_then(|c| c.held().first())
            .is_some_and(|m| m.at_us < before_us)
        {
            self.expire_front(store);
        }
    }

    /// Expires the oldest line held (there is one).
    fn expire_front(&self, store: &mut Store) {
        let Some(chunk) = store.chunks.front_mut() else {
            return;
        };
        let Some(&mark) = chunk.marks.get(chunk.first) else {
            store.chunks.pop_front();
            return;
        };
        let len = mark.end as usize - chunk.start_of(chunk.first);
        chunk.first += 1;
        if chunk.first == chunk.marks.len() {
            store.chunks.pop_front();
        }
        store.bytes -= len + LINE_OVERHEAD;
        store.lines -= 1;
        store.expired += 1;
        store.last_expired_us = store.last_expired_us.max(mark.at_us);
        self.inner
            .ledger
            .add_shared(mark.row, Col::Expired as usize, 1);
    }

    /// Takes every line emitted at or after `since` (since the Unix epoch), at `now`:
    /// they leave the store (a line is replayed at most once) and are counted as
    /// replayed. Lines older than the age limit expire first.
    pub fn take_since(&self, since: Duration, now: Duration) -> Taken {
        let since_us = us_of(since);
        let mut store = self.store();
        let limits = store.limits;
        self.expire_older(&mut store, us_of(now).saturating_sub(limits.max_age_us()));
        let held_from = store
            .chunks
            .front()
            .and_then(|c| c.held().first())
            .map(|m| time_of(m.at_us));
        store.replays += 1;
        let mut taken = Taken {
            held_from,
            complete: store.expired == 0 || store.last_expired_us < since_us,
            ..Taken::default()
        };
        // The window is the newest lines: find the first chunk that has one.
        let Some(from) = store
            .chunks
            .iter()
            .position(|c| c.held().iter().any(|m| m.at_us >= since_us))
        else {
            return taken;
        };
        let tail: Vec<Chunk> = store.chunks.drain(from..).collect();
        let mut kept = None;
        for (n, mut chunk) in tail.into_iter().enumerate() {
            // Lines are in emission order but for threads racing by microseconds: in the
            // first chunk of the window, a line before `since` stays only if every line
            // before it does too.
            let mut i = chunk.first;
            if n == 0 {
                while i < chunk.marks.len() && chunk.marks[i].at_us < since_us {
                    i += 1;
                }
            }
            for j in i..chunk.marks.len() {
                let m = chunk.marks[j];
                let line = &chunk.buf[chunk.start_of(j)..m.end as usize];
                taken.bytes.extend_from_slice(line);
                taken.marks.push(Mark {
                    end: taken.bytes.len() as u32,
                    ..m
                });
                store.bytes -= line.len() + LINE_OVERHEAD;
                store.lines -= 1;
            }
            if n == 0 && i > chunk.first {
                // The lines before the window stay, in their own (shortened) chunk.
                chunk.marks.truncate(i);
                chunk.buf.truncate(chunk.start_of(i));
                chunk.buf.shrink_to_fit();
                kept = Some(chunk);
            }
        }
        if let Some(chunk) = kept {
            store.chunks.push_back(chunk);
        }
        store.replayed += taken.marks.len() as u64;
        drop(store);
        for m in &taken.marks {
            self.inner.ledger.add(m.row, Col::Replayed as usize, 1);
        }
        taken
    }

    /// What the store holds at `now` (since the Unix epoch), after expiring what is too
    /// old, and what it has done.
    pub fn stats(&self, now: Duration) -> RecorderStats {
        let mut store = self.store();
        let limits = store.limits;
        self.expire_older(&mut store, us_of(now).saturating_sub(limits.max_age_us()));
        RecorderStats {
            bytes: store.bytes,
            lines: store.lines,
            oldest: store
                .chunks
                .front()
                .and_then(|c| c.held().first())
                .map(|m| time_of(m.at_us)),
            max_bytes: limits.max_bytes,
            max_age: limits.max_age,
            recorded: store.recorded,
            replayed: store.replayed,
            expired: store.expired,
            replays: store.replays,
        }
    }

    /// The store's heap now: chunk buffers and marks, by capacity (for the memory test).
    pub fn heap_bytes(&self) -> usize {
        let store = self.store();
        store
            .chunks
            .iter()
            .map(|c| c.buf.capacity() + c.marks.capacity() * LINE_OVERHEAD)
            .sum::<usize>()
            + store.chunks.capacity() * std::mem::size_of::<Chunk>()
    }
}

/// Who asked for a replay, and for which window.
///
/// # Examples
///
/// ```
/// use logpolicy::recorder::ReplayRequest;
/// use std::time::Duration;
/// let request = ReplayRequest::new("shop/raise-payments", Duration::from_secs(300))
///     .reason("INC-4211: card declines");
/// assert_eq!(request.since, Duration::from_secs(300));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayRequest {
    /// Who asked: a pushed policy's `namespace/name`, or the service's own name for it.
    pub by: String,
    /// Why, in one line (a raise's reason).
    pub reason: Option<String>,
    /// How far back: lines emitted at most this long before the replay starts.
    pub since: Duration,
}

impl ReplayRequest {
    /// A replay of the last `since`, asked for by `by`.
    pub fn new(by: impl Into<String>, since: Duration) -> Self {
        ReplayRequest {
            by: by.into(),
            reason: None,
            since,
        }
    }

    /// With a reason.
    #[must_use]
    pub fn reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }
}

/// What one replay did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayReport {
    /// The start of the window asked for.
    pub asked_from: SystemTime,
    /// When the oldest line the store held was emitted (`None`: it held none). Later
    /// than `asked_from`: the store no longer held the start of the window.
    pub held_from: Option<SystemTime>,
    /// When the first replayed line was emitted.
    pub first_at: Option<SystemTime>,
    /// Lines taken from the store (each replayed once, then gone from it).
    pub lines: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Of those, lines the writer's queue took.
    pub queued: u64,
    /// Of those, lines the writer dropped (counted in the ledger and the writer's stats).
    pub dropped: u64,
    /// Whether the store held every line recorded in the window (none of them had
    /// expired): when not, the pod held less than asked.
    pub complete: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    fn lines(t: &Taken) -> Vec<String> {
        t.lines()
            .map(|(_, _, l)| String::from_utf8_lossy(l).into_owned())
            .collect()
    }

    #[test]
    fn the_window_is_taken_in_order_and_only_once() {
        let r = Recorder::new(Ledger::new());
        for i in 0..10u64 {
            r.record(
                s(100 + i),
                RowId::OTHER,
                Level::Debug,
                format!("l{i}\n").as_bytes(),
            );
        }
        let t = r.take_since(s(105), s(110));
        assert!(t.complete);
        assert_eq!(lines(&t), ["l5\n", "l6\n", "l7\n", "l8\n", "l9\n"]);
        assert_eq!(t.held_from, Some(UNIX_EPOCH + s(100)));
        assert!(r.take_since(s(105), s(110)).is_empty());
        let st = r.stats(s(110));
        assert_eq!(
            (st.lines, st.recorded, st.replayed, st.expired),
            (5, 10, 5, 0)
        );
        // The older lines are still there for a wider window.
        assert_eq!(lines(&r.take_since(s(0), s(110))).len(), 5);
    }

    #[test]
    fn the_byte_limit_holds_and_expires_the_oldest_first() {
        let r = Recorder::new(Ledger::new());
        r.set_limits(RecordLimits::new(MIN_RECORD_BYTES, s(3600)).unwrap());
        let line = [b'x'; 999];
        for i in 0..1000u64 {
            r.record(s(i), RowId::OTHER, Level::Debug, &line);
            let st = r.stats(s(i));
            assert!(st.bytes <= MIN_RECORD_BYTES);
            assert!(r.heap_bytes() <= MIN_RECORD_BYTES + MEMORY_SLACK + 4096);
        }
        let st = r.stats(s(1000));
        assert_eq!(st.recorded, 1000);
        assert_eq!(st.expired + st.lines as u64, 1000);
        assert_eq!(st.lines, MIN_RECORD_BYTES / (999 + LINE_OVERHEAD));
        // The newest are the ones held.
        assert_eq!(st.oldest, Some(UNIX_EPOCH + s(1000 - st.lines as u64)));
    }

    #[test]
    fn lines_age_out() {
        let r = Recorder::new(Ledger::new());
        r.set_limits(RecordLimits::new(MIN_RECORD_BYTES, s(60)).unwrap());
        r.record(s(0), RowId::OTHER, Level::Debug, b"old\n");
        r.record(s(50), RowId::OTHER, Level::Debug, b"new\n");
        let st = r.stats(s(100));
        assert_eq!((st.lines, st.expired), (1, 1));
        // A window from 10 s: whole. From 0 s: the line of 0 s is gone.
        assert!(r.take_since(s(10), s(100)).complete);
        r.record(s(60), RowId::OTHER, Level::Debug, b"new\n");
        let t = r.take_since(s(0), s(100));
        assert!(!t.complete);
        assert_eq!(lines(&t), ["new\n"]);
    }

    #[test]
    fn a_line_longer_than_the_limit_expires_at_once() {
        let r = Recorder::new(Ledger::new());
        r.set_limits(RecordLimits::new(MIN_RECORD_BYTES, s(60)).unwrap());
        r.record(
            s(0),
            RowId::OTHER,
            Level::Debug,
            &vec![b'x'; MIN_RECORD_BYTES],
        );
        let st = r.stats(s(0));
        assert_eq!((st.lines, st.recorded, st.expired, st.bytes), (0, 1, 1, 0));
    }

    #[test]
    fn lines_before_the_window_in_its_first_chunk_stay() {
        let r = Recorder::new(Ledger::new());
        r.record(s(1), RowId::OTHER, Level::Debug, b"a\n");
        r.record(s(2), RowId::OTHER, Level::Debug, b"b\n");
        r.record(s(3), RowId::OTHER, Level::Debug, b"c\n");
        assert_eq!(lines(&r.take_since(s(2), s(3))), ["b\n", "c\n"]);
        r.record(s(4), RowId::OTHER, Level::Debug, b"d\n");
        assert_eq!(lines(&r.take_since(s(0), s(4))), ["a\n", "d\n"]);
        assert_eq!(r.stats(s(4)).bytes, 0);
    }

    #[test]
    fn limits_are_checked() {
        assert!(RecordLimits::new(MIN_RECORD_BYTES - 1, s(1)).is_err());
        assert!(RecordLimits::new(MAX_RECORD_BYTES, MAX_RECORD_MAX_AGE).is_ok());
        assert_eq!(
            RecordLimits::new(MIN_RECORD_BYTES, Duration::ZERO)
                .unwrap_err()
                .to_string(),
            "record max age 0ns is out of range (1s to 24h)"
        );
    }
}
