//! `runner-pipeline`: the run as a library. It judges approved Tool Execution Requests,
//! runs them in a sandbox (wasmtime with a CPython-for-WASI guest, or Monty) and writes
//! Tool Execution Results whose every hash is re-derivable; `runner exec`, `runner
//! replay` and the inbox host (`runner-serve`) all call it.
//!
//! The pipeline is a chain of types: raw request text → `request::ToolRequest` →
//! [`ApprovedRequest`](runner_core::request::ApprovedRequest) (only the validator builds one) → [`SandboxSpec`](runner_sandbox::SandboxSpec)
//! → [`Outcome`](runner_sandbox::Outcome) → result document.

pub mod approval;
pub mod backend;
pub mod beside;
pub mod determinism;
pub mod environment;
pub mod gate;
pub mod guest;
pub mod lock;
pub mod net;
pub mod pipeline;
pub mod policy;
pub mod report;
pub mod result;
pub mod reuse;
pub mod sign;
pub mod stage;
/// What the guest and environment stores share (a `Dir`, staging, publishing).
pub(crate) mod store;

/// The runner's own version, recorded in every result's Provenance.
pub const RUNNER_VERSION: &str = env!("CARGO_PKG_VERSION");
/// The Monty version the monty worker (`runner-monty`) embeds, recorded as the engine of
/// monty results (see `runner_sandbox::monty::MONTY_VERSION`).
pub const MONTY_VERSION: &str = runner_sandbox::monty::MONTY_VERSION;
