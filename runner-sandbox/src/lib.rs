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
pub mod durable;
pub mod env;
pub mod host;
pub mod monty;
pub mod phases;
pub mod pip;
pub mod read;
pub mod runtime;
pub mod store_root;
pub mod worker;

/// The capability types the sandbox hands out ([`host`], [`cache`]), for the crates that
/// hold them.
pub use cap_std;
use runner_contract::outcome::OutcomeKind;
/// A run's limits, how it ended and what it used are `runner-core`'s (no I/O): the lock
/// and the result document record them.
use runner_core::run::{Limits, Usage};
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
    /// argv as the guest sees it (`argv[0]` is the program word of the command, unless
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

impl GuestProgram {
    /// Host directories the guest reads besides `/in` (its asset and environment mounts).
    pub fn host_reads(&self) -> impl Iterator<Item = &std::path::Path> {
        self.runtime.mounts.iter().map(|m| m.host.as_path())
    }
}

/// Everything a backend needs for one run of a program `P` (the backend's own program
/// type, [`Backend::Program`]: a [`GuestProgram`] for wasmtime, a [`MontyProgram`] for
/// Monty). Host paths appear here and only here: the backend turns them into
/// capabilities (`/in` read-only, `/out` read-write) and never widens them.
///
/// On the wire (the worker's stdin) `program` is the program's own JSON object: the
/// type says which engine it is for, so no tag names it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SandboxSpec<P> {
    pub program: P,
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
    pub confinement: runner_core::policy::confinement::ConfinementPolicy,
    /// The guest's clocks and entropy (the policy's `[determinism]`, or a lock's record
    /// in a replay); absent in the JSON: the host's own.
    #[serde(default)]
    pub determinism: runner_core::determinism::Determinism,
}

impl<P> SandboxSpec<P> {
    /// The same sandbox (directories, limits, confinement, determinism) running
    /// `program`: how a caller that chose its engine at run time (the pipeline, from a
    /// spec with no program yet, `SandboxSpec<()>`) hands each backend its own type.
    pub fn with_program<Q>(&self, program: Q) -> SandboxSpec<Q> {
        SandboxSpec {
            program,
            in_dir: self.in_dir.clone(),
            out_dir: self.out_dir.clone(),
            capture_dir: self.capture_dir.clone(),
            limits: self.limits.clone(),
            confinement: self.confinement.clone(),
            determinism: self.determinism.clone(),
        }
    }
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
    /// What the run used, filled in by the runner after the worker
    /// ended; `None` in the worker's own reply except for its peak memory.
    /// Boxed: the figures would otherwise make every `Outcome` twice its size.
    #[serde(default)]
    pub usage: Option<Box<Usage>>,
}

/// The runner could not do its job (as opposed to the guest failing).
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The engine could not make the guest's module ready; the backend's own error type
    /// (for the ERA backend, `runner_wasmtime::error::ModuleError`) is kept as the source.
    #[error("guest module: {0}")]
    Module(Box<dyn std::error::Error + Send + Sync>),
    #[error("worker: {0}")]
    Worker(#[from] worker::WorkerError),
    /// The runner's private mount namespace or a run's `/out` tmpfs
    /// ([`confine::mount_out_tmpfs`]).
    #[error("worker: {0}")]
    Mount(#[from] confine::MountError),
    /// A confinement layer the policy requires did not apply in the worker.
    #[error("worker: {0}")]
    Confinement(#[from] confine::RequiredLayerFailed),
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

/// One engine: runs a [`SandboxSpec`] of its own program type in a confined worker
/// process and says how it ended. Implemented by `runner_wasmtime::WasmtimeBackend`
/// (`Program = GuestProgram`) and the runner's `MontyBackend` (`Program =
/// MontyProgram`): handing a backend the other's program does not compile.
pub trait Backend {
    /// What this engine runs.
    type Program;
    fn run(&self, spec: &SandboxSpec<Self::Program>) -> Result<Outcome, BackendError>;
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;
    use std::time::Duration;

    fn sandbox() -> SandboxSpec<()> {
        SandboxSpec {
            program: (),
            in_dir: "/run/r/in".into(),
            out_dir: "/run/r/out".into(),
            capture_dir: "/run/r/capture".into(),
            limits: Limits {
                memory_bytes: 64 << 20,
                wall: Duration::from_secs(2),
                cpu: Duration::from_secs(3),
                stdout_bytes: 10,
                stderr_bytes: 20,
                out_bytes: 30,
                out_files: 4,
            },
            confinement: Default::default(),
            determinism: Default::default(),
        }
    }

    /// What the worker reads on stdin: `program` is the program's own object (no
    /// engine tag), and the rest of the sandbox is carried over unchanged.
    #[test]
    fn with_program_keeps_the_sandbox_and_the_program_is_untagged() {
        let monty = MontyProgram {
            code: "print(1)".into(),
            inputs_json: None,
            network: true,
        };
        let spec = sandbox().with_program(monty);
        let json = serde_json::to_value(&spec).unwrap();
        assert_eq!(json["program"]["code"], "print(1)");
        assert_eq!(json["program"]["network"], true);
        let mut plain = serde_json::to_value(sandbox()).unwrap();
        plain["program"] = json["program"].clone();
        assert_eq!(plain, json);
        let back: SandboxSpec<MontyProgram> = serde_json::from_value(json).unwrap();
        assert_eq!(back.limits.out_files, 4);
        assert!(back.program.network);
        // A guest program is not a Monty program: the wire refuses it too.
        let guest = sandbox().with_program(GuestProgram {
            guest: "cpython-3.12".into(),
            wasm_path: "/g.wasm".into(),
            wasm_sha256: "00".into(),
            argv: vec!["python".into()],
            runtime: Default::default(),
        });
        let wrong = serde_json::to_value(&guest).unwrap();
        assert!(serde_json::from_value::<SandboxSpec<MontyProgram>>(wrong).is_err());
    }
}
