//! What `runner exec` and `runner replay` report about a request: the records their
//! `--json` prints (`schemas/exec.json`, `schemas/replay.json`), built here from what the
//! pipeline did, with the exit code that goes with each, so every caller of the library
//! reports a run the same way. Printing them (text or JSON) is the CLI's.

use crate::pipeline::replay::{
    ExchangeComparison, NetworkSource, OutputComparison, ReplayError, ReplayMode, ReplaySource,
};
use crate::pipeline::{MakeProgress, Pipeline, RequestRead, RunError, RunPlan, RunSummary};
use crate::result::ResultsRoot;
use crate::stage::InputsRoot;
use runner_contract::exit_codes;
use runner_contract::outcome::OutcomeKind;
use runner_contract::verdict::{ReplayVerdict, Verdict};
use runner_core::lock::PinChange;
use runner_core::policy::Policy;
use runner_core::request::Reason;
use serde::Serialize;
use std::path::Path;

/// What `exec --json` prints.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct ExecReport {
    /// ACCEPT: the request ran and `result_path` holds its result (whatever the guest's
    /// outcome); REJECT: nothing ran, `reasons` says why.
    pub verdict: Verdict,
    pub reasons: Vec<Reason>,
    #[serde(flatten)]
    pub run: RunFacts,
    /// `--reuse`: nothing ran; `result_path` is a verified earlier result of the same run
    /// (its outcome and exit code are that run's).
    pub reused: bool,
}

/// What a published run is reported by, in `exec --json` and in each line of `serve
/// --json` (its fields stand beside the verdict): all `null` when there is no result.
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub struct RunFacts {
    pub result_path: Option<String>,
    pub outcome: Option<OutcomeKind>,
    pub exit_code: Option<i32>,
    /// `null` when nothing ran this time: a request refused or retried, or an earlier
    /// result reused or recovered.
    pub runtime_sec: Option<f64>,
}

impl RunFacts {
    /// The facts of the run that just published `summary`.
    pub fn ran(summary: &RunSummary) -> Self {
        Self {
            result_path: Some(summary.result_path.display().to_string()),
            outcome: Some(summary.outcome.kind),
            exit_code: Some(summary.outcome.exit_code),
            runtime_sec: Some(summary.outcome.runtime_sec),
        }
    }

    /// A result published before, at `result_path`, that did not run now.
    pub fn published(result_path: &Path) -> Self {
        Self {
            result_path: Some(result_path.display().to_string()),
            ..Self::default()
        }
    }
}

impl ExecReport {
    /// The report of a request that did not run, with its exit code.
    pub fn not_run(error: &RunError) -> (i32, Self) {
        (
            error.exit_code(),
            Self {
                verdict: Verdict::Reject,
                reasons: error.reasons(),
                run: RunFacts::default(),
                reused: false,
            },
        )
    }
}

/// Where one `exec` finds its inputs and publishes, and whether it may reuse.
#[derive(Debug, Clone, Copy, Default)]
pub struct ExecOptions<'a> {
    /// The inputs directory (default: `inputs/` beside the request).
    pub inputs: Option<&'a Path>,
    /// The results directory (default: `results/` beside the request).
    pub results: Option<&'a Path>,
    /// Do not run a request whose verified result of the same run is there.
    pub reuse: bool,
}

/// Environment variable overriding how many workers a host or a batch keeps started
/// ahead per engine (`0`: none, every worker starts cold, also a single `runner exec`'s,
/// which otherwise starts while its run is staged).
pub const WARM_WORKERS_ENV: &str = "RUNNER_WARM_WORKERS";

/// Warm workers per engine for a host or batch of `jobs`: `$RUNNER_WARM_WORKERS` when
/// it is a number, else `jobs`.
///
/// # Ambient authority
/// Reads `$RUNNER_WARM_WORKERS`.
pub fn warm_workers(jobs: usize) -> usize {
    runner_sandbox::env::var(WARM_WORKERS_ENV)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(jobs)
}

impl Pipeline {
    /// The pipeline every request of a command runs through: the policy, the signing
    /// key read from `sign_key` (a key that cannot be read is a usage error,
    /// `sign.key`), and `progress`, the reporter of a guest's download and compile.
    pub fn for_command(
        policy: &Policy,
        sign_key: Option<&Path>,
        progress: Option<MakeProgress>,
    ) -> Result<Pipeline, RunError> {
        let sign_key = match sign_key {
            Some(path) => {
                Some(
                    crate::sign::load_signing_key(path).map_err(|e| RunError::Usage {
                        code: "sign.key",
                        message: e.to_string(),
                    })?,
                )
            }
            None => None,
        };
        let pipeline = Pipeline::new(policy.clone()).with_sign_key(sign_key);
        Ok(match progress {
            Some(progress) => pipeline.with_progress(progress),
            None => pipeline,
        })
    }

    /// Judge, run and publish one request, read from `request` ([`Pipeline::read_request`];
    /// or, with `options.reuse`, find its verified result); its exit code and report.
    /// `warn` gets a line for each stored result passed over (tampered, partial, inputs
    /// changed) and why.
    pub fn exec_report(
        &self,
        request: &Path,
        read: RequestRead,
        options: ExecOptions<'_>,
        warn: &mut dyn FnMut(String),
    ) -> (i32, ExecReport) {
        let plan = match self.judge_read(request, read) {
            Ok(plan) => plan,
            Err(e) => return ExecReport::not_run(&e),
        };
        let inputs = InputsRoot::for_request(options.inputs, request);
        let results = ResultsRoot::for_request(options.results, request);
        if options.reuse
            && let Some(report) = self.reused(&plan, request, &inputs, &results, warn)
        {
            return (exit_codes::OK, report);
        }
        match self.run(&plan, &inputs, &results) {
            Ok(summary) => (
                exit_codes::OK,
                ExecReport {
                    verdict: Verdict::Accept,
                    reasons: Vec::new(),
                    run: RunFacts::ran(&summary),
                    reused: false,
                },
            ),
            Err(e) => ExecReport::not_run(&e),
        }
    }

    /// The report of a verified stored result of the same run as `plan`, if there is
    /// one; a candidate passed over (tampered, partial, inputs changed) goes to `warn`
    /// with why.
    fn reused(
        &self,
        plan: &RunPlan,
        request: &Path,
        inputs: &InputsRoot,
        results: &ResultsRoot,
        warn: &mut dyn FnMut(String),
    ) -> Option<ExecReport> {
        let found = crate::reuse::find(
            plan,
            self.policy(),
            request,
            inputs,
            results.path(),
            self.verifying_key().as_ref(),
        );
        let then = if found.reusable.is_some() {
            "an older verified result of the same run is reused"
        } else {
            "it runs again"
        };
        for why in &found.passed_over {
            warn(format!("{}: {why}; {then}", request.display()));
        }
        let stored = found.reusable?;
        Some(ExecReport {
            verdict: Verdict::Accept,
            reasons: Vec::new(),
            run: RunFacts {
                outcome: OutcomeKind::parse(&stored.lock.outputs.outcome),
                exit_code: Some(stored.lock.outputs.exit_code),
                ..RunFacts::published(&stored.result)
            },
            reused: true,
        })
    }
}

/// What `replay --json` prints.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct ReplayReport {
    /// `MATCH`: every output matched under the pinned runner, engine, guest and policy
    /// run tables. `MATCH_ACROSS_UPGRADE` (only with `--across-upgrade`): every output
    /// matched, and at least one of those pins changed (`changed_pins`). `DRIFT`: an
    /// output or an input differs. `REFUSED`: nothing ran (`refused` says why).
    pub verdict: ReplayVerdict,
    pub result_path: Option<String>,
    pub outputs: Vec<OutputComparison>,
    /// Each pin of the baseline's lock that differs from what is in force now: `policy`
    /// (the run tables' `run_sha256`), `policy_text` (the whole text; reported, never
    /// refused), `runner`, `engine`, `guest`, `limits`.
    pub changed_pins: Vec<PinChange>,
    /// Why the replay was refused (empty when it ran).
    pub refused: Vec<String>,
    /// What the baseline saw that its lock does not record (the host's clocks or
    /// entropy, by the policy's `[determinism]`), so that output depending on it
    /// cannot be reproduced: one line each, empty when everything was recorded.
    pub notes: Vec<String>,
    /// With `--live`: each network exchange of the baseline beside the one fetched
    /// now, paired by order; empty without `--live`.
    pub network: Vec<ExchangeComparison>,
}

/// What one `replay` is asked to do.
pub struct ReplayOptions<'a> {
    /// The baseline result, its request and its inputs.
    pub source: ReplaySource<'a>,
    /// Keep the replay's own result here (`None`: a temporary directory, removed
    /// afterwards, and no `result_path` in the report).
    pub results: Option<&'a Path>,
    pub mode: ReplayMode,
    pub network: NetworkSource,
    /// DRIFT exits [`exit_codes::DRIFT`] (else 0; MATCH_ACROSS_UPGRADE always exits 0:
    /// the outputs agree, the changed pins are in the report).
    pub check: bool,
}

impl Pipeline {
    /// Replay the baseline `options.source` names and compare every output; the exit
    /// code and the report (`REFUSED`, with why, when nothing ran).
    pub fn replay_report(&self, options: &ReplayOptions<'_>) -> (i32, ReplayReport) {
        match self.replayed_report(options) {
            Ok(report) => {
                let drift = report.verdict == ReplayVerdict::Drift;
                // MATCH_ACROSS_UPGRADE exits 0: the outputs agree, which is what
                // --check checks; the changed pins are in the report.
                (
                    if drift && options.check {
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
                    verdict: ReplayVerdict::Refused,
                    result_path: None,
                    outputs: Vec::new(),
                    changed_pins: Vec::new(),
                    refused,
                    notes: Vec::new(),
                    network: Vec::new(),
                },
            ),
        }
    }

    fn replayed_report(
        &self,
        options: &ReplayOptions<'_>,
    ) -> Result<ReplayReport, (i32, Vec<String>)> {
        let failed = |e: ReplayError| (e.exit_code(), e.lines());
        // Without a results directory the replay's own result goes to a temporary
        // directory, removed afterwards.
        let tmp;
        let results_dir = match options.results {
            Some(d) => d.to_owned(),
            None => {
                tmp = tempfile::Builder::new()
                    .prefix("runner-replay-")
                    .tempdir()
                    .map_err(|e| (exit_codes::IO, vec![e.to_string()]))?;
                tmp.path().to_owned()
            }
        };
        let replayed = self
            .replay(
                &options.source,
                &ResultsRoot::named(&results_dir),
                options.mode,
                options.network,
            )
            .map_err(failed)?;
        let verdict = replayed.verdict();
        let result_path = match (options.results, replayed.result_path) {
            (Some(_), Some(path)) => Some(path.display().to_string()),
            _ => None,
        };
        Ok(ReplayReport {
            verdict,
            result_path,
            outputs: replayed.outputs,
            changed_pins: replayed.changed_pins,
            refused: Vec::new(),
            notes: replayed.notes,
            network: replayed.network,
        })
    }
}
