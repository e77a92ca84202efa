//! What a service wrote: its stdout, JSON lines, read incrementally.

use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::SystemTime;

use crate::{Error, Result};

/// One JSON line.
#[derive(Debug, Clone)]
pub struct Line {
    /// `ts`.
    pub ts: SystemTime,
    /// `level`, upper case (`DEBUG`).
    pub level: String,
    /// `target`.
    pub target: String,
    /// `msg`.
    pub msg: String,
    /// Its length in bytes as written, the newline included.
    pub bytes: usize,
    /// The whole line.
    pub json: serde_json::Value,
}

impl Line {
    /// Whether it is from `target` (or below it, at a `::` boundary) at `level`
    /// (case-insensitive).
    pub fn is(&self, target: &str, level: &str) -> bool {
        self.level.eq_ignore_ascii_case(level) && under(&self.target, target)
    }
}

/// Whether `target` is `prefix` or below it.
pub fn under(target: &str, prefix: &str) -> bool {
    target == prefix || (target.starts_with(prefix) && target[prefix.len()..].starts_with("::"))
}

/// A service's stdout, read as it grows.
#[derive(Debug)]
pub struct ServiceLog {
    path: PathBuf,
    offset: u64,
    partial: Vec<u8>,
    lines: Vec<Line>,
    /// Lines that were not JSON (reported by [`ServiceLog::check`]).
    pub malformed: Vec<String>,
}

impl ServiceLog {
    /// The log in `path` (read from its start).
    pub fn new(path: PathBuf) -> ServiceLog {
        ServiceLog {
            path,
            offset: 0,
            partial: Vec::new(),
            lines: Vec::new(),
            malformed: Vec::new(),
        }
    }

    /// Reads what was appended since the last call.
    pub fn refresh(&mut self) -> Result<&[Line]> {
        let mut file = std::fs::File::open(&self.path)
            .map_err(|e| Error(format!("{}: {e}", self.path.display())))?;
        file.seek(SeekFrom::Start(self.offset))
            .map_err(|e| Error(format!("{}: {e}", self.path.display())))?;
        let mut buf = Vec::new();
        file.read_to_end(&mut buf)
            .map_err(|e| Error(format!("{}: {e}", self.path.display())))?;
        self.offset += buf.len() as u64;
        self.partial.extend_from_slice(&buf);
        let Some(last_newline) = self.partial.iter().rposition(|b| *b == b'\n') else {
            return Ok(&self.lines);
        };
        let complete: Vec<u8> = self.partial.drain(..=last_newline).collect();
        for raw in complete.split(|b| *b == b'\n') {
            if raw.is_empty() {
                continue;
            }
            match parse_line(raw) {
                Some(line) => self.lines.push(line),
                None => self
                    .malformed
                    .push(String::from_utf8_lossy(raw).into_owned()),
            }
        }
        Ok(&self.lines)
    }

    /// Every line read so far.
    pub fn lines(&self) -> &[Line] {
        &self.lines
    }

    /// Lines matching `pred` with a timestamp in `[from, to)`.
    pub fn count(&self, from: SystemTime, to: SystemTime, pred: impl Fn(&Line) -> bool) -> usize {
        self.lines
            .iter()
            .filter(|l| l.ts >= from && l.ts < to && pred(l))
            .count()
    }

    /// The first line at or after `from` matching `pred`.
    pub fn first(&self, from: SystemTime, pred: impl Fn(&Line) -> bool) -> Option<&Line> {
        self.lines.iter().find(|l| l.ts >= from && pred(l))
    }

    /// The last line matching `pred`.
    pub fn last(&self, pred: impl Fn(&Line) -> bool) -> Option<&Line> {
        self.lines.iter().rev().find(|l| pred(l))
    }

    /// The newest timestamp read.
    pub fn newest(&self) -> Option<SystemTime> {
        self.lines.last().map(|l| l.ts)
    }

    /// Fails if any line was not JSON.
    pub fn check(&self) -> Result<()> {
        match self.malformed.first() {
            None => Ok(()),
            Some(l) => Err(Error(format!(
                "{}: {} lines are not JSON, e.g. {l}",
                self.path.display(),
                self.malformed.len()
            ))),
        }
    }
}

/// `raw`, a line without its newline.
fn parse_line(raw: &[u8]) -> Option<Line> {
    let json: serde_json::Value = serde_json::from_slice(raw).ok()?;
    let s = |k: &str| json.get(k).and_then(|v| v.as_str()).map(str::to_owned);
    let ts = logpolicy::clock::parse_rfc3339(&s("ts")?).ok()?;
    Some(Line {
        ts,
        level: s("level")?,
        target: s("target")?,
        msg: s("msg").unwrap_or_default(),
        bytes: raw.len() + 1,
        json,
    })
}

/// How far `measured` is from `reference`, relative to it: `(measured - reference) /
/// reference` (0 when both are 0, infinite when only `reference` is).
pub fn relative(measured: f64, reference: f64) -> f64 {
    if reference == 0.0 {
        if measured == 0.0 {
            0.0
        } else {
            f64::INFINITY
        }
    } else {
        (measured - reference) / reference
    }
}

/// `a - b` in seconds, negative when `a` is earlier (for reports).
pub fn secs_between(a: SystemTime, b: SystemTime) -> f64 {
    match a.duration_since(b) {
        Ok(d) => d.as_secs_f64(),
        Err(e) => -e.duration().as_secs_f64(),
    }
}
