//! The runner's cache directory, derived once for everything that keeps files there
//! (fetched guests, precompiled modules).

use cap_std::fs::Dir;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The runner's cache directory (guests, precompiled modules), derived in this one
/// place: `$RUNNER_CACHE_DIR`, else `$XDG_CACHE_HOME/runner`, else
/// `$HOME/.cache/runner` (the home directory from the password database when `HOME` is
/// unset), else `.cache/runner` under the working directory. Empty variables count as
/// unset, and so does a relative `XDG_CACHE_HOME`, as the XDG spec asks. With no home at
/// all (a bare container) a relative path keeps the cache under the working directory
/// rather than guessing a shared location such as `/tmp`, where another user could
/// plant precompiled code.
///
/// # Ambient Authority
/// Reads the process environment and, as a last resort, the password database.
pub fn default_cache_dir() -> PathBuf {
    cache_dir_from_env(&crate::env::var_os, passwd_home)
}

/// The user's home directory from the password database.
pub fn passwd_home() -> Option<PathBuf> {
    nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
        .map(|u| u.dir)
}

/// [`default_cache_dir`] from the given environment and password-database lookup.
pub fn cache_dir_from_env(
    var: &dyn Fn(&str) -> Option<OsString>,
    home: impl FnOnce() -> Option<PathBuf>,
) -> PathBuf {
    let var = |key| var(key).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("RUNNER_CACHE_DIR")
        .or_else(|| {
            var("XDG_CACHE_HOME")
                .filter(|p| p.is_absolute())
                .map(|p| p.join("runner"))
        })
        .or_else(|| var("HOME").or_else(home).map(|h| h.join(".cache/runner")))
        .unwrap_or_else(|| PathBuf::from(".cache/runner"))
}

/// Whether an entry of the cache can be trusted with code the runner will execute: the
/// right type (a symlink never), owned by our euid, not writable by group or others.
/// The reason it cannot, else (`is a symlink`, `has mode 777: group or world writable`).
pub fn check_private(meta: &std::fs::Metadata, want_dir: bool) -> Result<(), NotPrivate> {
    use std::os::unix::fs::MetadataExt;
    let ft = meta.file_type();
    if ft.is_symlink() {
        return Err(NotPrivate::Symlink);
    }
    if want_dir && !ft.is_dir() {
        return Err(NotPrivate::NotADirectory);
    }
    if !want_dir && !ft.is_file() {
        return Err(NotPrivate::NotARegularFile);
    }
    let euid = nix::unistd::geteuid().as_raw();
    if meta.uid() != euid {
        return Err(NotPrivate::Owner {
            uid: meta.uid(),
            euid,
        });
    }
    if meta.mode() & 0o022 != 0 {
        return Err(NotPrivate::Writable { mode: meta.mode() });
    }
    Ok(())
}

/// Why an entry of the cache cannot be trusted with code ([`check_private`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NotPrivate {
    #[error("is a symlink")]
    Symlink,
    #[error("is not a directory")]
    NotADirectory,
    #[error("is not a regular file")]
    NotARegularFile,
    #[error("is owned by uid {uid}, not by us ({euid})")]
    Owner { uid: u32, euid: u32 },
    #[error("has mode {:o}: group or world writable", mode & 0o7777)]
    Writable { mode: u32 },
}

/// Why a private cache directory could not be had ([`create_private_dir`],
/// [`open_private_dir`]).
#[derive(Debug, thiserror::Error)]
pub enum PrivateDirError {
    #[error("cannot create parent: {0}")]
    CreateParent(std::io::Error),
    #[error("cannot create: {0}")]
    Create(std::io::Error),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// It is there but cannot be trusted ([`check_private`]'s reason).
    #[error("{0}")]
    NotPrivate(#[source] NotPrivate),
}

/// Creates the directory at `path` (mode 0700, its parents as needed) unless it exists,
/// then opens it as [`open_private_dir`] does.
///
/// # Ambient Authority
/// Creates and opens `path` on the host file system.
pub fn create_private_dir(path: &Path) -> Result<Dir, PrivateDirError> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::symlink_metadata(path) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(PrivateDirError::CreateParent)?;
            }
            match std::fs::DirBuilder::new().mode(0o700).create(path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(PrivateDirError::Create(e)),
            }
        }
        Err(e) => return Err(e.into()),
    }
    open_private_dir(path)
}

/// Opens the directory at `path` as a capability when it can hold code the runner will
/// execute ([`check_private`]: not a symlink, ours, not group or world writable). The
/// checks are made on the opened descriptor, so what was checked is what is held.
///
/// # Ambient Authority
/// Opens `path` on the host file system.
pub fn open_private_dir(path: &Path) -> Result<Dir, PrivateDirError> {
    use std::os::unix::fs::OpenOptionsExt;
    // A symlink in the last place says so by name (O_NOFOLLOW alone says ELOOP).
    let named = std::fs::symlink_metadata(path)?;
    check_private(&named, true).map_err(PrivateDirError::NotPrivate)?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_DIRECTORY).bits())
        .open(path)?;
    check_private(&file.metadata()?, true).map_err(PrivateDirError::NotPrivate)?;
    Ok(Dir::from_std_file(file))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_private_dir_is_created_0700_and_a_shared_or_linked_one_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("a/cache");
        let dir = create_private_dir(&path).unwrap();
        dir.write("x", b"1").unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let cases: [(&Path, &str); 2] = [
            (&link, "is a symlink"),
            (tmp.path(), "has mode 777: group or world writable"),
        ];
        for (path, reason) in cases {
            let err = open_private_dir(path).unwrap_err().to_string();
            assert_eq!(err, reason, "{}", path.display());
        }
    }
}
