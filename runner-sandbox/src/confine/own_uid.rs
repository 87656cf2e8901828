//! The own-uid layer: the worker's own uid and gid, and giving it the run directories.

use super::{FsAccess, OwnUidError};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

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

/// Applies [`Layer::OwnUid`](super::Layer::OwnUid): gives the writable run directories (`/out`, the capture
/// directory; their top level only, which the runner made for this run) to the worker's
/// own id, drops every supplementary group, then sets the real, effective and saved gid
/// and uid to it. What the worker still reads (`/in`, guest assets) it reaches through
/// descriptors opened before this (preopens, mounts), and those files are readable by
/// anyone who can reach them; everything the runner owns elsewhere is closed to it by
/// file permissions alone. `Ok` with the id; `Err` when the runner is not root (then
/// the worker keeps the runner's uid).
pub(super) fn become_own_user(fs: &FsAccess) -> Result<u32, OwnUidError> {
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
