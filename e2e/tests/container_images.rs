//! The container images that `scripts/images` builds, read from the OCI archives it
//! writes: nothing but the binary (and the operator's kubectl plugin and CA bundle), so
//! no shell; user
//! 65532; the OCI labels; within the size targets; the names and versions that the
//! chart and the example workload deploy. And they work: the operator's entrypoint, in
//! its image's root filesystem with the chart's ServiceAccount token where a pod finds
//! it, answers `/healthz` and `/readyz` and pushes a policy to a demo service running
//! from its own image; and the chart's `helm test` pod, run from the operator's image
//! with a token of the check's own ServiceAccount, passes `kubectl logpolicy check`.
//!
//! Needs buildah; skipped (with the reason) where it cannot run, unless
//! `LOGPOLICY_E2E_REQUIRE_IMAGES=1` (as `scripts/test` sets) makes that a failure.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers: a failure is a test failure

use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::time::SystemTime;

use logpolicy_e2e::cluster::repo_root;
use logpolicy_e2e::helm::{is_hook, one, parse_documents, render};
use logpolicy_e2e::image::{process_ids, Image, Images, Runtime, REQUIRE_VAR};
use logpolicy_e2e::net::get_ok;
use logpolicy_e2e::operator::OperatorOptions;
use logpolicy_e2e::process::TestDir;
use logpolicy_e2e::shop::{wait_known, wait_payment_debug, DEBUG_PAYMENTS, SEC};
use logpolicy_e2e::{Cluster, Operator, PodSpec, Scenario};
use serde_json::{json, Value};

/// The images, or `None` (the test is skipped) when buildah cannot run here.
fn images() -> Option<&'static Images> {
    if let Err(why) = Images::buildable() {
        assert!(
            std::env::var(REQUIRE_VAR).as_deref() != Ok("1"),
            "{REQUIRE_VAR}=1, but buildah cannot build the images here: {why}"
        );
        eprintln!("SKIPPED: building the container images needs buildah: {why}");
        return None;
    }
    Some(Images::get().unwrap())
}

const MB: u64 = 1_000_000;

/// The image holds exactly `files` (besides directories), is configured as the
/// Containerfiles say, and takes at most `max_bytes` uncompressed.
fn check_image(image: &Image, files: &[&str], max_bytes: u64) {
    let name = image.name();
    let entries = image.entries().unwrap();
    let found: BTreeSet<&str> = entries
        .iter()
        .map(String::as_str)
        .filter(|e| !e.ends_with('/'))
        .collect();
    let expected: BTreeSet<&str> = files.iter().copied().collect();
    assert_eq!(found, expected, "{name}: the files of the image");
    for shell in ["sh", "bash", "dash", "ash", "busybox"] {
        assert!(
            !entries.iter().any(|e| e.rsplit('/').next() == Some(shell)),
            "{name} holds a {shell}"
        );
    }
    assert_eq!(image.user(), "65532:65532", "{name}: User");
    assert_eq!(
        image.entrypoint(),
        [format!("/usr/local/bin/{name}")],
        "{name}: Entrypoint"
    );
    let version = image.tag.rsplit(':').next().unwrap();
    assert_eq!(
        image.label("org.opencontainers.image.version"),
        Some(version),
        "{name}"
    );
    assert_eq!(
        image.label("org.opencontainers.image.source"),
        Some(env!("CARGO_PKG_REPOSITORY")),
        "{name}"
    );
    assert_eq!(
        image.label("org.opencontainers.image.licenses"),
        Some(env!("CARGO_PKG_LICENSE")),
        "{name}"
    );
    let (compressed, uncompressed) = image.sizes().unwrap();
    let archive = std::fs::metadata(&image.archive).unwrap().len();
    eprintln!(
        "{}: {:.1} MB uncompressed, {:.1} MB compressed layers, archive {} {:.1} MB",
        image.tag,
        uncompressed as f64 / MB as f64,
        compressed as f64 / MB as f64,
        image.archive.display(),
        archive as f64 / MB as f64
    );
    assert!(
        uncompressed <= max_bytes,
        "{name}: {uncompressed} bytes, more than the target {max_bytes}"
    );
}

#[test]
fn the_images_hold_their_binary_only_run_as_65532_and_are_what_the_chart_deploys() {
    let _file = crate::one_file_at_a_time(module_path!());
    let Some(images) = images() else { return };
    check_image(
        &images.operator,
        &[
            "usr/local/bin/logpolicy-operator",
            "usr/local/bin/kubectl-logpolicy",
            "etc/ssl/certs/ca-certificates.crt",
        ],
        // The operator (~17 MB) and, for `helm test`, the kubectl plugin (~15 MB): two
        // static binaries, each with its own copy of kube, rustls and tokio. One image
        // for both keeps the test pod on the image the operator runs (no second image
        // to pull, pin or scan).
        36 * MB,
    );
    check_image(
        &images.demo_service,
        &["usr/local/bin/logpolicy-demo-service"],
        15 * MB,
    );

    // The chart's default image and the example workload's are these.
    let objects = render("lp", "logpolicy-system", &[]).unwrap();
    let deployment = one(&objects, "Deployment").unwrap();
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], images.operator.tag.as_str());
    let path = repo_root().join("e2e/examples/workload.yaml");
    let workload = parse_documents(&std::fs::read_to_string(path).unwrap()).unwrap();
    let deployment = one(&workload, "Deployment").unwrap();
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], images.demo_service.tag.as_str());
}

/// The process runs as 65532:65532 (real, effective, saved and filesystem ids), in a
/// root filesystem unpacked from its image.
fn check_process(what: &str, pid: Option<u32>) {
    let pid = pid.unwrap_or_else(|| panic!("{what} is not running"));
    let (uids, gids) = process_ids(pid).unwrap();
    assert_eq!(uids, [65532; 4], "{what}: uids");
    assert_eq!(gids, [65532; 4], "{what}: gids");
    let root = std::fs::read_link(format!("/proc/{pid}/root")).unwrap();
    assert!(
        root.to_string_lossy().ends_with(".root"),
        "{what}: its root is {}",
        root.display()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_image_pushes_a_policy_to_a_demo_service_image() {
    let _file = crate::one_file_at_a_time(module_path!());
    let Some(images) = images() else { return };
    let runtime = Runtime::Images(images);
    let operator = Operator::start(OperatorOptions {
        runtime,
        ..OperatorOptions::default()
    })
    .unwrap();
    for path in ["/healthz", "/readyz"] {
        let reply = get_ok(operator.metrics_addr, path).unwrap();
        eprintln!(
            "operator image {path}: {} {}",
            reply.status,
            reply.body.trim()
        );
    }
    check_process("the operator", operator.pid());

    let s = Scenario::with_operator("images", &operator).await.unwrap();
    let mut pods = s
        .pods(vec![PodSpec::shop("shop-image").runtime(runtime)])
        .await
        .unwrap();
    check_process("the demo service", pods[0].pid());
    wait_known(&pods).unwrap();
    let t0 = SystemTime::now();
    s.apply(DEBUG_PAYMENTS).unwrap();
    wait_payment_debug(&mut pods, t0, 10 * SEC).unwrap();
    let directives = pods[0].directives().unwrap();
    assert!(
        directives.contains("shop::payment=debug"),
        "the service's directives: {directives}"
    );

    // `helm test` on this install passes, with only the permissions the chart gives the
    // check: a read it may not make would be a warning or an error.
    let (status, output) = run_check_pod(images, &operator);
    assert!(status.success(), "{status}: {output}");
    let lines: Vec<&str> = output.lines().collect();
    assert!(
        lines.iter().all(|l| l.starts_with("ok ")),
        "every line ok: {output}"
    );
    let (ns, operator_ns) = (s.namespace(), operator.namespace.as_str());
    for (check, says) in [
        // Read by name (the ClusterRole's get), not found by discovery: its stored
        // version is known.
        ("crd", "; stored v".to_owned()),
        (
            "operator",
            format!("{operator_ns}/logpolicy-operator: running and leading"),
        ),
        (
            "trust-configmap",
            format!("{ns}/logpolicy-trust: holds the operator's key"),
        ),
        ("pod", format!("{ns} (1/1 pods): reachable")),
    ] {
        assert!(
            lines
                .iter()
                .any(|l| l.split_whitespace().nth(1) == Some(check) && l.contains(&says)),
            "{check}: {says}: {output}"
        );
    }
}

/// The chart's `helm test` pod run as a kubelet would run it (there is none here): its
/// container's command and args, in a root filesystem unpacked from the operator's
/// image, as the pod's user, with a token of the check's own ServiceAccount (the hook's
/// roles applied) where a pod finds it and the API server in `KUBERNETES_SERVICE_HOST`
/// and `_PORT`; no kubeconfig, so the plugin takes the in-cluster config. Its exit
/// status and its output (stdout, then stderr).
fn run_check_pod(images: &Images, operator: &Operator) -> (std::process::ExitStatus, String) {
    let cluster = Cluster::shared().unwrap();
    let objects = render(&operator.release, &operator.namespace, &[]).unwrap();
    let rbac: Vec<&Value> = objects
        .iter()
        .filter(|o| is_hook(o) && o["kind"] != "Pod")
        .collect();
    let list = json!({"apiVersion": "v1", "kind": "List", "items": rbac});
    cluster
        .kubectl_input(&["apply", "-f", "-"], &list.to_string())
        .unwrap();
    let pod = one(&objects, "Pod").unwrap();
    let spec = &pod["spec"];
    let account = spec["serviceAccountName"].as_str().unwrap();
    let token = cluster
        .kubectl(&["create", "token", account, "-n", &operator.namespace])
        .unwrap();

    let dir = TestDir::new("check-pod").unwrap();
    let root = dir.join("check.root");
    images.operator.unpack(&root).unwrap();
    let mount = root.join("var/run/secrets/kubernetes.io/serviceaccount");
    std::fs::create_dir_all(&mount).unwrap();
    std::fs::write(mount.join("token"), token.trim()).unwrap();
    // Written, not copied: readable by the pod's user, as a kubelet mounts it.
    let ca = std::fs::read(&cluster.ca_file).unwrap();
    std::fs::write(mount.join("ca.crt"), ca).unwrap();
    std::fs::write(mount.join("namespace"), &operator.namespace).unwrap();

    let containers = spec["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1, "cluster-wide: one container");
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_owned())
            .collect()
    };
    let sc = &spec["securityContext"];
    let address = cluster.api_server.trim_start_matches("https://");
    let (host, port) = address.rsplit_once(':').unwrap();
    let mut cmd = Command::new("chroot");
    cmd.arg(format!(
        "--userspec={}:{}",
        sc["runAsUser"], sc["runAsGroup"]
    ))
    .arg(&root)
    .args(strings(&containers[0]["command"]))
    .args(strings(&containers[0]["args"]))
    .env_clear()
    // The image's environment, as a container runtime sets it (its PATH also finds
    // chroot here).
    .envs(
        strings(&images.operator.config["Env"])
            .iter()
            .filter_map(|kv| kv.split_once('=')),
    )
    .env("KUBERNETES_SERVICE_HOST", host)
    .env("KUBERNETES_SERVICE_PORT", port)
    .stdin(Stdio::null());
    let out = cmd.output().unwrap();
    let output = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("helm test's check pod ({cmd:?}): {}\n{output}", out.status);
    (out.status, output)
}
