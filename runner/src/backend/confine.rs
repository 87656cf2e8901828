//! Operating-system confinement around a guest run: the worker's resource limits and
//! namespaces, the runner's private mount namespace, and the caps on `/out`.
//!
//! Two processes use this module:
//! - the runner, once at startup ([`enter_private_mount_namespace`], while it is still
//!   single-threaded) and per run ([`mount_out_tmpfs`], [`out_caps_enforced`],
//!   [`tree_usage`]);
//! - the worker, before it runs the guest ([`confine_worker`]).
//!
//! Every layer is recorded by name when it applied; a layer that could not be applied
//! is left out of the record (and said on the worker's stderr), never claimed.

use super::{BackendError, Limits};
use nix::mount::{MntFlags, MsFlags};
use nix::sys::resource::{Resource, getrlimit, setrlimit};
use nix::sys::signal::{SigHandler, Signal};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Open files the worker may hold. The guest's open files count here too; CPython
/// needs fewer than ten to start.
pub const WORKER_NOFILE: u64 = 64;

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
        Err(e) => return Err(BackendError::Worker(format!("unshare(CLONE_NEWNS): {e}"))),
    }
    // Without this, mounts made here would still propagate to the host's namespace
    // (most systems mount / shared). Failing here leaves a namespace we must not use.
    nix::mount::mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| BackendError::Worker(format!("mount --make-rprivate /: {e}")))?;
    PRIVATE_MOUNT_NS.store(true, Ordering::SeqCst);
    Ok(true)
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
        nix::mount::umount2(&self.path, MntFlags::MNT_DETACH).map_err(|e| {
            BackendError::Worker(format!("cannot unmount {}: {e}", self.path.display()))
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
        return Err(BackendError::Worker(format!(
            "{} is not empty; refusing to mount over it",
            out_dir.display()
        )));
    }
    let options = out_tmpfs_options(limits);
    nix::mount::mount(
        Some("runner-out"),
        out_dir,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        Some(options.as_str()),
    )
    .map_err(|e| {
        BackendError::Worker(format!("cannot mount tmpfs on {}: {e}", out_dir.display()))
    })?;
    Ok(OutTmpfs {
        path: out_dir.to_path_buf(),
        mounted: true,
    })
}

/// Test helper: a private mount namespace for the calling thread only, so a test can
/// mount without touching the host and without the single-thread requirement.
#[cfg(test)]
pub(crate) fn mount_tmpfs_in_thread_namespace(
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
    nix::mount::mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| BackendError::Worker(format!("mount --make-rprivate /: {e}")))?;
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

/// What [`confine_worker`] did.
#[derive(Debug, Clone, Default)]
pub struct WorkerConfinement {
    /// Layers that applied, by name (recorded in `Outcome::confinement`).
    pub applied: Vec<String>,
    /// Layers that could not be applied, with the reason (said on stderr).
    pub skipped: Vec<String>,
    /// `RLIMIT_FSIZE` hard limit, when set: the worker raises its soft limit to it
    /// after the guest has run, to write the captured stdout/stderr.
    pub fsize_hard: Option<u64>,
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

/// Confine the worker process before it runs the guest: resource limits, no core
/// dumps, a network namespace with no interfaces, no new privileges, and death with
/// the parent. Call while the worker is single-threaded (before the async runtime
/// starts), after the precompiled module is loaded (loading may need file-size room).
///
/// # Ambient Authority
///
/// Changes the limits, namespaces and flags of the calling process.
pub fn confine_worker(limits: &Limits, address_space: Option<u64>) -> WorkerConfinement {
    let mut c = WorkerConfinement::default();
    let mut step = |name: String, result: nix::Result<()>| match result {
        Ok(()) => c.applied.push(name),
        Err(e) => c.skipped.push(format!("{name}: {e}")),
    };

    step(
        "pdeathsig=SIGKILL".into(),
        nix::sys::prctl::set_pdeathsig(Signal::SIGKILL),
    );
    step(
        "rlimit_core=0".into(),
        setrlimit(Resource::RLIMIT_CORE, 0, 0),
    );
    step(
        format!("rlimit_nofile={WORKER_NOFILE}"),
        lower_rlimit(Resource::RLIMIT_NOFILE, WORKER_NOFILE, WORKER_NOFILE),
    );
    let cpu = rlimit_cpu_secs(limits.cpu);
    step(
        format!("rlimit_cpu={cpu}s"),
        lower_rlimit(Resource::RLIMIT_CPU, cpu, cpu + 1),
    );
    if let Some(bytes) = address_space {
        step(
            format!("rlimit_as={bytes}"),
            lower_rlimit(Resource::RLIMIT_AS, bytes, bytes),
        );
    }
    // Past RLIMIT_FSIZE the kernel sends SIGXFSZ, whose default action kills the
    // worker; ignored, the guest's write fails with EFBIG instead (an I/O error it
    // sees, like ENOSPC on the tmpfs).
    // One byte over the cap is allowed, so a file that reached past the cap shows
    // as over it afterwards (and one of exactly `out_bytes` does not).
    let fsize_soft = limits.out_bytes.saturating_add(1);
    let fsize_hard = fsize_soft.max(limits.stdout_bytes).max(limits.stderr_bytes);
    let fsize = ignore_sigxfsz()
        .and_then(|()| lower_rlimit(Resource::RLIMIT_FSIZE, fsize_soft, fsize_hard));
    if fsize.is_ok() {
        c.fsize_hard = Some(fsize_hard);
    }
    step(format!("rlimit_fsize={fsize_soft}"), fsize);
    step(
        "net_namespace".into(),
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET),
    );
    step("no_new_privs".into(), nix::sys::prctl::set_no_new_privs());
    c
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

#[allow(unsafe_code)]
fn ignore_sigxfsz() -> nix::Result<()> {
    // SAFETY: installing SIG_IGN runs no code in signal context, so none of the
    // async-signal-safety hazards of a Rust handler apply.
    unsafe { nix::sys::signal::signal(Signal::SIGXFSZ, SigHandler::SigIgn) }.map(drop)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn limits(out_bytes: u64, out_files: u64) -> Limits {
        Limits {
            memory_bytes: 64 << 20,
            wall: Duration::from_secs(5),
            cpu: Duration::from_secs(5),
            stdout_bytes: 1 << 20,
            stderr_bytes: 1 << 20,
            out_bytes,
            out_files,
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

    fn libc_enospc() -> i32 {
        nix::errno::Errno::ENOSPC as i32
    }
}

/// `runner __confinement-probe`: applies [`confine_worker`] to this process with the
/// fixed test limits below, exactly as a worker does before it runs a guest, then
/// prints what the kernel reports (one JSON object): the layers applied and skipped,
/// `/proc/self/limits`, `NoNewPrivs`, the network interfaces and routes it can see.
/// Tests use it to prove each layer is in force; it runs no guest.
///
/// Limits: CPU 3 s, `/out` 1 MiB, stdout/stderr 1 MiB, address space 2 GiB.
pub fn probe_main() -> i32 {
    let limits = Limits {
        memory_bytes: 64 << 20,
        wall: Duration::from_secs(5),
        cpu: Duration::from_secs(3),
        stdout_bytes: 1 << 20,
        stderr_bytes: 1 << 20,
        out_bytes: 1 << 20,
        out_files: 16,
    };
    let c = confine_worker(&limits, Some(2 << 30));
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
    let no_new_privs = read("/proc/self/status")
        .lines()
        .find_map(|l| l.strip_prefix("NoNewPrivs:").map(|v| v.trim().to_owned()));
    let report = serde_json::json!({
        "applied": c.applied,
        "skipped": c.skipped,
        "limits": read("/proc/self/limits"),
        "no_new_privs": no_new_privs,
        "interfaces": interfaces,
        "routes": routes,
    });
    println!("{report}");
    0
}
