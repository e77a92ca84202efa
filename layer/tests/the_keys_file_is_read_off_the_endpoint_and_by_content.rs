//! The trusted-keys file is read by a thread of its own: replaced by a FIFO it neither
//! freezes the endpoint nor is trusted; it is followed by content (a rewrite of the
//! same size with its time put back is seen: a revoked key stops being trusted); a read
//! that failed is retried once the file is back.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin_fixture;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use admin_fixture::{doc_for, put_signed, send, Reply};
use logpolicy::admin::{AdminConfig, AdminServer, PodIdentity};
use logpolicy::wire::{self, SigningKey};
use logpolicy::PolicyFilter;

struct Pod {
    dir: PathBuf,
    file: PathBuf,
    admin: AdminServer,
}

fn key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

fn keys_line(k: &SigningKey) -> String {
    format!("{}\n", wire::encode_public_key(&k.verifying_key()))
}

fn start(name: &str, trusted: &SigningKey) -> Pod {
    let dir = std::env::temp_dir().join(format!("logpolicy-keys-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("trusted.keys");
    std::fs::write(&file, keys_line(trusted)).unwrap();
    let config = AdminConfig::with_keys_file("127.0.0.1:0".parse().unwrap(), &file)
        .unwrap()
        .pod(PodIdentity {
            uid: Some(admin_fixture::POD_UID.into()),
            name: Some("web-1".into()),
            namespace: Some("shop".into()),
        });
    let filter = PolicyFilter::from_directives("info").unwrap();
    let admin = AdminServer::start(config, filter.handle(), None).unwrap();
    Pod { dir, file, admin }
}

impl Drop for Pod {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Pod {
    fn push(&self, signer: &SigningKey, version: u64) -> Reply {
        let body = doc_for(admin_fixture::POD_UID, version, "[]");
        put_signed(self.admin.local_addr(), signer, &body)
    }

    /// Pushes (a new version each time) until `done` says yes, for at most 5 s.
    fn until(&self, signer: &SigningKey, first: u64, done: impl Fn(&Reply) -> bool) -> Reply {
        let start = Instant::now();
        let mut version = first;
        loop {
            let r = self.push(signer, version);
            if done(&r) {
                return r;
            }
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "not within 5 s: {r:?}"
            );
            version += 1;
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn mtime(path: &Path) -> SystemTime {
    std::fs::metadata(path).unwrap().modified().unwrap()
}

fn set_mtime(path: &Path, t: SystemTime) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(t)
        .unwrap();
}

#[test]
fn a_fifo_in_place_of_the_keys_file_freezes_nothing_and_trusts_nothing() {
    let a = key(1);
    let pod = start("fifo", &a);
    assert_eq!(pod.push(&a, 1).status, 200);

    std::fs::remove_file(&pod.file).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(&pod.file)
        .status()
        .unwrap();
    assert!(made.success());
    // Nothing writes to the FIFO: the endpoint keeps answering, and refuses pushes
    // once the keys thread has seen it, naming why.
    let r = pod.until(&a, 2, |r| r.status == 401);
    assert!(
        r.refused(401, "no_trusted_keys")
            .contains("not a regular file"),
        "{r:?}"
    );
    for _ in 0..5 {
        let start = Instant::now();
        let health = send(pod.admin.local_addr(), "GET", "/healthz", &[], b"");
        assert_eq!(health.status, 200);
        assert!(start.elapsed() < Duration::from_secs(2));
    }

    // The file back, same content: the failed read is retried and the key trusted again.
    std::fs::remove_file(&pod.file).unwrap();
    std::fs::write(&pod.file, keys_line(&a)).unwrap();
    pod.until(&a, 100, |r| r.status == 200);
}

#[test]
fn a_same_size_rewrite_with_its_time_put_back_is_seen() {
    let (a, b) = (key(1), key(2));
    let pod = start("rewrite", &a);
    assert_eq!(pod.push(&a, 1).status, 200);

    // Revoke a: b in its place, same length, modification time restored.
    let before = mtime(&pod.file);
    std::fs::write(&pod.file, keys_line(&b)).unwrap();
    set_mtime(&pod.file, before);
    assert_eq!(mtime(&pod.file), before);
    let r = pod.until(&a, 2, |r| r.status == 401);
    r.refused(401, "untrusted_key");
    pod.until(&b, 100, |r| r.status == 200);

    // Broken the same way (same size, time put back), then fixed the same way.
    let before = mtime(&pod.file);
    let broken = "x".repeat(keys_line(&b).len() - 1) + "\n";
    std::fs::write(&pod.file, broken).unwrap();
    set_mtime(&pod.file, before);
    let r = pod.until(&b, 200, |r| r.status == 401);
    assert!(r.body.contains("no_trusted_keys"), "{r:?}");
    std::fs::write(&pod.file, keys_line(&b)).unwrap();
    set_mtime(&pod.file, before);
    pod.until(&b, 300, |r| r.status == 200);
}

#[test]
fn a_keys_file_that_is_not_a_regular_file_or_too_large_is_refused_at_start() {
    let dir = std::env::temp_dir().join(format!("logpolicy-keys-start-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let addr = "127.0.0.1:0".parse().unwrap();

    let fifo = dir.join("fifo.keys");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let err = AdminConfig::with_keys_file(addr, &fifo)
        .unwrap_err()
        .to_string();
    assert!(err.contains("not a regular file"), "{err}");

    let err = AdminConfig::with_keys_file(addr, &dir)
        .unwrap_err()
        .to_string();
    assert!(err.contains("not a regular file"), "{err}");

    let big = dir.join("big.keys");
    std::fs::write(&big, "#".repeat(70_000)).unwrap();
    let err = AdminConfig::with_keys_file(addr, &big)
        .unwrap_err()
        .to_string();
    assert!(err.contains("65536"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
