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
//! after [`WatchBackoff`]: 250 ms, doubled per consecutive error up to 2 s, so that the
//! watches resume within 2 s of the API server being back (kube's default backoff
//! grows to 30 s and would leave an outage's end unseen for that long).

use std::collections::BTreeSet;
use std::time::Duration;

use futures::stream::BoxStream;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::utils::Backoff;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client};

use crate::crd::LogPolicy;
use crate::pods::{PodInfo, OPT_IN_LABEL};

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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchBackoff {
    next: Duration,
}

impl WatchBackoff {
    /// The wait after the first error.
    pub const FIRST: Duration = Duration::from_millis(250);
    /// The longest wait: how long after the API server is back the watches resume, at
    /// most (plus the list itself).
    pub const MAX: Duration = Duration::from_secs(2);
}

impl Default for WatchBackoff {
    fn default() -> Self {
        WatchBackoff { next: Self::FIRST }
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let wait = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        Some(wait)
    }
}

impl Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.next = Self::FIRST;
    }
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
        watcher::watcher(api, watcher::Config::default())
            .backoff(WatchBackoff::default())
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
        watcher::watcher(
            api,
            watcher::Config::default().labels(&format!("{OPT_IN_LABEL}=true")),
        )
        .backoff(WatchBackoff::default())
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
        watcher::watcher(api, by_name(name))
            .backoff(WatchBackoff::default())
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

    #[test]
    fn the_watch_backoff_doubles_up_to_two_seconds_and_resets() {
        let mut b = WatchBackoff::default();
        let waits: Vec<u128> = b.by_ref().take(6).map(|d| d.as_millis()).collect();
        assert_eq!(waits, [250, 500, 1000, 2000, 2000, 2000]);
        b.reset();
        assert_eq!(b.next(), Some(WatchBackoff::FIRST));
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
