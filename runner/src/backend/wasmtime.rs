//! The wasmtime engine: the one engine configuration the runner uses, the
//! precompiled-module cache (keyed by guest sha256, wasmtime version and the engine
//! settings that decide compatibility), and the in-process execution of a WASI
//! preview 1 command (the CPython guest) under a run's limits.
//!
//! Execution here is the innermost layer. In production it runs inside the worker
//! process ([`super::worker`]), which adds OS confinement around it; tests also call
//! [`run_guest`] directly.
//!
//! The guest's view of the world is deny-by-default (as `WasiCtxBuilder::new()` is)
//! and widened only to:
//! - argv from the request;
//! - a fixed environment ([`GUEST_ENV`]);
//! - `/in` (read-only) and `/out` (read-write), plus `/in` a second time under the
//!   name `.` so that relative paths resolve inside `/in` (see [`preopens`]);
//! - stdout and stderr captured in bounded in-memory pipes; stdin closed.

use super::{BackendError, GuestProgram, Limits, Outcome, OutcomeKind, SandboxSpec};
use crate::digest;
use nix::sys::resource::{UsageWho, getrusage};
use nix::sys::time::TimeValLike;
use sha2::{Digest, Sha256};
use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use wasmtime::{
    Config, Engine, Linker, Module, OptLevel, ResourceLimiter, Store, Strategy, Trap,
    UpdateDeadline,
};
use wasmtime_wasi::p1::{self, WasiP1Ctx};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, I32Exit, WasiCtxBuilder};

/// Environment the guest sees, and nothing else.
///
/// - `PYTHONHASHSEED=0`: `str`/`bytes` hashing, hence set and dict-of-set iteration
///   order, is the same on every run, so outputs are re-derivable.
/// - `PYTHONDONTWRITEBYTECODE=1`: no `__pycache__` litter in `/out` when a guest
///   imports a module it wrote there (`/in` is read-only anyway).
/// - `PYTHONUTF8=1`, `PYTHONIOENCODING=utf-8`: UTF-8 for files and stdio whatever
///   the (absent) locale says.
/// - `PYTHONUNBUFFERED=1`: stdout/stderr reach the capture pipes as written, so a
///   run stopped by a limit keeps the output it produced before the stop.
pub const GUEST_ENV: &[(&str, &str)] = &[
    ("PYTHONHASHSEED", "0"),
    ("PYTHONDONTWRITEBYTECODE", "1"),
    ("PYTHONUTF8", "1"),
    ("PYTHONIOENCODING", "utf-8"),
    ("PYTHONUNBUFFERED", "1"),
];

/// Virtual address space reserved for one 32-bit linear memory. With the guard below,
/// compiled code needs no bounds checks. It is address space, not memory: the
/// [`ResourceLimiter`] caps what the guest may actually use.
pub const MEMORY_RESERVATION: u64 = 4 << 30;
/// Guard region after (and, by wasmtime's default, before) a linear memory.
pub const MEMORY_GUARD: u64 = 32 << 20;

/// How often the epoch ticker advances the engine epoch. Every tick the running guest
/// yields to the executor and the wall-clock and CPU budgets are checked.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Longest trap message or detail kept in an outcome.
const MAX_DETAIL: usize = 2000;

/// Engine identity recorded in every outcome (`Outcome::engine`).
pub fn engine_name() -> String {
    format!("wasmtime {}", crate::WASMTIME_VERSION)
}

/// The one engine configuration. Everything that decides whether a precompiled module
/// can be reused is hashed into the cache key (see [`engine_fingerprint`]), so changing
/// a setting here simply recompiles once.
///
/// Measured choices (see the module tests):
/// - copy-on-write memory initialisation stays on: the guest's 26 MB of data segments
///   are mapped from the precompiled file instead of copied on each instantiation;
/// - the on-demand allocator, not the pooling one: a worker process instantiates the
///   guest exactly once, and a pool only pays off when slots are reused.
pub fn engine_config() -> Config {
    let mut config = Config::new();
    config
        .strategy(Strategy::Cranelift)
        .cranelift_opt_level(OptLevel::Speed)
        .parallel_compilation(true)
        .epoch_interruption(true)
        .memory_init_cow(true)
        .memory_reservation(MEMORY_RESERVATION)
        .memory_guard_size(MEMORY_GUARD)
        .guard_before_linear_memory(true);
    config
}

/// A new engine with [`engine_config`].
pub fn new_engine() -> Result<Engine, BackendError> {
    Engine::new(&engine_config()).map_err(|e| BackendError::Module(format!("engine: {e:#}")))
}

/// Address space a worker running one guest needs beyond the linear memory's
/// reservation: code, the host heap, thread stacks. Used for `RLIMIT_AS`.
pub const HOST_ADDRESS_SPACE: u64 = 3 << 30;

/// Total `RLIMIT_AS` for a worker running one guest instance.
pub fn worker_address_space_limit() -> u64 {
    MEMORY_RESERVATION + 2 * MEMORY_GUARD + HOST_ADDRESS_SPACE
}

// ---------------------------------------------------------------------------------
// Precompiled-module cache
// ---------------------------------------------------------------------------------

/// Default directory of the precompiled-module cache: `$RUNNER_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/runner`, else `~/.cache/runner`, else `<tmp>/runner-cache-<euid>`
/// (the ownership and mode checks make even the last one safe to use).
///
/// # Ambient Authority
///
/// Reads the process environment.
pub fn default_cache_dir() -> PathBuf {
    let non_empty = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = non_empty("RUNNER_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = non_empty("XDG_CACHE_HOME").map(PathBuf::from)
        && dir.is_absolute()
    {
        return dir.join("runner");
    }
    if let Some(home) = non_empty("HOME").map(PathBuf::from)
        && home.is_absolute()
    {
        return home.join(".cache").join("runner");
    }
    std::env::temp_dir().join(format!("runner-cache-{}", nix::unistd::geteuid()))
}

/// A short hex fingerprint of everything that decides whether a precompiled module
/// may be loaded by `engine`: the wasmtime version, the target and its CPU features,
/// the compiler flags, tunables and wasm features
/// (`Engine::precompile_compatibility_hash`).
pub fn engine_fingerprint(engine: &Engine) -> String {
    struct ShaHasher(Sha256);
    impl std::hash::Hasher for ShaHasher {
        fn write(&mut self, bytes: &[u8]) {
            self.0.update(bytes);
        }
        fn finish(&self) -> u64 {
            0
        }
    }
    let mut hasher = ShaHasher(Sha256::new());
    hasher.0.update(b"runner-precompiled-v1\0");
    hasher.0.update(crate::WASMTIME_VERSION.as_bytes());
    hasher.0.update(b"\0");
    std::hash::Hash::hash(&engine.precompile_compatibility_hash(), &mut hasher);
    let full = digest::sha256_hex(&hasher.0.finalize());
    full[..16].to_owned()
}

/// Where the precompiled form of the guest with `wasm_sha256` lives for `engine`.
pub fn precompiled_path(engine: &Engine, cache_dir: &Path, wasm_sha256: &str) -> PathBuf {
    cache_dir.join(format!(
        "{wasm_sha256}-wasmtime-{}-{}.cwasm",
        crate::WASMTIME_VERSION,
        engine_fingerprint(engine)
    ))
}

fn sidecar_path(cwasm: &Path) -> PathBuf {
    let mut name = cwasm.as_os_str().to_owned();
    name.push(".sha256");
    PathBuf::from(name)
}

/// Make sure a verified precompiled module for the guest exists in `cache_dir` and
/// return its path. A cache hit costs one hash of the precompiled file; a miss (or any
/// doubt: wrong owner, wrong mode, a symlink, a missing or different sidecar hash)
/// compiles the guest again, which takes seconds; `progress` hears about it first.
///
/// The guest bytes are checked against `wasm_sha256` before compiling.
///
/// # Ambient Authority
///
/// Creates `cache_dir` (mode 0700) and reads `wasm_path`.
pub fn ensure_compiled(
    engine: &Engine,
    wasm_path: &Path,
    wasm_sha256: &str,
    cache_dir: &Path,
    mut progress: impl FnMut(&str),
) -> Result<PathBuf, BackendError> {
    if !digest::is_sha256_hex(wasm_sha256) {
        return Err(BackendError::Module(format!(
            "guest sha256 {wasm_sha256:?} is not 64 lowercase hex digits"
        )));
    }
    prepare_cache_dir(cache_dir)?;
    let cwasm = precompiled_path(engine, cache_dir, wasm_sha256);
    match open_verified(&cwasm) {
        Ok(_) => return Ok(cwasm),
        Err(reason) if reason.kind() == io::ErrorKind::NotFound => {}
        Err(reason) => progress(&format!(
            "discarding cached module {}: {reason}",
            cwasm.display()
        )),
    }

    progress(&format!(
        "compiling guest {} for {} (one time, about 10 s)",
        wasm_path.display(),
        engine_name()
    ));
    let wasm = fs::read(wasm_path).map_err(|e| {
        BackendError::Module(format!("cannot read guest {}: {e}", wasm_path.display()))
    })?;
    let actual = digest::sha256_hex(&wasm);
    if actual != wasm_sha256 {
        return Err(BackendError::Module(format!(
            "guest {} has sha256 {actual}, expected {wasm_sha256}",
            wasm_path.display()
        )));
    }
    let started = Instant::now();
    let compiled = engine.precompile_module(&wasm).map_err(|e| {
        BackendError::Module(format!("cannot compile guest {}: {e:#}", wasm_path.display()))
    })?;
    progress(&format!(
        "compiled guest in {:.1} s ({} bytes)",
        started.elapsed().as_secs_f64(),
        compiled.len()
    ));
    let sum = digest::sha256_hex(&compiled);
    write_atomically(cache_dir, &sidecar_path(&cwasm), format!("{sum}\n").as_bytes())?;
    write_atomically(cache_dir, &cwasm, &compiled)?;
    Ok(cwasm)
}

/// Load a precompiled module written by [`ensure_compiled`]. The file is opened once
/// without following symlinks, its owner, mode and sidecar sha256 are checked on that
/// open descriptor, and the same descriptor is mapped; any failed check is an error
/// (the caller recompiles with [`ensure_compiled`]).
///
/// # Ambient Authority
///
/// Opens `cwasm_path`.
pub fn load_module(engine: &Engine, cwasm_path: &Path) -> Result<Module, BackendError> {
    let file = open_verified(cwasm_path).map_err(|e| {
        BackendError::Module(format!("precompiled module {}: {e}", cwasm_path.display()))
    })?;
    deserialize_verified(engine, file).map_err(|e| {
        BackendError::Module(format!(
            "cannot load precompiled module {}: {e:#}",
            cwasm_path.display()
        ))
    })
}

#[allow(unsafe_code)]
fn deserialize_verified(engine: &Engine, file: File) -> wasmtime::Result<Module> {
    // SAFETY: `Module::deserialize_open_file` trusts the bytes to be a module that
    // this wasmtime produced, and the file to stay unchanged while mapped. `file` was
    // opened with O_NOFOLLOW by `open_verified`, which checked on this very descriptor
    // that it is a regular file owned by our euid, not group/world writable, in a
    // directory with the same properties, and that its contents hash to the sidecar
    // written next to it when we compiled it. Only our own uid (or root) can change it.
    // wasmtime additionally checks the header (version, target, settings) and refuses
    // a module built by an incompatible engine.
    unsafe { Module::deserialize_open_file(engine, file) }
}

/// Create `dir` (0700) if missing and check it is a directory, not a symlink, owned by
/// our euid and not group/world writable.
fn prepare_cache_dir(dir: &Path) -> Result<(), BackendError> {
    let err = |what: String| BackendError::Module(format!("cache dir {}: {what}", dir.display()));
    match fs::symlink_metadata(dir) {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if let Some(parent) = dir.parent() {
                fs::create_dir_all(parent).map_err(|e| err(format!("cannot create parent: {e}")))?;
            }
            match fs::DirBuilder::new().mode(0o700).create(dir) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(err(format!("cannot create: {e}"))),
            }
        }
        Err(e) => return Err(err(e.to_string())),
    }
    let meta = fs::symlink_metadata(dir).map_err(|e| err(e.to_string()))?;
    check_private(&meta, true).map_err(err)
}

/// A file or directory we trust: the right type (symlinks never), owned by our euid,
/// not writable by group or others.
fn check_private(meta: &Metadata, want_dir: bool) -> Result<(), String> {
    let ft = meta.file_type();
    if ft.is_symlink() {
        return Err("is a symlink".into());
    }
    if want_dir && !ft.is_dir() {
        return Err("is not a directory".into());
    }
    if !want_dir && !ft.is_file() {
        return Err("is not a regular file".into());
    }
    let euid = nix::unistd::geteuid().as_raw();
    if meta.uid() != euid {
        return Err(format!("is owned by uid {}, not by us ({euid})", meta.uid()));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(format!("has mode {:o}: group or world writable", meta.mode() & 0o7777));
    }
    Ok(())
}

fn open_private(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(path)?;
    let meta = file.metadata()?;
    check_private(&meta, false).map_err(|reason| io::Error::other(reason))?;
    Ok(file)
}

/// Open the precompiled module and check it against its sidecar hash. The returned
/// descriptor is the one that was checked.
fn open_verified(cwasm: &Path) -> io::Result<File> {
    if let Some(dir) = cwasm.parent() {
        let meta = fs::symlink_metadata(dir)?;
        check_private(&meta, true).map_err(|r| io::Error::other(format!("its directory {r}")))?;
    }
    let mut file = open_private(cwasm)?;
    let mut sidecar = String::new();
    open_private(&sidecar_path(cwasm))
        .map_err(|e| io::Error::new(e.kind(), format!("sidecar hash: {e}")))?
        .take(200)
        .read_to_string(&mut sidecar)?;
    let expected = sidecar.trim();
    if !digest::is_sha256_hex(expected) {
        return Err(io::Error::other("sidecar hash is not a sha256"));
    }
    let actual = digest::sha256_reader(&mut file)?;
    if actual != expected {
        return Err(io::Error::other(format!(
            "sha256 {actual} differs from the sidecar's {expected}"
        )));
    }
    Ok(file)
}

/// Write `bytes` to `dest` (inside `dir`) through a private temporary file and a rename,
/// so readers see the old file or the complete new one, never a torn one.
fn write_atomically(dir: &Path, dest: &Path, bytes: &[u8]) -> Result<(), BackendError> {
    let err = |e: io::Error| BackendError::Module(format!("cannot write {}: {e}", dest.display()));
    let mut tmp = tempfile::Builder::new()
        .prefix(".tmp-")
        .permissions(fs::Permissions::from_mode(0o600))
        .tempfile_in(dir)
        .map_err(err)?;
    tmp.write_all(bytes).map_err(err)?;
    tmp.as_file().sync_all().map_err(err)?;
    tmp.persist(dest).map_err(|e| err(e.error))?;
    Ok(())
}

// ---------------------------------------------------------------------------------
// Execution
// ---------------------------------------------------------------------------------

/// Which CPU clock a [`CpuBudget`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuClock {
    /// The whole process (what `RLIMIT_CPU` counts): right in a worker that runs one guest.
    Process,
    /// The calling thread since the run started: right when several guests share a
    /// process (tests). The guest's code runs on the thread that calls [`run_guest`].
    Thread,
}

/// A CPU-time budget checked at every epoch tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuBudget {
    pub clock: CpuClock,
    pub limit: Duration,
}

/// Options of one in-process run beyond what the spec says.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Stop the guest (outcome `cpu_exhausted`) once this budget is spent. `None`
    /// leaves CPU to the worker's `RLIMIT_CPU`.
    pub cpu: Option<CpuBudget>,
}

/// Why the epoch callback stopped the guest.
#[derive(Debug, Clone, Copy, thiserror::Error)]
enum Stop {
    #[error("wall-clock limit of {0:?} reached")]
    Wall(Duration),
    #[error("cpu limit of {0:?} reached")]
    Cpu(Duration),
}

/// Caps linear memory and tables; remembers that it refused something.
struct GuestLimiter {
    memory_bytes: usize,
    table_elements: usize,
    memory_denied: Option<usize>,
    table_denied: bool,
}

impl ResourceLimiter for GuestLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes {
            self.memory_denied = Some(self.memory_denied.unwrap_or(0).max(desired));
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.table_elements {
            self.table_denied = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn instances(&self) -> usize {
        1
    }

    fn tables(&self) -> usize {
        4
    }

    fn memories(&self) -> usize {
        1
    }
}

/// Most table elements a guest may have (CPython's function table has a few thousand).
const MAX_TABLE_ELEMENTS: usize = 1 << 20;

/// Wall-clock and CPU budgets, checked at each epoch tick.
struct Watch {
    deadline: Instant,
    wall: Duration,
    cpu: Option<(CpuBudget, Duration)>,
}

impl Watch {
    fn check(&self) -> Option<Stop> {
        if Instant::now() >= self.deadline {
            return Some(Stop::Wall(self.wall));
        }
        if let Some((budget, baseline)) = self.cpu
            && let Some(now) = cpu_time(budget.clock)
            && now.saturating_sub(baseline) >= budget.limit
        {
            return Some(Stop::Cpu(budget.limit));
        }
        None
    }
}

/// CPU time (user + system) of the process or of the calling thread.
pub fn cpu_time(clock: CpuClock) -> Option<Duration> {
    let who = match clock {
        CpuClock::Process => UsageWho::RUSAGE_SELF,
        CpuClock::Thread => UsageWho::RUSAGE_THREAD,
    };
    let usage = getrusage(who).ok()?;
    let micros = usage.user_time().num_microseconds() + usage.system_time().num_microseconds();
    Some(Duration::from_micros(u64::try_from(micros).ok()?))
}

struct GuestState {
    wasi: WasiP1Ctx,
    limiter: GuestLimiter,
    watch: Watch,
}

/// Advances the engine epoch every [`EPOCH_TICK`] until dropped.
struct EpochTicker {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl EpochTicker {
    fn start(engine: &Engine) -> io::Result<Self> {
        let (stop, stopped) = mpsc::channel::<()>();
        let engine = engine.weak();
        let thread = std::thread::Builder::new()
            .name("runner-epoch".into())
            .spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(EPOCH_TICK) {
                    match engine.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => break,
                    }
                }
            })?;
        Ok(Self {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The guest's preopened directories: `/in` read-only, `/out` read-write, and `/in`
/// again as `.`.
///
/// WASI has no working directory. wasi-libc keeps a `cwd` of `/` (changed only by a
/// guest's own `chdir`), makes a relative path absolute against it (`data.csv` →
/// `/data.csv`) and then picks the preopen with the longest matching name, where a
/// preopen named `.` (or `/`) has the empty name and matches any path. Without it,
/// `open('data.csv')` fails with ENOENT; with it, relative paths (and absolute paths
/// outside `/in` and `/out`) resolve inside the staged inputs, read-only, while
/// `/in/...` and `/out/...` still pick their own preopens. `os.getcwd()` stays `/`.
pub fn preopens(spec: &SandboxSpec) -> [(PathBuf, &'static str, FsPerms); 3] {
    [
        (spec.in_dir.clone(), "/in", FsPerms::ReadOnly),
        (spec.out_dir.clone(), "/out", FsPerms::ReadWrite),
        (spec.in_dir.clone(), ".", FsPerms::ReadOnly),
    ]
}

fn build_wasi(
    guest: &GuestProgram,
    spec: &SandboxSpec,
    stdout: &MemoryOutputPipe,
    stderr: &MemoryOutputPipe,
) -> Result<WasiP1Ctx, BackendError> {
    let mut builder = WasiCtxBuilder::new();
    builder
        .args(&guest.argv)
        .envs(GUEST_ENV)
        .stdout(stdout.clone())
        .stderr(stderr.clone())
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
    for (host, name, perms) in preopens(spec) {
        builder.preopened_dir(&host, name, perms).map_err(|e| {
            BackendError::Worker(format!("cannot open {} as {name}: {e:#}", host.display()))
        })?;
    }
    Ok(builder.build_p1())
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// Run `guest` (its module already loaded) to completion or until a limit stops it, on
/// the calling thread, and describe how it ended. An `Err` means the run could not be
/// set up (a preopen could not be opened, no runtime); everything the guest does is an
/// [`Outcome`].
///
/// # Ambient Authority
///
/// Opens `spec.in_dir` and `spec.out_dir` and hands them to the guest.
pub fn run_guest(
    engine: &Engine,
    module: &Module,
    guest: &GuestProgram,
    spec: &SandboxSpec,
    options: &RunOptions,
) -> Result<Outcome, BackendError> {
    let limits = &spec.limits;
    let stdout = MemoryOutputPipe::new(to_usize(limits.stdout_bytes));
    let stderr = MemoryOutputPipe::new(to_usize(limits.stderr_bytes));
    let wasi = build_wasi(guest, spec, &stdout, &stderr)?;

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(4)
        .thread_name("runner-wasi")
        .build()
        .map_err(|e| BackendError::Worker(format!("cannot start async runtime: {e}")))?;

    let mut linker: Linker<GuestState> = Linker::new(engine);
    p1::add_to_linker_async(&mut linker, |state| &mut state.wasi)
        .map_err(|e| BackendError::Worker(format!("cannot link WASI: {e:#}")))?;

    let started = Instant::now();
    let cpu = options
        .cpu
        .map(|budget| (budget, baseline_cpu(budget.clock)));
    let state = GuestState {
        wasi,
        limiter: GuestLimiter {
            memory_bytes: to_usize(limits.memory_bytes),
            table_elements: MAX_TABLE_ELEMENTS,
            memory_denied: None,
            table_denied: false,
        },
        watch: Watch {
            deadline: started + limits.wall,
            wall: limits.wall,
            cpu,
        },
    };
    let mut store = Store::new(engine, state);
    store.limiter(|state| &mut state.limiter);
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|ctx| match ctx.data().watch.check() {
        Some(stop) => Err(wasmtime::Error::new(stop)),
        None => Ok(UpdateDeadline::Yield(1)),
    });

    let ticker = EpochTicker::start(engine)
        .map_err(|e| BackendError::Worker(format!("cannot start epoch ticker: {e}")))?;
    // The epoch callback stops a guest that computes; this timeout also stops one
    // that waits in a host call (`time.sleep`), by dropping the call's future.
    let result = runtime.block_on(async {
        let call = async {
            let instance = linker.instantiate_async(&mut store, module).await?;
            let start = instance.get_typed_func::<(), ()>(&mut store, "_start")?;
            start.call_async(&mut store, ()).await
        };
        tokio::time::timeout(limits.wall, call).await
    });
    let runtime_sec = started.elapsed().as_secs_f64();
    drop(ticker);

    let (kind, exit_code, mut details) = classify(result, limits);
    let data = store.data();
    let memory_denied = data.limiter.memory_denied;
    let table_denied = data.limiter.table_denied;
    drop(store);
    drop(runtime);

    let stdout = stdout.contents().to_vec();
    let stderr = stderr.contents().to_vec();
    let stdout_capped = limits.stdout_bytes > 0 && stdout.len() as u64 >= limits.stdout_bytes;
    let stderr_capped = limits.stderr_bytes > 0 && stderr.len() as u64 >= limits.stderr_bytes;

    let mut outcome_kind = kind;
    let mut exit = exit_code;
    let overridable = matches!(kind, OutcomeKind::Completed | OutcomeKind::Trapped);
    if let Some(desired) = memory_denied {
        details.push(format!(
            "memory growth to {desired} bytes denied (limit {} bytes)",
            limits.memory_bytes
        ));
        if overridable {
            outcome_kind = OutcomeKind::MemoryExceeded;
        }
    }
    if table_denied {
        details.push(format!("table growth beyond {MAX_TABLE_ELEMENTS} elements denied"));
    }
    if stdout_capped || stderr_capped {
        let which = match (stdout_capped, stderr_capped) {
            (true, true) => "stdout and stderr",
            (true, false) => "stdout",
            _ => "stderr",
        };
        details.push(format!("{which} reached its cap"));
        if overridable && outcome_kind != OutcomeKind::MemoryExceeded {
            outcome_kind = OutcomeKind::OutputLimit;
        }
    }
    if outcome_kind != kind {
        if let Some(code) = outcome_kind.conventional_exit_code() {
            details.push(format!("guest's own exit code was {exit}"));
            exit = code;
        }
    }
    Ok(Outcome {
        kind: outcome_kind,
        exit_code: exit,
        runtime_sec,
        stdout,
        stderr,
        stdout_capped,
        stderr_capped,
        detail: join_details(details),
        engine: engine_name(),
        confinement: Vec::new(),
    })
}

fn baseline_cpu(clock: CpuClock) -> Duration {
    match clock {
        // RLIMIT_CPU counts from exec, so does a process budget.
        CpuClock::Process => Duration::ZERO,
        CpuClock::Thread => cpu_time(clock).unwrap_or_default(),
    }
}

type CallResult = Result<wasmtime::Result<()>, tokio::time::error::Elapsed>;

/// The outcome kind, exit code and details of a finished call, before the limiter
/// and the capture pipes are consulted.
fn classify(result: CallResult, limits: &Limits) -> (OutcomeKind, i32, Vec<String>) {
    let conventional = |kind: OutcomeKind| kind.conventional_exit_code().unwrap_or(1);
    match result {
        Err(_elapsed) => (
            OutcomeKind::TimedOut,
            conventional(OutcomeKind::TimedOut),
            vec![format!("wall-clock limit of {:?} reached", limits.wall)],
        ),
        Ok(Ok(())) => (OutcomeKind::Completed, 0, Vec::new()),
        Ok(Err(error)) => {
            if let Some(exit) = error.downcast_ref::<I32Exit>() {
                return (OutcomeKind::Completed, exit.0, Vec::new());
            }
            if let Some(stop) = error.downcast_ref::<Stop>() {
                let kind = match stop {
                    Stop::Wall(_) => OutcomeKind::TimedOut,
                    Stop::Cpu(_) => OutcomeKind::CpuExhausted,
                };
                return (kind, conventional(kind), vec![stop.to_string()]);
            }
            let message = match error.downcast_ref::<Trap>() {
                Some(trap) => format!("wasm trap: {trap}"),
                None => format!("{error:#}"),
            };
            (
                OutcomeKind::Trapped,
                conventional(OutcomeKind::Trapped),
                vec![truncate(&message, MAX_DETAIL)],
            )
        }
    }
}

fn join_details(details: Vec<String>) -> Option<String> {
    if details.is_empty() {
        None
    } else {
        Some(truncate(&details.join("; "), MAX_DETAIL))
    }
}

/// At most `max` bytes of `s`, cut at a character boundary.
pub(crate) fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}
