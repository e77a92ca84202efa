//! The operator's command line (each flag also read from the environment variable the
//! chart's Deployment sets), and what each part is configured with from it: the
//! endpoints, their TLS, the controller and the Lease.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Parser;
use logpolicy::wire::{key_id, VerifyingKey};
use logpolicy_api::labels::{KEY_ID_ANNOTATION, LEASE_NAME};
use logpolicy_api::validate::{MaxDuration, DEFAULT_MAX_DURATION};
use tokio_rustls::TlsAcceptor;

use crate::access::{MetricsAuth, TokenAccess};
use crate::controller::ControllerConfig;
use crate::http::{self, Endpoints};
use crate::lease::LeaseConfig;
use crate::serving_cert::{self, CertError, ServingCert};

/// The operator's flags.
#[derive(Debug, Parser)]
#[command(name = "logpolicy-operator", version, about, long_about = None)]
pub struct Args {
    /// The operator's own namespace (where its key Secret lives).
    #[arg(long, env = "POD_NAMESPACE", default_value = "logpolicy-system")]
    pub namespace: String,
    /// A file holding the signing key (base64 of the 32-byte seed). Without it, the key
    /// is read from (or created in) the Secret `logpolicy-signing-key`.
    #[arg(long)]
    pub signing_key_file: Option<PathBuf>,
    /// Where `/healthz`, `/readyz`, `/metrics` and `/pods` are served.
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub metrics_addr: SocketAddr,
    /// Who may read `/pods` (every tracked pod's uid, address and push errors): `local`,
    /// connections from the operator's own pod only (`kubectl port-forward`); `network`,
    /// anyone who reaches `--metrics-addr`.
    #[arg(long, env = "LOGPOLICY_PODS_VIEW", value_enum, default_value_t = http::PodsView::Local)]
    pub pods_view: http::PodsView,
    /// Serve `--metrics-addr` over TLS (https), so that the bearer tokens sent to
    /// `/metrics` never cross the network in the clear: with the certificate of
    /// `--metrics-cert-dir`, else a self-signed one made at start. `false`: plain HTTP.
    #[arg(long, env = "LOGPOLICY_METRICS_SECURE", default_value_t = true, action = clap::ArgAction::Set)]
    pub metrics_secure: bool,
    /// A directory holding `tls.crt` and `tls.key` (a `kubernetes.io/tls` Secret mounted,
    /// e.g. one cert-manager renews): the certificate `--metrics-addr` serves, read
    /// again every minute. Without it, a self-signed certificate made at start.
    #[arg(long, env = "LOGPOLICY_METRICS_CERT_DIR")]
    pub metrics_cert_dir: Option<PathBuf>,
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
    pub metrics_token_audiences: Vec<String>,
    /// Whether a loopback peer counts as the operator's own pod (`kubectl
    /// port-forward`). Set it to false when something in the pod connects from loopback
    /// on behalf of other pods, as a service mesh's sidecar does: every peer is then
    /// the network (`/pods` needs `--pods-view network` and a token).
    #[arg(long, env = "LOGPOLICY_TRUST_LOOPBACK", default_value_t = true, action = clap::ArgAction::Set)]
    pub trust_loopback: bool,
    /// How `/metrics` (and `/pods` for peers other than loopback) checks its callers:
    /// `token`, an `Authorization: Bearer` token whose user may `get` the path, checked
    /// with a TokenReview and a SubjectAccessReview (the operator needs `create` on
    /// both); `none`, anyone who reaches `--metrics-addr` reads `/metrics`.
    #[arg(long, env = "LOGPOLICY_METRICS_AUTH", value_enum, default_value_t = MetricsAuth::Token)]
    pub metrics_auth: MetricsAuth,
    /// Elect one leader among the replicas with the Lease `logpolicy-operator` in
    /// `--namespace`; only the leader pushes and writes status. Needed with more than
    /// one replica. Without it the replica leads and keeps the Lease all the same, as a
    /// heartbeat (`kubectl logpolicy check` reads it).
    #[arg(long, env = "LOGPOLICY_LEADER_ELECTION", default_value_t = false)]
    pub leader_election: bool,
    /// Watch only these namespaces (comma-separated), with one watch per namespace, so
    /// that namespaced Roles suffice. Empty: every namespace.
    #[arg(
        long,
        env = "LOGPOLICY_WATCH_NAMESPACES",
        value_delimiter = ',',
        default_value = ""
    )]
    pub watch_namespaces: Vec<String>,
    /// The longest a LogPolicy may apply (`24h`, `90m`: numbers with units `ms`, `s`,
    /// `m`, `h`, as a policy's `duration`). A policy without an expiry, or with a longer
    /// one, is refused (`Ready=False`, reason `Invalid`) and the pods keep what they
    /// have. Empty, `0` or `none`: no limit (standing policies).
    #[arg(long, env = "LOGPOLICY_MAX_DURATION", default_value = DEFAULT_MAX_DURATION)]
    pub max_duration: MaxDuration,
    /// This replica's identity in the Lease and in Events: the pod name.
    #[arg(long, env = "POD_NAME")]
    pub pod_name: Option<String>,
}

impl Args {
    /// The checker of `/metrics` bearer tokens (`--metrics-auth token`), for the
    /// audiences of `--metrics-token-audiences`; `None` with `--metrics-auth none`.
    pub fn token_access(&self) -> Option<Arc<TokenAccess>> {
        (self.metrics_auth == MetricsAuth::Token).then(|| {
            Arc::new(TokenAccess::with_audiences(
                self.metrics_token_audiences.clone(),
            ))
        })
    }

    /// `endpoints` with who may read `/pods`, whether loopback is the operator's own
    /// pod, and the checker of bearer tokens (`access`, from [`Args::token_access`]).
    pub fn endpoints(&self, endpoints: Endpoints, access: Option<&Arc<TokenAccess>>) -> Endpoints {
        let endpoints = endpoints
            .pods_view(self.pods_view)
            .trust_loopback(self.trust_loopback);
        match access {
            Some(access) => endpoints.token_access(access.clone()),
            None => endpoints,
        }
    }

    /// What `--metrics-addr` is served over TLS with (`--metrics-secure`): the
    /// certificate of `--metrics-cert-dir`, else a self-signed one made now; `None` for
    /// plain HTTP.
    pub fn tls(&self) -> Result<Option<TlsAcceptor>, CertError> {
        if !self.metrics_secure {
            return Ok(None);
        }
        let cert = match &self.metrics_cert_dir {
            Some(dir) => ServingCert::Dir(dir.clone()),
            None => ServingCert::SelfSigned(Vec::new()),
        };
        serving_cert::acceptor(&cert).map(Some)
    }

    /// What the controller watches (`--watch-namespaces`) and refuses
    /// (`--max-duration`).
    pub fn controller_config(&self) -> ControllerConfig {
        ControllerConfig {
            namespaces: self.watch_namespaces.clone(),
            max_duration: self.max_duration,
            ..ControllerConfig::default()
        }
    }

    /// The Lease [`LEASE_NAME`] in `--namespace`, held as `identity`. Always a Lease:
    /// without `--leader-election` it is a heartbeat (this replica leads regardless), so
    /// that its holder and renewTime say whether an operator runs, and its annotation
    /// [`KEY_ID_ANNOTATION`] which key (`public`) the pods must trust, to anyone who may
    /// read it.
    pub fn lease_config(&self, identity: &str, public: &VerifyingKey) -> LeaseConfig {
        LeaseConfig {
            elect: self.leader_election,
            annotations: [(KEY_ID_ANNOTATION.to_owned(), key_id(public).to_string())].into(),
            ..LeaseConfig::new(&self.namespace, LEASE_NAME, identity)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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
