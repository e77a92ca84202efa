//! A real Prometheus server scrapes the admin endpoint's `/metrics` on loopback (every
//! second) and holds, per target, exactly the bytes the ledger counted: its OpenMetrics
//! parser takes the text, the `_total` names are what a query asks for, and the series
//! of a target add up, over its levels, to the target's bytes. Prometheus is the Debian
//! package's `/usr/bin/prometheus` (scripts/test installs it); without it this test
//! fails, it does not skip.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin_fixture;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use admin_fixture::pod_config;
use logpolicy::wire::SigningKey;
use logpolicy::writer::{Output, WriterConfig};

/// How long Prometheus gets to start and scrape the values.
const PATIENCE: Duration = Duration::from_secs(30);

/// The `prometheus` binary: `/usr/bin/prometheus`, or one on `PATH`.
fn prometheus_binary() -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|dir| dir.join("prometheus"));
    std::iter::once(PathBuf::from("/usr/bin/prometheus"))
        .chain(on_path)
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "this test needs a Prometheus server and found no `prometheus` binary \
                 (/usr/bin/prometheus or on PATH): install it with `apt-get install prometheus` \
                 (scripts/test does so when it is missing)"
            )
        })
}

/// A Prometheus server of this test: killed and reaped when dropped (also when the test
/// panics), its directory removed.
struct Prometheus {
    child: Child,
    dir: PathBuf,
    addr: SocketAddr,
}

impl Prometheus {
    /// Starts Prometheus on a free loopback port, scraping `target`'s `/metrics` every
    /// second, with its configuration, data and log in a fresh directory.
    fn start(target: SocketAddr) -> Self {
        let binary = prometheus_binary();
        let dir = std::env::temp_dir().join(format!("prometheus-scrape-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("data")).unwrap();
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: logpolicy\n    metrics_path: /metrics\n    \
                 static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let addr = free_loopback_port();
        let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
        let child = Command::new(&binary)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", binary.display()));
        Prometheus { child, dir, addr }
    }

    /// Its log so far, for a failure's message.
    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default()
    }

    /// Panics with its log if it has exited.
    fn check_running(&mut self) {
        if let Some(status) = self.child.try_wait().unwrap() {
            panic!("prometheus exited ({status}):\n{}", self.log());
        }
    }

    /// The samples of an instant query: each series' labels and value. `None` while
    /// Prometheus does not answer (starting).
    fn query(&self, query: &str) -> Option<Vec<(BTreeMap<String, String>, f64)>> {
        let path = format!("/api/v1/query?query={}", percent_encode(query));
        let (status, body) = http_get(self.addr, &path)?;
        assert_eq!(status, 200, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["status"], "success", "{body}");
        let result = v["data"]["result"].as_array().unwrap();
        Some(
            result
                .iter()
                .map(|s| {
                    let labels = serde_json::from_value(s["metric"].clone()).unwrap();
                    let value = s["value"][1].as_str().unwrap().parse().unwrap();
                    (labels, value)
                })
                .collect(),
        )
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `s` as a URL query value: every byte but the unreserved ones percent-encoded.
fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A loopback address with a port free now.
fn free_loopback_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// `GET path` over HTTP/1.1 with `connection: close`: the status and the body (chunked
/// bodies decoded). `None` if nothing listens yet or the connection fails.
fn http_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut conn = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    conn.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n");
    conn.write_all(request.as_bytes()).ok()?;
    let mut raw = Vec::new();
    conn.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    Some((
        status,
        if chunked {
            dechunk(body)
        } else {
            body.to_owned()
        },
    ))
}

/// A chunked body's content.
fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    loop {
        let (size, rest) = body.split_once("\r\n").unwrap();
        let size = usize::from_str_radix(size.split(';').next().unwrap().trim(), 16).unwrap();
        if size == 0 {
            return out;
        }
        out.push_str(&rest[..size]);
        body = &rest[size + 2..];
    }
}

/// The bytes Prometheus holds per target (its series summed over their levels), once
/// every one of `want`'s targets has as many as `want` says, or what it held last after
/// [`PATIENCE`].
fn wait_for(prometheus: &mut Prometheus, want: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    let start = Instant::now();
    let mut held = BTreeMap::new();
    while start.elapsed() < PATIENCE {
        prometheus.check_running();
        if let Some(samples) = prometheus.query("logpolicy_target_bytes_total") {
            held.clear();
            for (labels, value) in samples {
                assert_eq!(labels["__name__"], "logpolicy_target_bytes_total");
                assert_eq!(labels["job"], "logpolicy");
                *held.entry(labels["target"].clone()).or_insert(0.0) += value;
            }
            if want.iter().all(|(t, v)| held.get(t) == Some(v)) {
                return held;
            }
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    held
}

#[test]
fn prometheus_scrapes_the_bytes_per_target() {
    let binary = prometheus_binary();
    let file = std::env::temp_dir().join(format!("prometheus-scrape-{}.log", std::process::id()));
    let key = SigningKey::from_bytes(&[11; 32]);
    let (dispatch, logging) = logpolicy::Builder::new()
        .directives("info")
        .writer(WriterConfig::new(Output::File(file.clone())))
        .admin(pod_config(&key))
        .build()
        .unwrap();
    tracing::dispatcher::with_default(&dispatch, || {
        for i in 0..25 {
            tracing::info!(target: "shop::checkout", i, "order placed");
        }
        for i in 0..7 {
            tracing::warn!(target: "shop::checkout", i, "slow payment provider");
        }
        for i in 0..60 {
            tracing::info!(target: "shop::http", i, path = "/cart", status = 200u16, "served");
        }
    });
    assert!(logging.flush(Duration::from_secs(5)));
    // No more logging from here: the ledger's bytes are final.
    let sites = logging.sites();
    let ledger: BTreeMap<String, f64> = sites
        .targets()
        .iter()
        .map(|t| (t.target.to_owned(), t.counts.bytes as f64))
        .collect();
    assert_eq!(ledger.len(), 2, "{ledger:?}");
    assert!(ledger.values().all(|b| *b > 0.0));

    let mut prometheus = Prometheus::start(logging.admin_addr().unwrap());
    let held = wait_for(&mut prometheus, &ledger);
    for (target, bytes) in &ledger {
        assert_eq!(
            held.get(target),
            Some(bytes),
            "{target}: Prometheus ({}) holds {held:?}, the ledger says {ledger:?}\n{}",
            binary.display(),
            prometheus.log()
        );
    }
    // With logpolicy's own lines and `other`, the bytes add up to the writer's.
    let total: f64 = held.values().sum();
    assert_eq!(
        total,
        logging.writer_stats().bytes_written as f64,
        "{held:?}"
    );
    // Both levels of shop::checkout are series of their own.
    let checkout = prometheus
        .query("logpolicy_target_bytes_total{target=\"shop::checkout\"}")
        .unwrap();
    let mut levels: Vec<String> = checkout.iter().map(|(l, _)| l["level"].clone()).collect();
    levels.sort();
    assert_eq!(levels, ["info", "warn"]);

    drop(prometheus);
    drop(logging);
    let _ = std::fs::remove_file(file);
}
