//! Shared harness of the integration tests: every test re-executes its own binary as a
//! child process that logs through a real [`Writer`] to its real stdout (a pipe), while
//! the parent plays the reader (fast, slow, paused or gone) and checks the child's report.
//!
//! The child role is selected by the `WRITER_CHILD` environment variable (a JSON
//! [`ChildSpec`]); the child runs the same `#[test]` function, sees the variable, logs,
//! prints one JSON report line to stderr and exits (before the test harness could print
//! to a stdout the parent may have closed). The harness's own "running 1 test" line is
//! the only non-JSON line on the child's stdout, and the parent skips it.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

pub use logpolicy::level_index;
use logpolicy::writer::{
    install_panic_hook, DropReason, Output, Overflow, Writer, WriterConfig, WriterStats, REASONS,
};
use logpolicy::{LEVELS, LEVEL_ORDER};
use serde_json::{json, Value};
use tracing_core::Level;

pub const CHILD_ENV: &str = "WRITER_CHILD";
pub const LEVEL_NAMES: [&str; LEVELS] = ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"];

/// What the child does.
#[derive(Debug, Clone)]
pub struct ChildSpec {
    pub threads: u64,
    pub events_per_thread: u64,
    /// Events per second over all threads; 0 means as fast as possible.
    pub rate_per_sec: u64,
    pub capacity: usize,
    pub block: bool,
    pub flush_timeout_ms: u64,
    /// Bytes of padding per line (lines are about 110 bytes plus this).
    pub pad: usize,
    /// End with a panic on another thread (the panic hook installed, the guard never
    /// dropped) instead of dropping the guard.
    pub end_with_panic: bool,
    /// `WriterConfig::lock_spin` in µs (0: the default).
    pub lock_spin_us: u64,
    /// `WriterConfig::plain_writes`: the portable write path, as off Linux.
    pub plain_writes: bool,
}

impl Default for ChildSpec {
    fn default() -> Self {
        Self {
            threads: 2,
            events_per_thread: 100_000,
            rate_per_sec: 0,
            capacity: 4 << 20,
            block: false,
            flush_timeout_ms: 10_000,
            pad: 40,
            end_with_panic: false,
            lock_spin_us: std::env::var("WRITER_LOCK_SPIN_US")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
            plain_writes: false,
        }
    }
}

impl ChildSpec {
    fn to_json(&self) -> String {
        json!({
            "threads": self.threads,
            "events_per_thread": self.events_per_thread,
            "rate_per_sec": self.rate_per_sec,
            "capacity": self.capacity,
            "block": self.block,
            "flush_timeout_ms": self.flush_timeout_ms,
            "pad": self.pad,
            "end_with_panic": self.end_with_panic,
            "lock_spin_us": self.lock_spin_us,
            "plain_writes": self.plain_writes,
        })
        .to_string()
    }

    fn from_json(s: &str) -> Self {
        let v: Value = serde_json::from_str(s).expect("child spec is JSON");
        let u = |k: &str| v[k].as_u64().unwrap_or_else(|| panic!("child spec: {k}"));
        Self {
            threads: u("threads"),
            events_per_thread: u("events_per_thread"),
            rate_per_sec: u("rate_per_sec"),
            capacity: u("capacity") as usize,
            block: v["block"].as_bool().unwrap_or(false),
            flush_timeout_ms: u("flush_timeout_ms"),
            pad: u("pad") as usize,
            end_with_panic: v["end_with_panic"].as_bool().unwrap_or(false),
            lock_spin_us: v["lock_spin_us"].as_u64().unwrap_or(0),
            plain_writes: v["plain_writes"].as_bool().unwrap_or(false),
        }
    }
}

/// The level of event `i` of a thread: one error per 1,000 events, the rest info.
pub fn level_of(i: u64) -> Level {
    if i % 1000 == 999 {
        Level::ERROR
    } else {
        Level::INFO
    }
}

/// Call first in every test: in the child role this logs, reports and exits.
pub fn child_role_or_continue() {
    if let Ok(spec) = std::env::var(CHILD_ENV) {
        run_child(&ChildSpec::from_json(&spec));
        std::process::exit(0);
    }
}

fn vm_hwm_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Ends a window of calls that began with `switches_at_start` voluntary switches and
/// `slow[first_slow..]` still to come: if the thread slept since, its slow calls slept.
fn close_window(
    switches: &Option<VoluntarySwitches>,
    (switches_at_start, first_slow): (u64, usize),
    slow: &mut [(u64, u64, bool, u64, bool)],
) {
    if slow.len() > first_slow {
        let slept = switches
            .as_ref()
            .is_none_or(|s| s.read() > switches_at_start);
        for call in &mut slow[first_slow..] {
            call.4 = slept;
        }
    }
}

/// The calling thread's time spent waiting on a run queue (runnable, not running), from
/// `/proc/thread-self/schedstat`: tells a call the scheduler preempted from one that
/// waited for a lock, a condition variable or the pipe (those sleep, which is not
/// run-queue time).
struct RunQueueWait(std::fs::File);

impl RunQueueWait {
    /// `None` where the kernel does not keep scheduler statistics.
    fn open() -> Option<Self> {
        let file = std::fs::File::open("/proc/thread-self/schedstat").ok()?;
        let me = Self(file);
        me.try_read().map(|_| me)
    }
    fn try_read(&self) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 96];
        let n = self.0.read_at(&mut buf, 0).ok()?;
        let text = std::str::from_utf8(&buf[..n]).ok()?;
        text.split_ascii_whitespace().nth(1)?.parse().ok()
    }
    fn read(&self) -> u64 {
        self.try_read().unwrap_or(0)
    }
}

/// The calling thread's voluntary context switches, from `/proc/thread-self/status`: a
/// thread that waits for a lock, a condition variable or the pipe sleeps, and each sleep
/// is one. A call that is slow only because the machine took the CPU away (preemption,
/// or a hypervisor's steal time, which no per-thread counter shows) switches involuntarily
/// or not at all.
struct VoluntarySwitches(std::fs::File);

impl VoluntarySwitches {
    /// `None` where the kernel does not say.
    fn open() -> Option<Self> {
        let file = std::fs::File::open("/proc/thread-self/status").ok()?;
        let me = Self(file);
        me.try_read().map(|_| me)
    }
    fn try_read(&self) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 4096];
        let n = self.0.read_at(&mut buf, 0).ok()?;
        let text = std::str::from_utf8(&buf[..n]).ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))?
            .trim()
            .parse()
            .ok()
    }
    fn read(&self) -> u64 {
        self.try_read().unwrap_or(0)
    }
}

/// Latencies of `write_line`, in log2 buckets of nanoseconds.
#[derive(Clone)]
struct Latency {
    max_ns: u64,
    over_1ms: u64,
    buckets: [u64; 64],
    n: u64,
}

impl Default for Latency {
    fn default() -> Self {
        Self {
            max_ns: 0,
            over_1ms: 0,
            buckets: [0; 64],
            n: 0,
        }
    }
}

impl Latency {
    fn record(&mut self, ns: u64) {
        self.max_ns = self.max_ns.max(ns);
        if ns >= 1_000_000 {
            self.over_1ms += 1;
        }
        self.buckets[(64 - ns.leading_zeros()) as usize % 64] += 1;
        self.n += 1;
    }
    fn merge(&mut self, o: &Latency) {
        self.max_ns = self.max_ns.max(o.max_ns);
        self.over_1ms += o.over_1ms;
        for (a, b) in self.buckets.iter_mut().zip(o.buckets) {
            *a += b;
        }
        self.n += o.n;
    }
    /// An upper bound of the `q` quantile (the bucket's upper edge).
    fn quantile_ns(&self, q: f64) -> u64 {
        let want = (self.n as f64 * q).ceil() as u64;
        let mut seen = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            seen += b;
            if seen >= want {
                return 1u64 << i;
            }
        }
        self.max_ns
    }
}

fn run_child(spec: &ChildSpec) {
    let baseline_rss_kb = vm_hwm_kb();
    let config = WriterConfig::new(Output::Stdout)
        .capacity_bytes(spec.capacity)
        .overflow(if spec.block {
            Overflow::Block
        } else {
            Overflow::Drop
        })
        .flush_timeout(Duration::from_millis(spec.flush_timeout_ms))
        .plain_writes(spec.plain_writes);
    let config = if spec.lock_spin_us > 0 {
        config.lock_spin(Duration::from_micros(spec.lock_spin_us))
    } else {
        config
    };
    let (writer, guard) = Writer::new(config).expect("writer starts");
    if spec.end_with_panic {
        install_panic_hook(writer.clone());
    }
    let start = Instant::now();
    let per_thread_rate = spec.rate_per_sec as f64 / spec.threads as f64;
    let handles: Vec<_> = (0..spec.threads)
        .map(|t| {
            let writer = writer.clone();
            let spec = spec.clone();
            thread::spawn(move || {
                let mut emitted = [0u64; LEVELS];
                let mut lat = Latency::default();
                let mut control = Latency::default();
                // [ms since start, us, queued, us preempted, slept]
                let mut slow: Vec<(u64, u64, bool, u64, bool)> = Vec::new();
                let run_queue = RunQueueWait::open();
                let switches = VoluntarySwitches::open();
                // Calls are watched in windows of 32 (between two pacing sleeps): a slow
                // call in a window where the thread slept is a call that waited.
                let mut window = (0u64, 0usize);
                let mut control_buf = Vec::with_capacity(256);
                let mut line = Vec::with_capacity(256);
                let pad = "x".repeat(spec.pad);
                for i in 0..spec.events_per_thread {
                    if i % 32 == 0 {
                        close_window(&switches, window, &mut slow);
                    }
                    if per_thread_rate > 0.0 && i % 32 == 0 {
                        // Pacing (the workload's shape, not synchronisation).
                        let due = start + Duration::from_secs_f64(i as f64 / per_thread_rate);
                        let now = Instant::now();
                        if due > now {
                            thread::sleep(due - now);
                        }
                    }
                    if i % 32 == 0 {
                        window = (switches.as_ref().map_or(0, VoluntarySwitches::read), slow.len());
                    }
                    let level = level_of(i);
                    line.clear();
                    line.extend_from_slice(b"{\"ts\":\"");
                    logpolicy::clock::write_rfc3339(&mut line, std::time::SystemTime::now());
                    writeln!(
                        line,
                        "\",\"level\":\"{}\",\"target\":\"child\",\"thread\":{t},\"seq\":{i},\"msg\":\"event\",\"pad\":\"{pad}\"}}",
                        LEVEL_NAMES[level_index(level)]
                    )
                    .expect("format");
                    let waited_before = run_queue.as_ref().map(RunQueueWait::read);
                    let t0 = Instant::now();
                    let queued = writer.write_line(level, level <= Level::WARN, &line);
                    let ns = t0.elapsed().as_nanos() as u64;
                    lat.record(ns);
                    if ns >= 1_000_000 {
                        // How much of the call the thread spent runnable but not running:
                        // preempted by the machine, not waiting for anything of ours.
                        let preempted_ns = match (&run_queue, waited_before) {
                            (Some(rq), Some(before)) => rq.read().saturating_sub(before),
                            _ => 0,
                        };
                        slow.push((
                            start.elapsed().as_millis() as u64,
                            ns / 1000,
                            queued,
                            preempted_ns / 1000,
                            false,
                        ));
                    }
                    // Control: the same measurement around a copy of the line into a
                    // private buffer, to tell the machine's scheduling noise from ours.
                    let t1 = Instant::now();
                    control_buf.clear();
                    control_buf.extend_from_slice(std::hint::black_box(&line));
                    std::hint::black_box(&control_buf);
                    control.record(t1.elapsed().as_nanos() as u64);
                    emitted[level_index(level)] += 1;
                }
                close_window(&switches, window, &mut slow);
                (emitted, lat, control, slow)
            })
        })
        .collect();
    let mut emitted = [0u64; LEVELS];
    let mut lat = Latency::default();
    let mut control = Latency::default();
    let mut slow_calls = Vec::new();
    for h in handles {
        let (e, l, c, sl) = h.join().expect("producer thread");
        slow_calls.extend(sl);
        control.merge(&c);
        for (a, b) in emitted.iter_mut().zip(e) {
            *a += b;
        }
        lat.merge(&l);
    }
    let produced_ms = start.elapsed().as_secs_f64() * 1e3;
    let queued_at_end = writer.stats().queue_bytes;
    let drop_start = Instant::now();
    let mut finished = None;
    if spec.end_with_panic {
        // The hook runs on the panicking thread before `join` returns; the guard is
        // never dropped, so only the hook can have flushed what was queued.
        let panicked = thread::spawn(|| panic!("the child panics on purpose")).join();
        assert!(panicked.is_err());
        std::mem::forget(guard);
    } else {
        finished = Some(guard.finish());
    }
    let guard_drop_ms = drop_start.elapsed().as_secs_f64() * 1e3;
    let total_ms = start.elapsed().as_secs_f64() * 1e3;
    let stats = writer.stats();
    // What `finish` returned is final: nothing changed after it.
    assert!(
        finished.is_none_or(|f| f == stats),
        "{finished:?} then {stats:?}"
    );
    let report = json!({
        "emitted": emitted,
        "stats": stats_json(&stats),
        "balanced": stats.is_balanced(),
        "max_latency_us": lat.max_ns as f64 / 1e3,
        "p999_latency_us_upper": lat.quantile_ns(0.999) as f64 / 1e3,
        "p50_latency_us_upper": lat.quantile_ns(0.5) as f64 / 1e3,
        "latencies_over_1ms": lat.over_1ms,
        "control_max_us": control.max_ns as f64 / 1e3,
        "slow_calls_ms_us_queued_preempted_us_slept": slow_calls,
        "control_over_1ms": control.over_1ms,
        "baseline_rss_kb": baseline_rss_kb,
        "peak_rss_kb": vm_hwm_kb(),
        "produced_ms": produced_ms,
        "queued_bytes_at_end": queued_at_end,
        "guard_drop_ms": guard_drop_ms,
        "total_ms": total_ms,
    });
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{report}");
    let _ = err.flush();
}

pub fn stats_json(s: &WriterStats) -> Value {
    let levels: Vec<Value> = LEVEL_ORDER
        .iter()
        .map(|l| {
            let c = s.level(*l);
            let mut dropped = serde_json::Map::new();
            for r in DropReason::ALL {
                dropped.insert(r.as_str().to_owned(), json!(c.dropped.get(r)));
            }
            json!({
                "emitted": c.emitted, "accepted": c.accepted, "written": c.written,
                "queued": c.queued, "dropped": dropped, "dropped_total": c.dropped.total(),
            })
        })
        .collect();
    json!({
        "levels": levels,
        "bytes_written": s.bytes_written,
        "queue_bytes": s.queue_bytes,
        "peak_queue_bytes": s.peak_queue_bytes,
        "write_syscalls": s.write_syscalls,
        "io_errors": s.io_errors,
        "last_io_error": s.last_io_error.map(|k| format!("{k:?}")),
        "summary_lines": s.summary_lines,
        "exit_report": format!("{:?}", s.exit_report),
        "space_waits": s.space_waits,
    })
}

/// How the parent reads the child's stdout.
#[derive(Debug, Clone, Copy)]
pub enum Reader {
    /// As fast as possible.
    Fast,
    /// At about this many bytes per second.
    Paced(u64),
    /// Not at all for this long, then as fast as possible.
    PausedThenFast(Duration),
    /// Reads this many event lines, then closes the pipe.
    CloseAfter(u64),
}

/// What the parent saw on the child's stdout.
#[derive(Debug, Default)]
pub struct Delivered {
    pub events: [u64; LEVELS],
    /// Sums of the in-band summary lines, per level and per reason.
    pub reported: [u64; LEVELS],
    pub reported_by_reason: [u64; REASONS],
    pub reported_total: u64,
    pub summary_lines: u64,
    /// Lines that are not what the layer writes, and the last bytes when the output
    /// ended inside a line (`cut_at_end`): such a line was not delivered whole, even if
    /// only its line end is missing.
    pub malformed: Vec<String>,
    /// The output ended inside a line: the last of `malformed` is its first bytes.
    pub cut_at_end: bool,
    pub bytes: u64,
    pub read_secs: f64,
}

impl Delivered {
    fn tally(&mut self, line: &[u8]) {
        if line.is_empty() || line.starts_with(b"running ") {
            return; // the test harness's own banner
        }
        let marker = b"\"msg\":\"dropped events\"";
        if line.windows(marker.len()).any(|w| w == marker.as_slice()) {
            let v: Value = match serde_json::from_slice(line) {
                Ok(v) => v,
                Err(_) => {
                    self.malformed
                        .push(String::from_utf8_lossy(line).into_owned());
                    return;
                }
            };
            self.summary_lines += 1;
            for (i, key) in ["trace", "debug", "info", "warn", "error"]
                .iter()
                .enumerate()
            {
                self.reported[i] += v[*key].as_u64().unwrap_or(0);
            }
            for (i, r) in DropReason::ALL.iter().enumerate() {
                self.reported_by_reason[i] += v["reason"][r.as_str()].as_u64().unwrap_or(0);
            }
            self.reported_total += v["total"].as_u64().unwrap_or(0);
            return;
        }
        // An event line: {"ts":"<27 bytes>","level":"<LEVEL>",... ending in "}.
        let ok = line.starts_with(b"{\"ts\":\"") && line.ends_with(b"\"}");
        let level = line
            .get(36..)
            .and_then(|rest| rest.strip_prefix(b"\"level\":\"".as_slice()))
            .and_then(|rest| {
                LEVEL_NAMES.iter().position(|n| {
                    rest.starts_with(n.as_bytes()) && rest.get(n.len()) == Some(&b'"')
                })
            });
        match (ok, level) {
            (true, Some(i)) => self.events[i] += 1,
            _ => self
                .malformed
                .push(String::from_utf8_lossy(line).into_owned()),
        }
    }

    pub fn events_total(&self) -> u64 {
        self.events.iter().sum()
    }
}

/// The child's final report, plus what the parent read.
#[derive(Debug)]
pub struct Run {
    pub report: Value,
    pub delivered: Delivered,
    pub exit_ok: bool,
    pub stderr: String,
}

impl Run {
    /// The child exited cleanly and every line it wrote was whole.
    pub fn assert_clean(&self) {
        assert!(self.exit_ok, "child failed:\n{}", self.stderr);
        let malformed = &self.delivered.malformed;
        assert!(
            malformed.is_empty(),
            "malformed lines: {:?}",
            &malformed[..malformed.len().min(3)]
        );
    }

    pub fn emitted(&self, level: Level) -> u64 {
        self.report["emitted"][level_index(level)]
            .as_u64()
            .unwrap_or(u64::MAX)
    }
    pub fn level_stat(&self, level: Level, key: &str) -> u64 {
        self.report["stats"]["levels"][level_index(level)][key]
            .as_u64()
            .unwrap_or(u64::MAX)
    }
    pub fn dropped(&self, level: Level, reason: DropReason) -> u64 {
        self.report["stats"]["levels"][level_index(level)]["dropped"][reason.as_str()]
            .as_u64()
            .unwrap_or(u64::MAX)
    }
    pub fn stat(&self, key: &str) -> &Value {
        &self.report["stats"][key]
    }
    /// The drops per level of the summary lines the child's writer wrote to stderr (its
    /// last report, when stdout would not take it).
    pub fn reported_on_stderr(&self) -> [u64; LEVELS] {
        let mut out = [0; LEVELS];
        for v in self
            .stderr
            .lines()
            .filter(|l| l.contains("\"msg\":\"dropped events\""))
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        {
            for (i, key) in ["trace", "debug", "info", "warn", "error"]
                .iter()
                .enumerate()
            {
                out[i] += v[*key].as_u64().unwrap_or(0);
            }
        }
        out
    }
    pub fn num(&self, key: &str) -> f64 {
        self.report[key].as_f64().unwrap_or(f64::NAN)
    }
    /// Every level: emitted == written + dropped, nothing left queued.
    pub fn assert_accounting_exact(&self) {
        assert_eq!(self.report["balanced"], true, "{}", self.report);
        for level in LEVEL_ORDER {
            let (e, w, d, q) = (
                self.emitted(level),
                self.level_stat(level, "written"),
                self.level_stat(level, "dropped_total"),
                self.level_stat(level, "queued"),
            );
            assert_eq!(q, 0, "{level}: still queued at exit");
            assert_eq!(
                self.level_stat(level, "emitted"),
                e,
                "{level}: writer saw every call"
            );
            assert_eq!(
                e,
                w + d,
                "{level}: emitted {e} != written {w} + dropped {d}"
            );
        }
    }
}

/// Runs `test_name` (the calling test) as a child with `spec`, reading as `reader` says.
pub fn run(test_name: &str, spec: &ChildSpec, reader: Reader) -> Run {
    let exe = std::env::current_exe().expect("current exe");
    let mut child: Child = Command::new(exe)
        .args([
            test_name,
            "--exact",
            "--nocapture",
            "--quiet",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, spec.to_json())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn child");
    let mut stderr = child.stderr.take().expect("child stderr");
    let stderr_reader = thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let stdout = child.stdout.take().expect("child stdout");
    let delivered = read_stdout(stdout, reader);
    let status = child.wait().expect("wait child");
    let stderr = stderr_reader.join().expect("stderr reader");
    let report = stderr
        .lines()
        .rev()
        .find_map(|l| {
            serde_json::from_str::<Value>(l)
                .ok()
                .filter(|v| v.get("emitted").is_some())
        })
        .unwrap_or_else(|| panic!("child ({status}) printed no report; stderr:\n{stderr}"));
    Run {
        report,
        delivered,
        exit_ok: status.success(),
        stderr,
    }
}

fn read_stdout(mut stdout: ChildStdout, reader: Reader) -> Delivered {
    let mut d = Delivered::default();
    if let Reader::PausedThenFast(pause) = reader {
        // The reader is paused: this is the scenario under test, not a wait for an event.
        thread::sleep(pause);
    }
    let started = Instant::now();
    let mut buf = vec![
        0u8;
        if matches!(reader, Reader::Paced(_)) {
            16 * 1024
        } else {
            256 * 1024
        }
    ];
    let mut carry = Vec::with_capacity(512);
    loop {
        match reader {
            Reader::CloseAfter(n) if d.events_total() >= n => return d, // drops the read end
            Reader::Paced(rate) => {
                let due = started + Duration::from_secs_f64(d.bytes as f64 / rate as f64);
                let now = Instant::now();
                if due > now {
                    thread::sleep(due - now); // the reader's speed, not synchronisation
                }
            }
            _ => {}
        }
        let n = match stdout.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        d.bytes += n as u64;
        let mut data = &buf[..n];
        while let Some(pos) = data.iter().position(|b| *b == b'\n') {
            carry.extend_from_slice(&data[..pos]);
            d.tally(&carry);
            carry.clear();
            data = &data[pos + 1..];
        }
        carry.extend_from_slice(data);
    }
    if !carry.is_empty() {
        // A cut-off last line is malformed, even when only its line end is missing (the
        // writer counts it as not written: the output did not take all of it).
        d.malformed
            .push(String::from_utf8_lossy(&carry).into_owned());
        d.cut_at_end = true;
    }
    d.read_secs = started.elapsed().as_secs_f64();
    d
}

/// An empty directory of this test process's own under the temporary directory.
pub fn fresh_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
