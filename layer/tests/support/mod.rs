//! A subscriber for tests: our filter and our formatter writing JSON into memory, on an
//! injected clock.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use logpolicy::clock::ManualClock;
use logpolicy::enforce::RequestLimits;
use logpolicy::{Format, FormatLayer, Policy, PolicyFilter, PolicyHandle, PolicyLayer};
use tracing_subscriber::prelude::*;

pub struct Harness {
    pub dispatch: tracing::Dispatch,
    pub handle: PolicyHandle,
    pub clock: ManualClock,
    pub out: Arc<Mutex<Vec<u8>>>,
}

impl Harness {
    pub fn new(directives: &str) -> Self {
        Self::with_limits(directives, RequestLimits::default())
    }

    pub fn with_limits(directives: &str, limits: RequestLimits) -> Self {
        Self::build(directives, limits, 10)
    }

    pub fn with_summary_every(directives: &str, secs: u64) -> Self {
        Self::build(directives, RequestLimits::default(), secs)
    }

    pub fn build(directives: &str, limits: RequestLimits, summary_secs: u64) -> Self {
        let clock = ManualClock::new(UNIX_EPOCH + Duration::from_secs(1_800_000_000));
        let filter = PolicyFilter::with_clock(
            Policy::new(vec![PolicyLayer::baseline(directives.parse().unwrap())]),
            clock.clone(),
        );
        let out = Arc::new(Mutex::new(Vec::new()));
        let dispatch = tracing::Dispatch::new(
            tracing_subscriber::registry().with(filter.clone()).with(
                FormatLayer::new(Format::Json, out.clone())
                    .with_policy(&filter)
                    .request_limits(limits)
                    .summary_interval(summary_secs),
            ),
        );
        Harness {
            dispatch,
            handle: filter.handle(),
            clock,
            out,
        }
    }

    pub fn run<R>(&self, f: impl FnOnce() -> R) -> R {
        tracing::dispatcher::with_default(&self.dispatch, f)
    }

    /// Every line written so far, parsed.
    pub fn lines(&self) -> Vec<serde_json::Value> {
        let out = self.out.lock().unwrap();
        String::from_utf8(out.clone())
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }

    /// The messages of the lines that are events (not the layer's own lines).
    pub fn messages(&self) -> Vec<String> {
        self.lines()
            .iter()
            .filter(|l| l["target"] != "logpolicy")
            .map(|l| l["msg"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    pub fn own_lines(&self) -> Vec<serde_json::Value> {
        self.lines()
            .into_iter()
            .filter(|l| l["target"] == "logpolicy")
            .collect()
    }
}

/// A layer that counts the events it sees.
#[derive(Clone, Default)]
pub struct Count(pub Arc<AtomicUsize>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Count {
    fn on_event(&self, _: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}
