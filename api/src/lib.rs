//! # logpolicy-api
//!
//! What the logpolicy operator and the kubectl plugin share, the way a controller keeps
//! its Kubernetes API types in a crate of their own: the `LogPolicy` custom resource,
//! what the schema cannot say about it, and the names both look for on the cluster.
//! The plugin builds on this crate, not on the operator's.
//!
//! The modules, from the bottom up; each imports only modules below it
//! (`operator/tests/modules_import_only_downward.rs` holds the order):
//! - leaves, importing nothing of the crate: [`text`] (text bounded for the API),
//!   [`labels`] (the opt-in label, the port and key-id annotations, the Lease's name),
//!   [`conditions`] (the status condition types and the reason of a refused spec),
//!   [`keys`] (`namespace/name`), [`trust`] (the `logpolicy-trust` ConfigMap's name and
//!   content) and [`crd`] (the `LogPolicy` resource, its schema, status and printer
//!   columns);
//! - [`validate`](mod@validate): what the schema cannot say, checked once into a
//!   [`ValidatedPolicy`](validate::ValidatedPolicy).
//!
//! `src/bin/crdgen.rs` prints the CRD that `crds/` holds.

pub mod conditions;
pub mod crd;
pub mod keys;
pub mod labels;
pub mod selector;
pub mod text;
pub mod trust;

pub mod validate;

pub use crd::{LogPolicy, LogPolicySpec, LogPolicyStatus};
pub use keys::{PodKey, PolicyKey};
pub use labels::{DEFAULT_ADMIN_PORT, OPT_IN_LABEL, PORT_ANNOTATION};
