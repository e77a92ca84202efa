//! The certificate the operator's endpoints serve over TLS (`--metrics-secure`, the
//! default), as controller-runtime's secure metrics serving and kube-rbac-proxy do:
//! - with `--metrics-cert-dir DIR`, `DIR/tls.crt` (the chain) and `DIR/tls.key` (PKCS#8,
//!   PKCS#1 or SEC1 PEM): a `kubernetes.io/tls` Secret mounted there, e.g. one that
//!   cert-manager issues and renews. The files are read again every
//!   [`RELOAD_EVERY`]; a renewed certificate is served from the next handshake on, and
//!   files that no longer read leave the last good certificate in place (with a
//!   warning).
//! - without it, a self-signed certificate made at start (an ECDSA P-256 key that never
//!   leaves the process, valid for a year): the connection is encrypted, and a scraper
//!   that does not verify the server (`insecureSkipVerify`) sends its token to whoever
//!   answers at the address; a certificate the scraper verifies closes that too.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::TlsAcceptor;

use crate::log;

/// How often the files of `--metrics-cert-dir` are read again.
pub const RELOAD_EVERY: Duration = Duration::from_secs(60);
/// The certificate file in `--metrics-cert-dir` (a `kubernetes.io/tls` Secret's key).
pub const CERT_FILE: &str = "tls.crt";
/// The key file in `--metrics-cert-dir`.
pub const KEY_FILE: &str = "tls.key";

/// Where the serving certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServingCert {
    /// Made at start, self-signed, for these DNS names.
    SelfSigned(Vec<String>),
    /// `tls.crt` and `tls.key` in this directory, read again every [`RELOAD_EVERY`].
    Dir(PathBuf),
}

/// Why no certificate could be served.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// A file could not be read or holds no PEM of the kind expected.
    #[error("{path}: {reason}")]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The key is not one rustls can sign with, or does not go with the certificate.
    #[error("{path}: {0}", path = .1.display())]
    Key(rustls::Error, PathBuf),
    /// The self-signed certificate could not be made.
    #[error("cannot make a self-signed certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// rustls refused the configuration.
    #[error("TLS: {0}")]
    Tls(#[from] rustls::Error),
}

/// The certificate in force, swapped when the files change.
#[derive(Debug)]
struct Current(RwLock<Arc<CertifiedKey>>);

impl ResolvesServerCert for Current {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let key = self
            .0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Some(key.clone())
    }
}

/// A TLS acceptor for the endpoints, serving `cert` (HTTP/1.1 only). For
/// [`ServingCert::Dir`], it also starts the task that reads the files again (on the
/// current tokio runtime), which ends when the acceptor is dropped.
pub fn acceptor(cert: &ServingCert) -> Result<TlsAcceptor, CertError> {
    let (key, dir) = match cert {
        ServingCert::SelfSigned(names) => (self_signed(names)?, None),
        ServingCert::Dir(dir) => (read_dir(dir)?.0, Some(dir.clone())),
    };
    let current = Arc::new(Current(RwLock::new(Arc::new(key))));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(current.clone());
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    if let Some(dir) = dir {
        let watched = Arc::downgrade(&current);
        tokio::spawn(async move {
            let mut last = read_files(&dir).ok();
            loop {
                tokio::time::sleep(RELOAD_EVERY).await;
                let Some(current) = watched.upgrade() else {
                    return;
                };
                let read = {
                    let dir = dir.clone();
                    tokio::task::spawn_blocking(move || read_files(&dir)).await
                };
                let files = match read {
                    Ok(Ok(files)) => files,
                    Ok(Err(e)) => {
                        log::warn!(error = %e, "cannot read the serving certificate again; serving the last one");
                        continue;
                    }
                    Err(_) => continue,
                };
                if last.as_ref() == Some(&files) {
                    continue;
                }
                match certified(&dir, &files) {
                    Ok(key) => {
                        *current
                            .0
                            .write()
                            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(key);
                        log::info!(dir = %dir.display(), "serving the renewed certificate");
                        last = Some(files);
                    }
                    Err(e) => {
                        log::warn!(error = %e, "the serving certificate changed and does not load; serving the last one");
                    }
                }
            }
        });
    }
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// A self-signed certificate for `names` (at least `localhost`), valid from an hour ago
/// for a year.
fn self_signed(names: &[String]) -> Result<CertifiedKey, CertError> {
    let mut names = names.to_vec();
    if names.is_empty() {
        names.push("localhost".to_owned());
    }
    let mut params = rcgen::CertificateParams::new(names)?;
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::hours(1);
    params.not_after = now + time::Duration::days(365);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "logpolicy-operator");
    let key_pair = rcgen::KeyPair::generate()?;
    let cert = params.self_signed(&key_pair)?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key_pair.serialize_der()));
    let signing = rustls::crypto::ring::sign::any_supported_type(&key)
        .map_err(|e| CertError::Key(e, PathBuf::from("(self-signed)")))?;
    Ok(CertifiedKey::new(vec![cert.der().clone()], signing))
}

/// The bytes of `tls.crt` and `tls.key`.
type Files = (Vec<u8>, Vec<u8>);

fn read_files(dir: &Path) -> Result<Files, CertError> {
    let read = |name: &str| {
        let path = dir.join(name);
        std::fs::read(&path).map_err(|e| CertError::File {
            path,
            reason: e.to_string(),
        })
    };
    Ok((read(CERT_FILE)?, read(KEY_FILE)?))
}

fn read_dir(dir: &Path) -> Result<(CertifiedKey, Files), CertError> {
    let files = read_files(dir)?;
    Ok((certified(dir, &files)?, files))
}

/// The certificate chain and key of `files` (read from `dir`).
fn certified(dir: &Path, (cert, key): &Files) -> Result<CertifiedKey, CertError> {
    let cert_path = dir.join(CERT_FILE);
    let key_path = dir.join(KEY_FILE);
    let chain = CertificateDer::pem_slice_iter(cert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CertError::File {
            path: cert_path.clone(),
            reason: format!("not a PEM certificate chain: {e}"),
        })?;
    if chain.is_empty() {
        return Err(CertError::File {
            path: cert_path,
            reason: "no CERTIFICATE in it".to_owned(),
        });
    }
    let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| CertError::File {
        path: key_path.clone(),
        reason: format!("no PEM private key (PKCS#8, PKCS#1 or SEC1) in it: {e}"),
    })?;
    let signing = rustls::crypto::ring::sign::any_supported_type(&key)
        .map_err(|e| CertError::Key(e, key_path.clone()))?;
    let certified = CertifiedKey::new(chain, signing);
    certified
        .keys_match()
        .map_err(|e| CertError::Key(e, key_path))?;
    Ok(certified)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a failure is a test failure
    use super::*;

    fn pem_pair(name: &str) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec![name.to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    }

    #[test]
    fn a_mounted_pair_loads_and_what_is_wrong_with_one_is_named() {
        let dir = std::env::temp_dir().join(format!("lp-cert-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (cert, key) = pem_pair("svc.ns.svc");
        std::fs::write(dir.join(CERT_FILE), &cert).unwrap();
        std::fs::write(dir.join(KEY_FILE), &key).unwrap();
        let (loaded, _) = read_dir(&dir).unwrap();
        assert_eq!(loaded.cert.len(), 1);

        // Another pair's key: refused, naming the key file.
        let (_, other_key) = pem_pair("x");
        std::fs::write(dir.join(KEY_FILE), other_key).unwrap();
        let e = read_dir(&dir).unwrap_err().to_string();
        assert!(e.contains("tls.key"), "{e}");
        // No key at all, then no certificate.
        std::fs::write(dir.join(KEY_FILE), "nothing").unwrap();
        let e = read_dir(&dir).unwrap_err().to_string();
        assert!(e.contains("tls.key: no PEM private key"), "{e}");
        std::fs::write(dir.join(KEY_FILE), &key).unwrap();
        std::fs::write(dir.join(CERT_FILE), "nothing").unwrap();
        let e = read_dir(&dir).unwrap_err().to_string();
        assert!(e.contains("tls.crt: no CERTIFICATE"), "{e}");
        std::fs::remove_file(dir.join(CERT_FILE)).unwrap();
        let e = read_dir(&dir).unwrap_err().to_string();
        assert!(e.contains("tls.crt: No such file"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_self_signed_certificate_names_localhost_at_least() {
        let key = self_signed(&[]).unwrap();
        assert_eq!(key.cert.len(), 1);
        assert!(key.keys_match().is_ok());
    }
}
