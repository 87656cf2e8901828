//! CPU time, as the workers and the engine read it.

use nix::sys::resource::{UsageWho, getrusage};
use nix::sys::time::TimeValLike;
use std::time::Duration;

/// Which CPU clock a CPU budget reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuClock {
    /// The whole process (what `RLIMIT_CPU` counts): right in a worker that runs one guest.
    Process,
    /// The calling thread since the run started: right when several guests share a
    /// process (tests). The guest's code runs on the thread that calls the engine's run function.
    Thread,
}

/// CPU time (user + system) of the process or of the calling thread.
pub fn cpu_time(clock: CpuClock) -> Option<Duration> {
    let who = match clock {
        CpuClock::Process => UsageWho::RUSAGE_SELF,
        CpuClock::Thread => UsageWho::RUSAGE_THREAD,
    };
    let usage = getrusage(who).ok()?;
    let micros = usage.user_time().num_microseconds() + usage.system_time().num_microseconds();
    Some(Duration::from_micros(u64::try_from(micros).ok()?))
}
