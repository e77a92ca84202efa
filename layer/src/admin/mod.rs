//! The admin endpoint: a small authenticated HTTP server through which the operator
//! (or a person with the signing key) changes a running pod's policy.
//!
//! It is off unless configured: [`AdminConfig::from_env`] turns it on when
//! `LOGPOLICY_ADMIN_ADDR` is set, and [`Builder::from_env`](crate::Builder::from_env)
//! (so [`init`](crate::init())) starts it. It runs on a thread of its own with a
//! single-threaded runtime of its own, never on the service's.
//!
//! # Configuration
//!
//! | variable | meaning |
//! | --- | --- |
//! | `LOGPOLICY_ADMIN_ADDR` | Turns the endpoint on, listening there: `0.0.0.0:9090`, `[::]:9090`, `:9090` (every IPv4 address), `127.0.0.1:0` (a free port). Unset or empty: off. |
//! | `LOGPOLICY_TRUSTED_KEYS` | The public keys whose signatures are accepted: base64 of 32 bytes each, separated by commas, spaces or newlines. Several allowed, for rotation. |
//! | `LOGPOLICY_TRUSTED_KEYS_FILE` | Or a file of them: one per line, `#` comments; a regular file of at most 64 KiB (a FIFO or a device is refused without being waited on). Read again every 500 ms by a thread of its own (`logpolicy-keys`), never by the endpoint's, and followed by content (a mounted ConfigMap is rewritten in place); while it cannot be read or parsed (not there yet, too), or a read hangs for over 5 s, nothing is trusted. |
//! | `POD_UID` | The pod's `metadata.uid` (downward API). A document for another uid is refused (403). Required. |
//! | `POD_NAME` | The pod's `metadata.name`; checked like the uid. Required. |
//! | `POD_NAMESPACE` | The pod's `metadata.namespace`; checked like the uid. Required. |
//! | `LOGPOLICY_ADMIN_ANY_POD` | `1` or `true`: start without the three above (outside Kubernetes); a field not known is not checked. |
//! | `LOGPOLICY_METRIC_TARGETS` | How many targets `/metrics` names in `logpolicy_target_lines_total` and `logpolicy_target_bytes_total` (default 50, at most 1000; `0`: only `other`). A value that is not a whole number in range is an error naming the variable. |
//! | `LOGPOLICY_ADMIN_VIEWS` | Who is shown what each callsite costs (`/logpolicy/sites`, the per-target series of `/metrics`): `any` (default), or `local-and-signers`: loopback peers and peers that sent a validly signed push in the last 10 minutes (the operator); others get 403 `views_restricted` and `/metrics` without the per-target series ([`Views`]). |
//! | `LOGPOLICY_ADMIN_TRUST_LOOPBACK` | `0` or `false`: a loopback peer is a peer like any other (reduced view), for pods where a sidecar connects from loopback on behalf of other pods, as a service mesh's does ([`AdminConfig::trust_loopback`]). Default `1`. |
//!
//! The identity is required because one operator key signs for every namespace: the
//! identity check is what keeps a document signed for one pod out of every other.
//! `LOGPOLICY_ADMIN_ANY_POD` (or [`AdminConfig::any_pod`]) waives it outside Kubernetes.
//!
//! # When a setting does not work
//!
//! The environment never stops the service from starting: [`Builder`](crate::Builder)
//! (so [`init`](crate::init())) works around each setting that does not work, says so in
//! a `warn` line from target `logpolicy` (in the service's output and format, among the
//! first lines; `msg` says what the endpoint does, `source` names the variables,
//! `error` what is wrong), and lists it in
//! [`Logging::admin_problems`](crate::Logging::admin_problems):
//!
//! | problem | the endpoint |
//! | --- | --- |
//! | `LOGPOLICY_ADMIN_ADDR` does not parse, or cannot be bound | does not run |
//! | the keys file cannot be read or parsed (missing: a ConfigMap mounted `optional: true` that does not exist yet; not a regular file; over 64 KiB) | runs, refuses every push (401 `no_trusted_keys`) and reads the file again every 500 ms; once it can, it accepts pushes and says so in an `info` line (`the admin endpoint trusts the keys of its keys file`) |
//! | no trusted key configured, or `LOGPOLICY_TRUSTED_KEYS` does not parse | runs, refuses every push (401 `no_trusted_keys`) |
//! | `POD_UID`, `POD_NAME` or `POD_NAMESPACE` unset (and no `LOGPOLICY_ADMIN_ANY_POD`) | runs, refuses every signed push (403 `no_pod_identity`, naming the variables; an unsigned or badly signed one gets its 401 first, as the [statuses](#statuses) are checked in order) |
//! | `LOGPOLICY_METRIC_TARGETS`, `LOGPOLICY_ADMIN_ANY_POD`, `LOGPOLICY_ADMIN_VIEWS` or `LOGPOLICY_ADMIN_TRUST_LOOPBACK` does not parse | runs as if it were unset |
//!
//! An endpoint that runs serves `GET` (the view, the sites, `/metrics`, `/healthz`)
//! either way, and `/metrics` says whether it can accept a push:
//! `logpolicy_admin_trusted_keys` (0: none) and `logpolicy_admin_push_blocked{reason}`
//! (1 while every push is refused for `no_trusted_keys` or `no_pod_identity`). A keys
//! file that later becomes unreadable is a `warn` line too, and trusts nothing until it
//! is fixed. With [`Builder::strict`](crate::Builder::strict) each of these refuses to
//! build instead ([`InitError::Admin`](crate::InitError::Admin)), as
//! [`AdminConfig::from_env`] and [`AdminServer::start`] always do (an incomplete identity
//! is [`AdminError::NoPodIdentity`], naming the variables).
//!
//! # Endpoints
//!
//! - `GET /logpolicy`: `{"effective": {...}, "layers": [...], "document": {...},
//!   "nextExpiry": ..., "afterNextExpiry": {...}, "generation": N, "trustedKeys": [...],
//!   "readAt": ...}`. `effective` is the
//!   merged policy as directives (`"directives": "info,shop::payment=debug,@always_keep=warn"`)
//!   and structured (`defaultLevel`, `targets`, `alwaysKeep`, `sampling`, `burst`,
//!   `maxBytesPerSecond`) with the `sources` in force; `layers` is every layer, the
//!   baseline `env` included, in the document's layer shape plus `active`; `document`
//!   is the version, `issuedAt` and pod of the last document accepted (`null` before the
//!   first); `nextExpiry` is when the next layer in force expires and `afterNextExpiry`
//!   what the effective policy becomes then; `trustedKeys` the ids of the keys it
//!   accepts signatures from now (empty: none, every push refused) and `readAt` its
//!   clock when it answered (both in every viewer's view: `kubectl logpolicy check`
//!   compares them with the operator's key and the reader's clock).
//! - `PUT /logpolicy`: a signed [`PolicyDocument`](crate::wire::PolicyDocument) (see
//!   [`crate::wire`] for the signature). Its layers replace every layer but the baseline,
//!   in one atomic change; the answer (200, the same body as `GET`, plus
//!   `"unchanged": bool`) is sent after the new policy is in force, so the next event
//!   after the response follows it.
//! - `DELETE /logpolicy`: a signed document whose `layers` is empty or absent: back to
//!   the baseline. It is versioned like a `PUT` (the version held becomes its version).
//! - `GET /logpolicy/sites`: what each callsite cost ([`SitesView`](crate::wire::SitesView),
//!   from the [ledger](crate::ledger)): every callsite the process ran, with its lines
//!   and bytes written and its events not written by reason; `other` (callsites past
//!   the row cap), `own` (logpolicy's own lines), `totals` (the rows and `other`),
//!   the writer's totals, and every target with its callsites' levels, the level in
//!   force for it now and its counts. `startedAt` and `readAt` (RFC 3339, and in Unix
//!   milliseconds) make two reads a rate. Every peer gets the same view (counts and
//!   callsite names are not secrets; no field value is in it). Shortened:
//!
//!   ```json
//!   {"startedAt": "2026-11-29T20:00:00.120000000Z", "startedAtUnixMs": 1795982400120,
//!    "readAt": "2026-11-29T20:06:15.250000000Z", "readAtUnixMs": 1795982775250,
//!    "maxRows": 4096, "writer": {"linesWritten": 12, "bytesWritten": 2048},
//!    "totals": {"lines": 11, "bytes": 1900, "sampled": 30, "burst": 0, "budget": 0, "queueFull": 0, …},
//!    "own": {"lines": 1, "bytes": 148, …}, "other": {"sites": 0, "lines": 0, "bytes": 0, …},
//!    "targets": [{"target": "shop::http", "levels": ["info"], "levelNow": "info",
//!                 "callsites": 1, "lines": 11, "bytes": 1900, "sampled": 30, …}],
//!    "rows": [{"kind": "event", "target": "shop::http", "level": "info",
//!              "name": "event src/http.rs:42", "file": "src/http.rs", "line": 42,
//!              "modulePath": "shop::http", "lines": 11, "bytes": 1900, "sampled": 30, …}]}
//!   ```
//! - `GET /metrics`: Prometheus (OpenMetrics) text: `logpolicy_events_total{level,outcome}`
//!   (outcome `written`, `sampled`, `burst`, `budget`), `logpolicy_events_held{level}`,
//!   `logpolicy_writer_bytes_written_total`, `logpolicy_writer_queue_bytes`,
//!   `logpolicy_writer_lines_written_total{level}`,
//!   `logpolicy_writer_dropped_total{level,reason}`, `logpolicy_writer_io_errors_total`,
//!   `logpolicy_writer_rotations_total` (the writer's only when one is attached),
//!   `logpolicy_policy_version` (once a document is held), `logpolicy_policy_generation`,
//!   `logpolicy_policy_active_layers`,
//!   `logpolicy_policy_next_expiry_timestamp_seconds` (when a layer in force expires),
//!   `logpolicy_admin_trusted_keys` and `logpolicy_admin_push_blocked{reason}` (see
//!   [above](#when-a-setting-does-not-work)),
//!   `logpolicy_admin_requests_total{status}` (every request and every connection that
//!   ended without one, see below), `logpolicy_target_lines_total{target,level}` and
//!   `logpolicy_target_bytes_total{target,level}`: the ledger's lines and bytes written
//!   for at most `LOGPOLICY_METRIC_TARGETS` targets (default 50), the first that wrote
//!   the most bytes, each listed for good once listed (series do not come and go); the
//!   rest summed under `target="other"`, and logpolicy's own lines under
//!   `target="logpolicy"` with an empty `level`, so that the bytes add up to
//!   `logpolicy_writer_bytes_written_total` (see [`AdminConfig::metric_targets`]).
//! - `GET /healthz`: `{"status":"ok"}`.
//!
//! # Statuses
//!
//! A `PUT` or `DELETE` is checked in this order; the first failure answers, and nothing
//! changes on any failure. Every error body is `{"error": "<code>", "reason": "<what is
//! wrong>"}` ([`ErrorReply`](crate::wire::ErrorReply)); a `409` adds `"heldVersion"`, the
//! version the pod holds. The other answers are typed too
//! ([`PolicyView`](crate::wire::PolicyView)).
//!
//! | status | `error` | when |
//! | --- | --- | --- |
//! | 413 | `body_too_large` | the body is over 64 KiB (by `Content-Length`, answered without reading it, or while reading) |
//! | 401 | `missing_signature`, `malformed_signature` | no `X-Logpolicy-Signature` header, or not `ed25519=<key-id>:<base64>` |
//! | 401 | `untrusted_key`, `bad_signature`, `no_trusted_keys` | signed by a key not trusted, a signature that does not match the body, or no key trusted (none configured, or a keys file that cannot be read or parsed, yet or any longer). Every authentication failure is 401; 403 is kept for an authenticated document this pod will not take. |
//! | 400 | `malformed_json`, `bad_request` | the (authentic) body is not JSON, or could not be read |
//! | 422 | `invalid_document` | JSON that is not a valid document: `reason` names the field, e.g. `layers[1].targets[0].level: invalid level "verbose" …`; also a `DELETE` with layers |
//! | 403 | `no_pod_identity` | this pod does not know its uid, name or namespace (started without them, see [above](#when-a-setting-does-not-work)): it refuses every document |
//! | 403 | `wrong_pod` | `pod.uid` (or name, namespace) is not this pod's |
//! | 422 | `version_too_large` | `version` above 2^53 - 1 ([`MAX_DOCUMENT_VERSION`](crate::wire::MAX_DOCUMENT_VERSION)): no version can take the last one and freeze every later document out |
//! | 422 | `not_fresh` | `issuedAt` more than 5 minutes ([`AdminLimits::document_window`]) before or after this pod's clock: a replayed capture, or a clock far off |
//! | 422 | `expired` | a layer's `expiresAt` is not after the document's `issuedAt` |
//! | 422 | `lifetime_too_long` | a layer would last more than 7 days ([`AdminLimits::max_layer_lifetime`]) from `issuedAt` |
//! | 422 | `no_expiry` | a layer has no `expiresAt`: it would last forever |
//! | 409 | `older_than_held` | a newer version with an earlier `issuedAt` than the document held: a replay |
//! | 409 | `stale_version`, `version_conflict` | `version` older than the one held, or equal with different content (the body also gives `heldVersion`) |
//! | 200 | | applied; or the same version with identical content again (`"unchanged": true`) |
//! | 404 | `not_found` | any other path |
//! | 405 | `method_not_allowed` | another method on a known path (with `Allow`) |
//! | 403 | `views_restricted` | `GET /logpolicy/sites` from a peer that is neither on loopback nor a recent signer, with `LOGPOLICY_ADMIN_VIEWS=local-and-signers` |
//! | 503 | `busy` | every slot is taken by a connection past its request, or this address already holds 16 (answered and closed at once) |
//!
//! Connections that never make a request are counted too, with the status hyper or the
//! limits give them (no body is sent): 408 (no complete head within 2 s, or closed to
//! make room for a new connection), 431 (a head over 16 KiB), 400 (a head that does not
//! parse).
//!
//! The signature is checked before the body is parsed: bytes from a client without the
//! key never reach the JSON parser, let alone the policy.
//!
//! # Time
//!
//! A document is judged by the pod's clock, never by the signer's:
//!
//! - **Fresh only**: `issuedAt` must be within 5 minutes of the pod's clock either way.
//!   The operator signs every push anew, so its documents are seconds old; a capture
//!   replayed later, after a restart of the container too (when the version held is
//!   gone with the process), is refused (`not_fresh`). Within the window, a document
//!   issued before the one held is refused too (`older_than_held`).
//! - **A layer lasts its time-to-live from receipt**: a layer whose `expiresAt` is `T`
//!   ends `T - issuedAt` after the pod received it, on the pod's clock. This is the same
//!   as `T` moved by the measured offset between `issuedAt` and the pod's clock (which
//!   includes the transit, milliseconds). A signer 8 s ahead or behind, or a pod's clock
//!   2 minutes off, changes nothing about how long a raise lasts. `GET /logpolicy`
//!   shows the expiry on the pod's clock.
//! - **Bounded**: a layer with `expiresAt` not after `issuedAt` is refused (`expired`),
//!   one lasting over 7 days too (`lifetime_too_long`), and one without `expiresAt`
//!   (`no_expiry`). A standing policy (a LogPolicy without `duration`) reaches the pod
//!   as a layer the operator renews: it expires a day after each document, and the
//!   operator sends a new one every 12 hours. If the operator is gone, a standing
//!   policy falls back by itself within a day, like any raise.
//!
//! # Limits
//!
//! See [`AdminLimits`]: the body (64 KiB), the request head (16 KiB), the time to send
//! the head (2 s) and the whole connection (5 s: a slow client is cut, however slowly it
//! trickles), one request per connection, at most 64 connections at once and 16 from
//! one address. A held connection costs one small task on the endpoint's thread and
//! never blocks another.
//!
//! When the 64 are taken, a new connection takes the place of the oldest one still
//! sending its request (its head first, then its body): clients that open connections
//! and send nothing cannot keep a signed push out, however many addresses they use. A
//! peer that sent a validly signed request in the last 10 minutes (the operator) is
//! never evicted, is not held to the per-address cap, and finds 8 more slots kept for it.
//!
//! # Example
//!
//! ```
//! use logpolicy::admin::{AdminConfig, AdminServer, PodIdentity};
//! use logpolicy::policy::LayerSpec;
//! use logpolicy::wire::{self, PodRef, PolicyDocument};
//! use logpolicy::{Level, PolicyFilter};
//! use std::io::{Read, Write};
//!
//! let key = wire::generate_signing_key()?;
//! let filter = PolicyFilter::from_directives("info")?;
//! let config = AdminConfig::new("127.0.0.1:0".parse()?, wire::TrustedKeys::new([key.verifying_key()]))
//!     .pod(PodIdentity {
//!         uid: Some("uid-1".into()),
//!         name: Some("web-1".into()),
//!         namespace: Some("shop".into()),
//!     });
//! let admin = AdminServer::start(config, filter.handle(), None)?;
//!
//! let raise = LayerSpec::from_directives("shop/raise", 10, "shop::payment=debug".parse()?);
//! let doc = PolicyDocument::new(PodRef::new("shop", "web-1", "uid-1"), 1)
//!     .with_layer(raise.expires_at(std::time::SystemTime::now() + std::time::Duration::from_secs(900)));
//! let body = doc.to_json();
//! let request = format!(
//!     "PUT /logpolicy HTTP/1.1\r\nhost: pod\r\ncontent-length: {}\r\nx-logpolicy-signature: {}\r\n\r\n{}",
//!     body.len(), wire::sign(body.as_bytes(), &key), body);
//! let mut conn = std::net::TcpStream::connect(admin.local_addr())?;
//! conn.write_all(request.as_bytes())?;
//! let mut response = String::new();
//! conn.read_to_string(&mut response)?;
//! assert!(response.starts_with("HTTP/1.1 200 OK"), "{response}");
//! assert_eq!(filter.handle().effective().level_for("shop::payment"), Level::Debug);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod config;
mod metrics;
mod server;
mod service;

pub use config::{
    AdminConfig, AdminError, AdminLimits, PodIdentity, Views, ADMIN_ADDR_ENV, ANY_POD_ENV,
    DEFAULT_METRIC_TARGETS, MAX_METRIC_TARGETS, METRIC_TARGETS_ENV, POD_NAMESPACE_ENV,
    POD_NAME_ENV, POD_UID_ENV, TRUST_LOOPBACK_ENV, VIEWS_ENV,
};
pub(crate) use config::{AdminProblem, NOT_RUNNING, SKIPPED_SETTING};
pub use server::AdminServer;

/// Whether a connection from `peer` comes from the same network namespace (the pod
/// itself): IPv4 loopback, `::1`, or IPv4 loopback mapped into IPv6. `kubectl
/// port-forward` and `kubectl exec` arrive so; another pod, the API server's pod proxy
/// and the operator do not. The pod's `GET /logpolicy` shows its whole view only to
/// such a peer; the operator's `/pods` answers only such a peer by default.
///
/// ```
/// use logpolicy::admin::is_local_peer;
/// assert!(is_local_peer("127.0.0.1".parse().unwrap()));
/// assert!(is_local_peer("::ffff:127.0.0.1".parse().unwrap()));
/// assert!(!is_local_peer("10.1.2.3".parse().unwrap()));
/// ```
pub fn is_local_peer(peer: std::net::IpAddr) -> bool {
    match peer {
        std::net::IpAddr::V4(v4) => v4.is_loopback(),
        std::net::IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}
