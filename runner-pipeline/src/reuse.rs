//! Content-addressed reuse: the key that says two runs would be the same run.
//!
//! Two runs of a request are interchangeable when they have the same request (its
//! normalized text's sha256, which also pins the inputs' hashes), the same inputs, the
//! same policy, the same engine and guest, and the same runner version. [`key`] hashes
//! exactly those; `runner serve --nats` stores each result's summary under it, so a
//! redelivered request whose result exists is answered without running again.
//!
//! On disk (`runner exec --reuse`), [`find`] looks in a results directory for a result
//! whose lock has the same key ([`key_of_lock`]) and trusts it only once it verifies as
//! `runner verify` does (every hash re-derived from the files, the statement, and the
//! request given); a tampered or partial candidate is passed over, with the reason.

use crate::lock::verify::{self, RequestLookup};
use crate::pipeline::RunPlan;
use crate::stage::InputsRoot;
use ed25519_dalek::VerifyingKey;
use runner_contract::verdict::Verdict;
use runner_core::lock::Lock;
use runner_core::policy::Policy;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// What a run's identity is made of (hashed canonically by [`key`]).
#[derive(Debug, Serialize)]
struct Identity<'a> {
    request_sha256: &'a str,
    /// (sandbox path, sha256 hex), sorted.
    inputs: Vec<(&'a str, &'a str)>,
    policy_sha256: &'a str,
    engine: (&'a str, &'a str),
    guest: Option<(&'a str, &'a str)>,
    runner_version: &'a str,
}

impl Identity<'_> {
    fn hash(mut self) -> String {
        self.inputs.sort_unstable();
        // Plain structs and strings: serializing cannot fail.
        let bytes = serde_jcs::to_vec(&self).unwrap_or_default();
        runner_core::digest::sha256_hex(&bytes)
    }
}

/// The reuse key of a judged request under `policy`: 64 lowercase hex.
pub fn key(plan: &RunPlan, policy: &Policy) -> String {
    let request_sha256 = runner_core::lock::text_sha256_tagged(&plan.request_text);
    let (engine, engine_version) = plan.engine_identity();
    let guest = plan.guest_pin();
    Identity {
        request_sha256: &request_sha256,
        inputs: plan
            .approved
            .inputs()
            .iter()
            .map(|i| (i.path.as_str(), i.sha256.as_str()))
            .collect(),
        policy_sha256: &policy.sha256,
        engine: (&engine, &engine_version),
        guest: guest.as_ref().map(|(n, s)| (n.as_str(), s.as_str())),
        runner_version: crate::RUNNER_VERSION,
    }
    .hash()
}

/// The reuse key of the run a lock records: equal to [`key`] of the request, policy,
/// engine, guest and runner version it pins.
pub fn key_of_lock(lock: &Lock) -> String {
    let untag = |s: &'_ str| -> String { s.strip_prefix("sha256:").unwrap_or(s).to_owned() };
    let inputs: Vec<(String, String)> = lock
        .inputs
        .iter()
        .map(|i| (i.path.clone(), untag(&i.sha256)))
        .collect();
    let policy = untag(&lock.policy.sha256);
    let guest = lock
        .runtime
        .guest
        .as_ref()
        .map(|g| (g.name.as_str(), untag(&g.sha256)));
    Identity {
        request_sha256: &lock.request.sha256,
        inputs: inputs
            .iter()
            .map(|(p, s)| (p.as_str(), s.as_str()))
            .collect(),
        policy_sha256: &policy,
        engine: (&lock.runtime.engine, &lock.runtime.engine_version),
        guest: guest.as_ref().map(|(n, s)| (*n, s.as_str())),
        runner_version: &lock.runtime.runner_version,
    }
    .hash()
}

/// A verified stored result that stands for a run.
#[derive(Debug)]
pub struct Reusable {
    /// Its document, `RESULTS/TS-….md`.
    pub result: PathBuf,
    pub lock: Lock,
}

/// What [`find`] found: the result to reuse, if any, and why each candidate with the
/// same key (or the inputs on disk) was not trusted.
#[derive(Debug, Default)]
pub struct Found {
    pub reusable: Option<Reusable>,
    pub passed_over: Vec<String>,
}

/// The most a lock may hold (as `runner verify` reads it).
const MAX_LOCK_BYTES: u64 = 64 << 20;

/// Looks in `results` for a result of the run `plan` would be (same [`key`]) that
/// verifies: its document, lock, streams and artifacts re-derived as `runner verify`
/// does against `request` (the file the plan was judged from), its in-toto statement the
/// one its lock implies and, when `public_key` is given, signed by it. The inputs in
/// `inputs` must still have the hashes the request declares (otherwise the request runs,
/// and is refused as it would be without reuse). The newest verifying candidate wins.
///
/// # Ambient authority
/// Opens and lists the results directory ([`runner_sandbox::host`]), and reads the
/// request and the inputs the operator named.
pub fn find(
    plan: &RunPlan,
    policy: &Policy,
    request: &Path,
    inputs: &InputsRoot,
    results: &Path,
    public_key: Option<&VerifyingKey>,
) -> Found {
    let mut found = Found::default();
    let wanted = key(plan, policy);
    let request_id = plan.approved.request_id();
    let Ok(entries) = runner_sandbox::host::open_dir(results).and_then(|dir| dir.entries()) else {
        return found;
    };
    let suffix = runner_gate::inbox::LOCK_SUFFIX;
    let mut ids: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
        .filter_map(|name| name.strip_suffix(suffix).map(str::to_owned))
        .filter(|id| id.starts_with("TS-") && id.contains(request_id))
        .collect();
    // Result ids start with their UTC time: newest first.
    ids.sort_unstable_by(|a, b| b.cmp(a));
    let mut inputs_checked = false;
    for id in ids {
        let lock_path = results.join(format!("{id}{suffix}"));
        let lock: Lock =
            match runner_sandbox::read::read_regular_nofollow(&lock_path, MAX_LOCK_BYTES)
                .map_err(|e| e.to_string())
                .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
            {
                Ok(lock) => lock,
                Err(e) => {
                    found
                        .passed_over
                        .push(format!("{}: unreadable lock: {e}", lock_path.display()));
                    continue;
                }
            };
        if key_of_lock(&lock) != wanted {
            continue;
        }
        if !inputs_checked {
            if let Some(why) = inputs_differ(plan, inputs) {
                found.passed_over.push(why);
                return found;
            }
            inputs_checked = true;
        }
        let document = results.join(format!("{id}.md"));
        let mut v = verify::verify_with(&document, RequestLookup::Given(request));
        verify::check_statement(&mut v, &document, public_key);
        if v.verdict == Verdict::Accept {
            found.reusable = Some(Reusable {
                result: document,
                lock,
            });
            return found;
        }
        let differences: Vec<String> = v
            .differences
            .iter()
            .map(|d| format!("{} (expected {}, found {})", d.what, d.expected, d.actual))
            .collect();
        found.passed_over.push(format!(
            "{}: same run, but it does not verify: {}",
            document.display(),
            differences.join("; ")
        ));
    }
    found
}

/// Why the inputs on disk are not the ones the request declares, if they are not.
fn inputs_differ(plan: &RunPlan, inputs: &InputsRoot) -> Option<String> {
    for input in plan.approved.inputs() {
        match crate::stage::hash_input(inputs, &input.path) {
            Ok(sha) if sha == input.sha256 => {}
            Ok(sha) => {
                return Some(format!(
                    "input {} has sha256 {sha}, the request declares {}: not reused",
                    input.path, input.sha256
                ));
            }
            Err(e) => return Some(format!("input {}: {e}: not reused", input.path)),
        }
    }
    None
}
