//! The redaction in force: the effective policy's [`Redaction`] with an id, so that an
//! output can keep, per callsite, which field positions it redacts (computed once per
//! callsite and redaction, when its first event is formatted) and know when that is stale.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, LazyLock};

use tracing_core::field::FieldSet;

use crate::policy::Redaction;

/// Ids of distinct redactions; 0 is never used (a callsite's "not computed yet"), 1 is
/// the built-in redaction of an output with no policy linked.
static NEXT_ID: AtomicU32 = AtomicU32::new(2);

static BUILTIN: LazyLock<Arc<RedactionSet>> = LazyLock::new(|| {
    Arc::new(RedactionSet {
        id: 1,
        redaction: Redaction::builtin(),
    })
});

/// One redaction, numbered.
#[derive(Debug)]
pub(crate) struct RedactionSet {
    pub(crate) id: u32,
    pub(crate) redaction: Redaction,
}

/// The fields of one callsite that a redaction hides: bit `i` for field `i`.
/// Callsites have at most 32 fields when made by `tracing`'s macros; a hand-made one
/// with more is matched by name on every event (`by_name`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FieldMask {
    pub(crate) bits: u32,
    pub(crate) by_name: bool,
}

impl FieldMask {
    pub(crate) const NONE: FieldMask = FieldMask {
        bits: 0,
        by_name: false,
    };

    /// Whether no field is redacted.
    #[inline]
    pub(crate) fn is_empty(self) -> bool {
        self.bits == 0 && !self.by_name
    }

    /// Whether the bits hide the field at `index` (a callsite matched by name has none:
    /// see `by_name`).
    #[inline(always)]
    pub(crate) fn hides(self, index: usize) -> bool {
        index < 32 && self.bits & (1 << index) != 0
    }
}

impl RedactionSet {
    /// The built-in redaction (id 1).
    pub(crate) fn builtin() -> Arc<Self> {
        BUILTIN.clone()
    }

    /// `redaction`, numbered: `prev` itself if it is the same redaction.
    pub(crate) fn new(redaction: Redaction, prev: Option<&Arc<RedactionSet>>) -> Arc<Self> {
        if let Some(prev) = prev.filter(|p| p.redaction == redaction) {
            return prev.clone();
        }
        if BUILTIN.redaction == redaction {
            return BUILTIN.clone();
        }
        let mut id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        while id < 2 {
            // Wrapped (after four billion changes): skip the reserved ids.
            id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        }
        Arc::new(RedactionSet { id, redaction })
    }

    /// Which of `fields` this redaction hides.
    pub(crate) fn mask(&self, fields: &FieldSet) -> FieldMask {
        if fields.len() > 32 {
            return FieldMask {
                bits: 0,
                by_name: fields.iter().any(|f| self.redaction.redacts(f.name())),
            };
        }
        let mut bits = 0;
        for (i, f) in fields.iter().enumerate() {
            if self.redaction.redacts(f.name()) {
                bits |= 1 << i;
            }
        }
        FieldMask {
            bits,
            by_name: false,
        }
    }
}

/// What an output needs per event to redact: the redaction's id and whether value
/// shapes are redacted (both carried in the filter's event-path word).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ActiveRedaction {
    pub(crate) id: u32,
    pub(crate) values: bool,
}
