//! The values of the command-line flags, parsed once into typed values: `--target
//! T=LEVEL`, `--sample T=1/N[:request]`, durations (`--for`, `--wait`). Each error
//! names the part that is wrong; clap prints it with the flag and exits with 2.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use logpolicy::policy::{SamplingScope, SamplingSpec, TargetSpec, When, WhenSpec};
use logpolicy::Level;
use logpolicy_api::validate::parse_duration;

/// The largest `N` of a `1/N` sampling rule.
const MAX_ONE_IN: u64 = 1_000_000;

/// A target as the pods take it ([`logpolicy::Target`]: a module path such as
/// `shop::payment`).
fn target_name(t: &str, whole: &str) -> Result<String, String> {
    let t = t.trim();
    if t.is_empty() {
        return Err(format!("{whole:?}: the target before '=' is empty"));
    }
    t.parse::<logpolicy::Target>()
        .map_err(|e| format!("{whole:?}: {e}"))?;
    Ok(t.to_owned())
}

fn level(s: &str, whole: &str) -> Result<Level, String> {
    s.trim().parse().map_err(|_| {
        format!("{whole:?}: {s:?} is not a level: use trace, debug, info, warn, error or off")
    })
}

/// `--target T=LEVEL`, e.g. `shop::payment=debug`.
pub fn parse_target(s: &str) -> Result<TargetSpec, String> {
    let (t, l) = s
        .rsplit_once('=')
        .ok_or_else(|| format!("{s:?}: expected TARGET=LEVEL, e.g. shop::payment=debug"))?;
    Ok(TargetSpec {
        target: target_name(t, s)?,
        level: level(l, s)?,
        when: None,
    })
}

/// `--when FIELD=V[,V...]` (or `|` between values): the request condition, checked as
/// the pods check it.
pub fn parse_when(s: &str) -> Result<WhenSpec, String> {
    let (field, values) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected FIELD=VALUE[,VALUE...], e.g. user_id=42"))?;
    let values: Vec<&str> = values
        .split([',', '|'])
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .collect();
    let when =
        When::new(field.trim(), values.iter().copied()).map_err(|e| format!("{s:?}: {e}"))?;
    Ok(WhenSpec::from(&when))
}

/// A level flag (`--default-level`, `--always-keep`).
pub fn parse_level(s: &str) -> Result<Level, String> {
    level(s, s)
}

/// `--sample T=1/N[:request|:event]`: keep one in `N` events (or whole requests) of `T`.
pub fn parse_sample(s: &str) -> Result<SamplingSpec, String> {
    let (t, rate) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected TARGET=1/N[:request], e.g. shop::http=1/100"))?;
    let target = target_name(t, s)?;
    let (rate, scope) = match rate.split_once(':') {
        None => (rate, SamplingScope::Event),
        Some((r, "request")) => (r, SamplingScope::Request),
        Some((r, "event")) => (r, SamplingScope::Event),
        Some((_, other)) => {
            return Err(format!(
                "{s:?}: the scope {other:?} is not one of request, event"
            ))
        }
    };
    let n = rate
        .strip_prefix("1/")
        .ok_or_else(|| format!("{s:?}: the rate {rate:?} is not of the form 1/N, e.g. 1/100"))?;
    let keep_one_in: u64 = n
        .parse()
        .ok()
        .filter(|n| (1..=MAX_ONE_IN).contains(n))
        .ok_or_else(|| {
            format!("{s:?}: N in 1/{n} must be a whole number from 1 to {MAX_ONE_IN}")
        })?;
    Ok(SamplingSpec {
        target,
        keep_one_in,
        scope,
        span: None,
        when: None,
    })
}

/// A duration as the CRD's `duration` field takes it (`15m`, `1h30m`, `90s`, `500ms`;
/// not zero; at most 8760h), keeping the text it was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyDuration {
    /// As given, e.g. `15m`: what goes into `spec.duration`.
    pub text: String,
    /// Its value.
    pub value: Duration,
}

impl FromStr for PolicyDuration {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let text = s.trim();
        let value = parse_duration(text).map_err(|e| {
            format!("{e}; use numbers with units ms, s, m, h, e.g. 15m, 1h30m, 90s")
        })?;
        Ok(PolicyDuration {
            text: text.to_owned(),
            value,
        })
    }
}

impl fmt::Display for PolicyDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// `--name` and generated names: a DNS-1123 subdomain label (lower-case letters,
/// digits, `-`; starting and ending alphanumeric; at most 63 characters).
pub fn parse_policy_name(s: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-');
    if ok {
        Ok(s.to_owned())
    } else {
        Err(format!(
            "{s:?} is not a valid name: lower-case letters, digits and '-', starting and ending with a letter or digit, at most 63 characters"
        ))
    }
}

/// `--reason`: one line of at most 256 characters, as the pods take it (the layer's own
/// check, so the plugin and the pods refuse the same reasons in the same words).
pub fn parse_reason(s: &str) -> Result<String, String> {
    logpolicy::policy::check_reason(s)
        .map(|()| s.to_owned())
        .map_err(|e| format!("the reason {e}"))
}

/// `--redact NAME`: a field name, as the pods take it (ASCII letters, digits, `_`, `-`,
/// `.`).
pub fn parse_redact(s: &str) -> Result<String, String> {
    logpolicy::policy::FieldName::new(s)
        .map(|_| s.to_owned())
        .map_err(|e| format!("{s:?} is not a field name: {e}"))
}

/// The default `--window` with a Prometheus: four scrapes of the chart's PodMonitor
/// (every 30 s), so that every pod has samples to make a rate of.
pub const PROMETHEUS_WINDOW: Duration = Duration::from_secs(120);

/// The environment variable that names a Prometheus when `--prometheus` does not.
pub const PROMETHEUS_URL_ENV: &str = "LOGPOLICY_PROMETHEUS_URL";

/// A Prometheus's address: `http://HOST[:PORT][/PATH]` (`PATH`: a prefix such as
/// `/prometheus`, before `/api/v1`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrometheusUrl {
    /// As given, without a trailing `/`.
    pub url: String,
    /// Its host (an IPv6 address without brackets).
    pub host: String,
    /// Its port (80 when not given).
    pub port: u16,
    /// The path before `/api/v1` (empty, or starting with `/`).
    pub prefix: String,
}

impl FromStr for PrometheusUrl {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let given = s.trim().trim_end_matches('/');
        let rest = given.strip_prefix("http://").ok_or_else(|| {
            if given.starts_with("https://") {
                format!(
                    "{given:?}: https is not supported: reach Prometheus over http, e.g. \
                     `kubectl port-forward -n monitoring svc/prometheus 9090` and http://127.0.0.1:9090"
                )
            } else {
                format!("{given:?} is not a Prometheus URL: expected http://HOST[:PORT][/PATH], e.g. http://127.0.0.1:9090")
            }
        })?;
        let (authority, path) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        if path.contains(['?', '#']) || authority.contains(['?', '#', '@']) {
            return Err(format!(
                "{given:?}: a Prometheus URL has no query, fragment or user: http://HOST[:PORT][/PATH]"
            ));
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (host, after) = v6
                .split_once(']')
                .ok_or_else(|| format!("{given:?}: an IPv6 address without its closing ']'"))?;
            (host, after.strip_prefix(':'))
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            }
        };
        if host.is_empty() {
            return Err(format!("{given:?}: no host"));
        }
        let port = match port {
            None => 80,
            Some(p) => p.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| {
                format!("{given:?}: the port {p:?} is not a number from 1 to 65535")
            })?,
        };
        Ok(PrometheusUrl {
            url: given.to_owned(),
            host: host.to_owned(),
            port,
            prefix: path.to_owned(),
        })
    }
}

impl fmt::Display for PrometheusUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.url)
    }
}

/// `--prometheus`.
pub fn parse_prometheus_url(s: &str) -> Result<PrometheusUrl, String> {
    s.parse()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_and_refusals_name_the_bad_part() {
        assert_eq!(
            parse_target("shop::payment=debug"),
            Ok(TargetSpec {
                target: "shop::payment".into(),
                level: Level::Debug,
                when: None,
            })
        );
        assert_eq!(
            parse_target("shop=TRACE").map(|t| t.level),
            Ok(Level::Trace)
        );
        assert_eq!(parse_target("shop=off").map(|t| t.level), Ok(Level::Off));
        let err = parse_target("shop::payment=verbose").unwrap_err();
        assert!(err.contains("\"verbose\" is not a level"), "{err}");
        let err = parse_target("shop::payment").unwrap_err();
        assert!(err.contains("expected TARGET=LEVEL"), "{err}");
        let err = parse_target("=debug").unwrap_err();
        assert!(err.contains("target before '=' is empty"), "{err}");
        let err = parse_target("shop pay=debug").unwrap_err();
        assert!(err.contains("\"shop pay\" contains ' '"), "{err}");
        let err = parse_target("*=debug").unwrap_err();
        assert!(err.contains("\"*\" starts with '*'"), "{err}");
        let long = format!("{}=debug", "a".repeat(257));
        assert!(parse_target(&long).unwrap_err().contains("longer than 256"));
    }

    #[test]
    fn sample_specs_parse_and_refusals_name_the_bad_part() {
        let s = parse_sample("shop::http=1/100").unwrap();
        assert_eq!((s.target.as_str(), s.keep_one_in), ("shop::http", 100));
        assert_eq!(s.scope, SamplingScope::Event);
        let s = parse_sample("shop::http=1/10:request").unwrap();
        assert_eq!((s.keep_one_in, s.scope), (10, SamplingScope::Request));
        assert_eq!(
            parse_sample("x=1/1:event").map(|s| s.scope),
            Ok(SamplingScope::Event)
        );
        for (bad, says) in [
            ("shop::http", "expected TARGET=1/N"),
            ("shop::http=100", "the rate \"100\" is not of the form 1/N"),
            ("shop::http=1/0", "N in 1/0 must be"),
            ("shop::http=1/x", "N in 1/x must be"),
            ("shop::http=1/2000000", "N in 1/2000000 must be"),
            ("shop::http=1/5:span", "the scope \"span\" is not one of"),
            ("=1/5", "target before '=' is empty"),
        ] {
            let err = parse_sample(bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn durations_are_bounded_like_the_crds_pattern() {
        let d: PolicyDuration = "15m".parse().unwrap();
        assert_eq!(d.value, Duration::from_secs(900));
        assert_eq!(d.to_string(), "15m");
        assert_eq!(
            "1h30m".parse::<PolicyDuration>().map(|d| d.value),
            Ok(Duration::from_secs(5400))
        );
        assert_eq!(
            "500ms".parse::<PolicyDuration>().map(|d| d.value),
            Ok(Duration::from_millis(500))
        );
        for bad in ["", "15", "0s", "15 m", "1d", "8761h", "-5m"] {
            let err = bad.parse::<PolicyDuration>().unwrap_err();
            assert!(err.contains("e.g. 15m"), "{bad}: {err}");
        }
    }

    #[test]
    fn names_reasons_and_redactions() {
        assert!(parse_policy_name("raise-shop-payment-debug-x7k2p").is_ok());
        for bad in ["", "Raise", "-a", "a-", "a_b", &"a".repeat(64)] {
            assert!(
                parse_policy_name(bad)
                    .unwrap_err()
                    .contains("not a valid name"),
                "{bad}"
            );
        }
        assert!(parse_reason("INC-4211: card declines at checkout").is_ok());
        assert_eq!(
            parse_reason("two\nlines").unwrap_err(),
            "the reason must not contain control characters (found U+000A)"
        );
        assert_eq!(
            parse_reason(&"x".repeat(257)).unwrap_err(),
            "the reason is 257 characters long, more than 256"
        );
        assert_eq!(parse_redact("card_token"), Ok("card_token".into()));
        assert!(parse_redact("card token")
            .unwrap_err()
            .contains("\"card token\" is not a field name"));
        assert_eq!(parse_level("Warn"), Ok(Level::Warn));
        assert!(parse_level("loud").unwrap_err().contains("\"loud\""));
    }
    #[test]
    fn urls_parse_and_refusals_say_what_is_expected() {
        let u: PrometheusUrl = "http://127.0.0.1:9090/".parse().unwrap();
        assert_eq!(
            (u.url.as_str(), u.host.as_str(), u.port, u.prefix.as_str()),
            ("http://127.0.0.1:9090", "127.0.0.1", 9090, "")
        );
        let u: PrometheusUrl = "http://prometheus.monitoring/prom".parse().unwrap();
        assert_eq!((u.port, u.prefix.as_str()), (80, "/prom"));
        let u: PrometheusUrl = "http://[::1]:9090".parse().unwrap();
        assert_eq!((u.host.as_str(), u.port), ("::1", 9090));
        for (bad, says) in [
            ("https://prom:9090", "https is not supported"),
            ("prom:9090", "expected http://HOST[:PORT][/PATH]"),
            ("http://:9090", "no host"),
            ("http://prom:99999", "not a number from 1 to 65535"),
            ("http://prom:0", "not a number from 1 to 65535"),
            ("http://prom/api?x=1", "no query"),
            ("http://user@prom", "no query, fragment or user"),
            ("http://[::1:9090", "closing ']'"),
        ] {
            let e = bad.parse::<PrometheusUrl>().unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
