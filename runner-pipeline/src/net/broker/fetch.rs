//! Live exchanges: the HTTP client (its CA files and a resolver that refuses private
//! addresses), one exchange on a thread of its own, and transport errors as refusals.

use super::wire::RequestHead;
use super::{Answer, BrokerError, IN_FLIGHT_CHECK, MAX_CA_FILE_BYTES, Refusal};

use runner_core::net::NetworkPolicy;
use runner_core::net::Url;
use runner_core::net::is_internal;
use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// One live exchange, owned, so it can run on a thread of its own.
pub(super) struct Fetch {
    pub(super) agent: ureq::Agent,
    pub(super) method: String,
    pub(super) head: RequestHead,
    pub(super) body: Vec<u8>,
    pub(super) https: bool,
    pub(super) cap: u64,
    /// The exchange's timeout: the policy's, cut to what is left of the run.
    pub(super) limit: Duration,
    pub(super) cut_by_run: bool,
}

/// Runs `job` on a thread of its own and waits for it while the guest runs: when the
/// guest ends first, the exchange is abandoned (its thread ends by its own timeout,
/// which the run's deadline bounds) and refused as `network.run_ended`.
pub(super) fn in_flight(job: Fetch, stop: &AtomicBool, url: &Url) -> Result<Answer, Refusal> {
    let (tx, rx) = mpsc::sync_channel(1);
    let limit = job.limit;
    let spawned = std::thread::Builder::new()
        .name("runner-net-fetch".into())
        .spawn(move || {
            let _ = tx.send(fetch(&job));
        });
    if let Err(e) = spawned {
        return Err(Refusal(
            "network.fetch_failed",
            format!("cannot start the exchange: {e}"),
        ));
    }
    // The fetch ends by its own timeout; a second more covers its last read.
    let give_up = Instant::now() + limit + Duration::from_secs(1);
    loop {
        match rx.recv_timeout(IN_FLIGHT_CHECK) {
            Ok(answer) => return answer,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if stop.load(Ordering::Relaxed) {
                    return Err(Refusal(
                        "network.run_ended",
                        format!(
                            "the guest ended before {} answered; the exchange was abandoned",
                            url.origin
                        ),
                    ));
                }
                if Instant::now() > give_up {
                    return Err(Refusal(
                        "network.timeout",
                        format!("no answer within {} ms", limit.as_millis()),
                    ));
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(Refusal(
                    "network.fetch_failed",
                    "the exchange ended without an answer".into(),
                ));
            }
        }
    }
}

/// The live agent: no proxy, no redirects followed (the guest follows them, each hop
/// checked), status codes as answers, the policy's timeout for the whole exchange, TLS
/// against the system store plus the policy's CA files, and a resolver that refuses
/// internal addresses for a public name.
pub(super) fn live_agent(policy: &NetworkPolicy) -> Result<ureq::Agent, BrokerError> {
    use ureq::tls::{Certificate, PemItem, RootCerts, TlsConfig};
    let mut roots: Vec<Certificate<'static>> = Vec::new();
    let native = rustls_native_certs::load_native_certs();
    for cert in native.certs {
        roots.push(Certificate::from_der(cert.as_ref()).to_owned());
    }
    for file in &policy.ca_files {
        // A file the policy names, read as the operator's shell would (a symlink
        // followed), capped.
        let pem = match runner_sandbox::read::read_document(file, MAX_CA_FILE_BYTES) {
            Ok(runner_sandbox::read::Read2::Bytes(pem)) => pem,
            Ok(runner_sandbox::read::Read2::TooLarge(size)) => {
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

/// [`fetch_now`]; a timeout says when it was the run's time limit that cut it.
pub(super) fn fetch(job: &Fetch) -> Result<Answer, Refusal> {
    fetch_now(job).map_err(|Refusal(code, detail)| {
        if code == "network.timeout" && job.cut_by_run {
            let detail = format!(
                "{detail}; the exchange had {} ms, what was left of the run's time limit",
                job.limit.as_millis()
            );
            Refusal(code, detail)
        } else {
            Refusal(code, detail)
        }
    })
}

pub(super) fn fetch_now(job: &Fetch) -> Result<Answer, Refusal> {
    let mut builder = ureq::http::Request::builder()
        .method(job.method.as_str())
        .uri(job.head.url.as_str());
    for (k, v) in &job.head.headers {
        builder = builder.header(k.as_str(), v.as_str());
    }
    let request = builder.body(job.body.clone()).map_err(|e| {
        Refusal(
            "network.bad_request",
            format!("the request cannot be built: {e}"),
        )
    })?;
    let request = job
        .agent
        .configure_request(request)
        .timeout_global(Some(job.limit))
        .build();
    let deadline = Instant::now() + job.limit;
    let mut response = job
        .agent
        .run(request)
        .map_err(|e| transport_refusal(e, job.https))?;
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
    let cap = job.cap;
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
                format!("the response took longer than {} ms", job.limit.as_millis()),
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
                    other => transport_refusal(other, job.https),
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
pub(super) fn transport_refusal(e: ureq::Error, https: bool) -> Refusal {
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
