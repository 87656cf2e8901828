//! Backends: the engines that run an approved request. Each backend takes a
//! [`SandboxSpec`] of its own program type ([`Backend::Program`]: what to run, where the staged `/in` and empty `/out` are, which
//! limits apply) and returns an [`Outcome`]. A guest that fails, times out or runs out
//! of memory is an `Outcome`, not an `Err`; `Err` means the runner itself could not
//! do its job (guest module unavailable, worker could not start).
//!
//! The validator, staging, result writer and hashing know nothing of which backend ran.

pub mod monty;

use runner_sandbox::{Backend, BackendError, MontyProgram, Outcome, SandboxSpec};
