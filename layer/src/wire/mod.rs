//! The wire contract between the operator and a pod: the signed policy document.
//!
//! The operator pushes each pod's effective set of LogPolicy layers to the pod's admin
//! endpoint (see [`crate::admin`]) as a [`PolicyDocument`], JSON, signed with Ed25519.
//! This module is the one definition both sides use: the types, their JSON form, the
//! conversion into [`PolicyLayer`](crate::PolicyLayer)s (which validates every field and
//! names the bad one), the signature and the key formats.
//!
//! # The document
//!
//! ```json
//! {
//!   "pod": {"namespace": "shop", "name": "checkout-7d9f", "uid": "0b1c…"},
//!   "version": 42,
//!   "issuedAt": "2026-11-29T20:06:15Z",
//!   "layers": [
//!     {"source": "shop/debug-payments", "priority": 10, "expiresAt": "2026-11-29T20:21:15Z",
//!      "reason": "INC-4211: card declines at checkout",
//!      "defaultLevel": "info", "targets": [{"target": "shop::payment", "level": "debug"}],
//!      "alwaysKeep": "warn",
//!      "sampling": [{"target": "shop::http", "keepOneIn": 100, "scope": "request"}],
//!      "burst": {"perSecond": 1000, "thenOneIn": 10}, "maxBytesPerSecond": 1048576}
//!   ]
//! }
//! ```
//!
//! A layer is a [`LayerSpec`](crate::policy::LayerSpec), the one JSON shape of a layer
//! (as in [`Policy::from_json`](crate::Policy::from_json): camelCase, unknown fields
//! refused, everything but `source` optional), and is validated by its one conversion.
//! `source` names the LogPolicy (`namespace/name`) and the optional `reason` (at most
//! 256 characters, no control characters) says why it exists: a pod names both in the
//! lines it writes when the layer starts and stops applying. A document without
//! `reason` is what it was before the field existed. `version` orders the documents one pod receives: the pod accepts only a newer one
//! (an equal version with identical content is accepted again, changing nothing). The
//! source `env` is reserved for the pod's baseline.
//!
//! # The signature
//!
//! The signature covers **the exact bytes of the request body**, preceded by the
//! constant [`SIGNING_CONTEXT`] (`logpolicy.dev/policy-document/v1` and a newline, so a
//! signature made for this purpose means nothing anywhere else):
//!
//! ```text
//! signature = Ed25519-sign(signing key, SIGNING_CONTEXT || body)
//! header    = "X-Logpolicy-Signature: ed25519=" key-id ":" base64(signature)
//! key-id    = lowercase hex of the first 8 bytes of SHA-256(public key bytes)
//! ```
//!
//! There is no re-serialisation and no canonical JSON to agree on: the operator signs the
//! bytes it sends, the pod verifies the bytes it received, then parses them. The key id
//! lets a pod trust several keys (rotation: publish the new public key, switch the
//! signer, retire the old key) and find the right one without trying each.
//!
//! # Replies
//!
//! The endpoint's answers are typed too ([`ErrorReply`], [`PolicyView`], and
//! [`SitesView`] for `GET /logpolicy/sites`): the pod writes them, the operator and the
//! plugin read them. A `409` carries the version the pod holds
//! (`heldVersion`).
//!
//! # Keys
//!
//! A signing key is stored as the standard base64 of its 32-byte seed; a public key as the
//! standard base64 of its 32 bytes. A trusted-keys file holds one public key per line;
//! blank lines and `#` comments are ignored.
//!
//! ```
//! use logpolicy::policy::LayerSpec;
//! use logpolicy::wire::{self, PolicyDocument, PodRef, TrustedKeys};
//!
//! let key = wire::generate_signing_key()?;
//! let trusted = TrustedKeys::parse(&wire::encode_public_key(&key.verifying_key()))?;
//!
//! let doc = PolicyDocument::new(PodRef::new("shop", "checkout-1", "uid-1"), 7)
//!     .with_layer(LayerSpec::from_directives("shop/debug", 10, "shop::payment=debug".parse()?));
//! let body = doc.to_json();
//! let header = wire::sign(body.as_bytes(), &key);
//!
//! // The pod: verify the bytes, then parse them.
//! wire::verify(body.as_bytes(), Some(&header), &trusted)?;
//! let received = PolicyDocument::from_json(body.as_bytes())?;
//! assert_eq!(received, doc);
//! assert_eq!(received.policy_layers()?[0].source(), "shop/debug");
//!
//! // A changed byte fails.
//! let tampered = body.replace("debug\"", "trace\"");
//! assert!(wire::verify(tampered.as_bytes(), Some(&header), &trusted).is_err());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod document;
mod keys;
mod reply;
mod signature;
mod sites;

pub use document::{
    DocumentError, DocumentErrorKind, PodRef, PolicyDocument, MAX_DOCUMENT_LAYERS,
    MAX_DOCUMENT_VERSION, MAX_POD_FIELD_LEN,
};
pub use ed25519_dalek::{SigningKey, VerifyingKey};
pub(crate) use keys::read_keys_file;
pub use keys::{
    encode_public_key, encode_signing_key, generate_signing_key, key_id, parse_public_key,
    parse_signing_key, KeyError, KeyId, KeyIdError, TrustedKeys, MAX_KEYS_FILE_BYTES,
    TRUSTED_KEYS_ENV, TRUSTED_KEYS_FILE_ENV,
};
pub use reply::{
    EffectiveView, ErrorReply, HeldDocument, LayerView, PolicyView, RecorderView, ReplayView,
    ViewScope,
};
pub use signature::{
    sign, verify, VerifyError, SIGNATURE_HEADER, SIGNATURE_SCHEME, SIGNING_CONTEXT,
};
pub(crate) use sites::unix_ms;
pub use sites::{
    CallsiteKind, CountsView, OtherSitesView, SiteView, SitesView, TargetView, WriterTotals,
};
