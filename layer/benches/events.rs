//! The events the benchmarks log, shared with `examples/format_loop.rs`.

/// An enabled `info!` with 6 fields and a message, as an HTTP service logs a request.
#[inline(never)]
pub fn six_fields() {
    tracing::info!(
        target: "shop::http",
        method = "GET",
        path = "/api/cart/42",
        status = 200u16,
        latency_us = 1234u64,
        user = "c0ffee-42",
        cache_hit = true,
        "request served"
    );
}
