//! `demo` (run by `scripts/demo`): the product end to end on this machine.
//!
//! A local API server (`e2e/cluster`), the operator with the Helm chart's RBAC, three
//! demo shop services as pods, a standing policy that records `shop::payment`'s debug
//! lines without writing them (`e2e/examples/record-payments.yaml`), and an incident
//! raise (debug for `shop::payment`, 20 s, `--since 1m`) made with the kubectl plugin,
//! `kubectl logpolicy raise` (its `--dry-run` YAML shown first): each pod first writes
//! the incident's debug lines from before the raise, shown with their own times; the
//! services' output is shown live, per second, before the policy, during it, and after
//! it expired on its own; `kubectl logpolicy top` shows what logging costs
//! before the incident, and the raise what it adds once applied. Then a raise for one
//! customer's requests only (`--when user_id=42`): per pod, its debug lines by customer;
//! and last `kubectl logpolicy suggest --cut 50%`, the sampling that halves what the pods
//! write. Everything it started is stopped when it ends.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime};

use logpolicy_e2e::logs::Line;
use logpolicy_e2e::operator::OperatorOptions;
use logpolicy_e2e::plugin::kubectl_logpolicy;
use logpolicy_e2e::process::wait_for;
use logpolicy_e2e::scenario::condition;
use logpolicy_e2e::shop::{wait_known, wait_target_known};
use logpolicy_e2e::{DemoPod, Error, Operator, PodSpec, Result, Scenario};

const POLICY: &str = "incident-debug-payments";
/// What the live view counts, per pod: (target, level, column title).
const COLUMNS: [(&str, &str, &str); 4] = [
    ("shop::http", "INFO", "http:I"),
    ("shop::payment", "DEBUG", "pay:D"),
    ("shop::payment", "ERROR", "pay:E"),
    ("shop::db", "WARN", "db:W"),
];

fn main() -> ExitCode {
    logpolicy_e2e::bench::run("demo", demo())
}

/// `args` as a shell would read them (quoted where they have spaces).
fn shell_words(args: &[&str]) -> String {
    args.iter()
        .map(|a| {
            if a.contains(' ') {
                format!("'{a}'")
            } else {
                (*a).to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn say(text: &str) {
    println!("\n== {text}");
}

async fn demo() -> Result<()> {
    say("Starting the local API server (etcd + kube-apiserver 1.20 on 127.0.0.1)");
    logpolicy_e2e::Cluster::shared()?;
    let s = Scenario::without_operator("shop").await?;
    let ns = s.namespace().to_owned();

    say(&format!(
        "Installing the LogPolicy CRD and the operator (Helm chart RBAC, watching namespace {ns})"
    ));
    let operator = Operator::start(OperatorOptions {
        set: vec![("watchNamespaces".to_owned(), format!("{{{ns}}}"))],
        ..OperatorOptions::default()
    })?;
    println!(
        "operator running as ServiceAccount {}/{}-logpolicy-operator, metrics on http://{}",
        operator.namespace, operator.release, operator.metrics_addr
    );
    if operator.metrics_token.is_some() {
        println!(
            "  /metrics wants a token: curl -H \"Authorization: Bearer $(kubectl -n {} create token {})\" http://{}/metrics",
            operator.namespace,
            logpolicy_e2e::operator::METRICS_SCRAPER,
            operator.metrics_addr
        );
    }

    say("Starting three shop services as pods (each sends itself 10 requests/s; every 20th fails)");
    let specs = (0..3)
        .map(|i| PodSpec::shop(&format!("shop-{i}")).self_load(10))
        .collect();
    let mut pods = s.pods(specs).await?;
    wait_known(&pods)?;
    // `raise` refuses a target no pod knows: shop::payment is, once a request failed.
    wait_target_known(&pods, "shop::payment")?;
    print!("{}", s.kubectl(&["get", "pods", "-o", "wide"])?);

    say(&format!(
        "kubectl -n {ns} apply -f e2e/examples/record-payments.yaml  (a standing policy: keep shop::payment's debug lines in each pod's memory, write nothing)"
    ));
    let example = std::fs::read_to_string(
        logpolicy_e2e::cluster::repo_root().join("e2e/examples/record-payments.yaml"),
    )
    .map_err(|e| Error(format!("e2e/examples/record-payments.yaml: {e}")))?;
    print!("{}", s.apply(&example)?);
    wait_for(Duration::from_secs(10), "every pod to record", || {
        for p in &pods {
            if !p.directives()?.contains("@record(shop::payment)=debug") {
                return Ok(None);
            }
        }
        Ok(Some(()))
    })?;
    wait_for(Duration::from_secs(10), "record-payments applied", || {
        let lp = s.policy("record-payments")?;
        Ok((lp["status"]["appliedPods"] == 3).then_some(()))
    })?;
    println!("\n$ kubectl -n {ns} get lp");
    print!("{}", s.kubectl(&["get", "lp"])?);

    let view_start = Instant::now();
    say("What the services write, in lines per second (counted from their stdout):");
    println!(
        "http:I = shop::http INFO (one access line per request), pay:D = shop::payment DEBUG,"
    );
    println!("pay:E = shop::payment ERROR (failed payments), db:W = shop::db WARN (slow queries)");
    let mut view = LiveView::new(&pods);
    view.header();
    view.run(&mut pods, "before", Duration::from_secs(3))?;

    let top = ["top", "-l", "app=shop", "--window", "3s"];
    say(&format!(
        "kubectl logpolicy -n {ns} {}  (what logging costs now, from each pod's own ledger)",
        shell_words(&top)
    ));
    let run = kubectl_logpolicy(&ns, None, &top)?;
    print!("{}{}", run.stdout, run.stderr);
    if run.code != 0 {
        return Err(Error(format!(
            "kubectl logpolicy top exited with {}",
            run.code
        )));
    }

    let raise = [
        "raise",
        "-l",
        "app=shop",
        "--target",
        "shop::payment=debug",
        "--for",
        "20s",
        "--since",
        "1m",
        "--reason",
        "demo: payments fail and the info lines do not say why",
        "--name",
        POLICY,
        "--measure",
        "3s",
    ];
    say(&format!(
        "kubectl logpolicy -n {ns} {} --dry-run  (what it will create: debug for shop::payment, 20 s, and first the recorded lines of the last minute)",
        shell_words(&raise)
    ));
    let dry = kubectl_logpolicy(&ns, None, &[&raise[..], &["--dry-run"]].concat())?;
    print!("{}", dry.stdout);
    say(&format!(
        "kubectl logpolicy -n {ns} {}  (creates it, waits until every pod applied it, then measures what it adds)",
        shell_words(&raise)
    ));
    let raised_at = SystemTime::now();
    let run = kubectl_logpolicy(&ns, None, &raise)?;
    print!("{}{}", run.stdout, run.stderr);
    if run.code != 0 {
        return Err(Error(format!(
            "kubectl logpolicy raise exited with {}",
            run.code
        )));
    }
    replayed_lines(&mut pods, raised_at)?;
    view.header();
    view.run(&mut pods, "during", Duration::from_secs(2))?;
    println!("\n$ kubectl -n {ns} get lp");
    print!("{}", s.kubectl(&["get", "lp"])?);
    let lp = s.policy(POLICY)?;
    let expiry = lp["status"]["expirationTime"]
        .as_str()
        .ok_or_else(|| Error("the policy has no status.expirationTime".into()))
        .and_then(|t| logpolicy::clock::parse_rfc3339(t).map_err(|e| Error(e.to_string())))?;
    view.header();
    let until_expiry = expiry
        .duration_since(SystemTime::now())
        .unwrap_or(Duration::ZERO);
    view.run(&mut pods, "during", until_expiry)?;
    say("The policy expired: each pod dropped it by itself, on its own clock");
    view.header();
    view.run(&mut pods, "after", Duration::from_secs(5))?;
    wait_for(Duration::from_secs(10), "Expired=True", || {
        let lp = s.policy(POLICY)?;
        Ok(condition(&lp, "Expired")
            .filter(|c| c["status"] == "True")
            .map(|_| ()))
    })?;
    println!("\n$ kubectl -n {ns} get lp");
    print!("{}", s.kubectl(&["get", "lp"])?);
    println!("\n$ kubectl -n {ns} get events --field-selector involvedObject.kind=LogPolicy");
    print!(
        "{}",
        s.kubectl(&[
            "get",
            "events",
            "--field-selector",
            "involvedObject.kind=LogPolicy"
        ])?
    );
    customer_raise(&ns, &mut pods)?;
    let suggest = [
        "suggest", "-l", "app=shop", "--cut", "50%", "--window", "3s",
    ];
    say(&format!(
        "kubectl logpolicy -n {ns} {}  (the sampling that halves what they write; --apply would create it)",
        shell_words(&suggest)
    ));
    let run = kubectl_logpolicy(&ns, None, &suggest)?;
    print!("{}{}", run.stdout, run.stderr);
    if run.code != 0 {
        return Err(Error(format!(
            "kubectl logpolicy suggest exited with {}",
            run.code
        )));
    }
    say(&format!(
        "Done in {:.0} s: stopping the services, the operator and the API server",
        view_start.elapsed().as_secs_f64()
    ));
    drop(pods);
    drop(operator);
    drop(s);
    Ok(())
}

/// The incident's debug lines from before the raise: how shop-0 wrote them (the replay's
/// two `logpolicy` lines, and the first replayed lines, each with its own time), and
/// per pod how many and from when.
fn replayed_lines(pods: &mut [DemoPod], raised_at: SystemTime) -> Result<()> {
    let clock = |t: SystemTime| {
        let text = logpolicy::clock::format_rfc3339(t);
        text.get(11..23).unwrap_or(&text).to_owned()
    };
    let replay_line = |l: &Line| l.target == "logpolicy" && l.msg == "replayed recorded lines";
    wait_for(Duration::from_secs(10), "every pod's replay", || {
        for p in pods.iter_mut() {
            p.refresh()?;
            if p.log.first(raised_at, replay_line).is_none() {
                return Ok(None);
            }
        }
        Ok(Some(()))
    })?;
    say(&format!(
        "The incident's debug lines from before the raise (run at {}; each pod replays what it recorded until it applied the raise), as {} wrote them: replayed, with their own time",
        clock(raised_at),
        pods[0].name
    ));
    let replayed = |l: &Line| l.json["replayed"] == true;
    let lines = pods[0].log.lines();
    let opening = lines.iter().position(|l| {
        l.target == "logpolicy" && l.msg == "replaying recorded lines" && l.ts >= raised_at
    });
    if let Some(at) = opening {
        let shown: Vec<&Line> = lines[at + 1..].iter().filter(|l| replayed(l)).collect();
        println!("{}", lines[at].json);
        for l in shown.iter().filter(|l| l.msg == "gateway answered").take(2) {
            println!("{}", l.json);
        }
        for l in shown.iter().filter(|l| l.msg == "authorising").take(1) {
            println!("{}", l.json);
        }
        println!("... ({} replayed lines in all)", shown.len());
        if let Some(end) = lines[at..].iter().find(|l| replay_line(l)) {
            println!("{}", end.json);
        }
    }
    println!(
        "\n{:<10} {:>9} {:>14} {:>14} {:>18}",
        "pod", "replayed", "first", "last", "gateway answered"
    );
    for p in pods.iter() {
        let lines: Vec<&Line> = p.log.lines().iter().filter(|l| replayed(l)).collect();
        let (first, last) = match (lines.first(), lines.last()) {
            (Some(f), Some(l)) => (clock(f.ts), clock(l.ts)),
            _ => ("-".to_owned(), "-".to_owned()),
        };
        let declines = lines.iter().filter(|l| l.msg == "gateway answered").count();
        println!(
            "{:<10} {:>9} {first:>14} {last:>14} {declines:>18}",
            p.name,
            lines.len()
        );
    }
    Ok(())
}

/// One customer's requests at debug, on every pod, and no one else's: `raise --when
/// user_id=42` for 10 s (the shops serve customers 40..49 in turn).
fn customer_raise(ns: &str, pods: &mut [DemoPod]) -> Result<()> {
    let raise = [
        "raise",
        "-l",
        "app=shop",
        "--target",
        "shop::payment=debug",
        "--when",
        "user_id=42",
        "--for",
        "10s",
        "--reason",
        "demo: customer 42 says every payment fails",
        "--name",
        "customer-42",
        "--measure",
        "0",
    ];
    say(&format!(
        "kubectl logpolicy -n {ns} {}  (debug for customer 42's requests only, 10 s)",
        shell_words(&raise)
    ));
    let started = SystemTime::now();
    let run = kubectl_logpolicy(ns, None, &raise)?;
    print!("{}{}", run.stdout, run.stderr);
    if run.code != 0 {
        return Err(Error(format!(
            "kubectl logpolicy raise --when exited with {}",
            run.code
        )));
    }
    std::thread::sleep(Duration::from_secs(5));
    let to = SystemTime::now();
    println!(
        "
shop::payment DEBUG lines in the last 5 s, by the customer of the request:"
    );
    println!(
        "{:<10} {:>12} {:>16} {:>14}",
        "pod", "customer 42", "other customers", "requests (42)"
    );
    for p in pods.iter_mut() {
        p.refresh()?;
        let user = |l: &Line| l.json["span"]["user_id"].as_u64();
        let debug = |l: &Line| l.is("shop::payment", "DEBUG");
        let served = |l: &Line| l.is("shop::http", "INFO") && l.msg == "served";
        let mine = p
            .log
            .count(started, to, |l| debug(l) && user(l) == Some(42));
        let others = p
            .log
            .count(started, to, |l| debug(l) && user(l) != Some(42));
        let requests = p
            .log
            .count(started, to, |l| served(l) && user(l) == Some(42));
        println!("{:<10} {mine:>12} {others:>16} {requests:>14}", p.name);
    }
    Ok(())
}

/// Lines per second per pod and target/level, one row per second.
struct LiveView {
    names: Vec<String>,
    started: Instant,
}

impl LiveView {
    fn new(pods: &[DemoPod]) -> LiveView {
        LiveView {
            names: pods.iter().map(|p| p.name.clone()).collect(),
            started: Instant::now(),
        }
    }

    fn header(&self) {
        let mut line = format!("{:>5}  {:<6}", "t", "phase");
        for name in &self.names {
            line.push_str(&format!("  | {name:<27}"));
        }
        let mut titles = format!("{:>5}  {:<6}", "", "");
        for _ in &self.names {
            titles.push_str("  |");
            for (_, _, title) in COLUMNS {
                titles.push_str(&format!(" {title:>6}"));
            }
        }
        println!("\n{line}\n{titles}");
        println!("{}", "-".repeat(line.len()));
    }

    /// Prints a row per second for `length`.
    fn run(&mut self, pods: &mut [DemoPod], phase: &str, length: Duration) -> Result<()> {
        let end = Instant::now() + length;
        while Instant::now() < end {
            let tick = SystemTime::now();
            std::thread::sleep(Duration::from_secs(1).min(end - Instant::now()));
            // A line is written within a few ms; count the second that just ended,
            // stamped by the services themselves.
            let to = SystemTime::now() - Duration::from_millis(100);
            let from = tick - Duration::from_millis(100);
            let span = to.duration_since(from).unwrap_or(Duration::from_secs(1));
            let mut row = format!(
                "{:>4}s  {:<6}",
                format!("+{}", self.started.elapsed().as_secs()),
                phase
            );
            for pod in pods.iter_mut() {
                pod.refresh()?;
                let counts = per_column(pod.log.lines(), from, to);
                row.push_str("  |");
                for i in 0..COLUMNS.len() {
                    let rate = counts.get(&i).copied().unwrap_or(0) as f64 / span.as_secs_f64();
                    row.push_str(&format!(" {rate:>6.0}"));
                }
            }
            println!("{row}");
        }
        Ok(())
    }
}

fn per_column(lines: &[Line], from: SystemTime, to: SystemTime) -> BTreeMap<usize, usize> {
    let mut counts = BTreeMap::new();
    for l in lines.iter().filter(|l| l.ts >= from && l.ts < to) {
        if let Some(i) = COLUMNS.iter().position(|(t, lv, _)| l.is(t, lv)) {
            *counts.entry(i).or_insert(0) += 1;
        }
    }
    counts
}
