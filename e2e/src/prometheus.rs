//! The real Prometheus tools: `promtool` (rule checks and unit tests) and a `prometheus`
//! server of the test's own (scraping static targets, evaluating rule files, answering
//! the HTTP API). Both come from the Debian package `prometheus` (scripts/test installs
//! it); without them these tests fail with a message saying so, they do not skip.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::net::{free_port, http};
use crate::process::{wait_for, Process, TestDir};
use crate::{Error, Result};

/// `/usr/bin/NAME`, or `NAME` on `PATH`.
pub fn tool(name: &str) -> Result<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|dir| dir.join(name));
    std::iter::once(Path::new("/usr/bin").join(name))
        .chain(on_path)
        .find(|p| p.is_file())
        .ok_or_else(|| {
            Error(format!(
                "no `{name}` (/usr/bin/{name} or on PATH): install the Prometheus server and \
                 promtool with `apt-get install prometheus` (scripts/test does so when it is missing)"
            ))
        })
}

/// `promtool ARGS` in `dir`: its output, or an error holding it when it fails.
pub fn promtool(dir: &Path, args: &[&str]) -> Result<String> {
    let binary = tool("promtool")?;
    let out = Command::new(&binary)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Error(format!("running {}: {e}", binary.display())))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(text)
    } else {
        Err(Error(format!(
            "promtool {} (in {}) failed ({}):\n{text}",
            args.join(" "),
            dir.display(),
            out.status
        )))
    }
}

/// One sample of an instant query: the series' labels and its value (`NaN` included).
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The labels, `__name__` included when the query keeps it.
    pub labels: BTreeMap<String, String>,
    /// The value.
    pub value: f64,
}

/// One scrape target, as Prometheus reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// Its `job` label.
    pub job: String,
    /// The URL it scrapes.
    pub url: String,
    /// Its labels after relabelling.
    pub labels: Value,
    /// `up`, `down` or `unknown` (not scraped yet).
    pub health: String,
    /// Why the last scrape failed (empty when it did not).
    pub last_error: String,
}

/// A Prometheus server of one test, on a free loopback port, its configuration, data
/// and output in the test's directory; killed when dropped.
#[derive(Debug)]
pub struct Prometheus {
    /// Where its HTTP API listens.
    pub addr: SocketAddr,
    process: Process,
    _dir: TestDir,
}

impl Prometheus {
    /// Starts `prometheus` with `config` (prometheus.yml) and the `files` (name, content)
    /// beside it (rule files, token files, ...; the configuration names them relative
    /// to its own directory); returns once it reports ready.
    pub fn start(config: &str, files: &[(&str, &str)]) -> Result<Prometheus> {
        let binary = tool("prometheus")?;
        let dir = TestDir::new("prometheus")?;
        for (name, content) in files.iter().chain(&[("prometheus.yml", config)]) {
            let path = dir.join(name);
            std::fs::write(&path, content)
                .map_err(|e| Error(format!("writing {}: {e}", path.display())))?;
        }
        let addr: SocketAddr = ([127, 0, 0, 1], free_port()?).into();
        let mut cmd = Command::new(&binary);
        cmd.current_dir(dir.path())
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"));
        let mut process = Process::spawn("prometheus", dir.path(), cmd)?;
        wait_for(Duration::from_secs(30), "Prometheus to be ready", || {
            process.check_running()?;
            Ok(http(addr, "GET", "/-/ready", &[], "")
                .ok()
                .filter(|r| r.status == 200))
        })?;
        Ok(Prometheus {
            addr,
            process,
            _dir: dir,
        })
    }

    /// `GET /api/v1/PATH?QUERY` (`query`: already encoded): the `data` of a successful
    /// answer.
    pub fn api(&mut self, path: &str, query: &str) -> Result<Value> {
        self.process.check_running()?;
        let target = if query.is_empty() {
            format!("/api/v1/{path}")
        } else {
            format!("/api/v1/{path}?{query}")
        };
        let reply = http(self.addr, "GET", &target, &[], "")?;
        let body: Value = reply.json()?;
        if reply.status != 200 || body["status"] != "success" {
            return Err(Error(format!(
                "GET {target}: {}: {}",
                reply.status, reply.body
            )));
        }
        Ok(body["data"].clone())
    }

    /// The samples an instant query returns now (an error for a query Prometheus
    /// refuses, naming it).
    pub fn query(&mut self, promql: &str) -> Result<Vec<Sample>> {
        let data = self
            .api("query", &format!("query={}", percent_encode(promql)))
            .map_err(|e| Error(format!("query {promql}: {e}")))?;
        if data["resultType"] != "vector" {
            return Err(Error(format!(
                "query {promql}: a {} answer, not a vector",
                data["resultType"]
            )));
        }
        data["result"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|s| {
                let labels = serde_json::from_value(s["metric"].clone())
                    .map_err(|e| Error(format!("query {promql}: labels: {e}")))?;
                let value = s["value"][1]
                    .as_str()
                    .and_then(|v| v.parse().ok())
                    .ok_or_else(|| Error(format!("query {promql}: a sample without a value")))?;
                Ok(Sample { labels, value })
            })
            .collect()
    }

    /// The active scrape targets (`/api/v1/targets`).
    pub fn targets(&mut self) -> Result<Vec<Target>> {
        let data = self.api("targets", "state=active")?;
        Ok(data["activeTargets"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| {
                let field = |v: &Value| v.as_str().unwrap_or_default().to_owned();
                Target {
                    job: field(&t["labels"]["job"]),
                    url: field(&t["scrapeUrl"]),
                    labels: t["labels"].clone(),
                    health: field(&t["health"]),
                    last_error: field(&t["lastError"]),
                }
            })
            .collect())
    }

    /// The rule groups (`/api/v1/rules`).
    pub fn rule_groups(&mut self) -> Result<Vec<Value>> {
        let data = self.api("rules", "")?;
        Ok(data["groups"].as_array().cloned().unwrap_or_default())
    }

    /// The last lines of its output, for a failure's message.
    pub fn tail(&self, n: usize) -> String {
        self.process.tail(n)
    }
}

/// `s` as a URL query value: every byte but the unreserved ones percent-encoded.
pub fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_percent_encoded() {
        assert_eq!(
            percent_encode(r#"sum by (a) (rate(x{b=~".*"}[1m]))"#),
            "sum%20by%20%28a%29%20%28rate%28x%7Bb%3D~%22.%2A%22%7D%5B1m%5D%29%29"
        );
    }
}
