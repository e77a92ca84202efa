//! # logpolicy-operator
//!
//! Watches `LogPolicy` objects and opted-in pods, and pushes each pod's effective, signed
//! logging policy into the pod's admin endpoint.
//!
//! The modules, from the bottom up; each imports only modules below it
//! (`tests/modules_import_only_downward.rs` holds the order):
//! The `LogPolicy` resource, its validation and the names the plugin shares (labels,
//! annotations, condition types, the trust ConfigMap and the Lease) are the crate
//! [`logpolicy_api`]'s, re-exported here as [`crd`] and [`validate`](mod@validate).
//!
//! - leaves, importing nothing of the crate: [`log`] (the one log target),
//!   [`metrics`], [`health`], [`ownership`] (field manager, managed-by label) and
//!   [`pods`] (a pod stripped to what the index needs, [`PodInfo`]);
//! - [`index`]: the pure, synchronous decision logic: policies + pods → each pod's
//!   document, the pushes to make and each policy's view;
//! - [`status`]: a policy's view as its `status`, with conditions; [`push`]: the HTTP
//!   side, signed `PUT`s and read-backs, bounded, timed out, retried;
//! - the Kubernetes (and process) edges: [`watches`], [`status_writer`], [`trust`] (the
//!   `logpolicy-trust` ConfigMap), [`events`], [`lease`] (leader election),
//!   [`signing_key`], [`shutdown`], [`access`] (bearer tokens for `/metrics`, checked
//!   with TokenReviews and SubjectAccessReviews) and [`serving_cert`] (the certificate
//!   `/metrics` is served over TLS with);
//! - [`controller`]: the loop that drives the index and the pusher from the watches;
//! - [`http`]: `/healthz`, `/readyz`, `/metrics` and the per-pod view;
//! - [`flags`]: the command line, and each part's configuration from it.
//!
//! `main.rs` wires these together (under 100 lines: `tests/main_is_wiring_only.rs`);
//! see the crate's README.

pub mod log;
pub mod metrics;
pub mod ownership;

pub mod health;
pub mod pods;

pub mod index;

pub mod push;
pub mod status;

pub mod access;
pub mod events;
pub mod lease;
pub mod serving_cert;
pub mod shutdown;
pub mod signing_key;
pub mod simulated;
pub mod status_writer;
pub mod trust;
pub mod watches;

pub mod controller;

pub mod http;

pub mod flags;

pub use logpolicy_api::{crd, validate};

pub use crd::{LogPolicy, LogPolicySpec, LogPolicyStatus};
pub use index::{
    Index, LastPush, PodKey, PodView, PolicyInput, PolicyKey, PolicyView, Push, PushResult,
    PushTicket, ReadBackTarget,
};
pub use pods::{NoAdminAddr, PodInfo, DEFAULT_ADMIN_PORT, OPT_IN_LABEL, PORT_ANNOTATION};
pub use push::{PushOutcome, PushReport, Pusher, PusherConfig, ReadBack};
pub use validate::{validate, FieldError, ValidatedPolicy};

/// What can go wrong in the operator.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A call to the Kubernetes API failed.
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// A document or object could not be (de)serialized.
    #[error("serialization: {0}")]
    Serialization(#[from] serde_json::Error),
    /// YAML output failed.
    #[error("yaml: {0}")]
    Yaml(#[from] serde_yaml::Error),
    /// A signing or public key could not be read or made.
    #[error("key: {0}")]
    Key(#[from] logpolicy::wire::KeyError),
    /// An object the operator cannot use (e.g. a LogPolicy without a namespace).
    #[error("invalid object {object}: {reason}")]
    InvalidObject {
        /// `namespace/name` or the kind.
        object: String,
        /// Why.
        reason: String,
    },
    /// Local I/O failed (a key file, a listener).
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
}

impl Error {
    /// A short, bounded label for metrics (`error="kube"`).
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::Serialization(_) => "serialization",
            Error::Yaml(_) => "yaml",
            Error::Key(_) => "key",
            Error::InvalidObject { .. } => "invalid_object",
            Error::Io(_) => "io",
        }
    }
}

/// A `Result` with the operator's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
