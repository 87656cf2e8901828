//! Durable moves between held directories, and the entry points of the gate and the
//! inbox host (`runner gate`, `runner serve`): an inbox, a claim directory, a
//! destination is opened once as a [`Dir`] and every later step names an entry *in* a
//! held directory.
//!
//! cap-std's `Dir::rename` replaces its target and has no fsync of a directory; the
//! gate's protocol needs a rename that never replaces (`renameat2(RENAME_NOREPLACE)`:
//! of two movers exactly one wins) and a directory made durable before a move is said
//! to have happened. Both are here, on descriptors the caller holds, for names that are
//! one plain component (so nothing resolves outside the directory).

use cap_std::fs::Dir;
use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

/// Opens the directory at `path` as a capability, with its canonical path (the name an
/// inbox is recorded under, and how two operator paths are told to be one directory).
///
/// # Ambient authority
/// Resolves and opens `path` on the host file system.
pub fn open_dir_canonical(path: &Path) -> io::Result<(Dir, PathBuf)> {
    let canonical = std::fs::canonicalize(path)?;
    Ok((crate::host::open_dir(&canonical)?, canonical))
}

/// Opens the file at `path` (a document the operator named, or one found beside it) for
/// reading, without blocking on a FIFO; with `follow` false a symlink in the last
/// component is refused (`ELOOP`) rather than followed. The caller checks what it got.
///
/// # Ambient authority
/// Opens `path` on the host file system.
pub fn open_file(path: &Path, follow: bool) -> io::Result<File> {
    let mut flags = nix::fcntl::OFlag::O_NONBLOCK;
    if !follow {
        flags |= nix::fcntl::OFlag::O_NOFOLLOW;
    }
    OpenOptions::new()
        .read(true)
        .custom_flags(flags.bits())
        .open(path)
}

/// `name` as one plain path component, or `InvalidInput`: the rename below resolves a
/// name relative to a descriptor, and `..`, `/` or an absolute name would leave it.
fn one_component(name: &OsStr) -> io::Result<&OsStr> {
    let mut parts = Path::new(name).components();
    match (parts.next(), parts.next()) {
        (Some(Component::Normal(n)), None) if n == name => Ok(name),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} is not a plain name within a directory",
                Path::new(name).display()
            ),
        )),
    }
}

/// Renames the entry `from` of `from_dir` to `to` in `to_dir`, failing with `EEXIST`
/// instead of replacing `to` (`EXDEV` when the two are on different file systems).
/// Both names must be one plain component.
pub fn rename_noreplace(from_dir: &Dir, from: &OsStr, to_dir: &Dir, to: &OsStr) -> io::Result<()> {
    nix::fcntl::renameat2(
        from_dir.as_fd(),
        one_component(from)?,
        to_dir.as_fd(),
        one_component(to)?,
        nix::fcntl::RenameFlags::RENAME_NOREPLACE,
    )
    .map_err(io::Error::from)
}

/// The held directory itself, opened for reading (`openat(dir, ".")`): a `Dir` may be
/// an `O_PATH` descriptor, which `fsync`, `syncfs` and `flock` refuse (`EBADF`).
pub fn open_readable(dir: &Dir) -> io::Result<File> {
    use nix::fcntl::OFlag;
    let fd = nix::fcntl::openat(
        dir.as_fd(),
        ".",
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )?;
    Ok(File::from(fd))
}

/// fsyncs a held directory: the entries created, renamed or removed in it are durable.
pub fn sync_dir(dir: &Dir) -> io::Result<()> {
    open_readable(dir)?.sync_all()
}

/// Flushes the whole file system that holds `dir` (`syncfs`): many writes made durable
/// at once.
pub fn syncfs(dir: &Dir) -> io::Result<()> {
    nix::unistd::syncfs(open_readable(dir)?).map_err(io::Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renames_stay_within_the_held_directories_and_never_replace() {
        let tmp = tempfile::tempdir().unwrap();
        let a = crate::host::create_dir_all(&tmp.path().join("a")).unwrap();
        let b = crate::host::create_dir_all(&tmp.path().join("b")).unwrap();
        a.write("x", b"1").unwrap();
        b.write("y", b"2").unwrap();
        let e = rename_noreplace(&a, OsStr::new("x"), &b, OsStr::new("y")).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(nix::libc::EEXIST));
        for bad in ["../y", "/etc/passwd", "..", ".", "a/b", ""] {
            let e = rename_noreplace(&a, OsStr::new("x"), &b, OsStr::new(bad)).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{bad}");
            let e = rename_noreplace(&a, OsStr::new(bad), &b, OsStr::new("z")).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{bad}");
        }
        rename_noreplace(&a, OsStr::new("x"), &b, OsStr::new("z")).unwrap();
        assert_eq!(b.read("z").unwrap(), b"1");
        assert!(!a.exists("x"));
        sync_dir(&a).unwrap();
        syncfs(&b).unwrap();
    }

    #[test]
    fn open_file_refuses_a_symlink_only_when_asked() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("doc.md"), b"x").unwrap();
        std::os::unix::fs::symlink("doc.md", tmp.path().join("link.md")).unwrap();
        assert!(open_file(&tmp.path().join("link.md"), true).is_ok());
        let e = open_file(&tmp.path().join("link.md"), false).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(nix::libc::ELOOP));
        let (dir, canonical) = open_dir_canonical(&tmp.path().join(".")).unwrap();
        assert_eq!(canonical, tmp.path().canonicalize().unwrap());
        assert!(dir.exists("doc.md"));
    }
}
