//! `/metrics` with `--metrics-auth token` under attack, on a paused clock, with the real
//! `TokenAccess` and `Endpoints` against a scripted API server that answers each review
//! call in 10 ms: 2,000 requests a second with made-up tokens for 5 minutes leave every
//! scrape of the real scraper (every 15 s) answered 200 at once, the flood's requests
//! that find every review slot busy answered 503 at once, and at most one warning line
//! per 10 s. An API server that stops answering leaves an allowed token allowed for the
//! grace period, and no longer; a renewal that says "no" takes effect at once.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure is a test failure

mod fixtures;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fixtures::{answer, ApiServerVerifier};
use hyper::{Method, Request};
use logpolicy_operator::access::{
    TokenAccess, ALLOWED_GRACE, ALLOWED_TTL, MAX_REVIEWS_IN_FLIGHT, RENEW_AFTER, WARN_EVERY,
};
use logpolicy_operator::http::{Endpoints, PodsView};
use logpolicy_operator::metrics::Metrics;
use serde_json::json;
use tokio::time::Instant;

const TOKEN_REVIEWS: &str = "/apis/authentication.k8s.io/v1/tokenreviews";
const ACCESS_REVIEWS: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
const PROMETHEUS: &str = "system:serviceaccount:monitoring:prometheus";
const SCRAPE_TOKEN: &str = "the-scrapers-token";
/// How long the scripted API server takes to answer each call.
const REVIEW_TIME: Duration = Duration::from_millis(10);

fn remote() -> IpAddr {
    IpAddr::from([10, 1, 2, 3])
}

fn endpoints() -> (Endpoints, ApiServerVerifier) {
    let (client, api) = fixtures::client();
    let access = Arc::new(TokenAccess::default());
    access.set_client(client);
    let (source, views) = logpolicy_operator::controller::pod_views();
    source.answer_with(Vec::new());
    let endpoints = Endpoints::new(Arc::default(), Metrics::default().registry(), views)
        .pods_view(PodsView::Local)
        .token_access(access);
    (endpoints, api)
}

async fn status(endpoints: &Endpoints, token: &str) -> u16 {
    let request = Request::builder()
        .method(Method::GET)
        .uri("/metrics")
        .header(hyper::header::AUTHORIZATION, format!("Bearer {token}"))
        .body(())
        .unwrap();
    endpoints
        .respond(&request, remote())
        .await
        .status()
        .as_u16()
}

/// What the scripted API server was asked.
#[derive(Debug, Default)]
struct Asked {
    token_reviews: AtomicU64,
    scraper_reviews: AtomicU64,
    access_reviews: AtomicU64,
    most_at_once: AtomicU64,
    now: AtomicU64,
}

/// How the scripted API server answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Every call in [`REVIEW_TIME`]: the scraper's token is Prometheus's, which may
    /// get /metrics; any other token is unknown.
    Answer,
    /// The scraper's token is still Prometheus's, who may no longer get /metrics.
    Deny,
    /// No answer to any call.
    Hang,
}

/// Answers the client's reviews until the client is gone or calls stop for a minute.
fn serve_reviews(
    mut api: ApiServerVerifier,
    asked: Arc<Asked>,
    mode: Arc<Mutex<Mode>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Some((call, send)) = api.next_call_within(Duration::from_secs(60)).await {
            assert_eq!(call.method, Method::POST, "{call:#?}");
            let mode = *mode.lock().unwrap();
            if mode == Mode::Hang {
                held.push(send);
                continue;
            }
            let mut reply = call.body.clone();
            match call.path.as_str() {
                TOKEN_REVIEWS => {
                    asked.token_reviews.fetch_add(1, Ordering::Relaxed);
                    let token = call.body["spec"]["token"].as_str().unwrap().to_owned();
                    reply["status"] = if token == SCRAPE_TOKEN {
                        asked.scraper_reviews.fetch_add(1, Ordering::Relaxed);
                        json!({"authenticated": true, "user": {"username": PROMETHEUS}})
                    } else {
                        json!({"authenticated": false, "error": "invalid bearer token"})
                    };
                }
                ACCESS_REVIEWS => {
                    asked.access_reviews.fetch_add(1, Ordering::Relaxed);
                    assert_eq!(call.body["spec"]["user"], json!(PROMETHEUS));
                    reply["status"] = json!({"allowed": mode == Mode::Answer});
                }
                other => panic!("an unexpected call: POST {other}"),
            }
            let at_once = asked.now.fetch_add(1, Ordering::Relaxed) + 1;
            asked.most_at_once.fetch_max(at_once, Ordering::Relaxed);
            let asked = asked.clone();
            tokio::spawn(async move {
                tokio::time::sleep(REVIEW_TIME).await;
                asked.now.fetch_sub(1, Ordering::Relaxed);
                send.send_response(answer(201, &reply));
            });
        }
    })
}

/// The warning lines the operator logs, by the thread that logged them (each test runs
/// on a current-thread runtime of its own), with the time of that test's clock. The
/// process's global subscriber: a scoped one would race with the other test's thread
/// for the callsites' cached interest.
#[derive(Debug, Default, Clone)]
struct Warnings(Arc<Mutex<Vec<(std::thread::ThreadId, Instant)>>>);

fn warnings() -> &'static Warnings {
    static INSTALLED: std::sync::OnceLock<Warnings> = std::sync::OnceLock::new();
    INSTALLED.get_or_init(|| {
        let warnings = Warnings::default();
        tracing::subscriber::set_global_default(warnings.clone()).unwrap();
        warnings
    })
}

impl tracing::Subscriber for Warnings {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        *metadata.level() == tracing::Level::WARN
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        if event.metadata().target() == "logpolicy_operator" {
            let at = (std::thread::current().id(), Instant::now());
            self.0.lock().unwrap().push(at);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[tokio::test(start_paused = true)]
async fn every_scrape_gets_200_through_five_minutes_of_2000_random_tokens_a_second() {
    let warnings = warnings();
    let me = std::thread::current().id();
    let (endpoints, api) = endpoints();
    let asked = Arc::new(Asked::default());
    let server = serve_reviews(api, asked.clone(), Arc::new(Mutex::new(Mode::Answer)));

    // The scraper was scraping before the flood began.
    assert_eq!(status(&endpoints, SCRAPE_TOKEN).await, 200);
    let started = Instant::now();
    let flood_for = Duration::from_secs(5 * 60);

    // The flood: 2 requests every millisecond, each with a token never seen before.
    let flooded: Arc<Mutex<BTreeMap<u16, u64>>> = Arc::default();
    let slowest = Arc::new(AtomicU64::new(0));
    let flood = {
        let (endpoints, flooded, slowest) = (endpoints.clone(), flooded.clone(), slowest.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(1));
            let mut n = 0u64;
            for _ in 0..flood_for.as_millis() {
                tick.tick().await;
                for _ in 0..2 {
                    n += 1;
                    let (endpoints, flooded, slowest) =
                        (endpoints.clone(), flooded.clone(), slowest.clone());
                    tokio::spawn(async move {
                        let sent = Instant::now();
                        let status = status(&endpoints, &format!("made-up-{n}")).await;
                        let took = sent.elapsed().as_millis() as u64;
                        slowest.fetch_max(took, Ordering::Relaxed);
                        *flooded.lock().unwrap().entry(status).or_default() += 1;
                    });
                }
            }
            n
        })
    };

    // The scraper, every 15 s through the flood: each scrape answered 200 at once.
    let mut scrapes = 0;
    while started.elapsed() < flood_for {
        tokio::time::sleep(Duration::from_secs(15)).await;
        let sent = Instant::now();
        let status = status(&endpoints, SCRAPE_TOKEN).await;
        assert_eq!(
            (status, sent.elapsed()),
            (200, Duration::ZERO),
            "the scrape at {:?} into the flood",
            started.elapsed()
        );
        scrapes += 1;
    }
    let sent = flood.await.unwrap();
    // The flood's last requests finish within a review.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let flooded = flooded.lock().unwrap().clone();
    let slowest = slowest.load(Ordering::Relaxed);
    let warned: Vec<Instant> = warnings
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|(thread, _)| *thread == me)
        .map(|(_, at)| *at)
        .collect();
    let reviews = asked.token_reviews.load(Ordering::Relaxed);
    let scraper_reviews = asked.scraper_reviews.load(Ordering::Relaxed);
    eprintln!(
        "{sent} flood requests in {flood_for:?}: {flooded:?}; slowest {slowest} ms; \
         {reviews} token reviews ({scraper_reviews} of the scraper's), at most {} calls \
         at once; {scrapes} scrapes, all 200; {} warning lines",
        asked.most_at_once.load(Ordering::Relaxed),
        warned.len()
    );

    assert_eq!(scrapes, 20);
    assert_eq!(sent, 600_000);
    assert_eq!(
        flooded.values().sum::<u64>(),
        sent,
        "every request answered"
    );
    // Each made-up token is either reviewed (401) or finds every slot busy (503 at
    // once); no request waits for a slot.
    assert_eq!(
        flooded.keys().copied().collect::<Vec<_>>(),
        [401, 503],
        "{flooded:?}"
    );
    assert!(
        slowest <= REVIEW_TIME.as_millis() as u64,
        "a flood request took {slowest} ms"
    );
    // The slots bound the API server's load: 4 reviews at a time, plus renewals.
    assert!(
        asked.most_at_once.load(Ordering::Relaxed) <= MAX_REVIEWS_IN_FLIGHT as u64 + 2,
        "{asked:?}"
    );
    // The scraper's verdict was renewed about every 45 s, in the background.
    assert!((6..=8).contains(&scraper_reviews), "{scraper_reviews}");
    // Warnings: at most one per WARN_EVERY, and the flood did not go unnoticed.
    assert!(!warned.is_empty(), "the flood went unlogged");
    for pair in warned.windows(2) {
        assert!(pair[1] - pair[0] >= WARN_EVERY, "{warned:?}");
    }
    assert!(warned.len() <= 31, "{} warning lines", warned.len());
    drop(endpoints);
    server.abort();
}

#[tokio::test(start_paused = true)]
async fn an_api_server_outage_keeps_an_allowed_scraper_for_the_grace_period_only() {
    warnings();
    let (endpoints, api) = endpoints();
    let asked = Arc::new(Asked::default());
    let mode = Arc::new(Mutex::new(Mode::Answer));
    let server = serve_reviews(api, asked.clone(), mode.clone());
    assert_eq!(status(&endpoints, SCRAPE_TOKEN).await, 200);
    let reviewed = Instant::now();

    // The API server stops answering: scrapes every 15 s go on getting 200 (past the
    // time to live, each after waiting out its review) until the grace period ends.
    *mode.lock().unwrap() = Mode::Hang;
    let mut last_200 = Duration::ZERO;
    loop {
        tokio::time::sleep(Duration::from_secs(15)).await;
        let at = reviewed.elapsed();
        match status(&endpoints, SCRAPE_TOKEN).await {
            200 => last_200 = at,
            503 => break,
            other => panic!("{other} at {at:?}"),
        }
        assert!(at < ALLOWED_TTL + ALLOWED_GRACE + Duration::from_secs(30));
    }
    assert!(
        last_200 + Duration::from_secs(30) >= ALLOWED_TTL + ALLOWED_GRACE
            && last_200 < ALLOWED_TTL + ALLOWED_GRACE,
        "the last 200 came {last_200:?} after the review"
    );

    // The API server is back: the scraper is reviewed and allowed again.
    *mode.lock().unwrap() = Mode::Answer;
    tokio::time::sleep(Duration::from_secs(15)).await;
    assert_eq!(status(&endpoints, SCRAPE_TOKEN).await, 200);

    // Its binding is removed: the renewal after RENEW_AFTER says no, and the scrape
    // after it is refused, well within the time to live of the last allowance.
    *mode.lock().unwrap() = Mode::Deny;
    tokio::time::sleep(RENEW_AFTER + Duration::from_secs(1)).await;
    assert_eq!(status(&endpoints, SCRAPE_TOKEN).await, 200);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(status(&endpoints, SCRAPE_TOKEN).await, 403);
    drop(endpoints);
    server.abort();
}
