//! The `logpolicy-trust` ConfigMap's name, data key and content: the operator's public
//! key in the format the layer reads (`logpolicy::wire::TrustedKeys`, the file
//! `LOGPOLICY_TRUSTED_KEYS_FILE` names). The operator publishes it in every namespace
//! with opted-in pods; `kubectl logpolicy check` compares what it finds with it.

use logpolicy::wire::{encode_public_key, key_id, VerifyingKey};

/// The ConfigMap's name, in every namespace with opted-in pods.
pub const TRUST_CONFIG_MAP: &str = "logpolicy-trust";
/// Its data key: a file the layer reads with `LOGPOLICY_TRUSTED_KEYS_FILE`.
pub const TRUST_DATA_KEY: &str = "trusted-keys";

/// The file content: a comment naming the key id, then the key (base64 of 32 bytes).
pub fn trusted_keys_text(key: &VerifyingKey) -> String {
    format!(
        "# logpolicy-operator public key, id {}\n{}\n",
        key_id(key),
        encode_public_key(key)
    )
}
