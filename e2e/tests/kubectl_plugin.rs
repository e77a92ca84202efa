//! `kubectl logpolicy`, the plugin, against the real API server, the real operator and
//! real demo services: `raise` (by workload and by label) exits 0 once every pod
//! acknowledged and the pods log at the new level (with `--when`, for one customer's
//! requests only); `list`, `status`, `extend` and
//! `revert` do what they say, and each pod's row gives the document version it holds and
//! when it applied it; pods that have not opted in give exit 3 naming the label; with no
//! operator running, exit 5; a raise the operator refuses (longer than its
//! `--max-duration`), exit 6 with the operator's reason.
//!
//! Each test runs its own operator, watching only the test's namespace (the chart's
//! `watchNamespaces`): an operator shared by the tests of this file would watch every
//! namespace, and the test without an operator would then have one.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, SystemTime};

use logpolicy_e2e::logs::secs_between;
use logpolicy_e2e::operator::OperatorOptions;
use logpolicy_e2e::plugin::{kubectl_logpolicy, PluginRun};
use logpolicy_e2e::pod::create_running_pods;
use logpolicy_e2e::scenario::{wait_lines, wait_past};
use logpolicy_e2e::shop::{
    authorising_since, not_redacted, payment_debug, three_shops, wait_known, wait_payment_debug,
    wait_target_known, SEC,
};
use logpolicy_e2e::{Operator, PodSpec, Scenario};

/// A Deployment whose selector matches the demo pods (`app=shop`). There is no
/// controller manager: it makes no pods of its own.
const SHOP_DEPLOYMENT: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: shop}
spec:
  replicas: 3
  selector: {matchLabels: {app: shop}}
  template:
    metadata: {labels: {app: shop, logpolicy.dev/enabled: "true"}}
    spec: {containers: [{name: main, image: example.invalid/shop:1}]}
"#;

/// A scenario and an operator that watches only its namespace.
async fn world(name: &str) -> (Scenario, Operator) {
    let s = Scenario::without_operator(name).await.unwrap();
    let operator = Operator::watching(s.namespace()).unwrap();
    (s, operator)
}

fn plugin(s: &Scenario, operator: Option<&Operator>, args: &[&str]) -> PluginRun {
    kubectl_logpolicy(s.namespace(), operator.map(|o| o.namespace.as_str()), args).unwrap()
}

/// The state in the pods' table for `pod`.
fn state_of<'a>(run: &'a PluginRun, pod: &str) -> Option<&'a str> {
    run.stdout.lines().find_map(|l| {
        let mut cells = l.split_whitespace();
        (cells.next() == Some(pod)).then(|| cells.next()).flatten()
    })
}

/// The document version and applied-at time in the pods' table for `pod`, as the pod
/// said them.
fn held_by(run: &PluginRun, pod: &str) -> Option<(u64, SystemTime)> {
    run.stdout.lines().find_map(|l| {
        let cells: Vec<&str> = l.split_whitespace().collect();
        if cells.first() != Some(&pod) {
            return None;
        }
        let version = cells.get(2)?.parse().ok()?;
        let at = logpolicy::clock::parse_rfc3339(cells.get(3)?).ok()?;
        Some((version, at))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raise_a_deployment_then_list_status_extend_and_revert() {
    let _file = crate::one_file_at_a_time(module_path!());
    let (s, operator) = world("plugin-deploy").await;
    let op = Some(&operator);
    let mut pods = s.pods(three_shops()).await.unwrap();
    wait_known(&pods).unwrap();
    // A raise refuses a target no pod knows yet (shop::payment: once a request failed).
    wait_target_known(&pods, "shop::payment").unwrap();
    s.apply(SHOP_DEPLOYMENT).unwrap();

    // The dry run prints the policy and creates nothing.
    let dry = plugin(
        &s,
        op,
        &[
            "raise",
            "deploy/shop",
            "--target",
            "shop::payment=debug",
            "--dry-run",
        ],
    );
    dry.expect_code(0).unwrap();
    assert!(dry.stdout.contains("kind: LogPolicy"), "{dry}");
    assert!(dry.stdout.contains("      app: shop"), "{dry}");
    assert!(dry.stdout.contains("  duration: 15m"), "{dry}");
    assert!(!s
        .kubectl(&["get", "lp", "-o", "name"])
        .unwrap()
        .contains("logpolic"));

    let t0 = SystemTime::now();
    let run = plugin(
        &s,
        op,
        &[
            "raise",
            "deploy/shop",
            "--target",
            "shop::payment=debug",
            "--for",
            "10s",
            "--reason",
            "INC-4211: card declines",
            // Timed to the acknowledgements (the cost measure after them has its own
            // test: raises_check_their_targets_and_suggest_cuts_what_it_projects.rs).
            "--measure",
            "0",
        ],
    );
    run.expect_code(0).unwrap();
    let name = run.created_policy().unwrap();
    assert!(name.starts_with("raise-shop-payment-debug-"), "{name}");
    assert_eq!(name.len(), "raise-shop-payment-debug-".len() + 5, "{name}");
    let mut versions = Vec::new();
    for p in &pods {
        assert_eq!(state_of(&run, &p.name), Some("applied"), "{run}");
        // Each row says which document the pod holds and when it applied it (by the
        // pod's clock, the same machine's here): after the raise began, before it ended.
        let (version, at) = held_by(&run, &p.name).unwrap_or_else(|| panic!("{run}"));
        assert!(at >= t0 && at <= SystemTime::now(), "{run}");
        versions.push(version);
    }
    assert!(run.took < Duration::from_secs(5), "{run}");
    // Acknowledged means in force: the debug lines are there.
    let firsts = wait_payment_debug(&mut pods, t0, 2 * SEC).unwrap();
    eprintln!(
        "raise -> first debug line per pod: {:.3?} s",
        firsts
            .iter()
            .map(|t| secs_between(*t, t0))
            .collect::<Vec<_>>()
    );
    let lp = s.policy(&name).unwrap();
    assert_eq!(lp["spec"]["selector"]["matchLabels"]["app"], "shop", "{lp}");
    assert_eq!(lp["spec"]["duration"], "10s", "{lp}");
    assert_eq!(lp["spec"]["reason"], "INC-4211: card declines", "{lp}");

    let list = plugin(&s, op, &["list"]);
    list.expect_code(0).unwrap();
    let row = list.stdout.lines().find(|l| l.starts_with(&name)).unwrap();
    for cell in ["shop::payment=debug", "3/3", "INC-4211: card declines"] {
        assert!(row.contains(cell), "{cell}: {list}");
    }
    let list = plugin(&s, op, &["list", "-o", "json"]);
    let items: serde_json::Value = serde_json::from_str(&list.stdout).unwrap();
    assert_eq!(items[0]["metadata"]["name"], name.as_str(), "{list}");

    let status = plugin(&s, op, &["status", &name]);
    status.expect_code(0).unwrap();
    assert!(status.stdout.contains("AllPodsApplied"), "{status}");
    assert!(status.stdout.contains("Reason:      INC-4211"), "{status}");
    assert_eq!(state_of(&status, "shop-1"), Some("applied"), "{status}");
    assert_eq!(
        held_by(&status, "shop-1").map(|(v, _)| v),
        Some(versions[1]),
        "{status}"
    );

    let effective = plugin(&s, op, &["effective", "shop-0"]);
    effective.expect_code(0).unwrap();
    assert!(
        effective.stdout.contains("shop::payment=debug"),
        "{effective}"
    );
    assert!(effective.stdout.contains(&name), "{effective}");

    // Extend: 2 minutes from now, as an expiration time.
    let before: SystemTime = expiration(&s, &name);
    let asked = SystemTime::now();
    let ext = plugin(&s, op, &["extend", &name, "--for", "2m"]);
    ext.expect_code(0).unwrap();
    let lp = s.policy(&name).unwrap();
    assert!(lp["spec"]["duration"].is_null(), "{lp}");
    assert!(lp["spec"]["expirationTime"].is_string(), "{lp}");
    let after = expiration(&s, &name);
    let from_ask = secs_between(after, asked);
    assert!((118.0..=123.0).contains(&from_ask), "{from_ask} s: {lp}");
    assert!(after > before, "{lp}");
    for (p, raised) in pods.iter().zip(&versions) {
        assert_eq!(state_of(&ext, &p.name), Some("applied"), "{ext}");
        // The extension is a newer document, applied after it was asked for.
        let (version, at) = held_by(&ext, &p.name).unwrap_or_else(|| panic!("{ext}"));
        assert!(version > *raised, "{ext}");
        assert!(at >= asked, "{ext}");
    }

    // Revert ends it early: once it exits, no pod holds it.
    let rev = plugin(&s, op, &["revert", &name]);
    rev.expect_code(0).unwrap();
    let t1 = SystemTime::now();
    for p in &pods {
        assert_eq!(state_of(&rev, &p.name), Some("reverted"), "{rev}");
        let directives = p.directives().unwrap();
        assert!(
            !directives.contains("shop::payment=debug"),
            "{}: {directives}",
            p.name
        );
    }
    wait_past(&mut pods, t1 + SEC, 5 * SEC).unwrap();
    for p in &pods {
        let late = p
            .log
            .count(t1 + Duration::from_millis(50), t1 + SEC, payment_debug);
        assert_eq!(late, 0, "{}: debug lines after the revert", p.name);
    }
    assert!(!s
        .kubectl(&["get", "lp", "-o", "name"])
        .unwrap()
        .contains(&name));
}

/// `status.expirationTime` of `lp/NAME`.
fn expiration(s: &Scenario, name: &str) -> SystemTime {
    let lp = s.policy(name).unwrap();
    let t = lp["status"]["expirationTime"].as_str().unwrap();
    logpolicy::clock::parse_rfc3339(t).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raise_by_label_writes_the_named_fields_redacted() {
    let _file = crate::one_file_at_a_time(module_path!());
    let (s, operator) = world("plugin-label").await;
    let mut pods = s
        .pods(vec![
            PodSpec::shop("web-0").label("tier", "web"),
            PodSpec::shop("api-0").label("tier", "api"),
            PodSpec::shop("canary-0")
                .label("tier", "web")
                .label("canary", "yes"),
        ])
        .await
        .unwrap();
    wait_known(&pods).unwrap();
    // A raise refuses a target no pod knows yet (shop::payment: once a request failed).
    wait_target_known(&pods, "shop::payment").unwrap();
    let t0 = SystemTime::now();
    let run = plugin(
        &s,
        Some(&operator),
        &[
            "raise",
            "-l",
            "app=shop,tier in (web,api),!canary",
            "--target",
            "shop=trace",
            "--redact",
            "card_token",
            "--redact",
            "amount_cents",
            "--for",
            "30s",
        ],
    );
    run.expect_code(0).unwrap();
    assert!(
        run.created_policy()
            .unwrap()
            .starts_with("raise-shop-trace-"),
        "{run}"
    );
    assert_eq!(state_of(&run, "web-0"), Some("applied"), "{run}");
    assert_eq!(state_of(&run, "api-0"), Some("applied"), "{run}");
    assert_eq!(state_of(&run, "canary-0"), None, "not selected: {run}");
    let (selected, canary) = pods.split_at_mut(2);
    let authorising = |l: &logpolicy_e2e::logs::Line| payment_debug(l) && l.msg == "authorising";
    wait_lines(selected, t0, 2 * SEC, "authorising lines", authorising).unwrap();
    wait_past(selected, SystemTime::now() + SEC, 5 * SEC).unwrap();
    for p in selected.iter() {
        let lines = authorising_since(p, t0);
        assert!(!lines.is_empty(), "{}", p.name);
        for l in lines {
            assert_eq!(
                not_redacted(l),
                Vec::<String>::new(),
                "{}: {}",
                p.name,
                l.json
            );
        }
        assert!(
            p.log.count(t0, SystemTime::now(), |l| l.level == "TRACE") > 0,
            "{}",
            p.name
        );
    }
    wait_past(canary, SystemTime::now(), 5 * SEC).unwrap();
    assert_eq!(
        canary[0]
            .log
            .count(t0, SystemTime::now(), |l| l.level == "TRACE"),
        0,
        "the canary is not selected"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raise_when_reaches_one_customers_requests_only() {
    let _file = crate::one_file_at_a_time(module_path!());
    let (s, operator) = world("plugin-when").await;
    let mut pods = s
        .pods(vec![PodSpec::shop("shop-0").self_load(50)])
        .await
        .unwrap();
    wait_known(&pods).unwrap();
    // A raise refuses a target no pod knows yet (shop::payment: once a request failed).
    wait_target_known(&pods, "shop::payment").unwrap();
    let t0 = SystemTime::now();
    let run = plugin(
        &s,
        Some(&operator),
        &[
            "raise",
            "-l",
            "app=shop",
            "--target",
            "shop::payment=debug",
            "--when",
            "user_id=42",
            "--for",
            "30s",
        ],
    );
    run.expect_code(0).unwrap();
    assert!(
        run.stdout
            .contains("shop::payment=debug@when(user_id=42) for 30s"),
        "{run}"
    );
    assert_eq!(state_of(&run, "shop-0"), Some("applied"), "{run}");
    let user = |l: &logpolicy_e2e::logs::Line| l.json["span"]["user_id"].as_u64();
    wait_lines(
        &mut pods,
        t0,
        5 * SEC,
        "customer 42's debug lines",
        payment_debug,
    )
    .unwrap();
    wait_past(&mut pods, SystemTime::now() + 2 * SEC, 10 * SEC).unwrap();
    let p = &pods[0];
    let now = SystemTime::now();
    let mine = p
        .log
        .count(t0, now, |l| payment_debug(l) && user(l) == Some(42));
    let others = p
        .log
        .count(t0, now, |l| payment_debug(l) && user(l) != Some(42));
    assert!(mine >= 5, "{mine} debug lines of customer 42");
    assert_eq!(others, 0, "debug lines of other customers");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raise_against_pods_that_have_not_opted_in_exits_3_naming_the_label() {
    let _file = crate::one_file_at_a_time(module_path!());
    let s = Scenario::without_operator("plugin-optout").await.unwrap();
    for i in 0..2 {
        s.apply(&format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: legacy-{i}, labels: {{app: legacy}}}}\nspec: {{nodeName: fake-node, containers: [{{name: main, image: example.invalid/legacy:1}}]}}\n"
        ))
        .unwrap();
    }
    s.apply(&SHOP_DEPLOYMENT.replace("shop", "legacy")).unwrap();
    let run = plugin(
        &s,
        None,
        &["raise", "-l", "app=legacy", "--target", "legacy=debug"],
    );
    run.expect_code(3).unwrap();
    let ns = s.namespace();
    assert!(
        run.stderr.contains(&format!(
            "kubectl label pod -n {ns} legacy-0 legacy-1 logpolicy.dev/enabled=true"
        )),
        "{run}"
    );
    let run = plugin(
        &s,
        None,
        &["raise", "deploy/legacy", "--target", "legacy=debug"],
    );
    run.expect_code(3).unwrap();
    assert!(
        run.stderr.contains("pod template of deploy/legacy"),
        "{run}"
    );
    let run = plugin(
        &s,
        None,
        &["raise", "-l", "app=nothing", "--target", "x=debug"],
    );
    run.expect_code(3).unwrap();
    assert!(run.stderr.contains("no pod in namespace"), "{run}");
    // Nothing was created.
    assert_eq!(s.kubectl(&["get", "lp", "-o", "name"]).unwrap().trim(), "");
    // Bad arguments are clap's: exit 2, naming the bad part.
    let run = plugin(
        &s,
        None,
        &["raise", "-l", "app=legacy", "--target", "legacy=loud"],
    );
    run.expect_code(2).unwrap();
    assert!(run.stderr.contains("\"loud\" is not a level"), "{run}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_operator_stopped_raise_exits_5() {
    let _file = crate::one_file_at_a_time(module_path!());
    let (s, mut operator) = world("plugin-down").await;
    let labels = [("app".to_owned(), "shop".to_owned())].into();
    let nowhere = "127.0.0.1:9".parse().unwrap();
    create_running_pods(&s.client, s.namespace(), "shop", 2, &labels, nowhere)
        .await
        .unwrap();
    operator.kill();
    let args = [
        "raise",
        "-l",
        "app=shop",
        "--target",
        "shop=debug",
        "--wait",
        "5s",
    ];
    let run = plugin(&s, Some(&operator), &args);
    run.expect_code(5).unwrap();
    assert!(
        run.stderr.contains("the logpolicy operator is not running"),
        "{run}"
    );
    assert!(run.stderr.contains("the LogPolicy stays"), "{run}");
    assert!(run.took >= Duration::from_secs(5), "{run}");

    // A Lease that nobody renews says so sooner than --wait.
    // A MicroTime: microseconds, always six digits.
    let a_minute_ago = SystemTime::now() - Duration::from_secs(60);
    let whole = a_minute_ago
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let renewed =
        logpolicy::clock::format_rfc3339(SystemTime::UNIX_EPOCH + Duration::from_secs(whole))
            .replace('Z', ".000000Z");
    s.apply(&format!(
        "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {{name: logpolicy-operator}}\nspec: {{holderIdentity: op-0, leaseDurationSeconds: 15, renewTime: \"{renewed}\"}}\n"
    ))
    .unwrap();
    let run = kubectl_logpolicy(
        s.namespace(),
        Some(s.namespace()),
        &[
            "raise",
            "-l",
            "app=shop",
            "--target",
            "shop=debug",
            "--wait",
            "30s",
        ],
    )
    .unwrap();
    run.expect_code(5).unwrap();
    assert!(run.stderr.contains("last renewed by op-0"), "{run}");
    assert!(run.took < Duration::from_secs(10), "{run}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raise_the_operator_refuses_exits_6_with_its_reason() {
    let _file = crate::one_file_at_a_time(module_path!());
    // The plugin takes any --for; the operator's --max-duration (the chart's default,
    // 24h) is the operator's to enforce: a 48 h raise is refused there, and the plugin
    // says so.
    let s = Scenario::without_operator("plugin-refused").await.unwrap();
    let operator = Operator::start(OperatorOptions {
        set: vec![
            (
                "watchNamespaces".to_owned(),
                format!("{{{}}}", s.namespace()),
            ),
            ("maxDuration".to_owned(), "24h".to_owned()),
        ],
        ..OperatorOptions::default()
    })
    .unwrap();
    let labels = [("app".to_owned(), "shop".to_owned())].into();
    let nowhere = "127.0.0.1:9".parse().unwrap();
    create_running_pods(&s.client, s.namespace(), "shop", 2, &labels, nowhere)
        .await
        .unwrap();
    let run = plugin(
        &s,
        Some(&operator),
        &[
            "raise",
            "-l",
            "app=shop",
            "--target",
            "shop=debug",
            "--for",
            "48h",
            "--wait",
            "30s",
        ],
    );
    run.expect_code(6).unwrap();
    assert!(run.stderr.contains("the operator refused lp/"), "{run}");
    assert!(run.stderr.contains("Stalled=True"), "{run}");
    assert!(run.stderr.contains("spec.duration"), "{run}");
    // Refused, not lost: the LogPolicy stays for the user to fix or delete.
    let name = run.created_policy().unwrap();
    assert!(s
        .kubectl(&["get", "lp", "-o", "name"])
        .unwrap()
        .contains(&name));
    assert!(run.took < Duration::from_secs(20), "{run}");
}
