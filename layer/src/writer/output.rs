//! The writer thread's end: an unbuffered file descriptor and a vectored write loop.

use std::fs::{File, OpenOptions};
use std::io::{self, ErrorKind, IoSlice, Write};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::event::{poll, PollFd, PollFlags, Timespec};

use super::config::{Output, WriterError};

/// At most this many slices per `writev` (Linux's `IOV_MAX`).
const MAX_IOV: usize = 1024;

/// How long one wait for writability lasts before the stop flag is checked again.
const POLL_SLICE: Timespec = Timespec {
    tv_sec: 0,
    tv_nsec: 50_000_000,
};

/// Opens the output as a plain file descriptor. Stdout and stderr are duplicated so that
/// the writer does not go through (or lock) Rust's own buffered `Stdout`.
pub(crate) fn open(output: Output) -> Result<File, WriterError> {
    let described = output.to_string();
    let opened = match output {
        Output::Stdout => io::stdout().as_fd().try_clone_to_owned().map(File::from),
        Output::Stderr => io::stderr().as_fd().try_clone_to_owned().map(File::from),
        Output::File(path) => OpenOptions::new().create(true).append(true).open(path),
        Output::Fd(fd) => Ok(File::from(fd)),
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
}

/// Writes `head` then every chunk of `chunks`, in as few `writev` calls as the output
/// allows, retrying `EINTR`, waiting for writability on `EAGAIN`, and giving up on any
/// other error (or when `stop` is set while waiting for writability).
pub(crate) fn write_batch<C: AsRef<[u8]>>(
    out: &mut File,
    head: &[u8],
    chunks: &[C],
    stop: &AtomicBool,
) -> WriteOutcome {
    let mut outcome = WriteOutcome::default();
    // Position: segment (0 = head, i + 1 = chunks[i]) and offset within it.
    let mut seg = 0usize;
    let mut off = 0usize;
    let segment = |i: usize| -> &[u8] {
        if i == 0 {
            head
        } else {
            chunks.get(i - 1).map_or(&[][..], AsRef::as_ref)
        }
    };
    let segments = chunks.len() + 1;
    let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(segments.min(MAX_IOV));
    loop {
        while seg < segments && off >= segment(seg).len() {
            seg += 1;
            off = 0;
        }
        if seg >= segments {
            return outcome;
        }
        slices.clear();
        slices.push(IoSlice::new(&segment(seg)[off..]));
        for i in seg + 1..segments {
            if slices.len() == MAX_IOV {
                break;
            }
            let s = segment(i);
            if !s.is_empty() {
                slices.push(IoSlice::new(s));
            }
        }
        outcome.syscalls += 1;
        match out.write_vectored(&slices) {
            Ok(0) => {
                outcome.error = Some(io::Error::new(
                    ErrorKind::WriteZero,
                    "the output accepted no bytes",
                ));
                return outcome;
            }
            Ok(mut n) => {
                outcome.bytes += n as u64;
                while n > 0 && seg < segments {
                    let left = segment(seg).len() - off;
                    if n >= left {
                        n -= left;
                        seg += 1;
                        off = 0;
                    } else {
                        off += n;
                        n = 0;
                    }
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if let Err(e) = wait_writable(out, stop) {
                    outcome.error = Some(e);
                    return outcome;
                }
            }
            Err(e) => {
                outcome.error = Some(e);
                return outcome;
            }
        }
    }
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
        let mut fds = [PollFd::new(out, PollFlags::OUT)];
        match poll(&mut fds, Some(&POLL_SLICE)) {
            Ok(0) => continue,
            Ok(_) => return Ok(()),
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Seek};

    #[test]
    fn writes_head_then_chunks_in_order() {
        let path = std::env::temp_dir().join(format!("writer-output-{}.log", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let mut f = open(Output::File(path.clone())).unwrap();
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
