//! Hidden staging directories (`.runner-draft-*`) that are swept only when provably
//! stale.
//!
//! A staging directory is held under an exclusive `flock` from just after it is made
//! until its contents are renamed into place; the kernel drops the lock when its holder
//! exits, crashed or not. A sweep removes a staging directory only after taking that lock
//! itself (so no live process is writing in it) and checking that the name still names
//! the directory it locked. The maker checks the same after locking, and starts again
//! under a new name if a sweep got there between its `mkdir` and its lock. So two
//! servers on one drafts directory, or two `runner approve`s beside one inbox, never
//! remove each other's work in flight, and whatever a crash left behind is removed by
//! the next one to look.

use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
use nix::fcntl::{Flock, FlockArg};
use nix::sys::stat::{FileStat, fstat, fstatat};
use std::ffi::OsStr;
use std::io;
use std::os::fd::OwnedFd;

/// Prefix of the hidden names staging directories take (never a draft id, which starts
/// with `TR-`, nor a name the serve inbox takes).
pub const PREFIX: &str = ".runner-draft-";
/// At most this many entries are looked at per sweep.
const MAX_SWEPT: usize = 10_000;
/// At most this many names are tried when making a staging directory.
const MAX_ATTEMPTS: usize = 8;

/// A staging directory, locked for as long as this value lives.
#[derive(Debug)]
pub struct Staging {
    name: String,
    dir: Dir,
    _lock: Flock<OwnedFd>,
}

impl Staging {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn dir(&self) -> &Dir {
        &self.dir
    }
}

fn same(a: &FileStat, b: &FileStat) -> bool {
    a.st_dev == b.st_dev && a.st_ino == b.st_ino
}

/// Locks the directory `name` of `parent` without waiting; `Ok(None)` when another
/// process holds it, or when `name` no longer names the directory that was locked.
fn lock(parent: &Dir, name: &OsStr) -> io::Result<Option<(Dir, Flock<OwnedFd>)>> {
    // A real descriptor (cap-std opens directories O_PATH, which flock refuses).
    let f = parent.open_with(
        name,
        OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_DIRECTORY | nix::libc::O_NOFOLLOW),
    )?;
    let fd: OwnedFd = f.into_std().into();
    let lock = match Flock::lock(fd, FlockArg::LockExclusiveNonblock) {
        Ok(l) => l,
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => return Ok(None),
        Err((_, e)) => return Err(io::Error::from(e)),
    };
    let held = fstat(&*lock).map_err(io::Error::from)?;
    let dir = parent.open_dir(name)?;
    let opened = fstat(&dir).map_err(io::Error::from)?;
    match fstatat(parent, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(now) if same(&held, &now) && same(&held, &opened) => Ok(Some((dir, lock))),
        Ok(_) | Err(nix::errno::Errno::ENOENT) => Ok(None),
        Err(e) => Err(io::Error::from(e)),
    }
}

/// Makes and locks a new staging directory in `parent`, named after `hint`.
pub fn create(parent: &Dir, hint: &str) -> io::Result<Staging> {
    for _ in 0..MAX_ATTEMPTS {
        let unique = runner_gate::moves::temp_name(OsStr::new(hint));
        let name = format!(
            "{PREFIX}{}",
            unique.to_string_lossy().trim_start_matches('.')
        );
        match parent.create_dir(&name) {
            Ok(()) => {}
            // A leftover of a crashed process with the same pid: try the next name.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
        match lock(parent, OsStr::new(&name)) {
            Ok(Some((dir, lock))) => {
                return Ok(Staging {
                    name,
                    dir,
                    _lock: lock,
                });
            }
            // A sweep took it between the mkdir and the lock: start again.
            Ok(None) => continue,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other(format!(
        "could not make a staging directory in {MAX_ATTEMPTS} attempts (another process keeps sweeping them)"
    )))
}

/// Removes the staging directories of `parent` nobody holds (their maker ended before
/// renaming them into place); returns how many. Errors on one entry skip it.
pub fn sweep(parent: &Dir) -> usize {
    let Ok(entries) = parent.entries() else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten().take(MAX_SWEPT) {
        let name = e.file_name();
        if !name.to_string_lossy().starts_with(PREFIX) {
            continue;
        }
        if !parent.symlink_metadata(&name).is_ok_and(|m| m.is_dir()) {
            continue;
        }
        if let Ok(Some((_dir, _lock))) = lock(parent, &name)
            && parent.remove_dir_all(&name).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn names(dir: &Dir) -> Vec<String> {
        let mut v: Vec<String> = dir
            .entries()
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_sweep_leaves_a_staging_directory_in_flight_and_removes_an_abandoned_one() {
        let tmp = tempfile::tempdir().unwrap();
        let parent = runner_sandbox::host::open_dir(tmp.path()).unwrap();
        // In flight: made and held by "another server" (a separate lock, as another
        // process's would be).
        let live = create(&parent, "TR-live").unwrap();
        live.dir().write("draft.md", b"half written").unwrap();
        // Abandoned: a crashed process's, with files in it and no lock held.
        let dead = format!("{PREFIX}4242-0-TR-dead");
        parent.create_dir(&dead).unwrap();
        parent
            .write(format!("{dead}/draft.md"), b"left behind")
            .unwrap();
        // Not ours: kept whatever it is.
        parent.create_dir("TR-a-draft").unwrap();

        assert_eq!(sweep(&parent), 1);
        assert_eq!(
            names(&parent),
            [live.name().to_owned(), "TR-a-draft".into()]
        );
        assert_eq!(live.dir().read("draft.md").unwrap(), b"half written");

        // Its maker is done with it (renamed or gone): the next sweep takes it.
        drop(live);
        assert_eq!(sweep(&parent), 1);
        assert_eq!(names(&parent), ["TR-a-draft"]);
    }
}
