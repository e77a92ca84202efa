//! What the endpoint answers: routing, verification, the policy swap, the views.
//! Synchronous and free of I/O; the server feeds it requests.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::config::{AdminConfig, KeySource, PodIdentity, Views};
use crate::clock::format_rfc3339;
use crate::enforce::{LayerChange, PolicyHandle};
use crate::format::own_line::{write_layer_change, write_push_refused};
use crate::ledger::MAX_ROWS;
use crate::policy::{
    EffectivePolicy, LayerSpec, Policy, PolicyError, PolicyLayer, BASELINE_SOURCE,
};
use crate::wire::{
    self, unix_ms, DocumentErrorKind, EffectiveView, ErrorReply, HeldDocument, LayerView,
    OtherSitesView, PolicyDocument, PolicyView, RecorderView, ReplayView, SiteView, SitesView,
    TargetView, ViewScope, WriterTotals, MAX_DOCUMENT_VERSION,
};
use crate::writer::{PendingReplay, ReplayRequest, Writer};

/// The statuses the endpoint answers, for the request counter (a fixed label set).
/// 408 and 431 are counted by the server for connections that never made a request
/// (no complete head in time, or evicted while reading it; a head over the limit).
pub(crate) const STATUSES: [u16; 13] = [
    200, 400, 401, 403, 404, 405, 408, 409, 413, 422, 431, 500, 503,
];

/// A response: status, content type, body, and for 405 the allowed methods.
#[derive(Debug)]
pub(crate) struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
    pub allow: Option<&'static str>,
    /// The request carried a valid signature by a trusted key (whatever the answer).
    pub signed: bool,
}

const JSON: &str = "application/json";

/// Who asks for `GET /logpolicy`, which decides how much of the policy it is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Viewer {
    /// A peer on loopback: a process of the pod itself, or `kubectl port-forward`
    /// (which needs the `pods/portforward` permission): the whole view.
    Local,
    /// A peer that sent a validly signed push recently (the operator): the reduced
    /// view, and the sites with [`Views::LocalAndSigners`].
    Signer,
    /// Any other peer (another pod, the API server's pod proxy): what is in force and
    /// since when, not each layer's settings, reason or the pod's identity.
    Network,
}

impl Viewer {
    /// The viewer a connection from `peer` is: loopback counts as the pod itself only
    /// when `trust_loopback`; `signer`, whether it signed a push recently.
    pub(crate) fn of(peer: std::net::IpAddr, trust_loopback: bool, signer: bool) -> Viewer {
        if trust_loopback && super::is_local_peer(peer) {
            Viewer::Local
        } else if signer {
            Viewer::Signer
        } else {
            Viewer::Network
        }
    }
}

/// The body of `GET /healthz`.
#[derive(Serialize)]
struct Health {
    status: &'static str,
}

impl Reply {
    fn json(status: u16, body: &impl Serialize) -> Reply {
        let mut body = serde_json::to_string_pretty(body).unwrap_or_default();
        body.push('\n');
        Reply {
            status,
            content_type: JSON,
            body,
            allow: None,
            signed: false,
        }
    }

    /// `{"error": code, "reason": reason}`.
    pub(crate) fn error(status: u16, code: &str, reason: impl Into<String>) -> Reply {
        Reply::json(status, &ErrorReply::new(code, reason))
    }

    /// A `409`: `{"error": code, "reason": reason, "heldVersion": held}`.
    fn conflict(code: &str, reason: String, held: u64) -> Reply {
        let body = ErrorReply {
            held_version: Some(held),
            ..ErrorReply::new(code, reason)
        };
        Reply::json(409, &body)
    }
}

/// Where a request goes, decided from its method and path alone (before its body).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    GetPolicy,
    PutPolicy,
    DeletePolicy,
    /// `GET /logpolicy/sites`: what each callsite cost.
    GetSites,
    Metrics,
    Health,
    NotFound,
    MethodNotAllowed(&'static str),
}

impl Route {
    pub(crate) fn of(method: &str, path: &str) -> Route {
        let (get_only, policy) = ("GET, HEAD", "GET, HEAD, PUT, DELETE");
        match (path, method) {
            ("/logpolicy", "GET" | "HEAD") => Route::GetPolicy,
            ("/logpolicy", "PUT") => Route::PutPolicy,
            ("/logpolicy", "DELETE") => Route::DeletePolicy,
            ("/logpolicy", _) => Route::MethodNotAllowed(policy),
            ("/logpolicy/sites", "GET" | "HEAD") => Route::GetSites,
            ("/metrics", "GET" | "HEAD") => Route::Metrics,
            ("/healthz", "GET" | "HEAD") => Route::Health,
            ("/logpolicy/sites" | "/metrics" | "/healthz", _) => Route::MethodNotAllowed(get_only),
            _ => Route::NotFound,
        }
    }

    /// Whether the route reads a body (and so is subject to the body limit).
    pub(crate) fn takes_body(self) -> bool {
        matches!(self, Route::PutPolicy | Route::DeletePolicy)
    }
}

/// The endpoint's state: the policy it changes, the document it holds, its counters.
#[derive(Debug)]
pub(crate) struct Admin {
    handle: PolicyHandle,
    writer: Option<Writer>,
    keys: KeySource,
    pod: PodIdentity,
    /// Why the endpoint cannot tell which pod a document is for (its identity is
    /// incomplete, and that was tolerated at start): every push is refused.
    no_identity: Option<String>,
    pub(crate) max_body_bytes: usize,
    document_window: Duration,
    max_layer_lifetime: Duration,
    /// The last document accepted (its version is the one held).
    held: Mutex<Option<Held>>,
    /// When the last refused push was written to the output, and the refusals since.
    refusals: Mutex<Refusals>,
    requests: [AtomicU64; STATUSES.len()],
    /// The targets `/metrics` lists by name (sticky, bounded).
    metric_targets: super::metrics::ListedTargets,
    /// The last replay each layer source asked for (at most one per source, for sources
    /// in the policy: bounded by its layers).
    replays: Mutex<Vec<ReplayView>>,
    /// Who is shown what each callsite costs.
    views: Views,
    /// Whether a loopback peer counts as the pod itself.
    pub(crate) trust_loopback: bool,
}

/// At most one line a second says a push was refused: a client that sends refused
/// requests as fast as it can cannot flood the output (the metrics count every one).
const REFUSAL_LINE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// Refused pushes not written yet, and when the last one was.
#[derive(Debug, Default)]
struct Refusals {
    last_line: Option<std::time::Instant>,
    suppressed: u64,
}

/// The document held, and when this pod accepted it (by its own clock).
#[derive(Debug)]
struct Held {
    doc: PolicyDocument,
    applied_at: SystemTime,
}

impl Admin {
    /// An endpoint changing `handle`'s policy. With a `writer`, the policy writes to it,
    /// from now on, one line for every pushed layer that starts, changes or stops
    /// applying, in the writer's format.
    pub(crate) fn new(config: AdminConfig, handle: PolicyHandle, writer: Option<Writer>) -> Self {
        if let Some(writer) = writer.clone() {
            handle.announce_changes(Box::new(move |changes: &[LayerChange], now: SystemTime| {
                let mut line = Vec::with_capacity(256);
                let mut written = 0;
                for change in changes {
                    line.clear();
                    write_layer_change(&mut line, writer.style(), now, change);
                    written += u64::from(writer.write_line(tracing_core::Level::INFO, true, &line));
                }
                written
            }));
        }
        let no_identity = config.identity_error().map(|e| e.to_string());
        Admin {
            handle,
            writer,
            no_identity,
            keys: config.keys,
            pod: config.pod,
            max_body_bytes: config.limits.max_body_bytes,
            document_window: config.limits.document_window,
            max_layer_lifetime: config.limits.max_layer_lifetime,
            held: Mutex::new(None),
            refusals: Mutex::new(Refusals::default()),
            requests: Default::default(),
            metric_targets: super::metrics::ListedTargets::new(config.metric_targets),
            replays: Mutex::new(Vec::new()),
            views: config.views,
            trust_loopback: config.trust_loopback,
        }
    }

    /// Starts the replays the layers of an accepted document ask for, once per id: takes
    /// each window's lines now (so the answer says what was found) and writes them on a
    /// thread of their own, paced. Forgets the replays of sources no longer pushed.
    fn start_replays(&self, layers: &[PolicyLayer], now: SystemTime) {
        let mut replays = self
            .replays
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        replays.retain(|r| layers.iter().any(|l| l.source() == r.policy));
        let Some(writer) = &self.writer else { return };
        let since_epoch = now.duration_since(UNIX_EPOCH).unwrap_or_default();
        for layer in layers {
            let Some(ask) = &layer.replay else { continue };
            if replays
                .iter()
                .any(|r| r.policy == layer.source() && r.id == ask.id)
            {
                continue;
            }
            let mut request = ReplayRequest::new(layer.source(), ask.since);
            request.reason = layer.reason.clone();
            let pending = PendingReplay::take(&self.handle.recorder(), request, since_epoch);
            let report = pending.report();
            let view = ReplayView {
                policy: layer.source().to_owned(),
                id: ask.id.clone(),
                at: now,
                asked_from: report.asked_from,
                held_from: report.held_from,
                first_at: report.first_at,
                lines: report.lines,
                complete: report.complete,
            };
            replays.retain(|r| r.policy != view.policy);
            replays.push(view);
            let writer = writer.clone();
            let spawned = std::thread::Builder::new()
                .name("logpolicy-replay".into())
                .spawn(move || pending.write(&writer));
            // A thread that cannot be started (the process is out of them) loses the
            // lines taken to this replay: they stay counted as replayed, never written.
            drop(spawned);
        }
    }

    /// Whether `viewer` is shown what each callsite costs.
    fn shows_sites_to(&self, viewer: Viewer) -> bool {
        self.views == Views::Any || viewer != Viewer::Network
    }

    pub(crate) fn count(&self, status: u16) {
        let i = STATUSES
            .iter()
            .position(|s| *s == status)
            .or_else(|| STATUSES.iter().position(|s| *s == 500))
            .unwrap_or(0); // anything else counts as 500
        self.requests[i].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn requests(&self) -> [(u16, u64); STATUSES.len()] {
        let mut out = [(0, 0); STATUSES.len()];
        for (i, s) in STATUSES.iter().enumerate() {
            out[i] = (*s, self.requests[i].load(Ordering::Relaxed));
        }
        out
    }

    pub(crate) fn handle(&self) -> &PolicyHandle {
        &self.handle
    }

    pub(crate) fn writer(&self) -> Option<&Writer> {
        self.writer.as_ref()
    }

    pub(crate) fn metric_targets(&self) -> &super::metrics::ListedTargets {
        &self.metric_targets
    }

    /// How many keys are trusted now (0 when none can be: every push is refused).
    pub(crate) fn trusted_keys(&self) -> usize {
        self.keys.current().map_or(0, |keys| keys.len())
    }

    /// Whether every push is refused because the pod's identity is unknown.
    pub(crate) fn refuses_for_identity(&self) -> bool {
        self.no_identity.is_some()
    }

    pub(crate) fn held_version(&self) -> Option<u64> {
        self.lock_held().as_ref().map(|h| h.doc.version)
    }

    /// The document's times against this pod's clock (`now`): `issuedAt` within the
    /// window either way, every layer with an `expiresAt` after `issuedAt` and within
    /// the longest lifetime, the version within bounds. Each layer's expiry is then moved to
    /// this pod's clock: it ends `expiresAt - issuedAt` after it was received, so a
    /// signer's clock ahead or behind this pod's changes nothing.
    fn check_time(
        &self,
        doc: &PolicyDocument,
        layers: &mut [PolicyLayer],
        now: SystemTime,
    ) -> Result<(), Reply> {
        if doc.version > MAX_DOCUMENT_VERSION {
            return Err(Reply::error(
                422,
                "version_too_large",
                format!(
                    "version: {} is above {MAX_DOCUMENT_VERSION} (2^53 - 1), which leaves room to grow",
                    doc.version
                ),
            ));
        }
        let window = self.document_window;
        let (off, way) = match now.duration_since(doc.issued_at) {
            Ok(age) => (age, "before"),
            Err(e) => (e.duration(), "after"),
        };
        if off > window {
            return Err(Reply::error(
                422,
                "not_fresh",
                format!(
                    "issuedAt: {} is {} {way} this pod's clock ({}); a document is accepted within {} of it either way: a replayed capture, or a clock far off",
                    format_rfc3339(doc.issued_at),
                    format_duration(off),
                    format_rfc3339(now),
                    format_duration(window),
                ),
            ));
        }
        for (i, layer) in layers.iter_mut().enumerate() {
            let Some(expires) = layer.expires_at else {
                return Err(Reply::error(
                    422,
                    "no_expiry",
                    format!(
                        "layers[{i}].expiresAt: absent: a pushed layer must end, at most {} after issuedAt (the operator gives a standing policy an expiry and renews it)",
                        format_duration(self.max_layer_lifetime)
                    ),
                ));
            };
            let ttl = match expires.duration_since(doc.issued_at) {
                Ok(ttl) if !ttl.is_zero() => ttl,
                _ => {
                    return Err(Reply::error(
                        422,
                        "expired",
                        format!(
                            "layers[{i}].expiresAt: {} is not after issuedAt {}: the layer had expired when the document was issued",
                            format_rfc3339(expires),
                            format_rfc3339(doc.issued_at)
                        ),
                    ))
                }
            };
            if ttl > self.max_layer_lifetime {
                return Err(Reply::error(
                    422,
                    "lifetime_too_long",
                    format!(
                        "layers[{i}].expiresAt: the layer would last {} from issuedAt, more than the {} a pushed layer may",
                        format_duration(ttl),
                        format_duration(self.max_layer_lifetime)
                    ),
                ));
            }
            layer.expires_at = Some(now + ttl);
        }
        Ok(())
    }

    fn lock_held(&self) -> std::sync::MutexGuard<'_, Option<Held>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Answers a request whose body (if its route takes one) has been read.
    pub(crate) fn respond(
        &self,
        route: Route,
        viewer: Viewer,
        signature: Option<&str>,
        body: &[u8],
    ) -> Reply {
        match route {
            Route::GetPolicy => Reply::json(200, &self.view(viewer)),
            // Every viewer shown the sites gets the same: the ledger holds no field
            // value.
            Route::GetSites if self.shows_sites_to(viewer) => {
                Reply::json(200, &self.sites_view())
            }
            Route::GetSites => Reply::error(
                403,
                "views_restricted",
                format!(
                    "this pod shows what each callsite costs only to loopback peers and to \
                     the operator ({}={})",
                    super::config::VIEWS_ENV,
                    self.views
                ),
            ),
            Route::PutPolicy | Route::DeletePolicy => {
                let reply = self.push(signature, body, route == Route::DeletePolicy);
                if reply.status >= 400 {
                    self.write_refused(&reply);
                }
                reply
            }
            Route::Metrics => super::metrics::render(self, self.shows_sites_to(viewer)),
            Route::Health => Reply::json(200, &Health { status: "ok" }),
            Route::NotFound => Reply::error(
                404,
                "not_found",
                "no such path: the endpoint serves /logpolicy, /logpolicy/sites, /metrics and /healthz",
            ),
            Route::MethodNotAllowed(allow) => Reply {
                allow: Some(allow),
                ..Reply::error(405, "method_not_allowed", format!("allowed: {allow}"))
            },
        }
    }

    /// Writes that a push was refused, with the answer's code and reason, to the output
    /// (if the endpoint has one), at most once per [`REFUSAL_LINE_INTERVAL`]; the next
    /// line counts the refusals in between.
    fn write_refused(&self, reply: &Reply) {
        let Some(writer) = &self.writer else {
            return;
        };
        let suppressed = {
            let mut r = self.refusals.lock().unwrap_or_else(|p| p.into_inner());
            let now = std::time::Instant::now();
            if r.last_line
                .is_some_and(|t| now.duration_since(t) < REFUSAL_LINE_INTERVAL)
            {
                r.suppressed += 1;
                return;
            }
            r.last_line = Some(now);
            std::mem::take(&mut r.suppressed)
        };
        let answer: ErrorReply = serde_json::from_str(&reply.body)
            .unwrap_or_else(|_| ErrorReply::new("unknown", reply.body.trim()));
        let mut line = Vec::with_capacity(256);
        write_push_refused(
            &mut line,
            writer.style(),
            self.handle.now(),
            reply.status,
            &answer.error,
            &answer.reason,
            suppressed,
        );
        writer.write_line(tracing_core::Level::WARN, true, &line);
    }

    /// PUT (replace every pushed layer) or DELETE (back to the baseline) with a signed
    /// document. Checks in order: signature, the pod's identity known, document, pod,
    /// (DELETE: no layers), version; changes nothing unless every check passes.
    fn push(&self, signature: Option<&str>, body: &[u8], delete: bool) -> Reply {
        let keys = match self.keys.current() {
            Ok(keys) => keys,
            Err(e) => return Reply::error(401, "no_trusted_keys", format!("no trusted keys: {e}")),
        };
        if let Err(e) = wire::verify(body, signature, &keys) {
            return Reply::error(401, e.code(), e.to_string());
        }
        Reply {
            signed: true,
            ..self.push_signed(body, delete)
        }
    }

    /// [`push`](Self::push) once the signature is verified.
    fn push_signed(&self, body: &[u8], delete: bool) -> Reply {
        if let Some(why) = &self.no_identity {
            return Reply::error(403, "no_pod_identity", why.clone());
        }
        let (doc, mut layers) = match PolicyDocument::decode(body) {
            Ok(decoded) => decoded,
            Err(e) if e.kind == DocumentErrorKind::Syntax => {
                return Reply::error(400, "malformed_json", format!("body is not JSON: {e}"))
            }
            Err(e) => return Reply::error(422, "invalid_document", e.to_string()),
        };
        for (field, mine, theirs) in [
            ("uid", &self.pod.uid, &doc.pod.uid),
            ("name", &self.pod.name, &doc.pod.name),
            ("namespace", &self.pod.namespace, &doc.pod.namespace),
        ] {
            if let Some(mine) = mine {
                if mine != theirs {
                    return Reply::error(
                        403,
                        "wrong_pod",
                        format!(
                            "pod.{field}: the document is for {theirs:?}, this pod is {mine:?}"
                        ),
                    );
                }
            }
        }
        if delete && !doc.layers.is_empty() {
            return Reply::error(
                422,
                "invalid_document",
                "layers: a DELETE document must have no layers",
            );
        }
        let now = self.handle.now();
        if let Err(refused) = self.check_time(&doc, &mut layers, now) {
            return refused;
        }
        let mut held = self.lock_held();
        if let Some(current) = held.as_ref().map(|h| &h.doc) {
            if doc.issued_at < current.issued_at && doc.version > current.version {
                return Reply::conflict(
                    "older_than_held",
                    format!(
                        "issuedAt {} is before that of the document held ({}): a replay",
                        format_rfc3339(doc.issued_at),
                        format_rfc3339(current.issued_at)
                    ),
                    current.version,
                );
            }
            if doc.version < current.version {
                return Reply::conflict(
                    "stale_version",
                    format!(
                        "version {} is older than the version held, {}",
                        doc.version, current.version
                    ),
                    current.version,
                );
            }
            if doc.version == current.version {
                if doc == *current {
                    return Reply::json(200, &self.view_with(held.as_ref(), Some(true)));
                }
                return Reply::conflict(
                    "version_conflict",
                    format!(
                        "version {} is held with different content; a change needs a newer version",
                        doc.version
                    ),
                    current.version,
                );
            }
        }
        // The first document this process receives may say what its previous process
        // held (a container restart): those layers' end lines come first, before the
        // lines of what this document starts. Validated with the document; a later
        // document's `lost` is ignored (said once).
        if held.is_none() && !doc.lost.is_empty() {
            self.handle
                .announce_lost(doc.lost_layers().unwrap_or_default());
        }
        // One atomic edit: the baseline stays, every other layer is replaced. The swap
        // and the interest rebuild are done before the response is sent.
        let applied = self.handle.update(|policy| {
            let baseline = policy
                .layers()
                .iter()
                .filter(|l| l.source() == BASELINE_SOURCE)
                .cloned();
            *policy = Policy::try_new(baseline.chain(layers).collect())?;
            Ok::<(), PolicyError>(())
        });
        if let Err(e) = applied {
            return Reply::error(422, "invalid_document", e.to_string());
        }
        *held = Some(Held {
            doc,
            applied_at: now,
        });
        self.start_replays(&self.handle.policy().into_layers(), now);
        Reply::json(200, &self.view_with(held.as_ref(), Some(false)))
    }

    /// The body of `GET /logpolicy` for `viewer`.
    pub(crate) fn view(&self, viewer: Viewer) -> PolicyView {
        let held = self.lock_held();
        let view = self.view_with(held.as_ref(), None);
        match viewer {
            Viewer::Local => view,
            Viewer::Signer | Viewer::Network => reduced(view),
        }
    }

    /// The body of `GET /logpolicy/sites`, the same for every viewer: the ledger's
    /// rows, `other`, `own` and totals, its start and the time of this read, the
    /// writer's totals (when the endpoint has a writer, read after the ledger: a line
    /// written in between is in the writer's and not yet in the ledger's), and every
    /// target with the level in force for it now.
    pub(crate) fn sites_view(&self) -> SitesView {
        let sites = self.handle.sites();
        let writer = self.writer.as_ref().map(|w| {
            let stats = w.stats();
            WriterTotals {
                lines_written: stats.written_total(),
                bytes_written: stats.bytes_written,
            }
        });
        let effective = self.handle.effective();
        SitesView {
            started_at: sites.started_at,
            started_at_unix_ms: unix_ms(sites.started_at),
            read_at: sites.read_at,
            read_at_unix_ms: unix_ms(sites.read_at),
            max_rows: MAX_ROWS,
            writer,
            totals: (&sites.totals).into(),
            own: (&sites.own).into(),
            other: OtherSitesView {
                sites: sites.other_sites,
                counts: (&sites.other).into(),
            },
            targets: sites
                .targets()
                .iter()
                .map(|t| TargetView::new(t, effective.level_for(t.target)))
                .collect(),
            rows: sites.rows.iter().map(SiteView::from).collect(),
        }
    }

    fn view_with(&self, held: Option<&Held>, unchanged: Option<bool>) -> PolicyView {
        let policy = self.handle.policy();
        let effective = self.handle.effective();
        let now = self.handle.now();
        let next = effective.next_expiry;
        PolicyView {
            effective: effective_view(&effective),
            layers: policy
                .layers()
                .iter()
                .map(|l| LayerView {
                    layer: LayerSpec::from(l),
                    active: l.is_active_at(now),
                })
                .collect(),
            document: held.map(|h| HeldDocument {
                version: h.doc.version,
                issued_at: h.doc.issued_at,
                pod: h.doc.pod.clone(),
                applied_at: Some(h.applied_at),
            }),
            next_expiry: next,
            after_next_expiry: next.map(|at| effective_view(&policy.effective_at(at))),
            generation: self.handle.generation(),
            trusted_keys: Some(
                self.keys
                    .current()
                    .map(|keys| keys.ids().map(|id| id.to_string()).collect())
                    .unwrap_or_default(),
            ),
            read_at: Some(now),
            scope: ViewScope::Full,
            unchanged,
            replays: self
                .replays
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone(),
            recorder: Some({
                let r = self
                    .handle
                    .recorder()
                    .stats(now.duration_since(UNIX_EPOCH).unwrap_or_default());
                RecorderView {
                    bytes: r.bytes as u64,
                    max_bytes: r.max_bytes as u64,
                    lines: r.lines as u64,
                    oldest: r.oldest,
                    expired: r.expired,
                }
            }),
        }
    }
}

/// What a peer off the pod is shown: the effective directives and their sources; each
/// layer's source, priority, expiry and whether it is in force; the held document's
/// version and times; the next expiry and what the directives become then; the
/// generation. Left out: each layer's settings and reason (free text written during an
/// incident), the pod's identity in the document, the structured copies of the
/// directives.
fn reduced(view: PolicyView) -> PolicyView {
    let effective = |e: EffectiveView| EffectiveView {
        directives: e.directives,
        sources: e.sources,
        ..EffectiveView::default()
    };
    PolicyView {
        effective: effective(view.effective),
        layers: view
            .layers
            .into_iter()
            .map(|l| LayerView {
                layer: LayerSpec {
                    expires_at: l.layer.expires_at,
                    ..LayerSpec::from_directives(
                        &l.layer.source,
                        l.layer.priority,
                        Default::default(),
                    )
                },
                active: l.active,
            })
            .collect(),
        document: view.document.map(|d| HeldDocument {
            pod: wire::PodRef::default(),
            ..d
        }),
        after_next_expiry: view.after_next_expiry.map(effective),
        scope: ViewScope::Reduced,
        ..view
    }
}

/// The effective policy as directives and structured.
fn effective_view(e: &EffectivePolicy) -> EffectiveView {
    let spec = LayerSpec::from_directives("effective", 0, e.directives.clone());
    EffectiveView {
        directives: e.to_string(),
        sources: e.sources.clone(),
        default_level: spec.default_level,
        targets: spec.targets,
        always_keep: spec.always_keep,
        record: spec.record,
        sampling: spec.sampling,
        burst: spec.burst,
        max_bytes_per_second: spec.max_bytes_per_second,
    }
}

/// `d` as people read it: `6y 12d`, `3d 4h`, `2h 5m`, `4m 10s`, `1.5s`.
fn format_duration(d: Duration) -> String {
    let s = d.as_secs();
    let (y, day, h, m) = (s / 31_557_600, s / 86_400, s / 3_600, s / 60);
    match () {
        _ if y > 0 => format!("{y}y {}d", (s % 31_557_600) / 86_400),
        _ if day > 0 => format!("{day}d {}h", (s % 86_400) / 3_600),
        _ if h > 0 => format!("{h}h {}m", (s % 3_600) / 60),
        _ if m > 0 => format!("{m}m {}s", s % 60),
        _ => format!("{:.1}s", d.as_secs_f64()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_peers_see_the_whole_view() {
        for local in ["127.0.0.1", "127.8.9.10", "::1", "::ffff:127.0.0.1"] {
            let peer = local.parse().unwrap();
            assert_eq!(Viewer::of(peer, true, false), Viewer::Local, "{local}");
            // Not trusting loopback (a mesh's sidecar connects from it): a peer.
            assert_eq!(Viewer::of(peer, false, false), Viewer::Network, "{local}");
            assert_eq!(Viewer::of(peer, false, true), Viewer::Signer, "{local}");
        }
        for network in [
            "10.1.2.3",
            "192.0.2.2",
            "0.0.0.0",
            "fe80::1",
            "::ffff:10.0.0.1",
        ] {
            let peer = network.parse().unwrap();
            assert_eq!(Viewer::of(peer, true, false), Viewer::Network, "{network}");
            assert_eq!(Viewer::of(peer, true, true), Viewer::Signer, "{network}");
        }
    }

    #[test]
    fn routes() {
        assert_eq!(Route::of("GET", "/logpolicy"), Route::GetPolicy);
        assert_eq!(Route::of("PUT", "/logpolicy"), Route::PutPolicy);
        assert_eq!(
            Route::of("POST", "/logpolicy"),
            Route::MethodNotAllowed("GET, HEAD, PUT, DELETE")
        );
        assert_eq!(
            Route::of("PUT", "/metrics"),
            Route::MethodNotAllowed("GET, HEAD")
        );
        assert_eq!(Route::of("GET", "/logpolicy/"), Route::NotFound);
        assert_eq!(Route::of("GET", "/logpolicy/sites"), Route::GetSites);
        assert_eq!(Route::of("HEAD", "/logpolicy/sites"), Route::GetSites);
        assert_eq!(
            Route::of("PUT", "/logpolicy/sites"),
            Route::MethodNotAllowed("GET, HEAD")
        );
        assert_eq!(Route::of("GET", "/logpolicy/sites/"), Route::NotFound);
        assert!(!Route::GetSites.takes_body());
        assert!(Route::of("DELETE", "/logpolicy").takes_body());
    }
}
