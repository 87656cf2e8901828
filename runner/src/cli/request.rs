//! `runner request seal DRAFT.md [--inputs DIR] [--output FILE]`: fill in the sha256 of
//! every input a draft declares, changing nothing else (see [`runner_pipeline::approval::seal`]).

use super::output;
use runner_contract::exit_codes;
use runner_core::policy::Policy;
use runner_core::request::Reason;
use runner_pipeline::approval::{self, edit, seal};
use serde::Serialize;
use std::path::PathBuf;

/// Work on a Tool Execution Request before it is approved.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  runner request seal drafts/TR-20261122-090000Z-word-count.md
  runner request seal drafts/TR-20261122-090000Z-word-count.md --inputs drafts/inputs --json")]
pub struct RequestCommand {
    #[command(subcommand)]
    pub command: RequestSubcommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum RequestSubcommand {
    /// Compute the sha256 of every input a draft declares under /in/ and write them into
    /// the front matter `inputs` and the `## Input Files` section.
    Seal(SealCommand),
}

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  runner request seal drafts/TR-20261122-090000Z-word-count.md --inputs drafts/inputs
  runner request seal drafts/TR-20261122-090000Z-word-count.md --output requests/TR-20261122-090000Z-word-count.md --json

A declared input that is missing, a symlink (or under one) or not a regular file is
refused, named, and nothing is written (exit code 4). Only the `inputs:` block of the
front matter and the hashes in `## Input Files` change; empty `approved_by` and
`approved_utc` are left for `runner approve`.")]
pub struct SealCommand {
    /// The draft request (`TR-….md`); rewritten in place (atomically) unless --output is
    /// given. Example: `drafts/TR-20261122-090000Z-word-count.md`.
    #[arg(value_name = "DRAFT")]
    pub draft: PathBuf,
    /// Directory holding the declared inputs: `/in/data.csv` is read from `DIR/data.csv`,
    /// never through a symlink (default: `inputs/` beside the draft). Example:
    /// `--inputs drafts/inputs`.
    #[arg(long, value_name = "DIR")]
    pub inputs: Option<PathBuf>,
    /// Write the sealed request to FILE instead of rewriting the draft. Example:
    /// `--output requests/TR-20261122-090000Z-word-count.md`.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Print one JSON object (schema: schemas/request-seal.json) instead of the path.
    /// Example: `--json`.
    #[arg(long)]
    pub json: bool,
}

/// What `runner request seal --json` prints.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct SealReport {
    /// The sealed request (the draft itself unless --output was given).
    pub output: PathBuf,
    /// Every hash was already right and nothing was written.
    pub unchanged: bool,
    /// Each declared input and the sha256 (64 lowercase hex) written for it.
    pub inputs: Vec<SealedInputReport>,
    /// What `runner validate` would still reject, approval aside.
    pub notes: Vec<Reason>,
    /// The request still needs an approval (`runner approve`).
    pub needs_approval: bool,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct SealedInputReport {
    /// `/in/…`
    pub path: String,
    pub sha256: String,
}

impl RequestCommand {
    pub fn execute(self, policy: &Policy) -> i32 {
        match self.command {
            RequestSubcommand::Seal(cmd) => cmd.execute(policy),
        }
    }
}

impl SealCommand {
    pub fn execute(self, policy: &Policy) -> i32 {
        let name = self.draft.display().to_string();
        let text = match super::read_request_text(&self.draft, policy) {
            Ok(text) => text,
            Err(code) => return code,
        };
        let inputs =
            runner_pipeline::stage::InputsRoot::for_request(self.inputs.as_deref(), &self.draft);
        let sealed = match seal::seal(&text, &inputs, policy) {
            Ok(s) => s,
            Err(seal::SealError::Draft(e)) => {
                match e.line {
                    Some(l) => eprintln!("error: {name}:{l}: {}", e.message),
                    None => eprintln!("error: {name}: {}", e.message),
                }
                return exit_codes::REJECT;
            }
            Err(seal::SealError::Inputs(problems)) => {
                super::output::error(format!("{name}: not sealed; nothing was written"));
                for p in problems {
                    eprintln!("  {p}");
                }
                return exit_codes::INPUT_MISMATCH;
            }
        };
        let target = self.output.clone().unwrap_or_else(|| self.draft.clone());
        let unchanged = self.output.is_none() && sealed.text == text;
        if !unchanged && let Err(e) = edit::write_atomic(&target, sealed.text.as_bytes()) {
            super::output::error(format!("cannot write {}: {e}", target.display()));
            return exit_codes::IO;
        }
        let sig = approval::signature_path(&target);
        if !unchanged && sig.exists() {
            output::note(format!(
                "note: {} signs the text before sealing; approve again",
                sig.display()
            ));
        }
        // What `runner validate` will say beyond the approval, which comes next.
        let (notes, needs_approval) =
            match runner_core::request::validate(sealed.text.as_bytes(), policy) {
                Ok(_) => (Vec::new(), false),
                Err(reasons) => {
                    let needs = reasons.iter().any(|r| r.code.starts_with("approval."));
                    let notes: Vec<Reason> = reasons
                        .into_iter()
                        .filter(|r| !r.code.starts_with("approval."))
                        .collect();
                    (notes, needs)
                }
            };
        let report = SealReport {
            output: target.clone(),
            unchanged,
            inputs: sealed
                .inputs
                .iter()
                .map(|i| SealedInputReport {
                    path: i.path.clone(),
                    sha256: i.sha256.clone(),
                })
                .collect(),
            notes,
            needs_approval,
        };
        if self.json {
            return super::print_json(&report);
        }
        crate::cli::outln!("{}", target.display());
        for i in &report.inputs {
            output::note(format!("  {}  sha256:{}", i.path, i.sha256));
        }
        if unchanged {
            output::note("sealed: unchanged (every hash was already right)");
        }
        for r in &report.notes {
            match r.line {
                Some(l) => output::note(format!(
                    "note: {}:{l}: {}: {}",
                    target.display(),
                    r.code,
                    r.message
                )),
                None => output::note(format!(
                    "note: {}: {}: {}",
                    target.display(),
                    r.code,
                    r.message
                )),
            }
        }
        if needs_approval {
            output::note(format!(
                "next: runner approve {} --by NAME [--key FILE]",
                target.display()
            ));
        }
        exit_codes::OK
    }
}
