//! # logpolicy-operator
//!
//! Watches `LogPolicy` objects and opted-in pods, and pushes each pod's effective, signed
//! logging policy into the pod's admin endpoint.
//!
//! The parts, from the outside in:
//! - [`crd`]: the `LogPolicy` resource, its schema, status and printer columns;
//! - [`validate`]: what the schema cannot say, checked once into a [`ValidatedPolicy`];
//! - [`pods`]: a pod stripped to what the index needs ([`PodInfo`]);
//! - [`index`]: the pure, synchronous decision logic: policies + pods → each pod's
//!   document, the pushes to make and each policy's view;
//! - [`push`]: the HTTP side: signed `PUT`s and read-backs, bounded, timed out, retried;
//! - [`status`]: a policy's view as its `status`, with conditions;
//! - [`events`]: which Events a policy's changes deserve, and their publisher;
//! - [`trust`]: the `logpolicy-trust` ConfigMap holding the public key;
//! - [`lease`]: leader election with a Lease.
//!
//! The controller (watches, status, Events, keys, leader election) drives the index and
//! the pusher; see the crate's README for how.

pub mod controller;
pub mod crd;
pub mod events;
pub mod index;
pub mod lease;
pub mod pods;
pub mod push;
pub mod status;
pub mod trust;
pub mod validate;

pub use crd::{LogPolicy, LogPolicySpec, LogPolicyStatus};
pub use index::{
    Index, LastPush, PodKey, PodView, PolicyInput, PolicyKey, PolicyView, Push, PushOutcome,
    PushTicket, ReadBackTarget,
};
pub use pods::{PodInfo, DEFAULT_ADMIN_PORT, OPT_IN_LABEL, PORT_ANNOTATION};
pub use push::{PushReport, Pusher, PusherConfig, ReadBack};
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
