//! The service a line comes from: set once, written on every line in its format's place.

/// The name and version of the service, written on every line (the layer's own too) in
/// the place its format has for them; see the [module documentation](crate::format).
///
/// # Examples
///
/// ```
/// use logpolicy::format::Service;
/// let service = Service::named("shop").version("1.4.2");
/// assert_eq!(service.name.as_deref(), Some("shop"));
///
/// let (service, errors) = Service::from_vars(
///     None,
///     Some("deployment.environment=prod,service.name=shop%20api,service.version=1.4.2"),
/// );
/// assert_eq!(service, Service::named("shop api").version("1.4.2"));
/// assert!(errors.is_empty());
///
/// // OTEL_SERVICE_NAME wins over the resource attributes; a bad entry is named.
/// let (service, errors) = Service::from_vars(Some("checkout"), Some("service.name=shop,oops"));
/// assert_eq!(service.name.as_deref(), Some("checkout"));
/// assert_eq!(errors[0].to_string(), "entry \"oops\": no `=` (expected key=value)");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Service {
    /// `service.name`.
    pub name: Option<String>,
    /// `service.version`.
    pub version: Option<String>,
}

/// The environment variable that names the service (OpenTelemetry's).
pub const SERVICE_NAME_VAR: &str = "OTEL_SERVICE_NAME";
/// The environment variable holding OpenTelemetry resource attributes (`key=value,...`,
/// values percent-encoded); `service.name` and `service.version` are read from it.
pub const RESOURCE_ATTRIBUTES_VAR: &str = "OTEL_RESOURCE_ATTRIBUTES";

/// An entry of `OTEL_RESOURCE_ATTRIBUTES` that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("entry {entry:?}: {reason}")]
pub struct ResourceError {
    /// The entry (at most 80 characters of it).
    pub entry: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl Service {
    /// A service called `name`.
    pub fn named(name: impl Into<String>) -> Self {
        Service {
            name: Some(name.into()),
            version: None,
        }
    }

    /// With `version`.
    #[must_use]
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = Some(version.into());
        self
    }

    /// Whether neither is set.
    pub fn is_empty(&self) -> bool {
        self.name.is_none() && self.version.is_none()
    }

    /// The service from `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES`, and the
    /// entries of the latter that were skipped because they do not parse.
    pub fn from_env() -> (Service, Vec<ResourceError>) {
        let name = std::env::var(SERVICE_NAME_VAR).ok();
        let attributes = std::env::var(RESOURCE_ATTRIBUTES_VAR).ok();
        Service::from_vars(name.as_deref(), attributes.as_deref())
    }

    /// The service from the values of `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES`
    /// (as the OpenTelemetry SDKs read them: the first wins for the name, empty values
    /// count as unset), and the entries skipped.
    pub fn from_vars(
        service_name: Option<&str>,
        resource_attributes: Option<&str>,
    ) -> (Service, Vec<ResourceError>) {
        let mut service = Service::default();
        let mut errors = Vec::new();
        for entry in resource_attributes.unwrap_or("").split(',') {
            let entry = entry.trim();
            if entry.is_empty() {
                continue;
            }
            let bad = |reason| ResourceError {
                entry: entry.chars().take(80).collect(),
                reason,
            };
            let Some((key, value)) = entry.split_once('=') else {
                errors.push(bad("no `=` (expected key=value)"));
                continue;
            };
            let slot = match key.trim() {
                "service.name" => &mut service.name,
                "service.version" => &mut service.version,
                "" => {
                    errors.push(bad("empty key"));
                    continue;
                }
                _ => continue,
            };
            match percent_decode(value.trim()) {
                Some(v) if !v.is_empty() => *slot = Some(v),
                Some(_) => {}
                None => errors.push(bad("invalid percent-encoding")),
            }
        }
        if let Some(name) = service_name.map(str::trim).filter(|n| !n.is_empty()) {
            service.name = Some(name.to_owned());
        }
        (service, errors)
    }
}

/// `s` with `%XX` decoded, if every escape is valid and the result is UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_attributes_parse_as_the_sdks_read_them() {
        let (s, e) = Service::from_vars(None, Some(" service.version = 2%2C1 ,, k=v "));
        assert_eq!(s, Service::default().version("2,1"));
        assert!(e.is_empty());
        let (s, e) = Service::from_vars(
            Some("  "),
            Some("=x,service.name=%zz,service.name=%E2%82%AC"),
        );
        assert_eq!(s, Service::named("€"));
        assert_eq!(
            e.iter().map(ToString::to_string).collect::<Vec<_>>(),
            [
                "entry \"=x\": empty key",
                "entry \"service.name=%zz\": invalid percent-encoding"
            ]
        );
        assert_eq!(Service::from_vars(None, Some("service.name=%4")).1.len(), 1);
        assert!(Service::from_vars(None, None).0.is_empty());
    }
}
