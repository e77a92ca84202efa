//! Watch events into the index: relists buffered until complete, malformed objects
//! skipped. Pure: tests drive these without an API server.

use std::collections::HashMap;
use std::time::SystemTime;

use kube::api::DynamicObject;
use kube::core::dynamic::ParseDynamicObjectError;
use kube::runtime::watcher::Event;
use kube::ResourceExt;

use crate::index::{Index, PodKey, PolicyInput, PolicyKey};
use crate::pods::PodInfo;
use crate::watches::{PodEvent, PolicyEvent};
use logpolicy_api::crd::{LogPolicy, LogPolicyStatus};

/// Buffers the objects of a relist (`Init`, `InitApply`.., `InitDone`) until it is
/// complete, so the index is reset once with the whole list.
#[derive(Debug)]
pub struct InitBuffer<T> {
    items: Option<Vec<T>>,
}

impl<T> Default for InitBuffer<T> {
    fn default() -> Self {
        InitBuffer { items: None }
    }
}

impl<T> InitBuffer<T> {
    /// `Init`: a relist starts (an unfinished one is dropped).
    pub fn start(&mut self) {
        self.items = Some(Vec::new());
    }

    /// `InitApply`: one object of the relist.
    pub fn push(&mut self, item: T) {
        self.items.get_or_insert_with(Vec::new).push(item);
    }

    /// `InitDone`: the whole list.
    pub fn finish(&mut self) -> Vec<T> {
        self.items.take().unwrap_or_default()
    }

    /// Whether a relist is under way.
    pub fn in_progress(&self) -> bool {
        self.items.is_some()
    }
}

/// What a LogPolicy event did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// The index changed.
    Changed,
    /// A relist is buffering.
    Buffered,
    /// The relist completed: the index was reset.
    InitDone,
    /// The object could not be used; it was skipped (the reason is logged).
    Skipped(String),
}

/// Why a LogPolicy from the watch cannot be used (it is skipped, and the reason logged).
#[derive(Debug, thiserror::Error)]
pub enum UnusablePolicy {
    /// It is not a LogPolicy the types can read.
    #[error("LogPolicy {name}: {source}")]
    Malformed {
        /// `namespace/name`, as far as the object has them.
        name: String,
        /// What did not parse.
        source: ParseDynamicObjectError,
    },
    /// It has no namespace.
    #[error("LogPolicy {0} has no namespace")]
    NoNamespace(String),
}

/// A `DynamicObject` as a `LogPolicy`, or why not.
pub fn parse_policy(obj: DynamicObject) -> Result<LogPolicy, UnusablePolicy> {
    let name = format!(
        "{}/{}",
        obj.metadata.namespace.as_deref().unwrap_or(""),
        obj.metadata.name.as_deref().unwrap_or("")
    );
    obj.try_parse::<LogPolicy>()
        .map_err(|source| UnusablePolicy::Malformed { name, source })
}

/// What the controller keeps of a LogPolicy as last read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observed {
    /// Its status (for the conditions' transition times, and to skip equal writes).
    pub status: Option<LogPolicyStatus>,
    /// Its uid (Events name it).
    pub uid: Option<String>,
}

/// Applies one LogPolicy watch event of the watch of `scope` (a namespace, or `None`
/// for all) to the index. `observed` keeps each policy's status and uid as last read.
pub fn apply_policy_event(
    index: &mut Index,
    buffer: &mut InitBuffer<PolicyInput>,
    observed: &mut HashMap<PolicyKey, Observed>,
    scope: Option<&str>,
    event: PolicyEvent,
    now: SystemTime,
) -> Applied {
    match event {
        Event::Init => {
            buffer.start();
            Applied::Buffered
        }
        Event::InitApply(obj) => match policy_input(obj, observed) {
            Ok(input) => {
                buffer.push(input);
                Applied::Buffered
            }
            Err(reason) => Applied::Skipped(reason.to_string()),
        },
        Event::InitDone => {
            let inputs = buffer.finish();
            observed.retain(|k, _| {
                scope.is_some_and(|ns| k.namespace != ns)
                    || inputs
                        .iter()
                        .any(|i| i.namespace == k.namespace && i.name == k.name)
            });
            index.reset_policies_in(scope, inputs, now);
            Applied::InitDone
        }
        Event::Apply(obj) => match policy_input(obj, observed) {
            Ok(input) => {
                index.apply_policy(input, now);
                Applied::Changed
            }
            Err(reason) => Applied::Skipped(reason.to_string()),
        },
        Event::Delete(obj) => {
            let (Some(ns), Some(name)) = (obj.metadata.namespace, obj.metadata.name) else {
                return Applied::Skipped("deleted LogPolicy without namespace or name".into());
            };
            let key = PolicyKey::new(&ns, &name);
            observed.remove(&key);
            index.delete_policy(&key);
            Applied::Changed
        }
    }
}

fn policy_input(
    obj: DynamicObject,
    observed: &mut HashMap<PolicyKey, Observed>,
) -> Result<PolicyInput, UnusablePolicy> {
    let lp = parse_policy(obj)?;
    let input = PolicyInput::from_resource(&lp)
        .ok_or_else(|| UnusablePolicy::NoNamespace(lp.name_any()))?;
    observed.insert(
        PolicyKey::new(&input.namespace, &input.name),
        Observed {
            uid: lp.metadata.uid.clone(),
            status: lp.status,
        },
    );
    Ok(input)
}

/// Applies one (stripped) pod watch event of the watch of `scope` to the index.
pub fn apply_pod_event(
    index: &mut Index,
    buffer: &mut InitBuffer<PodInfo>,
    scope: Option<&str>,
    event: PodEvent,
    now: SystemTime,
) -> Applied {
    match event {
        Event::Init => {
            buffer.start();
            Applied::Buffered
        }
        Event::InitApply(Some(info)) => {
            buffer.push(info);
            Applied::Buffered
        }
        Event::InitApply(None) | Event::Apply(None) | Event::Delete(None) => {
            Applied::Skipped("pod without namespace, name or uid".into())
        }
        Event::InitDone => {
            index.reset_pods_in(scope, buffer.finish(), now);
            Applied::InitDone
        }
        Event::Apply(Some(info)) => {
            index.apply_pod(info, now);
            Applied::Changed
        }
        Event::Delete(Some(info)) => {
            index.delete_pod(&PodKey::new(&info.namespace, &info.name));
            Applied::Changed
        }
    }
}
