//! What an output layer asks of the policy for each event the filter let through:
//! written, held with its request, or not written (and why). The output formats bytes;
//! every decision about an event, and every count, is made here.
//!
//! The filter decides per callsite and per event *before* any field is evaluated
//! (levels, event sampling, the burst limit); what needs the request the event belongs
//! to, or the size of its line, is decided here, when an output receives the event:
//! request-scope sampling, the byte budget, the counting of written events, and when the
//! in-band reports (burst notices, the summary of what was not written) are due.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tracing_core::span::Attributes;
use tracing_core::{Event, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::{LookupSpan, SpanRef};

use super::compiled::EventPath;
use super::fast_path;
use super::filter::{PolicyFilter, Shared};
use super::limits::Notice;
use super::redaction::{ActiveRedaction, RedactionSet};
use super::request::{self, Held, HoldCheck, RequestLimits, RequestState};
use super::stats::{Reason, StatsCells};
use super::summary::{NotWritten, Summary, DEFAULT_SUMMARY_INTERVAL_SECS};
use super::when;
use crate::clock::Clock;
use crate::ledger::{Col, Ledger, RowId};
use crate::level::Level;
use crate::policy::Redaction;
use crate::recorder::Recorder;

/// The decisions one output layer (a [`FormatLayer`](crate::FormatLayer)) makes about
/// the events it receives, and the state they need: the linked filter (if any), the
/// bounds of request holding, and the summary's schedule.
#[derive(Debug)]
pub(crate) struct OutputGate {
    /// `alwaysKeep` when no filter is linked.
    always_keep: Level,
    filter: Option<PolicyFilter>,
    requests: RequestLimits,
    /// Requests holding lines now (against `requests.max_requests`).
    tracked: Arc<AtomicUsize>,
    summary: Arc<Summary>,
    /// What is redacted when no filter is linked.
    redaction: Arc<RedactionSet>,
}

/// An [`OutputGate`] with its filter: what decides each event when the output is linked
/// to a policy (the filter is looked up once per event, not once per question).
#[derive(Clone, Copy)]
pub(crate) struct Linked<'a> {
    gate: &'a OutputGate,
    sh: &'a Shared,
}

/// What to do with one event.
pub(crate) enum Decision<'a, S: LookupSpan<'a>> {
    /// Write its line.
    Write(Write),
    /// Format its line and give it to this holder: its request was not kept.
    Hold(Holder<'a, S>),
    /// Do not write it, for this reason (count it with [`OutputGate::dropped`]).
    Drop(Reason),
    /// Format its line and give it to this recorder: a recording rule keeps it instead.
    Record(Recording<'a>),
}

/// Per callsite, whether the policy in force records its events, as the first event of
/// the callsite under that policy found it (the policy's [`fast_path::tag`] in the high
/// bits, [`RecordCell::KNOWN`] and [`RecordCell::RECORDED`] below): the next events of
/// the callsite are decided by one compare, without loading the policy or matching
/// their target against the recording rules. Kept by the output with the callsite's
/// other cached parts; set only while no `when` entry is in force (a thread's spans
/// could change the answer).
#[derive(Debug, Default)]
pub(crate) struct RecordCell(AtomicU64);

impl RecordCell {
    const KNOWN: u64 = 1 << 1;
    const RECORDED: u64 = 1;

    /// A cell that knows nothing yet.
    pub(crate) const fn new() -> Self {
        RecordCell(AtomicU64::new(0))
    }

    /// Whether events are recorded under the policy of `tag`, if the cell knows.
    #[inline]
    fn under(&self, tag: u64) -> Option<bool> {
        let w = self.0.load(Ordering::Relaxed);
        (w & !Self::RECORDED == tag | Self::KNOWN).then_some(w & Self::RECORDED != 0)
    }

    /// Keeps `recorded` as the answer under the policy of `tag`.
    #[inline]
    fn set(&self, tag: u64, recorded: bool) {
        // `RECORDED` is bit 0.
        let w = tag | Self::KNOWN | u64::from(recorded);
        self.0.store(w, Ordering::Relaxed);
    }
}

/// Takes the line of an event a recording rule keeps.
pub(crate) struct Recording<'a> {
    /// What the recorded line redacts.
    pub(crate) redaction: ActiveRedaction,
    level: tracing_core::Level,
    recorder: &'a Recorder,
    stats: &'a StatsCells,
}

impl Recording<'_> {
    /// Keeps the event's formatted `line` (ledger row `row`, emitted at `now` since the
    /// Unix epoch), and counts it.
    #[inline]
    pub(crate) fn record(self, now: Duration, row: RowId, line: &[u8]) {
        StatsCells::add(&self.stats.recorded, &self.level, 1);
        self.recorder.record(now, row, Level::of(&self.level), line);
    }
}

/// A line to write.
#[derive(Debug)]
pub(crate) struct Write {
    /// The event is at or above `alwaysKeep` (the sink sheds the others first).
    pub(crate) always_keep: bool,
    /// The lines its request held, to be written first, in order (already counted as
    /// written): the context of an error.
    pub(crate) context: Option<Held>,
    /// The line is charged to the byte budget.
    budget: bool,
    /// What its line redacts.
    pub(crate) redaction: ActiveRedaction,
}

/// Takes the line of an event whose request was not kept.
pub(crate) struct Holder<'a, S: LookupSpan<'a>> {
    /// What the held line redacts.
    pub(crate) redaction: ActiveRedaction,
    span: SpanRef<'a, S>,
    level: tracing_core::Level,
    limits: &'a RequestLimits,
    stats: &'a StatsCells,
    ledger: &'a Ledger,
}

impl OutputGate {
    /// A gate with no filter linked: every event is written.
    pub(crate) fn new() -> Self {
        OutputGate {
            always_keep: Level::Warn,
            filter: None,
            requests: RequestLimits::default(),
            tracked: Arc::default(),
            summary: Arc::new(Summary::new(DEFAULT_SUMMARY_INTERVAL_SECS)),
            redaction: RedactionSet::builtin(),
        }
    }

    /// What is redacted when no filter is linked (a linked filter's policy decides
    /// otherwise).
    pub(crate) fn set_redaction(&mut self, redaction: Redaction) {
        self.redaction = RedactionSet::new(redaction, Some(&self.redaction));
    }

    /// The redaction in force now, numbered (to compute a callsite's mask).
    pub(crate) fn redaction_set(&self) -> Arc<RedactionSet> {
        match self.shared() {
            Some(sh) => sh.compiled.load().redaction.clone(),
            None => self.redaction.clone(),
        }
    }

    /// The redaction in force now (for what is formatted outside an event: span fields).
    #[inline]
    pub(crate) fn active_redaction(&self) -> ActiveRedaction {
        match self.shared() {
            Some(sh) => EventPath(sh.event_path.load(Ordering::Acquire)).redaction(),
            None => ActiveRedaction {
                id: self.redaction.id,
                values: self.redaction.redaction.redacts_values(),
            },
        }
    }

    /// Counts values an output redacted (linked filter's stats only; nothing to do for
    /// a line that redacted nothing).
    #[inline]
    pub(crate) fn redacted(&self, by_name: u64, by_value: u64) {
        if by_name | by_value == 0 {
            return;
        }
        if let Some(sh) = self.shared() {
            sh.stats
                .redacted_by_name
                .fetch_add(by_name, Ordering::Relaxed);
            sh.stats
                .redacted_by_value
                .fetch_add(by_value, Ordering::Relaxed);
        }
    }

    /// Decides with `filter`'s policy from now on; returns the filter's clock.
    pub(crate) fn link(&mut self, filter: &PolicyFilter) -> Arc<dyn Clock> {
        self.filter = Some(filter.clone());
        filter.shared.clock.clone()
    }

    /// `alwaysKeep` when no filter is linked.
    pub(crate) fn set_always_keep(&mut self, level: Level) {
        self.always_keep = level;
    }

    pub(crate) fn set_request_limits(&mut self, limits: RequestLimits) {
        self.requests = limits;
    }

    pub(crate) fn set_summary_interval(&mut self, secs: u64) {
        self.summary = Arc::new(Summary::new(secs.max(1)));
    }

    #[inline]
    fn shared(&self) -> Option<&Shared> {
        self.filter.as_ref().map(|f| &*f.shared)
    }

    /// A span opened: under request-scope rules, decides once whether its request is
    /// kept.
    pub(crate) fn open_span<'a, S>(&self, attrs: &Attributes<'_>, span: &SpanRef<'a, S>)
    where
        S: Subscriber + LookupSpan<'a>,
    {
        let Some(sh) = self.shared() else { return };
        let compiled = sh.compiled.load();
        if !compiled.has_request_rules {
            return;
        }
        if let Some(state) =
            RequestState::decide(&compiled, attrs, span, &self.requests, &self.tracked)
        {
            span.extensions_mut().insert(state);
        }
    }

    /// A span closed: what its request still holds was sampled out.
    pub(crate) fn close_span<'a, S>(&self, span: &SpanRef<'a, S>)
    where
        S: Subscriber + LookupSpan<'a>,
    {
        let Some(sh) = self.shared() else { return };
        let state = span.extensions_mut().remove::<RequestState>();
        if let Some(state) = state {
            state.discard(&sh.stats, &self.tracked, &sh.ledger);
        }
    }

    /// The gate with its filter, if one is linked.
    #[inline]
    pub(crate) fn linked(&self) -> Option<Linked<'_>> {
        Some(Linked {
            gate: self,
            sh: self.shared()?,
        })
    }

    /// Whether an event of `level` is at or above `alwaysKeep`, when no filter is linked.
    #[inline]
    pub(crate) fn keeps_always(&self, level: &tracing_core::Level) -> bool {
        Level::of(level) <= self.always_keep
    }
}

impl<'a> Linked<'a> {
    /// The in-band notices waiting (burst limiter), to be written before the next line
    /// (one atomic load when there are none).
    #[inline]
    pub(crate) fn take_notices(self) -> Option<VecDeque<Notice>> {
        self.sh.notices.take()
    }

    /// Most events' decision, made before anything else is looked at: with no request
    /// rule, no byte budget and no recording rule in force, an event that reached the
    /// output is written. `None`: [`Linked::decide`] decides.
    #[inline]
    pub(crate) fn plain_write(self, level: &tracing_core::Level) -> Option<Write> {
        let path = EventPath(self.sh.event_path.load(Ordering::Acquire));
        if path.needs_compiled() {
            return None;
        }
        Some(Write {
            always_keep: path.keeps_always(level),
            context: None,
            budget: false,
            redaction: path.redaction(),
        })
    }

    /// Decides `event` at `now` (since the Unix epoch); `cell` is its callsite's memory
    /// of whether the policy records it (none: asked of the policy every time).
    #[inline]
    pub(crate) fn decide<'c, S>(
        self,
        event: &Event<'_>,
        ctx: &'c Context<'_, S>,
        now: Duration,
        cell: Option<&RecordCell>,
    ) -> Decision<'c, S>
    where
        'a: 'c,
        S: Subscriber + for<'l> LookupSpan<'l>,
    {
        let level = event.metadata().level();
        let sh = self.sh;
        let path = EventPath(sh.event_path.load(Ordering::Acquire));
        let always_keep = path.keeps_always(level);
        if !path.needs_compiled() {
            // Most events: no request rules, no budget and no recording rule, nothing
            // more to decide.
            return Decision::Write(Write {
                always_keep,
                context: None,
                budget: false,
                redaction: path.redaction(),
            });
        }
        self.decide_compiled(always_keep, path, event, ctx, now, cell)
    }

    /// [`decide`](Self::decide) when request rules or a byte budget are in force, or a
    /// recording rule may apply.
    fn decide_compiled<'c, S>(
        self,
        always_keep: bool,
        path: EventPath,
        event: &Event<'_>,
        ctx: &'c Context<'_, S>,
        now: Duration,
        cell: Option<&RecordCell>,
    ) -> Decision<'c, S>
    where
        'a: 'c,
        S: Subscriber + for<'l> LookupSpan<'l>,
    {
        let sh = self.sh;
        let level = event.metadata().level();
        let redaction = path.redaction();
        let record = || {
            Decision::Record(Recording {
                redaction,
                level: *level,
                recorder: &sh.recorder,
                stats: &sh.stats,
            })
        };
        if !path.limits_events() {
            let write = || {
                Decision::Write(Write {
                    always_keep,
                    context: None,
                    budget: false,
                    redaction,
                })
            };
            if !path.may_record(level) {
                // Only a recording rule is in force, and it cannot apply to this level.
                return write();
            }
            // Only a recording rule is in force: what it decided for this callsite under
            // this policy, if that is known.
            let tag = sh.fast_tag.load(Ordering::Acquire);
            match cell.and_then(|c| c.under(tag)) {
                Some(true) => return record(),
                Some(false) => return write(),
                None => {}
            }
        }
        let compiled = sh.compiled.load();
        if compiled.records_any() {
            let mask = if compiled.when_any != 0 {
                when::current_mask()
            } else {
                0
            };
            let recorded = compiled.records_event(event.metadata(), mask);
            if let Some(cell) = cell.filter(|_| compiled.when_any == 0) {
                cell.set(fast_path::tag(sh.id, compiled.generation), recorded);
            }
            if recorded {
                return record();
            }
        }
        let budget = compiled.max_bytes_per_second;
        let mut context = None;
        // What the request held, written first and counted as written.
        let release = || {
            let mut held = request::promote(event, ctx)?;
            for (lvl, _, _) in held.lines() {
                StatsCells::sub(&sh.stats.held, &lvl, 1);
                StatsCells::add(&sh.stats.written, &lvl, 1);
            }
            if budget.is_some() {
                sh.budget.charge(held.byte_len());
            }
            Some(held)
        };
        if compiled.has_request_rules {
            if always_keep {
                // The context of an error.
                context = release();
            } else {
                match request::check(&compiled, event, ctx) {
                    HoldCheck::Write => {}
                    // A request whose span recorded a matching value after some of its
                    // lines were held: they come first, the rest of it is kept.
                    HoldCheck::Matched => context = release(),
                    HoldCheck::Sampled => return Decision::Drop(Reason::Sampled),
                    HoldCheck::Hold(span) => {
                        return Decision::Hold(Holder {
                            redaction,
                            span,
                            level: *level,
                            limits: &self.gate.requests,
                            stats: &sh.stats,
                            ledger: &sh.ledger,
                        })
                    }
                }
            }
        }
        if let (Some(rate), false) = (budget, always_keep) {
            let now_ns = u64::try_from(now.as_nanos()).unwrap_or(u64::MAX);
            if !sh.budget.admit(now_ns, rate) {
                return Decision::Drop(Reason::Budget);
            }
        }
        Decision::Write(Write {
            always_keep,
            context,
            budget: budget.is_some(),
            redaction,
        })
    }

    /// The line `write` was for (`len` bytes, of an event of `level`) was handed to the
    /// sink: counts it, and charges the budget.
    #[inline]
    pub(crate) fn written(self, write: &Write, level: &tracing_core::Level, len: usize) {
        StatsCells::add(&self.sh.stats.written, level, 1);
        if write.budget {
            self.sh.budget.charge(len);
        }
    }

    /// An event of `level` and ledger row `row` was not written, for `reason`: counts it.
    #[inline]
    pub(crate) fn dropped(self, level: &tracing_core::Level, row: RowId, reason: Reason) {
        let sh = self.sh;
        let counts = match reason {
            Reason::Sampled => &sh.stats.sampled,
            Reason::Burst => &sh.stats.burst,
            Reason::Budget => &sh.stats.budget,
        };
        StatsCells::add(counts, level, 1);
        sh.ledger.add(row, Col::policy(reason as usize), 1);
    }

    /// After a line was written at `now`: the summary of events not written, when it is
    /// due and something went unwritten since the last one.
    #[inline]
    pub(crate) fn summary_due(self, now: Duration) -> Option<NotWritten> {
        if !self.gate.summary.due(now.as_secs()) {
            return None;
        }
        self.gate.summary.since_last(&self.sh.stats.snapshot())
    }
}

impl<'a, S> Holder<'a, S>
where
    S: Subscriber + LookupSpan<'a>,
{
    /// Holds the event's formatted `line` (ledger row `row`) with its request, and
    /// counts it (and the older lines dropped to make room, as sampled).
    pub(crate) fn hold(self, line: &[u8], row: RowId) {
        let stats = self.stats;
        let sampled = Col::policy(Reason::Sampled as usize);
        match request::store(&self.span, self.limits, self.level, row, line) {
            Some(evicted) => {
                StatsCells::add(&stats.held, &self.level, 1);
                for (lvl, row) in evicted {
                    StatsCells::sub(&stats.held, &lvl, 1);
                    StatsCells::add(&stats.sampled, &lvl, 1);
                    self.ledger.add(row, sampled, 1);
                }
            }
            // The request stopped holding lines meanwhile.
            None => {
                StatsCells::add(&stats.sampled, &self.level, 1);
                self.ledger.add(row, sampled, 1);
            }
        }
    }
}
