//! The worker protocol, both halves, and the supervision of a worker process.
//!
//! A worker is a process of its own that runs one guest: `runner __worker` (wasmtime)
//! or `runner-monty-worker` (Monty). Protocol, both directions bounded:
//! - stdin: one request as JSON (the worker's own type, holding a [`SandboxSpec`]), at
//!   most [`MAX_REQUEST_BYTES`] ([`read_request`]);
//! - the worker confines itself ([`crate::confine::confine_worker`]), runs the guest,
//!   and writes the captured output to `capture_dir/stdout` and `capture_dir/stderr`
//!   ([`write_capture`]);
//! - stdout: one [`WorkerReply`] JSON line ([`finish`]), the outcome *without* the
//!   stdout/stderr bytes (the runner reads them back from the capture files), at most
//!   [`MAX_REPLY_BYTES`].
//!
//! The runner side ([`supervise_worker`]) enforces the wall-clock deadline plus a grace
//! with SIGKILL, polls `/out` when no tmpfs caps it, reads at most a bounded amount of
//! anything the worker says, and returns a complete [`Outcome`] however the worker
//! ends: crash, garbage on stdout, silence.

use crate::confine;
use crate::{BackendError, Outcome, SandboxSpec};
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use runner_contract::outcome::OutcomeKind;
use runner_core::run::Limits;
use serde::{Deserialize, Serialize};
use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

mod error;
mod exchange;
mod launch;
mod pool;
pub use error::WorkerError;
pub use launch::{WorkerBackend, WorkerBinary, Workers};
pub use pool::{
    PoolCounters, PoolStats, WorkerPool, arm_parent_death, locate_worker_exe, spawn_worker,
};

/// Largest request the worker reads.
pub const MAX_REQUEST_BYTES: u64 = 8 << 20;
/// Largest reply the runner reads from the worker's stdout.
pub const MAX_REPLY_BYTES: usize = 1 << 20;
/// Largest excerpt of the worker's own stderr kept (diagnostics, panics).
const MAX_WORKER_STDERR: usize = 64 << 10;
/// Time the worker gets past the wall-clock limit (and `STARTUP_ALLOWANCE`) before
/// it is SIGKILLed, for its own orderly stop and reply. The worker stops the guest at
/// the limit itself; the kill is the last resort for a worker that does not.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(1);
/// How often the runner checks `/out` when no tmpfs enforces its caps.
const OUT_POLL_INTERVAL: Duration = Duration::from_millis(50);
/// How often the runner looks for the worker's exit where the kernel has no pidfd (before
/// Linux 5.3); with one, the exit itself wakes it.
const WAIT_POLL_INTERVAL: Duration = Duration::from_millis(5);

/// What the worker answers, as one JSON line.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum WorkerReply {
    /// The guest ran; `stdout` and `stderr` are empty here (see the capture files).
    Ok {
        outcome: Outcome,
        /// CPU time (ms) the worker had used when its request arrived (start-up and, for
        /// a warm worker, what it did while it waited): the runner subtracts it from the
        /// worker's total, so `usage.cpu_ms` is the request's own. Set by [`finish`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cpu_before_request_ms: Option<u64>,
        /// Where the worker's time went ([`crate::phases`]), filed into the runner's
        /// own marks of the run. Set by [`finish`].
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        marks: Vec<crate::phases::Mark>,
    },
    /// The worker could not run the guest (a runner failure, not a guest outcome).
    Error {
        message: String,
        /// The precompiled module failed its checks: the runner recompiles and retries.
        #[serde(default)]
        module_rejected: bool,
    },
}

/// Print `reply` as the worker's one JSON line on stdout and return the worker's exit
/// code (0 when the guest ran, 1 when the worker could not run it). Every worker
/// (this one, `runner-monty-worker`) ends here.
pub fn finish(mut reply: WorkerReply) -> i32 {
    let code = i32::from(!matches!(reply, WorkerReply::Ok { .. }));
    if let WorkerReply::Ok {
        cpu_before_request_ms,
        marks,
        ..
    } = &mut reply
    {
        *cpu_before_request_ms = CPU_AT_REQUEST_MS.get().copied();
        crate::phases::mark("worker.replied");
        *marks = crate::phases::take();
    }
    // The worker's own peak memory: only it can read its `ru_maxrss` (the runner reaps
    // it with `waitpid`, which does not return one per child).
    if let WorkerReply::Ok { outcome, .. } = &mut reply
        && let Ok(usage) = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF)
    {
        outcome
            .usage
            .get_or_insert_with(Box::default)
            .peak_rss_bytes = u64::try_from(usage.max_rss())
            .ok()
            .map(|kib| kib.saturating_mul(1024));
    }
    let mut line = match serde_json::to_vec(&reply) {
        Ok(line) => line,
        Err(e) => {
            eprintln!("runner worker: cannot encode reply: {e}");
            return 1;
        }
    };
    line.push(b'\n');
    let mut stdout = io::stdout().lock();
    if let Err(e) = stdout.write_all(&line).and_then(|()| stdout.flush()) {
        eprintln!("runner worker: cannot write reply: {e}");
        return 1;
    }
    code
}

/// The guest tried to write or truncate a file past the `/out` byte cap and the kernel
/// refused (SIGXFSZ, see [`confine::take_fsize_refusal`]): the run is `output_limit`,
/// whether the guest then stopped, swallowed the EFBIG or exited 0. Nothing past the
/// cap is on disk to show it afterwards, so the worker says it. Both workers call this
/// once the guest is done.
pub fn note_fsize_refusal(outcome: &mut Outcome, limits: &Limits) {
    mark_output_limit(
        outcome,
        &format!(
            "a write or truncate past the /out byte cap of {} bytes was refused (RLIMIT_FSIZE)",
            limits.out_bytes
        ),
    );
}

/// Read a worker's request (at most [`MAX_REQUEST_BYTES`] of JSON) from `stdin`.
pub fn read_request<T: serde::de::DeserializeOwned>(stdin: impl Read) -> Result<T, BackendError> {
    let mut bytes = Vec::new();
    stdin
        .take(MAX_REQUEST_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(WorkerError::ReadRequest)?;
    if bytes.len() as u64 > MAX_REQUEST_BYTES {
        return Err(WorkerError::RequestTooLarge.into());
    }
    Ok(serde_json::from_slice(&bytes).map_err(WorkerError::MalformedRequest)?)
}

/// A worker's wait for its request: `Ok(None)` when stdin ends before any byte (the
/// runner ended an idle warm worker, or died): the worker then exits 0 quietly.
/// Otherwise as [`read_request`].
pub fn wait_request<T: serde::de::DeserializeOwned>(
    mut stdin: impl Read,
) -> Result<Option<T>, BackendError> {
    let mut first = [0u8; 1];
    let n = loop {
        match stdin.read(&mut first) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            other => {
                break other.map_err(WorkerError::ReadRequest)?;
            }
        }
    };
    if n == 0 {
        return Ok(None);
    }
    note_request_arrival();
    let request = read_request(io::Cursor::new(first).chain(stdin))?;
    crate::phases::start("worker.request_read");
    Ok(Some(request))
}

/// This process's CPU time (user + system, ms) when its request arrived.
static CPU_AT_REQUEST_MS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();

/// Remember this process's CPU time now, as the request arrives (see
/// [`WorkerReply::Ok`]'s `cpu_before_request_ms`).
fn note_request_arrival() {
    use nix::sys::resource::{UsageWho, getrusage};
    if let Ok(usage) = getrusage(UsageWho::RUSAGE_SELF) {
        let ms = |t: nix::sys::time::TimeVal| {
            u64::try_from(t.tv_sec()).unwrap_or(0) * 1000
                + u64::try_from(t.tv_usec()).unwrap_or(0) / 1000
        };
        let _ = CPU_AT_REQUEST_MS.set(ms(usage.user_time()) + ms(usage.system_time()));
    }
}

/// The CPU budget a worker checks itself (precise CPU clock, every epoch tick): the
/// budget itself. `RLIMIT_CPU` sits [`confine::RLIMIT_CPU_SLACK_SECS`] later, as the
/// backstop (see there why not at the budget).
pub fn cpu_check_limit(cpu: Duration) -> Duration {
    cpu
}

/// Write a captured stream to `path` (`capture_dir/stdout` or `capture_dir/stderr`),
/// never through a symlink.
pub fn write_capture(path: &Path, bytes: &[u8]) -> Result<(), BackendError> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(path)
        .and_then(|mut file| file.write_all(bytes))
        .map_err(|source| {
            WorkerError::WriteCapture {
                path: path.to_owned(),
                source,
            }
            .into()
        })
}

pub enum Supervised {
    Outcome(Outcome),
    ModuleRejected(String),
    /// A warm worker ended before it took its request (the request could not be written
    /// to it), with this status: nothing ran; the backend runs the request again on a
    /// cold worker.
    NotDelivered(std::process::ExitStatus),
}

/// Why the runner killed the worker.
#[derive(Debug, Clone, Copy)]
enum Kill {
    Deadline,
    OutOverCaps(confine::TreeUsage),
}

/// Kills and reaps the worker if supervision ends early (an error path).
struct ChildGuard(Option<Child>);

impl ChildGuard {
    fn child(&mut self) -> &mut Child {
        self.0.as_mut().expect("child present until taken")
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// One worker process for [`supervise_worker`]: what to run, what to tell it, and how
/// to read its end. Both backends (wasmtime, Monty) go through here.
pub struct WorkerJob<'a, P> {
    pub exe: &'a Path,
    pub args: &'a [&'a str],
    /// The request, written to the worker's stdin.
    pub payload: Vec<u8>,
    pub spec: &'a SandboxSpec<P>,
    /// Time for the worker to start, added to the kill deadline along with the grace.
    pub startup_allowance: Duration,
    /// Time past the wall-clock limit (and the startup allowance) before SIGKILL.
    pub grace: Duration,
    /// Engine recorded in outcomes the runner writes itself (kills, crashes).
    pub engine: String,
    /// Exit status by which the worker says its memory cap ended it (Monty's allocator
    /// exits with 65 rather than aborting); `None` when it has none.
    pub oom_exit_code: Option<i32>,
    /// A warm worker, started ahead ([`WorkerPool`]) with `exe` and `args`, waiting for
    /// its request; `None`: start one now.
    pub warm: Option<Child>,
}

/// Start the worker, feed it the request, watch it until it exits, and describe how
/// the run ended.
///
/// # Ambient Authority
///
/// Runs `job.exe`; reads `spec.capture_dir` and walks `spec.out_dir`.
pub fn supervise_worker<P>(job: WorkerJob<'_, P>) -> Result<Supervised, BackendError> {
    let spec = job.spec;
    let limits = &spec.limits;
    let exe = job.exe;
    let engine = job.engine.as_str();
    let tmpfs = confine::out_caps_enforced(&spec.out_dir, limits);
    let mut runner_layers = vec![if tmpfs {
        format!(
            "out_tmpfs(size={},nr_inodes={})",
            confine::out_tmpfs_size(limits),
            confine::out_tmpfs_inodes(limits)
        )
    } else {
        format!("out_poll({}ms)", OUT_POLL_INTERVAL.as_millis())
    }];
    let payload = job.payload;

    // The deadline counts from the request being sent: for a warm worker, not from
    // its start.
    let started = Instant::now();
    let warm = job.warm.is_some();
    let child = match job.warm {
        Some(child) => child,
        None => {
            let args: Vec<String> = job.args.iter().map(|a| (*a).to_owned()).collect();
            spawn_worker(exe, &args)?
        }
    };
    let mut guard = ChildGuard(Some(child));
    crate::phases::mark("runner.worker_taken");
    let id = guard.child().id();
    let pid = Pid::from_raw(i32::try_from(id).map_err(|_| WorkerError::PidOutOfRange(id))?);
    let kill_at = started + limits.wall + job.startup_allowance + job.grace;
    runner_layers.push(format!(
        "wall_kill(+{}ms)",
        (job.startup_allowance + job.grace).as_millis()
    ));
    let watch = exchange::Watch {
        kill_at,
        out_poll: (!tmpfs).then_some((spec.out_dir.as_path(), limits)),
    };
    let exchanged = exchange::exchange(
        guard.child(),
        pid,
        &payload,
        &watch,
        MAX_REPLY_BYTES,
        MAX_WORKER_STDERR,
    )
    .map_err(WorkerError::Wait)?;
    let killed = exchanged.killed;
    // Still a zombie: its CPU time is readable until it is reaped.
    let cpu = zombie_cpu_time(pid);
    let mut child = guard.0.take().expect("child present until taken");
    let status = child.wait().map_err(WorkerError::Reap)?;
    let elapsed = started.elapsed().as_secs_f64();
    crate::phases::mark("runner.worker_reaped");
    let (reply, reply_overflow) = (exchanged.reply, exchanged.reply_overflow);
    if warm && !exchanged.delivered && killed.is_none() && reply.is_empty() {
        return Ok(Supervised::NotDelivered(status));
    }
    let ended = Ended {
        killed,
        status,
        cpu,
        elapsed,
        worker_stderr: exchanged.stderr,
        reply,
        reply_overflow,
    };
    // What the worker had used before its request arrived, as it says (a worker that
    // died without a reply says nothing, and its whole CPU time counts).
    let (mut outcome, cpu_before) = match ended.outcome(limits, engine, job.oom_exit_code)? {
        Ok(got) => got,
        Err(early) => return Ok(early),
    };
    let usage = collect_streams_and_out(spec, tmpfs, &mut outcome);
    outcome.engine = job.engine;
    outcome.confinement.extend(runner_layers);
    outcome.usage = Some(Box::new(runner_core::run::Usage {
        cpu_ms: cpu.map(|c| {
            let own = c.saturating_sub(cpu_before.unwrap_or_default());
            u64::try_from(own.as_millis()).unwrap_or(u64::MAX)
        }),
        wall_ms: u64::try_from((elapsed * 1000.0).round() as u128).unwrap_or(u64::MAX),
        peak_rss_bytes: outcome.usage.as_ref().and_then(|u| u.peak_rss_bytes),
        peak_linear_memory_bytes: outcome
            .usage
            .as_ref()
            .and_then(|u| u.peak_linear_memory_bytes),
        out_bytes: usage.map(|u| u.bytes),
        stdout_bytes: outcome.stdout.len() as u64,
        stderr_bytes: outcome.stderr.len() as u64,
        limit_fired: (outcome.kind != OutcomeKind::Completed)
            .then(|| outcome.kind.as_str().to_owned()),
    }));
    Ok(Supervised::Outcome(outcome))
}

/// How a worker's exchange ended, as the runner saw it.
struct Ended {
    killed: Option<Kill>,
    status: ExitStatus,
    cpu: Option<Duration>,
    elapsed: f64,
    worker_stderr: Vec<u8>,
    reply: Vec<u8>,
    reply_overflow: bool,
}

impl Ended {
    /// The worker's stderr, for a detail that says why it ended.
    fn stderr_note(&self) -> String {
        let text = String::from_utf8_lossy(&self.worker_stderr);
        let text = text.trim();
        if text.is_empty() {
            String::new()
        } else {
            format!("; worker stderr: {}", truncate(text, 500))
        }
    }

    /// The run's outcome and the CPU time the worker says it used before the request;
    /// or, inside `Err`, an end that is not an outcome (the precompiled module refused).
    fn outcome(
        &self,
        limits: &Limits,
        engine: &str,
        oom_exit_code: Option<i32>,
    ) -> Result<Result<(Outcome, Option<Duration>), Supervised>, BackendError> {
        let (status, elapsed) = (self.status, self.elapsed);
        let limit = |kind, detail| Ok(Ok((limit_outcome(kind, detail, elapsed, engine), None)));
        match (&self.killed, status.signal()) {
            (Some(Kill::Deadline), _) => limit(
                OutcomeKind::TimedOut,
                format!(
                    "wall-clock limit of {:?} reached; worker killed after the grace",
                    limits.wall
                ),
            ),
            (Some(Kill::OutOverCaps(usage)), _) => limit(
                OutcomeKind::OutputLimit,
                format!(
                    "/out over its caps during the run (at least {} bytes in {} entries; caps {} bytes, {} entries); worker killed",
                    usage.bytes, usage.entries, limits.out_bytes, limits.out_files
                ),
            ),
            (None, Some(signal)) => {
                let (kind, detail) = classify_signal(signal, self.cpu, limits);
                limit(kind, format!("{detail}{}", self.stderr_note()))
            }
            (None, None) if oom_exit_code.is_some() && status.code() == oom_exit_code => limit(
                OutcomeKind::MemoryExceeded,
                format!(
                    "memory limit of {} bytes reached: the worker's allocator cap ended it{}",
                    limits.memory_bytes,
                    self.stderr_note()
                ),
            ),
            (None, None) => match parse_reply(&self.reply, self.reply_overflow) {
                Ok(WorkerReply::Ok {
                    outcome,
                    cpu_before_request_ms,
                    marks,
                }) => {
                    crate::phases::absorb(marks);
                    Ok(Ok((
                        outcome,
                        cpu_before_request_ms.map(Duration::from_millis),
                    )))
                }
                Ok(WorkerReply::Error {
                    message,
                    module_rejected: true,
                }) => Ok(Err(Supervised::ModuleRejected(message))),
                Ok(WorkerReply::Error { message, .. }) => {
                    Err(WorkerError::Reported(message).into())
                }
                Err(why) => limit(
                    OutcomeKind::Trapped,
                    format!(
                        "worker exited with code {} without a valid reply ({why}){}",
                        status.code().unwrap_or(-1),
                        self.stderr_note()
                    ),
                ),
            },
        }
    }
}

/// After the run: the captured streams into `outcome` (bounded by the caps again), and
/// `/out` checked against its caps, files past the byte cap cut back. Returns what the
/// walk of `/out` found.
fn collect_streams_and_out<P>(
    spec: &SandboxSpec<P>,
    tmpfs: bool,
    outcome: &mut Outcome,
) -> Option<confine::TreeUsage> {
    let limits = &spec.limits;
    let (stdout, stdout_over) = read_capture(&spec.capture_dir.join("stdout"), limits.stdout_bytes);
    let (stderr, stderr_over) = read_capture(&spec.capture_dir.join("stderr"), limits.stderr_bytes);
    outcome.stdout_capped |= stdout_over;
    outcome.stderr_capped |= stderr_over;
    outcome.stdout = stdout;
    outcome.stderr = stderr;

    // /out after the run: over the caps (a sparse file, a race with the poll) or a
    // tmpfs filled to the brim means the guest hit the limit.
    let usage = confine::tree_usage(&spec.out_dir, limits).ok();
    let full = tmpfs && confine::tmpfs_full(&spec.out_dir);
    if usage.is_some_and(|u| u.over(limits)) || full {
        mark_output_limit(outcome, &out_over_note(limits, usage));
    }
    // A file can only be over the byte cap when the whole tree is: the walk above
    // stops early, so a tree over either cap (or one it could not walk) is walked again.
    if usage.is_none_or(|u| u.over(limits)) {
        match confine::cut_back_to_cap(&spec.out_dir, limits.out_bytes) {
            Ok(0) => {}
            Ok(n) => push_detail(
                outcome,
                &format!(
                    "{n} /out file(s) reached past the byte cap and were cut back to {} bytes before collection",
                    limits.out_bytes
                ),
            ),
            Err(e) => push_detail(
                outcome,
                &format!("a /out file over the byte cap could not be cut back to it: {e}"),
            ),
        }
    }
    usage
}

/// What the runner saw of `/out` after the run that makes it `output_limit`: the
/// walk's numbers when they are over the caps (they say more), else the tmpfs having
/// no room left.
fn out_over_note(limits: &Limits, usage: Option<confine::TreeUsage>) -> String {
    match usage {
        Some(u) if u.over(limits) => format!(
            "/out over its caps after the run (at least {} bytes in {} entries; caps {} bytes, {} entries)",
            u.bytes, u.entries, limits.out_bytes, limits.out_files
        ),
        _ => format!(
            "/out filled its tmpfs (caps {} bytes, {} entries)",
            limits.out_bytes, limits.out_files
        ),
    }
}

/// Make a run that `/out`'s caps stopped `output_limit`, saying why (`note`) and
/// keeping the guest's own exit code in the detail. A run a harder limit ended
/// (time, memory, CPU) keeps its outcome, with the note added.
fn mark_output_limit(outcome: &mut Outcome, note: &str) {
    if matches!(outcome.kind, OutcomeKind::Completed | OutcomeKind::Trapped) {
        let code = OutcomeKind::OutputLimit
            .conventional_exit_code()
            .unwrap_or(outcome.exit_code);
        let own = format!("guest's own exit code was {}", outcome.exit_code);
        outcome.kind = OutcomeKind::OutputLimit;
        outcome.exit_code = code;
        push_detail(outcome, note);
        push_detail(outcome, &own);
    } else if outcome.kind != OutcomeKind::OutputLimit {
        push_detail(outcome, note);
    }
}

fn push_detail(outcome: &mut Outcome, note: &str) {
    outcome.detail = Some(match outcome.detail.take() {
        Some(d) if !d.is_empty() => format!("{d}; {note}"),
        _ => note.to_owned(),
    });
}

fn limit_outcome(kind: OutcomeKind, detail: String, runtime_sec: f64, engine: &str) -> Outcome {
    Outcome {
        kind,
        exit_code: kind.conventional_exit_code().unwrap_or(1),
        runtime_sec,
        stdout: Vec::new(),
        stderr: Vec::new(),
        stdout_capped: false,
        stderr_capped: false,
        detail: Some(detail),
        engine: engine.to_owned(),
        confinement: Vec::new(),
        usage: None,
    }
}

/// How a worker that died of `signal` (not sent by the runner) ended: SIGXCPU is the
/// soft `RLIMIT_CPU`; SIGKILL with the CPU time at the hard limit is the hard one;
/// anything else is a crash.
fn classify_signal(signal: i32, cpu: Option<Duration>, limits: &Limits) -> (OutcomeKind, String) {
    let name = Signal::try_from(signal)
        .map_or_else(|_| format!("signal {signal}"), |s| s.as_str().to_owned());
    let soft = confine::rlimit_cpu_secs(limits.cpu);
    if signal == Signal::SIGXCPU as i32 {
        return (
            OutcomeKind::CpuExhausted,
            format!(
                "cpu limit of {:?} exhausted (RLIMIT_CPU backstop of {soft} s, {name})",
                limits.cpu
            ),
        );
    }
    if signal == Signal::SIGKILL as i32 && cpu.is_some_and(|t| t.as_secs() >= soft) {
        return (
            OutcomeKind::CpuExhausted,
            format!(
                "cpu limit of {:?} exhausted (hard RLIMIT_CPU of {} s, {name})",
                limits.cpu,
                soft + 1
            ),
        );
    }
    let cpu = cpu.map_or_else(String::new, |t| {
        format!(" after {:.2} s of cpu", t.as_secs_f64())
    });
    (OutcomeKind::Trapped, format!("worker died of {name}{cpu}"))
}

/// Why the worker's stdout is not one [`WorkerReply`] (said in the `trapped` outcome of
/// a worker that exited without one).
#[derive(Debug, thiserror::Error)]
enum ReplyError {
    #[error("reply longer than {MAX_REPLY_BYTES} bytes")]
    TooLong,
    #[error("reply is not UTF-8")]
    NotUtf8,
    #[error("no reply")]
    Missing,
    #[error("more than one reply line")]
    MoreThanOneLine,
    #[error("malformed reply: {0}")]
    Malformed(#[source] serde_json::Error),
}

fn parse_reply(bytes: &[u8], overflow: bool) -> Result<WorkerReply, ReplyError> {
    if overflow {
        return Err(ReplyError::TooLong);
    }
    let text = std::str::from_utf8(bytes).map_err(|_| ReplyError::NotUtf8)?;
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let line = lines.next().ok_or(ReplyError::Missing)?;
    if lines.next().is_some() {
        return Err(ReplyError::MoreThanOneLine);
    }
    serde_json::from_str(line).map_err(ReplyError::Malformed)
}

/// At most `cap` bytes of a capture file, and whether it held more. A missing file
/// (the worker died before writing it) reads as empty; a symlink is not followed.
fn read_capture(path: &Path, cap: u64) -> (Vec<u8>, bool) {
    let Ok(file) = OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(path)
    else {
        return (Vec::new(), false);
    };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return (Vec::new(), false);
    }
    let mut bytes = Vec::new();
    if file
        .take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .is_err()
    {
        return (Vec::new(), false);
    }
    let over = bytes.len() as u64 > cap;
    bytes.truncate(usize::try_from(cap).unwrap_or(usize::MAX));
    (bytes, over)
}

/// CPU time (user + system) of an exited, not yet reaped child, from
/// `/proc/<pid>/stat` (fields 14 and 15, in USER_HZ = 100 ticks per second on Linux).
fn zombie_cpu_time(pid: Pid) -> Option<Duration> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_comm = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    // `fields[0]` is field 3 (state), so field N is `fields[N - 3]`.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(Duration::from_millis((utime + stime) * 10))
}

/// `s` cut to at most `max` bytes on a character boundary, with `…` when cut.
pub fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn signals_map_to_outcomes() {
        let l = Limits {
            memory_bytes: 256 << 20,
            wall: Duration::from_secs(30),
            cpu: Duration::from_secs(2),
            stdout_bytes: 1 << 20,
            stderr_bytes: 1 << 20,
            out_bytes: 16 << 20,
            out_files: 64,
        };
        let xcpu = Signal::SIGXCPU as i32;
        let kill = Signal::SIGKILL as i32;
        let segv = Signal::SIGSEGV as i32;
        assert_eq!(classify_signal(xcpu, None, &l).0, OutcomeKind::CpuExhausted);
        // Soft RLIMIT_CPU is 3 s (2 s budget + 1 s slack), hard 4 s.
        assert_eq!(
            classify_signal(kill, Some(Duration::from_millis(4010)), &l).0,
            OutcomeKind::CpuExhausted
        );
        assert_eq!(
            classify_signal(kill, Some(Duration::from_millis(100)), &l).0,
            OutcomeKind::Trapped
        );
        assert_eq!(classify_signal(segv, None, &l).0, OutcomeKind::Trapped);
        assert!(classify_signal(segv, None, &l).1.contains("SIGSEGV"));
    }

    #[test]
    fn replies_are_parsed_strictly() {
        let why = |bytes: &[u8], overflow| parse_reply(bytes, overflow).unwrap_err().to_string();
        assert_eq!(why(b"", false), "no reply");
        assert!(why(b"{}", false).starts_with("malformed reply: "));
        assert_eq!(why(b"\xff", false), "reply is not UTF-8");
        let line = br#"{"status":"error","message":"m"}"#;
        assert!(parse_reply(line, false).is_ok());
        assert_eq!(why(line, true), "reply longer than 1048576 bytes");
        let two = [&line[..], b"\n", &line[..]].concat();
        assert_eq!(why(&two, false), "more than one reply line");
    }
}
