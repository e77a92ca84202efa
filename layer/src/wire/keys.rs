//! Key formats: signing keys, public keys, key ids and the set of trusted keys.

use std::fmt;
use std::path::Path;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use ed25519_dalek::{SigningKey, VerifyingKey};
use sha2::{Digest, Sha256};

/// The variable holding the trusted public keys (base64, separated by commas, spaces or
/// newlines).
pub const TRUSTED_KEYS_ENV: &str = "LOGPOLICY_TRUSTED_KEYS";

/// The variable naming a file of trusted public keys (one per line, `#` comments).
pub const TRUSTED_KEYS_FILE_ENV: &str = "LOGPOLICY_TRUSTED_KEYS_FILE";

/// The most keys a trusted set holds.
pub const MAX_TRUSTED_KEYS: usize = 64;

/// A key that cannot be read or made.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// Not base64 of the right length.
    #[error("{what} {index}: {message}")]
    Malformed {
        /// `public key` or `signing key`.
        what: &'static str,
        /// Which one (1-based line or item).
        index: usize,
        /// What is wrong.
        message: String,
    },
    /// No key where one is required.
    #[error("no {0} found")]
    Empty(&'static str),
    /// More than 64 (`MAX_TRUSTED_KEYS`).
    #[error("too many trusted keys: {0} (at most {MAX_TRUSTED_KEYS})")]
    TooMany(usize),
    /// A key file that cannot be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The operating system's random source failed.
    #[error("no randomness for a new key: {0}")]
    Random(String),
}

/// A short id of a public key: the first 8 bytes of its SHA-256, shown as 16 lowercase
/// hex digits.
///
/// # Examples
///
/// ```
/// use logpolicy::wire::{key_id, SigningKey};
/// let id = key_id(&SigningKey::from_bytes(&[7; 32]).verifying_key());
/// assert_eq!(id.to_string().len(), 16);
/// assert_eq!(id.to_string().parse::<logpolicy::wire::KeyId>().unwrap(), id);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyId(pub [u8; 8]);

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// A string that is not a key id: 16 lowercase hex digits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("key id {0:?} is not 16 lowercase hex digits")]
pub struct KeyIdError(pub String);

impl std::str::FromStr for KeyId {
    type Err = KeyIdError;
    fn from_str(s: &str) -> Result<Self, KeyIdError> {
        let b = s.as_bytes();
        if b.len() != 16 {
            return Err(KeyIdError(s.to_owned()));
        }
        let mut out = [0u8; 8];
        for (i, slot) in out.iter_mut().enumerate() {
            let hex = |c: u8| match c {
                b'0'..=b'9' => Some(c - b'0'),
                b'a'..=b'f' => Some(c - b'a' + 10),
                _ => None,
            };
            match (hex(b[2 * i]), hex(b[2 * i + 1])) {
                (Some(h), Some(l)) => *slot = h << 4 | l,
                _ => return Err(KeyIdError(s.to_owned())),
            }
        }
        Ok(KeyId(out))
    }
}

/// The id of a public key.
pub fn key_id(key: &VerifyingKey) -> KeyId {
    let digest = Sha256::digest(key.as_bytes());
    let mut id = [0u8; 8];
    id.copy_from_slice(&digest[..8]);
    KeyId(id)
}

/// A new signing key from the operating system's random source.
pub fn generate_signing_key() -> Result<SigningKey, KeyError> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| KeyError::Random(e.to_string()))?;
    let key = SigningKey::from_bytes(&seed);
    seed.fill(0);
    Ok(key)
}

/// The file form of a signing key: base64 of its 32-byte seed.
pub fn encode_signing_key(key: &SigningKey) -> String {
    BASE64.encode(key.to_bytes())
}

/// The file form of a public key: base64 of its 32 bytes.
pub fn encode_public_key(key: &VerifyingKey) -> String {
    BASE64.encode(key.as_bytes())
}

fn decode32(text: &str, what: &'static str, index: usize) -> Result<[u8; 32], KeyError> {
    let bad = |message: String| KeyError::Malformed {
        what,
        index,
        message,
    };
    let bytes = BASE64
        .decode(text.trim())
        .map_err(|e| bad(format!("not base64: {e}")))?;
    <[u8; 32]>::try_from(bytes.as_slice())
        .map_err(|_| bad(format!("{} bytes, expected 32", bytes.len())))
}

/// Reads a signing key: the first line that is not blank or a `#` comment, base64 of the
/// 32-byte seed.
///
/// # Examples
///
/// ```
/// use logpolicy::wire::{encode_signing_key, generate_signing_key, parse_signing_key};
/// let key = generate_signing_key().unwrap();
/// let text = format!("# the operator's key\n{}\n", encode_signing_key(&key));
/// assert_eq!(parse_signing_key(&text).unwrap().to_bytes(), key.to_bytes());
/// assert!(parse_signing_key("c2hvcnQ=").is_err());
/// ```
pub fn parse_signing_key(text: &str) -> Result<SigningKey, KeyError> {
    let (index, line) = key_lines(text)
        .next()
        .ok_or(KeyError::Empty("signing key"))?;
    let mut seed = decode32(line, "signing key", index)?;
    let key = SigningKey::from_bytes(&seed);
    seed.fill(0);
    Ok(key)
}

/// Reads one public key (base64 of 32 bytes).
pub fn parse_public_key(text: &str) -> Result<VerifyingKey, KeyError> {
    parse_public_at(text, 1)
}

fn parse_public_at(text: &str, index: usize) -> Result<VerifyingKey, KeyError> {
    let bytes = decode32(text, "public key", index)?;
    VerifyingKey::from_bytes(&bytes).map_err(|e| KeyError::Malformed {
        what: "public key",
        index,
        message: format!("not an Ed25519 public key: {e}"),
    })
}

/// Non-blank, non-comment lines with their 1-based numbers; a comment runs from `#` to
/// the end of the line.
fn key_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().filter_map(|(i, line)| {
        let line = line.split('#').next().unwrap_or("").trim();
        (!line.is_empty()).then_some((i + 1, line))
    })
}

/// The public keys whose signatures a pod accepts; several for rotation.
///
/// # Examples
///
/// ```
/// use logpolicy::wire::{encode_public_key, key_id, SigningKey, TrustedKeys};
/// let (a, b) = (SigningKey::from_bytes(&[1; 32]), SigningKey::from_bytes(&[2; 32]));
/// let text = format!("# current\n{}\n# previous, retire after the rollout\n{}\n",
///     encode_public_key(&a.verifying_key()), encode_public_key(&b.verifying_key()));
/// let keys = TrustedKeys::parse(&text).unwrap();
/// assert_eq!(keys.len(), 2);
/// assert!(keys.get(&key_id(&b.verifying_key())).is_some());
/// // The environment form: commas or whitespace between keys.
/// let inline = format!("{},{}", encode_public_key(&a.verifying_key()), encode_public_key(&b.verifying_key()));
/// assert_eq!(TrustedKeys::parse(&inline).unwrap(), keys);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedKeys {
    keys: Vec<(KeyId, VerifyingKey)>,
}

impl TrustedKeys {
    /// A set of these keys (duplicates kept once).
    pub fn new(keys: impl IntoIterator<Item = VerifyingKey>) -> Self {
        let mut out = TrustedKeys::default();
        for k in keys {
            out.insert(k);
        }
        out
    }

    fn insert(&mut self, key: VerifyingKey) {
        let id = key_id(&key);
        if !self.keys.iter().any(|(i, _)| *i == id) {
            self.keys.push((id, key));
        }
    }

    /// Parses keys separated by newlines, commas or whitespace; `#` starts a comment that
    /// runs to the end of its line. At least one key is required.
    pub fn parse(text: &str) -> Result<Self, KeyError> {
        let mut out = TrustedKeys::default();
        let mut count = 0;
        for (line_no, line) in key_lines(text) {
            for item in line
                .split(|c: char| c == ',' || c.is_whitespace())
                .filter(|s| !s.is_empty())
            {
                count += 1;
                if count > MAX_TRUSTED_KEYS {
                    return Err(KeyError::TooMany(count));
                }
                out.insert(parse_public_at(item, line_no)?);
            }
        }
        if out.is_empty() {
            return Err(KeyError::Empty("trusted public key"));
        }
        Ok(out)
    }

    /// Reads a trusted-keys file: a regular file (a FIFO, a device or a directory is
    /// refused without waiting on it) of at most [`MAX_KEYS_FILE_BYTES`], in UTF-8.
    pub fn from_file(path: &Path) -> Result<Self, KeyError> {
        Self::from_bytes(&read_keys_file(path)?, path)
    }

    /// Parses the bytes of a keys file read from `path` (named in errors).
    pub(crate) fn from_bytes(bytes: &[u8], path: &Path) -> Result<Self, KeyError> {
        let text = std::str::from_utf8(bytes).map_err(|e| KeyError::Io {
            path: path.display().to_string(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        })?;
        Self::parse(text)
    }

    /// The keys from [`TRUSTED_KEYS_ENV`], else from the file [`TRUSTED_KEYS_FILE_ENV`]
    /// names; `Ok(None)` when neither is set.
    pub fn from_env() -> Result<Option<Self>, KeyError> {
        if let Ok(text) = std::env::var(TRUSTED_KEYS_ENV) {
            return Self::parse(&text).map(Some);
        }
        match std::env::var_os(TRUSTED_KEYS_FILE_ENV) {
            Some(path) => Self::from_file(Path::new(&path)).map(Some),
            None => Ok(None),
        }
    }

    /// The key with this id.
    pub fn get(&self, id: &KeyId) -> Option<&VerifyingKey> {
        self.keys.iter().find(|(i, _)| i == id).map(|(_, k)| k)
    }

    /// The ids of the keys.
    pub fn ids(&self) -> impl Iterator<Item = KeyId> + '_ {
        self.keys.iter().map(|(i, _)| *i)
    }

    /// How many keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// The largest trusted-keys file read (a key is one line of 44 characters).
pub const MAX_KEYS_FILE_BYTES: u64 = 64 * 1024;

/// The bytes of a keys file, read without ever waiting on something that is not a
/// regular file: opened non-blocking (a FIFO with no writer opens at once), then
/// refused unless a regular file of at most [`MAX_KEYS_FILE_BYTES`].
pub(crate) fn read_keys_file(path: &Path) -> Result<Vec<u8>, KeyError> {
    use std::io::Read;
    let err = |source: std::io::Error| KeyError::Io {
        path: path.display().to_string(),
        source,
    };
    let invalid = |what: String| err(std::io::Error::new(std::io::ErrorKind::InvalidInput, what));
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32);
    }
    let file = options.open(path).map_err(err)?;
    let meta = file.metadata().map_err(err)?;
    if !meta.file_type().is_file() {
        return Err(invalid(
            "not a regular file (a FIFO, a device or a directory is never read)".into(),
        ));
    }
    if meta.len() > MAX_KEYS_FILE_BYTES {
        return Err(invalid(format!(
            "{} bytes, more than the {MAX_KEYS_FILE_BYTES} a keys file may have",
            meta.len()
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_KEYS_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(err)?;
    if bytes.len() as u64 > MAX_KEYS_FILE_BYTES {
        return Err(invalid(format!(
            "more than the {MAX_KEYS_FILE_BYTES} bytes a keys file may have"
        )));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_lines_name_the_bad_line() {
        let good = encode_public_key(&SigningKey::from_bytes(&[3; 32]).verifying_key());
        let e = TrustedKeys::parse(&format!("{good}\n\n# note\nnot-a-key\n")).unwrap_err();
        assert!(e.to_string().starts_with("public key 4: not base64"), "{e}");
        assert!(matches!(
            TrustedKeys::parse("# nothing\n"),
            Err(KeyError::Empty(_))
        ));
        let short = BASE64.encode([0u8; 31]);
        assert!(TrustedKeys::parse(&short)
            .unwrap_err()
            .to_string()
            .contains("31 bytes"));
    }

    #[test]
    fn generated_keys_differ() {
        let a = generate_signing_key().unwrap();
        let b = generate_signing_key().unwrap();
        assert_ne!(a.to_bytes(), b.to_bytes());
        let round = parse_signing_key(&encode_signing_key(&a)).unwrap();
        assert_eq!(round.verifying_key(), a.verifying_key());
    }
}
