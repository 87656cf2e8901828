//! What a run is given and what it used, as data: its [`Limits`] and its [`Usage`]
//! (how it ended is `runner_contract::outcome::OutcomeKind`). `runner_sandbox` runs with
//! them; the lock and the result document record them.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Limits applied to one run, already checked against the policy maxima.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Maximum linear memory of the guest, in bytes (`memory_limit_mb` × 2^20).
    pub memory_bytes: u64,
    /// Wall-clock deadline (`time_limit_sec`).
    pub wall: Duration,
    /// CPU-time budget of the worker process (`cpu_limit`, in seconds).
    pub cpu: Duration,
    /// Bytes of stdout kept; the guest sees an I/O error past it.
    pub stdout_bytes: u64,
    /// Bytes of stderr kept.
    pub stderr_bytes: u64,
    /// Total bytes the guest may write under `/out`.
    pub out_bytes: u64,
    /// Number of files (and directories) the guest may create under `/out`.
    pub out_files: u64,
}

/// What one run used: recorded in the lock and the in-toto predicate, never compared
/// by replay (it varies run to run, like `created_utc`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    /// User + system CPU time of the worker process since its request arrived, in
    /// milliseconds (the kernel's clock ticks, 10 ms granular; what the worker used
    /// before, starting and, when warm, preloading, is left out as the worker reports
    /// it); `None` when it could not be read.
    pub cpu_ms: Option<u64>,
    /// Wall-clock milliseconds from the worker's start to its end.
    pub wall_ms: u64,
    /// The worker process's peak resident set (`getrusage` `ru_maxrss`), in bytes: for
    /// monty the interpreter's; for wasmtime it includes the engine and the mapped
    /// module beside the guest's linear memory. `None` when the worker was killed
    /// before it could report.
    pub peak_rss_bytes: Option<u64>,
    /// wasmtime only: the largest linear memory the store's limiter granted the guest,
    /// in bytes; `None` for monty, or when the worker was killed before it could report.
    pub peak_linear_memory_bytes: Option<u64>,
    /// Bytes under `/out` when the run ended (before collection); `None` when it could
    /// not be walked.
    pub out_bytes: Option<u64>,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    /// The limit that ended the run (`timed_out`, `memory_exceeded`, `cpu_exhausted`,
    /// `output_limit`), or `None`.
    pub limit_fired: Option<String>,
}
