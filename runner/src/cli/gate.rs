//! `runner gate INBOX --accepted DIR --quarantine DIR [--catalog FILE] [--json]`: judge
//! every document in the inbox, move each ACCEPT to the accepted directory and each
//! REJECT to quarantine with its reason report (see [`runner_gate::inbox`] for the
//! crash-safety rules), then report counts and throughput.
//!
//! Exit codes: 0 when every document was accepted, 1 when any was quarantined, 3 when
//! any could not be moved (it stays in the inbox) or a directory is unusable, 2 for a
//! bad flag or catalog.

use runner_contract::exit_codes;
use runner_core::policy::Policy;
use runner_gate::Context;
use runner_gate::inbox::{self, Dirs};
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  runner gate inbox --accepted accepted --quarantine quarantine
  runner gate inbox --accepted accepted --quarantine quarantine --catalog catalog.json --json

Moves are atomic and crash-safe; running it again is safe. Exit codes: 0 all accepted,
1 any quarantined, 2 bad flags or catalog, 3 I/O error or another gate holds the inbox.")]
pub struct GateCommand {
    /// The inbox: every file in it is judged (names starting with `.` are uploads in
    /// progress and are left alone). Example: `inbox`.
    #[arg(value_name = "INBOX")]
    pub inbox: PathBuf,
    /// Where accepted documents go (created if missing). Example: `--accepted accepted`.
    #[arg(long, value_name = "DIR")]
    pub accepted: PathBuf,
    /// Where rejected documents go, each with `NAME.reasons.md` and `NAME.reasons.json`.
    /// Example: `--quarantine quarantine`.
    #[arg(long, value_name = "DIR")]
    pub quarantine: PathBuf,
    /// Catalog of named queries (`{"named_query_id": "sql", …}`). Without it a governed
    /// packet's content hashes cannot be re-derived and it is quarantined. Example:
    /// `--catalog catalog.json`.
    #[arg(long, value_name = "FILE")]
    pub catalog: Option<PathBuf>,
    /// Print one JSON summary object (schema: schemas/gate.json) instead of text.
    /// Example: `--json`.
    #[arg(long)]
    pub json: bool,
}

impl GateCommand {
    pub fn execute(self, policy: &Policy) -> i32 {
        super::with_gate_context(policy, self.catalog.as_deref(), |ctx| self.run(ctx))
    }

    fn run(&self, ctx: &Context<'_>) -> i32 {
        let dirs = Dirs {
            inbox: self.inbox.clone(),
            accepted: self.accepted.clone(),
            quarantine: self.quarantine.clone(),
        };
        let summary = match inbox::run(&dirs, ctx, &runner_pipeline::gate::RunnerCompanions) {
            Ok(s) => s,
            Err(e) => {
                super::output::error(e);
                return exit_codes::IO;
            }
        };
        if self.json {
            if let Err(code) = crate::cli::out_json(&summary) {
                return code;
            }
        } else {
            for e in &summary.entries {
                match (&e.verdict, &e.dest, &e.error, &e.skipped) {
                    (_, _, Some(err), _) => crate::cli::outln!("FAILED  {}: {err}", e.source),
                    (_, _, _, Some(why)) => crate::cli::outln!("SKIPPED {}: {why}", e.source),
                    (Some(v), Some(dest), None, None) => {
                        let reasons = if e.codes.is_empty() {
                            String::new()
                        } else {
                            format!(" ({})", e.codes.join(", "))
                        };
                        crate::cli::outln!("{v:<7} {} [{}] -> {dest}{reasons}", e.source, e.kind);
                    }
                    _ => {}
                }
            }
            crate::cli::outln!(
                "{} documents: {} accepted, {} quarantined, {} failed; {} skipped; {} interrupted moves recovered; {:.3} s, {:.1} files/s",
                summary.documents,
                summary.accepted,
                summary.quarantined,
                summary.failed,
                summary.skipped,
                summary.recovered,
                summary.seconds,
                summary.files_per_sec
            );
        }
        if summary.failed > 0 {
            exit_codes::IO
        } else if summary.quarantined > 0 {
            exit_codes::REJECT
        } else {
            exit_codes::OK
        }
    }
}
