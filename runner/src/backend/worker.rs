//! The worker process, and the runner side that starts it, watches it and turns
//! whatever it does into an [`Outcome`].
//!
//! The worker is the runner's own binary started as `runner __worker`
//! ([`worker_main`]). Protocol, both directions bounded:
//! - stdin: one [`WorkerRequest`] as JSON (the spec and the precompiled module to
//!   load), at most [`MAX_REQUEST_BYTES`];
//! - the worker loads and verifies the module, confines itself
//!   ([`confine::confine_worker`]), runs the guest in-process
//!   ([`super::wasmtime::run_guest`]), writes the captured output to
//!   `capture_dir/stdout` and `capture_dir/stderr`;
//! - stdout: one [`WorkerReply`] JSON line, the outcome *without* the stdout/stderr
//!   bytes (the runner reads them back from the capture files), at most
//!   [`MAX_REPLY_BYTES`].
//!
//! The runner ([`WasmtimeBackend`]) enforces the wall-clock deadline plus a grace with
//! SIGKILL, polls `/out` when no tmpfs caps it, reads at most a bounded amount of
//! anything the worker says, and returns a complete [`Outcome`] however the worker
//! ends: crash, garbage on stdout, silence.
//!
//! The Monty worker (`runner-monty-worker`, see [`super::monty`]) speaks the same
//! protocol with its own request type and is supervised by the same
//! `supervise_worker`; [`read_request`], [`write_capture`] and [`finish`] are its
//! worker-side half.

use super::confine;
use super::wasmtime::{
    CpuBudget, CpuClock, RunOptions, engine_name, ensure_compiled, load_module, new_engine,
    run_guest, truncate, worker_address_space_limit,
};
use super::{
    Backend, BackendError, GuestProgram, Limits, Outcome, OutcomeKind, Program, SandboxSpec,
};
use nix::sys::signal::Signal;
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The hidden subcommand that turns the runner binary into a worker.
pub const WORKER_ARG: &str = "__worker";
/// Environment variable naming the worker program, overriding the runner's own binary
/// (tests point it at a build of `examples/backend-worker.rs`).
pub const WORKER_EXE_ENV: &str = "RUNNER_WORKER_EXE";
/// Largest request the worker reads.
pub const MAX_REQUEST_BYTES: u64 = 8 << 20;
/// Largest reply the runner reads from the worker's stdout.
pub const MAX_REPLY_BYTES: usize = 1 << 20;
/// Largest excerpt of the worker's own stderr kept (diagnostics, panics).
const MAX_WORKER_STDERR: usize = 64 << 10;
/// Time the worker gets past the wall-clock limit (and [`STARTUP_ALLOWANCE`]) before
/// it is SIGKILLed, for its own orderly stop and reply. The worker stops the guest at
/// the limit itself; the kill is the last resort for a worker that does not.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(1);
/// Allowance for the worker to start and load the precompiled module, added to the
/// kill deadline along with the grace.
const STARTUP_ALLOWANCE: Duration = Duration::from_secs(1);
/// How often the runner checks `/out` when no tmpfs enforces its caps.
const OUT_POLL_INTERVAL: Duration = Duration::from_millis(50);
/// How often the runner checks whether the worker has exited.
const WAIT_POLL_INTERVAL: Duration = Duration::from_millis(5);

/// What the runner sends the worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerRequest {
    pub spec: SandboxSpec,
    /// The precompiled guest module (from [`ensure_compiled`]); the worker checks it
    /// again before mapping it.
    pub module: PathBuf,
}

/// What the worker answers, as one JSON line.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum WorkerReply {
    /// The guest ran; `stdout` and `stderr` are empty here (see the capture files).
    Ok { outcome: Outcome },
    /// The worker could not run the guest (a runner failure, not a guest outcome).
    Error {
        message: String,
        /// The precompiled module failed its checks: the runner recompiles and retries.
        #[serde(default)]
        module_rejected: bool,
    },
}

// ---------------------------------------------------------------------------------
// Worker side
// ---------------------------------------------------------------------------------

/// Entry point of `runner __worker`: read the request on stdin, run the guest, print
/// the reply on stdout. Returns the process exit code (0 when the guest ran, whatever
/// its own exit code; 1 when the worker could not run it).
pub fn worker_main() -> i32 {
    finish(match serve(io::stdin().lock()) {
        Ok(outcome) => WorkerReply::Ok { outcome },
        Err(failure) => WorkerReply::Error {
            message: failure.error.to_string(),
            module_rejected: failure.module_rejected,
        },
    })
}

/// Print `reply` as the worker's one JSON line on stdout and return the worker's exit
/// code (0 when the guest ran, 1 when the worker could not run it). Every worker
/// (this one, `runner-monty-worker`) ends here.
pub fn finish(reply: WorkerReply) -> i32 {
    let code = i32::from(!matches!(reply, WorkerReply::Ok { .. }));
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

struct WorkerFailure {
    error: BackendError,
    module_rejected: bool,
}

impl From<BackendError> for WorkerFailure {
    fn from(error: BackendError) -> Self {
        Self {
            error,
            module_rejected: false,
        }
    }
}

fn serve(stdin: impl Read) -> Result<Outcome, WorkerFailure> {
    let request: WorkerRequest = read_request(stdin)?;
    let spec = &request.spec;
    let Program::Guest(guest) = &spec.program else {
        return Err(
            BackendError::Worker("the wasmtime worker runs guest programs only".into()).into(),
        );
    };
    let engine = new_engine()?;
    // Load (and verify) before confining: the checks read the whole file, and
    // mapping it must not count against the guest's file-size limit.
    let module = load_module(&engine, &request.module).map_err(|error| WorkerFailure {
        error,
        module_rejected: true,
    })?;
    let confinement = confine::confine_worker(
        &spec.limits,
        Some(worker_address_space_limit()),
        &confine::FsAccess::for_spec(spec),
    );
    for skipped in &confinement.skipped {
        eprintln!("runner worker: confinement layer not applied: {skipped}");
    }
    confinement
        .check(&spec.confinement)
        .map_err(BackendError::Worker)?;
    let options = RunOptions {
        cpu: Some(CpuBudget {
            clock: CpuClock::Process,
            limit: cpu_check_limit(spec.limits.cpu),
        }),
    };
    let mut outcome = run_guest(&engine, &module, guest, spec, &options)?;
    drop(module);
    if confine::take_fsize_refusal() {
        note_fsize_refusal(&mut outcome, &spec.limits);
    }
    // The guest is done: the captures may be larger than its /out allowance, and
    // the bookkeeping must not be cut short by the guest's CPU limit.
    confine::relax_after_guest(&confinement);
    write_capture(&spec.capture_dir.join("stdout"), &outcome.stdout)?;
    write_capture(&spec.capture_dir.join("stderr"), &outcome.stderr)?;
    outcome.stdout = Vec::new();
    outcome.stderr = Vec::new();
    outcome.confinement = confinement.provenance();
    Ok(outcome)
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
        .map_err(|e| BackendError::Worker(format!("cannot read the request: {e}")))?;
    if bytes.len() as u64 > MAX_REQUEST_BYTES {
        return Err(BackendError::Worker(format!(
            "request larger than {MAX_REQUEST_BYTES} bytes"
        )));
    }
    serde_json::from_slice(&bytes)
        .map_err(|e| BackendError::Worker(format!("malformed request: {e}")))
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
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(path)
        .map_err(|e| BackendError::Worker(format!("cannot write {}: {e}", path.display())))?;
    file.write_all(bytes)
        .map_err(|e| BackendError::Worker(format!("cannot write {}: {e}", path.display())))
}

// ---------------------------------------------------------------------------------
// Runner side
// ---------------------------------------------------------------------------------

/// The ERA backend: wasmtime with the CPython-for-WASI guest, run in a confined worker
/// process per request.
pub struct WasmtimeBackend {
    engine: ::wasmtime::Engine,
    cache_dir: PathBuf,
    worker_exe: Option<PathBuf>,
    grace: Duration,
    /// Guest sha256 → precompiled module verified by this process.
    prepared: Mutex<HashMap<String, PathBuf>>,
}

impl WasmtimeBackend {
    /// A backend whose precompiled modules live in `cache_dir` (see
    /// [`super::wasmtime::default_cache_dir`]).
    pub fn new(cache_dir: impl Into<PathBuf>) -> Result<Self, BackendError> {
        Ok(Self {
            engine: new_engine()?,
            cache_dir: cache_dir.into(),
            worker_exe: None,
            grace: DEFAULT_GRACE,
            prepared: Mutex::new(HashMap::new()),
        })
    }

    /// Run workers from `exe` instead of `$RUNNER_WORKER_EXE` or the runner's own binary.
    pub fn with_worker_exe(mut self, exe: impl Into<PathBuf>) -> Self {
        self.worker_exe = Some(exe.into());
        self
    }

    /// Time past the wall-clock limit (and the startup allowance) before SIGKILL.
    pub fn with_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    pub fn engine(&self) -> &::wasmtime::Engine {
        &self.engine
    }

    pub fn cache_dir(&self) -> &Path {
        &self.cache_dir
    }

    /// Make sure the guest is compiled and cached (seconds the first time; `progress`
    /// hears about it), and return the precompiled module's path. `run` calls this
    /// too, silently; call it first to show progress.
    pub fn prepare(
        &self,
        guest: &GuestProgram,
        progress: impl FnMut(&str),
    ) -> Result<PathBuf, BackendError> {
        if let Some(path) = self.prepared_path(&guest.wasm_sha256) {
            return Ok(path);
        }
        let path = ensure_compiled(
            &self.engine,
            &guest.wasm_path,
            &guest.wasm_sha256,
            &self.cache_dir,
            progress,
        )?;
        self.lock_prepared()
            .insert(guest.wasm_sha256.clone(), path.clone());
        Ok(path)
    }

    fn prepared_path(&self, sha256: &str) -> Option<PathBuf> {
        self.lock_prepared().get(sha256).cloned()
    }

    fn lock_prepared(&self) -> std::sync::MutexGuard<'_, HashMap<String, PathBuf>> {
        self.prepared
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// # Ambient Authority
    ///
    /// Reads `$RUNNER_WORKER_EXE` and the path of the running executable.
    fn worker_exe(&self) -> Result<PathBuf, BackendError> {
        if let Some(exe) = &self.worker_exe {
            return Ok(exe.clone());
        }
        if let Some(exe) = std::env::var_os(WORKER_EXE_ENV).filter(|v| !v.is_empty()) {
            return Ok(PathBuf::from(exe));
        }
        std::env::current_exe()
            .map_err(|e| BackendError::Worker(format!("cannot locate the runner binary: {e}")))
    }
}

impl Backend for WasmtimeBackend {
    fn run(&self, spec: &SandboxSpec) -> Result<Outcome, BackendError> {
        let Program::Guest(guest) = &spec.program else {
            return Err(BackendError::Worker(
                "the wasmtime backend runs guest programs only".into(),
            ));
        };
        let exe = self.worker_exe()?;
        let module = self.prepare(guest, |_| {})?;
        let request = WorkerRequest {
            spec: spec.clone(),
            module,
        };
        match supervise(&exe, &request, self.grace)? {
            Supervised::Outcome(outcome) => Ok(outcome),
            Supervised::ModuleRejected(reason) => {
                // Any doubt about precompiled code means compiling again, once.
                self.lock_prepared().remove(&guest.wasm_sha256);
                let module = self.prepare(guest, |_| {})?;
                let request = WorkerRequest {
                    spec: spec.clone(),
                    module,
                };
                match supervise(&exe, &request, self.grace)? {
                    Supervised::Outcome(outcome) => Ok(outcome),
                    Supervised::ModuleRejected(again) => Err(BackendError::Module(format!(
                        "precompiled module rejected twice: {reason}; then {again}"
                    ))),
                }
            }
        }
    }
}

pub(crate) enum Supervised {
    Outcome(Outcome),
    ModuleRejected(String),
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

/// Run the wasmtime worker (`runner __worker`) on `request`.
fn supervise(
    exe: &Path,
    request: &WorkerRequest,
    grace: Duration,
) -> Result<Supervised, BackendError> {
    let payload = serde_json::to_vec(request)
        .map_err(|e| BackendError::Worker(format!("cannot encode the request: {e}")))?;
    supervise_worker(WorkerJob {
        exe,
        args: &[WORKER_ARG],
        payload,
        spec: &request.spec,
        startup_allowance: STARTUP_ALLOWANCE,
        grace,
        engine: engine_name(),
        oom_exit_code: None,
    })
}

/// One worker process for [`supervise_worker`]: what to run, what to tell it, and how
/// to read its end. Both backends (wasmtime, Monty) go through here.
pub(crate) struct WorkerJob<'a> {
    pub exe: &'a Path,
    pub args: &'a [&'a str],
    /// The request, written to the worker's stdin.
    pub payload: Vec<u8>,
    pub spec: &'a SandboxSpec,
    /// Time for the worker to start, added to the kill deadline along with the grace.
    pub startup_allowance: Duration,
    /// Time past the wall-clock limit (and the startup allowance) before SIGKILL.
    pub grace: Duration,
    /// Engine recorded in outcomes the runner writes itself (kills, crashes).
    pub engine: String,
    /// Exit status by which the worker says its memory cap ended it (Monty's allocator
    /// exits with 65 rather than aborting); `None` when it has none.
    pub oom_exit_code: Option<i32>,
}

/// Start the worker, feed it the request, watch it until it exits, and describe how
/// the run ended.
///
/// # Ambient Authority
///
/// Runs `job.exe`; reads `spec.capture_dir` and walks `spec.out_dir`.
pub(crate) fn supervise_worker(job: WorkerJob<'_>) -> Result<Supervised, BackendError> {
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

    let started = Instant::now();
    let child = Command::new(exe)
        .args(job.args)
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| BackendError::Worker(format!("cannot start {}: {e}", exe.display())))?;
    let mut guard = ChildGuard(Some(child));
    let stdin = guard.child().stdin.take();
    let writer = std::thread::spawn(move || {
        if let Some(mut stdin) = stdin {
            // A worker that dies early closes the pipe; its exit status says why.
            let _ = stdin.write_all(&payload);
        }
    });
    let reply_reader = bounded_reader(guard.child().stdout.take(), MAX_REPLY_BYTES);
    let stderr_reader = bounded_reader(guard.child().stderr.take(), MAX_WORKER_STDERR);

    let pid = Pid::from_raw(
        i32::try_from(guard.child().id())
            .map_err(|_| BackendError::Worker("worker pid out of range".into()))?,
    );
    let kill_at = started + limits.wall + job.startup_allowance + job.grace;
    runner_layers.push(format!(
        "wall_kill(+{}ms)",
        (job.startup_allowance + job.grace).as_millis()
    ));
    let mut killed: Option<Kill> = None;
    let mut next_out_poll = started + OUT_POLL_INTERVAL;
    loop {
        let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
        match waitid(Id::Pid(pid), flags) {
            Ok(WaitStatus::StillAlive) => {}
            Ok(_) => break,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(BackendError::Worker(format!("waiting for the worker: {e}"))),
        }
        let now = Instant::now();
        if killed.is_none() {
            if now >= kill_at {
                let _ = nix::sys::signal::kill(pid, Signal::SIGKILL);
                killed = Some(Kill::Deadline);
            } else if !tmpfs && now >= next_out_poll {
                next_out_poll = now + OUT_POLL_INTERVAL;
                if let Ok(usage) = confine::tree_usage(&spec.out_dir, limits)
                    && usage.over(limits)
                {
                    let _ = nix::sys::signal::kill(pid, Signal::SIGKILL);
                    killed = Some(Kill::OutOverCaps(usage));
                }
            }
        }
        std::thread::sleep(WAIT_POLL_INTERVAL);
    }
    // Still a zombie: its CPU time is readable until it is reaped.
    let cpu = zombie_cpu_time(pid);
    let mut child = guard.0.take().expect("child present until taken");
    let status = child
        .wait()
        .map_err(|e| BackendError::Worker(format!("reaping the worker: {e}")))?;
    let elapsed = started.elapsed().as_secs_f64();
    let _ = writer.join();
    let (reply, reply_overflow) = reply_reader.join().unwrap_or_default();
    let (worker_stderr, _) = stderr_reader.join().unwrap_or_default();
    let stderr_note = || {
        let text = String::from_utf8_lossy(&worker_stderr);
        let text = text.trim();
        if text.is_empty() {
            String::new()
        } else {
            format!("; worker stderr: {}", truncate(text, 500))
        }
    };

    let mut outcome = match (killed, status.signal()) {
        (Some(Kill::Deadline), _) => limit_outcome(
            OutcomeKind::TimedOut,
            format!(
                "wall-clock limit of {:?} reached; worker killed after the grace",
                limits.wall
            ),
            elapsed,
            engine,
        ),
        (Some(Kill::OutOverCaps(usage)), _) => limit_outcome(
            OutcomeKind::OutputLimit,
            format!(
                "/out over its caps during the run (at least {} bytes in {} entries; caps {} bytes, {} entries); worker killed",
                usage.bytes, usage.entries, limits.out_bytes, limits.out_files
            ),
            elapsed,
            engine,
        ),
        (None, Some(signal)) => {
            let (kind, detail) = classify_signal(signal, cpu, limits);
            limit_outcome(kind, format!("{detail}{}", stderr_note()), elapsed, engine)
        }
        (None, None) if job.oom_exit_code.is_some() && status.code() == job.oom_exit_code => {
            limit_outcome(
                OutcomeKind::MemoryExceeded,
                format!(
                    "memory limit of {} bytes reached: the worker's allocator cap ended it{}",
                    limits.memory_bytes,
                    stderr_note()
                ),
                elapsed,
                engine,
            )
        }
        (None, None) => match parse_reply(&reply, reply_overflow) {
            Ok(WorkerReply::Ok { outcome }) => outcome,
            Ok(WorkerReply::Error {
                message,
                module_rejected: true,
            }) => return Ok(Supervised::ModuleRejected(message)),
            Ok(WorkerReply::Error { message, .. }) => return Err(BackendError::Worker(message)),
            Err(why) => limit_outcome(
                OutcomeKind::Trapped,
                format!(
                    "worker exited with code {} without a valid reply ({why}){}",
                    status.code().unwrap_or(-1),
                    stderr_note()
                ),
                elapsed,
                engine,
            ),
        },
    };

    // The captured output: what the worker wrote, bounded by the caps again.
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
        mark_output_limit(&mut outcome, &out_over_note(limits, usage));
    }
    // A file can only be over the byte cap when the whole tree is: the walk above
    // stops early, so a tree over either cap (or one it could not walk) is walked again.
    if usage.is_none_or(|u| u.over(limits)) {
        match confine::cut_back_to_cap(&spec.out_dir, limits.out_bytes) {
            Ok(0) => {}
            Ok(n) => push_detail(
                &mut outcome,
                &format!(
                    "{n} /out file(s) reached past the byte cap and were cut back to {} bytes before collection",
                    limits.out_bytes
                ),
            ),
            Err(e) => push_detail(
                &mut outcome,
                &format!("a /out file over the byte cap could not be cut back to it: {e}"),
            ),
        }
    }

    outcome.engine = job.engine;
    outcome.confinement.extend(runner_layers);
    Ok(Supervised::Outcome(outcome))
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

fn parse_reply(bytes: &[u8], overflow: bool) -> Result<WorkerReply, String> {
    if overflow {
        return Err(format!("reply longer than {MAX_REPLY_BYTES} bytes"));
    }
    let text = std::str::from_utf8(bytes).map_err(|_| "reply is not UTF-8".to_owned())?;
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let line = lines.next().ok_or_else(|| "no reply".to_owned())?;
    if lines.next().is_some() {
        return Err("more than one reply line".into());
    }
    serde_json::from_str(line).map_err(|e| format!("malformed reply: {e}"))
}

/// Read a pipe to its end, keeping at most `max` bytes; the flag says bytes were dropped.
fn bounded_reader(
    pipe: Option<impl Read + Send + 'static>,
    max: usize,
) -> JoinHandle<(Vec<u8>, bool)> {
    std::thread::spawn(move || {
        let Some(mut pipe) = pipe else {
            return (Vec::new(), false);
        };
        let mut kept = Vec::new();
        let mut overflow = false;
        let mut buf = [0u8; 8192];
        loop {
            match pipe.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    let room = max.saturating_sub(kept.len());
                    kept.extend_from_slice(&buf[..n.min(room)]);
                    overflow |= n > room;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        (kept, overflow)
    })
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::backend::wasmtime::testkit::{
        Sandbox, limits, shared, target_profile_dir, test_cache_dir, text,
    };
    use std::os::unix::fs::PermissionsExt;

    /// The worker program: `$RUNNER_WORKER_EXE`, else the `backend-worker` example that
    /// `cargo test` builds next to the test binary.
    fn worker_exe() -> PathBuf {
        if let Some(exe) = std::env::var_os(WORKER_EXE_ENV).filter(|v| !v.is_empty()) {
            return PathBuf::from(exe);
        }
        let exe = target_profile_dir().join("examples").join("backend-worker");
        assert!(
            exe.is_file(),
            "{} is missing: run the tests with `cargo test --release -p runner` (which \
             builds examples), or `cargo build --release -p runner --example backend-worker`, \
             or set {WORKER_EXE_ENV}",
            exe.display()
        );
        exe
    }

    fn backend() -> WasmtimeBackend {
        // Compile once per test process (shared with the in-process tests).
        let _ = shared();
        WasmtimeBackend::new(test_cache_dir())
            .expect("backend")
            .with_worker_exe(worker_exe())
    }

    /// A fake worker: a shell script.
    fn fake_worker(dir: &Path, script: &str) -> PathBuf {
        let path = dir.join("fake-worker.sh");
        fs::write(&path, format!("#!/bin/sh\n{script}\n")).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    fn has_layer(outcome: &Outcome, prefix: &str) -> bool {
        outcome.confinement.iter().any(|l| l.starts_with(prefix))
    }

    #[test]
    fn hello_world_via_worker() {
        let backend = backend();
        let sandbox = Sandbox::python("print('hello from the worker')", limits());
        backend.prepare(sandbox.guest(), |_| {}).unwrap();
        let started = Instant::now();
        let outcome = backend.run(&sandbox.spec).unwrap();
        eprintln!(
            "hello world via worker: {:.3} s wall (guest {:.3} s)",
            started.elapsed().as_secs_f64(),
            outcome.runtime_sec
        );
        assert_eq!(outcome.kind, OutcomeKind::Completed, "{outcome:?}");
        assert_eq!(outcome.exit_code, 0);
        assert_eq!(text(&outcome.stdout), "hello from the worker\n");
        assert_eq!(
            fs::read(sandbox.host("capture/stdout")).unwrap(),
            outcome.stdout
        );
        for layer in [
            "pdeathsig",
            "rlimit_core=0",
            "rlimit_nofile=64",
            "rlimit_cpu=31s",
            "rlimit_as=",
            "rlimit_fsize=16777217",
            "net_namespace",
            "capability_bounding_set=0",
            "capabilities=0",
            "no_new_privs",
            "seccomp(deny=",
            "out_poll",
            "wall_kill",
        ] {
            assert!(
                has_layer(&outcome, layer),
                "{layer} missing: {:?}",
                outcome.confinement
            );
        }
    }

    #[test]
    fn exit_code_via_worker() {
        let sandbox = Sandbox::python("import sys; sys.stderr.write('err'); sys.exit(3)", limits());
        let outcome = backend().run(&sandbox.spec).unwrap();
        assert_eq!(outcome.kind, OutcomeKind::Completed, "{outcome:?}");
        assert_eq!(outcome.exit_code, 3);
        assert_eq!(text(&outcome.stderr), "err");
    }

    #[test]
    fn sleep_times_out_in_the_worker() {
        let mut l = limits();
        l.wall = Duration::from_secs(2);
        let sandbox = Sandbox::python("import time\nprint('zz', flush=True)\ntime.sleep(30)", l);
        let started = Instant::now();
        let outcome = backend().run(&sandbox.spec).unwrap();
        assert_eq!(outcome.kind, OutcomeKind::TimedOut, "{outcome:?}");
        assert_eq!(outcome.exit_code, 124);
        // Stopped by the worker itself, not by the runner's kill: output kept.
        assert!(
            (1.9..2.6).contains(&outcome.runtime_sec),
            "{}",
            outcome.runtime_sec
        );
        assert!(started.elapsed() < Duration::from_secs(3));
        assert_eq!(text(&outcome.stdout), "zz\n");
    }

    #[test]
    fn busy_loop_under_a_cpu_limit_is_cpu_exhausted() {
        let mut l = limits();
        l.wall = Duration::from_secs(20);
        l.cpu = Duration::from_secs(1);
        let sandbox = Sandbox::python("print('spin', flush=True)\nwhile True: pass", l);
        let outcome = backend().run(&sandbox.spec).unwrap();
        assert_eq!(outcome.kind, OutcomeKind::CpuExhausted, "{outcome:?}");
        assert_eq!(outcome.exit_code, 152);
        assert!(outcome.runtime_sec < 3.0, "{}", outcome.runtime_sec);
        assert!(has_layer(&outcome, "rlimit_cpu=2s"), "{outcome:?}");
        assert_eq!(text(&outcome.stdout), "spin\n");
    }

    #[test]
    fn memory_balloon_via_worker() {
        let mut l = limits();
        l.memory_bytes = 64 << 20;
        let sandbox = Sandbox::python("b = bytearray(500 * 1024 * 1024)", l);
        let outcome = backend().run(&sandbox.spec).unwrap();
        assert_eq!(outcome.kind, OutcomeKind::MemoryExceeded, "{outcome:?}");
    }

    /// RLIMIT_AS leaves room for a large, permitted linear memory.
    #[test]
    fn large_permitted_memory_works_under_rlimit_as() {
        let mut l = limits();
        l.memory_bytes = 2 << 30;
        let sandbox = Sandbox::python(
            "b = bytearray(1536 * 1024 * 1024)\nb[-1] = 1\nprint(len(b))",
            l,
        );
        let outcome = backend().run(&sandbox.spec).unwrap();
        assert_eq!(
            outcome.kind,
            OutcomeKind::Completed,
            "{outcome:?} {}",
            text(&outcome.stderr)
        );
        assert_eq!(text(&outcome.stdout), format!("{}\n", 1536u64 << 20));
    }

    #[test]
    fn open_files_are_capped_without_breaking_the_guest() {
        let sandbox = Sandbox::python(
            "import os\nfs = []\ntry:\n    for i in range(200):\n        fs.append(open(f'/out/f{i % 10}', 'w'))\nexcept OSError as e:\n    print(len(fs), e.errno)",
            limits(),
        );
        let outcome = backend().run(&sandbox.spec).unwrap();
        assert_eq!(outcome.kind, OutcomeKind::Completed, "{outcome:?}");
        let out = text(&outcome.stdout);
        let opened: usize = out.split_whitespace().next().unwrap().parse().unwrap();
        assert!((40..64).contains(&opened), "{out}");
    }

    #[test]
    fn stdout_flood_via_worker() {
        let mut l = limits();
        l.stdout_bytes = 100 << 10;
        let sandbox = Sandbox::python("while True: print('y' * 999)", l);
        let outcome = backend().run(&sandbox.spec).unwrap();
        assert_eq!(outcome.kind, OutcomeKind::OutputLimit, "{outcome:?}");
        assert!(outcome.stdout_capped);
        assert_eq!(outcome.stdout.len(), 100 << 10);
    }

    #[test]
    fn out_byte_flood_is_output_limit_when_polled() {
        let mut l = limits();
        l.out_bytes = 1 << 20;
        let sandbox = Sandbox::python(
            "f = open('/out/big', 'wb')\nwhile True: f.write(b'z' * 65536)",
            l,
        );
        let outcome = backend().run(&sandbox.spec).unwrap();
        assert_eq!(outcome.kind, OutcomeKind::OutputLimit, "{outcome:?}");
        assert!(has_layer(&outcome, "out_poll"));
        // RLIMIT_FSIZE stopped the file one byte past the cap; the runner cut that
        // byte off again.
        assert_eq!(
            fs::metadata(sandbox.host("out/big")).unwrap().len(),
            1 << 20
        );
        assert!(
            outcome.detail.unwrap_or_default().contains("cut back"),
            "the cut is said"
        );
    }

    #[test]
    fn out_file_flood_is_output_limit_when_polled() {
        let mut l = limits();
        l.out_files = 10;
        l.wall = Duration::from_secs(10);
        let sandbox = Sandbox::python(
            "import time\nfor i in range(100000):\n    open(f'/out/f{i}', 'w').close()\n    time.sleep(0.001)",
            l,
        );
        let started = Instant::now();
        let outcome = backend().run(&sandbox.spec).unwrap();
        assert_eq!(outcome.kind, OutcomeKind::OutputLimit, "{outcome:?}");
        // The poll killed it long before it finished or timed out.
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        assert!(outcome.detail.unwrap_or_default().contains("worker killed"));
    }

    #[test]
    fn sparse_out_file_is_output_limit() {
        let mut l = limits();
        l.out_bytes = 1 << 20;
        let sandbox = Sandbox::python(
            "import os\nf = open('/out/sparse', 'wb')\ntry:\n    f.truncate(1 << 40)\nexcept OSError as e:\n    print('truncate', e.errno)\nf.seek(2 << 20)\ntry:\n    f.write(b'x')\n    f.flush()\nexcept OSError as e:\n    print('write', e.errno)",
            l,
        );
        let outcome = backend().run(&sandbox.spec).unwrap();
        // RLIMIT_FSIZE refuses both (EFBIG): nothing is over on disk, but the worker
        // recorded the refusals (SIGXFSZ), and the guest swallowing them changes
        // nothing.
        assert_eq!(outcome.kind, OutcomeKind::OutputLimit, "{outcome:?}");
        // WASI's EFBIG is 22.
        assert_eq!(text(&outcome.stdout), "truncate 22\nwrite 22\n");
        assert!(
            outcome.detail.unwrap_or_default().contains("RLIMIT_FSIZE"),
            "the refusal is said"
        );
        assert!(fs::metadata(sandbox.host("out/sparse")).unwrap().len() <= 1 << 20);
    }

    /// Runs a sandbox from a thread with its own mount namespace, with a tmpfs on
    /// `/out`: the worker (spawned from that thread) writes into the tmpfs.
    fn run_with_tmpfs(sandbox: Sandbox) -> Option<(Outcome, Vec<String>)> {
        std::thread::spawn(move || {
            let mount = confine::mount_tmpfs_in_thread_namespace(
                &sandbox.spec.out_dir,
                &sandbox.spec.limits,
            )
            .unwrap()?;
            let outcome = backend().run(&sandbox.spec).unwrap();
            let listing = fs::read_dir(&sandbox.spec.out_dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            mount.unmount().unwrap();
            Some((outcome, listing))
        })
        .join()
        .unwrap()
    }

    #[test]
    fn out_byte_flood_on_tmpfs_is_output_limit() {
        let mut l = limits();
        l.out_bytes = 1 << 20;
        l.out_files = 4;
        let sandbox = Sandbox::python(
            "import sys\nf = open('/out/big', 'wb')\ntry:\n    while True:\n        f.write(b'z' * 65536)\n        f.flush()\nexcept OSError as e:\n    print('stopped', e.errno)\n    sys.exit(0)",
            l,
        );
        let Some((outcome, listing)) = run_with_tmpfs(sandbox) else {
            panic!("this test needs root and mount namespaces (CAP_SYS_ADMIN)");
        };
        assert_eq!(outcome.kind, OutcomeKind::OutputLimit, "{outcome:?}");
        assert!(
            has_layer(&outcome, "out_tmpfs"),
            "{:?}",
            outcome.confinement
        );
        assert!(
            text(&outcome.stdout).starts_with("stopped"),
            "{}",
            text(&outcome.stdout)
        );
        assert_eq!(listing, vec!["big".to_owned()]);
    }

    #[test]
    fn out_file_flood_on_tmpfs_is_output_limit() {
        let mut l = limits();
        l.out_files = 10;
        let sandbox = Sandbox::python(
            "import sys\nn = 0\ntry:\n    for i in range(1000):\n        open(f'/out/f{i}', 'w').close()\n        n += 1\nexcept OSError as e:\n    print(n, e.errno)\n    sys.exit(0)",
            l,
        );
        let Some((outcome, listing)) = run_with_tmpfs(sandbox) else {
            panic!("this test needs root and mount namespaces (CAP_SYS_ADMIN)");
        };
        assert_eq!(outcome.kind, OutcomeKind::OutputLimit, "{outcome:?}");
        // The kernel lets one entry past the cap through (that is how the runner
        // tells "reached" from "went past"), then ENOSPC.
        assert!(
            text(&outcome.stdout).starts_with("11 "),
            "{}",
            text(&outcome.stdout)
        );
        assert_eq!(listing.len(), 11);
    }

    #[test]
    fn writing_within_the_tmpfs_caps_completes() {
        let mut l = limits();
        l.out_bytes = 1 << 20;
        l.out_files = 4;
        let sandbox = Sandbox::python("open('/out/small', 'w').write('ok')", l);
        let Some((outcome, listing)) = run_with_tmpfs(sandbox) else {
            panic!("this test needs root and mount namespaces (CAP_SYS_ADMIN)");
        };
        assert_eq!(outcome.kind, OutcomeKind::Completed, "{outcome:?}");
        assert_eq!(listing, vec!["small".to_owned()]);
    }

    #[test]
    fn worker_printing_garbage_is_trapped() {
        let sandbox = Sandbox::python("print(1)", limits());
        let exe = fake_worker(
            sandbox.root.path(),
            "cat > /dev/null; echo 'not json'; echo oops >&2",
        );
        let outcome = backend().with_worker_exe(exe).run(&sandbox.spec).unwrap();
        assert_eq!(outcome.kind, OutcomeKind::Trapped, "{outcome:?}");
        let detail = outcome.detail.unwrap_or_default();
        assert!(
            detail.contains("without a valid reply") && detail.contains("oops"),
            "{detail}"
        );
    }

    #[test]
    fn worker_flooding_stdout_is_bounded() {
        let sandbox = Sandbox::python("print(1)", limits());
        let exe = fake_worker(sandbox.root.path(), "head -c 50000000 /dev/zero");
        let outcome = backend().with_worker_exe(exe).run(&sandbox.spec).unwrap();
        assert_eq!(outcome.kind, OutcomeKind::Trapped, "{outcome:?}");
        assert!(outcome.detail.unwrap_or_default().contains("longer than"));
    }

    #[test]
    fn worker_crashing_is_trapped() {
        let sandbox = Sandbox::python("print(1)", limits());
        let exe = fake_worker(sandbox.root.path(), "kill -SEGV $$");
        let outcome = backend().with_worker_exe(exe).run(&sandbox.spec).unwrap();
        assert_eq!(outcome.kind, OutcomeKind::Trapped, "{outcome:?}");
        assert!(outcome.detail.unwrap_or_default().contains("SIGSEGV"));
    }

    #[test]
    fn worker_that_hangs_is_killed_at_the_deadline() {
        let mut l = limits();
        l.wall = Duration::from_secs(1);
        let sandbox = Sandbox::python("print(1)", l);
        let exe = fake_worker(sandbox.root.path(), "exec sleep 100");
        let started = Instant::now();
        let outcome = backend()
            .with_worker_exe(exe)
            .with_grace(Duration::from_millis(200))
            .run(&sandbox.spec)
            .unwrap();
        assert_eq!(outcome.kind, OutcomeKind::TimedOut, "{outcome:?}");
        let took = started.elapsed();
        assert!(
            took >= Duration::from_secs(2) && took < Duration::from_secs(4),
            "{took:?}"
        );
    }

    #[test]
    fn worker_error_reply_is_a_backend_error() {
        let sandbox = Sandbox::python("print(1)", limits());
        let exe = fake_worker(
            sandbox.root.path(),
            "cat > /dev/null; echo '{\"status\":\"error\",\"message\":\"no luck\"}'; exit 1",
        );
        let err = backend()
            .with_worker_exe(exe)
            .run(&sandbox.spec)
            .unwrap_err();
        assert!(err.to_string().contains("no luck"), "{err}");
    }

    #[test]
    fn missing_worker_program_is_a_backend_error() {
        let sandbox = Sandbox::python("print(1)", limits());
        let err = backend()
            .with_worker_exe("/nonexistent/worker")
            .run(&sandbox.spec)
            .unwrap_err();
        assert!(err.to_string().contains("cannot start"), "{err}");
    }

    #[test]
    fn signals_map_to_outcomes() {
        let l = Limits {
            cpu: Duration::from_secs(2),
            ..limits()
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
        assert!(parse_reply(b"", false).is_err());
        assert!(parse_reply(b"{}", false).is_err());
        assert!(parse_reply(b"\xff", false).is_err());
        let line = br#"{"status":"error","message":"m"}"#;
        assert!(parse_reply(line, false).is_ok());
        assert!(parse_reply(line, true).is_err());
        let two = [&line[..], b"\n", &line[..]].concat();
        assert!(parse_reply(&two, false).is_err());
    }

    #[test]
    fn tampered_module_is_recompiled_by_the_runner() {
        let shared = shared();
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        let backend = WasmtimeBackend::new(&cache)
            .unwrap()
            .with_worker_exe(worker_exe());
        // Seed this cache with the shared module, then let the backend verify it.
        fs::create_dir(&cache).unwrap();
        fs::set_permissions(&cache, fs::Permissions::from_mode(0o700)).unwrap();
        let name = shared.cwasm.file_name().unwrap();
        fs::copy(&shared.cwasm, cache.join(name)).unwrap();
        let mut sidecar = shared.cwasm.as_os_str().to_owned();
        sidecar.push(".sha256");
        fs::copy(
            &sidecar,
            cache.join(Path::new(&sidecar).file_name().unwrap()),
        )
        .unwrap();
        let sandbox = Sandbox::python("print('again')", limits());
        let cwasm = backend.prepare(sandbox.guest(), |_| {}).unwrap();
        assert_eq!(cwasm, cache.join(name));
        // After the runner verified it, the file changes: the worker refuses it, the
        // runner compiles again and retries.
        let mut bytes = fs::read(&cwasm).unwrap();
        let mid = bytes.len() / 3;
        bytes[mid] ^= 0xff;
        fs::write(&cwasm, &bytes).unwrap();
        let outcome = backend.run(&sandbox.spec).unwrap();
        assert_eq!(outcome.kind, OutcomeKind::Completed, "{outcome:?}");
        assert_eq!(text(&outcome.stdout), "again\n");
        assert_eq!(fs::read(&cwasm).unwrap(), fs::read(&shared.cwasm).unwrap());
    }
}
