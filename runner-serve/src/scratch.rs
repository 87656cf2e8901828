//! A host's scratch directory: everything a `serve` host keeps in the temporary
//! directory while it runs (each run's `runner-run-*` directory, a NATS request's
//! `runner-nats-*` directory) lives under one `$TMPDIR/runner-serve-*/` of its own, so a
//! host that is killed leaves one directory behind, and the next host to start removes it.
//!
//! Ownership is a lock, as for claim directories ([`crate::claim`]): the directory
//! holds a `.lock` file its host keeps `flock`ed while it lives (locked under another
//! name, then renamed, so a `.lock` is never seen unlocked while its host lives). A
//! `runner-serve-*` directory whose `.lock` can be taken belongs to a host that died and
//! is removed; one with no `.lock` at all (a host killed while creating it) is removed
//! once it is older than `ABANDONED_AFTER`. A host that stops gracefully removes its own.

use cap_std::fs::Dir;
use nix::fcntl::{Flock, FlockArg};
use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// The name every host scratch directory starts with.
pub const PREFIX: &str = "runner-serve-";
const LOCK_FILE: &str = ".lock";
const NEW_LOCK_FILE: &str = ".lock.new";
/// How old a scratch directory without a `.lock` must be before it is taken for
/// abandoned (its host had only just created it).
const ABANDONED_AFTER: Duration = Duration::from_secs(60);
/// The most entries of the temporary directory looked at by one sweep.
const MAX_SWEPT_ENTRIES: usize = 100_000;

/// This host's scratch directory, locked while the value lives and removed when it is
/// dropped.
pub struct HostScratch {
    dir: tempfile::TempDir,
    _lock: Flock<File>,
}

impl HostScratch {
    /// Sweeps the scratch directories of dead hosts from the temporary directory, then
    /// creates and locks this host's. Returns it and how many were swept.
    ///
    /// # Ambient authority
    /// Lists and removes `runner-serve-*` directories in the system temporary directory
    /// (`$TMPDIR`) and creates one there.
    pub fn create() -> io::Result<(Self, usize)> {
        let tmp = std::env::temp_dir();
        let swept = sweep(&tmp);
        let dir = tempfile::Builder::new()
            .prefix(PREFIX)
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(&tmp)?;
        let held = runner_sandbox::host::open_dir(dir.path())?;
        let file = held.create(NEW_LOCK_FILE)?.into_std();
        let lock = Flock::lock(file, FlockArg::LockExclusiveNonblock)
            .map_err(|(_, errno)| io::Error::from(errno))?;
        held.rename(NEW_LOCK_FILE, &held, LOCK_FILE)?;
        Ok((Self { dir, _lock: lock }, swept))
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// Removes the scratch directories in `tmp` whose host is gone; returns how many.
fn sweep(tmp: &Path) -> usize {
    let Ok(parent) = runner_sandbox::host::open_dir(tmp) else {
        return 0;
    };
    let Ok(entries) = parent.entries() else {
        return 0;
    };
    let mut swept = 0;
    for entry in entries.flatten().take(MAX_SWEPT_ENTRIES) {
        let name = entry.file_name();
        if !name.as_bytes().starts_with(PREFIX.as_bytes())
            || !entry.file_type().is_ok_and(|t| t.is_dir())
        {
            continue;
        }
        if abandoned(&parent, &name) && parent.remove_dir_all(&name).is_ok() {
            swept += 1;
        }
    }
    swept
}

/// True when the scratch directory `name` of `parent` belongs to no live host. Its lock,
/// when taken here, is released as this returns; the host that died cannot come back.
fn abandoned(parent: &Dir, name: &OsStr) -> bool {
    let Ok(dir) = parent.open_dir(name) else {
        return false;
    };
    match dir.open(LOCK_FILE) {
        Ok(file) => Flock::lock(file.into_std(), FlockArg::LockExclusiveNonblock).is_ok(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => dir
            .dir_metadata()
            .ok()
            .and_then(|m| m.modified().ok())
            .and_then(|m| SystemTime::now().duration_since(m.into_std()).ok())
            .is_some_and(|age| age > ABANDONED_AFTER),
        Err(_) => false,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
// reason: tests build fixtures on the host filesystem.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    #[test]
    fn a_live_hosts_scratch_stays_and_a_dead_ones_is_swept() {
        let tmp = tempfile::tempdir().unwrap();
        // A live host: its lock held.
        let live = tmp.path().join(format!("{PREFIX}live"));
        std::fs::create_dir(&live).unwrap();
        let file = File::create(live.join(LOCK_FILE)).unwrap();
        let held = Flock::lock(file, FlockArg::LockExclusiveNonblock).unwrap();
        // A dead host: a lock nobody holds, and a run directory left in it.
        let dead = tmp.path().join(format!("{PREFIX}dead"));
        std::fs::create_dir_all(dead.join("runner-run-x/out")).unwrap();
        File::create(dead.join(LOCK_FILE)).unwrap();
        // A host creating its directory right now: no `.lock` yet, and young.
        let young = tmp.path().join(format!("{PREFIX}young"));
        std::fs::create_dir(&young).unwrap();
        // Not a scratch directory: never touched.
        let other = tmp.path().join("runner-run-of-an-exec");
        std::fs::create_dir(&other).unwrap();
        assert_eq!(sweep(tmp.path()), 1);
        assert!(live.is_dir() && young.is_dir() && other.is_dir());
        assert!(!dead.exists());
        drop(held);
        assert_eq!(sweep(tmp.path()), 1);
        assert!(!live.exists());
    }
}
