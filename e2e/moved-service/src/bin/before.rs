//! The service as it was: `EnvFilter` from `RUST_LOG`, `fmt`'s JSON lines on stdout,
//! spans exported by OpenTelemetry (tracing-opentelemetry 0.32, opentelemetry 0.31), and
//! `log` records through `tracing-log` (set by `.init()`).

use opentelemetry_0_31::trace::TracerProvider as _;
use tracing_subscriber::prelude::*;

fn main() -> std::io::Result<()> {
    let provider = opentelemetry_sdk_0_31::trace::SdkTracerProvider::builder().build();
    tracing_subscriber::registry()
        .with(tracing_subscriber::EnvFilter::from_default_env())
        .with(tracing_subscriber::fmt::layer().json())
        .with(tracing_opentelemetry_0_32::layer().with_tracer(provider.tracer("shop")))
        .init();
    logpolicy_moved_service::run()
}
