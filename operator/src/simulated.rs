//! The pods `push-bench` simulates (`push-bench agents`), named and addressed the same
//! way wherever they are used (the operator's `push-bench`, the plugin's bench): pod `i`
//! is `pod-0000`... and listens on a loopback address of its own.
//!
//! ```
//! use logpolicy_operator::simulated;
//! assert_eq!(simulated::pod_name(7), "pod-0007");
//! assert_eq!(simulated::addr(0).to_string(), "127.0.1.1:19090");
//! assert_eq!(simulated::addr(250).to_string(), "127.0.2.1:19090");
//! ```

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// The simulated pods' admin port.
pub const PORT: u16 = 19_090;

/// The address of simulated pod `i`: `127.0.(1 + i / 250).(1 + i % 250)`, [`PORT`]
/// (250 pods per /24, none at `.0` or `.255`).
pub fn addr(i: usize) -> SocketAddr {
    let third = u8::try_from(1 + i / 250).unwrap_or(u8::MAX);
    let fourth = u8::try_from(1 + i % 250).unwrap_or(u8::MAX);
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, third, fourth)), PORT)
}

/// The name of simulated pod `i` (what its documents must name).
pub fn pod_name(i: usize) -> String {
    format!("pod-{i:04}")
}
