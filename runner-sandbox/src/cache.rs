//! The runner's cache directory, derived once for everything that keeps files there
//! (fetched guests, precompiled modules).

use std::ffi::OsString;
use std::path::PathBuf;

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
