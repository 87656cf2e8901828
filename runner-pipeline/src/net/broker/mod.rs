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

// Without the live client (feature `network`), what only a live exchange reads (the
// request's body and head, the run's deadline) is left unused.
#![cfg_attr(
    not(feature = "network"),
    allow(dead_code, unused_imports, unused_variables)
)]

mod exchange;
#[cfg(feature = "network")]
mod fetch;
mod replay;
// The tests serve real exchanges on loopback: they need the live client.
#[cfg(all(test, feature = "network"))]
#[allow(clippy::unwrap_used, clippy::expect_used)]
// a failed unwrap is a failed test
// reason: the tests make their exchange directories and listeners on the host.
#[allow(clippy::disallowed_methods)]
mod tests;
mod wire;

use cap_std::fs::Dir;
use exchange::{Fetcher, State};
#[cfg(feature = "network")]
use fetch::live_agent;
use runner_core::net::{Exchange, NetworkLog, NetworkPolicy};
use std::collections::BTreeSet;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long the broker sleeps when the directory holds no new request.
const POLL: Duration = Duration::from_millis(1);
/// How often the broker looks at the stop flag while an exchange is in flight.
#[cfg(feature = "network")]
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
/// The longest URL a request may name (as [`Url::parse`](runner_core::net::Url::parse) allows); a longer one is
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
pub(super) struct StopOnDrop(Arc<AtomicBool>);

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
    /// A live run asked of a runner built without its `network` feature.
    #[error(
        "this runner was built without its `network` feature: it cannot make the live \
         exchanges a network allowlist asks for (replay of recorded exchanges still works)"
    )]
    BuiltWithoutNetwork,
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
            #[cfg(feature = "network")]
            Source::Live => Fetcher::Live(Box::new(live_agent(&policy)?)),
            #[cfg(not(feature = "network"))]
            Source::Live => return Err(BrokerError::BuiltWithoutNetwork),
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
                        #[cfg(feature = "network")]
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
