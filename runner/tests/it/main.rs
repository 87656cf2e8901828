//! The integration tests of `runner`, one test binary: each module drives the built
//! binaries (`target/release/runner` and its workers) or the library the way a user,
//! a host or CI does. One binary links wasmtime, the NATS client and rustls once, and
//! compiles the shared support modules once. Run one module with a filter, for example
//! `cargo test --release --test it -- nats::`.

// The tests build fixtures and run the built binaries on the host.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

mod corpus;
mod gate_support;
mod support;

mod approval;
mod batch_exec;
mod cli_docs;
mod cli_schemas;
mod confinement;
mod content_rules;
mod crash_safety;
mod deterministic_replay;
mod era_fixtures;
mod examples;
mod exec_reuse;
mod fuzz_regressions;
mod gate_governed;
mod gate_inbox;
mod gate_packets;
mod gate_results;
mod hostile_paths;
mod lock_verify_replay;
mod mcp;
mod mcp_http;
mod monty_diff;
mod monty_exec;
mod nats;
mod network;
mod package_env;
mod preinit_diff;
mod pyperformance;
mod readme;
mod request_fixtures;
mod scale_examples;
mod sci_guest;
mod serve;
mod shard;
mod usage;
