//! The parts of a JSON line that depend only on its callsite, rendered once per callsite:
//! the level and the escaped target, and every field's escaped key. A line then copies
//! them instead of matching and escaping names on every event.
//!
//! Callsites are `'static` and a program has a bounded number of them, so each callsite's
//! parts are built the first time one of its events is formatted and kept for the life of
//! the process, in a fixed table shared by every layer (the parts depend on nothing
//! else). When the table has no room near a callsite's slot, its events are formatted
//! the slow way: the output is the same.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use tracing_core::callsite::Identifier;
use tracing_core::field::Field;
use tracing_core::Metadata;

use super::escape::write_escaped;
use crate::enforce::{FieldMask, RedactionSet};
use crate::sites::{self, Site};

/// One callsite's rendered parts.
pub(crate) struct JsonCallsite {
    meta: &'static Metadata<'static>,
    callsite: Identifier,
    /// What follows the timestamp's closing quote: `,"level":"INFO","target":"<target>"`.
    pub(crate) head: Box<[u8]>,
    /// Per field index: `,"<key>":`, if it fits in [`KEY_INLINE`] bytes.
    keys: Box<[Key]>,
    /// The fields the last redaction seen here hides: its id in the high 32 bits, the
    /// field bits below (0 in the high bits: not computed yet).
    redaction: AtomicU64,
}

/// Keys up to this long are copied as one fixed-size block (two vector moves and no
/// call to `memcpy`, whose branches on the length mispredict as a line's keys alternate).
const KEY_INLINE: usize = 32;

/// A rendered key, padded to [`KEY_INLINE`] bytes.
struct Key {
    bytes: [u8; KEY_INLINE],
    /// 0: longer than [`KEY_INLINE`] (written the slow way).
    len: u8,
}

impl JsonCallsite {
    fn new(meta: &'static Metadata<'static>) -> Self {
        let mut head = Vec::with_capacity(32 + meta.target().len());
        write_head(&mut head, meta);
        let keys = meta
            .fields()
            .iter()
            .map(|f| {
                let mut k = Vec::with_capacity(f.name().len() + 12);
                write_key(&mut k, f.name());
                let mut key = Key {
                    bytes: [0; KEY_INLINE],
                    len: 0,
                };
                if k.len() <= KEY_INLINE {
                    key.bytes[..k.len()].copy_from_slice(&k);
                    key.len = k.len() as u8;
                }
                key
            })
            .collect();
        JsonCallsite {
            meta,
            callsite: meta.callsite(),
            head: head.into_boxed_slice(),
            keys,
            redaction: AtomicU64::new(0),
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

    /// Appends the rendered key of `field`; false (nothing written) if it is not one of
    /// this callsite's fields or its key is too long to be kept rendered.
    #[inline]
    pub(crate) fn put_key(&self, buf: &mut Vec<u8>, field: &Field) -> bool {
        let Some(key) = self.keys.get(field.index()) else {
            return false;
        };
        if key.len == 0 || field.callsite() != self.callsite {
            return false;
        }
        buf.reserve(KEY_INLINE);
        let at = buf.len();
        buf.extend_from_slice(&key.bytes);
        buf.truncate(at + usize::from(key.len));
        true
    }
}

/// Appends the head of `meta`'s lines (see [`JsonCallsite::head`]), rendered now: what
/// a line carries when its callsite has no room in the table, and what the table keeps.
pub(crate) fn write_head(buf: &mut Vec<u8>, meta: &Metadata<'_>) {
    buf.extend_from_slice(level_head(meta.level()));
    write_escaped(buf, meta.target());
    buf.push(b'"');
}

/// `","level":"<LEVEL>","target":"`, the part of the head before the target.
#[inline]
fn level_head(level: &tracing_core::Level) -> &'static [u8] {
    match *level {
        tracing_core::Level::ERROR => b"\",\"level\":\"ERROR\",\"target\":\"",
        tracing_core::Level::WARN => b"\",\"level\":\"WARN\",\"target\":\"",
        tracing_core::Level::INFO => b"\",\"level\":\"INFO\",\"target\":\"",
        tracing_core::Level::DEBUG => b"\",\"level\":\"DEBUG\",\"target\":\"",
        _ => b"\",\"level\":\"TRACE\",\"target\":\"",
    }
}

/// Appends `,"<name>":`. The `message` field is the line's `msg`; a field named like a
/// key the line itself uses is written as `field.<name>`, so a line never has duplicate
/// keys.
pub(crate) fn write_key(buf: &mut Vec<u8>, name: &str) {
    match name.as_bytes() {
        b"message" => {
            buf.extend_from_slice(b",\"msg\":");
            return;
        }
        b"ts" | b"level" | b"target" | b"msg" | b"span" => {
            buf.extend_from_slice(b",\"field.");
        }
        _ => buf.extend_from_slice(b",\""),
    }
    write_escaped(buf, name);
    buf.extend_from_slice(b"\":");
}

const SLOTS: usize = 2048;

static TABLE: [OnceLock<&'static JsonCallsite>; SLOTS] = [const { OnceLock::new() }; SLOTS];

impl Site for JsonCallsite {
    fn key(&self) -> usize {
        self.meta as *const Metadata<'static> as usize
    }
}

/// The rendered parts of `meta`'s callsite: built on its first event, `None` only when
/// the table has no room for it.
#[inline]
pub(crate) fn json_callsite(meta: &'static Metadata<'static>) -> Option<&'static JsonCallsite> {
    let key = meta as *const Metadata<'static> as usize;
    sites::find_or_insert(&TABLE, key, || JsonCallsite::new(meta))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_rendered_as_the_slow_path_writes_them() {
        for name in [
            "message", "msg", "ts", "level", "target", "span", "path", "a\"b", "é",
        ] {
            let mut k = Vec::new();
            write_key(&mut k, name);
            let expected = match name {
                "message" => ",\"msg\":".to_owned(),
                "msg" | "ts" | "level" | "target" | "span" => format!(",\"field.{name}\":"),
                "a\"b" => ",\"a\\\"b\":".to_owned(),
                n => format!(",\"{n}\":"),
            };
            assert_eq!(String::from_utf8(k).unwrap(), expected);
        }
    }

    /// Records each event's fields with its callsite's rendered keys and without, and
    /// keeps both lines.
    struct Both(std::sync::Mutex<Vec<(Vec<u8>, Vec<u8>)>>);

    impl<S: tracing_core::Subscriber> tracing_subscriber::Layer<S> for &'static Both {
        fn on_event(
            &self,
            event: &tracing_core::Event<'_>,
            _: tracing_subscriber::layer::Context<'_, S>,
        ) {
            let (mut fast, mut slow) = (Vec::new(), Vec::new());
            let c = json_callsite(event.metadata());
            assert!(c.is_some());
            fast.extend_from_slice(&c.unwrap().head);
            event.record(&mut super::super::JsonFields {
                buf: &mut fast,
                callsite: c,
            });
            write_head(&mut slow, event.metadata());
            event.record(&mut super::super::JsonFields {
                buf: &mut slow,
                callsite: None,
            });
            self.0.lock().unwrap().push((fast, slow));
        }
    }

    #[test]
    fn a_line_is_the_same_with_the_rendered_parts_and_without() {
        use tracing_subscriber::prelude::*;
        let both: &'static Both = Box::leak(Box::new(Both(Default::default())));
        tracing::subscriber::with_default(tracing_subscriber::registry().with(both), || {
            tracing::info!(target: "a::b", method = "GET", path = "/x", step = 1u32, "handling");
            tracing::warn!(target: "q\"t", ts = 1, level = "l", target = 2, msg = "m", span = 3, "r\"s");
            tracing::error!("a.b" = true, x = ?Some(2), "{} and {}", 1, "two");
            tracing::debug!(empty = "", a_field_name_longer_than_the_inline_key = 1);
        });
        let lines = both.0.lock().unwrap();
        assert_eq!(lines.len(), 4);
        for (fast, slow) in lines.iter() {
            assert_eq!(String::from_utf8_lossy(fast), String::from_utf8_lossy(slow));
        }
        assert!(
            String::from_utf8_lossy(&lines[1].0).contains(",\"field.ts\":1,\"field.level\":\"l\"")
        );
    }

    #[test]
    fn slots_stay_in_the_table() {
        static META: Metadata<'static> = tracing_core::metadata! {
            name: "x",
            target: "t",
            level: tracing_core::Level::INFO,
            fields: &[],
            callsite: &CS,
            kind: tracing_core::metadata::Kind::EVENT,
        };
        struct Cs;
        impl tracing_core::Callsite for Cs {
            fn set_interest(&self, _: tracing_core::Interest) {}
            fn metadata(&self) -> &Metadata<'_> {
                &META
            }
        }
        static CS: Cs = Cs;
        let c = json_callsite(&META).expect("room in an empty table");
        assert_eq!(&*c.head, b"\",\"level\":\"INFO\",\"target\":\"t\"");
        assert!(std::ptr::eq(json_callsite(&META).unwrap(), c));
    }
}
