//! The 6-field event of `benches/filter.rs` emitted `N` times through the policy's
//! filter and the format linked to it, under one policy per mode, into a sink that drops
//! the lines: made to be counted with callgrind, as `format_loop` is, so that the
//! recorder's cost can be compared with a written line's, and the paths a recording rule
//! does not touch with the build before it.
//!
//! ```text
//! cargo build --release -p logpolicy --example record_loop
//! valgrind --tool=callgrind --toggle-collect='*six_fields' --callgrind-out-file=/tmp/cg \
//!   target/release/examples/record_loop 100000 recorded
//! # instructions per event: the "summary:" line of /tmp/cg divided by 100000
//! ```
//!
//! Arguments: `N [mode] [null|writer]`: the lines go to a sink that drops them (`null`,
//! the default) or through the writer's queue (`writer`, to `/dev/null`: the service's
//! thread pays the hand-off, the writer's thread the write).
//!
//! Modes (the event is `info!` of target `shop::http`):
//! - `written`: `info`, the line is formatted and handed to the sink;
//! - `recorded`: `warn,@record(shop::http)=info`, the line is formatted and recorded
//!   (8 MiB store: past the first 40,000 events every record also expires the oldest);
//! - `disabled`: `warn`;
//! - `sampled`: `info,@sample(shop::http)=1/100`: 99 in 100 are sampled out;
//! - `disabled-beside-rule`: `warn,@record(shop::db)=debug`: the event's target is not
//!   recorded, so it stays disabled while another target records;
//! - `written-beside-rule`: `info,@record(shop::db)=debug`: written while another target
//!   records (what a written line pays for a rule in force elsewhere).
//!
//! Timestamps come from a fixed clock: valgrind cannot run the system clock's read of
//! the vDSO.

// A benchmark driver: a bad argument ends the run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../benches/events.rs"]
mod events;

use events::six_fields;
use logpolicy::clock::ManualClock;
use logpolicy::writer::{Output, Writer, WriterConfig};
use logpolicy::{Format, FormatLayer, NullSink, Policy, PolicyFilter, PolicyLayer};
use std::time::SystemTime;
use tracing_subscriber::prelude::*;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().and_then(|a| a.parse().ok()).expect("N");
    let mode = args.next().unwrap_or_else(|| "written".into());
    let directives = match mode.as_str() {
        "written" => "info",
        "recorded" => "warn,@record(shop::http)=info",
        "disabled" => "warn",
        "sampled" => "info,@sample(shop::http)=1/100",
        "disabled-beside-rule" => "warn,@record(shop::db)=debug",
        "written-beside-rule" => "info,@record(shop::db)=debug",
        other => {
            panic!("mode {other:?}: written, recorded, disabled, sampled, disabled-beside-rule or written-beside-rule")
        }
    };
    let clock = ManualClock::new(SystemTime::now());
    let policy = Policy::new(vec![PolicyLayer::baseline(directives.parse().unwrap())]);
    // The filter's clock is the format's too (`with_policy` links them).
    let filter = PolicyFilter::with_clock(policy, clock);
    // `null`: lines are dropped where they are made; `writer`: handed to the writer's
    // queue, as a service's are, and written to /dev/null by its thread.
    let sink = args.next().unwrap_or_else(|| "null".into());
    let mut guard = None;
    match sink.as_str() {
        "null" => {
            let layer = FormatLayer::new(Format::Json, NullSink).with_policy(&filter);
            tracing_subscriber::registry()
                .with(filter.clone())
                .with(layer)
                .init();
        }
        "writer" => {
            let (writer, g) =
                Writer::new(WriterConfig::new(Output::File("/dev/null".into()))).unwrap();
            guard = Some(g);
            let layer = FormatLayer::new(Format::Json, writer).with_policy(&filter);
            tracing_subscriber::registry()
                .with(filter.clone())
                .with(layer)
                .init();
        }
        other => panic!("sink {other:?}: null or writer"),
    }
    for _ in 0..n {
        six_fields();
    }
    drop(guard);
    let s = filter.handle().stats().total();
    eprintln!(
        "{mode}: written {} sampled {} recorded {}",
        s.written, s.sampled, s.recorded
    );
}
