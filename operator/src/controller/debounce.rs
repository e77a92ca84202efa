//! At most one status write per policy per interval.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// Writes each policy's status at most once per interval: a change within the interval
/// after a write waits for its end.
#[derive(Debug)]
pub struct Debounce<K> {
    interval: Duration,
    last: HashMap<K, Instant>,
    pending: BTreeMap<K, Instant>,
}

impl<K: Ord + std::hash::Hash + Clone> Debounce<K> {
    /// At most one write per key per `interval`.
    pub fn new(interval: Duration) -> Self {
        Debounce {
            interval,
            last: HashMap::new(),
            pending: BTreeMap::new(),
        }
    }

    /// `key` changed at `now`.
    pub fn mark(&mut self, key: K, now: Instant) {
        let due = match self.last.get(&key) {
            Some(t) => (*t + self.interval).max(now),
            None => now,
        };
        self.pending.entry(key).or_insert(due);
    }

    /// The keys due at `now`, recorded as written at `now`.
    pub fn take_due(&mut self, now: Instant) -> Vec<K> {
        let due: Vec<K> = self
            .pending
            .iter()
            .filter(|(_, t)| **t <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for k in &due {
            self.pending.remove(k);
            self.last.insert(k.clone(), now);
        }
        let horizon = self.interval;
        self.last
            .retain(|_, t| now.saturating_duration_since(*t) < horizon);
        due
    }

    /// When the next key is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.pending.values().min().copied()
    }
}
