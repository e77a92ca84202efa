//! Conditions share 64 bits process-wide; a bit whose condition is no longer in force is
//! given to the next new one. A span that matched the old condition, still open when
//! its bit is given away, does not match the new condition by it (its own value is
//! another customer's), while spans of the new condition's customer do.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use logpolicy::clock::Clock;
use logpolicy::PolicyLayer;
use support::Harness;

#[test]
fn a_span_open_across_200_conditions_matches_only_its_own() {
    let h = Harness::new("info");
    let raise = |user: u32| {
        h.handle
            .upsert_layer(
                PolicyLayer::new(
                    "shop/one-customer",
                    10,
                    format!("shop=debug@when(user_id={user})").parse().unwrap(),
                )
                .unwrap()
                .expires_at(h.clock.now() + std::time::Duration::from_secs(900)),
            )
            .unwrap();
    };
    raise(0);
    h.run(|| {
        // Customer 0's request, open the whole time (and a child created in it later).
        let first = tracing::info_span!("request", user_id = 0u32);
        first.in_scope(|| tracing::debug!(target: "shop", "customer 0 while raised"));
        for user in 1..200u32 {
            // Each raise replaces the last: from the 64th on, bits are given again.
            raise(user);
            first.in_scope(|| {
                tracing::debug!(target: "shop", "customer 0 under {user}");
                tracing::info_span!("step").in_scope(|| {
                    tracing::debug!(target: "shop", "customer 0 step under {user}");
                });
            });
            tracing::info_span!("request", user_id = user)
                .in_scope(|| tracing::debug!(target: "shop", "customer {user}"));
        }
        // Customer 0 raised again: like any request under way when a raise starts, its
        // open one is not in it (conditions are matched as spans record values); its
        // next one is.
        raise(0);
        first.in_scope(|| tracing::debug!(target: "shop", "customer 0, open request"));
        tracing::info_span!("request", user_id = 0u32)
            .in_scope(|| tracing::debug!(target: "shop", "customer 0 raised again"));
    });
    let got = h.messages();
    let mut want = vec!["customer 0 while raised".to_owned()];
    want.extend((1..200).map(|u| format!("customer {u}")));
    want.push("customer 0 raised again".to_owned());
    assert_eq!(got, want);
}
