//! `runner validate FILE… [--catalog FILE] [--json]`: judge each document against its
//! schema (tool request, tool result, research packet or governed packet, detected from
//! the document itself) and print its verdict.
//!
//! `--json` prints one object per file (JSON Lines):
//! `{"file","kind","verdict","reasons":[{"code","message","line"}]}`, plus `"notes"` (same
//! shape as reasons) only when something was not checked: a governed packet's content
//! hashes without `--catalog`, a result's artifacts without its directory beside it.
//! Notes do not make the verdict REJECT here; the gate (`runner gate`) treats them as
//! reasons.

use runner_contract::exit_codes;
use runner_contract::verdict::Verdict;
use runner_core::policy::Policy;
use runner_core::request::Reason;
use runner_gate::Context;
use runner_gate::Follow;
use runner_gate::ReadError;
use serde::Serialize;
use std::path::{Path, PathBuf};

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  runner validate examples/*/TR-*.md
  runner validate results/TS-20261121-100000Z-csv-stats.md
  runner validate packets/governed.json --catalog catalog.json --json

The kind is detected from the document itself. Every REJECT lists every reason found,
each with its stable code and line. Exit codes: 0 every file accepted, 1 any rejected,
3 a file could not be read.")]
pub struct ValidateCommand {
    /// Documents to judge: tool requests (`TR-….md`), tool results (`TS-….md`, with their
    /// `TS-…/` directory beside them), research packets (`RP-….md`), governed packets
    /// (JSON). Example: `examples/csv-stats/TR-20261121-100000Z-csv-stats.md`.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Catalog of named queries (`{"named_query_id": "sql", …}`) to re-derive governed
    /// packets' content hashes. Example: `--catalog catalog.json`.
    #[arg(long, value_name = "FILE")]
    pub catalog: Option<PathBuf>,
    /// Print one JSON object per file (JSON Lines; schema: schemas/validate.json) instead
    /// of text. Example: `--json`.
    #[arg(long)]
    pub json: bool,
}

/// The verdict on one file, as printed with `--json`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct FileVerdict {
    pub file: String,
    /// `tool_request`, `tool_result`, `research_packet`, `governed_packet` or `unknown`.
    pub kind: &'static str,
    pub verdict: Verdict,
    pub reasons: Vec<Reason>,
    /// What was not checked; present only when not empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<Reason>,
}

impl ValidateCommand {
    pub fn execute(self, policy: &Policy) -> i32 {
        super::with_gate_context(policy, self.catalog.as_deref(), |ctx| self.run(ctx))
    }

    fn run(&self, ctx: &Context<'_>) -> i32 {
        let mut code = exit_codes::OK;
        for file in &self.files {
            let (verdict, text, io_failed) = judge(file, ctx);
            if io_failed {
                code = exit_codes::IO;
            } else if verdict.verdict == Verdict::Reject && code == exit_codes::OK {
                code = exit_codes::REJECT;
            }
            if self.json {
                if let Err(code) = crate::cli::out_json(&verdict) {
                    return code;
                }
            } else {
                print_human(&verdict, text.as_deref());
            }
        }
        code
    }
}

/// Judges one file: its verdict, its text (for showing lines), and whether reading failed.
pub fn judge(file: &Path, ctx: &Context<'_>) -> (FileVerdict, Option<String>, bool) {
    let name = file.display().to_string();
    match runner_gate::judge_file(file, ctx, Follow::Symlinks) {
        Err(e) => {
            let message = match e {
                ReadError::NotRegular => format!("cannot read {name}: not a regular file"),
                ReadError::Io(e) => format!("cannot read {name}: {e}"),
            };
            (
                FileVerdict {
                    file: name,
                    kind: "unknown",
                    verdict: Verdict::Reject,
                    reasons: vec![Reason::new("io.unreadable", message, None)],
                    notes: Vec::new(),
                },
                None,
                true,
            )
        }
        Ok((mut j, bytes)) => {
            // A tool request is judged with its approval: the signature beside it and
            // separation of duties, which need the file's path.
            if j.kind == Some(runner_gate::DocKind::ToolRequest)
                && let Err(reasons) =
                    runner_pipeline::approval::validate_request_file(file, &bytes, ctx.policy)
            {
                j.reasons = reasons; // a superset of request::validate's reasons
                j.verdict = Verdict::Reject;
            }
            (
                FileVerdict {
                    file: name,
                    kind: j.kind_name(),
                    verdict: j.verdict,
                    reasons: j.reasons,
                    notes: j.notes,
                },
                String::from_utf8(bytes).ok(),
                false,
            )
        }
    }
}

/// `FILE: VERDICT`, `  kind: KIND`, then per reason `FILE:LINE: code: message` and the line
/// itself, then the notes.
fn print_human(v: &FileVerdict, text: Option<&str>) {
    crate::cli::outln!("{}: {}", v.file, super::output::verdict(v.verdict.as_str()));
    crate::cli::outln!("  kind: {}", v.kind);
    let lines = runner_core::request::frontmatter::line_texts(text);
    for reason in &v.reasons {
        match reason.line {
            Some(n) => crate::cli::outln!("  {}:{n}: {}: {}", v.file, reason.code, reason.message),
            None => crate::cli::outln!("  {}: {}: {}", v.file, reason.code, reason.message),
        }
        if let Some(line) = reason.line.and_then(|n| lines.get(n.wrapping_sub(1))) {
            crate::cli::outln!("  {:>5} | {}", reason.line.unwrap_or(0), printable(line));
        }
    }
    for note in &v.notes {
        crate::cli::outln!("  {}: note: {}: {}", v.file, note.code, note.message);
    }
}

/// A line made safe for a terminal: control and invisible characters shown as escapes,
/// long lines cut.
pub fn printable(line: &str) -> String {
    runner_gate::report::printable(line)
}
