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
//! Arguments: `N [format] [service|-] [redact] [output]` (default `json`; `service` names
//! one, as `OTEL_SERVICE_NAME` would; `redact`: `builtin` (the default list, no field of
//! the event matching), `none` (nothing redacted, no check), `user` (the list and `user`:
//! one field redacted), as rows (d') of `benches/filter.rs`). Timestamps come from a
//! fixed clock: valgrind cannot run the system clock's read of the vDSO.
//!
//! `output`: `null` (the default: no filter, the line dropped by the sink), `writer` (the
//! full layer as `logpolicy::init` builds it: `PolicyFilter` at `info` linked to the
//! format, the ledger, and the `Writer` with its 4 MiB queue writing to stdout, all on
//! the fixed clock), `sampled` (the same, with `@sample(shop::http)=1/100`: 99 of 100
//! events are sampled out by the filter and never formatted) or `sampled-out` (with
//! `1/1000000`: every event but the first is sampled out, so the count per event is the
//! sampled-out path's alone). With `writer` or
//! `sampled` the writer's counts are printed on stderr at the end (a dropped line would
//! make the count wrong: it must say `dropped 0`); count the service's thread and the
//! writer's thread apart, and take the difference of two `N`, so what is done once
//! (registration, start-up, the final flush) cancels out:
//!
//! ```text
//! for n in 20000 40000; do
//!   valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file=/tmp/cg.$n \
//!     target/release/examples/format_loop $n json - builtin writer > /dev/null
//! done
//! # per event on the service's thread: (summary of /tmp/cg.40000-01 - of /tmp/cg.20000-01) / 20000
//! # per line on the writer's thread:   the same with the files ending -02
//! ```

// A benchmark driver: a bad argument ends the run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod counted;
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
    let clock = ManualClock::new(SystemTime::now());
    let directives = match args.next().as_deref() {
        None | Some("null") => None,
        Some("writer") => Some("info"),
        Some("sampled") => Some("info,@sample(shop::http)=1/100"),
        Some("sampled-out") => Some("info,@sample(shop::http)=1/1000000"),
        Some(other) => panic!("output: {other:?} (null, writer, sampled or sampled-out)"),
    };
    let Some(directives) = directives else {
        let layer = FormatLayer::new(format, NullSink)
            .service(&service)
            .redaction(redaction)
            .with_clock(clock);
        tracing_subscriber::registry().with(layer).init();
        for _ in 0..n {
            six_fields();
        }
        return;
    };
    let (writer, guard, filter) = counted::writer_and_filter(&clock, directives);
    let layer = FormatLayer::new(format, writer.clone())
        .service(&service)
        .redaction(redaction)
        .with_policy(&filter)
        .with_clock(clock);
    tracing_subscriber::registry()
        .with(filter)
        .with(layer)
        .init();
    counted::run(n, six_fields, &writer, guard);
}
