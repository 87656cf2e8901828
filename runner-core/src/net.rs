//! The network allowlist's data: the policy's `[network]` table and its
//! checked form, origins and URLs as the broker judges them, and the egress log every
//! exchange is recorded in (the lock and the statement carry it). The broker that
//! performs the exchanges is `runner::net::broker`.

use core::fmt;
use core::net::IpAddr;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The `payloadType`-like tag of a recorded response body file beside a result.
pub fn body_file_name(seq: u32) -> String {
    format!("net-{seq:04}.body")
}

/// The `[network]` table as written.
#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NetworkFile {
    /// Origins (`scheme://host[:port]`) a `network: allowlist` request may reach.
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default = "default_max_response_bytes")]
    pub max_response_bytes: u64,
    #[serde(default = "default_max_requests")]
    pub max_requests: u32,
    #[serde(default = "default_timeout_sec")]
    pub timeout_sec: u64,
    /// PEM files of extra certificate authorities, trusted beside the system store.
    #[serde(default)]
    pub ca_files: Vec<PathBuf>,
}

fn default_max_response_bytes() -> u64 {
    16 << 20
}
fn default_max_requests() -> u32 {
    64
}
fn default_timeout_sec() -> u64 {
    30
}

/// The effective network policy: absent table or empty `allow` refuses `allowlist`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkPolicy {
    pub allow: Vec<Origin>,
    pub max_response_bytes: u64,
    pub max_requests: u32,
    pub timeout_sec: u64,
    pub ca_files: Vec<PathBuf>,
}

impl Default for NetworkPolicy {
    fn default() -> Self {
        Self {
            allow: Vec::new(),
            max_response_bytes: default_max_response_bytes(),
            max_requests: default_max_requests(),
            timeout_sec: default_timeout_sec(),
            ca_files: Vec::new(),
        }
    }
}

impl NetworkPolicy {
    /// Checks the table: every origin parses, every cap is positive.
    pub fn from_file(file: NetworkFile) -> Result<Self, NetworkTableError> {
        let mut allow = Vec::with_capacity(file.allow.len());
        for (index, text) in file.allow.iter().enumerate() {
            allow.push(
                Origin::parse(text).map_err(|source| NetworkTableError::Origin {
                    index,
                    text: text.clone(),
                    source,
                })?,
            );
        }
        for (key, v) in [
            ("max_response_bytes", file.max_response_bytes),
            ("max_requests", u64::from(file.max_requests)),
            ("timeout_sec", file.timeout_sec),
        ] {
            if v == 0 {
                return Err(NetworkTableError::NotPositive(key));
            }
        }
        Ok(Self {
            allow,
            max_response_bytes: file.max_response_bytes,
            max_requests: file.max_requests,
            timeout_sec: file.timeout_sec,
            ca_files: file.ca_files,
        })
    }

    /// True when `network: allowlist` can be served.
    pub fn enabled(&self) -> bool {
        !self.allow.is_empty()
    }

    pub fn allows(&self, origin: &Origin) -> bool {
        self.allow.contains(origin)
    }
}

/// Why the `[network]` table is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetworkTableError {
    #[error("network.allow[{index}] {text:?}: {source}")]
    Origin {
        index: usize,
        text: String,
        source: UrlError,
    },
    #[error("network.{0} must be positive")]
    NotPositive(&'static str),
}

/// Why a URL (or an origin) is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error("the URL is longer than 8192 bytes")]
    TooLong,
    #[error("the URL holds spaces or control characters")]
    Characters,
    #[error("not an absolute URL (scheme://host...)")]
    NotAbsolute,
    #[error("scheme {0:?} is not http or https")]
    Scheme(String),
    #[error("user info in the URL is refused")]
    UserInfo,
    #[error("unclosed [ in the host")]
    UnclosedBracket,
    #[error("{0:?} is not an IPv6 address")]
    NotIpv6(String),
    #[error("the URL has no host")]
    NoHost,
    #[error("host {0:?} holds characters a host name cannot")]
    Host(String),
    #[error("port {0:?} is not a number")]
    Port(String),
    #[error("an origin is scheme://host[:port], with no path, query or fragment")]
    NotAnOrigin,
}

/// `http` or `https`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    fn default_port(self) -> u16 {
        match self {
            Self::Http => 80,
            Self::Https => 443,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Https => "https",
        }
    }
}

/// An origin: scheme, lower-case host (IPv6 without brackets) and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub scheme: Scheme,
    pub host: String,
    pub port: u16,
}

impl Origin {
    /// Parses `scheme://host[:port]` (a trailing `/` is allowed; nothing else after the
    /// authority is).
    pub fn parse(text: &str) -> Result<Self, UrlError> {
        let url = Url::parse(text)?;
        if !matches!(url.path.as_str(), "/" | "") || text.contains('?') || text.contains('#') {
            return Err(UrlError::NotAnOrigin);
        }
        Ok(url.origin)
    }

    /// The host as an IP address, when it is a literal.
    pub fn ip(&self) -> Option<IpAddr> {
        self.host.parse().ok()
    }

    /// `host:port`, as the result's `network_destinations` lists it.
    pub fn destination(&self) -> String {
        match self.ip() {
            Some(IpAddr::V6(_)) => format!("[{}]:{}", self.host, self.port),
            _ => format!("{}:{}", self.host, self.port),
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = match self.ip() {
            Some(IpAddr::V6(_)) => format!("[{}]", self.host),
            _ => self.host.clone(),
        };
        if self.port == self.scheme.default_port() {
            write!(f, "{}://{host}", self.scheme.as_str())
        } else {
            write!(f, "{}://{host}:{}", self.scheme.as_str(), self.port)
        }
    }
}

/// An absolute `http(s)` URL split into its origin and its path with query (the
/// fragment dropped). User info (`user@host`) is refused: credentials do not travel in
/// URLs through the broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    pub origin: Origin,
    pub path: String,
}

impl Url {
    pub fn parse(text: &str) -> Result<Self, UrlError> {
        if text.len() > 8192 {
            return Err(UrlError::TooLong);
        }
        if text.chars().any(|c| c.is_ascii_control() || c == ' ') {
            return Err(UrlError::Characters);
        }
        let (scheme, rest) = text.split_once("://").ok_or(UrlError::NotAbsolute)?;
        let scheme = match scheme.to_ascii_lowercase().as_str() {
            "http" => Scheme::Http,
            "https" => Scheme::Https,
            other => return Err(UrlError::Scheme(other.to_owned())),
        };
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        if authority.contains('@') {
            return Err(UrlError::UserInfo);
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (h, after) = v6.split_once(']').ok_or(UrlError::UnclosedBracket)?;
            h.parse::<core::net::Ipv6Addr>()
                .map_err(|_| UrlError::NotIpv6(h.to_owned()))?;
            (h.to_owned(), after.strip_prefix(':'))
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_owned(), Some(p)),
                None => (authority.to_owned(), None),
            }
        };
        if host.is_empty() {
            return Err(UrlError::NoHost);
        }
        if !host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '_'))
        {
            return Err(UrlError::Host(host));
        }
        let port = match port {
            None | Some("") => scheme.default_port(),
            Some(p) => p.parse().map_err(|_| UrlError::Port(p.to_owned()))?,
        };
        let tail = tail.split('#').next().unwrap_or("");
        let path = if tail.starts_with('/') {
            tail.to_owned()
        } else {
            format!("/{tail}")
        };
        Ok(Self {
            origin: Origin {
                scheme,
                host: host.to_ascii_lowercase().trim_end_matches('.').to_owned(),
                port,
            },
            path,
        })
    }

    /// The URL a redirect's `Location` leads to, resolved against this one as urllib
    /// resolves it as far as the origin goes (what the broker checks): absolute
    /// (`http(s)://…`), scheme-relative (`//host:port/…`, another origin), an absolute
    /// path or a relative reference (this origin; its path is not resolved). `None` for
    /// another scheme, a backslash, or anything that does not parse.
    pub fn resolve(&self, location: &str) -> Option<Self> {
        let has_scheme = location.split_once(':').is_some_and(|(scheme, _)| {
            !scheme.is_empty()
                && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        });
        let absolute = if has_scheme {
            location.to_owned()
        } else if location.starts_with("//") {
            format!("{}:{location}", self.origin.scheme.as_str())
        } else if location.starts_with('/') {
            format!("{}{location}", self.origin)
        } else {
            // A relative reference (`next`, `?page=2`) stays on this origin.
            format!("{}/{location}", self.origin)
        };
        if absolute.contains('\\') {
            return None;
        }
        Self::parse(&absolute).ok()
    }
}

/// True for addresses a public name must never resolve to: loopback, private,
/// link-local, unique-local, unspecified, CGNAT, multicast, broadcast, documentation.
pub fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || (o[0] == 100 && (64..128).contains(&o[1]))
                || o[0] == 0
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_internal(IpAddr::V4(v4));
            }
            let s = v6.segments();
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] & 0xffc0) == 0xfe80
        }
    }
}

/// One exchange of the egress log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Exchange {
    /// 1, 2, 3… in the order the broker took the requests.
    pub seq: u32,
    pub method: String,
    /// The URL as the guest asked for it, in full (a URL longer than 8192 bytes is
    /// refused before anything leaves, and kept cut to 2048 characters).
    pub url: String,
    /// `scheme://host[:port]`; empty when the URL did not parse.
    pub origin: String,
    pub path: String,
    pub request_bytes: u64,
    pub request_sha256: String,
    /// `sha256:` of the request head the broker sent: the method, the URL as sent and
    /// every header it forwarded, one `name: value` line each (the broker's own,
    /// `Host`, `Content-Length`, `User-Agent`, `Accept`, follow from these). Absent for
    /// a request refused before a head was built, and in locks written before it was
    /// recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_head_sha256: Option<String>,
    /// The size of that head in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_head_bytes: Option<u64>,
    /// `allowed` (the exchange happened) or `refused`.
    pub verdict: String,
    /// The broker opened a connection to the origin for it (live mode): true also for
    /// an exchange refused after that (a redirect off the list, a body too large, a
    /// timeout), false for one refused before any packet left and for a replay.
    #[serde(default)]
    pub contacted: bool,
    /// The refusal's reason code (`network.origin_not_allowed`, …); absent when allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
    /// Why, in words (a refusal's, or a transport error's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The response headers, as received (names lower-cased).
    #[serde(default)]
    pub response_headers: Vec<(String, String)>,
    pub response_bytes: u64,
    /// `sha256:` of the response body; stored beside the result as
    /// [`body_file_name`]`(seq)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_sha256: Option<String>,
}

impl Exchange {
    pub fn allowed(&self) -> bool {
        self.verdict == "allowed"
    }
}

/// The egress log of one run, as the lock and the in-toto statement carry it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkLog {
    /// `live` (fetched) or `replay` (served from a recording).
    pub mode: String,
    /// The origins the policy allowed.
    pub allow: Vec<String>,
    pub max_response_bytes: u64,
    pub max_requests: u32,
    pub exchanges: Vec<Exchange>,
    /// Refusals past the log's own cap, counted but not recorded one by one.
    #[serde(default)]
    pub unrecorded_refusals: u64,
}

impl NetworkLog {
    /// The origins actually contacted (`host:port`), sorted and unique: what the
    /// result's `network_destinations` lists.
    pub fn destinations(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .exchanges
            .iter()
            .filter(|e| e.contacted)
            .filter_map(|e| Url::parse(&e.url).ok())
            .map(|u| u.origin.destination())
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// One line per refused exchange, for the result's Safety Notes.
    pub fn refusals(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .exchanges
            .iter()
            .filter(|e| !e.allowed())
            .map(|e| {
                format!(
                    "request {} {} {} refused ({}): {}",
                    e.seq,
                    e.method,
                    e.origin,
                    e.refusal.as_deref().unwrap_or("network.refused"),
                    e.detail.as_deref().unwrap_or("")
                )
            })
            .collect();
        if self.unrecorded_refusals > 0 {
            out.push(format!(
                "{} more requests refused and not recorded one by one",
                self.unrecorded_refusals
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_parse_and_print() {
        let o = Origin::parse("HTTPS://Api.Example.org").unwrap();
        assert_eq!(o.to_string(), "https://api.example.org");
        assert_eq!(o.destination(), "api.example.org:443");
        let o = Origin::parse("http://127.0.0.1:8123/").unwrap();
        assert_eq!(o.to_string(), "http://127.0.0.1:8123");
        let o = Origin::parse("http://[::1]:8080").unwrap();
        assert_eq!(o.destination(), "[::1]:8080");
        for bad in [
            "ftp://x",
            "http://x/path",
            "http://u@x",
            "x.org",
            "http://:80",
            "http://x:port",
        ] {
            assert!(Origin::parse(bad).is_err(), "{bad} parsed");
        }
    }

    /// The errors read as they did when they were strings: the broker's refusal details
    /// and the policy's messages quote them.
    #[test]
    fn url_and_table_errors_say_what_is_wrong() {
        let err = |text: &str| Url::parse(text).unwrap_err().to_string();
        assert_eq!(err("ftp://x"), "scheme \"ftp\" is not http or https");
        assert_eq!(err("http://u@x"), "user info in the URL is refused");
        assert_eq!(err("x.org"), "not an absolute URL (scheme://host...)");
        assert_eq!(err("http://[::1"), "unclosed [ in the host");
        assert_eq!(err("http://[x]"), "\"x\" is not an IPv6 address");
        assert_eq!(err("http://:80"), "the URL has no host");
        assert_eq!(
            err("http://a!b"),
            "host \"a!b\" holds characters a host name cannot"
        );
        assert_eq!(err("http://x:port"), "port \"port\" is not a number");
        assert_eq!(
            err("http://x y"),
            "the URL holds spaces or control characters"
        );
        assert_eq!(
            Origin::parse("http://x/path").unwrap_err().to_string(),
            "an origin is scheme://host[:port], with no path, query or fragment"
        );
        let file = |allow: &str, max_requests: u32| NetworkFile {
            allow: vec![allow.to_owned()],
            max_response_bytes: 1,
            max_requests,
            timeout_sec: 1,
            ca_files: Vec::new(),
        };
        assert_eq!(
            NetworkPolicy::from_file(file("ftp://x", 1))
                .unwrap_err()
                .to_string(),
            "network.allow[0] \"ftp://x\": scheme \"ftp\" is not http or https"
        );
        assert_eq!(
            NetworkPolicy::from_file(file("http://x", 0))
                .unwrap_err()
                .to_string(),
            "network.max_requests must be positive"
        );
    }

    #[test]
    fn urls_split_origin_and_path() {
        let u = Url::parse("http://127.0.0.1:9/a/b?q=1#frag").unwrap();
        assert_eq!(u.origin.to_string(), "http://127.0.0.1:9");
        assert_eq!(u.path, "/a/b?q=1");
        assert_eq!(Url::parse("https://x.org").unwrap().path, "/");
    }

    /// A redirect's target as urllib resolves it: a scheme-relative `//other:port/`
    /// is another origin (what the broker's redirect check must see), a path or a
    /// relative reference this one, another scheme nothing.
    #[test]
    fn locations_resolve_as_urllib_does() {
        let base = Url::parse("http://127.0.0.1:8080/a/b").unwrap();
        let origin = |loc: &str| base.resolve(loc).map(|u| u.origin.to_string());
        assert_eq!(
            origin("//127.0.0.1:9999/hello").as_deref(),
            Some("http://127.0.0.1:9999")
        );
        assert_eq!(origin("https://x.org/p").as_deref(), Some("https://x.org"));
        assert_eq!(origin("/c").as_deref(), Some("http://127.0.0.1:8080"));
        assert_eq!(origin("c?d=1").as_deref(), Some("http://127.0.0.1:8080"));
        assert_eq!(origin("ftp://x.org/"), None);
        assert_eq!(origin("javascript:alert(1)"), None);
        assert_eq!(origin("/\\evil.example/"), None);
    }

    #[test]
    fn internal_ranges() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "192.168.0.1",
            "169.254.169.254",
            "::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "100.64.0.1",
        ] {
            assert!(is_internal(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.216.34", "2606:4700::1111"] {
            assert!(!is_internal(ip.parse().unwrap()), "{ip}");
        }
    }
}
