//! Operating-system confinement around a guest run: the worker's resource limits and
//! namespaces, the runner's private mount namespace, and the caps on `/out`.
//!
//! Two processes use this module:
//! - the runner, once at startup ([`enter_private_mount_namespace`], while it is still
//!   single-threaded) and per run ([`mount_out_tmpfs`], [`out_caps_enforced`],
//!   [`tree_usage`]);
//! - the worker, before it runs the guest ([`confine_worker`]).
//!
//! Every step is recorded by name when it applied; a layer that could not be applied
//! is never claimed: it is recorded as `not applied: LAYER (reason)` and said on the
//! worker's stderr, and when the policy's `[confinement]` table requires it the worker
//! refuses to run the guest ([`WorkerConfinement::check`]).

use nix::sys::resource::{Resource, setrlimit};
use nix::sys::signal::Signal;
/// The policy's `[confinement]` table lives in `runner-core` (no I/O), with the policy.
use runner_core::policy::confinement::{ConfinementPolicy, Layer, Requirement};
use runner_core::run::Limits;

mod capabilities;
mod landlock;
mod layer_error;
mod mount;
mod own_uid;
mod probe;
mod rlimits;
mod seccomp;
mod sigxfsz;
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;

use capabilities::{clear_bounding_set, drop_capabilities};
pub use landlock::FsAccess;
use landlock::{enforce_landlock, landlock_ruleset};
pub use layer_error::{LandlockError, LayerError, OwnUidError, SeccompError, StatusError};
pub use mount::{
    MountError, OutTmpfs, TreeUsage, cut_back_to_cap, enter_private_mount_namespace,
    mount_out_tmpfs, mount_tmpfs_in_thread_namespace, out_caps_enforced, out_tmpfs_inodes,
    out_tmpfs_options, out_tmpfs_size, private_mount_namespace_active, tmpfs_full, tree_usage,
};
use own_uid::become_own_user;
pub use own_uid::{WORKER_ID_BASE, worker_id};
pub use probe::{PROBE_LIMITS, probe_main};
use rlimits::lower_rlimit;
pub use rlimits::{RLIMIT_CPU_SLACK_SECS, relax_after_guest, rlimit_cpu_secs};
pub use seccomp::DENIED_SYSCALLS;
use seccomp::{compile_seccomp, install_seccomp};
use sigxfsz::record_sigxfsz;
pub use sigxfsz::take_fsize_refusal;

/// Open files the worker may hold: 1,024 for the guest's own files (what real code
/// opens at once stays far below; CPython needs fewer than ten to start) and 64 for the
/// worker's (the module, the preopened directories, the capture pipes, the runtime's).
/// Past it the guest's `open` fails with `EMFILE` (runner-wasmtime's `wasi_fds`).
pub const WORKER_NOFILE: u64 = 1024 + 64;

/// What [`confine_worker`] did.
#[derive(Debug, Clone, Default)]
pub struct WorkerConfinement {
    /// Steps that applied, by name (`rlimit_cpu=4s`, `seccomp(deny=49)`, …).
    pub applied: Vec<String>,
    /// Steps that could not be applied, with the reason (said on stderr).
    pub skipped: Vec<String>,
    /// Layers that did not (fully) apply, with the first reason.
    pub failed: Vec<(Layer, String)>,
    /// `RLIMIT_FSIZE` hard limit, when set: the worker raises its soft limit to it
    /// after the guest has run, to write the captured stdout/stderr.
    pub fsize_hard: Option<u64>,
}

impl WorkerConfinement {
    fn record(&mut self, layer: Layer, name: String, result: Result<(), LayerError>) {
        match result {
            Ok(()) => self.applied.push(name),
            Err(e) => {
                let why = if name == layer.as_str() {
                    e.to_string()
                } else {
                    format!("{name}: {e}")
                };
                self.skipped.push(format!("{}: {why}", layer.as_str()));
                if !self.failed.iter().any(|(l, _)| *l == layer) {
                    self.failed.push((layer, why));
                }
            }
        }
    }

    /// `Err` naming the first layer `policy` requires that did not apply, and why.
    /// The worker calls this before the guest runs and refuses the run on `Err`.
    pub fn check(&self, policy: &ConfinementPolicy) -> Result<(), RequiredLayerFailed> {
        match self
            .failed
            .iter()
            .find(|(layer, _)| policy.requirement(*layer) == Requirement::Required)
        {
            None => Ok(()),
            Some((layer, why)) => Err(RequiredLayerFailed {
                layer: *layer,
                why: why.clone(),
            }),
        }
    }

    /// The Provenance entries: every step that applied, then one `not applied: …` entry
    /// per layer that did not (with the reason).
    pub fn provenance(&self) -> Vec<String> {
        let mut entries = self.applied.clone();
        entries.extend(
            self.failed
                .iter()
                .map(|(layer, why)| format!("not applied: {} ({why})", layer.as_str())),
        );
        entries
    }
}

/// A layer the policy requires did not apply, so the guest is not run
/// ([`WorkerConfinement::check`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "confinement layer `{}` is required by the policy ([confinement] {} = \
     \"required\") and could not be applied, so the guest was not run: {why}",
    layer.as_str(),
    layer.as_str()
)]
pub struct RequiredLayerFailed {
    pub layer: Layer,
    /// Why it did not apply.
    pub why: String,
}

/// The steps of [`confine_worker`] that do not depend on the request, taken by
/// [`EarlyConfinement::take`] before a worker reads its request (a warm worker: before
/// it waits for one): the network namespace with no interfaces, the capability bounding
/// set emptied, `no_new_privs`, and the seccomp filters compiled (installed later, at
/// the same point as before). Each only takes authority away, none can be influenced
/// by a request, and the ones that apply to the process are in force before any
/// request byte is read; [`confine_worker`] records them in Provenance in its own
/// order, so a warm and a cold worker report the same steps.
pub struct EarlyConfinement {
    net_namespace: Result<(), LayerError>,
    bounding_set: Result<(), LayerError>,
    no_new_privs: Result<(), LayerError>,
    seccomp: Result<[seccompiler::BpfProgram; 2], SeccompError>,
}

impl EarlyConfinement {
    /// Take the early steps now. Call while the process is single-threaded (they are
    /// per thread; the check is made and recorded), as the first thing a worker does.
    ///
    /// # Ambient Authority
    ///
    /// Changes the network namespace, capability bounding set and flags of the
    /// calling process.
    pub fn take() -> Self {
        let errno = |r: nix::Result<()>| r.map_err(LayerError::from);
        // The namespace needs CAP_SYS_ADMIN, and the bounding set CAP_SETPCAP: both
        // before any capability is given up (that is in [`confine_worker`]).
        let net_namespace = errno(nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET));
        let bounding_set = clear_bounding_set();
        let no_new_privs = errno(nix::sys::prctl::set_no_new_privs());
        Self {
            net_namespace,
            bounding_set,
            no_new_privs,
            seccomp: compile_seccomp(),
        }
    }
}

/// Confine the worker process before it runs the guest: death with the parent,
/// resource limits, no core dumps, a network namespace with no interfaces, no
/// capabilities, no new privileges, and the seccomp deny-list, in that order (the
/// namespace needs the capabilities the next step drops; the filter denies the calls
/// the earlier steps make). Call while the worker is single-threaded (before the async
/// runtime starts), after the precompiled module is loaded (loading may need file-size
/// room), then [`WorkerConfinement::check`] against the policy before the guest runs.
/// The request-independent steps are `early`'s, taken before ([`EarlyConfinement`]);
/// this takes the rest and records all of them.
///
/// # Ambient Authority
///
/// Changes the limits, namespaces, capabilities, flags and syscall filter of the
/// calling process.
pub fn confine_worker(
    early: EarlyConfinement,
    limits: &Limits,
    address_space: Option<u64>,
    fs: &FsAccess,
) -> WorkerConfinement {
    let mut c = WorkerConfinement::default();
    let errno = |r: nix::Result<()>| r.map_err(LayerError::from);

    // Death with the parent first, so no step below can leave an orphan; set again
    // after the uid changes, which clears it.
    let pdeathsig = || errno(nix::sys::prctl::set_pdeathsig(Signal::SIGKILL));
    if let Err(e) = pdeathsig() {
        c.record(Layer::Pdeathsig, "pdeathsig=SIGKILL".into(), Err(e));
    }
    c.record(
        Layer::Rlimits,
        "rlimit_core=0".into(),
        errno(setrlimit(Resource::RLIMIT_CORE, 0, 0)),
    );
    c.record(
        Layer::Rlimits,
        format!("rlimit_nofile={WORKER_NOFILE}"),
        errno(lower_rlimit(
            Resource::RLIMIT_NOFILE,
            WORKER_NOFILE,
            WORKER_NOFILE,
        )),
    );
    let cpu = rlimit_cpu_secs(limits.cpu);
    c.record(
        Layer::Rlimits,
        format!("rlimit_cpu={cpu}s"),
        errno(lower_rlimit(Resource::RLIMIT_CPU, cpu, cpu + 1)),
    );
    if let Some(bytes) = address_space {
        c.record(
            Layer::Rlimits,
            format!("rlimit_as={bytes}"),
            errno(lower_rlimit(Resource::RLIMIT_AS, bytes, bytes)),
        );
    }
    // The soft limit is one byte past the cap: a file of exactly `out_bytes` is
    // written whole, and any write that reaches past the cap lands exactly one byte
    // more (the kernel shortens it there), so the file shows as over the cap afterwards
    // however the guest goes on: retrying, ignoring the short count, or exiting 0 (only
    // by truncating or deleting the file itself can it leave /out within the cap, and
    // then the cap holds). The runner cuts that byte off again before collecting
    // ([`cut_back_to_cap`]), so no artifact is ever larger than the cap.
    // A write or truncate that starts past that byte is refused outright: the kernel
    // raises SIGXFSZ (whose default action would kill the worker) and the call fails
    // with EFBIG. The handler only records it ([`take_fsize_refusal`]); the worker
    // reports the run as `output_limit` from that record, since nothing past the cap
    // may be left on disk to show it.
    let fsize_soft = limits.out_bytes.saturating_add(1);
    let fsize_hard = fsize_soft.max(limits.stdout_bytes).max(limits.stderr_bytes);
    let fsize = record_sigxfsz()
        .and_then(|()| lower_rlimit(Resource::RLIMIT_FSIZE, fsize_soft, fsize_hard));
    if fsize.is_ok() {
        c.fsize_hard = Some(fsize_hard);
    }
    c.record(
        Layer::Rlimits,
        format!("rlimit_fsize={fsize_soft}"),
        errno(fsize),
    );
    // Taken early (see [`EarlyConfinement`]); recorded here, in the order they apply.
    c.record(
        Layer::NetNamespace,
        "net_namespace".into(),
        early.net_namespace,
    );
    c.record(
        Layer::CapabilityBoundingSet,
        "capability_bounding_set=0".into(),
        early.bounding_set,
    );
    c.record(Layer::NoNewPrivs, "no_new_privs".into(), early.no_new_privs);
    // Landlock's rules open their paths, which the worker's own uid could not reach
    // (the guest's assets lie in the runner's private cache): made while still the
    // runner's uid, enforced once the capabilities are checked (which reads
    // /proc/self, out of reach under Landlock).
    let ruleset = landlock_ruleset(fs);
    let (name, result) = match become_own_user(fs) {
        Ok(id) => (format!("own_uid={id}"), Ok(())),
        Err(e) => ("own_uid".to_owned(), Err(e.into())),
    };
    c.record(Layer::OwnUid, name, result);
    c.record(Layer::Pdeathsig, "pdeathsig=SIGKILL".into(), pdeathsig());
    // After the uid change (which empties the permitted and effective sets of a root
    // process by itself): the inheritable and ambient sets remain to clear, and the
    // check that all five are empty. That one read of /proc/self/status also says the
    // process is still single-threaded, which Landlock (per thread) needs too.
    let (single_thread, dropped) = drop_capabilities();
    c.record(Layer::Capabilities, "capabilities=0".into(), dropped);
    let enforced = single_thread
        .map_err(LayerError::from)
        .and(ruleset.map_err(LayerError::from))
        .and_then(|ruleset| Ok(enforce_landlock(ruleset)?));
    let (name, result) = match enforced {
        Ok(name) => (name, Ok(())),
        Err(e) => ("landlock".to_owned(), Err(e)),
    };
    c.record(Layer::Landlock, name, result);
    let (name, result) = match early.seccomp.and_then(|filters| install_seccomp(&filters)) {
        Ok(denied) => (format!("seccomp(deny={denied})"), Ok(())),
        Err(e) => ("seccomp".to_owned(), Err(e.into())),
    };
    c.record(Layer::Seccomp, name, result);
    c
}
