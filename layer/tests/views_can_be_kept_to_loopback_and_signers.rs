//! What a pod's views show, and to whom. By default any peer reads `/logpolicy/sites`
//! and the per-target series of `/metrics`, and a loopback peer counts as the pod
//! itself (the whole policy view). With `Views::LocalAndSigners`
//! (`LOGPOLICY_ADMIN_VIEWS=local-and-signers`), a peer that is neither on loopback nor
//! a recent signer gets 403 `views_restricted` for the sites and `/metrics` without the
//! per-target series; a peer that sent a validly signed push gets both. With
//! `trust_loopback(false)` (`LOGPOLICY_ADMIN_TRUST_LOOPBACK=0`, behind a mesh sidecar
//! that connects from loopback) a loopback peer is a peer like any other: the reduced
//! view. (Every peer here is on loopback, 127.0.0.x: with loopback not trusted, they
//! stand for the network.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin_fixture;

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};

use admin_fixture::{connect_from, pod_config, read_reply, request_bytes, Reply};
use logpolicy::admin::{AdminConfig, AdminServer, Views};
use logpolicy::wire::{self, SigningKey};
use logpolicy::PolicyFilter;

fn start(config: impl FnOnce(AdminConfig) -> AdminConfig) -> (AdminServer, SigningKey) {
    let key = SigningKey::from_bytes(&[42; 32]);
    let filter = PolicyFilter::from_directives("info").unwrap();
    let admin = AdminServer::start(config(pod_config(&key)), filter.handle(), None).unwrap();
    (admin, key)
}

fn send_from(from: [u8; 4], addr: SocketAddr, request: &[u8]) -> Reply {
    let mut conn = connect_from(Ipv4Addr::from(from), addr);
    conn.write_all(request).unwrap();
    read_reply(&mut conn)
}

fn get_from(from: [u8; 4], addr: SocketAddr, path: &str) -> Reply {
    send_from(from, addr, &request_bytes("GET", path, &[], b""))
}

fn has_target_series(metrics: &Reply) -> bool {
    assert_eq!(metrics.status, 200, "{metrics:?}");
    metrics.body.contains("logpolicy_target_lines_total{")
}

const OTHER: [u8; 4] = [127, 0, 0, 2];
const OPERATOR: [u8; 4] = [127, 0, 0, 3];

#[test]
fn by_default_every_peer_reads_the_sites_and_loopback_sees_the_whole_view() {
    let (admin, _) = start(|c| c);
    let addr = admin.local_addr();
    let sites = get_from(OTHER, addr, "/logpolicy/sites");
    assert_eq!(sites.status, 200, "{sites:?}");
    assert!(has_target_series(&get_from(OTHER, addr, "/metrics")));
    let view = get_from(OTHER, addr, "/logpolicy").json();
    assert_eq!(view["scope"], "full", "{view}");
}

#[test]
fn kept_to_loopback_and_signers_the_sites_answer_only_those() {
    let (admin, key) = start(|c| c.views(Views::LocalAndSigners).trust_loopback(false));
    let addr = admin.local_addr();

    // Loopback no longer counts as the pod: the reduced view, no sites, no series.
    let view = get_from(OTHER, addr, "/logpolicy").json();
    assert_eq!(view["scope"], "reduced", "{view}");
    let reason = get_from(OTHER, addr, "/logpolicy/sites").refused(403, "views_restricted");
    assert!(
        reason.contains("LOGPOLICY_ADMIN_VIEWS=local-and-signers"),
        "{reason}"
    );
    let metrics = get_from(OTHER, addr, "/metrics");
    assert!(!has_target_series(&metrics), "{}", metrics.body);
    assert!(
        metrics.body.contains("logpolicy_events_total"),
        "the totals stay: {}",
        metrics.body
    );

    // The operator pushes a signed document: from then on its address reads the sites.
    let body = admin_fixture::doc_for(
        admin_fixture::POD_UID,
        1,
        r#"[{"source":"ops/raise","defaultLevel":"debug"}]"#,
    );
    let signature = wire::sign(body.as_bytes(), &key);
    let put = request_bytes(
        "PUT",
        "/logpolicy",
        &[(wire::SIGNATURE_HEADER, &signature)],
        body.as_bytes(),
    );
    assert_eq!(send_from(OPERATOR, addr, &put).status, 200);
    assert_eq!(get_from(OPERATOR, addr, "/logpolicy/sites").status, 200);
    assert!(has_target_series(&get_from(OPERATOR, addr, "/metrics")));
    // Its view stays the reduced one: signing is not being the pod.
    assert_eq!(
        get_from(OPERATOR, addr, "/logpolicy").json()["scope"],
        "reduced"
    );
    // Everyone else: still refused.
    get_from(OTHER, addr, "/logpolicy/sites").refused(403, "views_restricted");

    // A push that does not verify makes no signer.
    let unsigned = request_bytes("PUT", "/logpolicy", &[], body.as_bytes());
    assert_eq!(send_from([127, 0, 0, 4], addr, &unsigned).status, 401);
    get_from([127, 0, 0, 4], addr, "/logpolicy/sites").refused(403, "views_restricted");
}

#[test]
fn kept_to_loopback_and_signers_a_trusted_loopback_peer_reads_the_sites() {
    let (admin, _) = start(|c| c.views(Views::LocalAndSigners));
    let addr = admin.local_addr();
    assert_eq!(get_from(OTHER, addr, "/logpolicy/sites").status, 200);
    assert!(has_target_series(&get_from(OTHER, addr, "/metrics")));
    assert_eq!(get_from(OTHER, addr, "/logpolicy").json()["scope"], "full");
}
