//! A workload opted in before the operator has written its trust ConfigMap (mounted
//! `optional: true`: the directory is there, the keys file is not) starts and serves at
//! once; its first log line says the admin endpoint refuses pushes until the keys file
//! can be read; once the file appears, a signed push is taken, and the log says when.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::{get, sign_tool};

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SHOP: &str = env!("CARGO_BIN_EXE_logpolicy-demo-service");

#[test]
fn the_demo_service_starts_before_its_trust_configmap_exists() {
    let dir = std::env::temp_dir().join(format!("demo-service-late-keys-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mount = dir.join("etc-logpolicy");
    std::fs::create_dir_all(&mount).unwrap();
    let keys_file = mount.join("trusted-keys");
    let key = dir.join("operator.key");
    let key = key.to_str().unwrap();
    let (ok, public) = sign_tool(&["keygen", "--out", key]);
    assert!(ok, "{public}");
    let log = dir.join("shop.log");

    let mut shop = Command::new(SHOP)
        .args(["--addr", "127.0.0.1:0", "--fail-every", "0"])
        .env("LOGPOLICY", "info")
        .env("LOGPOLICY_ADMIN_ADDR", "127.0.0.1:0")
        .env("LOGPOLICY_TRUSTED_KEYS_FILE", &keys_file)
        .env("POD_UID", "uid-1")
        .env("POD_NAME", "pod")
        .env("POD_NAMESPACE", "default")
        .env_remove("LOGPOLICY_TRUSTED_KEYS")
        .env_remove("LOGPOLICY_ADMIN_ANY_POD")
        .env_remove("LOGPOLICY_FORMAT")
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (shop_addr, admin_addr) = common::listening(&mut shop);
    let (shop_addr, admin_addr) = (shop_addr.as_str(), admin_addr.as_str());
    assert_eq!(get(shop_addr, "/checkout").0, 200);

    let url = format!("http://{admin_addr}/logpolicy");
    let push = |version: u64| {
        sign_tool(&[
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
            &version.to_string(),
        ])
    };
    let (ok, out) = push(1);
    assert!(
        !ok && out.starts_with("401") && out.contains("no_trusted_keys"),
        "{out}"
    );

    // The kubelet projects the ConfigMap: the next read of the file (every 500 ms)
    // trusts the operator's key.
    std::fs::write(&keys_file, &public).unwrap();
    let start = Instant::now();
    let mut version = 2;
    loop {
        let (ok, out) = push(version);
        if ok {
            assert!(out.starts_with("200"), "{out}");
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(5), "{out}");
        version += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(get(shop_addr, "/checkout").0, 200);

    Command::new("kill")
        .args(["-TERM", &shop.id().to_string()])
        .status()
        .unwrap();
    assert!(shop.wait().unwrap().success());

    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let own = |msg: &str| {
        lines
            .iter()
            .position(|l| l["target"] == "logpolicy" && l["msg"] == msg)
            .unwrap_or_else(|| panic!("no {msg:?} line in {lines:#?}"))
    };
    assert_eq!(
        own("the admin endpoint refuses pushes until its keys file can be read"),
        0,
        "the first line"
    );
    assert_eq!(lines[0]["level"], "WARN");
    assert_eq!(lines[0]["source"], "LOGPOLICY_TRUSTED_KEYS_FILE");
    let trusted = own("the admin endpoint trusts the keys of its keys file");
    assert_eq!(lines[trusted]["keys"], 1);
    assert!(
        lines[trusted..]
            .iter()
            .any(|l| l["level"] == "DEBUG" && l["target"] == "shop::payment"),
        "the pushed raise applied"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
