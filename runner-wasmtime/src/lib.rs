//! The ERA backend of `runner`: wasmtime with a CPython-for-WASI guest.
//!
//! - [`engine`]: the one engine configuration, the precompiled-module cache (keyed by
//!   guest sha256 and the engine settings, verified before it is mapped), and the
//!   in-process run of a WASI guest under a run's limits;
//! - [`error`]: why a guest module could not be made ready;
//! - `stack`: the guest's stack sizes, and a trap told "stack exhausted" when a stack
//!   overflowed;
//! - `wasi_fds`: `EMFILE` for a guest that opened as many files as the worker may;
//! - [`wasi_determinism`]: the run's virtual clocks and seeded entropy, handed to WASI;
//! - [`worker`]: the worker process (`runner-era-worker`, this crate's binary) and the
//!   runner side that compiles guests and supervises the worker ([`WasmtimeBackend`]).
//!
//! The run's data model, the confinement and the worker protocol are `runner_sandbox`'s;
//! this crate adds only what needs wasmtime, so the worker binary links nothing else of
//! the runner.

pub mod engine;
pub mod error;
pub mod preinit;
mod stack;
pub mod wasi_determinism;
mod wasi_fds;
pub mod worker;

pub use worker::WasmtimeBackend;

/// The wasmtime version this crate embeds (kept equal to the pin in Cargo.toml;
/// `runner version` and every ERA result's Provenance name it).
pub const WASMTIME_VERSION: &str = "48.0.8";
