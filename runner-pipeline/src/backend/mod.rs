//! Backends: the engines that run an approved request. Each backend takes a
//! [`SandboxSpec`] of its own program type ([`Backend::Program`]: what to run, where the staged `/in` and empty `/out` are, which
//! limits apply) and returns an [`Outcome`]. A guest that fails, times out or runs out
//! of memory is an `Outcome`, not an `Err`; `Err` means the runner itself could not
//! do its job (guest module unavailable, worker could not start).
//!
//! The validator, staging, result writer and hashing know nothing of which backend ran.

pub mod monty;

use runner_sandbox::confine;
use runner_sandbox::{Backend, BackendError, MontyProgram, Outcome, SandboxSpec};

/// `runner __confinement-probe [POLICY.toml]`: loads the policy (the built-in one when
/// none is named) and runs [`confine::probe_main`] against its `[confinement]` table.
///
/// # Ambient authority
/// Reads the policy file named on the command line.
pub fn probe_main() -> i32 {
    let policy = match std::env::args_os().nth(2) {
        None => runner_core::policy::Policy::builtin(),
        Some(path) => match crate::policy::load(std::path::Path::new(&path)) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("runner __confinement-probe: {e}");
                return 2;
            }
        },
    };
    confine::probe_main(&policy.confinement)
}
