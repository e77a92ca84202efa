//! The writer's configuration: a value built once, validated once, by [`Writer::new`].
//!
//! [`Writer::new`]: super::Writer::new

use std::fmt;
#[cfg(unix)]
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::clock::{Clock, SystemClock};
use crate::format::{Format, Service};
use crate::ledger::Ledger;

/// The smallest accepted [`WriterConfig::capacity_bytes`]: 4 KiB.
pub const MIN_CAPACITY_BYTES: usize = 4 * 1024;

/// The largest accepted [`WriterConfig::reserve_percent`]: at least 10% of the queue stays
/// usable by lines below `alwaysKeep`.
pub const MAX_RESERVE_PERCENT: u8 = 90;

/// The default [`WriterConfig::lock_spin`]: 500 µs.
///
/// Measured behind a fast reader on a busy two-core machine (two producers at 250,000
/// lines/s, the writer thread and the reader sharing the cores): with 50 µs or 200 µs, a
/// lock holder preempted for longer made some runs drop a few dozen lines of 400,000;
/// with 500 µs none did, and the slowest call stayed under 0.2 ms.
pub const LOCK_SPIN: Duration = Duration::from_micros(500);

/// The largest accepted [`WriterConfig::lock_spin`], so that a log call in drop mode
/// stays under a millisecond.
pub const MAX_LOCK_SPIN: Duration = Duration::from_micros(900);

/// Where the writer's background thread writes.
///
/// On Linux, when the output is a regular file (a file output, or stdout, stderr or a
/// descriptor redirected to one), the writer keeps up to 8 MiB of disk allocated past
/// the file's end (`fallocate` with `FALLOC_FL_KEEP_SIZE`, as journald grows its
/// files): appending then costs the kernel about a quarter less on ext4. The file's
/// size stays what was written. A file the writer opened is truncated back to its size
/// when the writer stops and when it is rotated; stdout, stderr and a given descriptor
/// may be shared with other writers and are not, so up to 8 MiB past such a file's end
/// stays allocated until it is truncated or removed. A filesystem without `fallocate`
/// (or without space for it) is written to as usual, and so is every file elsewhere, or
/// with [`WriterConfig::plain_writes`].
///
/// # Examples
///
/// ```
/// use logpolicy::writer::{Output, Rotation};
/// let out = Output::File("/tmp/service.log".into());
/// assert_eq!(out.to_string(), "file /tmp/service.log");
/// assert_eq!(Output::default().to_string(), "stdout");
/// let rotated = Output::RotatingFile(Rotation::new("/tmp/service.log", 64 << 20, 5));
/// assert_eq!(rotated.to_string(), "file /tmp/service.log (rotated at 67108864 bytes, 5 kept)");
/// ```
#[derive(Debug, Default)]
pub enum Output {
    /// The process's standard output (the writer writes to a duplicate of fd 1, unbuffered).
    #[default]
    Stdout,
    /// The process's standard error (a duplicate of fd 2).
    Stderr,
    /// A file, created if missing and always appended to.
    File(PathBuf),
    /// A file, created if missing and appended to, rotated by size: see [`Rotation`].
    RotatingFile(Rotation),
    /// An already open file descriptor (a pipe, a socket, a file); blocking or not.
    /// Unix only.
    #[cfg(unix)]
    Fd(OwnedFd),
}

impl fmt::Display for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Output::Stdout => f.write_str("stdout"),
            Output::Stderr => f.write_str("stderr"),
            Output::File(p) => write!(f, "file {}", p.display()),
            Output::RotatingFile(r) => write!(
                f,
                "file {} (rotated at {} bytes, {} kept)",
                r.path.display(),
                r.max_bytes,
                r.keep
            ),
            #[cfg(unix)]
            Output::Fd(fd) => write!(f, "fd {fd:?}"),
        }
    }
}

/// The smallest accepted [`Rotation::max_bytes`]: 4 KiB.
pub const MIN_ROTATION_BYTES: u64 = 4 * 1024;

/// The largest accepted [`Rotation::keep`] (a rotation renames every kept file).
pub const MAX_ROTATION_KEEP: u32 = 1000;

/// Size-based rotation of a log file ([`Output::RotatingFile`]), numbered as `logrotate`
/// and Python's `RotatingFileHandler` number them.
///
/// Lines go to `path`. Before a batch's next line would take `path` past `max_bytes`,
/// the writer thread rotates: `path.{keep-1}` becomes `path.{keep}` (replacing it), ...,
/// `path.1` becomes `path.2`, `path` becomes `path.1`, and a new `path` is started. With
/// `keep` 0 the full file is removed instead. So the files never hold more than
/// `(keep + 1) * max_bytes` bytes, and every file holds whole lines: a line is never split
/// between two files. A single line longer than `max_bytes` gets a file of its own.
///
/// A file that already exists at `path` is appended to, its size counted. If a rename
/// or the new file's creation fails, the writer keeps writing to the file it has (no line
/// is lost to a rotation; the file grows past `max_bytes`), counts the failure in
/// [`WriterStats::io_errors`](super::WriterStats::io_errors), and tries again at its next
/// batch. Rotations are counted in [`WriterStats::rotations`](super::WriterStats::rotations).
///
/// # Examples
///
/// ```
/// use logpolicy::writer::{Output, Rotation, Writer, WriterConfig};
/// use tracing_core::Level;
///
/// let dir = std::env::temp_dir().join(format!("rotation-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("service.log");
/// let rotation = Rotation::new(&path, 4096, 2);
/// let (writer, guard) = Writer::new(WriterConfig::new(Output::RotatingFile(rotation)))?;
/// let line = format!("{{\"msg\":\"{}\"}}\n", "x".repeat(89)); // 100 bytes
/// for _ in 0..200 {
///     writer.write_line(Level::INFO, false, line.as_bytes());
/// }
/// drop(guard); // flushes
/// // 20,000 bytes: 40 lines per 4 KiB file; the oldest files are gone.
/// for name in ["service.log", "service.log.1", "service.log.2"] {
///     let len = std::fs::metadata(dir.join(name))?.len();
///     assert!(len <= 4096 && len % 100 == 0, "{name}: {len}");
/// }
/// assert!(!dir.join("service.log.3").exists());
/// assert_eq!(writer.stats().rotations, 4);
/// # std::fs::remove_dir_all(dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rotation {
    /// The file lines are written to; rotated files are named after it (`path.1`, ...).
    pub path: PathBuf,
    /// The size a file is kept within, at least [`MIN_ROTATION_BYTES`].
    pub max_bytes: u64,
    /// How many rotated files are kept (`path.1`, the newest, to `path.{keep}`), at most
    /// [`MAX_ROTATION_KEEP`].
    pub keep: u32,
}

impl Rotation {
    /// Rotation of `path` at `max_bytes`, keeping `keep` rotated files.
    pub fn new(path: impl Into<PathBuf>, max_bytes: u64, keep: u32) -> Self {
        Rotation {
            path: path.into(),
            max_bytes,
            keep,
        }
    }

    /// The name of the `n`th rotated file (`n` ≥ 1): `path.n`.
    pub fn rotated(&self, n: u32) -> PathBuf {
        let mut name = self.path.as_os_str().to_owned();
        name.push(format!(".{n}"));
        PathBuf::from(name)
    }

    fn validate(&self) -> Result<(), WriterError> {
        if self.path.file_name().is_none() {
            return Err(invalid(
                "output.path",
                format!(
                    "must name a file to rotate, got {:?}",
                    self.path.display().to_string()
                ),
            ));
        }
        if self.max_bytes < MIN_ROTATION_BYTES {
            return Err(invalid(
                "output.max_bytes",
                format!(
                    "must be at least {MIN_ROTATION_BYTES} bytes, got {}",
                    self.max_bytes
                ),
            ));
        }
        if self.keep > MAX_ROTATION_KEEP {
            return Err(invalid(
                "output.keep",
                format!("must be at most {MAX_ROTATION_KEEP}, got {}", self.keep),
            ));
        }
        Ok(())
    }
}

/// What a line below `alwaysKeep` does when its share of the queue is full.
///
/// # Examples
///
/// ```
/// use logpolicy::writer::Overflow;
/// assert_eq!(Overflow::default(), Overflow::Drop);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overflow {
    /// Drop the line at once and count it ([`DropReason::QueueFull`]); a log call never
    /// waits on the reader.
    ///
    /// [`DropReason::QueueFull`]: super::DropReason::QueueFull
    #[default]
    Drop,
    /// Wait for space: lossless back-pressure, the caller runs at the reader's speed.
    Block,
}

/// What an `alwaysKeep` line (by default `warn` and `error`) does when even the reserve is
/// full. Only consulted in [`Overflow::Drop`] mode; in [`Overflow::Block`] mode every line
/// waits.
///
/// In every variant the line first takes the place of the queued lines of lower levels
/// (below `alwaysKeep`, and `warn` lines for an `error`), which are dropped and counted as
/// [`DropReason::Evicted`]. If that does not make room:
///
/// # Examples
///
/// ```
/// use logpolicy::writer::{Output, ReserveFull, WriterConfig};
/// use std::time::Duration;
/// // The default never makes a caller wait.
/// assert_eq!(ReserveFull::default(), ReserveFull::Drop);
/// // Waiting is an explicit choice, with a bound.
/// let config = WriterConfig::new(Output::Stderr)
///     .reserve_full(ReserveFull::WaitThenDrop(Duration::from_millis(20)));
/// assert!(config.validate().is_ok());
/// ```
///
/// [`DropReason::Evicted`]: super::DropReason::Evicted
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReserveFull {
    /// Never wait (the default): the line takes the place of the oldest queued lines of
    /// its own level (not of a higher one, nor of the batch being written), counted as
    /// [`DropReason::Evicted`]; if even that cannot make room, it is dropped and counted
    /// ([`DropReason::ReserveFull`]).
    ///
    /// [`DropReason::Evicted`]: super::DropReason::Evicted
    /// [`DropReason::ReserveFull`]: super::DropReason::ReserveFull
    #[default]
    Drop,
    /// Wait up to this long for space, then drop and count ([`DropReason::ReserveFull`]):
    /// queued lines of the same level are kept, at the price of a call that may wait
    /// this long.
    ///
    /// [`DropReason::ReserveFull`]: super::DropReason::ReserveFull
    WaitThenDrop(Duration),
    /// Wait as long as it takes.
    Block,
}

/// Configuration of a [`Writer`](super::Writer).
///
/// Fields are public; the methods of the same names set one field and return the value,
/// so a configuration reads as one expression. Validation happens in
/// [`WriterConfig::validate`], which [`Writer::new`](super::Writer::new) calls.
///
/// # Examples
///
/// ```
/// use logpolicy::writer::{Output, Overflow, WriterConfig};
/// use std::time::Duration;
///
/// let config = WriterConfig::new(Output::Stderr)
///     .capacity_bytes(1 << 20)
///     .reserve_percent(30)
///     .overflow(Overflow::Drop)
///     .flush_timeout(Duration::from_secs(1));
/// assert!(config.validate().is_ok());
/// assert_eq!(config.normal_limit_bytes(), 734_003);
///
/// let err = WriterConfig::default().capacity_bytes(100).validate().unwrap_err();
/// assert!(err.to_string().contains("capacity_bytes"));
/// ```
#[derive(Debug)]
pub struct WriterConfig {
    /// Where lines go. Default: [`Output::Stdout`].
    pub output: Output,
    /// The queue's bound in bytes (queued plus being written). Default 4 MiB, at least
    /// [`MIN_CAPACITY_BYTES`].
    pub capacity_bytes: usize,
    /// The share of `capacity_bytes`, in percent, that only `alwaysKeep` lines may use.
    /// Default 25, at most [`MAX_RESERVE_PERCENT`].
    pub reserve_percent: u8,
    /// What lines below `alwaysKeep` do when their share is full. Default [`Overflow::Drop`].
    pub overflow: Overflow,
    /// What `alwaysKeep` lines do when the whole queue is full (drop mode only).
    /// Default [`ReserveFull::Drop`]: never wait; evict older lines, else drop.
    pub reserve_full: ReserveFull,
    /// How long dropping the [`WriterGuard`](super::WriterGuard) waits for the queue to be
    /// written. Default 2 s.
    pub flush_timeout: Duration,
    /// How long a call busy-waits for the queue's lock before it gives up spinning. A line
    /// below `alwaysKeep` in [`Overflow::Drop`] mode is then dropped as
    /// [`DropReason::Contended`](super::DropReason::Contended) when the queue holds a
    /// quarter of its share or more. Default [`LOCK_SPIN`] (500 µs), at most
    /// [`MAX_LOCK_SPIN`].
    ///
    /// Every holder of the lock keeps it for a copy or a swap of a few pointers
    /// (nanoseconds), so the lock is free within this time unless the scheduler preempted
    /// its holder; waiting for that holder could take a whole time slice. While the queue
    /// is nearly empty (the output keeps up), and for `alwaysKeep` lines, the call sleeps
    /// until the holder releases it instead (counted in
    /// [`WriterStats::lock_waits`](super::WriterStats::lock_waits)): the wait is the
    /// scheduler's, not the reader's, and dropping would lose a line behind a reader that
    /// keeps up.
    pub lock_spin: Duration,
    /// The clock that timestamps the lines the writer writes itself (drop summaries).
    pub clock: Arc<dyn Clock>,
    /// The format of the lines the writer writes itself. Default [`Format::Json`].
    pub format: Format,
    /// The service those lines name (see [`Service`]). Default: none.
    pub service: Service,
    /// The per-callsite ledger the writer counts each line in (see [`crate::ledger`]).
    /// Default: a ledger of its own; [`crate::init`] gives it the filter's
    /// ([`PolicyHandle::ledger`](crate::PolicyHandle::ledger)), so that one ledger holds
    /// what the policy held back and what the writer wrote and dropped.
    pub ledger: Ledger,
    /// Whether the writer thread writes with the calls every platform has: plain
    /// `write`/`writev` through the standard library, and no disk allocated ahead of a
    /// file's end. Default: `false` on Linux, where the writer asks the kernel not to
    /// wait for a slow reader (`pwritev2` with `RWF_NOWAIT`, waiting for writability in
    /// `poll` instead) and preallocates a file's blocks (`fallocate`, see [`Output`]);
    /// `true` on every other platform, where it is the only way (`false` there changes
    /// nothing). On Linux, `true` is the portable path, for comparison and for a
    /// sandbox that filters those calls out.
    ///
    /// Plain writes lose nothing and count every line as the others do. What they
    /// cannot do is stop inside a write: behind a pipe whose reader stalls, the writer
    /// thread may block in `write` until the reader comes back. The guard then gives up
    /// on it after the flush timeout and [`STOP_GRACE`](super::STOP_GRACE), counts the
    /// lines of its batch as `shutdown` drops (the reader may still get some of them
    /// later), and the last report of drops goes to the output or stderr only where that
    /// is a regular file or a terminal (a write that cannot wait for a reader).
    ///
    /// ```
    /// use logpolicy::writer::{Output, WriterConfig};
    /// assert_eq!(WriterConfig::default().plain_writes, !cfg!(target_os = "linux"));
    /// let portable = WriterConfig::new(Output::Stderr).plain_writes(true);
    /// assert!(portable.plain_writes && portable.validate().is_ok());
    /// ```
    pub plain_writes: bool,
}

impl Default for WriterConfig {
    fn default() -> Self {
        Self {
            output: Output::Stdout,
            capacity_bytes: 4 * 1024 * 1024,
            reserve_percent: 25,
            overflow: Overflow::Drop,
            reserve_full: ReserveFull::default(),
            flush_timeout: Duration::from_secs(2),
            lock_spin: LOCK_SPIN,
            clock: Arc::new(SystemClock),
            format: Format::Json,
            service: Service::default(),
            ledger: Ledger::default(),
            plain_writes: !cfg!(target_os = "linux"),
        }
    }
}

impl WriterConfig {
    /// The defaults, writing to `output`.
    pub fn new(output: Output) -> Self {
        Self {
            output,
            ..Self::default()
        }
    }

    /// Sets [`WriterConfig::output`].
    #[must_use]
    pub fn output(mut self, output: Output) -> Self {
        self.output = output;
        self
    }

    /// Sets [`WriterConfig::capacity_bytes`].
    #[must_use]
    pub fn capacity_bytes(mut self, bytes: usize) -> Self {
        self.capacity_bytes = bytes;
        self
    }

    /// Sets [`WriterConfig::reserve_percent`].
    #[must_use]
    pub fn reserve_percent(mut self, percent: u8) -> Self {
        self.reserve_percent = percent;
        self
    }

    /// Sets [`WriterConfig::overflow`].
    #[must_use]
    pub fn overflow(mut self, overflow: Overflow) -> Self {
        self.overflow = overflow;
        self
    }

    /// Sets [`WriterConfig::reserve_full`].
    #[must_use]
    pub fn reserve_full(mut self, reserve_full: ReserveFull) -> Self {
        self.reserve_full = reserve_full;
        self
    }

    /// Sets [`WriterConfig::flush_timeout`].
    #[must_use]
    pub fn flush_timeout(mut self, timeout: Duration) -> Self {
        self.flush_timeout = timeout;
        self
    }

    /// Sets [`WriterConfig::lock_spin`].
    #[must_use]
    pub fn lock_spin(mut self, spin: Duration) -> Self {
        self.lock_spin = spin;
        self
    }

    /// Sets [`WriterConfig::format`] and [`WriterConfig::service`]: the writer's own
    /// lines (the report of dropped lines) read like the layer's.
    #[must_use]
    pub fn lines(mut self, format: Format, service: Service) -> Self {
        self.format = format;
        self.service = service;
        self
    }

    /// Sets [`WriterConfig::clock`].
    #[must_use]
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Sets [`WriterConfig::ledger`].
    #[must_use]
    pub fn ledger(mut self, ledger: Ledger) -> Self {
        self.ledger = ledger;
        self
    }

    /// Sets [`WriterConfig::plain_writes`] (on platforms other than Linux it stays
    /// `true`).
    #[must_use]
    pub fn plain_writes(mut self, plain: bool) -> Self {
        self.plain_writes = plain || !cfg!(target_os = "linux");
        self
    }

    /// The bytes that lines below `alwaysKeep` may occupy:
    /// `capacity_bytes * (100 - reserve_percent) / 100` (rounded down).
    pub fn normal_limit_bytes(&self) -> usize {
        normal_limit(self.capacity_bytes, self.reserve_percent)
    }

    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<(), WriterError> {
        if self.capacity_bytes < MIN_CAPACITY_BYTES {
            return Err(invalid(
                "capacity_bytes",
                format!(
                    "must be at least {MIN_CAPACITY_BYTES} bytes, got {}",
                    self.capacity_bytes
                ),
            ));
        }
        if self.capacity_bytes > isize::MAX as usize / 2 {
            return Err(invalid(
                "capacity_bytes",
                format!(
                    "{} bytes is more than this platform can hold",
                    self.capacity_bytes
                ),
            ));
        }
        if self.reserve_percent > MAX_RESERVE_PERCENT {
            let reason = format!(
                "must be at most {MAX_RESERVE_PERCENT} (lines below alwaysKeep need some room), got {}",
                self.reserve_percent
            );
            return Err(invalid("reserve_percent", reason));
        }
        if let Output::RotatingFile(rotation) = &self.output {
            rotation.validate()?;
        }
        if self.lock_spin > MAX_LOCK_SPIN {
            let reason = format!(
                "must be at most {MAX_LOCK_SPIN:?} (a log call in drop mode stays under a millisecond), got {:?}",
                self.lock_spin
            );
            return Err(invalid("lock_spin", reason));
        }
        Ok(())
    }
}

/// `capacity * (100 - reserve_percent) / 100`, without overflow for any `usize` capacity.
pub(crate) fn normal_limit(capacity: usize, reserve_percent: u8) -> usize {
    let keep = 100 - usize::from(reserve_percent.min(100));
    (capacity / 100) * keep + (capacity % 100) * keep / 100
}

/// A [`WriterError::InvalidConfig`] for `field`.
fn invalid(field: &'static str, reason: String) -> WriterError {
    WriterError::InvalidConfig { field, reason }
}

/// Why a [`Writer`](super::Writer) could not be built.
#[derive(Debug, thiserror::Error)]
pub enum WriterError {
    /// A configuration field is out of range.
    #[error("invalid writer configuration: `{field}` {reason}")]
    InvalidConfig {
        /// The field's name as in [`WriterConfig`].
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The output could not be opened (or stdout/stderr duplicated).
    #[error("cannot open the log output ({output}): {source}")]
    Open {
        /// The output, as displayed by [`Output`]'s `Display`.
        output: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The background thread could not be started.
    #[error("cannot start the log writer thread: {0}")]
    Spawn(#[source] std::io::Error),
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn defaults_are_valid() {
        let c = WriterConfig::default();
        assert!(c.validate().is_ok());
        assert_eq!(c.capacity_bytes, 4 << 20);
        assert_eq!(c.normal_limit_bytes(), 3 << 20);
    }

    #[test]
    fn errors_name_the_field() {
        let small = WriterConfig::default().capacity_bytes(4095).validate();
        assert!(matches!(
            small,
            Err(WriterError::InvalidConfig {
                field: "capacity_bytes",
                ..
            })
        ));
        assert!(WriterConfig::default()
            .capacity_bytes(4096)
            .validate()
            .is_ok());
        let reserve = WriterConfig::default().reserve_percent(91).validate();
        let msg = reserve.map_err(|e| e.to_string()).unwrap_err();
        assert!(
            msg.contains("`reserve_percent`") && msg.contains("91"),
            "{msg}"
        );
        assert!(WriterConfig::default()
            .reserve_percent(90)
            .validate()
            .is_ok());
        assert!(WriterConfig::default()
            .reserve_percent(0)
            .validate()
            .is_ok());
        let spin = WriterConfig::default()
            .lock_spin(Duration::from_millis(2))
            .validate();
        assert!(matches!(
            spin,
            Err(WriterError::InvalidConfig {
                field: "lock_spin",
                ..
            })
        ));
    }

    #[test]
    fn rotation_errors_name_the_field() {
        let check = |r: Rotation| match WriterConfig::new(Output::RotatingFile(r)).validate() {
            Err(WriterError::InvalidConfig { field, reason }) => Some((field, reason)),
            Ok(()) => None,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(check(Rotation::new("/tmp/a.log", 4096, 0)), None);
        assert_eq!(check(Rotation::new("/tmp/a.log", u64::MAX, 1000)), None);
        let (field, reason) = check(Rotation::new("/tmp/a.log", 4095, 1)).unwrap();
        assert_eq!(field, "output.max_bytes");
        assert!(reason.contains("4095"), "{reason}");
        let (field, reason) = check(Rotation::new("/tmp/a.log", 1 << 20, 1001)).unwrap();
        assert_eq!(field, "output.keep");
        assert!(reason.contains("1001"), "{reason}");
        assert_eq!(
            check(Rotation::new("/", 1 << 20, 1)).unwrap().0,
            "output.path"
        );
        assert_eq!(
            check(Rotation::new("", 1 << 20, 1)).unwrap().0,
            "output.path"
        );
    }

    #[test]
    fn rotated_files_are_numbered_after_the_path() {
        let r = Rotation::new("/var/log/shop/api.log", 1 << 20, 3);
        assert_eq!(r.rotated(1), PathBuf::from("/var/log/shop/api.log.1"));
        assert_eq!(r.rotated(12), PathBuf::from("/var/log/shop/api.log.12"));
    }

    #[test]
    fn reserve_arithmetic() {
        assert_eq!(normal_limit(4096, 25), 3072);
        assert_eq!(normal_limit(4096, 0), 4096);
        assert_eq!(normal_limit(4099, 90), 409);
        assert_eq!(normal_limit(usize::MAX, 0), usize::MAX);
        assert_eq!(normal_limit(usize::MAX, 50), usize::MAX / 2);
    }

    proptest! {
        #[test]
        fn normal_limit_matches_wide_arithmetic(cap in 0usize.., pct in 0u8..=100) {
            let wide = (cap as u128) * (100 - u128::from(pct)) / 100;
            prop_assert_eq!(normal_limit(cap, pct) as u128, wide);
        }
    }
}
