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
//! - and, for a guest whose manifest entry asks for it ([`GuestRuntime`](runner_sandbox::runtime::GuestRuntime)): a fixed
//!   `argv[0]`, a few more environment variables, read-only asset directories (the
//!   scientific guest's stdlib zip at `/usr/local/lib`), a scratch directory under
//!   `/out`'s caps, and a stub answering "no host" for its `host` imports.

use crate::error::ModuleError;
use cap_std::fs::{Dir, DirBuilderExt, OpenOptionsExt};
use runner_contract::outcome::OutcomeKind;
use runner_core::run::Limits;
use runner_sandbox::cache::{PrivateDirError, check_private};
use runner_sandbox::cap_std;
use runner_sandbox::cpu::{CpuClock, cpu_time};
use runner_sandbox::determinism::VirtualTime;
use runner_sandbox::digest;
use runner_sandbox::runtime::{EntryPoint, HostImports, NO_HOST, SCRATCH_IN_OUT};
use runner_sandbox::worker::{WorkerError, truncate};
use runner_sandbox::{BackendError, GuestProgram, Outcome, SandboxSpec};
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
    crate::stack::configure(&mut config);
    config
}

/// Address space reserved for a store's GC heap at first, and again for its growth.
pub const GC_HEAP_RESERVATION: u64 = 64 << 20;

/// A new engine with [`engine_config`].
pub fn new_engine() -> Result<Engine, BackendError> {
    Engine::new(&engine_config()).map_err(|e| ModuleError::Engine(e).into())
}

/// Address space a worker running one guest needs beyond the linear memory's
/// reservation: code, the host heap, thread stacks. Used for `RLIMIT_AS`.
pub const HOST_ADDRESS_SPACE: u64 = 3 << 30;

/// Total `RLIMIT_AS` for a worker running one guest instance.
pub fn worker_address_space_limit() -> u64 {
    MEMORY_RESERVATION + 2 * MEMORY_GUARD + 2 * GC_HEAP_RESERVATION + HOST_ADDRESS_SPACE
}

mod cache;
mod limits;
mod run;
mod wasi;

pub use cache::{
    ModuleCache, default_cache_dir, engine_fingerprint, ensure_compiled, load_module,
    precompiled_path,
};
pub use limits::{CpuBudget, RunOptions};
pub use run::{GuestSetup, run_guest, run_set_up_guest};
pub use wasi::{Scratch, preopens};

#[cfg(test)]
use cache::{SIDECAR, VERIFIED, precompiled_name, suffixed};
pub(crate) use limits::{EpochTicker, GuestState};
use limits::{MAX_TABLE_ELEMENTS, Stop};
use wasi::{build_wasi, call_entry, link_no_host, to_usize};

/// Test fixtures shared by the backend's tests: the real guest, compiled once into a
/// cache under `target/`, and throwaway sandboxes.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
// reason: tests build fixtures on the host filesystem.
#[allow(clippy::disallowed_methods)]
pub(crate) mod testkit;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
// reason: tests build fixtures on the host filesystem.
#[allow(clippy::disallowed_methods)]
mod tests;
