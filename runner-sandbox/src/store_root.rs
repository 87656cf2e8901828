//! The roots of the runner's stores in the cache (the guest store, the environment
//! store; `cache` derives where they are): opened here as capabilities, created private
//! (0700) when a store first writes. Everything a store does happens beneath the handle.

use cap_std::fs::Dir;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

/// The store at `path`, `None` when it does not exist yet (a store that was never
/// written to is not created by reading it).
///
/// # Ambient authority
/// Opens `path` on the host file system.
pub fn open(path: &Path) -> io::Result<Option<Dir>> {
    match crate::host::open_dir(path) {
        Ok(dir) => Ok(Some(dir)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The store at `path`, created first (with any missing parents, each 0700) when it
/// does not exist.
///
/// # Ambient authority
/// Creates and opens `path` on the host file system.
pub fn create(path: &Path) -> io::Result<Dir> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)?;
    crate::host::open_dir(path)
}
