//! The ledger: what each callsite costs, in lines and bytes written and in events not
//! written (and why), counted at the source, exactly.
//!
//! Every event callsite gets one row the first time `tracing` registers it. A callsite
//! registers the first time it runs at a level no more verbose than the most verbose
//! level the policy enables for any target (`tracing`'s max level): under `info,
//! shop::db=debug`, every `debug!` callsite that runs registers, enabled for its target
//! or not (a row with no lines is a callsite that ran and was never written), while under
//! plain `info` a `debug!` callsite stops at that one comparison, registers nothing and
//! has no row until some target is raised to `debug`. A row names the callsite
//! (target, level, name, file, line, module path) and counts:
//!
//! - `lines` and `bytes` **written**: counted by the [`Writer`](crate::writer::Writer)'s
//!   thread once the output took the line, with the exact length of the line in
//!   whatever format it was written;
//! - events **not written**, per reason: `sampled`, `burst`, `budget` (the policy's
//!   decisions), and the writer's drops (`queue_full`, `reserve_full`, `output_closed`,
//!   `shutdown`, `contended`, `evicted`: see [`DropReason`](crate::writer::DropReason)).
//!
//! Records of the `log` crate (through [`LogBridge`](crate::LogBridge)) get rows of
//! their own, by target, file, line and level, in the same table.
//!
//! The table is bounded: at most [`MAX_ROWS`] rows, two of them reserved: one row,
//! `other`, counts every callsite past the cap (nothing is lost: it is counted there),
//! and one counts the lines written without a callsite: logpolicy's own lines (policy
//! changes, summaries of what was not written, warnings about settings), reported as
//! [`Sites::own`].
//!
//! # Exact
//!
//! Each written line is counted once, by the writer's thread, in the row of the callsite
//! that emitted it (the row travels with the line through the queue), so after a flush
//! the rows' bytes plus [`Sites::own`]'s equal
//! [`WriterStats::bytes_written`](crate::writer::WriterStats::bytes_written), and their
//! lines equal the writer's written lines. Read under load, the two differ by at most
//! the lines in flight (taken by the writer's thread and not yet counted). A line cut
//! by a failing output counts as dropped (`output_closed`); its bytes that got out are
//! counted in [`Sites::own`]'s bytes, with the writer's own markers.
//!
//! # Cost model
//!
//! - A **disabled** event never reaches the ledger: nothing is added to that path.
//! - A **written** event costs its emitting thread no lookup of its own: its row is kept
//!   with the callsite's rendered keys, which the formatter looks up anyway (a `log`
//!   record's row, and a callsite's beyond that table, cost a probe of a process-wide
//!   lock-free table keyed by the callsite's address, a load and a compare), and 12 bits
//!   in the line's mark in the queue (which already holds its end and
//!   level). No thread but the writer's writes a counter for it: the writer's thread adds
//!   the line and its bytes to its own copy of the row after the write.
//! - An event **not written** is counted by the thread that decided so, in that
//!   thread's own copy of the row: one thread-local load (the thread's slot), the
//!   slot's copy, a load and a store, no atomic read-modify-write, no cache line shared
//!   with another thread (an event sampled out on the filter's lock-free path finds its
//!   row in its callsite's word there).
//! - A thread's copy belongs to its **slot**, which it takes on its first count and
//!   gives back when it ends: the next thread to take the slot goes on counting in the
//!   same copy, so nothing is moved when a thread ends. A thread past the first 1,024
//!   alive at once, and a thread counting while it ends, counts with atomic adds in a
//!   copy every thread shares.
//! - A **read** ([`Ledger::sites`]) folds every slot's copy and the shared one.
//!
//! Memory: the process-wide index takes 320 KiB of static tables (two tables of 8,192
//! slots of 16 bytes, and a slot per row for its names), touched as rows are given;
//! each row's names take about 90 bytes (a `log` row's target and file are copied once:
//! about 0.7 MiB for 4,094 `log` rows with 80-byte targets and files). Counters are
//! allocated 64 rows at a time (7 KiB), per thread slot that counts in those rows: a
//! thread writing from 20 callsites of one module holds one such page. A slot's pages
//! stay with the ledger after its thread ends, for the slot's next thread: they add up
//! to the most threads that counted at once, not to every thread that ever did. Each
//! ledger has a table of 1,024 slots (16 KiB). A read allocates
//! 360 KiB for the sums and a row per callsite, and frees them.
//!
//! # Examples
//!
//! ```
//! use logpolicy::writer::{Output, WriterConfig};
//!
//! let path = std::env::temp_dir().join(format!("ledger-doc-{}.log", std::process::id()));
//! let (dispatch, logging) = logpolicy::Builder::new()
//!     .directives("info")
//!     .writer(WriterConfig::new(Output::File(path.clone())))
//!     .build()?;
//! tracing::dispatcher::with_default(&dispatch, || {
//!     for i in 0..3 {
//!         tracing::info!(target: "shop::cart", item = i, "added");
//!     }
//!     tracing::debug!(target: "shop::cart", "not enabled: counted nowhere");
//! });
//! assert!(logging.flush(std::time::Duration::from_secs(5)));
//! let sites = logging.sites();
//! let cart = sites.rows.iter().find(|r| r.target == "shop::cart" && r.counts.lines > 0).unwrap();
//! assert_eq!(cart.counts.lines, 3);
//! assert_eq!(cart.level, logpolicy::Level::Info);
//! assert!(cart.name.starts_with("event ") && cart.file.is_some() && cart.line.is_some());
//! // Exact: every byte the writer wrote is in a row or in logpolicy's own lines.
//! let written = logging.writer_stats().bytes_written;
//! assert_eq!(sites.totals.bytes + sites.own.bytes, written);
//! assert_eq!(std::fs::metadata(&path)?.len(), written);
//! # drop(logging);
//! # std::fs::remove_file(path)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::SystemTime;

use serde::Serialize;
use tracing_core::Metadata;

use crate::level::Level;
use crate::sites::{self, WordSlot};

/// The most rows a process's ledger has, the two reserved ones included (`other` and
/// logpolicy's own lines): row ids fit in 12 bits.
pub const MAX_ROWS: usize = 4096;

/// Slots of each index table: twice the rows, so probes stay short.
const INDEX_SLOTS: usize = 2 * MAX_ROWS;

/// Rows whose counters are allocated together.
const PAGE_ROWS: usize = 64;
const PAGES: usize = MAX_ROWS / PAGE_ROWS;

/// A row of the ledger: a callsite, a `log` record's site, `other` or logpolicy's own
/// lines. Opaque: it is what a [`LineSink`](crate::LineSink) is told about a line's
/// origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RowId(u16);

impl RowId {
    /// Callsites past the cap.
    pub const OTHER: RowId = RowId(0);
    /// Lines written without a callsite: logpolicy's own.
    pub const OWN: RowId = RowId(1);
    const FIRST: usize = 2;

    /// The row's index (below [`MAX_ROWS`]).
    #[inline(always)]
    pub(crate) const fn index(self) -> usize {
        self.0 as usize
    }

    /// The row of index `i` (its low 12 bits).
    #[inline(always)]
    pub(crate) const fn from_index(i: usize) -> RowId {
        RowId((i % MAX_ROWS) as u16)
    }
}

/// What a row counts, in column order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Col {
    Lines = 0,
    Bytes = 1,
    /// The policy's reasons follow (sampled, burst, budget: see [`Col::policy`]).
    Sampled = 2,
    /// The writer's drop reasons follow, in [`DropReason`](crate::writer::DropReason)'s order.
    WriterDrops = 5,
    /// Kept by the [recorder](crate::recorder) instead of written.
    Recorded = 11,
    /// Taken from the recorder by a replay (then written or dropped by the writer).
    Replayed = 12,
    /// Left the recorder unreplayed: too old, or pushed out by its byte limit.
    Expired = 13,
}

/// Columns: lines, bytes, the policy's three reasons, the writer's six, and the
/// recorder's three.
pub(crate) const COLS: usize = 14;

impl Col {
    /// The column of the policy's reason `i` (sampled, burst, budget).
    #[inline]
    pub(crate) const fn policy(i: usize) -> usize {
        Col::Sampled as usize + i
    }

    /// The column of the writer's drop reason `i` (see `DropReason::index`).
    #[inline]
    pub(crate) const fn writer(i: usize) -> usize {
        Col::WriterDrops as usize + i
    }
}

// ---------------------------------------------------------------------------------
// The process-wide index: callsite -> row, and each row's names.

/// Where a row's line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SiteKind {
    /// A `tracing` event callsite.
    Event,
    /// A `log` record's site (target, file, line), through the bridge.
    Log,
}

/// The names of a row.
#[derive(Debug)]
struct RowInfo {
    kind: SiteKind,
    target: &'static str,
    level: Level,
    name: &'static str,
    file: Option<&'static str>,
    line: Option<u32>,
    module_path: Option<&'static str>,
}

static BY_CALLSITE: [WordSlot; INDEX_SLOTS] = [const { WordSlot::free() }; INDEX_SLOTS];
static BY_RECORD: [WordSlot; INDEX_SLOTS] = [const { WordSlot::free() }; INDEX_SLOTS];
static INFO: [OnceLock<&'static RowInfo>; MAX_ROWS] = [const { OnceLock::new() }; MAX_ROWS];
static NEXT: AtomicUsize = AtomicUsize::new(RowId::FIRST);
/// Callsites and `log` sites counted in `other` (no row left, or no slot in the index).
static OVERFLOWED: AtomicU64 = AtomicU64::new(0);

/// An index word: the row's index + 1 (0: none yet), with [`LOG_SITE`] for a callsite of
/// the `log` bridge, whose records' rows are per record site.
const LOG_SITE: u64 = 1 << 32;
/// A row being given (by the thread that claimed the slot).
const CLAIMED: u64 = u64::MAX;

thread_local! {
    /// The row of the `log` record this thread is dispatching (index + 1; 0: none).
    static RECORD_ROW: Cell<u16> = const { Cell::new(0) };
}

/// The row of an event of `meta`: its callsite's, or for a `log` bridge callsite the
/// row of the record being dispatched; [`RowId::OTHER`] for metadata that is no
/// callsite's own (built per event, as `tracing-log` does).
///
/// A callsite another thread is still registering (`tracing` lets other threads ask
/// the filters about its events meanwhile) has no row yet: it is given its row here,
/// as its registration would give it.
#[inline]
pub(crate) fn row_of(meta: &Metadata<'_>) -> RowId {
    let key = meta as *const Metadata<'_> as usize;
    match sites::find_word(&BY_CALLSITE, key) {
        Some(word) => decode(word.load(Ordering::Acquire)).unwrap_or_else(|| wait_for(word)),
        None => row_of_unregistered(meta),
    }
}

/// [`row_of`] for metadata with no row yet: the callsite's own metadata (the same
/// address as its callsite's, so `'static`) gets its row now; any other is `other`'s.
#[cold]
#[inline(never)]
fn row_of_unregistered(meta: &Metadata<'_>) -> RowId {
    let own: &'static Metadata<'static> = meta.callsite().0.metadata();
    if std::ptr::eq(
        own as *const Metadata<'_> as *const u8,
        meta as *const Metadata<'_> as *const u8,
    ) {
        row_of_static(own)
    } else {
        RowId::OTHER
    }
}

/// The row of an event of the registered callsite `meta`, given now if it has none yet
/// (another thread may be registering it).
#[inline(always)]
pub(crate) fn row_of_static(meta: &'static Metadata<'static>) -> RowId {
    let key = meta as *const Metadata<'_> as usize;
    if let Some(word) = sites::find_word(&BY_CALLSITE, key) {
        if let Some(row) = decode(word.load(Ordering::Acquire)) {
            return row;
        }
    }
    register(meta)
}

/// The row of every event of `meta`'s callsite if it has one already and it is not a
/// callsite of the `log` bridge (whose rows are per record); `None` otherwise (nothing
/// is given here).
pub(crate) fn fixed_row(meta: &Metadata<'_>) -> Option<RowId> {
    let key = meta as *const Metadata<'_> as usize;
    let w = sites::find_word(&BY_CALLSITE, key)?.load(Ordering::Acquire);
    if w & LOG_SITE != 0 {
        return None;
    }
    decode(w).filter(|r| *r != RowId::OTHER)
}

/// The row of every event of the registered callsite `meta` (given now if it has none
/// yet), or `None` for a callsite of the `log` bridge, whose events are counted in the
/// rows of their records: what a per-callsite cache may keep.
pub(crate) fn fixed_row_of_static(meta: &'static Metadata<'static>) -> Option<RowId> {
    let key = meta as *const Metadata<'_> as usize;
    if let Some(word) = sites::find_word(&BY_CALLSITE, key) {
        let w = word.load(Ordering::Acquire);
        if w & LOG_SITE != 0 && w != CLAIMED {
            return None;
        }
    }
    Some(row_of_static(meta))
}

#[inline(always)]
fn decode(w: u64) -> Option<RowId> {
    if w & LOG_SITE != 0 && w != CLAIMED {
        let r = RECORD_ROW.with(Cell::get);
        return Some(if r == 0 {
            RowId::OTHER
        } else {
            RowId::from_index(usize::from(r) - 1)
        });
    }
    if w == 0 || w == CLAIMED {
        return None;
    }
    Some(RowId::from_index((w - 1) as usize))
}

/// Waits for the thread that claimed `word` to give its row (a few instructions, unless
/// that thread was preempted).
#[cold]
fn wait_for(word: &AtomicU64) -> RowId {
    for spin in 0.. {
        if let Some(row) = decode(word.load(Ordering::Acquire)) {
            return row;
        }
        if spin < 64 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
    RowId::OTHER
}

/// Gives the event callsite `meta` a row (if it has none), when `tracing` registers it.
#[cold]
pub(crate) fn register(meta: &'static Metadata<'static>) -> RowId {
    let info = || RowInfo {
        kind: SiteKind::Event,
        target: meta.target(),
        level: Level::of(meta.level()),
        name: meta.name(),
        file: meta.file(),
        line: meta.line(),
        module_path: meta.module_path(),
    };
    let key = meta as *const Metadata<'_> as usize;
    if !meta.is_event() {
        return RowId::OTHER;
    }
    give(&BY_CALLSITE, key, info)
}

/// Marks a callsite of the `log` bridge: its events are counted in the rows of their
/// records (see [`record_row`]).
pub(crate) fn register_log_site(meta: &'static Metadata<'static>) {
    let key = meta as *const Metadata<'_> as usize;
    if let Some(word) = sites::find_or_insert_word(&BY_CALLSITE, key) {
        word.store(LOG_SITE, Ordering::Release);
    }
}

/// The row of a `log` record of `target` at `file`:`line`, level `level`.
pub(crate) fn record_row(
    target: &str,
    file: Option<&str>,
    line: Option<u32>,
    level: &tracing_core::Level,
) -> RowId {
    let key = record_key(target, file, line, level);
    if let Some(word) = sites::find_word(&BY_RECORD, key) {
        if let Some(row) = decode(word.load(Ordering::Acquire)) {
            return row;
        }
    }
    let info = || RowInfo {
        kind: SiteKind::Log,
        target: Box::leak(target.into()),
        level: Level::of(level),
        name: "log record",
        file: file.map(|f| &*Box::leak(f.into())),
        line,
        module_path: None,
    };
    give(&BY_RECORD, key, info)
}

/// Runs `f` (the dispatch of a `log` record) with `row` as the row of the bridge's
/// callsites on this thread.
pub(crate) fn with_record<R>(row: RowId, f: impl FnOnce() -> R) -> R {
    let before = RECORD_ROW.with(|r| r.replace(row.0 + 1));
    let out = f();
    RECORD_ROW.with(|r| r.set(before));
    out
}

/// A key for a record site: FNV-1a over its parts (never 0, never a callsite's key:
/// it lives in its own table).
fn record_key(
    target: &str,
    file: Option<&str>,
    line: Option<u32>,
    level: &tracing_core::Level,
) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        h = (h ^ 0xff).wrapping_mul(0x0100_0000_01b3);
    };
    eat(target.as_bytes());
    eat(file.unwrap_or("").as_bytes());
    eat(&line.unwrap_or(u32::MAX).to_le_bytes());
    eat(&[crate::level::level_index(*level) as u8]);
    (h as usize) | 8
}

/// Gives `key` in `table` a row built from `info`, once (the thread that claims the
/// slot gives it; others wait for it). `OTHER` when the slots near it or the rows are
/// all taken.
fn give(table: &'static [WordSlot], key: usize, info: impl FnOnce() -> RowInfo) -> RowId {
    let Some(word) = sites::find_or_insert_word(table, key) else {
        OVERFLOWED.fetch_add(1, Ordering::Relaxed);
        return RowId::OTHER;
    };
    match word.compare_exchange(0, CLAIMED, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => {}
        Err(_) => return wait_for(word),
    }
    let i = NEXT.fetch_add(1, Ordering::AcqRel);
    let row = if i < MAX_ROWS {
        let _ = INFO[i].set(Box::leak(Box::new(info())));
        RowId::from_index(i)
    } else {
        NEXT.store(MAX_ROWS, Ordering::Release);
        OVERFLOWED.fetch_add(1, Ordering::Relaxed);
        RowId::OTHER
    };
    word.store(row.index() as u64 + 1, Ordering::Release);
    row
}

// ---------------------------------------------------------------------------------
// Counters: per ledger, per thread.

type Page = [[AtomicU64; COLS]; PAGE_ROWS];

/// One thread slot's counters of one ledger (or the copy shared by threads without a
/// slot): pages of rows allocated on first use.
#[derive(Debug)]
struct Rows {
    pages: [OnceLock<Box<Page>>; PAGES],
}

impl Rows {
    fn new() -> Self {
        Rows {
            pages: [const { OnceLock::new() }; PAGES],
        }
    }

    /// The row's counters, if their page was made.
    #[inline(always)]
    fn made_cells(&self, row: RowId) -> Option<&[AtomicU64; COLS]> {
        let i = row.index();
        // `% PAGES`: no bounds check (a row's index is below `MAX_ROWS` anyway).
        let page = self.pages[(i / PAGE_ROWS) % PAGES].get()?;
        Some(&page[i % PAGE_ROWS])
    }

    #[inline(always)]
    fn cells(&self, row: RowId) -> &[AtomicU64; COLS] {
        let i = row.index();
        let page = self.pages[i / PAGE_ROWS].get_or_init(new_page);
        &page[i % PAGE_ROWS]
    }

    /// Adds `n` to a column, by the one thread that writes these counters: a load and
    /// a store, no read-modify-write.
    #[inline(always)]
    fn bump(&self, row: RowId, col: usize, n: u64) {
        bump_cell(&self.cells(row)[col], n);
    }

    /// Adds `lines` and `bytes` written, by the one thread that writes these counters.
    #[inline(always)]
    fn bump_written(&self, row: RowId, lines: u64, bytes: u64) {
        let c = self.cells(row);
        let (l, b) = (&c[Col::Lines as usize], &c[Col::Bytes as usize]);
        l.store(
            l.load(Ordering::Relaxed).wrapping_add(lines),
            Ordering::Relaxed,
        );
        b.store(
            b.load(Ordering::Relaxed).wrapping_add(bytes),
            Ordering::Relaxed,
        );
    }

    /// Adds `n` from any thread.
    fn add_shared(&self, row: RowId, col: usize, n: u64) {
        self.cells(row)[col].fetch_add(n, Ordering::Relaxed);
    }

    /// Adds these counters into `into` (per row index).
    fn fold_into(&self, into: &mut [[u64; COLS]]) {
        for (p, page) in self.pages.iter().enumerate() {
            let Some(page) = page.get() else { continue };
            for (r, cells) in page.iter().enumerate() {
                let row = &mut into[p * PAGE_ROWS + r];
                for (sum, c) in row.iter_mut().zip(cells) {
                    *sum += c.load(Ordering::Relaxed);
                }
            }
        }
    }
}

/// Adds `n` to a counter only this thread writes: a load and a store.
#[inline(always)]
fn bump_cell(c: &AtomicU64, n: u64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

fn new_page() -> Box<Page> {
    Box::new([const { [const { AtomicU64::new(0) }; COLS] }; PAGE_ROWS])
}

/// The most threads that count at once in their own copies: a thread beyond them counts
/// with atomic adds into a ledger's shared copy (fewer in unit tests, which go past it).
const MAX_SLOTS: usize = if cfg!(test) { 64 } else { 1024 };

/// What a ledger shares with the threads that count in it.
#[derive(Debug)]
struct Shared {
    started_at: SystemTime,
    /// The counters of each thread slot (see [`thread_slot`]), made on the slot's first
    /// count: a slot's thread is the only one that writes them, and a thread that takes
    /// a slot another thread gave back goes on counting in the same copy.
    slots: Box<[OnceLock<Arc<Rows>>; MAX_SLOTS]>,
    /// Counts made with atomic adds: by threads without a slot (beyond [`MAX_SLOTS`],
    /// or ending), and by callers that already serialise their threads.
    common: Rows,
}

thread_local! {
    /// This thread's slot + 1 (0: none yet; [`ENDING`]: the thread gave it back). No
    /// destructor: reading it is one thread-local load, also while the thread ends.
    static SLOT: Cell<u32> = const { Cell::new(0) };
    /// Gives the slot back when the thread ends.
    static SLOT_GUARD: RefCell<Option<SlotGuard>> = const { RefCell::new(None) };
}

/// [`SLOT`] of a thread that gave its slot back.
const ENDING: u32 = u32::MAX;

/// Slots given back by threads that ended, and the next never given.
static FREE_SLOTS: Mutex<Vec<u32>> = Mutex::new(Vec::new());
static NEXT_SLOT: AtomicU32 = AtomicU32::new(0);

/// A thread's hold on its slot (index + 1).
struct SlotGuard(u32);

impl Drop for SlotGuard {
    fn drop(&mut self) {
        // Counts made after this (by other thread-locals' destructors) go to the shared
        // copy: the next thread to take the slot writes its counters.
        let _ = SLOT.try_with(|s| s.set(ENDING));
        FREE_SLOTS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(self.0);
    }
}

/// This thread's slot, taken now if it has none; `None` once the thread is ending, and
/// for threads beyond [`MAX_SLOTS`].
fn thread_slot() -> Option<usize> {
    let slot = SLOT.try_with(Cell::get).ok()?;
    match slot {
        ENDING => None,
        0 => take_slot(),
        s => Some(s as usize - 1).filter(|&i| i < MAX_SLOTS),
    }
}

#[cold]
fn take_slot() -> Option<usize> {
    // The lowest slot given back first: slots past `MAX_SLOTS` have no copies.
    let given_back = {
        let mut free = FREE_SLOTS.lock().unwrap_or_else(PoisonError::into_inner);
        let lowest = (0..free.len()).min_by_key(|&i| free[i]);
        lowest.map(|i| free.swap_remove(i))
    };
    let slot =
        given_back.unwrap_or_else(|| NEXT_SLOT.fetch_add(1, Ordering::Relaxed).saturating_add(1));
    if slot == ENDING {
        return None;
    }
    let guard = SlotGuard(slot);
    // The guard first: a thread that cannot hold one (its thread-locals are being
    // destroyed) gives the slot back at once and counts in the shared copy.
    match SLOT_GUARD.try_with(|g| g.try_borrow_mut().map(|mut g| g.replace(guard))) {
        Ok(Ok(_)) => {}
        _ => return None,
    }
    SLOT.with(|s| s.set(slot));
    Some(slot as usize - 1).filter(|&i| i < MAX_SLOTS)
}

/// The per-callsite counters of one logging setup (a filter and the writer it writes
/// through share one; see the [module documentation](self)).
#[derive(Debug, Clone)]
pub struct Ledger {
    shared: Arc<Shared>,
}

impl Default for Ledger {
    fn default() -> Self {
        Ledger::new()
    }
}

impl Ledger {
    /// An empty ledger, started now.
    pub fn new() -> Self {
        Ledger {
            shared: Arc::new(Shared {
                started_at: SystemTime::now(),
                slots: Box::new([const { OnceLock::new() }; MAX_SLOTS]),
                common: Rows::new(),
            }),
        }
    }

    /// Whether `self` and `other` are the same ledger.
    pub fn same(&self, other: &Ledger) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }

    /// Adds `n` to column `col` of `row` in the ledger's shared copy (an atomic add,
    /// no thread-local lookup): for counts made under a lock that already serialises
    /// their threads (the recorder's).
    #[inline]
    pub(crate) fn add_shared(&self, row: RowId, col: usize, n: u64) {
        self.shared.common.add_shared(row, col, n);
    }

    /// Adds `n` to column `col` of `row`, in this thread's copy (inlined: the
    /// sampled-out path of the filter pays no call for it): a thread-local load, the
    /// slot's copy, a load and a store.
    #[inline(always)]
    pub(crate) fn add(&self, row: RowId, col: usize, n: u64) {
        let slot = SLOT.with(Cell::get) as usize;
        // 0 (none yet) wraps to a slot that does not exist, as `ENDING` is one. No
        // call returns here: the first count in a slot or a page is the slow way's.
        let cells = self
            .shared
            .slots
            .get(slot.wrapping_sub(1))
            .and_then(OnceLock::get)
            .and_then(|rows| rows.made_cells(row));
        match cells {
            Some(c) => bump_cell(&c[col], n),
            None => self.add_slow(row, col, n),
        }
    }

    /// [`Ledger::add`] on this thread's first count in this ledger, or while the thread
    /// is ending.
    #[cold]
    #[inline(never)]
    fn add_slow(&self, row: RowId, col: usize, n: u64) {
        match self.local() {
            Some(rows) => rows.bump(row, col, n),
            None => self.shared.common.add_shared(row, col, n),
        }
    }

    /// This thread's counters in this ledger (made now if needed), or `None` while the
    /// thread is ending.
    fn local(&self) -> Option<Arc<Rows>> {
        let slot = thread_slot()?;
        Some(
            self.shared.slots[slot]
                .get_or_init(|| Arc::new(Rows::new()))
                .clone(),
        )
    }

    /// A counter of this thread's own for many adds in a row (the writer's thread
    /// counting a batch): `None` while the thread is ending (then use [`Ledger::add`]).
    pub(crate) fn local_counter(&self) -> LocalCounter {
        LocalCounter {
            rows: self.local(),
            ledger: self.clone(),
        }
    }

    /// When the ledger started counting.
    pub fn started_at(&self) -> SystemTime {
        self.shared.started_at
    }

    /// Every row's counts now, per row index.
    fn counts(&self) -> Vec<[u64; COLS]> {
        let mut sums = vec![[0u64; COLS]; MAX_ROWS];
        for rows in self.shared.slots.iter().filter_map(OnceLock::get) {
            rows.fold_into(&mut sums);
        }
        self.shared.common.fold_into(&mut sums);
        sums
    }

    /// A snapshot of every row, biggest in bytes first (see [`Sites`]).
    pub fn sites(&self) -> Sites {
        let counts = self.counts();
        let read_at = SystemTime::now();
        let mut rows = Vec::new();
        let given = NEXT.load(Ordering::Acquire).min(MAX_ROWS);
        let mut totals = SiteCounts::default();
        for (i, cells) in counts.iter().enumerate().take(given).skip(RowId::FIRST) {
            let Some(info) = INFO[i].get() else { continue };
            let counts = SiteCounts::of(cells);
            totals.add(&counts);
            rows.push(Site {
                kind: info.kind,
                target: info.target,
                level: info.level,
                name: info.name,
                file: info.file,
                line: info.line,
                module_path: info.module_path,
                counts,
            });
        }
        let other = SiteCounts::of(&counts[RowId::OTHER.index()]);
        totals.add(&other);
        rows.sort_by(|a, b| {
            b.counts
                .bytes
                .cmp(&a.counts.bytes)
                .then(b.counts.events().cmp(&a.counts.events()))
                .then(a.target.cmp(b.target))
                .then(a.file.cmp(&b.file))
                .then(a.line.cmp(&b.line))
        });
        Sites {
            started_at: self.shared.started_at,
            read_at,
            rows,
            other,
            other_sites: OVERFLOWED.load(Ordering::Relaxed),
            own: SiteCounts::of(&counts[RowId::OWN.index()]),
            totals,
        }
    }
}

/// A thread's own counters of a ledger, held for many adds (see
/// [`Ledger::local_counter`]).
pub(crate) struct LocalCounter {
    rows: Option<Arc<Rows>>,
    ledger: Ledger,
}

impl LocalCounter {
    #[inline]
    pub(crate) fn add(&self, row: RowId, col: usize, n: u64) {
        match &self.rows {
            Some(rows) => rows.bump(row, col, n),
            None => self.ledger.shared.common.add_shared(row, col, n),
        }
    }

    /// Adds `lines` written of `bytes` to `row` (nothing when `lines` is 0).
    #[inline]
    pub(crate) fn add_written(&self, row: RowId, lines: u64, bytes: u64) {
        if lines == 0 {
            return;
        }
        match &self.rows {
            Some(rows) => rows.bump_written(row, lines, bytes),
            None => {
                let common = &self.ledger.shared.common;
                common.add_shared(row, Col::Lines as usize, lines);
                common.add_shared(row, Col::Bytes as usize, bytes);
            }
        }
    }
}

// ---------------------------------------------------------------------------------
// The snapshot.

/// What one row counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SiteCounts {
    /// Lines written (the output took every byte).
    pub lines: u64,
    /// Their bytes, exactly as written.
    pub bytes: u64,
    /// Not written: sampled out (event or request sampling).
    pub sampled: u64,
    /// Not written: over the callsite's burst limit.
    pub burst: u64,
    /// Not written: over the byte budget.
    pub budget: u64,
    /// Dropped by the writer: its share of the queue was full.
    pub queue_full: u64,
    /// Dropped by the writer: an `alwaysKeep` line found the reserve full.
    pub reserve_full: u64,
    /// Dropped by the writer: the output refused it.
    pub output_closed: u64,
    /// Dropped by the writer: still queued at shutdown.
    pub shutdown: u64,
    /// Dropped by the writer: the queue's lock was held while the output was behind.
    pub contended: u64,
    /// Dropped by the writer: evicted from the queue for a more severe line.
    pub evicted: u64,
    /// Kept in memory by a recording rule instead of written (see
    /// [`recorder`](crate::recorder)).
    pub recorded: u64,
    /// Recorded lines a replay took (each then counted as written or dropped, like any
    /// line, in `lines` or a drop reason).
    pub replayed: u64,
    /// Recorded lines that left the recorder unreplayed: older than its age limit, or
    /// pushed out by its byte limit.
    pub expired: u64,
}

impl SiteCounts {
    fn of(c: &[u64; COLS]) -> Self {
        SiteCounts {
            lines: c[0],
            bytes: c[1],
            sampled: c[2],
            burst: c[3],
            budget: c[4],
            queue_full: c[5],
            reserve_full: c[6],
            output_closed: c[7],
            shutdown: c[8],
            contended: c[9],
            evicted: c[10],
            recorded: c[11],
            replayed: c[12],
            expired: c[13],
        }
    }

    fn add(&mut self, o: &SiteCounts) {
        self.lines += o.lines;
        self.bytes += o.bytes;
        self.sampled += o.sampled;
        self.burst += o.burst;
        self.budget += o.budget;
        self.queue_full += o.queue_full;
        self.reserve_full += o.reserve_full;
        self.output_closed += o.output_closed;
        self.shutdown += o.shutdown;
        self.contended += o.contended;
        self.evicted += o.evicted;
        self.recorded += o.recorded;
        self.replayed += o.replayed;
        self.expired += o.expired;
    }

    /// Events held back by the policy (sampled, burst, budget).
    pub fn held_back(&self) -> u64 {
        self.sampled + self.burst + self.budget
    }

    /// Lines the writer dropped, for any reason.
    pub fn dropped(&self) -> u64 {
        self.queue_full
            + self.reserve_full
            + self.output_closed
            + self.shutdown
            + self.contended
            + self.evicted
    }

    /// Events not written, for any reason.
    pub fn not_written(&self) -> u64 {
        self.held_back() + self.dropped()
    }

    /// Recorded lines the recorder still holds: `recorded - replayed - expired`.
    pub fn held_recorded(&self) -> u64 {
        self.recorded
            .saturating_sub(self.replayed)
            .saturating_sub(self.expired)
    }

    /// Events the levels (or a recording rule) let through and that were decided:
    /// written, not written, or recorded. A replayed line is counted in `lines` or a drop
    /// reason when the writer settles it, so it is taken out of `recorded` once:
    /// `lines + not_written + recorded - replayed`. (Events in flight, queued or held
    /// with their request, are counted once they are.)
    pub fn events(&self) -> u64 {
        (self.lines + self.not_written() + self.recorded).saturating_sub(self.replayed)
    }
}

/// One row of the ledger: a callsite and what it counted.
#[derive(Debug, Clone, Serialize)]
pub struct Site {
    /// A `tracing` event or a `log` record.
    pub kind: SiteKind,
    /// The target.
    pub target: &'static str,
    /// The callsite's level.
    pub level: Level,
    /// The callsite's name (`tracing`'s, e.g. `event src/cart.rs:42`; `log record` for
    /// `log`).
    pub name: &'static str,
    /// The source file, when known.
    pub file: Option<&'static str>,
    /// The line in it, when known.
    pub line: Option<u32>,
    /// The module path, when known (`tracing` callsites).
    pub module_path: Option<&'static str>,
    /// What it counted.
    #[serde(flatten)]
    pub counts: SiteCounts,
}

/// A target the process knows (some callsite of it registered), and what its callsites
/// counted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TargetSites {
    /// The target.
    pub target: &'static str,
    /// The levels its callsites have, least verbose first.
    pub levels: Vec<Level>,
    /// How many callsites (rows) it has.
    pub callsites: usize,
    /// What they counted, added up.
    #[serde(flatten)]
    pub counts: SiteCounts,
}

/// A snapshot of a [`Ledger`]: every row, biggest in bytes first.
#[derive(Debug, Clone)]
pub struct Sites {
    /// When the ledger started counting (a later value in a second read: the counters
    /// started again, as after a restart).
    pub started_at: SystemTime,
    /// When this snapshot was read: two snapshots make rates.
    pub read_at: SystemTime,
    /// One row per callsite given a row, biggest in bytes first (rows of callsites of
    /// other ledgers in the process, with nothing counted here, included: callsites are
    /// the process's).
    pub rows: Vec<Site>,
    /// What callsites past the cap counted.
    pub other: SiteCounts,
    /// How many callsites and `log` sites are counted in `other`.
    pub other_sites: u64,
    /// logpolicy's own lines (and bytes of lines cut by a failing output).
    pub own: SiteCounts,
    /// The rows and `other` added up (not `own`).
    pub totals: SiteCounts,
}

impl Sites {
    /// Every target, biggest in bytes first, with the levels of its callsites.
    ///
    /// ```
    /// let ledger = logpolicy::ledger::Ledger::new();
    /// let targets = ledger.sites().targets();
    /// assert!(targets.windows(2).all(|w| w[0].counts.bytes >= w[1].counts.bytes));
    /// ```
    pub fn targets(&self) -> Vec<TargetSites> {
        let mut by: std::collections::BTreeMap<&'static str, TargetSites> = Default::default();
        for row in &self.rows {
            let t = by.entry(row.target).or_insert_with(|| TargetSites {
                target: row.target,
                levels: Vec::new(),
                callsites: 0,
                counts: SiteCounts::default(),
            });
            if !t.levels.contains(&row.level) {
                t.levels.push(row.level);
            }
            t.callsites += 1;
            t.counts.add(&row.counts);
        }
        let mut out: Vec<TargetSites> = by.into_values().collect();
        for t in &mut out {
            t.levels.sort();
        }
        out.sort_by(|a, b| {
            b.counts
                .bytes
                .cmp(&a.counts.bytes)
                .then(a.target.cmp(b.target))
        });
        out
    }

    /// The `n` rows that wrote the most bytes (rows that wrote nothing left out).
    pub fn top(&self, n: usize) -> impl Iterator<Item = &Site> {
        self.rows.iter().filter(|r| r.counts.bytes > 0).take(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_counts_in_its_own_copy_and_its_counts_outlive_it() {
        let ledger = Ledger::new();
        let row = RowId::from_index(7);
        ledger.add(row, Col::Lines as usize, 2);
        let l = ledger.clone();
        std::thread::spawn(move || {
            l.add(row, Col::Lines as usize, 3);
            l.add(row, Col::Bytes as usize, 30);
        })
        .join()
        .unwrap();
        let counts = ledger.counts();
        assert_eq!(counts[7][Col::Lines as usize], 5);
        assert_eq!(counts[7][Col::Bytes as usize], 30);
        // The ended thread gave its slot back (to the next thread, which may be another
        // test's): nothing counted before is lost or counted twice.
        let l = ledger.clone();
        std::thread::spawn(move || l.add(row, Col::Lines as usize, 1))
            .join()
            .unwrap();
        assert_eq!(ledger.counts()[7][Col::Lines as usize], 6);
        assert_eq!(ledger.counts()[7][Col::Bytes as usize], 30);
    }

    /// Held by the tests that need a free slot, or take every slot.
    static SLOT_TESTS: Mutex<()> = Mutex::new(());

    #[test]
    fn a_thread_ending_counts_in_the_shared_copy() {
        let _one_at_a_time = SLOT_TESTS.lock().unwrap_or_else(PoisonError::into_inner);
        struct CountsWhenDropped(Ledger, RowId);
        impl Drop for CountsWhenDropped {
            fn drop(&mut self) {
                // Runs among the thread's thread-local destructors.
                self.0.add(self.1, 0, 1);
            }
        }
        thread_local! {
            static LATE: RefCell<Option<CountsWhenDropped>> = const { RefCell::new(None) };
        }
        let shared_count = |l: &Ledger, row: RowId| {
            let mut sums = vec![[0u64; COLS]; MAX_ROWS];
            l.shared.common.fold_into(&mut sums);
            sums[row.index()][0]
        };
        // Destructors run last registered, first: made before the slot's guard, this
        // one counts after the slot was given back, in the shared copy.
        let ledger = Ledger::new();
        let row = RowId::from_index(11);
        let l = ledger.clone();
        std::thread::spawn(move || {
            LATE.with(|late| *late.borrow_mut() = Some(CountsWhenDropped(l.clone(), row)));
            l.add(row, 0, 1);
        })
        .join()
        .unwrap();
        assert_eq!(ledger.counts()[11][0], 2);
        assert_eq!(shared_count(&ledger, row), 1);
        // Made after the guard, it counts in the thread's own copy still.
        let ledger = Ledger::new();
        let l = ledger.clone();
        std::thread::spawn(move || {
            l.add(row, 0, 1);
            LATE.with(|late| *late.borrow_mut() = Some(CountsWhenDropped(l, row)));
        })
        .join()
        .unwrap();
        assert_eq!(ledger.counts()[11][0], 2);
        assert_eq!(shared_count(&ledger, row), 0);
    }

    #[test]
    fn threads_beyond_the_slots_count_in_the_shared_copy() {
        let _one_at_a_time = SLOT_TESTS.lock().unwrap_or_else(PoisonError::into_inner);
        let ledger = Ledger::new();
        let row = RowId::from_index(15);
        let threads = MAX_SLOTS + 16;
        // Every thread alive at once: at least 16 of them find no slot.
        let all_counted = Arc::new(std::sync::Barrier::new(threads));
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let (l, all_counted) = (ledger.clone(), all_counted.clone());
                std::thread::spawn(move || {
                    for _ in 0..100 {
                        l.add(row, 0, 1);
                    }
                    all_counted.wait();
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(ledger.counts()[15][0], threads as u64 * 100);
        let mut shared = vec![[0u64; COLS]; MAX_ROWS];
        ledger.shared.common.fold_into(&mut shared);
        assert!(shared[15][0] >= 16 * 100, "{}", shared[15][0]);
        // The slots were given back: a new thread counts in its own copy again.
        let l = ledger.clone();
        std::thread::spawn(move || l.add(row, 0, 1)).join().unwrap();
        let mut after = vec![[0u64; COLS]; MAX_ROWS];
        ledger.shared.common.fold_into(&mut after);
        assert_eq!(after[15][0], shared[15][0]);
        assert_eq!(ledger.counts()[15][0], threads as u64 * 100 + 1);
    }

    #[test]
    fn threads_taking_and_giving_back_slots_lose_no_count() {
        let ledger = Ledger::new();
        let row = RowId::from_index(13);
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let l = ledger.clone();
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        let l = l.clone();
                        std::thread::spawn(move || {
                            for _ in 0..100 {
                                l.add(row, 0, 1);
                            }
                        })
                        .join()
                        .unwrap();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(ledger.counts()[13][0], 8 * 50 * 100);
    }

    #[test]
    fn two_ledgers_on_one_thread_keep_their_counts_apart() {
        let a = Ledger::new();
        let b = Ledger::new();
        let row = RowId::from_index(9);
        for _ in 0..3 {
            a.add(row, 0, 1);
            b.add(row, 0, 10);
        }
        assert_eq!(a.counts()[9][0], 3);
        assert_eq!(b.counts()[9][0], 30);
        drop(b);
        a.add(row, 0, 1);
        assert_eq!(a.counts()[9][0], 4);
    }

    #[test]
    fn record_keys_differ_by_every_part() {
        let info = tracing_core::Level::INFO;
        let k = |t, f, l, lv| record_key(t, f, l, lv);
        let base = k("a", Some("f.rs"), Some(1), &info);
        assert_ne!(base, k("b", Some("f.rs"), Some(1), &info));
        assert_ne!(base, k("a", Some("g.rs"), Some(1), &info));
        assert_ne!(base, k("a", Some("f.rs"), Some(2), &info));
        assert_ne!(
            base,
            k("a", Some("f.rs"), Some(1), &tracing_core::Level::WARN)
        );
        // Parts do not run into each other.
        assert_ne!(
            k("ab", Some(""), None, &info),
            k("a", Some("b"), None, &info)
        );
        assert_eq!(base, k("a", Some("f.rs"), Some(1), &info));
    }

    #[test]
    fn a_record_site_keeps_its_row() {
        let warn = tracing_core::Level::WARN;
        let a = record_row("ledger::test::a", Some("x.rs"), Some(3), &warn);
        assert_eq!(
            a,
            record_row("ledger::test::a", Some("x.rs"), Some(3), &warn)
        );
        assert_ne!(
            a,
            record_row("ledger::test::a", Some("x.rs"), Some(4), &warn)
        );
        assert_ne!(a, RowId::OTHER);
        let info = INFO[a.index()].get().unwrap();
        assert_eq!(info.target, "ledger::test::a");
        assert_eq!(info.kind, SiteKind::Log);
        assert_eq!(info.level, Level::Warn);
    }
}
