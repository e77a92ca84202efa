//! The writer thread's end: an unbuffered file descriptor and a vectored write loop, and
//! the size-based rotation of a file.
//!
//! # Platforms
//!
//! Two ways to write, chosen when the output is opened
//! ([`WriterConfig::plain_writes`](super::WriterConfig::plain_writes)):
//!
//! - **Linux** (the default there): `pwritev2` with `RWF_NOWAIT` on anything but a
//!   regular file, so that the writer thread never blocks inside a write and waits for
//!   writability in `poll`, where it sees a stop; and `fallocate` ahead of a regular
//!   file's end ([`Prealloc`]). Both are gated on `target_os = "linux"`.
//! - **Plain** (every other platform, and Linux when asked): `write_vectored` through
//!   the standard library, and no preallocation. A write may block behind a stalled
//!   reader; the worker marks such writes (`Destination::may_wait_for_reader`) so that
//!   the guard bounds its wait for them. `poll` still serves a descriptor given in
//!   non-blocking mode on Unix; elsewhere (Windows) a write that would block is tried
//!   again after a pause.
//!
//! The plain path runs on Linux in the tests
//! (`tests/plain_writes_deliver_every_line_and_stop_in_time.rs`), so it is not code
//! that only other platforms compile.

use std::fs::{File, OpenOptions};
use std::io::{self, ErrorKind, IoSlice, IsTerminal, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::config::{Output, Rotation, WriterError};

/// At most this many slices per `writev` (Linux's `IOV_MAX`).
const MAX_IOV: usize = 1024;

/// How long one wait for writability lasts before the stop flag is checked again.
const POLL_SLICE: Duration = Duration::from_millis(50);

/// Where the writer thread writes: a plain descriptor, or a file it rotates.
#[derive(Debug)]
pub(crate) enum Destination {
    Plain(Appender),
    Rotating(RotatingFile),
}

/// A file rotated by size (see [`Rotation`]), with the size of its current file.
#[derive(Debug)]
pub(crate) struct RotatingFile {
    rotation: Rotation,
    out: Appender,
    size: u64,
    /// The files are written with plain writes.
    plain: bool,
}

/// A descriptor the writer appends to, with disk kept allocated ahead of its end (see
/// [`Prealloc`]). Dropped, a file the writer opened is left without blocks past its
/// end; a descriptor it was given (stdout, stderr, `Output::Fd`) may be shared with
/// other writers, so it is not truncated: up to [`PREALLOC_STEP`] past its end stays
/// allocated until the file is truncated or removed, as with journald's files.
#[derive(Debug)]
pub(crate) struct Appender {
    file: File,
    prealloc: Prealloc,
    /// Opened by the writer (a file output), rather than a descriptor it was given.
    owned: bool,
    /// Writes ask the kernel not to wait (`pwritev2` with `RWF_NOWAIT`): on Linux, on
    /// anything but a regular file, unless writes are plain, until the kernel refuses
    /// the flag. See [`write_some`].
    nowait: bool,
    /// A regular file: a write may take long (the disk) but always ends.
    regular: bool,
    /// The kernel took a write with `RWF_NOWAIT` (until then it may still refuse it).
    nowait_known: bool,
    /// Plain writes only (see [`WriterConfig::plain_writes`](super::WriterConfig::plain_writes)).
    plain: bool,
    /// A terminal: with plain writes, written to for the last words (it does not wait
    /// for a reader the way a pipe does).
    terminal: bool,
}

impl Appender {
    fn new(file: File, owned: bool, plain: bool) -> Self {
        let plain = plain || !cfg!(target_os = "linux");
        let regular = file.metadata().is_ok_and(|m| m.file_type().is_file());
        Appender {
            prealloc: Prealloc::new(&file, plain),
            terminal: plain && !regular && file.is_terminal(),
            file,
            owned,
            nowait: !regular && !plain,
            regular,
            nowait_known: false,
            plain,
        }
    }

    /// Whether a write may wait for a reader for as long as it likes: plain writes to
    /// anything but a regular file (a kernel that refused `RWF_NOWAIT`).
    fn may_wait_for_reader(&self) -> bool {
        let proven_nowait = self.nowait && self.nowait_known;
        !self.regular && !proven_nowait
    }

    /// Whether one line may be written as last words, when nothing may wait for a
    /// reader any longer: with plain writes, only to a regular file or a terminal; else
    /// as [`write_some`] does (which does not wait where the kernel can say it would).
    fn takes_last_words(&self) -> bool {
        !self.plain || self.regular || self.terminal
    }
}

impl Destination {
    /// Whether the next write may wait for a reader without end (see
    /// [`Appender::may_wait_for_reader`]); a rotating output is a regular file.
    pub(crate) fn may_wait_for_reader(&self) -> bool {
        match self {
            Destination::Plain(a) => a.may_wait_for_reader(),
            Destination::Rotating(_) => false,
        }
    }
}

/// One write of `slices` to `out`. On a pipe, socket or terminal it never waits for the
/// reader (`RWF_NOWAIT`: the kernel takes what fits and says `EAGAIN` when nothing
/// does, without touching the descriptor's shared flags), so the writer thread waits
/// only in [`wait_writable`], where it sees a stop: it always knows exactly which bytes
/// the output took, and never has a write half done. A kernel that refuses the flag
/// (before Linux 4.14, or a file type without it) gets plain, blocking writes from then
/// on; regular files always do (they do not wait for a reader).
fn write_some(out: &mut Appender, slices: &[IoSlice<'_>]) -> io::Result<usize> {
    #[cfg(target_os = "linux")]
    if out.nowait {
        match rustix::io::pwritev2(
            &out.file,
            slices,
            u64::MAX,
            rustix::io::ReadWriteFlags::NOWAIT,
        ) {
            Err(
                rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS,
            ) => {
                out.nowait = false;
            }
            other => {
                out.nowait_known = true;
                return other.map_err(io::Error::from);
            }
        }
    }
    out.file.write_vectored(slices)
}

/// Writes `line` to `out` once, without waiting for the reader where the kernel allows
/// (see [`write_some`]), and only if it goes whole; for the last words of a writer.
pub(crate) fn write_line_nowait(out: &mut Destination, line: &[u8]) -> bool {
    let out = match out {
        Destination::Plain(a) => a,
        Destination::Rotating(r) => &mut r.out,
    };
    out.takes_last_words()
        && matches!(write_some(out, &[IoSlice::new(line)]), Ok(n) if n == line.len())
}

/// Writes `line` to this process's stderr, as [`write_line_nowait`] does (with `plain`
/// writes, only to a regular file or a terminal), and only if it goes whole.
pub(crate) fn write_stderr_nowait(line: &[u8], plain: bool) -> bool {
    let Ok(file) = duplicate(StdStream::Stderr) else {
        return false;
    };
    let mut out = Appender::new(file, false, plain);
    out.takes_last_words()
        && matches!(write_some(&mut out, &[IoSlice::new(line)]), Ok(n) if n == line.len())
}

/// One of the process's standard streams.
#[derive(Debug, Clone, Copy)]
enum StdStream {
    Stdout,
    Stderr,
}

/// A duplicate of the stream's descriptor, so that the writer does not go through (or
/// lock) Rust's own buffered `Stdout`.
#[cfg(unix)]
fn duplicate(stream: StdStream) -> io::Result<File> {
    use std::os::fd::AsFd;
    let fd = match stream {
        StdStream::Stdout => io::stdout().as_fd().try_clone_to_owned()?,
        StdStream::Stderr => io::stderr().as_fd().try_clone_to_owned()?,
    };
    Ok(File::from(fd))
}

/// A duplicate of the stream's handle (bytes go to it as they are: a console shows them
/// in its code page).
#[cfg(windows)]
fn duplicate(stream: StdStream) -> io::Result<File> {
    use std::os::windows::io::AsHandle;
    let handle = match stream {
        StdStream::Stdout => io::stdout().as_handle().try_clone_to_owned()?,
        StdStream::Stderr => io::stderr().as_handle().try_clone_to_owned()?,
    };
    Ok(File::from(handle))
}

impl Drop for Appender {
    fn drop(&mut self) {
        if self.owned {
            self.prealloc.trim(&self.file);
        }
    }
}

/// How far ahead of a regular file's end disk blocks are kept allocated.
pub(crate) const PREALLOC_STEP: u64 = 8 << 20;

/// Disk blocks kept allocated ahead of a regular file's end (`fallocate` with
/// `FALLOC_FL_KEEP_SIZE`, in [`PREALLOC_STEP`]s, as journald grows its files), so that
/// appending does not pay the filesystem's delayed allocation block by block: on ext4
/// that takes about a quarter off the kernel's cost of a buffered append (a loop writing
/// 512 MiB in 200–400 KB writes: 227–229 ns/KiB against 290–347). The file's size is
/// unchanged, so readers see only what was written. Off for anything that is not a
/// regular file, and for good after the filesystem refuses once (no `fallocate`, or no
/// space: appending then goes on as usual and reports its own errors).
#[derive(Debug)]
pub(crate) struct Prealloc {
    on: bool,
    /// The end of the allocation asked for so far.
    end: u64,
    /// The file's size at the last look plus what was appended since: the file is only
    /// looked at again when this would pass `end` (other writers sharing the file only
    /// make it look later than it could).
    appended: u64,
}

impl Prealloc {
    /// On for a regular file, on Linux, unless writes are `plain`.
    fn new(file: &File, plain: bool) -> Self {
        Prealloc {
            on: !plain && file.metadata().is_ok_and(|m| m.file_type().is_file()),
            end: 0,
            appended: 0,
        }
    }

    /// Before `len` more bytes are appended to `file`: extends the allocation if they
    /// would pass its end.
    fn ahead(&mut self, file: &File, len: u64) {
        if !self.on {
            return;
        }
        if self.appended + len <= self.end {
            self.appended += len;
            return;
        }
        let Ok(size) = file.metadata().map(|m| m.len()) else {
            self.on = false;
            return;
        };
        self.appended = size + len;
        if self.appended <= self.end {
            return;
        }
        let want = PREALLOC_STEP.max(len);
        if allocate_ahead(file, size, want) {
            self.end = size + want;
        } else {
            self.on = false;
        }
    }

    /// Gives back the blocks allocated past `file`'s end (truncating it to its own size).
    fn trim(&mut self, file: &File) {
        if self.end > 0 {
            if let Ok(m) = file.metadata() {
                let _ = file.set_len(m.len());
            }
            self.end = 0;
        }
    }
}

/// Allocates `len` bytes of disk from `offset`, the file's size unchanged.
#[cfg(target_os = "linux")]
fn allocate_ahead(file: &File, offset: u64, len: u64) -> bool {
    rustix::fs::fallocate(file, rustix::fs::FallocateFlags::KEEP_SIZE, offset, len).is_ok()
}

/// No allocation ahead of a file's end off Linux ([`Prealloc`] is off there).
#[cfg(not(target_os = "linux"))]
fn allocate_ahead(_: &File, _: u64, _: u64) -> bool {
    false
}

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

/// Opens the output, for `plain` writes or not (see [`Appender`]). Stdout and stderr
/// are duplicated so that the writer does not go through (or lock) Rust's own buffered
/// `Stdout`.
pub(crate) fn open(output: Output, plain: bool) -> Result<Destination, WriterError> {
    let described = output.to_string();
    let given = |file: File| Destination::Plain(Appender::new(file, false, plain));
    let opened = match output {
        Output::Stdout => duplicate(StdStream::Stdout).map(given),
        Output::Stderr => duplicate(StdStream::Stderr).map(given),
        Output::File(path) => {
            open_append(&path).map(|f| Destination::Plain(Appender::new(f, true, plain)))
        }
        Output::RotatingFile(rotation) => open_append(&rotation.path).and_then(|file| {
            let size = file.metadata()?.len();
            Ok(Destination::Rotating(RotatingFile {
                rotation,
                out: Appender::new(file, true, plain),
                size,
                plain,
            }))
        }),
        #[cfg(unix)]
        Output::Fd(fd) => Ok(given(File::from(fd))),
    };
    opened.map_err(|source| WriterError::Open {
        output: described,
        source,
    })
}

/// What one batch write did.
#[derive(Debug, Default)]
pub(crate) struct WriteOutcome {
    /// Bytes the output took.
    pub(crate) bytes: u64,
    /// `write`/`writev` calls made.
    pub(crate) syscalls: u64,
    /// The error that ended the batch early, if any.
    pub(crate) error: Option<io::Error>,
    /// Files rotated.
    pub(crate) rotations: u64,
    /// A rotation that failed (the batch went on into the file at hand).
    pub(crate) rotation_error: Option<io::Error>,
    /// The batch ended early because the writer was told to stop while the output was
    /// not writable (then `error` says so too).
    pub(crate) stopped: bool,
}

/// Writes `head` then every chunk of `chunks`, in as few `writev` calls as the output
/// allows, retrying `EINTR`, waiting for writability on `EAGAIN`, and giving up on any
/// other error (or when `stop` is set while waiting for writability). A rotating file
/// is rotated between lines, wherever the next line would not fit.
pub(crate) fn write_batch<C: AsRef<[u8]>>(
    out: &mut Destination,
    head: &[u8],
    chunks: &[C],
    stop: &AtomicBool,
) -> WriteOutcome {
    let stream = Stream::new(head, chunks);
    let mut outcome = WriteOutcome::default();
    match out {
        Destination::Plain(out) => {
            write_range(out, &stream, 0, stream.len, stop, &mut outcome);
        }
        Destination::Rotating(r) => r.write(&stream, stop, &mut outcome),
    }
    outcome
}

/// A batch as one run of bytes over its segments (the head, then the chunks).
struct Stream<'a> {
    segments: Vec<&'a [u8]>,
    /// Where each segment starts in the run.
    starts: Vec<u64>,
    len: u64,
}

impl<'a> Stream<'a> {
    fn new<C: AsRef<[u8]>>(head: &'a [u8], chunks: &'a [C]) -> Self {
        let mut segments = Vec::with_capacity(chunks.len() + 1);
        let mut starts = Vec::with_capacity(chunks.len() + 1);
        let mut len = 0u64;
        for s in std::iter::once(head).chain(chunks.iter().map(AsRef::as_ref)) {
            if !s.is_empty() {
                segments.push(s);
                starts.push(len);
                len += s.len() as u64;
            }
        }
        Stream {
            segments,
            starts,
            len,
        }
    }

    /// The segment holding byte `at` (`at < len`), and `at`'s offset in it.
    fn locate(&self, at: u64) -> (usize, usize) {
        let seg = self.starts.partition_point(|&s| s <= at) - 1;
        (seg, (at - self.starts[seg]) as usize)
    }

    /// The end of the last whole line in `from..to` (just after its `\n`), if any.
    fn last_line_end(&self, from: u64, to: u64) -> Option<u64> {
        if to <= from {
            return None;
        }
        let (mut seg, _) = self.locate(to - 1);
        loop {
            let start = self.starts[seg];
            let lo = from.max(start);
            let bytes = &self.segments[seg][(lo - start) as usize
                ..(to.min(start + self.segments[seg].len() as u64) - start) as usize];
            if let Some(i) = bytes.iter().rposition(|&b| b == b'\n') {
                return Some(lo + i as u64 + 1);
            }
            if lo == from || seg == 0 {
                return None;
            }
            seg -= 1;
        }
    }

    /// The end of the first whole line starting at `from` (just after its `\n`), or the
    /// end of the run if no `\n` follows.
    fn first_line_end(&self, from: u64) -> u64 {
        if from >= self.len {
            return self.len;
        }
        let (mut seg, mut off) = self.locate(from);
        while seg < self.segments.len() {
            if let Some(i) = self.segments[seg][off..].iter().position(|&b| b == b'\n') {
                return self.starts[seg] + (off + i) as u64 + 1;
            }
            seg += 1;
            off = 0;
        }
        self.len
    }
}

/// Where the next piece of a rotating file's batch ends: as many whole lines from `from`
/// as fit in `room` bytes; if none does, `None` when the file holds something (rotate
/// first), else the first line, whatever its length (a line longer than the limit gets a
/// file of its own).
fn next_cut(stream: &Stream<'_>, from: u64, room: u64, file_empty: bool) -> Option<u64> {
    let to = from.saturating_add(room).min(stream.len);
    match stream.last_line_end(from, to) {
        Some(end) => Some(end),
        None if file_empty => Some(stream.first_line_end(from)),
        None => None,
    }
}

impl RotatingFile {
    fn write(&mut self, stream: &Stream<'_>, stop: &AtomicBool, outcome: &mut WriteOutcome) {
        let mut at = 0u64;
        // After a failed rotation the rest of the batch goes into the file at hand.
        let mut can_rotate = true;
        while at < stream.len {
            let room = if can_rotate {
                self.rotation.max_bytes.saturating_sub(self.size)
            } else {
                u64::MAX
            };
            let Some(end) = next_cut(stream, at, room, self.size == 0) else {
                match self.rotate() {
                    Ok(()) => {
                        outcome.rotations += 1;
                        // A new file that is not empty is another writer's: rather than
                        // rotate it away at once, finish the batch in it.
                        can_rotate = self.size == 0;
                    }
                    Err(e) => {
                        outcome.rotation_error = Some(e);
                        can_rotate = false;
                    }
                }
                continue;
            };
            let before = outcome.bytes;
            let done = write_range(&mut self.out, stream, at, end, stop, outcome);
            self.size += outcome.bytes - before;
            if !done {
                return;
            }
            at = end;
        }
    }

    /// Shifts the rotated files up by one (the oldest kept is replaced), moves the current
    /// file to `path.1` (or removes it when none are kept) and starts a new one. On an
    /// error, the file at hand stays the one written to.
    fn rotate(&mut self) -> io::Result<()> {
        let r = &self.rotation;
        if r.keep == 0 {
            match std::fs::remove_file(&r.path) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        } else {
            for n in (1..r.keep).rev() {
                match std::fs::rename(r.rotated(n), r.rotated(n + 1)) {
                    Ok(()) => {}
                    Err(e) if e.kind() == ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
            std::fs::rename(&r.path, r.rotated(1))?;
        }
        // Until this succeeds, lines go on into the renamed file through the open one.
        // The file set aside is trimmed as its appender drops.
        self.out = Appender::new(open_append(&r.path)?, true, self.plain);
        self.size = self.out.file.metadata()?.len();
        Ok(())
    }
}

/// Writes the bytes `from..to` of `stream` to `out` (its allocation extended ahead of
/// them first); false if an error ended it (in `outcome.error`).
fn write_range(
    out: &mut Appender,
    stream: &Stream<'_>,
    from: u64,
    to: u64,
    stop: &AtomicBool,
    outcome: &mut WriteOutcome,
) -> bool {
    out.prealloc.ahead(&out.file, to - from);
    let mut at = from;
    let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(stream.segments.len().min(MAX_IOV));
    while at < to {
        slices.clear();
        let (first, off) = stream.locate(at);
        for (i, s) in stream.segments[first..].iter().enumerate() {
            if slices.len() == MAX_IOV {
                break;
            }
            let start = stream.starts[first + i];
            if start >= to {
                break;
            }
            let lo = if i == 0 { off } else { 0 };
            let hi = (to - start).min(s.len() as u64) as usize;
            slices.push(IoSlice::new(&s[lo..hi]));
        }
        outcome.syscalls += 1;
        match write_some(out, &slices) {
            Ok(0) => {
                outcome.error = Some(io::Error::new(
                    ErrorKind::WriteZero,
                    "the output accepted no bytes",
                ));
                return false;
            }
            Ok(n) => {
                outcome.bytes += n as u64;
                at += n as u64;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if let Err(e) = wait_writable(&out.file, stop) {
                    outcome.stopped = stop.load(Ordering::Acquire);
                    outcome.error = Some(e);
                    return false;
                }
            }
            Err(e) => {
                outcome.error = Some(e);
                return false;
            }
        }
    }
    true
}

/// Waits until `out` is writable (or has an error condition, which the next write will
/// report), checking `stop` every 50 ms.
fn wait_writable(out: &File, stop: &AtomicBool) -> io::Result<()> {
    loop {
        if stop.load(Ordering::Acquire) {
            return Err(io::Error::new(
                ErrorKind::TimedOut,
                "writer stopped while the output was not writable",
            ));
        }
        if poll_writable(out)? {
            return Ok(());
        }
    }
}

/// Waits up to [`POLL_SLICE`] for `out` to be writable: whether it is (an interrupted
/// wait says no).
#[cfg(unix)]
fn poll_writable(out: &File) -> io::Result<bool> {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    const SLICE: Timespec = Timespec {
        tv_sec: 0,
        tv_nsec: POLL_SLICE.subsec_nanos() as _,
    };
    let mut fds = [PollFd::new(out, PollFlags::OUT)];
    match poll(&mut fds, Some(&SLICE)) {
        Ok(n) => Ok(n > 0),
        Err(rustix::io::Errno::INTR) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Without `poll` for the output (Windows): a pause of [`POLL_SLICE`], then the write is
/// tried again.
#[cfg(not(unix))]
fn poll_writable(_: &File) -> io::Result<bool> {
    std::thread::sleep(POLL_SLICE);
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::io::{Read, Seek};

    /// The files a rotating file's cuts would make of `stream`, the first continuing a
    /// file of `initial` bytes: each file's size before and the bytes it gets.
    fn files(stream: &Stream<'_>, max: u64, initial: u64) -> Vec<(u64, Vec<u8>)> {
        let mut out = vec![(initial, Vec::new())];
        let mut at = 0;
        while at < stream.len {
            let (start, got) = out.last().map(|(s, g)| (*s, g.len() as u64)).unwrap();
            let size = start + got;
            match next_cut(stream, at, max.saturating_sub(size), size == 0) {
                Some(end) => {
                    assert!(end > at, "a cut makes progress");
                    let last = out.last_mut().unwrap();
                    for i in at..end {
                        let (seg, off) = stream.locate(i);
                        last.1.push(stream.segments[seg][off]);
                    }
                    at = end;
                }
                None => {
                    assert!(size > 0, "an empty file always takes a line");
                    out.push((0, Vec::new()));
                }
            }
        }
        out
    }

    proptest! {
        #[test]
        fn cuts_keep_lines_whole_and_files_within_the_limit(
            lines in proptest::collection::vec(1usize..300, 0..60),
            head in 0usize..120,
            cuts in proptest::collection::vec(any::<proptest::sample::Index>(), 0..8),
            max in 64u64..2000,
            initial in 0u64..2100,
        ) {
            // Lines of the given lengths (the last byte `\n`), chunked at random places.
            let mut bytes = Vec::new();
            for (i, len) in lines.iter().enumerate() {
                bytes.extend(std::iter::repeat_n(b'a' + (i % 26) as u8, len - 1));
                bytes.push(b'\n');
            }
            let head_line: Vec<u8> = if head > 0 {
                let mut h = vec![b'H'; head - 1];
                h.push(b'\n');
                h
            } else {
                Vec::new()
            };
            let mut at: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len() + 1)).collect();
            at.push(0);
            at.push(bytes.len());
            at.sort_unstable();
            let chunks: Vec<Vec<u8>> = at.windows(2).map(|w| bytes[w[0]..w[1]].to_vec()).collect();
            let stream = Stream::new(&head_line, &chunks);
            let made = files(&stream, max, initial);
            let mut all = head_line.clone();
            all.extend_from_slice(&bytes);
            let joined: Vec<u8> = made.iter().flat_map(|(_, b)| b.clone()).collect();
            prop_assert_eq!(&joined, &all);
            for (i, (before, got)) in made.iter().enumerate() {
                if i > 0 {
                    prop_assert_eq!(*before, 0);
                    prop_assert!(!got.is_empty(), "no empty file is left behind");
                }
                prop_assert!(got.is_empty() || got.ends_with(b"\n"), "a file ends at a line end");
                let one_line = got.iter().filter(|&&b| b == b'\n').count() == 1;
                prop_assert!(
                    before + got.len() as u64 <= max || (one_line && *before == 0) || got.is_empty(),
                    "file {} of {}: {} + {} bytes, limit {}", i, made.len(), before, got.len(), max
                );
            }
        }
    }

    #[test]
    fn writes_head_then_chunks_in_order() {
        let path = std::env::temp_dir().join(format!("writer-output-{}.log", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let mut f = open(Output::File(path.clone()), false).unwrap();
        let chunks = vec![
            b"one\n".to_vec(),
            Vec::new(),
            b"two\nthr".to_vec(),
            b"ee\n".to_vec(),
        ];
        let stop = AtomicBool::new(false);
        let outcome = write_batch(&mut f, b"head\n", &chunks, &stop);
        assert!(outcome.error.is_none());
        assert_eq!(outcome.bytes, 19);
        assert_eq!(outcome.syscalls, 1);
        let mut back = String::new();
        let mut f = File::open(&path).unwrap();
        f.rewind().unwrap();
        f.read_to_string(&mut back).unwrap();
        assert_eq!(back, "head\none\ntwo\nthree\n");
        std::fs::remove_file(path).unwrap();
    }
}
