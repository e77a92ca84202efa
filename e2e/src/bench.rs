//! What the e2e benches (`plugin-bench`, `scale-bench`) share: their `main` (the
//! demo's too), the simulated pods of the operator's `push-bench` as a child process,
//! and what `/proc` says of a process they measure.

use std::future::Future;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, ExitCode, Stdio};

use crate::{Error, Result};

/// Runs `bench` on a runtime of two workers and turns its result into the exit code
/// (the error on stderr, after `name`).
pub fn run<F: Future<Output = Result<()>>>(name: &str, bench: F) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("{name}: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(bench) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `push-bench agents ARGS...`: simulated pods, stopped (stdin closed, then killed)
/// when dropped.
pub struct SimulatedPods(Child);

impl SimulatedPods {
    /// Starts `push_bench agents` with `args` (listening on `port`, if not the
    /// simulated pods' own) and waits for its `ready` line; returns it and the rest of
    /// its stdout.
    pub fn start(
        push_bench: &Path,
        port: Option<u16>,
        args: &[&str],
    ) -> Result<(SimulatedPods, BufReader<ChildStdout>)> {
        let mut command = Command::new(push_bench);
        if let Some(port) = port {
            command.env("PUSH_BENCH_AGENTS_PORT", port.to_string());
        }
        let mut child = command
            .arg("agents")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| Error(format!("{}: {e}", push_bench.display())))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| Error("the simulated pods' stdout".into()))?;
        let pods = SimulatedPods(child);
        let mut stdout = BufReader::new(stdout);
        let mut ready = String::new();
        stdout
            .read_line(&mut ready)
            .map_err(|e| Error(format!("the simulated pods: {e}")))?;
        if ready.trim() != "ready" {
            return Err(Error(format!(
                "the simulated pods ({args:?}) said {ready:?}, not ready (is `ulimit -n` high enough?)"
            )));
        }
        Ok((pods, stdout))
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for SimulatedPods {
    fn drop(&mut self) {
        drop(self.0.stdin.take());
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A line of `/proc/PID/status` in MiB (`"VmRSS:"`, `"VmHWM:"`; 0 when unknown).
pub fn status_mib(pid: Option<u32>, key: &str) -> f64 {
    let status = pid
        .and_then(|p| std::fs::read_to_string(format!("/proc/{p}/status")).ok())
        .unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}

/// The machine's CPU time so far, over all its cores, in seconds: how much of it was
/// busy (user, system, interrupts, stolen by the host) and how much there was in all
/// (busy, idle and waiting for I/O), from the first line of `/proc/stat`. Zeros when
/// unknown.
pub fn machine_cpu_seconds() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: Vec<f64> = stat
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("cpu "))
        .unwrap_or_default()
        .split_whitespace()
        .map(|v| v.parse::<f64>().unwrap_or(0.0))
        .collect();
    let at = |i: usize| ticks.get(i).copied().unwrap_or(0.0) / 100.0;
    // user nice system idle iowait irq softirq steal (guest time is within user).
    let busy = at(0) + at(1) + at(2) + at(5) + at(6) + at(7);
    (busy, busy + at(3) + at(4))
}

/// The CPU seconds (user + system) a process used so far (0 when unknown).
pub fn cpu_seconds(pid: Option<u32>) -> f64 {
    stat_cpu_seconds(&pid.map(|p| format!("/proc/{p}/stat")))
}

/// The CPU seconds (user + system) a process's main thread used so far (0 when
/// unknown): the operator's controller loop runs there, its workers elsewhere.
pub fn main_thread_cpu_seconds(pid: Option<u32>) -> f64 {
    stat_cpu_seconds(&pid.map(|p| format!("/proc/{p}/task/{p}/stat")))
}

fn stat_cpu_seconds(path: &Option<String>) -> f64 {
    let stat = path
        .as_ref()
        .and_then(|p| std::fs::read_to_string(p).ok())
        .unwrap_or_default();
    // After the command's `)`: state is field 3, utime 14 and stime 15.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}
