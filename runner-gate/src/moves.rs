//! Moving files and directory trees atomically, never replacing anything.
//!
//! Within one filesystem a move is one `renameat2(RENAME_NOREPLACE)`: at every moment the
//! entry is either at its source or at its destination. Across filesystems (`EXDEV`) it
//! is copied to a temporary name in the destination directory (`.gate-tmp-…`), every
//! file and directory fsynced, renamed into place without replacing, and only then is
//! the source removed. A crash in between leaves the source in place and, at worst, a
//! temporary copy (cleaned on the next run) or a complete copy beside a source that was
//! not yet removed; the caller records an intent before copying so the next run can tell
//! the two apart (see [`super::inbox`]).

use std::ffi::OsStr;
use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Prefix of every temporary name the gate creates.
pub const TMP_PREFIX: &str = ".gate-tmp-";

/// `rename(from, to)` that fails with `EEXIST` instead of replacing `to`.
pub fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    nix::fcntl::renameat2(
        nix::fcntl::AT_FDCWD,
        from,
        nix::fcntl::AT_FDCWD,
        to,
        nix::fcntl::RenameFlags::RENAME_NOREPLACE,
    )
    .map_err(io::Error::from)
}

/// True for the error a no-replace rename gives when the destination exists.
pub fn is_exists(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(c) if c == nix::libc::EEXIST || c == nix::libc::ENOTEMPTY)
}

/// fsyncs a directory (makes the entries created or removed in it durable).
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

fn parent(p: &Path) -> &Path {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// A fresh temporary name in `dir`.
pub fn temp_path(dir: &Path, hint: &OsStr) -> std::path::PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let hint: String = hint
        .to_string_lossy()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        .take(60)
        .collect();
    dir.join(format!("{TMP_PREFIX}{}-{n}-{hint}", std::process::id()))
}

/// Moves `from` (a file, symlink or directory tree) to `to` without ever replacing
/// `to`. Falls back to copy + fsync + rename + remove across filesystems, calling
/// `before_copy` first (to record an intent). `Err` with `EEXIST` when `to` exists.
pub fn move_noreplace(
    from: &Path,
    to: &Path,
    before_copy: &mut dyn FnMut() -> io::Result<()>,
) -> io::Result<()> {
    match rename_noreplace(from, to) {
        Ok(()) => return Ok(()),
        Err(e) if e.raw_os_error() == Some(nix::libc::EXDEV) => {}
        Err(e) => return Err(e),
    }
    if to.symlink_metadata().is_ok() {
        return Err(io::Error::from_raw_os_error(nix::libc::EEXIST));
    }
    before_copy()?;
    copy_then_remove(from, to)
}

/// The cross-filesystem half of [`move_noreplace`] (public so it can be tested on one
/// filesystem).
pub fn copy_then_remove(from: &Path, to: &Path) -> io::Result<()> {
    let dest_dir = parent(to);
    let tmp = temp_path(dest_dir, to.file_name().unwrap_or_default());
    let copied = copy_tree(from, &tmp).and_then(|()| sync_dir(dest_dir));
    if let Err(e) = copied {
        let _ = remove_any(&tmp);
        return Err(e);
    }
    if let Err(e) = rename_noreplace(&tmp, to) {
        let _ = remove_any(&tmp);
        return Err(e);
    }
    sync_dir(dest_dir)?;
    remove_any(from)?;
    sync_dir(parent(from))
}

/// Removes a file, symlink or directory tree (never following a symlink).
pub fn remove_any(p: &Path) -> io::Result<()> {
    match p.symlink_metadata() {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
        Ok(m) if m.is_dir() => fs::remove_dir_all(p),
        Ok(_) => fs::remove_file(p),
    }
}

/// Copies a file, symlink or directory tree to `to` (which must not exist), fsyncing
/// every file and directory. FIFOs, sockets and devices are refused.
pub fn copy_tree(from: &Path, to: &Path) -> io::Result<()> {
    let meta = from.symlink_metadata()?;
    let ft = meta.file_type();
    if ft.is_symlink() {
        let target = fs::read_link(from)?;
        std::os::unix::fs::symlink(target, to)
    } else if ft.is_dir() {
        fs::DirBuilder::new()
            .mode(meta.permissions().mode() & 0o7777 | 0o700)
            .create(to)?;
        let mut entries: Vec<_> = fs::read_dir(from)?.collect::<Result<_, _>>()?;
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            copy_tree(&entry.path(), &to.join(entry.file_name()))?;
        }
        sync_dir(to)
    } else if ft.is_file() {
        let mut src = fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(from)?;
        let mut dst = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(meta.permissions().mode() & 0o777)
            .open(to)?;
        io::copy(&mut src, &mut dst)?;
        dst.sync_all()
    } else {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "{} is not a regular file, directory or symlink and cannot be copied across filesystems",
                String::from_utf8_lossy(from.as_os_str().as_bytes())
            ),
        ))
    }
}

/// Writes `bytes` to `dir/name` atomically, replacing what is there: a temporary file,
/// fsynced, renamed into place, the directory fsynced.
pub fn write_replace(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
    write_with(dir, name, bytes, true)?;
    sync_dir(dir)
}

/// [`write_replace`] without any fsync, for a caller that writes many files and then
/// makes them durable at once (`syncfs`) before it depends on them.
pub fn write_replace_unsynced(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
    write_with(dir, name, bytes, false)
}

fn write_with(dir: &Path, name: &str, bytes: &[u8], sync_file: bool) -> io::Result<()> {
    let tmp = temp_path(dir, OsStr::new(name));
    let written = (|| {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&tmp)?;
        f.write_all(bytes)?;
        if sync_file { f.sync_all() } else { Ok(()) }
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    if let Err(e) = fs::rename(&tmp, dir.join(name)) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(())
}

/// True when two trees hold the same entries with the same bytes (used to tell a
/// finished cross-filesystem copy from a different document).
pub fn same_tree(a: &Path, b: &Path) -> io::Result<bool> {
    let (ma, mb) = (a.symlink_metadata()?, b.symlink_metadata()?);
    let (ta, tb) = (ma.file_type(), mb.file_type());
    if ta.is_symlink() || tb.is_symlink() {
        return Ok(ta.is_symlink() && tb.is_symlink() && fs::read_link(a)? == fs::read_link(b)?);
    }
    if ta.is_dir() != tb.is_dir() {
        return Ok(false);
    }
    if ta.is_dir() {
        let names = |d: &Path| -> io::Result<Vec<std::ffi::OsString>> {
            let mut v: Vec<_> = fs::read_dir(d)?
                .map(|e| e.map(|e| e.file_name()))
                .collect::<Result<_, _>>()?;
            v.sort();
            Ok(v)
        };
        let (na, nb) = (names(a)?, names(b)?);
        if na != nb {
            return Ok(false);
        }
        for n in na {
            if !same_tree(&a.join(&n), &b.join(&n))? {
                return Ok(false);
            }
        }
        return Ok(true);
    }
    if !(ta.is_file() && tb.is_file()) || ma.len() != mb.len() {
        return Ok(false);
    }
    Ok(fs::read(a)? == fs::read(b)?)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn rename_never_replaces() {
        let d = tempfile::tempdir().unwrap();
        fs::write(d.path().join("a"), "a").unwrap();
        fs::write(d.path().join("b"), "b").unwrap();
        let e =
            move_noreplace(&d.path().join("a"), &d.path().join("b"), &mut || Ok(())).unwrap_err();
        assert!(is_exists(&e), "{e}");
        assert_eq!(fs::read_to_string(d.path().join("b")).unwrap(), "b");
        move_noreplace(&d.path().join("a"), &d.path().join("c"), &mut || Ok(())).unwrap();
        assert!(!d.path().join("a").exists());
    }

    #[test]
    fn copy_then_remove_moves_a_tree() {
        let src = tempfile::tempdir().unwrap();
        let dst = tempfile::tempdir().unwrap();
        let tree = src.path().join("TS-x");
        fs::create_dir_all(tree.join("out/plots")).unwrap();
        fs::write(tree.join("stdout"), "hi\n").unwrap();
        fs::write(tree.join("out/plots/a.txt"), "a").unwrap();
        let keep = tempfile::tempdir().unwrap();
        copy_tree(&tree, &keep.path().join("copy")).unwrap();
        copy_then_remove(&tree, &dst.path().join("TS-x")).unwrap();
        assert!(!tree.exists());
        assert!(same_tree(&keep.path().join("copy"), &dst.path().join("TS-x")).unwrap());
        let leftovers: Vec<_> = fs::read_dir(dst.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(leftovers, vec![std::ffi::OsString::from("TS-x")]);
        // Never onto an existing name.
        fs::write(src.path().join("f"), "f").unwrap();
        let e = copy_then_remove(&src.path().join("f"), &dst.path().join("TS-x")).unwrap_err();
        assert!(is_exists(&e));
        assert!(
            src.path().join("f").exists(),
            "the source stays when the move fails"
        );
    }

    #[test]
    fn write_replace_is_whole() {
        let d = tempfile::tempdir().unwrap();
        write_replace(d.path(), "r.json", b"1").unwrap();
        write_replace(d.path(), "r.json", b"22").unwrap();
        assert_eq!(fs::read(d.path().join("r.json")).unwrap(), b"22");
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1);
    }
}
