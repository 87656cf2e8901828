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

use crate::{BackendError, Limits};
use nix::mount::{MntFlags, MsFlags};
use nix::sys::resource::{Resource, getrlimit, setrlimit};
use nix::sys::signal::{SigHandler, Signal};
/// The policy's `[confinement]` table lives in `runner-core` (no I/O), with the policy.
pub use runner_core::policy::confinement::{ConfinementPolicy, Layer, Requirement};
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

mod layer_error;
pub use layer_error::{LandlockError, LayerError, OwnUidError, SeccompError, StatusError};

/// Open files the worker may hold: 1,024 for the guest's own files (what real code
/// opens at once stays far below; CPython needs fewer than ten to start) and 64 for the
/// worker's (the module, the preopened directories, the capture pipes, the runtime's).
/// Past it the guest's `open` fails with `EMFILE` (runner-wasmtime's `wasi_fds`).
pub const WORKER_NOFILE: u64 = 1024 + 64;

static PRIVATE_MOUNT_NS: AtomicBool = AtomicBool::new(false);

/// Move the runner into a mount namespace of its own whose mounts do not propagate
/// back to the host, so the per-run tmpfs mounts on `/out` stay invisible outside and
/// vanish with the process even when it is SIGKILLed.
///
/// Call this first thing in `main`, before any thread exists (tokio, rayon, …): a
/// namespace change applies to the calling thread only, and threads created before it
/// would stay behind. Returns `Ok(false)` (nothing changed) when the process is not
/// root, is already multi-threaded, or the kernel refuses (no CAP_SYS_ADMIN, seccomp);
/// the runner then falls back to polling `/out`.
///
/// # Ambient Authority
///
/// Changes the mount namespace of the whole (single-threaded) process.
pub fn enter_private_mount_namespace() -> Result<bool, BackendError> {
    if !nix::unistd::geteuid().is_root() {
        return Ok(false);
    }
    if thread_count() != Some(1) {
        return Ok(false);
    }
    unshare_private_mounts()
}

/// The namespace change itself, for the calling thread (and the processes it spawns).
fn unshare_private_mounts() -> Result<bool, BackendError> {
    match nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS) {
        Ok(()) => {}
        Err(nix::errno::Errno::EPERM | nix::errno::Errno::EINVAL) => return Ok(false),
        Err(e) => return Err(MountError::Unshare(e).into()),
    }
    make_mounts_private()?;
    PRIVATE_MOUNT_NS.store(true, Ordering::SeqCst);
    Ok(true)
}

/// `mount --make-rprivate /` in a fresh mount namespace. Without it, mounts made there
/// would still propagate to the host's namespace (most systems mount / shared); failing
/// here leaves a namespace that must not be used.
fn make_mounts_private() -> Result<(), BackendError> {
    nix::mount::mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| MountError::MakePrivate(e).into())
}

/// True once [`enter_private_mount_namespace`] succeeded in this process.
pub fn private_mount_namespace_active() -> bool {
    PRIVATE_MOUNT_NS.load(Ordering::SeqCst)
}

fn thread_count() -> Option<usize> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
}

/// Why the runner's private mount namespace or a run's `/out` tmpfs could not be set
/// up or taken down (shown as `worker: …`, [`BackendError::Mount`]).
#[derive(Debug, thiserror::Error)]
pub enum MountError {
    #[error("unshare(CLONE_NEWNS): {0}")]
    Unshare(#[source] nix::errno::Errno),
    /// `mount --make-rprivate /` in the new namespace failed: it must not be used.
    #[error("mount --make-rprivate /: {0}")]
    MakePrivate(#[source] nix::errno::Errno),
    /// `/out` already holds something: a mount would hide it.
    #[error("{} is not empty; refusing to mount over it", path.display())]
    NotEmpty { path: PathBuf },
    #[error("cannot mount tmpfs on {}: {source}", path.display())]
    Tmpfs {
        path: PathBuf,
        #[source]
        source: nix::errno::Errno,
    },
    #[error("cannot unmount {}: {source}", path.display())]
    Unmount {
        path: PathBuf,
        #[source]
        source: nix::errno::Errno,
    },
}

/// A tmpfs mounted on a run's `/out`, sized to the run's caps. Dropping it unmounts
/// (lazily, so a process still holding a file there cannot keep it busy); keep it
/// until the outputs have been collected, since they live in it.
#[derive(Debug)]
pub struct OutTmpfs {
    path: PathBuf,
    mounted: bool,
}

impl OutTmpfs {
    /// The mount point.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Unmount now and report a failure (drop unmounts too, silently).
    pub fn unmount(mut self) -> Result<(), BackendError> {
        self.mounted = false;
        nix::mount::umount2(&self.path, MntFlags::MNT_DETACH).map_err(|source| {
            MountError::Unmount {
                path: self.path.clone(),
                source,
            }
            .into()
        })
    }
}

impl Drop for OutTmpfs {
    fn drop(&mut self) {
        if self.mounted {
            let _ = nix::mount::umount2(&self.path, MntFlags::MNT_DETACH);
        }
    }
}

/// Page size the tmpfs accounts in.
const PAGE: u64 = 4096;

/// tmpfs `size` for a run's `/out`: `out_bytes` rounded up to pages, plus one page.
/// The kernel charges whole pages (a 1-byte file takes one); the extra page lets a
/// guest write exactly `out_bytes` without ENOSPC, so that reaching past the cap,
/// not reaching it, is what the runner reports as `output_limit`.
pub fn out_tmpfs_size(limits: &Limits) -> u64 {
    limits
        .out_bytes
        .div_ceil(PAGE)
        .saturating_mul(PAGE)
        .saturating_add(PAGE)
}

/// tmpfs `nr_inodes` for a run's `/out`: the root, the `out_files` entries the guest
/// may create, and one more, whose creation proves the guest went past the cap.
pub fn out_tmpfs_inodes(limits: &Limits) -> u64 {
    limits.out_files.saturating_add(2)
}

/// The tmpfs mount options that cap `/out` (mode 0700, owned by our euid).
pub fn out_tmpfs_options(limits: &Limits) -> String {
    format!(
        "size={},nr_inodes={},mode=0700,uid={},gid={}",
        out_tmpfs_size(limits),
        out_tmpfs_inodes(limits),
        nix::unistd::geteuid(),
        nix::unistd::getegid()
    )
}

/// Mount a tmpfs on the (empty) `out_dir` so the kernel enforces the run's `/out`
/// caps while the guest writes: past them it sees ENOSPC. Returns `Ok(None)` when the
/// runner is not in its private mount namespace (a mount would then leak onto the
/// host if the runner died); the backend falls back to polling.
///
/// # Ambient Authority
///
/// Mounts on `out_dir`.
pub fn mount_out_tmpfs(out_dir: &Path, limits: &Limits) -> Result<Option<OutTmpfs>, BackendError> {
    if !private_mount_namespace_active() {
        return Ok(None);
    }
    mount_tmpfs(out_dir, limits).map(Some)
}

fn mount_tmpfs(out_dir: &Path, limits: &Limits) -> Result<OutTmpfs, BackendError> {
    let not_empty = fs::read_dir(out_dir)
        .map_err(|e| {
            BackendError::Io(io::Error::new(
                e.kind(),
                format!("{}: {e}", out_dir.display()),
            ))
        })?
        .next()
        .is_some();
    if not_empty {
        return Err(MountError::NotEmpty {
            path: out_dir.to_owned(),
        }
        .into());
    }
    let options = out_tmpfs_options(limits);
    nix::mount::mount(
        Some("runner-out"),
        out_dir,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        Some(options.as_str()),
    )
    .map_err(|source| MountError::Tmpfs {
        path: out_dir.to_owned(),
        source,
    })?;
    Ok(OutTmpfs {
        path: out_dir.to_path_buf(),
        mounted: true,
    })
}

/// Test helper (the backends' tests use it): a private mount namespace for the calling
/// thread only, so a test can mount without touching the host and without the
/// single-thread requirement. `Ok(None)` when not root or the namespace is refused.
#[doc(hidden)]
pub fn mount_tmpfs_in_thread_namespace(
    out_dir: &Path,
    limits: &Limits,
) -> Result<Option<OutTmpfs>, BackendError> {
    if !nix::unistd::geteuid().is_root() {
        return Ok(None);
    }
    // Only this thread (and children it spawns) see the new namespace; the global flag
    // must not claim it for the process.
    match nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS) {
        Ok(()) => {}
        Err(_) => return Ok(None),
    }
    make_mounts_private()?;
    mount_tmpfs(out_dir, limits).map(Some)
}

/// True when `out_dir` is a tmpfs mount point whose size and inode count are within
/// the run's caps, that is, when the kernel enforces the caps during the run.
pub fn out_caps_enforced(out_dir: &Path, limits: &Limits) -> bool {
    let Ok(fs) = nix::sys::statfs::statfs(out_dir) else {
        return false;
    };
    if fs.filesystem_type() != nix::sys::statfs::TMPFS_MAGIC {
        return false;
    }
    if !is_mount_point(out_dir) {
        return false;
    }
    let Ok(vfs) = nix::sys::statvfs::statvfs(out_dir) else {
        return false;
    };
    let size = vfs.blocks().saturating_mul(vfs.fragment_size());
    size <= out_tmpfs_size(limits) && vfs.files() <= out_tmpfs_inodes(limits)
}

/// True when the tmpfs on `out_dir` has no room left (bytes or inodes).
pub fn tmpfs_full(out_dir: &Path) -> bool {
    nix::sys::statvfs::statvfs(out_dir)
        .map(|vfs| vfs.blocks_free() == 0 || vfs.files_free() == 0)
        .unwrap_or(false)
}

fn is_mount_point(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let (Ok(meta), Ok(parent)) = (fs::symlink_metadata(dir), fs::metadata(dir.join(".."))) else {
        return false;
    };
    meta.dev() != parent.dev() || meta.ino() == parent.ino()
}

/// What a directory tree holds: bytes (apparent file sizes, so a sparse file counts
/// at its full length, as whoever reads it later will pay) and entries (files,
/// directories, symlinks; the root not counted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TreeUsage {
    pub bytes: u64,
    pub entries: u64,
}

impl TreeUsage {
    /// True when this usage is over the run's `/out` caps.
    pub fn over(&self, limits: &Limits) -> bool {
        self.bytes > limits.out_bytes || self.entries > limits.out_files
    }
}

/// Walk `root` without following symlinks and add up what it holds, stopping early
/// once over `limits` (the numbers are then lower bounds that are already over).
/// Entries that vanish during the walk are skipped.
pub fn tree_usage(root: &Path, limits: &Limits) -> io::Result<TreeUsage> {
    let mut usage = TreeUsage::default();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if dir != root && e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for entry in entries {
            let Ok(entry) = entry else { continue };
            let Ok(meta) = entry.metadata() else { continue };
            usage.entries += 1;
            if meta.is_dir() {
                pending.push(entry.path());
            } else {
                usage.bytes = usage.bytes.saturating_add(meta.len());
            }
            if usage.over(limits) {
                return Ok(usage);
            }
        }
    }
    Ok(usage)
}

/// Cut every regular file under `root` larger than `max_bytes` back to exactly
/// `max_bytes`; returns how many were cut. Symlinks are neither followed nor
/// counted, and a file is opened without following one. A file (or directory below
/// `root`) that cannot be cut (or listed) does not stop the walk: the others are
/// still cut, and the first such error is returned at the end.
///
/// The worker's `RLIMIT_FSIZE` lets a write land one byte past the cap so that the
/// runner can see the cap was reached whatever the guest did next (see
/// [`confine_worker`]); that byte is the runner's evidence, not the guest's output,
/// and it is removed here, after the run and before collection, so no artifact is
/// larger than the cap. Call only once the worker has exited: nothing of the guest's
/// can then change the tree under the walk.
pub fn cut_back_to_cap(root: &Path, max_bytes: u64) -> io::Result<u64> {
    use std::os::unix::fs::OpenOptionsExt;
    let cut_one = |path: &Path| -> io::Result<bool> {
        let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
        let file = fs::OpenOptions::new()
            .write(true)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
            .open(path)
            .map_err(named)?;
        if !file.metadata().map_err(named)?.is_file() {
            return Ok(false);
        }
        file.set_len(max_bytes).map_err(named)?;
        Ok(true)
    };
    let mut cut = 0u64;
    let mut first_error = None;
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if dir == root => return Err(e),
            Err(e) => {
                if e.kind() != io::ErrorKind::NotFound {
                    first_error.get_or_insert(e);
                }
                continue;
            }
        };
        for entry in entries {
            let Ok(entry) = entry else { continue };
            // `DirEntry::metadata` does not follow a symlink.
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                pending.push(entry.path());
            } else if meta.is_file() && meta.len() > max_bytes {
                match cut_one(&entry.path()) {
                    Ok(true) => cut += 1,
                    Ok(false) => {}
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                }
            }
        }
    }
    first_error.map_or(Ok(cut), Err)
}

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

/// The first uid (and gid) of the range workers of a root runner run as: a worker gets
/// `WORKER_ID_BASE + its pid` ([`worker_id`]), so no two live workers share one, and
/// none is a uid the host's users or services have (the range starts above the
/// conventional subordinate-id ranges of `/etc/subuid` and ends below 2^31).
pub const WORKER_ID_BASE: u32 = 0x6000_0000;

/// The uid and gid of the worker with process id `pid`: [`WORKER_ID_BASE`] + `pid`
/// (Linux pids are below 2^22).
pub fn worker_id(pid: u32) -> u32 {
    WORKER_ID_BASE + (pid & 0x3f_ffff)
}

/// Applies [`Layer::OwnUid`]: gives the writable run directories (`/out`, the capture
/// directory; their top level only, which the runner made for this run) to the worker's
/// own id, drops every supplementary group, then sets the real, effective and saved gid
/// and uid to it. What the worker still reads (`/in`, guest assets) it reaches through
/// descriptors opened before this (preopens, mounts), and those files are readable by
/// anyone who can reach them; everything the runner owns elsewhere is closed to it by
/// file permissions alone. `Ok` with the id; `Err` when the runner is not root (then
/// the worker keeps the runner's uid).
fn become_own_user(fs: &FsAccess) -> Result<u32, OwnUidError> {
    use nix::unistd::{Gid, Uid};
    if !nix::unistd::geteuid().is_root() {
        return Err(OwnUidError::NotRoot);
    }
    let Some(root) = &fs.run_root else {
        return Err(OwnUidError::NoRunDirectory);
    };
    // Whatever the worker opens by path after the change lies under the run directory:
    // every directory above it must let anyone through.
    for ancestor in root.ancestors().skip(1) {
        let mode = std::fs::metadata(ancestor)
            .map_err(|source| OwnUidError::Inspect {
                path: ancestor.to_owned(),
                source,
            })?
            .permissions()
            .mode();
        if mode & 0o001 == 0 {
            return Err(OwnUidError::NotTraversable {
                root: root.clone(),
                ancestor: ancestor.to_owned(),
                mode,
            });
        }
    }
    let id = worker_id(std::process::id());
    let (uid, gid) = (Uid::from_raw(id), Gid::from_raw(id));
    let give = |path: &Path, owner: Option<Uid>, mode: u32| {
        nix::unistd::fchownat(
            nix::fcntl::AT_FDCWD,
            path,
            owner,
            Some(gid),
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .and_then(|()| {
            nix::sys::stat::fchmodat(
                nix::fcntl::AT_FDCWD,
                path,
                nix::sys::stat::Mode::from_bits_truncate(mode),
                nix::sys::stat::FchmodatFlags::NoFollowSymlink,
            )
        })
        .map_err(|source| OwnUidError::Give {
            path: path.to_owned(),
            id,
            source,
        })
    };
    // The run directory: the worker's group may pass through it, nothing more. Its
    // read directories (/in): the group may read them, not write. Its write
    // directories: the worker's own.
    give(root, None, 0o710)?;
    let in_run = |p: &&PathBuf| p.parent() == Some(root.as_path());
    for dir in fs.read.iter().filter(in_run) {
        give(dir, None, 0o750)?;
    }
    for dir in &fs.write {
        give(dir, Some(uid), 0o700)?;
    }
    nix::unistd::setgroups(&[]).map_err(OwnUidError::SetGroups)?;
    nix::unistd::setresgid(gid, gid, gid)
        .map_err(|source| OwnUidError::SetResGid { id, source })?;
    nix::unistd::setresuid(uid, uid, uid)
        .map_err(|source| OwnUidError::SetResUid { id, source })?;
    Ok(id)
}

/// The host directories a confined worker may still reach by path: read-only (`/in`,
/// a guest's asset directories) and read-write (`/out`, where the worker writes the
/// captures). Everything else on the host is out of reach once [`Layer::Landlock`]
/// applies: an escaped guest could not read the runner's keys or write a crontab.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FsAccess {
    pub read: Vec<PathBuf>,
    pub write: Vec<PathBuf>,
    /// The run's own directory, parent of its `/in`, `/out` and capture directory,
    /// which [`Layer::OwnUid`] opens to the worker's own uid; `None`: that layer does
    /// not apply.
    pub run_root: Option<PathBuf>,
}

impl FsAccess {
    /// What a run of `spec` needs: its `/in`, the program's own host directories
    /// (`host_reads`: a guest's asset directories), its `/out` and its capture directory.
    pub fn for_spec<'a, P>(
        spec: &crate::SandboxSpec<P>,
        host_reads: impl IntoIterator<Item = &'a Path>,
    ) -> Self {
        let mut read = vec![spec.in_dir.clone()];
        read.extend(host_reads.into_iter().map(Path::to_owned));
        let run_root = spec.out_dir.parent().filter(|root| {
            spec.in_dir.parent() == Some(*root) && spec.capture_dir.parent() == Some(*root)
        });
        Self {
            read,
            write: vec![spec.out_dir.clone(), spec.capture_dir.clone()],
            run_root: run_root.map(Path::to_owned),
        }
    }
}

/// Applies the Landlock layer: every filesystem right is handled (denied unless a rule
/// grants it), `fs.read` gets the read rights and `fs.write` all of them; TCP bind and
/// connect are handled with no port allowed; signals and abstract Unix sockets are
/// scoped to the worker's own domain. Best effort over the kernel's ABI: `Ok` names
/// the ABI the kernel enforced (`landlock(abi=7)`), a kernel that enforces nothing is
/// `Err`. A directory that cannot be opened is `Err` (a rule silently missing would
/// only make the run fail later, less clearly).
fn landlock_ruleset(fs: &FsAccess) -> Result<landlock::RulesetCreated, LandlockError> {
    use landlock::{
        ABI, Access, AccessFs, AccessNet, PathBeneath, PathFd, Ruleset, RulesetAttr,
        RulesetCreatedAttr, Scope,
    };
    let abi = ABI::V9;
    let all = AccessFs::from_all(abi);
    let err = LandlockError::Ruleset;
    let mut ruleset = Ruleset::default()
        .handle_access(all)
        .map_err(err)?
        .handle_access(AccessNet::from_all(abi))
        .map_err(err)?
        .scope(Scope::from_all(abi))
        .map_err(err)?
        .create()
        .map_err(err)?;
    for (dirs, rights) in [(&fs.read, AccessFs::from_read(abi)), (&fs.write, all)] {
        for dir in dirs {
            let fd = PathFd::new(dir).map_err(|source| LandlockError::Open {
                path: dir.clone(),
                source,
            })?;
            ruleset = ruleset
                .add_rule(PathBeneath::new(fd, rights))
                .map_err(err)?;
        }
    }
    Ok(ruleset)
}

/// Enforces a ruleset of [`landlock_ruleset`] on the calling process. `Ok` names the ABI
/// the kernel enforced (`landlock(abi=7)`); a kernel that enforces nothing is `Err`.
fn enforce_landlock(ruleset: landlock::RulesetCreated) -> Result<String, LandlockError> {
    use landlock::RulesetStatus;
    let status = ruleset.restrict_self().map_err(LandlockError::Ruleset)?;
    let kernel = kernel_landlock_abi();
    match status.ruleset {
        RulesetStatus::FullyEnforced => Ok(format!("landlock(abi={kernel})")),
        RulesetStatus::PartiallyEnforced => Ok(format!("landlock(abi={kernel}, partial)")),
        RulesetStatus::NotEnforced => Err(LandlockError::NotEnforced),
    }
}

/// The Landlock ABI version the running kernel reports (0: none).
#[allow(unsafe_code)]
fn kernel_landlock_abi() -> i64 {
    use nix::libc;
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_long = 1;
    // SAFETY: with a null attribute pointer and size 0, this flag only asks for the
    // version; no memory is read or written.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    v.max(0)
}

/// Capabilities are per thread: the steps below confine the calling thread and the
/// threads it creates afterwards, so the process must have no other thread. Checked in
/// the same read of `/proc/self/status` that checks the capabilities after a step (a
/// thread alive then was alive during the step; none is started in between).
fn single_thread_in(status: &str) -> Result<(), StatusError> {
    let threads = status
        .lines()
        .find_map(|line| line.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse::<usize>().ok());
    match threads {
        Some(1) => Ok(()),
        threads => Err(StatusError::Threads { threads }),
    }
}

fn read_status() -> Result<String, StatusError> {
    fs::read_to_string("/proc/self/status").map_err(|e| StatusError::Read(Arc::new(e)))
}

/// Empty the capability bounding set (so no exec could ever regain a capability),
/// then check `/proc/self/status` says so: a kernel with capabilities newer than the
/// `caps` crate knows would leave those behind, and that must not count as applied.
fn clear_bounding_set() -> Result<(), LayerError> {
    let cleared = caps::clear(None, caps::CapSet::Bounding).map_err(LayerError::ClearBoundingSet);
    let status = read_status()?;
    single_thread_in(&status)?;
    cleared?;
    Ok(expect_no_capabilities(&status, &["CapBnd"])?)
}

/// Empty the ambient, inheritable, effective and permitted sets (in that order:
/// the effective set is what allows the others to change), then check, in one read
/// of `/proc/self/status`: (the process is single-threaded, the sets are empty).
fn drop_capabilities() -> (Result<(), StatusError>, Result<(), LayerError>) {
    let cleared = [
        caps::CapSet::Ambient,
        caps::CapSet::Inheritable,
        caps::CapSet::Permitted,
    ]
    .into_iter()
    .try_for_each(|set| {
        caps::clear(None, set).map_err(|source| LayerError::ClearCapabilities { set, source })
    });
    let status = match read_status() {
        Ok(status) => status,
        Err(e) => return (Err(e.clone()), Err(e.into())),
    };
    let single = single_thread_in(&status);
    let dropped = single
        .clone()
        .map_err(LayerError::from)
        .and(cleared)
        .and_then(|()| {
            Ok(expect_no_capabilities(
                &status,
                &["CapInh", "CapPrm", "CapEff", "CapAmb"],
            )?)
        });
    (single, dropped)
}

/// `Ok` when each named capability mask of `status` (`/proc/self/status`) is zero.
fn expect_no_capabilities(status: &str, fields: &[&'static str]) -> Result<(), StatusError> {
    for &field in fields {
        let value = status
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .map(str::trim)
            .ok_or(StatusError::NoField(field))?;
        if u64::from_str_radix(value, 16) != Ok(0) {
            return Err(StatusError::StillSet {
                field,
                value: value.to_owned(),
            });
        }
    }
    Ok(())
}

/// Syscalls the worker never needs once confined and that a guest escaping into it
/// could abuse: debugging and reading other processes, mounting and namespaces (the
/// way back out of the confinement), kernel attack surface (BPF, perf, io_uring,
/// userfaultfd, keyrings, file handles), system administration, and starting any
/// other program. Each fails with EPERM. Measured with strace: after confinement
/// both workers use only memory, futex, file, epoll, rlimit and thread calls.
pub const DENIED_SYSCALLS: &[(&str, i64)] = {
    use nix::libc::*;
    &[
        ("ptrace", SYS_ptrace),
        ("process_vm_readv", SYS_process_vm_readv),
        ("process_vm_writev", SYS_process_vm_writev),
        ("pidfd_getfd", SYS_pidfd_getfd),
        ("mount", SYS_mount),
        ("umount2", SYS_umount2),
        ("pivot_root", SYS_pivot_root),
        ("chroot", SYS_chroot),
        ("fsopen", SYS_fsopen),
        ("fsconfig", SYS_fsconfig),
        ("fsmount", SYS_fsmount),
        ("fspick", SYS_fspick),
        ("move_mount", SYS_move_mount),
        ("open_tree", SYS_open_tree),
        ("mount_setattr", SYS_mount_setattr),
        ("unshare", SYS_unshare),
        ("setns", SYS_setns),
        ("bpf", SYS_bpf),
        ("perf_event_open", SYS_perf_event_open),
        ("userfaultfd", SYS_userfaultfd),
        ("keyctl", SYS_keyctl),
        ("add_key", SYS_add_key),
        ("request_key", SYS_request_key),
        ("kexec_load", SYS_kexec_load),
        ("kexec_file_load", SYS_kexec_file_load),
        ("init_module", SYS_init_module),
        ("finit_module", SYS_finit_module),
        ("delete_module", SYS_delete_module),
        ("reboot", SYS_reboot),
        ("swapon", SYS_swapon),
        ("swapoff", SYS_swapoff),
        ("acct", SYS_acct),
        ("quotactl", SYS_quotactl),
        ("syslog", SYS_syslog),
        ("io_uring_setup", SYS_io_uring_setup),
        ("io_uring_enter", SYS_io_uring_enter),
        ("io_uring_register", SYS_io_uring_register),
        ("open_by_handle_at", SYS_open_by_handle_at),
        ("name_to_handle_at", SYS_name_to_handle_at),
        ("settimeofday", SYS_settimeofday),
        ("clock_settime", SYS_clock_settime),
        ("clock_adjtime", SYS_clock_adjtime),
        ("adjtimex", SYS_adjtimex),
        ("execve", SYS_execve),
        ("execveat", SYS_execveat),
        #[cfg(target_arch = "x86_64")]
        ("iopl", SYS_iopl),
        #[cfg(target_arch = "x86_64")]
        ("ioperm", SYS_ioperm),
    ]
};

/// `clone` flags that create namespaces: denied like `unshare`.
const NAMESPACE_CLONE_FLAGS: [nix::libc::c_int; 7] = [
    nix::libc::CLONE_NEWNS,
    nix::libc::CLONE_NEWUSER,
    nix::libc::CLONE_NEWNET,
    nix::libc::CLONE_NEWPID,
    nix::libc::CLONE_NEWIPC,
    nix::libc::CLONE_NEWUTS,
    nix::libc::CLONE_NEWCGROUP,
];

/// Compile the worker's seccomp filters ([`install_seccomp`] installs them). Two
/// filters:
/// - EPERM for [`DENIED_SYSCALLS`], for `socket` of any family but `AF_UNIX` (the
///   worker's runtime uses a Unix socket pair; nothing needs IP, netlink or packet
///   sockets), and for `clone` with any namespace flag;
/// - ENOSYS for `clone3`, whose flags live in memory a filter cannot read: glibc then
///   falls back to `clone`, which the first filter can judge (as Docker's profile does).
///
/// Architectures other than x86_64, aarch64 and riscv64 fail here (named), so the
/// layer is reported as not applied rather than assumed.
fn compile_seccomp() -> Result<[seccompiler::BpfProgram; 2], SeccompError> {
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|_| SeccompError::Architecture(std::env::consts::ARCH))?;
    let cond = |arg: u8, op: SeccompCmpOp, value: u64| {
        SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).map_err(SeccompError::Rule)
    };
    let rule = |c: SeccompCondition| SeccompRule::new(vec![c]).map_err(SeccompError::Rule);

    let mut deny: std::collections::BTreeMap<i64, Vec<SeccompRule>> = DENIED_SYSCALLS
        .iter()
        .map(|&(_, nr)| (nr, Vec::new()))
        .collect();
    let unix = nix::libc::AF_UNIX as u64;
    deny.insert(
        nix::libc::SYS_socket,
        vec![rule(cond(0, SeccompCmpOp::Ne, unix)?)?],
    );
    let mut clone_rules = Vec::new();
    for flag in NAMESPACE_CLONE_FLAGS {
        let flag = flag as u64;
        clone_rules.push(rule(cond(0, SeccompCmpOp::MaskedEq(flag), flag)?)?);
    }
    deny.insert(nix::libc::SYS_clone, clone_rules);
    let eperm = SeccompAction::Errno(nix::libc::EPERM as u32);
    let enosys = SeccompAction::Errno(nix::libc::ENOSYS as u32);

    let compile = |rules, action| -> Result<BpfProgram, SeccompError> {
        SeccompFilter::new(rules, SeccompAction::Allow, action, arch)
            .and_then(BpfProgram::try_from)
            .map_err(SeccompError::Compile)
    };
    let denied = compile(deny, eperm)?;
    let clone3 = compile(
        [(nix::libc::SYS_clone3, Vec::new())].into_iter().collect(),
        enosys,
    )?;
    Ok([denied, clone3])
}

/// Install the filters of [`compile_seccomp`] on every thread; returns how many
/// syscalls are denied outright.
fn install_seccomp(filters: &[seccompiler::BpfProgram; 2]) -> Result<usize, SeccompError> {
    for filter in filters {
        seccompiler::apply_filter_all_threads(filter).map_err(SeccompError::Install)?;
    }
    Ok(DENIED_SYSCALLS.len())
}

/// Set a limit, never above the current hard limit (an outer sandbox may be stricter).
fn lower_rlimit(resource: Resource, soft: u64, hard: u64) -> nix::Result<()> {
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

/// Set by [`on_sigxfsz`]: the kernel refused a write or truncate of this process past
/// `RLIMIT_FSIZE`.
static FSIZE_REFUSED: AtomicBool = AtomicBool::new(false);

/// The SIGXFSZ handler: records the refusal and returns, so the call that raised it
/// fails with EFBIG instead of the worker dying. An atomic store is all it does, which
/// is async-signal-safe.
extern "C" fn on_sigxfsz(_signal: nix::libc::c_int) {
    FSIZE_REFUSED.store(true, Ordering::SeqCst);
}

#[allow(unsafe_code)]
fn record_sigxfsz() -> nix::Result<()> {
    use nix::sys::signal::{SaFlags, SigAction, SigSet, sigaction};
    // The kernel sends SIGXFSZ to the thread whose call it refuses, as that call
    // returns EFBIG; SA_RESTART makes sure the handler can never turn any other call
    // into EINTR.
    let action = SigAction::new(
        SigHandler::Handler(on_sigxfsz),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    // SAFETY: the handler only stores to an atomic (async-signal-safe), and it is
    // installed before any guest code runs; the previous action is not needed.
    unsafe { sigaction(Signal::SIGXFSZ, &action) }.map(drop)
}

/// True when, since the last call, the kernel refused a write or truncate of this
/// process past `RLIMIT_FSIZE` (SIGXFSZ), that is, the guest tried to make a file under
/// `/out` larger than the cap allows. Reset by the call. The guest cannot clear it:
/// it is the kernel's signal, recorded in the worker, whatever the guest did about
/// the EFBIG it got. Read it as soon as the guest is done (before
/// [`relax_after_guest`]).
pub fn take_fsize_refusal() -> bool {
    FSIZE_REFUSED.swap(false, Ordering::SeqCst)
}

/// The confinement probe's fixed limits ([`probe_main`]): 64 MiB of memory, 5 s of wall
/// clock, 3 s of CPU, 1 MiB for stdout, stderr and `/out`, 16 entries in `/out`. Small
/// and short, they are also what unit tests run under when they test none of a run's
/// limits (changing one of them with struct-update syntax when they do).
pub const PROBE_LIMITS: Limits = Limits {
    memory_bytes: 64 << 20,
    wall: Duration::from_secs(5),
    cpu: Duration::from_secs(3),
    stdout_bytes: 1 << 20,
    stderr_bytes: 1 << 20,
    out_bytes: 1 << 20,
    out_files: 16,
};

/// `runner __confinement-probe [POLICY.toml]` (the runner loads the policy and passes
/// its `[confinement]` table): applies [`confine_worker`] to this
/// process with [`PROBE_LIMITS`], exactly as a worker does before it runs a
/// guest, then prints what the kernel reports (one JSON object): the steps applied and
/// skipped, the layers that failed, `/proc/self/limits`, `NoNewPrivs`, the capability
/// masks, the seccomp mode, the network interfaces and routes it can see, and the errno
/// of calls the filter must deny (and of two it must allow), what a write past
/// `RLIMIT_FSIZE` does (`fsize`, given a write directory), and how long
/// `confine_worker` took (`confine_us`: the request's half, what a warm worker still
/// does after its request arrives) after [`EarlyConfinement::take`]
/// (`early_confine_us`: what a warm worker does before). Then it checks the layers
/// against the policy's `[confinement]` table (the built-in one, or POLICY.toml) like a
/// worker: exit 0 when the run could go on, 3 with the refusal on stderr when not.
/// Tests use it to prove each layer is in force; it runs no guest.
///
/// Limits: [`PROBE_LIMITS`], address space 2 GiB.
pub fn probe_main(confinement: &ConfinementPolicy) -> i32 {
    let limits = PROBE_LIMITS;
    let dir = |var: &str| crate::env::var_os(var).map(PathBuf::from);
    let (read_dir, write_dir) = (dir("RUNNER_PROBE_READ_DIR"), dir("RUNNER_PROBE_WRITE_DIR"));
    // Unlike a worker, the probe keeps its own /proc/self readable: it reports from
    // there (limits, status, network). Nothing else is added.
    let fs_access = FsAccess {
        read: read_dir
            .iter()
            .cloned()
            .chain([PathBuf::from("/proc/self")])
            .collect(),
        write: write_dir.iter().cloned().collect(),
        run_root: write_dir
            .as_deref()
            .and_then(Path::parent)
            .filter(|root| read_dir.as_deref().and_then(Path::parent) == Some(*root))
            .map(Path::to_owned),
    };
    let started = std::time::Instant::now();
    let early = EarlyConfinement::take();
    let early_us = started.elapsed().as_micros();
    let started = std::time::Instant::now();
    let c = confine_worker(early, &limits, Some(2 << 30), &fs_access);
    let confine_us = started.elapsed().as_micros();
    let read = |p: &str| fs::read_to_string(p).unwrap_or_default();
    let interfaces: Vec<String> = read("/proc/net/dev")
        .lines()
        .skip(2)
        .filter_map(|l| l.split(':').next().map(|n| n.trim().to_owned()))
        .collect();
    // Usable routes: a fresh namespace lists IPv6 "reject" entries (RTF_REJECT, 0x200),
    // which route nothing.
    const RTF_REJECT: u32 = 0x200;
    let usable = |flags: Option<&str>| {
        flags
            .and_then(|f| u32::from_str_radix(f, 16).ok())
            .is_some_and(|f| f & RTF_REJECT == 0)
    };
    let routes = read("/proc/net/route")
        .lines()
        .skip(1)
        .filter(|l| usable(l.split_whitespace().nth(3)))
        .count()
        + read("/proc/net/ipv6_route")
            .lines()
            .filter(|l| usable(l.split_whitespace().nth(8)))
            .count();
    let status = read("/proc/self/status");
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(|v| v.trim().to_owned())
    };
    let report = serde_json::json!({
        "applied": c.applied,
        "skipped": c.skipped,
        "failed": c.failed.iter().map(|(l, why)| serde_json::json!({"layer": l.as_str(), "reason": why})).collect::<Vec<_>>(),
        "provenance": c.provenance(),
        "limits": read("/proc/self/limits"),
        "no_new_privs": field("NoNewPrivs"),
        "capabilities": {
            "inheritable": field("CapInh"),
            "permitted": field("CapPrm"),
            "effective": field("CapEff"),
            "bounding": field("CapBnd"),
            "ambient": field("CapAmb"),
        },
        "seccomp": field("Seccomp"),
        "uid": field("Uid"),
        "gid": field("Gid"),
        "groups": field("Groups"),
        "interfaces": interfaces,
        "routes": routes,
        "syscalls": probe_syscalls(),
        "filesystem": probe_filesystem(read_dir.as_deref(), write_dir.as_deref()),
        "fsize": write_dir.as_deref().map(|w| probe_fsize(&w.join("fsize"), limits.out_bytes)),
        "confine_us": confine_us,
        "early_confine_us": early_us,
    });
    println!("{report}");
    match c.check(confinement) {
        Ok(()) => 0,
        Err(refusal) => {
            eprintln!("runner __confinement-probe: {refusal}");
            3
        }
    }
}

/// Tries, after confinement, to reach files the Landlock layer must keep out of reach
/// and the run directories it must leave open (`$RUNNER_PROBE_READ_DIR` holding a file
/// `input`, `$RUNNER_PROBE_WRITE_DIR`); maps each attempt to `"ok"` or its errno name.
fn probe_filesystem(read_dir: Option<&Path>, write_dir: Option<&Path>) -> serde_json::Value {
    use std::fs::OpenOptions;
    let errno = |r: io::Result<()>| match r {
        Ok(()) => "ok".to_owned(),
        Err(e) => e.raw_os_error().map_or_else(
            || e.to_string(),
            |n| format!("{:?}", nix::errno::Errno::from_raw(n)),
        ),
    };
    let create = |p: &Path| {
        errno(
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(p)
                .map(drop),
        )
    };
    let mut report = serde_json::json!({
        "read_etc_passwd": errno(fs::read("/etc/passwd").map(drop)),
        "list_root": errno(fs::read_dir("/").map(drop)),
        "create_in_tmp": create(&std::env::temp_dir().join(format!("runner-probe-{}", std::process::id()))),
        "read_own_exe": errno(fs::read("/proc/self/exe").map(drop)),
    });
    if let Some(r) = read_dir {
        report["read_in_read_dir"] = errno(fs::read(r.join("input")).map(drop)).into();
        report["create_in_read_dir"] = create(&r.join("new")).into();
        report["list_read_dir"] = errno(fs::read_dir(r).map(drop)).into();
    }
    if let Some(w) = write_dir {
        report["create_in_write_dir"] = create(&w.join("new")).into();
        report["mkdir_in_write_dir"] = errno(fs::create_dir(w.join("sub"))).into();
        report["remove_in_write_dir"] = errno(fs::remove_file(w.join("new"))).into();
        // A file the runner owns (the test puts one there, mode 0644): Landlock allows
        // writing in this directory, so only the worker's own uid can refuse it.
        let foreign = w.join("runner-owned");
        if foreign.exists() {
            report["write_runner_owned_in_write_dir"] =
                errno(OpenOptions::new().append(true).open(&foreign).map(drop)).into();
            report["chmod_runner_owned_in_write_dir"] = errno(fs::set_permissions(
                &foreign,
                fs::Permissions::from_mode(0o666),
            ))
            .into();
        }
    }
    report
}

/// Writes past `RLIMIT_FSIZE` in `$RUNNER_PROBE_WRITE_DIR` as a guest would (one
/// write of two bytes past the `/out` cap `cap`, then one more byte), and reports what
/// landed, the errno of the second write and whether the SIGXFSZ handler recorded a
/// refusal after each. The file is removed again.
fn probe_fsize(path: &Path, cap: u64) -> serde_json::Value {
    use std::io::Write;
    let errno = |e: io::Error| {
        e.raw_os_error().map_or_else(
            || e.to_string(),
            |n| format!("{:?}", nix::errno::Errno::from_raw(n)),
        )
    };
    let stale = take_fsize_refusal();
    let mut file = match fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
    {
        Ok(file) => file,
        Err(e) => return serde_json::json!({ "open": errno(e) }),
    };
    let size = usize::try_from(cap.saturating_add(2)).unwrap_or(usize::MAX);
    let landed = file.write(&vec![0u8; size]).map_err(errno);
    let recorded_after_first = take_fsize_refusal();
    let next = match file.write(b"x") {
        Ok(n) => format!("wrote {n}"),
        Err(e) => errno(e),
    };
    let recorded = take_fsize_refusal();
    drop(file);
    let _ = fs::remove_file(path);
    serde_json::json!({
        "stale": stale,
        "landed": landed.map_or_else(serde_json::Value::from, serde_json::Value::from),
        "recorded_after_first": recorded_after_first,
        "next_write": next,
        "recorded": recorded,
    })
}

/// Tries calls the seccomp filter must deny, and two it must allow, after
/// confinement; maps each to `"ok"` or its errno name. None of them can harm the
/// probe when it succeeds: the namespaces would be the probe's own, and `umount2` and
/// `execve` name paths that do not exist, so without the filter they fail with ENOENT
/// (the filter answers EPERM before any path is looked up).
fn probe_syscalls() -> serde_json::Value {
    use nix::errno::Errno;
    let show = |r: Result<(), Errno>| match r {
        Ok(()) => "ok".to_owned(),
        Err(e) => format!("{e:?}"),
    };
    let io = |r: io::Result<()>| match r {
        Ok(()) => "ok".to_owned(),
        Err(e) => e
            .raw_os_error()
            .map_or_else(|| e.to_string(), |n| format!("{:?}", Errno::from_raw(n))),
    };
    let thread = std::thread::Builder::new()
        .spawn(|| ())
        .and_then(|t| t.join().map_err(|_| io::Error::other("thread panicked")));
    let exec = nix::unistd::execv(c"/nonexistent/runner-probe-exec", &[c"runner-probe-exec"]);
    serde_json::json!({
        "unshare_newuser": show(nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWUSER)),
        "unshare_newns": show(nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS)),
        "umount2": show(nix::mount::umount2("/nonexistent/runner-probe", MntFlags::empty())),
        "socket_inet": io(std::net::UdpSocket::bind("127.0.0.1:0").map(drop)),
        "socket_unix": io(std::os::unix::net::UnixDatagram::unbound().map(drop)),
        "thread_spawn": io(thread),
        "execve": show(exec.map(drop)),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn limits(out_bytes: u64, out_files: u64) -> Limits {
        Limits {
            out_bytes,
            out_files,
            ..PROBE_LIMITS
        }
    }

    #[test]
    fn rlimit_cpu_rounds_up_and_adds_the_slack() {
        assert_eq!(rlimit_cpu_secs(Duration::from_millis(1)), 2);
        assert_eq!(rlimit_cpu_secs(Duration::from_secs(2)), 3);
        assert_eq!(rlimit_cpu_secs(Duration::from_millis(2001)), 4);
        assert_eq!(rlimit_cpu_secs(Duration::ZERO), 2);
    }

    #[test]
    fn private_mount_namespace_refuses_a_threaded_process() {
        // The test harness runs threads: entering would move this thread only.
        assert_eq!(thread_count().map(|n| n > 1), Some(true));
        assert!(!enter_private_mount_namespace().unwrap());
        assert!(!private_mount_namespace_active());
        let dir = tempfile::tempdir().unwrap();
        assert!(
            mount_out_tmpfs(dir.path(), &limits(1 << 20, 4))
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn tree_usage_counts_and_stops_early() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a"), b"12345").unwrap();
        fs::create_dir(dir.path().join("d")).unwrap();
        fs::write(dir.path().join("d/b"), b"123").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("l")).unwrap();
        let usage = tree_usage(dir.path(), &limits(1000, 100)).unwrap();
        assert_eq!(usage.entries, 4);
        // The symlink counts its own length, never its target's.
        assert_eq!(usage.bytes, 5 + 3 + "/etc/passwd".len() as u64);
        assert!(!usage.over(&limits(1000, 100)));
        assert!(
            tree_usage(dir.path(), &limits(1000, 2))
                .unwrap()
                .over(&limits(1000, 2))
        );
        assert!(
            tree_usage(dir.path(), &limits(4, 100))
                .unwrap()
                .over(&limits(4, 100))
        );
    }

    #[test]
    fn cut_back_to_cap_trims_what_is_over_and_follows_no_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        fs::create_dir_all(out.join("d")).unwrap();
        fs::write(out.join("over"), b"0123456789").unwrap();
        fs::write(out.join("at"), b"01234").unwrap();
        fs::write(out.join("d/deep"), b"0123456").unwrap();
        fs::write(outside.path().join("target"), b"0123456789").unwrap();
        std::os::unix::fs::symlink(outside.path().join("target"), out.join("link")).unwrap();
        std::os::unix::fs::symlink(outside.path(), out.join("dirlink")).unwrap();
        assert_eq!(cut_back_to_cap(&out, 5).unwrap(), 2);
        assert_eq!(fs::read(out.join("over")).unwrap(), b"01234");
        assert_eq!(fs::read(out.join("at")).unwrap(), b"01234");
        assert_eq!(fs::read(out.join("d/deep")).unwrap(), b"01234");
        assert_eq!(
            fs::read(outside.path().join("target")).unwrap(),
            b"0123456789"
        );
        assert_eq!(cut_back_to_cap(&out, 5).unwrap(), 0);
    }

    #[test]
    fn sparse_file_counts_at_full_length() {
        let dir = tempfile::tempdir().unwrap();
        let f = fs::File::create(dir.path().join("sparse")).unwrap();
        f.set_len(1 << 30).unwrap();
        assert!(
            tree_usage(dir.path(), &limits(1 << 20, 10))
                .unwrap()
                .over(&limits(1 << 20, 10))
        );
    }

    #[test]
    fn tmpfs_enforces_caps_in_a_thread_namespace() {
        let dir = tempfile::tempdir().unwrap();
        let limits = limits(64 << 10, 3);
        // A plain directory is not a capped mount.
        assert!(!out_caps_enforced(dir.path(), &limits));
        let handle = {
            let path = dir.path().to_path_buf();
            let limits = limits.clone();
            // A dedicated thread: the namespace change stays with it.
            std::thread::spawn(move || {
                let mount = mount_tmpfs_in_thread_namespace(&path, &limits).unwrap()?;
                assert!(out_caps_enforced(&path, &limits));
                // Exactly the caps fit: 3 entries, 64 KiB (empty files take no page).
                fs::write(path.join("f0"), vec![0u8; 64 << 10]).unwrap();
                fs::write(path.join("f1"), b"").unwrap();
                fs::write(path.join("f2"), b"").unwrap();
                assert!(!tmpfs_full(&path));
                assert!(!tree_usage(&path, &limits).unwrap().over(&limits));
                // One entry more still fits (and shows as over); then ENOSPC.
                fs::write(path.join("f3"), b"").unwrap();
                assert!(tree_usage(&path, &limits).unwrap().over(&limits));
                let fourth = fs::write(path.join("f4"), b"x").unwrap_err();
                let big = fs::write(path.join("f0"), vec![0u8; 128 << 10]).unwrap_err();
                assert!(tmpfs_full(&path));
                mount.unmount().unwrap();
                Some((fourth.raw_os_error(), big.raw_os_error()))
            })
        };
        if let Some((fourth, big)) = handle.join().unwrap() {
            assert_eq!(fourth, Some(libc_enospc()));
            assert_eq!(big, Some(libc_enospc()));
        }
        // The mount never existed in this thread's namespace.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    use nix::errno::Errno;

    fn libc_enospc() -> i32 {
        nix::errno::Errno::ENOSPC as i32
    }

    fn failed(layers: Vec<(Layer, LayerError)>) -> WorkerConfinement {
        let mut c = WorkerConfinement::default();
        c.record(Layer::NoNewPrivs, "no_new_privs".into(), Ok(()));
        for (layer, why) in layers {
            c.record(layer, layer.as_str().into(), Err(why));
        }
        c
    }

    #[test]
    fn a_required_layer_that_failed_refuses_naming_it_and_the_reason() {
        let policy = ConfinementPolicy::default();
        let c = failed(vec![(
            Layer::Seccomp,
            SeccompError::Architecture("s390x").into(),
        )]);
        let err = c.check(&policy).unwrap_err();
        assert_eq!(err.layer, Layer::Seccomp);
        let err = err.to_string();
        assert!(err.contains("`seccomp` is required"), "{err}");
        assert!(err.contains("s390x"), "{err}");
        // The same failure of an optional layer lets the run go on, and says so.
        let lenient = ConfinementPolicy {
            seccomp: Requirement::Optional,
            ..policy
        };
        assert!(c.check(&lenient).is_ok());
        assert_eq!(
            c.provenance(),
            vec![
                "no_new_privs".to_owned(),
                "not applied: seccomp (no seccomp filter for architecture s390x)".to_owned()
            ]
        );
    }

    #[test]
    fn default_policy_lets_only_the_root_only_and_kernel_dependent_layers_fail() {
        let policy = ConfinementPolicy::default();
        let c = failed(vec![
            (Layer::NetNamespace, Errno::EPERM.into()),
            (Layer::CapabilityBoundingSet, Errno::EPERM.into()),
            (Layer::Landlock, LandlockError::NotEnforced.into()),
            (Layer::OwnUid, OwnUidError::NotRoot.into()),
        ]);
        assert!(c.check(&policy).is_ok());
        for layer in Layer::ALL {
            let c = failed(vec![(layer, Errno::EPERM.into())]);
            let optional = matches!(
                layer,
                Layer::NetNamespace
                    | Layer::CapabilityBoundingSet
                    | Layer::Landlock
                    | Layer::OwnUid
            );
            assert_eq!(c.check(&policy).is_ok(), optional, "{layer:?}");
        }
    }

    #[test]
    fn a_failed_step_of_a_layer_fails_the_layer_once() {
        let mut c = WorkerConfinement::default();
        c.record(Layer::Rlimits, "rlimit_core=0".into(), Ok(()));
        c.record(
            Layer::Rlimits,
            "rlimit_as=1".into(),
            Err(Errno::EPERM.into()),
        );
        c.record(
            Layer::Rlimits,
            "rlimit_fsize=2".into(),
            Err(Errno::EINVAL.into()),
        );
        assert_eq!(
            c.failed,
            vec![(
                Layer::Rlimits,
                "rlimit_as=1: EPERM: Operation not permitted".to_owned()
            )]
        );
        assert_eq!(c.skipped.len(), 2);
        assert!(c.check(&ConfinementPolicy::default()).is_err());
    }

    /// The runner's mount errors read as the messages they replaced, under `worker: `.
    #[test]
    fn mount_errors_keep_their_text() {
        let cases = [
            (
                MountError::Unshare(Errno::EPERM),
                "unshare(CLONE_NEWNS): EPERM: Operation not permitted",
            ),
            (
                MountError::MakePrivate(Errno::EINVAL),
                "mount --make-rprivate /: EINVAL: Invalid argument",
            ),
            (
                MountError::NotEmpty {
                    path: "/r/out".into(),
                },
                "/r/out is not empty; refusing to mount over it",
            ),
            (
                MountError::Tmpfs {
                    path: "/r/out".into(),
                    source: Errno::EPERM,
                },
                "cannot mount tmpfs on /r/out: EPERM: Operation not permitted",
            ),
            (
                MountError::Unmount {
                    path: "/r/out".into(),
                    source: Errno::EBUSY,
                },
                "cannot unmount /r/out: EBUSY: Device or resource busy",
            ),
        ];
        for (error, text) in cases {
            assert_eq!(
                BackendError::from(error).to_string(),
                format!("worker: {text}")
            );
        }
    }

    /// The syscall list below is what strace showed on x86_64.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_deny_list_names_each_syscall_once_and_spares_what_the_workers_use() {
        let mut numbers: Vec<i64> = DENIED_SYSCALLS.iter().map(|&(_, n)| n).collect();
        numbers.sort_unstable();
        numbers.dedup();
        assert_eq!(numbers.len(), DENIED_SYSCALLS.len());
        // Seen in strace of both workers after confinement: none may be denied.
        use nix::libc::*;
        for used in [
            SYS_futex,
            SYS_mmap,
            SYS_munmap,
            SYS_mprotect,
            SYS_madvise,
            SYS_openat,
            SYS_openat2,
            SYS_read,
            SYS_write,
            SYS_pread64,
            SYS_pwrite64,
            SYS_close,
            SYS_statx,
            SYS_getdents64,
            SYS_epoll_wait,
            SYS_epoll_ctl,
            SYS_epoll_create1,
            SYS_eventfd2,
            SYS_socketpair,
            SYS_prlimit64,
            SYS_getrusage,
            SYS_prctl,
            SYS_sigaltstack,
            SYS_rt_sigprocmask,
            SYS_rt_sigaction,
            SYS_exit,
            SYS_exit_group,
            SYS_getrandom,
            SYS_readlinkat,
            SYS_fcntl,
            SYS_brk,
            SYS_clone,
            SYS_set_robust_list,
            SYS_rseq,
            SYS_gettid,
            SYS_sched_getaffinity,
        ] {
            assert!(
                !numbers.contains(&used),
                "syscall {used} is used by the workers"
            );
        }
    }
}
