//! `runner exec REQUEST [--inputs DIR] [--results DIR] [--json]`: validate an approved
//! request, stage its inputs, run it in the sandbox and publish the result.
//!
//! The run itself is [`runner_pipeline::pipeline`]'s; this is its command line: the flags, the
//! report (text, or `--json`), the exit code. A rejected request or a staging refusal
//! writes no result; a guest that fails or hits a limit still gets a complete result.

use runner_core::policy::Policy;
use runner_core::request::Reason;
use runner_pipeline::pipeline::{Pipeline, RequestRead, RunError};
use runner_pipeline::report::ExecOptions;
use std::path::{Path, PathBuf};

use runner_pipeline::report::ExecReport;

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

impl ExecCommand {
    pub fn execute(self, policy: &Policy) -> i32 {
        let request = self.requests[0].as_path();
        let batch = batch::is_batch(&self.requests) || self.shard.is_some();
        let (code, report) = match self.pipeline(policy) {
            Ok(pipeline) if batch => return batch::execute(&self, &pipeline),
            Ok(pipeline) => {
                // Read once: for the peek that starts its worker, and for judging.
                let read = pipeline.read_request(request);
                // Its worker starts while the run stages (`RUNNER_WARM_WORKERS=0`: after).
                if runner_pipeline::report::warm_workers(1) > 0 {
                    pipeline.set_one_worker_ahead();
                    if !self.reuse {
                        pipeline.start_worker_ahead(&read);
                    }
                }
                self.run_one(&pipeline, request, read)
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
        } else if let Some(path) = &report.run.result_path {
            crate::cli::outln!("{path}");
            if report.reused {
                super::output::note(format!(
                    "reused: a verified result of the same run (outcome {}, exit code {}); nothing ran",
                    report.run.outcome.map_or("?", |k| k.as_str()),
                    report.run.exit_code.unwrap_or(-1)
                ));
                return code;
            }
            eprintln!(
                "outcome: {}, exit code {}, {:.3} s",
                report.run.outcome.map_or("?", |k| k.as_str()),
                report.run.exit_code.unwrap_or(-1),
                report.run.runtime_sec.unwrap_or(0.0)
            );
        } else {
            eprint!("{}", not_run_text(request, &report.reasons));
        }
        code
    }

    fn pipeline(&self, policy: &Policy) -> Result<Pipeline, RunError> {
        let progress = (!self.json).then(super::output::progress_reporter);
        Pipeline::for_command(policy, self.sign_key.as_deref(), progress)
    }

    /// Judge, run and publish one request (or, with `--reuse`, find its verified
    /// result); its exit code and report.
    fn run_one(&self, pipeline: &Pipeline, request: &Path, read: RequestRead) -> (i32, ExecReport) {
        let options = ExecOptions {
            inputs: self.inputs.as_deref(),
            results: self.results.as_deref(),
            reuse: self.reuse,
        };
        pipeline.exec_report(request, read, options, &mut |line| {
            super::output::warning(line)
        })
    }
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
