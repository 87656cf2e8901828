//! The broker: a thread of the runner (outside the sandbox) that answers a guest's
//! HTTP(S) requests through files in the run's exchange directory.
//!
//! # The protocol
//! The guest writes `N.req` (any decimal `N`, written to a temporary name and renamed,
//! so the broker only ever sees whole files): one line of JSON
//! `{"method": "GET", "url": "https://…", "headers": [["name", "value"], …]}`, a newline,
//! then the request body. The broker removes it, decides, and renames `N.resp` into
//! place: one line of JSON, either `{"status": 200, "reason": "OK", "headers": […]}` or
//! `{"error": "network.origin_not_allowed", "detail": "…"}`, a newline, then the body.
//! Requests are taken in the order of `N`, one at a time.
//!
//! Why files: every WASI guest can create, rename and read files, so the same door
//! serves CPython 3.12 (which has no host-import door) and any future guest; the worker
//! needs no socket, no extra syscall and no change to its seccomp or Landlock rules
//! (the directory lies inside `/out`). wasmtime-wasi reads files with `pread`, so a
//! FIFO (which would avoid polling) cannot be read by the guest. The cost is the poll:
//! the broker looks every millisecond and the guest's handler backs off from 1 ms.

use super::{Exchange, NetworkLog, NetworkPolicy, Url, body_file_name, is_internal};
use crate::digest::sha256_hex;
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
use serde::{Deserialize, Serialize};
use std::io::{self, Read};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long the broker sleeps when the directory holds no request.
const POLL: Duration = Duration::from_millis(1);
/// The largest CA file the policy may name (a system bundle is about 200 KB).
const MAX_CA_FILE_BYTES: u64 = 16 << 20;
/// The longest request header line accepted.
const MAX_HEADER_LINE: u64 = 64 * 1024;
/// How many refusals past `max_requests` are recorded one by one.
const EXTRA_REFUSALS_RECORDED: u32 = 32;
/// Refusals decided after the origin was contacted, which a replay serves as recorded.
const REPLAYED_REFUSALS: &[&str] = &[
    "network.redirect_refused",
    "network.response_too_large",
    "network.timeout",
    "network.fetch_failed",
    "network.private_address",
];
/// Methods the broker performs.
const METHODS: &[&str] = &["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

/// Where the answers come from.
pub enum Source {
    /// Fetched now, over the network, as the policy allows.
    Live,
    /// Served from a recorded log; bodies read from `bodies` (the baseline result's
    /// directory), each checked against its recorded hash.
    Replay {
        recorded: Vec<Exchange>,
        bodies: std::io::Result<Dir>,
    },
}

/// What the broker hands back when the run is over.
pub struct BrokerOutput {
    pub log: NetworkLog,
    /// The response bodies given to the guest, each stored in `body_dir` under the
    /// file name it gets beside the result.
    pub bodies: Vec<String>,
    /// The run's directory of response bodies.
    pub body_dir: Dir,
}

/// A running broker; [`Broker::finish`] stops it and returns the log.
pub struct Broker {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<(NetworkLog, Vec<String>)>,
    body_dir: Dir,
}

#[derive(Deserialize)]
struct WireRequest {
    method: String,
    url: String,
    #[serde(default)]
    headers: Vec<(String, String)>,
}

#[derive(Serialize)]
struct WireResponse<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    headers: Option<&'a [(String, String)]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<&'a str>,
}

/// Why the broker could not start: its thread or a handle, or a CA file the policy
/// names (`network.ca_files`).
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    #[error("cannot start the network broker: {0}")]
    Start(#[source] io::Error),
    #[error("network.ca_files {}: {source}", path.display())]
    CaFileUnreadable {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("network.ca_files {}: {size} bytes, more than {MAX_CA_FILE_BYTES}", path.display())]
    CaFileTooLarge { path: PathBuf, size: u64 },
    #[error("network.ca_files {}: no certificate in it", path.display())]
    NoCertificate { path: PathBuf },
}

/// Why a request file in `/net` could not be taken (the guest is answered
/// `network.bad_request` with this reason).
#[derive(Debug, thiserror::Error)]
enum RequestFileError {
    #[error("cannot read the request: {0}")]
    Read(#[source] io::Error),
    #[error("the request is larger than {0} bytes")]
    TooLarge(u64),
}

/// A refusal: its reason code and why.
struct Refusal(&'static str, String);

/// An answer: status, headers, body.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Broker {
    /// Starts the broker on `exchange` (the guest's `/net`), storing bodies in
    /// `bodies` (a directory of the run, outside the sandbox). It works only through
    /// these handles: whatever the guest puts in `/net` (a symlink out of it) is never
    /// followed out of it.
    ///
    /// # Ambient authority
    /// In [`Source::Live`] mode, opens network connections to the origins `policy`
    /// allows, and reads the system certificate store and the policy's CA files.
    pub fn start(
        policy: NetworkPolicy,
        exchange: Dir,
        bodies: Dir,
        source: Source,
    ) -> Result<Self, BrokerError> {
        let fetcher = match source {
            Source::Live => Fetcher::Live(Box::new(live_agent(&policy)?)),
            Source::Replay { recorded, bodies } => Fetcher::Replay {
                recorded,
                dir: bodies,
                next: 0,
            },
        };
        let body_dir = bodies.try_clone().map_err(BrokerError::Start)?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("runner-net-broker".into())
            .spawn(move || {
                let mut state = State {
                    mode: match fetcher {
                        Fetcher::Live(_) => "live",
                        Fetcher::Replay { .. } => "replay",
                    },
                    policy,
                    fetcher,
                    exchange,
                    body_dir: bodies,
                    log: Vec::new(),
                    bodies: Vec::new(),
                    taken: 0,
                    unrecorded: 0,
                };
                while !flag.load(Ordering::Relaxed) {
                    if !state.serve_pending() {
                        std::thread::sleep(POLL);
                    }
                }
                state.output()
            })
            .map_err(BrokerError::Start)?;
        Ok(Self {
            stop,
            thread,
            body_dir,
        })
    }

    /// Stops the broker (the guest has ended) and returns what it recorded.
    pub fn finish(self) -> BrokerOutput {
        self.stop.store(true, Ordering::Relaxed);
        let (log, bodies) = self.thread.join().unwrap_or_else(|_| {
            let log = NetworkLog {
                mode: "failed".into(),
                ..Default::default()
            };
            (log, Vec::new())
        });
        BrokerOutput {
            log,
            bodies,
            body_dir: self.body_dir,
        }
    }
}

enum Fetcher {
    Live(Box<ureq::Agent>),
    Replay {
        recorded: Vec<Exchange>,
        dir: std::io::Result<Dir>,
        next: usize,
    },
}

struct State {
    mode: &'static str,
    policy: NetworkPolicy,
    fetcher: Fetcher,
    exchange: Dir,
    body_dir: Dir,
    log: Vec<Exchange>,
    bodies: Vec<String>,
    /// Requests taken, allowed or not.
    taken: u32,
    unrecorded: u64,
}

impl State {
    fn output(self) -> (NetworkLog, Vec<String>) {
        let log = NetworkLog {
            mode: self.mode.into(),
            allow: self.policy.allow.iter().map(|o| o.to_string()).collect(),
            max_response_bytes: self.policy.max_response_bytes,
            max_requests: self.policy.max_requests,
            exchanges: self.log,
            unrecorded_refusals: self.unrecorded,
        };
        (log, self.bodies)
    }

    /// Serves every request file present, in the order of their numbers; false when
    /// there was none.
    fn serve_pending(&mut self) -> bool {
        let Ok(entries) = self.exchange.entries() else {
            return false;
        };
        let mut pending: Vec<(u64, String)> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let n = name.strip_suffix(".req")?;
                if n.is_empty() || n.len() > 9 || !n.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                Some((n.parse().ok()?, name))
            })
            .take(1024)
            .collect();
        pending.sort();
        for (n, name) in &pending {
            self.serve_one(*n, name);
        }
        !pending.is_empty()
    }

    fn serve_one(&mut self, n: u64, name: &str) {
        let raw = read_capped(
            &self.exchange,
            name,
            MAX_HEADER_LINE + self.policy.max_response_bytes,
        );
        let _ = self.exchange.remove_file(name);
        self.taken = self.taken.saturating_add(1);
        let seq = self.taken;
        let mut ex = Exchange {
            seq,
            method: String::new(),
            url: String::new(),
            origin: String::new(),
            path: String::new(),
            request_bytes: 0,
            request_sha256: String::new(),
            verdict: "refused".into(),
            contacted: false,
            refusal: None,
            detail: None,
            status: None,
            response_headers: Vec::new(),
            response_bytes: 0,
            response_sha256: None,
        };
        let result = self.decide(raw, &mut ex);
        let response = match &result {
            Ok(answer) => {
                ex.verdict = "allowed".into();
                ex.status = Some(answer.status);
                ex.response_headers.clone_from(&answer.headers);
                ex.response_bytes = answer.body.len() as u64;
                ex.response_sha256 = Some(format!("sha256:{}", sha256_hex(&answer.body)));
                let file = body_file_name(seq);
                if self.body_dir.write(&file, &answer.body).is_ok() {
                    self.bodies.push(file);
                }
                wire(
                    &WireResponse {
                        status: Some(answer.status),
                        reason: Some(reason_phrase(answer.status)),
                        headers: Some(&answer.headers),
                        error: None,
                        detail: None,
                    },
                    &answer.body,
                )
            }
            Err(Refusal(code, detail)) => {
                ex.refusal = Some((*code).to_owned());
                ex.detail = Some(detail.clone());
                wire(
                    &WireResponse {
                        status: None,
                        reason: None,
                        headers: None,
                        error: Some(code),
                        detail: Some(detail),
                    },
                    &[],
                )
            }
        };
        let recorded_cap = self
            .policy
            .max_requests
            .saturating_add(EXTRA_REFUSALS_RECORDED);
        if ex.allowed() || seq <= recorded_cap {
            self.log.push(ex);
        } else {
            self.unrecorded += 1;
        }
        let tmp = format!("{n}.resp.tmp");
        // A guest that filled its /out sees no answer and times out on its side.
        if self.exchange.write(&tmp, &response).is_ok() {
            let _ = self
                .exchange
                .rename(&tmp, &self.exchange, format!("{n}.resp"));
        }
    }

    /// Checks the request and answers it (fetched, or from the recording).
    fn decide(
        &mut self,
        raw: Result<Vec<u8>, RequestFileError>,
        ex: &mut Exchange,
    ) -> Result<Answer, Refusal> {
        let raw = raw.map_err(|e| Refusal("network.bad_request", e.to_string()))?;
        let split = raw.iter().position(|&b| b == b'\n').unwrap_or(raw.len());
        let (line, body) = raw.split_at(split);
        let body = body.get(1..).unwrap_or(&[]);
        let req: WireRequest = serde_json::from_slice(line).map_err(|e| {
            Refusal(
                "network.bad_request",
                format!("the request line is not the broker's JSON: {e}"),
            )
        })?;
        ex.method = req.method.to_ascii_uppercase().chars().take(16).collect();
        ex.url = req.url.chars().take(2048).collect();
        ex.request_bytes = body.len() as u64;
        ex.request_sha256 = format!("sha256:{}", sha256_hex(body));
        if ex.seq > self.policy.max_requests {
            return Err(Refusal(
                "network.max_requests",
                format!(
                    "the policy allows at most {} requests per run",
                    self.policy.max_requests
                ),
            ));
        }
        let url = Url::parse(&req.url).map_err(|e| Refusal("network.bad_url", e.to_string()))?;
        ex.origin = url.origin.to_string();
        ex.path = url.path.chars().take(2048).collect();
        if !METHODS.contains(&ex.method.as_str()) {
            return Err(Refusal(
                "network.bad_request",
                format!("method {:?} is not one the broker performs", ex.method),
            ));
        }
        if !self.policy.allows(&url.origin) {
            return Err(Refusal(
                "network.origin_not_allowed",
                format!("{} is not on the policy's allowlist", url.origin),
            ));
        }
        let answer = match &mut self.fetcher {
            Fetcher::Live(agent) => {
                ex.contacted = true;
                fetch(agent, &self.policy, &req, &url, body)?
            }
            Fetcher::Replay {
                recorded,
                dir,
                next,
            } => replay(recorded, dir, next, ex)?,
        };
        // A redirect is handed to the guest, whose next request is checked like any
        // other; one that leaves the allowlist is refused here, so the guest never
        // sees the other origin's address as a usable answer.
        if (300..400).contains(&answer.status)
            && let Some((_, location)) = answer.headers.iter().find(|(k, _)| k == "location")
        {
            let target = if location.starts_with('/') {
                Url::parse(&format!("{}{location}", url.origin)).ok()
            } else {
                Url::parse(location).ok()
            };
            let allowed = target
                .as_ref()
                .is_some_and(|t| self.policy.allows(&t.origin));
            if !allowed {
                ex.status = Some(answer.status);
                return Err(Refusal(
                    "network.redirect_refused",
                    format!(
                        "{} {} redirects to {}, which is not on the allowlist",
                        url.origin,
                        answer.status,
                        target.map_or_else(
                            || "an unparsable location".to_owned(),
                            |t| t.origin.to_string()
                        )
                    ),
                ));
            }
        }
        Ok(answer)
    }
}

/// Reads at most `cap` bytes of the file `name` of `dir` (never through a symlink, never
/// blocking on a FIFO); longer is an error.
fn read_capped(dir: &Dir, name: &str, cap: u64) -> Result<Vec<u8>, RequestFileError> {
    let flags = nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK;
    let file = dir
        .open_with(
            name,
            OpenOptions::new().read(true).custom_flags(flags.bits()),
        )
        .map_err(RequestFileError::Read)?;
    let mut buf = Vec::new();
    file.take(cap + 1)
        .read_to_end(&mut buf)
        .map_err(RequestFileError::Read)?;
    if buf.len() as u64 > cap {
        return Err(RequestFileError::TooLarge(cap));
    }
    Ok(buf)
}

fn wire(head: &WireResponse<'_>, body: &[u8]) -> Vec<u8> {
    let mut out =
        serde_json::to_vec(head).unwrap_or_else(|_| b"{\"error\":\"network.internal\"}".to_vec());
    out.push(b'\n');
    out.extend_from_slice(body);
    out
}

fn reason_phrase(status: u16) -> &'static str {
    ureq::http::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("")
}

/// The live agent: no proxy, no redirects followed (the guest follows them, each hop
/// checked), status codes as answers, the policy's timeout for the whole exchange, TLS
/// against the system store plus the policy's CA files, and a resolver that refuses
/// internal addresses for a public name.
fn live_agent(policy: &NetworkPolicy) -> Result<ureq::Agent, BrokerError> {
    use ureq::tls::{Certificate, PemItem, RootCerts, TlsConfig};
    let mut roots: Vec<Certificate<'static>> = Vec::new();
    let native = rustls_native_certs::load_native_certs();
    for cert in native.certs {
        roots.push(Certificate::from_der(cert.as_ref()).to_owned());
    }
    for file in &policy.ca_files {
        // A file the policy names, read as the operator's shell would (a symlink
        // followed), capped.
        let pem = match crate::read::read_document(file, MAX_CA_FILE_BYTES) {
            Ok(crate::read::Read2::Bytes(pem)) => pem,
            Ok(crate::read::Read2::TooLarge(size)) => {
                return Err(BrokerError::CaFileTooLarge {
                    path: file.clone(),
                    size,
                });
            }
            Err(source) => {
                return Err(BrokerError::CaFileUnreadable {
                    path: file.clone(),
                    source,
                });
            }
        };
        let mut found = 0;
        for item in ureq::tls::parse_pem(&pem) {
            if let Ok(PemItem::Certificate(c)) = item {
                roots.push(c);
                found += 1;
            }
        }
        if found == 0 {
            return Err(BrokerError::NoCertificate { path: file.clone() });
        }
    }
    let tls = TlsConfig::builder()
        .root_certs(RootCerts::Specific(Arc::new(roots)))
        .build();
    let config = ureq::Agent::config_builder()
        .proxy(None)
        .max_redirects(0)
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(policy.timeout_sec)))
        .tls_config(tls)
        .user_agent("runner-net-broker")
        .build();
    Ok(ureq::Agent::with_parts(
        config,
        ureq::unversioned::transport::DefaultConnector::default(),
        GuardedResolver::default(),
    ))
}

/// DNS through the default resolver, refusing a name (not an IP literal) that answers
/// with a loopback, private or link-local address: a public name must not lead the
/// broker into the runner's own network (DNS rebinding).
#[derive(Debug, Default)]
struct GuardedResolver(ureq::unversioned::resolver::DefaultResolver);

const PRIVATE_ANSWER: &str = "network.private_address";

impl ureq::unversioned::resolver::Resolver for GuardedResolver {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        config: &ureq::config::Config,
        timeout: ureq::unversioned::transport::NextTimeout,
    ) -> Result<ureq::unversioned::resolver::ResolvedSocketAddrs, ureq::Error> {
        let addrs = self.0.resolve(uri, config, timeout)?;
        let host = uri
            .host()
            .unwrap_or("")
            .trim_start_matches('[')
            .trim_end_matches(']');
        let literal = host.parse::<std::net::IpAddr>().is_ok();
        if !literal
            && host != "localhost"
            && let Some(bad) = addrs.iter().find(|a| is_internal(a.ip()))
        {
            return Err(ureq::Error::Io(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!(
                    "{PRIVATE_ANSWER}: {host} resolves to {}, an internal address",
                    bad.ip()
                ),
            )));
        }
        Ok(addrs)
    }
}

fn fetch(
    agent: &ureq::Agent,
    policy: &NetworkPolicy,
    req: &WireRequest,
    url: &Url,
    body: &[u8],
) -> Result<Answer, Refusal> {
    let mut builder = ureq::http::Request::builder()
        .method(req.method.to_ascii_uppercase().as_str())
        .uri(format!("{}{}", url.origin, url.path));
    for (k, v) in req.headers.iter().take(64) {
        let lower = k.to_ascii_lowercase();
        // The broker decides these, not the guest.
        if matches!(
            lower.as_str(),
            "host" | "connection" | "content-length" | "transfer-encoding" | "proxy-authorization"
        ) {
            continue;
        }
        builder = builder.header(k.as_str(), v.as_str());
    }
    let request = builder.body(body.to_vec()).map_err(|e| {
        Refusal(
            "network.bad_request",
            format!("the request cannot be built: {e}"),
        )
    })?;
    let deadline = Instant::now() + Duration::from_secs(policy.timeout_sec);
    let https = url.origin.scheme == super::Scheme::Https;
    let mut response = agent
        .run(request)
        .map_err(|e| transport_refusal(e, https))?;
    let status = response.status().as_u16();
    let headers: Vec<(String, String)> = response
        .headers()
        .iter()
        .take(128)
        .map(|(k, v)| {
            (
                k.as_str().to_owned(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    // Read in chunks against the deadline: a slow-loris server that sends a byte just
    // before each read would time out would otherwise hold the broker indefinitely.
    let cap = policy.max_response_bytes;
    let too_large = || {
        Refusal(
            "network.response_too_large",
            format!("the response body is larger than the policy's {cap} bytes"),
        )
    };
    let mut reader = response.body_mut().with_config().limit(cap).reader();
    let mut body = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        if Instant::now() > deadline {
            return Err(Refusal(
                "network.timeout",
                format!(
                    "the response took longer than the policy's {} s",
                    policy.timeout_sec
                ),
            ));
        }
        match reader.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                body.extend_from_slice(&chunk[..n]);
                if body.len() as u64 > cap {
                    return Err(too_large());
                }
            }
            Err(e) => {
                return Err(match ureq::Error::from(e) {
                    ureq::Error::BodyExceedsLimit(_) => too_large(),
                    other => transport_refusal(other, https),
                });
            }
        }
    }
    Ok(Answer {
        status,
        headers,
        body,
    })
}

/// The refusal for a failed transfer. Over `https`, one that TLS failed says so:
/// rustls's errors (an untrusted or mismatched certificate, a bad handshake) reach here
/// as ureq's TLS errors or as I/O errors of kind `InvalidData`, which plain TCP never
/// gives.
fn transport_refusal(e: ureq::Error, https: bool) -> Refusal {
    match e {
        ureq::Error::Timeout(t) => {
            Refusal("network.timeout", format!("the exchange timed out ({t})"))
        }
        ureq::Error::Io(io) if io.to_string().starts_with(PRIVATE_ANSWER) => {
            Refusal(PRIVATE_ANSWER, io.to_string())
        }
        ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::TimedOut => {
            Refusal("network.timeout", format!("the exchange timed out ({io})"))
        }
        ureq::Error::Io(io) if https && io.kind() == std::io::ErrorKind::InvalidData => {
            Refusal("network.fetch_failed", format!("TLS failed: {io}"))
        }
        tls @ (ureq::Error::Rustls(_) | ureq::Error::Tls(_)) => {
            Refusal("network.fetch_failed", format!("TLS failed: {tls}"))
        }
        other => Refusal("network.fetch_failed", other.to_string()),
    }
}

/// The next recorded exchange, when it is this request: its answer, the body read back
/// and checked against its recorded hash. Anything else is `network.replay_unrecorded`.
fn replay(
    recorded: &[Exchange],
    dir: &std::io::Result<Dir>,
    next: &mut usize,
    ex: &mut Exchange,
) -> Result<Answer, Refusal> {
    let unrecorded = |why: String| Refusal("network.replay_unrecorded", why);
    // Refusals decided before any contact were decided by the checks above, which ran
    // again; one decided after the origin answered (a redirect off the list, a body too
    // large, a timeout, a failed transfer) is served as recorded.
    let Some(want) = recorded[(*next).min(recorded.len())..]
        .iter()
        .find(|r| r.allowed() || r.contacted)
    else {
        return Err(unrecorded(format!(
            "the recording holds no further exchange for {} {}",
            ex.method, ex.url
        )));
    };
    if want.method != ex.method || want.url != ex.url || want.request_sha256 != ex.request_sha256 {
        return Err(unrecorded(format!(
            "the recording's next exchange is {} {}, not {} {}",
            want.method, want.url, ex.method, ex.url
        )));
    }
    *next = recorded
        .iter()
        .position(|r| r.seq == want.seq)
        .map_or(recorded.len(), |i| i + 1);
    if !want.allowed() {
        ex.status = want.status;
        let code = want.refusal.as_deref().unwrap_or("");
        let code = REPLAYED_REFUSALS
            .iter()
            .find(|c| **c == code)
            .copied()
            .ok_or_else(|| {
                unrecorded(format!(
                    "the recording's exchange {} was refused with {code:?}, not a code a replay serves",
                    want.seq
                ))
            })?;
        return Err(Refusal(code, want.detail.clone().unwrap_or_default()));
    }
    let body = dir
        .as_ref()
        .map_err(|e| std::io::Error::new(e.kind(), e.to_string()))
        .and_then(|dir| dir.read(body_file_name(want.seq)))
        .map_err(|e| unrecorded(format!("the recorded body of exchange {}: {e}", want.seq)))?;
    let sha = format!("sha256:{}", sha256_hex(&body));
    if Some(&sha) != want.response_sha256.as_ref() {
        return Err(unrecorded(format!(
            "the recorded body of exchange {} does not match its hash",
            want.seq
        )));
    }
    Ok(Answer {
        status: want.status.unwrap_or(200),
        headers: want.response_headers.clone(),
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reasons read as the texts they replaced: a run that cannot start its broker
    /// says them, and a guest's refused request is answered with them.
    #[test]
    fn reasons_keep_their_text() {
        let path = || PathBuf::from("/etc/runner/ca.pem");
        let io = || io::Error::from_raw_os_error(2);
        let cases = [
            (
                BrokerError::Start(io()).to_string(),
                format!("cannot start the network broker: {}", io()),
            ),
            (
                BrokerError::CaFileUnreadable {
                    path: path(),
                    source: io(),
                }
                .to_string(),
                format!("network.ca_files /etc/runner/ca.pem: {}", io()),
            ),
            (
                BrokerError::CaFileTooLarge {
                    path: path(),
                    size: 9 << 20,
                }
                .to_string(),
                format!(
                    "network.ca_files /etc/runner/ca.pem: 9437184 bytes, more than \
                     {MAX_CA_FILE_BYTES}"
                ),
            ),
            (
                BrokerError::NoCertificate { path: path() }.to_string(),
                "network.ca_files /etc/runner/ca.pem: no certificate in it".to_owned(),
            ),
            (
                RequestFileError::Read(io()).to_string(),
                format!("cannot read the request: {}", io()),
            ),
            (
                RequestFileError::TooLarge(10).to_string(),
                "the request is larger than 10 bytes".to_owned(),
            ),
        ];
        for (shown, text) in cases {
            assert_eq!(shown, text);
        }
    }
}
