//! Four loggers against three readers of their stdout, in one run.
//!
//! Each (logger, reader) pair runs as a child process (this binary re-executed with
//! `child <logger> <seconds> <events/s>`) that logs JSON from 2 threads for a fixed time,
//! one `error!` per 1,000 events, timing every macro call. Two loads: `max` (producers
//! as fast as they can: what each logger costs the caller) and `offered` (200,000
//! events/s in all, about 40 MB/s of JSON: a heavy but possible service, whose error
//! bytes fit the slow reader and, for 5 s, our reserve). The parent reads
//! the child's stdout as fast as possible, at 1 MiB/s, or not at all for 5 s and then
//! fast; once the child says its producers are done, every reader drains the rest fast.
//! Results: a markdown table on stdout and `target/bench/reader-scenarios.json`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use logpolicy_bench::{install, peak_rss_kb, Histogram, Logger, SlowCalls, OUR_CAPACITY_BYTES};
use serde_json::{json, Value};

const PRODUCE_SECS: f64 = 6.0;
/// The offered load of the `offered` matrix, events/s over both threads.
const OFFERED_RATE: u64 = 200_000;
const THREADS: u64 = 2;
/// No producer thread logs more than this, whatever the duration.
const MAX_EVENTS_PER_THREAD: u64 = 50_000_000;
const PAUSE: Duration = Duration::from_secs(5);
const SLOW_RATE: u64 = 1 << 20;
/// A child still running this long after its producers should have stopped is killed.
const RUN_TIMEOUT: Duration = Duration::from_secs(60);
const PRODUCED_MARK: &str = "PRODUCERS DONE";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reader {
    Fast,
    Paced,
    Paused,
}

impl Reader {
    const ALL: [Reader; 3] = [Reader::Fast, Reader::Paced, Reader::Paused];
    fn name(self) -> &'static str {
        match self {
            Reader::Fast => "fast",
            Reader::Paced => "1 MiB/s",
            Reader::Paused => "paused 5 s",
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("child") {
        let logger: Logger = args[2].parse().expect("logger");
        let secs: f64 = args[3].parse().expect("seconds");
        let rate: u64 = args[4].parse().expect("events/s");
        child(logger, secs, rate);
        return;
    }
    parent();
}

// ---------------------------------------------------------------- child

fn child(logger: Logger, secs: f64, rate: u64) {
    let per_thread = rate as f64 / THREADS as f64;
    let baseline_kb = peak_rss_kb();
    let installed = install(logger);
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(secs);
    let pad = "x".repeat(40);
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let pad = pad.clone();
            thread::spawn(move || {
                let mut hist = Histogram::default();
                let mut slow = SlowCalls::default();
                let (mut info, mut error) = (0u64, 0u64);
                for i in 0..MAX_EVENTS_PER_THREAD {
                    if per_thread > 0.0 && i % 32 == 0 {
                        // The offered load's shape, not synchronisation.
                        let due = start + Duration::from_secs_f64(i as f64 / per_thread);
                        if let Some(left) = due.checked_duration_since(Instant::now()) {
                            thread::sleep(left);
                        }
                    }
                    let t0 = Instant::now();
                    if t0 >= deadline {
                        break;
                    }
                    if i % 1000 == 999 {
                        tracing::error!(target: "bench", thread = t, seq = i, pad = %pad, "event failed");
                        error += 1;
                    } else {
                        tracing::info!(target: "bench", thread = t, seq = i, pad = %pad, "event");
                        info += 1;
                    }
                    let ns = t0.elapsed().as_nanos() as u64;
                    hist.record(ns);
                    slow.record(ns);
                }
                (hist, slow, info, error, Instant::now())
            })
        })
        .collect();
    let mut hist = Histogram::default();
    let mut slow = SlowCalls::default();
    let (mut info, mut error) = (0u64, 0u64);
    let mut last_done = start;
    for h in handles {
        let (h, s, i, e, done) = h.join().expect("producer");
        hist.merge(&h);
        slow.merge(&s);
        info += i;
        error += e;
        last_done = last_done.max(done);
    }
    let produced_secs = (last_done - start).as_secs_f64();
    let peak_during_kb = peak_rss_kb();
    eprintln!("{PRODUCED_MARK}");
    let flush_start = Instant::now();
    let own = installed.finish();
    let report = json!({
        "logger": logger.name(),
        "info_emitted": info,
        "error_emitted": error,
        "produced_secs": produced_secs,
        "events_per_sec": (info + error) as f64 / produced_secs,
        "p50_us": hist.quantile_ns(0.5) as f64 / 1e3,
        "p99_us": hist.quantile_ns(0.99) as f64 / 1e3,
        "max_us": hist.max_ns() as f64 / 1e3,
        "calls": hist.count(),
        "calls_1ms": hist.count_at_least(1_000_000),
        "calls_50ms": hist.count_at_least(50_000_000),
        "slow_calls": slow.available().then(|| slow.to_json()),
        "baseline_rss_kb": baseline_kb,
        "peak_rss_kb": peak_rss_kb().max(peak_during_kb),
        "flush_secs": flush_start.elapsed().as_secs_f64(),
        "own": own,
    });
    eprintln!("{report}");
}

// ---------------------------------------------------------------- parent

#[derive(Debug, Default)]
struct Delivered {
    info: u64,
    error: u64,
    other: u64,
    /// Sums of our in-band "dropped events" lines.
    reported_info: u64,
    reported_error: u64,
    reported_total: u64,
    summary_lines: u64,
    bytes: u64,
}

impl Delivered {
    fn tally(&mut self, line: &[u8]) {
        if line.is_empty() {
            return;
        }
        if memchr::memmem::find(line, b"\"msg\":\"dropped events\"").is_some() {
            if let Ok(v) = serde_json::from_slice::<Value>(line) {
                self.summary_lines += 1;
                self.reported_info += v["info"].as_u64().unwrap_or(0);
                self.reported_error += v["error"].as_u64().unwrap_or(0);
                self.reported_total += v["total"].as_u64().unwrap_or(0);
                return;
            }
        }
        const KEY: &[u8] = b"\"level\":\"";
        match memchr::memmem::find(line, KEY).and_then(|p| line.get(p + KEY.len())) {
            Some(b'I') => self.info += 1,
            Some(b'E') => self.error += 1,
            _ => self.other += 1,
        }
    }
}

fn run_one(logger: Logger, reader: Reader, rate: u64) -> Value {
    run_child(logger, reader, rate, false)
}

/// The control of the max load: ours with its output discarded (the filter and the JSON
/// line as in `run_one`, then nothing: no queue, no lock, no writer thread, no I/O), so
/// the calls slow in it are slow because of the harness and the machine alone.
const CONTROL: &str = "max, control: ours with output discarded";

fn run_child(logger: Logger, reader: Reader, rate: u64, control: bool) -> Value {
    let exe = std::env::current_exe().expect("current exe");
    let mut command = Command::new(exe);
    if control {
        command.env(logpolicy_bench::OURS_OUTPUT_ENV, "discard");
    }
    let mut child = command
        .args([
            "child",
            logger.name(),
            &PRODUCE_SECS.to_string(),
            &rate.to_string(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn child");
    let pid = rustix::process::Pid::from_child(&child);
    let produced = Arc::new(AtomicBool::new(false));
    let finished = Arc::new(AtomicBool::new(false));
    // Watchdog: bounds the run whatever the logger does.
    let watchdog = {
        let finished = Arc::clone(&finished);
        thread::spawn(move || {
            let until = Instant::now() + Duration::from_secs_f64(PRODUCE_SECS) + RUN_TIMEOUT;
            while Instant::now() < until {
                if finished.load(Ordering::Acquire) {
                    return false;
                }
                thread::sleep(Duration::from_millis(50));
            }
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            true
        })
    };
    let stderr = child.stderr.take().expect("stderr");
    let stderr_thread = {
        let produced = Arc::clone(&produced);
        thread::spawn(move || {
            let mut report = Value::Null;
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if line == PRODUCED_MARK {
                    produced.store(true, Ordering::Release);
                } else if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    if v.get("info_emitted").is_some() {
                        report = v;
                    }
                }
            }
            report
        })
    };
    let mut stdout = child.stdout.take().expect("stdout");
    let mut d = Delivered::default();
    if reader == Reader::Paused {
        thread::sleep(PAUSE); // the scenario: nobody reads
    }
    let started = Instant::now();
    let mut buf = vec![0u8; 256 * 1024];
    let mut carry: Vec<u8> = Vec::with_capacity(1024);
    let mut paced_bytes = 0u64;
    loop {
        let pacing = reader == Reader::Paced && !produced.load(Ordering::Acquire);
        let want = if pacing {
            let due = started + Duration::from_secs_f64(paced_bytes as f64 / SLOW_RATE as f64);
            if let Some(left) = due.checked_duration_since(Instant::now()) {
                thread::sleep(left.min(Duration::from_millis(20)));
                continue;
            }
            16 * 1024
        } else {
            buf.len()
        };
        let n = match stdout.read(&mut buf[..want]) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if pacing {
            paced_bytes += n as u64;
        }
        d.bytes += n as u64;
        let mut data = &buf[..n];
        while let Some(pos) = memchr::memchr(b'\n', data) {
            if carry.is_empty() {
                d.tally(&data[..pos]);
            } else {
                carry.extend_from_slice(&data[..pos]);
                d.tally(&carry);
                carry.clear();
            }
            data = &data[pos + 1..];
        }
        carry.extend_from_slice(data);
    }
    // An unterminated tail is no whole line (a writer stopped inside it).
    if !carry.is_empty() {
        d.other += 1;
    }
    let status = child.wait().expect("wait");
    finished.store(true, Ordering::Release);
    let killed = watchdog.join().unwrap_or(false);
    let report = stderr_thread.join().expect("stderr thread");
    let mut v = summarise(logger, reader, &report, &d, status.success(), killed);
    v["load"] = json!(if control {
        CONTROL.to_owned()
    } else {
        load_name(rate)
    });
    if control {
        // Nothing is written: delivery and its accounting say nothing there.
        for k in [
            "error_delivered",
            "info_delivered",
            "lost_uncounted",
            "ours_exact",
        ] {
            v[k] = Value::Null;
        }
    }
    v
}

fn load_name(rate: u64) -> String {
    if rate == 0 {
        "max".to_owned()
    } else {
        format!("offered {rate}/s")
    }
}

fn summarise(
    logger: Logger,
    reader: Reader,
    r: &Value,
    d: &Delivered,
    ok: bool,
    killed: bool,
) -> Value {
    let u = |v: &Value| v.as_u64().unwrap_or(0);
    let info_emitted = u(&r["info_emitted"]);
    let error_emitted = u(&r["error_emitted"]);
    // What the logger counted as dropped: ours, from the in-band lines (cross-checked
    // against its stats below); non_blocking, from its error counter (all levels).
    let counted = if logger == Logger::Ours {
        d.reported_total
    } else {
        u(&r["own"]["dropped_counted"])
    };
    let emitted = info_emitted + error_emitted;
    let delivered = d.info + d.error;
    let uncounted = emitted as i64 - delivered as i64 - counted as i64;
    // Ours, line for line against its own counters: lines the reader got that were
    // counted dropped (positive) or counted written and never arrived (negative), and
    // drops counted but never reported (in-band, or on stderr at exit).
    let own = &r["own"];
    let exact = (logger == Logger::Ours).then(|| {
        let written = u(&own["info"]["written"]) + u(&own["error"]["written"]);
        json!({
            "delivered_minus_counted_written": delivered as i64 - written as i64,
            "dropped_not_reported": u(&own["dropped_counted"]) as i64 - counted as i64,
        })
    });
    json!({
        "logger": logger.name(),
        "reader": reader.name(),
        "exit_ok": ok,
        "killed_by_timeout": killed,
        "events_per_sec": r["events_per_sec"],
        "p50_us": r["p50_us"],
        "p99_us": r["p99_us"],
        "max_us": r["max_us"],
        "calls_1ms": r["calls_1ms"],
        "calls_50ms": r["calls_50ms"],
        "slow_calls": r["slow_calls"],
        "peak_rss_kb": r["peak_rss_kb"],
        "baseline_rss_kb": r["baseline_rss_kb"],
        "rss_growth_kb": u(&r["peak_rss_kb"]).saturating_sub(u(&r["baseline_rss_kb"])),
        "error_emitted": error_emitted,
        "error_delivered": d.error,
        "info_emitted": info_emitted,
        "info_delivered": d.info,
        "info_counted_dropped": if logger == Logger::Ours { json!(d.reported_info) } else { Value::Null },
        "dropped_counted_all_levels": counted,
        "lost_uncounted": uncounted,
        "ours_exact": exact,
        "unparsed_lines": d.other,
        "summary_lines": d.summary_lines,
        "bytes_read": d.bytes,
        "produced_secs": r["produced_secs"],
        "flush_secs": r["flush_secs"],
        "logger_stats": r["own"],
    })
}

fn fmt_us(v: &Value) -> String {
    let us = v.as_f64().unwrap_or(f64::NAN);
    if us >= 1e6 {
        format!("{:.2} s", us / 1e6)
    } else if us >= 1e3 {
        format!("{:.1} ms", us / 1e3)
    } else {
        format!("{us:.1} µs")
    }
}

/// The slowest call less its run-queue wait, and how many calls stayed at 1 ms or more
/// once theirs was taken off (see `SlowCalls`).
fn less_queued(r: &Value) -> String {
    slow_call(r, "max_less_queued_us", "still_slow")
}

/// The slowest call less the machine's part, and how many calls stayed at 1 ms or more
/// once it was taken off (see `SlowCalls`).
fn logger_part(r: &Value) -> String {
    slow_call(r, "max_logger_us", "logger_slow")
}

/// The slow-call figure `max` of a run, with the count `still` beside it.
fn slow_call(r: &Value, max: &str, still: &str) -> String {
    let s = &r["slow_calls"];
    if s.is_null() {
        return "n/a".to_owned();
    }
    if s["windows"] == 0 {
        return "no call ≥ 1 ms".to_owned();
    }
    format!("{} ({})", fmt_us(&s[max]), s[still])
}

/// A count, or "n/a" where the run has none.
fn or_na(v: &Value) -> String {
    v.as_u64().map_or("n/a".to_owned(), |n| n.to_string())
}

fn table(results: &[Value]) -> String {
    let mut out = String::new();
    out.push_str("| load | logger | reader | events/s | p99 call | max call | calls ≥ 1 ms / ≥ 50 ms | max call less run-queue wait (still ≥ 1 ms) | less the machine's part (still ≥ 1 ms) | peak RSS (growth) | errors delivered/emitted | info emitted | info delivered | counted dropped (info / all levels) | lost uncounted | ours: delivered − counted written / drops not reported |\n");
    out.push_str(
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in results {
        let u = |k: &str| r[k].as_u64().unwrap_or(0);
        out.push_str(&format!(
            "| {} | {} | {} | {:.0} | {} | {} | {} / {} | {} | {} | {:.1} MiB (+{:.1}) | {}/{} | {} | {} | {} / {} | {} | {} |\n",
            r["load"].as_str().unwrap_or(""),
            r["logger"].as_str().unwrap_or(""),
            r["reader"].as_str().unwrap_or(""),
            r["events_per_sec"].as_f64().unwrap_or(0.0),
            fmt_us(&r["p99_us"]),
            fmt_us(&r["max_us"]),
            u("calls_1ms"),
            u("calls_50ms"),
            less_queued(r),
            logger_part(r),
            u("peak_rss_kb") as f64 / 1024.0,
            u("rss_growth_kb") as f64 / 1024.0,
            or_na(&r["error_delivered"]),
            u("error_emitted"),
            u("info_emitted"),
            or_na(&r["info_delivered"]),
            or_na(&r["info_counted_dropped"]),
            u("dropped_counted_all_levels"),
            or_na(&r["lost_uncounted"]),
            if r["ours_exact"].is_null() {
                "n/a".to_owned()
            } else {
                format!(
                    "{} / {}",
                    r["ours_exact"]["delivered_minus_counted_written"],
                    r["ours_exact"]["dropped_not_reported"]
                )
            },
        ));
    }
    out
}

fn parent() {
    let only: Option<Logger> = std::env::args().nth(1).and_then(|a| a.parse().ok());
    // A second argument, `max` or `offered`, runs only that load.
    let only_load = std::env::args().nth(2);
    let mut results = Vec::new();
    for rate in [0, OFFERED_RATE] {
        let load = if rate == 0 { "max" } else { "offered" };
        if only_load.as_deref().is_some_and(|l| l != load) {
            continue;
        }
        for reader in Reader::ALL {
            for logger in Logger::ALL {
                if only.is_some_and(|o| o != logger) {
                    continue;
                }
                eprintln!(
                    "{}: {logger} behind the {} reader ...",
                    load_name(rate),
                    reader.name()
                );
                let r = run_one(logger, reader, rate);
                eprintln!("  {r}");
                results.push(r);
            }
            // One control per reader, so that it is exposed to the machine as long as
            // ours is.
            if rate == 0 && only.is_none_or(|o| o == Logger::Ours) {
                eprintln!("{CONTROL}, {} reader ...", reader.name());
                let r = run_child(Logger::Ours, reader, 0, true);
                eprintln!("  {r}");
                results.push(r);
            }
        }
    }
    let mut out = table(&results);
    let targets = targets(&results);
    out.push_str("\n| target (ours, drop mode) | measured | met |\n|---|---|---|\n");
    for (name, measured, met) in &targets {
        out.push_str(&format!(
            "| {name} | {measured} | {} |\n",
            if *met { "met" } else { "NOT met" }
        ));
    }
    println!("{out}");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    let _ = std::fs::create_dir_all(&dir);
    let json = json!({
        "config": {"produce_secs": PRODUCE_SECS, "threads": THREADS, "error_every": 1000,
                   "offered_events_per_sec": OFFERED_RATE,
                   "slow_reader_bytes_per_sec": SLOW_RATE, "pause_secs": PAUSE.as_secs(),
                   "our_capacity_bytes": OUR_CAPACITY_BYTES},
        "results": results,
        "targets": targets.iter().map(|(n, m, ok)| json!({"target": n, "measured": m, "met": ok})).collect::<Vec<_>>(),
    });
    let path = dir.join("reader-scenarios.json");
    match std::fs::File::create(&path).and_then(|mut f| {
        f.write_all(
            serde_json::to_string_pretty(&json)
                .unwrap_or_default()
                .as_bytes(),
        )
    }) {
        Ok(()) => eprintln!("wrote {}", path.display()),
        Err(e) => eprintln!("cannot write {}: {e}", path.display()),
    }
}

fn targets(results: &[Value]) -> Vec<(String, String, bool)> {
    let find_in = |load: &str, logger: Logger, reader: Reader| {
        results
            .iter()
            .find(|r| {
                r["load"] == load && r["logger"] == logger.name() && r["reader"] == reader.name()
            })
            .cloned()
            .unwrap_or(Value::Null)
    };
    let offered = load_name(OFFERED_RATE);
    // Delivery, latency, errors and memory under the offered load; the rate ratio and
    // the callers' latency at full speed. A target whose runs were not part of this
    // invocation (one logger, one load) is left out.
    let find = |logger: Logger, reader: Reader| find_in(&offered, logger, reader);
    let rate = |v: &Value| v["events_per_sec"].as_f64().unwrap_or(0.0);
    let ran = |vs: &[&Value]| vs.iter().all(|v| !v.is_null());
    let ours_fast = find(Logger::Ours, Reader::Fast);
    let ours_max = find_in("max", Logger::Ours, Reader::Fast);
    let nb_max = find_in("max", Logger::NonBlockingLossy, Reader::Fast);
    let ours_paced = find(Logger::Ours, Reader::Paced);
    let ours_paused = find(Logger::Ours, Reader::Paused);
    let mut t = Vec::new();
    if ran(&[&ours_fast]) {
        let all_delivered = ours_fast["lost_uncounted"] == 0
            && ours_fast["dropped_counted_all_levels"] == 0
            && ours_fast["info_delivered"] == ours_fast["info_emitted"];
        t.push((
            format!("fast reader, {offered}: every line delivered"),
            format!(
                "{}/{} info, {}/{} errors, {} counted dropped",
                ours_fast["info_delivered"],
                ours_fast["info_emitted"],
                ours_fast["error_delivered"],
                ours_fast["error_emitted"],
                ours_fast["dropped_counted_all_levels"]
            ),
            all_delivered,
        ));
    }
    if ran(&[&ours_max, &nb_max]) {
        let ratio = rate(&ours_max) / rate(&nb_max).max(1.0);
        t.push((
            "fast reader, max load: >= 2x the producer rate of non_blocking (lossy)".to_owned(),
            format!(
                "{:.0} vs {:.0} events/s ({ratio:.2}x)",
                rate(&ours_max),
                rate(&nb_max)
            ),
            ratio >= 2.0,
        ));
    }
    // At max load two producers, the writer's thread and the reader share the machine's
    // cores, so some calls are slow only because the scheduler ran something else in the
    // middle of them (every logger's are), and on a virtual machine also because the
    // host ran something else on the CPU a producer was running on; what is left once
    // that is taken off is the logger's own: on a CPU, or asleep waiting for a lock or
    // for space (see `SlowCalls`).
    for reader in Reader::ALL {
        let v = find_in("max", Logger::Ours, reader);
        if !ran(&[&v]) || v["slow_calls"].is_null() {
            continue;
        }
        let s = &v["slow_calls"];
        let logger = s["max_logger_us"].as_f64().unwrap_or(0.0);
        t.push((
            format!(
                "max load, {} reader: slowest call less the machine's part (run-queue wait; CPU taken while running) < 1 ms",
                reader.name()
            ),
            format!(
                "{} ({} raw; less run-queue wait {}; CPU taken while running {}; slept in {} of {} slow windows)",
                logger_part(&v),
                fmt_us(&v["max_us"]),
                less_queued(&v),
                fmt_us(&s["max_taken_us"]),
                s["slept_windows"],
                s["windows"],
            ),
            logger < 1000.0,
        ));
    }
    // The same harness with nothing written, in the same run: what the machine alone
    // does to a call (a virtual machine whose host pauses it shows calls of milliseconds
    // that are neither on a run queue nor asleep, part of them counted as CPU time).
    let worst = |load: &str| {
        let runs: Vec<Value> = Reader::ALL
            .iter()
            .map(|&r| find_in(load, Logger::Ours, r))
            .filter(|v| !v.is_null() && !v["slow_calls"].is_null())
            .collect();
        let us = |v: &Value, k: &str| v["slow_calls"][k].as_f64().unwrap_or(0.0);
        let max = |k: &str| runs.iter().map(|v| us(v, k)).fold(0.0_f64, f64::max);
        let sum = |k: &str| {
            runs.iter()
                .map(|v| v["slow_calls"][k].as_u64().unwrap_or(0))
                .sum::<u64>()
        };
        (
            runs.len(),
            max("max_logger_us"),
            sum("logger_slow"),
            max("max_taken_us"),
            sum("slept_windows"),
            sum("windows"),
        )
    };
    let (ours_runs, ours_worst, ours_slow, ..) = worst("max");
    let (control_runs, control_worst, control_slow, taken, slept, windows) = worst(CONTROL);
    if ours_runs == Reader::ALL.len() && control_runs == ours_runs {
        t.push((
            "max load, every reader: slowest call less the machine's part < 1 ms, or at most 1.1x the control's (ours with output discarded, same harness, one run per reader)".to_owned(),
            format!(
                "ours {} ({ours_slow} calls ≥ 1 ms) at worst; control {} ({control_slow}; CPU taken while running up to {}; slept in {slept} of {windows} slow windows)",
                fmt_us(&json!(ours_worst)),
                fmt_us(&json!(control_worst)),
                fmt_us(&json!(taken)),
            ),
            ours_worst < 1000.0 || ours_worst <= 1.1 * control_worst,
        ));
    }
    if ran(&[&ours_paced, &ours_fast]) {
        let paced = rate(&ours_paced) / rate(&ours_fast).max(1.0);
        t.push((
            format!("1 MiB/s reader, {offered}: >= 90% of the fast-reader rate"),
            format!("{:.0} events/s ({:.0}%)", rate(&ours_paced), paced * 100.0),
            paced >= 0.9,
        ));
    }
    if ran(&[&ours_paused]) {
        let max = ours_paused["max_us"].as_f64().unwrap_or(f64::MAX);
        t.push((
            format!("paused reader, {offered}: max call latency < 1 ms"),
            fmt_us(&ours_paused["max_us"]),
            max < 1000.0,
        ));
    }
    for (r, v) in [
        (Reader::Fast, &ours_fast),
        (Reader::Paced, &ours_paced),
        (Reader::Paused, &ours_paused),
    ] {
        if !ran(&[v]) {
            continue;
        }
        t.push((
            format!(
                "{} reader, {offered}: 100% of errors delivered, zero uncounted losses",
                r.name()
            ),
            format!(
                "errors {}/{}, uncounted {}",
                v["error_delivered"], v["error_emitted"], v["lost_uncounted"]
            ),
            v["error_delivered"] == v["error_emitted"] && v["lost_uncounted"] == 0,
        ));
    }
    if ran(&[&ours_fast, &ours_paced, &ours_paused]) {
        let bound_kb = (OUR_CAPACITY_BYTES as u64 + (2 << 20)) / 1024;
        let worst = [&ours_fast, &ours_paced, &ours_paused]
            .iter()
            .map(|v| v["rss_growth_kb"].as_u64().unwrap_or(u64::MAX))
            .max()
            .unwrap_or(u64::MAX);
        t.push((
            "RSS growth within the queue bound (4 MiB + 2 MiB for chunks, stacks, registry)"
                .to_owned(),
            format!("worst +{:.1} MiB", worst as f64 / 1024.0),
            worst <= bound_kb,
        ));
    }
    t
}
