//! One run of a WASI guest: the host-side set-up, the call under the run's limits, and how
//! its end is classified into an outcome.

use super::*;

/// What a run opens on the host before its guest starts: the WASI context with every
/// preopened directory (`/in`, `/out`, the guest's assets, the scratch directory), the
/// capture pipes and the scratch directory's path. The worker sets this up before it
/// confines itself, so a worker that gives up the runner's uid still holds directories
/// its own uid could not open by path (the guest's assets in the runner's cache).
pub struct GuestSetup {
    pub(crate) wasi: WasiP1Ctx,
    /// The run's virtual clock, which the guest's sleeps advance.
    pub(crate) clock: Option<VirtualTime>,
    pub(crate) stdout: MemoryOutputPipe,
    pub(crate) stderr: MemoryOutputPipe,
    pub(crate) scratch: Option<Scratch>,
}

impl GuestSetup {
    /// Opens everything `guest` sees, for a run of `spec`.
    ///
    /// # Ambient Authority
    ///
    /// Creates the scratch directory under `spec.out_dir`; opens `spec.in_dir`,
    /// `spec.out_dir` and the guest's asset directories.
    pub fn open(
        guest: &GuestProgram,
        spec: &SandboxSpec<GuestProgram>,
    ) -> Result<Self, BackendError> {
        let limits = &spec.limits;
        let stdout = MemoryOutputPipe::new(to_usize(limits.stdout_bytes));
        let stderr = MemoryOutputPipe::new(to_usize(limits.stderr_bytes));
        let scratch = match guest.runtime.scratch {
            Some(_) => Some(Scratch::create(spec)?),
            None => None,
        };
        let scratch_path = scratch.as_ref().map(Scratch::path);
        let (wasi, clock) = build_wasi(guest, spec, scratch_path, &stdout, &stderr)?;
        Ok(Self {
            wasi,
            clock,
            stdout,
            stderr,
            scratch,
        })
    }

    /// The scratch directory (under `/out`), when the guest has one.
    pub fn scratch(&self) -> Option<&Path> {
        self.scratch.as_ref().map(Scratch::path)
    }
}

/// Run `guest` (its module already loaded) to completion or until a limit stops it, on
/// the calling thread, and describe how it ended. An `Err` means the run could not be
/// set up (a preopen could not be opened, no runtime); everything the guest does is an
/// [`Outcome`].
///
/// # Ambient Authority
///
/// Opens `spec.in_dir` and `spec.out_dir` and hands them to the guest.
pub fn run_guest(
    engine: &Engine,
    module: &Module,
    guest: &GuestProgram,
    spec: &SandboxSpec<GuestProgram>,
    options: &RunOptions,
) -> Result<Outcome, BackendError> {
    let setup = GuestSetup::open(guest, spec)?;
    run_set_up_guest(engine, module, guest, spec, options, setup)
}

/// [`run_guest`] with what the guest sees already opened ([`GuestSetup::open`]).
pub fn run_set_up_guest(
    engine: &Engine,
    module: &Module,
    guest: &GuestProgram,
    spec: &SandboxSpec<GuestProgram>,
    options: &RunOptions,
    setup: GuestSetup,
) -> Result<Outcome, BackendError> {
    let limits = &spec.limits;
    let GuestSetup {
        wasi,
        clock,
        stdout,
        stderr,
        scratch,
    } = setup;

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(4)
        .thread_name("runner-wasi")
        .build()
        .map_err(|source| WorkerError::StartThread {
            what: "async runtime",
            source,
        })?;

    let linker = link(engine, module, guest, clock)?;
    runner_sandbox::phases::mark("worker.linked");
    let started = Instant::now();
    let cpu = options
        .cpu
        .map(|budget| (budget, baseline_cpu(budget.clock)));
    let mut store = new_store(engine, GuestState::new(wasi, limits, started, cpu), limits);

    let ticker = EpochTicker::start(engine).map_err(|source| WorkerError::StartThread {
        what: "epoch ticker",
        source,
    })?;
    // The epoch callback stops a guest that computes; this timeout also stops one
    // that waits in a host call (`time.sleep`), by dropping the call's future.
    let result = runtime.block_on(async {
        let call = call_entry(&linker, &mut store, module, guest.runtime.entry);
        tokio::time::timeout(limits.wall, call).await
    });
    let runtime_sec = started.elapsed().as_secs_f64();
    runner_sandbox::phases::mark("worker.guest_ran");
    if options.leave_to_exit {
        std::mem::forget(ticker);
    } else {
        drop(ticker);
    }
    // Scratch shares /out's tmpfs, so a guest that filled it may have filled it through
    // /tmp: judged before scratch is removed, as the supervisor judges /out after.
    let out_full = scratch.is_some()
        && runner_sandbox::confine::out_caps_enforced(&spec.out_dir, limits)
        && runner_sandbox::confine::tmpfs_full(&spec.out_dir);
    if let Some(scratch) = scratch {
        scratch.remove();
    }

    let stack = match &result {
        Ok(Err(error)) => crate::stack::exhausted(error, &mut store),
        _ => None,
    };
    let (kind, exit_code, mut details) = classify(result, limits);
    if let Some(stack) = stack {
        details = vec![stack];
    }
    let data = store.data();
    let memory_denied = data.limiter.memory_denied;
    let memory_peak = data.limiter.memory_peak;
    let table_denied = data.limiter.table_denied;
    if options.leave_to_exit {
        std::mem::forget(store);
        std::mem::forget(runtime);
    } else {
        drop(store);
        drop(runtime);
    }

    let stdout = stdout.contents().to_vec();
    let stderr = stderr.contents().to_vec();
    let stdout_capped = limits.stdout_bytes > 0 && stdout.len() as u64 >= limits.stdout_bytes;
    let stderr_capped = limits.stderr_bytes > 0 && stderr.len() as u64 >= limits.stderr_bytes;
    let seen = Seen {
        memory_denied,
        table_denied,
        stdout_capped,
        stderr_capped,
        out_full,
    };
    let (outcome_kind, exit) = seen.overrule(kind, exit_code, limits, &mut details);
    Ok(Outcome {
        kind: outcome_kind,
        exit_code: exit,
        runtime_sec,
        stdout,
        stderr,
        stdout_capped,
        stderr_capped,
        detail: join_details(details),
        engine: engine_name(),
        confinement: Vec::new(),
        usage: Some(Box::new(runner_core::run::Usage {
            peak_linear_memory_bytes: Some(memory_peak as u64),
            ..Default::default()
        })),
    })
}

/// A linker with WASI preview 1 (its open-file limit, and the virtual clock's sleeps
/// when the run has one) and, for a guest that imports `host`, the "no host" stubs.
fn link(
    engine: &Engine,
    module: &Module,
    guest: &GuestProgram,
    clock: Option<VirtualTime>,
) -> Result<Linker<GuestState>, BackendError> {
    let mut linker: Linker<GuestState> = Linker::new(engine);
    p1::add_to_linker_async(&mut linker, |state| &mut state.wasi)
        .map_err(GuestSetupError::LinkWasi)?;
    crate::wasi_fds::link_open_limit(&mut linker, |state| &mut state.wasi)
        .map_err(GuestSetupError::LinkWasi)?;
    if let Some(time) = clock {
        crate::wasi_determinism::link_sleeps(&mut linker, |state| &mut state.wasi, time)
            .map_err(GuestSetupError::LinkClock)?;
    }
    if guest.runtime.host_imports == HostImports::NoHost {
        link_no_host(&mut linker, module)?;
    }
    Ok(linker)
}

/// A store under the run's limits: the memory limiter, the hostcall fuel, and the epoch
/// callback that stops the guest when its watch says so.
fn new_store(engine: &Engine, state: GuestState, limits: &Limits) -> Store<GuestState> {
    let mut store = Store::new(engine, state);
    store.limiter(|state| &mut state.limiter);
    // wasmtime answers a host call that would copy more of the guest's memory than its
    // "hostcall fuel" (128 MiB by default) with ENOMEM, before doing anything: a single
    // larger write never reached /out (or stdout), so neither cap saw it and a guest
    // that swallowed the error completed. A guest cannot hand over more than its
    // memory, so with the memory limit as the fuel every write reaches the file or the
    // pipe, where RLIMIT_FSIZE, the tmpfs and the capture caps judge it.
    store.set_hostcall_fuel(to_usize(limits.memory_bytes).max(store.hostcall_fuel()));
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|ctx| match ctx.data().watch.check() {
        Some(stop) => Err(wasmtime::Error::new(stop)),
        None => Ok(UpdateDeadline::Yield(1)),
    });
    store
}

/// What the run hit besides how the guest ended: a limit that makes a completed or
/// trapped run end as that limit.
struct Seen {
    memory_denied: Option<usize>,
    table_denied: bool,
    stdout_capped: bool,
    stderr_capped: bool,
    out_full: bool,
}

impl Seen {
    /// The outcome and exit code once the limits seen have their say, each noted in
    /// `details`.
    fn overrule(
        &self,
        kind: OutcomeKind,
        exit_code: i32,
        limits: &Limits,
        details: &mut Vec<String>,
    ) -> (OutcomeKind, i32) {
        let Self {
            memory_denied,
            table_denied,
            stdout_capped,
            stderr_capped,
            out_full,
        } = *self;
        let mut outcome_kind = kind;
        let mut exit = exit_code;
        let overridable = matches!(kind, OutcomeKind::Completed | OutcomeKind::Trapped);
        if let Some(desired) = memory_denied {
            details.push(format!(
                "memory growth to {desired} bytes denied (limit {} bytes)",
                limits.memory_bytes
            ));
            if overridable {
                outcome_kind = OutcomeKind::MemoryExceeded;
            }
        }
        if table_denied {
            details.push(format!(
                "table growth beyond {MAX_TABLE_ELEMENTS} elements denied"
            ));
        }
        if stdout_capped || stderr_capped {
            let which = match (stdout_capped, stderr_capped) {
                (true, true) => "stdout and stderr",
                (true, false) => "stdout",
                _ => "stderr",
            };
            details.push(format!("{which} reached its cap"));
            if overridable && outcome_kind != OutcomeKind::MemoryExceeded {
                outcome_kind = OutcomeKind::OutputLimit;
            }
        }
        if out_full {
            details.push("/out (with the scratch /tmp) filled its tmpfs".into());
            if overridable && outcome_kind != OutcomeKind::MemoryExceeded {
                outcome_kind = OutcomeKind::OutputLimit;
            }
        }
        if outcome_kind != kind
            && let Some(code) = outcome_kind.conventional_exit_code()
        {
            details.push(format!("guest's own exit code was {exit}"));
            exit = code;
        }
        (outcome_kind, exit)
    }
}

fn baseline_cpu(clock: CpuClock) -> Duration {
    match clock {
        // RLIMIT_CPU counts from exec, so does a process budget.
        CpuClock::Process => Duration::ZERO,
        CpuClock::Thread => cpu_time(clock).unwrap_or_default(),
    }
}

type CallResult = Result<wasmtime::Result<i32>, tokio::time::error::Elapsed>;

/// The outcome kind, exit code and details of a finished call, before the limiter
/// and the capture pipes are consulted.
fn classify(result: CallResult, limits: &Limits) -> (OutcomeKind, i32, Vec<String>) {
    let conventional = |kind: OutcomeKind| kind.conventional_exit_code().unwrap_or(1);
    match result {
        Err(_elapsed) => (
            OutcomeKind::TimedOut,
            conventional(OutcomeKind::TimedOut),
            vec![format!("wall-clock limit of {:?} reached", limits.wall)],
        ),
        Ok(Ok(code)) => (OutcomeKind::Completed, code, Vec::new()),
        Ok(Err(error)) => {
            if let Some(exit) = error.downcast_ref::<I32Exit>() {
                return (OutcomeKind::Completed, exit.0, Vec::new());
            }
            if let Some(stop) = error.downcast_ref::<Stop>() {
                let kind = match stop {
                    Stop::Wall(_) => OutcomeKind::TimedOut,
                    Stop::Cpu(_) => OutcomeKind::CpuExhausted,
                };
                return (kind, conventional(kind), vec![stop.to_string()]);
            }
            let message = match error.downcast_ref::<Trap>() {
                Some(trap) => format!("wasm trap: {trap}"),
                None => format!("{error:#}"),
            };
            (
                OutcomeKind::Trapped,
                conventional(OutcomeKind::Trapped),
                vec![truncate(&message, MAX_DETAIL)],
            )
        }
    }
}

fn join_details(details: Vec<String>) -> Option<String> {
    if details.is_empty() {
        None
    } else {
        Some(truncate(&details.join("; "), MAX_DETAIL))
    }
}
