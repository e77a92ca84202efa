//! `target=level@when(field=values)`: a target's level raised only for events in a span
//! (or below one) that recorded the field with one of the values; every other event
//! as without it. Through our filter and formatter, on an injected clock.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use logpolicy::clock::Clock;
use logpolicy::PolicyLayer;
use support::Harness;
use tracing::field::Empty;
use tracing::Instrument;

const RAISE: &str = "info,shop::payment=debug@when(user_id=42|43)";

fn request(user: u64, n: u32) {
    let span = tracing::info_span!("request", user_id = user);
    let _in = span.enter();
    tracing::debug!(target: "shop::payment", "charge {user} #{n}");
    tracing::debug!(target: "shop::db", "query {user} #{n}");
    tracing::info!(target: "shop::payment", "paid {user} #{n}");
}

#[test]
fn matching_and_other_requests_interleaved_on_one_thread() {
    let h = Harness::new(RAISE);
    h.run(|| {
        for n in 0..3 {
            request(42, n);
            request(7, n);
            request(43, n);
        }
        // Outside any request: the raise does not apply.
        tracing::debug!(target: "shop::payment", "no request");
    });
    let got = h.messages();
    let mut want = Vec::new();
    for n in 0..3 {
        want.extend([format!("charge 42 #{n}"), format!("paid 42 #{n}")]);
        want.push(format!("paid 7 #{n}"));
        want.extend([format!("charge 43 #{n}"), format!("paid 43 #{n}")]);
    }
    assert_eq!(got, want);
}

#[test]
fn the_value_may_be_text_a_number_or_displayed_and_be_recorded_later() {
    let h = Harness::new("info,shop=debug@when(tenant=acme|7)");
    h.run(|| {
        let id = 7u32;
        for span in [
            tracing::info_span!("r", tenant = "acme"),
            tracing::info_span!("r", tenant = 7),
            tracing::info_span!("r", tenant = %id),
            tracing::info_span!("r", tenant = ?"acme"),
            tracing::info_span!("r", tenant = "other"),
            tracing::info_span!("r", tenant = 8),
            tracing::info_span!("r", customer = "acme"),
        ] {
            span.in_scope(|| tracing::debug!(target: "shop", "in"));
        }
        // Recorded after the span was created: what comes after is raised.
        let span = tracing::info_span!("r", tenant = Empty);
        let _in = span.enter();
        tracing::debug!(target: "shop", "before the record");
        span.record("tenant", "acme");
        tracing::debug!(target: "shop", "after the record");
    });
    assert_eq!(
        h.messages(),
        ["in", "in", "in", "in", "after the record"],
        "text, number, display and debug match; another value or field does not"
    );
}

#[test]
fn spans_below_a_matching_one_are_in_it_and_leaving_it_ends_the_raise() {
    let h = Harness::new(RAISE);
    h.run(|| {
        let outer = tracing::info_span!("request", user_id = 42);
        outer.in_scope(|| {
            let db = tracing::info_span!("db");
            db.in_scope(|| {
                let deeper = tracing::info_span!("tx", user_id = 7);
                deeper.in_scope(|| tracing::debug!(target: "shop::payment", "deep"));
                tracing::debug!(target: "shop::payment", "child");
            });
            tracing::debug!(target: "shop::payment", "back in the request");
        });
        tracing::debug!(target: "shop::payment", "after the request");
        // A span created inside the request but entered after it ended is still below it.
        let later = outer.in_scope(|| tracing::info_span!("background"));
        later.in_scope(|| tracing::debug!(target: "shop::payment", "its background job"));
    });
    assert_eq!(
        h.messages(),
        ["deep", "child", "back in the request", "its background job"]
    );
}

#[test]
fn a_span_entered_again_is_judged_by_what_it_recorded_since() {
    let h = Harness::new(RAISE);
    h.run(|| {
        // Entered while it matched nothing (a thread remembers that), left, given the
        // value while no thread is in it, entered again: it matches now.
        let span = tracing::info_span!("request", user_id = Empty);
        for n in 0..2 {
            span.in_scope(|| tracing::debug!(target: "shop::payment", "before #{n}"));
        }
        span.record("user_id", 42u64);
        span.in_scope(|| tracing::debug!(target: "shop::payment", "recorded while left"));
        drop(span);
        // Requests one after another, each entered twice: one of another customer's
        // entered before a matching one (whose creation a thread's memory of spans
        // without a match must not hide), and after it.
        for (n, user) in [7u64, 42, 7, 43, 7].into_iter().enumerate() {
            let span = tracing::info_span!("request", user_id = user);
            for pass in 0..2 {
                span.in_scope(|| {
                    tracing::debug!(target: "shop::payment", "user {user} #{n}.{pass}");
                });
            }
        }
    });
    assert_eq!(
        h.messages(),
        [
            "recorded while left",
            "user 42 #1.0",
            "user 42 #1.1",
            "user 43 #3.0",
            "user 43 #3.1"
        ]
    );
}

#[test]
fn across_the_tasks_of_a_multi_threaded_runtime() {
    let h = Harness::new(RAISE);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    h.run(|| {
        let dispatch = tracing::dispatcher::get_default(Clone::clone);
        rt.block_on(async {
            let mut tasks = Vec::new();
            for i in 0..40u64 {
                let user = if i % 2 == 0 { 42 } else { 1000 + i };
                let span = tracing::info_span!("request", user_id = user);
                let task = async move {
                    for step in 0..5 {
                        tokio::task::yield_now().await;
                        tracing::debug!(target: "shop::payment", user, step, "step");
                    }
                }
                .instrument(span);
                tasks.push(tokio::spawn(
                    tracing::instrument::WithSubscriber::with_subscriber(task, dispatch.clone()),
                ));
            }
            for t in tasks {
                t.await.unwrap();
            }
        });
    });
    let lines = h.lines();
    let users: Vec<u64> = lines
        .iter()
        .filter(|l| l["msg"] == "step")
        .map(|l| l["user"].as_u64().unwrap())
        .collect();
    assert_eq!(
        users.len(),
        20 * 5,
        "every step of user 42's 20 requests: {users:?}"
    );
    assert!(users.iter().all(|u| *u == 42), "{users:?}");
}

#[test]
fn a_raise_that_expires_while_a_matching_request_is_open_ends_in_it() {
    let h = Harness::new("info");
    let now = h.clock.now();
    h.handle
        .upsert_layer(
            PolicyLayer::new("shop/user-42", 10, RAISE.parse().unwrap())
                .unwrap()
                .expires_at(now + Duration::from_secs(900)),
        )
        .unwrap();
    h.run(|| {
        let span = tracing::info_span!("request", user_id = 42);
        let _in = span.enter();
        tracing::debug!(target: "shop::payment", "raised");
        h.clock.advance(Duration::from_secs(900));
        assert!(h.handle.refresh());
        tracing::debug!(target: "shop::payment", "after the expiry");
        tracing::info!(target: "shop::payment", "info goes on");
    });
    assert_eq!(h.messages(), ["raised", "info goes on"]);
}

#[test]
fn a_matching_request_is_kept_whole_by_request_sampling() {
    // One request in 1,000 kept; user 42's requests always, whole.
    let h = Harness::new("info,shop=debug@when(user_id=42),@sample(shop)=1/1000:request");
    h.run(|| {
        for n in 0..5 {
            for user in [7u64, 42] {
                let span = tracing::info_span!("request", user_id = user);
                let _in = span.enter();
                tracing::info!(target: "shop", "start {user} #{n}");
                tracing::debug!(target: "shop", "detail {user} #{n}");
            }
        }
    });
    let got = h.messages();
    let mine: Vec<&String> = got.iter().filter(|m| m.contains(" 42 ")).collect();
    assert_eq!(mine.len(), 10, "{got:?}");
    // The first request of the others is the one in 1,000 kept; the rest are not.
    let others = got.iter().filter(|m| m.contains(" 7 ")).count();
    assert!(others <= 1, "{got:?}");
}

#[test]
fn sampling_under_when_applies_only_in_the_matching_requests() {
    // Customer 42: shop raised to debug, one shop event in 4 kept (errors always).
    // Everyone else: every info line, no debug, whatever the rule says.
    let h = Harness::new(
        "info,shop=debug@when(user_id=42),@sample(shop)=1/4@when(user_id=42),@sample(shop::noisy)=1/2",
    );
    h.run(|| {
        // Customer 7 first: what the filter decides outside the condition must not
        // stand for the matching request.
        for user in [7u64, 42] {
            let span = tracing::info_span!("request", user_id = user);
            let _in = span.enter();
            for n in 0..8 {
                tracing::debug!(target: "shop::payment", "detail {user} #{n}");
                tracing::info!(target: "shop::payment", "step {user} #{n}");
            }
            tracing::error!(target: "shop::payment", "failed {user}");
            // Without the condition's rule, the target's own sampling applies.
            for n in 0..4 {
                tracing::info!(target: "shop::noisy", "noisy {user} #{n}");
            }
        }
        // Outside any request the conditional rule does nothing either.
        for n in 0..4 {
            tracing::info!(target: "shop::payment", "outside #{n}");
        }
    });
    let got = h.messages();
    let count = |p: &str| got.iter().filter(|m| m.starts_with(p)).count();
    // 16 sampled shop events (8 debug + 8 info, in order) of customer 42: one in 4 kept.
    assert_eq!(
        count("detail 42") + count("step 42"),
        4,
        "one in four of 42's shop events: {got:?}"
    );
    assert_eq!(count("failed 42"), 1, "errors are always kept");
    // shop::noisy is under shop: the conditional rule (1/4, longer targets first among
    // conditional rules) replaces its own 1/2 in 42's request.
    assert_eq!(count("noisy 42"), 1, "{got:?}");
    // Customer 7: no debug, every info line, and shop::noisy's own 1/2.
    assert_eq!(count("detail 7"), 0);
    assert_eq!(count("step 7"), 8, "{got:?}");
    assert_eq!(count("failed 7"), 1);
    assert_eq!(count("noisy 7"), 2, "{got:?}");
    assert_eq!(count("outside"), 4);
}

#[test]
fn a_conditional_rule_of_one_in_one_turns_the_targets_sampling_off_in_matching_requests() {
    let h = Harness::new("info,@sample(shop)=1/10,@sample(shop)=1/1@when(tenant=acme)");
    h.run(|| {
        for tenant in ["other", "acme"] {
            let span = tracing::info_span!("request", tenant);
            let _in = span.enter();
            for n in 0..10 {
                tracing::info!(target: "shop", "{tenant} #{n}");
            }
        }
    });
    let got = h.messages();
    assert_eq!(got.iter().filter(|m| m.starts_with("acme")).count(), 10);
    assert_eq!(got.iter().filter(|m| m.starts_with("other")).count(), 1);
}

#[test]
fn lines_held_before_the_value_was_recorded_are_written_when_it_is() {
    // One request in 1,000 kept (the first); the others' lines are held. A request that
    // records user_id=42 only once the handler knows it is kept whole: what it held
    // before comes first, in order.
    let h = Harness::new("info,shop=debug@when(user_id=42),@sample(shop)=1/1000:request");
    h.run(|| {
        for (n, user) in [(0u64, 7u64), (1, 42), (2, 7)] {
            let span = tracing::info_span!("request", n, user_id = Empty);
            let _in = span.enter();
            tracing::info!(target: "shop", "accepted #{n}");
            tracing::info!(target: "shop", "authenticated #{n}");
            span.record("user_id", user);
            tracing::debug!(target: "shop", "detail #{n}");
            tracing::info!(target: "shop", "served #{n}");
        }
    });
    assert_eq!(
        h.messages(),
        [
            // The one request in 1,000: kept, at info.
            "accepted #0",
            "authenticated #0",
            "served #0",
            // Customer 42: everything, the held lines first.
            "accepted #1",
            "authenticated #1",
            "detail #1",
            "served #1",
        ],
        "request #2 is sampled out"
    );
}
