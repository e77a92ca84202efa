//! The `namespace/name` keys of a LogPolicy and of a pod, as the operator and the plugin
//! name them (`shop/debug-payments`).

use std::fmt;
use std::str::FromStr;

/// A LogPolicy's `namespace/name`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PolicyKey {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

/// A pod's `namespace/name`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PodKey {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

/// A key that is not `namespace/name` (the text given).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not namespace/name")]
pub struct NotNamespaceName(pub String);

macro_rules! key_impls {
    ($t:ident) => {
        impl $t {
            /// The key of `namespace/name`.
            pub fn new(namespace: &str, name: &str) -> Self {
                $t {
                    namespace: namespace.to_owned(),
                    name: name.to_owned(),
                }
            }
        }
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}/{}", self.namespace, self.name)
            }
        }
        impl FromStr for $t {
            type Err = NotNamespaceName;
            /// Parses `namespace/name`.
            fn from_str(s: &str) -> Result<Self, NotNamespaceName> {
                match s.split_once('/') {
                    Some((ns, name)) if !ns.is_empty() && !name.is_empty() => Ok($t::new(ns, name)),
                    _ => Err(NotNamespaceName(s.to_owned())),
                }
            }
        }
    };
}
key_impls!(PolicyKey);
key_impls!(PodKey);
