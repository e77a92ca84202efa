//! `logpolicy-operator`: wires the parts together from the flags ([`Args`]; the crate's
//! README describes the parts).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use kube::Client;
use logpolicy_operator::controller::{self, Outputs};
use logpolicy_operator::flags::Args;
use logpolicy_operator::{health::Health, http, metrics::Metrics, shutdown::Shutdown};
use logpolicy_operator::{lease, signing_key, Pusher, PusherConfig};

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
    let (views_source, views) = controller::pod_views();
    let access = args.token_access();
    let endpoints = http::Endpoints::new(health.clone(), metrics.registry(), views);
    let endpoints = args.endpoints(endpoints, access.as_ref());
    let tls = match args.tls() {
        Ok(tls) => tls,
        Err(e) => {
            eprintln!("logpolicy-operator: --metrics-secure: {e}");
            flush(logging);
            return ExitCode::from(2);
        }
    };
    let (stop, limits) = (shutdown.receiver(), http::ServerLimits::default());
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
    let outputs = Outputs::start(&client, &me, public, views_source, metrics, health);
    let pusher = Pusher::new(key, PusherConfig::default());
    let (config, lease) = (args.controller_config(), args.lease_config(&me, &public));
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
