//! The signing key: from a file (`--signing-key-file`), else from the Secret
//! [`KEY_SECRET`] in the operator's namespace, created with a new key on first start.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::api::PostParams;
use kube::{Api, Client};
use logpolicy::wire::{
    encode_signing_key, generate_signing_key, key_id, parse_signing_key, KeyError, SigningKey,
};

use crate::log;

/// The Secret holding the signing key when no key file is given.
pub const KEY_SECRET: &str = "logpolicy-signing-key";
/// Its data key.
pub const KEY_SECRET_FIELD: &str = "signing-key";

/// Why the signing key could not be had (this time: the caller retries).
#[derive(Debug, thiserror::Error)]
pub enum SigningKeyError {
    /// The key file cannot be read.
    #[error("{}: {source}", path.display())]
    ReadFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The key file does not hold a key.
    #[error("{}: {source}", path.display())]
    FileKey {
        /// The file.
        path: PathBuf,
        /// Why.
        source: KeyError,
    },
    /// The Secret's key is not text.
    #[error("Secret {secret}: not UTF-8: {0}", secret = KEY_SECRET)]
    NotUtf8(std::str::Utf8Error),
    /// The Secret's data does not hold a key.
    #[error("Secret {secret}: {0}", secret = KEY_SECRET)]
    SecretKey(KeyError),
    /// The Secret has no [`KEY_SECRET_FIELD`].
    #[error("Secret {secret} has no `{field}`", secret = KEY_SECRET, field = KEY_SECRET_FIELD)]
    NoKeyInSecret,
    /// Another replica created the Secret first: the next attempt reads it.
    #[error("Secret {secret} created concurrently; reading it", secret = KEY_SECRET)]
    CreatedConcurrently,
    /// No key could be generated.
    #[error("{0}")]
    Generate(KeyError),
    /// A call to the API server failed.
    #[error("{0}")]
    Kube(#[from] kube::Error),
}

/// The signing key from `file`, else from the Secret in `namespace`, created if missing.
pub async fn load(
    client: &Client,
    namespace: &str,
    file: Option<&Path>,
) -> Result<SigningKey, SigningKeyError> {
    let key = match file {
        Some(path) => from_file(path)?,
        None => from_secret(client, namespace).await?,
    };
    log::info!(key_id = %key_id(&key.verifying_key()), "signing key loaded");
    Ok(key)
}

fn from_file(path: &Path) -> Result<SigningKey, SigningKeyError> {
    let text = std::fs::read_to_string(path).map_err(|source| SigningKeyError::ReadFile {
        path: path.to_owned(),
        source,
    })?;
    parse_signing_key(&text).map_err(|source| SigningKeyError::FileKey {
        path: path.to_owned(),
        source,
    })
}

fn key_in(secret: &Secret) -> Result<Option<SigningKey>, SigningKeyError> {
    match secret.data.as_ref().and_then(|d| d.get(KEY_SECRET_FIELD)) {
        None => Ok(None),
        Some(b) => {
            let text = std::str::from_utf8(&b.0).map_err(SigningKeyError::NotUtf8)?;
            parse_signing_key(text)
                .map(Some)
                .map_err(SigningKeyError::SecretKey)
        }
    }
}

async fn from_secret(client: &Client, namespace: &str) -> Result<SigningKey, SigningKeyError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    if let Some(s) = api.get_opt(KEY_SECRET).await? {
        return key_in(&s)?.ok_or(SigningKeyError::NoKeyInSecret);
    }
    let key = generate_signing_key().map_err(SigningKeyError::Generate)?;
    let mut secret = Secret::default();
    secret.metadata.name = Some(KEY_SECRET.to_owned());
    secret.metadata.namespace = Some(namespace.to_owned());
    secret.data = Some(
        [(
            KEY_SECRET_FIELD.to_owned(),
            ByteString(encode_signing_key(&key).into_bytes()),
        )]
        .into(),
    );
    match api.create(&PostParams::default(), &secret).await {
        Ok(_) => {
            log::info!(namespace = %namespace, "created the signing key Secret");
            Ok(key)
        }
        // Another replica created it first: use theirs (the next attempt reads it).
        Err(kube::Error::Api(s)) if s.code == 409 => Err(SigningKeyError::CreatedConcurrently),
        Err(e) => Err(e.into()),
    }
}
