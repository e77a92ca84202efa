//! The watches: LogPolicies, opted-in pods and the trust ConfigMaps, with one watcher per scope (every
//! namespace, or each namespace named) and kind, merged into one stream per kind whose
//! items carry the index of their scope.
//!
//! LogPolicies are watched as untyped objects, so that one malformed object is skipped
//! (by the controller) rather than failing the whole list. Pods are watched with the
//! opt-in label selector and stripped to a [`PodInfo`] at once: no `Pod` is kept.
//! ConfigMaps are watched by name only (the field selector `metadata.name=NAME`, for
//! the trust ConfigMap `logpolicy-trust`), which is also what lets their RBAC rule name them
//! (`resourceNames`): the API server authorizes a list or watch with that selector as a
//! request for that one name.
//!
//! After an error (the API server restarting, a network cut) a watcher tries again
//! after [`WatchBackoff`]: 250 ms, doubled per consecutive error up to 1 s, so that the
//! watches resume within about a second of the API server being ready again (kube's
//! default backoff grows to 30 s and would leave an outage's end unseen for that long).
//! A restarted API server has a new watch cache, which answers a watch resumed from a
//! resource version of the old one with `410 Gone`: the watcher lists again at once
//! rather than after another wait (measured after a SIGKILL: the errors just before
//! the server was ready, then the 410, cost up to two waits of the old 2 s cap). And a
//! restarted server may hold a request sent while it was starting (a watch held 10 s):
//! for a while after an error, a watcher that stays silent is started again.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};

use crate::log;
use crate::pods::{PodInfo, OPT_IN_LABEL};
use logpolicy_api::crd::LogPolicy;

/// A LogPolicy event as the controller sees it: an untyped object.
pub type PolicyEvent = Event<DynamicObject>;

/// A pod watch event, each pod already stripped to a [`PodInfo`] (`None`: unusable).
pub type PodEvent = Event<Option<PodInfo>>;

/// A ConfigMap watch event.
pub type ConfigMapEvent = Event<ConfigMap>;

/// The events of every watcher of one kind, each with the index of its scope.
pub type Tagged<T> = BoxStream<'static, (usize, Result<Event<T>, watcher::Error>)>;

/// The scopes of the watches: `[None]` (all namespaces) or one `Some` per namespace.
pub fn watch_scopes(namespaces: &[String]) -> Vec<Option<String>> {
    let set: BTreeSet<&str> = namespaces
        .iter()
        .map(|n| n.trim())
        .filter(|n| !n.is_empty())
        .collect();
    if set.is_empty() {
        vec![None]
    } else {
        set.into_iter().map(|n| Some(n.to_owned())).collect()
    }
}

/// The watchers' backoff after errors: [`WatchBackoff::FIRST`], doubled per consecutive
/// error up to [`WatchBackoff::MAX`]; reset by any event. Never gives up.
///
/// A `410 Gone` (the resource version a watch resumes from is no longer in the server's
/// watch cache, as after the API server restarted) is no failure of the server: the
/// watcher lists again at once ([`WatchBackoff::after`] returns zero) and the backoff
/// does not grow. At most one such immediate list per [`WatchBackoff::GONE_INTERVAL`]:
/// a server that kept answering 410 is backed off like any other error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchBackoff {
    next: Duration,
    /// When the last immediate list after a 410 was allowed.
    gone_at: Option<Instant>,
}

impl WatchBackoff {
    /// The wait after the first error.
    pub const FIRST: Duration = Duration::from_millis(250);
    /// The longest wait: how long after the API server is ready again the watches
    /// resume, at most (plus the list itself).
    pub const MAX: Duration = Duration::from_secs(1);
    /// At most one immediate list after a `410 Gone` per this interval.
    pub const GONE_INTERVAL: Duration = Duration::from_secs(10);

    /// The wait before the watcher is polled again after `error`, at `now`.
    pub fn after(&mut self, error: &watcher::Error, now: Instant) -> Duration {
        let recent = self
            .gone_at
            .is_some_and(|t| now.saturating_duration_since(t) < Self::GONE_INTERVAL);
        if is_gone(error) && !recent {
            self.gone_at = Some(now);
            return Duration::ZERO;
        }
        let wait = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        wait
    }

    /// An event arrived: the next error waits [`WatchBackoff::FIRST`] again.
    pub fn reset(&mut self) {
        self.next = Self::FIRST;
    }
}

impl Default for WatchBackoff {
    fn default() -> Self {
        WatchBackoff {
            next: Self::FIRST,
            gone_at: None,
        }
    }
}

/// Whether the API server answered `410 Gone`: the watch's resource version expired
/// (in a watch event, or as the answer to the watch or list request).
fn is_gone(error: &watcher::Error) -> bool {
    match error {
        watcher::Error::WatchError(status) => status.code == 410,
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status)) => status.code == 410,
        _ => false,
    }
}

/// After an error other than `410 Gone`, for this long, a watcher that stays silent is
/// started again (see [`backed_off`]).
pub const RESTART_WINDOW: Duration = Duration::from_secs(15);
/// The silence after which a watcher is started again within [`RESTART_WINDOW`], doubled
/// per restart in a row (a long list in a big cluster still completes).
pub const SILENT_RESTART: Duration = Duration::from_secs(1);

/// The watcher `make` makes, with a [`WatchBackoff`]: after an error (which it passes
/// on), it is polled again only once the backoff's wait is over.
///
/// A restarted API server may hold a request sent while it was still starting (seen: a
/// watch and a status write held 10 s, then the watch answered `410 Gone`), while it
/// answers the requests sent after it is ready at once. So for [`RESTART_WINDOW`] after
/// an error other than `410 Gone`, a watcher that yields nothing for
/// [`SILENT_RESTART`] (doubled per restart in a row) is dropped and made again: a fresh
/// list, then a fresh watch, sent to the server as it is now. A change (`Apply` or
/// `Delete`) ends that window: the watch is live.
fn backed_off<T, S, F>(make: F) -> BoxStream<'static, Result<Event<T>, watcher::Error>>
where
    T: Send + 'static,
    S: Stream<Item = Result<Event<T>, watcher::Error>> + Send + 'static,
    F: Fn() -> S + Send + 'static,
{
    struct State<T, F> {
        make: F,
        watch: BoxStream<'static, Result<Event<T>, watcher::Error>>,
        backoff: WatchBackoff,
        wait: Duration,
        restart_until: Option<tokio::time::Instant>,
        restarts: u32,
    }
    let watch = make().boxed();
    let state = State {
        make,
        watch,
        backoff: WatchBackoff::default(),
        wait: Duration::ZERO,
        restart_until: None,
        restarts: 0,
    };
    futures::stream::unfold(state, |mut st| async move {
        if !st.wait.is_zero() {
            tokio::time::sleep(st.wait).await;
            st.wait = Duration::ZERO;
        }
        let item = loop {
            let window = st
                .restart_until
                .is_some_and(|t| tokio::time::Instant::now() < t);
            if !window {
                break st.watch.next().await;
            }
            let silence = SILENT_RESTART * 2u32.saturating_pow(st.restarts.min(3));
            match tokio::time::timeout(silence, st.watch.next()).await {
                Ok(item) => break item,
                Err(_) => {
                    log::debug!(
                        silent_ms = silence.as_millis(),
                        "watch silent after an error: starting it again (a fresh list)"
                    );
                    st.watch = (st.make)().boxed();
                    st.restarts += 1;
                }
            }
        }?;
        match &item {
            Ok(event) => {
                st.backoff.reset();
                if matches!(event, Event::Apply(_) | Event::Delete(_)) {
                    st.restart_until = None;
                    st.restarts = 0;
                }
            }
            Err(e) => {
                st.wait = st.backoff.after(e, Instant::now());
                if !is_gone(e) {
                    st.restart_until = Some(tokio::time::Instant::now() + RESTART_WINDOW);
                    st.restarts = 0;
                }
                log::debug!(error = %e, wait_ms = st.wait.as_millis(), "watch error: waiting");
            }
        }
        Some((item, st))
    })
    .boxed()
}

/// Strips a pod watch event at once (no `Pod` is kept).
pub fn strip_pod_event(event: Event<Pod>) -> PodEvent {
    match event {
        Event::Init => Event::Init,
        Event::InitDone => Event::InitDone,
        Event::InitApply(p) => Event::InitApply(PodInfo::from_pod(&p)),
        Event::Apply(p) => Event::Apply(PodInfo::from_pod(&p)),
        Event::Delete(p) => Event::Delete(match (p.metadata.namespace, p.metadata.name) {
            (Some(ns), Some(name)) => Some(PodInfo::new(&ns, &name, "", None, 0)),
            _ => None,
        }),
    }
}

/// The LogPolicy watchers of `scopes`, merged.
pub fn policy_events(client: &Client, scopes: &[Option<String>]) -> Tagged<DynamicObject> {
    let ar = ApiResource::erase::<LogPolicy>(&());
    let streams = scopes.iter().enumerate().map(|(i, scope)| {
        let api: Api<DynamicObject> = match scope {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
            None => Api::all_with(client.clone(), &ar),
        };
        backed_off(move || watcher::watcher(api.clone(), watcher::Config::default()))
            .map(move |r| (i, r))
            .boxed()
    });
    futures::stream::select_all(streams).boxed()
}

/// The watchers of opted-in pods of `scopes`, merged, each pod stripped.
pub fn pod_events(client: &Client, scopes: &[Option<String>]) -> Tagged<Option<PodInfo>> {
    let streams = scopes.iter().enumerate().map(|(i, scope)| {
        let api: Api<Pod> = match scope {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        };
        let opted_in = watcher::Config::default().labels(&format!("{OPT_IN_LABEL}=true"));
        backed_off(move || watcher::watcher(api.clone(), opted_in.clone()))
            .map(move |r| (i, r.map(strip_pod_event)))
            .boxed()
    });
    futures::stream::select_all(streams).boxed()
}

/// The watchers of the ConfigMaps named `name` in `scopes`, merged.
pub fn config_map_events(
    client: &Client,
    scopes: &[Option<String>],
    name: &str,
) -> Tagged<ConfigMap> {
    let streams = scopes.iter().enumerate().map(|(i, scope)| {
        let api: Api<ConfigMap> = match scope {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        };
        let config = by_name(name);
        backed_off(move || watcher::watcher(api.clone(), config.clone()))
            .map(move |r| (i, r))
            .boxed()
    });
    futures::stream::select_all(streams).boxed()
}

/// A watch of the objects named `name`, and nothing else.
fn by_name(name: &str) -> watcher::Config {
    watcher::Config::default().fields(&format!("metadata.name={name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gone() -> watcher::Error {
        let status = kube::core::Status::failure("too old resource version: 318 (322)", "Expired");
        watcher::Error::WatchError(status.with_code(410).boxed())
    }

    fn refused() -> watcher::Error {
        watcher::Error::WatchStartFailed(kube::Error::Service("connection refused".into()))
    }

    fn millis(waits: &[Duration]) -> Vec<u128> {
        waits.iter().map(Duration::as_millis).collect()
    }

    #[test]
    fn the_watch_backoff_doubles_up_to_one_second_and_resets() {
        let mut b = WatchBackoff::default();
        let now = Instant::now();
        let waits: Vec<Duration> = (0..6).map(|_| b.after(&refused(), now)).collect();
        assert_eq!(millis(&waits), [250, 500, 1000, 1000, 1000, 1000]);
        b.reset();
        assert_eq!(b.after(&refused(), now), WatchBackoff::FIRST);
    }

    #[test]
    fn a_410_gone_relists_at_once_without_growing_the_backoff() {
        let mut b = WatchBackoff::default();
        let t0 = Instant::now();
        assert_eq!(b.after(&refused(), t0), Duration::from_millis(250));
        assert_eq!(b.after(&gone(), t0), Duration::ZERO);
        assert_eq!(b.after(&refused(), t0), Duration::from_millis(500));
        // The answer to the list or watch request itself counts too.
        let listed = kube::core::Status::failure("expired", "Expired").with_code(410);
        let list_gone = watcher::Error::InitialListFailed(kube::Error::Api(listed.boxed()));
        let later = t0 + WatchBackoff::GONE_INTERVAL;
        assert_eq!(b.after(&list_gone, later), Duration::ZERO);
    }

    #[test]
    fn a_server_that_keeps_answering_410_is_backed_off() {
        let mut b = WatchBackoff::default();
        let t0 = Instant::now();
        assert_eq!(b.after(&gone(), t0), Duration::ZERO);
        b.reset(); // the list that followed succeeded
        let soon = t0 + Duration::from_secs(1);
        assert_eq!(b.after(&gone(), soon), WatchBackoff::FIRST);
        assert_eq!(b.after(&gone(), soon), Duration::from_millis(500));
        let later = t0 + WatchBackoff::GONE_INTERVAL;
        assert_eq!(b.after(&gone(), later), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn a_backed_off_watch_is_polled_again_only_after_the_wait() {
        let items: Vec<Result<Event<()>, watcher::Error>> = vec![
            Err(refused()),
            Err(refused()),
            Err(gone()),
            Ok(Event::Init),
            Err(refused()),
            Ok(Event::InitDone),
        ];
        let items = std::sync::Mutex::new(Some(items));
        let mut watch = backed_off(move || {
            futures::stream::iter(items.lock().unwrap().take().unwrap_or_default())
        });
        let start = tokio::time::Instant::now();
        let mut at = Vec::new();
        while let Some(item) = watch.next().await {
            at.push((start.elapsed().as_millis(), item.is_ok()));
        }
        // Each item is polled for after the wait its predecessor called for: 250 ms,
        // 500 ms, none after the 410, none after an event, 250 ms after the reset.
        let expected = [
            (0, false),
            (250, false),
            (750, false),
            (750, true),
            (750, false),
            (1000, true),
        ];
        assert_eq!(at, expected);
    }

    type Item = Result<Event<u32>, watcher::Error>;

    /// A watcher made by `make` from the `n`th list of items, then silent for ever; the
    /// number of watchers made.
    fn scripted(
        scripts: Vec<Vec<Item>>,
    ) -> (
        BoxStream<'static, Item>,
        std::sync::Arc<std::sync::Mutex<usize>>,
    ) {
        let made = std::sync::Arc::new(std::sync::Mutex::new(0));
        let scripts = std::sync::Mutex::new(scripts.into_iter());
        let count = made.clone();
        let watch = backed_off(move || {
            *count.lock().unwrap() += 1;
            let items = scripts.lock().unwrap().next().unwrap_or_default();
            futures::stream::iter(items).chain(futures::stream::pending())
        });
        (watch, made)
    }

    fn kind(item: &Item) -> String {
        match item {
            Err(_) => "error".into(),
            Ok(Event::Init) => "init".into(),
            Ok(Event::InitApply(n)) => format!("init-apply {n}"),
            Ok(Event::InitDone) => "init-done".into(),
            Ok(Event::Apply(n)) => format!("apply {n}"),
            Ok(Event::Delete(n)) => format!("delete {n}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_watch_held_silent_after_an_error_is_made_again_with_a_fresh_list() {
        let (mut watch, made) = scripted(vec![
            // The server went away; the watch resumed then is held by the server.
            vec![Err(refused())],
            // Made again: a fresh list, then a live watch.
            vec![
                Ok(Event::Init),
                Ok(Event::InitApply(1)),
                Ok(Event::InitDone),
                Ok(Event::Apply(2)),
            ],
        ]);
        let start = tokio::time::Instant::now();
        let mut at = Vec::new();
        for _ in 0..5 {
            let item = watch.next().await.unwrap();
            at.push((start.elapsed().as_millis(), kind(&item)));
        }
        // 250 ms of backoff, then 1 s of silence: made again at 1,250 ms.
        let expected = [
            (0, "error"),
            (1250, "init"),
            (1250, "init-apply 1"),
            (1250, "init-done"),
            (1250, "apply 2"),
        ]
        .map(|(t, k)| (t, k.to_owned()));
        assert_eq!(at, expected);
        assert_eq!(*made.lock().unwrap(), 2);
        // A change ended the window: a quiet live watch is left alone.
        let quiet = tokio::time::timeout(Duration::from_secs(60), watch.next()).await;
        assert!(quiet.is_err());
        assert_eq!(*made.lock().unwrap(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_quiet_watch_is_never_made_again_without_an_error_and_restarts_slow_down() {
        let (mut watch, made) = scripted(vec![vec![Ok(Event::Init), Ok(Event::InitDone)]]);
        assert_eq!(kind(&watch.next().await.unwrap()), "init");
        assert_eq!(kind(&watch.next().await.unwrap()), "init-done");
        let quiet = tokio::time::timeout(Duration::from_secs(600), watch.next()).await;
        assert!(quiet.is_err());
        assert_eq!(*made.lock().unwrap(), 1);

        // After an error, silent watchers are made again after 1, 2, 4, 8, 8 s of
        // silence, within the window only.
        let (mut watch, made) = scripted(vec![vec![Err(refused())]]);
        assert_eq!(kind(&watch.next().await.unwrap()), "error");
        let quiet = tokio::time::timeout(Duration::from_secs(120), watch.next()).await;
        assert!(quiet.is_err());
        // 0.25 s backoff; remade at 1.25, 3.25, 7.25, 15.25 s (the window, 15 s from
        // the error, is over at the next check).
        assert_eq!(*made.lock().unwrap(), 5);
    }

    #[test]
    fn a_watch_by_name_selects_that_name_only() {
        let c = by_name("logpolicy-trust");
        assert_eq!(
            c.field_selector.as_deref(),
            Some("metadata.name=logpolicy-trust")
        );
        assert_eq!(c.label_selector, None);
    }
}
