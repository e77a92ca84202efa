//! Shared parts of the scenario benchmarks: the loggers under test, a latency histogram
//! with flat memory, and the process's peak memory.
//!
//! The `reader-scenarios` and `http-bench` binaries re-execute themselves as child
//! processes, one per logger and scenario, so every logger starts from a fresh process
//! and its peak RSS is its own. [`load_generator`] is the HTTP load generator of
//! `http-bench`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod load_generator;
pub mod service;

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use logpolicy::writer::{Output, Writer, WriterConfig, WriterGuard};
use logpolicy::{Format, FormatLayer, PolicyFilter};
use serde_json::{json, Value};
use tracing_appender::non_blocking::{ErrorCounter, NonBlockingBuilder, WorkerGuard};
use tracing_subscriber::prelude::*;

/// The queue bound configured for our writer in every benchmark.
pub const OUR_CAPACITY_BYTES: usize = 4 << 20;

/// A logger under test; each writes JSON lines to the process's stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Logger {
    /// `logpolicy` as `logpolicy::init` builds it: `PolicyFilter` + `FormatLayer` (JSON,
    /// linked to the policy) + the non-blocking `Writer`, drop mode, 4 MiB queue.
    Ours,
    /// `tracing_subscriber::fmt().json()` writing straight to stdout.
    Fmt,
    /// `tracing_appender::non_blocking` (default: lossy, 128,000 lines) with fmt JSON.
    NonBlockingLossy,
    /// `tracing_appender::non_blocking` with `lossy(false)` with fmt JSON.
    NonBlockingLossless,
}

impl Logger {
    /// Every logger, in report order.
    pub const ALL: [Logger; 4] = [
        Logger::Ours,
        Logger::Fmt,
        Logger::NonBlockingLossy,
        Logger::NonBlockingLossless,
    ];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Logger::Ours => "logpolicy",
            Logger::Fmt => "fmt-stdout",
            Logger::NonBlockingLossy => "non_blocking-lossy",
            Logger::NonBlockingLossless => "non_blocking-lossless",
        }
    }
}

impl fmt::Display for Logger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Logger {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Logger::ALL
            .into_iter()
            .find(|l| l.name() == s)
            .ok_or_else(|| format!("unknown logger {s:?}"))
    }
}

/// A logger installed as the global default; [`Installed::finish`] flushes it and
/// reports what it counted.
pub struct Installed {
    logger: Logger,
    ours: Option<(Writer, WriterGuard)>,
    non_blocking: Option<(ErrorCounter, WorkerGuard)>,
}

/// The environment variable that makes [`install`] build a diagnostic variant of ours, to
/// tell apart where its cost goes: `discard` formats every line (linked to the policy, as
/// usual) into a sink that drops it, so there is no queue, writer thread or write;
/// `filter-only` installs the registry and the policy filter with no output layer at
/// all. Unset (or `writer`): ours as `logpolicy::init` builds it.
pub const OURS_OUTPUT_ENV: &str = "LOGPOLICY_BENCH_OURS_OUTPUT";

/// Installs `logger` as the global default subscriber, at level `info`.
pub fn install(logger: Logger) -> Installed {
    let mut installed = Installed {
        logger,
        ours: None,
        non_blocking: None,
    };
    match logger {
        Logger::Ours => {
            let config = WriterConfig::new(Output::Stdout)
                .capacity_bytes(OUR_CAPACITY_BYTES)
                .flush_timeout(Duration::from_secs(10));
            let (writer, guard) = Writer::new(config).expect("writer");
            // As `logpolicy::init` builds it: the output linked to the policy (sampling,
            // budget, accounting, summaries).
            let filter = PolicyFilter::from_directives("info").expect("directives");
            match std::env::var(OURS_OUTPUT_ENV).as_deref() {
                Ok("discard") => install_ours(&filter, logpolicy::NullSink),
                Ok("filter-only") => {
                    let subscriber = tracing_subscriber::registry().with(filter);
                    tracing::subscriber::set_global_default(subscriber).expect("global default");
                }
                _ => install_ours(&filter, writer.clone()),
            }
            installed.ours = Some((writer, guard));
        }
        Logger::Fmt => {
            let subscriber = tracing_subscriber::fmt()
                .json()
                .with_max_level(tracing::Level::INFO)
                .with_writer(std::io::stdout)
                .finish();
            tracing::subscriber::set_global_default(subscriber).expect("global default");
        }
        Logger::NonBlockingLossy | Logger::NonBlockingLossless => {
            let (nb, guard) = NonBlockingBuilder::default()
                .lossy(logger == Logger::NonBlockingLossy)
                .finish(std::io::stdout());
            let counter = nb.error_counter();
            let subscriber = tracing_subscriber::fmt()
                .json()
                .with_max_level(tracing::Level::INFO)
                .with_writer(nb)
                .finish();
            tracing::subscriber::set_global_default(subscriber).expect("global default");
            installed.non_blocking = Some((counter, guard));
        }
    }
    installed
}

/// Installs ours as `logpolicy::init` builds it, writing to `sink`.
fn install_ours<K: logpolicy::LineSink>(filter: &PolicyFilter, sink: K) {
    let subscriber = tracing_subscriber::registry()
        .with(filter.clone())
        .with(FormatLayer::new(Format::Json, sink).with_policy(filter));
    tracing::subscriber::set_global_default(subscriber).expect("global default");
}

impl Installed {
    /// Flushes (drops the guards) and returns what the logger itself counted:
    /// `{"dropped_counted": n, ...}` (for ours, also the writer's per-level stats).
    pub fn finish(self) -> Value {
        match (self.ours, self.non_blocking) {
            (Some((writer, guard)), _) => {
                drop(guard);
                let s = writer.stats();
                let level = |l: tracing::Level| {
                    let c = s.level(l);
                    json!({"emitted": c.emitted, "written": c.written,
                           "dropped": c.dropped.total(), "queued": c.queued})
                };
                json!({
                    "logger": self.logger.name(),
                    "dropped_counted": s.dropped_total(),
                    "info": level(tracing::Level::INFO),
                    "error": level(tracing::Level::ERROR),
                    "peak_queue_bytes": s.peak_queue_bytes,
                    "write_syscalls": s.write_syscalls,
                    "summary_lines": s.summary_lines,
                    "lock_waits": s.lock_waits,
                    "lock_handoffs": s.lock_handoffs,
                    "space_waits": s.space_waits,
                    "balanced": s.is_balanced(),
                })
            }
            (None, Some((counter, guard))) => {
                drop(guard);
                json!({"logger": self.logger.name(), "dropped_counted": counter.dropped_lines()})
            }
            (None, None) => json!({"logger": self.logger.name(), "dropped_counted": 0}),
        }
    }
}

/// Latencies in log-linear buckets (16 per power of two, relative error < 6.25%): flat
/// memory whatever the number of samples.
#[derive(Clone)]
pub struct Histogram {
    buckets: Vec<u64>,
    count: u64,
    max_ns: u64,
}

const SUB: u32 = 16;

impl Default for Histogram {
    fn default() -> Self {
        Self {
            buckets: vec![0; 64 * SUB as usize],
            count: 0,
            max_ns: 0,
        }
    }
}

impl Histogram {
    fn index(ns: u64) -> usize {
        if ns < u64::from(SUB) {
            return ns as usize;
        }
        let exp = 63 - ns.leading_zeros(); // >= 4
        let sub = (ns >> (exp - 4)) & u64::from(SUB - 1);
        ((exp - 3) * SUB) as usize + sub as usize
    }

    fn upper(index: usize) -> u64 {
        let i = index as u64;
        if i < u64::from(SUB) {
            return i;
        }
        let exp = i / u64::from(SUB) + 3;
        let sub = i % u64::from(SUB);
        let upper = ((u128::from(SUB) + u128::from(sub) + 1) << (exp - 4)) - 1;
        u64::try_from(upper).unwrap_or(u64::MAX)
    }

    /// Records one latency.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.buckets[Self::index(ns)] += 1;
        self.count += 1;
        self.max_ns = self.max_ns.max(ns);
    }

    /// Adds `other`'s samples.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a += b;
        }
        self.count += other.count;
        self.max_ns = self.max_ns.max(other.max_ns);
    }

    /// An upper bound of the `q` quantile, in nanoseconds.
    pub fn quantile_ns(&self, q: f64) -> u64 {
        let want = ((self.count as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= want {
                return Self::upper(i).min(self.max_ns);
            }
        }
        self.max_ns
    }

    /// The largest latency recorded.
    pub fn max_ns(&self) -> u64 {
        self.max_ns
    }

    /// Samples recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Samples of `ns` or more (to the histogram's resolution, 1/16 of a power of two).
    pub fn count_at_least(&self, ns: u64) -> u64 {
        self.buckets[Self::index(ns)..].iter().sum()
    }
}

/// A call this slow or slower is looked into by [`SlowCalls`].
pub const SLOW_CALL_NS: u64 = 1_000_000;

/// Tells the calls of one thread that were slow because the machine took the CPU away
/// from those that were slow because of the logger: the thread's calls are cut into
/// windows of [`SlowCalls::WINDOW`], and at the end of each the thread's scheduler
/// statistics (`/proc/thread-self/schedstat`: time on a CPU, time runnable on a run
/// queue) are read. In a window with a call of [`SLOW_CALL_NS`] or more, the slowest
/// call less the window's run-queue time is what the call cost on the CPU or asleep
/// (waiting for a lock, a condition variable or a write): the logger's part.
///
/// One read of a 3-number file per 256 calls: about 1% of a 200 ns call's time.
pub struct SlowCalls {
    sched: Option<std::fs::File>,
    /// (on CPU, on a run queue) at the start of the window, ns.
    at_start: (u64, u64),
    window_start: std::time::Instant,
    in_window: u32,
    slowest_in_window: u64,
    /// Windows with a slow call.
    pub slow_windows: u64,
    /// The largest (slowest call - its window's run-queue time), ns.
    pub max_less_queued_ns: u64,
    /// Slow calls that stay at or over [`SLOW_CALL_NS`] once their window's run-queue
    /// time is taken off (at most one per window: its slowest).
    pub slow_less_queued: u64,
    /// The most time a window with a slow call spent neither on a CPU nor on a run
    /// queue (asleep), ns.
    pub max_asleep_ns: u64,
}

impl Default for SlowCalls {
    fn default() -> Self {
        let sched = std::fs::File::open("/proc/thread-self/schedstat").ok();
        let mut me = Self {
            sched,
            at_start: (0, 0),
            window_start: std::time::Instant::now(),
            in_window: 0,
            slowest_in_window: 0,
            slow_windows: 0,
            max_less_queued_ns: 0,
            slow_less_queued: 0,
            max_asleep_ns: 0,
        };
        me.at_start = me.read().unwrap_or((0, 0));
        me
    }
}

impl SlowCalls {
    /// Calls per window.
    pub const WINDOW: u32 = 256;

    /// Whether the kernel keeps the statistics (without them the audit says nothing).
    pub fn available(&self) -> bool {
        self.sched.is_some()
    }

    fn read(&self) -> Option<(u64, u64)> {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 96];
        let n = self.sched.as_ref()?.read_at(&mut buf, 0).ok()?;
        let mut fields = std::str::from_utf8(&buf[..n])
            .ok()?
            .split_ascii_whitespace();
        let on_cpu = fields.next()?.parse().ok()?;
        let queued = fields.next()?.parse().ok()?;
        Some((on_cpu, queued))
    }

    /// Records one call of `ns`.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.slowest_in_window = self.slowest_in_window.max(ns);
        self.in_window += 1;
        if self.in_window >= Self::WINDOW {
            self.close_window();
        }
    }

    #[cold]
    fn close_window(&mut self) {
        let now = std::time::Instant::now();
        let Some(at_end) = self.read() else {
            self.in_window = 0;
            self.slowest_in_window = 0;
            return;
        };
        if self.slowest_in_window >= SLOW_CALL_NS {
            let wall = now.duration_since(self.window_start).as_nanos() as u64;
            let on_cpu = at_end.0.saturating_sub(self.at_start.0);
            let queued = at_end.1.saturating_sub(self.at_start.1);
            let less = self.slowest_in_window.saturating_sub(queued);
            self.slow_windows += 1;
            self.max_less_queued_ns = self.max_less_queued_ns.max(less);
            self.slow_less_queued += u64::from(less >= SLOW_CALL_NS);
            self.max_asleep_ns = self.max_asleep_ns.max(wall.saturating_sub(on_cpu + queued));
        }
        self.at_start = at_end;
        self.window_start = now;
        self.in_window = 0;
        self.slowest_in_window = 0;
    }

    /// Adds `other`'s findings (another thread's).
    pub fn merge(&mut self, other: &SlowCalls) {
        self.slow_windows += other.slow_windows;
        self.max_less_queued_ns = self.max_less_queued_ns.max(other.max_less_queued_ns);
        self.slow_less_queued += other.slow_less_queued;
        self.max_asleep_ns = self.max_asleep_ns.max(other.max_asleep_ns);
    }
}

/// The process's peak resident memory (`VmHWM`), in KiB.
pub fn peak_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_quantiles_are_close_upper_bounds() {
        let mut h = Histogram::default();
        for ns in 1..=100_000u64 {
            h.record(ns);
        }
        let p99 = h.quantile_ns(0.99);
        assert!((99_000..=99_000 * 107 / 100).contains(&p99), "{p99}");
        assert_eq!(h.quantile_ns(1.0), 100_000);
        assert_eq!(h.count(), 100_000);
        for i in 0..Histogram::index(u64::MAX) {
            assert!(Histogram::index(Histogram::upper(i)) == i, "{i}");
        }
    }

    #[test]
    fn logger_names_round_trip() {
        for l in Logger::ALL {
            assert_eq!(l.name().parse::<Logger>(), Ok(l));
        }
    }
}
