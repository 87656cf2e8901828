//! The Monty backend: a monty request's `## Code` runs in Monty, pydantic's sandboxed
//! Python interpreter, inside a worker process of its own (`runner-monty-worker`, the
//! `runner-monty` crate), never in the runner's process.
//!
//! Why a process: Monty's memory limit works through a process-wide allocator cap
//! that ends the whole process when it fires, several allocation patterns abort it
//! outright, and its time limit is checked between interpreter steps, so one long
//! native operation (a huge big-integer multiply) runs on past it. The worker is
//! therefore confined like the wasmtime worker ([`runner_sandbox::confine::confine_worker`]) and
//! supervised by the same code (`runner_sandbox::worker::supervise_worker`): the runner kills
//! it at the wall-clock deadline plus a short grace, reads its exit (the allocator's
//! exit status [`MONTY_OOM_EXIT_CODE`] is `memory_exceeded`, SIGXCPU is
//! `cpu_exhausted`, any other death is `trapped`) and always returns a complete
//! [`Outcome`].
//!
//! Protocol: stdin carries one [`MontyWorkerRequest`] as JSON; stdout carries one
//! [`runner_sandbox::worker::WorkerReply`] line; captured stdout/stderr go to
//! `capture_dir/stdout` and `capture_dir/stderr`, exactly as with the wasmtime worker.
//! This crate does not depend on `monty`: the worker binary does.

use runner_sandbox::worker::{Supervised, WorkerBackend, WorkerBinary, WorkerError, Workers};
// The wire contract with `runner-monty-worker` is the sandbox's: the worker links it,
// not this crate.
use super::{Backend, BackendError, MontyProgram, Outcome, SandboxSpec};
use runner_sandbox::monty::{MONTY_OOM_EXIT_CODE, MontyWorkerRequest, engine_name};
use std::time::Duration;

/// Environment variable naming the Monty worker binary.
pub const MONTY_WORKER_ENV: &str = "RUNNER_MONTY_WORKER";
/// File name of the Monty worker binary, looked for next to the runner's own.
pub const MONTY_WORKER_BIN: &str = "runner-monty-worker";
/// Time for the worker to start (no module to load: Monty starts in microseconds).
pub const STARTUP_ALLOWANCE: Duration = Duration::from_millis(250);
/// Time past the wall-clock limit before the runner SIGKILLs the worker. The worker's
/// own time limit (Monty's) normally ends the run first, in order, output kept.
pub const DEFAULT_GRACE: Duration = runner_sandbox::worker::DEFAULT_GRACE;

/// The Monty worker binary: where it is found and how it is built.
pub const MONTY_WORKER: WorkerBinary = WorkerBinary {
    env: MONTY_WORKER_ENV,
    bin: MONTY_WORKER_BIN,
    what: "Monty worker",
    build: "cargo build --release -p runner-monty --ignore-rust-version",
};

/// The monty backend: one confined `runner-monty-worker` process per request.
#[derive(Debug, Clone)]
pub struct MontyBackend {
    workers: Workers,
}

impl Default for MontyBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl MontyBackend {
    /// Its warm workers ([`WorkerBackend::with_pool`]) wait for their request with no
    /// arguments: a Monty worker has nothing to do ahead (it starts in microseconds
    /// once running); what is saved is the process start.
    pub fn new() -> Self {
        Self {
            workers: Workers::new(MONTY_WORKER, STARTUP_ALLOWANCE, engine_name())
                .with_oom_exit_code(MONTY_OOM_EXIT_CODE)
                .with_pool_args(Vec::new()),
        }
    }
}

impl WorkerBackend for MontyBackend {
    fn workers(&self) -> &Workers {
        &self.workers
    }

    fn workers_mut(&mut self) -> &mut Workers {
        &mut self.workers
    }
}

impl Backend for MontyBackend {
    type Program = MontyProgram;

    fn run(&self, spec: &SandboxSpec<MontyProgram>) -> Result<Outcome, BackendError> {
        let payload = serde_json::to_vec(&MontyWorkerRequest { spec: spec.clone() })
            .map_err(WorkerError::EncodeRequest)?;
        match self.workers.run(&payload, spec)? {
            Supervised::Outcome(outcome) => Ok(outcome),
            Supervised::ModuleRejected(message) => Err(WorkerError::Reported(message).into()),
            Supervised::NotDelivered(status) => Err(WorkerError::NotDelivered { status }.into()),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
// reason: tests build fixtures on the host filesystem.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use runner_contract::outcome::OutcomeKind;
    use runner_core::run::Limits;
    use std::fs;
    use std::os::unix::fs::PermissionsExt;
    use std::path::{Path, PathBuf};

    fn spec(root: &Path) -> SandboxSpec<MontyProgram> {
        for d in ["in", "out", "capture"] {
            fs::create_dir(root.join(d)).unwrap();
        }
        SandboxSpec {
            program: MontyProgram {
                code: "print(1)".into(),
                inputs_json: None,
                network: false,
            },
            in_dir: root.join("in"),
            out_dir: root.join("out"),
            capture_dir: root.join("capture"),
            limits: Limits {
                wall: Duration::from_secs(2),
                cpu: Duration::from_secs(2),
                ..runner_sandbox::confine::PROBE_LIMITS
            },
            confinement: Default::default(),
            determinism: Default::default(),
        }
    }

    /// A stand-in worker: a shell script.
    fn fake_worker(dir: &Path, script: &str) -> PathBuf {
        let path = dir.join("fake-monty-worker.sh");
        fs::write(&path, format!("#!/bin/sh\n{script}\n")).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[test]
    fn missing_worker_says_how_to_build_it() {
        let dir = tempfile::tempdir().unwrap();
        let backend =
            MontyBackend::new().with_workers(|w| w.with_worker_exe(dir.path().join("nope")));
        let err = backend.worker_exe().unwrap_err().to_string();
        assert!(err.contains("--ignore-rust-version"), "{err}");
    }

    #[test]
    fn allocator_exit_status_is_memory_exceeded() {
        let dir = tempfile::tempdir().unwrap();
        let spec = spec(dir.path());
        let exe = fake_worker(
            dir.path(),
            "cat >/dev/null; echo 'monty worker: allocation of 9 bytes exceeds the memory limit' >&2; exit 65",
        );
        let outcome = MontyBackend::new()
            .with_workers(|w| w.with_worker_exe(exe))
            .run(&spec)
            .unwrap();
        assert_eq!(outcome.kind, OutcomeKind::MemoryExceeded, "{outcome:?}");
        assert_eq!(outcome.exit_code, 137);
        assert!(outcome.detail.unwrap().contains("exceeds the memory limit"));
        assert_eq!(outcome.engine, engine_name());
    }

    #[test]
    fn abort_is_trapped_and_a_hang_is_killed() {
        let dir = tempfile::tempdir().unwrap();
        let spec = spec(dir.path());
        let exe = fake_worker(dir.path(), "cat >/dev/null; kill -ABRT $$");
        let outcome = MontyBackend::new()
            .with_workers(|w| w.with_worker_exe(exe))
            .run(&spec)
            .unwrap();
        assert_eq!(outcome.kind, OutcomeKind::Trapped, "{outcome:?}");
        assert!(outcome.detail.unwrap().contains("SIGABRT"));

        let exe = fake_worker(dir.path(), "exec sleep 30");
        let outcome = MontyBackend::new()
            .with_workers(|w| {
                w.with_worker_exe(exe)
                    .with_grace(Duration::from_millis(100))
            })
            .run(&spec)
            .unwrap();
        assert_eq!(outcome.kind, OutcomeKind::TimedOut, "{outcome:?}");
        assert_eq!(outcome.exit_code, 124);
        assert!(outcome.runtime_sec < 3.5, "{}", outcome.runtime_sec);
    }
}
