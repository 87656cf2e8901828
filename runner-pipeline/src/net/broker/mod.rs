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
//!
//! # Bounds
//! The run's deadline bounds the broker: every exchange's timeout is the policy's cut to
//! what is left of the run's time limit. When the guest ends (or the deadline passes)
//! the broker contacts nothing more: an exchange in flight is abandoned
//! (`network.run_ended`) and each request still waiting is recorded, never sent
//! (`network.not_served`). Each entry of `/net` is taken once: one it cannot remove (a
//! directory the guest made) is answered and recorded once, then skipped.

use super::{Exchange, NetworkLog, NetworkPolicy, Url, body_file_name, is_internal};
use crate::digest::sha256_hex;
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::io::{self, Read};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long the broker sleeps when the directory holds no new request.
const POLL: Duration = Duration::from_millis(1);
/// How often the broker looks at the stop flag while an exchange is in flight.
const IN_FLIGHT_CHECK: Duration = Duration::from_millis(10);
/// How long past the run's deadline the broker's thread stops by itself if nobody
/// stopped it (the worker is killed at the deadline plus its grace, well before).
const STOP_AFTER_DEADLINE: Duration = Duration::from_secs(60);
/// The most request files taken in one look at the directory.
const MAX_PENDING: usize = 1024;
/// The most headers a request may carry, and their total size (`name: value` lines):
/// more is refused, not cut, so what leaves is what the log's head hash covers.
const MAX_REQUEST_HEADERS: usize = 64;
const MAX_REQUEST_HEADER_BYTES: usize = 16 * 1024;
/// The longest URL a request may name (as [`Url::parse`] allows); a longer one is
/// refused before anything leaves and recorded cut to [`REFUSED_URL_KEPT`] characters.
const MAX_URL_BYTES: usize = 8192;
const REFUSED_URL_KEPT: usize = 2048;
/// Headers the broker decides, not the guest (dropped from what the guest asked).
const BROKER_HEADERS: &[&str] = &[
    "host",
    "connection",
    "content-length",
    "transfer-encoding",
    "proxy-authorization",
];
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

/// A running broker; [`Broker::finish`] stops it and returns the log. Dropped without
/// `finish`, it stops too (its thread ends within a poll).
pub struct Broker {
    stop: StopOnDrop,
    thread: JoinHandle<(NetworkLog, Vec<String>)>,
    body_dir: Dir,
}

/// The broker's stop flag, raised when the broker is finished or dropped.
struct StopOnDrop(Arc<AtomicBool>);

impl StopOnDrop {
    fn raise(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.raise();
    }
}

#[derive(Deserialize, Clone)]
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
#[derive(Debug)]
struct Refusal(&'static str, String);

/// An answer: status, headers, body.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Broker {
    /// Starts the broker on `exchange` (the guest's `/net`), storing bodies in
    /// `bodies` (a directory of the run, outside the sandbox), until `deadline` (the
    /// run's time limit): no exchange lasts past it. It works only through these
    /// handles: whatever the guest puts in `/net` (a symlink out of it) is never
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
        deadline: Instant,
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
                    deadline,
                    stop: flag,
                    stuck: BTreeSet::new(),
                };
                let hard_stop = deadline + STOP_AFTER_DEADLINE;
                while !state.stopped() && Instant::now() < hard_stop {
                    if state.serve_pending() == 0 {
                        std::thread::sleep(POLL);
                    }
                }
                state.record_unserved();
                state.output()
            })
            .map_err(BrokerError::Start)?;
        Ok(Self {
            stop: StopOnDrop(stop),
            thread,
            body_dir,
        })
    }

    /// Stops the broker (the guest has ended) and returns what it recorded: an
    /// exchange in flight is abandoned, the requests not yet taken are recorded as not
    /// served, and nothing more is sent.
    pub fn finish(self) -> BrokerOutput {
        self.stop.raise();
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
    /// The run's deadline: no exchange lasts past it.
    deadline: Instant,
    /// Raised when the guest has ended.
    stop: Arc<AtomicBool>,
    /// Request entries answered once that could not be removed (a directory): never
    /// taken again. At most one per entry `/out`'s caps let the guest make.
    stuck: BTreeSet<String>,
}

/// A request as the broker read it: the wire request and its body, or why it was
/// refused before anything was decided.
type Parsed = Result<(WireRequest, Vec<u8>), Refusal>;

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

    /// The guest has ended: nothing more is taken.
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// The request files present, in the order of their numbers (at most
    /// [`MAX_PENDING`]), without the entries already answered that could not be removed.
    fn pending(&self) -> Vec<(u64, String)> {
        let Ok(entries) = self.exchange.entries() else {
            return Vec::new();
        };
        let mut pending: Vec<(u64, String)> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let n = name.strip_suffix(".req")?;
                if n.is_empty() || n.len() > 9 || !n.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                if self.stuck.contains(&name) {
                    return None;
                }
                Some((n.parse().ok()?, name))
            })
            .take(MAX_PENDING)
            .collect();
        pending.sort();
        pending
    }

    /// Serves the request files present, in the order of their numbers, until the
    /// guest ends; returns how many were taken.
    fn serve_pending(&mut self) -> usize {
        let mut served = 0;
        for (n, name) in self.pending() {
            if self.stopped() {
                break;
            }
            self.serve_one(n, &name);
            served += 1;
        }
        served
    }

    /// Records every request still waiting once the guest has ended, as not served:
    /// read (to say what it was), never sent, never answered.
    fn record_unserved(&mut self) {
        for (_, name) in self.pending() {
            let mut ex = self.take();
            let Refusal(code, detail) = match self.parse(&name, &mut ex) {
                Ok((req, _)) => {
                    if let Ok(url) = Url::parse(&req.url) {
                        ex.origin = url.origin.to_string();
                        ex.path = url.path;
                    }
                    Refusal(
                        "network.not_served",
                        "the guest had ended before the broker took this request; nothing was sent"
                            .into(),
                    )
                }
                Err(refusal) => refusal,
            };
            ex.refusal = Some(code.to_owned());
            ex.detail = Some(detail);
            self.record(ex);
        }
    }

    /// Numbers the next exchange.
    fn take(&mut self) -> Exchange {
        self.taken = self.taken.saturating_add(1);
        Exchange {
            seq: self.taken,
            method: String::new(),
            url: String::new(),
            origin: String::new(),
            path: String::new(),
            request_bytes: 0,
            request_sha256: String::new(),
            request_head_sha256: None,
            request_head_bytes: None,
            verdict: "refused".into(),
            contacted: false,
            refusal: None,
            detail: None,
            status: None,
            response_headers: Vec::new(),
            response_bytes: 0,
            response_sha256: None,
        }
    }

    /// Reads and removes the request file `name` (or, when it cannot be removed,
    /// never takes it again) and parses it into `ex` (method, URL, body size and hash).
    fn parse(&mut self, name: &str, ex: &mut Exchange) -> Parsed {
        let raw = read_capped(
            &self.exchange,
            name,
            MAX_HEADER_LINE + self.policy.max_response_bytes,
        );
        if self.exchange.remove_file(name).is_err() {
            self.stuck.insert(name.to_owned());
        }
        let raw = raw.map_err(|e| Refusal("network.bad_request", e.to_string()))?;
        let split = raw.iter().position(|&b| b == b'\n').unwrap_or(raw.len());
        let (line, body) = raw.split_at(split);
        let body = body.get(1..).unwrap_or(&[]).to_vec();
        let req: WireRequest = serde_json::from_slice(line).map_err(|e| {
            Refusal(
                "network.bad_request",
                format!("the request line is not the broker's JSON: {e}"),
            )
        })?;
        ex.method = req.method.to_ascii_uppercase().chars().take(16).collect();
        ex.url = if req.url.len() <= MAX_URL_BYTES {
            req.url.clone()
        } else {
            req.url.chars().take(REFUSED_URL_KEPT).collect()
        };
        ex.request_bytes = body.len() as u64;
        ex.request_sha256 = format!("sha256:{}", sha256_hex(&body));
        Ok((req, body))
    }

    /// Adds `ex` to the log, or counts it past the log's cap.
    fn record(&mut self, ex: Exchange) {
        let recorded_cap = self
            .policy
            .max_requests
            .saturating_add(EXTRA_REFUSALS_RECORDED);
        if ex.allowed() || ex.seq <= recorded_cap {
            self.log.push(ex);
        } else {
            self.unrecorded += 1;
        }
    }

    fn serve_one(&mut self, n: u64, name: &str) {
        let mut ex = self.take();
        let parsed = self.parse(name, &mut ex);
        let seq = ex.seq;
        let result = parsed.and_then(|(req, body)| self.decide(&req, &body, &mut ex));
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
        self.record(ex);
        if self.stopped() {
            // Nobody is left to read an answer.
            return;
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
        req: &WireRequest,
        body: &[u8],
        ex: &mut Exchange,
    ) -> Result<Answer, Refusal> {
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
        ex.path = url.path.clone();
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
        let head = RequestHead::new(&ex.method, &url, &req.headers)?;
        ex.request_head_sha256 = Some(format!("sha256:{}", sha256_hex(&head.text)));
        ex.request_head_bytes = Some(head.text.len() as u64);
        let answer = match &mut self.fetcher {
            Fetcher::Live(agent) => {
                let left = self.deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(Refusal(
                        "network.run_ended",
                        "the run's time limit had passed; nothing was sent".into(),
                    ));
                }
                let limit = Duration::from_secs(self.policy.timeout_sec).min(left);
                ex.contacted = true;
                let job = Fetch {
                    agent: (**agent).clone(),
                    method: ex.method.clone(),
                    head,
                    body: body.to_vec(),
                    https: url.origin.scheme == super::Scheme::Https,
                    cap: self.policy.max_response_bytes,
                    limit,
                    cut_by_run: limit < Duration::from_secs(self.policy.timeout_sec),
                };
                in_flight(job, &self.stop, &url)?
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
            let target = url.resolve(location);
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

/// The request head the broker hands its HTTP client: the method, the URL it sends
/// (origin and path, the fragment dropped) and the guest's headers it forwards, in
/// order, one `name: value` line each. What the client adds (`Host`, `Content-Length`,
/// `User-Agent: runner-net-broker`, `Accept: */*`) follows from these and the body, so
/// the head's hash and the body's pin everything that left.
struct RequestHead {
    url: String,
    headers: Vec<(String, String)>,
    text: Vec<u8>,
}

impl RequestHead {
    /// The head of `method` to `url` with the guest's `headers`; more than
    /// [`MAX_REQUEST_HEADERS`] or [`MAX_REQUEST_HEADER_BYTES`] is refused, never cut.
    fn new(method: &str, url: &Url, headers: &[(String, String)]) -> Result<Self, Refusal> {
        let bad = |detail: String| Refusal("network.bad_request", detail);
        if headers.len() > MAX_REQUEST_HEADERS {
            return Err(bad(format!(
                "the request has {} headers, more than the broker's {MAX_REQUEST_HEADERS}",
                headers.len()
            )));
        }
        let forwarded: Vec<(String, String)> = headers
            .iter()
            .filter(|(k, _)| !BROKER_HEADERS.contains(&k.to_ascii_lowercase().as_str()))
            .cloned()
            .collect();
        let size: usize = forwarded.iter().map(|(k, v)| k.len() + v.len() + 4).sum();
        if size > MAX_REQUEST_HEADER_BYTES {
            return Err(bad(format!(
                "the request's headers are {size} bytes, more than the broker's \
                 {MAX_REQUEST_HEADER_BYTES}"
            )));
        }
        let sent = format!("{}{}", url.origin, url.path);
        let mut text = format!("{method} {sent}\r\n").into_bytes();
        for (k, v) in &forwarded {
            text.extend_from_slice(k.as_bytes());
            text.extend_from_slice(b": ");
            text.extend_from_slice(v.as_bytes());
            text.extend_from_slice(b"\r\n");
        }
        Ok(Self {
            url: sent,
            headers: forwarded,
            text,
        })
    }
}

/// One live exchange, owned, so it can run on a thread of its own.
struct Fetch {
    agent: ureq::Agent,
    method: String,
    head: RequestHead,
    body: Vec<u8>,
    https: bool,
    cap: u64,
    /// The exchange's timeout: the policy's, cut to what is left of the run.
    limit: Duration,
    cut_by_run: bool,
}

/// Runs `job` on a thread of its own and waits for it while the guest runs: when the
/// guest ends first, the exchange is abandoned (its thread ends by its own timeout,
/// which the run's deadline bounds) and refused as `network.run_ended`.
fn in_flight(job: Fetch, stop: &AtomicBool, url: &Url) -> Result<Answer, Refusal> {
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

/// [`fetch_now`]; a timeout says when it was the run's time limit that cut it.
fn fetch(job: &Fetch) -> Result<Answer, Refusal> {
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

fn fetch_now(job: &Fetch) -> Result<Answer, Refusal> {
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
    // What left is pinned by the head's hash too (the headers the guest sent); a
    // recording made before heads were hashed cannot show this request is its own.
    match &want.request_head_sha256 {
        None => {
            return Err(unrecorded(format!(
                "the recording's exchange {} holds no request-head hash (recorded by an \
                 older runner), so its headers cannot be matched",
                want.seq
            )));
        }
        Some(head) if Some(head) != ex.request_head_sha256.as_ref() => {
            return Err(unrecorded(format!(
                "the recording's exchange {} sent other headers ({head}) than this request",
                want.seq
            )));
        }
        Some(_) => {}
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
#[allow(clippy::unwrap_used, clippy::expect_used)]
// a failed unwrap is a failed test
// reason: the tests make their exchange directories and listeners on the host.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A broker on a fresh exchange directory, allowing `origin`, with the policy's
    /// timeout `timeout_sec`, until `deadline`; the directory's path is returned too.
    fn broker(
        origin: &str,
        timeout_sec: u64,
        source: Source,
        deadline: Instant,
    ) -> (Broker, tempfile::TempDir) {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("net")).unwrap();
        std::fs::create_dir(tmp.path().join("bodies")).unwrap();
        let open = |name: &str| {
            Dir::open_ambient_dir(tmp.path().join(name), cap_std::ambient_authority()).unwrap()
        };
        let policy = NetworkPolicy {
            allow: vec![crate::net::Origin::parse(origin).unwrap()],
            timeout_sec,
            ..Default::default()
        };
        let b = Broker::start(policy, open("net"), open("bodies"), source, deadline).unwrap();
        (b, tmp)
    }

    fn request(dir: &std::path::Path, n: u32, url: &str) {
        let tmp = dir.join(format!("{n}.req.tmp"));
        std::fs::write(
            &tmp,
            format!("{{\"method\": \"GET\", \"url\": \"{url}\"}}\n"),
        )
        .unwrap();
        std::fs::rename(tmp, dir.join(format!("{n}.req"))).unwrap();
    }

    /// Waits (at most 20 s) until `path` is `present` or not.
    fn wait_for(path: &std::path::Path, present: bool) {
        let until = Instant::now() + Duration::from_secs(20);
        while path.exists() != present && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(2));
        }
        assert_eq!(path.exists(), present, "{}", path.display());
    }

    fn codes(log: &NetworkLog) -> Vec<Option<&str>> {
        log.exchanges.iter().map(|e| e.refusal.as_deref()).collect()
    }

    /// A listener that accepts connections and never answers, counting them.
    fn silent_origin() -> (String, TcpListener) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let origin = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
        (origin, listener)
    }

    fn accepted(listener: &TcpListener) -> usize {
        listener.set_nonblocking(true).unwrap();
        std::iter::from_fn(|| listener.accept().ok())
            .take(100)
            .count()
    }

    /// The guest ends while request 1 waits on an origin that never answers and 2 is
    /// listed: 1 is abandoned, 2 is recorded as not served, and the origin saw one
    /// connection (the policy's 30 s timeout never runs out).
    #[test]
    fn the_guests_end_abandons_the_exchange_in_flight_and_sends_nothing_more() {
        let (origin, listener) = silent_origin();
        let deadline = Instant::now() + Duration::from_secs(120);
        let (b, tmp) = broker(&origin, 30, Source::Live, deadline);
        let net = tmp.path().join("net");
        request(&net, 1, &format!("{origin}/hang"));
        wait_for(&net.join("1.req"), false);
        request(&net, 2, &format!("{origin}/never"));
        let out = b.finish();
        assert_eq!(
            codes(&out.log),
            [Some("network.run_ended"), Some("network.not_served")]
        );
        let contacted: Vec<bool> = out.log.exchanges.iter().map(|e| e.contacted).collect();
        assert_eq!(contacted, [true, false]);
        assert_eq!(out.log.exchanges[1].url, format!("{origin}/never"));
        assert_eq!(accepted(&listener), 1);
    }

    /// The run's deadline cuts the policy's timeout: an origin that never answers is a
    /// timeout by the deadline (here 300 ms away), not after the policy's 30 s, and the
    /// guest gets that answer; after the deadline nothing is sent at all.
    #[test]
    fn the_runs_deadline_bounds_every_exchange() {
        let (origin, listener) = silent_origin();
        let deadline = Instant::now() + Duration::from_millis(300);
        let (b, tmp) = broker(&origin, 30, Source::Live, deadline);
        let net = tmp.path().join("net");
        request(&net, 1, &format!("{origin}/hang"));
        wait_for(&net.join("1.resp"), true);
        std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
        request(&net, 2, &format!("{origin}/late"));
        wait_for(&net.join("2.resp"), true);
        let out = b.finish();
        assert_eq!(
            codes(&out.log),
            [Some("network.timeout"), Some("network.run_ended")]
        );
        assert!(
            out.log.exchanges[0]
                .detail
                .as_deref()
                .unwrap()
                .contains("the run's time limit"),
            "{:?}",
            out.log.exchanges[0]
        );
        assert!(!out.log.exchanges[1].contacted);
        assert_eq!(accepted(&listener), 1);
    }

    /// An entry the broker cannot remove (a directory named like a request) is answered
    /// and recorded once, then left alone; the next request is served as usual.
    #[test]
    fn an_entry_that_cannot_be_removed_is_taken_once() {
        let recorded = Vec::new();
        let source = Source::Replay {
            recorded,
            bodies: Err(io::Error::other("no recording")),
        };
        let deadline = Instant::now() + Duration::from_secs(120);
        let (b, tmp) = broker("http://127.0.0.1:9", 30, source, deadline);
        let net = tmp.path().join("net");
        std::fs::create_dir(net.join("1.req")).unwrap();
        wait_for(&net.join("1.resp"), true);
        std::fs::remove_file(net.join("1.resp")).unwrap();
        // Time for a busy loop to show itself: it would answer again and again.
        std::thread::sleep(Duration::from_millis(200));
        assert!(!net.join("1.resp").exists());
        request(&net, 2, "http://127.0.0.1:9/x");
        wait_for(&net.join("2.resp"), true);
        let out = b.finish();
        assert_eq!(
            codes(&out.log),
            [
                Some("network.bad_request"),
                Some("network.replay_unrecorded")
            ]
        );
        assert_eq!(out.log.unrecorded_refusals, 0);
    }

    fn head(headers: &[(&str, &str)]) -> Result<RequestHead, Refusal> {
        let url = Url::parse("http://127.0.0.1:9/a?b").unwrap();
        let headers: Vec<(String, String)> = headers
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        RequestHead::new("GET", &url, &headers)
    }

    /// The head the log hashes is what the client is handed: the broker's own headers
    /// dropped, the rest in order; too many or too large is refused, never cut.
    #[test]
    fn the_request_head_is_what_is_sent_and_bounded() {
        let h = head(&[("Host", "evil"), ("X-A", "1"), ("Content-Length", "9")]).unwrap();
        assert_eq!(h.text, b"GET http://127.0.0.1:9/a?b\r\nX-A: 1\r\n");
        assert_eq!(h.headers, [("X-A".to_owned(), "1".to_owned())]);
        assert_ne!(head(&[("X-A", "2")]).unwrap().text, h.text);
        let many: Vec<(&str, &str)> = (0..=MAX_REQUEST_HEADERS).map(|_| ("X", "y")).collect();
        let Err(Refusal(code, detail)) = head(&many) else {
            panic!("65 headers were taken");
        };
        assert_eq!(code, "network.bad_request");
        assert!(detail.contains("65 headers"), "{detail}");
        let big = "v".repeat(MAX_REQUEST_HEADER_BYTES);
        let Err(Refusal(_, detail)) = head(&[("X", &big)]) else {
            panic!("a 16 KiB header was taken");
        };
        assert!(detail.contains("more than the broker's 16384"), "{detail}");
    }

    /// A replay serves a recorded exchange only to the request that made it: the same
    /// method, full URL, body and head (headers); a recording without a head hash is
    /// matched to nothing.
    #[test]
    fn replay_matches_the_request_head_too() {
        let recorded = |head: Option<&str>| Exchange {
            seq: 1,
            method: "GET".into(),
            url: "http://127.0.0.1:9/a".into(),
            origin: "http://127.0.0.1:9".into(),
            path: "/a".into(),
            request_bytes: 0,
            request_sha256: "sha256:e".into(),
            request_head_sha256: head.map(str::to_owned),
            request_head_bytes: None,
            verdict: "refused".into(),
            contacted: true,
            refusal: Some("network.timeout".into()),
            detail: None,
            status: None,
            response_headers: Vec::new(),
            response_bytes: 0,
            response_sha256: None,
        };
        let asked = |head: &str| Exchange {
            seq: 1,
            request_head_sha256: Some(head.to_owned()),
            ..recorded(None)
        };
        let dir: io::Result<Dir> = Err(io::Error::other("unused"));
        let serve = |rec: Exchange, head: &str| {
            let mut next = 0;
            replay(&[rec], &dir, &mut next, &mut asked(head)).map_err(|Refusal(c, d)| (c, d))
        };
        let Err((code, _)) = serve(recorded(Some("sha256:h")), "sha256:h") else {
            panic!("a recorded timeout was not served as one");
        };
        assert_eq!(code, "network.timeout");
        let Err((code, detail)) = serve(recorded(Some("sha256:h")), "sha256:other") else {
            panic!("another head was served");
        };
        assert_eq!(code, "network.replay_unrecorded");
        assert!(detail.contains("other headers"), "{detail}");
        let Err((code, detail)) = serve(recorded(None), "sha256:h") else {
            panic!("a recording without head hashes was served");
        };
        assert_eq!(code, "network.replay_unrecorded");
        assert!(detail.contains("no request-head hash"), "{detail}");
    }

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
