//! Where formatted lines go.

use std::io::{self, Write};
use std::sync::Mutex;

use crate::ledger::{Ledger, RowId};

/// Receives complete, formatted lines (each ends with `\n`).
///
/// `always_keep` says whether the event is at or above the policy's `alwaysKeep`
/// level: a sink that must shed load sheds the others first.
///
/// # Examples
///
/// A `Mutex` around any `io::Write` is a sink (synchronous: every line is written on
/// the calling thread):
///
/// ```
/// use logpolicy::LineSink;
/// use std::sync::Mutex;
/// let sink = Mutex::new(Vec::<u8>::new());
/// sink.write_line(&tracing_core::Level::INFO, false, b"hello\n");
/// assert_eq!(sink.lock().unwrap().as_slice(), b"hello\n");
/// ```
pub trait LineSink: Send + Sync + 'static {
    /// Writes or queues one line.
    fn write_line(&self, level: &tracing_core::Level, always_keep: bool, line: &[u8]);

    /// Writes or queues one line of the callsite whose [ledger](crate::ledger) row is
    /// `row`. A sink that counts lines per callsite (the [`Writer`](crate::writer::Writer))
    /// counts it there; by default this is [`LineSink::write_line`].
    #[inline]
    fn write_row_line(
        &self,
        row: RowId,
        level: &tracing_core::Level,
        always_keep: bool,
        line: &[u8],
    ) {
        let _ = row;
        self.write_line(level, always_keep, line)
    }

    /// The ledger this sink counts lines in, if it does (the
    /// [`Writer`](crate::writer::Writer)'s); `None` by default.
    fn ledger(&self) -> Option<Ledger> {
        None
    }
}

impl<W: Write + Send + 'static> LineSink for Mutex<W> {
    fn write_line(&self, _: &tracing_core::Level, _: bool, line: &[u8]) {
        let mut w = self.lock().unwrap_or_else(|p| p.into_inner());
        let _ = w.write_all(line);
    }
}

impl<T: LineSink + ?Sized> LineSink for std::sync::Arc<T> {
    fn write_line(&self, level: &tracing_core::Level, always_keep: bool, line: &[u8]) {
        (**self).write_line(level, always_keep, line)
    }

    fn write_row_line(
        &self,
        row: RowId,
        level: &tracing_core::Level,
        always_keep: bool,
        line: &[u8],
    ) {
        (**self).write_row_line(row, level, always_keep, line)
    }

    fn ledger(&self) -> Option<Ledger> {
        (**self).ledger()
    }
}

/// Writes each line to the process's standard output, synchronously, on the calling
/// thread (the way `tracing_subscriber::fmt` does). Errors are ignored.
#[derive(Debug, Clone, Copy, Default)]
pub struct StdoutSink;

impl LineSink for StdoutSink {
    fn write_line(&self, _: &tracing_core::Level, _: bool, line: &[u8]) {
        let _ = io::stdout().lock().write_all(line);
    }
}

/// Discards every line; for benchmarks and tests of the formatting cost.
#[derive(Debug, Clone, Copy, Default)]
pub struct NullSink;

impl LineSink for NullSink {
    #[inline]
    fn write_line(&self, _: &tracing_core::Level, _: bool, line: &[u8]) {
        std::hint::black_box(line);
    }
}
