//! Collects criterion's estimates after a run, prints a markdown table of figures and
//! ratios against the peers measured in the same run, and writes them as JSON under
//! `target/bench/`.

#![allow(dead_code)]

use std::hint::black_box;
use std::path::PathBuf;
use std::process::Command;

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

/// Prints the table and writes `target/bench/<name>.json`; returns whether every
/// target was met.
pub fn report(name: &str, rows: &[Row], extra: serde_json::Value) -> bool {
    let mut all_met = true;
    let mut json_rows = Vec::new();
    println!("\n| case | ours (ns/event) | peer | peer (ns/event) | ratio | target | met |");
    println!("|---|---:|---|---:|---:|---:|---|");
    for r in rows {
        let (Some(o), Some(p)) = (median_ns(r.ours.0, r.ours.1), median_ns(r.peer.0, r.peer.1))
        else {
            println!("| {} | (not run) | {} | | | | |", r.case, r.peer.1);
            continue;
        };
        let (o, p) = (o / r.per_iter, p / r.per_iter);
        let ratio = o / p;
        let met = ratio <= r.target;
        let target = if r.target.is_finite() {
            format!("≤ {}", r.target)
        } else {
            "—".to_owned()
        };
        all_met &= met;
        println!(
            "| {} | {:.2} | {} | {:.2} | {:.3} | {} | {} |",
            r.case,
            o,
            r.peer.1,
            p,
            ratio,
            target,
            if met { "yes" } else { "NO" }
        );
        json_rows.push(serde_json::json!({
            "case": r.case, "ours": r.ours.1, "peer": r.peer.1,
            "ours_ns": o, "peer_ns": p, "ratio": ratio, "target": r.target.is_finite().then_some(r.target), "met": met,
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
