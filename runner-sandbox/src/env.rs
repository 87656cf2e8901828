//! The process environment, read in this one place: elsewhere clippy refuses
//! `std::env::var*` (`clippy.toml`), so every variable the runner honours is read
//! through here and listed below.
//!
//! | variable | read by |
//! | --- | --- |
//! | `RUNNER_CACHE_DIR`, `XDG_CACHE_HOME`, `HOME` | [`crate::cache`] |
//! | `RUNNER_GUEST_DIR` | `runner::guest::store` |
//! | `RUNNER_ENV_DIR` | `runner::environment` |
//! | `RUNNER_PYTHON` | [`python`]: guest and environment fetches |
//! | `RUNNER_LOG`, `RUNNER_LOG_FORMAT`, `NO_COLOR`, `CLICOLOR`, `CLICOLOR_FORCE`, `TERM` | `runner::cli::output` |
//! | `RUNNER_WORKER_EXE`, `RUNNER_MONTY_WORKER` | the backends, to find their worker |
//! | `RUNNER_WARM_WORKERS` | `runner::cli::exec`: warm workers per engine for a host or a batch |
//! | `RUNNER_PROBE_READ_DIR`, `RUNNER_PROBE_WRITE_DIR` | the confinement probe (tests) |
//! | `RUNNER_TEST_GUEST`, `RUNNER_TEST_WHEEL` | tests |
//!
//! # Ambient Authority
//! Every function here reads the process environment.

use std::ffi::OsString;

/// The variable `name`, as the OS holds it (`None` when unset).
pub fn var_os(name: &str) -> Option<OsString> {
    std::env::var_os(name)
}

/// The variable `name`, unset when empty: the runner treats `NAME=` as not set.
pub fn non_empty(name: &str) -> Option<OsString> {
    var_os(name).filter(|v| !v.is_empty())
}

/// The variable `name` as UTF-8 (`std::env::var`: an error when unset or not Unicode).
pub fn var(name: &str) -> Result<String, std::env::VarError> {
    std::env::var(name)
}

/// The Python that runs pip for guest and environment fetches: `$RUNNER_PYTHON`, else
/// `python3` from `PATH`.
pub fn python() -> OsString {
    non_empty("RUNNER_PYTHON").unwrap_or_else(|| OsString::from("python3"))
}
