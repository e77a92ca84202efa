//! A pod with an admin endpoint and a writer writes one line from target `logpolicy`
//! when a pushed layer starts applying and one when it stops (its expiry passed, a new
//! document left it out, a DELETE cleared it, or the container restarted: told by the
//! new process's first document), naming the policy, its reason, what it
//! changes and its expiry, in the output's format, whatever the levels are; and counts
//! them in the stats. A refused push writes one WARN line with the answer's code and
//! reason, at most one a second (the next one counts the refusals in between).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin_fixture;

use std::time::{Duration, Instant, SystemTime};

use admin_fixture::{doc_for, pod_config, put_signed, send, sources, POD_UID};
use logpolicy::admin::AdminServer;
use logpolicy::clock::{format_rfc3339, parse_rfc3339};
use logpolicy::format::Service;
use logpolicy::wire::{self, SigningKey};
use logpolicy::writer::{Output, Writer, WriterConfig, WriterGuard};
use logpolicy::{Format, PolicyFilter, PolicyHandle};
use serde_json::Value;

const REASON: &str = "INC-4211: card declines at checkout";

/// A pod whose baseline writes nothing at all, its admin endpoint, and its output file.
struct Pod {
    key: SigningKey,
    admin: AdminServer,
    handle: PolicyHandle,
    writer: Writer,
    _guard: WriterGuard,
    path: std::path::PathBuf,
}

impl Pod {
    fn start(format: Format) -> Pod {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!(
            "policy-lines-{}-{n}-{format}.log",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&path);
        let (writer, guard) = Writer::new(
            WriterConfig::new(Output::File(path.clone())).lines(format, Service::named("shop")),
        )
        .unwrap();
        let filter = PolicyFilter::from_directives("off").unwrap();
        let key = SigningKey::from_bytes(&[42; 32]);
        let admin =
            AdminServer::start(pod_config(&key), filter.handle(), Some(writer.clone())).unwrap();
        Pod {
            key,
            admin,
            handle: filter.handle(),
            writer,
            _guard: guard,
            path,
        }
    }

    fn push(&self, method: &str, version: u64, layers: &str) {
        let body = doc_for(POD_UID, version, layers);
        let r = if method == "PUT" {
            put_signed(self.admin.local_addr(), &self.key, &body)
        } else {
            let sig = wire::sign(body.as_bytes(), &self.key);
            send(
                self.admin.local_addr(),
                method,
                "/logpolicy",
                &[(wire::SIGNATURE_HEADER, &sig)],
                body.as_bytes(),
            )
        };
        assert_eq!(r.status, 200, "{r:?}");
    }

    /// Every line written so far.
    fn lines(&self) -> Vec<String> {
        assert!(self.writer.flush(Duration::from_secs(5)));
        std::fs::read_to_string(&self.path)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Waits until `n` lines are written.
    fn wait_for_lines(&self, n: usize) -> Vec<String> {
        let start = Instant::now();
        loop {
            let lines = self.lines();
            if lines.len() >= n {
                return lines;
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "{n} lines expected: {lines:#?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The layers of the first document: a raise for 1.5 s with a reason, and a standing
/// one without a reason (the fixture gives it an hour, as the operator gives a standing
/// policy a day and renews it).
fn first_layers(expires: SystemTime) -> String {
    format!(
        r#"[{{"source":"shop/debug-payments","priority":10,"expiresAt":"{}","reason":"{REASON}",
            "targets":[{{"target":"shop::payment","level":"debug"}}]}},
           {{"source":"shop/standing","defaultLevel":"warn"}}]"#,
        format_rfc3339(expires)
    )
}

fn raise_only(expires: SystemTime) -> String {
    format!(
        r#"[{{"source":"shop/debug-payments","priority":10,"expiresAt":"{}","reason":"{REASON}",
            "targets":[{{"target":"shop::payment","level":"debug"}}]}}]"#,
        format_rfc3339(expires)
    )
}

/// What a JSON line of the layer says about a layer change.
#[derive(Debug, PartialEq)]
struct Said {
    msg: String,
    policy: String,
    reason: Option<String>,
    changes: String,
    ended: Option<String>,
    expires: Option<SystemTime>,
}

fn said(line: &str) -> Said {
    let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
    assert_eq!(v["target"], "logpolicy", "{line}");
    assert_eq!(v["level"], "INFO", "{line}");
    assert_eq!(v["service.name"], "shop", "{line}");
    let s = |k: &str| v[k].as_str().map(str::to_owned);
    Said {
        msg: s("msg").unwrap(),
        policy: s("policy").unwrap(),
        reason: s("reason"),
        changes: s("changes").unwrap(),
        ended: s("ended"),
        expires: s("expires").map(|t| parse_rfc3339(&t).unwrap()),
    }
}

/// Within a few hundred milliseconds (the pod moves an expiry to its own clock).
fn near(a: Option<SystemTime>, b: SystemTime) -> bool {
    a.is_some_and(|a| {
        a.duration_since(b)
            .or_else(|_| b.duration_since(a))
            .is_ok_and(|d| d < Duration::from_millis(500))
    })
}

#[test]
fn json_lines_name_the_policy_its_reason_changes_and_expiry() {
    let pod = Pod::start(Format::Json);
    let expires = SystemTime::now() + Duration::from_millis(1500);
    pod.push("PUT", 1, &first_layers(expires));
    // Written before the answer, with nothing logged and every level off.
    let lines = pod.lines();
    assert_eq!(lines.len(), 2, "{lines:#?}");
    let raise = said(&lines[0]);
    assert_eq!(raise.msg, "policy started applying");
    assert_eq!(raise.policy, "shop/debug-payments");
    assert_eq!(raise.reason.as_deref(), Some(REASON));
    assert_eq!(raise.changes, "shop::payment=debug");
    assert_eq!(raise.ended, None);
    assert!(near(raise.expires, expires), "{raise:?}");
    let standing = said(&lines[1]);
    assert_eq!(
        (
            standing.msg.as_str(),
            standing.policy.as_str(),
            standing.reason.as_deref()
        ),
        ("policy started applying", "shop/standing", None)
    );
    // Renewed by the operator; the document gives it an hour (as the fixture does).
    assert!(
        near(
            standing.expires,
            SystemTime::now() + Duration::from_secs(3600)
        ),
        "{standing:?}"
    );
    assert_eq!(standing.changes, "warn");

    // A new document without the standing layer: it ends, the raise goes on unchanged.
    pod.push("PUT", 2, &raise_only(expires));
    let lines = pod.lines();
    assert_eq!(lines.len(), 3, "{lines:#?}");
    let removed = said(&lines[2]);
    assert_eq!(
        (
            removed.msg.as_str(),
            removed.policy.as_str(),
            removed.ended.as_deref()
        ),
        ("policy stopped applying", "shop/standing", Some("removed"))
    );

    // The raise ends at its expiry, with no request and no event.
    let lines = pod.wait_for_lines(4);
    assert!(SystemTime::now() >= expires - Duration::from_millis(300));
    let expired = said(&lines[3]);
    assert_eq!(expired.msg, "policy stopped applying");
    assert_eq!(expired.policy, "shop/debug-payments");
    assert_eq!(expired.reason.as_deref(), Some(REASON));
    assert_eq!(expired.changes, "shop::payment=debug");
    assert_eq!(expired.ended.as_deref(), Some("expired"));
    assert!(near(expired.expires, expires), "{expired:?}");

    // Another raise, then a DELETE.
    let later = SystemTime::now() + Duration::from_secs(600);
    pod.push("PUT", 3, &raise_only(later));
    pod.push("DELETE", 4, "[]");
    let lines = pod.lines();
    assert_eq!(lines.len(), 6, "{lines:#?}");
    assert_eq!(said(&lines[4]).msg, "policy started applying");
    let deleted = said(&lines[5]);
    assert_eq!(
        (deleted.msg.as_str(), deleted.ended.as_deref()),
        ("policy stopped applying", Some("removed"))
    );
    assert!(near(deleted.expires, later), "{deleted:?}");

    // Counted as what they are: not events.
    let stats = pod.handle.stats();
    assert_eq!(stats.policy_lines, 6);
    assert_eq!(stats.total().written, 0);
}

#[test]
fn a_restart_that_lost_a_raise_is_said_by_the_new_process_once_before_what_starts() {
    // A new process (this pod, just started) gets its first document: the raise is in
    // force again, and the document says what the previous process held when its
    // container restarted: the raise and a standing layer since removed.
    let pod = Pod::start(Format::Json);
    let expires = SystemTime::now() + Duration::from_secs(600);
    let lost = format!(
        r#"[{{"source":"shop/debug-payments","priority":10,"expiresAt":"{}","reason":"{REASON}",
            "targets":[{{"target":"shop::payment","level":"debug"}}]}},
           {{"source":"shop/standing","defaultLevel":"warn"}}]"#,
        format_rfc3339(expires)
    );
    let with_lost = |version: u64| {
        let body = doc_for(POD_UID, version, &raise_only(expires));
        format!("{},\"lost\":{lost}}}", &body[..body.len() - 1])
    };
    let r = put_signed(pod.admin.local_addr(), &pod.key, &with_lost(1));
    assert_eq!(r.status, 200, "{r:?}");
    let lines = pod.lines();
    assert_eq!(lines.len(), 3, "{lines:#?}");
    let ended: Vec<Said> = lines[..2].iter().map(|l| said(l)).collect();
    for (e, policy) in ended.iter().zip(["shop/debug-payments", "shop/standing"]) {
        assert_eq!(
            (e.msg.as_str(), e.policy.as_str(), e.ended.as_deref()),
            ("policy stopped applying", policy, Some("restart")),
            "{lines:#?}"
        );
    }
    assert_eq!(ended[0].reason.as_deref(), Some(REASON));
    assert_eq!(ended[0].changes, "shop::payment=debug");
    assert!(near(ended[0].expires, expires), "{:?}", ended[0]);
    assert_eq!(ended[1].changes, "warn");
    let started = said(&lines[2]);
    assert_eq!(
        (started.msg.as_str(), started.policy.as_str(), started.ended),
        ("policy started applying", "shop/debug-payments", None)
    );
    // Not applied: the standing layer it names is not in force.
    let held = sources(&pod.handle);
    assert!(!held.contains(&"shop/standing".to_owned()), "{held:?}");

    // Said once: a later document of this process that carries it again is applied
    // and its `lost` ignored.
    let r = put_signed(pod.admin.local_addr(), &pod.key, &with_lost(2));
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(pod.lines().len(), 3, "{:#?}", pod.lines());
    assert_eq!(pod.handle.stats().policy_lines, 3);
}

#[test]
fn text_lines_say_the_same() {
    let pod = Pod::start(Format::Text);
    let expires = SystemTime::now() + Duration::from_millis(1500);
    pod.push("PUT", 1, &raise_only(expires));
    let lines = pod.wait_for_lines(2);
    assert_eq!(lines.len(), 2, "{lines:#?}");
    for (line, msg) in lines.iter().zip([
        "INFO logpolicy: policy started applying policy=\"shop/debug-payments\"",
        "INFO logpolicy: policy stopped applying policy=\"shop/debug-payments\"",
    ]) {
        assert!(line.contains(msg), "{line}");
        assert!(line.contains(&format!("reason=\"{REASON}\"")), "{line}");
        assert!(line.contains("changes=\"shop::payment=debug\""), "{line}");
        assert!(line.contains("priority=10"), "{line}");
        let at = line
            .split("expires=\"")
            .nth(1)
            .and_then(|s| s.split('"').next());
        assert!(
            near(at.map(|t| parse_rfc3339(t).unwrap()), expires),
            "{line}"
        );
    }
    assert!(lines[1].ends_with("ended=\"expired\""), "{}", lines[1]);
    assert_eq!(pod.handle.stats().policy_lines, 2);
}

#[test]
fn a_reason_with_control_characters_or_too_long_is_refused_by_name() {
    let pod = Pod::start(Format::Json);
    for (reason, message) in [
        ("two\\nlines", "must not contain control characters"),
        (
            &"x".repeat(257)[..],
            "is 257 characters long, more than 256",
        ),
    ] {
        let body = doc_for(
            POD_UID,
            1,
            &format!(r#"[{{"source":"shop/a","defaultLevel":"debug","reason":"{reason}"}}]"#),
        );
        let r = put_signed(pod.admin.local_addr(), &pod.key, &body);
        let why = r.refused(422, "invalid_document");
        assert!(why.starts_with("layers[0].reason: "), "{why}");
        assert!(why.contains(message), "{why}");
    }
    // No policy line; one line says the first refusal (the second came within the
    // second after it), its reason escaped into one line.
    let lines = pod.lines();
    assert_eq!(lines.len(), 1, "{lines:#?}");
    let refused: Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(refused["msg"], "refused a policy push", "{refused}");
    assert_eq!(refused["status"], 422, "{refused}");
    assert!(
        refused["reason"]
            .as_str()
            .unwrap()
            .starts_with("layers[0].reason: "),
        "{refused}"
    );
    assert_eq!(pod.handle.stats().policy_lines, 0);
}

#[test]
fn refused_pushes_are_written_at_most_once_a_second_with_the_count_in_between() {
    let pod = Pod::start(Format::Json);
    let addr = pod.admin.local_addr();
    let body = doc_for(
        POD_UID,
        1,
        &raise_only(SystemTime::now() + Duration::from_secs(60)),
    );
    // Unsigned, signed by an unknown key, then for another pod: refused, each with its
    // own code; a flood of unsigned ones after them.
    let unsigned = send(addr, "PUT", "/logpolicy", &[], body.as_bytes());
    assert_eq!(unsigned.status, 401, "{unsigned:?}");
    let stranger = SigningKey::from_bytes(&[7; 32]);
    assert_eq!(put_signed(addr, &stranger, &body).status, 401);
    let elsewhere = doc_for("another-pods-uid", 2, "[]");
    assert_eq!(put_signed(addr, &pod.key, &elsewhere).status, 403);
    for _ in 0..20 {
        send(addr, "PUT", "/logpolicy", &[], body.as_bytes());
    }
    let lines = pod.lines();
    assert_eq!(
        lines.len(),
        1,
        "one line for the first refusal only: {lines:#?}"
    );
    let first: Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(first["level"], "WARN", "{first}");
    assert_eq!(first["target"], "logpolicy", "{first}");
    assert_eq!(first["msg"], "refused a policy push", "{first}");
    assert_eq!(first["status"], 401, "{first}");
    let unsigned: Value = serde_json::from_str(&unsigned.body).unwrap();
    assert_eq!(first["error"], unsigned["error"], "{first}");
    assert_eq!(first["reason"], unsigned["reason"], "{first}");
    assert!(first.get("suppressed").is_none(), "{first}");

    // A second later the next refusal is written, with the 22 in between counted.
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(put_signed(addr, &pod.key, &elsewhere).status, 403);
    let lines = pod.wait_for_lines(2);
    let second: Value = serde_json::from_str(&lines[1]).unwrap();
    assert_eq!(second["status"], 403, "{second}");
    assert_eq!(second["error"], "wrong_pod", "{second}");
    assert_eq!(second["suppressed"], 22, "{second}");
    // Nothing of it applied.
    assert!(pod.handle.effective().sources == ["env"], "{lines:#?}");
}
