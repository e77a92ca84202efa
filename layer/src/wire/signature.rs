//! Signing and verifying the exact bytes of a document.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use ed25519_dalek::{Signature, Signer, SigningKey};

use super::keys::{key_id, KeyId, TrustedKeys};

/// The header that carries the signature (HTTP header names are case-insensitive; it is
/// written `X-Logpolicy-Signature`).
pub const SIGNATURE_HEADER: &str = "x-logpolicy-signature";

/// The scheme prefix of the header value.
pub const SIGNATURE_SCHEME: &str = "ed25519";

/// Prefixed to the body before signing, so a signature made for a policy document
/// cannot be passed off as anything else.
pub const SIGNING_CONTEXT: &[u8] = b"logpolicy.dev/policy-document/v1\n";

/// The longest header value accepted (the real one is 112 bytes).
const MAX_HEADER_LEN: usize = 256;

/// Why a signature was refused. Every variant is an authentication failure (the admin
/// endpoint answers 401).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// No signature header.
    #[error("missing {SIGNATURE_HEADER} header")]
    Missing,
    /// A header that is not `ed25519=<key-id>:<base64 signature>`.
    #[error("malformed {SIGNATURE_HEADER} header: {0}")]
    Malformed(String),
    /// Signed by a key this pod does not trust.
    #[error("key {0} is not trusted")]
    UntrustedKey(KeyId),
    /// The signature does not match the body for that key.
    #[error("signature by key {0} does not match the body")]
    BadSignature(KeyId),
}

impl VerifyError {
    /// A short name for the error field of a response and for metrics.
    pub const fn code(&self) -> &'static str {
        match self {
            VerifyError::Missing => "missing_signature",
            VerifyError::Malformed(_) => "malformed_signature",
            VerifyError::UntrustedKey(_) => "untrusted_key",
            VerifyError::BadSignature(_) => "bad_signature",
        }
    }
}

fn message(body: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(SIGNING_CONTEXT.len() + body.len());
    m.extend_from_slice(SIGNING_CONTEXT);
    m.extend_from_slice(body);
    m
}

/// Signs `body` (the exact bytes that will be sent) and returns the header value,
/// `ed25519=<key-id>:<base64 signature>`.
///
/// # Examples
///
/// ```
/// use logpolicy::wire::{sign, verify, SigningKey, TrustedKeys};
/// let key = SigningKey::from_bytes(&[9; 32]);
/// let header = sign(b"{}", &key);
/// assert!(header.starts_with("ed25519="));
/// let trusted = TrustedKeys::new([key.verifying_key()]);
/// assert!(verify(b"{}", Some(&header), &trusted).is_ok());
/// assert!(verify(b"{ }", Some(&header), &trusted).is_err());
/// ```
pub fn sign(body: &[u8], key: &SigningKey) -> String {
    let signature = key.sign(&message(body));
    format!(
        "{SIGNATURE_SCHEME}={}:{}",
        key_id(&key.verifying_key()),
        BASE64.encode(signature.to_bytes())
    )
}

/// Checks that `header` (the signature header's value, `None` if absent) is a valid
/// signature of `body` by a trusted key; returns that key's id.
///
/// Uses strict verification (no malleable or small-order signatures).
pub fn verify(body: &[u8], header: Option<&str>, keys: &TrustedKeys) -> Result<KeyId, VerifyError> {
    let header = header.ok_or(VerifyError::Missing)?.trim();
    if header.len() > MAX_HEADER_LEN {
        return Err(VerifyError::Malformed(format!(
            "longer than {MAX_HEADER_LEN} bytes"
        )));
    }
    let rest = header
        .strip_prefix(SIGNATURE_SCHEME)
        .and_then(|r| r.strip_prefix('='))
        .ok_or_else(|| {
            VerifyError::Malformed(format!(
                "expected \"{SIGNATURE_SCHEME}=<key-id>:<signature>\""
            ))
        })?;
    let (id, sig) = rest
        .split_once(':')
        .ok_or_else(|| VerifyError::Malformed("expected <key-id>:<signature>".into()))?;
    let id: KeyId = id
        .parse()
        .map_err(|e: super::keys::KeyIdError| VerifyError::Malformed(e.to_string()))?;
    let sig = BASE64
        .decode(sig)
        .map_err(|e| VerifyError::Malformed(format!("signature is not base64: {e}")))?;
    let sig = <[u8; 64]>::try_from(sig.as_slice()).map_err(|_| {
        VerifyError::Malformed(format!("signature is {} bytes, expected 64", sig.len()))
    })?;
    let key = keys.get(&id).ok_or(VerifyError::UntrustedKey(id))?;
    key.verify_strict(&message(body), &Signature::from_bytes(&sig))
        .map_err(|_| VerifyError::BadSignature(id))?;
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_say_why() {
        let key = SigningKey::from_bytes(&[5; 32]);
        let other = SigningKey::from_bytes(&[6; 32]);
        let trusted = TrustedKeys::new([key.verifying_key()]);
        let body = b"{\"version\":1}";
        let good = sign(body, &key);
        assert_eq!(verify(body, None, &trusted), Err(VerifyError::Missing));
        for bad in [
            "",
            "rsa=00:AA",
            "ed25519=zz:AA",
            "ed25519=0011223344556677",
            "ed25519=0011223344556677:***",
        ] {
            assert!(
                matches!(
                    verify(body, Some(bad), &trusted),
                    Err(VerifyError::Malformed(_))
                ),
                "{bad}"
            );
        }
        assert!(matches!(
            verify(body, Some(&sign(body, &other)), &trusted),
            Err(VerifyError::UntrustedKey(_))
        ));
        assert!(matches!(
            verify(b"{\"version\":2}", Some(&good), &trusted),
            Err(VerifyError::BadSignature(_))
        ));
        // Without the context, the same key's plain signature of the body is refused.
        let plain = key.sign(body);
        let header = format!(
            "ed25519={}:{}",
            key_id(&key.verifying_key()),
            BASE64.encode(plain.to_bytes())
        );
        assert!(matches!(
            verify(body, Some(&header), &trusted),
            Err(VerifyError::BadSignature(_))
        ));
        assert_eq!(
            verify(body, Some(&good), &trusted),
            Ok(key_id(&key.verifying_key()))
        );
    }
}
