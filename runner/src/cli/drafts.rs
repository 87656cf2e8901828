//! `runner drafts list|show|reject --drafts DIR`: the operator's side of the drafts
//! directory `runner mcp` writes into (approving one is `runner approve ID --drafts DIR
//! --inbox DIR`).

use super::output;
use runner_contract::exit_codes;
use runner_core::policy::Policy;
use runner_mcp::drafts::{DraftError, Drafts, Listed, Rejection};
use serde::Serialize;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  runner drafts list --drafts /srv/tool-exec/drafts
  runner drafts show TR-20261128-090000Z-word-count --drafts drafts
  runner drafts reject TR-20261128-090000Z-word-count --drafts drafts --reason \"too much memory\"

Approve one with `runner approve ID --drafts DIR --inbox DIR --by NAME`.")]
pub struct DraftsCommand {
    #[command(subcommand)]
    pub command: DraftsSubcommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum DraftsSubcommand {
    /// List the drafts: id, state (drafted, approved, rejected), requester and purpose.
    #[command(after_help = "\
Examples:
  runner drafts list --drafts /srv/tool-exec/drafts
  runner drafts list --drafts drafts --json | jq -r '.[] | select(.state == \"drafted\") | .id'")]
    List {
        /// The drafts directory `runner mcp --drafts` writes. Example: `--drafts drafts`.
        #[arg(long, value_name = "DIR")]
        drafts: PathBuf,
        /// Print one JSON array (schema: schemas/drafts-list.json). Example: `--json`.
        #[arg(long)]
        json: bool,
    },
    /// Print a draft's text, as the operator will approve it (with its sealed hashes).
    #[command(after_help = "\
Examples:
  runner drafts show TR-20261128-090000Z-word-count --drafts drafts")]
    Show {
        /// The draft's id (its request_id). Example: `TR-20261128-090000Z-word-count`.
        #[arg(value_name = "ID")]
        id: String,
        /// The drafts directory. Example: `--drafts drafts`.
        #[arg(long, value_name = "DIR")]
        drafts: PathBuf,
    },
    /// Reject a draft with a reason, which CORE reads through `draft_status`.
    #[command(after_help = "\
Examples:
  runner drafts reject TR-20261128-090000Z-word-count --drafts drafts --reason \"needs no network; resubmit with network: none\"

Exit codes: 0 rejected; 1 already approved or rejected, or no such draft; 2 an empty
reason; 3 I/O.")]
    Reject {
        /// The draft's id. Example: `TR-20261128-090000Z-word-count`.
        #[arg(value_name = "ID")]
        id: String,
        /// The drafts directory. Example: `--drafts drafts`.
        #[arg(long, value_name = "DIR")]
        drafts: PathBuf,
        /// Why (1-4096 bytes), shown to CORE. Example: `--reason "too much memory"`.
        #[arg(long, value_name = "TEXT")]
        reason: String,
        /// Print one JSON object (schema: schemas/drafts-reject.json). Example: `--json`.
        #[arg(long)]
        json: bool,
    },
}

/// What `runner drafts reject --json` prints.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct RejectReport {
    pub id: String,
    pub rejection: Rejection,
}

/// What `runner drafts list --json` prints.
pub type ListReport = Vec<Listed>;

/// The exit code for a draft error.
pub fn code_of(e: &DraftError) -> i32 {
    match e {
        DraftError::Io { .. } => exit_codes::IO,
        DraftError::Invalid(_) => exit_codes::USAGE,
        _ => exit_codes::REJECT,
    }
}

fn open(dir: &std::path::Path) -> Result<Drafts, i32> {
    Drafts::open(dir).map_err(|e| {
        output::error(&e);
        code_of(&e)
    })
}

impl DraftsCommand {
    pub fn execute(self, policy: &Policy) -> i32 {
        match self.command {
            DraftsSubcommand::List { drafts, json } => {
                let d = match open(&drafts) {
                    Ok(d) => d,
                    Err(code) => return code,
                };
                let list = match d.list(policy) {
                    Ok(l) => l,
                    Err(e) => {
                        output::error(&e);
                        return code_of(&e);
                    }
                };
                if json {
                    return super::print_json(&list);
                }
                for l in &list {
                    super::outln!(
                        "{}\t{}\t{}\t{}",
                        l.id,
                        l.state,
                        l.requested_by.as_deref().unwrap_or("-"),
                        l.purpose.as_deref().unwrap_or("-").escape_debug()
                    );
                }
                exit_codes::OK
            }
            DraftsSubcommand::Show { id, drafts } => {
                let d = match open(&drafts) {
                    Ok(d) => d,
                    Err(code) => return code,
                };
                match d.read(&id, policy) {
                    Ok(text) => super::print_stdout(&text),
                    Err(e) => {
                        output::error(&e);
                        code_of(&e)
                    }
                }
            }
            DraftsSubcommand::Reject {
                id,
                drafts,
                reason,
                json,
            } => {
                let d = match open(&drafts) {
                    Ok(d) => d,
                    Err(code) => return code,
                };
                let at = runner_core::result::utc_timestamp(time::OffsetDateTime::now_utc());
                match d.reject(&id, &reason, &at) {
                    Ok(rejection) => {
                        output::note(format!("{id}: rejected"));
                        if json {
                            return super::print_json(&RejectReport { id, rejection });
                        }
                        super::outln!("{id}");
                        exit_codes::OK
                    }
                    Err(e) => {
                        output::error(&e);
                        code_of(&e)
                    }
                }
            }
        }
    }
}

/// Opens the drafts directory and reads the draft `id` (for `runner approve --drafts`);
/// on failure says why and gives the exit code.
pub fn open_draft(
    dir: &std::path::Path,
    id: &str,
    policy: &Policy,
) -> Result<(Drafts, String), i32> {
    let drafts = open(dir)?;
    match drafts.read(id, policy) {
        Ok(text) => Ok((drafts, text)),
        Err(e) => {
            output::error(&e);
            Err(code_of(&e))
        }
    }
}

/// Moves the approved draft `id` into `inbox` and reports it as `runner approve` does.
pub fn approve_draft(
    drafts: &Drafts,
    id: &str,
    approval: &runner_pipeline::approval::approve::Approval,
    inbox: &std::path::Path,
    (by, at): (&str, &str),
    json: bool,
) -> i32 {
    let record = runner_mcp::drafts::ApprovalRecord {
        approved_by: by.to_owned(),
        approved_utc: at.to_owned(),
        key_id: approval.key_id.clone(),
        inbox_name: format!("{id}.md"),
    };
    match drafts.approve_into(id, approval, inbox, &record) {
        Ok(moved) => {
            output::note(format!(
                "{id}: approved by {by} at {at}{}, moved into {}",
                match &approval.key_id {
                    Some(k) => format!(", signed by key {k}"),
                    None => " (unsigned)".to_owned(),
                },
                inbox.display()
            ));
            let report = super::approve::ApproveReport {
                request: moved.request.clone(),
                signature: moved.signature.clone(),
                approved_by: by.to_owned(),
                approved_utc: at.to_owned(),
                key_id: approval.key_id.clone(),
                key_trusted: approval.judged.approval_key.is_some(),
                removed_stale_signature: None,
            };
            if json {
                return super::print_json(&report);
            }
            super::outln!("{}", report.request.display());
            if let Some(sig) = &report.signature {
                super::outln!("{}", sig.display());
            }
            exit_codes::OK
        }
        Err(e) => {
            output::error(format!("{id}: not approved: {e}"));
            code_of(&e)
        }
    }
}
