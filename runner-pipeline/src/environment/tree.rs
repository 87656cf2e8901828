//! The hash of an installed tree: one line per entry, sorted by path, `d <path>` for a
//! directory and `f <sha256> <path>` for a regular file, after a `runner.env-tree/v1`
//! header; the tree's hash is the sha256 of those lines. Anything else in the tree (a
//! symlink, a FIFO, a device) is an error: an installed tree never holds one, so one
//! found there was put there afterwards.

use cap_std::fs::{Dir, Metadata, MetadataExt};
use runner_core::digest::sha256_hex;
use runner_sandbox::digest::sha256_reader;
use std::io;
use std::path::Path;

const HEADER: &str = "runner.env-tree/v1\n";
/// A bound on the walk, whatever the tree holds.
const MAX_ENTRIES: usize = 200_000;
const MAX_DEPTH: usize = 64;

/// One line of the summary: from the directory holding the entry, its name there, its
/// path relative to the tree's root and its metadata (a directory or a regular file).
type Line<'a> = dyn FnMut(&Dir, &Path, &str, &Metadata) -> io::Result<String> + 'a;

/// sha256 hex of the tree held by `root` (see the module docs); `shown` names it in
/// messages.
pub fn tree_sha256(root: &Dir, shown: &Path) -> io::Result<String> {
    summarize(root, shown, &mut |dir, name, rel, meta| {
        if meta.is_dir() {
            return Ok(format!("d {rel}\n"));
        }
        let file = crate::store::open_regular(dir, name)?
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        Ok(format!("f {} {rel}\n", sha256_reader(file)?))
    })
}

/// sha256 hex of the tree's metadata: every entry's path and
/// [`runner_sandbox::digest::file_stamp`] (device, inode, size, mtime, ctime), the root's too.
/// No file is read. Any write, truncation, `chmod`, rename, or entry added or removed
/// under a directory moves a change time, which only the kernel sets, so an unchanged
/// stamp means the tree [`tree_sha256`] hashed is still there (the guest store's
/// reasoning for one file, `guest/store.rs`). Also returns whether every change time
/// is at least `quiet` old.
pub fn tree_stamp(
    root: &Dir,
    shown: &Path,
    quiet: std::time::Duration,
) -> io::Result<(String, bool)> {
    let now = std::time::SystemTime::now();
    let mut all_quiet = true;
    let mut note = |meta: &Metadata| {
        let changed = std::time::UNIX_EPOCH
            + std::time::Duration::new(
                u64::try_from(meta.ctime()).unwrap_or(0),
                u32::try_from(meta.ctime_nsec()).unwrap_or(0),
            );
        all_quiet &= now.duration_since(changed).is_ok_and(|age| age >= quiet);
        runner_sandbox::digest::cap_file_stamp(meta)
    };
    let root_line = note(&root.dir_metadata()?);
    let hash = summarize(root, shown, &mut |_, _, rel, meta| {
        Ok(format!("{rel} {}\n", note(meta)))
    })?;
    Ok((
        sha256_hex(format!("{root_line}\n{hash}").as_bytes()),
        all_quiet,
    ))
}

/// The sha256 of the header and one line per entry (called for directories and
/// regular files), sorted by path. Anything else in the tree is an error.
fn summarize(root: &Dir, shown: &Path, line: &mut Line<'_>) -> io::Result<String> {
    let mut lines = Vec::new();
    walk(root, shown, "", 0, &mut lines, line)?;
    lines.sort();
    let mut text = String::from(HEADER);
    for line in &lines {
        text.push_str(&line.1);
    }
    Ok(sha256_hex(text.as_bytes()))
}

fn walk(
    dir: &Dir,
    shown: &Path,
    rel: &str,
    depth: usize,
    out: &mut Vec<(String, String)>,
    line: &mut Line<'_>,
) -> io::Result<()> {
    let here = shown.join(rel);
    if depth > MAX_DEPTH {
        return Err(io::Error::other(format!(
            "{} is nested more than {MAX_DEPTH} deep",
            here.display()
        )));
    }
    for item in dir.entries()? {
        let item = item?;
        if out.len() >= MAX_ENTRIES {
            return Err(io::Error::other(format!(
                "more than {MAX_ENTRIES} entries under {}",
                here.display()
            )));
        }
        let name = item.file_name();
        let name = name.to_str().ok_or_else(|| {
            io::Error::other(format!("{} holds a name that is not UTF-8", here.display()))
        })?;
        let rel = if rel.is_empty() {
            name.to_owned()
        } else {
            format!("{rel}/{name}")
        };
        let meta = dir.symlink_metadata(name)?;
        if meta.is_dir() {
            out.push((rel.clone(), line(dir, Path::new(name), &rel, &meta)?));
            walk(&dir.open_dir(name)?, shown, &rel, depth + 1, out, line)?;
        } else if meta.is_file() {
            out.push((rel.clone(), line(dir, Path::new(name), &rel, &meta)?));
        } else {
            return Err(io::Error::other(format!(
                "{} is neither a file nor a directory",
                shown.join(&rel).display()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
// reason: tests build fixtures on the host filesystem.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use std::fs;

    fn tree_sha256(root: &Path) -> io::Result<String> {
        super::tree_sha256(&runner_sandbox::host::open_dir(root)?, root)
    }

    fn tree_stamp(root: &Path, quiet: std::time::Duration) -> io::Result<(String, bool)> {
        super::tree_stamp(&runner_sandbox::host::open_dir(root)?, root, quiet)
    }

    /// A new directory holding the file `rel` with `text`.
    fn tree_with(rel: &str, text: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
        dir
    }

    #[test]
    fn the_hash_follows_content_names_and_structure() {
        let dir = tree_with("pkg/__init__.py", "x = 1\n");
        let root = dir.path();
        let base = tree_sha256(root).unwrap();
        assert_eq!(tree_sha256(root).unwrap(), base, "deterministic");

        fs::write(root.join("pkg/__init__.py"), "x = 2\n").unwrap();
        let changed = tree_sha256(root).unwrap();
        assert_ne!(changed, base);
        fs::write(root.join("pkg/__init__.py"), "x = 1\n").unwrap();
        assert_eq!(tree_sha256(root).unwrap(), base);

        fs::create_dir(root.join("empty")).unwrap();
        assert_ne!(tree_sha256(root).unwrap(), base, "a new directory counts");
        fs::remove_dir(root.join("empty")).unwrap();

        std::os::unix::fs::symlink("/etc/passwd", root.join("pkg/link.py")).unwrap();
        let err = tree_sha256(root).unwrap_err().to_string();
        assert!(err.contains("neither a file nor a directory"), "{err}");
    }

    #[test]
    fn the_stamp_moves_with_any_change_and_reads_no_file() {
        let dir = tree_with("fonts/a.ttf", "abc");
        let root = dir.path();
        let quiet = std::time::Duration::from_secs(3600);
        let (base, is_quiet) = tree_stamp(root, quiet).unwrap();
        assert!(!is_quiet, "just written");
        assert_eq!(tree_stamp(root, quiet).unwrap().0, base, "deterministic");
        assert!(tree_stamp(root, std::time::Duration::ZERO).unwrap().1);

        // Same size, same content even: the change time still moves.
        std::thread::sleep(std::time::Duration::from_millis(20));
        fs::write(root.join("fonts/a.ttf"), "abc").unwrap();
        let rewritten = tree_stamp(root, quiet).unwrap().0;
        assert_ne!(rewritten, base, "a rewrite");
        fs::write(root.join("fonts/b.ttf"), "").unwrap();
        assert_ne!(tree_stamp(root, quiet).unwrap().0, rewritten, "a new file");

        // An unreadable file does not matter: no file is opened.
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(root.join("fonts/b.ttf"), fs::Permissions::from_mode(0o000)).unwrap();
        assert!(tree_stamp(root, quiet).is_ok());
    }
}
