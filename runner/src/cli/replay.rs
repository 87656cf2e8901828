//! `runner replay TS-….md [--inputs DIR] [--results DIR] [--request FILE] [--check]
//! [--json]`: re-run the request a lock pins, with the pinned guest and policy, and
//! compare every output (stdout, stderr, each artifact, exit code, outcome).
//!
//! A replay refuses to run, naming each difference, when the request, policy, runner,
//! engine or guest available now is not the one pinned: a replay on something else is
//! not a replay. Inputs whose hash differs from the pin are reported as drift and
//! nothing runs (the request's approval covers only the pinned bytes).

use super::exec::RunPlan;
use crate::exit_codes;
use crate::lock::verify::{find_request, result_location};
use crate::lock::{Lock, lock_file_name, tag, text_sha256_tagged};
use crate::policy::Policy;
use serde::Serialize;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  runner replay examples/ci-replay/baseline/TS-*.md --check
  runner replay results/TS-20261121-100000Z-csv-stats.md --request TR-20261121-100000Z-csv-stats.md --json

Exit codes: 0 replayed (MATCH, or DRIFT without --check), 1 refused, 5 drift with --check.")]
pub struct ReplayCommand {
    /// The result to reproduce (`TS-….md`); its lock is read from beside it. Example:
    /// `results/TS-20261121-100000Z-csv-stats.md`.
    #[arg(value_name = "RESULT")]
    pub result: PathBuf,
    /// Directory holding the inputs (default: `inputs/` beside the request). Example:
    /// `--inputs examples/csv-stats/inputs`.
    #[arg(long, value_name = "DIR")]
    pub inputs: Option<PathBuf>,
    /// Keep the replay's own result in this directory (default: a temporary one,
    /// removed afterwards). Example: `--results replays`.
    #[arg(long, value_name = "DIR")]
    pub results: Option<PathBuf>,
    /// The request (default: `<request_id>.md` beside the results directory). Example:
    /// `--request examples/csv-stats/TR-20261121-100000Z-csv-stats.md`.
    #[arg(long, value_name = "FILE")]
    pub request: Option<PathBuf>,
    /// Exit with code 5 when any output drifted. Example: `--check`.
    #[arg(long)]
    pub check: bool,
    /// Print `{"verdict": "MATCH"|"DRIFT"|"REFUSED", "result_path", "outputs": [{"name",
    /// "expected", "actual", "verdict"}], "refused"}` (schema: schemas/replay.json).
    /// Example: `--json`.
    #[arg(long)]
    pub json: bool,
}

/// One compared output.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct OutputComparison {
    pub name: String,
    pub expected: String,
    pub actual: String,
    #[schemars(extend("enum" = ["MATCH", "DRIFT"]))]
    pub verdict: &'static str,
}

/// What `replay --json` prints.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct ReplayReport {
    #[schemars(extend("enum" = ["MATCH", "DRIFT", "REFUSED"]))]
    pub verdict: &'static str,
    pub result_path: Option<String>,
    pub outputs: Vec<OutputComparison>,
    /// Why the replay was refused (empty when it ran).
    pub refused: Vec<String>,
}

impl ReplayCommand {
    pub fn execute(self, policy: &Policy) -> i32 {
        let (code, report) = match self.replay(policy) {
            Ok(report) => {
                let drift = report.verdict == "DRIFT";
                (
                    if drift && self.check {
                        exit_codes::DRIFT
                    } else {
                        exit_codes::OK
                    },
                    report,
                )
            }
            Err((code, refused)) => (
                code,
                ReplayReport {
                    verdict: "REFUSED",
                    result_path: None,
                    outputs: Vec::new(),
                    refused,
                },
            ),
        };
        if self.json {
            match serde_json::to_string(&report) {
                Ok(line) => println!("{line}"),
                Err(e) => {
                    super::output::error(e);
                    return exit_codes::INTERNAL;
                }
            }
        } else {
            println!(
                "{}: {}",
                self.result.display(),
                super::output::verdict(report.verdict)
            );
            for o in &report.outputs {
                println!(
                    "  {:5}  {}  expected {}  actual {}",
                    o.verdict, o.name, o.expected, o.actual
                );
            }
            for r in &report.refused {
                println!("  refused: {r}");
            }
            if let Some(p) = &report.result_path {
                println!("  replay result: {p}");
            }
        }
        code
    }

    fn replay(&self, policy: &Policy) -> Result<ReplayReport, (i32, Vec<String>)> {
        let refuse = |msg: String| (exit_codes::REJECT, vec![msg]);
        let (id, dir) = result_location(&self.result);
        let lock_path = dir.join(lock_file_name(&id));
        let bytes = std::fs::read(&lock_path)
            .map_err(|e| refuse(format!("cannot read the lock {}: {e}", lock_path.display())))?;
        let lock = Lock::parse(&bytes).map_err(|e| {
            refuse(format!(
                "the lock {} is not trustworthy: {e}",
                lock_path.display()
            ))
        })?;
        let request_path = self
            .request
            .clone()
            .or_else(|| find_request(&dir, &lock.request.request_id, &lock.request.sha256))
            .ok_or_else(|| {
                refuse(format!(
                    "request {} not found beside the results; pass --request",
                    lock.request.request_id
                ))
            })?;
        let plan = RunPlan::judge(&request_path, policy).map_err(|f| {
            (
                f.code,
                f.reasons
                    .into_iter()
                    .map(|r| format!("{}: {}", r.code, r.message))
                    .collect(),
            )
        })?;
        let mut refused = pin_differences(&lock, &plan, policy);
        let request_sha = text_sha256_tagged(&plan.request_text);
        if request_sha != lock.request.sha256 {
            refused.push(format!(
                "the request {} has sha256 {request_sha}; the lock pins {}",
                request_path.display(),
                lock.request.sha256
            ));
        }
        if !refused.is_empty() {
            return Err((exit_codes::REJECT, refused));
        }

        let inputs = crate::stage::InputsRoot::for_request(self.inputs.as_deref(), &request_path);
        let input_drift = input_drift(&lock, &inputs);
        if !input_drift.is_empty() {
            return Ok(ReplayReport {
                verdict: "DRIFT",
                result_path: None,
                outputs: input_drift,
                refused: Vec::new(),
            });
        }
        let tmp;
        let results_dir = match &self.results {
            Some(d) => d.clone(),
            None => {
                tmp = tempfile::Builder::new()
                    .prefix("runner-replay-")
                    .tempdir()
                    .map_err(|e| (exit_codes::IO, vec![e.to_string()]))?;
                tmp.path().to_owned()
            }
        };
        let summary = plan
            .run(
                &inputs,
                &crate::result::ResultsRoot::named(&results_dir),
                !self.json,
                None,
            )
            .map_err(|f| {
                (
                    f.code,
                    f.reasons
                        .into_iter()
                        .map(|r| format!("{}: {}", r.code, r.message))
                        .collect(),
                )
            })?;
        let outputs = compare(&lock, &summary.lock);
        let verdict = if outputs.iter().all(|o| o.verdict == "MATCH") {
            "MATCH"
        } else {
            "DRIFT"
        };
        let result_path = self
            .results
            .as_ref()
            .map(|_| summary.result_path.display().to_string());
        Ok(ReplayReport {
            verdict,
            result_path,
            outputs,
            refused: Vec::new(),
        })
    }
}

/// What is pinned and not what is available now.
fn pin_differences(lock: &Lock, plan: &RunPlan, policy: &Policy) -> Vec<String> {
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
        (Some(pinned), Some((name, sha))) if pinned.name == name && pinned.sha256 == tag(&sha) => {}
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

/// Inputs whose bytes differ from the pin, each as a DRIFT entry.
fn input_drift(lock: &Lock, inputs: &crate::stage::InputsRoot) -> Vec<OutputComparison> {
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
        let find = |l: &crate::lock::OutputsPin| {
            l.artifacts
                .iter()
                .find(|x| x.path == p)
                .map_or("absent".to_owned(), |x| x.sha256.clone())
        };
        out.push(entry(format!("artifact {p}"), find(e), find(a)));
    }
    out
}
