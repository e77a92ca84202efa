//! With `--metrics-secure` (the default) the operator's endpoints speak only TLS: a
//! client that trusts the mounted certificate's CA reads them (the bearer token inside
//! the encrypted connection); a plain HTTP request gets no answer; a client that
//! trusts another CA refuses the server; and a self-signed certificate made at start
//! serves as well.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure is a test failure

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use logpolicy_operator::http::{serve_on, Endpoints, ServerLimits};
use logpolicy_operator::metrics::Metrics;
use logpolicy_operator::serving_cert::{acceptor, ServingCert, CERT_FILE, KEY_FILE};
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

/// A CA and a certificate it signed for `localhost`, written as a `kubernetes.io/tls`
/// Secret is mounted: `tls.crt`, `tls.key` in `dir`; returns the CA's certificate.
fn issue(dir: &Path) -> CertificateDer<'static> {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "test CA");
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(CERT_FILE), leaf.pem()).unwrap();
    std::fs::write(dir.join(KEY_FILE), key.serialize_pem()).unwrap();
    ca_cert.der().clone()
}

async fn server(cert: &ServingCert) -> SocketAddr {
    let tls = acceptor(cert).unwrap();
    let (source, views) = logpolicy_operator::controller::pod_views();
    source.answer_with(Vec::new());
    let endpoints = Endpoints::new(Arc::default(), Metrics::default().registry(), views);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop_tx, stop) = watch::channel(false);
    tokio::spawn(async move {
        serve_on(
            listener,
            endpoints,
            ServerLimits::default(),
            Some(tls),
            stop,
        )
        .await;
        drop(stop_tx);
    });
    addr
}

/// A TLS client that trusts `roots` (none: any certificate, as `insecureSkipVerify`).
fn connector(roots: Option<CertificateDer<'static>>) -> tokio_rustls::TlsConnector {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap();
    let config = match roots {
        Some(ca) => {
            let mut store = rustls::RootCertStore::empty();
            store.add(ca).unwrap();
            builder.with_root_certificates(store).with_no_client_auth()
        }
        None => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyServer))
            .with_no_client_auth(),
    };
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

/// `GET path` over TLS: the whole answer, or the handshake's error.
async fn get_tls(
    connector: &tokio_rustls::TlsConnector,
    addr: SocketAddr,
    path: &str,
) -> Result<String, String> {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let mut tls = connector
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    let head = format!("GET {path} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n");
    tls.write_all(head.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let _ = tls.read_to_end(&mut out).await;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

fn temp_dir(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("lp-tls-{name}-{}", std::process::id()))
}

#[tokio::test]
async fn a_mounted_certificate_is_served_and_plain_http_gets_nothing() {
    let dir = temp_dir("mounted");
    let ca = issue(&dir);
    let addr = server(&ServingCert::Dir(dir.clone())).await;

    let answer = get_tls(&connector(Some(ca)), addr, "/healthz")
        .await
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("ok\n"), "{answer}");

    // A client that trusts another CA refuses the server.
    let other = issue(&temp_dir("other"));
    let e = get_tls(&connector(Some(other)), addr, "/healthz")
        .await
        .unwrap_err();
    assert!(e.contains("invalid peer certificate"), "{e}");

    // Plain HTTP: no HTTP answer, the connection is closed.
    let mut plain = TcpStream::connect(addr).await.unwrap();
    plain
        .write_all(b"GET /metrics HTTP/1.1\r\nhost: x\r\nauthorization: Bearer t\r\n\r\n")
        .await
        .unwrap();
    let mut out = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), plain.read_to_end(&mut out)).await;
    assert!(read.is_ok(), "the connection stayed open");
    assert!(
        !String::from_utf8_lossy(&out).contains("HTTP/1.1 200"),
        "{out:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    let _ = std::fs::remove_dir_all(temp_dir("other"));
}

#[tokio::test]
async fn a_self_signed_certificate_made_at_start_is_served() {
    let addr = server(&ServingCert::SelfSigned(Vec::new())).await;
    let answer = get_tls(&connector(None), addr, "/metrics").await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer.contains("logpolicy_operator_pods_tracked"),
        "{answer}"
    );
}

/// A verifier that takes any certificate: what a scraper with `insecureSkipVerify`
/// does.
#[derive(Debug)]
struct AnyServer;

impl rustls::client::danger::ServerCertVerifier for AnyServer {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: rustls_pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &rustls::crypto::ring::default_provider().signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &rustls::crypto::ring::default_provider().signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        rustls::crypto::ring::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}
