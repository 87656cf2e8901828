//! `runner`: the TOOL-EXEC gate's command line. It judges approved Tool Execution
//! Requests, runs them in a sandbox (wasmtime with a CPython-for-WASI guest, or Monty)
//! and writes Tool Execution Results whose every hash is re-derivable.
//!
//! The run itself is the library `runner-pipeline` (judge → stage → run → publish, and
//! replay); `runner serve`'s host is `runner-serve`. This crate is the CLI on them
//! (`cli`: argument parsing, output, exit codes). Everything else is named by the crate
//! that defines it (`runner_core::policy`, `runner_pipeline::pipeline`, ...).

pub mod cli;
