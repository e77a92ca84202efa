//! Who may read `/metrics` (and `/pods` when it is open to the network) with
//! `--metrics-auth token`: the caller sends `Authorization: Bearer <token>`, the API
//! server says whose token it is (a `TokenReview`) and whether that user may `get` the
//! path (a `SubjectAccessReview` with `nonResourceAttributes`), as controller-runtime's
//! `filters.WithAuthenticationAndAuthorization` and kube-rbac-proxy do. RBAC grants it
//! with a ClusterRole rule `nonResourceURLs: ["/metrics"], verbs: ["get"]` bound to the
//! scraper's ServiceAccount; the operator itself needs `create` on `tokenreviews` and
//! `subjectaccessreviews`.
//!
//! | the caller | answer |
//! |---|---|
//! | no token, another scheme, or a token the API server does not know | 401, `WWW-Authenticate: Bearer` |
//! | a known token whose user may not `get` the path | 403 |
//! | a user who may | the endpoint's own answer |
//! | the API server failed, was forbidden, or did not answer within 5 s | 503 (not cached) |
//!
//! A 503 rather than controller-runtime's 500 or kube-rbac-proxy's 401: the token may
//! well be good, and the failure is the API server's and temporary.
//!
//! Verdicts are cached per token and path (SHA-256 of both: no token is kept), allowed
//! for [`ALLOWED_TTL`], refused for [`REFUSED_TTL`], at most [`CACHE_CAPACITY`] entries,
//! so a Prometheus scraping every 15 s costs two API calls a minute and a removed
//! binding takes effect within a minute.
//!
//! A flood of made-up tokens must not lock the real scraper out:
//! - A token without a verdict gets one of [`MAX_REVIEWS_IN_FLIGHT`] review slots, or,
//!   when every slot is busy, 503 at once: callers with ever new tokens cannot queue
//!   ahead of anyone, nor turn the operator into a flood of reviews against the API
//!   server.
//! - An allowed verdict is renewed before it expires: a request served from one older
//!   than [`RENEW_AFTER`] starts its review in the background, on a slot of its own
//!   ([`MAX_RENEWALS_IN_FLIGHT`]) that new tokens never take.
//! - Past [`ALLOWED_TTL`], an allowed verdict is reviewed before it answers; when that
//!   review fails or times out, it still answers for [`ALLOWED_GRACE`] (as HTTP's
//!   `stale-if-error`): an API server outage does not cut the scrapes. A review that
//!   answers "no" takes effect at once.
//! - A full cache forgets refusals before allowances.
//! - Failures are logged at most once per [`WARN_EVERY`], each line with the number of
//!   failures it stands for since the last one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use hyper::header::HeaderValue;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::log;

/// How long an allowed verdict is reused.
pub const ALLOWED_TTL: Duration = Duration::from_secs(60);
/// How old an allowed verdict is when a request it answers also starts its renewal.
pub const RENEW_AFTER: Duration = Duration::from_secs(45);
/// How long past [`ALLOWED_TTL`] an allowed verdict still answers while the API server
/// cannot review it again (errors, timeouts).
pub const ALLOWED_GRACE: Duration = Duration::from_secs(5 * 60);
/// How long a refused one (401, 403) is reused.
pub const REFUSED_TTL: Duration = Duration::from_secs(10);
/// The most verdicts cached; beyond it the one that expires first is forgotten.
pub const CACHE_CAPACITY: usize = 1024;
/// The longest both reviews of one request may take together (Prometheus' default
/// scrape timeout is 10 s).
pub const REVIEW_TIMEOUT: Duration = Duration::from_secs(5);
/// The most reviews of tokens without a verdict in flight at once; a further one is
/// answered 503 at once.
pub const MAX_REVIEWS_IN_FLIGHT: usize = 4;
/// The most renewals of allowed verdicts in flight at once (beside the reviews above);
/// a further one waits, within [`REVIEW_TIMEOUT`].
pub const MAX_RENEWALS_IN_FLIGHT: usize = 2;
/// At most one warning line per this long about failed reviews.
pub const WARN_EVERY: Duration = Duration::from_secs(10);

/// How the operator's endpoints check their callers (`--metrics-auth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum MetricsAuth {
    /// A bearer token, checked with a TokenReview and a SubjectAccessReview.
    #[default]
    Token,
    /// No check: anyone who reaches the port reads `/metrics`.
    #[value(name = "none")]
    Open,
}

/// Why a request's `Authorization` header holds no usable bearer token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// No `Authorization` header.
    #[error("no Authorization header: send `Authorization: Bearer <token>`")]
    Missing,
    /// Another scheme than `Bearer`.
    #[error("the Authorization header's scheme is {0:?}, not Bearer")]
    NotBearer(String),
    /// `Bearer` and nothing after it.
    #[error("the Authorization header holds no token after Bearer")]
    Empty,
    /// Characters a token cannot hold (not visible ASCII, or spaces inside).
    #[error("the bearer token holds characters a token cannot hold")]
    Malformed,
}

/// The token of an `Authorization: Bearer <token>` header (the scheme in any case, as
/// RFC 9110 has it; spaces around the token are ignored).
pub fn bearer_token(header: Option<&HeaderValue>) -> Result<&str, TokenError> {
    let header = header.ok_or(TokenError::Missing)?;
    let text = header.to_str().map_err(|_| TokenError::Malformed)?.trim();
    let (scheme, token) = text.split_once(' ').unwrap_or((text, ""));
    if !scheme.eq_ignore_ascii_case("bearer") {
        let shown: String = scheme.chars().take(20).collect();
        return Err(TokenError::NotBearer(shown));
    }
    let token = token.trim();
    if token.is_empty() {
        return Err(TokenError::Empty);
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(TokenError::Malformed);
    }
    Ok(token)
}

/// What the API server said of a token for one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The token is `user`'s, and `user` may `get` the path.
    Allowed {
        /// The user name (`system:serviceaccount:NS:NAME`).
        user: String,
    },
    /// The token is `user`'s, and `user` may not.
    Denied {
        /// The user name.
        user: String,
        /// The authorizer's reason, if it gave one.
        reason: String,
    },
    /// The API server does not know the token (or it expired).
    Unauthenticated {
        /// The TokenReview's error, if it gave one.
        reason: String,
    },
}

impl Verdict {
    fn ttl(&self) -> Duration {
        match self {
            Verdict::Allowed { .. } => ALLOWED_TTL,
            Verdict::Denied { .. } | Verdict::Unauthenticated { .. } => REFUSED_TTL,
        }
    }

    /// How long it is kept: its time to live, and for an allowance the grace after it.
    fn kept(&self) -> Duration {
        match self {
            Verdict::Allowed { .. } => ALLOWED_TTL + ALLOWED_GRACE,
            Verdict::Denied { .. } | Verdict::Unauthenticated { .. } => REFUSED_TTL,
        }
    }

    fn allowed(&self) -> bool {
        matches!(self, Verdict::Allowed { .. })
    }
}

/// What the cache holds for a token and path at a time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// A verdict within its time to live. `renew`: an allowance past [`RENEW_AFTER`]
    /// whose renewal the caller is to start (one caller at a time gets `true`, until
    /// [`VerdictCache::insert`] or [`VerdictCache::renewal_failed`]).
    Fresh {
        /// The verdict.
        verdict: Verdict,
        /// Start its renewal.
        renew: bool,
    },
    /// An allowance past its time to live, within [`ALLOWED_GRACE`]: review it again,
    /// and answer with it only if that review cannot be had.
    Stale(Verdict),
    /// Nothing usable.
    Miss,
}

#[derive(Debug)]
struct Entry {
    verdict: Verdict,
    reviewed: Instant,
    renewing: bool,
}

impl Entry {
    fn gone(&self, now: Instant) -> bool {
        now >= self.reviewed + self.verdict.kept()
    }
}

/// Verdicts by token and path, each for its time to live; bounded. The clock is the
/// caller's (`now`), so that tests move it.
#[derive(Debug)]
pub struct VerdictCache {
    entries: HashMap<[u8; 32], Entry>,
    capacity: usize,
}

impl VerdictCache {
    /// An empty cache of at most `capacity` verdicts (at least 1).
    pub fn new(capacity: usize) -> Self {
        VerdictCache {
            entries: HashMap::new(),
            capacity: capacity.max(1),
        }
    }

    fn key(token: &str, path: &str) -> [u8; 32] {
        let mut hash = Sha256::new();
        hash.update(token.as_bytes());
        hash.update([0]);
        hash.update(path.as_bytes());
        hash.finalize().into()
    }

    /// The verdict for `token` and `path` if one was cached and has not expired at `now`.
    pub fn get(&mut self, token: &str, path: &str, now: Instant) -> Option<Verdict> {
        let key = Self::key(token, path);
        let entry = self.entries.get(&key)?;
        if entry.gone(now) {
            self.entries.remove(&key);
            return None;
        }
        (now < entry.reviewed + entry.verdict.ttl()).then(|| entry.verdict.clone())
    }

    /// What the cache holds for `token` and `path` at `now` (see [`Lookup`]).
    pub fn lookup(&mut self, token: &str, path: &str, now: Instant) -> Lookup {
        let key = Self::key(token, path);
        let Some(entry) = self.entries.get_mut(&key) else {
            return Lookup::Miss;
        };
        if entry.gone(now) {
            self.entries.remove(&key);
            return Lookup::Miss;
        }
        let age = now.saturating_duration_since(entry.reviewed);
        if age >= entry.verdict.ttl() {
            return Lookup::Stale(entry.verdict.clone());
        }
        let renew = entry.verdict.allowed() && age >= RENEW_AFTER && !entry.renewing;
        entry.renewing |= renew;
        Lookup::Fresh {
            verdict: entry.verdict.clone(),
            renew,
        }
    }

    /// The renewal that [`VerdictCache::lookup`] handed out for `token` and `path` got
    /// no verdict: the next request past [`RENEW_AFTER`] starts another.
    pub fn renewal_failed(&mut self, token: &str, path: &str) {
        if let Some(entry) = self.entries.get_mut(&Self::key(token, path)) {
            entry.renewing = false;
        }
    }

    /// Caches `verdict` from `now` for its time to live. When full, entries past their
    /// time are dropped first, then the refusal that expires soonest, and only when
    /// every entry is an allowance, the allowance that expires soonest.
    pub fn insert(&mut self, token: &str, path: &str, verdict: Verdict, now: Instant) {
        let key = Self::key(token, path);
        if !self.entries.contains_key(&key) && self.entries.len() >= self.capacity {
            self.entries.retain(|_, entry| !entry.gone(now));
            if self.entries.len() >= self.capacity {
                let soonest = self
                    .entries
                    .iter()
                    .min_by_key(|(_, e)| (e.verdict.allowed(), e.reviewed + e.verdict.kept()))
                    .map(|(k, _)| *k);
                if let Some(k) = soonest {
                    self.entries.remove(&k);
                }
            }
        }
        let entry = Entry {
            verdict,
            reviewed: now,
            renewing: false,
        };
        self.entries.insert(key, entry);
    }

    /// How many verdicts it holds (expired ones included until they are looked up or
    /// pushed out).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The answer to one request for a guarded path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// Serve it: `user` may.
    Allowed {
        /// Who asked.
        user: String,
    },
    /// 401: no usable token, or one the API server does not know.
    Unauthorized(String),
    /// 403: the token's user may not `get` the path.
    Forbidden(String),
    /// 503: the token could not be checked now.
    Unavailable(String),
}

/// Checks bearer tokens against the API server, with a cache. The client comes later
/// than the HTTP server starts ([`TokenAccess::set_client`]); until then guarded paths
/// answer 503.
pub struct TokenAccess {
    client: OnceLock<kube::Client>,
    audiences: Vec<String>,
    cache: Mutex<VerdictCache>,
    in_flight: Semaphore,
    renewals: Semaphore,
    warnings: Mutex<WarnLimit>,
}

/// At most one warning per [`WARN_EVERY`]; the next one says how many it stands for.
#[derive(Debug, Default)]
struct WarnLimit {
    last: Option<Instant>,
    unlogged: u64,
}

impl std::fmt::Debug for TokenAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenAccess")
            .field("client", &self.client.get().map(|_| "set"))
            .field("cached", &self.cache().len())
            .finish()
    }
}

impl Default for TokenAccess {
    fn default() -> Self {
        TokenAccess {
            client: OnceLock::new(),
            audiences: Vec::new(),
            cache: Mutex::new(VerdictCache::new(CACHE_CAPACITY)),
            in_flight: Semaphore::new(MAX_REVIEWS_IN_FLIGHT),
            renewals: Semaphore::new(MAX_RENEWALS_IN_FLIGHT),
            warnings: Mutex::new(WarnLimit::default()),
        }
    }
}

/// Why a review gave no verdict.
enum Failed {
    Api(kube::Error),
    Timeout,
}

impl Failed {
    fn why(&self) -> String {
        match self {
            Failed::Api(e @ kube::Error::Api(s)) if s.code == 403 => format!(
                "{e} (the operator's ServiceAccount needs `create` on \
                 authentication.k8s.io tokenreviews and authorization.k8s.io \
                 subjectaccessreviews)"
            ),
            Failed::Api(e) => e.to_string(),
            Failed::Timeout => format!(
                "the Kubernetes API did not answer within {} s",
                REVIEW_TIMEOUT.as_secs_f64()
            ),
        }
    }
}

impl TokenAccess {
    /// Token access that accepts only tokens for one of `audiences`
    /// (`--metrics-token-audiences`, as kube-rbac-proxy's `--auth-token-audiences`):
    /// the TokenReview asks for them, and a token the API server says is for none of
    /// them is unauthenticated (401). A token minted for such an audience (a projected
    /// ServiceAccount token with `audience: logpolicy-operator`) is refused by the API
    /// server itself, so a token that a scraper sends to `/metrics` cannot be used
    /// against the API server. Empty: the API server's own audiences, which a
    /// ServiceAccount's default token is for.
    pub fn with_audiences(audiences: Vec<String>) -> Self {
        let audiences = audiences
            .into_iter()
            .map(|a| a.trim().to_owned())
            .filter(|a| !a.is_empty())
            .collect();
        TokenAccess {
            audiences,
            ..TokenAccess::default()
        }
    }

    /// Reviews through `client` from now on (the first client set stays).
    pub fn set_client(&self, client: kube::Client) {
        let _ = self.client.set(client);
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, VerdictCache> {
        // A panic while holding the lock cannot leave the map half-written in a way that
        // matters: keep using it.
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Logs that a token could not be checked, at most once per [`WARN_EVERY`].
    fn warn(&self, path: &str, why: &str) {
        let now = Instant::now();
        let mut limit = self
            .warnings
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if limit.last.is_some_and(|t| now < t + WARN_EVERY) {
            limit.unlogged += 1;
            return;
        }
        let failures = std::mem::take(&mut limit.unlogged) + 1;
        limit.last = Some(now);
        drop(limit);
        log::warn!(
            %path,
            error = %why,
            failures,
            "cannot check bearer tokens (failures: since the last such line)"
        );
    }

    /// A review of `token` for `path`, first waiting for one of `slots` if given, all
    /// within [`REVIEW_TIMEOUT`]; a verdict is cached.
    async fn review_on(
        &self,
        slots: Option<&Semaphore>,
        client: &kube::Client,
        token: &str,
        path: &str,
    ) -> Result<Verdict, Failed> {
        let reviewed = tokio::time::timeout(REVIEW_TIMEOUT, async {
            let _permit = match slots {
                Some(slots) => slots.acquire().await.ok(),
                None => None,
            };
            review(client, token, path, &self.audiences).await
        })
        .await;
        let verdict = reviewed
            .map_err(|_| Failed::Timeout)?
            .map_err(Failed::Api)?;
        self.cache()
            .insert(token, path, verdict.clone(), Instant::now());
        Ok(verdict)
    }

    /// May the bearer of `authorization` `get` `path`?
    pub async fn check(self: &Arc<Self>, authorization: Option<&HeaderValue>, path: &str) -> Check {
        let token = match bearer_token(authorization) {
            Ok(t) => t,
            Err(e) => return Check::Unauthorized(format!("{path}: {e}")),
        };
        let cached = self.cache().lookup(token, path, Instant::now());
        let Some(client) = self.client.get() else {
            return Check::Unavailable(format!(
                "{path}: cannot check the token yet: the operator has no Kubernetes client \
                 (it is starting)"
            ));
        };
        match cached {
            Lookup::Fresh { verdict, renew } => {
                if renew {
                    let (access, client) = (Arc::clone(self), client.clone());
                    let (token, path) = (token.to_owned(), path.to_owned());
                    tokio::spawn(async move {
                        let renewed = access
                            .review_on(Some(&access.renewals), &client, &token, &path)
                            .await;
                        if let Err(e) = renewed {
                            access.cache().renewal_failed(&token, &path);
                            access.warn(&path, &e.why());
                        }
                    });
                }
                answer(verdict, path)
            }
            Lookup::Stale(verdict) => {
                match self
                    .review_on(Some(&self.renewals), client, token, path)
                    .await
                {
                    Ok(verdict) => answer(verdict, path),
                    Err(e) => {
                        self.warn(
                            path,
                            &format!("{} (answered with the last verdict)", e.why()),
                        );
                        answer(verdict, path)
                    }
                }
            }
            Lookup::Miss => {
                let Ok(_permit) = self.in_flight.try_acquire() else {
                    let why = format!(
                        "all {MAX_REVIEWS_IN_FLIGHT} review slots are busy (many new \
                         tokens at once)"
                    );
                    self.warn(path, &why);
                    return Check::Unavailable(format!(
                        "{path}: cannot check the token now: {why}; try again"
                    ));
                };
                match self.review_on(None, client, token, path).await {
                    Ok(verdict) => answer(verdict, path),
                    Err(e) => {
                        let why = e.why();
                        self.warn(path, &why);
                        Check::Unavailable(format!("{path}: cannot check the token: {why}"))
                    }
                }
            }
        }
    }
}

fn answer(verdict: Verdict, path: &str) -> Check {
    match verdict {
        Verdict::Allowed { user } => Check::Allowed { user },
        Verdict::Unauthenticated { reason } => Check::Unauthorized(format!(
            "{path}: the API server does not accept this token{}",
            if reason.is_empty() {
                String::new()
            } else {
                format!(": {reason}")
            }
        )),
        Verdict::Denied { user, reason } => Check::Forbidden(format!(
            "{path}: {user} may not get {path}{}; bind it to a ClusterRole with \
             nonResourceURLs [\"{path}\"] and verbs [\"get\"] (the chart's \
             RELEASE-logpolicy-operator-metrics-reader for /metrics)",
            if reason.is_empty() {
                String::new()
            } else {
                format!(" ({reason})")
            }
        )),
    }
}

/// A TokenReview (for `audiences`, if any), then, for a known token, a
/// SubjectAccessReview of `get path`.
async fn review(
    client: &kube::Client,
    token: &str,
    path: &str,
    audiences: &[String],
) -> Result<Verdict, kube::Error> {
    let asked = TokenReview {
        spec: TokenReviewSpec {
            token: token.to_owned(),
            // None: the API server's own audiences, which ServiceAccount tokens are for.
            audiences: (!audiences.is_empty()).then(|| audiences.to_vec()),
        },
        ..TokenReview::default()
    };
    let tokens: Api<TokenReview> = Api::all(client.clone());
    let status = tokens
        .create(&PostParams::default(), &asked)
        .await?
        .status
        .unwrap_or_default();
    let user = status.user.unwrap_or_default();
    let name = user.username.unwrap_or_default();
    if status.authenticated != Some(true) || name.is_empty() {
        return Ok(Verdict::Unauthenticated {
            reason: status.error.unwrap_or_default(),
        });
    }
    // An authenticator that does not know audiences may ignore them: the answer must
    // name one of those asked for (as the TokenReview API asks of its callers).
    let granted = status.audiences.unwrap_or_default();
    if !audiences.is_empty() && !granted.iter().any(|a| audiences.contains(a)) {
        return Ok(Verdict::Unauthenticated {
            reason: format!(
                "the token is for {granted:?}, not for {audiences:?} (--metrics-token-audiences)"
            ),
        });
    }
    let asked = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(name.clone()),
            groups: user.groups,
            uid: user.uid,
            extra: user.extra,
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some(path.to_owned()),
                verb: Some("get".to_owned()),
            }),
            resource_attributes: None,
        },
        ..SubjectAccessReview::default()
    };
    let reviews: Api<SubjectAccessReview> = Api::all(client.clone());
    let status = reviews
        .create(&PostParams::default(), &asked)
        .await?
        .status
        .unwrap_or_default();
    Ok(if status.allowed {
        Verdict::Allowed { user: name }
    } else {
        let reason = [status.reason, status.evaluation_error]
            .into_iter()
            .flatten()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("; ");
        Verdict::Denied { user: name, reason }
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a failure is a test failure
    use super::*;

    fn header(s: &str) -> HeaderValue {
        HeaderValue::from_str(s).unwrap()
    }

    #[test]
    fn a_bearer_token_is_read_from_the_header_and_anything_else_is_named() {
        for (value, token) in [
            ("Bearer abc.def-ghi_123", "abc.def-ghi_123"),
            ("bearer abc", "abc"),
            ("BEARER   abc  ", "abc"),
            ("  Bearer abc", "abc"),
        ] {
            assert_eq!(bearer_token(Some(&header(value))), Ok(token), "{value:?}");
        }
        assert_eq!(bearer_token(None), Err(TokenError::Missing));
        assert_eq!(
            bearer_token(Some(&header("Basic dXNlcjpwYXNz"))),
            Err(TokenError::NotBearer("Basic".into()))
        );
        assert_eq!(
            bearer_token(Some(&header("abc"))),
            Err(TokenError::NotBearer("abc".into()))
        );
        for empty in ["Bearer", "Bearer   ", ""] {
            let expected = if empty.is_empty() {
                TokenError::NotBearer(String::new())
            } else {
                TokenError::Empty
            };
            assert_eq!(
                bearer_token(Some(&header(empty))),
                Err(expected),
                "{empty:?}"
            );
        }
        assert_eq!(
            bearer_token(Some(&header("Bearer a b"))),
            Err(TokenError::Malformed)
        );
        let latin1 = HeaderValue::from_bytes(b"Bearer caf\xe9").unwrap();
        assert_eq!(bearer_token(Some(&latin1)), Err(TokenError::Malformed));
        // A long scheme is cut in the message.
        let long = format!("{} x", "S".repeat(100));
        assert_eq!(
            bearer_token(Some(&header(&long))),
            Err(TokenError::NotBearer("S".repeat(20)))
        );
        assert_eq!(
            TokenError::Missing.to_string(),
            "no Authorization header: send `Authorization: Bearer <token>`"
        );
    }

    fn allowed(user: &str) -> Verdict {
        Verdict::Allowed { user: user.into() }
    }

    fn denied(user: &str) -> Verdict {
        Verdict::Denied {
            user: user.into(),
            reason: String::new(),
        }
    }

    #[test]
    fn verdicts_are_kept_per_token_and_path_for_their_time_to_live() {
        let t0 = Instant::now();
        let mut cache = VerdictCache::new(16);
        cache.insert("good", "/metrics", allowed("prometheus"), t0);
        cache.insert("other", "/metrics", denied("someone"), t0);
        assert_eq!(
            cache.get("good", "/metrics", t0),
            Some(allowed("prometheus"))
        );
        // Another path or token is another question.
        assert_eq!(cache.get("good", "/pods", t0), None);
        assert_eq!(cache.get("goo", "/metrics", t0), None);
        // A refusal is forgotten sooner than an allowance.
        let later = t0 + REFUSED_TTL;
        assert_eq!(cache.get("other", "/metrics", later), None);
        assert_eq!(
            cache.get("good", "/metrics", later),
            Some(allowed("prometheus"))
        );
        assert_eq!(cache.get("good", "/metrics", t0 + ALLOWED_TTL), None);
        // Past its time to live, an allowance is kept for the grace period, to answer
        // when the API server cannot review it again; then it is gone.
        assert_eq!(
            cache.lookup("good", "/metrics", t0 + ALLOWED_TTL),
            Lookup::Stale(allowed("prometheus"))
        );
        assert_eq!(
            cache.lookup("good", "/metrics", t0 + ALLOWED_TTL + ALLOWED_GRACE),
            Lookup::Miss
        );
        assert!(cache.is_empty(), "expired entries are dropped when read");
        // A new verdict replaces the old one.
        cache.insert("good", "/metrics", denied("prometheus"), later);
        cache.insert("good", "/metrics", allowed("prometheus"), later);
        assert_eq!(cache.len(), 1);
        assert_eq!(
            cache.get("good", "/metrics", later),
            Some(allowed("prometheus"))
        );
    }

    #[test]
    fn a_full_cache_drops_expired_verdicts_then_the_one_that_expires_first() {
        let t0 = Instant::now();
        let mut cache = VerdictCache::new(3);
        cache.insert("a", "/metrics", allowed("a"), t0);
        cache.insert("b", "/metrics", denied("b"), t0);
        cache.insert("c", "/metrics", allowed("c"), t0 + Duration::from_secs(1));
        // Full: nothing expired yet, so b (expires at 10 s) goes.
        cache.insert("d", "/metrics", allowed("d"), t0 + Duration::from_secs(2));
        assert_eq!(cache.len(), 3);
        let t = t0 + Duration::from_secs(2);
        assert_eq!(cache.get("b", "/metrics", t), None);
        for k in ["a", "c", "d"] {
            assert_eq!(cache.get(k, "/metrics", t), Some(allowed(k)), "{k}");
        }
        // Later, a and c are past their grace: both go, and the cache never grows past 3.
        let t = t0 + ALLOWED_TTL + ALLOWED_GRACE + Duration::from_secs(1);
        cache.insert("e", "/metrics", denied("e"), t);
        assert_eq!(cache.len(), 2);
        for i in 0..10 {
            cache.insert(&format!("x{i}"), "/metrics", allowed("x"), t);
            assert!(cache.len() <= 3);
        }
        assert_eq!(VerdictCache::new(0).capacity, 1);
    }

    #[test]
    fn an_allowance_past_renew_after_is_handed_out_for_renewal_once() {
        let t0 = Instant::now();
        let mut cache = VerdictCache::new(4);
        cache.insert("p", "/metrics", allowed("p"), t0);
        cache.insert("x", "/metrics", denied("x"), t0);
        let fresh = |renew| Lookup::Fresh {
            verdict: allowed("p"),
            renew,
        };
        assert_eq!(cache.lookup("p", "/metrics", t0), fresh(false));
        let due = t0 + RENEW_AFTER;
        // The first request past RENEW_AFTER starts the renewal; the others do not.
        assert_eq!(cache.lookup("p", "/metrics", due), fresh(true));
        assert_eq!(cache.lookup("p", "/metrics", due), fresh(false));
        // A renewal that failed is handed out again.
        cache.renewal_failed("p", "/metrics");
        assert_eq!(cache.lookup("p", "/metrics", due), fresh(true));
        // A renewed verdict starts anew.
        cache.insert("p", "/metrics", allowed("p"), due);
        assert_eq!(cache.lookup("p", "/metrics", due), fresh(false));
        // Refusals are never renewed: they expire.
        assert_eq!(
            cache.lookup("x", "/metrics", t0 + Duration::from_secs(9)),
            Lookup::Fresh {
                verdict: denied("x"),
                renew: false
            }
        );
        assert_eq!(
            cache.lookup("x", "/metrics", t0 + REFUSED_TTL),
            Lookup::Miss
        );
    }

    #[test]
    fn a_full_cache_forgets_refusals_before_an_allowance_that_expires_sooner() {
        let t0 = Instant::now();
        let mut cache = VerdictCache::new(2);
        cache.insert("p", "/metrics", allowed("p"), t0);
        // Refusals that expire after the allowance's last moment.
        let late = t0 + ALLOWED_TTL + ALLOWED_GRACE - Duration::from_secs(1);
        cache.insert("x1", "/metrics", denied("x1"), late);
        cache.insert("x2", "/metrics", denied("x2"), late);
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.lookup("x1", "/metrics", late), Lookup::Miss);
        assert!(matches!(
            cache.lookup("p", "/metrics", late),
            Lookup::Stale(Verdict::Allowed { .. })
        ));
    }

    #[test]
    fn no_token_is_kept_in_the_cache() {
        let mut cache = VerdictCache::new(4);
        cache.insert("secret-token", "/metrics", allowed("p"), Instant::now());
        let dump = format!("{cache:?}");
        assert!(!dump.contains("secret-token"), "{dump}");
    }

    #[tokio::test]
    async fn without_a_client_a_good_looking_token_gets_503_and_no_token_401() {
        let access = Arc::new(TokenAccess::default());
        assert!(matches!(
            access.check(None, "/metrics").await,
            Check::Unauthorized(m) if m.contains("no Authorization header")
        ));
        assert!(matches!(
            access.check(Some(&header("Bearer x")), "/metrics").await,
            Check::Unavailable(m) if m.contains("no Kubernetes client")
        ));
    }
}
