//! What the demo service's tests share: the HTTP GET they send, the signing tool, and
//! the addresses the service says it listens on.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command};
use std::time::Duration;

pub const SIGN: &str = env!("CARGO_BIN_EXE_logpolicy-sign");

/// `GET path` on `addr`: the status and the body.
pub fn get(addr: &str, path: &str) -> (u16, String) {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        c,
        "GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
    )
    .unwrap();
    let mut s = String::new();
    c.read_to_string(&mut s).unwrap();
    let status = s[9..12].parse().unwrap();
    (status, s.split_once("\r\n\r\n").unwrap().1.to_owned())
}

/// Runs `logpolicy-sign` with `args`: whether it succeeded, and its stdout then stderr.
pub fn sign_tool(args: &[&str]) -> (bool, String) {
    let out = Command::new(SIGN).args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// The shop's and the admin endpoint's addresses, from the first line the service writes
/// to stderr (with its stderr piped): "logpolicy-demo-service: shop on http://A, admin
/// on http://B".
pub fn listening(service: &mut Child) -> (String, String) {
    let mut first = String::new();
    BufReader::new(service.stderr.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let addrs: Vec<&str> = first
        .split("http://")
        .skip(1)
        .map(|s| s.split([',', '\n', ' ']).next().unwrap())
        .collect();
    assert_eq!(addrs.len(), 2, "it started, with its endpoint: {first}");
    (addrs[0].to_owned(), addrs[1].to_owned())
}
