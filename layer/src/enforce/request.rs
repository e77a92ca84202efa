//! Request-scope sampling: the decision made once per request, as its span opens; the
//! lines of a request that was not kept, held (bounded) with it; and those lines handed
//! back, in order, when an event at `alwaysKeep` or above happens in it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};

use tracing_core::span::Attributes;
use tracing_core::{Event, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::{LookupSpan, SpanRef};

use super::compiled::Compiled;
use super::stats::{Reason, StatsCells};
use crate::ledger::{Col, Ledger, RowId};

/// Bounds on what request-scope sampling holds.
///
/// Each request that was not kept holds at most `max_lines` lines and `max_bytes` bytes
/// (the oldest are dropped first, and counted as sampled), and at most `max_requests`
/// requests hold lines at once (the lines of further requests that were not kept are
/// counted as sampled at once, without being formatted). Held memory is therefore at
/// most `max_requests * max_bytes` (16 MiB by default), whatever happens to the spans:
/// a request's lines are freed when its span closes.
///
/// # Examples
///
/// ```
/// use logpolicy::enforce::RequestLimits;
/// let limits = RequestLimits { max_lines: 32, ..RequestLimits::default() };
/// assert_eq!(limits.max_bytes, 16 * 1024);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLimits {
    /// Lines held per request.
    pub max_lines: usize,
    /// Bytes held per request.
    pub max_bytes: usize,
    /// Requests holding lines at once.
    pub max_requests: usize,
}

impl Default for RequestLimits {
    fn default() -> Self {
        RequestLimits {
            max_lines: 64,
            max_bytes: 16 * 1024,
            max_requests: 1024,
        }
    }
}

/// Lines held by a request that was not kept: their bytes back to back in one ring
/// (one allocation per request, not per line) and their levels and lengths.
#[derive(Debug, Default)]
pub(crate) struct Held {
    /// Per line: its level, its ledger row and its length.
    lines: VecDeque<(tracing_core::Level, RowId, usize)>,
    bytes: VecDeque<u8>,
}

impl Held {
    /// The lines, oldest first, with their levels and ledger rows.
    pub(crate) fn lines(&mut self) -> impl Iterator<Item = (tracing_core::Level, RowId, &[u8])> {
        let bytes: &[u8] = self.bytes.make_contiguous();
        let mut at = 0;
        self.lines.iter().map(move |&(level, row, len)| {
            let line = &bytes[at..at + len];
            at += len;
            (level, row, line)
        })
    }

    /// The bytes held.
    pub(super) fn byte_len(&self) -> usize {
        self.bytes.len()
    }

    /// Drops the oldest line; returns its level and row.
    fn pop_oldest(&mut self) -> Option<(tracing_core::Level, RowId)> {
        let (level, row, len) = self.lines.pop_front()?;
        self.bytes.drain(..len);
        Some((level, row))
    }
}

/// The sampling decisions of one request span (a span extension).
#[derive(Debug)]
pub(super) struct RequestState {
    generation: u64,
    /// Request rules this span decides for (bit per rule).
    applies: u64,
    /// Of those, the ones that kept this request.
    kept: u64,
    /// An event at `alwaysKeep` or above happened: the rest of the request is kept.
    promoted: bool,
    /// Only the outermost request span of a request holds lines.
    holder: Option<Held>,
    /// Whether this request counts against `max_requests`.
    tracked: bool,
}

impl RequestState {
    /// Decides, once, as the span opens: for each request rule this span marks a
    /// request for, keep it or not (one in N, by the rule's counter).
    pub(super) fn decide<'a, S>(
        compiled: &Compiled,
        attrs: &Attributes<'_>,
        span: &SpanRef<'a, S>,
        limits: &RequestLimits,
        tracked: &AtomicUsize,
    ) -> Option<RequestState>
    where
        S: Subscriber + LookupSpan<'a>,
    {
        let meta = attrs.metadata();
        let is_root = span.parent().is_none();
        let (mut applies, mut kept) = (0u64, 0u64);
        for rule in compiled.request_rules() {
            let Some(bit) = rule.request_bit else {
                continue;
            };
            let marks = match rule.request_span() {
                None => is_root,
                Some(name) => meta.name() == name,
            };
            if marks {
                applies |= 1 << bit;
                if rule.counters.keep(meta.level()) {
                    kept |= 1 << bit;
                }
            }
        }
        if applies == 0 {
            return None;
        }
        let has_outer = span
            .scope()
            .skip(1)
            .any(|s| s.extensions().get::<RequestState>().is_some());
        let (holder, is_tracked) = if has_outer {
            (None, false)
        } else if tracked.fetch_add(1, Ordering::AcqRel) < limits.max_requests {
            (Some(Held::default()), true)
        } else {
            tracked.fetch_sub(1, Ordering::AcqRel);
            (None, false)
        };
        Some(RequestState {
            generation: compiled.generation,
            applies,
            kept,
            promoted: false,
            holder,
            tracked: is_tracked,
        })
    }

    /// The request ended: what it still holds was sampled out.
    pub(super) fn discard(self, stats: &StatsCells, tracked: &AtomicUsize, ledger: &Ledger) {
        if let Some(held) = self.holder {
            for (level, row, _) in held.lines {
                StatsCells::sub(&stats.held, &level, 1);
                StatsCells::add(&stats.sampled, &level, 1);
                ledger.add(row, Col::policy(Reason::Sampled as usize), 1);
            }
        }
        if self.tracked {
            tracked.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Where an event below `alwaysKeep` goes under request-scope sampling.
pub(super) enum HoldCheck<'a, S: LookupSpan<'a>> {
    /// Not governed by a request rule, or in a kept request: write it.
    Write,
    /// In a request a `when` condition singles out: write it, after what the request
    /// held before its span recorded the matching value (see [`promote`]).
    Matched,
    /// In a request that was not kept and cannot hold lines: sampled out.
    Sampled,
    /// In a request that was not kept: held with the request of this (outermost) span.
    Hold(SpanRef<'a, S>),
}

/// Decides where an event below `alwaysKeep` goes, before it is formatted.
pub(super) fn check<'a, S>(
    compiled: &Compiled,
    event: &Event<'_>,
    ctx: &'a Context<'_, S>,
) -> HoldCheck<'a, S>
where
    S: Subscriber + for<'l> LookupSpan<'l>,
{
    let meta = event.metadata();
    let Some(bit) = compiled.rule_for(meta.target()).and_then(|r| r.request_bit) else {
        return HoldCheck::Write;
    };
    let Some(scope) = ctx.event_scope(event) else {
        return HoldCheck::Write;
    };
    let mut decision = None;
    let mut outermost = None;
    for span in scope {
        let ext = span.extensions();
        if compiled.when_any != 0
            && ext
                .get::<super::when::SpanBits>()
                .is_some_and(|b| b.valid() & compiled.when_any != 0)
        {
            // A request a `when` condition singles out is kept whole, from its start.
            return HoldCheck::Matched;
        }
        let Some(state) = ext.get::<RequestState>() else {
            continue;
        };
        if state.generation != compiled.generation {
            // The rules changed during this request: keep it rather than guess.
            return HoldCheck::Write;
        }
        if decision.is_none() && (state.promoted || state.applies & (1 << bit) != 0) {
            decision = Some(state.promoted || state.kept & (1 << bit) != 0);
        }
        drop(ext);
        outermost = Some(span);
    }
    match (decision, outermost) {
        (Some(false), Some(span)) => {
            let can_hold = span
                .extensions()
                .get::<RequestState>()
                .is_some_and(|s| s.holder.is_some());
            if can_hold {
                HoldCheck::Hold(span)
            } else {
                HoldCheck::Sampled
            }
        }
        _ => HoldCheck::Write,
    }
}

/// Holds `line` (of an event of `level`, ledger row `row`) with the request of `span`,
/// dropping its oldest lines to make room; returns the levels and rows of the lines
/// dropped (the line itself, if it can never fit), or `None` when the request no longer
/// holds lines.
pub(super) fn store<'a, S>(
    span: &SpanRef<'a, S>,
    limits: &RequestLimits,
    level: tracing_core::Level,
    row: RowId,
    line: &[u8],
) -> Option<Vec<(tracing_core::Level, RowId)>>
where
    S: Subscriber + LookupSpan<'a>,
{
    let mut ext = span.extensions_mut();
    let held = ext
        .get_mut::<RequestState>()
        .and_then(|s| s.holder.as_mut())?;
    let mut evicted = Vec::new();
    if line.len() > limits.max_bytes || limits.max_lines == 0 {
        // The line itself does not fit: it counts as held, then evicted.
        evicted.push((level, row));
        return Some(evicted);
    }
    while held.lines.len() + 1 > limits.max_lines
        || held.bytes.len() + line.len() > limits.max_bytes
    {
        let Some(oldest) = held.pop_oldest() else {
            break;
        };
        evicted.push(oldest);
    }
    held.bytes.extend(line.iter().copied());
    held.lines.push_back((level, row, line.len()));
    Some(evicted)
}

/// An event at `alwaysKeep` or above: its request is kept from now on; returns the lines
/// it held, to be written before the event.
pub(super) fn promote<S>(event: &Event<'_>, ctx: &Context<'_, S>) -> Option<Held>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let scope = ctx.event_scope(event)?;
    let mut taken = None;
    for span in scope {
        let mut ext = span.extensions_mut();
        if let Some(state) = ext.get_mut::<RequestState>() {
            state.promoted = true;
            if let Some(held) = state.holder.as_mut() {
                if !held.lines.is_empty() {
                    taken = Some(std::mem::take(held));
                }
            }
        }
    }
    taken
}
