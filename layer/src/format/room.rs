//! Room in a line's buffer, checked once for several fixed-size stores.
//!
//! # The unsafe code
//!
//! `Vec::extend_from_slice` checks the capacity at every store, and the check's way out
//! calls the allocator and comes back: every function that stores a value then saves
//! registers for that call, though it never happens once the thread's buffer has grown.
//! [`Room`] checks the capacity once, for everything a value stores, and then stores
//! into the spare capacity without a call. Two `unsafe` blocks do that, each with its
//! `SAFETY:`; `room_stores_at_its_edges` exercises them at the exact end of the room.

#![allow(unsafe_code)]

use super::escape::Short;

/// Room for a known number of bytes after a buffer's end (see the module).
pub(crate) struct Room<'a> {
    buf: &'a mut Vec<u8>,
    /// The buffer's length so far: every byte below it is written.
    len: usize,
    /// Where the room ends (at most the buffer's capacity).
    end: usize,
}

impl<'a> Room<'a> {
    /// Room for `need` bytes after `buf`'s end, if its capacity has it (no allocation).
    #[inline(always)]
    pub(crate) fn take(buf: &'a mut Vec<u8>, need: usize) -> Option<Self> {
        let len = buf.len();
        if buf.capacity() - len < need {
            return None;
        }
        Some(Room {
            buf,
            len,
            end: len + need,
        })
    }

    /// Stores `bytes` and keeps the first `keep` of them (at most `M`); nothing when
    /// they do not fit in the room (a caller's mistake: the room is taken for all that
    /// is stored in it).
    #[inline(always)]
    pub(crate) fn put<const M: usize>(&mut self, bytes: [u8; M], keep: usize) {
        if M > self.end - self.len || keep > M {
            debug_assert!(false, "{M} bytes past the room");
            return;
        }
        // SAFETY: `len + M <= end <= capacity` (checked above and in `take`, and `len`
        // only grows by `keep <= M`): the `M` bytes are inside the buffer's allocation,
        // and the unaligned write needs no alignment.
        unsafe {
            self.buf
                .as_mut_ptr()
                .add(self.len)
                .cast::<[u8; M]>()
                .write_unaligned(bytes);
        }
        self.len += keep;
    }
}

impl Room<'_> {
    /// Stores a short value (16 bytes of room).
    #[inline(always)]
    pub(crate) fn put_short(&mut self, short: &Short) {
        self.put(short.first, short.keep);
        self.put(short.last, short.keep_last);
    }
}

impl Drop for Room<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        // SAFETY: `len <= end <= capacity`, and every byte below `len` is written: the
        // buffer's own, then each `put`'s kept bytes, one after the other.
        unsafe { self.buf.set_len(self.len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_stores_at_its_edges() {
        let mut buf = Vec::with_capacity(16);
        buf.extend_from_slice(b"0123456789");
        // Exactly the rest of the capacity.
        let spare = buf.capacity() - buf.len();
        assert!(Room::take(&mut buf, spare + 1).is_none());
        {
            let mut room = Room::take(&mut buf, 6).unwrap();
            room.put(*b"abcd", 2);
            room.put(*b"wxyz", 4);
        }
        assert_eq!(buf, b"0123456789abwxyz"[..16]);
        // Nothing taken, nothing changed.
        {
            let _room = Room::take(&mut buf, 0).unwrap();
        }
        assert_eq!(buf.len(), 16);
    }
}
