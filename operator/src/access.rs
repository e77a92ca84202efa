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
//! binding takes effect within a minute. At most [`MAX_REVIEWS_IN_FLIGHT`] reviews run
//! at once: callers with ever new tokens cannot turn the operator into a flood of
//! reviews against the API server.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
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
/// How long a refused one (401, 403) is reused.
pub const REFUSED_TTL: Duration = Duration::from_secs(10);
/// The most verdicts cached; beyond it the one that expires first is forgotten.
pub const CACHE_CAPACITY: usize = 1024;
/// The longest both reviews of one request may take together (Prometheus' default
/// scrape timeout is 10 s).
pub const REVIEW_TIMEOUT: Duration = Duration::from_secs(5);
/// The most reviews in flight at once; further callers wait (within the timeout).
pub const MAX_REVIEWS_IN_FLIGHT: usize = 4;

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
}

/// Verdicts by token and path, each for its time to live; bounded. The clock is the
/// caller's (`now`), so that tests move it.
#[derive(Debug)]
pub struct VerdictCache {
    entries: HashMap<[u8; 32], (Verdict, Instant)>,
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
        match self.entries.get(&key) {
            Some((verdict, expires)) if now < *expires => Some(verdict.clone()),
            Some(_) => {
                self.entries.remove(&key);
                None
            }
            None => None,
        }
    }

    /// Caches `verdict` from `now` for its time to live. When full, expired entries are
    /// dropped first, then the one that expires soonest.
    pub fn insert(&mut self, token: &str, path: &str, verdict: Verdict, now: Instant) {
        let key = Self::key(token, path);
        if !self.entries.contains_key(&key) && self.entries.len() >= self.capacity {
            self.entries.retain(|_, (_, expires)| now < *expires);
            if self.entries.len() >= self.capacity {
                let soonest = self
                    .entries
                    .iter()
                    .min_by_key(|(_, (_, expires))| *expires)
                    .map(|(k, _)| *k);
                if let Some(k) = soonest {
                    self.entries.remove(&k);
                }
            }
        }
        let expires = now + verdict.ttl();
        self.entries.insert(key, (verdict, expires));
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
    cache: Mutex<VerdictCache>,
    in_flight: Semaphore,
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
            cache: Mutex::new(VerdictCache::new(CACHE_CAPACITY)),
            in_flight: Semaphore::new(MAX_REVIEWS_IN_FLIGHT),
        }
    }
}

impl TokenAccess {
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

    /// May the bearer of `authorization` `get` `path`?
    pub async fn check(&self, authorization: Option<&HeaderValue>, path: &str) -> Check {
        let token = match bearer_token(authorization) {
            Ok(t) => t,
            Err(e) => return Check::Unauthorized(format!("{path}: {e}")),
        };
        if let Some(verdict) = self.cache().get(token, path, Instant::now()) {
            return answer(verdict, path);
        }
        let Some(client) = self.client.get() else {
            return Check::Unavailable(format!(
                "{path}: cannot check the token yet: the operator has no Kubernetes client \
                 (it is starting)"
            ));
        };
        let reviewed = tokio::time::timeout(REVIEW_TIMEOUT, async {
            let _permit = self.in_flight.acquire().await;
            review(client, token, path).await
        })
        .await;
        match reviewed {
            Ok(Ok(verdict)) => {
                self.cache()
                    .insert(token, path, verdict.clone(), Instant::now());
                answer(verdict, path)
            }
            Ok(Err(e)) => {
                let why = match &e {
                    kube::Error::Api(s) if s.code == 403 => format!(
                        "{e} (the operator's ServiceAccount needs `create` on \
                         authentication.k8s.io tokenreviews and authorization.k8s.io \
                         subjectaccessreviews)"
                    ),
                    _ => e.to_string(),
                };
                log::warn!(%path, error = %why, "cannot check a bearer token");
                Check::Unavailable(format!("{path}: cannot check the token: {why}"))
            }
            Err(_) => {
                log::warn!(%path, timeout = ?REVIEW_TIMEOUT, "the token review timed out");
                Check::Unavailable(format!(
                    "{path}: cannot check the token: the Kubernetes API did not answer \
                     within {} s",
                    REVIEW_TIMEOUT.as_secs_f64()
                ))
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

/// A TokenReview, then, for a known token, a SubjectAccessReview of `get path`.
async fn review(client: &kube::Client, token: &str, path: &str) -> Result<Verdict, kube::Error> {
    let asked = TokenReview {
        spec: TokenReviewSpec {
            token: token.to_owned(),
            // None: the API server's own audiences, which ServiceAccount tokens are for.
            audiences: None,
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
        // Later, a and c have expired: both go, and the cache never grows past 3.
        let t = t0 + Duration::from_secs(61);
        cache.insert("e", "/metrics", denied("e"), t);
        assert_eq!(cache.len(), 2);
        for i in 0..10 {
            cache.insert(&format!("x{i}"), "/metrics", allowed("x"), t);
            assert!(cache.len() <= 3);
        }
        assert_eq!(VerdictCache::new(0).capacity, 1);
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
        let access = TokenAccess::default();
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
