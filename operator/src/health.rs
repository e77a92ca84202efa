//! What `/healthz` and `/readyz` report: the controller runs (this replica leads) and
//! every watch has listed once, or this replica stands by while another leads.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// What the health endpoints read, and the controller writes.
#[derive(Debug, Default)]
pub struct Health {
    /// Watches (of both kinds, every scope) that have not listed yet.
    unsynced: AtomicUsize,
    /// The controller loop runs (this replica leads).
    running: AtomicBool,
    /// Leader election is on: a replica that does not lead is ready (and idle).
    standby_ready: AtomicBool,
}

/// What `/readyz` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    /// Leading, and every watch has listed once.
    Leading,
    /// Not leading (leader election): ready, idle.
    Standby,
    /// Starting, or leading but a watch has not listed yet.
    NotReady,
}

impl Health {
    /// Leader election is on: a replica that does not lead reports ready.
    pub fn set_standby_ready(&self, on: bool) {
        self.standby_ready.store(on, Ordering::Relaxed);
    }

    /// What `/readyz` says.
    pub fn readiness(&self) -> Readiness {
        if !self.running.load(Ordering::Relaxed) {
            if self.standby_ready.load(Ordering::Relaxed) {
                Readiness::Standby
            } else {
                Readiness::NotReady
            }
        } else if self.unsynced.load(Ordering::Relaxed) == 0 {
            Readiness::Leading
        } else {
            Readiness::NotReady
        }
    }

    /// Whether every watch has listed once (the loop pushes only then).
    pub fn ready(&self) -> bool {
        self.readiness() != Readiness::NotReady
    }

    /// The controller starts, with `watches` watches to wait for.
    pub(crate) fn start(&self, watches: usize) {
        self.unsynced.store(watches, Ordering::Relaxed);
        self.running.store(true, Ordering::Relaxed);
    }

    /// One watch listed for the first time: one fewer to wait for.
    pub(crate) fn listed(&self) {
        self.unsynced.fetch_sub(1, Ordering::Relaxed);
    }

    /// The controller stopped.
    pub(crate) fn stop(&self) {
        self.running.store(false, Ordering::Relaxed);
    }

    /// The controller runs and every watch has listed once.
    pub(crate) fn synced(&self) -> bool {
        self.running.load(Ordering::Relaxed) && self.unsynced.load(Ordering::Relaxed) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_once_every_watch_listed_or_standing_by() {
        let health = Health::default();
        assert_eq!(health.readiness(), Readiness::NotReady);
        health.set_standby_ready(true);
        assert_eq!(health.readiness(), Readiness::Standby);
        assert!(health.ready());
        health.start(2);
        assert_eq!(health.readiness(), Readiness::NotReady);
        assert!(!health.synced());
        health.listed();
        health.listed();
        assert_eq!(health.readiness(), Readiness::Leading);
        assert!(health.synced());
        health.stop();
        assert_eq!(health.readiness(), Readiness::Standby);
        assert!(!health.synced());
    }
}
