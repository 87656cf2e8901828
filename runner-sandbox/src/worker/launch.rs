//! One way to start a worker, for both engines: which binary ([`WorkerBinary`], found
//! once per run by [`locate_worker_exe`]), how long it gets, what its exit statuses mean,
//! and the warm workers that may serve it ([`WorkerPool`]). `WasmtimeBackend` and
//! `MontyBackend` each hold a [`Workers`] and hand it their request's bytes, and share
//! its builder and accessors through [`WorkerBackend`]; every worker process of the
//! runner starts through here ([`super::spawn_worker`]).

use super::{DEFAULT_GRACE, PoolCounters};
use super::{Supervised, WorkerJob, WorkerPool, locate_worker_exe, supervise_worker};
use crate::{BackendError, SandboxSpec};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Where a worker binary is found and how to build it when it is not.
#[derive(Debug, Clone, Copy)]
pub struct WorkerBinary {
    /// The variable naming the binary (`RUNNER_WORKER_EXE`, `RUNNER_MONTY_WORKER`).
    pub env: &'static str,
    /// Its file name next to the runner's own binary.
    pub bin: &'static str,
    /// What it is called in messages ("ERA worker").
    pub what: &'static str,
    /// The command that builds it.
    pub build: &'static str,
}

/// The worker processes of one engine: the binary, its timing, what its exit says, and
/// its warm workers when there are.
#[derive(Debug, Clone)]
pub struct Workers {
    binary: WorkerBinary,
    exe: Option<PathBuf>,
    grace: Duration,
    startup_allowance: Duration,
    engine: String,
    oom_exit_code: Option<i32>,
    /// The arguments of warm workers, when known as the workers are described (`None`:
    /// told later, [`WorkerPool::configure`]).
    pool_args: Option<Vec<String>>,
    pool: Option<Arc<WorkerPool>>,
}

impl Workers {
    /// Workers of `binary`, given `startup_allowance` to start, recording `engine` in the
    /// outcomes the runner writes itself (kills, crashes); the grace is [`DEFAULT_GRACE`].
    pub fn new(binary: WorkerBinary, startup_allowance: Duration, engine: String) -> Self {
        Self {
            binary,
            exe: None,
            grace: DEFAULT_GRACE,
            startup_allowance,
            engine,
            oom_exit_code: None,
            pool_args: None,
            pool: None,
        }
    }

    /// Warm workers of this binary start with `args`, known now: they start as soon as
    /// a pool is asked for ([`Workers::with_pool`]).
    pub fn with_pool_args(mut self, args: Vec<String>) -> Self {
        self.pool_args = Some(args);
        self
    }

    /// The exit status by which the worker says its memory cap ended it.
    pub fn with_oom_exit_code(mut self, code: i32) -> Self {
        self.oom_exit_code = Some(code);
        self
    }

    /// Run workers from `exe` instead of the binary's variable or the file next to the
    /// runner's own.
    pub fn with_worker_exe(mut self, exe: impl Into<PathBuf>) -> Self {
        self.exe = Some(exe.into());
        self
    }

    /// Time past the wall-clock limit (and the startup allowance) before SIGKILL.
    pub fn with_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Keep up to `size` workers started ahead (see [`WorkerPool`]); they start once
    /// the pool knows their arguments ([`Workers::with_pool_args`], now, or later
    /// through [`Workers::pool`]).
    pub fn with_pool(
        mut self,
        size: usize,
        counters: Arc<PoolCounters>,
    ) -> Result<Self, BackendError> {
        let pool = WorkerPool::new(self.exe()?, size, counters);
        if let Some(args) = &self.pool_args {
            pool.configure(args.clone());
        }
        self.pool = Some(Arc::new(pool));
        Ok(self)
    }

    /// The warm workers, when there are.
    pub fn pool(&self) -> Option<&WorkerPool> {
        self.pool.as_deref()
    }

    /// The worker binary: the one given, else the binary's variable, else its file next
    /// to the running executable; an error saying how to build it when it is not a file.
    ///
    /// # Ambient Authority
    ///
    /// Reads the binary's variable and the path of the running executable.
    pub fn exe(&self) -> Result<PathBuf, BackendError> {
        locate_worker_exe(self.exe.as_deref(), self.binary)
    }

    /// Runs `payload` (the request) for `spec` on a warm worker when the pool has one,
    /// else on one started now; a warm worker that ended before it read the request is
    /// counted and the request runs again on a cold one, once.
    pub fn run<P>(
        &self,
        payload: &[u8],
        spec: &SandboxSpec<P>,
    ) -> Result<Supervised, BackendError> {
        let warm = self.pool.as_ref().and_then(|pool| pool.take());
        match self.supervise(payload, spec, warm)? {
            Supervised::NotDelivered(_) => {
                if let Some(pool) = &self.pool {
                    pool.note_retried_cold();
                }
                self.run_cold(payload, spec)
            }
            other => Ok(other),
        }
    }

    /// Runs `payload` for `spec` on a worker started now.
    pub fn run_cold<P>(
        &self,
        payload: &[u8],
        spec: &SandboxSpec<P>,
    ) -> Result<Supervised, BackendError> {
        self.supervise(payload, spec, None)
    }

    fn supervise<P>(
        &self,
        payload: &[u8],
        spec: &SandboxSpec<P>,
        warm: Option<std::process::Child>,
    ) -> Result<Supervised, BackendError> {
        let exe = self.exe()?;
        supervise_worker(WorkerJob {
            exe: &exe,
            args: &[],
            payload: payload.to_vec(),
            spec,
            startup_allowance: self.startup_allowance,
            grace: self.grace,
            engine: self.engine.clone(),
            oom_exit_code: self.oom_exit_code,
            warm,
        })
    }
}

/// A backend whose runs go through a [`Workers`] (`WasmtimeBackend`, `MontyBackend`):
/// the builder and accessors they share, over the two accessors each implements.
pub trait WorkerBackend: Sized {
    /// Its workers.
    fn workers(&self) -> &Workers;
    /// Its workers, to change them.
    fn workers_mut(&mut self) -> &mut Workers;

    /// Keep up to `size` workers started ahead (see [`WorkerPool`]; they start once
    /// their arguments are known), `counters` counting what they did. A run takes one
    /// when there is one, else starts one cold; every worker still serves one request.
    /// Call after [`WorkerBackend::with_workers`] names another binary.
    fn with_pool(mut self, size: usize, counters: Arc<PoolCounters>) -> Result<Self, BackendError> {
        let workers = self.workers_mut();
        *workers = workers.clone().with_pool(size, counters)?;
        Ok(self)
    }

    /// The same backend with its workers changed by `change` (another binary, another
    /// grace: [`Workers::with_worker_exe`], [`Workers::with_grace`]).
    fn with_workers(mut self, change: impl FnOnce(Workers) -> Workers) -> Self {
        let workers = self.workers_mut();
        *workers = change(workers.clone());
        self
    }

    /// The warm workers, when there are.
    fn pool(&self) -> Option<&WorkerPool> {
        self.workers().pool()
    }

    /// The worker binary: the one given, else its variable (`RUNNER_WORKER_EXE`,
    /// `RUNNER_MONTY_WORKER`), else its file next to the running executable; an error
    /// saying how to build it when it is not a file.
    ///
    /// # Ambient Authority
    ///
    /// Reads the binary's variable and the path of the running executable.
    fn worker_exe(&self) -> Result<PathBuf, BackendError> {
        self.workers().exe()
    }
}
