//! Scenarios 2, 3, 5–10: LogPolicies applied with `kubectl` reach running demo
//! services through the real operator (one per test process, with the Helm chart's
//! RBAC), and what the services write changes, and changes back, on time.
//!
//! Every test has its own namespace and pods; they run in parallel.

use std::time::{Duration, SystemTime};

use logpolicy_e2e::logs::{secs_between, Line};
use logpolicy_e2e::process::wait_for;
use logpolicy_e2e::scenario::{condition, wait_lines, wait_past};
use logpolicy_e2e::{DemoPod, PodSpec, Result, Scenario};

const SEC: Duration = Duration::from_secs(1);

fn payment_debug(l: &Line) -> bool {
    l.is("shop::payment", "DEBUG")
}

fn served(l: &Line) -> bool {
    l.is("shop::http", "INFO") && l.msg == "served"
}

/// Waits until every pod holds a document from the operator (the empty one it gets
/// when it starts): the operator knows them.
fn wait_known(pods: &[DemoPod]) -> Result<()> {
    wait_for(10 * SEC, "the operator's first push to every pod", || {
        for p in pods {
            if p.policy_version()? == 0 {
                return Ok(None);
            }
        }
        Ok(Some(()))
    })
}

fn three_shops() -> Vec<PodSpec> {
    (0..3)
        .map(|i| PodSpec::shop(&format!("shop-{i}")))
        .collect()
}

const DEBUG_PAYMENTS: &str = r#"
apiVersion: logpolicy.dev/v1alpha1
kind: LogPolicy
metadata: {name: debug-payments}
spec:
  selector: {matchLabels: {app: shop}}
  targets:
  - {target: "shop::payment", level: debug}
"#;

/// Scenario 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raise_reaches_every_selected_pod_within_a_second() {
    let s = Scenario::new("raise").await.unwrap();
    let mut pods = s.pods(three_shops()).await.unwrap();
    wait_known(&pods).unwrap();
    let before = SystemTime::now();
    wait_past(&mut pods, before, 5 * SEC).unwrap();
    for p in &pods {
        assert_eq!(
            p.log.count(SystemTime::UNIX_EPOCH, before, payment_debug),
            0,
            "{}",
            p.name
        );
    }

    let t0 = SystemTime::now();
    s.apply(DEBUG_PAYMENTS).unwrap();
    let firsts = wait_lines(
        &mut pods,
        t0,
        10 * SEC,
        "shop::payment debug lines",
        payment_debug,
    )
    .unwrap();
    let delays: Vec<f64> = firsts.iter().map(|t| secs_between(*t, t0)).collect();
    eprintln!("apply -> first shop::payment debug line per pod: {delays:.3?} s");
    for (p, d) in pods.iter().zip(&delays) {
        assert!(
            *d < 1.0,
            "{}: {d:.3} s from kubectl apply to debug lines",
            p.name
        );
    }

    // Nothing else changed: no debug from shop::db, access lines as before.
    let after = t0 + 2 * SEC;
    wait_past(&mut pods, after, 5 * SEC).unwrap();
    for p in &pods {
        assert_eq!(
            p.log.count(t0, after, |l| l.is("shop::db", "DEBUG")),
            0,
            "{}",
            p.name
        );
        assert_eq!(
            p.log.count(t0, after, |l| l.level == "TRACE"),
            0,
            "{}",
            p.name
        );
        assert!(p.log.count(t0, after, served) >= 10, "{}", p.name);
        assert!(
            p.log.count(t0 + SEC, after, payment_debug) >= 10,
            "{}",
            p.name
        );
        let directives = p.directives().unwrap();
        assert!(
            directives.contains("shop::payment=debug"),
            "{}: {directives}",
            p.name
        );
    }

    s.kubectl(&[
        "wait",
        "--for=condition=Applied",
        "lp/debug-payments",
        "--timeout=10s",
    ])
    .unwrap();
    let lp = s.policy("debug-payments").unwrap();
    assert_eq!(lp["status"]["matchedPods"], 3, "{lp}");
    assert_eq!(lp["status"]["appliedPods"], 3, "{lp}");
    let applied = condition(&lp, "Applied").unwrap();
    assert!(
        applied["message"].as_str().unwrap().contains("3/3"),
        "{applied}"
    );
    assert_eq!(condition(&lp, "Ready").unwrap()["status"], "True", "{lp}");
    let table = s.kubectl(&["get", "lp"]).unwrap();
    let row = table
        .lines()
        .find(|l| l.starts_with("debug-payments"))
        .unwrap();
    assert!(row.contains("3/3"), "{table}");
}

/// Scenario 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_temporary_raise_ends_on_time() {
    let s = Scenario::new("expiry").await.unwrap();
    let mut pods = s.pods(three_shops()).await.unwrap();
    wait_known(&pods).unwrap();
    temporary_raise(&s, &mut pods, |_| {}).await.unwrap();
    // The operator saw it expire, too.
    let lp = s
        .wait_condition("incident", "Expired", "True", 10 * SEC)
        .unwrap();
    assert_eq!(
        condition(&lp, "Applied").unwrap()["status"],
        "False",
        "{lp}"
    );
    let events = wait_for(10 * SEC, "an Expired Event", || {
        let events = s.events("incident")?;
        Ok(events
            .iter()
            .any(|e| e.starts_with("Expired:"))
            .then_some(events))
    })
    .unwrap();
    eprintln!("events: {events:?}");
}

/// Applies a 10 s raise of `shop::payment` to debug, calls `after_push` once every pod
/// logs at debug, and checks that every pod stops on time: no debug line later than
/// 1 s after the expiration time in the policy's status, access lines going on.
pub async fn temporary_raise(
    s: &Scenario,
    pods: &mut [DemoPod],
    after_push: impl FnOnce(&Scenario),
) -> Result<()> {
    let t0 = SystemTime::now();
    s.apply(
        r#"
apiVersion: logpolicy.dev/v1alpha1
kind: LogPolicy
metadata: {name: incident}
spec:
  selector: {matchLabels: {app: shop}}
  targets:
  - {target: "shop::payment", level: debug}
  duration: 10s
"#,
    )?;
    let firsts = wait_lines(
        pods,
        t0,
        5 * SEC,
        "shop::payment debug lines",
        payment_debug,
    )?;
    let delays: Vec<f64> = firsts.iter().map(|t| secs_between(*t, t0)).collect();
    eprintln!("apply -> first debug line per pod: {delays:.3?} s");
    after_push(s);
    // Each pod holds the expiry in its own document.
    let expiry = pods[0].policy()?["nextExpiry"]
        .as_str()
        .map(logpolicy::clock::parse_rfc3339)
        .ok_or_else(|| logpolicy_e2e::Error("no nextExpiry in the pod's policy".into()))?
        .map_err(logpolicy_e2e::Error)?;
    let in_force = secs_between(expiry, t0);
    if !(9.0..=11.5).contains(&in_force) {
        return Err(logpolicy_e2e::Error(format!(
            "expiry {in_force:.3} s after apply, not ~10 s"
        )));
    }
    wait_past(pods, expiry + 2 * SEC, 20 * SEC)?;
    let mut lasts = Vec::new();
    for p in pods.iter() {
        let last = p
            .log
            .last(payment_debug)
            .map(|l| l.ts)
            .ok_or_else(|| logpolicy_e2e::Error(format!("{}: no debug lines", p.name)))?;
        let late = secs_between(last, expiry);
        lasts.push(late);
        if late > 1.0 {
            return Err(logpolicy_e2e::Error(format!(
                "{}: a debug line {late:.3} s after the expiry",
                p.name
            )));
        }
        if late < -1.0 {
            return Err(logpolicy_e2e::Error(format!(
                "{}: debug lines stopped {:.3} s before the expiry",
                p.name, -late
            )));
        }
        if p.log.count(expiry + SEC, expiry + 2 * SEC, served) < 5 {
            return Err(logpolicy_e2e::Error(format!(
                "{}: too few access lines after the expiry to tell",
                p.name
            )));
        }
    }
    eprintln!("last debug line per pod, relative to the expiry: {lasts:.3?} s");
    Ok(())
}
