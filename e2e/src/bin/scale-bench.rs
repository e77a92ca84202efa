//! `scale-bench`: the whole path at scale, on the real API server. N opted-in Pod objects
//! (50,000 by default; 1% of them hang and 1% refuse), the real operator binary listing
//! and watching them, then one `LogPolicy` selecting all of them applied, changed and
//! deleted.
//!
//! ```sh
//! export LOGPOLICY_E2E_DIR=/tmp/logpolicy-e2e-bench; eval "$(e2e/cluster/up)"
//! cargo build --profile test -p logpolicy-operator -p logpolicy-demo-service -p kubectl-logpolicy --bins
//! ulimit -n 20000      # the simulated pods listen 15,000 to a process
//! cargo run --profile test -p logpolicy-e2e --bin scale-bench              # 50,000 pods
//! cargo run --profile test -p logpolicy-e2e --bin scale-bench -- 10000     # fewer
//! ```
//!
//! The pods are Pod objects (Running, Ready, `podIP` 127.0.x.y), created 16 API calls at
//! a time as the e2e harness does, whose admin endpoints are the simulated ones of the
//! operator's `push-bench` (`push-bench agents FROM TO N KEY HANG REFUSE report`: one
//! process per 15,000 pods, listening on the live and hanging pods' loopback addresses
//! (one open file each), verifying each signed
//! document as the layer does, and printing `applied POD UNIX_MS` for each one it
//! accepts). The operator runs with the chart's settings and watches only the bench's
//! namespace.
//!
//! Measured, per step (apply, change, delete):
//! - from the `kubectl` call to the last live pod applied (the agents' own clock);
//! - until the LogPolicy's status says every live pod applied (apply, change);
//! - the operator's CPU seconds and its RSS after the step, and its peak RSS;
//! - from the change to the last live pod applied: the operator's CPU seconds (and its
//!   controller loop's, on its main thread), the simulated pods', the rest (the API
//!   server, etcd, the bench), and how busy the machine's cores were (`/proc/stat`):
//!   near 100%, the machine, not the operator's waiting, sets the time. Two bounds
//!   follow: all that CPU over the machine's cores (the least time this machine allows
//!   for it), and the operator's CPU alone over the cores (the least time with cores of
//!   its own as many as here; never less than its controller loop's, on one core);
//! - the API server's requests during the step, by verb and resource (every client's:
//!   the bench's own status reads are counted apart).
//!
//! Targets (issue "A 5,000-node cluster"): 5 s from apply to the last live pod applied
//! after the first contact, 256 MiB of RSS, status writes batched (not one per pod).
//! Results: a markdown table on stdout and `target/bench/scale.json`; the operator's
//! output in `target/bench/scale-operator.log`.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kube::Api;
use logpolicy_e2e::bench::{
    self, cpu_seconds, machine_cpu_seconds, main_thread_cpu_seconds, status_mib, SimulatedPods,
};
use logpolicy_e2e::binaries::Binaries;
use logpolicy_e2e::cluster::repo_root;
use logpolicy_e2e::operator::OperatorOptions;
use logpolicy_e2e::pod::create_running_pods_at;
use logpolicy_e2e::process::wait_for;
use logpolicy_e2e::{Cluster, Error, Operator, Result, Scenario};
use logpolicy_operator::simulated::{addr, pod_name};
use logpolicy_operator::LogPolicy;

fn main() -> ExitCode {
    let pods = match std::env::args().nth(1).map(|a| a.parse::<usize>()) {
        None => 50_000,
        Some(Ok(n)) if (200..=62_500).contains(&n) => n,
        Some(_) => {
            eprintln!("scale-bench: the argument is the number of pods, 200 to 62500");
            return ExitCode::from(2);
        }
    };
    bench::run("scale-bench", bench(pods))
}

/// When each simulated pod last accepted a document (ms since the epoch; 0: never).
type Applied = Arc<Mutex<Vec<u64>>>;

/// How many documents the simulated pods accepted so far: a step that pushes some pods
/// twice shows more than one a live pod.
static ACCEPTED: AtomicU64 = AtomicU64::new(0);

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The API server's request counts by `verb resource`, from its own metrics.
fn api_requests(cluster: &Cluster) -> Result<BTreeMap<String, f64>> {
    let text = cluster.kubectl(&["get", "--raw", "/metrics"])?;
    let mut counts = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
    {
        let Some((labels, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let label = |name: &str| {
            labels
                .split(&format!("{name}=\""))
                .nth(1)
                .and_then(|r| r.split('"').next())
                .unwrap_or("")
                .to_owned()
        };
        let key = format!("{} {}", label("verb"), label("resource"));
        *counts.entry(key).or_insert(0.0) += value.parse::<f64>().unwrap_or(0.0);
    }
    Ok(counts)
}

fn requests_between(
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
) -> BTreeMap<String, u64> {
    after
        .iter()
        .filter_map(|(k, v)| {
            let d = v - before.get(k).copied().unwrap_or(0.0);
            (d >= 1.0).then(|| (k.clone(), d as u64))
        })
        .collect()
}

/// What one step measured.
struct Step {
    name: &'static str,
    /// Documents the pods accepted in the step (until its status, and 2 s more).
    accepted: u64,
    to_last_live_applied: f64,
    to_status: Option<f64>,
    cpu_seconds: f64,
    /// From the change to the last live pod applied: where the CPU went.
    to_last: CpuShare,
    rss_mib: f64,
    requests: BTreeMap<String, u64>,
    status_reads: u64,
    /// `applied/matched/failed` as the status said last (when it was read after the pods).
    status_seen: String,
}

/// Where the CPU went in a window.
#[derive(Clone, Copy)]
struct CpuShare {
    operator: f64,
    /// The operator's main thread: its controller loop and the watches it reads, on
    /// one core at a time.
    controller: f64,
    pods: f64,
    /// The CPU seconds every process on the machine used (`/proc/stat`): the operator,
    /// the simulated pods, the API server and etcd, the bench.
    busy: f64,
    machine_busy: f64,
}

/// CPU seconds so far: the operator's, its controller loop's, the simulated pods', the
/// machine's (busy, all).
fn cpu_now(operator: &Operator, agents: &[SimulatedPods]) -> [f64; 5] {
    let (busy, all) = machine_cpu_seconds();
    let pods = agents.iter().map(|a| cpu_seconds(Some(a.pid()))).sum();
    [
        cpu_seconds(operator.pid()),
        main_thread_cpu_seconds(operator.pid()),
        pods,
        busy,
        all,
    ]
}

impl CpuShare {
    fn between(a: [f64; 5], b: [f64; 5]) -> Self {
        let all = b[4] - a[4];
        CpuShare {
            operator: b[0] - a[0],
            controller: b[1] - a[1],
            pods: b[2] - a[2],
            busy: b[3] - a[3],
            machine_busy: if all > 0.0 { (b[3] - a[3]) / all } else { 0.0 },
        }
    }
}

/// How often a step reads the LogPolicy's status.
const STATUS_POLL: Duration = Duration::from_millis(100);

/// What the LogPolicy `scale`'s status says.
struct StatusRead {
    /// Its `appliedPods`.
    applied: Option<usize>,
    /// Whether it is of the object's generation.
    current: bool,
    /// `applied/matched/failed`.
    counts: String,
}

/// Reads the status in this process: a `kubectl get` costs about 0.1 CPU second, and at
/// 10 reads a second that was CPU taken from what is measured.
fn status_of(policies: &Api<LogPolicy>) -> Result<StatusRead> {
    let lp = tokio::task::block_in_place(|| {
        tokio::runtime::Handle::current().block_on(policies.get("scale"))
    })
    .map_err(|e| Error(format!("reading LogPolicy scale: {e}")))?;
    let status = lp.status.unwrap_or_default();
    Ok(StatusRead {
        applied: usize::try_from(status.applied_pods).ok(),
        current: status.observed_generation.is_some()
            && status.observed_generation == lp.metadata.generation,
        counts: format!(
            "{}/{}/{}",
            status.applied_pods, status.matched_pods, status.failed_pods
        ),
    })
}

/// How long a step waits for the status to say every live pod applied, once they have.
const STATUS_WAIT: Duration = Duration::from_secs(120);

fn policy(ns: &str, level: &str) -> String {
    serde_json::json!({
        "apiVersion": "logpolicy.dev/v1beta1", "kind": "LogPolicy",
        "metadata": {"name": "scale", "namespace": ns},
        "spec": {
            "selector": {"matchLabels": {"app": "scale"}},
            "targets": [{"target": "bench", "level": level}],
            "reason": "scale-bench",
        },
    })
    .to_string()
}

/// The simulated pods' admin port: not `push-bench`'s own, so that both can run at once.
const AGENTS_PORT: u16 = 19_191;

/// Simulated pods a process listens for.
const AGENTS_PER_PROCESS: usize = 15_000;

/// Starts `push-bench agents` for pods `here` of `pods`, and a thread that records in
/// `applied` when each of them accepted a document.
fn spawn_agents(
    push_bench: &std::path::Path,
    pods: usize,
    trusted_keys: &str,
    (hang, refuse): (usize, usize),
    here: std::ops::Range<usize>,
    applied: &Applied,
) -> Result<SimulatedPods> {
    let [from, to, all, hang, refuse] =
        [here.start, here.end, pods, hang, refuse].map(|n| n.to_string());
    let args = [
        &*from,
        &*to,
        &*all,
        trusted_keys,
        &*hang,
        &*refuse,
        "report",
    ];
    let (agents, stdout) = SimulatedPods::start(push_bench, Some(AGENTS_PORT), &args)?;
    let applied = applied.clone();
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(std::result::Result::ok) {
            let mut parts = line.split_whitespace().skip(1);
            let (Some(pod), Some(ms)) = (parts.next(), parts.next()) else {
                continue;
            };
            let i = pod
                .strip_prefix("pod-")
                .and_then(|i| i.parse::<usize>().ok());
            if let (Some(i), Ok(ms), Ok(mut times)) = (i, ms.parse::<u64>(), applied.lock()) {
                if let Some(t) = times.get_mut(i) {
                    *t = ms;
                    ACCEPTED.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    });
    Ok(agents)
}

#[allow(clippy::too_many_arguments)]
fn step(
    name: &'static str,
    cluster: &Cluster,
    operator: &Operator,
    agents: &[SimulatedPods],
    policies: &Api<LogPolicy>,
    applied: &Applied,
    live: usize,
    change: &dyn Fn() -> Result<String>,
    with_status: bool,
) -> Result<Step> {
    let before = api_requests(cluster)?;
    let accepted_before = ACCEPTED.load(Ordering::Relaxed);
    let cpu_before = cpu_now(operator, agents);
    let t0 = unix_ms();
    let started = Instant::now();
    change()?;
    let mut status_reads = 0;
    let mut to_status = None;
    let mut read_at = started;
    // Each status the bench read that differs from the one before, and when.
    let mut trail: Vec<(f64, String)> = Vec::new();
    let mut follow = |status: &StatusRead| {
        let seen = format!("{} (current: {})", status.counts, status.current);
        if trail.last().is_none_or(|(_, s)| *s != seen) {
            trail.push((started.elapsed().as_secs_f64(), seen));
        }
    };
    let last = wait_for(Duration::from_secs(300), "every live pod to apply", || {
        if with_status && to_status.is_none() && read_at.elapsed() >= STATUS_POLL {
            read_at = Instant::now();
            status_reads += 1;
            let status = status_of(policies)?;
            follow(&status);
            if status.applied == Some(live) && status.current {
                to_status = Some(started.elapsed().as_secs_f64());
            }
        }
        let times = applied.lock().map_err(|_| Error("poisoned".into()))?;
        let done = times[..live].iter().all(|&t| t >= t0);
        Ok(done.then(|| times[..live].iter().copied().max().unwrap_or(t0)))
    })?;
    let to_last = CpuShare::between(cpu_before, cpu_now(operator, agents));
    let to_last_live = last.saturating_sub(t0) as f64 / 1000.0;
    let spread = {
        let times = applied.lock().map_err(|_| Error("poisoned".into()))?;
        let mut after: Vec<u64> = times[..live].iter().map(|t| t.saturating_sub(t0)).collect();
        after.sort_unstable();
        let at = |share: usize| after.get(after.len() * share / 100).copied().unwrap_or(0);
        format!(
            "the first after {:.2} s, a tenth after {:.2} s, half after {:.2} s",
            at(0) as f64 / 1000.0,
            at(10) as f64 / 1000.0,
            at(50) as f64 / 1000.0
        )
    };
    eprintln!("scale-bench: {name}: every live pod applied after {to_last_live:.2} s ({spread})");
    let mut status_seen = String::new();
    if with_status && to_status.is_none() {
        // Not an error when it does not: the figure is then what the status said last.
        to_status = wait_for(
            STATUS_WAIT,
            "the status to say every live pod applied",
            || {
                if read_at.elapsed() < STATUS_POLL {
                    return Ok(None);
                }
                read_at = Instant::now();
                status_reads += 1;
                let status = status_of(policies)?;
                follow(&status);
                status_seen = status.counts;
                Ok((status.applied == Some(live) && status.current)
                    .then(|| started.elapsed().as_secs_f64()))
            },
        )
        .ok();
    }
    if to_status.is_none_or(|s| s > to_last_live + 1.0) {
        // The status lagged the pods: what it said on the way.
        for (at, seen) in &trail {
            eprintln!("scale-bench: {name}: at {at:.2} s the status said {seen}");
        }
    }
    if with_status {
        eprintln!(
            "scale-bench: {name}: status {} (applied/matched/failed: {})",
            to_status.map_or(
                format!("not there after {} s", STATUS_WAIT.as_secs()),
                |s| format!("after {s:.2} s")
            ),
            status_seen.trim()
        );
    }
    // Let the change's last reports and status writes land before counting.
    std::thread::sleep(Duration::from_secs(2));
    let after = api_requests(cluster)?;
    let accepted = ACCEPTED.load(Ordering::Relaxed) - accepted_before;
    eprintln!("scale-bench: {name}: the pods accepted {accepted} documents ({live} live pods)");
    Ok(Step {
        accepted,
        name,
        status_seen: status_seen.trim().to_owned(),
        to_last_live_applied: to_last_live,
        to_status,
        cpu_seconds: cpu_seconds(operator.pid()) - cpu_before[0],
        to_last,
        rss_mib: status_mib(operator.pid(), "VmRSS:"),
        requests: requests_between(&before, &after),
        status_reads,
    })
}

async fn bench(pods: usize) -> Result<()> {
    let (hang, refuse) = (pods / 100, pods / 100);
    let live = pods - hang - refuse;
    let s = Scenario::without_operator("scale-bench").await?;
    let ns = s.namespace().to_owned();
    let cluster = Cluster::shared()?;
    let operator = Operator::start(OperatorOptions {
        set: vec![("watchNamespaces".to_owned(), format!("{{{ns}}}"))],
        ..OperatorOptions::default()
    })?;
    let push_bench = Binaries::get()?.dir.join("push-bench");
    let applied: Applied = Arc::new(Mutex::new(vec![0; pods]));
    // A process may hold 20,000 open files here (and cannot raise it): 15,000 pods a
    // process, each listening on its own share.
    let mut agents = Vec::new();
    for from in (0..pods).step_by(AGENTS_PER_PROCESS) {
        let to = (from + AGENTS_PER_PROCESS).min(pods);
        agents.push(spawn_agents(
            &push_bench,
            pods,
            &operator.trusted_keys,
            (hang, refuse),
            from..to,
            &applied,
        )?);
    }

    let started = Instant::now();
    let labels = [("app".to_owned(), "scale".to_owned())].into();
    let specs = (0..pods)
        .map(|i| {
            let mut a = addr(i);
            a.set_port(AGENTS_PORT);
            (pod_name(i), a)
        })
        .collect();
    create_running_pods_at(&s.client, &ns, specs, &labels).await?;
    let created = started.elapsed().as_secs_f64();
    eprintln!("scale-bench: {pods} pods created in {created:.1} s");
    // First contact: the operator's first push to every live pod.
    wait_for(
        Duration::from_secs(600),
        "the first push to every live pod",
        || {
            let times = applied.lock().map_err(|_| Error("poisoned".into()))?;
            Ok(times[..live].iter().all(|&t| t > 0).then_some(()))
        },
    )?;
    let first_contact = started.elapsed().as_secs_f64();
    eprintln!("scale-bench: every live pod had its first push {first_contact:.1} s after the first pod was created");
    let idle_rss = status_mib(operator.pid(), "VmRSS:");
    let idle_cpu = cpu_seconds(operator.pid());

    let policies: Api<LogPolicy> = Api::namespaced(s.client.clone(), &ns);
    let apply = |level: &'static str| {
        let ns = ns.clone();
        move || cluster.kubectl_input(&["apply", "-f", "-"], &policy(&ns, level))
    };
    let steps = [
        step(
            "apply",
            cluster,
            &operator,
            &agents,
            &policies,
            &applied,
            live,
            &apply("debug"),
            true,
        )?,
        step(
            "change",
            cluster,
            &operator,
            &agents,
            &policies,
            &applied,
            live,
            &apply("trace"),
            true,
        )?,
        step(
            "delete",
            cluster,
            &operator,
            &agents,
            &policies,
            &applied,
            live,
            &|| cluster.kubectl(&["delete", "lp", "scale", "-n", &ns, "--wait=false"]),
            false,
        )?,
    ];
    let peak_rss = status_mib(operator.pid(), "VmHWM:");
    drop(agents);
    let log = repo_root().join("target/bench/scale-operator.log");
    match operator.save_output(&log) {
        Ok(()) => eprintln!("scale-bench: the operator's output: {}", log.display()),
        Err(e) => eprintln!(
            "scale-bench: cannot keep the operator's output in {}: {e}",
            log.display()
        ),
    }

    println!("{pods} pods ({live} live, {hang} hanging, {refuse} refusing): created in {created:.1} s; first push to every live pod after {first_contact:.1} s; operator then {idle_rss:.1} MiB RSS, {idle_cpu:.1} CPU s; peak RSS {peak_rss:.1} MiB\n");
    println!("| step | to the last live pod applied | until status says so | operator CPU s | operator RSS after | API requests (all clients; the bench's status reads apart) |");
    println!("|---|---:|---:|---:|---:|---|");
    for st in &steps {
        let requests: Vec<String> = st
            .requests
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        println!(
            "| {} | {:.2} s | {} | {:.1} | {:.1} MiB | {} (status reads: {}) |",
            st.name,
            st.to_last_live_applied,
            st.to_status.map_or_else(
                || if st.status_seen.is_empty() {
                    "-".to_owned()
                } else {
                    format!(
                        "not in {} s ({} applied/matched/failed)",
                        STATUS_WAIT.as_secs(),
                        st.status_seen
                    )
                },
                |s| format!("{s:.2} s"),
            ),
            st.cpu_seconds,
            st.rss_mib,
            requests.join(", "),
            st.status_reads,
        );
    }
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    println!(
        "\nFrom the change to the last live pod applied: where the CPU went ({cores} cores)\n"
    );
    println!("| step | to the last live pod applied | operator CPU s | of it, the controller loop's | simulated pods CPU s | API server, etcd, the rest CPU s | the machine's CPU time busy | least time for all that CPU | least time for the operator's CPU alone |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for st in &steps {
        let c = &st.to_last;
        println!(
            "| {} | {:.2} s | {:.1} | {:.1} | {:.1} | {:.1} | {:.0}% | {:.2} s | {:.2} s |",
            st.name,
            st.to_last_live_applied,
            c.operator,
            c.controller,
            c.pods,
            (c.busy - c.operator - c.pods).max(0.0),
            c.machine_busy * 100.0,
            c.busy / cores as f64,
            // Its controller loop runs on one core at a time.
            (c.operator / cores as f64).max(c.controller),
        );
    }
    let json = serde_json::json!({
        "pods": pods, "live": live, "hanging": hang, "refusing": refuse,
        "created_seconds": created,
        "first_contact_seconds": first_contact,
        "operator": {"idle_rss_mib": idle_rss, "idle_cpu_seconds": idle_cpu, "peak_rss_mib": peak_rss},
        "steps": steps.iter().map(|st| serde_json::json!({
            "step": st.name,
            "to_last_live_applied_seconds": st.to_last_live_applied,
            "to_status_seconds": st.to_status,
            "status_seen": st.status_seen,
            "operator_cpu_seconds": st.cpu_seconds,
            "to_last_live_applied_cpu": {
                "operator_seconds": st.to_last.operator,
                "controller_loop_seconds": st.to_last.controller,
                "simulated_pods_seconds": st.to_last.pods,
                "machine_busy_seconds": st.to_last.busy,
                "machine_busy_share": st.to_last.machine_busy,
            },
            "operator_rss_mib": st.rss_mib,
            "documents_accepted": st.accepted,
            "api_requests": st.requests,
            "bench_status_reads": st.status_reads,
        })).collect::<Vec<_>>(),
        "targets": {"to_last_live_applied_seconds": 5, "operator_rss_mib": 256},
    });
    let dir = repo_root().join("target/bench");
    let file = dir.join("scale.json");
    std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(&file, format!("{json:#}\n")))
        .map_err(|e| Error(format!("{}: {e}", file.display())))?;
    Ok(())
}
