//! `runner`: the TOOL-EXEC gate's command line. It judges approved Tool Execution
//! Requests, runs them in a sandbox (wasmtime with a CPython-for-WASI guest, or Monty)
//! and writes Tool Execution Results whose every hash is re-derivable.
//!
//! The run itself is the library `runner-pipeline` (judge → stage → run → publish, and
//! replay); `runner serve`'s host is `runner-serve`. This crate is the CLI on them
//! (`cli`: argument parsing, output, exit codes) and re-exports their modules under the
//! paths the tests, examples and the CLI name them by (`runner::policy`, ...).

pub mod cli;

pub use runner_pipeline::{
    MONTY_VERSION, RUNNER_VERSION, WASMTIME_VERSION, approval, backend, beside, determinism,
    digest, environment, gate, guest, lock, net, normalize, pipeline, policy, read,
    report, request, result, reuse, rule_pattern, sign, stage,
};
/// `runner serve`: the inbox and NATS host (the crate `runner-serve`).
pub use runner_serve as serve;
