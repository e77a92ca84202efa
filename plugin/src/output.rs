//! What the commands print: aligned tables (as `kubectl get` prints them), JSON and
//! YAML (with the YAML 1.1 booleans quoted, so that `kubectl apply` reads the level
//! `off` as a level).

use std::time::{Duration, SystemTime};

use clap::ValueEnum;
use serde::Serialize;

use crate::exit::{Failure, Result};

/// `-o`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum Format {
    /// Aligned columns.
    #[default]
    Table,
    /// JSON.
    Json,
    /// YAML.
    Yaml,
}

/// Columns padded to the widest cell, separated by three spaces, as `kubectl get`.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut text = String::new();
        for (i, (cell, w)) in cells.zip(&widths).enumerate() {
            if i > 0 {
                text.push_str("   ");
            }
            text.push_str(cell);
            text.extend(std::iter::repeat_n(
                ' ',
                w.saturating_sub(cell.chars().count()),
            ));
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(&mut header.iter().copied());
    for row in rows {
        line(&mut row.iter().map(String::as_str));
    }
    out
}

/// `value` as YAML that kubectl reads back as written.
pub fn yaml<T: Serialize>(value: &T) -> Result<String> {
    let body = serde_yaml::to_string(value).map_err(|e| Failure::error(format!("YAML: {e}")))?;
    let mut out = String::with_capacity(body.len());
    for line in body.lines() {
        out.push_str(&logpolicy_operator::crd::quote_yaml11_booleans(line));
        out.push('\n');
    }
    Ok(out)
}

/// `value` as indented JSON, with a final newline.
pub fn json<T: Serialize>(value: &T) -> Result<String> {
    serde_json::to_string_pretty(value)
        .map(|s| s + "\n")
        .map_err(|e| Failure::error(format!("JSON: {e}")))
}

/// `value` in `format` (data formats only; a table is the caller's).
pub fn data<T: Serialize>(format: Format, value: &T) -> Result<String> {
    match format {
        Format::Yaml => yaml(value),
        _ => json(value),
    }
}

/// How long until `expiration` (RFC 3339) from `now`, e.g. `14m32s`; `expired` when
/// past; the text itself when it does not parse.
pub fn expires_in(expiration: &str, now: SystemTime) -> String {
    match logpolicy::clock::parse_rfc3339(expiration) {
        Ok(t) => match t.duration_since(now) {
            Ok(left) if !left.is_zero() => short_duration(left),
            _ => "expired".to_owned(),
        },
        Err(_) => expiration.to_owned(),
    }
}

/// `1h2m`, `14m32s`, `9s` (whole seconds, the two largest units).
pub fn short_duration(d: Duration) -> String {
    let s = d.as_secs();
    let (h, m, s) = (s / 3600, s / 60 % 60, s % 60);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, _) => format!("{m}m{s}s"),
        _ => format!("{h}h{m}m"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_like_kubectl_get() {
        let t = table(
            &["POD", "STATE", "ERROR"],
            &[
                vec!["shop-0".into(), "applied".into(), String::new()],
                vec![
                    "shop-long-1".into(),
                    "failed".into(),
                    "timeout after 2s".into(),
                ],
            ],
        );
        assert_eq!(
            t,
            "POD           STATE     ERROR\n\
             shop-0        applied\n\
             shop-long-1   failed    timeout after 2s\n"
        );
    }

    #[test]
    fn yaml_quotes_the_level_off() {
        let y =
            yaml(&serde_json::json!({"targets": [{"target": "shop", "level": "off"}]})).unwrap();
        assert!(y.contains("level: 'off'"), "{y}");
    }

    #[test]
    fn expiry_in_words() {
        let now = logpolicy::clock::parse_rfc3339("2026-12-03T07:00:00Z").unwrap();
        assert_eq!(expires_in("2026-12-03T07:14:32Z", now), "14m32s");
        assert_eq!(expires_in("2026-12-03T09:05:00Z", now), "2h5m");
        assert_eq!(expires_in("2026-12-03T07:00:09Z", now), "9s");
        assert_eq!(expires_in("2026-12-03T06:59:00Z", now), "expired");
        assert_eq!(expires_in("2026-12-03T07:00:00Z", now), "expired");
        assert_eq!(expires_in("soon", now), "soon");
    }
}
