//! `logpolicy-operator`: parses the flags and wires the parts together (the crate's
//! README describes them).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use kube::Client;
use logpolicy_operator::access::{MetricsAuth, TokenAccess};
use logpolicy_operator::controller::{self, ControllerConfig, Outputs};
use logpolicy_operator::lease::{self, LeaseConfig};
use logpolicy_operator::validate::{MaxDuration, DEFAULT_MAX_DURATION};
use logpolicy_operator::{health::Health, http, metrics::Metrics, shutdown::Shutdown};
use logpolicy_operator::{signing_key, Pusher, PusherConfig};
use tokio::sync::watch;

#[derive(Debug, Parser)]
#[command(name = "logpolicy-operator", version, about)]
struct Args {
    /// The operator's own namespace (where its key Secret lives).
    #[arg(long, env = "POD_NAMESPACE", default_value = "logpolicy-system")]
    namespace: String,
    /// A file holding the signing key (base64 of the 32-byte seed). Without it, the key
    /// is read from (or created in) the Secret `logpolicy-signing-key`.
    #[arg(long)]
    signing_key_file: Option<PathBuf>,
    /// Where `/healthz`, `/readyz`, `/metrics` and `/pods` are served.
    #[arg(long, default_value = "0.0.0.0:8080")]
    metrics_addr: SocketAddr,
    /// Who may read `/pods` (every tracked pod's uid, address and push errors): `local`,
    /// connections from the operator's own pod only (`kubectl port-forward`); `network`,
    /// anyone who reaches `--metrics-addr`.
    #[arg(long, env = "LOGPOLICY_PODS_VIEW", value_enum, default_value_t = http::PodsView::Local)]
    pods_view: http::PodsView,
    /// How `/metrics` (and `/pods` for peers other than loopback) checks its callers:
    /// `token`, an `Authorization: Bearer` token whose user may `get` the path, checked
    /// with a TokenReview and a SubjectAccessReview (the operator needs `create` on
    /// both); `none`, anyone who reaches `--metrics-addr` reads `/metrics`.
    #[arg(long, env = "LOGPOLICY_METRICS_AUTH", value_enum, default_value_t = MetricsAuth::Token)]
    metrics_auth: MetricsAuth,
    /// Elect one leader among the replicas with the Lease `logpolicy-operator` in
    /// `--namespace`; only the leader pushes and writes status. Needed with more than
    /// one replica. Without it the replica leads and keeps the Lease all the same, as a
    /// heartbeat (`kubectl logpolicy check` reads it).
    #[arg(long, env = "LOGPOLICY_LEADER_ELECTION", default_value_t = false)]
    leader_election: bool,
    /// Watch only these namespaces (comma-separated), with one watch per namespace, so
    /// that namespaced Roles suffice. Empty: every namespace.
    #[arg(
        long,
        env = "LOGPOLICY_WATCH_NAMESPACES",
        value_delimiter = ',',
        default_value = ""
    )]
    watch_namespaces: Vec<String>,
    /// The longest a LogPolicy may apply (`24h`, `90m`: numbers with units `ms`, `s`,
    /// `m`, `h`, as a policy's `duration`). A policy without an expiry, or with a longer
    /// one, is refused (`Ready=False`, reason `Invalid`) and the pods keep what they
    /// have. Empty, `0` or `none`: no limit (standing policies).
    #[arg(long, env = "LOGPOLICY_MAX_DURATION", default_value = DEFAULT_MAX_DURATION)]
    max_duration: MaxDuration,
    /// This replica's identity in the Lease and in Events: the pod name.
    #[arg(long, env = "POD_NAME")]
    pod_name: Option<String>,
}

/// The Lease's name.
const LEASE_NAME: &str = "logpolicy-operator";

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let logging = logpolicy::init()
        .inspect_err(|e| eprintln!("logpolicy-operator: logging: {e}"))
        .ok();
    let shutdown = Shutdown::on_signal();
    let health = Arc::new(Health::default());
    health.set_standby_ready(args.leader_election);
    let metrics = Metrics::default();
    let (views_tx, views_rx) = watch::channel(Arc::default());
    let mut endpoints = http::Endpoints::new(health.clone(), metrics.registry(), views_rx)
        .pods_view(args.pods_view);
    let access =
        (args.metrics_auth == MetricsAuth::Token).then(|| Arc::new(TokenAccess::default()));
    if let Some(access) = &access {
        endpoints = endpoints.token_access(access.clone());
    }
    let stop = shutdown.receiver();
    tokio::spawn(http::serve(args.metrics_addr, endpoints, stop));

    let client = shutdown.retry("kubernetes client", Client::try_default);
    let Some(client) = client.await else {
        return flush(logging);
    };
    if let Some(access) = &access {
        access.set_client(client.clone());
    }
    let key_file = args.signing_key_file.as_deref();
    let load = || signing_key::load(&client, &args.namespace, key_file);
    let Some(key) = shutdown.retry("signing key", load).await else {
        return flush(logging);
    };
    let me = lease::identity(args.pod_name.as_deref());
    let public = key.verifying_key();
    let outputs = Outputs::start(&client, &me, public, views_tx, metrics, health);
    let pusher = Pusher::new(key, PusherConfig::default());
    let namespaces = args.watch_namespaces;
    let config = ControllerConfig {
        namespaces,
        max_duration: args.max_duration,
        ..ControllerConfig::default()
    };
    // Always a Lease: without --leader-election it is a heartbeat (this replica leads
    // regardless), so that its holder and renewTime say whether an operator runs, and
    // its annotation which key the pods must trust, to anyone who may read it.
    let lease = LeaseConfig {
        elect: args.leader_election,
        annotations: [(
            lease::KEY_ID_ANNOTATION.to_owned(),
            logpolicy::wire::key_id(&public).to_string(),
        )]
        .into(),
        ..LeaseConfig::new(&args.namespace, LEASE_NAME, &me)
    };
    let stop = shutdown.receiver();
    controller::lead(client, pusher, config, outputs, Some(lease), stop).await;
    flush(logging);
}

fn flush(logging: Option<logpolicy::Logging>) {
    if let Some(l) = logging {
        l.flush(Duration::from_secs(2));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_need_a_token_unless_turned_off() {
        let auth = |args: &[&str]| {
            let argv = std::iter::once("logpolicy-operator").chain(args.iter().copied());
            Args::try_parse_from(argv).map(|a| a.metrics_auth)
        };
        assert_eq!(auth(&[]).unwrap(), MetricsAuth::Token);
        assert_eq!(auth(&["--metrics-auth=none"]).unwrap(), MetricsAuth::Open);
        assert_eq!(
            auth(&["--metrics-auth", "token"]).unwrap(),
            MetricsAuth::Token
        );
        let err = auth(&["--metrics-auth", "basic"]).unwrap_err().to_string();
        assert!(err.contains("possible values: token, none"), "{err}");
    }

    fn max_duration(args: &[&str]) -> Result<MaxDuration, clap::Error> {
        let argv = std::iter::once("logpolicy-operator").chain(args.iter().copied());
        Args::try_parse_from(argv).map(|a| a.max_duration)
    }

    #[test]
    fn max_duration_defaults_to_a_day_and_can_be_lifted() {
        let hours = |h: u64| MaxDuration(Some(Duration::from_secs(h * 3600)));
        assert_eq!(max_duration(&[]).unwrap(), hours(24));
        assert_eq!(max_duration(&["--max-duration", "2h"]).unwrap(), hours(2));
        assert_eq!(
            max_duration(&["--max-duration=90s"]).unwrap(),
            MaxDuration(Some(Duration::from_secs(90)))
        );
        for none in ["", "0", "none"] {
            assert_eq!(
                max_duration(&["--max-duration", none]).unwrap(),
                MaxDuration(None),
                "{none:?}"
            );
        }
        let err = max_duration(&["--max-duration", "1 day"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("is not a duration like 15m"), "{err}");
    }
}
