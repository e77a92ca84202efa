//! What the 6-field event of `format_loop` costs a service's thread before any
//! formatting: `tracing`'s own dispatch, the visit of the event's values, and the least
//! a layer that keeps them must do (copy them raw), with and without our filter and
//! writer. Made to be counted with callgrind, as `format_loop` is; it is the measured
//! floor that `format_loop`'s figures are compared with in bench/README.md ("The floor,
//! measured").
//!
//! ```text
//! cargo build --release -p logpolicy --example floor_probe
//! for n in 5000 15000; do
//!   valgrind --tool=callgrind --toggle-collect='*six_fields' --callgrind-out-file=/tmp/cg.$n \
//!     target/release/examples/floor_probe $n copy-writer > /dev/null
//! done
//! # per event: (summary of /tmp/cg.15000 - of /tmp/cg.5000) / 10000
//! ```
//!
//! Modes (a layer after the registry, as `FormatLayer` is):
//! - `dispatch`: a layer whose `on_event` does nothing: `tracing`'s macro, dispatch and
//!   the registry;
//! - `visit`: the layer visits every value and keeps none (the message not formatted);
//! - `message`: the same, with the message formatted through `core::fmt` into a
//!   thread-local buffer, as any layer that keeps it must (its arguments are borrowed);
//! - `copy`: every value copied raw into a thread-local buffer (a byte for the field, then
//!   8 bytes for a number, or the length and the bytes of a string), the message
//!   formatted, the clock read: the least a layer that formats later, on another
//!   thread, does on the service's;
//! - `copy-writer`: `copy` behind `PolicyFilter` at `info`, the buffer handed to the
//!   `Writer` (4 MiB queue, stdout) as one line, on the fixed clock: the floor of
//!   deferred formatting with our filter and our hand-off.

// A benchmark driver: a bad argument ends the run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod counted;
#[path = "../benches/events.rs"]
mod events;

use std::cell::RefCell;
use std::fmt::{self, Write as _};
use std::time::{Duration, SystemTime};

use events::six_fields;
use logpolicy::clock::{Clock, ManualClock};
use logpolicy::writer::Writer;
use logpolicy::LineSink;
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Dispatch,
    Visit,
    Message,
    Copy,
}

/// Visits values: keeps nothing, or copies them raw into `buf`.
struct Raw<'a> {
    buf: &'a mut Vec<u8>,
    mode: Mode,
}

impl Raw<'_> {
    #[inline(always)]
    fn number(&mut self, field: &Field, bytes: [u8; 8]) {
        if self.mode == Mode::Copy {
            self.buf.push(field.index() as u8);
            self.buf.extend_from_slice(&bytes);
        }
    }
}

/// `fmt::Write` into the buffer as is.
struct Append<'a>(&'a mut Vec<u8>);

impl fmt::Write for Append<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

impl Visit for Raw<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if self.mode != Mode::Visit {
            self.buf.push(field.index() as u8);
            let _ = write!(Append(self.buf), "{value:?}");
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if self.mode == Mode::Copy {
            self.buf.push(field.index() as u8);
            self.buf
                .extend_from_slice(&(value.len() as u32).to_le_bytes());
            self.buf.extend_from_slice(value.as_bytes());
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.number(field, value.to_le_bytes());
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.number(field, value.to_le_bytes());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.number(field, u64::from(value).to_le_bytes());
    }
}

thread_local! {
    static BUF: RefCell<Vec<u8>> = RefCell::new(Vec::with_capacity(1024));
}

struct Probe<S> {
    mode: Mode,
    clock: ManualClock,
    sink: Option<S>,
}

impl<R, S> Layer<R> for Probe<S>
where
    R: Subscriber,
    S: LineSink + 'static,
{
    fn on_event(&self, event: &Event<'_>, _: Context<'_, R>) {
        if self.mode == Mode::Dispatch {
            return;
        }
        BUF.with(|buf| {
            let Ok(mut buf) = buf.try_borrow_mut() else {
                return;
            };
            buf.clear();
            if self.mode == Mode::Copy {
                let meta: *const _ = event.metadata();
                buf.extend_from_slice(&(meta as usize).to_le_bytes());
                let now = self.clock.since_epoch().as_nanos() as u64;
                buf.extend_from_slice(&now.to_le_bytes());
            }
            event.record(&mut Raw {
                buf: &mut buf,
                mode: self.mode,
            });
            if let Some(sink) = &self.sink {
                buf.push(b'\n');
                sink.write_line(event.metadata().level(), false, &buf);
            }
        });
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().and_then(|a| a.parse().ok()).expect("N");
    let (mode, writer) = match args.next().as_deref() {
        Some("dispatch") => (Mode::Dispatch, false),
        Some("visit") => (Mode::Visit, false),
        Some("message") => (Mode::Message, false),
        None | Some("copy") => (Mode::Copy, false),
        Some("copy-writer") => (Mode::Copy, true),
        Some(other) => {
            panic!("mode: {other:?} (dispatch, visit, message, copy or copy-writer)")
        }
    };
    let clock = ManualClock::new(SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_069_175));
    if !writer {
        let probe = Probe::<Writer> {
            mode,
            clock,
            sink: None,
        };
        tracing_subscriber::registry().with(probe).init();
        for _ in 0..n {
            six_fields();
        }
        return;
    }
    let (writer, guard, filter) = counted::writer_and_filter(&clock, "info");
    let probe = Probe {
        mode,
        clock,
        sink: Some(writer.clone()),
    };
    tracing_subscriber::registry()
        .with(filter)
        .with(probe)
        .init();
    counted::run(n, six_fields, &writer, guard);
}
