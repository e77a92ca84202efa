//! Expiry: a layer with an `expires_at` stops applying at that instant, even if nothing
//! ever talks to the process again.
//!
//! With the system clock, a filter keeps a small timer thread (`logpolicy-expiry`,
//! started the first time a policy has an expiry) that sleeps until the next expiry and
//! recompiles. With an injected clock, time moves only when the test moves it, and
//! [`PolicyHandle::refresh`] re-evaluates the policy at the clock's time.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::filter::{PolicyHandle, Shared};

impl Shared {
    /// Wakes (or starts) the timer thread, which sleeps until the next expiry.
    pub(super) fn arm_timer(self: &Arc<Self>) {
        if !self.own_timer {
            return;
        }
        if let Some(t) = self.timer.get() {
            t.unpark();
            return;
        }
        if self.timer_started.swap(true, Ordering::SeqCst) {
            return;
        }
        let weak = Arc::downgrade(self);
        let spawned = std::thread::Builder::new()
            .name("logpolicy-expiry".into())
            .spawn(move || expiry_timer(weak));
        match spawned {
            Ok(handle) => {
                let _ = self.timer.set(handle.thread().clone());
            }
            // No thread: expiry still happens at the next change or refresh.
            Err(_) => self.timer_started.store(false, Ordering::SeqCst),
        }
    }
}

/// Sleeps until the next expiry, recompiles, repeats; exits when the filter is gone.
fn expiry_timer(shared: Weak<Shared>) {
    const IDLE: Duration = Duration::from_secs(60);
    loop {
        let wait = {
            let Some(s) = shared.upgrade() else { return };
            // Conditions no thread has been in for a while go back to sleep; while
            // they are awake, look again every `DORMANT_AFTER`.
            s.sleep_conditions_if_idle();
            let doze = if s.conditions_awake() {
                super::when::DORMANT_AFTER
            } else {
                IDLE
            };
            let compiled = s.compiled.load();
            match compiled.effective.next_expiry {
                Some(at) => {
                    let now = s.clock.now();
                    if at <= now {
                        drop(compiled);
                        PolicyHandle { shared: s.clone() }.refresh();
                        continue;
                    }
                    at.duration_since(now).unwrap_or_default().min(doze)
                }
                None => doze,
            }
        };
        std::thread::park_timeout(wait);
    }
}
