//! The real Prometheus tools: `promtool` (rule checks and unit tests) and a `prometheus`
//! server of the test's own (scraping static targets, evaluating rule files, answering
//! the HTTP API). Both come from the Debian package `prometheus` (scripts/test installs
//! it); without them these tests fail with a message saying so, they do not skip.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::helm::{one, render};
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

// The chart's monitoring objects, as the Prometheus Operator turns them into a scrape
// configuration (there is no Prometheus Operator here, nor Kubernetes service discovery:
// Debian builds Prometheus without it).

/// The chart's PodMonitor and PrometheusRule rendered with `set`.
pub fn chart_monitoring(set: &[(&str, &str)]) -> Result<(Value, Value)> {
    let mut all = vec![
        ("podMonitor.enabled", "true"),
        ("prometheusRule.enabled", "true"),
    ];
    all.extend_from_slice(set);
    let objects = render("lp", "logpolicy-system", &all)?;
    Ok((
        one(&objects, "PodMonitor")?.clone(),
        one(&objects, "PrometheusRule")?.clone(),
    ))
}

/// A PodMonitor relabeling (the CRD's camelCase) as a Prometheus `relabel_config`.
pub fn relabel_config(r: &Value) -> Result<Value> {
    let mut out = serde_json::Map::new();
    for (k, v) in r
        .as_object()
        .ok_or_else(|| Error(format!("relabeling {r}")))?
    {
        let key = match k.as_str() {
            "sourceLabels" => "source_labels",
            "targetLabel" => "target_label",
            "action" | "regex" | "replacement" | "separator" | "modulus" => k.as_str(),
            other => return Err(Error(format!("relabeling field {other} not translated"))),
        };
        out.insert(key.to_owned(), v.clone());
    }
    Ok(Value::Object(out))
}

/// `s` as Prometheus makes a label name of it: every character but ASCII letters,
/// digits and `_` as `_`.
pub fn label_name(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// The targets Kubernetes service discovery (`role: pod`) makes of `pods` (a Pod
/// list), with its `__meta_kubernetes_*` labels, as a discovery file's target groups.
pub fn pod_discovery(pods: &Value) -> Value {
    let mut groups = Vec::new();
    for pod in pods["items"].as_array().into_iter().flatten() {
        let meta = &pod["metadata"];
        let ip = pod["status"]["podIP"].as_str().unwrap_or_default();
        let mut labels = serde_json::Map::new();
        let mut put = |k: String, v: &str| {
            labels.insert(k, Value::String(v.to_owned()));
        };
        put(
            "__meta_kubernetes_namespace".into(),
            meta["namespace"].as_str().unwrap_or_default(),
        );
        put(
            "__meta_kubernetes_pod_name".into(),
            meta["name"].as_str().unwrap_or_default(),
        );
        put(
            "__meta_kubernetes_pod_uid".into(),
            meta["uid"].as_str().unwrap_or_default(),
        );
        put("__meta_kubernetes_pod_ip".into(), ip);
        put(
            "__meta_kubernetes_pod_phase".into(),
            pod["status"]["phase"].as_str().unwrap_or_default(),
        );
        put(
            "__meta_kubernetes_pod_node_name".into(),
            pod["spec"]["nodeName"].as_str().unwrap_or_default(),
        );
        for (kind, map) in [
            ("label", &meta["labels"]),
            ("annotation", &meta["annotations"]),
        ] {
            for (k, v) in map.as_object().into_iter().flatten() {
                put(
                    format!("__meta_kubernetes_pod_{kind}_{}", label_name(k)),
                    v.as_str().unwrap_or_default(),
                );
                put(
                    format!("__meta_kubernetes_pod_{kind}present_{}", label_name(k)),
                    "true",
                );
            }
        }
        for container in pod["spec"]["containers"].as_array().into_iter().flatten() {
            let mut with_container = labels.clone();
            with_container.insert(
                "__meta_kubernetes_pod_container_name".into(),
                container["name"].clone(),
            );
            with_container.insert(
                "__meta_kubernetes_pod_container_init".into(),
                json!("false"),
            );
            let ports = container["ports"].as_array().cloned().unwrap_or_default();
            if ports.is_empty() {
                groups.push(json!({"targets": [ip], "labels": with_container}));
            }
            for port in ports {
                let number = port["containerPort"].to_string();
                let mut l = with_container.clone();
                l.insert(
                    "__meta_kubernetes_pod_container_port_name".into(),
                    json!(port["name"].as_str().unwrap_or_default()),
                );
                l.insert(
                    "__meta_kubernetes_pod_container_port_number".into(),
                    json!(number),
                );
                l.insert(
                    "__meta_kubernetes_pod_container_port_protocol".into(),
                    json!(port["protocol"].as_str().unwrap_or("TCP")),
                );
                groups.push(json!({"targets": [format!("{ip}:{number}")], "labels": l}));
            }
        }
    }
    Value::Array(groups)
}

/// The scrape job the Prometheus Operator generates for `pod_monitor` (in namespace
/// `monitor_ns`), its targets discovered in the file `pods.json` beside the
/// configuration.
pub fn pod_monitor_job(pod_monitor: &Value, monitor_ns: &str) -> Result<Value> {
    let name = pod_monitor["metadata"]["name"].as_str().unwrap_or_default();
    let endpoint = &pod_monitor["spec"]["podMetricsEndpoints"][0];
    let selector = pod_monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .ok_or_else(|| Error("the PodMonitor has no matchLabels".into()))?;
    let mut relabel = Vec::new();
    for (label, value) in selector {
        let label = label_name(label);
        relabel.push(json!({
            "source_labels": [format!("__meta_kubernetes_pod_label_{label}"),
                              format!("__meta_kubernetes_pod_labelpresent_{label}")],
            "regex": format!("({});true", value.as_str().unwrap_or_default()),
            "action": "keep",
        }));
    }
    relabel.extend([
        json!({"source_labels": ["__meta_kubernetes_pod_phase"], "regex": "(Failed|Succeeded)", "action": "drop"}),
        json!({"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"}),
        json!({"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"}),
        json!({"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"}),
        json!({"target_label": "job", "replacement": format!("{monitor_ns}/{name}")}),
    ]);
    for r in endpoint["relabelings"].as_array().into_iter().flatten() {
        relabel.push(relabel_config(r)?);
    }
    Ok(json!({
        "job_name": format!("podMonitor/{monitor_ns}/{name}/0"),
        "metrics_path": endpoint["path"],
        "scheme": endpoint["scheme"],
        "file_sd_configs": [{"files": ["pods.json"], "refresh_interval": "1s"}],
        "relabel_configs": relabel,
    }))
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
