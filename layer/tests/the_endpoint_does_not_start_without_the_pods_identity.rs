//! One operator key signs for every namespace: the pod's identity is the only wall
//! between them, so the admin endpoint refuses to start without all of it, naming what
//! is missing, unless the override for use outside Kubernetes is given. With it, or
//! with the identity, it starts; with the identity, a document for another pod is 403.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin_fixture;

use std::process::Command;

use logpolicy::admin::{AdminConfig, AdminError, AdminServer, PodIdentity};
use logpolicy::wire::{self, TrustedKeys};
use logpolicy::PolicyFilter;

const CHILD: &str = "LOGPOLICY_TEST_IDENTITY_CHILD";

fn config(pod: PodIdentity) -> AdminConfig {
    let key = wire::SigningKey::from_bytes(&[7; 32]);
    AdminConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        TrustedKeys::new([key.verifying_key()]),
    )
    .pod(pod)
}

fn start(config: AdminConfig) -> Result<AdminServer, AdminError> {
    let filter = PolicyFilter::from_directives("info").unwrap();
    AdminServer::start(config, filter.handle(), None)
}

#[test]
fn an_incomplete_identity_is_refused_naming_what_is_missing() {
    let err = start(config(PodIdentity::default())).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, AdminError::NoPodIdentity { .. }), "{text}");
    assert!(
        text.contains("POD_UID, POD_NAME and POD_NAMESPACE are unset"),
        "{text}"
    );
    assert!(text.contains("LOGPOLICY_ADMIN_ANY_POD=1"), "{text}");

    let err = start(config(PodIdentity {
        uid: Some("u".into()),
        name: None,
        namespace: Some("shop".into()),
    }))
    .unwrap_err()
    .to_string();
    assert!(err.contains("POD_NAME is unset"), "{err}");
    assert!(!err.contains("POD_UID"), "{err}");

    drop(start(config(PodIdentity::default()).any_pod()).unwrap());
    drop(
        start(config(PodIdentity {
            uid: Some("u".into()),
            name: Some("web-1".into()),
            namespace: Some("shop".into()),
        }))
        .unwrap(),
    );
}

/// In the child: the endpoint configured from the environment, started; prints `started`
/// or the error.
#[test]
fn child_starts_the_endpoint_from_the_environment() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let outcome = AdminConfig::from_env()
        .and_then(|c| start(c.expect("LOGPOLICY_ADMIN_ADDR is set")))
        .map(|_| "started".to_owned())
        .unwrap_or_else(|e| format!("error: {e}"));
    println!("outcome: {outcome}");
}

fn from_env(vars: &[(&str, &str)]) -> String {
    let key = wire::SigningKey::from_bytes(&[7; 32]);
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "child_starts_the_endpoint_from_the_environment",
        "--nocapture",
    ])
    .env(CHILD, "1")
    .env("LOGPOLICY_ADMIN_ADDR", "127.0.0.1:0")
    .env(
        "LOGPOLICY_TRUSTED_KEYS",
        wire::encode_public_key(&key.verifying_key()),
    );
    for var in [
        "POD_UID",
        "POD_NAME",
        "POD_NAMESPACE",
        "LOGPOLICY_ADMIN_ANY_POD",
        "LOGPOLICY_TRUSTED_KEYS_FILE",
    ] {
        cmd.env_remove(var);
    }
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("outcome: "))
        .unwrap_or_else(|| panic!("no outcome: {stdout}"))
        .to_owned()
}

#[test]
fn from_the_environment_the_identity_is_required_unless_overridden() {
    let out = from_env(&[]);
    assert!(
        out.starts_with("error: ") && out.contains("POD_UID, POD_NAME and POD_NAMESPACE"),
        "{out}"
    );
    let out = from_env(&[("POD_UID", "u"), ("POD_NAME", " ")]);
    assert!(
        out.contains("POD_NAME and POD_NAMESPACE are unset"),
        "{out}"
    );
    assert_eq!(from_env(&[("LOGPOLICY_ADMIN_ANY_POD", "1")]), "started");
    let out = from_env(&[("LOGPOLICY_ADMIN_ANY_POD", "yes")]);
    assert!(
        out.contains("LOGPOLICY_ADMIN_ANY_POD") && out.contains("\"yes\""),
        "{out}"
    );
    assert_eq!(
        from_env(&[
            ("POD_UID", "u"),
            ("POD_NAME", "web-1"),
            ("POD_NAMESPACE", "shop")
        ]),
        "started"
    );
}

#[test]
fn with_the_identity_a_document_for_another_namespace_is_refused() {
    let f = admin_fixture::Fixture::new("info");
    // The fixture's pod is shop/web-1: the same name and uid in another namespace.
    let doc = f
        .doc(1, "[]")
        .replace(r#""namespace":"shop""#, r#""namespace":"other""#);
    let r = f.signed("PUT", &doc);
    assert!(
        r.refused(403, "wrong_pod").contains("pod.namespace"),
        "{r:?}"
    );
}
