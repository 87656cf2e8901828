//! `runner exec REQUEST [--inputs DIR] [--results DIR] [--json]`: validate an approved
//! request, stage its inputs, run it in the sandbox and publish the result.
//!
//! The run itself is [`crate::pipeline`]'s; this is its command line: the flags, the
//! report (text, or `--json`), the exit code. A rejected request or a staging refusal
//! writes no result; a guest that fails or hits a limit still gets a complete result.

use crate::exit_codes;
use crate::pipeline::{Pipeline, RunError, RunPlan};
use crate::policy::Policy;
use crate::request::Reason;
use crate::result::ResultsRoot;
use crate::stage::InputsRoot;
use serde::Serialize;
use std::path::{Path, PathBuf};

pub mod batch;
pub mod shard;

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  runner exec examples/monty-primes/TR-20261121-101500Z-monty-primes.md
  runner exec examples/csv-stats/TR-20261121-100000Z-csv-stats.md --results /tmp/results --json
  runner exec requests/ --jobs 2                  # a batch: every TR-*.md in the directory
  runner exec requests/ --shard 1/3               # the second of three disjoint shards
  runner exec TR-….md --sign-key keys/ci.key       # also sign the run's in-toto statement
  runner exec requests/ --reuse                   # skip requests whose verified result is there

A rejected request or a refused input writes no result (exit 1 or 4); a guest that fails
or hits a limit still gets a complete result (exit 0: the outcome is in the result).")]
pub struct ExecCommand {
    /// The approved Tool Execution Request (`TR-….md`). Several requests, or a
    /// directory (its `TR-*.md` in name order), run as one batch: one result per
    /// request, a summary at the end, exit code the highest of the runs'. Example:
    /// `examples/csv-stats/TR-20261121-100000Z-csv-stats.md`.
    #[arg(value_name = "REQUEST", required = true)]
    pub requests: Vec<PathBuf>,
    /// Directory holding the declared inputs (default: `inputs/` beside the request).
    /// Example: `--inputs examples/csv-stats/inputs`.
    #[arg(long, value_name = "DIR")]
    pub inputs: Option<PathBuf>,
    /// Directory to write the result into (default: `results/` beside the request).
    /// Example: `--results /tmp/results`.
    #[arg(long, value_name = "DIR")]
    pub results: Option<PathBuf>,
    /// Print one JSON object (schema: schemas/exec.json; a batch prints an array) instead
    /// of text. Example: `--json`.
    #[arg(long)]
    pub json: bool,
    /// Sign the run's in-toto statement with this Ed25519 private key (PKCS#8 PEM),
    /// writing `TS-….intoto.dsse.json` beside the result. Example: `--sign-key keys/ci.key`.
    #[arg(long, value_name = "FILE")]
    pub sign_key: Option<PathBuf>,
    /// In a batch, run up to N requests at once (each in its own worker process).
    /// Example: `--jobs 2`.
    #[arg(long, short = 'j', value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=256))]
    pub jobs: u32,
    /// Run only shard K of N of the batch (K from 0): a request's shard is its sha256
    /// modulo N, so N runs with `0/N` … `N-1/N` over the same requests run each exactly
    /// once, with no coordinator. Example: `--shard "$JOB_COMPLETION_INDEX/3"`.
    #[arg(long, value_name = "K/N", value_parser = shard::parse)]
    pub shard: Option<shard::Shard>,
    /// Do not run a request whose result is already in the results directory: same
    /// request sha256, inputs, policy, engine, guest and runner version, and the stored
    /// result verifies as `runner verify` does (a tampered or partial one runs again,
    /// the log says why). It is reported as `reused`. Example: `--reuse`.
    #[arg(long)]
    pub reuse: bool,
}

/// What `exec --json` prints.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct ExecReport {
    /// ACCEPT: the request ran and `result_path` holds its result (whatever the guest's
    /// outcome); REJECT: nothing ran, `reasons` says why.
    #[schemars(extend("enum" = ["ACCEPT", "REJECT"]))]
    pub verdict: &'static str,
    pub reasons: Vec<Reason>,
    pub result_path: Option<String>,
    #[schemars(extend("enum" = ["completed", "timed_out", "memory_exceeded", "cpu_exhausted", "output_limit", "trapped", null]))]
    pub outcome: Option<&'static str>,
    pub exit_code: Option<i32>,
    /// `null` when nothing ran (a REJECT, or a reused result).
    pub runtime_sec: Option<f64>,
    /// `--reuse`: nothing ran; `result_path` is a verified earlier result of the same run
    /// (its outcome and exit code are that run's).
    pub reused: bool,
}

impl ExecReport {
    /// The report of a request that did not run, with its exit code.
    fn not_run(error: &RunError) -> (i32, Self) {
        (
            error.exit_code(),
            Self {
                verdict: "REJECT",
                reasons: error.reasons(),
                result_path: None,
                outcome: None,
                exit_code: None,
                runtime_sec: None,
                reused: false,
            },
        )
    }
}

impl ExecCommand {
    pub fn execute(self, policy: &Policy) -> i32 {
        let request = self.requests[0].as_path();
        let batch = batch::is_batch(&self.requests) || self.shard.is_some();
        let (code, report) = match self.pipeline(policy) {
            Ok(pipeline) if batch => return batch::execute(&self, &pipeline),
            Ok(pipeline) => {
                // Its worker starts while the run stages (`RUNNER_WARM_WORKERS=0`: after).
                if warm_workers(1) > 0 {
                    pipeline.set_one_worker_ahead();
                    if !self.reuse {
                        pipeline.start_worker_ahead(request);
                    }
                }
                self.run_one(&pipeline, request)
            }
            Err(e) if batch => {
                eprintln!("error: {}: {e}", e.reason_code());
                return e.exit_code();
            }
            Err(e) => ExecReport::not_run(&e),
        };
        if self.json {
            if let Err(code) = crate::cli::out_json(&report) {
                return code;
            }
        } else if let Some(path) = &report.result_path {
            crate::cli::outln!("{path}");
            if report.reused {
                super::output::note(format!(
                    "reused: a verified result of the same run (outcome {}, exit code {}); nothing ran",
                    report.outcome.unwrap_or("?"),
                    report.exit_code.unwrap_or(-1)
                ));
                return code;
            }
            eprintln!(
                "outcome: {}, exit code {}, {:.3} s",
                report.outcome.unwrap_or("?"),
                report.exit_code.unwrap_or(-1),
                report.runtime_sec.unwrap_or(0.0)
            );
        } else {
            eprint!("{}", not_run_text(request, &report.reasons));
        }
        code
    }

    fn pipeline(&self, policy: &Policy) -> Result<Pipeline, RunError> {
        pipeline(policy, self.sign_key.as_deref(), !self.json)
    }

    /// Judge, run and publish one request (or, with `--reuse`, find its verified
    /// result); its exit code and report.
    fn run_one(&self, pipeline: &Pipeline, request: &Path) -> (i32, ExecReport) {
        let plan = match pipeline.judge(request) {
            Ok(plan) => plan,
            Err(e) => return ExecReport::not_run(&e),
        };
        let inputs = InputsRoot::for_request(self.inputs.as_deref(), request);
        let results = ResultsRoot::for_request(self.results.as_deref(), request);
        if self.reuse
            && let Some(report) = reused(pipeline, &plan, request, &inputs, &results)
        {
            return (exit_codes::OK, report);
        }
        match pipeline.run(&plan, &inputs, &results) {
            Ok(summary) => (
                exit_codes::OK,
                ExecReport {
                    verdict: "ACCEPT",
                    reasons: Vec::new(),
                    result_path: Some(summary.result_path.display().to_string()),
                    outcome: Some(summary.outcome.kind.as_str()),
                    exit_code: Some(summary.outcome.exit_code),
                    runtime_sec: Some(summary.outcome.runtime_sec),
                    reused: false,
                },
            ),
            Err(e) => ExecReport::not_run(&e),
        }
    }
}

/// The report of a verified stored result of the same run as `plan`, if there is one;
/// a candidate passed over (tampered, partial, inputs changed) is logged with why.
fn reused(
    pipeline: &Pipeline,
    plan: &RunPlan,
    request: &Path,
    inputs: &InputsRoot,
    results: &ResultsRoot,
) -> Option<ExecReport> {
    let found = crate::reuse::find(
        plan,
        pipeline.policy(),
        request,
        inputs,
        results.path(),
        pipeline.verifying_key().as_ref(),
    );
    let then = if found.reusable.is_some() {
        "an older verified result of the same run is reused"
    } else {
        "it runs again"
    };
    for why in &found.passed_over {
        super::output::warning(format!("{}: {why}; {then}", request.display()));
    }
    let stored = found.reusable?;
    Some(ExecReport {
        verdict: "ACCEPT",
        reasons: Vec::new(),
        result_path: Some(stored.result.display().to_string()),
        outcome: crate::reuse::outcome_kind(&stored.lock.outputs.outcome),
        exit_code: Some(stored.lock.outputs.exit_code),
        runtime_sec: None,
        reused: true,
    })
}

/// The pipeline every request of a command runs through: the policy, the signing key
/// (`sign_key`), progress on stderr when `progress` is set (not with JSON output).
pub(super) fn pipeline(
    policy: &Policy,
    sign_key: Option<&Path>,
    progress: bool,
) -> Result<Pipeline, RunError> {
    let sign_key = match sign_key {
        Some(path) => Some(
            crate::sign::load_signing_key(path).map_err(|e| RunError::Usage {
                code: "sign.key",
                message: e.to_string(),
            })?,
        ),
        None => None,
    };
    let pipeline = Pipeline::new(policy.clone()).with_sign_key(sign_key);
    Ok(if progress {
        pipeline.with_progress(super::output::progress_reporter())
    } else {
        pipeline
    })
}

/// Environment variable overriding how many workers a host or a batch keeps started
/// ahead per engine (`0`: none, every worker starts cold, also a single `runner exec`'s,
/// which otherwise starts while its run is staged).
pub(super) const WARM_WORKERS_ENV: &str = "RUNNER_WARM_WORKERS";

/// Warm workers per engine for a host or batch of `jobs`: `$RUNNER_WARM_WORKERS` when
/// it is a number, else `jobs`.
///
/// # Ambient authority
/// Reads `$RUNNER_WARM_WORKERS`.
pub(super) fn warm_workers(jobs: usize) -> usize {
    runner_sandbox::env::var(WARM_WORKERS_ENV)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(jobs)
}

/// `REQUEST: not run` and a line per reason (with the request's line when known).
fn not_run_text(request: &Path, reasons: &[Reason]) -> String {
    let mut text = format!("{}: not run\n", request.display());
    for r in reasons {
        match r.line {
            Some(n) => text.push_str(&format!(
                "  {}:{n}: {}: {}\n",
                request.display(),
                r.code,
                r.message
            )),
            None => text.push_str(&format!("  {}: {}\n", r.code, r.message)),
        }
    }
    text
}
