//! The byte-bounded queue: fixed-size chunks, filled by callers, handed whole to the
//! writer thread, returned empty. Pure data structure; the locking is in `mod.rs`.

use super::stats::LEVELS;

/// Whether a line can enter the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fit {
    /// There is room now.
    Now,
    /// There is no room now, but there will be once the writer catches up.
    Later,
    /// The line is larger than its whole share: it can never enter.
    Never,
}

/// Free chunks the writer thread keeps ready for callers (while the bound allows).
const SPARE_CHUNKS: usize = 2;

/// Empties the chunks of a written batch (outside the lock), keeping their memory.
pub(crate) fn clear_chunks(batch: &mut [Vec<u8>]) {
    for chunk in batch {
        chunk.clear();
    }
}

/// A chunk for [`Queue::add_spare`]: allocated and its pages touched, so the copy a caller
/// makes into it under the lock takes no page fault.
pub(crate) fn fresh_chunk(chunk_size: usize) -> Vec<u8> {
    let mut chunk = vec![0u8; chunk_size];
    chunk.clear();
    chunk
}

/// The chunk size for a queue of `capacity` bytes: 1/32 of it, between 4 KiB and 64 KiB.
pub(crate) fn chunk_size_for(capacity: usize) -> usize {
    (capacity / 32).clamp(4 * 1024, 64 * 1024)
}

/// A queue of whole lines bounded in bytes.
///
/// Bytes live in chunks of `chunk_size`; a line may span chunks. `pending` is filled by
/// callers; the writer thread takes all pending chunks at once (a batch of whole lines),
/// writes them and gives them back. `pending_bytes + inflight_bytes <= capacity` always,
/// and since only the last pending chunk and the last batch chunk can be partly filled,
/// at most `capacity / chunk_size + 2` chunks ever exist.
#[derive(Debug)]
pub(crate) struct Queue {
    capacity: usize,
    normal_limit: usize,
    chunk_size: usize,
    pending: Vec<Vec<u8>>,
    pending_bytes: usize,
    pending_lines: [u64; LEVELS],
    inflight_bytes: usize,
    inflight_lines: [u64; LEVELS],
    free: Vec<Vec<u8>>,
    allocated_chunks: usize,
    peak_bytes: usize,
}

impl Queue {
    pub(crate) fn new(capacity: usize, normal_limit: usize) -> Self {
        let chunk_size = chunk_size_for(capacity);
        let max_chunks = Self::max_chunks_for(capacity, chunk_size);
        Self {
            capacity,
            normal_limit: normal_limit.min(capacity),
            chunk_size,
            pending: Vec::with_capacity(max_chunks),
            pending_bytes: 0,
            pending_lines: [0; LEVELS],
            inflight_bytes: 0,
            inflight_lines: [0; LEVELS],
            free: Vec::with_capacity(max_chunks),
            allocated_chunks: 0,
            peak_bytes: 0,
        }
    }

    fn max_chunks_for(capacity: usize, chunk_size: usize) -> usize {
        capacity / chunk_size + 2
    }

    /// The most chunks this queue will ever allocate.
    pub(crate) fn max_chunks(&self) -> usize {
        Self::max_chunks_for(self.capacity, self.chunk_size)
    }

    #[cfg(test)]
    pub(crate) fn chunk_size(&self) -> usize {
        self.chunk_size
    }

    /// The bound on queued bytes.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes waiting plus bytes being written.
    pub(crate) fn queued_bytes(&self) -> usize {
        self.pending_bytes + self.inflight_bytes
    }

    pub(crate) fn pending_bytes(&self) -> usize {
        self.pending_bytes
    }

    pub(crate) fn peak_bytes(&self) -> usize {
        self.peak_bytes
    }

    /// Lines waiting plus lines being written, per level.
    pub(crate) fn queued_lines(&self) -> [u64; LEVELS] {
        let mut out = self.pending_lines;
        for (o, i) in out.iter_mut().zip(self.inflight_lines) {
            *o += i;
        }
        out
    }

    #[cfg(test)]
    pub(crate) fn allocated_chunks(&self) -> usize {
        self.allocated_chunks
    }

    /// Whether a line of `len` bytes fits: lines below `alwaysKeep` may fill the queue up
    /// to the normal limit, `alwaysKeep` lines up to the whole capacity.
    pub(crate) fn fit(&self, len: usize, always_keep: bool) -> Fit {
        let limit = if always_keep {
            self.capacity
        } else {
            self.normal_limit
        };
        if len > limit {
            Fit::Never
        } else if self.queued_bytes() + len <= limit {
            Fit::Now
        } else {
            Fit::Later
        }
    }

    /// Appends a line that [`Queue::fit`] said fits now.
    pub(crate) fn push(&mut self, level: usize, line: &[u8]) {
        let mut rest = line;
        while !rest.is_empty() {
            let need_chunk = self
                .pending
                .last()
                .is_none_or(|c| c.len() == self.chunk_size);
            if need_chunk {
                let chunk = match self.free.pop() {
                    Some(c) => c,
                    None => {
                        self.allocated_chunks += 1;
                        Vec::with_capacity(self.chunk_size)
                    }
                };
                self.pending.push(chunk);
            }
            if let Some(tail) = self.pending.last_mut() {
                let n = (self.chunk_size - tail.len()).min(rest.len());
                tail.extend_from_slice(&rest[..n]);
                rest = &rest[n..];
            }
        }
        self.pending_bytes += line.len();
        self.pending_lines[level] += 1;
        self.peak_bytes = self.peak_bytes.max(self.queued_bytes());
    }

    /// Moves every pending chunk into `batch` (which must be empty) and marks them in
    /// flight. Returns the batch's byte count.
    pub(crate) fn take(&mut self, batch: &mut Vec<Vec<u8>>) -> usize {
        debug_assert!(batch.is_empty() && self.inflight_bytes == 0);
        std::mem::swap(&mut self.pending, batch);
        self.inflight_bytes = self.pending_bytes;
        self.inflight_lines = self.pending_lines;
        self.pending_bytes = 0;
        self.pending_lines = [0; LEVELS];
        self.inflight_bytes
    }

    /// The batch in flight is done (written or not): returns its lines per level, takes its
    /// chunks back for reuse and leaves `batch` empty. The caller empties the chunks first,
    /// outside the lock (see [`clear_chunks`]); this only moves pointers.
    pub(crate) fn finish(&mut self, batch: &mut Vec<Vec<u8>>) -> [u64; LEVELS] {
        debug_assert!(batch.iter().all(Vec::is_empty));
        self.free.append(batch);
        self.inflight_bytes = 0;
        std::mem::take(&mut self.inflight_lines)
    }

    /// How many fresh chunks the writer thread should allocate (outside the lock) and
    /// hand in with [`Queue::add_spare`], so that callers find a free chunk instead of
    /// allocating (and faulting in fresh pages) while they hold the lock. Never more than
    /// the bound allows.
    pub(crate) fn spare_wanted(&self) -> usize {
        SPARE_CHUNKS
            .saturating_sub(self.free.len())
            .min(self.max_chunks().saturating_sub(self.allocated_chunks))
    }

    /// The chunk size, for the writer thread's allocation of spares.
    pub(crate) fn chunk_len(&self) -> usize {
        self.chunk_size
    }

    /// Takes chunks allocated outside the lock (empty, `chunk_size` capacity), up to the
    /// bound; returns the ones it did not take (only if the bound was reached meanwhile).
    pub(crate) fn add_spare(&mut self, spare: &mut Vec<Vec<u8>>) {
        while self.allocated_chunks < self.max_chunks() {
            match spare.pop() {
                Some(chunk) => {
                    debug_assert!(chunk.is_empty() && chunk.capacity() >= self.chunk_size);
                    self.allocated_chunks += 1;
                    self.free.push(chunk);
                }
                None => return,
            }
        }
    }

    /// Gives up on everything queued (the guard's flush timed out): returns the lines per
    /// level. The in-flight batch's chunks stay with the writer thread.
    pub(crate) fn abandon(&mut self) -> [u64; LEVELS] {
        let lines = self.queued_lines();
        for mut chunk in self.pending.drain(..) {
            chunk.clear();
            self.free.push(chunk);
        }
        self.pending_bytes = 0;
        self.pending_lines = [0; LEVELS];
        self.inflight_bytes = 0;
        self.inflight_lines = [0; LEVELS];
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bytes(batch: &[Vec<u8>]) -> Vec<u8> {
        batch.concat()
    }

    #[test]
    fn reserve_is_kept_for_always_keep_lines() {
        // capacity 4096, normal limit 3072 (25% reserve)
        let mut q = Queue::new(4096, 3072);
        let line = [b'x'; 1024];
        for _ in 0..3 {
            assert_eq!(q.fit(1024, false), Fit::Now);
            q.push(2, &line);
        }
        assert_eq!(q.fit(1, false), Fit::Later);
        assert_eq!(q.fit(1024, true), Fit::Now);
        q.push(4, &line);
        assert_eq!(q.fit(1, true), Fit::Later);
        assert_eq!(q.queued_bytes(), 4096);
        assert_eq!(q.queued_lines(), [0, 0, 3, 0, 1]);
        assert_eq!(q.fit(3073, false), Fit::Never);
        assert_eq!(q.fit(4097, true), Fit::Never);
    }

    #[test]
    fn in_flight_bytes_count_until_finished() {
        let mut q = Queue::new(4096, 4096);
        q.push(2, &[b'a'; 4000]);
        let mut batch = Vec::new();
        assert_eq!(q.take(&mut batch), 4000);
        assert_eq!(q.fit(100, true), Fit::Later);
        clear_chunks(&mut batch);
        assert_eq!(q.finish(&mut batch), [0, 0, 1, 0, 0]);
        assert!(batch.is_empty());
        assert_eq!(q.fit(4096, true), Fit::Now);
        assert_eq!(q.peak_bytes(), 4000);
    }

    proptest! {
        /// Whatever the interleaving, bytes come out in order, the bound holds and no more
        /// than `capacity / chunk + 2` chunks are ever allocated.
        #[test]
        fn bounded_and_ordered(ops in proptest::collection::vec((0u8..5, 1usize..9000), 1..400)) {
            let capacity = 16 * 1024;
            let mut q = Queue::new(capacity, capacity * 3 / 4);
            let mut batch = Vec::new();
            let mut expected = Vec::new();
            let mut got = Vec::new();
            let mut counter = 0u8;
            for (op, len) in ops {
                match op {
                    0 | 1 => {
                        let always_keep = op == 1;
                        if q.fit(len, always_keep) == Fit::Now {
                            counter = counter.wrapping_add(1);
                            let line = vec![counter; len];
                            q.push(if always_keep { 4 } else { 2 }, &line);
                            expected.extend_from_slice(&line);
                        }
                    }
                    2 => {
                        if batch.is_empty() && q.pending_bytes() > 0 {
                            q.take(&mut batch);
                        }
                    }
                    3 => {
                        got.extend_from_slice(&bytes(&batch));
                        clear_chunks(&mut batch);
                        q.finish(&mut batch);
                    }
                    _ => {
                        let mut spare: Vec<Vec<u8>> =
                            (0..q.spare_wanted()).map(|_| fresh_chunk(q.chunk_len())).collect();
                        q.add_spare(&mut spare);
                        prop_assert!(spare.is_empty());
                    }
                }
                prop_assert!(q.queued_bytes() <= capacity);
                prop_assert!(q.allocated_chunks() <= q.max_chunks());
                prop_assert!(batch.iter().all(|c| c.capacity() == q.chunk_size()));
            }
            got.extend_from_slice(&bytes(&batch));
            clear_chunks(&mut batch);
            q.finish(&mut batch);
            q.take(&mut batch);
            got.extend_from_slice(&bytes(&batch));
            prop_assert_eq!(got, expected);
        }
    }
}
