//! `check`: a doctor for "the raise did not arrive". One line per check, each `ok`,
//! `warn` or `FAIL`, what was checked and, on a failure, what to do:
//!
//! 1. the CRD: installed, the versions it serves and stores, and whether it serves the
//!    version this plugin writes;
//! 2. the operator: its Lease `logpolicy-operator` in `--operator-namespace` is held and
//!    renewed (the operator keeps it with or without `--leader-election`: a heartbeat
//!    when it does not elect), and which key it signs with (the Lease's annotation
//!    `logpolicy.dev/signing-key-id`);
//! 3. per namespace with opted-in pods: the trust ConfigMap `logpolicy-trust` is there
//!    and holds exactly the operator's key;
//! 4. the selected pods: opted in, their admin endpoint reachable (`GET /logpolicy`,
//!    through the API server's pod proxy, else at the pod's IP), trusting the
//!    operator's key (the view's `trustedKeys`), and their clock (the view's `readAt`)
//!    near this machine's;
//! 5. the pods' recording rules: a rule whose target no pod read knows (no callsite of
//!    it has run: misspelt, or code not run yet) records nothing, a warning.
//!
//! The decisions are pure functions of what was read ([`crd_check`],
//! [`operator_check`], [`trust_check`], [`pod_check`]), tested without a cluster;
//! [`check`] reads and prints. Any `FAIL` exits with [`exit::CHECK_FAILED`]; warnings
//! do not fail.
//!
//! # Clocks
//!
//! A pod judges a document by its own clock: it takes one whose `issuedAt` is within 5
//! minutes of it ([`STALE_DOCUMENT`]) and makes each layer last its time-to-live from
//! receipt, so a skew below that changes nothing about when a raise ends. The check
//! compares each pod's clock with this machine's (the operator's is not readable), the
//! time of the read taken off: over [`CLOCK_WARN`] is a warning (a clock drifting), at
//! [`STALE_DOCUMENT`] or more a failure (the operator's documents are refused as
//! `not_fresh` if its clock agrees with this machine's).

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIGroup;
use kube::{Api, CustomResourceExt};
use logpolicy::admin::ADMIN_ADDR_ENV;
use logpolicy::wire::{PolicyView, TrustedKeys, TRUSTED_KEYS_ENV, TRUSTED_KEYS_FILE_ENV};
use logpolicy_api::labels::KEY_ID_ANNOTATION;
use logpolicy_api::trust::{TRUST_CONFIG_MAP, TRUST_DATA_KEY};
use logpolicy_api::{LogPolicy, OPT_IN_LABEL, PORT_ANNOTATION};
use serde::Serialize;

use crate::cli::CheckArgs;
use crate::cluster::{lease_down, Connection, Kube, LEASE_NAME};
use crate::exit::{self, Failure, Result};
use crate::output::{data, Format};

/// A clock further than this from this machine's is a warning.
pub const CLOCK_WARN: Duration = Duration::from_secs(30);
/// A clock this far or further is a failure: the pod's window for a document's
/// `issuedAt` (`logpolicy::admin::AdminLimits::document_window`).
pub const STALE_DOCUMENT: Duration = Duration::from_secs(300);

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Outcome {
    /// As it should be.
    Ok,
    /// Works, but worth a look (or could not be checked).
    Warn,
    /// Keeps a raise from arriving.
    Fail,
}

impl Outcome {
    /// `ok`, `warn`, `FAIL`.
    pub fn word(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Warn => "warn",
            Outcome::Fail => "FAIL",
        }
    }
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Check {
    /// How it came out.
    pub outcome: Outcome,
    /// What was checked: `crd`, `operator`, `trust-configmap`, `pods`, `pod`.
    pub check: &'static str,
    /// What it was checked on: the CRD's, the Lease's, the ConfigMap's or the pod's
    /// `namespace/name`.
    pub subject: String,
    /// What was found and, when it is not ok, what to do.
    pub message: String,
}

impl Check {
    fn new(
        outcome: Outcome,
        check: &'static str,
        subject: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Check {
            outcome,
            check,
            subject: subject.into(),
            message: message.into(),
        }
    }

    /// The line: `ok   operator   logpolicy-system/logpolicy-operator: ...`.
    /// The check as one line of text: what came from a pod or an object (a subject's
    /// name, a pod's answer in the message) is [`crate::output::printable`].
    pub fn line(&self) -> String {
        format!(
            "{:<4} {:<15} {}: {}",
            self.outcome.word(),
            self.check,
            crate::output::printable(&self.subject),
            crate::output::printable(&self.message)
        )
    }
}

/// The whole report, as `-o json|yaml` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Every check, in the order made.
    pub checks: Vec<Check>,
    /// How many failed.
    pub failed: usize,
    /// How many warned.
    pub warnings: usize,
}

impl Report {
    fn new(checks: Vec<Check>) -> Self {
        let count = |o| checks.iter().filter(|c| c.outcome == o).count();
        Report {
            failed: count(Outcome::Fail),
            warnings: count(Outcome::Warn),
            checks,
        }
    }
}

/// What the API says about the CRD: the object, or only the group's discovery (a user
/// who may not read CRDs may still discover the group), or nothing.
#[derive(Debug, Clone)]
pub enum CrdSeen {
    /// The CustomResourceDefinition.
    Crd(Box<CustomResourceDefinition>),
    /// The API group's versions as discovered (no storage version then).
    Discovered(APIGroup),
    /// Neither exists.
    Missing,
}

/// The CRD check: installed, its served and stored versions; `FAIL` when missing or
/// when it does not serve `wanted` (the version this plugin writes).
pub fn crd_check(seen: &CrdSeen, name: &str, wanted: &str) -> Check {
    let fail = |m: String| Check::new(Outcome::Fail, "crd", name, m);
    let (served, stored): (Vec<String>, Option<String>) = match seen {
        CrdSeen::Missing => {
            return fail(
                "not installed: install it with the chart (helm install ... charts/logpolicy-operator, crds.install=true) or kubectl apply -f crds/".to_owned(),
            )
        }
        CrdSeen::Crd(crd) => (
            crd.spec
                .versions
                .iter()
                .filter(|v| v.served)
                .map(|v| v.name.clone())
                .collect(),
            crd.spec
                .versions
                .iter()
                .find(|v| v.storage)
                .map(|v| v.name.clone()),
        ),
        CrdSeen::Discovered(group) => (
            group.versions.iter().map(|v| v.version.clone()).collect(),
            None,
        ),
    };
    let stored = match stored {
        Some(s) => format!("stored {s}"),
        None => "stored version not readable (no get on customresourcedefinitions)".to_owned(),
    };
    let found = format!("served {}; {stored}", served.join(", "));
    if served.iter().any(|v| v == wanted) {
        Check::new(Outcome::Ok, "crd", name, format!("installed: {found}"))
    } else {
        fail(format!(
            "installed, but {found}: this plugin writes {wanted}; upgrade the chart (or kubectl apply -f crds/ of this version)"
        ))
    }
}

/// The object `seen` holds, or the line to print instead: `missing` (FAIL) when there is
/// none, `unreadable(why)` (warn) when it could not be read.
fn found<T>(
    seen: std::result::Result<Option<&T>, String>,
    line: impl Fn(Outcome, String) -> Check,
    missing: String,
    unreadable: impl FnOnce(String) -> String,
) -> std::result::Result<&T, Check> {
    match seen {
        Ok(Some(object)) => Ok(object),
        Ok(None) => Err(line(Outcome::Fail, missing)),
        Err(why) => Err(line(Outcome::Warn, unreadable(why))),
    }
}

/// What the Lease says: the operator check, and the key id the operator signs with
/// (its annotation), when it says.
pub fn operator_check(
    lease: std::result::Result<Option<&Lease>, String>,
    operator_namespace: &str,
    now: SystemTime,
) -> (Check, Option<String>) {
    let subject = format!("{operator_namespace}/{LEASE_NAME}");
    let line = |o, m: String| Check::new(o, "operator", subject.clone(), m);
    let pods = format!(
        "kubectl -n {operator_namespace} get pods -l app.kubernetes.io/name=logpolicy-operator"
    );
    let lease = match found(
        lease,
        line,
        format!("no Lease: the operator has not run in namespace {operator_namespace} (use --operator-namespace where it runs), or is older than its Lease heartbeat; is it running? ({pods})"),
        |why| format!("cannot tell whether the operator runs: its Lease cannot be read ({why}); `get` on leases in {operator_namespace} lets the check see it"),
    ) {
        Ok(l) => l,
        Err(check) => return (check, None),
    };
    let key = lease
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(KEY_ID_ANNOTATION))
        .cloned();
    if let Some(why) = lease_down(lease, now) {
        let check = line(
            Outcome::Fail,
            format!("not running: its Lease {why}; nothing pushes policies to the pods. Is it running? ({pods}; then its logs)"),
        );
        return (check, key);
    }
    let spec = lease.spec.clone().unwrap_or_default();
    let holder = spec.holder_identity.unwrap_or_default();
    let ago = spec
        .renew_time
        .and_then(|t| now.duration_since(SystemTime::from(t.0)).ok())
        .map_or_else(
            || "just now".to_owned(),
            |d| format!("{}s ago", d.as_secs()),
        );
    let signs = match &key {
        Some(k) => format!("signs with key {k}"),
        None => format!("its Lease names no signing key ({KEY_ID_ANNOTATION}: an operator of an earlier version); the trust ConfigMap's key is taken as its key"),
    };
    let check = line(
        Outcome::Ok,
        format!("running and leading: {holder} renewed its Lease {ago}; {signs}"),
    );
    (check, key)
}

/// The trust ConfigMap check for `namespace`: present, and holding exactly the
/// operator's key (`operator_key`, when known). Returns the key ids it holds.
pub fn trust_check(
    namespace: &str,
    seen: std::result::Result<Option<&ConfigMap>, String>,
    operator_key: Option<&str>,
    operator_namespace: &str,
) -> (Check, Vec<String>) {
    let subject = format!("{namespace}/{TRUST_CONFIG_MAP}");
    let line = |o, m: String| Check::new(o, "trust-configmap", subject.clone(), m);
    let restored = format!(
        "the operator writes it again within seconds when it runs; is it running? (kubectl -n {operator_namespace} get pods)"
    );
    let cm = match found(
        seen,
        line,
        format!("missing: the pods that mount it trust no key and refuse every push; {restored}"),
        |why| format!("cannot be read ({why}); the pods' own view of their keys is checked below"),
    ) {
        Ok(cm) => cm,
        Err(check) => return (check, Vec::new()),
    };
    let text = cm
        .data
        .as_ref()
        .and_then(|d| d.get(TRUST_DATA_KEY))
        .cloned()
        .unwrap_or_default();
    let ids: Vec<String> = match TrustedKeys::parse(&text) {
        Ok(keys) => keys.ids().map(|id| id.to_string()).collect(),
        Err(e) => {
            let why =
                format!("data.{TRUST_DATA_KEY} holds no key the pods can read ({e}); {restored}");
            return (line(Outcome::Fail, why), Vec::new());
        }
    };
    let check = match operator_key {
        Some(k) if !ids.iter().any(|i| i == k) => line(
            Outcome::Fail,
            format!("holds key {}, not the operator's key {k}: pods that mount it refuse the operator's pushes; {restored}", ids.join(", ")),
        ),
        Some(k) if ids.len() > 1 => line(
            Outcome::Fail,
            format!("holds the operator's key {k} and others it did not publish ({}): pods that mount it accept documents signed by those too; {restored}", ids.iter().filter(|i| *i != k).cloned().collect::<Vec<_>>().join(", ")),
        ),
        Some(k) => line(Outcome::Ok, format!("holds the operator's key {k}")),
        None => line(
            Outcome::Ok,
            format!("holds key {} (the operator's key is not known from its Lease)", ids.join(", ")),
        ),
    };
    (check, ids)
}

/// A pod's clock against this machine's: `read_at` (the pod's `readAt`) against the
/// middle of the read, from `sent` to `received` (this machine's clock). Positive: the
/// pod is ahead.
pub fn clock_offset(read_at: SystemTime, sent: SystemTime, received: SystemTime) -> f64 {
    let mid = sent + received.duration_since(sent).unwrap_or_default() / 2;
    match read_at.duration_since(mid) {
        Ok(ahead) => ahead.as_secs_f64(),
        Err(behind) => -behind.duration().as_secs_f64(),
    }
}

/// What one pod's read says: `None` when all is well (the pod is then counted in the
/// namespace's `ok` line), else its `warn` or `FAIL` line. `key` is the key the pods
/// must trust (the operator's, else the trust ConfigMap's); `offset` the pod's clock
/// against this machine's ([`clock_offset`]).
pub fn pod_check(
    subject: &str,
    view: std::result::Result<&PolicyView, &str>,
    key: Option<&str>,
    offset: Option<f64>,
) -> Option<Check> {
    let line = |o, m: String| Some(Check::new(o, "pod", subject, m));
    let view = match view {
        Ok(v) => v,
        Err(why) => {
            return line(
                Outcome::Fail,
                format!("its admin endpoint cannot be read ({why}): is {ADMIN_ADDR_ENV} set in the container, and the annotation {PORT_ANNOTATION} its port?"),
            )
        }
    };
    match (&view.trusted_keys, key) {
        (None, _) => {
            return line(
                Outcome::Warn,
                "runs a logpolicy layer that does not say which keys it trusts (an earlier version): not checked".to_owned(),
            )
        }
        (Some(ids), _) if ids.is_empty() => {
            return line(
                Outcome::Fail,
                format!("trusts no key and refuses every push: mount the ConfigMap {TRUST_CONFIG_MAP} and set {TRUSTED_KEYS_FILE_ENV} to its file {TRUST_DATA_KEY} (see its logs for why the file cannot be read)"),
            )
        }
        (Some(ids), Some(k)) if !ids.iter().any(|i| i == k) => {
            return line(
                Outcome::Fail,
                format!("does not trust the operator's key {k} (it trusts {}): it refuses the operator's pushes; point {TRUSTED_KEYS_FILE_ENV} at the mounted ConfigMap {TRUST_CONFIG_MAP} (not {TRUSTED_KEYS_ENV})", ids.join(", ")),
            )
        }
        _ => {}
    }
    let Some(offset) = offset else {
        return line(
            Outcome::Warn,
            "does not say its clock (an earlier version): not checked".to_owned(),
        );
    };
    let off = Duration::from_secs_f64(offset.abs());
    let way = if offset > 0.0 { "ahead of" } else { "behind" };
    if off >= STALE_DOCUMENT {
        return line(
            Outcome::Fail,
            format!("its clock is {:.0}s {way} this machine's: it refuses documents issued more than 5 minutes from its clock (not_fresh); fix the node's time sync", off.as_secs_f64()),
        );
    }
    if off > CLOCK_WARN {
        return line(
            Outcome::Warn,
            format!("its clock is {:.0}s {way} this machine's (a raise still lasts its time; at 5 minutes the operator's documents are refused): check the node's time sync", off.as_secs_f64()),
        );
    }
    None
}

/// A warning per recording rule of the pods of `namespace` that names a target none of
/// them knows (`known`: the targets the pods' ledgers list, `None` when none could be
/// read: nothing is checked), with the known targets close to it.
pub fn record_check(
    namespace: &str,
    recordings: &[crate::recording::PodRecording],
    known: Option<&[&str]>,
) -> Vec<Check> {
    let Some(known) = known else {
        return Vec::new();
    };
    crate::recording::unknown_rules(recordings, known)
        .into_iter()
        .map(|(target, pods)| {
            let close = crate::known::close_names(&target, known);
            let hint = if close.is_empty() {
                String::new()
            } else {
                format!(" (known: {})", close.join(", "))
            };
            Check::new(
                Outcome::Warn,
                "record",
                format!("{namespace} @record({target})"),
                format!("no pod knows the target {target} ({pods} pods record it): the rule records nothing until code of that target runs; check its spelling{hint}"),
            )
        })
        .collect()
}

/// `check`.
pub async fn check(connection: &Connection, args: &CheckArgs) -> Result<()> {
    let kube = connection.connect().await?;
    let mut checks = Vec::new();
    checks.push(read_crd(&kube).await?);
    let (operator, operator_key) = read_operator(&kube).await;
    checks.push(operator);
    checks.extend(read_workloads(&kube, args, operator_key.as_deref()).await?);
    let report = Report::new(checks);
    match args.output {
        Format::Table => {
            for c in &report.checks {
                println!("{}", c.line());
            }
        }
        format => print!("{}", data(format, &report)?),
    }
    if report.failed > 0 {
        return Err(Failure::new(
            exit::CHECK_FAILED,
            format!(
                "{} of {} checks failed ({} warnings)",
                report.failed,
                report.checks.len(),
                report.warnings
            ),
        ));
    }
    Ok(())
}

async fn read_crd(kube: &Kube) -> Result<Check> {
    let name = LogPolicy::crd_name();
    let wanted = <LogPolicy as kube::Resource>::version(&());
    let group = <LogPolicy as kube::Resource>::group(&());
    let api: Api<CustomResourceDefinition> = Api::all(kube.client.clone());
    let seen = match api.get_opt(name).await {
        Ok(Some(crd)) => CrdSeen::Crd(Box::new(crd)),
        Ok(None) => CrdSeen::Missing,
        Err(kube::Error::Api(s)) if s.code == 403 => {
            // Discovery is open to every authenticated user.
            let req = http::Request::get(format!("/apis/{group}"))
                .body(Vec::new())
                .map_err(|e| Failure::error(format!("discovery of {group}: {e}")))?;
            match kube.client.request::<APIGroup>(req).await {
                Ok(g) => CrdSeen::Discovered(g),
                Err(kube::Error::Api(s)) if s.code == 404 => CrdSeen::Missing,
                Err(e) => return Err(Failure::error(format!("discovery of {group}: {e}"))),
            }
        }
        Err(e) => return Err(exit::api_failure(&format!("CRD {name}"), e)),
    };
    Ok(crd_check(&seen, name, &wanted))
}

async fn read_operator(kube: &Kube) -> (Check, Option<String>) {
    let api: Api<Lease> = Api::namespaced(kube.client.clone(), &kube.operator_namespace);
    let lease = api.get_opt(LEASE_NAME).await.map_err(|e| e.to_string());
    operator_check(
        lease.as_ref().map(Option::as_ref).map_err(Clone::clone),
        &kube.operator_namespace,
        SystemTime::now(),
    )
}

/// The pods (opt-in, then each namespace's trust ConfigMap and its pods).
async fn read_workloads(
    kube: &Kube,
    args: &CheckArgs,
    operator_key: Option<&str>,
) -> Result<Vec<Check>> {
    let p = &args.pods;
    let resolved = crate::fleet::resolve(
        kube,
        p.workload.as_ref(),
        p.selector.as_ref(),
        p.all_namespaces,
    )
    .await?;
    let selected = &resolved.selected;
    let mut checks = Vec::new();
    let total = selected.opted_in.len() + selected.not_opted_in.len();
    let subject = if resolved.named {
        format!("{} in {}", resolved.which, resolved.scope)
    } else {
        resolved.which.clone()
    };
    if selected.opted_in_pods.is_empty() {
        let (outcome, message) = if selected.not_opted_in.is_empty() {
            (
                if resolved.named { Outcome::Fail } else { Outcome::Warn },
                format!("no pod matches: nothing to raise (pods opt in with the label {OPT_IN_LABEL}=true)"),
            )
        } else {
            (
                Outcome::Fail,
                format!(
                    "none of the {total} pods has opted in, so no raise reaches them: {} (or in the pod template)",
                    resolved.opt_in_how(&kube.namespace, &selected.not_opted_in)
                ),
            )
        };
        checks.push(Check::new(outcome, "pods", subject, message));
        return Ok(checks);
    }
    checks.push(if selected.not_opted_in.is_empty() {
        Check::new(Outcome::Ok, "pods", subject, format!("{total}/{total} pods opted in"))
    } else {
        Check::new(
            Outcome::Warn,
            "pods",
            subject,
            format!(
                "{}/{total} pods opted in; not: {} (a raise does not reach them; kubectl label pod ... {OPT_IN_LABEL}=true)",
                selected.opted_in.len(),
                selected.not_opted_in.join(" ")
            ),
        )
    });
    let mut by_namespace: BTreeMap<String, Vec<&Pod>> = BTreeMap::new();
    for pod in &selected.opted_in_pods {
        let ns = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| kube.namespace.clone());
        by_namespace.entry(ns).or_default().push(pod);
    }
    for (ns, pods) in by_namespace {
        let api: Api<ConfigMap> = Api::namespaced(kube.client.clone(), &ns);
        let cm = api
            .get_opt(TRUST_CONFIG_MAP)
            .await
            .map_err(|e| e.to_string());
        let (trust, ids) = trust_check(
            &ns,
            cm.as_ref().map(Option::as_ref).map_err(Clone::clone),
            operator_key,
            &kube.operator_namespace,
        );
        checks.push(trust);
        // The key the pods must trust: the operator's, else the ConfigMap's only one.
        let key = operator_key
            .map(str::to_owned)
            .or_else(|| (ids.len() == 1).then(|| ids[0].clone()));
        checks.extend(read_pods(kube, &ns, &pods, key.as_deref()).await);
    }
    Ok(checks)
}

async fn read_pods(kube: &Kube, namespace: &str, pods: &[&Pod], key: Option<&str>) -> Vec<Check> {
    use futures::StreamExt;
    let reads = pods.iter().map(|pod| async move {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let sent = SystemTime::now();
        let view = kube.pod_get::<PolicyView>(pod, "/logpolicy").await;
        let received = SystemTime::now();
        let offset = view
            .as_ref()
            .ok()
            .and_then(|v| v.read_at)
            .map(|t| clock_offset(t, sent, received));
        (name, view, offset)
    });
    let mut results: Vec<_> = futures::stream::iter(reads)
        .buffer_unordered(crate::cluster::HOLD_READS)
        .collect()
        .await;
    results.sort_by(|a, b| a.0.cmp(&b.0));
    let mut lines = Vec::new();
    let mut well = 0;
    let mut largest = 0f64;
    let recordings: Vec<crate::recording::PodRecording> = results
        .iter()
        .filter_map(|(name, view, _)| {
            let pod = crate::fleet::PodId {
                namespace: namespace.to_owned(),
                name: name.clone(),
            };
            view.as_ref()
                .ok()
                .map(|v| crate::recording::PodRecording::of(pod, v))
        })
        .collect();
    let record_checks = if recordings.iter().any(|r| !r.rules.is_empty()) {
        let owned: Vec<Pod> = pods.iter().map(|p| (*p).clone()).collect();
        let known = crate::fleet::known_targets(&crate::fleet::read_sites(kube, &owned).await);
        let names = known.names();
        record_check(
            namespace,
            &recordings,
            (known.pods.read > 0).then_some(&names[..]),
        )
    } else {
        Vec::new()
    };
    for (name, view, offset) in &results {
        let subject = format!("{namespace}/{name}");
        match pod_check(
            &subject,
            view.as_ref().map_err(String::as_str),
            key,
            *offset,
        ) {
            Some(c) => lines.push(c),
            None => {
                well += 1;
                largest = largest.max(offset.unwrap_or(0.0).abs());
            }
        }
    }
    if well > 0 {
        let trusting = match key {
            Some(k) => format!("trust key {k}"),
            None => "trust a key (which the operator signs with is not known)".to_owned(),
        };
        lines.insert(
            0,
            Check::new(
                Outcome::Ok,
                "pod",
                format!("{namespace} ({well}/{} pods)", results.len()),
                format!("reachable, {trusting}, clocks within {largest:.1}s of this machine's"),
            ),
        );
    }
    lines.extend(record_checks);
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        CustomResourceDefinitionSpec, CustomResourceDefinitionVersion,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::GroupVersionForDiscovery;
    use logpolicy::wire::{key_id, SigningKey};

    fn crd(versions: &[(&str, bool, bool)]) -> CrdSeen {
        CrdSeen::Crd(Box::new(CustomResourceDefinition {
            spec: CustomResourceDefinitionSpec {
                versions: versions
                    .iter()
                    .map(|(name, served, storage)| CustomResourceDefinitionVersion {
                        name: (*name).into(),
                        served: *served,
                        storage: *storage,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            },
            ..Default::default()
        }))
    }

    #[test]
    fn the_crd_must_serve_the_version_the_plugin_writes() {
        let name = "logpolicies.logpolicy.dev";
        let c = crd_check(
            &crd(&[("v1alpha1", true, false), ("v1beta1", true, true)]),
            name,
            "v1beta1",
        );
        assert_eq!(c.outcome, Outcome::Ok);
        assert_eq!(
            c.message,
            "installed: served v1alpha1, v1beta1; stored v1beta1"
        );
        let c = crd_check(&crd(&[("v1alpha1", true, true)]), name, "v1beta1");
        assert_eq!(c.outcome, Outcome::Fail);
        assert!(
            c.message.contains("this plugin writes v1beta1"),
            "{}",
            c.message
        );
        let c = crd_check(&CrdSeen::Missing, name, "v1beta1");
        assert_eq!(c.outcome, Outcome::Fail);
        assert!(c.message.starts_with("not installed"), "{}", c.message);
        let discovered = CrdSeen::Discovered(APIGroup {
            name: "logpolicy.dev".into(),
            versions: vec![GroupVersionForDiscovery {
                group_version: "logpolicy.dev/v1beta1".into(),
                version: "v1beta1".into(),
            }],
            ..Default::default()
        });
        let c = crd_check(&discovered, name, "v1beta1");
        assert_eq!(c.outcome, Outcome::Ok);
        assert!(
            c.message.contains("stored version not readable"),
            "{}",
            c.message
        );
    }

    fn lease(holder: &str, renewed: SystemTime, key: Option<&str>) -> Lease {
        let mut l = crate::cluster::tests::lease(holder, renewed);
        if let Some(k) = key {
            l.metadata.annotations = Some([(KEY_ID_ANNOTATION.to_owned(), k.to_owned())].into());
        }
        l
    }

    #[test]
    fn the_operator_runs_while_its_lease_is_renewed_and_names_its_key() {
        let now = SystemTime::now();
        let fresh = lease(
            "op-0",
            now - Duration::from_secs(3),
            Some("00112233aabbccdd"),
        );
        let (c, key) = operator_check(Ok(Some(&fresh)), "logpolicy-system", now);
        assert_eq!(
            (c.outcome, key.as_deref()),
            (Outcome::Ok, Some("00112233aabbccdd"))
        );
        assert!(
            c.message.contains("op-0 renewed its Lease 3s ago"),
            "{}",
            c.message
        );
        let stale = lease("op-0", now - Duration::from_secs(60), None);
        let (c, _) = operator_check(Ok(Some(&stale)), "logpolicy-system", now);
        assert_eq!(c.outcome, Outcome::Fail);
        assert!(
            c.message
                .starts_with("not running: its Lease was last renewed by op-0 60s ago"),
            "{}",
            c.message
        );
        assert!(
            c.message.contains("kubectl -n logpolicy-system get pods"),
            "{}",
            c.message
        );
        let released = lease("", now, None);
        let (c, _) = operator_check(Ok(Some(&released)), "ops", now);
        assert!(
            c.outcome == Outcome::Fail && c.message.contains("released"),
            "{}",
            c.message
        );
        let (c, key) = operator_check(Ok(None), "ops", now);
        assert!(
            c.outcome == Outcome::Fail && c.message.starts_with("no Lease"),
            "{}",
            c.message
        );
        assert_eq!(key, None);
        let (c, _) = operator_check(Err("forbidden".into()), "ops", now);
        assert_eq!(c.outcome, Outcome::Warn);
    }

    fn id(seed: u8) -> String {
        key_id(&SigningKey::from_bytes(&[seed; 32]).verifying_key()).to_string()
    }

    fn trust_cm(seeds: &[u8]) -> ConfigMap {
        let text: String = seeds
            .iter()
            .map(|s| {
                logpolicy_api::trust::trusted_keys_text(
                    &SigningKey::from_bytes(&[*s; 32]).verifying_key(),
                )
            })
            .collect();
        ConfigMap {
            data: Some([(TRUST_DATA_KEY.to_owned(), text)].into()),
            ..ConfigMap::default()
        }
    }

    #[test]
    fn the_trust_configmap_must_hold_exactly_the_operators_key() {
        let ours = id(1);
        let check =
            |cm: Option<&ConfigMap>, key: Option<&str>| trust_check("shop", Ok(cm), key, "ops");
        let (c, ids) = check(Some(&trust_cm(&[1])), Some(&ours));
        assert_eq!((c.outcome, ids), (Outcome::Ok, vec![ours.clone()]));
        let (c, _) = check(Some(&trust_cm(&[2])), Some(&ours));
        assert_eq!(c.outcome, Outcome::Fail);
        assert!(
            c.message
                .contains(&format!("not the operator's key {ours}")),
            "{}",
            c.message
        );
        let (c, _) = check(Some(&trust_cm(&[1, 2])), Some(&ours));
        assert!(
            c.outcome == Outcome::Fail && c.message.contains(&id(2)),
            "{}",
            c.message
        );
        let (c, _) = check(None, Some(&ours));
        assert_eq!(c.outcome, Outcome::Fail);
        assert_eq!(c.subject, "shop/logpolicy-trust");
        assert!(c.message.starts_with("missing"), "{}", c.message);
        assert!(
            c.message.contains("kubectl -n ops get pods"),
            "{}",
            c.message
        );
        let (c, ids) = check(Some(&trust_cm(&[2])), None);
        assert_eq!((c.outcome, ids), (Outcome::Ok, vec![id(2)]));
        let (c, _) = check(Some(&ConfigMap::default()), Some(&ours));
        assert_eq!(c.outcome, Outcome::Fail, "{}", c.message);
    }

    fn view(keys: Option<Vec<String>>) -> PolicyView {
        PolicyView {
            trusted_keys: keys,
            read_at: Some(SystemTime::now()),
            ..PolicyView::default()
        }
    }

    #[test]
    fn a_pod_must_answer_trust_the_operators_key_and_keep_time() {
        let ours = id(1);
        let k = Some(ours.as_str());
        assert_eq!(
            pod_check("shop/a", Ok(&view(Some(vec![ours.clone()]))), k, Some(0.2)),
            None
        );
        let c = pod_check("shop/a", Ok(&view(Some(vec![id(2)]))), k, Some(0.0)).unwrap();
        assert_eq!((c.outcome, c.subject.as_str()), (Outcome::Fail, "shop/a"));
        assert!(
            c.message
                .starts_with(&format!("does not trust the operator's key {ours}")),
            "{}",
            c.message
        );
        let c = pod_check("shop/a", Ok(&view(Some(vec![]))), k, Some(0.0)).unwrap();
        assert!(
            c.outcome == Outcome::Fail && c.message.starts_with("trusts no key"),
            "{}",
            c.message
        );
        let c = pod_check("shop/a", Err("pod proxy: 503"), k, None).unwrap();
        assert!(
            c.outcome == Outcome::Fail && c.message.contains("pod proxy: 503"),
            "{}",
            c.message
        );
        let c = pod_check("shop/a", Ok(&view(None)), k, Some(0.0)).unwrap();
        assert_eq!(c.outcome, Outcome::Warn);
        let c = pod_check(
            "shop/a",
            Ok(&view(Some(vec![ours.clone()]))),
            k,
            Some(-45.0),
        )
        .unwrap();
        assert!(
            c.outcome == Outcome::Warn && c.message.contains("45s behind"),
            "{}",
            c.message
        );
        let c = pod_check(
            "shop/a",
            Ok(&view(Some(vec![ours.clone()]))),
            k,
            Some(301.0),
        )
        .unwrap();
        assert!(
            c.outcome == Outcome::Fail && c.message.contains("301s ahead of"),
            "{}",
            c.message
        );
        let c = pod_check("shop/a", Ok(&view(Some(vec![ours.clone()]))), k, None).unwrap();
        assert_eq!(c.outcome, Outcome::Warn);
    }

    #[test]
    fn a_clock_offset_takes_the_read_time_off() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let sent = t;
        let received = t + Duration::from_secs(2);
        assert_eq!(
            clock_offset(t + Duration::from_secs(1), sent, received),
            0.0
        );
        assert_eq!(
            clock_offset(t + Duration::from_secs(41), sent, received),
            40.0
        );
        assert_eq!(
            clock_offset(t - Duration::from_secs(9), sent, received),
            -10.0
        );
    }

    #[test]
    fn a_report_counts_failures_and_warnings_and_lines_align() {
        let r = Report::new(vec![
            Check::new(Outcome::Ok, "crd", "x", "fine"),
            Check::new(Outcome::Fail, "operator", "ops/logpolicy-operator", "down"),
            Check::new(Outcome::Warn, "pods", "y", "hm"),
        ]);
        assert_eq!((r.failed, r.warnings), (1, 1));
        assert_eq!(
            r.checks[1].line(),
            "FAIL operator        ops/logpolicy-operator: down"
        );
        assert_eq!(r.checks[0].line(), "ok   crd             x: fine");
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["checks"][1]["outcome"], "fail");
    }

    #[test]
    fn a_recording_rule_no_pod_knows_is_a_warning_with_close_names() {
        use crate::recording::PodRecording;
        let pod = |name: &str, directives: &str| {
            let view: PolicyView = serde_json::from_value(serde_json::json!({
                "effective": {"directives": directives}}))
            .unwrap();
            PodRecording::of(
                crate::fleet::PodId {
                    namespace: "shop".into(),
                    name: name.into(),
                },
                &view,
            )
        };
        let pods = [
            pod(
                "shop-0",
                "info,@record(shop::paymnt)=debug,@record(shop::db)=trace",
            ),
            pod("shop-1", "info,@record(shop::paymnt)=debug"),
        ];
        let known = ["shop::payment::card", "shop::db::pool"];
        let checks = record_check("shop", &pods, Some(&known));
        assert_eq!(checks.len(), 1, "{checks:?}");
        assert_eq!(checks[0].outcome, Outcome::Warn);
        assert_eq!(
            checks[0].line(),
            "warn record          shop @record(shop::paymnt): no pod knows the target shop::paymnt (2 pods record it): the rule records nothing until code of that target runs; check its spelling (known: shop::payment)"
        );
        // Nothing read, nothing checked; no rule, nothing to say.
        assert!(record_check("shop", &pods, None).is_empty());
        assert!(record_check("shop", &[pod("shop-2", "info")], Some(&known)).is_empty());
    }
}
