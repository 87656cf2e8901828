//! Replay: re-run the request a lock pins, with the pinned guest and policy, and compare
//! every output (stdout, stderr, each artifact, exit code, outcome).
//!
//! A replay refuses to run, naming each difference, when the request, policy, runner,
//! engine or guest available now is not the one pinned: a replay on something else is
//! not a replay. Inputs whose hash differs from the pin are reported as drift and
//! nothing runs (the request's approval covers only the pinned bytes).

use super::{Pipeline, RunError, RunPlan};
use crate::exit_codes;
use crate::lock::verify::{find_request, result_location};
use crate::lock::{Lock, OutputsPin, lock_file_name, tag, text_sha256_tagged};
use crate::result::ResultsRoot;
use crate::stage::InputsRoot;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// One compared output.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct OutputComparison {
    pub name: String,
    pub expected: String,
    pub actual: String,
    #[schemars(extend("enum" = ["MATCH", "DRIFT"]))]
    pub verdict: &'static str,
}

/// What a replay found.
pub struct Replayed {
    /// Every compared output (or, when inputs drifted, every drifted input: then
    /// nothing ran).
    pub outputs: Vec<OutputComparison>,
    /// The replay's own result (`None` when nothing ran).
    pub result_path: Option<PathBuf>,
}

impl Replayed {
    pub fn matched(&self) -> bool {
        self.outputs.iter().all(|o| o.verdict == "MATCH")
    }
}

/// Why a replay did not happen.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// What is pinned is not what is available now (or the lock cannot be trusted).
    #[error("{}", .0.join("; "))]
    Refused(Vec<String>),
    #[error(transparent)]
    Run(#[from] RunError),
}

impl ReplayError {
    pub fn exit_code(&self) -> i32 {
        match self {
            Self::Refused(_) => exit_codes::REJECT,
            Self::Run(e) => e.exit_code(),
        }
    }

    /// Each reason, one line each.
    pub fn lines(&self) -> Vec<String> {
        match self {
            Self::Refused(lines) => lines.clone(),
            Self::Run(e) => e
                .reasons()
                .into_iter()
                .map(|r| format!("{}: {}", r.code, r.message))
                .collect(),
        }
    }
}

/// Where a replay finds its pieces.
pub struct ReplaySource<'a> {
    /// The result to reproduce (`TS-….md`); its lock is read from beside it.
    pub result: &'a Path,
    /// The request (default: found beside the results directory by id and hash).
    pub request: Option<&'a Path>,
    /// The inputs (default: `inputs/` beside the request).
    pub inputs: Option<&'a Path>,
}

impl Pipeline {
    /// Re-runs what `source.result`'s lock pins, publishing into `results`, and compares.
    ///
    /// # Ambient authority
    /// Reads the lock beside the result named by the operator.
    pub fn replay(
        &self,
        source: &ReplaySource<'_>,
        results: &ResultsRoot,
    ) -> Result<Replayed, ReplayError> {
        let refuse = |msg: String| ReplayError::Refused(vec![msg]);
        let (id, dir) = result_location(source.result);
        let lock_path = dir.join(lock_file_name(&id));
        let bytes = std::fs::read(&lock_path)
            .map_err(|e| refuse(format!("cannot read the lock {}: {e}", lock_path.display())))?;
        let lock = Lock::parse(&bytes).map_err(|e| {
            refuse(format!(
                "the lock {} is not trustworthy: {e}",
                lock_path.display()
            ))
        })?;
        let request_path = source
            .request
            .map(Path::to_path_buf)
            .or_else(|| find_request(&dir, &lock.request.request_id, &lock.request.sha256))
            .ok_or_else(|| {
                refuse(format!(
                    "request {} not found beside the results; pass --request",
                    lock.request.request_id
                ))
            })?;
        let plan = self.judge(&request_path)?;
        let mut refused = self.pin_differences(&lock, &plan);
        let request_sha = text_sha256_tagged(&plan.request_text);
        if request_sha != lock.request.sha256 {
            refused.push(format!(
                "the request {} has sha256 {request_sha}; the lock pins {}",
                request_path.display(),
                lock.request.sha256
            ));
        }
        if !refused.is_empty() {
            return Err(ReplayError::Refused(refused));
        }
        let inputs = InputsRoot::for_request(source.inputs, &request_path);
        let drift = input_drift(&lock, &inputs);
        if !drift.is_empty() {
            return Ok(Replayed {
                outputs: drift,
                result_path: None,
            });
        }
        let summary = self.run(&plan, &inputs, results)?;
        Ok(Replayed {
            outputs: compare(&lock, &summary.lock),
            result_path: Some(summary.result_path),
        })
    }

    /// What is pinned and not what is available now.
    fn pin_differences(&self, lock: &Lock, plan: &RunPlan) -> Vec<String> {
        let policy = self.policy();
        let mut out = Vec::new();
        let policy_sha = tag(&policy.sha256);
        if policy_sha != lock.policy.sha256 {
            out.push(format!(
                "policy: the lock pins {} ({}), the policy in force is {policy_sha} ({})",
                lock.policy.sha256, lock.policy.origin, policy.origin
            ));
        }
        if lock.runtime.runner_version != crate::RUNNER_VERSION {
            out.push(format!(
                "runner: the lock pins {}, this is {}",
                lock.runtime.runner_version,
                crate::RUNNER_VERSION
            ));
        }
        let (engine, version) = plan.engine_identity();
        if lock.runtime.engine != engine || lock.runtime.engine_version != version {
            out.push(format!(
                "engine: the lock pins {} {}, available is {engine} {version}",
                lock.runtime.engine, lock.runtime.engine_version
            ));
        }
        match (&lock.runtime.guest, plan.guest_pin()) {
            (None, None) => {}
            (Some(pinned), Some((name, sha)))
                if pinned.name == name && pinned.sha256 == tag(&sha) => {}
            (pinned, available) => out.push(format!(
                "guest: the lock pins {}, available is {}",
                pinned
                    .as_ref()
                    .map_or("none".to_owned(), |g| format!("{} {}", g.name, g.sha256)),
                available.map_or("none".to_owned(), |(n, s)| format!("{n} sha256:{s}"))
            )),
        }
        out
    }
}

/// Inputs whose bytes differ from the pin, each as a DRIFT entry.
fn input_drift(lock: &Lock, inputs: &InputsRoot) -> Vec<OutputComparison> {
    let mut out = Vec::new();
    for input in &lock.inputs {
        let actual = match crate::stage::hash_input(inputs, &input.path) {
            Ok(sha) => tag(&sha),
            Err(e) => format!("unavailable: {e}"),
        };
        if actual != input.sha256 {
            out.push(OutputComparison {
                name: format!("input {}", input.path),
                expected: input.sha256.clone(),
                actual,
                verdict: "DRIFT",
            });
        }
    }
    out
}

/// Output by output: stdout, stderr, exit code, outcome, then every artifact path in
/// either lock.
pub fn compare(expected: &Lock, actual: &Lock) -> Vec<OutputComparison> {
    let entry = |name: String, e: String, a: String| {
        let verdict = if e == a { "MATCH" } else { "DRIFT" };
        OutputComparison {
            name,
            expected: e,
            actual: a,
            verdict,
        }
    };
    let (e, a) = (&expected.outputs, &actual.outputs);
    let mut out = vec![
        entry(
            "stdout".into(),
            e.stdout.sha256.clone(),
            a.stdout.sha256.clone(),
        ),
        entry(
            "stderr".into(),
            e.stderr.sha256.clone(),
            a.stderr.sha256.clone(),
        ),
        entry(
            "exit_code".into(),
            e.exit_code.to_string(),
            a.exit_code.to_string(),
        ),
        entry("outcome".into(), e.outcome.clone(), a.outcome.clone()),
    ];
    let mut paths: Vec<&str> = e
        .artifacts
        .iter()
        .chain(&a.artifacts)
        .map(|x| x.path.as_str())
        .collect();
    paths.sort_unstable();
    paths.dedup();
    for p in paths {
        let find = |l: &OutputsPin| {
            l.artifacts
                .iter()
                .find(|x| x.path == p)
                .map_or("absent".to_owned(), |x| x.sha256.clone())
        };
        out.push(entry(format!("artifact {p}"), find(e), find(a)));
    }
    out
}
