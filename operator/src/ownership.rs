//! How the operator marks what it writes: the field manager of its server-side applies
//! (a LogPolicy's status, the trust ConfigMaps) and the label on what it creates.

use kube::api::PatchParams;

/// The field manager of every server-side apply.
pub const FIELD_MANAGER: &str = "logpolicy-operator";

/// The label on everything the operator creates.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "logpolicy-operator");

/// A server-side apply under [`FIELD_MANAGER`], forced: the operator owns the fields it
/// applies, whoever set them before.
pub fn apply_params() -> PatchParams {
    PatchParams::apply(FIELD_MANAGER).force()
}
