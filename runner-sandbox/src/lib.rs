//! The sandbox of `runner`: what a run is (the [`SandboxSpec`]: the program, the staged
//! `/in`, the empty `/out`, the limits and the confinement asked for), how it ended
//! ([`Outcome`]), the operating-system confinement of a worker process ([`confine`]),
//! and the worker protocol and supervision ([`worker`]).
//!
//! No engine lives here: the wasmtime worker (`runner-era-worker`, the `runner-wasmtime`
//! crate) and the Monty worker (`runner-monty-worker`) both link this crate, and the
//! Monty worker links nothing of wasmtime. A guest that fails, times out or runs out of memory is an [`Outcome`], not
//! an `Err`; `Err` ([`BackendError`]) means the runner itself could not do its job.

// reason: this crate is where ambient authority lives (the authority line, clippy.toml).
#![allow(clippy::disallowed_methods)]

pub mod cache;
pub mod confine;
pub mod cpu;
pub mod determinism;
pub mod digest;
pub mod env;
pub mod monty;
pub mod read;
pub mod runtime;
pub mod worker;

/// A run's limits, how it ended and what it used are `runner-core`'s (no I/O): the lock
/// and the result document record them.
pub use runner_core::run::{Limits, OutcomeKind, Usage};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// What to run for an ERA request.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GuestProgram {
    /// Guest name from the registry (for example `cpython-3.12`).
    pub guest: String,
    /// Path of the verified guest `.wasm` on the host.
    pub wasm_path: PathBuf,
    /// sha256 of that file, as pinned in the manifest.
    pub wasm_sha256: String,
    /// argv as the guest sees it (argv[0] is the program word of the command, unless
    /// `runtime.argv0` replaces it).
    pub argv: Vec<String>,
    /// How this guest is entered and what else it sees (its manifest entry's settings,
    /// with its asset directories located); the default is a plain WASI command.
    #[serde(default)]
    pub runtime: runtime::GuestRuntime,
}

/// What to run for a monty request.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MontyProgram {
    /// The `## Code` section.
    pub code: String,
    /// The `## Inputs (JSON)` object, when present.
    pub inputs_json: Option<String>,
    /// The run was granted `network: allowlist`: the runner's broker serves the
    /// exchange directory [`runtime::NET_IN_OUT`] inside `/out`, and the code's
    /// `fetch(...)` speaks to it (absent in the JSON: no network).
    #[serde(default)]
    pub network: bool,
}

/// The program a backend runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Program {
    Guest(GuestProgram),
    Monty(MontyProgram),
}

/// Everything a backend needs for one run. Host paths appear here and only here: the
/// backend turns them into capabilities (`/in` read-only, `/out` read-write) and never
/// widens them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SandboxSpec {
    pub program: Program,
    /// Host directory holding the staged, hash-checked inputs; the guest sees it as `/in`.
    pub in_dir: PathBuf,
    /// Host directory, empty at start; the guest sees it as `/out`.
    pub out_dir: PathBuf,
    /// Directory where the worker writes captured stdout/stderr (`stdout`, `stderr` files).
    pub capture_dir: PathBuf,
    pub limits: Limits,
    /// Which confinement layers the worker must apply before the guest runs (the
    /// policy's `[confinement]`); absent in the JSON: the built-in policy's table.
    #[serde(default)]
    pub confinement: confine::ConfinementPolicy,
    /// The guest's clocks and entropy (the policy's `[determinism]`, or a lock's record
    /// in a replay); absent in the JSON: the host's own.
    #[serde(default)]
    pub determinism: determinism::Determinism,
}

/// The outcome of one run, as data.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Outcome {
    pub kind: OutcomeKind,
    /// The guest's exit code; for runs stopped by a limit, the conventional code
    /// recorded for that limit (see README "Limits").
    pub exit_code: i32,
    /// Wall-clock seconds from guest start to end.
    pub runtime_sec: f64,
    /// Captured stdout bytes (at most `limits.stdout_bytes`).
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// True when stdout hit its cap (bytes were dropped).
    pub stdout_capped: bool,
    pub stderr_capped: bool,
    /// Human-readable details of what fired (trap message, limit name), for Safety Notes.
    pub detail: Option<String>,
    /// Identity of the engine that ran, for Provenance (for example
    /// `wasmtime 48.0.8`, `monty 1.4.0`).
    pub engine: String,
    /// Confinement layers that applied to the worker (rlimits, namespaces, …).
    pub confinement: Vec<String>,
    /// What the run used (issue 18 item 5), filled in by the runner after the worker
    /// ended; `None` in the worker's own reply except for its peak memory.
    /// Boxed: the figures would otherwise make every `Outcome` twice its size.
    #[serde(default)]
    pub usage: Option<Box<Usage>>,
}

/// The runner could not do its job (as opposed to the guest failing).
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("guest module: {0}")]
    Module(String),
    #[error("worker: {0}")]
    Worker(String),
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

/// One engine: runs a [`SandboxSpec`] in a confined worker process and says how it ended.
/// Implemented by `runner_wasmtime::WasmtimeBackend` and the runner's `MontyBackend`.
pub trait Backend {
    fn run(&self, spec: &SandboxSpec) -> Result<Outcome, BackendError>;
}
