//! Warm workers: worker processes started ahead of the requests they will serve.
//!
//! A worker's life has two halves. The first does not depend on any request: the
//! process is started, and (ERA) the engine is built and the precompiled module of the
//! guest the host expects is loaded and verified. The worker then blocks reading its
//! request on stdin. The second half is the request's own and is unchanged: read the
//! request, open what the guest sees, confine (rlimits, Landlock for *this* request's
//! paths, seccomp, its own uid), run, reply, exit. A [`WorkerPool`] does the first half
//! ahead of time, in the background, for up to `size` workers; `run` takes one of them
//! ([`WorkerPool::take`]) instead of starting one cold.
//!
//! **A worker is never reused**: it serves one request and exits, as a cold one does, and
//! nothing the guest can touch is opened or reachable before that request's
//! confinement is in place. An idle warm worker holds no request data, no directory of
//! any run, no guest code running.
//!
//! **Idle workers die with their host.** They are started from the pool's own thread,
//! which lives as long as the pool (`PR_SET_PDEATHSIG` fires when the *thread* that
//! started a child exits), with `PR_SET_PDEATHSIG` armed between fork and exec and its
//! parent checked to still be the runner ([`spawn_worker`]); end-of-file on stdin before any byte makes it exit 0 quietly
//! ([`wait_request`]). Dropping the pool kills and reaps its idle workers.
//!
//! **A warm worker that died while idle is never handed a request**: [`WorkerPool::take`]
//! checks it first (and the refill thread sweeps the idle ones every
//! [`SWEEP_EVERY`]); a dead one is reaped, counted as replaced, and refilled. One that
//! dies in the instant between that check and reading its request is seen by the
//! supervisor (the request could not be written to it) and the run is retried cold once.
//!
//! **Bounds**: at most `size` idle workers (the host's `--jobs`), and none is started
//! while the machine has less than [`MIN_AVAILABLE_MEMORY`] available.

use super::{BackendError, WorkerBinary, WorkerError};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the refill thread checks that its idle workers are still alive.
pub const SWEEP_EVERY: Duration = Duration::from_millis(500);
/// No warm worker is started while `MemAvailable` is below this: a warm worker is a
/// convenience, never a reason for the machine to swap or for a run to fail.
pub const MIN_AVAILABLE_MEMORY: u64 = 512 << 20;
/// How long [`WorkerPool::take`] of a pool limited in its starts waits for the start
/// under way.
pub const TAKE_WAIT: Duration = Duration::from_secs(1);
/// Wait after a failed start (or while memory is short) before the next try.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// The first thing a worker does: die (SIGKILL) when the runner does. [`spawn_worker`]
/// has armed it already, between fork and exec; a worker run through a wrapper (a
/// script that starts it) arms it again for its own parent here.
pub fn arm_parent_death() {
    let _ = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL);
}

/// Start a worker process: `exe` with `args`, an empty environment, `/` as its
/// directory, its three standard streams piped, and `PR_SET_PDEATHSIG` (SIGKILL) armed
/// before it executes anything: it dies with the thread that starts it, so call this
/// from a thread that lives as long as the worker may (the run's, or the pool's). A
/// runner that died before the signal was armed is seen (the parent is no longer the
/// runner) and the start fails.
///
/// # Ambient Authority
///
/// Runs `exe`.
pub fn spawn_worker(exe: &Path, args: &[String]) -> Result<Child, BackendError> {
    spawn_worker_at(exe, args, Priority::Normal)
}

/// The CPU priority a worker starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Priority {
    Normal,
    /// Nice [`BACKGROUND_NICE`] until [`WorkerPool::take`] hands it a request: a warm
    /// worker's start (exec, engine, module load: several ms of CPU) then only uses
    /// CPU the runs under way leave idle, instead of slowing the run that took the
    /// worker before it.
    Background,
}

/// The nice value of a warm worker while it starts and waits.
const BACKGROUND_NICE: i32 = 19;

#[allow(unsafe_code)]
fn spawn_worker_at(exe: &Path, args: &[String], priority: Priority) -> Result<Child, BackendError> {
    use std::os::unix::process::CommandExt;
    let runner = nix::unistd::getpid();
    let mut command = Command::new(exe);
    command
        .args(args)
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: the closure runs in the forked child before exec and only makes
    // async-signal-safe system calls (prctl, getppid, setpriority); it allocates nothing
    // (the error is built from a static message) and touches no lock.
    unsafe {
        command.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                .map_err(std::io::Error::from)?;
            if nix::unistd::getppid() != runner {
                return Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe));
            }
            if priority == Priority::Background {
                // Best effort: a worker left at its normal priority only starts sooner.
                nix::libc::setpriority(nix::libc::PRIO_PROCESS, 0, BACKGROUND_NICE);
            }
            Ok(())
        });
    }
    command.spawn().map_err(|source| {
        WorkerError::Spawn {
            exe: exe.to_owned(),
            source,
        }
        .into()
    })
}

/// The worker binary: `given`, else `$env`, else `bin` next to the running executable
/// (`binary`'s). An error when it is not a file, saying how to build it or which
/// variable names it. Both backends find their worker through here.
///
/// # Ambient Authority
///
/// Reads `$env` and the path of the running executable.
pub fn locate_worker_exe(
    given: Option<&Path>,
    binary: WorkerBinary,
) -> Result<PathBuf, BackendError> {
    let exe = if let Some(exe) = given {
        exe.to_owned()
    } else if let Some(exe) = std::env::var_os(binary.env).filter(|v| !v.is_empty()) {
        PathBuf::from(exe)
    } else {
        let runner = std::env::current_exe().map_err(WorkerError::LocateRunner)?;
        runner.with_file_name(binary.bin)
    };
    if !exe.is_file() {
        return Err(WorkerError::Missing { binary, exe }.into());
    }
    Ok(exe)
}

/// What the pools of one host have done, for its metrics. Shared by every pool of a
/// pipeline (ERA and Monty).
#[derive(Debug, Default)]
pub struct PoolCounters {
    /// Warm workers ready now.
    pub ready: AtomicUsize,
    /// Runs that were handed a warm worker.
    pub warm_runs: AtomicU64,
    /// Runs of a pooled backend that found no warm worker and started one cold.
    pub cold_runs: AtomicU64,
    /// Warm workers found dead while idle, reaped and replaced.
    pub replaced: AtomicU64,
    /// Runs retried cold because the warm worker died before it read its request.
    pub retried_cold: AtomicU64,
}

/// A snapshot of [`PoolCounters`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    pub ready: usize,
    pub warm_runs: u64,
    pub cold_runs: u64,
    pub replaced: u64,
    pub retried_cold: u64,
}

impl PoolCounters {
    pub fn snapshot(&self) -> PoolStats {
        PoolStats {
            ready: self.ready.load(Ordering::Relaxed),
            warm_runs: self.warm_runs.load(Ordering::Relaxed),
            cold_runs: self.cold_runs.load(Ordering::Relaxed),
            replaced: self.replaced.load(Ordering::Relaxed),
            retried_cold: self.retried_cold.load(Ordering::Relaxed),
        }
    }
}

/// Up to `size` idle workers of one binary, started in the background.
pub struct WorkerPool {
    shared: Arc<Shared>,
    refill: Option<JoinHandle<()>>,
}

struct Shared {
    exe: PathBuf,
    size: usize,
    /// What the warm workers start at: [`Priority::Background`] where the runner may
    /// raise a taken worker back to normal ([`can_restore_priority`]).
    priority: Priority,
    counters: Arc<PoolCounters>,
    state: Mutex<State>,
    wake: Condvar,
}

struct State {
    /// The arguments of the next workers started; `None` until the pool is told what
    /// its workers preload ([`WorkerPool::configure`]): nothing is started before.
    args: Option<Vec<String>>,
    ready: VecDeque<Child>,
    stop: bool,
    /// Workers started so far, and how many it may start in all (`None`: no limit;
    /// see [`WorkerPool::limit_starts`]).
    started: usize,
    max_starts: Option<usize>,
    /// The refill thread is starting a worker now.
    starting: bool,
}

impl std::fmt::Debug for WorkerPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerPool")
            .field("exe", &self.shared.exe)
            .field("size", &self.shared.size)
            .finish_non_exhaustive()
    }
}

impl WorkerPool {
    /// A pool of up to `size` idle `exe` workers (at least one), counted in `counters`.
    /// It starts nothing until [`WorkerPool::configure`] says with which arguments.
    pub fn new(exe: PathBuf, size: usize, counters: Arc<PoolCounters>) -> Self {
        let priority = if can_restore_priority() {
            Priority::Background
        } else {
            Priority::Normal
        };
        let shared = Arc::new(Shared {
            exe,
            size: size.max(1),
            priority,
            counters,
            state: Mutex::new(State {
                args: None,
                ready: VecDeque::new(),
                stop: false,
                started: 0,
                max_starts: None,
                starting: false,
            }),
            wake: Condvar::new(),
        });
        let refill = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("worker-pool".into())
                .spawn(move || shared.refill())
                .ok()
        };
        Self { shared, refill }
    }

    /// The arguments the workers start with (what they preload). Idle workers started
    /// with other arguments are ended and replaced; the same arguments change nothing.
    pub fn configure(&self, args: Vec<String>) {
        let stale = {
            let mut state = self.shared.lock();
            if state.args.as_ref() == Some(&args) {
                return;
            }
            state.args = Some(args);
            std::mem::take(&mut state.ready)
        };
        self.shared
            .counters
            .ready
            .fetch_sub(stale.len(), Ordering::Relaxed);
        end_all(stale);
        self.shared.wake.notify_all();
    }

    /// Start at most `n` workers in all, counting those started already (a dead idle
    /// one is not replaced past it). A single `runner exec` uses a pool limited to one:
    /// its one worker starts as soon as its engine is known, while the run is staged,
    /// and none follows it.
    pub fn limit_starts(&self, n: usize) {
        self.shared.lock().max_starts = Some(n);
    }

    /// True once [`WorkerPool::configure`] was called.
    pub fn configured(&self) -> bool {
        self.shared.lock().args.is_some()
    }

    /// A ready worker, alive as of now, or `None` (start one cold). A dead one met on
    /// the way is reaped and counted as replaced.
    ///
    /// A pool limited in its starts ([`WorkerPool::limit_starts`]) waits (up to
    /// `TAKE_WAIT`) for a start under way: a second worker started beside it would
    /// only start later.
    pub fn take(&self) -> Option<Child> {
        let taken = {
            let mut state = self.shared.lock();
            let deadline = std::time::Instant::now() + TAKE_WAIT;
            while state.ready.is_empty() && state.starting && state.max_starts.is_some() {
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    break;
                }
                state = self
                    .shared
                    .wake
                    .wait_timeout(state, left)
                    .map_or_else(|p| p.into_inner().0, |(s, _)| s);
            }
            let mut found = None;
            while let Some(mut child) = state.ready.pop_front() {
                self.shared.counters.ready.fetch_sub(1, Ordering::Relaxed);
                if matches!(child.try_wait(), Ok(None)) {
                    if self.shared.priority == Priority::Background {
                        restore_priority(&child);
                    }
                    found = Some(child);
                    break;
                }
                let _ = child.kill();
                let _ = child.wait();
                self.shared
                    .counters
                    .replaced
                    .fetch_add(1, Ordering::Relaxed);
            }
            found
        };
        self.shared.wake.notify_all();
        let counter = if taken.is_some() {
            &self.shared.counters.warm_runs
        } else {
            &self.shared.counters.cold_runs
        };
        counter.fetch_add(1, Ordering::Relaxed);
        taken
    }

    /// Counts a run retried cold after its warm worker died before reading the request.
    pub fn note_retried_cold(&self) {
        self.shared
            .counters
            .retried_cold
            .fetch_add(1, Ordering::Relaxed);
    }

    /// The pids of the idle workers (tests, diagnostics).
    pub fn idle_pids(&self) -> Vec<u32> {
        self.shared.lock().ready.iter().map(Child::id).collect()
    }

    pub fn counters(&self) -> &Arc<PoolCounters> {
        &self.shared.counters
    }
}

impl Drop for WorkerPool {
    fn drop(&mut self) {
        let idle = {
            let mut state = self.shared.lock();
            state.stop = true;
            std::mem::take(&mut state.ready)
        };
        self.shared
            .counters
            .ready
            .fetch_sub(idle.len(), Ordering::Relaxed);
        self.shared.wake.notify_all();
        end_all(idle);
        if let Some(thread) = self.refill.take() {
            let _ = thread.join();
        }
        // A worker the refill thread was starting as the pool stopped.
        let late = std::mem::take(&mut self.shared.lock().ready);
        self.shared
            .counters
            .ready
            .fetch_sub(late.len(), Ordering::Relaxed);
        end_all(late);
    }
}

/// Ends idle workers: closing stdin ends them by themselves; SIGKILL makes sure.
fn end_all(children: VecDeque<Child>) {
    for mut child in children {
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The refill thread: keeps `size` workers ready, replaces the ones that die idle.
    /// Every warm worker is started from here, so they die with this (long-lived)
    /// thread, that is with the pool or the process.
    fn refill(&self) {
        loop {
            let args = {
                let mut state = self.lock();
                loop {
                    if state.stop {
                        return;
                    }
                    self.sweep(&mut state);
                    if let Some(args) = &state.args
                        && state.ready.len() < self.size
                        && state.max_starts.is_none_or(|max| state.started < max)
                    {
                        let args = args.clone();
                        state.started += 1;
                        state.starting = true;
                        break args;
                    }
                    state = self
                        .wake
                        .wait_timeout(state, SWEEP_EVERY)
                        .map_or_else(|p| p.into_inner().0, |(s, _)| s);
                }
            };
            if available_memory().is_some_and(|m| m < MIN_AVAILABLE_MEMORY) {
                self.end_start();
                self.pause();
                continue;
            }
            match spawn_worker_at(&self.exe, &args, self.priority) {
                Ok(child) => {
                    let mut state = self.lock();
                    state.starting = false;
                    if state.args.as_ref() == Some(&args) && !state.stop {
                        state.ready.push_back(child);
                        self.counters.ready.fetch_add(1, Ordering::Relaxed);
                        drop(state);
                    } else {
                        drop(state);
                        end_all(VecDeque::from([child]));
                    }
                    self.wake.notify_all();
                }
                Err(_) => {
                    self.end_start();
                    self.pause();
                }
            }
        }
    }

    /// A start that did not happen: a [`WorkerPool::take`] waiting for it goes on.
    fn end_start(&self) {
        self.lock().starting = false;
        self.wake.notify_all();
    }

    /// Reaps idle workers that died, counting them as replaced.
    fn sweep(&self, state: &mut State) {
        let before = state.ready.len();
        state.ready.retain_mut(|child| {
            let alive = matches!(child.try_wait(), Ok(None));
            if !alive {
                let _ = child.wait();
            }
            alive
        });
        let dead = before - state.ready.len();
        if dead > 0 {
            self.counters.ready.fetch_sub(dead, Ordering::Relaxed);
            self.counters
                .replaced
                .fetch_add(dead as u64, Ordering::Relaxed);
        }
    }

    fn pause(&self) {
        let state = self.lock();
        if !state.stop {
            let _ = self.wake.wait_timeout(state, RETRY_AFTER);
        }
    }
}

/// Whether this process may lower a worker's nice value again (raising a priority
/// takes `CAP_SYS_NICE`): only then do warm workers start in the background.
fn can_restore_priority() -> bool {
    caps::has_cap(
        None,
        caps::CapSet::Effective,
        caps::Capability::CAP_SYS_NICE,
    )
    .unwrap_or(false)
}

/// Back to nice 0 for a taken worker, before its request is written: the threads it
/// starts for the run inherit its main thread's priority.
#[allow(unsafe_code)]
fn restore_priority(child: &Child) {
    let pid: nix::libc::id_t = child.id();
    // SAFETY: setpriority takes plain integers and touches no memory of ours.
    // A failure leaves the worker at its background priority: slower, still correct.
    unsafe {
        nix::libc::setpriority(nix::libc::PRIO_PROCESS, pid, 0);
    }
}

/// `MemAvailable` from `/proc/meminfo`, in bytes.
fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::time::Instant;

    fn script(dir: &Path, body: &str) -> PathBuf {
        let path = dir.join("w.sh");
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    /// A pool of up to `size` workers that wait for a line on stdin, its counters, and
    /// the directory of their script (kept as long as the pool).
    fn waiting_pool(size: usize) -> (WorkerPool, Arc<PoolCounters>, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let counters = Arc::new(PoolCounters::default());
        let pool = WorkerPool::new(script(dir.path(), "read x"), size, Arc::clone(&counters));
        (pool, counters, dir)
    }

    /// [`waiting_pool`], configured, with its `size` workers started.
    fn ready_pool(size: usize) -> (WorkerPool, Arc<PoolCounters>, tempfile::TempDir) {
        let (pool, counters, dir) = waiting_pool(size);
        pool.configure(Vec::new());
        wait_ready(&pool, size);
        (pool, counters, dir)
    }

    /// Ends a worker the test took.
    fn end(mut child: Child) {
        child.kill().unwrap();
        child.wait().unwrap();
    }

    fn wait_ready(pool: &WorkerPool, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while pool.idle_pids().len() < n {
            assert!(Instant::now() < deadline, "the pool never filled");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn nothing_starts_before_configure_then_it_fills_to_size() {
        let (pool, counters, _dir) = waiting_pool(2);
        std::thread::sleep(Duration::from_millis(100));
        assert!(pool.idle_pids().is_empty());
        pool.configure(Vec::new());
        wait_ready(&pool, 2);
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(pool.idle_pids().len(), 2, "never more than size");
        assert_eq!(counters.snapshot().ready, 2);
        let taken = pool.take();
        assert!(taken.is_some());
        assert_eq!(counters.snapshot().warm_runs, 1);
        wait_ready(&pool, 2);
        end(taken.unwrap());
    }

    /// The nice value of process `pid` (field 19 of /proc/PID/stat).
    fn nice_of(pid: u32) -> i64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        // The command name (field 2) is in parentheses and may hold spaces.
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        after.split(' ').nth(16).unwrap().parse().unwrap()
    }

    #[test]
    fn a_warm_worker_waits_in_the_background_and_runs_at_normal_priority() {
        let (pool, _counters, _dir) = ready_pool(1);
        let idle = pool.idle_pids()[0];
        let taken = pool.take().unwrap();
        assert_eq!(taken.id(), idle);
        if can_restore_priority() {
            // Seen before the take by the refill's next worker, after it by the taken one.
            wait_ready(&pool, 1);
            let next = pool.idle_pids()[0];
            assert_eq!(nice_of(next), i64::from(BACKGROUND_NICE), "an idle worker");
        }
        assert_eq!(nice_of(taken.id()), 0, "the taken worker");
        end(taken);
    }

    #[test]
    fn a_pool_limited_to_one_start_starts_one_worker_and_no_other() {
        // Configured first (as the Monty backend's pool is), limited after its first
        // start: that start counts.
        let (pool, counters, _dir) = ready_pool(1);
        pool.limit_starts(1);
        let taken = pool.take().unwrap();
        // The refill thread would start the next one at once (a few ms); it must not.
        std::thread::sleep(Duration::from_millis(300));
        assert!(pool.idle_pids().is_empty(), "a second worker was started");
        assert!(pool.take().is_none());
        let stats = counters.snapshot();
        assert_eq!((stats.warm_runs, stats.cold_runs), (1, 1));
        end(taken);
    }

    #[test]
    fn a_limited_pool_hands_out_the_worker_it_is_starting() {
        // `take` as soon as the start is under way (or done) must wait for that
        // worker rather than say "none" (the run would start a second one).
        let (pool, counters, _dir) = waiting_pool(1);
        pool.limit_starts(1);
        pool.configure(Vec::new());
        let deadline = Instant::now() + Duration::from_secs(10);
        while !pool.shared.lock().starting && pool.idle_pids().is_empty() {
            assert!(Instant::now() < deadline, "the start never began");
            std::thread::sleep(Duration::from_millis(1));
        }
        let taken = pool.take().expect("the worker being started");
        assert_eq!(counters.snapshot().warm_runs, 1);
        end(taken);
    }

    #[test]
    fn a_worker_dead_while_idle_is_replaced_not_handed_out() {
        let (pool, counters, _dir) = ready_pool(1);
        let victim = pool.idle_pids()[0];
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(victim).unwrap()),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        // SIGKILL is asynchronous: wait until it is dead (a zombie, or reaped by the
        // pool's sweep already).
        let deadline = Instant::now() + Duration::from_secs(10);
        let alive = || {
            std::fs::read_to_string(format!("/proc/{victim}/stat")).is_ok_and(|s| {
                !s.rsplit(')')
                    .next()
                    .is_some_and(|r| r.trim_start().starts_with('Z'))
            })
        };
        while alive() {
            assert!(Instant::now() < deadline, "the victim never died");
            std::thread::sleep(Duration::from_millis(5));
        }
        // Taken at once or after the sweep: never the dead one.
        let mut child = loop {
            if let Some(child) = pool.take() {
                break child;
            }
            assert!(Instant::now() < deadline, "no replacement");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_ne!(child.id(), victim);
        assert!(matches!(child.try_wait(), Ok(None)));
        assert!(counters.snapshot().replaced >= 1);
        end(child);
    }

    #[test]
    fn dropping_the_pool_ends_its_idle_workers() {
        let (pool, counters, _dir) = ready_pool(2);
        let pids = pool.idle_pids();
        drop(pool);
        for pid in pids {
            assert!(
                !Path::new(&format!("/proc/{pid}")).exists(),
                "idle worker {pid} outlived its pool"
            );
        }
        assert_eq!(counters.snapshot().ready, 0);
    }

    #[test]
    fn reconfiguring_replaces_the_idle_workers() {
        let dir = tempfile::tempdir().unwrap();
        let pool = WorkerPool::new(
            script(dir.path(), "read x"),
            1,
            Arc::new(PoolCounters::default()),
        );
        pool.configure(vec!["a".into()]);
        wait_ready(&pool, 1);
        let first = pool.idle_pids();
        pool.configure(vec!["a".into()]);
        assert_eq!(pool.idle_pids(), first, "same arguments: kept");
        pool.configure(vec!["b".into()]);
        wait_ready(&pool, 1);
        assert_ne!(pool.idle_pids(), first);
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", pool.idle_pids()[0])).unwrap();
        assert!(cmdline.ends_with(b"b\0"), "{cmdline:?}");
    }

    #[test]
    fn a_missing_worker_says_how_to_build_it() {
        let err = locate_worker_exe(
            Some(Path::new("/nonexistent/worker")),
            WorkerBinary {
                env: "RUNNER_TEST_NO_SUCH_VAR",
                bin: "w",
                what: "test worker",
                build: "cargo build",
            },
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("cannot start") && err.contains("cargo build"),
            "{err}"
        );
    }
}
