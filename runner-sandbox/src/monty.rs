//! The wire contract between the runner and the Monty worker (`runner-monty-worker`):
//! its request, the exit status of its allocator cap, and the engine it records.

use crate::{MontyProgram, SandboxSpec};
use serde::{Deserialize, Serialize};

/// The Monty version the monty worker embeds, recorded as the engine of monty results
/// (kept equal to the pin in Cargo.toml; a `runner-monty` test checks it against
/// Cargo.lock).
pub const MONTY_VERSION: &str = "1.4.0";

/// Exit status of a worker whose allocator cap fired (`monty_types::OOM_EXIT_CODE`;
/// the worker crate checks the two agree).
pub const MONTY_OOM_EXIT_CODE: i32 = 65;
/// What the runner sends the Monty worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MontyWorkerRequest {
    pub spec: SandboxSpec<MontyProgram>,
}

/// The engine recorded in Provenance.
pub fn engine_name() -> String {
    format!("monty {}", MONTY_VERSION)
}
