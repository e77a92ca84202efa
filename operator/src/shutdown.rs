//! Stopping: SIGTERM (or ctrl-c) turns the stop signal on, and everything long-running
//! (the HTTP server, the election, the controller) watches it.

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;

use crate::log;

/// The stop signal. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Shutdown {
    stop: watch::Receiver<bool>,
}

impl Shutdown {
    /// Starts the task that turns the signal on at SIGTERM or ctrl-c.
    pub fn on_signal() -> Self {
        let (tx, stop) = watch::channel(false);
        tokio::spawn(async move {
            wait_for_signal().await;
            log::info!("shutting down");
            let _ = tx.send(true);
        });
        Shutdown { stop }
    }

    /// A receiver that turns true when the process stops.
    pub fn receiver(&self) -> watch::Receiver<bool> {
        self.stop.clone()
    }

    /// Calls `f` until it succeeds, logging each failure, with a capped backoff (500 ms
    /// doubling to 30 s); `None` if the process stops first.
    pub async fn retry<T, E, F, Fut>(&self, what: &str, mut f: F) -> Option<T>
    where
        E: std::fmt::Display,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let mut stop = self.receiver();
        let attempts = async {
            let mut wait = Duration::from_millis(500);
            loop {
                match f().await {
                    Ok(v) => return v,
                    Err(e) => {
                        log::warn!(what, error = %e, retry_in = ?wait, "failed; retrying");
                        tokio::time::sleep(wait).await;
                        wait = (wait * 2).min(Duration::from_secs(30));
                    }
                }
            }
        };
        tokio::select! {
            v = attempts => Some(v),
            _ = stop.changed() => None,
        }
    }
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(e) => {
                log::warn!(error = %e, "cannot watch SIGTERM");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
