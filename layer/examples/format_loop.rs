//! The 6-field event of `benches/filter.rs` (row d, g) formatted `N` times in one format
//! into a sink that drops the lines, under a global subscriber with no filter (the
//! filter's cost is the same for every format, and reads the system clock).
//! Made to be counted, not timed: instructions are repeatable where seconds are not, so
//! two formats (or two builds) compare exactly on a loaded machine.
//!
//! ```text
//! cargo build --release -p logpolicy --example format_loop
//! valgrind --tool=callgrind --toggle-collect='*six_fields' --callgrind-out-file=/tmp/cg \
//!   target/release/examples/format_loop 100000 json-otel service
//! # instructions per event: the "summary:" line of /tmp/cg divided by 100000
//! ```
//!
//! Arguments: `N [format] [service|-] [redact]` (default `json`; `service` names one, as
//! `OTEL_SERVICE_NAME` would; `redact`: `builtin` (the default list, no field of the
//! event matching), `none` (nothing redacted, no check), `user` (the list and `user`:
//! one field redacted), as rows (d') of `benches/filter.rs`). Timestamps come from a fixed clock: valgrind cannot run
//! the system clock's read of the vDSO.

// A benchmark driver: a bad argument ends the run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../benches/events.rs"]
mod events;

use events::six_fields;
use logpolicy::clock::ManualClock;
use logpolicy::format::Service;
use logpolicy::policy::Redaction;
use logpolicy::{Format, FormatLayer, NullSink};
use std::time::SystemTime;
use tracing_subscriber::prelude::*;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().and_then(|a| a.parse().ok()).expect("N");
    let format: Format = args
        .next()
        .map_or(Format::Json, |a| a.parse().expect("format"));
    let service = match args.next().as_deref() {
        Some("service") => Service::named("shop").version("1.4.2"),
        _ => Service::default(),
    };
    let user = logpolicy::policy::FieldName::new("user").expect("a plain name");
    let redaction = match args.next().as_deref() {
        None | Some("builtin") => Redaction::builtin(),
        Some("none") => Redaction::none(),
        Some("user") => Redaction::builtin().with([user]),
        Some(other) => panic!("redact: {other:?} (builtin, none or user)"),
    };
    let layer = FormatLayer::new(format, NullSink)
        .service(&service)
        .redaction(redaction)
        .with_clock(ManualClock::new(SystemTime::now()));
    tracing_subscriber::registry().with(layer).init();
    for _ in 0..n {
        six_fields();
    }
}
