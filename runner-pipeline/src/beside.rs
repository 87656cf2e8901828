//! Directories that live beside a request (`inputs/`, `results/`), and how far their
//! paths are trusted.
//!
//! A path the operator names on the command line (`--inputs DIR`, `--results DIR`) is
//! used as named, a symlink followed, as any Unix tool does: the operator chose it. The
//! default, an entry beside the request, is controlled by whoever can write the
//! request's directory (`inputs -> /etc`, `results -> /etc/cron.d`), so it must be a
//! real directory and is opened without following a symlink. Callers work through the
//! handle opened here, so swapping the entry afterwards changes nothing.
//!
//! One type, [`BesideDir`], serves every such directory; what differs between them (the
//! default name, whether it is created) is its [`Side`].

use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
use runner_sandbox::host;
use std::io;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

/// What kind of directory beside a request a [`BesideDir`] is.
pub trait Side {
    /// The default entry beside the request (`inputs`, `results`), which is also the
    /// name of the option that names another one (`--inputs`, `--results`).
    const NAME: &'static str;
    /// Whether opening creates the directory when it is missing.
    const CREATE: bool;
}

/// A run's inputs ([`crate::stage::InputsRoot`]): `inputs/` beside the request, never
/// created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inputs {}
/// A run's results ([`crate::result::ResultsRoot`]): `results/` beside the request,
/// created if missing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Results {}

impl Side for Inputs {
    const NAME: &'static str = "inputs";
    const CREATE: bool = false;
}

impl Side for Results {
    const NAME: &'static str = "results";
    const CREATE: bool = true;
}

/// Why a directory beside a request could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum BesideError {
    #[error("{side} directory {dir}: {source}")]
    Io {
        side: &'static str,
        dir: PathBuf,
        source: io::Error,
    },
    #[error(
        "{side} directory {dir} is a symlink (or not a directory); the `{side}/` beside a request must be a real directory (name another one with --{side})"
    )]
    NotARealDir { side: &'static str, dir: PathBuf },
}

/// A directory a run reads or writes: its path, and whether the operator named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BesideDir<S> {
    path: PathBuf,
    named: bool,
    side: PhantomData<S>,
}

impl<S: Side> BesideDir<S> {
    /// A directory named by the operator: a symlink to it is followed.
    pub fn named(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            named: true,
            side: PhantomData,
        }
    }

    /// The default entry beside `request`: refused when it is a symlink.
    pub fn beside(request: &Path) -> Self {
        Self::beside_named(request, S::NAME)
    }

    /// The entry `name` beside `request` (a `runner serve` claim keeps a request's
    /// inputs as `TR-x.inputs/`): refused when it is a symlink.
    pub fn beside_named(request: &Path, name: &str) -> Self {
        let parent = match request.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        Self {
            path: parent.join(name),
            named: false,
            side: PhantomData,
        }
    }

    /// The operator's directory when given, else the default entry beside the request.
    pub fn for_request(named: Option<&Path>, request: &Path) -> Self {
        named.map_or_else(|| Self::beside(request), Self::named)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The error of a failed operation on this directory.
    pub fn failed(&self, source: io::Error) -> BesideError {
        BesideError::Io {
            side: S::NAME,
            dir: self.path.clone(),
            source,
        }
    }

    /// Opens the directory as a capability (creating it first for a side that does).
    ///
    /// # Ambient authority
    /// Opens (and may create) directories on the host filesystem, through
    /// [`runner_sandbox::host`].
    pub fn open(&self) -> Result<Dir, BesideError> {
        let io_error = |source| self.failed(source);
        let not_a_real_dir = || BesideError::NotARealDir {
            side: S::NAME,
            dir: self.path.clone(),
        };
        if self.named {
            return if S::CREATE {
                host::create_dir_all(&self.path)
            } else {
                host::open_dir(&self.path)
            }
            .map_err(io_error);
        }
        if self.path.file_name().is_none() {
            return Err(not_a_real_dir());
        }
        let (parent, name) = host::open_parent(&self.path).map_err(io_error)?;
        if S::CREATE {
            match parent.create_dir(&name) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io_error(e)),
            }
        }
        let flags = nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_DIRECTORY;
        match parent.open_with(
            &name,
            OpenOptions::new().read(true).custom_flags(flags.bits()),
        ) {
            Ok(f) => Ok(Dir::from_std_file(f.into_std())),
            Err(e) => {
                let not_a_dir = e.raw_os_error() == Some(nix::errno::Errno::ELOOP as i32)
                    || e.raw_os_error() == Some(nix::errno::Errno::ENOTDIR as i32)
                    // cap-std refuses a symlink it will not follow in its own words.
                    || parent
                        .symlink_metadata(&name)
                        .is_ok_and(|m| m.file_type().is_symlink());
                Err(if not_a_dir {
                    not_a_real_dir()
                } else {
                    io_error(e)
                })
            }
        }
    }
}
