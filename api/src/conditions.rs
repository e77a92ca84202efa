//! The condition types of a LogPolicy's `status` and the reason of a refused spec, as
//! the operator writes them and the plugin reads them (Kubernetes conventions: a list
//! keyed by `type`; kstatus reads `Reconciling` and `Stalled`).

/// `Ready`: the current generation is valid and every selected pod acknowledged it (or
/// it selects no pod, or it expired and the pods are back to their baseline). False with
/// reason `Invalid` (refused, and then also `Stalled`), `PodsPending` or `PodsFailed`
/// (pushes in flight, and then also `Reconciling`).
pub const READY: &str = "Ready";
/// The reason of `Ready=False`, `Stalled=True` and `Applied=False` when the current
/// generation is refused (its spec is invalid).
pub const INVALID: &str = "Invalid";
/// `Applied`: every selected pod acknowledged the policy.
pub const APPLIED: &str = "Applied";
/// `Expired`: the policy's time is over (it stays, for audit).
pub const EXPIRED: &str = "Expired";
/// `Reconciling`: pushes are in flight: the policy is valid, in force, and some selected
/// pod has not acknowledged it yet (its reason is `Applied`'s: `PodsPending`,
/// `PodsFailed`). What kstatus, `kubectl wait`, Flux and Argo CD read as in progress.
pub const RECONCILING: &str = "Reconciling";
/// `Stalled`: the current generation is refused (invalid, or beyond the operator's
/// limits; reason `Invalid`, the message naming each field) and waits for a new spec:
/// what kstatus reads as failed.
pub const STALLED: &str = "Stalled";
