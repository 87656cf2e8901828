//! The runner's private mount namespace, the tmpfs that caps a run's `/out`, and the
//! polling fallback's measure of `/out` (tree usage, cutting files back to the cap).

use crate::BackendError;
use nix::mount::{MntFlags, MsFlags};
use runner_core::run::Limits;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

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

pub(super) fn thread_count() -> Option<usize> {
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
/// [`confine_worker`](super::confine_worker)); that byte is the runner's evidence, not the guest's output,
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
