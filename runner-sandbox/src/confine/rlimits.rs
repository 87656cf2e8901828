//! The worker's resource limits: the CPU limit's slack, lowering a limit under the
//! hard one, and relaxing the soft limits once the guest has run.

use super::WorkerConfinement;
use nix::sys::resource::{Resource, getrlimit, setrlimit};
use std::time::Duration;

/// Seconds `RLIMIT_CPU` allows beyond the CPU budget.
///
/// The worker stops the guest itself at the budget, reading the precise CPU clock
/// every epoch tick, so the guest's output survives. The kernel checks `RLIMIT_CPU`
/// against its tick-sampled clock instead, which runs ahead of the precise one under
/// contention (measured: SIGXCPU at 963 ms of precise CPU for a 1 s limit, four busy
/// processes on two cores). A limit at the budget itself would thus fire first and
/// lose the output; one second later it is the backstop for a worker whose own check
/// cannot run (stuck in host code).
pub const RLIMIT_CPU_SLACK_SECS: u64 = 1;

/// `RLIMIT_CPU` soft limit for a CPU budget: whole seconds rounded up (at least 1),
/// plus [`RLIMIT_CPU_SLACK_SECS`]. The hard limit is one second more.
pub fn rlimit_cpu_secs(cpu: Duration) -> u64 {
    let secs = cpu.as_secs() + u64::from(cpu.subsec_nanos() > 0);
    secs.max(1) + RLIMIT_CPU_SLACK_SECS
}

/// Set a limit, never above the current hard limit (an outer sandbox may be stricter).
pub(super) fn lower_rlimit(resource: Resource, soft: u64, hard: u64) -> nix::Result<()> {
    let (_, cur_hard) = getrlimit(resource)?;
    let hard = hard.min(cur_hard);
    setrlimit(resource, soft.min(hard), hard)
}

/// After the guest has run: raise the soft `RLIMIT_FSIZE` and `RLIMIT_CPU` to their
/// hard limits, so the worker can write the captured output (larger than `/out` may
/// be) and reply without SIGXCPU cutting it short. The hard limits stay.
pub fn relax_after_guest(confinement: &WorkerConfinement) {
    if confinement.fsize_hard.is_some() {
        raise_soft_to_hard(Resource::RLIMIT_FSIZE);
    }
    raise_soft_to_hard(Resource::RLIMIT_CPU);
}

fn raise_soft_to_hard(resource: Resource) {
    if let Ok((_, hard)) = getrlimit(resource) {
        let _ = setrlimit(resource, hard, hard);
    }
}
