//! The policy (`runner_core::policy`, no I/O) and the reading of a policy file.

use runner_core::policy::{Policy, PolicyError};
use std::path::Path;

/// Loads a policy file.
///
/// # Ambient authority
/// Reads `path` from the host filesystem.
pub fn load(path: &Path) -> Result<Policy, PolicyError> {
    let text = runner_sandbox::read::read_to_string(path).map_err(|source| PolicyError::Read {
        path: path.to_owned(),
        source,
    })?;
    Policy::parse(&text, &path.display().to_string())
}
