//! The service moved to logpolicy by the README alone: logpolicy's layer where `fmt`'s
//! and `EnvFilter` were, the same OpenTelemetry layer, the same `.init()`.
//! `OTEL_VERSION=0.32` keeps the OpenTelemetry the service had (tracing-opentelemetry
//! 0.32, opentelemetry 0.31); otherwise it runs the versions logpolicy reads (0.34,
//! 0.33).

use tracing_subscriber::prelude::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (logpolicy, logging) = logpolicy::Builder::from_env().layer()?;
    let registry = tracing_subscriber::registry().with(logpolicy);
    if std::env::var("OTEL_VERSION").as_deref() == Ok("0.32") {
        use opentelemetry_0_31::trace::TracerProvider as _;
        let provider = opentelemetry_sdk_0_31::trace::SdkTracerProvider::builder().build();
        registry
            .with(tracing_opentelemetry_0_32::layer().with_tracer(provider.tracer("shop")))
            .init();
    } else {
        use opentelemetry::trace::TracerProvider as _;
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
        registry
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("shop")))
            .init();
    }
    logpolicy_moved_service::run()?;
    drop(logging);
    Ok(())
}
