//! Collects criterion's estimates after a run, prints a markdown table of figures and
//! ratios against the peers measured in the same run, and writes them as JSON under
//! `target/bench/`.

#![allow(dead_code)]

use std::hint::black_box;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use criterion::Criterion;
use tracing::Dispatch;

/// Names the one case a child process of the bench binary runs.
const CASE_ENV: &str = "LOGPOLICY_BENCH_CASE";

/// Benchmarks `f` with `make()`'s subscriber installed as the process's *global*
/// default, the way a service installs it (`init()`, `SubscriberExt::init`), rather than
/// a scoped one: a scoped default costs every event a thread-local lookup and a
/// `RefCell` borrow that services do not pay.
///
/// A process has one global default, so each case runs in a child process of this
/// bench binary (same arguments, so criterion's filters and options apply), which
/// writes its estimates where [`median_ns`] reads them. The parent runs every case in
/// turn, one at a time.
pub fn global_case(
    c: &mut Criterion,
    group: &str,
    id: &str,
    make: impl FnOnce() -> Dispatch,
    mut f: impl FnMut(),
) {
    let name = format!("{group}/{id}");
    match std::env::var(CASE_ENV) {
        Ok(case) if case == name => {
            tracing::dispatcher::set_global_default(make())
                .expect("the child sets the only global default");
            c.benchmark_group(group)
                .bench_function(id, |b| b.iter(&mut f));
        }
        // A child running another case.
        Ok(_) => {}
        Err(_) => {
            let exe = std::env::current_exe().expect("the bench binary's path");
            let status = Command::new(exe)
                .args(std::env::args_os().skip(1))
                .env(CASE_ENV, &name)
                .status();
            match status {
                Ok(s) if s.success() => {}
                Ok(s) => eprintln!("case {name}: child exited with {s}"),
                Err(e) => eprintln!("case {name}: could not start the child: {e}"),
            }
        }
    }
}

/// Per-round ns per iteration of cases measured by [`paired`], in turns.
pub struct Paired {
    /// Each case's name and its samples, one per round.
    pub cases: Vec<(&'static str, Vec<f64>)>,
}

impl Paired {
    fn samples(&self, name: &str) -> Option<&[f64]> {
        self.cases
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, s)| s.as_slice())
    }

    /// The median of `name`'s samples, in ns per iteration.
    pub fn median_ns(&self, name: &str) -> Option<f64> {
        let mut s = self.samples(name)?.to_vec();
        s.sort_by(f64::total_cmp);
        s.get(s.len() / 2).copied()
    }

    /// `a / b` in each round (the two samples taken one right after the other), sorted.
    pub fn ratios(&self, a: &str, b: &str) -> Vec<f64> {
        match (self.samples(a), self.samples(b)) {
            (Some(a), Some(b)) => sorted_ratios(a, b),
            _ => Vec::new(),
        }
    }

    /// The median of `a / b` within each batch of `rounds` rounds (see [`paired`]): how
    /// much a set of processes' own luck moves the ratio.
    pub fn batch_medians(&self, a: &str, b: &str, rounds: usize) -> Vec<f64> {
        let (Some(a), Some(b)) = (self.samples(a), self.samples(b)) else {
            return Vec::new();
        };
        a.chunks(rounds.max(1))
            .zip(b.chunks(rounds.max(1)))
            .map(|(a, b)| {
                let r = sorted_ratios(a, b);
                r[r.len() / 2]
            })
            .collect()
    }

    /// The median of [`ratios`](Self::ratios).
    pub fn median_ratio(&self, a: &str, b: &str) -> Option<f64> {
        let r = self.ratios(a, b);
        r.get(r.len() / 2).copied()
    }
}

/// `a[i] / b[i]` for each round, sorted.
fn sorted_ratios(a: &[f64], b: &[f64]) -> Vec<f64> {
    let mut r: Vec<f64> = a.iter().zip(b).map(|(a, b)| a / b).collect();
    r.sort_by(f64::total_cmp);
    r
}

/// Samples `n` cases in turns: warms each up (`sample(i, iterations)` gives case `i`'s
/// ns per iteration), sizes its samples to about [`PAIRED_SAMPLE`], then takes
/// `rounds` rounds of one sample per case, the order rotated every round. Per case,
/// its ns per iteration in each round.
fn in_turns<E>(
    n: usize,
    rounds: usize,
    mut sample: impl FnMut(usize, u64) -> Result<f64, E>,
) -> Result<Vec<Vec<f64>>, E> {
    let mut iters = Vec::with_capacity(n);
    for i in 0..n {
        let start = Instant::now();
        let mut per_iter = sample(i, 1)?;
        while start.elapsed() < PAIRED_WARM_UP {
            per_iter = sample(i, (0.05e9 / per_iter.max(1.0)).clamp(1.0, 1e9) as u64)?;
        }
        iters.push((PAIRED_SAMPLE.as_nanos() as f64 / per_iter.max(1.0)).clamp(1.0, 1e9) as u64);
    }
    let mut samples = vec![Vec::with_capacity(rounds); n];
    for round in 0..rounds {
        for k in 0..n {
            let i = (round + k) % n;
            samples[i].push(sample(i, iters[i])?);
        }
    }
    Ok(samples)
}

/// A child of [`paired`], with its pipes.
type Child = (
    std::process::Child,
    std::process::ChildStdin,
    BufReader<std::process::ChildStdout>,
);

/// A case of [`paired`]: its name and its subscriber.
pub type PairedCase = (&'static str, fn() -> Dispatch);

/// How long one sample of one case of [`paired`] runs.
const PAIRED_SAMPLE: Duration = Duration::from_millis(20);
/// How long each case of [`paired`] runs before its first sample.
const PAIRED_WARM_UP: Duration = Duration::from_millis(500);

/// Benchmarks `f` under each of `cases`' subscribers, each installed as the global
/// default of its own child process (see [`global_case`]), with the children alive
/// together and sampled in turns: rounds of one ~20 ms sample per case, one child
/// running at a time (the others wait on their pipes, all on one CPU), the order
/// rotated every round. Two cases' samples of one round are a fraction of a second
/// apart, so a machine whose speed drifts from one second to the next moves both:
/// compare cases by the median of their per-round ratios ([`Paired::median_ratio`]),
/// not by medians taken seconds apart. A process's own luck (where its code and data
/// landed) is sampled too: `batches` sets of fresh children, `rounds` rounds each, all
/// rounds pooled. `None` when criterion's filter leaves `group/id` out, or a child
/// failed.
pub fn paired(
    group: &str,
    id: &str,
    cases: &[PairedCase],
    (batches, rounds): (usize, usize),
    mut f: impl FnMut(),
) -> Option<Paired> {
    let name = format!("{group}/{id}");
    if let Ok(case) = std::env::var(CASE_ENV) {
        // A child: serve the case named, if it is one of these.
        let (_, make) = cases.iter().find(|(c, _)| case == format!("{name}/{c}"))?;
        tracing::dispatcher::set_global_default(make())
            .expect("the child sets the only global default");
        serve_samples(&mut f);
    }
    if !selected(&name) {
        return None;
    }
    let mut samples = vec![Vec::with_capacity(batches * rounds); cases.len()];
    for _ in 0..batches {
        match paired_batch(&name, cases, rounds) {
            Ok(batch) => {
                for (all, batch) in samples.iter_mut().zip(batch) {
                    all.extend(batch);
                }
            }
            Err(e) => {
                eprintln!("paired cases {name}: {e}");
                return None;
            }
        }
    }
    let cases = cases.iter().map(|(c, _)| *c).zip(samples).collect();
    Some(Paired { cases })
}

/// One batch of [`paired`]: fresh children, warmed up, sampled `rounds` times each;
/// per case, its ns per iteration in each round.
fn paired_batch(name: &str, cases: &[PairedCase], rounds: usize) -> std::io::Result<Vec<Vec<f64>>> {
    let exe = std::env::current_exe()?;
    let mut children = Vec::new();
    for (case, _) in cases {
        let mut child = pinned(&exe)
            .args(std::env::args_os().skip(1))
            .env(CASE_ENV, format!("{name}/{case}"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let input = child.stdin.take().ok_or(std::io::ErrorKind::BrokenPipe)?;
        let output = BufReader::new(child.stdout.take().ok_or(std::io::ErrorKind::BrokenPipe)?);
        children.push((child, input, output));
    }
    // One sample: `n` iterations in the child, its ns per iteration.
    let sample = |c: &mut Child, n: u64| -> std::io::Result<f64> {
        writeln!(c.1, "{n}")?;
        let mut line = String::new();
        loop {
            line.clear();
            if c.2.read_line(&mut line)? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            if let Some(ns) = line.trim().strip_prefix("sample-ns ") {
                let ns: f64 = ns.parse().map_err(|_| std::io::ErrorKind::InvalidData)?;
                return Ok(ns / n as f64);
            }
        }
    };
    let samples = in_turns(children.len(), rounds, |i, n| sample(&mut children[i], n))?;
    for (mut child, input, _) in children {
        drop(input);
        let _ = child.wait();
    }
    Ok(samples)
}

/// Samples `f` under each of `cases`' dispatchers in turns, in this process (each as
/// the scoped default while its sample runs): `rounds` rounds of one ~20 ms sample per
/// case, the order rotated every round, after a warm-up of each. For comparisons of
/// our own configurations whose targets are a few percent: two cases' samples of one
/// round are a fraction of a second apart, where criterion's cases are seconds apart
/// and a shared machine drifts by more than such a target between them. The cases'
/// dispatchers are alive together, and tracing combines their interest in a callsite
/// (one's `sometimes` makes every one's `sometimes`): only for cases that give every
/// callsite the same interest; others take [`paired`]. `None` when criterion's filter
/// leaves `group/id` out, or in a child process of another case.
pub fn interleaved(
    group: &str,
    id: &str,
    cases: &[(&'static str, Dispatch)],
    rounds: usize,
    f: fn(),
) -> Option<Paired> {
    if is_case_child() || !selected(&format!("{group}/{id}")) {
        return None;
    }
    // One sample: `n` calls of `f` under `d`, its ns per call.
    let sample = |d: &Dispatch, n: u64| -> f64 {
        tracing::callsite::rebuild_interest_cache();
        let ns = tracing::dispatcher::with_default(d, || {
            tracing::callsite::rebuild_interest_cache();
            let start = Instant::now();
            for _ in 0..n {
                f();
            }
            start.elapsed().as_nanos() as f64
        });
        tracing::callsite::rebuild_interest_cache();
        ns / n as f64
    };
    let Ok(samples) = in_turns(cases.len(), rounds, |i, n| {
        Ok::<_, std::convert::Infallible>(sample(&cases[i].1, n))
    });
    let cases = cases.iter().map(|(c, _)| *c).zip(samples).collect();
    Some(Paired { cases })
}

/// A command that runs `exe` on the machine's last CPU, if `taskset` is there (so that
/// the cases of [`paired`] are not compared across CPUs that a host may serve
/// differently), else anywhere.
fn pinned(exe: &std::path::Path) -> Command {
    static TASKSET: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let taskset = *TASKSET.get_or_init(|| {
        Command::new("taskset")
            .arg("-V")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    if taskset && cpus > 1 {
        let mut c = Command::new("taskset");
        c.arg("-c").arg((cpus - 1).to_string()).arg(exe);
        c
    } else {
        Command::new(exe)
    }
}

/// A [`paired`] child: runs `f` as many times as each line on standard input says and
/// answers `sample-ns <elapsed>`; exits at the end of its input.
fn serve_samples(f: &mut impl FnMut()) -> ! {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let Ok(n) = line.map(|l| l.trim().parse::<u64>().unwrap_or(0)) else {
            break;
        };
        let start = Instant::now();
        for _ in 0..n {
            f();
        }
        let ns = start.elapsed().as_nanos();
        if writeln!(out, "sample-ns {ns}")
            .and_then(|()| out.flush())
            .is_err()
        {
            break;
        }
    }
    std::process::exit(0)
}

/// Whether criterion's filter (the positional arguments after `--`) selects `name`:
/// criterion takes a regular expression; this reads it as alternatives (`a|b`) each
/// matched as a substring, as `cargo bench -- <filter>` is mostly used. No filter
/// selects everything.
fn selected(name: &str) -> bool {
    // Criterion's options that take a value (the value is not a filter).
    const VALUED: &[&str] = &[
        "--color",
        "-c",
        "--save-baseline",
        "-s",
        "--baseline",
        "-b",
        "--baseline-lenient",
        "--load-baseline",
        "--profile-time",
        "--sample-size",
        "--warm-up-time",
        "--measurement-time",
        "--nresamples",
        "--noise-threshold",
        "--confidence-level",
        "--significance-level",
        "--format",
        "--plotting-backend",
        "--output-format",
    ];
    let args: Vec<String> = std::env::args().skip(1).collect();
    // Listing, or profiling one case: nothing paired runs.
    if args.iter().any(|a| a == "--list" || a == "--profile-time") {
        return false;
    }
    let mut filters = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if VALUED.contains(&a.as_str()) {
            i += 2;
            continue;
        }
        if !a.starts_with('-') {
            filters.push(a.as_str());
        }
        i += 1;
    }
    filters.is_empty()
        || filters
            .iter()
            .flat_map(|f| f.split('|'))
            .any(|f| name.contains(f))
}

/// Whether this process is a child running one case (it must not print the report).
pub fn is_case_child() -> bool {
    std::env::var_os(CASE_ENV).is_some()
}

/// A layer that only looks at each event: the cost of "enabled" without output.
pub struct Touch;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Touch {
    fn on_event(&self, e: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        black_box(e.metadata().name());
    }
}

/// One comparison: ours against a peer, both measured in this run.
pub struct Row {
    /// What is measured.
    pub case: &'static str,
    /// Ours: (criterion group, benchmark id).
    pub ours: (&'static str, &'static str),
    /// The peer: (criterion group, benchmark id).
    pub peer: (&'static str, &'static str),
    /// The largest acceptable ours/peer ratio (`f64::INFINITY`: for information only).
    pub target: f64,
    /// Operations per criterion iteration (to report per event).
    pub per_iter: f64,
}

/// Cargo's target directory, where criterion writes and where we write.
pub fn target_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(d);
    }
    let exe = std::env::current_exe().unwrap_or_default();
    exe.ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "target"))
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target"))
}

/// The median of a benchmark, in ns per iteration, from criterion's output.
pub fn median_ns(group: &str, id: &str) -> Option<f64> {
    let path = target_dir()
        .join("criterion")
        .join(group)
        .join(id.replace('/', "_"))
        .join("new")
        .join("estimates.json");
    let text = std::fs::read_to_string(path).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v["median"]["point_estimate"].as_f64()
}

/// A comparison measured by [`paired`]: ours against a peer by the median of their
/// per-round ratios.
pub struct PairedRow<'a> {
    /// What is measured.
    pub case: &'static str,
    pub paired: &'a Paired,
    /// Ours and the peer: case names in `paired`.
    pub ours: &'static str,
    pub peer: &'static str,
    /// The largest acceptable ratio.
    pub target: f64,
    /// Operations per iteration.
    pub per_iter: f64,
}

/// Prints the table and writes `target/bench/<name>.json`; returns whether every
/// target was met.
pub fn report(name: &str, rows: &[Row], extra: serde_json::Value) -> bool {
    report_with(name, rows, &[], extra)
}

/// [`report`], with rows measured by [`paired`] after the others.
pub fn report_with(
    name: &str,
    rows: &[Row],
    paired: &[PairedRow<'_>],
    extra: serde_json::Value,
) -> bool {
    let mut all_met = true;
    let mut json_rows = Vec::new();
    println!("\n| case | ours (ns/event) | peer | peer (ns/event) | ratio | target | met |");
    println!("|---|---:|---|---:|---:|---:|---|");
    let measured = rows
        .iter()
        .map(|r| {
            let o = median_ns(r.ours.0, r.ours.1).map(|o| o / r.per_iter);
            let p = median_ns(r.peer.0, r.peer.1).map(|p| p / r.per_iter);
            (
                r.case,
                r.ours.1,
                r.peer.1,
                o.zip(p).map(|(o, p)| (o, p, o / p)),
                r.target,
            )
        })
        .chain(paired.iter().map(|r| {
            let o = r.paired.median_ns(r.ours).map(|o| o / r.per_iter);
            let p = r.paired.median_ns(r.peer).map(|p| p / r.per_iter);
            let ratio = r.paired.median_ratio(r.ours, r.peer);
            (
                r.case,
                r.ours,
                r.peer,
                o.zip(p).zip(ratio).map(|((o, p), q)| (o, p, q)),
                r.target,
            )
        }));
    for (case, ours, peer, figures, target_ratio) in measured {
        let Some((o, p, ratio)) = figures else {
            println!("| {case} | (not run) | {peer} | | | | |");
            continue;
        };
        let met = ratio <= target_ratio;
        let target = if target_ratio.is_finite() {
            format!("≤ {target_ratio}")
        } else {
            "—".to_owned()
        };
        all_met &= met;
        println!(
            "| {case} | {o:.2} | {peer} | {p:.2} | {ratio:.3} | {target} | {} |",
            if met { "yes" } else { "NO" }
        );
        json_rows.push(serde_json::json!({
            "case": case, "ours": ours, "peer": peer,
            "ours_ns": o, "peer_ns": p, "ratio": ratio, "target": target_ratio.is_finite().then_some(target_ratio), "met": met,
        }));
    }
    let dir = target_dir().join("bench");
    let _ = std::fs::create_dir_all(&dir);
    let doc =
        serde_json::json!({ "bench": name, "rows": json_rows, "extra": extra, "all_met": all_met });
    let path = dir.join(format!("{name}.json"));
    match std::fs::write(
        &path,
        serde_json::to_string_pretty(&doc).unwrap_or_default(),
    ) {
        Ok(()) => println!("\nwritten to {}", path.display()),
        Err(e) => println!("\ncould not write {}: {e}", path.display()),
    }
    all_met
}
