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
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use logpolicy::clock::ManualClock;
use logpolicy::writer::{Output, Writer, WriterConfig, WriterGuard};
use logpolicy::{Directives, Format, FormatLayer, Policy, PolicyFilter, PolicyLayer};
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

/// The environment variable that gives ours a clock that only moves when told
/// (`manual`): the filter, the format and the writer read it instead of the system
/// clock, whose read straight from the vDSO cannot run under valgrind. For counting
/// instructions (`request-loop` under callgrind), never for timing: every line carries
/// the same timestamp, and what is counted for the clock (about 100 instructions a
/// line) is this clock's reads, not the time-stamp counter's.
pub const CLOCK_ENV: &str = "LOGPOLICY_BENCH_CLOCK";

/// Installs `logger` as the global default subscriber, at level `info`.
pub fn install(logger: Logger) -> Installed {
    let mut installed = Installed {
        logger,
        ours: None,
        non_blocking: None,
    };
    match logger {
        Logger::Ours => {
            let clock = match std::env::var(CLOCK_ENV).as_deref() {
                Err(_) | Ok("system") => None,
                Ok("manual") => Some(ManualClock::new(SystemTime::now())),
                Ok(other) => panic!("{CLOCK_ENV}={other:?}: expected system or manual"),
            };
            let mut config = WriterConfig::new(Output::Stdout)
                .capacity_bytes(OUR_CAPACITY_BYTES)
                .flush_timeout(Duration::from_secs(10));
            if let Some(clock) = &clock {
                config = config.clock(Arc::new(clock.clone()));
            }
            let (writer, guard) = Writer::new(config).expect("writer");
            // As `logpolicy::init` builds it: the output linked to the policy (sampling,
            // budget, accounting, summaries).
            let filter = match &clock {
                None => PolicyFilter::from_directives("info").expect("directives"),
                Some(clock) => {
                    let info: Directives = "info".parse().expect("directives");
                    let policy = Policy::new(vec![PolicyLayer::baseline(info)]);
                    PolicyFilter::with_clock(policy, clock.clone())
                }
            };
            match std::env::var(OURS_OUTPUT_ENV).as_deref() {
                Ok("discard") => install_ours(&filter, logpolicy::NullSink, clock),
                Ok("filter-only") => {
                    let subscriber = tracing_subscriber::registry().with(filter);
                    tracing::subscriber::set_global_default(subscriber).expect("global default");
                }
                _ => install_ours(&filter, writer.clone(), clock),
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
fn install_ours<K: logpolicy::LineSink>(
    filter: &PolicyFilter,
    sink: K,
    clock: Option<ManualClock>,
) {
    let mut format = FormatLayer::new(Format::Json, sink).with_policy(filter);
    if let Some(clock) = clock {
        format = format.with_clock(clock);
    }
    let subscriber = tracing_subscriber::registry()
        .with(filter.clone())
        .with(format);
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
/// queue, preemptions included) are read. In a window with a call of [`SLOW_CALL_NS`] or
/// more:
///
/// - the slowest call less the window's run-queue time is what the call cost on the CPU,
///   asleep, or off a CPU the thread was running on (`max_less_queued_ns`);
/// - the window's time neither on a CPU nor on a run queue is either sleep (waiting for a
///   lock, a condition variable or a write) or time the thread's CPU spent on what the
///   kernel does not count as the thread's running: the hypervisor running something
///   else (steal) or interrupt handling. Whether the thread slept is read after each
///   slow window (its voluntary context switches, `/proc/thread-self/status`): when the
///   count has not moved since the last read (the previous slow window, or the end of
///   each of the thread's first windows), it did not sleep in this window, and that
///   time is the machine's and is taken off too (`max_logger_ns`); when it moved, none
///   is taken off (it may have slept on the logger).
///
/// One read of a 3-number file per 256 calls (about 1% of a 200 ns call's time), and
/// one of the thread's status per slow window and after each of its first 64 windows.
pub struct SlowCalls {
    sched: Option<std::fs::File>,
    status: Option<std::fs::File>,
    /// The thread's voluntary context switches at the last read of `status`.
    voluntary: Option<u64>,
    /// The counters at the start of the window.
    at_start: Counters,
    window_start: std::time::Instant,
    in_window: u32,
    slowest_in_window: u64,
    windows_closed: u64,
    /// Windows with a slow call.
    pub slow_windows: u64,
    /// The largest (slowest call - its window's run-queue time), ns.
    pub max_less_queued_ns: u64,
    /// Slow calls that stay at or over [`SLOW_CALL_NS`] once their window's run-queue
    /// time is taken off (at most one per window: its slowest).
    pub slow_less_queued: u64,
    /// The most time a window with a slow call spent neither on a CPU nor on a run
    /// queue (asleep, or off a CPU taken by the host or interrupts), ns.
    pub max_asleep_ns: u64,
    /// Windows with a slow call in which the thread may have slept (its voluntary
    /// context switches moved since the last read, or could not be read).
    pub slept_windows: u64,
    /// The largest slowest call less its window's run-queue time and, in a window
    /// where the thread did not sleep, less the time the CPU was taken from the thread
    /// while it ran: the logger's part, ns.
    pub max_logger_ns: u64,
    /// Slow calls that stay at or over [`SLOW_CALL_NS`] once the machine's part is
    /// taken off.
    pub slow_logger: u64,
    /// The most time a window where the thread did not sleep spent off the CPU it was
    /// running on (steal or interrupts), ns.
    pub max_taken_ns: u64,
}

/// A thread's counters at one instant.
#[derive(Debug, Clone, Copy, Default)]
struct Counters {
    on_cpu_ns: u64,
    queued_ns: u64,
}

impl Default for SlowCalls {
    fn default() -> Self {
        let sched = std::fs::File::open("/proc/thread-self/schedstat").ok();
        let status = std::fs::File::open("/proc/thread-self/status").ok();
        let mut me = Self {
            sched,
            status,
            voluntary: None,
            at_start: Counters::default(),
            window_start: std::time::Instant::now(),
            in_window: 0,
            slowest_in_window: 0,
            windows_closed: 0,
            slow_windows: 0,
            max_less_queued_ns: 0,
            slow_less_queued: 0,
            max_asleep_ns: 0,
            slept_windows: 0,
            max_logger_ns: 0,
            slow_logger: 0,
            max_taken_ns: 0,
        };
        me.at_start = me.read().unwrap_or_default();
        me.voluntary = me.voluntary_switches();
        me
    }
}

impl SlowCalls {
    /// Calls per window.
    pub const WINDOW: u32 = 256;
    /// Windows after each of which the thread's voluntary context switches are read,
    /// whether slow or not.
    const STARTUP_WINDOWS: u64 = 64;

    /// Whether the kernel keeps the statistics (without them the audit says nothing).
    pub fn available(&self) -> bool {
        self.sched.is_some()
    }

    fn read(&self) -> Option<Counters> {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 96];
        let n = self.sched.as_ref()?.read_at(&mut buf, 0).ok()?;
        let mut fields = std::str::from_utf8(&buf[..n])
            .ok()?
            .split_ascii_whitespace();
        let on_cpu_ns = fields.next()?.parse().ok()?;
        let queued_ns = fields.next()?.parse().ok()?;
        Some(Counters {
            on_cpu_ns,
            queued_ns,
        })
    }

    /// The thread's voluntary context switches so far.
    fn voluntary_switches(&self) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 4096];
        let n = self.status.as_ref()?.read_at(&mut buf, 0).ok()?;
        std::str::from_utf8(&buf[..n])
            .ok()?
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))?
            .trim()
            .parse()
            .ok()
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
            let start = self.at_start;
            let on_cpu = at_end.on_cpu_ns.saturating_sub(start.on_cpu_ns);
            let queued = at_end.queued_ns.saturating_sub(start.queued_ns);
            let off = wall.saturating_sub(on_cpu + queued);
            let voluntary = self.voluntary_switches();
            let slept = voluntary.is_none() || voluntary != self.voluntary;
            self.voluntary = voluntary;
            let less = self.slowest_in_window.saturating_sub(queued);
            let taken = if slept { 0 } else { off };
            let logger = less.saturating_sub(taken);
            self.slow_windows += 1;
            self.max_less_queued_ns = self.max_less_queued_ns.max(less);
            self.slow_less_queued += u64::from(less >= SLOW_CALL_NS);
            self.max_asleep_ns = self.max_asleep_ns.max(off);
            self.slept_windows += u64::from(slept);
            self.max_logger_ns = self.max_logger_ns.max(logger);
            self.slow_logger += u64::from(logger >= SLOW_CALL_NS);
            self.max_taken_ns = self.max_taken_ns.max(taken);
        } else if self.windows_closed < Self::STARTUP_WINDOWS {
            // A thread's start (its first allocations, lazy initialisation) may sleep:
            // read the count after each of its first windows, so that a later slow
            // window is not taken for one that slept for what happened then.
            self.voluntary = self.voluntary_switches();
        }
        self.windows_closed += 1;
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
        self.slept_windows += other.slept_windows;
        self.max_logger_ns = self.max_logger_ns.max(other.max_logger_ns);
        self.slow_logger += other.slow_logger;
        self.max_taken_ns = self.max_taken_ns.max(other.max_taken_ns);
    }

    /// The findings, for a report.
    pub fn to_json(&self) -> Value {
        let us = |ns: u64| ns as f64 / 1e3;
        json!({
            "windows": self.slow_windows,
            "max_less_queued_us": us(self.max_less_queued_ns),
            "still_slow": self.slow_less_queued,
            "max_asleep_us": us(self.max_asleep_ns),
            "slept_windows": self.slept_windows,
            "max_logger_us": us(self.max_logger_ns),
            "logger_slow": self.slow_logger,
            "max_taken_us": us(self.max_taken_ns),
        })
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
