//! The demo shop's lines, and the checks the scenarios share.

use std::time::{Duration, SystemTime};

use crate::logs::{secs_between, Line};
use crate::pod::{DemoPod, PodSpec};
use crate::process::wait_for;
use crate::scenario::{wait_lines, wait_past, Scenario};
use crate::{Error, Result};

/// One second.
pub const SEC: Duration = Duration::from_secs(1);

/// The LogPolicy `debug-payments`: `shop::payment` at debug in the pods labelled
/// `app=shop`.
pub const DEBUG_PAYMENTS: &str = r#"
apiVersion: logpolicy.dev/v1beta1
kind: LogPolicy
metadata: {name: debug-payments}
spec:
  selector: {matchLabels: {app: shop}}
  targets:
  - {target: "shop::payment", level: debug}
"#;

/// A `shop::payment` debug line (`authorising`, one per request when enabled).
pub fn payment_debug(l: &Line) -> bool {
    l.is("shop::payment", "DEBUG")
}

/// Waits until every pod wrote a `shop::payment` debug line since `from`; returns when
/// each pod's first one was written.
pub fn wait_payment_debug(
    pods: &mut [DemoPod],
    from: SystemTime,
    timeout: Duration,
) -> Result<Vec<SystemTime>> {
    wait_lines(
        pods,
        from,
        timeout,
        "shop::payment debug lines",
        payment_debug,
    )
}

/// The credentials the demo's `authorising` line carries, and `amount_cents`, which
/// the redaction scenarios add to the redacted names.
pub const REDACTED_FIELDS: [&str; 3] = ["card_token", "authorization", "amount_cents"];

/// The `shop::payment` debug `authorising` lines `pod` wrote since `from`.
pub fn authorising_since(pod: &DemoPod, from: SystemTime) -> Vec<&Line> {
    pod.log
        .lines()
        .iter()
        .filter(|l| l.ts >= from && payment_debug(l) && l.msg == "authorising")
        .collect()
}

/// Which of [`REDACTED_FIELDS`] `line` does not write as `[redacted]`, with what it
/// writes instead.
pub fn not_redacted(line: &Line) -> Vec<String> {
    REDACTED_FIELDS
        .iter()
        .filter(|f| line.json[**f] != "[redacted]")
        .map(|f| format!("{f}={}", line.json[*f]))
        .collect()
}

/// An access line (`shop::http` info `served`, one per request).
pub fn served(l: &Line) -> bool {
    l.is("shop::http", "INFO") && l.msg == "served"
}

/// Waits until every pod holds a document from the operator (the empty one it gets
/// when it starts): the operator knows them.
pub fn wait_known(pods: &[DemoPod]) -> Result<()> {
    wait_for(10 * SEC, "the operator's first push to every pod", || {
        for p in pods {
            if p.policy_version()? == 0 {
                return Ok(None);
            }
        }
        Ok(Some(()))
    })
}

/// Waits until the effective directives of every pod contain `directive` (or, with
/// `held` false, no longer do); returns, per pod, the seconds from `start` to when it
/// was first seen so.
pub fn wait_directive(
    pods: &[DemoPod],
    directive: &str,
    held: bool,
    start: std::time::Instant,
    timeout: Duration,
) -> Result<Vec<f64>> {
    let mut seen = vec![None; pods.len()];
    let what = format!("every pod to hold {directive}: {held}");
    wait_for(timeout, &what, || {
        for (p, s) in pods.iter().zip(seen.iter_mut()) {
            if s.is_none() && p.directives()?.contains(directive) == held {
                *s = Some(start.elapsed().as_secs_f64());
            }
        }
        Ok(seen.iter().all(Option::is_some).then_some(()))
    })?;
    Ok(seen.into_iter().flatten().collect())
}

/// A LogPolicy `NAME` selecting `app=shop` and setting `shop::payment` to `level`.
pub fn payment_policy(name: &str, level: &str) -> String {
    format!(
        r#"
apiVersion: logpolicy.dev/v1beta1
kind: LogPolicy
metadata: {{name: {name}}}
spec:
  selector: {{matchLabels: {{app: shop}}}}
  targets:
  - {{target: "shop::payment", level: {level}}}
"#
    )
}

/// `shop-0`..`shop-2`, labelled `app=shop`.
pub fn three_shops() -> Vec<PodSpec> {
    (0..3)
        .map(|i| PodSpec::shop(&format!("shop-{i}")))
        .collect()
}

/// Applies a 10 s raise of `shop::payment` to debug, calls `after_push` once every pod
/// logs at debug, and checks that every pod stops on time: no debug line later than
/// 1 s after the expiration time in the policy's status, access lines going on.
pub async fn temporary_raise(
    s: &Scenario,
    pods: &mut [DemoPod],
    after_push: impl FnOnce(),
) -> Result<()> {
    let t0 = SystemTime::now();
    s.apply(
        r#"
apiVersion: logpolicy.dev/v1beta1
kind: LogPolicy
metadata: {name: incident}
spec:
  selector: {matchLabels: {app: shop}}
  targets:
  - {target: "shop::payment", level: debug}
  duration: 10s
"#,
    )?;
    let firsts = wait_payment_debug(pods, t0, 5 * SEC)?;
    let delays: Vec<f64> = firsts.iter().map(|t| secs_between(*t, t0)).collect();
    eprintln!("apply -> first debug line per pod: {delays:.3?} s");
    after_push();
    // Each pod holds the expiry in its own document.
    let expiry = pods[0].policy()?["nextExpiry"]
        .as_str()
        .map(logpolicy::clock::parse_rfc3339)
        .ok_or_else(|| Error("no nextExpiry in the pod's policy".into()))?
        .map_err(|e| Error(e.to_string()))?;
    let in_force = secs_between(expiry, t0);
    if !(9.0..=11.5).contains(&in_force) {
        return Err(Error(format!(
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
            .ok_or_else(|| Error(format!("{}: no debug lines", p.name)))?;
        let late = secs_between(last, expiry);
        lasts.push(late);
        if late > 1.0 {
            return Err(Error(format!(
                "{}: a debug line {late:.3} s after the expiry",
                p.name
            )));
        }
        if late < -1.0 {
            return Err(Error(format!(
                "{}: debug lines stopped {:.3} s before the expiry",
                p.name, -late
            )));
        }
        if p.log.count(expiry + SEC, expiry + 2 * SEC, served) < 5 {
            return Err(Error(format!(
                "{}: too few access lines after the expiry to tell",
                p.name
            )));
        }
    }
    eprintln!("last debug line per pod, relative to the expiry: {lasts:.3?} s");
    Ok(())
}

/// Waits until every pod's ledger (`GET /logpolicy/sites`) knows `target`: one of its
/// callsites ran at a level the service enables. `kubectl logpolicy raise` refuses a
/// target no pod knows; the shop's `shop::payment` is known once a request failed (its
/// error line: its debug line is below the `info` baseline until raised).
pub fn wait_target_known(pods: &[DemoPod], target: &str) -> Result<()> {
    wait_for(
        10 * SEC,
        &format!("every pod to know the target {target}"),
        || {
            for p in pods {
                let view = crate::net::get_ok(p.admin, "/logpolicy/sites")?.json()?;
                let known = view["targets"]
                    .as_array()
                    .is_some_and(|ts| ts.iter().any(|t| t["target"] == target));
                if !known {
                    return Ok(None);
                }
            }
            Ok(Some(()))
        },
    )
}
