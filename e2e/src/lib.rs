//! The end-to-end harness: a real etcd + kube-apiserver on loopback (started by
//! `e2e/cluster/up`), the Helm chart rendered offline, the real `logpolicy-operator`
//! binary running with exactly the chart's RBAC, and `logpolicy-demo-service` processes
//! standing in for pods on 127.x.y.z addresses. The tests in `e2e/tests/` drive it the
//! way a platform engineer does: with `kubectl`.

pub mod accounts;
pub mod bench;
pub mod binaries;
pub mod cluster;
pub mod helm;
pub mod image;
pub mod krew;
pub mod logs;
pub mod net;
pub mod operator;
pub mod plugin;
pub mod pod;
pub mod process;
pub mod prometheus;
pub mod release;
pub mod scenario;
pub mod shop;
pub mod terminal;

pub use cluster::{Cluster, Error, Namespace, Result};
pub use operator::Operator;
pub use pod::{DemoPod, PodSpec};
pub use scenario::Scenario;
