//! The HTTP service's logging, without the service: `N` requests' lines (`lines` per
//! request, as `http-bench serve` logs them) from one thread, through a logger as
//! `http-bench` installs it. Made to be counted, not timed: instructions are repeatable
//! where seconds are not, so two builds of the logger compare exactly.
//!
//! ```text
//! cargo build --release -p logpolicy-bench
//! for n in 20000 40000; do
//!   valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.$n \
//!     target/release/request-loop $n 5 > /dev/null
//! done
//! # instructions per request: (Ir at 40000 - Ir at 20000) / 20000, from the
//! # "summary:" line of each /tmp/cg.N (or callgrind_annotate's total)
//! ```
//!
//! Arguments: `N [lines] [logger]` (defaults 5 lines, `logpolicy`; any logger
//! `http-bench` knows). `LOGPOLICY_BENCH_OURS_OUTPUT=discard` formats into a sink that
//! drops the lines (no queue, no writer thread), as in `http-bench`.

// A benchmark driver: a bad argument ends the run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use logpolicy_bench::service::log_request;
use logpolicy_bench::{install, Logger};

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().and_then(|a| a.parse().ok()).expect("N");
    let lines: u32 = args.next().map_or(5, |a| a.parse().expect("lines"));
    let logger: Logger = args
        .next()
        .map_or(Logger::Ours, |a| a.parse().expect("logger"));
    let installed = install(logger);
    let (method, path) = ("GET", "/cart");
    for i in 0..n {
        // A latency that varies as a real one does, but the same in every run.
        log_request(method, path, lines, || 40 + i % 60);
    }
    drop(installed.finish());
}
