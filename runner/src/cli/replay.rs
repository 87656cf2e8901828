//! `runner replay TS-….md [--inputs DIR] [--results DIR] [--request FILE] [--check]
//! [--across-upgrade] [--live] [--json]`: re-run the request a lock pins and compare every output
//! (stdout, stderr, each artifact, exit code, outcome). The work is
//! [`runner_pipeline::pipeline::Pipeline::replay`]'s; this is its command line and its report.
//!
//! By default a replay refuses to run, naming each difference, when the request, the
//! policy's run tables, the runner, engine or guest available now is not the one
//! pinned: a replay on something else is not a replay. `--across-upgrade` runs it
//! anyway and reports each changed pin beside the comparison (`MATCH_ACROSS_UPGRADE` or
//! `DRIFT`). Inputs whose hash differs from the pin are reported as drift and nothing
//! runs (the request's approval covers only the pinned bytes). A run with network is
//! replayed offline from its recorded egress log; `--live` fetches again and reports,
//! exchange by exchange, which responses changed.

use runner_core::policy::Policy;
use runner_pipeline::pipeline::Pipeline;
use runner_pipeline::pipeline::replay::{NetworkSource, ReplayMode, ReplaySource};
use runner_pipeline::report::ReplayOptions;
use std::path::PathBuf;

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

impl ReplayCommand {
    pub fn execute(self, policy: &Policy) -> i32 {
        let mut pipeline = Pipeline::new(policy.clone());
        if !self.json {
            pipeline = pipeline.with_progress(super::output::progress_reporter());
        }
        let (code, report) = pipeline.replay_report(&ReplayOptions {
            source: ReplaySource {
                result: &self.result,
                request: self.request.as_deref(),
                inputs: self.inputs.as_deref(),
            },
            results: self.results.as_deref(),
            mode: if self.across_upgrade {
                ReplayMode::AcrossUpgrade
            } else {
                ReplayMode::Strict
            },
            network: if self.live {
                NetworkSource::Live
            } else {
                NetworkSource::Recorded
            },
            check: self.check,
        });
        if self.json {
            if let Err(code) = crate::cli::out_json(&report) {
                return code;
            }
        } else {
            crate::cli::outln!(
                "{}: {}",
                self.result.display(),
                super::output::verdict(report.verdict.as_str())
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
}
