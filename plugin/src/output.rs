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

/// Whether `c` would act on a terminal instead of showing: a C0 or C1 control
/// character (an escape sequence starts with one), DEL, or a bidirectional override
/// or isolate (which reorders what follows on the screen).
fn acts_on_a_terminal(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` with every character that would act on a terminal written as its escape
/// (`\u{1b}`), so that it shows instead. Everything the plugin prints that came from
/// a pod (its replies) or an object's fields (annotations, labels) passes through it:
/// a pod cannot move the cursor, clear the screen, set the window title or hide text
/// on an admin's terminal.
///
/// ```
/// use kubectl_logpolicy::output::printable;
/// assert_eq!(printable("shop::payment"), "shop::payment");
/// assert_eq!(printable("a\u{1b}[2Jb\n"), "a\\u{1b}[2Jb\\u{a}");
/// assert_eq!(printable("x\u{202e}y\u{9b}"), "x\\u{202e}y\\u{9b}");
/// ```
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(acts_on_a_terminal) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if acts_on_a_terminal(c) {
            out.push_str(&c.escape_unicode().to_string());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Every string of `value`, keys included, made [`printable`].
pub fn printable_json(value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::String(s) => Value::String(printable(&s).into_owned()),
        Value::Array(items) => Value::Array(items.into_iter().map(printable_json).collect()),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (printable(&k).into_owned(), printable_json(v)))
                .collect(),
        ),
        other => other,
    }
}

/// Columns padded to the widest cell, separated by three spaces, as `kubectl get`.
/// Each cell is [`printable`].
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| row.iter().map(|c| printable(c).into_owned()).collect())
        .collect();
    let rows = rows.as_slice();
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
        out.push_str(&logpolicy_api::crd::quote_yaml11_booleans(line));
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
    fn escape_sequences_in_cells_show_instead_of_acting() {
        let t = table(
            &["TARGET", "FILE"],
            &[vec![
                "shop\u{1b}]0;pwned\u{7}".into(),
                "src/\u{1b}[2J\u{1b}[Hmain.rs\r\n".into(),
            ]],
        );
        assert!(!t.chars().any(|c| c.is_control() && c != '\n'), "{t:?}");
        assert_eq!(t.lines().count(), 2, "{t}");
        assert!(
            t.contains("shop\\u{1b}]0;pwned\\u{7}")
                && t.contains("src/\\u{1b}[2J\\u{1b}[Hmain.rs\\u{d}\\u{a}"),
            "{t}"
        );
        let v = printable_json(serde_json::json!({
            "rows": [{"target": "a\u{9b}31m", "line": 3}],
            "k\u{1b}": "\u{2066}x",
        }));
        assert_eq!(
            v,
            serde_json::json!({
                "rows": [{"target": "a\\u{9b}31m", "line": 3}],
                "k\\u{1b}": "\\u{2066}x",
            })
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
