//! For every level, events emitted == written + sampled + burst + budget (+ held while a
//! request is open), under random interleavings of requests and events from several
//! threads, with every kind of rule at once; and what the stats call written is what the
//! output holds.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;

use proptest::prelude::*;
use support::Harness;
use tracing::Level;

#[derive(Debug, Clone)]
enum Op {
    Open,
    Close,
    Event(u8, u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => Just(Op::Open),
        1 => Just(Op::Close),
        6 => (0u8..5, 0u8..3).prop_map(|(l, t)| Op::Event(l, t)),
    ]
}

fn emit(level: u8, target: u8) -> Level {
    macro_rules! at {
        ($lvl:expr) => {
            match target {
                0 => tracing::event!(target: "shop::http", $lvl, "a"),
                1 => tracing::event!(target: "shop::db", $lvl, "b"),
                _ => tracing::event!(target: "other", $lvl, "c"),
            }
        };
    }
    match level {
        0 => {
            at!(Level::TRACE);
            Level::TRACE
        }
        1 => {
            at!(Level::DEBUG);
            Level::DEBUG
        }
        2 => {
            at!(Level::INFO);
            Level::INFO
        }
        3 => {
            at!(Level::WARN);
            Level::WARN
        }
        _ => {
            at!(Level::ERROR);
            Level::ERROR
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn emitted_equals_written_plus_dropped(threads in prop::collection::vec(prop::collection::vec(op(), 1..120), 1..4)) {
        let h = Harness::new(
            "debug,@sample(shop::http)=1/3:request,@sample(shop::db)=1/4,@burst=20/s:1/3,@max_bytes_per_second=20000",
        );
        let emitted: Vec<HashMap<Level, u64>> = std::thread::scope(|s| {
            let handles: Vec<_> = threads
                .iter()
                .map(|ops| {
                    let h = &h;
                    s.spawn(move || {
                        h.run(|| {
                            let mut counts = HashMap::new();
                            let mut open = Vec::new();
                            for op in ops {
                                match op {
                                    Op::Open => open.push(tracing::info_span!("request").entered()),
                                    Op::Close => drop(open.pop()),
                                    Op::Event(l, t) => {
                                        let level = emit(*l, *t);
                                        if level != Level::TRACE {
                                            *counts.entry(level).or_insert(0) += 1;
                                        }
                                    }
                                }
                            }
                            // Spans close in reverse order at the end of the thread.
                            while open.pop().is_some() {}
                            counts
                        })
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let stats = h.handle.stats();
        let lines = h.lines();
        for level in [Level::DEBUG, Level::INFO, Level::WARN, Level::ERROR] {
            let want: u64 = emitted.iter().map(|c| c.get(&level).copied().unwrap_or(0)).sum();
            let got = stats.level(&level);
            prop_assert_eq!(got.held, 0);
            prop_assert_eq!(got.emitted(), want, "{:?}: {:?}", level, got);
            let in_output = lines
                .iter()
                .filter(|l| l["target"] != "logpolicy" && l["level"] == level.as_str())
                .count() as u64;
            prop_assert_eq!(got.written, in_output);
            if level <= Level::WARN {
                prop_assert_eq!(got.dropped(), 0, "nothing at alwaysKeep is dropped");
            }
        }
    }
}
