//! The lines that say when a pushed layer started and stopped applying in this process.
//!
//! Once an admin endpoint with a [`Writer`](crate::writer::Writer) serves a policy
//! (`PolicyHandle::announce_changes`), every compiled change compares the layers in
//! force (every layer but the baseline `env`, not expired) with those in force before
//! it, and writes one line per layer:
//!
//! - `policy started applying`: a layer that was not in force is;
//! - `policy changed`: a layer of the same source is in force with other settings (an
//!   expiry that moved by less than [`EXPIRY_JITTER`] is not a change: a pod moves each
//!   pushed expiry to its own clock, so every push of the same layer lands a few
//!   milliseconds apart);
//! - `policy stopped applying`, with `ended: expired` (its expiry passed),
//!   `ended: removed` (a new document left it out, or a `DELETE` cleared it, more than
//!   [`EXPIRY_JITTER`] before its expiry), or `ended: restart`: the container
//!   restarted and its new process does not hold the layer its previous process held.
//!   A process cannot write that line as it dies (a crash, an OOM kill); the new one
//!   writes it when the operator's first document to it says what the previous one
//!   held ([`PolicyDocument::lost`](crate::wire::PolicyDocument::lost)), before the
//!   lines of what that document starts.
//!
//! Each line names the layer's source (the LogPolicy's `namespace/name`), its reason,
//! what it changes (as directives, e.g. `shop::payment=debug`), its priority and its
//! expiry, at level `INFO` from target `logpolicy`, in the writer's format, whatever the
//! levels are: it goes to the writer beside the events, not through the filter, from the
//! thread that made the change (the endpoint's, or the expiry timer's), so an idle
//! service writes it on time too. The lines are counted in
//! [`Stats::policy_lines`](crate::Stats::policy_lines).

use std::time::{Duration, SystemTime};

use crate::policy::{Policy, PolicyLayer, BASELINE_SOURCE};

/// Expiries closer than this are the same expiry.
pub(crate) const EXPIRY_JITTER: Duration = Duration::from_secs(1);

/// What happened to a layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChangeKind {
    /// It started applying.
    Started,
    /// It applies with other settings.
    Changed,
    /// It stopped applying: its expiry passed.
    Expired,
    /// It stopped applying: it was removed.
    Removed,
    /// It stopped applying when the process that held it restarted (told by the first
    /// document the new process received).
    Lost,
}

impl ChangeKind {
    /// The line's message.
    pub(crate) fn message(self) -> &'static str {
        match self {
            ChangeKind::Started => "policy started applying",
            ChangeKind::Changed => "policy changed",
            ChangeKind::Expired | ChangeKind::Removed | ChangeKind::Lost => {
                "policy stopped applying"
            }
        }
    }

    /// Why it stopped, for the line's `ended` field.
    pub(crate) fn ended(self) -> Option<&'static str> {
        match self {
            ChangeKind::Expired => Some("expired"),
            ChangeKind::Removed => Some("removed"),
            ChangeKind::Lost => Some("restart"),
            ChangeKind::Started | ChangeKind::Changed => None,
        }
    }
}

/// One layer that started, changed or stopped applying: what one line reports.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LayerChange {
    pub(crate) kind: ChangeKind,
    /// The layer (for an end: as it was while it applied).
    pub(crate) layer: PolicyLayer,
}

/// Writes the lines of changes, at the time given, and returns how many it wrote.
pub(crate) type Announcer = Box<dyn Fn(&[LayerChange], SystemTime) -> u64 + Send + Sync>;

/// The layers of `policy` in force at `now` that are announced (all but the baseline).
pub(crate) fn in_force(policy: &Policy, now: SystemTime) -> Vec<PolicyLayer> {
    policy
        .layers()
        .iter()
        .filter(|l| l.source() != BASELINE_SOURCE && l.is_active_at(now))
        .cloned()
        .collect()
}

/// The changes from the layers in force `before` to those in force `after` (at `now`):
/// ends first, in the order of `before`, then starts and changes in the order of
/// `after`.
pub(crate) fn changes(
    before: &[PolicyLayer],
    after: &[PolicyLayer],
    now: SystemTime,
) -> Vec<LayerChange> {
    let mut out = Vec::new();
    for old in before {
        if !after.iter().any(|l| l.source() == old.source()) {
            // Removed within a second of its expiry (the operator withdraws an expired
            // layer at its expiry, which a pod may receive just before its own clock
            // gets there): it ended because it expired.
            let expired = old.expires_at.is_some_and(|at| at <= now + EXPIRY_JITTER);
            out.push(LayerChange {
                kind: if expired {
                    ChangeKind::Expired
                } else {
                    ChangeKind::Removed
                },
                layer: old.clone(),
            });
        }
    }
    for new in after {
        let kind = match before.iter().find(|l| l.source() == new.source()) {
            None => ChangeKind::Started,
            Some(old) if same(old, new) => continue,
            Some(_) => ChangeKind::Changed,
        };
        out.push(LayerChange {
            kind,
            layer: new.clone(),
        });
    }
    out
}

/// The same settings, expiries within [`EXPIRY_JITTER`].
fn same(a: &PolicyLayer, b: &PolicyLayer) -> bool {
    let expiry = match (a.expires_at, b.expires_at) {
        (None, None) => true,
        (Some(x), Some(y)) => {
            let d = x.duration_since(y).or_else(|_| y.duration_since(x));
            d.is_ok_and(|d| d < EXPIRY_JITTER)
        }
        _ => false,
    };
    expiry && a.priority == b.priority && a.directives == b.directives && a.reason == b.reason
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(source: &str, d: &str, expires: Option<u64>) -> PolicyLayer {
        let l = PolicyLayer::new(source, 1, d.parse().unwrap()).unwrap();
        match expires {
            Some(s) => l.expires_at(SystemTime::UNIX_EPOCH + Duration::from_secs(s)),
            None => l,
        }
    }

    fn kinds(c: &[LayerChange]) -> Vec<(ChangeKind, &str)> {
        c.iter().map(|c| (c.kind, c.layer.source())).collect()
    }

    #[test]
    fn starts_changes_and_ends_are_told_apart() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(100);
        let a = layer("shop/a", "debug", Some(200));
        let b = layer("shop/b", "shop=trace", None);
        let c = layer("shop/c", "warn", Some(100));
        assert_eq!(
            kinds(&changes(&[], &[a.clone(), b.clone()], t)),
            [
                (ChangeKind::Started, "shop/a"),
                (ChangeKind::Started, "shop/b")
            ]
        );
        // The same layer pushed again, its expiry moved by a few milliseconds: nothing.
        let mut a_again = a.clone();
        a_again.expires_at = a.expires_at.map(|x| x + Duration::from_millis(7));
        assert!(changes(std::slice::from_ref(&a), &[a_again], t).is_empty());
        // Another level, or a reason: a change.
        let a2 = layer("shop/a", "trace", Some(200));
        assert_eq!(
            kinds(&changes(std::slice::from_ref(&a), &[a2], t)),
            [(ChangeKind::Changed, "shop/a")]
        );
        let a3 = a.clone().with_reason("INC-1").unwrap();
        assert_eq!(
            kinds(&changes(std::slice::from_ref(&a), &[a3], t)),
            [(ChangeKind::Changed, "shop/a")]
        );
        // Removed by a document a few milliseconds before its expiry: expired.
        let due = layer("shop/due", "debug", Some(100));
        assert_eq!(
            kinds(&changes(&[due], &[], t - Duration::from_millis(20))),
            [(ChangeKind::Expired, "shop/due")]
        );
        // Gone: expired when its time passed, else removed.
        assert_eq!(
            kinds(&changes(&[c, b], &[a], t)),
            [
                (ChangeKind::Expired, "shop/c"),
                (ChangeKind::Removed, "shop/b"),
                (ChangeKind::Started, "shop/a")
            ]
        );
    }

    #[test]
    fn the_baseline_and_expired_layers_are_not_in_force() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(100);
        let policy = Policy::new(vec![
            PolicyLayer::baseline("info".parse().unwrap()),
            layer("shop/old", "debug", Some(50)),
            layer("shop/new", "debug", Some(150)),
        ]);
        let live = in_force(&policy, t);
        let sources: Vec<&str> = live.iter().map(PolicyLayer::source).collect();
        assert_eq!(sources, ["shop/new"]);
    }
}
