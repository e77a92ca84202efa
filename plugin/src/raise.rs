//! `raise` and `extend`: create (or re-time) a LogPolicy, then wait for its pods.

use std::time::SystemTime;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::api::{Patch, PatchParams, PostParams};
use kube::Api;
use logpolicy_api::crd::ReplayWindow;
use logpolicy_api::{LogPolicy, LogPolicySpec, OPT_IN_LABEL};

use crate::ack::wait_for_pods;
use crate::cli::{ExtendArgs, RaiseArgs};
use crate::cluster::{Connection, Kube};
use crate::cost::{cost_table, RaiseCost, COST_ANNOTATION};
use crate::exit::{self, api_failure, Failure, Result};
use crate::fleet::{self, Reads};
use crate::known::{refusal, unknown_targets};
use crate::naming::{policy_name, random_suffix};
use crate::output::yaml;
use crate::selector::selector_string;

/// The field manager of what the plugin writes.
pub const FIELD_MANAGER: &str = "kubectl-logpolicy";

/// The LogPolicy a raise creates (pure: the selector and the name are given).
pub fn raise_policy(
    args: &RaiseArgs,
    namespace: &str,
    name: &str,
    selector: LabelSelector,
) -> LogPolicy {
    let spec = LogPolicySpec {
        selector,
        default_level: args.default_level,
        targets: args.targets.clone(),
        when: args.when.clone(),
        sampling: args.samples.clone(),
        always_keep: args.always_keep,
        burst: None,
        max_bytes_per_second: None,
        redact: args.redact.clone(),
        redact_values: false,
        priority: args.priority,
        duration: Some(args.duration.text.clone()),
        expiration_time: None,
        reason: args.reason.clone(),
        record: Vec::new(),
        replay: args.since.as_ref().map(|s| ReplayWindow {
            since: s.text.clone(),
        }),
    };
    managed_policy(name, namespace, spec)
}

/// A LogPolicy named `name` in `namespace`, labelled as made by this plugin.
pub fn managed_policy(name: &str, namespace: &str, spec: LogPolicySpec) -> LogPolicy {
    let mut lp = LogPolicy::new(name, spec);
    lp.metadata = ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(namespace.to_owned()),
        labels: Some(
            [(
                "app.kubernetes.io/managed-by".to_owned(),
                FIELD_MANAGER.to_owned(),
            )]
            .into(),
        ),
        ..ObjectMeta::default()
    };
    lp
}

/// Refuses, before anything is created, a policy the operator would refuse (what no
/// flag can say alone, e.g. `--sample T=1/N:request` with `--when`): exit 6, every
/// field that is wrong, as the LogPolicy names it.
pub fn check_as_the_pods_would(spec: &LogPolicySpec) -> Result<()> {
    match logpolicy_api::validate::validate(spec) {
        Ok(_) => Ok(()),
        Err(errors) => {
            let list: Vec<String> = errors.iter().map(|e| format!("  {e}")).collect();
            Err(Failure::new(
                exit::REFUSED,
                format!(
                    "the operator would refuse this policy; nothing was created:\n{}",
                    list.join("\n")
                ),
            ))
        }
    }
}

/// What the name says the raise is for: the workload's name, else the selector's first
/// value (or key).
fn subject(args: &RaiseArgs, selector: &LabelSelector) -> String {
    if let Some(w) = &args.workload {
        return w.name.clone();
    }
    selector
        .match_labels
        .as_ref()
        .and_then(|m| m.values().next().cloned())
        .or_else(|| {
            selector
                .match_expressions
                .as_ref()
                .and_then(|e| e.first())
                .map(|e| e.key.rsplit('/').next().unwrap_or(&e.key).to_owned())
        })
        .unwrap_or_else(|| "pods".to_owned())
}

/// `raise`.
pub async fn raise(connection: &Connection, args: &RaiseArgs) -> Result<()> {
    let kube = connection.connect().await?;
    let selector = match (&args.workload, &args.selector) {
        (Some(w), _) => kube.workload_selector(w).await?,
        (None, Some(s)) => s.clone(),
        (None, None) => {
            return Err(Failure::new(
                exit::USAGE,
                "give a workload (deploy/NAME) or -l SELECTOR",
            ))
        }
    };
    let name = match &args.name {
        Some(n) => n.clone(),
        None => policy_name(
            &subject(args, &selector),
            &args.targets,
            args.default_level,
            &random_suffix().map_err(Failure::error)?,
        ),
    };
    let lp = raise_policy(args, &kube.namespace, &name, selector.clone());
    check_as_the_pods_would(&lp.spec)?;
    if args.dry_run {
        print!("{}", yaml(&lp)?);
        return Ok(());
    }
    let pods = kube.selected_pods(&selector).await?;
    let which = match &args.workload {
        Some(w) => w.to_string(),
        None => format!("-l {}", selector_string(&selector)),
    };
    if pods.opted_in.is_empty() {
        let ns = &kube.namespace;
        let message = if pods.not_opted_in.is_empty() {
            format!(
                "no pod in namespace {ns} matches {which}: nothing to raise; nothing was created"
            )
        } else {
            let template = match &args.workload {
                Some(w) => format!(" in the pod template of {w} (spec.template.metadata.labels)"),
                None => " in the pod template of their workload".to_owned(),
            };
            format!(
                "none of the {} pods of {which} has opted in: nothing was created.\n\
                 Pods opt in with the label {OPT_IN_LABEL}=true (and must run the logpolicy layer's admin endpoint):\n  \
                 kubectl label pod -n {ns} {} {OPT_IN_LABEL}=true\n\
                 or, to last across restarts, set {OPT_IN_LABEL}: \"true\"{template}",
                pods.not_opted_in.len(),
                pods.not_opted_in.join(" "),
            )
        };
        return Err(Failure::new(exit::NOT_OPTED_IN, message));
    }
    if !pods.not_opted_in.is_empty() {
        eprintln!(
            "note: {} pods of {which} have not opted in ({OPT_IN_LABEL}=true) and keep their levels: {}",
            pods.not_opted_in.len(),
            pods.not_opted_in.join(" ")
        );
    }
    // The pods' ledgers before the raise: which targets they know (the check), and the
    // levels in force for them (what the raise adds, once measured).
    let requested: Vec<&str> = args
        .targets
        .iter()
        .map(|t| t.target.as_str())
        .chain(args.samples.iter().map(|s| s.target.as_str()))
        .collect();
    let check = !requested.is_empty() && !args.allow_unknown_target;
    let before = if check || !args.measure.value.is_zero() {
        Some(fleet::read_sites(&kube, &pods.opted_in_pods).await)
    } else {
        None
    };
    if let (true, Some(reads)) = (check, &before) {
        check_targets(&requested, reads)?;
    }
    let created = create_policy(&kube, &lp).await?;
    println!(
        "lp/{name} created in namespace {}: {} for {}{}{}; waiting for {} pods",
        kube.namespace,
        levels_text(&lp.spec),
        args.duration,
        args.since
            .as_ref()
            .map(|s| format!(", replaying the last {s} recorded"))
            .unwrap_or_default(),
        args.reason
            .as_ref()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default(),
        pods.opted_in.len()
    );
    let generation = created.metadata.generation.unwrap_or(1);
    wait_for_pods(&kube, &name, generation, &selector, args.wait.value).await?;
    if let (false, Some(before)) = (args.measure.value.is_zero(), &before) {
        measure_cost(&kube, &name, args, &pods.opted_in_pods, before).await?;
    }
    Ok(())
}

/// Creates `lp` in the command's namespace, as the plugin's field manager.
pub async fn create_policy(kube: &Kube, lp: &LogPolicy) -> Result<LogPolicy> {
    let api: Api<LogPolicy> = Api::namespaced(kube.client.clone(), &kube.namespace);
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    };
    let name = lp.metadata.name.as_deref().unwrap_or_default();
    api.create(&params, lp)
        .await
        .map_err(|e| api_failure(&format!("creating lp/{name}"), e))
}

/// Refuses (exit 7) a raise naming a target that no pod read knows, with the close
/// names they do; says so when some pods could not be read (they do not block it), and
/// checks nothing when none could.
fn check_targets(requested: &[&str], reads: &Reads) -> Result<()> {
    let known = fleet::known_targets(reads);
    let unreadable: Vec<String> = known
        .left_out
        .iter()
        .map(|s| format!("{} ({})", s.pod.name, s.why))
        .collect();
    if known.pods.read == 0 {
        eprintln!(
            "note: none of the {} pods could be read, so the targets were not checked: {}",
            known.pods.selected,
            unreadable.join("; ")
        );
        return Ok(());
    }
    let names = known.names();
    let unknown = unknown_targets(requested, &names);
    if !unknown.is_empty() {
        return Err(Failure::new(
            exit::UNKNOWN_TARGET,
            refusal(&unknown, known.pods.read, known.pods.selected, &unreadable),
        ));
    }
    if !unreadable.is_empty() {
        eprintln!(
            "note: the targets were checked on {} of the {} pods; not read: {}",
            known.pods.read,
            known.pods.selected,
            unreadable.join("; ")
        );
    }
    Ok(())
}

/// Measures the pods a `--measure` window once they applied the raise, prints what it
/// costs, and records it on the policy ([`COST_ANNOTATION`]). A failure to record it is
/// a note, not a failure of the raise.
async fn measure_cost(
    kube: &Kube,
    name: &str,
    args: &RaiseArgs,
    pods: &[k8s_openapi::api::core::v1::Pod],
    before: &Reads,
) -> Result<()> {
    println!(
        "measuring what the pods write over {} now that they applied it ...",
        args.measure
    );
    let window = fleet::measure(kube, pods, args.measure.value).await;
    let cost = RaiseCost::of(before, &window, SystemTime::now(), &args.measure.text);
    print!(
        "{}",
        cost_table(&cost, Some((&args.duration.text, args.duration.value)))
    );
    let api: Api<LogPolicy> = Api::namespaced(kube.client.clone(), &kube.namespace);
    let recorded = serde_json::to_string(&cost.total).map_err(|e| Failure::error(e.to_string()))?;
    let patch = serde_json::json!({"metadata": {"annotations": {COST_ANNOTATION: recorded}}});
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    if let Err(e) = api.patch(name, &params, &Patch::Merge(&patch)).await {
        eprintln!("note: the measured cost was not recorded on lp/{name}: {e}");
    }
    Ok(())
}

/// `extend`: the policy applies `--for` from now: `spec.expirationTime` set to now +
/// `--for` and `spec.duration` removed, in one JSON merge patch. (The operator counts a
/// `duration` from when it first sees a generation, so a new duration would be counted
/// from an unknown moment; an expiration time is what the user means.)
pub async fn extend(connection: &Connection, args: &ExtendArgs) -> Result<()> {
    let kube = connection.connect().await?;
    let api: Api<LogPolicy> = Api::namespaced(kube.client.clone(), &kube.namespace);
    let until = SystemTime::now() + args.duration.value;
    let until = logpolicy::clock::format_rfc3339(until);
    let patch = serde_json::json!({"spec": {"expirationTime": until, "duration": null}});
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    let name = &args.name;
    let patched = api
        .patch(name, &params, &Patch::Merge(&patch))
        .await
        .map_err(|e| api_failure(&format!("extending lp/{name}"), e))?;
    println!(
        "lp/{name}: expires at {until} ({} from now); waiting for its pods",
        args.duration
    );
    let generation = patched.metadata.generation.unwrap_or(1);
    wait_for_pods(
        &kube,
        name,
        generation,
        &patched.spec.selector,
        args.wait.value,
    )
    .await
}

/// A spec's levels as directives: `debug,shop::payment=debug`.
pub fn levels_text(spec: &LogPolicySpec) -> String {
    let mut parts: Vec<String> = spec
        .default_level
        .iter()
        .map(|l| l.as_str().to_owned())
        .collect();
    // As directives say it; a condition the pods would refuse is shown as given.
    let when = |own: Option<&logpolicy::policy::WhenSpec>| {
        own.or(spec.when.as_ref())
            .map(|w| match w.to_when() {
                Ok(w) => format!("@when({w})"),
                Err(_) => format!("@when({}=?)", w.span_field),
            })
            .unwrap_or_default()
    };
    parts.extend(
        spec.targets
            .iter()
            .map(|t| format!("{}={}{}", t.target, t.level.as_str(), when(t.when.as_ref()))),
    );
    parts.extend(spec.sampling.iter().map(|s| {
        format!(
            "{}=1/{}{}{}",
            s.target,
            s.keep_one_in,
            if s.scope == logpolicy::policy::SamplingScope::Request {
                ":request"
            } else {
                ""
            },
            when(s.when.as_ref())
        )
    }));
    if parts.is_empty() {
        "-".to_owned()
    } else {
        parts.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn args(extra: &[&str]) -> RaiseArgs {
        let cli = Cli::try_parse_from(["kubectl-logpolicy", "raise"].iter().chain(extra)).unwrap();
        match cli.command {
            Command::Raise(r) => *r,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn when_raises_one_customers_requests_and_is_checked_as_the_pods_check_it() {
        let a = args(&[
            "deploy/shop",
            "--target",
            "shop=debug",
            "--when",
            "user_id=42",
            "--for",
            "15m",
        ]);
        let lp = raise_policy(
            &a,
            "shop",
            "raise-shop-debug-aaaaa",
            LabelSelector {
                match_labels: Some([("app".to_owned(), "shop".to_owned())].into()),
                ..LabelSelector::default()
            },
        );
        let when = lp.spec.when.as_ref().unwrap();
        assert_eq!(when.span_field, "user_id");
        let text = yaml(&lp).unwrap();
        for line in ["  when:", "    spanField: user_id", "    - '42'"] {
            assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
        }
        // What the operator pushes: shop at debug under the condition only.
        let layer = logpolicy_api::validate::validate(&lp.spec)
            .unwrap()
            .layer("shop/x", None);
        assert_eq!(
            logpolicy::PolicyLayer::try_from(&layer)
                .unwrap()
                .directives
                .to_string(),
            "shop=debug@when(user_id=42)"
        );
        // As the plugin says it (created, list, get lp): the condition with the level.
        assert_eq!(levels_text(&lp.spec), "shop=debug@when(user_id=42)");
        let several = args(&[
            "deploy/shop",
            "--target",
            "shop=debug",
            "--when",
            "tenant=acme,globex",
        ]);
        assert_eq!(several.when.unwrap().equals.len(), 2);

        let err = |extra: &[&str]| {
            Cli::try_parse_from(
                ["kubectl-logpolicy", "raise", "deploy/shop"]
                    .iter()
                    .chain(extra),
            )
            .unwrap_err()
            .to_string()
        };
        let e = err(&["--target", "shop=debug", "--when", "user_id="]);
        assert!(e.contains("when.equals: no values"), "{e}");
        let e = err(&["--target", "shop=debug", "--when", "user id=42"]);
        assert!(e.contains("when.spanField"), "{e}");
        let e = err(&["--target", "shop=debug", "--when", "42"]);
        assert!(e.contains("expected FIELD=VALUE"), "{e}");
        let e = err(&["--default-level", "debug", "--when", "user_id=42"]);
        assert!(e.contains("--target"), "{e}");
        let e = err(&[
            "--target",
            "shop=debug",
            "--default-level",
            "debug",
            "--when",
            "user_id=42",
        ]);
        assert!(e.contains("cannot be used with"), "{e}");

        // Per-event sampling in the customer's requests comes with it; per request is
        // refused before anything is created (a matching request is kept whole).
        let selector = || LabelSelector {
            match_labels: Some([("app".to_owned(), "shop".to_owned())].into()),
            ..LabelSelector::default()
        };
        let sampled = args(&[
            "deploy/shop",
            "--target",
            "shop=debug",
            "--when",
            "user_id=42",
            "--sample",
            "shop::db=1/10",
        ]);
        let lp = raise_policy(&sampled, "shop", "raise-shop-debug-aaaaa", selector());
        assert!(check_as_the_pods_would(&lp.spec).is_ok());
        assert_eq!(
            levels_text(&lp.spec),
            "shop=debug@when(user_id=42),shop::db=1/10@when(user_id=42)"
        );
        let per_request = args(&[
            "deploy/shop",
            "--target",
            "shop=debug",
            "--when",
            "user_id=42",
            "--sample",
            "shop::db=1/10:request",
        ]);
        let lp = raise_policy(&per_request, "shop", "raise-shop-debug-aaaaa", selector());
        let refused = check_as_the_pods_would(&lp.spec).unwrap_err();
        assert_eq!(refused.code, crate::exit::REFUSED);
        assert!(
            refused
                .message
                .contains("spec.sampling[0].scope: sampling is per event only under when"),
            "{}",
            refused.message
        );
    }

    #[test]
    fn the_dry_run_yaml_is_the_policy_kubectl_would_apply() {
        let a = args(&[
            "-l",
            "app=shop",
            "--target",
            "shop::payment=debug",
            "--target",
            "shop::db=off",
            "--sample",
            "shop::http=1/100:request",
            "--redact",
            "card_token",
            "--for",
            "10m",
            "--reason",
            "INC-4211: card declines",
            "--priority",
            "5",
        ]);
        let selector = a.selector.clone().unwrap();
        let lp = raise_policy(&a, "shop", "raise-shop-payment-debug-bbbbb", selector);
        let text = yaml(&lp).unwrap();
        for line in [
            "apiVersion: logpolicy.dev/v1beta1",
            "kind: LogPolicy",
            "  name: raise-shop-payment-debug-bbbbb",
            "  namespace: shop",
            "    app.kubernetes.io/managed-by: kubectl-logpolicy",
            "      app: shop",
            "  - target: shop::payment",
            "    level: 'off'",
            "    keepOneIn: 100",
            "    scope: request",
            "  - card_token",
            "  priority: 5",
            "  duration: 10m",
            "  reason: 'INC-4211: card declines'",
        ] {
            assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
        }
        assert!(!text.contains("status"), "{text}");
        // It reads back as the same policy.
        let back: LogPolicy = serde_yaml::from_str(&text).unwrap();
        assert_eq!(back.spec, lp.spec);
        assert_eq!(
            levels_text(&lp.spec),
            "shop::payment=debug,shop::db=off,shop::http=1/100:request"
        );
    }

    #[test]
    fn the_subject_is_the_workload_or_the_selector() {
        let a = args(&["deploy/shop", "--target", "x=debug"]);
        let sel = crate::selector::parse_label_selector("app=checkout").unwrap();
        assert_eq!(subject(&a, &sel), "shop");
        let a = args(&["-l", "app=checkout", "--target", "x=debug"]);
        assert_eq!(subject(&a, &sel), "checkout");
        let sel = crate::selector::parse_label_selector("app.kubernetes.io/name").unwrap();
        assert_eq!(subject(&a, &sel), "name");
    }
}
