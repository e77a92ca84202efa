//! Conditional levels at run time: which `when` conditions the spans a thread is in
//! satisfy, as a 64-bit mask kept by span enter and exit, so that an event of a target a
//! condition names costs one thread-local read when the thread is in no matching span.
//!
//! - Every distinct condition in force in any filter has a bit in a process-wide table
//!   (at most 64 at once; a bit whose condition no compiled policy holds any longer is
//!   given to the next new one, and spans that matched the old one stop matching by it:
//!   span bits carry the epoch they were computed at. A thread already inside such a
//!   span keeps the bit in its mask until it leaves the span).
//! - A span's bits (an extension): the conditions its own fields satisfy (at creation
//!   and through `Span::record`) and its parent's bits at its creation.
//! - The thread's mask: the bits of the span it entered last; restored on exit. A
//!   thread remembers the spans it entered that had no bits until any span gains some,
//!   so entering a request of another customer again and again is a thread-local read.
//! - The event path: outside every matching span (mask 0), an event more verbose than
//!   the filter's unconditional levels is disabled by a level compare and the mask,
//!   before any per-callsite lookup.
//! - Dormant conditions: while no thread is in a span that satisfies a condition, the
//!   callsites only a condition enables are `never` to tracing (a disabled event of a
//!   named target costs what any disabled event costs). A thread whose mask becomes
//!   non-zero (entering such a span, or its span recording a matching value) first
//!   wakes the filter's conditions: interest is rebuilt, those callsites become
//!   `sometimes`, before the thread goes on. Once no thread has been in a matching span
//!   for [`DORMANT_AFTER`], the filter's timer puts them back to sleep.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tracing_core::field::{Field, Visit};
use tracing_core::span::{Attributes, Id, Record};
use tracing_core::Subscriber;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use crate::policy::When;

/// The most conditions in force at once, in all filters of the process.
pub(crate) const MAX_CONDITIONS: usize = 64;

/// The process-wide condition table: slot `i` is bit `i`.
static CONDITIONS: Mutex<Vec<Arc<When>>> = Mutex::new(Vec::new());

/// Set once any filter compiled a policy with a condition: until then the span hooks
/// return at once.
static EVER: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// The conditions the span this thread entered last satisfies.
    static MASK: Cell<u64> = const { Cell::new(0) };
    /// Entered spans with conditions in force: (span id, the mask before).
    static STACK: RefCell<Vec<(u64, u64)>> = const { RefCell::new(Vec::new()) };
    /// Spans this thread entered and found without bits: (span id, [`GAINED`] before
    /// the span was looked at), by id.
    static NO_BITS: [Cell<(u64, u64)>; NO_BITS_SLOTS] =
        const { [const { Cell::new((0, 0)) }; NO_BITS_SLOTS] };
}

const NO_BITS_SLOTS: usize = 16;

/// How many times a span gained bits, process-wide: a span a thread found without bits
/// still has none if this has not moved since (a span id reused for a new span with
/// bits moves it too).
static GAINED: AtomicU64 = AtomicU64::new(0);

/// A span gained bits (after they are stored in its extension).
fn gained() {
    GAINED.fetch_add(1, Ordering::AcqRel);
}

/// The bits of span `id`, valid now: from the thread's [`NO_BITS`] if it found none
/// there since the last span gained some, else from its extension (a span's entry,
/// every time a request is entered, stays a thread-local read while no span gains
/// bits, instead of a registry and extension lookup).
#[inline]
fn span_bits<S>(id: &Id, ctx: &Context<'_, S>) -> u64
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let key = id.into_u64();
    // Before the lookup: bits gained after it moves it, so the answer is not kept.
    let seen = GAINED.load(Ordering::Acquire);
    let slot = key as usize % NO_BITS_SLOTS;
    if NO_BITS.with(|c| c[slot].get()) == (key, seen) {
        return 0;
    }
    let bits = ctx
        .span(id)
        .and_then(|s| s.extensions().get::<SpanBits>().map(SpanBits::valid))
        .unwrap_or(0);
    if bits == 0 {
        NO_BITS.with(|c| c[slot].set((key, seen)));
    }
    bits
}

/// How long no thread must have been in a span that satisfies a condition before the
/// callsites only conditions enable are `never` again.
pub(crate) const DORMANT_AFTER: Duration = Duration::from_secs(1);

/// Threads whose mask is non-zero, process-wide. A thread that ends inside a matching
/// span is never taken off: conditions then stay awake (they cost, nothing is lost).
static THREADS_IN_MATCH: AtomicUsize = AtomicUsize::new(0);

/// Threads in a span that satisfies a condition now.
pub(crate) fn threads_in_match() -> usize {
    THREADS_IN_MATCH.load(Ordering::SeqCst)
}

/// What a change of the thread's mask did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Crossing {
    /// Still in no matching span, or still in one.
    Stay,
    /// The thread is now in a matching span and was in none.
    Entered,
    /// The thread is in no matching span any longer.
    Left,
}

/// Counts the thread in or out of [`THREADS_IN_MATCH`] as its mask went from `before` to
/// the current one.
fn crossing(before: u64) -> Crossing {
    match (before == 0, current_mask() == 0) {
        (true, false) => {
            THREADS_IN_MATCH.fetch_add(1, Ordering::SeqCst);
            Crossing::Entered
        }
        (false, true) => {
            THREADS_IN_MATCH.fetch_sub(1, Ordering::SeqCst);
            Crossing::Left
        }
        _ => Crossing::Stay,
    }
}

/// The mask of the current thread.
#[inline(always)]
pub(crate) fn current_mask() -> u64 {
    MASK.with(Cell::get)
}

/// A condition in force, with its bit.
#[derive(Debug)]
pub(crate) struct Condition {
    pub(crate) bit: u64,
    pub(crate) when: Arc<When>,
}

/// The bits of `conditions` (each distinct condition once), assigning free bits to new
/// ones. A condition beyond the table's 64 gets no bit (it never matches).
pub(crate) fn assign(conditions: &[&When]) -> Vec<Condition> {
    if conditions.is_empty() {
        return Vec::new();
    }
    EVER.store(true, Ordering::Release);
    let mut table = CONDITIONS.lock().unwrap_or_else(|p| p.into_inner());
    let mut out: Vec<Condition> = Vec::new();
    for when in conditions {
        if out.iter().any(|c| *c.when == **when) {
            continue;
        }
        let slot = match table.iter().position(|w| **w == **when) {
            Some(i) => i,
            None if table.len() < MAX_CONDITIONS => {
                table.push(Arc::new((*when).clone()));
                table.len() - 1
            }
            None => {
                // A slot only the table holds: no compiled policy uses it.
                let Some(i) = table.iter().position(|w| Arc::strong_count(w) == 1) else {
                    continue;
                };
                table[i] = Arc::new((*when).clone());
                // Spans that matched the slot's old condition no longer match by it.
                let epoch = EPOCH.fetch_add(1, Ordering::AcqRel) + 1;
                REUSED_AT[i].store(epoch, Ordering::Release);
                i
            }
        };
        out.push(Condition {
            bit: 1 << slot,
            when: table[slot].clone(),
        });
    }
    out
}

/// How many times a bit was given to a new condition (its old one no longer in force).
static EPOCH: AtomicU64 = AtomicU64::new(0);

/// Per bit: the [`EPOCH`] at which it was last given to a new condition.
static REUSED_AT: [AtomicU64; MAX_CONDITIONS] = [const { AtomicU64::new(0) }; MAX_CONDITIONS];

/// The current epoch: read it before the conditions a span's bits are computed with.
#[inline]
pub(crate) fn epoch() -> u64 {
    EPOCH.load(Ordering::Acquire)
}

/// A span's conditions (an extension): bits that meant the conditions of their slots as
/// of `epoch`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SpanBits {
    bits: u64,
    epoch: u64,
}

impl SpanBits {
    /// The bits that still mean the conditions they matched (a slot given to another
    /// condition since is dropped: a span open across the reuse does not match the new
    /// one by the old one's value).
    #[inline]
    pub(crate) fn valid(&self) -> u64 {
        if self.epoch == epoch() {
            return self.bits;
        }
        let mut bits = self.bits;
        let mut rest = bits;
        while rest != 0 {
            let i = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            if REUSED_AT[i].load(Ordering::Acquire) > self.epoch {
                bits &= !(1 << i);
            }
        }
        bits
    }

    /// Adds `bits` computed as of `epoch` (not older than this one's).
    fn add(&mut self, bits: u64, epoch: u64) {
        self.bits = self.valid() | bits;
        self.epoch = epoch;
    }
}

/// Finds the conditions a span's fields satisfy.
struct Matcher<'a> {
    conditions: &'a [Condition],
    bits: u64,
}

impl Matcher<'_> {
    #[inline]
    fn check(&mut self, field: &Field, text: &str) {
        let name = field.name();
        for c in self.conditions {
            if c.when.field() == name && c.when.matches(text) {
                self.bits |= c.bit;
            }
        }
    }

    #[inline]
    fn named(&self, field: &Field) -> bool {
        self.conditions
            .iter()
            .any(|c| c.when.field() == field.name())
    }

    fn check_display(&mut self, field: &Field, value: impl fmt::Display) {
        if self.named(field) {
            self.check(field, &value.to_string());
        }
    }
}

impl Visit for Matcher<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.check(field, value);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.check_display(field, value);
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.check_display(field, value);
    }

    fn record_i128(&mut self, field: &Field, value: i128) {
        self.check_display(field, value);
    }

    fn record_u128(&mut self, field: &Field, value: u128) {
        self.check_display(field, value);
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.check(field, if value { "true" } else { "false" });
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if self.named(field) {
            let text = format!("{value:?}");
            self.check(field, &text);
            // `?"42"` debug-formats a string with its quotes: match without them too.
            if let Some(bare) = text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) {
                self.check(field, bare);
            }
        }
    }
}

/// A new span: its bits are its parent's and those its fields satisfy.
pub(crate) fn on_new_span<S>(
    epoch: u64,
    conditions: &[Condition],
    attrs: &Attributes<'_>,
    id: &Id,
    ctx: &Context<'_, S>,
) where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let Some(span) = ctx.span(id) else { return };
    let inherited = span
        .parent()
        .and_then(|p| p.extensions().get::<SpanBits>().map(SpanBits::valid))
        .unwrap_or(0);
    let mut m = Matcher {
        conditions,
        bits: 0,
    };
    attrs.record(&mut m);
    let bits = inherited | m.bits;
    if bits != 0 {
        let mut ext = span.extensions_mut();
        match ext.get_mut::<SpanBits>() {
            Some(b) => b.add(bits, epoch),
            None => ext.insert(SpanBits { bits, epoch }),
        }
        drop(ext);
        gained();
    }
}

/// A span recorded fields: bits they satisfy are added, to the thread's mask too if
/// the span is the one it is in.
pub(crate) fn on_record<S>(
    epoch: u64,
    conditions: &[Condition],
    id: &Id,
    values: &Record<'_>,
    ctx: &Context<'_, S>,
) -> Crossing
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let mut m = Matcher {
        conditions,
        bits: 0,
    };
    values.record(&mut m);
    if m.bits == 0 {
        return Crossing::Stay;
    }
    let Some(span) = ctx.span(id) else {
        return Crossing::Stay;
    };
    let mut ext = span.extensions_mut();
    match ext.get_mut::<SpanBits>() {
        Some(b) => b.add(m.bits, epoch),
        None => ext.insert(SpanBits {
            bits: m.bits,
            epoch,
        }),
    }
    drop(ext);
    gained();
    if ctx.current_span().id() != Some(id) {
        return Crossing::Stay;
    }
    // The span this thread is in: the mask grows now (and is restored on exit, for
    // which a span entered before any condition applied is kept from now on).
    let before = current_mask();
    let id = id.into_u64();
    STACK.with(|s| {
        if let Ok(mut s) = s.try_borrow_mut() {
            if s.last().map(|(top, _)| *top) != Some(id) {
                s.push((id, before));
            }
            MASK.with(|mask| mask.set(mask.get() | m.bits));
        }
    });
    crossing(before)
}

/// The thread enters a span: its mask becomes the span's bits. (Called only while a
/// filter has conditions in force.)
pub(crate) fn on_enter<S>(id: &Id, ctx: &Context<'_, S>) -> Crossing
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let bits = span_bits(id, ctx);
    let prev = current_mask();
    if bits == 0 && prev == 0 && STACK.with(|s| s.borrow().is_empty()) {
        // Nothing to restore on exit: not kept.
        return Crossing::Stay;
    }
    STACK.with(|s| {
        if let Ok(mut s) = s.try_borrow_mut() {
            s.push((id.into_u64(), prev));
            MASK.with(|m| m.set(bits));
        }
    });
    crossing(prev)
}

/// The thread leaves a span: the mask before it entered comes back.
pub(crate) fn on_exit(id: &Id) -> Crossing {
    if !EVER.load(Ordering::Relaxed) {
        return Crossing::Stay;
    }
    let before = current_mask();
    let id = id.into_u64();
    STACK.with(|s| {
        let Ok(mut s) = s.try_borrow_mut() else {
            return;
        };
        if s.is_empty() {
            // Entered while this thread was in no span that set its mask (the mask
            // is 0 then): nothing to restore.
            return;
        }
        match s.iter().rposition(|(i, _)| *i == id) {
            Some(at) if at + 1 == s.len() => {
                let (_, prev) = s.pop().unwrap_or((0, 0));
                MASK.with(|m| m.set(prev));
            }
            // Left out of order: forget its entry; the span entered after it keeps the
            // mask it set.
            Some(at) => {
                let (_, prev) = s.remove(at);
                if let Some(next) = s.get_mut(at) {
                    next.1 = prev;
                }
            }
            None => {}
        }
        if s.is_empty() {
            MASK.with(|m| m.set(0));
        }
    });
    crossing(before)
}
