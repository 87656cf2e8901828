//! The gates (`runner-gate`: the document validators and the inbox sorter), and the
//! checks the inbox makes with the runner's own machinery: a request's approval
//! ([`crate::approval::judge`]) and a result's set against its lock
//! ([`crate::lock::verify`]).

use runner_core::policy::Policy;
use runner_core::request::Reason;
use runner_gate::inbox;
use std::path::Path;

/// The runner's [`inbox::Companions`]: what `runner gate` checks beside a document's
/// own validator.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunnerCompanions;

impl inbox::Companions for RunnerCompanions {
    fn request_reasons(&self, path: &Path, bytes: &[u8], policy: &Policy) -> Vec<Reason> {
        crate::approval::judge(path, bytes, policy)
            .err()
            .unwrap_or_default()
    }

    fn result_set_reasons(&self, path: &Path) -> Vec<Reason> {
        result_set_reasons(path)
    }
}

/// Why a result's set is not whole and consistent: its lock `X.lock.json` must be there
/// and re-derive (`lock.missing`, `lock.mismatch`), as `runner verify` checks it, and the
/// in-toto statement (and envelope, when there is one) must be the ones the lock implies
/// (`lock.mismatch`). Everything `runner exec` writes for one run travels together, so
/// a result without its lock is not one the gate can vouch for.
pub fn result_set_reasons(path: &Path) -> Vec<Reason> {
    let v = crate::lock::verify::verify_set(path);
    let (id, dir) = crate::lock::verify::result_location(path);
    let lock_name = runner_core::lock::lock_file_name(&id);
    if v.lock.is_none() && dir.join(&lock_name).symlink_metadata().is_err() {
        let why = v
            .differences
            .first()
            .map_or_else(String::new, |d| format!(": {}", d.actual));
        return vec![Reason::new(
            "lock.missing",
            format!(
                "a result crosses the gate with its replay lock `{lock_name}` beside it, as `runner exec` writes it; it is missing{why}"
            ),
            None,
        )];
    }
    v.differences
        .iter()
        .map(|d| {
            Reason::new(
                "lock.mismatch",
                format!(
                    "{} differs from the replay lock: expected {}, found {}",
                    d.what, d.expected, d.actual
                ),
                None,
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The gate moves a request's signature with it under the name `runner approve`
    /// writes (the other companions' names are checked in `runner-gate`).
    #[test]
    fn the_signature_companion_is_the_name_approve_writes() {
        let id = "TR-20261121-x";
        assert_eq!(
            crate::approval::signature_path(Path::new(&format!("{id}.md")))
                .display()
                .to_string(),
            format!("{id}{}", inbox::SIGNATURE_SUFFIX)
        );
        assert!(inbox::COMPANION_SUFFIXES.contains(&inbox::SIGNATURE_SUFFIX));
    }
}
