//! Making the engine ready for a request: the guest located (or fetched), its assets
//! verified and its module compiled, once per pipeline; the monty worker found.

use super::error::PrepareError;
use crate::backend::monty::MontyBackend;
use crate::determinism::Fresh as _;
use crate::environment;
use crate::guest::{self, manifest::GuestManifest};
use runner_core::policy::Policy;
use runner_core::request::{ApprovedRequest, Work};
use runner_sandbox::Backend;
use runner_sandbox::BackendError;
use runner_sandbox::GuestProgram;
use runner_sandbox::MontyProgram;
use runner_sandbox::Outcome;
use runner_sandbox::SandboxSpec;
use runner_sandbox::runtime::GuestRuntime;
use runner_sandbox::runtime::ReadOnlyMount;
use runner_sandbox::worker::PoolCounters;
use runner_sandbox::worker::WorkerBackend as _;
use runner_wasmtime::worker::WasmtimeBackend;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Reports the steps of a long preparation (a guest's download, its first compile).
pub type ProgressSink<'a> = &'a mut dyn FnMut(&str);

/// What the runs of one pipeline share: one wasmtime engine, with the precompiled
/// guests it has verified (so a batch checks each guest once, and its workers map the
/// same cache file). Each run still gets its own store, directories and worker process.
#[derive(Default)]
pub struct Engines {
    wasmtime: Mutex<Option<Arc<WasmtimeBackend>>>,
    /// Held while a guest is located and prepared, so that concurrent runs fetch or
    /// compile a missing guest once, not once each.
    preparing: Mutex<()>,
    /// Guest name → its located file and runtime (assets verified): a guest's assets
    /// are hashed once per pipeline, not once per run.
    located: Mutex<HashMap<String, (PathBuf, GuestRuntime)>>,
    /// Warm workers kept per engine (0: none, every worker starts cold). Read when an
    /// engine is first needed.
    warm_workers: AtomicUsize,
    /// What the warm-worker pools did, for a host's metrics.
    pool_counters: Arc<PoolCounters>,
    /// One run: each engine's pool starts one worker in all, as its run prepares the
    /// engine ([`Engines::set_one_worker_ahead`]).
    one_shot: std::sync::atomic::AtomicBool,
    /// The monty backend, once a pool is wanted (with none, each run makes its own).
    monty: Mutex<Option<Arc<MontyBackend>>>,
}

/// The engine a request needs with the program it runs there, each of the backend's
/// own type: the pipeline's one choice between engines, made when the request is
/// prepared and acted on by [`Run::execute`].
pub(super) enum Run {
    Era {
        backend: Arc<WasmtimeBackend>,
        program: GuestProgram,
    },
    Monty {
        backend: Arc<MontyBackend>,
        program: MontyProgram,
    },
}

impl Run {
    /// The guest program of an ERA run (`None` for Monty).
    pub fn guest(&self) -> Option<&GuestProgram> {
        match self {
            Run::Era { program, .. } => Some(program),
            Run::Monty { .. } => None,
        }
    }

    /// [`Run::guest`], to change what the guest sees before it runs.
    pub fn guest_mut(&mut self) -> Option<&mut GuestProgram> {
        match self {
            Run::Era { program, .. } => Some(program),
            Run::Monty { .. } => None,
        }
    }

    /// Runs the program in `sandbox` on its engine.
    pub fn execute(&self, sandbox: &SandboxSpec<()>) -> Result<Outcome, BackendError> {
        match self {
            Run::Era { backend, program } => backend.run(&sandbox.with_program(program.clone())),
            Run::Monty { backend, program } => backend.run(&sandbox.with_program(program.clone())),
        }
    }
}

/// An engine ready for one request.
pub(super) struct Prepared {
    pub run: Run,
    /// The guest's name and pinned sha256 hex (ERA only).
    pub guest: Option<(String, String)>,
    /// The package environment mounted, verified (ERA only, when the request's
    /// `language` selects one).
    pub environment: Option<runner_core::environment::Located>,
}

/// A poisoned lock only means another run panicked; what it guards stays consistent.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Engines {
    pub(super) fn prepare(
        &self,
        approved: &ApprovedRequest,
        policy: &Policy,
        progress: ProgressSink<'_>,
    ) -> Result<Prepared, PrepareError> {
        match approved.work() {
            Work::Era {
                argv,
                guest,
                environment,
                ..
            } => {
                let (backend, mut program) =
                    self.locate_guest(guest, argv, Some(&mut *progress))?;
                // A pool's workers preload the first module prepared: for a run that
                // can start pre-initialised, that one (so the worker a single run
                // starts ahead has it loaded when the run selects it).
                let unconfigured = backend.pool().is_some_and(|p| !p.configured());
                if unconfigured
                    && environment.is_none()
                    && !approved.network_allowlist()
                    && let Ok(determinism) = policy.determinism.fresh()
                {
                    // Not fatal: the run that selects it prepares it again and says why.
                    let _ = self.prepare_snapshot(&backend, &program, &determinism);
                }
                backend
                    .prepare(&program, &mut *progress)
                    .map_err(PrepareError::Engine)?;
                let sha = program.wasm_sha256.clone();
                // The environment's tree is hashed before every run (as the guest is
                // verified): a tree modified after install is refused, not mounted.
                let located = match environment {
                    Some(name) => {
                        let spec = policy.environment(name).ok_or_else(|| {
                            environment::EnvError::Invalid {
                                env: name.clone(),
                                reason: "the policy in force does not declare it".into(),
                            }
                        })?;
                        let found = environment::locate(spec, &environment::default_env_dir())?;
                        program.runtime.mounts.push(ReadOnlyMount {
                            host: found.dir.clone(),
                            guest: runner_core::environment::GUEST_MOUNT.to_owned(),
                        });
                        // After the stdlib: a package cannot shadow a stdlib module
                        // (the wheel check refuses those that try, too).
                        let manifest = GuestManifest::embedded()?;
                        let stdlib = crate::guest::site::guest_stdlib(
                            &manifest.require(guest)?.python_version,
                        )
                        .unwrap_or_default();
                        let mut path: Vec<&str> = stdlib.iter().map(String::as_str).collect();
                        path.push(runner_core::environment::GUEST_MOUNT);
                        crate::guest::site::add_python_path(&mut program.runtime.env, &[], &path);
                        Some(found)
                    }
                    None => None,
                };
                Ok(Prepared {
                    run: Run::Era { backend, program },
                    guest: Some((guest.clone(), sha)),
                    environment: located,
                })
            }
            Work::Monty { code, inputs_json } => {
                let backend = self.monty()?;
                Ok(Prepared {
                    run: Run::Monty {
                        backend,
                        program: MontyProgram {
                            code: code.clone(),
                            inputs_json: inputs_json.clone(),
                            network: false,
                        },
                    },
                    guest: None,
                    environment: None,
                })
            }
        }
    }

    /// Keep up to `n` workers of each engine started ahead (0: none). Takes effect for
    /// an engine not used yet.
    pub fn set_warm_workers(&self, n: usize) {
        self.warm_workers.store(n, Ordering::Relaxed);
    }

    /// Start both engines' warm workers now, instead of at the first request of each
    /// kind (a host, as it starts): the monty pool, and the wasmtime pool preloading
    /// the module of `guest`, prepared exactly as a request naming that guest prepares
    /// it (so the module a warm worker holds is the one a cold run would load). Nothing
    /// when warm workers are off. An `Err` (a guest that cannot be fetched or compiled)
    /// leaves that pool to start with its first request, which then says why.
    ///
    /// Where `guest` has a pre-initialised module that runs under `determinism` (see
    /// `guest::preinit::for_warm_workers`), that module is prepared first, so the warm
    /// workers hold the one a request the boot handles (`python -c`, `python FILE`) will
    /// run; the plain module is prepared after it, for the runs that need it.
    pub fn warm_up(
        &self,
        guest: Option<&str>,
        determinism: Option<&runner_core::determinism::Determinism>,
    ) -> Result<(), PrepareError> {
        if self.warm_workers.load(Ordering::Relaxed) == 0 {
            return Ok(());
        }
        let monty = self.monty().map(drop);
        if let Some(guest) = guest {
            let (backend, program) = self.locate_guest(guest, &[], Some(&mut |_| {}))?;
            if let Some(determinism) = determinism {
                self.prepare_snapshot(&backend, &program, determinism)?;
            }
            backend
                .prepare(&program, |_| {})
                .map_err(PrepareError::Engine)?;
        }
        monty
    }

    /// For a process that runs one request (a single `runner exec`): its worker starts
    /// as soon as the run has prepared its engine (guest located and checked, the
    /// module it will most likely load chosen), on the other core while the run is
    /// staged, instead of after staging and the `/out` tmpfs. It is the same worker
    /// with the same confinement, serving that one request: a one-worker pool that
    /// starts no other ([`runner_sandbox::worker::WorkerPool::limit_starts`]). A run
    /// refused after it started ends it unused (the pool kills its idle worker).
    pub fn set_one_worker_ahead(&self) {
        self.warm_workers.store(1, Ordering::Relaxed);
        self.one_shot.store(true, Ordering::Relaxed);
    }

    pub fn pool_counters(&self) -> &Arc<PoolCounters> {
        &self.pool_counters
    }

    /// The monty backend; a missing worker binary is a setup problem, said before
    /// staging.
    fn monty(&self) -> Result<Arc<MontyBackend>, PrepareError> {
        let warm = self.warm_workers.load(Ordering::Relaxed);
        if warm == 0 {
            let backend = MontyBackend::new();
            backend.worker_exe().map_err(PrepareError::MontyWorker)?;
            return Ok(Arc::new(backend));
        }
        let mut slot = lock(&self.monty);
        if let Some(backend) = slot.as_ref() {
            return Ok(Arc::clone(backend));
        }
        let backend = Arc::new(
            MontyBackend::new()
                .with_pool(warm, Arc::clone(&self.pool_counters))
                .map_err(PrepareError::MontyWorker)?,
        );
        self.limit_one_shot(backend.pool());
        *slot = Some(Arc::clone(&backend));
        Ok(backend)
    }

    fn wasmtime(&self) -> Result<Arc<WasmtimeBackend>, PrepareError> {
        let mut slot = lock(&self.wasmtime);
        if let Some(backend) = slot.as_ref() {
            return Ok(Arc::clone(backend));
        }
        let mut backend = WasmtimeBackend::new(runner_wasmtime::engine::default_cache_dir())
            .map_err(PrepareError::Engine)?;
        let warm = self.warm_workers.load(Ordering::Relaxed);
        if warm > 0 {
            backend = backend
                .with_pool(warm, Arc::clone(&self.pool_counters))
                .map_err(PrepareError::Engine)?;
            self.limit_one_shot(backend.pool());
        }
        let backend = Arc::new(backend);
        *slot = Some(Arc::clone(&backend));
        Ok(backend)
    }

    /// Starts the Monty worker of a run now (with [`Engines::set_one_worker_ahead`]);
    /// a missing worker binary is said by the run.
    pub fn start_monty_ahead(&self) {
        let _ = self.monty();
    }

    /// Starts the ERA worker of a run of `guest_name` now, preloading its
    /// pre-initialised module for runs under `determinism` (with
    /// [`Engines::set_one_worker_ahead`]). Only when the guest is on disk and has that
    /// module: a guest still to fetch or compile is prepared by the run, with progress,
    /// and its worker starts then.
    pub fn start_era_ahead(
        &self,
        guest_name: &str,
        determinism: &runner_core::determinism::Determinism,
    ) {
        let Ok((backend, program)) = self.locate_guest(guest_name, &[], None) else {
            return;
        };
        if backend.pool().is_some_and(|p| !p.configured()) {
            let _ = self.prepare_snapshot(&backend, &program, determinism);
        }
    }

    /// In one-run mode, `pool` starts one worker in all.
    fn limit_one_shot(&self, pool: Option<&runner_sandbox::worker::WorkerPool>) {
        if self.one_shot.load(Ordering::Relaxed)
            && let Some(pool) = pool
        {
            pool.limit_starts(1);
        }
    }

    /// Prepares the pre-initialised module of `program`'s guest when there is one for
    /// runs under `determinism` (see `guest::preinit::for_warm_workers`).
    fn prepare_snapshot(
        &self,
        backend: &WasmtimeBackend,
        program: &GuestProgram,
        determinism: &runner_core::determinism::Determinism,
    ) -> Result<(), PrepareError> {
        let manifest = GuestManifest::embedded()?;
        let Some(built) = guest::preinit::for_warm_workers(
            manifest.require(&program.guest)?,
            &guest::store::default_guest_dir(),
            &program.runtime,
            determinism,
        ) else {
            return Ok(());
        };
        let snapshot = GuestProgram {
            wasm_path: built.path,
            wasm_sha256: built.sha256,
            ..program.clone()
        };
        backend
            .prepare(&snapshot, |_| {})
            .map(drop)
            .map_err(PrepareError::Engine)
    }

    /// The guest's plain module found (fetched when missing, with `progress`; without
    /// it a guest not stored is an error) and its runtime, as a program running `argv`,
    /// not yet compiled.
    fn locate_guest(
        &self,
        guest_name: &str,
        argv: &[String],
        progress: Option<ProgressSink<'_>>,
    ) -> Result<(Arc<WasmtimeBackend>, GuestProgram), PrepareError> {
        let _preparing = lock(&self.preparing);
        let manifest = GuestManifest::embedded()?;
        let entry = manifest.require(guest_name)?;
        // The wasm file is only read to compile it, and compiling re-hashes it first
        // (ensure_compiled); with a precompiled module cached, a size check is enough
        // here and saves hashing 26 MB on every run. A missing or wrong-size file is
        // fetched or refused by the full check.
        let mut located = lock(&self.located);
        let (wasm_path, runtime) = match located.get(guest_name) {
            Some(found) => found.clone(),
            None => {
                let guest_dir = guest::store::default_guest_dir();
                let wasm_path = match (guest::locate_size_only(entry, &guest_dir), progress) {
                    (Ok(Some(path)), _) => path,
                    (_, Some(progress)) => guest::ensure(entry, &guest_dir, progress)?,
                    (Err(e), None) => return Err(e.into()),
                    (Ok(None), None) => return Err(guest::not_fetched(entry).into()),
                };
                // Its assets (the scientific guest's stdlib zip) are read by the guest
                // itself, so they are hashed here, once per pipeline.
                let runtime = guest::runtime_for(entry, &guest_dir)?;
                located.insert(guest_name.to_owned(), (wasm_path.clone(), runtime.clone()));
                (wasm_path, runtime)
            }
        };
        drop(located);
        let backend = self.wasmtime()?;
        let program = GuestProgram {
            guest: guest_name.to_owned(),
            wasm_path,
            wasm_sha256: entry.file_sha256.clone(),
            argv: argv.to_vec(),
            runtime,
        };
        Ok((backend, program))
    }
}
