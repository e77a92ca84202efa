//! The demo service and the signing tool, as a person would use them: make a key, start
//! the service trusting it, push a raise, see it in the logs, be refused for another pod,
//! delete, stop with SIGTERM.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::{get, sign_tool};

use std::process::{Command, Stdio};

const SHOP: &str = env!("CARGO_BIN_EXE_logpolicy-demo-service");

#[test]
fn a_person_can_push_a_signed_policy_to_the_demo_service() {
    let dir = std::env::temp_dir().join(format!("demo-service-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let key = dir.join("operator.key");
    let key = key.to_str().unwrap();
    let (ok, public) = sign_tool(&["keygen", "--out", key]);
    assert!(ok, "{public}");
    let log = dir.join("shop.log");

    let mut shop = Command::new(SHOP)
        .args(["--addr", "127.0.0.1:0", "--fail-every", "5"])
        .env("LOGPOLICY", "info")
        .env("LOGPOLICY_ADMIN_ADDR", "127.0.0.1:0")
        .env("LOGPOLICY_TRUSTED_KEYS", public.trim())
        .env("POD_UID", "uid-1")
        .env("POD_NAME", "pod")
        .env("POD_NAMESPACE", "default")
        .env_remove("LOGPOLICY_ADMIN_ANY_POD")
        .env_remove("LOGPOLICY_TRUSTED_KEYS_FILE")
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (shop_addr, admin_addr) = common::listening(&mut shop);
    let (shop_addr, admin_addr) = (shop_addr.as_str(), admin_addr.as_str());
    let url = format!("http://{admin_addr}/logpolicy");

    assert_eq!(get(shop_addr, "/checkout").0, 200);
    let (ok, out) = sign_tool(&[
        "push",
        "--key",
        key,
        "--url",
        &url,
        "--pod-uid",
        "uid-1",
        "--directives",
        "info,shop::payment=debug",
        "--for",
        "10m",
        "--version",
        "1",
    ]);
    assert!(ok && out.starts_with("200"), "{out}");
    let statuses: Vec<u16> = (0..4).map(|_| get(shop_addr, "/checkout").0).collect();
    assert_eq!(statuses, [200, 200, 200, 500]);

    let (ok, out) = sign_tool(&[
        "push",
        "--key",
        key,
        "--url",
        &url,
        "--pod-uid",
        "uid-2",
        "--directives",
        "trace",
        "--version",
        "2",
    ]);
    assert!(
        !ok && out.starts_with("403") && out.contains("wrong_pod"),
        "{out}"
    );
    let (status, body) = get(admin_addr, "/logpolicy");
    assert_eq!(status, 200);
    assert!(body.contains("info,shop::payment=debug"), "{body}");
    let (_, metrics) = get(admin_addr, "/metrics");
    assert!(metrics.contains("logpolicy_policy_version 1"), "{metrics}");

    let (ok, out) = sign_tool(&[
        "delete",
        "--key",
        key,
        "--url",
        &url,
        "--pod-uid",
        "uid-1",
        "--version",
        "3",
    ]);
    assert!(ok, "{out}");
    assert_eq!(get(shop_addr, "/checkout").0, 200);

    Command::new("kill")
        .args(["-TERM", &shop.id().to_string()])
        .status()
        .unwrap();
    let status = shop.wait().unwrap();
    assert!(status.success(), "{status:?}");

    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let payment_debug: Vec<u64> = lines
        .iter()
        .filter(|l| {
            l["level"] == "DEBUG" && l["target"] == "shop::payment" && l["msg"] == "authorising"
        })
        .map(|l| l["span"]["id"].as_u64().unwrap())
        .collect();
    // Requests 2 to 5 ran under the raise (one "authorising" line each; a failed one
    // also says what the gateway answered); 1 before it, 6 after the delete.
    assert_eq!(payment_debug, [2, 3, 4, 5]);
    assert!(lines
        .iter()
        .any(|l| l["level"] == "ERROR" && l["msg"] == "payment failed"));
    assert!(!lines
        .iter()
        .any(|l| l["level"] == "DEBUG" && l["target"] == "shop::db"));
    let _ = std::fs::remove_dir_all(&dir);
}
