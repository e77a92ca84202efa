//! The policy document: its types, JSON form and conversion into policy layers.

use std::fmt;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::clock::format_rfc3339;
use crate::policy::{LayerSpec, Policy, PolicyError, PolicyLayer, BASELINE_SOURCE, MAX_LAYERS};

/// The most layers one document may carry: every layer but the pod's baseline.
pub const MAX_DOCUMENT_LAYERS: usize = MAX_LAYERS - 1;

/// The longest `pod.namespace`, `pod.name` or `pod.uid` accepted, in bytes (a DNS
/// subdomain; a uid is 36).
pub const MAX_POD_FIELD_LEN: usize = 253;

/// A signed policy document: every pushed layer one pod should have, with the pod it is
/// meant for and a version that orders the documents that pod receives.
///
/// Its JSON form is camelCase and refuses unknown fields; see [the module](super) for
/// an example and for how it is signed.
///
/// # Examples
///
/// ```
/// use logpolicy::wire::PolicyDocument;
/// let doc = PolicyDocument::from_json(br#"{"pod":{"namespace":"shop","name":"web-1","uid":"u1"},
///     "version":3,"issuedAt":"2026-11-29T20:06:15Z",
///     "layers":[{"source":"shop/raise","priority":5,"targets":[{"target":"shop::db","level":"debug"}]}]}"#)?;
/// assert_eq!(doc.version, 3);
/// assert_eq!(doc.policy_layers()?[0].priority, 5);
///
/// let err = PolicyDocument::from_json(br#"{"pod":{"namespace":"shop","name":"web-1","uid":"u1"},
///     "version":3,"issuedAt":"2026-11-29T20:06:15Z",
///     "layers":[{"source":"a/b"},{"source":"c/d","targets":[{"target":"x","level":"verbose"}]}]}"#)
///     .unwrap_err();
/// assert_eq!(err.to_string(), r#"layers[1].targets[0].level: invalid level "verbose" (expected one of trace, debug, info, warn, error, off)"#);
/// # Ok::<(), logpolicy::wire::DocumentError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PolicyDocument {
    /// The pod this document is for.
    pub pod: PodRef,
    /// Orders the documents one pod receives: a pod accepts only a version newer than
    /// the one it holds (or the same version with identical content, changing nothing).
    pub version: u64,
    /// When the document was issued, RFC 3339 (e.g. `2026-11-29T20:06:15Z`).
    #[serde(with = "crate::clock::serde_rfc3339")]
    #[cfg_attr(feature = "schema", schemars(with = "String"))]
    pub issued_at: SystemTime,
    /// Every pushed layer the pod should have; they replace all its pushed layers (an
    /// empty list leaves only the baseline).
    #[serde(default)]
    pub layers: Vec<LayerSpec>,
    /// The layers the pod's previous process held when its container restarted (sent
    /// once, with the first document the new process receives): the pod writes a
    /// `policy stopped applying` line with `ended: restart` for each, so the log says
    /// when a raise was lost to a restart. Not applied; omitted when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lost: Vec<LayerSpec>,
}

/// The highest version a pod accepts (2^53 - 1): versions are milliseconds since the
/// Unix epoch or above, and this leaves them room for a few hundred thousand years while
/// no document can take the last version and freeze every later one out.
pub const MAX_DOCUMENT_VERSION: u64 = (1 << 53) - 1;

/// Which pod a document is for.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct PodRef {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub name: String,
    /// The pod's uid (`metadata.uid`): a pod that knows its own (`POD_UID`) refuses a
    /// document for another.
    pub uid: String,
}

/// What kind of problem a [`DocumentError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocumentErrorKind {
    /// The bytes are not JSON (the admin endpoint answers 400).
    Syntax,
    /// The JSON does not describe a valid document (the admin endpoint answers 422).
    Invalid,
}

/// A document that cannot be accepted; names the offending field by its path, e.g.
/// `layers[1].targets[0].level`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct DocumentError {
    /// Not JSON, or not a valid document.
    pub kind: DocumentErrorKind,
    /// Where in the document (`.` for the whole).
    pub path: String,
    /// What is wrong there.
    pub message: String,
}

impl DocumentError {
    fn invalid(path: impl Into<String>, message: impl Into<String>) -> Self {
        DocumentError {
            kind: DocumentErrorKind::Invalid,
            path: path.into(),
            message: message.into(),
        }
    }
}

impl From<PolicyError> for DocumentError {
    fn from(e: PolicyError) -> Self {
        match e {
            PolicyError::Json { path, message } => DocumentError::invalid(path, message),
            other => DocumentError::invalid("layers", other.to_string()),
        }
    }
}

impl PodRef {
    /// A pod reference.
    pub fn new(
        namespace: impl Into<String>,
        name: impl Into<String>,
        uid: impl Into<String>,
    ) -> Self {
        PodRef {
            namespace: namespace.into(),
            name: name.into(),
            uid: uid.into(),
        }
    }

    /// Whether every part is empty (a reference to no pod).
    ///
    /// ```
    /// use logpolicy::wire::PodRef;
    /// assert!(PodRef::default().is_empty());
    /// assert!(!PodRef::new("shop", "checkout-1", "uid-1").is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.namespace.is_empty() && self.name.is_empty() && self.uid.is_empty()
    }
}

impl PolicyDocument {
    /// A document for `pod` with no layers, issued now.
    pub fn new(pod: PodRef, version: u64) -> Self {
        PolicyDocument {
            pod,
            version,
            issued_at: SystemTime::now(),
            layers: Vec::new(),
            lost: Vec::new(),
        }
    }

    /// This document with `layer` added at the end.
    #[must_use]
    pub fn with_layer(mut self, layer: LayerSpec) -> Self {
        self.layers.push(layer);
        self
    }

    /// Parses and validates a document: JSON syntax, the types of every field (levels,
    /// timestamps), the pod reference, and every layer as the policy would take it.
    /// Never panics, whatever the bytes.
    pub fn from_json(bytes: &[u8]) -> Result<Self, DocumentError> {
        Self::decode(bytes).map(|(doc, _)| doc)
    }

    /// [`from_json`](Self::from_json), with the layers as the policy takes them: what a
    /// pod applies, converted once.
    pub fn decode(bytes: &[u8]) -> Result<(Self, Vec<PolicyLayer>), DocumentError> {
        let mut de = serde_json::Deserializer::from_slice(bytes);
        let doc: PolicyDocument = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let path = match e.path().to_string() {
                p if p == "?" || p.is_empty() => ".".to_owned(),
                p => p,
            };
            json_error(path, e.inner())
        })?;
        de.end().map_err(|e| json_error(".".into(), &e))?;
        let layers = doc.checked_layers()?;
        Ok((doc, layers))
    }

    /// The JSON form (what the operator signs and sends).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Checks what the types alone do not: the pod reference, the number of layers, the
    /// reserved source `env`, and every layer's ranges.
    pub fn validate(&self) -> Result<(), DocumentError> {
        self.checked_layers().map(drop)
    }

    /// [`validate`](Self::validate), returning the layers as the policy takes them.
    fn checked_layers(&self) -> Result<Vec<PolicyLayer>, DocumentError> {
        for (field, value) in [
            ("pod.namespace", &self.pod.namespace),
            ("pod.name", &self.pod.name),
            ("pod.uid", &self.pod.uid),
        ] {
            if value.is_empty() || value.len() > MAX_POD_FIELD_LEN {
                return Err(DocumentError::invalid(
                    field,
                    format!("must be 1 to {MAX_POD_FIELD_LEN} bytes"),
                ));
            }
            if value.chars().any(char::is_control) {
                return Err(DocumentError::invalid(
                    field,
                    "must not contain control characters",
                ));
            }
        }
        self.lost_layers()?;
        self.policy_layers()
    }

    /// The layers as the policy takes them, validated; errors name the field
    /// (`layers[1].sampling[0].keepOneIn: keepOneIn 0 is out of range (1 to 1000000)`).
    pub fn policy_layers(&self) -> Result<Vec<PolicyLayer>, DocumentError> {
        checked_specs("layers", &self.layers)
    }

    /// The layers the pod's previous process held ([`PolicyDocument::lost`]), as the
    /// policy takes them, validated like [`PolicyDocument::layers`]; errors name the
    /// field (`lost[0].targets[0].level: ...`).
    pub fn lost_layers(&self) -> Result<Vec<PolicyLayer>, DocumentError> {
        checked_specs("lost", &self.lost)
    }
}

/// The document's list `field` (`layers` or `lost`) as the policy takes it: at most
/// [`MAX_DOCUMENT_LAYERS`], none with the baseline's source, each valid; errors name
/// the field by its path under `field`.
fn checked_specs(field: &str, specs: &[LayerSpec]) -> Result<Vec<PolicyLayer>, DocumentError> {
    if specs.len() > MAX_DOCUMENT_LAYERS {
        return Err(DocumentError::invalid(
            field,
            format!(
                "too many layers: {} (at most {MAX_DOCUMENT_LAYERS})",
                specs.len()
            ),
        ));
    }
    if let Some(i) = specs.iter().position(|l| l.source == BASELINE_SOURCE) {
        return Err(DocumentError::invalid(
            format!("{field}[{i}].source"),
            format!("source {BASELINE_SOURCE:?} is reserved for the pod's baseline"),
        ));
    }
    Policy::from_layer_specs(specs)
        .map(Policy::into_layers)
        .map_err(|e| {
            // The policy names the list `layers`.
            let mut e = DocumentError::from(e);
            if let Some(rest) = e.path.strip_prefix("layers") {
                e.path = format!("{field}{rest}");
            }
            e
        })
}

fn json_error(path: String, e: &serde_json::Error) -> DocumentError {
    let kind = if e.is_data() {
        DocumentErrorKind::Invalid
    } else {
        DocumentErrorKind::Syntax
    };
    let message = e.to_string();
    // serde_json appends " at line 1 column 42"; for data errors the path says where.
    let message = match message.rfind(" at line ") {
        Some(i) if kind == DocumentErrorKind::Invalid && e.line() > 0 => message[..i].to_owned(),
        _ => message,
    };
    DocumentError {
        kind,
        // A syntax error's position (line and column, in the message) says more than
        // the path of the value it broke off in.
        path: match kind {
            DocumentErrorKind::Syntax => ".".to_owned(),
            DocumentErrorKind::Invalid => path,
        },
        message,
    }
}

impl fmt::Display for PolicyDocument {
    /// `namespace/name (uid) v<version> issued <time>: <n> layers`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{} ({}) v{} issued {}: {} layers",
            self.pod.namespace,
            self.pod.name,
            self.pod.uid,
            self.version,
            format_rfc3339(self.issued_at),
            self.layers.len()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(layers: &str) -> Vec<u8> {
        format!(
            r#"{{"pod":{{"namespace":"shop","name":"web-1","uid":"u1"}},"version":1,"issuedAt":"2026-11-29T20:06:15Z","layers":{layers}}}"#
        )
        .into_bytes()
    }

    #[test]
    fn every_field_round_trips_through_the_policy() {
        let json = doc(
            r#"[{"source":"shop/all","priority":-3,"expiresAt":"2026-11-29T20:21:15Z",
            "defaultLevel":"warn","targets":[{"target":"shop::payment","level":"debug"}],
            "alwaysKeep":"error","sampling":[{"target":"shop::http","keepOneIn":100,"scope":"request","span":"request"},
            {"target":"shop::db","keepOneIn":10}],"burst":{"perSecond":1000,"thenOneIn":10},
            "maxBytesPerSecond":1048576}]"#,
        );
        let d = PolicyDocument::from_json(&json).unwrap();
        let layers = d.policy_layers().unwrap();
        assert_eq!(layers.len(), 1);
        let back = LayerSpec::from(&layers[0]);
        assert_eq!(back, d.layers[0]);
        assert_eq!(
            layers[0].expires_at,
            Some(crate::clock::parse_rfc3339("2026-11-29T20:21:15Z").unwrap())
        );
        // The policy's JSON form of the layer is the wire form.
        let policy_json = Policy::new(layers).to_json();
        let wire_json = serde_json::to_string(&serde_json::json!({ "layers": d.layers })).unwrap();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&policy_json).unwrap(),
            serde_json::from_str::<serde_json::Value>(&wire_json).unwrap()
        );
        assert_eq!(
            PolicyDocument::from_json(d.to_json().as_bytes()).unwrap(),
            d
        );
    }

    #[test]
    fn errors_name_the_field_and_kind() {
        let cases: &[(&[u8], DocumentErrorKind, &str)] = &[
            (b"{", DocumentErrorKind::Syntax, "."),
            (b"not json", DocumentErrorKind::Syntax, "."),
            (&doc("[]")[..10], DocumentErrorKind::Syntax, "."),
            (&doc(r#"[{"source":"a/b","colour":1}]"#), DocumentErrorKind::Invalid, "layers[0].colour"),
            (&doc(r#"[{"source":"a/b","sampling":[{"target":"x","keepOneIn":0}]}]"#), DocumentErrorKind::Invalid, "layers[0].sampling[0].keepOneIn"),
            (&doc(r#"[{"source":"a/b"},{"source":"a/b"}]"#), DocumentErrorKind::Invalid, "layers"),
            (&doc(r#"[{"source":"env"}]"#), DocumentErrorKind::Invalid, "layers[0].source"),
            (&doc(r#"[{"source":"a/b","expiresAt":"soon"}]"#), DocumentErrorKind::Invalid, "layers[0].expiresAt"),
            (&doc(r#"[{"source":"a/b","reason":"a\u0007b"}]"#), DocumentErrorKind::Invalid, "layers[0].reason"),
            (&doc(r#"[{"source":"a/b","reason":7}]"#), DocumentErrorKind::Invalid, "layers[0].reason"),
            (br#"{"pod":{"namespace":"","name":"n","uid":"u"},"version":1,"issuedAt":"2026-11-29T20:06:15Z"}"#, DocumentErrorKind::Invalid, "pod.namespace"),
            (br#"{"pod":{"namespace":"s","name":"n","uid":"u"},"version":-1,"issuedAt":"2026-11-29T20:06:15Z"}"#, DocumentErrorKind::Invalid, "version"),
        ];
        for (bytes, kind, path) in cases {
            let e = PolicyDocument::from_json(bytes).unwrap_err();
            assert_eq!(
                (e.kind, e.path.as_str()),
                (*kind, *path),
                "{e} for {}",
                String::from_utf8_lossy(bytes)
            );
        }
        let mut trailing = doc("[]");
        trailing.extend_from_slice(b" {}");
        assert_eq!(
            PolicyDocument::from_json(&trailing).unwrap_err().kind,
            DocumentErrorKind::Syntax
        );
    }

    #[test]
    fn lost_layers_are_validated_named_by_their_path_and_omitted_when_empty() {
        let with_lost = |lost: &str| {
            let mut d = doc(r#"[{"source":"shop/raise","defaultLevel":"debug"}]"#);
            d.truncate(d.len() - 1);
            d.extend_from_slice(format!(r#","lost":{lost}}}"#).as_bytes());
            d
        };
        let d = PolicyDocument::from_json(&with_lost(
            r#"[{"source":"shop/old","reason":"INC-1","targets":[{"target":"shop::db","level":"debug"}]}]"#,
        ))
        .unwrap();
        let lost = d.lost_layers().unwrap();
        assert_eq!(lost.len(), 1);
        assert_eq!(lost[0].source(), "shop/old");
        assert_eq!(lost[0].reason.as_deref(), Some("INC-1"));
        // Round trip; a document without it is written without it.
        assert_eq!(
            PolicyDocument::from_json(d.to_json().as_bytes()).unwrap(),
            d
        );
        let plain = PolicyDocument::from_json(&doc("[]")).unwrap();
        assert!(plain.lost.is_empty());
        assert!(!plain.to_json().contains("lost"));
        // A bad lost layer refuses the document, naming it.
        let err = PolicyDocument::from_json(&with_lost(
            r#"[{"source":"a/b","targets":[{"target":"x","level":"loud"}]}]"#,
        ))
        .unwrap_err();
        assert_eq!(err.kind, DocumentErrorKind::Invalid);
        assert!(err.path.starts_with("lost[0].targets[0]"), "{err}");
        let too_many = (0..=MAX_DOCUMENT_LAYERS)
            .map(|i| format!(r#"{{"source":"a/l{i}"}}"#))
            .collect::<Vec<_>>()
            .join(",");
        let err = PolicyDocument::from_json(&with_lost(&format!("[{too_many}]"))).unwrap_err();
        assert_eq!(err.path, "lost", "{err}");
    }

    #[test]
    fn a_reason_is_carried_bounded_and_optional() {
        let with = doc(
            r#"[{"source":"shop/raise","reason":"INC-4211: card declines at checkout","defaultLevel":"debug"}]"#,
        );
        let d = PolicyDocument::from_json(&with).unwrap();
        let reason = Some("INC-4211: card declines at checkout".to_owned());
        assert_eq!(d.layers[0].reason, reason);
        assert_eq!(d.policy_layers().unwrap()[0].reason, reason);
        assert!(d
            .to_json()
            .contains(r#""reason":"INC-4211: card declines at checkout""#));
        // Without it: parsed as before, and written without it.
        let without =
            PolicyDocument::from_json(&doc(r#"[{"source":"shop/raise","defaultLevel":"debug"}]"#))
                .unwrap();
        assert_eq!(without.layers[0].reason, None);
        assert!(!without.to_json().contains("reason"));
        // 256 characters (not bytes) at most.
        let at = |n: usize| {
            doc(&format!(
                r#"[{{"source":"a/b","reason":"{}"}}]"#,
                "é".repeat(n)
            ))
        };
        assert!(PolicyDocument::from_json(&at(256)).is_ok());
        let e = PolicyDocument::from_json(&at(257)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "layers[0].reason: is 257 characters long, more than 256"
        );
    }

    #[test]
    fn a_document_may_leave_out_its_layers() {
        let d = PolicyDocument::from_json(br#"{"pod":{"namespace":"s","name":"n","uid":"u"},"version":9,"issuedAt":"2026-11-29T20:06:15Z"}"#).unwrap();
        assert!(d.layers.is_empty());
    }
}

#[cfg(all(test, feature = "schema"))]
mod schema_tests {
    use super::*;

    #[test]
    fn the_schema_names_every_field_and_level() {
        let schema = serde_json::to_string(&schemars::schema_for!(PolicyDocument)).unwrap();
        for name in [
            "issuedAt",
            "expiresAt",
            "defaultLevel",
            "alwaysKeep",
            "keepOneIn",
            "thenOneIn",
            "maxBytesPerSecond",
            "\"verbose\"",
        ] {
            assert_eq!(
                schema.contains(name),
                name != "\"verbose\"",
                "{name} in {schema}"
            );
        }
        assert!(schema.contains("\"trace\""));
    }
}
