//! Event-scope sampling keeps exactly one in N below `alwaysKeep`, decided before any
//! field is evaluated, and never touches an event at or above `alwaysKeep`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};

use support::Harness;
use tracing::Level;

static FORMATTED: AtomicUsize = AtomicUsize::new(0);

/// Counts how often it is formatted: a sampled-out event must never format it.
struct Expensive;
impl std::fmt::Debug for Expensive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        FORMATTED.fetch_add(1, Ordering::SeqCst);
        f.write_str("expensive")
    }
}

#[test]
fn one_in_n_kept_errors_all_kept_nothing_formatted_for_the_rest() {
    let h = Harness::new("info,@sample(shop::http)=1/10,@sample(shop::http::health)=1/1000");
    h.run(|| {
        for i in 0..1_000 {
            tracing::info!(target: "shop::http", i, v = ?Expensive, "served");
            tracing::debug!(target: "shop::http", "disabled by level: not counted at all");
            if i % 100 == 0 {
                tracing::error!(target: "shop::http", i, "failed");
                tracing::warn!(target: "shop::http", i, "slow");
            }
            tracing::info!(target: "shop::http::health", "ok");
            tracing::info!(target: "shop::db", "not sampled");
        }
    });
    let msgs = h.messages();
    assert_eq!(msgs.iter().filter(|m| *m == "served").count(), 100);
    assert_eq!(FORMATTED.load(Ordering::SeqCst), 100);
    assert_eq!(msgs.iter().filter(|m| *m == "failed").count(), 10);
    assert_eq!(msgs.iter().filter(|m| *m == "slow").count(), 10);
    assert_eq!(msgs.iter().filter(|m| *m == "ok").count(), 1);
    assert_eq!(msgs.iter().filter(|m| *m == "not sampled").count(), 1_000);
    // Deterministic: the first, the 11th, the 21st...
    let kept: Vec<i64> = h
        .lines()
        .iter()
        .filter(|l| l["msg"] == "served")
        .map(|l| l["i"].as_i64().unwrap())
        .collect();
    assert_eq!(kept, (0..1_000).step_by(10).collect::<Vec<_>>());

    let s = h.handle.stats();
    let info = s.level(&Level::INFO);
    assert_eq!(info.written, 100 + 1 + 1_000);
    assert_eq!(info.sampled, 900 + 999);
    assert_eq!(info.emitted(), 3_000);
    assert_eq!(s.level(&Level::ERROR).written, 10);
    assert_eq!(s.level(&Level::ERROR).dropped(), 0);
    assert_eq!(s.level(&Level::DEBUG).emitted(), 0);
}

#[test]
fn always_keep_is_part_of_the_policy_and_counters_survive_a_swap() {
    let h = Harness::new("info,@sample(app)=1/4,@always_keep=error");
    h.run(|| {
        for _ in 0..8 {
            tracing::warn!(target: "app", "warn below error is sampled");
        }
        // An unrelated change keeps the rule's phase: no extra event slips through.
        h.handle
            .set_directives("info,@sample(app)=1/4,@always_keep=error,other=debug")
            .unwrap();
        for _ in 0..8 {
            tracing::warn!(target: "app", "warn below error is sampled");
        }
        // A bad change is refused; the rule stays.
        let err = h
            .handle
            .set_directives("info,@sample(app)=1/0")
            .unwrap_err();
        assert!(
            err.to_string().contains("keepOneIn 0 is out of range"),
            "{err}"
        );
        for _ in 0..4 {
            tracing::warn!(target: "app", "warn below error is sampled");
        }
    });
    let s = h.handle.stats().level(&Level::WARN);
    assert_eq!((s.written, s.sampled), (5, 15));
}

/// One callsite, so the per-callsite fast path is what decides.
fn served(n: usize) {
    for i in 0..n {
        tracing::info!(target: "app::x", i, "served");
    }
}

fn served_count(h: &Harness) -> usize {
    h.messages().iter().filter(|m| *m == "served").count()
}

#[test]
fn a_changed_rule_applies_from_the_next_event_and_each_filter_keeps_its_own_count() {
    let h = Harness::new("info,@sample(app::x)=1/10");
    h.run(|| {
        served(20);
        assert_eq!(served_count(&h), 2);
        // A new rule (another N) starts its own count with the next event.
        h.handle.set_directives("info,@sample(app::x)=1/3").unwrap();
        served(9);
        assert_eq!(served_count(&h), 2 + 3);
        // No rule: every event.
        h.handle.set_directives("info").unwrap();
        served(5);
        assert_eq!(served_count(&h), 2 + 3 + 5);
        // Below the level: none, and nothing counted as sampled.
        h.handle.set_directives("warn").unwrap();
        served(5);
        assert_eq!(served_count(&h), 2 + 3 + 5);
        h.handle.set_directives("info,@sample(app::x)=1/5").unwrap();
    });
    let info = h.handle.stats().level(&Level::INFO);
    assert_eq!((info.written, info.sampled), (10, 18 + 6));

    // Two filters deciding the same callsite in turn each keep their own one in N.
    let other = Harness::new("info,@sample(app::x)=1/2");
    for _ in 0..10 {
        h.run(|| served(5));
        other.run(|| served(5));
    }
    assert_eq!(served_count(&h), 10 + 50 / 5);
    assert_eq!(served_count(&other), 50 / 2);
    let info = other.handle.stats().level(&Level::INFO);
    assert_eq!((info.written, info.sampled), (25, 25));
}
