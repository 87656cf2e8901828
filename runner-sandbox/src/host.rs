//! Where a host path becomes a capability: the one place outside confinement that mints
//! `cap_std::ambient_authority()` (clippy refuses it in every other crate).
//!
//! A path reaches the runner from three places: the operator (a request, a results
//! directory, an inbox, a key named on the command line), the location of a request
//! (`inputs/` and `results/` beside it), and the cache (`runner_sandbox::cache`). Each is
//! opened here once, as a [`Dir`]; from then on the code that holds it reaches only what
//! lies beneath it (cap-std resolves every name inside the directory and refuses `..`
//! and absolute symlinks that would leave it).

use cap_std::fs::Dir;
use std::io;
use std::path::Path;

/// Opens the directory at `path` (following symlinks on the way, as the operator's shell
/// would) as a capability.
///
/// # Ambient authority
/// Opens `path` on the host file system.
pub fn open_dir(path: &Path) -> io::Result<Dir> {
    Dir::open_ambient_dir(path, cap_std::ambient_authority())
}

/// Creates the directory at `path` and any missing parents (an existing one is fine),
/// then opens it as a capability.
///
/// # Ambient authority
/// Creates and opens `path` on the host file system.
pub fn create_dir_all(path: &Path) -> io::Result<Dir> {
    std::fs::create_dir_all(path)?;
    open_dir(path)
}

/// The directory that holds `path` (`.` for a bare name), opened as a capability, and
/// the last component of `path`, for creating or replacing that one entry through the
/// handle. `None` when `path` has no last component (`/`, `..`, or empty).
///
/// # Ambient authority
/// Opens the parent of `path` on the host file system.
pub fn open_parent(path: &Path) -> io::Result<(Dir, std::ffi::OsString)> {
    let Some(name) = path.file_name() else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} names no file", path.display()),
        ));
    };
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Ok((open_dir(parent)?, name.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_opened_here_does_not_reach_above_itself() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("secret"), b"x").unwrap();
        let inner = create_dir_all(&tmp.path().join("a/b")).unwrap();
        assert!(inner.read("../../secret").is_err());
        assert!(inner.read(tmp.path().join("secret")).is_err());
    }

    #[test]
    fn open_parent_splits_off_the_last_component() {
        let tmp = tempfile::tempdir().unwrap();
        let (dir, name) = open_parent(&tmp.path().join("doc.md")).unwrap();
        assert_eq!(name, "doc.md");
        dir.write(&name, b"hi").unwrap();
        assert_eq!(std::fs::read(tmp.path().join("doc.md")).unwrap(), b"hi");
        assert!(open_parent(Path::new("/")).is_err());
        assert_eq!(open_parent(Path::new("bare")).unwrap().1, "bare");
    }
}
