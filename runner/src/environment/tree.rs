//! The hash of an installed tree: one line per entry, sorted by path, `d <path>` for a
//! directory and `f <sha256> <path>` for a regular file, after a `runner.env-tree/v1`
//! header; the tree's hash is the sha256 of those lines. Anything else in the tree (a
//! symlink, a FIFO, a device) is an error: an installed tree never holds one, so one
//! found there was put there afterwards.

use crate::digest::{sha256_hex, sha256_reader};
use nix::fcntl::OFlag;
use std::fs::{self, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

const HEADER: &str = "runner.env-tree/v1\n";
/// A bound on the walk, whatever the tree holds.
const MAX_ENTRIES: usize = 200_000;
const MAX_DEPTH: usize = 64;

/// sha256 hex of the tree at `root` (see the module docs).
///
/// # Ambient Authority
/// Reads under `root`.
pub fn tree_sha256(root: &Path) -> io::Result<String> {
    let meta = fs::symlink_metadata(root)?;
    if !meta.is_dir() {
        return Err(io::Error::other(format!(
            "{} is not a directory",
            root.display()
        )));
    }
    let mut lines = Vec::new();
    walk(root, "", 0, &mut lines)?;
    lines.sort();
    let mut text = String::from(HEADER);
    for line in &lines {
        text.push_str(&line.1);
    }
    Ok(sha256_hex(text.as_bytes()))
}

fn walk(dir: &Path, rel: &str, depth: usize, out: &mut Vec<(String, String)>) -> io::Result<()> {
    if depth > MAX_DEPTH {
        return Err(io::Error::other(format!(
            "{} is nested more than {MAX_DEPTH} deep",
            dir.display()
        )));
    }
    for item in fs::read_dir(dir)? {
        let item = item?;
        if out.len() >= MAX_ENTRIES {
            return Err(io::Error::other(format!(
                "more than {MAX_ENTRIES} entries under {}",
                dir.display()
            )));
        }
        let name = item.file_name();
        let name = name.to_str().ok_or_else(|| {
            io::Error::other(format!("{} holds a name that is not UTF-8", dir.display()))
        })?;
        let path = item.path();
        let rel = if rel.is_empty() {
            name.to_owned()
        } else {
            format!("{rel}/{name}")
        };
        let kind = fs::symlink_metadata(&path)?.file_type();
        if kind.is_dir() {
            out.push((rel.clone(), format!("d {rel}\n")));
            walk(&path, &rel, depth + 1, out)?;
        } else if kind.is_file() {
            let file = OpenOptions::new()
                .read(true)
                .custom_flags((OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK).bits())
                .open(&path)?;
            let sha = sha256_reader(file)?;
            out.push((rel.clone(), format!("f {sha} {rel}\n")));
        } else {
            return Err(io::Error::other(format!(
                "{} is neither a file nor a directory",
                path.display()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_follows_content_names_and_structure() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir(root.join("pkg")).unwrap();
        fs::write(root.join("pkg/__init__.py"), "x = 1\n").unwrap();
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
}
