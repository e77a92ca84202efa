//! `/metrics` carries `logpolicy_target_lines_total` and `logpolicy_target_bytes_total`
//! by target and level for at most N targets (`LOGPOLICY_METRIC_TARGETS`, here 2), the
//! biggest in bytes when a place was free; the rest under `target="other"`, and
//! logpolicy's own lines under `target="logpolicy"`, so that the bytes add up to the
//! writer's. A target once listed stays listed when others grow bigger: series do not
//! come and go. The values are the ledger's rows summed by target and level.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin_fixture;
mod child;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use admin_fixture::{pod_config, send};
use logpolicy::admin::{AdminConfig, METRIC_TARGETS_ENV};
use logpolicy::wire::{self, SigningKey};
use logpolicy::writer::{Output, WriterConfig};

const TEST: &str = "metrics_name_a_bounded_set_of_targets_that_stays_listed";

/// Sample lines `name{labels} value` of the family `name`, by their labels (`""` for
/// a series without labels).
fn family(text: &str, name: &str) -> BTreeMap<String, f64> {
    assert_eq!(text.lines().last(), Some("# EOF"), "{text}");
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let rest = series.strip_prefix(name)?;
            let labels = match rest {
                "" => "",
                _ => rest.strip_prefix('{')?.strip_suffix('}')?,
            };
            Some((labels.to_owned(), value.parse().unwrap()))
        })
        .collect()
}

/// The targets of a family's series.
fn targets(series: &BTreeMap<String, f64>) -> BTreeSet<String> {
    series
        .keys()
        .map(|labels| {
            let rest = labels.strip_prefix("target=\"").unwrap();
            rest[..rest.find('"').unwrap()].to_owned()
        })
        .collect()
}

#[test]
fn metrics_name_a_bounded_set_of_targets_that_stays_listed() {
    if child::is_child() {
        // The setting from the environment: what from_env made of it, on stdout.
        match AdminConfig::from_env() {
            Ok(config) => println!("metric_targets={}", config.unwrap().metric_targets_ref()),
            Err(e) => println!("error={e}"),
        }
        return;
    }
    let key = SigningKey::from_bytes(&[5; 32]);
    let public = wire::encode_public_key(&key.verifying_key());
    let from_env = |value: &str| {
        child::stdout(
            TEST,
            &[
                ("LOGPOLICY_ADMIN_ADDR", "127.0.0.1:0"),
                ("LOGPOLICY_TRUSTED_KEYS", &public),
                ("LOGPOLICY_ADMIN_ANY_POD", "1"),
                (METRIC_TARGETS_ENV, value),
            ],
        )
    };
    assert!(from_env("2").contains("metric_targets=2\n"));
    assert!(from_env("0").contains("metric_targets=0\n"));
    assert!(
        from_env("").contains("metric_targets=50\n"),
        "unset: the default"
    );
    let bad = from_env("lots");
    assert!(
        bad.contains("error=LOGPOLICY_METRIC_TARGETS: invalid value \"lots\""),
        "{bad}"
    );

    let file = std::env::temp_dir().join(format!("metric-targets-{}.log", std::process::id()));
    let (dispatch, logging) = logpolicy::Builder::new()
        .directives("info,@sample(gamma)=1/2")
        .writer(WriterConfig::new(Output::File(file.clone())))
        .admin(pod_config(&key).metric_targets(2))
        .build()
        .unwrap();
    let addr = logging.admin_addr().unwrap();
    let scrape = || {
        assert!(logging.flush(Duration::from_secs(5)));
        let r = send(addr, "GET", "/metrics", &[], b"");
        assert_eq!(r.status, 200, "{r:?}");
        (
            family(&r.body, "logpolicy_target_lines_total"),
            family(&r.body, "logpolicy_target_bytes_total"),
            r.body,
        )
    };
    let log = |target: &str, n: usize, len: usize| {
        let payload = "x".repeat(len);
        tracing::dispatcher::with_default(&dispatch, || {
            for i in 0..n {
                match target {
                    "alpha" => tracing::info!(target: "alpha", i, payload = payload.as_str(), "a"),
                    "alpha_warn" => {
                        tracing::warn!(target: "alpha", i, payload = payload.as_str(), "a")
                    }
                    "beta" => tracing::info!(target: "beta", i, payload = payload.as_str(), "b"),
                    "gamma" => tracing::info!(target: "gamma", i, payload = payload.as_str(), "g"),
                    "delta" => tracing::error!(target: "delta", i, payload = payload.as_str(), "d"),
                    _ => unreachable!(),
                }
            }
        })
    };
    // The ledger's lines and bytes by (target, level).
    let ledger = || {
        let mut by: BTreeMap<(String, String), (f64, f64)> = BTreeMap::new();
        for row in logging.sites().rows {
            let e = by
                .entry((row.target.to_owned(), row.level.as_str().to_owned()))
                .or_default();
            e.0 += row.counts.lines as f64;
            e.1 += row.counts.bytes as f64;
        }
        by
    };

    // Before anything is written: only `other` by level, and the two without a level.
    let (lines, bytes, text) = scrape();
    assert_eq!(
        targets(&bytes),
        BTreeSet::from(["other".into(), "logpolicy".into()]),
        "{text}"
    );
    for level in ["error", "warn", "info", "debug", "trace", ""] {
        assert_eq!(
            bytes[&format!("target=\"other\",level=\"{level}\"")],
            0.0,
            "{text}"
        );
    }
    assert_eq!(bytes.len(), 7, "{text}");
    assert_eq!(lines.len(), 7, "{text}");

    // alpha and beta wrote: both listed.
    log("alpha", 3, 10);
    log("alpha_warn", 1, 10);
    log("beta", 2, 10);
    let (lines, bytes, text) = scrape();
    let l = ledger();
    assert_eq!(
        targets(&bytes),
        BTreeSet::from([
            "alpha".into(),
            "beta".into(),
            "other".into(),
            "logpolicy".into()
        ]),
        "{text}"
    );
    for (target, level) in [("alpha", "info"), ("alpha", "warn"), ("beta", "info")] {
        let key = format!("target=\"{target}\",level=\"{level}\"");
        let (want_lines, want_bytes) = l[&(target.to_owned(), level.to_owned())];
        assert_eq!(lines[&key], want_lines, "{key}");
        assert_eq!(bytes[&key], want_bytes, "{key}");
        assert!(want_bytes > 0.0);
    }
    assert_eq!(lines["target=\"alpha\",level=\"info\""], 3.0);
    assert_eq!(lines["target=\"alpha\",level=\"warn\""], 1.0);
    assert!(
        !bytes.contains_key("target=\"alpha\",level=\"error\""),
        "a listed target has a series per level its callsites have: {text}"
    );

    // gamma and delta grow far bigger: the two places are taken, they go to `other`,
    // and alpha and beta stay.
    log("gamma", 40, 500);
    log("delta", 5, 2000);
    log("beta", 1, 10);
    let (lines, bytes, text) = scrape();
    let l = ledger();
    assert_eq!(
        targets(&bytes),
        BTreeSet::from([
            "alpha".into(),
            "beta".into(),
            "other".into(),
            "logpolicy".into()
        ]),
        "{text}"
    );
    assert_eq!(targets(&lines), targets(&bytes));
    let (gamma_lines, gamma_bytes) = l[&("gamma".to_owned(), "info".to_owned())];
    let (delta_lines, delta_bytes) = l[&("delta".to_owned(), "error".to_owned())];
    assert_eq!(gamma_lines, 20.0, "one in two sampled");
    assert_eq!(lines["target=\"other\",level=\"info\""], gamma_lines);
    assert_eq!(bytes["target=\"other\",level=\"info\""], gamma_bytes);
    assert_eq!(lines["target=\"other\",level=\"error\""], delta_lines);
    assert_eq!(bytes["target=\"other\",level=\"error\""], delta_bytes);
    assert_eq!(lines["target=\"beta\",level=\"info\""], 3.0);
    assert!(gamma_bytes > 10.0 * bytes["target=\"alpha\",level=\"info\""]);

    // Everything written is in one series or another: the bytes add up to the writer's.
    let sum: f64 = bytes.values().sum();
    let written = logging.writer_stats().bytes_written as f64;
    assert_eq!(sum, written, "{text}");
    assert_eq!(
        sum,
        family(&text, "logpolicy_writer_bytes_written_total")[""],
        "{text}"
    );
    let sites = logging.sites();
    assert_eq!(
        bytes["target=\"logpolicy\",level=\"\""],
        sites.own.bytes as f64
    );
    assert_eq!(
        bytes["target=\"other\",level=\"\""],
        sites.other.bytes as f64
    );

    drop(logging);
    let _ = std::fs::remove_file(file);
}
