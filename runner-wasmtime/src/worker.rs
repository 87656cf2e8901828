//! The wasmtime worker process, and the runner side that starts it ([`WasmtimeBackend`]);
//! the protocol and the supervision both workers share are `runner_sandbox::worker`,
//! re-exported here.
//!
//! The worker is `runner-era-worker`, this crate's small binary ([`worker_main`]), found
//! next to the runner's own binary. Protocol, both directions bounded:
//! - stdin: one [`WorkerRequest`] as JSON (the spec and the precompiled module to
//!   load), at most [`MAX_REQUEST_BYTES`](runner_sandbox::worker::MAX_REQUEST_BYTES);
//! - the worker loads and verifies the module, confines itself
//!   ([`confine::confine_worker`]), runs the guest in-process
//!   ([`super::engine::run_set_up_guest`]), writes the captured output to
//!   `capture_dir/stdout` and `capture_dir/stderr`;
//! - stdout: one [`WorkerReply`] JSON line, the outcome *without* the stdout/stderr
//!   bytes (the runner reads them back from the capture files), at most
//!   [`MAX_REPLY_BYTES`](runner_sandbox::worker::MAX_REPLY_BYTES).
//!
//! The runner ([`WasmtimeBackend`]) enforces the wall-clock deadline plus a grace with
//! SIGKILL, polls `/out` when no tmpfs caps it, reads at most a bounded amount of
//! anything the worker says, and returns a complete [`Outcome`] however the worker
//! ends: crash, garbage on stdout, silence.
//!
//! The Monty worker (`runner-monty-worker`, `runner::backend::monty`) speaks the same
//! protocol with its own request type and is supervised by the same
//! `supervise_worker`; [`read_request`](runner_sandbox::worker::read_request), [`write_capture`] and [`finish`] are its
//! worker-side half.

use crate::engine::{
    CpuBudget, GuestSetup, ModuleCache, RunOptions, engine_name, load_module, new_engine,
    run_set_up_guest, worker_address_space_limit,
};
use crate::error::ModuleError;
use runner_sandbox::confine;
use runner_sandbox::cpu::CpuClock;
use runner_sandbox::{Backend, BackendError, GuestProgram, Outcome, SandboxSpec};
// The protocol and the supervision are the sandbox's, shared with the Monty worker.
use runner_sandbox::worker::{
    Supervised, WorkerBackend, WorkerBinary, WorkerError, WorkerReply, Workers, arm_parent_death,
    cpu_check_limit, finish, note_fsize_refusal, wait_request, write_capture,
};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// File name of the worker binary, looked for next to the runner's own.
pub const WORKER_BIN: &str = "runner-era-worker";
/// Environment variable naming the worker program, overriding [`WORKER_BIN`] next to the
/// running executable.
pub const WORKER_EXE_ENV: &str = "RUNNER_WORKER_EXE";
/// Allowance for the worker to start and load the precompiled module, added to the
/// kill deadline along with the grace.
const STARTUP_ALLOWANCE: Duration = Duration::from_secs(1);
/// What the runner sends the worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerRequest {
    pub spec: SandboxSpec<GuestProgram>,
    /// The precompiled guest module (from [`ModuleCache::ensure_compiled`]); the worker checks it
    /// again before mapping it.
    pub module: PathBuf,
}

// ---------------------------------------------------------------------------------
// Worker side
// ---------------------------------------------------------------------------------

/// Argument naming the precompiled module a warm worker loads before its request.
pub const PRELOAD_ARG: &str = "--preload";

/// Entry point of `runner-era-worker`: read the request on stdin, run the guest, print
/// the reply on stdout. Returns the process exit code (0 when the guest ran, whatever
/// its own exit code; 1 when the worker could not run it).
///
/// Started warm (`--preload MODULE`, by a [`WorkerPool`](runner_sandbox::worker::WorkerPool)), it first builds its engine
/// and loads and verifies `MODULE`, then waits for its request; stdin ending before a
/// request comes is a quiet exit 0 (the runner ended it, or died).
pub fn worker_main() -> i32 {
    arm_parent_death();
    let mut args = std::env::args().skip(1);
    let preload = match (args.next().as_deref(), args.next()) {
        (Some(PRELOAD_ARG), Some(module)) => Some(PathBuf::from(module)),
        _ => None,
    };
    // The request-independent confinement first, while the process is surely
    // single-threaded (the rest applies once the request says what the run may reach).
    let early = confine::EarlyConfinement::take();
    let ready = Ready::new(preload);
    let request = match wait_request::<WorkerRequest>(io::stdin().lock()) {
        Ok(None) => return 0,
        Ok(Some(request)) => request,
        Err(error) => {
            return finish(WorkerReply::Error {
                message: error.to_string(),
                module_rejected: false,
            });
        }
    };
    finish(match serve(request, ready, early) {
        Ok(outcome) => WorkerReply::Ok {
            outcome,
            cpu_before_request_ms: None,
            marks: Vec::new(),
        },
        Err(failure) => WorkerReply::Error {
            message: failure.error.to_string(),
            module_rejected: failure.module_rejected,
        },
    })
}

/// The request-independent half of a worker's life: the engine, and the module it
/// preloaded (if any, and if it loaded).
struct Ready {
    engine: Option<::wasmtime::Engine>,
    preloaded: Option<(PathBuf, ::wasmtime::Module)>,
}

impl Ready {
    fn new(preload: Option<PathBuf>) -> Self {
        let Ok(engine) = new_engine() else {
            // Said again, as the run's error, when the request comes.
            return Self {
                engine: None,
                preloaded: None,
            };
        };
        // A module that does not load now is loaded again for the request, whose
        // failure then says why (and makes the runner recompile it).
        let preloaded = preload.and_then(|path| {
            let module = load_module(&engine, &path).ok()?;
            Some((path, module))
        });
        Self {
            engine: Some(engine),
            preloaded,
        }
    }
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

fn serve(
    request: WorkerRequest,
    ready: Ready,
    early: confine::EarlyConfinement,
) -> Result<Outcome, WorkerFailure> {
    let spec = &request.spec;
    let guest = &spec.program;
    let engine = match ready.engine {
        Some(engine) => engine,
        None => new_engine()?,
    };
    // Load (and verify) before confining: the checks read the whole file, and
    // mapping it must not count against the guest's file-size limit. A warm worker
    // loaded it already when it is the one the request names.
    let module = match ready.preloaded {
        Some((path, module)) if path == request.module => module,
        _ => load_module(&engine, &request.module).map_err(|error| WorkerFailure {
            error,
            module_rejected: true,
        })?,
    };
    // Everything the guest sees is opened before confining: the worker may give up the
    // runner's uid, and its own could not open the guest's assets by path.
    let setup = GuestSetup::open(guest, spec)?;
    runner_sandbox::phases::mark("worker.guest_opened");
    let mut fs_access = confine::FsAccess::for_spec(spec, guest.host_reads());
    fs_access.write.extend(setup.scratch().map(Path::to_owned));
    // The network door (`/net`), which the runner made inside /out: the guest writes
    // its requests there, so under its own uid the worker must own it too.
    if guest.runtime.exchange.is_some() {
        fs_access
            .write
            .push(spec.out_dir.join(runner_sandbox::runtime::NET_IN_OUT));
    }
    let confinement = confine::confine_worker(
        early,
        &spec.limits,
        Some(worker_address_space_limit()),
        &fs_access,
    );
    for skipped in &confinement.skipped {
        eprintln!("runner worker: confinement layer not applied: {skipped}");
    }
    confinement
        .check(&spec.confinement)
        .map_err(BackendError::Confinement)?;
    runner_sandbox::phases::mark("worker.confined");
    let options = RunOptions {
        cpu: Some(CpuBudget {
            clock: CpuClock::Process,
            limit: cpu_check_limit(spec.limits.cpu),
        }),
        leave_to_exit: true,
    };
    let mut outcome = run_set_up_guest(&engine, &module, guest, spec, &options, setup)?;
    // The worker exits after its reply: unmapping the module and the engine is the
    // kernel's job then, done once for the whole address space.
    std::mem::forget(module);
    std::mem::forget(engine);
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
    runner_sandbox::phases::mark("worker.captured");
    Ok(outcome)
}

// ---------------------------------------------------------------------------------
// Runner side
// ---------------------------------------------------------------------------------

/// The ERA worker binary: where it is found and how it is built.
pub const ERA_WORKER: WorkerBinary = WorkerBinary {
    env: WORKER_EXE_ENV,
    bin: WORKER_BIN,
    what: "ERA worker",
    build: "cargo build --release --workspace --ignore-rust-version",
};

/// The ERA backend: wasmtime with the CPython-for-WASI guest, run in a confined worker
/// process per request.
pub struct WasmtimeBackend {
    engine: ::wasmtime::Engine,
    cache_dir: PathBuf,
    /// The cache directory, opened (and created) at the first [`WasmtimeBackend::prepare`].
    cache: OnceLock<ModuleCache>,
    workers: Workers,
    /// Guest sha256 → precompiled module verified by this process.
    prepared: Mutex<HashMap<String, PathBuf>>,
}

impl WasmtimeBackend {
    /// A backend whose precompiled modules live in `cache_dir` (see
    /// [`super::engine::default_cache_dir`]).
    pub fn new(cache_dir: impl Into<PathBuf>) -> Result<Self, BackendError> {
        Ok(Self {
            engine: new_engine()?,
            cache_dir: cache_dir.into(),
            cache: OnceLock::new(),
            workers: Workers::new(ERA_WORKER, STARTUP_ALLOWANCE, engine_name()),
            prepared: Mutex::new(HashMap::new()),
        })
    }

    pub fn engine(&self) -> &::wasmtime::Engine {
        &self.engine
    }

    pub fn cache_dir(&self) -> &Path {
        &self.cache_dir
    }

    /// Make sure the guest is compiled and cached (seconds the first time; `progress`
    /// hears about it), and return the precompiled module's path. `run` calls this
    /// too, silently; call it first to show progress. The warm workers
    /// ([`WorkerBackend::with_pool`]) are told here what they preload: the engine built
    /// and the first module prepared, loaded and verified.
    pub fn prepare(
        &self,
        guest: &GuestProgram,
        progress: impl FnMut(&str),
    ) -> Result<PathBuf, BackendError> {
        if let Some(path) = self.prepared_path(&guest.wasm_sha256) {
            return Ok(path);
        }
        let path = self.cache()?.ensure_compiled(
            &self.engine,
            &guest.wasm_path,
            &guest.wasm_sha256,
            progress,
        )?;
        self.lock_prepared()
            .insert(guest.wasm_sha256.clone(), path.clone());
        if let Some(pool) = self.workers.pool()
            && !pool.configured()
        {
            pool.configure(vec![PRELOAD_ARG.to_owned(), path.display().to_string()]);
        }
        Ok(path)
    }

    /// The module cache, opened once.
    fn cache(&self) -> Result<&ModuleCache, BackendError> {
        if let Some(cache) = self.cache.get() {
            return Ok(cache);
        }
        let opened = ModuleCache::create(&self.cache_dir)?;
        Ok(self.cache.get_or_init(|| opened))
    }

    fn prepared_path(&self, sha256: &str) -> Option<PathBuf> {
        self.lock_prepared().get(sha256).cloned()
    }

    fn lock_prepared(&self) -> std::sync::MutexGuard<'_, HashMap<String, PathBuf>> {
        self.prepared
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs `spec` with the precompiled module prepared for its guest: on a warm worker
    /// (`warm`) when there is one, else on one started now.
    fn supervise(
        &self,
        spec: &SandboxSpec<GuestProgram>,
        warm: bool,
    ) -> Result<Supervised, BackendError> {
        let request = WorkerRequest {
            spec: spec.clone(),
            module: self.prepare(&spec.program, |_| {})?,
        };
        let payload = serde_json::to_vec(&request).map_err(WorkerError::EncodeRequest)?;
        runner_sandbox::phases::mark("runner.request_encoded");
        if warm {
            self.workers.run(&payload, spec)
        } else {
            self.workers.run_cold(&payload, spec)
        }
    }
}

impl WorkerBackend for WasmtimeBackend {
    fn workers(&self) -> &Workers {
        &self.workers
    }

    fn workers_mut(&mut self) -> &mut Workers {
        &mut self.workers
    }
}

impl Backend for WasmtimeBackend {
    type Program = GuestProgram;

    fn run(&self, spec: &SandboxSpec<GuestProgram>) -> Result<Outcome, BackendError> {
        self.worker_exe()?;
        let reason = match self.supervise(spec, true)? {
            Supervised::Outcome(outcome) => return Ok(outcome),
            Supervised::NotDelivered(status) => {
                return Err(WorkerError::NotDelivered { status }.into());
            }
            Supervised::ModuleRejected(reason) => reason,
        };
        // Any doubt about precompiled code means compiling again, once.
        self.lock_prepared().remove(&spec.program.wasm_sha256);
        match self.supervise(spec, false)? {
            Supervised::Outcome(outcome) => Ok(outcome),
            Supervised::NotDelivered(status) => Err(WorkerError::NotDelivered { status }.into()),
            Supervised::ModuleRejected(again) => Err(ModuleError::RejectedTwice {
                first: reason,
                again,
            }
            .into()),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
// reason: tests build fixtures on the host filesystem.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use crate::engine::testkit::{
        self, Sandbox, limits, shared, target_profile_dir, test_cache_dir, text,
    };
    use runner_contract::outcome::OutcomeKind;
    use std::fs;
    use std::os::unix::fs::PermissionsExt;
    use std::time::Instant;

    /// The worker program: `$RUNNER_WORKER_EXE`, else `runner-era-worker` in the target
    /// directory the test binary was built into.
    fn worker_exe() -> PathBuf {
        if let Some(exe) = std::env::var_os(WORKER_EXE_ENV).filter(|v| !v.is_empty()) {
            return PathBuf::from(exe);
        }
        let exe = target_profile_dir().join(WORKER_BIN);
        assert!(
            exe.is_file(),
            "{} is missing: build it first (`cargo build --release --workspace \
             --ignore-rust-version`), or set {WORKER_EXE_ENV}",
            exe.display()
        );
        exe
    }

    fn backend() -> WasmtimeBackend {
        backend_with(worker_exe())
    }

    /// The test backend running workers from `exe`.
    fn backend_with(exe: impl Into<PathBuf>) -> WasmtimeBackend {
        // Compile once per test process (shared with the in-process tests).
        let _ = shared();
        WasmtimeBackend::new(test_cache_dir())
            .expect("backend")
            .with_workers(|w| w.with_worker_exe(exe))
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
        let outcome = testkit::hello("via worker", "hello from the worker\n", || {
            backend.run(&sandbox.spec).unwrap()
        });
        assert_eq!(
            fs::read(sandbox.host("capture/stdout")).unwrap(),
            outcome.stdout
        );
        for layer in [
            "pdeathsig",
            "rlimit_core=0",
            "rlimit_nofile=1088",
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
        // Stopped by the worker itself, not by the runner's kill: output kept.
        testkit::assert_timed_out(&outcome, 1.9..2.6);
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
        // The CPU budget, not the wall clock, ended it. Not a timing bound: on two busy
        // cores one second of CPU can take several seconds of wall time.
        assert!(outcome.runtime_sec < 20.0, "{}", outcome.runtime_sec);
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
            "import errno\nfs = []\ntry:\n    for i in range(2000):\n        fs.append(open(f'/out/f{i % 10}', 'w'))\nexcept OSError as e:\n    print(len(fs), errno.errorcode[e.errno])",
            limits(),
        );
        let outcome = backend().run(&sandbox.spec).unwrap();
        assert_eq!(outcome.kind, OutcomeKind::Completed, "{outcome:?}");
        let out = text(&outcome.stdout);
        let mut words = out.split_whitespace();
        let opened: usize = words.next().unwrap().parse().unwrap();
        assert!((1024..1088).contains(&opened), "{out}");
        assert_eq!(words.next(), Some("EMFILE"), "{out}");
    }

    /// Runs `code` on a worker under [`limits`] with `caps` applied; the run must end
    /// `output_limit`.
    fn output_limit_run(
        code: &str,
        caps: impl FnOnce(&mut runner_core::run::Limits),
    ) -> (Sandbox, Outcome) {
        let mut l = limits();
        caps(&mut l);
        let sandbox = Sandbox::python(code, l);
        let outcome = backend().run(&sandbox.spec).unwrap();
        assert_eq!(outcome.kind, OutcomeKind::OutputLimit, "{outcome:?}");
        (sandbox, outcome)
    }

    #[test]
    fn stdout_flood_via_worker() {
        let (_, outcome) = output_limit_run("while True: print('y' * 999)", |l| {
            l.stdout_bytes = 100 << 10;
        });
        assert!(outcome.stdout_capped);
        assert_eq!(outcome.stdout.len(), 100 << 10);
    }

    #[test]
    fn out_byte_flood_is_output_limit_when_polled() {
        let (sandbox, outcome) = output_limit_run(
            "f = open('/out/big', 'wb')\nwhile True: f.write(b'z' * 65536)",
            |l| l.out_bytes = 1 << 20,
        );
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
        let started = Instant::now();
        let (_, outcome) = output_limit_run(
            "import time\nfor i in range(100000):\n    open(f'/out/f{i}', 'w').close()\n    time.sleep(0.001)",
            |l| {
                l.out_files = 10;
                l.wall = Duration::from_secs(10);
            },
        );
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
        // RLIMIT_FSIZE refuses both (EFBIG): nothing is over on disk, but the worker
        // records the refusals (SIGXFSZ), and the guest swallowing them changes
        // nothing.
        let (sandbox, outcome) = output_limit_run(
            "import os\nf = open('/out/sparse', 'wb')\ntry:\n    f.truncate(1 << 40)\nexcept OSError as e:\n    print('truncate', e.errno)\nf.seek(2 << 20)\ntry:\n    f.write(b'x')\n    f.flush()\nexcept OSError as e:\n    print('write', e.errno)",
            |l| l.out_bytes = 1 << 20,
        );
        // WASI's EFBIG is 22.
        assert_eq!(text(&outcome.stdout), "truncate 22\nwrite 22\n");
        assert!(
            outcome.detail.unwrap_or_default().contains("RLIMIT_FSIZE"),
            "the refusal is said"
        );
        assert!(fs::metadata(sandbox.host("out/sparse")).unwrap().len() <= 1 << 20);
    }

    /// Runs `code` under [`limits`] with `caps` applied from a thread with its own mount
    /// namespace, with a tmpfs on `/out`: the worker (spawned from that thread) writes
    /// into the tmpfs. The run must end as `kind`; the outcome and the names left in
    /// `/out`.
    fn run_on_tmpfs(
        code: &str,
        caps: impl FnOnce(&mut runner_core::run::Limits),
        kind: OutcomeKind,
    ) -> (Outcome, Vec<String>) {
        let mut l = limits();
        caps(&mut l);
        let sandbox = Sandbox::python(code, l);
        let ran = std::thread::spawn(move || {
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
        .unwrap();
        let Some((outcome, listing)) = ran else {
            panic!("this test needs root and mount namespaces (CAP_SYS_ADMIN)");
        };
        assert_eq!(outcome.kind, kind, "{outcome:?}");
        (outcome, listing)
    }

    #[test]
    fn out_byte_flood_on_tmpfs_is_output_limit() {
        let (outcome, listing) = run_on_tmpfs(
            "import sys\nf = open('/out/big', 'wb')\ntry:\n    while True:\n        f.write(b'z' * 65536)\n        f.flush()\nexcept OSError as e:\n    print('stopped', e.errno)\n    sys.exit(0)",
            |l| {
                l.out_bytes = 1 << 20;
                l.out_files = 4;
            },
            OutcomeKind::OutputLimit,
        );
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
        let (outcome, listing) = run_on_tmpfs(
            "import sys\nn = 0\ntry:\n    for i in range(1000):\n        open(f'/out/f{i}', 'w').close()\n        n += 1\nexcept OSError as e:\n    print(n, e.errno)\n    sys.exit(0)",
            |l| l.out_files = 10,
            OutcomeKind::OutputLimit,
        );
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
        let caps = |l: &mut runner_core::run::Limits| {
            l.out_bytes = 1 << 20;
            l.out_files = 4;
        };
        let code = "open('/out/small', 'w').write('ok')";
        let (_, listing) = run_on_tmpfs(code, caps, OutcomeKind::Completed);
        assert_eq!(listing, vec!["small".to_owned()]);
    }

    /// A worker that prints garbage, floods its stdout (bounded) or crashes: the run is
    /// trapped, and the detail says what happened.
    #[test]
    fn misbehaving_workers_are_trapped() {
        let cases: &[(&str, &[&str])] = &[
            (
                "cat > /dev/null; echo 'not json'; echo oops >&2",
                &["without a valid reply", "oops"],
            ),
            ("head -c 50000000 /dev/zero", &["longer than"]),
            ("kill -SEGV $$", &["SIGSEGV"]),
        ];
        for (script, wanted) in cases {
            let sandbox = Sandbox::python("print(1)", limits());
            let exe = fake_worker(sandbox.root.path(), script);
            let outcome = backend_with(exe).run(&sandbox.spec).unwrap();
            testkit::assert_ended(&outcome, OutcomeKind::Trapped, wanted, script);
        }
    }

    #[test]
    fn worker_that_hangs_is_killed_at_the_deadline() {
        let mut l = limits();
        l.wall = Duration::from_secs(1);
        let sandbox = Sandbox::python("print(1)", l);
        let exe = fake_worker(sandbox.root.path(), "exec sleep 100");
        let started = Instant::now();
        let outcome = backend_with(exe)
            .with_workers(|w| w.with_grace(Duration::from_millis(200)))
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
        let err = backend_with(exe).run(&sandbox.spec).unwrap_err();
        assert!(err.to_string().contains("no luck"), "{err}");
    }

    #[test]
    fn missing_worker_program_is_a_backend_error() {
        let sandbox = Sandbox::python("print(1)", limits());
        let err = backend_with("/nonexistent/worker")
            .run(&sandbox.spec)
            .unwrap_err();
        assert!(
            err.to_string().contains("cannot start") && err.to_string().contains("missing"),
            "{err}"
        );
    }

    #[test]
    fn tampered_module_is_recompiled_by_the_runner() {
        let shared = shared();
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        let backend = WasmtimeBackend::new(&cache)
            .unwrap()
            .with_workers(|w| w.with_worker_exe(worker_exe()));
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
