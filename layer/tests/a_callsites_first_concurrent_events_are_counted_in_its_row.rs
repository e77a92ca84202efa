//! A callsite's first events, while one thread is still registering it (tracing lets
//! the other threads ask the filter meanwhile), are counted in that callsite's ledger
//! row, never in `other`: `other` counts only callsites past the cap (none here).
//!
//! 128 fresh callsites, each first called by 4 threads at once behind a barrier, under a
//! layer whose registration takes 1 ms (so the other three threads' events are decided
//! while the first is still registering), every event sampled out.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Barrier};
use std::time::Duration;

use logpolicy::{Directives, Policy, PolicyFilter, PolicyLayer};
use tracing_core::{Interest, Metadata, Subscriber};
use tracing_subscriber::prelude::*;

/// A layer whose callsite registration is slow (as another layer's may be).
struct SlowRegistration;

impl<S: Subscriber> tracing_subscriber::Layer<S> for SlowRegistration {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        std::thread::sleep(Duration::from_millis(1));
        Interest::always()
    }
}

macro_rules! fresh_sites {
    ($($n:literal)*) => {
        [$((|| tracing::info!(target: "race::fresh", n = $n, "fresh")) as fn()),*]
    };
}

const THREADS: usize = 4;

#[test]
fn events_of_a_callsite_being_registered_are_counted_in_its_row() {
    let directives: Directives = "info,@sample(race)=1/1000000".parse().unwrap();
    let filter = PolicyFilter::new(Policy::new(vec![PolicyLayer::baseline(directives)]));
    // The slow layer outside the filter: it is asked first, and the filter gives the
    // row only after it.
    let handle = filter.handle();
    tracing_subscriber::registry()
        .with(filter)
        .with(SlowRegistration)
        .init();
    let sites: Arc<[fn()]> = Arc::new(
        fresh_sites!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127),
    );
    let barrier = Arc::new(Barrier::new(THREADS));
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let (sites, barrier) = (sites.clone(), barrier.clone());
            std::thread::spawn(move || {
                for site in sites.iter() {
                    barrier.wait();
                    site();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let ledger = handle.sites();
    let stats = handle.stats();
    let info = stats.level(&tracing::Level::INFO);
    let emitted = (THREADS * sites.len()) as u64;
    // One event in a million is kept: at most the first.
    assert!(
        info.sampled >= emitted - 1 && info.sampled <= emitted,
        "{info:?}"
    );
    assert_eq!(ledger.other_sites, 0);
    assert_eq!(
        ledger.other.sampled, 0,
        "counted in other: {:?}",
        ledger.other
    );
    let rows: Vec<_> = ledger
        .rows
        .iter()
        .filter(|r| r.target == "race::fresh")
        .collect();
    assert_eq!(rows.len(), sites.len(), "one row per callsite");
    let sampled: u64 = rows.iter().map(|r| r.counts.sampled).sum();
    assert_eq!(sampled, info.sampled);
    for r in &rows {
        assert!(
            r.counts.sampled >= THREADS as u64 - 1,
            "{}:{:?}: {:?}",
            r.target,
            r.line,
            r.counts
        );
    }
}
