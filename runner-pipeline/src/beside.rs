//! Directories that live beside a request (`inputs/`, `results/`), and how far their
//! paths are trusted.
//!
//! A path the operator names on the command line (`--inputs DIR`, `--results DIR`) is
//! used as named, a symlink followed, as any Unix tool does: the operator chose it. The
//! default, an entry beside the request, is controlled by whoever can write the
//! request's directory (`inputs -> /etc`, `results -> /etc/cron.d`), so it must be a
//! real directory and is opened without following a symlink. Callers work through the
//! handle opened here, so swapping the entry afterwards changes nothing.

use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
use std::io;
use std::path::{Path, PathBuf};

/// A directory a run reads or writes: its path, and whether the operator named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BesideDir {
    path: PathBuf,
    named: bool,
}

/// Why a [`BesideDir`] could not be opened.
#[derive(Debug)]
pub enum OpenError {
    /// The default entry is a symlink, or not a directory.
    NotARealDir,
    Io(io::Error),
}

impl BesideDir {
    /// A directory named by the operator: a symlink to it is followed.
    pub fn named(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            named: true,
        }
    }

    /// The entry `name` beside `request`: never followed through a symlink.
    pub fn beside(request: &Path, name: &str) -> Self {
        Self {
            path: parent_or_dot(request).join(name),
            named: false,
        }
    }

    /// The operator's directory when given, else `name` beside the request.
    pub fn for_request(named: Option<&Path>, request: &Path, name: &str) -> Self {
        named.map_or_else(|| Self::beside(request, name), Self::named)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens the directory as a capability, creating it first when `create` is set.
    ///
    /// # Ambient authority
    /// Opens (and may create) directories on the host filesystem.
    pub fn open(&self, create: bool) -> Result<Dir, OpenError> {
        if self.named {
            if create {
                std::fs::create_dir_all(&self.path).map_err(OpenError::Io)?;
            }
            return Dir::open_ambient_dir(&self.path, ambient_authority()).map_err(OpenError::Io);
        }
        let name = self.path.file_name().ok_or(OpenError::NotARealDir)?;
        let parent = Dir::open_ambient_dir(parent_or_dot(&self.path), ambient_authority())
            .map_err(OpenError::Io)?;
        if create {
            match parent.create_dir(name) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(OpenError::Io(e)),
            }
        }
        let flags = nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_DIRECTORY;
        match parent.open_with(
            name,
            OpenOptions::new().read(true).custom_flags(flags.bits()),
        ) {
            Ok(f) => Ok(Dir::from_std_file(f.into_std())),
            Err(e) => {
                let not_a_dir = e.raw_os_error() == Some(nix::errno::Errno::ELOOP as i32)
                    || e.raw_os_error() == Some(nix::errno::Errno::ENOTDIR as i32)
                    // cap-std refuses a symlink it will not follow in its own words.
                    || parent
                        .symlink_metadata(name)
                        .is_ok_and(|m| m.file_type().is_symlink());
                Err(if not_a_dir {
                    OpenError::NotARealDir
                } else {
                    OpenError::Io(e)
                })
            }
        }
    }
}

fn parent_or_dot(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}
