//! The HTTP service's logging, without the service: `N` requests' lines (`lines` per
//! request, as `http-bench serve` logs them) from one thread, through a logger as
//! `http-bench` installs it. Made to be counted, not timed: instructions are repeatable
//! where seconds are not, so two builds of the logger compare exactly.
//!
//! ```text
//! cargo build --release -p logpolicy-bench
//! for n in 20000 40000; do
//!   LOGPOLICY_BENCH_CLOCK=manual valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.$n \
//!     target/release/request-loop $n 5 > /dev/null
//! done
//! # instructions per request: (Ir at 40000 - Ir at 20000) / 20000, from the
//! # "summary:" line of each /tmp/cg.N (or callgrind_annotate's total)
//! ```
//!
//! With ours' formatting layer that whole-program count moves by some tens of
//! instructions a request from run to run (the time-stamp counter is calibrated once,
//! for as long as that takes); `--toggle-collect='tracing_core::event::Event::dispatch'`
//! counts only the events' dispatch and repeats exactly (bench/README.md, the standard
//! shape).
//!
//! Arguments: `N [lines] [logger]` (defaults 5 lines, `logpolicy`; any logger
//! `http-bench` knows). `LOGPOLICY_BENCH_OURS_OUTPUT=discard` formats into a sink that
//! drops the lines (no queue, no writer thread), as in `http-bench`.
//! `LOGPOLICY_BENCH_CLOCK=manual` is needed under valgrind for ours (its clock reads the
//! vDSO directly, which valgrind cannot run): ours then reads a clock that does not
//! move (about 100 instructions a line: an atomic load and `SystemTime` arithmetic, in
//! place of the time-stamp counter's read), the same in every build.
//! `LOGPOLICY_BENCH_SHAPE=standard` logs `http-bench --shape standard`'s lines (six
//! fields and a message each, a request id made per request whether it logs or not).

// A benchmark driver: a bad argument ends the run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use logpolicy_bench::service::{log_shaped, Shape};
use logpolicy_bench::{install, Logger};

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().and_then(|a| a.parse().ok()).expect("N");
    let lines: u32 = args.next().map_or(5, |a| a.parse().expect("lines"));
    let logger: Logger = args
        .next()
        .map_or(Logger::Ours, |a| a.parse().expect("logger"));
    let installed = install(logger);
    let shape = Shape::from_env();
    // The standard shape's path is the one `http-bench` requests.
    let (method, path) = match shape {
        Shape::Light => ("GET", "/cart"),
        Shape::Standard => ("GET", "/api/orders"),
    };
    for i in 0..n {
        // A latency that varies as a real one does, but the same in every run.
        log_shaped(shape, method, path, lines, i, || 40 + i % 60);
    }
    drop(installed.finish());
}
