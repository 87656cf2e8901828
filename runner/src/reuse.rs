//! Content-addressed reuse: the key that says two runs would be the same run.
//!
//! Two runs of a request are interchangeable when they have the same request (its
//! normalized text's sha256, which also pins the inputs' hashes), the same inputs, the
//! same policy, the same engine and guest, and the same runner version. [`key`] hashes
//! exactly those; `runner serve --nats` stores each result's summary under it, so a
//! redelivered request whose result exists is answered without running again.

use crate::pipeline::RunPlan;
use crate::policy::Policy;
use serde::Serialize;

/// What a run's identity is made of (hashed canonically by [`key`]).
#[derive(Debug, Serialize)]
struct Identity<'a> {
    request_sha256: String,
    inputs: Vec<(&'a str, &'a str)>,
    policy_sha256: &'a str,
    engine: (String, String),
    guest: Option<(String, String)>,
    runner_version: &'static str,
}

/// The reuse key of a judged request under `policy`: 64 lowercase hex.
pub fn key(plan: &RunPlan, policy: &Policy) -> String {
    let identity = Identity {
        request_sha256: crate::lock::text_sha256_tagged(&plan.request_text),
        inputs: plan
            .approved
            .inputs()
            .iter()
            .map(|i| (i.path.as_str(), i.sha256.as_str()))
            .collect(),
        policy_sha256: &policy.sha256,
        engine: plan.engine_identity(),
        guest: plan.guest_pin(),
        runner_version: crate::RUNNER_VERSION,
    };
    // Plain structs and strings: serializing cannot fail.
    let bytes = serde_jcs::to_vec(&identity).unwrap_or_default();
    crate::digest::sha256_hex(&bytes)
}
