//! Makes keys, signs policy documents and pushes them to a pod's admin endpoint, by hand.
//!
//! ```text
//! logpolicy-sign keygen --out operator.key          # prints the public key
//! logpolicy-sign pubkey --key operator.key
//! logpolicy-sign push --key operator.key --url http://127.0.0.1:9090/logpolicy \
//!     --pod-namespace shop --pod-name web-1 --pod-uid 0b1c... \
//!     --directives 'info,shop::payment=debug' --for 15m
//! logpolicy-sign push ... --layer '{"source":"ops/x","targets":[{"target":"shop","level":"debug"}]}'
//! logpolicy-sign delete --key operator.key --url http://127.0.0.1:9090/logpolicy --pod-uid ...
//! logpolicy-sign sign --key operator.key < doc.json  # prints the signature header value
//! ```

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{Args as ClapArgs, Parser, Subcommand};
use logpolicy::policy::LayerSpec;
use logpolicy::wire::{self, PodRef, PolicyDocument};

/// Keys, signatures and pushes for logpolicy admin endpoints.
#[derive(Debug, Parser)]
#[command(name = "logpolicy-sign", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Make a signing key: writes its seed (base64) to --out, prints the public key.
    Keygen {
        /// Where to write the signing key (created, mode 0600; never overwritten).
        #[arg(long)]
        out: PathBuf,
    },
    /// Print the public key of a signing key.
    Pubkey {
        /// The signing key file.
        #[arg(long)]
        key: PathBuf,
    },
    /// Sign a document read from stdin; print the signature header's value.
    Sign {
        /// The signing key file.
        #[arg(long)]
        key: PathBuf,
    },
    /// Build, sign and PUT a document: its layers replace the pod's pushed layers.
    Push(PushArgs),
    /// Build, sign and DELETE a document with no layers: back to the baseline.
    Delete(Target),
}

#[derive(Debug, ClapArgs)]
struct Target {
    /// The signing key file.
    #[arg(long)]
    key: PathBuf,
    /// The admin endpoint, e.g. http://127.0.0.1:9090/logpolicy.
    #[arg(long)]
    url: String,
    /// The pod's namespace.
    #[arg(long, default_value = "default")]
    pod_namespace: String,
    /// The pod's name.
    #[arg(long, default_value = "pod")]
    pod_name: String,
    /// The pod's uid (must match the pod's POD_UID when it knows it).
    #[arg(long, default_value = "unknown")]
    pod_uid: String,
    /// The document's version (default: milliseconds since the Unix epoch, so later
    /// pushes by hand are newer).
    #[arg(long)]
    version: Option<u64>,
    /// Print the document and the request instead of sending them.
    #[arg(long)]
    dry_run: bool,
}

#[derive(Debug, ClapArgs)]
struct PushArgs {
    #[command(flatten)]
    target: Target,
    /// A layer as JSON (the policy layer shape); repeatable.
    #[arg(long)]
    layer: Vec<String>,
    /// Or a layer from directives, e.g. 'info,shop::payment=debug'.
    #[arg(long)]
    directives: Option<String>,
    /// The source of the --directives layer.
    #[arg(long, default_value = "manual/push")]
    source: String,
    /// The priority of the --directives layer.
    #[arg(long, default_value_t = 100)]
    priority: i32,
    /// How long the --directives layer lasts, e.g. 90s, 15m, 2h, 1d.
    #[arg(long = "for", value_parser = parse_duration)]
    duration: Option<Duration>,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: u64 = n
        .parse()
        .map_err(|_| format!("invalid duration {s:?} (e.g. 90s, 15m, 2h)"))?;
    let secs = match unit {
        "s" => n,
        "m" => n.saturating_mul(60),
        "h" => n.saturating_mul(3600),
        "d" => n.saturating_mul(86_400),
        _ => return Err(format!("invalid duration {s:?} (units: s, m, h, d)")),
    };
    // What a pod accepts at most by default (`AdminLimits::max_layer_lifetime`).
    const MAX: u64 = 7 * 86_400;
    if secs == 0 || secs > MAX {
        return Err(format!(
            "duration {s:?} must be more than 0 and at most 7d: a pod refuses a longer-lived layer"
        ));
    }
    Ok(Duration::from_secs(secs))
}

fn read_key(path: &Path) -> Result<wire::SigningKey, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    wire::parse_signing_key(&text).map_err(|e| format!("{}: {e}", path.display()))
}

fn keygen(out: &Path) -> Result<(), String> {
    let key = wire::generate_signing_key().map_err(|e| e.to_string())?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options
        .open(out)
        .map_err(|e| format!("{}: {e}", out.display()))?;
    writeln!(file, "{}", wire::encode_signing_key(&key)).map_err(|e| e.to_string())?;
    println!("{}", wire::encode_public_key(&key.verifying_key()));
    Ok(())
}

fn document(target: &Target, layers: Vec<LayerSpec>) -> PolicyDocument {
    let now = SystemTime::now();
    let version = target.version.unwrap_or_else(|| {
        now.duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0)
    });
    let mut doc = PolicyDocument::new(
        PodRef::new(&target.pod_namespace, &target.pod_name, &target.pod_uid),
        version,
    );
    doc.issued_at = now;
    doc.layers = layers;
    doc
}

fn push_layers(args: &PushArgs) -> Result<Vec<LayerSpec>, String> {
    let mut layers = Vec::new();
    for (i, json) in args.layer.iter().enumerate() {
        let layer: LayerSpec =
            serde_json::from_str(json).map_err(|e| format!("--layer #{}: {e}", i + 1))?;
        layers.push(layer);
    }
    if let Some(d) = &args.directives {
        let directives = d.parse().map_err(|e| format!("--directives: {e}"))?;
        let mut layer = LayerSpec::from_directives(&args.source, args.priority, directives);
        if let Some(for_) = args.duration {
            layer = layer.expires_at(SystemTime::now() + for_);
        }
        layers.push(layer);
    }
    Ok(layers)
}

/// Sends one request with `Connection: close` and returns the status and body.
fn send(method: &str, url: &str, header: &str, body: &str) -> Result<(u16, String), String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("{url}: only http:// URLs"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/logpolicy"),
    };
    let addr = authority
        .to_socket_addrs()
        .map_err(|e| format!("{authority}: {e}"))?
        .next()
        .ok_or_else(|| format!("{authority}: no address"))?;
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|e| format!("{addr}: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    let request = format!(
        "{method} {path} HTTP/1.1\r\nhost: {authority}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{}: {header}\r\nconnection: close\r\n\r\n{body}",
        body.len(),
        wire::SIGNATURE_HEADER,
    );
    stream
        .write_all(request.as_bytes())
        .map_err(|e| format!("{addr}: {e}"))?;
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .map_err(|e| format!("{addr}: {e}"))?;
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("{addr}: not an HTTP response"))?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}

fn push(method: &str, target: &Target, layers: Vec<LayerSpec>) -> Result<bool, String> {
    let key = read_key(&target.key)?;
    let doc = document(target, layers);
    doc.validate().map_err(|e| e.to_string())?;
    let body = doc.to_json();
    let header = wire::sign(body.as_bytes(), &key);
    if target.dry_run {
        println!(
            "{method} {}\n{}: {header}\n\n{body}",
            target.url,
            wire::SIGNATURE_HEADER
        );
        return Ok(true);
    }
    let (status, response) = send(method, &target.url, &header, &body)?;
    println!("{status}");
    print!("{response}");
    Ok((200..300).contains(&status))
}

fn run(cli: Cli) -> Result<bool, String> {
    match cli.command {
        Command::Keygen { out } => keygen(&out).map(|()| true),
        Command::Pubkey { key } => {
            println!(
                "{}",
                wire::encode_public_key(&read_key(&key)?.verifying_key())
            );
            Ok(true)
        }
        Command::Sign { key } => {
            let key = read_key(&key)?;
            let mut body = Vec::new();
            std::io::stdin()
                .read_to_end(&mut body)
                .map_err(|e| format!("stdin: {e}"))?;
            println!("{}", wire::sign(&body, &key));
            Ok(true)
        }
        Command::Push(args) => {
            let layers = push_layers(&args)?;
            push("PUT", &args.target, layers)
        }
        Command::Delete(target) => push("DELETE", &target, Vec::new()),
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("logpolicy-sign: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn durations_are_bounded_like_the_pods_lifetime() {
        assert_eq!(parse_duration("15m").unwrap(), Duration::from_secs(900));
        assert_eq!(parse_duration("7d").unwrap(), Duration::from_secs(604_800));
        let err = parse_duration("99999999999999d").unwrap_err();
        assert!(err.contains("at most 7d"), "{err}");
        assert!(parse_duration("8d").is_err());
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("5y").unwrap_err().contains("units"));
    }
}
