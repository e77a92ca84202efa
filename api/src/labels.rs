//! The labels and annotations the operator reads and writes, and the names of the
//! objects it keeps (the Lease, the trust ConfigMap): what the plugin looks for.

/// The label a pod opts in with (`logpolicy.dev/enabled: "true"`); the operator's pod
/// watch is filtered by it.
pub const OPT_IN_LABEL: &str = "logpolicy.dev/enabled";

/// The annotation naming the pod's admin port (e.g. `logpolicy.dev/port: "9090"`).
pub const PORT_ANNOTATION: &str = "logpolicy.dev/port";

/// The admin port used when a pod has no [`PORT_ANNOTATION`]: 9090.
pub const DEFAULT_ADMIN_PORT: u16 = 9090;

/// The annotation on the Lease naming the id of the key the operator signs with (16
/// hex digits, [`logpolicy::wire::key_id`]): what the pods must trust. A key id is not a
/// secret, and the Lease is readable where the signing key's Secret is not.
pub const KEY_ID_ANNOTATION: &str = "logpolicy.dev/signing-key-id";

/// The Lease the replicas elect a leader with, in the operator's namespace (without
/// leader election, the one replica's heartbeat): its holder says whether an operator
/// runs, its [`KEY_ID_ANNOTATION`] which key the pods must trust.
pub const LEASE_NAME: &str = "logpolicy-operator";
