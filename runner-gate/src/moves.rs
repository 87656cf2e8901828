//! Moving files and directory trees atomically between held directories, never
//! replacing anything.
//!
//! Every function names an entry *in* a directory the caller holds as a [`Dir`] (an
//! inbox, a destination, a claim directory), so it reaches nothing outside them.
//! Within one filesystem a move is one `renameat2(RENAME_NOREPLACE)`: at every moment the
//! entry is either at its source or at its destination. Across filesystems (`EXDEV`) it
//! is copied to a temporary name in the destination directory (`.gate-tmp-…`), every
//! file and directory fsynced, renamed into place without replacing, and only then is
//! the source removed. A crash in between leaves the source in place and, at worst, a
//! temporary copy (cleaned on the next run) or a complete copy beside a source that was
//! not yet removed; the caller records an intent before copying so the next run can tell
//! the two apart (see [`super::inbox`]).

use cap_std::fs::{Dir, DirBuilder, DirBuilderExt, OpenOptions, OpenOptionsExt, PermissionsExt};
use std::ffi::{OsStr, OsString};
use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};

use runner_sandbox::durable::{rename_noreplace, sync_dir};

/// Prefix of every temporary name the gate creates.
pub const TMP_PREFIX: &str = ".gate-tmp-";

/// True for the error a no-replace rename gives when the destination exists.
pub fn is_exists(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(c) if c == nix::libc::EEXIST || c == nix::libc::ENOTEMPTY)
}

/// True when `dir` has an entry `name` (a symlink counts; it is not followed).
pub fn exists(dir: &Dir, name: &OsStr) -> bool {
    dir.symlink_metadata(name).is_ok()
}

/// A fresh temporary name (for a directory's entry).
pub fn temp_name(hint: &OsStr) -> OsString {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let hint: String = hint
        .to_string_lossy()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        .take(60)
        .collect();
    format!("{TMP_PREFIX}{}-{n}-{hint}", std::process::id()).into()
}

/// Moves `from` in `from_dir` (a file, symlink or directory tree) to `to` in `to_dir`
/// without ever replacing `to`. Falls back to copy + fsync + rename + remove across
/// filesystems, calling `before_copy` first (to record an intent). `Err` with `EEXIST`
/// when `to` exists.
pub fn move_noreplace(
    from_dir: &Dir,
    from: &OsStr,
    to_dir: &Dir,
    to: &OsStr,
    before_copy: &mut dyn FnMut() -> io::Result<()>,
) -> io::Result<()> {
    match rename_noreplace(from_dir, from, to_dir, to) {
        Ok(()) => return Ok(()),
        Err(e) if e.raw_os_error() == Some(nix::libc::EXDEV) => {}
        Err(e) => return Err(e),
    }
    if exists(to_dir, to) {
        return Err(io::Error::from_raw_os_error(nix::libc::EEXIST));
    }
    before_copy()?;
    copy_then_remove(from_dir, from, to_dir, to)
}

/// The cross-filesystem half of [`move_noreplace`] (public so it can be tested on one
/// filesystem).
pub fn copy_then_remove(from_dir: &Dir, from: &OsStr, to_dir: &Dir, to: &OsStr) -> io::Result<()> {
    let tmp = temp_name(to);
    let copied = copy_tree(from_dir, from, to_dir, &tmp).and_then(|()| sync_dir(to_dir));
    if let Err(e) = copied {
        let _ = remove_any(to_dir, &tmp);
        return Err(e);
    }
    if let Err(e) = rename_noreplace(to_dir, &tmp, to_dir, to) {
        let _ = remove_any(to_dir, &tmp);
        return Err(e);
    }
    sync_dir(to_dir)?;
    remove_any(from_dir, from)?;
    sync_dir(from_dir)
}

/// Removes the entry `name` of `dir`: a file, symlink or directory tree (never
/// following a symlink).
pub fn remove_any(dir: &Dir, name: &OsStr) -> io::Result<()> {
    match dir.symlink_metadata(name) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
        Ok(m) if m.is_dir() => dir.remove_dir_all(name),
        Ok(_) => dir.remove_file(name),
    }
}

/// Copies the entry `from` of `from_dir` (a file, symlink or directory tree) to `to` in
/// `to_dir` (which must not exist), fsyncing every file and directory. FIFOs, sockets
/// and devices are refused.
pub fn copy_tree(from_dir: &Dir, from: &OsStr, to_dir: &Dir, to: &OsStr) -> io::Result<()> {
    let meta = from_dir.symlink_metadata(from)?;
    let ft = meta.file_type();
    if ft.is_symlink() {
        let target = from_dir.read_link_contents(from)?;
        to_dir.symlink_contents(target, to)
    } else if ft.is_dir() {
        to_dir.create_dir_with(
            to,
            DirBuilder::new().mode(meta.permissions().mode() & 0o7777 | 0o700),
        )?;
        let (src, dst) = (from_dir.open_dir(from)?, to_dir.open_dir(to)?);
        let mut names: Vec<OsString> = src
            .entries()?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<Result<_, _>>()?;
        names.sort();
        for name in names {
            copy_tree(&src, &name, &dst, &name)?;
        }
        sync_dir(&dst)
    } else if ft.is_file() {
        let mut src = from_dir.open_with(
            from,
            OpenOptions::new()
                .read(true)
                .custom_flags(nix::libc::O_NOFOLLOW),
        )?;
        let mut dst = to_dir.open_with(
            to,
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(meta.permissions().mode() & 0o777),
        )?;
        io::copy(&mut src, &mut dst)?;
        dst.sync_all()
    } else {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "{} is not a regular file, directory or symlink and cannot be copied across filesystems",
                from.to_string_lossy()
            ),
        ))
    }
}

/// Writes `bytes` to `name` in `dir` atomically, replacing what is there: a temporary
/// file, fsynced, renamed into place, the directory fsynced.
pub fn write_replace(dir: &Dir, name: &str, bytes: &[u8]) -> io::Result<()> {
    write_with(dir, name, bytes, true)?;
    sync_dir(dir)
}

/// [`write_replace`] without any fsync, for a caller that writes many files and then
/// makes them durable at once (`syncfs`) before it depends on them.
pub fn write_replace_unsynced(dir: &Dir, name: &str, bytes: &[u8]) -> io::Result<()> {
    write_with(dir, name, bytes, false)
}

fn write_with(dir: &Dir, name: &str, bytes: &[u8], sync_file: bool) -> io::Result<()> {
    let tmp = temp_name(OsStr::new(name));
    let written = (|| {
        let mut f = dir.open_with(
            &tmp,
            // Reports quote the documents they judge and intents name them: the
            // operator's only, like the quarantine directory they are written into.
            OpenOptions::new().write(true).create_new(true).mode(0o600),
        )?;
        f.write_all(bytes)?;
        if sync_file { f.sync_all() } else { Ok(()) }
    })();
    if let Err(e) = written.and_then(|()| dir.rename(&tmp, dir, name)) {
        let _ = dir.remove_file(&tmp);
        return Err(e);
    }
    Ok(())
}

/// True when two entries (`a` in `a_dir`, `b` in `b_dir`) hold the same trees with the
/// same bytes (used to tell a finished cross-filesystem copy from a different document).
pub fn same_tree(a_dir: &Dir, a: &OsStr, b_dir: &Dir, b: &OsStr) -> io::Result<bool> {
    let (ma, mb) = (a_dir.symlink_metadata(a)?, b_dir.symlink_metadata(b)?);
    let (ta, tb) = (ma.file_type(), mb.file_type());
    if ta.is_symlink() || tb.is_symlink() {
        return Ok(ta.is_symlink()
            && tb.is_symlink()
            && a_dir.read_link_contents(a)? == b_dir.read_link_contents(b)?);
    }
    if ta.is_dir() != tb.is_dir() {
        return Ok(false);
    }
    if ta.is_dir() {
        let (da, db) = (a_dir.open_dir(a)?, b_dir.open_dir(b)?);
        let names = |d: &Dir| -> io::Result<Vec<OsString>> {
            let mut v: Vec<_> = d
                .entries()?
                .map(|e| e.map(|e| e.file_name()))
                .collect::<Result<_, _>>()?;
            v.sort();
            Ok(v)
        };
        let na = names(&da)?;
        if na != names(&db)? {
            return Ok(false);
        }
        for n in na {
            if !same_tree(&da, &n, &db, &n)? {
                return Ok(false);
            }
        }
        return Ok(true);
    }
    if !(ta.is_file() && tb.is_file()) || ma.len() != mb.len() {
        return Ok(false);
    }
    Ok(a_dir.read(a)? == b_dir.read(b)?)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use runner_sandbox::host::open_dir;

    fn os(s: &str) -> &OsStr {
        OsStr::new(s)
    }

    #[test]
    fn rename_never_replaces() {
        let d = tempfile::tempdir().unwrap();
        let dir = open_dir(d.path()).unwrap();
        dir.write("a", "a").unwrap();
        dir.write("b", "b").unwrap();
        let e = move_noreplace(&dir, os("a"), &dir, os("b"), &mut || Ok(())).unwrap_err();
        assert!(is_exists(&e), "{e}");
        assert_eq!(dir.read_to_string("b").unwrap(), "b");
        move_noreplace(&dir, os("a"), &dir, os("c"), &mut || Ok(())).unwrap();
        assert!(!exists(&dir, os("a")));
    }

    #[test]
    fn copy_then_remove_moves_a_tree() {
        let (src, dst, keep) = (
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
        );
        let (src_dir, dst_dir, keep_dir) = (
            open_dir(src.path()).unwrap(),
            open_dir(dst.path()).unwrap(),
            open_dir(keep.path()).unwrap(),
        );
        src_dir.create_dir_all("TS-x/out/plots").unwrap();
        src_dir.write("TS-x/stdout", "hi\n").unwrap();
        src_dir.write("TS-x/out/plots/a.txt", "a").unwrap();
        src_dir
            .symlink_contents("/etc/passwd", "TS-x/out/abs")
            .unwrap();
        copy_tree(&src_dir, os("TS-x"), &keep_dir, os("copy")).unwrap();
        copy_then_remove(&src_dir, os("TS-x"), &dst_dir, os("TS-x")).unwrap();
        assert!(!exists(&src_dir, os("TS-x")));
        assert!(same_tree(&keep_dir, os("copy"), &dst_dir, os("TS-x")).unwrap());
        assert_eq!(
            dst_dir.read_link_contents("TS-x/out/abs").unwrap(),
            std::path::Path::new("/etc/passwd"),
            "a symlink is copied as it is, never followed"
        );
        let names = |d: &Dir| -> Vec<OsString> {
            d.entries()
                .unwrap()
                .flatten()
                .map(|e| e.file_name())
                .collect()
        };
        assert_eq!(names(&dst_dir), vec![OsString::from("TS-x")]);
        // Never onto an existing name.
        src_dir.write("f", "f").unwrap();
        let e = copy_then_remove(&src_dir, os("f"), &dst_dir, os("TS-x")).unwrap_err();
        assert!(is_exists(&e));
        assert!(
            exists(&src_dir, os("f")),
            "the source stays when the move fails"
        );
    }

    #[test]
    fn write_replace_is_whole() {
        let d = tempfile::tempdir().unwrap();
        let dir = open_dir(d.path()).unwrap();
        write_replace(&dir, "r.json", b"1").unwrap();
        write_replace(&dir, "r.json", b"22").unwrap();
        assert_eq!(dir.read("r.json").unwrap(), b"22");
        assert_eq!(dir.entries().unwrap().count(), 1);
    }
}
