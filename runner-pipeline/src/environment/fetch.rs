//! Fetching an environment's wheels with pip: one `pip download` of every package by
//! name, exact version and sha256 (`--require-hashes --no-deps`: every dependency is
//! pinned in the policy, nothing is resolved), restricted to pure-Python wheels for the
//! guest's Python (`--only-binary :all: --abi none --platform any`), then
//! [`super::install`] checks and unpacks them. The index is whatever the user's pip is
//! configured to use; no URL lives in this code.

use super::{EnvError, EnvironmentSpec, Located, install};
use runner_sandbox::pip::{self, PipError};
use std::path::Path;

/// Downloads `spec`'s wheels with `$RUNNER_PYTHON -m pip` (default `python3`) for a
/// guest of Python `python_version` (`3.12`) and installs them into `env_dir`.
///
/// # Ambient Authority
/// Runs a host program, uses the network through it, writes under the system temporary
/// directory and `env_dir`.
pub fn fetch(
    spec: &EnvironmentSpec,
    python_version: &str,
    env_dir: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<Located, EnvError> {
    let env = spec.name.as_str();
    if let Ok(found) = super::locate(spec, env_dir) {
        progress(&format!(
            "{env}: already installed (tree sha256 {})",
            found.tree_sha256
        ));
        return Ok(found);
    }
    let python = runner_sandbox::env::python();
    let requirements: Vec<String> = spec
        .packages
        .iter()
        .map(|p| format!("{}=={} --hash=sha256:{}", p.name, p.version, p.sha256))
        .collect();
    progress(&format!(
        "{env}: downloading {} wheel(s) with `{} -m pip download` (pinned by sha256)",
        spec.packages.len(),
        python.to_string_lossy()
    ));
    let downloaded = pip::download(&pip::Download {
        python: &python,
        requirements: &(requirements.join("\n") + "\n"),
        // Pure-Python wheels for the guest's Python, whatever the host's is.
        python_version,
        pure_python: true,
        echo: false,
    })
    .map_err(|e| match e {
        PipError::Io {
            action,
            path,
            source,
        } => EnvError::io(env, action, &path)(source),
        PipError::Spawn { source, .. } => EnvError::PythonNotFound {
            env: env.to_owned(),
            python: python.to_string_lossy().into_owned(),
            source,
        },
        PipError::Failed {
            status,
            stderr_tail,
        } => EnvError::PipFailed {
            env: env.to_owned(),
            requirements: requirements.join(", "),
            status,
            stderr_tail,
        },
    })?;
    install(spec, &downloaded.wheels, env_dir, progress)
}
