//! The contract between `runner` and the hosts that drive it: the exit codes, and the
//! values of the `--json` fields a host branches on (`verdict`, `outcome`). A host that
//! only reads `runner`'s output links this crate and serde, nothing else of the runner.
//!
//! Everything here is stable: a value may be added, never renamed or given another
//! meaning.

pub mod exit_codes;
pub mod outcome;
pub mod reason;
pub mod verdict;
