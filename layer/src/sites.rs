//! A process-wide, lock-free, bounded table of per-callsite data, keyed by the address
//! of a callsite's `'static` metadata (an identity for the life of the process: static
//! metadata is never freed or moved).
//!
//! An entry is built once, leaked (`'static`), and never removed, so a lookup is a hash,
//! an atomic load and a compare, with no reference counting ([`Words`] keeps one word
//! inline per slot instead of a pointer to an entry). The table has a fixed
//! number of slots and a lookup probes a few of them: when they are all taken by other
//! callsites, the callsite has no entry and its caller takes its slow path. A program has
//! a bounded number of callsites, so the memory is bounded too.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Per-callsite data kept in a [`Table`].
pub(crate) trait Site: Sync + 'static {
    /// The address of the callsite's metadata.
    fn key(&self) -> usize;
}

/// A table's slots: `static T: Table<X> = [const { OnceLock::new() }; SLOTS];`.
pub(crate) type Table<T> = [OnceLock<&'static T>];

/// Slots tried from a key's own before giving up.
const PROBES: usize = 8;

#[inline]
fn slot_of(key: usize, slots: usize) -> usize {
    // The address in units of 8 bytes (metadata are 8-byte aligned and far larger, so
    // two callsites never share a unit): a program's callsites are statics laid out
    // one after another, so consecutive ones take consecutive slots, and only
    // addresses a multiple of the table's span apart meet (then the next slots are
    // probed).
    (key >> 3) % slots
}

/// The slots a lookup of `key` tries, in order: its own, then the next [`PROBES`] - 1.
#[inline(always)]
fn probed<S>(table: &'static [S], key: usize) -> impl Iterator<Item = &'static S> {
    let start = slot_of(key, table.len());
    (0..PROBES).map(move |i| &table[(start + i) % table.len()])
}

/// The entry for `key`, built by `make` if there is none yet; `None` when the slots
/// probed are all taken by other keys. `make` must build an entry whose key is `key`,
/// and only for the metadata of a registered (`'static`) callsite.
#[inline(always)]
pub(crate) fn find_or_insert<T: Site>(
    table: &'static Table<T>,
    key: usize,
    make: impl FnOnce() -> T,
) -> Option<&'static T> {
    let mut make = Some(make);
    for slot in probed(table, key) {
        let entry = match slot.get() {
            Some(e) => e,
            None => insert(slot, &mut make)?,
        };
        if entry.key() == key {
            return Some(entry);
        }
    }
    None
}

/// Claims `slot` for a new entry, unless another thread claimed it first (its entry is
/// returned then, whatever its key).
#[cold]
fn insert<T: Site>(
    slot: &'static OnceLock<&'static T>,
    make: &mut Option<impl FnOnce() -> T>,
) -> Option<&'static T> {
    let make = make.take()?;
    Some(*slot.get_or_init(|| Box::leak(Box::new(make()))))
}

/// A slot of a [`Words`] table: a callsite's key (0: free) and one word of data, inline,
/// so a lookup needs no pointer to an entry: a hash, a load and compare of the key, and
/// the load of the word.
pub(crate) struct WordSlot {
    key: AtomicUsize,
    word: AtomicU64,
}

impl WordSlot {
    /// A free slot: `static W: [WordSlot; SLOTS] = [const { WordSlot::free() }; SLOTS];`.
    pub(crate) const fn free() -> WordSlot {
        WordSlot {
            key: AtomicUsize::new(0),
            word: AtomicU64::new(0),
        }
    }
}

/// A table of one word per callsite, keyed like a [`Table`]. A slot, once claimed by a
/// key, keeps it; a word reads 0 until its first store.
pub(crate) type Words = [WordSlot];

/// The word of `key`, if it has a slot.
#[inline(always)]
pub(crate) fn find_word(table: &'static Words, key: usize) -> Option<&'static AtomicU64> {
    for slot in probed(table, key) {
        let k = slot.key.load(Ordering::Acquire);
        if k == key {
            return Some(&slot.word);
        }
        if k == 0 {
            return None;
        }
    }
    None
}

/// The word of `key`, claiming a free slot for it if it has none; `None` when the slots
/// probed are all taken by other keys. `key` must not be 0.
pub(crate) fn find_or_insert_word(table: &'static Words, key: usize) -> Option<&'static AtomicU64> {
    for slot in probed(table, key) {
        match slot
            .key
            .compare_exchange(0, key, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => return Some(&slot.word),
            Err(k) if k == key => return Some(&slot.word),
            Err(_) => continue,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Entry(usize);

    impl Site for Entry {
        fn key(&self) -> usize {
            self.0
        }
    }

    /// `PROBES + 1` keys from `base` that all start at the same slot of a 16-slot table.
    fn colliding(base: usize) -> Vec<usize> {
        let same: Vec<usize> = (0..10_000usize)
            .map(|i| base + i * 8)
            .filter(|&k| slot_of(k, 16) == slot_of(base, 16))
            .take(PROBES + 1)
            .collect();
        assert_eq!(same.len(), PROBES + 1);
        same
    }

    #[test]
    fn entries_are_found_until_the_probed_slots_are_full() {
        static TABLE: [OnceLock<&'static Entry>; 16] = [const { OnceLock::new() }; 16];
        // Keys that all hash to one slot: the first PROBES get entries, in turn.
        let same = colliding(0x1000);
        let found = |k: usize| find_or_insert(&TABLE, k, || panic!("{k:#x} has an entry"));
        for &k in &same[..PROBES] {
            assert_eq!(find_or_insert(&TABLE, k, || Entry(k)).map(|e| e.0), Some(k));
            assert_eq!(found(k).map(|e| e.0), Some(k));
        }
        let last = same[PROBES];
        assert!(find_or_insert(&TABLE, last, || Entry(last)).is_none());
        // Earlier entries are still there.
        assert_eq!(found(same[0]).map(|e| e.0), Some(same[0]));
    }

    #[test]
    fn words_are_found_until_the_probed_slots_are_full() {
        static WORDS: [WordSlot; 16] = [const { WordSlot::free() }; 16];
        let same = colliding(0x2000);
        for (n, &k) in same[..PROBES].iter().enumerate() {
            assert!(find_word(&WORDS, k).is_none());
            let word = find_or_insert_word(&WORDS, k).expect("a free slot");
            assert_eq!(word.load(Ordering::Relaxed), 0, "a new word reads 0");
            word.store(n as u64 + 1, Ordering::Relaxed);
            // The same key finds the same word, by either call.
            assert_eq!(
                find_word(&WORDS, k).map(|w| w.load(Ordering::Relaxed)),
                Some(n as u64 + 1)
            );
            assert_eq!(
                find_or_insert_word(&WORDS, k).map(|w| w.load(Ordering::Relaxed)),
                Some(n as u64 + 1)
            );
        }
        let last = same[PROBES];
        assert!(find_or_insert_word(&WORDS, last).is_none());
        assert!(find_word(&WORDS, last).is_none());
        for (n, &k) in same[..PROBES].iter().enumerate() {
            assert_eq!(
                find_word(&WORDS, k).map(|w| w.load(Ordering::Relaxed)),
                Some(n as u64 + 1)
            );
        }
    }
}
