//! Raise into the past, end to end: a standing LogPolicy records `shop::payment` at
//! debug on the shop pods (`e2e/examples/record-payments.yaml`, as a user applies it);
//! the shop serves requests and then payments fail for a while, none of their debug
//! lines written; later `kubectl logpolicy raise -l app=shop --target
//! shop::payment=debug --since 2m`:
//!
//! - every debug line the pods emitted in those two minutes is on their stdout exactly
//!   once, with its original `ts` (before the raise), in order, marked
//!   `"replayed":true`, between the pod's two `logpolicy` replay lines, and before the
//!   raise's live debug lines; as many as the service itself counted (`GET /stats`);
//! - the plugin's row for each pod says how many lines it replayed and from when; the
//!   LogPolicy's status sums them (`kubectl get lp -o wide`, column REPLAYED);
//! - a second raise with `--since` replays none of them again;
//! - a pod whose recorder is small (`LOGPOLICY_RECORD_BYTES=65536`) offered 10 times
//!   that: it never holds more than its limit, the lines it let go are counted as
//!   expired (held + expired = what it emitted), it replays what it held, and its row
//!   says it held less than asked.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::time::SystemTime;

use logpolicy_e2e::cluster::repo_root;
use logpolicy_e2e::logs::Line;
use logpolicy_e2e::net::{get_ok, http};
use logpolicy_e2e::plugin::{kubectl_logpolicy, PluginRun};
use logpolicy_e2e::shop::{payment_debug, served, wait_directive, wait_known, SEC};
use logpolicy_e2e::{DemoPod, Operator, PodSpec, Scenario};
use serde_json::Value;

/// The smallest recorder a pod may have (the layer's `MIN_RECORD_BYTES`).
const SMALL_RECORDER: u64 = 64 << 10;
/// Requests before the incident, and failing ones during it, per pod.
const CALM: usize = 30;
const FAILING: usize = 20;

/// `kubectl logpolicy raise -l app=shop --target shop::payment=LEVEL --for 2m --since 2m`.
fn raise_since(s: &Scenario, operator: &Operator, level: &str, extra: &[&str]) -> PluginRun {
    let target = format!("shop::payment={level}");
    let args = [
        &[
            "raise",
            "-l",
            "app=shop",
            "--target",
            &target,
            "--for",
            "2m",
            "--since",
            "2m",
            "--measure",
            "0",
        ][..],
        extra,
    ]
    .concat();
    kubectl_logpolicy(s.namespace(), Some(&operator.namespace), &args).unwrap()
}

/// `GET /checkout` on the pod's shop (`?decline=1`: the payment fails, 500).
fn checkout(pod: &DemoPod, decline: bool) {
    let path = if decline {
        "/checkout?decline=1"
    } else {
        "/checkout"
    };
    let reply = http(pod.shop, "GET", path, &[], "").unwrap();
    assert_eq!(reply.status, if decline { 500 } else { 200 }, "{reply:?}");
}

/// The shop's own count of the `shop::payment` debug events it emitted.
fn emitted(pod: &DemoPod) -> u64 {
    get_ok(pod.shop, "/stats").unwrap().json().unwrap()["paymentDebug"]
        .as_u64()
        .unwrap()
}

/// Waits until every pod wrote the access line of each request it served (its own
/// count, `GET /stats`): its stdout holds what the requests made it write.
fn drained(pods: &mut [DemoPod]) {
    logpolicy_e2e::process::wait_for(10 * SEC, "every request's lines", || {
        for p in pods.iter_mut() {
            p.refresh()?;
            let requests = get_ok(p.shop, "/stats")?.json()?["requests"].as_u64();
            let served = p.log.lines().iter().filter(|l| served(l)).count() as u64;
            if requests != Some(served) {
                return Ok(None);
            }
        }
        Ok(Some(()))
    })
    .unwrap();
}

/// The pod's recorder, as its admin endpoint says.
fn recorder(pod: &DemoPod) -> Value {
    pod.policy().unwrap()["recorder"].clone()
}

fn replayed(l: &Line) -> bool {
    l.json["replayed"] == true
}

/// The REPLAYED cell of the raise's row for `pod`.
fn replayed_cell(run: &PluginRun, pod: &str) -> String {
    let header = run
        .stdout
        .lines()
        .find(|l| l.starts_with("POD "))
        .unwrap_or_else(|| panic!("no table: {run}"));
    let at = header.find("REPLAYED").unwrap_or_else(|| panic!("{run}"));
    let end = header.find("ERROR").unwrap_or(header.len());
    let row = run
        .stdout
        .lines()
        .find(|l| l.split_whitespace().next() == Some(pod))
        .unwrap_or_else(|| panic!("no row of {pod}: {run}"));
    row.get(at..end.min(row.len()))
        .unwrap_or_default()
        .trim()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raise_since_first_writes_what_the_pods_recorded() {
    let _file = crate::one_file_at_a_time(module_path!());
    let s = Scenario::without_operator("raise-since").await.unwrap();
    let operator = Operator::watching(s.namespace()).unwrap();
    // The test drives every request: none fails but those it asks to.
    let shop = |name: &str| PodSpec {
        fail_every: 0,
        ..PodSpec::shop(name).self_load(0)
    };
    let specs = vec![
        shop("shop-0"),
        shop("shop-1"),
        shop("shop-small").env("LOGPOLICY_RECORD_BYTES", &SMALL_RECORDER.to_string()),
    ];
    let mut pods = s.pods(specs).await.unwrap();
    wait_known(&pods).unwrap();

    // The standing policy, as the example says to apply it.
    let example =
        std::fs::read_to_string(repo_root().join("e2e/examples/record-payments.yaml")).unwrap();
    s.apply(&example).unwrap();
    wait_directive(
        &pods,
        "@record(shop::payment)=debug",
        true,
        std::time::Instant::now(),
        10 * SEC,
    )
    .unwrap();
    let lp = s.policy("record-payments").unwrap();
    assert!(lp["spec"].get("duration").is_none(), "{lp}");

    // Calm, then an incident: payments fail. Nothing of it at debug is written.
    let recording_from = SystemTime::now();
    for p in &pods[..2] {
        for _ in 0..CALM {
            checkout(p, false);
        }
        for _ in 0..FAILING {
            checkout(p, true);
        }
    }
    // The small recorder offered ten times its limit: what it took, by the bytes a
    // line held costs on average (each request records a line, a failing one two).
    let mut offered = 0.0;
    let mut requests = 0;
    while offered < 10.0 * SMALL_RECORDER as f64 {
        for _ in 0..100 {
            requests += 1;
            checkout(&pods[2], requests % 3 == 0);
        }
        let r = recorder(&pods[2]);
        let held = r["lines"].as_u64().unwrap().max(1) as f64;
        let lines = held + r["expired"].as_u64().unwrap() as f64;
        offered = r["bytes"].as_u64().unwrap() as f64 / held * lines;
    }
    eprintln!("shop-small: {requests} requests, about {offered:.0} bytes offered to a {SMALL_RECORDER}-byte recorder");
    let counts: Vec<u64> = pods.iter().map(emitted).collect();
    for (p, n) in pods[..2].iter().zip(&counts) {
        assert_eq!(*n, (CALM + 2 * FAILING) as u64, "{}", p.name);
    }
    let before_raise = SystemTime::now();
    drained(&mut pods);
    for p in &pods {
        assert_eq!(
            p.log
                .count(SystemTime::UNIX_EPOCH, before_raise, payment_debug),
            0,
            "{}: debug lines written before the raise",
            p.name
        );
        // Held, bounded, counted.
        let r = recorder(p);
        let (held, expired, bytes, max) = (
            r["lines"].as_u64().unwrap(),
            r["expired"].as_u64().unwrap(),
            r["bytes"].as_u64().unwrap(),
            r["maxBytes"].as_u64().unwrap(),
        );
        assert!(bytes <= max, "{}: {r}", p.name);
        let n = emitted(p);
        assert_eq!(
            held + expired,
            n,
            "{}: held + expired = emitted: {r}",
            p.name
        );
        if p.name == "shop-small" {
            assert_eq!(max, SMALL_RECORDER, "{r}");
            assert!(
                expired >= 8 * held,
                "{}: 10x the limit offered, {held} held, {expired} expired: {r}",
                p.name
            );
        } else {
            assert_eq!(expired, 0, "{}: {r}", p.name);
        }
    }
    let held_small = recorder(&pods[2])["lines"].as_u64().unwrap();
    let emitted_small = emitted(&pods[2]);

    // The raise, two minutes back.
    let raised_at = SystemTime::now();
    let run = raise_since(
        &s,
        &operator,
        "debug",
        &["--reason", "INC-50: card declines"],
    );
    run.expect_code(0).unwrap();
    assert!(
        run.stdout.contains("replaying the last 2m recorded"),
        "{run}"
    );
    let name = run.created_policy().unwrap();
    for (p, n) in pods[..2].iter().zip(&counts) {
        let cell = replayed_cell(&run, &p.name);
        assert!(
            cell.starts_with(&format!("{n} lines from ")),
            "{}: {cell:?}\n{run}",
            p.name
        );
        assert!(!cell.contains("held less"), "{cell:?}\n{run}");
    }
    let cell = replayed_cell(&run, "shop-small");
    assert!(
        cell.starts_with(&format!("{held_small} lines from ")) && cell.contains("held less"),
        "{cell:?}\n{run}"
    );

    // Live debug lines after the raise.
    let live_from = SystemTime::now();
    for p in &pods {
        for _ in 0..5 {
            checkout(p, false);
        }
    }
    drained(&mut pods);
    logpolicy_e2e::process::wait_for(10 * SEC, "every pod's closing replay line", || {
        for p in pods.iter_mut() {
            p.refresh()?;
            let closed = p
                .log
                .lines()
                .iter()
                .any(|l| l.msg == "replayed recorded lines");
            if !closed {
                return Ok(None);
            }
        }
        Ok(Some(()))
    })
    .unwrap();

    for (i, p) in pods.iter().enumerate() {
        let lines = p.log.lines();
        let opening = lines
            .iter()
            .position(|l| l.target == "logpolicy" && l.msg == "replaying recorded lines")
            .unwrap_or_else(|| panic!("{}: no opening replay line\n{}", p.name, p.tail(20)));
        let closing = lines
            .iter()
            .position(|l| l.target == "logpolicy" && l.msg == "replayed recorded lines")
            .unwrap_or_else(|| panic!("{}: no closing replay line\n{}", p.name, p.tail(20)));
        assert_eq!(
            lines[opening].json["policy"],
            format!("{}/{name}", s.namespace()),
            "{}",
            p.name
        );
        let at: Vec<usize> = (0..lines.len()).filter(|&j| replayed(&lines[j])).collect();
        let expected = if p.name == "shop-small" {
            held_small
        } else {
            counts[i]
        };
        assert_eq!(at.len() as u64, expected, "{}: lines replayed", p.name);
        assert_eq!(lines[closing].json["lines"], expected, "{}", p.name);
        assert_eq!(lines[closing].json["dropped"], 0, "{}", p.name);
        // Between the two lines, in their order, each once, from before the raise.
        assert!(at.iter().all(|&j| j > opening && j < closing), "{}", p.name);
        let mut seen = BTreeSet::new();
        let mut previous = recording_from;
        for &j in &at {
            let l = &lines[j];
            assert!(payment_debug(l), "{}: {}", p.name, l.json);
            assert!(
                l.ts >= previous && l.ts < raised_at,
                "{}: a replayed line out of order or from after the raise: {}",
                p.name,
                l.json
            );
            previous = l.ts;
            let key = (l.json["span"]["id"].as_u64(), l.msg.clone());
            assert!(seen.insert(key), "{}: replayed twice: {}", p.name, l.json);
        }
        // Before the raise's live debug lines.
        let first_live = lines
            .iter()
            .position(|l| payment_debug(l) && !replayed(l) && l.ts >= live_from)
            .unwrap_or_else(|| panic!("{}: no live debug line", p.name));
        assert!(at.iter().all(|&j| j < first_live), "{}", p.name);
        if p.name != "shop-small" {
            // Every request's lines: one `authorising` each, one `gateway answered` per
            // failed payment.
            let msgs = |m: &str| at.iter().filter(|&&j| lines[j].msg == m).count();
            assert_eq!(
                (msgs("authorising"), msgs("gateway answered")),
                (CALM + FAILING, FAILING),
                "{}",
                p.name
            );
        }
    }
    // The small pod: what it held was replayed, what it let go is counted.
    let r = recorder(&pods[2]);
    assert_eq!(
        held_small + r["expired"].as_u64().unwrap(),
        emitted_small,
        "{r}"
    );

    // The status sums it up, for kubectl get lp.
    let total: u64 = counts[..2].iter().sum::<u64>() + held_small;
    let summary = format!("{total} lines, 3/3 pods, 1 held less");
    logpolicy_e2e::process::wait_for(10 * SEC, "the replay in the status", || {
        let lp = s.policy(&name)?;
        Ok((lp["status"]["replay"]["summary"] == summary.as_str()).then_some(lp))
    })
    .unwrap();
    let wide = s.kubectl(&["get", "lp", &name, "-o", "wide"]).unwrap();
    assert!(
        wide.contains("REPLAYED") && wide.contains(&summary),
        "{wide}"
    );

    // A second raise with --since replays none of them again.
    let replayed_before: Vec<usize> = pods
        .iter()
        .map(|p| p.log.lines().iter().filter(|l| replayed(l)).count())
        .collect();
    let again = raise_since(&s, &operator, "trace", &["--allow-unknown-target"]);
    again.expect_code(0).unwrap();
    for p in &pods {
        let cell = replayed_cell(&again, &p.name);
        assert!(cell.starts_with("0 lines"), "{}: {cell:?}\n{again}", p.name);
    }
    // Its replay lines (with nothing in them) are written once taken: a second.
    std::thread::sleep(std::time::Duration::from_secs(1));
    drained(&mut pods);
    for (p, before) in pods.iter().zip(replayed_before) {
        let now = p.log.lines().iter().filter(|l| replayed(l)).count();
        assert_eq!(now, before, "{}: lines replayed again", p.name);
    }
}
