//! `runner replay TS-….md [--inputs DIR] [--results DIR] [--request FILE] [--check]
//! [--across-upgrade] [--live] [--json]`: re-run the request a lock pins and compare every output
//! (stdout, stderr, each artifact, exit code, outcome). The work is
//! [`crate::pipeline::Pipeline::replay`]'s; this is its command line and its report.
//!
//! By default a replay refuses to run, naming each difference, when the request, the
//! policy's run tables, the runner, engine or guest available now is not the one
//! pinned: a replay on something else is not a replay. `--across-upgrade` runs it
//! anyway and reports each changed pin beside the comparison (`MATCH_ACROSS_UPGRADE` or
//! `DRIFT`). Inputs whose hash differs from the pin are reported as drift and nothing
//! runs (the request's approval covers only the pinned bytes). A run with network is
//! replayed offline from its recorded egress log; `--live` fetches again and reports,
//! exchange by exchange, which responses changed.

use crate::exit_codes;
use crate::lock::PinChange;
use crate::pipeline::Pipeline;
use crate::pipeline::replay::{
    ExchangeComparison, NetworkSource, ReplayError, ReplayMode, ReplaySource, Replayed,
};
use crate::policy::Policy;
use crate::result::ResultsRoot;
use serde::Serialize;
use std::path::PathBuf;

pub use crate::pipeline::replay::{OutputComparison, compare};

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  runner replay examples/ci-replay/baseline/TS-*.md --check
  runner replay results/TS-20261121-100000Z-csv-stats.md --request TR-20261121-100000Z-csv-stats.md --json
  runner replay baseline/TS-*.md --check --across-upgrade --results new-baseline
  runner replay results/TS-20261125-060000Z-net.md --live

Exit codes: 0 replayed (MATCH or MATCH_ACROSS_UPGRADE, or DRIFT without --check),
1 refused, 5 drift with --check.")]
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
    /// Replay even when the policy's run tables, the runner, the engine or the guest
    /// differ from the pins (after an upgrade), and report each changed pin, old and
    /// new; the verdict is then MATCH_ACROSS_UPGRADE (every output matched) or DRIFT.
    /// A changed request is still refused, changed inputs are still drift. The replay's
    /// lock records the baseline it was compared against (`replay_of`). Example:
    /// `--check --across-upgrade --results new-baseline`.
    #[arg(long)]
    pub across_upgrade: bool,
    /// For a run with network (`network: allowlist`): fetch again, under the allowlist
    /// and caps in force, instead of serving the baseline's recording offline, and
    /// report each exchange beside the baseline's (`same`, `changed_body`,
    /// `changed_status`, `now_refused`, ...). A changed response is also DRIFT of the
    /// `network exchanges` output. Example: `--live`.
    #[arg(long)]
    pub live: bool,
    /// Print `{"verdict": "MATCH"|"MATCH_ACROSS_UPGRADE"|"DRIFT"|"REFUSED",
    /// "result_path", "outputs": [{"name", "expected", "actual", "verdict"}],
    /// "changed_pins": [{"pin", "expected", "actual"}], "refused", "notes",
    /// "network": [{"seq", "method", "url", "verdict", "expected", "actual"}]}`
    /// (schema: schemas/replay.json). Example: `--json`.
    #[arg(long)]
    pub json: bool,
}

/// What `replay --json` prints.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct ReplayReport {
    /// `MATCH`: every output matched under the pinned runner, engine, guest and policy
    /// run tables. `MATCH_ACROSS_UPGRADE` (only with `--across-upgrade`): every output
    /// matched, and at least one of those pins changed (`changed_pins`). `DRIFT`: an
    /// output or an input differs. `REFUSED`: nothing ran (`refused` says why).
    #[schemars(extend("enum" = ["MATCH", "MATCH_ACROSS_UPGRADE", "DRIFT", "REFUSED"]))]
    pub verdict: &'static str,
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

impl ReplayCommand {
    pub fn execute(self, policy: &Policy) -> i32 {
        let (code, report) = match self.replay(policy) {
            Ok(report) => {
                let drift = report.verdict == "DRIFT";
                // MATCH_ACROSS_UPGRADE exits 0: the outputs agree, which is what
                // --check checks; the changed pins are in the report.
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
                    changed_pins: Vec::new(),
                    refused,
                    notes: Vec::new(),
                    network: Vec::new(),
                },
            ),
        };
        if self.json {
            if let Err(code) = crate::cli::out_json(&report) {
                return code;
            }
        } else {
            crate::cli::outln!(
                "{}: {}",
                self.result.display(),
                super::output::verdict(report.verdict)
            );
            for o in &report.outputs {
                crate::cli::outln!(
                    "  {:5}  {}  expected {}  actual {}",
                    o.verdict,
                    o.name,
                    o.expected,
                    o.actual
                );
            }
            for p in &report.changed_pins {
                crate::cli::outln!(
                    "  CHANGED  {}  pinned {}  now {}",
                    p.pin,
                    p.expected,
                    p.actual
                );
            }
            for x in &report.network {
                crate::cli::outln!(
                    "  {:17}  network {} {} {}  expected {}  actual {}",
                    x.verdict.to_ascii_uppercase(),
                    x.seq,
                    x.method,
                    x.url,
                    x.expected,
                    x.actual
                );
            }
            for r in &report.refused {
                crate::cli::outln!("  refused: {r}");
            }
            for n in &report.notes {
                crate::cli::outln!("  note: {n}");
            }
            if let Some(p) = &report.result_path {
                crate::cli::outln!("  replay result: {p}");
            }
        }
        code
    }

    fn replay(&self, policy: &Policy) -> Result<ReplayReport, (i32, Vec<String>)> {
        let failed = |e: ReplayError| (e.exit_code(), e.lines());
        // Without --results the replay's own result goes to a temporary directory,
        // removed afterwards.
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
        let mut pipeline = Pipeline::new(policy.clone());
        if !self.json {
            pipeline = pipeline.with_progress(super::output::progress_reporter());
        }
        let mode = if self.across_upgrade {
            ReplayMode::AcrossUpgrade
        } else {
            ReplayMode::Strict
        };
        let source = ReplaySource {
            result: &self.result,
            request: self.request.as_deref(),
            inputs: self.inputs.as_deref(),
        };
        let replayed: Replayed = pipeline
            .replay(
                &source,
                &ResultsRoot::named(&results_dir),
                mode,
                if self.live {
                    NetworkSource::Live
                } else {
                    NetworkSource::Recorded
                },
            )
            .map_err(failed)?;
        let verdict = replayed.verdict();
        let result_path = match (&self.results, replayed.result_path) {
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
