//! The parts of a line that depend only on its callsite and the line's format, rendered
//! once per callsite and format's [`Keys`]: the level and the escaped target, and every
//! field's escaped key. A line then copies them instead of matching and escaping names
//! on every event.
//!
//! Callsites are `'static` and a program has a bounded number of them, so each callsite's
//! parts are built the first time one of its events is formatted and kept for the life of
//! the process, in a fixed table per [`Keys`] shared by every layer (the parts depend on
//! nothing else). When the table has no room near a callsite's slot, its events are formatted
//! the slow way: the output is the same.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use tracing_core::callsite::Identifier;
use tracing_core::field::{Field, ValueSet};
use tracing_core::span::Record;
use tracing_core::{Event, Metadata};

use super::schema::{write_head, write_key, Keys};
use crate::enforce::{FieldMask, RecordCell, RedactionSet};
use crate::ledger::{self, RowId};
use crate::sites::{self, Site};

/// The index of `meta`'s field called `message` (`usize::MAX`: none).
pub(crate) fn message_index(meta: &Metadata<'_>) -> usize {
    meta.fields()
        .iter()
        .position(|f| f.name() == "message")
        .unwrap_or(usize::MAX)
}

/// One callsite's rendered parts.
pub(crate) struct CachedSite {
    meta: &'static Metadata<'static>,
    callsite: Identifier,
    /// What follows the timestamp (see [`write_head`]), e.g. for JSON
    /// `","level":"INFO","target":"<target>"`.
    pub(crate) head: Box<[u8]>,
    /// Per field index: `,"<key>":` (JSON) or ` <key>=` (logfmt), if it fits in
    /// [`KEY_INLINE`] bytes.
    keys: Box<[Key]>,
    /// The index of the field called `message` (`usize::MAX`: none).
    message: usize,
    /// The callsite's row in the ledger (`None`: a callsite of the `log` bridge, whose
    /// events are counted in the rows of their records).
    row: Option<RowId>,
    /// The fields the last redaction seen here hides: its id in the high 32 bits, the
    /// field bits below (0 in the high bits: not computed yet).
    redaction: AtomicU64,
    /// Whether the policy in force records the callsite's events.
    pub(crate) record: RecordCell,
}

/// Keys up to this long are copied as one fixed-size block (two vector moves and no
/// call to `memcpy`, whose branches on the length mispredict as a line's keys alternate).
pub(crate) const KEY_INLINE: usize = 32;

/// A rendered key, padded to [`KEY_INLINE`] bytes: with a `"` right after it when it is
/// shorter, so that a JSON key and the quote that opens a string value are one store.
struct Key {
    bytes: [u8; KEY_INLINE],
    /// 0: longer than [`KEY_INLINE`] (written the slow way).
    len: u8,
}

impl CachedSite {
    fn new(meta: &'static Metadata<'static>, kind: Keys) -> Self {
        let mut head = Vec::with_capacity(64 + meta.target().len());
        write_head(&mut head, kind, meta.level(), meta.target());
        let keys = meta
            .fields()
            .iter()
            .map(|f| {
                let mut k = Vec::with_capacity(f.name().len() + 12);
                write_key(&mut k, kind, f.name());
                let mut key = Key {
                    bytes: [0; KEY_INLINE],
                    len: 0,
                };
                if k.len() <= KEY_INLINE {
                    key.bytes[..k.len()].copy_from_slice(&k);
                    key.len = k.len() as u8;
                }
                if k.len() < KEY_INLINE {
                    key.bytes[k.len()] = b'"';
                }
                key
            })
            .collect();
        CachedSite {
            meta,
            message: message_index(meta),
            callsite: meta.callsite(),
            row: ledger::fixed_row_of_static(meta),
            head: head.into_boxed_slice(),
            keys,
            redaction: AtomicU64::new(0),
            record: RecordCell::new(),
        }
    }

    /// Which fields the redaction numbered `id` hides here, if it was computed already:
    /// one load and one comparison.
    #[inline]
    pub(crate) fn mask(&self, id: u32) -> Option<FieldMask> {
        let packed = self.redaction.load(Ordering::Relaxed);
        ((packed >> 32) as u32 == id).then_some(FieldMask {
            bits: packed as u32,
            by_name: false,
        })
    }

    /// Computes (and keeps, when it fits in a word) which fields `set` hides here.
    pub(crate) fn compute_mask(&self, set: &RedactionSet) -> FieldMask {
        let mask = set.mask(self.meta.fields());
        if !mask.by_name && self.meta.fields().len() <= 32 {
            self.redaction.store(
                u64::from(set.id) << 32 | u64::from(mask.bits),
                Ordering::Relaxed,
            );
        }
        mask
    }

    /// The row of an event of this callsite in the ledger: kept here, so the event's
    /// one lookup of its callsite finds its keys, its redaction and its row.
    #[inline]
    pub(crate) fn row(&self) -> RowId {
        match self.row {
            Some(row) => row,
            None => ledger::row_of_static(self.meta),
        }
    }

    /// The index of this callsite's field called `message` (`usize::MAX`: none).
    #[inline]
    pub(crate) fn message_index(&self) -> usize {
        self.message
    }

    /// Whether `field` is this callsite's message.
    #[inline(always)]
    pub(crate) fn is_message(&self, field: &Field) -> bool {
        field.index() == self.message && field.callsite() == self.callsite
    }

    /// Whether `event`'s values are of this callsite's fields, as tracing's macros make
    /// them (a hand-made event may pair one callsite's metadata with another's values).
    /// Checked once per event: a visitor is given the callsite only when it holds, and
    /// [`CachedSite::put_key`] then trusts every field it is given.
    #[inline]
    pub(crate) fn holds(&self, event: &Event<'_>) -> bool {
        // `ValueSet::record` visits only fields of the value set's own callsite.
        event
            .fields()
            .next()
            .is_none_or(|f| f.callsite() == self.callsite)
    }

    /// [`CachedSite::holds`] for a new span's values.
    #[inline]
    pub(crate) fn holds_values(&self, values: &ValueSet<'_>) -> bool {
        values.callsite() == self.callsite
    }

    /// [`CachedSite::holds`] for values recorded into a span later: `Record::contains`
    /// answers for a field only of the record's own callsite, so a value of this
    /// callsite's fields tells the record is this callsite's (one with no value at all
    /// has nothing to key).
    pub(crate) fn holds_record(&self, values: &Record<'_>) -> bool {
        self.meta.fields().iter().any(|f| values.contains(&f))
    }

    /// Appends the rendered key of `field`, one of this callsite's fields (see
    /// [`CachedSite::holds`]); false (nothing written) if its key is too long to be kept
    /// rendered.
    #[inline]
    pub(crate) fn put_key(&self, buf: &mut Vec<u8>, field: &Field) -> bool {
        self.put_rendered_key(buf, field, 0)
    }

    /// [`CachedSite::put_key`] followed by the `"` that opens a JSON string value, in the
    /// same store; false (nothing written) if the key is not kept rendered or leaves no
    /// room for the quote.
    #[inline]
    pub(crate) fn put_key_quote(&self, buf: &mut Vec<u8>, field: &Field) -> bool {
        self.put_rendered_key(buf, field, 1)
    }

    /// The rendered key of `field`, padded to [`KEY_INLINE`] bytes, and its length with
    /// `quote` bytes (0 or 1) kept after it; `None` if it is not kept rendered or leaves
    /// no room for the quote.
    #[inline(always)]
    pub(crate) fn rendered_key(
        &self,
        field: &Field,
        quote: usize,
    ) -> Option<(&[u8; KEY_INLINE], usize)> {
        let key = self.keys.get(field.index())?;
        let len = usize::from(key.len) + quote;
        (key.len != 0 && len <= KEY_INLINE).then_some((&key.bytes, len))
    }

    /// The rendered key of `field` and the `quote` bytes (0 or 1) kept after it, as one
    /// fixed-size store cut back to their length.
    #[inline(always)]
    fn put_rendered_key(&self, buf: &mut Vec<u8>, field: &Field, quote: usize) -> bool {
        let Some((key, len)) = self.rendered_key(field, quote) else {
            return false;
        };
        let at = buf.len();
        buf.extend_from_slice(key);
        buf.truncate(at + len);
        true
    }
}

const SLOTS: usize = 2048;

/// One table per [`Keys`].
static TABLES: [[OnceLock<&'static CachedSite>; SLOTS]; Keys::COUNT] =
    [const { [const { OnceLock::new() }; SLOTS] }; Keys::COUNT];

impl Site for CachedSite {
    fn key(&self) -> usize {
        self.meta as *const Metadata<'static> as usize
    }
}

/// The parts of `meta`'s callsite rendered with `kind`'s keys: built on its first event,
/// `None` only when the table has no room for it.
#[inline]
pub(crate) fn cached_site(
    meta: &'static Metadata<'static>,
    kind: Keys,
) -> Option<&'static CachedSite> {
    let key = meta as *const Metadata<'static> as usize;
    sites::find_or_insert(&TABLES[kind as usize], key, || CachedSite::new(meta, kind))
}

/// The parts of `event`'s callsite rendered with `kind`'s keys, if its values are of that
/// callsite's fields (see [`CachedSite::holds`]): what a visitor of its fields may be given.
#[inline]
pub(crate) fn cached_site_of(event: &Event<'_>, kind: Keys) -> Option<&'static CachedSite> {
    cached_site(event.metadata(), kind).filter(|c| c.holds(event))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::fields::{JsonFields, LogfmtFields, TextFields};

    /// A `static` event metadata `$meta` of callsite `$cs` with `$fields`.
    macro_rules! event_meta {
        ($meta:ident, $cs:ident, $fields:expr) => {
            static $meta: Metadata<'static> = tracing_core::metadata! {
                name: stringify!($meta),
                target: "t",
                level: tracing_core::Level::INFO,
                fields: $fields,
                callsite: &$cs,
                kind: tracing_core::metadata::Kind::EVENT,
            };
        };
    }

    const KINDS: [Keys; Keys::COUNT] = [
        Keys::Json,
        Keys::Otel,
        Keys::Ecs,
        Keys::Gcp,
        Keys::Datadog,
        Keys::Logfmt,
        Keys::LogfmtSpan,
        Keys::Text,
    ];

    #[test]
    fn keys_are_rendered_as_the_slow_path_writes_them() {
        for name in [
            "message", "msg", "ts", "level", "target", "span", "path", "a\"b", "é",
        ] {
            let mut k = Vec::new();
            write_key(&mut k, Keys::Json, name);
            let expected = match name {
                "message" => ",\"msg\":".to_owned(),
                "msg" | "ts" | "level" | "target" | "span" => format!(",\"field.{name}\":"),
                "a\"b" => ",\"a\\\"b\":".to_owned(),
                n => format!(",\"{n}\":"),
            };
            assert_eq!(String::from_utf8(k).unwrap(), expected);
        }
    }

    /// Records each event's fields with its callsite's rendered parts and without, with
    /// every kind of keys, and keeps both lines.
    struct Both(std::sync::Mutex<Vec<(Vec<u8>, Vec<u8>)>>);

    fn record(
        event: &tracing_core::Event<'_>,
        kind: Keys,
        c: Option<&'static CachedSite>,
    ) -> Vec<u8> {
        let mut buf = Vec::new();
        match c {
            Some(c) => buf.extend_from_slice(&c.head),
            None => write_head(
                &mut buf,
                kind,
                event.metadata().level(),
                event.metadata().target(),
            ),
        }
        match kind {
            Keys::Text => event.record(&mut TextFields {
                buf: &mut buf,
                callsite: c,
            }),
            Keys::Logfmt | Keys::LogfmtSpan => event.record(&mut LogfmtFields {
                buf: &mut buf,
                callsite: c,
                keys: kind,
            }),
            _ => event.record(&mut JsonFields {
                buf: &mut buf,
                callsite: c,
                keys: kind,
            }),
        }
        buf
    }

    impl<S: tracing_core::Subscriber> tracing_subscriber::Layer<S> for &'static Both {
        fn on_event(
            &self,
            event: &tracing_core::Event<'_>,
            _: tracing_subscriber::layer::Context<'_, S>,
        ) {
            for kind in KINDS {
                let c = cached_site_of(event, kind);
                assert!(c.is_some());
                let pair = (record(event, kind, c), record(event, kind, None));
                self.0.lock().unwrap().push(pair);
            }
        }
    }

    #[test]
    fn a_line_is_the_same_with_the_rendered_parts_and_without() {
        use tracing_subscriber::prelude::*;
        let both: &'static Both = Box::leak(Box::new(Both(Default::default())));
        tracing::subscriber::with_default(tracing_subscriber::registry().with(both), || {
            tracing::info!(target: "a::b", method = "GET", path = "/x", step = 1u32, "handling");
            tracing::warn!(target: "q\"t", ts = 1, level = "l", target = 2, msg = 3, span = 4, "r\"s");
            tracing::error!("a.b" = true, x = ?Some(2), "{} and {}", 1, "two");
            tracing::debug!(empty = "", a_field_name_longer_than_the_inline_key = 1);
            // JSON keys of 31, 32 and 33 bytes (`,"` name `":`): room for the opening
            // quote of a string value, none, and not kept rendered.
            tracing::info!(
                name_of_twenty_seven_chars_ = "a",
                name_of_twenty_eight_chars__ = "b",
                name_of_twenty_nine_chars____ = ?"c"
            );
        });
        let lines = both.0.lock().unwrap();
        assert_eq!(lines.len(), 5 * KINDS.len());
        for (fast, slow) in lines.iter() {
            assert_eq!(String::from_utf8_lossy(fast), String::from_utf8_lossy(slow));
        }
        assert!(String::from_utf8_lossy(&lines[KINDS.len()].0)
            .contains(",\"field.ts\":1,\"field.level\":\"l\""));
    }

    /// A hand-made event may pair one callsite's metadata with another callsite's values:
    /// its fields are then keyed by their own names, never by the metadata's rendered
    /// keys at the same index.
    #[test]
    fn an_event_with_another_callsites_values_is_keyed_by_its_own_fields() {
        event_meta!(A_META, A, &["method", "path"]);
        event_meta!(B_META, B, &["user", "secret_of_b"]);
        struct Cs(&'static Metadata<'static>);
        impl tracing_core::Callsite for Cs {
            fn set_interest(&self, _: tracing_core::Interest) {}
            fn metadata(&self) -> &Metadata<'_> {
                self.0
            }
        }
        static A: Cs = Cs(&A_META);
        static B: Cs = Cs(&B_META);

        let fields = B_META.fields();
        let (user, other) = (
            fields.field("user").unwrap(),
            fields.field("secret_of_b").unwrap(),
        );
        let values: [(&Field, Option<&dyn tracing_core::field::Value>); 2] =
            [(&user, Some(&"u1")), (&other, Some(&2u64))];
        let value_set = fields.value_set(&values);
        let foreign = Event::new(&A_META, &value_set);
        let a_fields = A_META.fields();
        let own_values: [(&Field, Option<&dyn tracing_core::field::Value>); 1] =
            [(&a_fields.field("method").unwrap(), Some(&"GET"))];
        let own_set = a_fields.value_set(&own_values);
        let own = Event::new(&A_META, &own_set);

        for kind in KINDS {
            assert!(cached_site_of(&own, kind).is_some(), "{kind:?}");
            assert!(cached_site_of(&foreign, kind).is_none(), "{kind:?}");
            let line =
                String::from_utf8(record(&foreign, kind, cached_site_of(&foreign, kind))).unwrap();
            assert!(
                line.contains("user") && line.contains("secret_of_b"),
                "{kind:?}: {line}"
            );
            assert!(
                !line.contains("method") && !line.contains("path"),
                "{kind:?}: {line}"
            );
        }
    }

    #[test]
    fn slots_stay_in_the_table() {
        event_meta!(META, CS, &[]);
        struct Cs;
        impl tracing_core::Callsite for Cs {
            fn set_interest(&self, _: tracing_core::Interest) {}
            fn metadata(&self) -> &Metadata<'_> {
                &META
            }
        }
        static CS: Cs = Cs;
        let c = cached_site(&META, Keys::Json).expect("room in an empty table");
        assert_eq!(&*c.head, b"\",\"level\":\"INFO\",\"target\":\"t\"");
        assert!(std::ptr::eq(cached_site(&META, Keys::Json).unwrap(), c));
        let logfmt = cached_site(&META, Keys::Logfmt).expect("a table per kind");
        assert_eq!(&*logfmt.head, b" level=info target=t");
    }
}
