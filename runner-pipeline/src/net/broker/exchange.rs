//! The broker's loop over `/net`: taking requests in order, parsing and deciding each
//! against the policy and the run's bounds, answering, and keeping the egress log.

#[cfg(feature = "network")]
use super::fetch::{Fetch, in_flight};
use super::replay::replay;
use super::wire::{RequestHead, WireRequest, WireResponse, read_capped, reason_phrase, wire};
use super::{
    Answer, EXTRA_REFUSALS_RECORDED, MAX_HEADER_LINE, MAX_PENDING, MAX_URL_BYTES, METHODS,
    REFUSED_URL_KEPT, Refusal,
};

use cap_std::fs::Dir;
use runner_core::digest::sha256_hex;
use runner_core::net::Exchange;
use runner_core::net::NetworkLog;
use runner_core::net::NetworkPolicy;
use runner_core::net::Url;
use runner_core::net::body_file_name;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub(super) enum Fetcher {
    #[cfg(feature = "network")]
    Live(Box<ureq::Agent>),
    Replay {
        recorded: Vec<Exchange>,
        dir: std::io::Result<Dir>,
        next: usize,
    },
}

pub(super) struct State {
    pub(super) mode: &'static str,
    pub(super) policy: NetworkPolicy,
    pub(super) fetcher: Fetcher,
    pub(super) exchange: Dir,
    pub(super) body_dir: Dir,
    pub(super) log: Vec<Exchange>,
    pub(super) bodies: Vec<String>,
    /// Requests taken, allowed or not.
    pub(super) taken: u32,
    pub(super) unrecorded: u64,
    /// The run's deadline: no exchange lasts past it.
    pub(super) deadline: Instant,
    /// Raised when the guest has ended.
    pub(super) stop: Arc<AtomicBool>,
    /// Request entries answered once that could not be removed (a directory): never
    /// taken again. At most one per entry `/out`'s caps let the guest make.
    pub(super) stuck: BTreeSet<String>,
}

/// A request as the broker read it: the wire request and its body, or why it was
/// refused before anything was decided.
pub(super) type Parsed = Result<(WireRequest, Vec<u8>), Refusal>;

impl State {
    pub(super) fn output(self) -> (NetworkLog, Vec<String>) {
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
    pub(super) fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// The request files present, in the order of their numbers (at most
    /// [`MAX_PENDING`]), without the entries already answered that could not be removed.
    pub(super) fn pending(&self) -> Vec<(u64, String)> {
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
    pub(super) fn serve_pending(&mut self) -> usize {
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
    pub(super) fn record_unserved(&mut self) {
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
    pub(super) fn take(&mut self) -> Exchange {
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
    pub(super) fn parse(&mut self, name: &str, ex: &mut Exchange) -> Parsed {
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
    pub(super) fn record(&mut self, ex: Exchange) {
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

    pub(super) fn serve_one(&mut self, n: u64, name: &str) {
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
    pub(super) fn decide(
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
            #[cfg(feature = "network")]
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
                    https: url.origin.scheme == runner_core::net::Scheme::Https,
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
