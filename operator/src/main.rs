//! `logpolicy-operator`: parses the flags and wires the parts together (the crate's
//! README describes them).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use kube::Client;
use logpolicy_operator::access::{MetricsAuth, TokenAccess};
use logpolicy_operator::controller::{self, ControllerConfig, Outputs};
use logpolicy_operator::lease::{self, LeaseConfig};
use logpolicy_operator::serving_cert::{self, ServingCert};
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
    /// Serve `--metrics-addr` over TLS (https), so that the bearer tokens sent to
    /// `/metrics` never cross the network in the clear: with the certificate of
    /// `--metrics-cert-dir`, else a self-signed one made at start. `false`: plain HTTP.
    #[arg(long, env = "LOGPOLICY_METRICS_SECURE", default_value_t = true, action = clap::ArgAction::Set)]
    metrics_secure: bool,
    /// A directory holding `tls.crt` and `tls.key` (a `kubernetes.io/tls` Secret mounted,
    /// e.g. one cert-manager renews): the certificate `--metrics-addr` serves, read
    /// again every minute. Without it, a self-signed certificate made at start.
    #[arg(long, env = "LOGPOLICY_METRICS_CERT_DIR")]
    metrics_cert_dir: Option<PathBuf>,
    /// The audiences a bearer token for `/metrics` must be for (comma-separated), e.g.
    /// `logpolicy-operator` for a projected ServiceAccount token minted for it: such a
    /// token is no use against the API server. Empty: the API server's own audiences
    /// (a ServiceAccount's default token).
    #[arg(
        long,
        env = "LOGPOLICY_METRICS_TOKEN_AUDIENCES",
        value_delimiter = ',',
        default_value = ""
    )]
    metrics_token_audiences: Vec<String>,
    /// Whether a loopback peer counts as the operator's own pod (`kubectl
    /// port-forward`). Set it to false when something in the pod connects from loopback
    /// on behalf of other pods, as a service mesh's sidecar does: every peer is then
    /// the network (`/pods` needs `--pods-view network` and a token).
    #[arg(long, env = "LOGPOLICY_TRUST_LOOPBACK", default_value_t = true, action = clap::ArgAction::Set)]
    trust_loopback: bool,
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
async fn main() -> ExitCode {
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
        .pods_view(args.pods_view)
        .trust_loopback(args.trust_loopback);
    let access = (args.metrics_auth == MetricsAuth::Token).then(|| {
        Arc::new(TokenAccess::with_audiences(
            args.metrics_token_audiences.clone(),
        ))
    });
    if let Some(access) = &access {
        endpoints = endpoints.token_access(access.clone());
    }
    let tls = if args.metrics_secure {
        let cert = match &args.metrics_cert_dir {
            Some(dir) => ServingCert::Dir(dir.clone()),
            None => ServingCert::SelfSigned(Vec::new()),
        };
        match serving_cert::acceptor(&cert) {
            Ok(tls) => Some(tls),
            Err(e) => {
                eprintln!("logpolicy-operator: --metrics-secure: {e}");
                flush(logging);
                return ExitCode::from(2);
            }
        }
    } else {
        None
    };
    let stop = shutdown.receiver();
    let limits = http::ServerLimits::default();
    tokio::spawn(http::serve(args.metrics_addr, endpoints, limits, tls, stop));

    let client = shutdown.retry("kubernetes client", Client::try_default);
    let Some(client) = client.await else {
        flush(logging);
        return ExitCode::SUCCESS;
    };
    if let Some(access) = &access {
        access.set_client(client.clone());
    }
    let key_file = args.signing_key_file.as_deref();
    let load = || signing_key::load(&client, &args.namespace, key_file);
    let Some(key) = shutdown.retry("signing key", load).await else {
        flush(logging);
        return ExitCode::SUCCESS;
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
    ExitCode::SUCCESS
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

    #[test]
    fn metrics_are_served_over_tls_unless_turned_off() {
        let parse = |args: &[&str]| {
            let argv = std::iter::once("logpolicy-operator").chain(args.iter().copied());
            Args::try_parse_from(argv)
        };
        let a = parse(&[]).unwrap();
        assert!(a.metrics_secure);
        assert_eq!(a.metrics_cert_dir, None);
        assert!(a.metrics_token_audiences.iter().all(String::is_empty));
        assert!(!parse(&["--metrics-secure=false"]).unwrap().metrics_secure);
        let a = parse(&[
            "--metrics-cert-dir=/tls",
            "--metrics-token-audiences=logpolicy-operator,other",
        ])
        .unwrap();
        assert_eq!(a.metrics_cert_dir, Some(PathBuf::from("/tls")));
        assert_eq!(a.metrics_token_audiences, ["logpolicy-operator", "other"]);
    }

    #[test]
    fn loopback_is_trusted_unless_turned_off() {
        let trust = |args: &[&str]| {
            let argv = std::iter::once("logpolicy-operator").chain(args.iter().copied());
            Args::try_parse_from(argv).map(|a| a.trust_loopback)
        };
        assert!(trust(&[]).unwrap());
        assert!(!trust(&["--trust-loopback=false"]).unwrap());
        assert!(!trust(&["--trust-loopback", "false"]).unwrap());
        assert!(trust(&["--trust-loopback=true"]).unwrap());
        assert!(trust(&["--trust-loopback=maybe"]).is_err());
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
