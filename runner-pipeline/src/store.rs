//! What the guest store (`guest::store`) and the environment store (`environment`)
//! share: both are directories of content-addressed entries held as a [`cap_std`]
//! [`Dir`], opened once from the cache (`runner_sandbox::store_root`), and everything below
//! works relative to that handle. A new entry is written under a `.partial-` name in
//! the directory that will hold it, synced, and published by a rename that never
//! replaces what is there ([`Staged`], [`StagedDir`]); the directory is synced after.
//! Trees a worker reads are opened to it ([`open_to_workers`]).

use cap_std::fs::{Dir, DirBuilder, DirBuilderExt, File, OpenOptions, OpenOptionsExt};
use cap_std::fs::{MetadataExt, Permissions, PermissionsExt};
use nix::fcntl::OFlag;
use runner_sandbox::durable::sync_dir;
use std::io;
use std::path::Path;

/// Prefix of the temporary entries a store publishes by renaming; a crash can leave one
/// behind, and nothing ever reads them.
pub const PARTIAL_PREFIX: &str = ".partial-";

/// Creates `rel` under `dir` (and missing parents) with `mode`, and opens it.
pub fn create_dir_all(dir: &Dir, rel: impl AsRef<Path>, mode: u32) -> io::Result<Dir> {
    let rel = rel.as_ref();
    dir.create_dir_with(rel, DirBuilder::new().recursive(true).mode(mode))?;
    dir.open_dir(rel)
}

/// Opens `name` under `dir` for reading, refusing a symlink (`ELOOP`) and never
/// blocking on a FIFO; `Ok(None)` when it does not exist, an error when it is not a
/// regular file (`what` says what it should have been).
pub fn open_regular(dir: &Dir, name: impl AsRef<Path>) -> io::Result<Option<File>> {
    let file = match dir.open_with(
        name,
        OpenOptions::new()
            .read(true)
            .custom_flags((OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK).bits()),
    ) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(Some(file))
}

/// Creates a new entry under a fresh `.partial-` name in `dir` with `make` (which
/// fails with `AlreadyExists` when the name is taken), a few names at most.
fn create_partial<T>(mut make: impl FnMut(&str) -> io::Result<T>) -> io::Result<(String, T)> {
    let mut last = None;
    for attempt in 0..8 {
        let name = format!("{PARTIAL_PREFIX}{}", crate::result::unique(attempt));
        match make(&name) {
            Ok(made) => return Ok((name, made)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no free temporary name")))
}

/// A new file under a `.partial-` name in a store directory, removed on drop unless
/// published.
pub struct Staged {
    dir: Dir,
    name: Option<String>,
    file: File,
}

impl Staged {
    /// A new, empty file with `mode` in `dir`.
    pub fn new(dir: &Dir, mode: u32) -> io::Result<Self> {
        let dir = dir.try_clone()?;
        let (name, file) = create_partial(|name| {
            dir.open_with(
                name,
                OpenOptions::new().write(true).create_new(true).mode(mode),
            )
        })?;
        Ok(Staged {
            dir,
            name: Some(name),
            file,
        })
    }

    pub fn file(&mut self) -> &mut File {
        &mut self.file
    }

    /// Syncs the file and links it in as `dest` without replacing anything: `Ok(false)`
    /// when `dest` is taken (the staged file is removed either way). The directory is
    /// synced after a link.
    pub fn publish_new(mut self, dest: &str) -> io::Result<bool> {
        self.file.sync_all()?;
        let name = self.name.take().unwrap_or_default();
        let linked = self.dir.hard_link(&name, &self.dir, dest);
        let removed = self.dir.remove_file(&name);
        match linked {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(false),
            Err(e) => return Err(e),
        }
        removed?;
        sync_dir(&self.dir)?;
        Ok(true)
    }

    /// Syncs the file (when `sync`) and renames it over `dest` (readers see the old
    /// file or the new one).
    pub fn publish_replacing(mut self, dest: &str, sync: bool) -> io::Result<()> {
        if sync {
            self.file.sync_all()?;
        }
        let name = self.name.take().unwrap_or_default();
        self.dir.rename(&name, &self.dir, dest).inspect_err(|_| {
            let _ = self.dir.remove_file(&name);
        })
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if let Some(name) = self.name.take() {
            // Best effort: a leftover `.partial-` file is never read.
            let _ = self.dir.remove_file(name);
        }
    }
}

/// A new directory under a `.partial-` name in a store directory, removed (with all
/// it holds) on drop.
pub struct StagedDir<'d> {
    parent: &'d Dir,
    name: String,
    /// The staged directory.
    pub dir: Dir,
}

impl<'d> StagedDir<'d> {
    /// A new, empty directory (mode 0700) in `parent`.
    pub fn new(parent: &'d Dir) -> io::Result<Self> {
        let (name, ()) =
            create_partial(|name| parent.create_dir_with(name, DirBuilder::new().mode(0o700)))?;
        let dir = parent.open_dir(&name)?;
        Ok(StagedDir { parent, name, dir })
    }

    /// Its `.partial-` name in the parent (for messages).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Renames `rel` (inside the staged directory) to `dest` in the parent; an entry
    /// already at `dest` stays and is `Ok(false)`. The parent is synced after.
    pub fn publish(&self, rel: &str, dest: &str) -> io::Result<bool> {
        match self
            .parent
            .rename(Path::new(&self.name).join(rel), self.parent, dest)
        {
            Ok(()) => {
                sync_dir(self.parent)?;
                Ok(true)
            }
            Err(_) if self.parent.symlink_metadata(dest).is_ok_and(|m| m.is_dir()) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

impl Drop for StagedDir<'_> {
    fn drop(&mut self) {
        // Best effort: a leftover `.partial-` directory is never read.
        let _ = self.parent.remove_dir_all(&self.name);
    }
}

/// Makes `rel` under `dir` and, when it is a directory, everything below it readable by
/// a worker under its own uid (directories 0755, files 0644; symlinks left alone): the
/// worker reads them through the directory its WASI context opened before it gave up
/// the runner's uid. The store above stays 0700, so no other user reaches them. Only
/// modes change. Stops at `depth` levels below `rel` (0: `rel` and its files only).
pub fn open_to_workers(dir: &Dir, rel: &Path, depth: usize) -> io::Result<()> {
    let meta = dir.symlink_metadata(rel)?;
    if meta.file_type().is_symlink() {
        return Ok(());
    }
    let want = if meta.is_dir() { 0o755 } else { 0o644 };
    if meta.mode() & 0o777 != want {
        dir.set_permissions(rel, Permissions::from_mode(want))?;
    }
    if meta.is_dir() {
        for entry in dir.read_dir(rel)? {
            let child = rel.join(entry?.file_name());
            if depth > 0 || !dir.symlink_metadata(&child)?.is_dir() {
                open_to_workers(dir, &child, depth.saturating_sub(1))?;
            }
        }
    }
    Ok(())
}

/// Opens a file the operator named (a wheel given on the command line, or one pip
/// downloaded) for reading, without blocking on a FIFO, through its directory.
pub fn open_named(path: &Path) -> io::Result<std::fs::File> {
    let (dir, name) = runner_sandbox::host::open_parent(path)?;
    let file = dir.open_with(
        name,
        OpenOptions::new()
            .read(true)
            .custom_flags(OFlag::O_NONBLOCK.bits()),
    )?;
    Ok(file.into_std())
}
