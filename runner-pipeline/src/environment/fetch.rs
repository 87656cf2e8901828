//! Fetching an environment's wheels with pip: one `pip download` of every package by
//! name, exact version and sha256 (`--require-hashes --no-deps`: every dependency is
//! pinned in the policy, nothing is resolved), restricted to pure-Python wheels for the
//! guest's Python (`--only-binary :all: --abi none --platform any`), then
//! [`super::install`] checks and unpacks them. The index is whatever the user's pip is
//! configured to use; no URL lives in this code.

use super::{EnvError, EnvironmentSpec, Located, install};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// How many lines of pip's stderr an error shows.
const STDERR_TAIL_LINES: usize = 20;

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
    let work = tempfile::Builder::new()
        .prefix("runner-env-fetch-")
        .tempdir()
        .map_err(EnvError::io(
            env,
            "create a temporary directory in",
            &std::env::temp_dir(),
        ))?;
    let req_path = work.path().join("requirements.txt");
    let requirements: Vec<String> = spec
        .packages
        .iter()
        .map(|p| format!("{}=={} --hash=sha256:{}", p.name, p.version, p.sha256))
        .collect();
    fs::write(&req_path, requirements.join("\n") + "\n")
        .map_err(EnvError::io(env, "write", &req_path))?;
    let dest = work.path().join("download");
    fs::create_dir(&dest).map_err(EnvError::io(env, "create", &dest))?;
    progress(&format!(
        "{env}: downloading {} wheel(s) with `{} -m pip download` (pinned by sha256)",
        spec.packages.len(),
        python.to_string_lossy()
    ));
    let output = Command::new(&python)
        .args(["-m", "pip", "download", "--no-deps", "--require-hashes"])
        .args([
            "--only-binary",
            ":all:",
            "--no-input",
            "--disable-pip-version-check",
        ])
        // Pure-Python wheels for the guest's Python, whatever the host's is.
        .args([
            "--implementation",
            "py",
            "--abi",
            "none",
            "--platform",
            "any",
        ])
        .arg("--python-version")
        .arg(python_version)
        .arg("--dest")
        .arg(&dest)
        .arg("-r")
        .arg(&req_path)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| EnvError::PythonNotFound {
            env: env.to_owned(),
            python: python.to_string_lossy().into_owned(),
            source,
        })?;
    if !output.status.success() {
        let text = String::from_utf8_lossy(&output.stderr);
        let lines: Vec<&str> = text.trim_end().lines().collect();
        return Err(EnvError::PipFailed {
            env: env.to_owned(),
            requirements: requirements.join(", "),
            status: output.status.to_string(),
            stderr_tail: lines[lines.len().saturating_sub(STDERR_TAIL_LINES)..].join("\n"),
        });
    }
    let mut wheels: Vec<PathBuf> = Vec::new();
    for item in fs::read_dir(&dest).map_err(EnvError::io(env, "list", &dest))? {
        let path = item.map_err(EnvError::io(env, "list", &dest))?.path();
        if path.extension().is_some_and(|e| e == "whl") {
            wheels.push(path);
        }
    }
    wheels.sort();
    install(spec, &wheels, env_dir, progress)
}
