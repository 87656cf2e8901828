//! What bounds a running guest: the CPU budget, the memory and table limiter, and the epoch
//! ticker that checks the wall-clock and CPU budgets.

use super::*;

/// A CPU-time budget checked at every epoch tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuBudget {
    pub clock: CpuClock,
    pub limit: Duration,
}

/// Options of one in-process run beyond what the spec says.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Stop the guest (outcome `cpu_exhausted`) once this budget is spent. `None`
    /// leaves CPU to the worker's `RLIMIT_CPU`.
    pub cpu: Option<CpuBudget>,
    /// The process exits right after this run (a worker): the store, the async runtime
    /// and the epoch thread are left to the kernel's exit instead of being torn down
    /// one by one, so the reply goes out a millisecond or two sooner.
    pub leave_to_exit: bool,
}

/// Why the epoch callback stopped the guest.
#[derive(Debug, Clone, Copy, thiserror::Error)]
pub(crate) enum Stop {
    #[error("wall-clock limit of {0:?} reached")]
    Wall(Duration),
    #[error("cpu limit of {0:?} reached")]
    Cpu(Duration),
}

/// Caps linear memory and tables; remembers that it refused something.
pub(crate) struct GuestLimiter {
    pub(crate) memory_bytes: usize,
    pub(crate) table_elements: usize,
    pub(crate) memory_denied: Option<usize>,
    pub(crate) table_denied: bool,
    /// The largest linear memory the guest was granted (its peak: wasm memories never
    /// shrink).
    pub(crate) memory_peak: usize,
}

impl ResourceLimiter for GuestLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes {
            self.memory_denied = Some(self.memory_denied.unwrap_or(0).max(desired));
            return Ok(false);
        }
        self.memory_peak = self.memory_peak.max(desired);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.table_elements {
            self.table_denied = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn instances(&self) -> usize {
        1
    }

    fn tables(&self) -> usize {
        4
    }

    fn memories(&self) -> usize {
        1
    }
}

/// Most table elements a guest may have (CPython's function table has a few thousand).
pub(crate) const MAX_TABLE_ELEMENTS: usize = 1 << 20;

/// Wall-clock and CPU budgets, checked at each epoch tick.
pub(crate) struct Watch {
    deadline: Instant,
    wall: Duration,
    cpu: Option<(CpuBudget, Duration)>,
}

impl Watch {
    pub(crate) fn check(&self) -> Option<Stop> {
        if Instant::now() >= self.deadline {
            return Some(Stop::Wall(self.wall));
        }
        if let Some((budget, baseline)) = self.cpu
            && let Some(now) = cpu_time(budget.clock)
            && now.saturating_sub(baseline) >= budget.limit
        {
            return Some(Stop::Cpu(budget.limit));
        }
        None
    }
}

pub(crate) struct GuestState {
    pub(crate) wasi: WasiP1Ctx,
    pub(crate) limiter: GuestLimiter,
    pub(crate) watch: Watch,
}

impl GuestState {
    /// A guest's state at the start of its run: `limits`' memory cap, nothing denied
    /// yet, and the wall-clock deadline `limits.wall` after `started`.
    pub(crate) fn new(
        wasi: WasiP1Ctx,
        limits: &Limits,
        started: Instant,
        cpu: Option<(CpuBudget, Duration)>,
    ) -> Self {
        Self {
            wasi,
            limiter: GuestLimiter {
                memory_bytes: to_usize(limits.memory_bytes),
                table_elements: MAX_TABLE_ELEMENTS,
                memory_denied: None,
                memory_peak: 0,
                table_denied: false,
            },
            watch: Watch {
                deadline: started + limits.wall,
                wall: limits.wall,
                cpu,
            },
        }
    }
}

/// Advances the engine epoch every [`EPOCH_TICK`] until dropped.
pub(crate) struct EpochTicker {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl EpochTicker {
    pub(crate) fn start(engine: &Engine) -> io::Result<Self> {
        let (stop, stopped) = mpsc::channel::<()>();
        let engine = engine.weak();
        let thread = std::thread::Builder::new()
            .name("runner-epoch".into())
            .spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(EPOCH_TICK) {
                    match engine.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => break,
                    }
                }
            })?;
        Ok(Self {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
