//! The byte-bounded queue: chunks filled by callers, handed to the writer thread in
//! batches, returned empty. Pure data structure; the locking is in `mod.rs`.

use std::collections::VecDeque;

use crate::ledger::RowId;
use crate::level::LEVELS;

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

/// Where an `alwaysKeep` line sits in its chunk, so that it stays when the lines around
/// it are evicted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    start: u32,
    len: u32,
    level: u8,
    /// The ledger's row of the line (see [`crate::ledger`]).
    row: RowId,
}

/// What an `alwaysKeep` line costs the byte budget on top of its bytes: its [`Span`].
pub(crate) const KEEP_RECORD_BYTES: usize = std::mem::size_of::<Span>();

/// A chunk keeps at most this many span slots once emptied (a chunk of tiny `alwaysKeep`
/// lines does not pin its records' memory).
const KEEP_RECORDS_RETAINED: usize = 64;

/// A chunk takes at most one line per this many bytes of its size, so that the line
/// marks ([`Chunk::ends`], 4 bytes a line) never take more than a third of it, however
/// short the lines.
const MARK_BYTES_PER_LINE: usize = 12;

/// A line's entry in [`Chunk::ends`]: the ledger's row of the line (12 bits), where it
/// ends in its chunk (at most 64 KiB, so in 17 bits) and its level (3 bits).
#[inline]
fn mark(end: usize, level: usize, row: RowId) -> u32 {
    ((row.index() as u32) << 20) | ((end as u32) << 3) | level as u32
}

/// Where the line of mark `m` ends in its chunk.
#[inline]
fn mark_end(m: u32) -> usize {
    ((m >> 3) & 0x1_ffff) as usize
}

/// The level index of the line of mark `m`.
#[inline]
fn mark_level(m: u32) -> usize {
    (m & 7) as usize
}

/// The ledger's row of the line of mark `m`.
#[inline]
fn mark_row(m: u32) -> RowId {
    RowId::from_index((m >> 20) as usize)
}

/// Calls `f(row, len, whole)` for every line that ends in `batch`, in order: its
/// ledger row, its length (all its pieces' for a line longer than a chunk), and whether
/// the output took every byte of it, when it took the batch's first `delivered` bytes
/// (`None`: all of them).
pub(crate) fn for_each_line(
    batch: &[Chunk],
    delivered: Option<u64>,
    mut f: impl FnMut(RowId, usize, bool),
) {
    let mut at = 0u64;
    let mut carried = 0usize;
    for chunk in batch {
        let len = chunk.data.len() as u64;
        let all = delivered.is_none_or(|d| at + len <= d);
        let mut prev = 0usize;
        for &m in &chunk.ends {
            let end = mark_end(m);
            let whole = all || delivered.is_some_and(|d| at + end as u64 <= d);
            f(mark_row(m), carried + end - prev, whole);
            carried = 0;
            prev = end;
        }
        if chunk.continues {
            carried += chunk.data.len();
        }
        at += len;
    }
}

/// The lines of a batch that got out whole when only its first `delivered` bytes did,
/// and the others, per level; and whether the output stopped inside a line (so the next
/// bytes it takes would join that torn line).
pub(crate) fn split_delivered(batch: &[Chunk], delivered: u64) -> Split {
    let mut split = Split::default();
    let mut at = 0u64;
    for chunk in batch {
        let len = chunk.data.len() as u64;
        if at + len <= delivered {
            add(&mut split.written, chunk.line_count());
        } else {
            for &m in &chunk.ends {
                let (end, level) = (mark_end(m) as u64, mark_level(m));
                if at + end <= delivered {
                    split.written[level] += 1;
                } else {
                    split.lost[level] += 1;
                }
            }
            if delivered > at {
                let cut = (delivered - at) as usize;
                split.torn |= chunk.data.get(cut - 1) != Some(&b'\n');
            }
        }
        at += len;
    }
    split
}

/// What the writer writes before anything else after a write that stopped inside a line:
/// it ends the torn line so that no reader takes it, or the next line, for a whole one.
pub(crate) const TORN_END: &[u8] = b" [torn]\n";

/// What [`split_delivered`] tells of a batch.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Split {
    /// Lines whose every byte the output took, per level.
    pub(crate) written: [u64; LEVELS],
    /// The other lines, per level.
    pub(crate) lost: [u64; LEVELS],
    /// The output took part of a line and no more.
    pub(crate) torn: bool,
}

/// A chunk of whole lines, or one piece of a line longer than a chunk.
#[derive(Debug)]
pub(crate) struct Chunk {
    data: Vec<u8>,
    /// Lines that end in this chunk, per level.
    lines: [u32; LEVELS],
    /// Where each line that ends in this chunk ends, and its level, in order (see
    /// [`mark`]): what tells, when a write stops part way, which lines got out whole.
    ends: Vec<u32>,
    /// The `alwaysKeep` lines in this chunk, in order (not for pieces of long lines).
    keep: Vec<Span>,
    /// A piece of a line longer than a chunk: nothing else is put in it, and it is never
    /// compacted.
    piece: bool,
    /// A piece whose line goes on in the next chunk: a batch never ends here.
    continues: bool,
}

impl Chunk {
    fn with_capacity(chunk_size: usize) -> Self {
        Chunk {
            data: Vec::with_capacity(chunk_size),
            lines: [0; LEVELS],
            ends: Vec::new(),
            keep: Vec::new(),
            piece: false,
            continues: false,
        }
    }

    /// Appends a whole line that fits (at most a chunk's size in all).
    #[inline(always)]
    fn append(&mut self, level: usize, row: RowId, line: &[u8], always_keep: bool) {
        let start = self.data.len();
        self.data.extend_from_slice(line);
        self.lines[level] += 1;
        self.ends.push(mark(self.data.len(), level, row));
        if always_keep {
            // Both fit in u32: a chunk is at most 64 KiB.
            self.keep.push(Span {
                start: start as u32,
                len: line.len() as u32,
                level: level as u8,
                row,
            });
        }
    }

    /// Whether a whole line of `len` bytes goes into this chunk, of a queue whose chunks
    /// are `chunk_size` bytes and take at most `max_marks` lines.
    #[inline]
    fn takes(&self, len: usize, chunk_size: usize, max_marks: usize) -> bool {
        !self.piece && self.data.len() + len <= chunk_size && self.ends.len() < max_marks
    }

    /// What this chunk counts against the budget.
    fn cost(&self) -> usize {
        self.data.len() + self.keep.len() * KEEP_RECORD_BYTES
    }

    fn line_count(&self) -> [u64; LEVELS] {
        self.lines.map(u64::from)
    }

    /// Empties the chunk, keeping its memory.
    fn reset(&mut self) {
        self.data.clear();
        self.lines = [0; LEVELS];
        self.ends.clear();
        self.keep.clear();
        self.keep.shrink_to(KEEP_RECORDS_RETAINED);
        self.piece = false;
        self.continues = false;
    }

    fn is_reset(&self) -> bool {
        self.data.is_empty() && self.keep.is_empty() && self.lines == [0; LEVELS] && !self.piece
    }
}

impl AsRef<[u8]> for Chunk {
    /// The bytes to write.
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

/// Empties the chunks of a written batch (outside the lock), keeping their memory.
pub(crate) fn clear_chunks(batch: &mut [Chunk]) {
    for chunk in batch {
        chunk.reset();
    }
}

/// A chunk for [`Queue::add_spare`]: allocated and its pages touched, so the copy a caller
/// makes into it under the lock takes no page fault.
pub(crate) fn fresh_chunk(chunk_size: usize) -> Chunk {
    let mut data = vec![0u8; chunk_size];
    data.clear();
    Chunk {
        data,
        ..Chunk::with_capacity(0)
    }
}

/// The chunk size for a queue of `capacity` bytes: 1/32 of it, between 4 KiB and 64 KiB.
pub(crate) fn chunk_size_for(capacity: usize) -> usize {
    (capacity / 32).clamp(4 * 1024, 64 * 1024)
}

fn add(into: &mut [u64; LEVELS], lines: [u64; LEVELS]) {
    for (a, b) in into.iter_mut().zip(lines) {
        *a += b;
    }
}

/// A queue of whole lines bounded in bytes.
///
/// Lines live in chunks of `chunk_size` bytes and never straddle two, except a line
/// longer than a chunk, which gets chunks of its own (pieces). `pending` is filled by
/// callers; the writer thread takes whole chunks from its front (a batch of whole lines,
/// at most `max_batch` bytes unless one chunk is more), writes them and gives them back.
///
/// Bounds: `pending_bytes + inflight_bytes <= capacity` always, where a line costs its
/// bytes plus [`KEEP_RECORD_BYTES`] if it is an `alwaysKeep` line; and at most
/// `capacity / chunk_size + 4` chunks ever exist (a line that would need another one
/// waits, as if the budget were spent).
///
/// [`Queue::evict_below`] drops every pending line below a level (not the
/// batch in flight, not pieces of long lines) and packs the `alwaysKeep` lines that remain,
/// in order, into as few chunks as they fit.
#[derive(Debug)]
pub(crate) struct Queue {
    capacity: usize,
    normal_limit: usize,
    chunk_size: usize,
    /// The most lines a chunk takes: `chunk_size / MARK_BYTES_PER_LINE`.
    max_marks: usize,
    max_batch: usize,
    pending: VecDeque<Chunk>,
    pending_bytes: usize,
    pending_lines: [u64; LEVELS],
    inflight_bytes: usize,
    inflight_lines: [u64; LEVELS],
    free: Vec<Chunk>,
    allocated_chunks: usize,
    peak_bytes: usize,
    scratch: Vec<Span>,
    /// Set by an eviction, cleared when a batch is written: until then lines below
    /// `alwaysKeep` do not fit, since they could only be evicted in turn.
    refusing_below_keep: bool,
}

impl Queue {
    pub(crate) fn new(capacity: usize, normal_limit: usize) -> Self {
        let chunk_size = chunk_size_for(capacity);
        let max_chunks = Self::max_chunks_for(capacity, chunk_size);
        Self {
            capacity,
            normal_limit: normal_limit.min(capacity),
            chunk_size,
            max_marks: chunk_size / MARK_BYTES_PER_LINE,
            max_batch: (capacity / 4).max(chunk_size),
            pending: VecDeque::with_capacity(max_chunks),
            pending_bytes: 0,
            pending_lines: [0; LEVELS],
            inflight_bytes: 0,
            inflight_lines: [0; LEVELS],
            free: Vec::with_capacity(max_chunks),
            allocated_chunks: 0,
            peak_bytes: 0,
            scratch: Vec::new(),
            refusing_below_keep: false,
        }
    }

    fn max_chunks_for(capacity: usize, chunk_size: usize) -> usize {
        capacity / chunk_size + 4
    }

    /// The most chunks this queue will ever allocate.
    pub(crate) fn max_chunks(&self) -> usize {
        Self::max_chunks_for(self.capacity, self.chunk_size)
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
        add(&mut out, self.inflight_lines);
        out
    }

    #[cfg(test)]
    pub(crate) fn allocated_chunks(&self) -> usize {
        self.allocated_chunks
    }

    /// What a line counts against the budget: its bytes, plus its [`Span`] if it is an
    /// `alwaysKeep` line that fits in a chunk (a longer one is never moved, so has none).
    fn line_cost(&self, len: usize, always_keep: bool) -> usize {
        if always_keep && len <= self.chunk_size {
            len + KEEP_RECORD_BYTES
        } else {
            len
        }
    }

    /// Whether lines below `alwaysKeep` are refused because of an eviction (see the
    /// field), for the lock-free mirror callers read first.
    pub(crate) fn refusing_below_keep(&self) -> bool {
        self.refusing_below_keep
    }

    /// Whether a line of `len` bytes fits: lines below `alwaysKeep` may fill the queue up
    /// to the normal limit (none while an eviction is in force), `alwaysKeep` lines up
    /// to the whole capacity.
    pub(crate) fn fit(&self, len: usize, always_keep: bool) -> Fit {
        let cost = self.line_cost(len, always_keep);
        if cost > self.limit(always_keep) {
            Fit::Never
        } else if self.admits(cost, always_keep) && self.has_chunks_for(len) {
            Fit::Now
        } else {
            Fit::Later
        }
    }

    /// How much a line may fill the queue to: the normal limit below `alwaysKeep`, the
    /// whole capacity at or above.
    #[inline]
    fn limit(&self, always_keep: bool) -> usize {
        if always_keep {
            self.capacity
        } else {
            self.normal_limit
        }
    }

    /// Whether a line costing `cost` is within its limit now (and, below `alwaysKeep`,
    /// no eviction is in force), chunks aside.
    #[inline]
    fn admits(&self, cost: usize, always_keep: bool) -> bool {
        self.queued_bytes() + cost <= self.limit(always_keep)
            && (always_keep || !self.refusing_below_keep)
    }

    /// Whether a line of `len` bytes goes into the last pending chunk.
    #[inline]
    fn tail_has_room(&self, len: usize) -> bool {
        self.pending
            .back()
            .is_some_and(|t| t.takes(len, self.chunk_size, self.max_marks))
    }

    /// Counts a line of `level` costing `cost` just appended.
    #[inline]
    fn count_pushed(&mut self, level: usize, cost: usize) {
        self.pending_bytes += cost;
        self.pending_lines[level] += 1;
        self.peak_bytes = self.peak_bytes.max(self.queued_bytes());
    }

    fn has_chunks_for(&self, len: usize) -> bool {
        let available = self.free.len() + (self.max_chunks() - self.allocated_chunks);
        if len > self.chunk_size {
            return available >= len.div_ceil(self.chunk_size);
        }
        self.tail_has_room(len) || available > 0
    }

    fn new_chunk(&mut self) -> Chunk {
        match self.free.pop() {
            Some(c) => c,
            None => {
                self.allocated_chunks += 1;
                Chunk::with_capacity(self.chunk_size)
            }
        }
    }

    /// Appends the line if it fits now into the last pending chunk, the common case of a
    /// steady flow: what [`Queue::fit`] then [`Queue::push`] would do, without `fit`'s
    /// look at the spare chunks. Returns `false`, changing nothing, otherwise.
    #[inline(always)]
    pub(crate) fn try_append(
        &mut self,
        level: usize,
        row: RowId,
        line: &[u8],
        always_keep: bool,
    ) -> bool {
        let len = line.len();
        let cost = self.line_cost(len, always_keep);
        if !self.admits(cost, always_keep) {
            return false;
        }
        // `push`'s short-line path, with one look at the tail.
        let (chunk_size, max_marks) = (self.chunk_size, self.max_marks);
        match self.pending.back_mut() {
            Some(tail) if tail.takes(len, chunk_size, max_marks) => {
                tail.append(level, row, line, always_keep);
            }
            _ => return false,
        }
        self.count_pushed(level, cost);
        true
    }

    /// Appends a line that [`Queue::fit`] said fits now.
    pub(crate) fn push(&mut self, level: usize, row: RowId, line: &[u8], always_keep: bool) {
        let len = line.len();
        if len <= self.chunk_size {
            if !self.tail_has_room(len) {
                let chunk = self.new_chunk();
                self.pending.push_back(chunk);
            }
            if let Some(tail) = self.pending.back_mut() {
                tail.append(level, row, line, always_keep);
            }
        } else {
            let mut rest = line;
            while !rest.is_empty() {
                let mut chunk = self.new_chunk();
                let n = rest.len().min(self.chunk_size);
                chunk.data.extend_from_slice(&rest[..n]);
                rest = &rest[n..];
                chunk.piece = true;
                chunk.continues = !rest.is_empty();
                if rest.is_empty() {
                    chunk.lines[level] += 1;
                    chunk.ends.push(mark(chunk.data.len(), level, row));
                }
                self.pending.push_back(chunk);
            }
        }
        self.count_pushed(level, self.line_cost(len, always_keep));
    }

    /// Moves chunks from the front of the pending ones into `batch` (which must be
    /// empty), at most `max_batch` bytes (at least one chunk, and never part of a long
    /// line), and marks them in flight. Returns the batch's byte count.
    pub(crate) fn take(&mut self, batch: &mut Vec<Chunk>) -> usize {
        debug_assert!(batch.is_empty() && self.inflight_bytes == 0);
        let mut bytes = 0;
        let mut lines = [0u64; LEVELS];
        while let Some(front) = self.pending.front() {
            let cost = front.cost();
            let mid_line = batch.last().is_some_and(|c: &Chunk| c.continues);
            if !batch.is_empty() && !mid_line && bytes + cost > self.max_batch {
                break;
            }
            let Some(chunk) = self.pending.pop_front() else {
                break;
            };
            bytes += cost;
            add(&mut lines, chunk.line_count());
            batch.push(chunk);
        }
        self.pending_bytes -= bytes;
        for (p, l) in self.pending_lines.iter_mut().zip(lines) {
            *p -= l;
        }
        self.inflight_bytes = bytes;
        self.inflight_lines = lines;
        bytes
    }

    /// The batch in flight is done (`written`, or not): returns its lines per level, takes
    /// its chunks back for reuse and leaves `batch` empty; a written batch ends an
    /// eviction's refusal. The caller empties the chunks first, outside the lock (see
    /// [`clear_chunks`]); this only moves pointers.
    pub(crate) fn finish(&mut self, batch: &mut Vec<Chunk>, written: bool) -> [u64; LEVELS] {
        debug_assert!(batch.iter().all(Chunk::is_reset));
        if written {
            self.refusing_below_keep = false;
        }
        self.free.append(batch);
        self.inflight_bytes = 0;
        std::mem::take(&mut self.inflight_lines)
    }

    /// Drops every pending line below `level` (an index of [`LEVELS`]): every line below
    /// `alwaysKeep`, and the `alwaysKeep` lines of a lower level (the batch in flight and
    /// pieces of lines longer than a chunk stay), and packs the lines that remain, in
    /// order, into as few chunks as they fit; emptied chunks are freed. Until a batch is
    /// written, lines below `alwaysKeep` then do not fit. Returns the lines dropped, per
    /// level. Copies only the remaining `alwaysKeep` lines' bytes.
    pub(crate) fn evict_below(
        &mut self,
        level: usize,
        mut dropped: impl FnMut(RowId),
    ) -> [u64; LEVELS] {
        let mut evicted = [0u64; LEVELS];
        if self.pending_lines[..level.min(LEVELS)]
            .iter()
            .all(|&n| n == 0)
        {
            // Nothing of a lower level waits (the common case once the queue holds only
            // `alwaysKeep` lines): no need to look at every line. A line below
            // `alwaysKeep` is of a lower level than any `alwaysKeep` line of the same
            // policy.
            return evicted;
        }
        for chunk in self.pending.iter().filter(|c| !c.piece) {
            let mut keep = [0u64; LEVELS];
            for span in chunk.keep.iter().filter(|s| usize::from(s.level) >= level) {
                keep[usize::from(span.level)] += 1;
            }
            for ((e, l), k) in evicted.iter_mut().zip(chunk.line_count()).zip(keep) {
                *e += l - k;
            }
        }
        if evicted.iter().all(|&n| n == 0) {
            return evicted;
        }
        for chunk in self.pending.iter().filter(|c| !c.piece) {
            // The `alwaysKeep` lines are a subsequence of the lines, in order: a line
            // that is the next of them (same end, row and level) stays if its level does.
            let mut spans = chunk.keep.iter().peekable();
            for &m in &chunk.ends {
                let is_span = spans.peek().is_some_and(|s| {
                    (s.start + s.len) as usize == mark_end(m)
                        && s.row == mark_row(m)
                        && usize::from(s.level) == mark_level(m)
                });
                let stays = is_span && mark_level(m) >= level;
                if is_span {
                    spans.next();
                }
                if !stays {
                    dropped(mark_row(m));
                }
            }
        }
        self.refusing_below_keep = true;
        let chunks = self.pending.make_contiguous();
        let mut from = 0;
        while from < chunks.len() {
            if chunks[from].piece {
                from += 1;
                continue;
            }
            let to = chunks[from..]
                .iter()
                .position(|c| c.piece)
                .map_or(chunks.len(), |p| from + p);
            pack(
                &mut chunks[from..to],
                &mut self.scratch,
                self.chunk_size,
                |span| usize::from(span.level) >= level,
            );
            from = to;
        }
        self.free_emptied();
        for (p, e) in self.pending_lines.iter_mut().zip(evicted) {
            *p -= e;
        }
        evicted
    }

    /// Drops the oldest pending `alwaysKeep` lines of level `level` or below (by then
    /// there are no others below it, see [`Queue::evict_below`]), front to back, until
    /// `need` bytes are freed, or, with `need == 0` (the bytes fit but no chunk is free),
    /// a whole chunk is; lines of a higher level, the batch in flight and pieces of long
    /// lines stay. Each chunk touched is compacted in place (at most a chunk's bytes
    /// copied). Returns the lines dropped, per level (none if nothing could go).
    pub(crate) fn evict_oldest(
        &mut self,
        level: usize,
        need: usize,
        mut dropped: impl FnMut(RowId),
    ) -> [u64; LEVELS] {
        let mut evicted = [0u64; LEVELS];
        let mut freed = 0usize;
        for i in 0..self.pending.len() {
            if self.pending[i].piece {
                continue;
            }
            let chunk = &mut self.pending[i];
            if chunk.lines.iter().sum::<u32>() as usize != chunk.keep.len() {
                // Lines below `alwaysKeep` queued since the last `evict_below`: that one
                // deals with them (it runs first); the chunk stays as it is here.
                continue;
            }
            let budget = need.saturating_sub(freed);
            let mut chunk_freed = 0usize;
            let mut gone = [0u64; LEVELS];
            let mut fill = 0usize;
            let mut w = 0usize;
            for r in 0..chunk.keep.len() {
                let span = chunk.keep[r];
                let (start, len) = (span.start as usize, span.len as usize);
                // Lines at or below `level`, from the chunk's front, while more bytes are
                // needed (all of them when a chunk is what is needed).
                if usize::from(span.level) <= level && (need == 0 || chunk_freed < budget) {
                    chunk_freed += len + KEEP_RECORD_BYTES;
                    gone[usize::from(span.level)] += 1;
                    dropped(span.row);
                    continue;
                }
                chunk.data.copy_within(start..start + len, fill);
                chunk.keep[w] = Span {
                    start: fill as u32,
                    ..span
                };
                w += 1;
                fill += len;
            }
            chunk.data.truncate(fill);
            chunk.keep.truncate(w);
            chunk.ends.clear();
            for span in &chunk.keep {
                let end = (span.start + span.len) as usize;
                chunk
                    .ends
                    .push(mark(end, usize::from(span.level), span.row));
            }
            for (l, g) in chunk.lines.iter_mut().zip(gone) {
                *l -= g as u32;
            }
            add(&mut evicted, gone);
            freed += chunk_freed;
            let emptied = chunk.data.is_empty() && chunk.lines == [0; LEVELS];
            if (need > 0 && freed >= need) || (need == 0 && emptied) {
                break;
            }
        }
        if freed == 0 {
            return evicted;
        }
        self.free_emptied();
        for (p, e) in self.pending_lines.iter_mut().zip(evicted) {
            *p -= e;
        }
        evicted
    }

    /// How many bytes must leave the queue before a line of `len` bytes is within its
    /// limit (0 if it is, or can never be).
    pub(crate) fn shortfall(&self, len: usize, always_keep: bool) -> usize {
        let cost = self.line_cost(len, always_keep);
        (self.queued_bytes() + cost).saturating_sub(self.limit(always_keep))
    }

    /// Frees the pending chunks an eviction emptied (a chunk can hold only empty lines:
    /// keep it), and recounts the pending bytes.
    fn free_emptied(&mut self) {
        let mut i = 0;
        while i < self.pending.len() {
            let emptied = self.pending[i].data.is_empty() && self.pending[i].lines == [0; LEVELS];
            match emptied.then(|| self.pending.remove(i)).flatten() {
                Some(mut chunk) => {
                    chunk.reset();
                    self.free.push(chunk);
                }
                None => i += 1,
            }
        }
        self.pending_bytes = self.pending.iter().map(Chunk::cost).sum();
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
    pub(crate) fn add_spare(&mut self, spare: &mut Vec<Chunk>) {
        while self.allocated_chunks < self.max_chunks() {
            match spare.pop() {
                Some(chunk) => {
                    debug_assert!(chunk.is_reset() && chunk.data.capacity() >= self.chunk_size);
                    self.allocated_chunks += 1;
                    self.free.push(chunk);
                }
                None => return,
            }
        }
    }

    /// Gives up on everything queued (the guard's flush timed out): returns the lines per
    /// level. The in-flight batch's chunks stay with the writer thread.
    pub(crate) fn abandon(&mut self, mut dropped: impl FnMut(RowId, u64)) -> [u64; LEVELS] {
        let lines = self.queued_lines();
        // The batch in flight is in the writer thread's hands: it counts in the ledger
        // what got out of it, if its write ever returns.
        for chunk in &self.pending {
            for &m in &chunk.ends {
                dropped(mark_row(m), 1);
            }
        }
        for mut chunk in self.pending.drain(..) {
            chunk.reset();
            self.free.push(chunk);
        }
        self.pending_bytes = 0;
        self.pending_lines = [0; LEVELS];
        self.inflight_bytes = 0;
        self.inflight_lines = [0; LEVELS];
        lines
    }
}

/// Packs the `alwaysKeep` lines of `chunks` that `stays` (no pieces among them), in order, from the
/// start of the first chunk on; what is left of each chunk afterwards is only those lines.
/// Chunks emptied by the packing are left empty.
///
/// Works in place: a line moves to an earlier chunk, or earlier in its own chunk, never
/// later (a line always fits where the previous lines' removal left room before it), so
/// nothing is overwritten before it is read.
fn pack(
    chunks: &mut [Chunk],
    scratch: &mut Vec<Span>,
    chunk_size: usize,
    stays: impl Fn(&Span) -> bool,
) {
    if chunks.is_empty() {
        return;
    }
    let mut w = 0;
    let mut fill = 0usize;
    for r in 0..chunks.len() {
        scratch.clear();
        std::mem::swap(scratch, &mut chunks[r].keep);
        chunks[r].lines = [0; LEVELS];
        chunks[r].ends.clear();
        for span in scratch.iter().filter(|s| stays(s)) {
            let (start, len) = (span.start as usize, span.len as usize);
            if fill + len > chunk_size {
                chunks[w].data.truncate(fill);
                w += 1;
                fill = 0;
            }
            if w == r {
                chunks[r].data.copy_within(start..start + len, fill);
            } else {
                let (left, right) = chunks.split_at_mut(r);
                let dst = &mut left[w].data;
                dst.truncate(fill);
                dst.extend_from_slice(&right[0].data[start..start + len]);
            }
            chunks[w].keep.push(Span {
                start: fill as u32,
                ..*span
            });
            chunks[w].lines[usize::from(span.level)] += 1;
            fill += len;
            chunks[w]
                .ends
                .push(mark(fill, usize::from(span.level), span.row));
        }
        if r > w {
            chunks[r].data.clear();
        }
    }
    chunks[w].data.truncate(fill);
    scratch.clear();
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bytes(batch: &[Chunk]) -> Vec<u8> {
        batch.iter().flat_map(|c| c.as_ref().to_vec()).collect()
    }

    fn pending_bytes_of(q: &Queue) -> Vec<u8> {
        q.pending.iter().flat_map(|c| c.as_ref().to_vec()).collect()
    }

    #[test]
    fn reserve_is_kept_for_always_keep_lines() {
        // capacity 4096, normal limit 3072 (25% reserve)
        let mut q = Queue::new(4096, 3072);
        let line = [b'x'; 1024];
        for _ in 0..3 {
            assert_eq!(q.fit(1024, false), Fit::Now);
            q.push(2, RowId::OWN, &line, false);
        }
        assert_eq!(q.fit(1, false), Fit::Later);
        let keep = 1024 - KEEP_RECORD_BYTES;
        assert_eq!(q.fit(keep, true), Fit::Now);
        q.push(4, RowId::OWN, &line[..keep], true);
        assert_eq!(q.fit(1, true), Fit::Later);
        assert_eq!(q.queued_bytes(), 4096);
        assert_eq!(q.queued_lines(), [0, 0, 3, 0, 1]);
        assert_eq!(q.fit(3073, false), Fit::Never);
        assert_eq!(q.fit(4097 - KEEP_RECORD_BYTES, true), Fit::Never);
    }

    /// The rows and lengths [`for_each_line`] gives for `batch`, written or not.
    fn lines_of(batch: &[Chunk], delivered: Option<u64>) -> Vec<(usize, usize, bool)> {
        let mut out = Vec::new();
        for_each_line(batch, delivered, |row, len, whole| {
            out.push((row.index(), len, whole))
        });
        out
    }

    #[test]
    fn each_line_keeps_its_row_and_length_through_pieces_and_a_cut() {
        let capacity = 128 * 1024; // chunks of 4 KiB
        let mut q = Queue::new(capacity, capacity);
        let row = RowId::from_index;
        q.push(2, row(7), b"seven\n", false);
        q.push(2, row(4095), &[b'L'; 10_000], false); // three pieces
        q.push(4, row(9), b"nine!\n", true);
        let mut batch = Vec::new();
        q.take(&mut batch);
        let taken = bytes(&batch).len() as u64;
        assert_eq!(taken, 10_012);
        assert_eq!(
            lines_of(&batch, None),
            [(7, 6, true), (4095, 10_000, true), (9, 6, true)]
        );
        // The output took all but the last byte: the last line is not whole.
        assert_eq!(
            lines_of(&batch, Some(taken - 1)),
            [(7, 6, true), (4095, 10_000, true), (9, 6, false)]
        );
        // It stopped inside the long line.
        assert_eq!(
            lines_of(&batch, Some(5000)),
            [(7, 6, true), (4095, 10_000, false), (9, 6, false)]
        );
    }

    #[test]
    fn evictions_and_abandon_name_the_rows_of_the_lines_they_drop() {
        let mut q = Queue::new(64 * 1024, 48 * 1024);
        let row = RowId::from_index;
        q.push(2, row(10), b"info a\n", false);
        q.push(4, row(11), b"error b\n", true);
        q.push(3, row(12), b"warn c\n", true);
        q.push(2, row(13), b"info d\n", false);
        q.push(4, row(14), b"", true);
        let mut dropped = Vec::new();
        // Below error: the infos and the warning go, whichever chunk they are in.
        assert_eq!(
            q.evict_below(4, |r| dropped.push(r.index())),
            [0, 0, 2, 1, 0]
        );
        assert_eq!(dropped, [10, 12, 13]);
        dropped.clear();
        // The oldest errors: the first goes (a whole chunk wanted).
        assert_eq!(
            q.evict_oldest(4, 1, |r| dropped.push(r.index())),
            [0, 0, 0, 0, 1]
        );
        assert_eq!(dropped, [11]);
        let mut abandoned = Vec::new();
        q.abandon(|r, n| abandoned.push((r.index(), n)));
        assert_eq!(abandoned, [(14, 1)]);
    }

    #[test]
    fn in_flight_bytes_count_until_finished() {
        let mut q = Queue::new(4096, 4096);
        q.push(2, RowId::OWN, &[b'a'; 4000], false);
        let mut batch = Vec::new();
        assert_eq!(q.take(&mut batch), 4000);
        assert_eq!(q.fit(100, true), Fit::Later);
        clear_chunks(&mut batch);
        assert_eq!(q.finish(&mut batch, true), [0, 0, 1, 0, 0]);
        assert!(batch.is_empty());
        assert_eq!(q.fit(4096 - KEEP_RECORD_BYTES, true), Fit::Now);
        assert_eq!(q.peak_bytes(), 4000);
    }

    #[test]
    fn a_batch_is_at_most_a_quarter_of_the_queue_and_never_ends_inside_a_line() {
        let capacity = 1 << 20; // chunks of 32 KiB, batches of 256 KiB
        let mut q = Queue::new(capacity, capacity);
        let chunk = q.chunk_len();
        for _ in 0..(capacity / 2) / 1000 {
            q.push(2, RowId::OWN, &[b'i'; 1000], false);
        }
        let mut batch = Vec::new();
        let taken = q.take(&mut batch);
        assert!(
            taken <= capacity / 4 && taken > capacity / 4 - chunk,
            "{taken}"
        );
        // A line longer than the rest of the batch's room is taken whole.
        let mut rest = Vec::new();
        clear_chunks(&mut batch);
        q.finish(&mut batch, true);
        while q.take(&mut rest) > 0 {
            clear_chunks(&mut rest);
            q.finish(&mut rest, true);
        }
        q.push(2, RowId::OWN, &vec![b'L'; capacity / 4 + 10], false);
        assert_eq!(q.take(&mut batch), capacity / 4 + 10);
        assert_eq!(bytes(&batch).len(), capacity / 4 + 10);
    }

    #[test]
    fn eviction_keeps_the_always_keep_lines_in_order_and_frees_the_rest() {
        let mut q = Queue::new(64 * 1024, 48 * 1024);
        let mut expected = Vec::new();
        for i in 0..400u32 {
            let keep = i % 37 == 0;
            let line = format!("{}-{i:05}\n", if keep { "ERROR" } else { "info" });
            let level = if keep { 4 } else { 2 };
            if q.fit(line.len(), keep) == Fit::Now {
                q.push(level, RowId::OWN, line.as_bytes(), keep);
                if keep {
                    expected.extend_from_slice(line.as_bytes());
                }
            }
        }
        let before = q.queued_lines();
        let evicted = q.evict_below(4, |_| {});
        assert_eq!(evicted[4], 0);
        assert_eq!(evicted[2], before[2]);
        assert_eq!(q.queued_lines(), [0, 0, 0, 0, before[4]]);
        assert_eq!(pending_bytes_of(&q), expected);
        assert_eq!(q.pending_bytes(), expected.len() + 11 * KEEP_RECORD_BYTES);
        assert_eq!(q.pending.len(), 1, "packed into one chunk");
        // Nothing left to evict.
        assert_eq!(q.evict_below(4, |_| {}), [0; LEVELS]);
        // Lines below alwaysKeep are refused until a batch is written; errors still fit.
        assert!(q.refusing_below_keep());
        assert_eq!(q.fit(10, false), Fit::Later);
        assert_eq!(q.fit(10, true), Fit::Now);
        let mut batch = Vec::new();
        q.take(&mut batch);
        clear_chunks(&mut batch);
        q.finish(&mut batch, false);
        assert_eq!(q.fit(10, false), Fit::Later, "a failed write ends nothing");
        q.push(4, RowId::OWN, b"ERROR-again\n", true);
        q.take(&mut batch);
        clear_chunks(&mut batch);
        q.finish(&mut batch, true);
        assert_eq!(q.fit(10, false), Fit::Now);
    }

    #[test]
    fn empty_lines_are_counted_through_an_eviction() {
        let mut q = Queue::new(64 * 1024, 48 * 1024);
        q.push(4, RowId::OWN, b"", true);
        q.push(2, RowId::OWN, b"info\n", false);
        q.push(3, RowId::OWN, b"", true);
        assert_eq!(q.evict_below(3, |_| {}), [0, 0, 1, 0, 0]);
        assert_eq!(q.queued_lines(), [0, 0, 0, 1, 1]);
        let mut batch = Vec::new();
        q.take(&mut batch);
        clear_chunks(&mut batch);
        assert_eq!(q.finish(&mut batch, true), [0, 0, 0, 1, 1]);
    }

    proptest! {
        /// Whatever the interleaving of pushes, batches and evictions: bytes come out in
        /// order, minus exactly the evicted lines below `alwaysKeep`; the per-level
        /// counts add up; the bound holds and no more than `capacity / chunk + 4` chunks
        /// are ever allocated.
        #[test]
        fn bounded_ordered_and_counted(
            ops in proptest::collection::vec((0u8..8, 1usize..9000), 1..400)
        ) {
            let capacity = 16 * 1024;
            let mut q = Queue::new(capacity, capacity * 3 / 4);
            let mut batch = Vec::new();
            // Every line queued (id, keep), and the ids that were evicted.
            let mut queued: Vec<(u32, bool)> = Vec::new();
            let mut next = 0u32;
            let mut written: Vec<u8> = Vec::new();
            let mut written_lines = [0u64; LEVELS];
            let mut evicted_lines = [0u64; LEVELS];
            let line_of = |id: u32, keep: bool, len: usize| {
                let mut l = format!("{id}:{}", if keep { 'E' } else { 'i' }).into_bytes();
                l.resize(len.max(l.len() + 1), b'.');
                *l.last_mut().unwrap_or(&mut 0) = b'\n';
                l
            };
            let mut lens = std::collections::HashMap::new();
            for (op, len) in ops {
                match op {
                    0 | 1 => {
                        let keep = op == 1;
                        let line = line_of(next, keep, len);
                        if q.fit(line.len(), keep) == Fit::Now {
                            q.push(if keep { 4 } else { 2 }, RowId::OWN, &line, keep);
                            queued.push((next, keep));
                            lens.insert(next, line.len());
                            next += 1;
                        }
                    }
                    2 => {
                        if batch.is_empty() && q.pending_bytes() > 0 {
                            q.take(&mut batch);
                        }
                    }
                    3 => {
                        written.extend_from_slice(&bytes(&batch));
                        clear_chunks(&mut batch);
                        add(&mut written_lines, q.finish(&mut batch, true));
                    }
                    4 => add(&mut evicted_lines, q.evict_below(4, |_| {})),
                    6 | 7 => {
                        // The fast path: appends exactly when the line fits and the
                        // last chunk has room for it, and otherwise changes nothing.
                        let keep = op == 7;
                        let line = line_of(next, keep, len);
                        let fits = q.fit(line.len(), keep) == Fit::Now;
                        let before = (q.queued_bytes(), q.queued_lines(), q.allocated_chunks());
                        let level = if keep { 4 } else { 2 };
                        let appended = q.try_append(level, RowId::OWN, &line, keep);
                        prop_assert!(!appended || fits);
                        if !appended {
                            prop_assert_eq!(
                                before,
                                (q.queued_bytes(), q.queued_lines(), q.allocated_chunks())
                            );
                            if fits {
                                q.push(level, RowId::OWN, &line, keep);
                            }
                        }
                        if appended || fits {
                            queued.push((next, keep));
                            lens.insert(next, line.len());
                            next += 1;
                        }
                    }
                    _ => {
                        let mut spare: Vec<Chunk> =
                            (0..q.spare_wanted()).map(|_| fresh_chunk(q.chunk_len())).collect();
                        q.add_spare(&mut spare);
                        prop_assert!(spare.is_empty());
                    }
                }
                prop_assert!(q.queued_bytes() <= capacity);
                prop_assert!(q.allocated_chunks() <= q.max_chunks());
                let mut total = written_lines;
                add(&mut total, evicted_lines);
                add(&mut total, q.queued_lines());
                let keeps = queued.iter().filter(|(_, k)| *k).count() as u64;
                prop_assert_eq!(total, [0, 0, queued.len() as u64 - keeps, 0, keeps]);
                prop_assert_eq!(evicted_lines[4], 0);
            }
            written.extend_from_slice(&bytes(&batch));
            clear_chunks(&mut batch);
            add(&mut written_lines, q.finish(&mut batch, true));
            while q.take(&mut batch) > 0 {
                written.extend_from_slice(&bytes(&batch));
                clear_chunks(&mut batch);
                add(&mut written_lines, q.finish(&mut batch, true));
            }
            // What came out is the queued lines in order, each whole, every `alwaysKeep`
            // line among them, and as many lines below it as were not evicted.
            let text = String::from_utf8(written).unwrap_or_default();
            let ids: Vec<(u32, bool)> = text
                .split_terminator('\n')
                .map(|l| {
                    let (id, rest) = l.split_once(':').unwrap_or(("x", ""));
                    (id.parse().unwrap_or(u32::MAX), rest.starts_with('E'))
                })
                .collect();
            let mut it = queued.iter();
            for got in &ids {
                prop_assert!(it.any(|q| q == got), "{:?} out of order", got);
            }
            let keeps: Vec<_> = queued.iter().filter(|(_, k)| *k).collect();
            let got_keeps: Vec<_> = ids.iter().filter(|(_, k)| *k).collect();
            prop_assert_eq!(keeps, got_keeps);
            prop_assert_eq!(ids.len() as u64, written_lines.iter().sum::<u64>());
            prop_assert_eq!(
                written_lines[2] + evicted_lines[2],
                queued.iter().filter(|(_, k)| !*k).count() as u64
            );
        }

        /// Whatever the interleaving of pushes (three levels, two of them `alwaysKeep`),
        /// evictions of lower levels and of older lines, batches the output takes whole or
        /// only in part (cut anywhere, then failing), and a shutdown that gives up on the
        /// rest: every line pushed is counted exactly once, as written (and then the
        /// reader has it, whole) or as dropped, per level; the reader's own count of the
        /// whole lines it got matches the written count per level; no line is torn into
        /// another.
        #[test]
        fn each_line_is_written_or_dropped_exactly_once(
            ops in proptest::collection::vec((0u8..24, 0usize..600, any::<proptest::sample::Index>()), 1..400)
        ) {
            let capacity = 16 * 1024;
            let mut q = Queue::new(capacity, capacity * 3 / 4);
            let mut batch = Vec::new();
            let mut expected = std::collections::HashMap::new();
            let mut next = 0u32;
            let mut pushed = [0u64; LEVELS];
            let mut written = [0u64; LEVELS];
            let mut dropped = [0u64; LEVELS];
            let mut reader: Vec<u8> = Vec::new();
            let mut torn = false;
            for (op, len, at) in ops {
                match op {
                    0..=2 | 15..=22 => {
                        let level = 2 + usize::from(op % 3);
                        let keep = level >= 3;
                        let mut line = format!("{next}:{level}:").into_bytes();
                        line.resize(line.len() + len, b'a' + (next % 26) as u8);
                        line.push(b'\n');
                        if q.fit(line.len(), keep) == Fit::Now {
                            q.push(level, RowId::OWN, &line, keep);
                            pushed[level] += 1;
                            expected.insert(next, line);
                            next += 1;
                        }
                    }
                    3 => add(&mut dropped, q.evict_below(3 + at.index(2), |_| {})),
                    4 => {
                        let level = 3 + at.index(2);
                        add(&mut dropped, q.evict_oldest(level, len * 4, |_| {}));
                    }
                    5 | 6 => {
                        if batch.is_empty() && q.pending_bytes() > 0 {
                            q.take(&mut batch);
                        }
                    }
                    7..=10 => deliver(&mut batch, &mut q, None, &mut written, &mut dropped, &mut reader, &mut torn),
                    11..=14 => deliver(&mut batch, &mut q, Some(at), &mut written, &mut dropped, &mut reader, &mut torn),
                    _ => {
                        // Shutdown: what is in flight is cut, the rest given up.
                        if !batch.is_empty() {
                            deliver(&mut batch, &mut q, Some(at), &mut written, &mut dropped, &mut reader, &mut torn);
                        }
                        add(&mut dropped, q.abandon(|_, _| {}));
                        break;
                    }
                }
                let mut total = written;
                add(&mut total, dropped);
                add(&mut total, q.queued_lines());
                prop_assert_eq!(total, pushed);
            }
            // The reader's own count: whole lines, each exactly as pushed, once.
            let mut seen = std::collections::HashSet::new();
            let mut got = [0u64; LEVELS];
            for line in reader.split_inclusive(|&b| b == b'\n') {
                let mut parts = line.splitn(3, |&b| b == b':');
                let id = parts.next().and_then(|p| std::str::from_utf8(p).ok()?.parse::<u32>().ok());
                if let Some(id) = id {
                    if expected.get(&id).is_some_and(|e| e.as_slice() == line) {
                        prop_assert!(seen.insert(id), "line {} delivered twice", id);
                        got[usize::from(line[line.iter().position(|&b| b == b':').unwrap_or(0) + 1] - b'0')] += 1;
                    }
                }
            }
            let mut total = written;
            add(&mut total, dropped);
            add(&mut total, q.queued_lines());
            prop_assert_eq!(total, pushed);
            prop_assert_eq!(got, written);
        }
    }

    /// What the output takes of the batch in flight, all of it or a prefix (`cut`), as
    /// the writer thread counts it; the reader gets those bytes, after the writer's
    /// [`TORN_END`] if the previous write stopped inside a line.
    fn deliver(
        batch: &mut Vec<Chunk>,
        q: &mut Queue,
        cut: Option<proptest::sample::Index>,
        written: &mut [u64; LEVELS],
        dropped: &mut [u64; LEVELS],
        reader: &mut Vec<u8>,
        torn: &mut bool,
    ) {
        let all = bytes(batch);
        let n = cut.map_or(all.len(), |c| c.index(all.len() + 1));
        if *torn && n > 0 {
            reader.extend_from_slice(TORN_END);
        }
        reader.extend_from_slice(&all[..n]);
        let split = split_delivered(batch, n as u64);
        if n > 0 {
            *torn = split.torn;
        }
        add(written, split.written);
        add(dropped, split.lost);
        clear_chunks(batch);
        let lines = q.finish(batch, cut.is_none());
        let mut both = split.written;
        add(&mut both, split.lost);
        assert_eq!(lines, both);
        if n == all.len() {
            assert_eq!(split.lost, [0; LEVELS]);
        }
    }
}
