//! `runner serve`: a long-running TOOL-EXEC host on an inbox directory.
//!
//! **The protocol.** A writer puts a request's inputs in `INBOX/<stem>.inputs/`, renames
//! its signature `TR-x.md.sig` in (when signed), then renames `TR-x.md` in: the `.md`
//! appearing is the commit point. The host notices it (inotify; requests already there
//! at start are taken too), claims it ([`claim`]: one atomic rename, so of several hosts
//! on one inbox exactly one takes it), runs it through the same [`Pipeline`] as `runner
//! exec` (same verdict, result, lock and statement), and files the request with its
//! companions into `INBOX/done/`. A request that is rejected, or whose inputs are
//! refused, or that is not a request at all (a symlink, a FIFO, a directory, a `*.md`
//! not named `TR-*.md`) is filed into quarantine with `NAME.reasons.md` and
//! `NAME.reasons.json`, exactly as `runner gate` files a document (`runner_gate::inbox::Filer::place`).
//! Names not ending in `.md` and hidden names are not requests and are left alone.
//!
//! **Failures that are not the request's** (a full or unwritable results directory, a
//! sandbox that cannot start, a guest that is missing) leave the request claimed and
//! retry it with a backoff (1 s doubling to 60 s), saying why each time. A retry, and
//! the recovery of a dead host's claims, first looks for a result already published for
//! the request (by its id and the sha256 in the lock), so a request is never run twice to
//! completion.
//!
//! **Signals.** SIGTERM or SIGINT: stop claiming, finish what runs, give retry-pending
//! claims back to the inbox, exit 0. A second one: exit at once (128 + the signal); the
//! workers die with the host (`pdeathsig`) and its claims are recovered by the next host
//! to start or by a peer.
//!
//! **Durability.** The result is published durably by the pipeline before the request is
//! filed; the filing into `done/` is a rename that is not fsynced on its own: after a
//! crash the request may reappear claimed, and recovery files it without running it.

use runner_contract::exit_codes;
use runner_contract::verdict::ServeVerdict;
use runner_pipeline::report::RunFacts;

pub mod claim;
#[cfg(feature = "metrics")]
pub mod metrics;
#[cfg(feature = "nats")]
pub mod nats;
pub mod scratch;
mod watch;

pub use watch::{block_signals, unblock_signals};

use cap_std::fs::MetadataExt;
use claim::ClaimDir;
use runner_contract::verdict::Verdict;
use runner_core::request::Reason;
use runner_gate::DocKind;
use runner_gate::Judgement;
use runner_gate::inbox::{Filer, HeldDir, recover_intents, remove_temporaries, shown};
use runner_gate::moves::exists;
use runner_pipeline::pipeline::{Pipeline, RunError};
use runner_pipeline::result::ResultsRoot;
use runner_pipeline::stage::InputsRoot;
use runner_sandbox::durable::sync_dir;
use runner_sandbox::read::{Read2, read_document};
use serde::Serialize;
use std::collections::{HashSet, VecDeque};
use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

/// How long a failure that is not the request's waits before its first retry, and at most.
const BACKOFF_FIRST: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(60);
/// How often a host looks for claims of peers that died.
const RECOVER_EVERY: Duration = Duration::from_secs(5);

/// The directories and the parallelism of one host.
#[derive(Debug, Clone)]
pub struct Config {
    pub inbox: PathBuf,
    pub results: PathBuf,
    /// Default: `INBOX/quarantine/`.
    pub quarantine: Option<PathBuf>,
    /// Requests run at once (each in its own worker process).
    pub jobs: usize,
}

/// What happened to one request (one line of `runner serve --json`).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Handled {
    /// The request's name in the inbox (escaped when not plain).
    pub request: String,
    /// ACCEPT: it ran (or had run before a crash) and its result is published; REJECT:
    /// nothing ran, it is quarantined with its reasons; RETRY: it stays claimed and is
    /// tried again later (the reasons say why); DEAD (`--nats` only): it failed for
    /// reasons not its own `--max-deliver` times and went to `toolexec.dead`.
    pub verdict: ServeVerdict,
    pub reasons: Vec<Reason>,
    #[serde(flatten)]
    pub run: RunFacts,
    /// Where the request went: `done/NAME` or `quarantine/NAME`.
    pub moved_to: Option<String>,
    /// Seconds from the request's `.md` appearing in the inbox to its result published.
    pub latency_sec: Option<f64>,
    /// Its result had been published before a host crashed: filed without running again.
    pub recovered: bool,
    /// Where the request's time went, step by step, from its claim to its filing: each
    /// step named by the mark that ends it (`runner.*` the host's, `worker.*` its
    /// worker's; see `runner_sandbox::phases`). Empty when nothing was recorded.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<PhaseTime>,
}

/// One step of a request's handling and the milliseconds it took.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct PhaseTime {
    pub phase: String,
    pub ms: f64,
}

/// Severity of a host message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Info,
    Warn,
    Error,
}

/// Where the host reports what it does.
pub trait Observer: Sync {
    fn handled(&self, handled: &Handled);
    fn log(&self, level: Level, message: &str);
    /// How many requests wait in the inbox, unclaimed (for metrics).
    fn queue_depth(&self, _depth: usize) {}
}

/// A failure that stops the host before it serves.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("{what} {}: {source}", path.display())]
    Dir {
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error("{a} and {b} are the same directory", a = .a.display(), b = .b.display())]
    SameDir { a: PathBuf, b: PathBuf },
    /// `serve --nats`: the server, a stream, a bucket or the consumer is not usable.
    #[error("nats: {0}")]
    Nats(String),
}

/// How the host ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// A first SIGTERM or SIGINT: what ran finished.
    Graceful,
}

/// A unit of work for a worker thread.
enum Job {
    /// A name seen in the inbox, not yet claimed.
    New(OsString),
    /// A claimed request whose last attempt failed for a reason that is not its own.
    Retry(Retry),
}

#[derive(Debug, Clone)]
struct Retry {
    name: OsString,
    attempts: u32,
    committed: Option<SystemTime>,
}

#[derive(Default)]
struct Queue {
    pending: VecDeque<Job>,
    queued: HashSet<OsString>,
    retries: Vec<(Instant, Retry)>,
    stopping: bool,
    running: usize,
    /// A claim found its name still held here: scan the inbox again when a job ends.
    rescan: bool,
}

struct Host<'a> {
    inbox: HeldDir,
    results: HeldDir,
    done: HeldDir,
    quarantine: HeldDir,
    claims: ClaimDir,
    pipeline: &'a Pipeline,
    observer: &'a dyn Observer,
    queue: Mutex<Queue>,
    wakeup: Condvar,
}

/// Runs the host until a signal stops it.
///
/// # Ambient authority
/// Watches, reads, moves and creates files under the directories the operator named.
pub fn run(
    config: &Config,
    pipeline: &Pipeline,
    observer: &dyn Observer,
) -> Result<Stopped, ServeError> {
    let dir_err = |what: &'static str, path: &Path| {
        let path = path.to_owned();
        move |source| ServeError::Dir { what, path, source }
    };
    let inbox = HeldDir::open(&config.inbox).map_err(dir_err("inbox", &config.inbox))?;
    let quarantine = config
        .quarantine
        .clone()
        .unwrap_or_else(|| inbox.path.join("quarantine"));
    let done = inbox.path.join("done");
    for (what, d) in [
        ("results directory", &config.results),
        ("done directory", &done),
    ] {
        runner_sandbox::host::create_dir_all(d).map_err(dir_err(what, d))?;
    }
    runner_gate::inbox::create_private_dir_all(&quarantine)
        .map_err(dir_err("quarantine directory", &quarantine))?;
    let results =
        HeldDir::open(&config.results).map_err(dir_err("results directory", &config.results))?;
    let quarantine =
        HeldDir::open(&quarantine).map_err(dir_err("quarantine directory", &quarantine))?;
    let done = HeldDir::open(&done).map_err(dir_err("done directory", &done))?;
    if results.path == inbox.path
        || quarantine.path == inbox.path
        || results.path == quarantine.path
    {
        let (a, b) = if results.path == quarantine.path {
            (results.path, quarantine.path)
        } else {
            (inbox.path, results.path)
        };
        return Err(ServeError::SameDir { a, b });
    }
    // What a host killed mid-publish left behind (its process is gone): swept before
    // this host publishes anything.
    let swept = runner_pipeline::result::sweep_stale_temporaries(&results.path);
    let (scratch, swept_scratch) = host_scratch(pipeline)?;
    // Signals are blocked before any thread starts, so every thread inherits the mask.
    let watcher =
        watch::Watcher::new(&inbox).map_err(dir_err("watching the inbox", &inbox.path))?;
    let claims = ClaimDir::create(&inbox).map_err(dir_err("claim directory in", &inbox.path))?;
    let host = Host {
        inbox,
        results,
        done,
        quarantine,
        claims,
        pipeline,
        observer,
        queue: Mutex::new(Queue::default()),
        wakeup: Condvar::new(),
    };
    host.log(
        Level::Info,
        &format!(
            "serving {} ({} at a time); results in {}",
            host.inbox.path.display(),
            config.jobs,
            host.results.path.display()
        ),
    );
    if swept > 0 {
        host.log(
            Level::Info,
            &format!(
                "removed {swept} temporary entr(ies) of dead hosts from {}",
                host.results.path.display()
            ),
        );
    }
    log_swept_scratch(observer, swept_scratch);
    host.recover_dead();
    host.scan();
    let stopped = std::thread::scope(|scope| {
        for _ in 0..config.jobs.max(1) {
            scope.spawn(|| host.work());
        }
        host.watch(&watcher)
    });
    host.release_retries();
    host.claims.remove_if_empty();
    host.log(Level::Info, "stopped: every running request finished");
    drop(scratch);
    Ok(stopped)
}

/// Sweeps dead hosts' scratch directories and makes this host's, where `pipeline`
/// makes its run directories from now on ([`scratch`]).
fn host_scratch(pipeline: &Pipeline) -> Result<(scratch::HostScratch, usize), ServeError> {
    let (scratch, swept) = scratch::HostScratch::create().map_err(|source| ServeError::Dir {
        what: "scratch directory in",
        path: std::env::temp_dir(),
        source,
    })?;
    pipeline.set_run_base(scratch.path());
    Ok((scratch, swept))
}

fn log_swept_scratch(observer: &dyn Observer, swept: usize) {
    if swept > 0 {
        observer.log(
            Level::Info,
            &format!(
                "removed {swept} scratch director(ies) of dead hosts from {}",
                std::env::temp_dir().display()
            ),
        );
    }
}

impl Host<'_> {
    fn log(&self, level: Level, message: &str) {
        self.observer.log(level, message);
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The main thread: waits for names and signals, hands out work, schedules retries,
    /// recovers dead peers' claims. Returns when the last running request is done after
    /// a first signal; exits the process on a second one.
    fn watch(&self, watcher: &watch::Watcher) -> Stopped {
        let mut signals = 0usize;
        let mut next_recovery = Instant::now() + RECOVER_EVERY;
        loop {
            let now = Instant::now();
            let timeout = {
                let q = self.lock();
                if q.stopping {
                    if q.running == 0 {
                        self.wakeup.notify_all();
                        return Stopped::Graceful;
                    }
                    Duration::from_millis(50)
                } else {
                    let next_retry = q.retries.iter().map(|(at, _)| *at).min();
                    next_retry
                        .map_or(next_recovery, |at| at.min(next_recovery))
                        .saturating_duration_since(now)
                }
            };
            let wake = match watcher.wait(Some(timeout)) {
                Ok(wake) => wake,
                Err(e) => {
                    self.log(Level::Error, &format!("waiting for the inbox: {e}"));
                    std::thread::sleep(Duration::from_millis(200));
                    continue;
                }
            };
            for signal in wake.signals {
                signals += 1;
                if signals == 1 {
                    self.log(
                        Level::Info,
                        &format!(
                            "{signal}: no new claims; waiting for the running requests (a second signal stops at once)"
                        ),
                    );
                    self.lock().stopping = true;
                    self.wakeup.notify_all();
                } else {
                    self.log(
                        Level::Warn,
                        &format!(
                            "{signal} again: stopping now; the running requests stay claimed and will run again"
                        ),
                    );
                    std::process::exit(128 + signal as i32);
                }
            }
            if self.lock().stopping {
                continue;
            }
            if wake.rescan {
                self.scan();
            }
            self.enqueue(wake.names);
            let now = Instant::now();
            {
                let mut q = self.lock();
                let (due, later): (Vec<_>, Vec<_>) =
                    q.retries.drain(..).partition(|(at, _)| *at <= now);
                q.retries = later;
                for (_, retry) in due {
                    q.pending.push_back(Job::Retry(retry));
                }
            }
            self.wakeup.notify_all();
            if now >= next_recovery {
                self.recover_dead();
                next_recovery = now + RECOVER_EVERY;
            }
        }
    }

    /// A worker thread: takes jobs until the host stops.
    fn work(&self) {
        loop {
            let job = {
                let mut q = self.lock();
                loop {
                    if q.stopping {
                        return;
                    }
                    if let Some(job) = q.pending.pop_front() {
                        if let Job::New(name) = &job {
                            q.queued.remove(name);
                            self.observer.queue_depth(q.queued.len());
                        }
                        q.running += 1;
                        break job;
                    }
                    q = self.wakeup.wait(q).unwrap_or_else(|p| p.into_inner());
                }
            };
            match job {
                Job::New(name) => self.claim_and_run(&name),
                Job::Retry(retry) => self.process(retry, true),
            }
            let rescan = {
                let mut q = self.lock();
                q.running -= 1;
                std::mem::take(&mut q.rescan)
            };
            if rescan {
                self.scan();
            }
            self.wakeup.notify_all();
        }
    }

    /// Queues the names that may be requests (`*.md`, not hidden).
    fn enqueue(&self, names: Vec<OsString>) {
        let mut q = self.lock();
        for name in names {
            let b = name.as_encoded_bytes();
            if b.starts_with(b".") || !b.ends_with(b".md") || q.queued.contains(&name) {
                continue;
            }
            q.queued.insert(name.clone());
            q.pending.push_back(Job::New(name));
        }
        self.observer.queue_depth(q.queued.len());
        drop(q);
        self.wakeup.notify_all();
    }

    /// Queues every name in the inbox, in name order.
    fn scan(&self) {
        match self.inbox.dir.entries() {
            Ok(entries) => {
                let mut names: Vec<OsString> = entries.flatten().map(|e| e.file_name()).collect();
                names.sort();
                self.enqueue(names);
            }
            Err(e) => self.log(
                Level::Error,
                &format!("cannot list {}: {e}", self.inbox.path.display()),
            ),
        }
    }

    fn claim_and_run(&self, name: &OsStr) {
        // The commit time: when the `.md` appeared (a rename sets its ctime); read before
        // the claim's own rename changes it.
        let committed = self
            .inbox
            .dir
            .symlink_metadata(name)
            .ok()
            .map(|m| ctime(&m));
        match self.claims.claim(name) {
            Ok(true) => {}
            Ok(false) => {
                if exists(&self.claims.dir().dir, name) && exists(&self.inbox.dir, name) {
                    // Same name still claimed here (its earlier request is retrying).
                    self.lock().rescan = true;
                }
                return;
            }
            Err(e) => {
                self.log(
                    Level::Warn,
                    &format!("cannot claim {}: {e}; it stays in the inbox", shown(name)),
                );
                return;
            }
        }
        self.process(
            Retry {
                name: name.to_owned(),
                attempts: 0,
                committed,
            },
            false,
        );
    }

    /// Judges, runs and files one claimed request. `check_published`: look for a result
    /// published by an earlier attempt first (a retry, a recovered claim).
    fn process(&self, claimed: Retry, check_published: bool) {
        runner_sandbox::phases::start("runner.claimed");
        let name = claimed.name.as_os_str();
        let path = self.claims.path().join(name);
        let Some(inputs_name) = request_stem(name).map(|s| format!("{s}.inputs")) else {
            let reason = Reason::new(
                "serve.request_name",
                "not a request name: a request is named TR-*.md (plain characters)",
                None,
            );
            return self.quarantine(&claimed, vec![reason], None);
        };
        match self.claims.dir().dir.symlink_metadata(name) {
            Ok(m) if m.is_file() && m.nlink() > 1 => {
                // Possibly a second name of a file the writer may not read: refused
                // unread, and nothing of it is quoted.
                let reason = Reason::new(
                    "io.hard_link",
                    runner_gate::inbox::hard_link_message(m.nlink()),
                    None,
                );
                return self.quarantine(&claimed, vec![reason], None);
            }
            Ok(m) if m.is_file() => {}
            Ok(_) => {
                let reason = Reason::new(
                    "io.not_regular",
                    "not a regular file (a symlink, FIFO, socket, device or directory): never followed or read",
                    None,
                );
                return self.quarantine(&claimed, vec![reason], None);
            }
            Err(e) => {
                return self.log(
                    Level::Warn,
                    &format!("claimed {} is gone: {e}", shown(name)),
                );
            }
        }
        let plan = match self.pipeline.judge(&path) {
            Ok(plan) => plan,
            Err(e) => {
                let text = self.text(&path);
                return self.quarantine(&claimed, e.reasons(), text.as_deref());
            }
        };
        if check_published {
            let sha = runner_core::lock::text_sha256_tagged(&plan.request_text);
            if let Some(doc) =
                claim::published_result(&self.results, plan.approved.request_id(), &sha)
            {
                let handled = Handled {
                    run: RunFacts::published(&doc),
                    recovered: true,
                    ..Handled::new(name, ServeVerdict::Accept)
                };
                return self.file_done(&claimed, handled);
            }
        }
        let inputs = InputsRoot::beside_named(&path, &inputs_name);
        let results = ResultsRoot::named(&self.results.path);
        match self.pipeline.run(&plan, &inputs, &results) {
            Ok(summary) => {
                let latency = claimed
                    .committed
                    .and_then(|c| SystemTime::now().duration_since(c).ok())
                    .map(|d| d.as_secs_f64());
                let handled = Handled {
                    run: RunFacts::ran(&summary),
                    latency_sec: latency,
                    ..Handled::new(name, ServeVerdict::Accept)
                };
                self.file_done(&claimed, handled);
            }
            Err(e) if is_refusal(&e) => {
                let text = self.text(&path);
                self.quarantine(&claimed, e.reasons(), text.as_deref());
            }
            Err(e) => self.retry_later(claimed, e.reasons()),
        }
    }

    /// The request's text, for quoting lines in a reason report.
    fn text(&self, path: &Path) -> Option<String> {
        match read_document(path, self.pipeline.policy().request.max_bytes) {
            Ok(Read2::Bytes(bytes)) => Some(String::from_utf8_lossy(&bytes).into_owned()),
            _ => None,
        }
    }

    fn file_done(&self, claimed: &Retry, mut handled: Handled) {
        let judgement = request_judgement(Verdict::Accept, Vec::new());
        if let Some(moved) = self.file(claimed, (&self.done, "done"), &judgement, None, false) {
            handled.moved_to = Some(moved);
            runner_sandbox::phases::mark("runner.filed");
            handled.phases = runner_sandbox::phases::between(&runner_sandbox::phases::take())
                .into_iter()
                .map(|(phase, ms)| PhaseTime { phase, ms })
                .collect();
            self.observer.handled(&handled);
        }
    }

    fn quarantine(&self, claimed: &Retry, reasons: Vec<Reason>, text: Option<&str>) {
        let judgement = request_judgement(Verdict::Reject, reasons.clone());
        let dest = (&self.quarantine, "quarantine");
        if let Some(moved) = self.file(claimed, dest, &judgement, text, true) {
            self.observer.handled(&Handled {
                reasons,
                moved_to: Some(moved),
                ..Handled::new(&claimed.name, ServeVerdict::Reject)
            });
        }
    }

    /// Files the claimed request with its companions into `dest` (`done` or quarantine,
    /// with its name in `moved_to`) the way the gate files a document; with `sync`, makes
    /// the filing durable before saying so. Returns where it went (`done/NAME`); when it
    /// cannot be filed, it stays claimed and is retried (a published result is found by
    /// the retry, which files the request without running it).
    fn file(
        &self,
        claimed: &Retry,
        dest: (&HeldDir, &str),
        judgement: &Judgement,
        text: Option<&str>,
        sync: bool,
    ) -> Option<String> {
        let (dest, label) = dest;
        let name = claimed.name.as_os_str();
        let companions = self.claims.companions(name);
        let placed = Filer::new(self.claims.dir())
            .place(name, &companions, &dest.dir, judgement, text)
            .and_then(|(doc, _)| {
                if sync {
                    sync_dir(&dest.dir)?;
                }
                Ok(doc)
            });
        match placed {
            Ok(doc) => Some(format!("{label}/{doc}")),
            Err(e) => {
                let reason = Reason::new(
                    "serve.file",
                    format!("cannot move the request into {}: {e}", dest.path.display()),
                    None,
                );
                self.retry_later(claimed.clone(), vec![reason]);
                None
            }
        }
    }

    /// Keeps the request claimed and schedules another attempt, saying why.
    fn retry_later(&self, mut claimed: Retry, reasons: Vec<Reason>) {
        let wait = BACKOFF_FIRST
            .saturating_mul(1u32 << claimed.attempts.min(6))
            .min(BACKOFF_MAX);
        claimed.attempts += 1;
        let why: Vec<String> = reasons
            .iter()
            .map(|r| format!("{}: {}", r.code, r.message))
            .collect();
        self.log(
            Level::Warn,
            &format!(
                "{} stays claimed, retry {} in {} s: {}",
                shown(&claimed.name),
                claimed.attempts,
                wait.as_secs(),
                why.join("; ")
            ),
        );
        self.observer.handled(&Handled {
            reasons,
            ..Handled::new(&claimed.name, ServeVerdict::Retry)
        });
        self.lock().retries.push((Instant::now() + wait, claimed));
    }

    /// On a graceful stop: requests waiting for a retry go back to the inbox.
    fn release_retries(&self) {
        let retries = std::mem::take(&mut self.lock().retries);
        for (_, retry) in retries {
            if let Err(e) = self.claims.release(&retry.name) {
                self.log(
                    Level::Warn,
                    &format!(
                        "cannot give {} back to the inbox: {e}; it stays in {} for the next host",
                        shown(&retry.name),
                        self.claims.path().display()
                    ),
                );
            }
        }
    }

    /// Recovers the claims of hosts that died: settles their interrupted filings, files
    /// a request whose result is published, gives every other one back to the inbox.
    fn recover_dead(&self) {
        'dead: for dead in claim::dead_claims(&self.inbox, self.claims.path()) {
            let mut settled = 0;
            for dest in [&self.done, &self.quarantine] {
                match recover_intents(dead.dir(), &dest.dir) {
                    Ok(n) => settled += n,
                    Err(e) => {
                        // Not durable yet: leave this claim for the next recovery pass.
                        self.log(
                            Level::Warn,
                            &format!(
                                "cannot settle the interrupted moves of {} into {}: {e}; trying again later",
                                dead.path().display(),
                                dest.path.display()
                            ),
                        );
                        continue 'dead;
                    }
                }
                remove_temporaries(&dest.dir);
            }
            let requests = dead.requests();
            for name in &requests {
                self.recover_one(&dead, name);
            }
            for failure in dead.give_back_orphans(&self.inbox) {
                self.log(Level::Warn, &format!("{failure}; trying again later"));
            }
            dead.remove_if_empty();
            if settled > 0 || !requests.is_empty() {
                self.log(
                    Level::Info,
                    &format!(
                        "recovered {} claimed request(s) of a host that stopped ({})",
                        requests.len(),
                        dead.path().display()
                    ),
                );
            }
        }
    }

    fn recover_one(&self, dead: &claim::DeadClaims, name: &OsStr) {
        let path = dead.path().join(name);
        let published = self.pipeline.judge(&path).ok().and_then(|plan| {
            let sha = runner_core::lock::text_sha256_tagged(&plan.request_text);
            claim::published_result(&self.results, plan.approved.request_id(), &sha)
        });
        let Some(doc) = published else {
            if let Err(e) = dead.give_back(&self.inbox.dir, name) {
                self.log(
                    Level::Warn,
                    &format!(
                        "cannot give {} back to the inbox: {e}; it stays in {}",
                        shown(name),
                        dead.path().display()
                    ),
                );
            }
            return;
        };
        let judgement = request_judgement(Verdict::Accept, Vec::new());
        match Filer::new(dead.dir()).place(
            name,
            &dead.companions(name),
            &self.done.dir,
            &judgement,
            None,
        ) {
            Ok((moved, _)) => self.observer.handled(&Handled {
                run: RunFacts::published(&doc),
                moved_to: Some(format!("done/{moved}")),
                recovered: true,
                ..Handled::new(name, ServeVerdict::Accept)
            }),
            Err(e) => self.log(
                Level::Warn,
                &format!(
                    "cannot move {} into {}: {e}; it stays in {}",
                    shown(name),
                    self.done.path.display(),
                    dead.path().display()
                ),
            ),
        }
    }
}

impl Handled {
    pub(crate) fn new(name: &OsStr, verdict: ServeVerdict) -> Self {
        Self {
            request: shown(name),
            verdict,
            reasons: Vec::new(),
            run: RunFacts::default(),
            moved_to: None,
            latency_sec: None,
            recovered: false,
            phases: Vec::new(),
        }
    }
}

/// The gate's judgement of a request the host files: its verdict and its reasons.
fn request_judgement(verdict: Verdict, reasons: Vec<Reason>) -> Judgement {
    Judgement {
        kind: Some(DocKind::ToolRequest),
        verdict,
        reasons,
        notes: Vec::new(),
    }
}

/// The `TR-x` of a request name `TR-x.md` made of plain characters; `None` otherwise.
fn request_stem(name: &OsStr) -> Option<&str> {
    let stem = name.to_str()?.strip_suffix(".md")?;
    let plain = stem.len() > "TR-".len()
        && stem.starts_with("TR-")
        && stem
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._+@=,-".contains(c));
    plain.then_some(stem)
}

/// True for a claimed entry that is a request by its name.
pub fn is_request_name(name: &OsStr) -> bool {
    request_stem(name).is_some()
}

/// A failure that is the request's own (rejected, or its inputs refused): quarantine.
/// Anything else is the host's and is retried.
pub(crate) fn is_refusal(e: &RunError) -> bool {
    matches!(
        e.exit_code(),
        exit_codes::REJECT | exit_codes::INPUT_MISMATCH
    )
}

fn ctime(meta: &cap_std::fs::Metadata) -> SystemTime {
    let secs = u64::try_from(meta.ctime()).unwrap_or(0);
    let nanos = u32::try_from(meta.ctime_nsec()).unwrap_or(0);
    SystemTime::UNIX_EPOCH + Duration::new(secs, nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_names() {
        for (name, ok) in [
            ("TR-20261121-130000Z-hello.md", true),
            ("TR-x.md", true),
            ("TR-.md", false),
            ("TR-abcd.md", true),
            ("tr-abcd.md", false),
            ("TR-ab cd.md", false),
            ("TR-abcd.md.sig", false),
            ("hello.md", false),
        ] {
            assert_eq!(is_request_name(OsStr::new(name)), ok, "{name}");
        }
    }
}
