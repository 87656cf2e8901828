//! `runner approve REQUEST.md --by NAME [--key FILE] [--yes]`: show the operator what
//! they are approving, ask for confirmation on a terminal, set `approved_by` and
//! `approved_utc`, and, with a key, write the detached signature `TR-….md.sig` (see
//! [`runner_pipeline::approval::approve`]).

use super::output;
use runner_contract::exit_codes;
use runner_core::policy::Policy;
use runner_pipeline::approval::{approve, edit};
use serde::Serialize;
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  runner approve requests/TR-20261122-090000Z-word-count.md --by operator-ada --key ~/keys/ada.key
  runner approve requests/TR-20261122-090000Z-word-count.md --by operator-ada --key ada.key --yes
  runner approve TR-20261128-090000Z-word-count --drafts drafts --inbox inbox --by operator-ada --key ada.key

With --drafts, REQUEST is the id of a draft `runner mcp` wrote (`runner drafts list`): the
approved request, its signature and its inputs move into the serve inbox --inbox, staged
beside it and renamed in with the request last, and the draft records the approval
(`draft_status` shows it).

The request must pass every rule once approved (every reason is listed otherwise), its
`requested_by` may not be NAME when the policy demands separation of duties, and when
the policy requires signed approvals the key must be trusted under NAME. Exit codes: 0
approved; 1 refused or declined; 2 usage (no terminal and no --yes, bad key file);
3 I/O.")]
pub struct ApproveCommand {
    /// The request to approve (`TR-….md`), rewritten in place atomically; with --drafts,
    /// a draft's id. Example: `requests/TR-20261122-090000Z-word-count.md`.
    #[arg(value_name = "REQUEST")]
    pub request: PathBuf,
    /// Approve the draft REQUEST (an id) of this drafts directory (`runner mcp --drafts`)
    /// into --inbox instead of a file in place. Example: `--drafts /srv/tool-exec/drafts`.
    #[arg(long, value_name = "DIR", requires = "inbox")]
    pub drafts: Option<PathBuf>,
    /// With --drafts: the inbox `runner serve --inbox` watches, which the approved request
    /// and its inputs move into. Example: `--inbox /srv/tool-exec/inbox`.
    #[arg(long, value_name = "DIR", requires = "drafts")]
    pub inbox: Option<PathBuf>,
    /// Your name, written to `approved_by`; with --key it must be the name your public key
    /// is listed under in the policy's `[[approval.trusted]]`. Example: `--by operator-ada`.
    #[arg(long, value_name = "NAME")]
    pub by: String,
    /// Sign the approved request with this Ed25519 private key (PKCS#8 PEM, as `runner
    /// keygen` writes), writing `TR-….md.sig` beside it. Example: `--key ~/keys/ada.key`.
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// Approve without asking (for scripts). Without it the approval is confirmed on a
    /// terminal, and refused when there is none. Example: `--yes`.
    #[arg(long)]
    pub yes: bool,
    /// Print one JSON object (schema: schemas/approve.json) on stdout; the summary and
    /// the question still go to stderr. Example: `--yes --json`.
    #[arg(long)]
    pub json: bool,
}

/// What `runner approve --json` prints.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ApproveReport {
    /// The approved request, rewritten in place.
    pub request: PathBuf,
    /// The detached signature written beside it (`TR-….md.sig`), when signed.
    pub signature: Option<PathBuf>,
    pub approved_by: String,
    /// RFC 3339 UTC timestamp written to `approved_utc`.
    pub approved_utc: String,
    /// `sha256:<hex>` of the signing key, when signed.
    pub key_id: Option<String>,
    /// The signing key is trusted by the policy in force under `approved_by`.
    pub key_trusted: bool,
    /// A signature over the request's earlier bytes that was removed.
    pub removed_stale_signature: Option<PathBuf>,
}

impl ApproveCommand {
    pub fn execute(self, policy: &Policy) -> i32 {
        let name = self.request.display().to_string();
        let draft = match (&self.drafts, &self.inbox) {
            (Some(dir), Some(inbox)) => match super::drafts::open_draft(dir, &name, policy) {
                Ok((drafts, text)) => Some((drafts, text, inbox.clone())),
                Err(code) => return code,
            },
            _ => None,
        };
        let text = match &draft {
            Some((_, text, _)) => text.clone(),
            None => match super::read_request_text(&self.request, policy) {
                Ok(text) => text,
                Err(code) => return code,
            },
        };
        if draft.is_none()
            && let Err(e) = edit::existing_mode(&self.request)
        {
            output::error(format!("{e}"));
            return exit_codes::IO;
        }
        // A draft's signature is named for the request in the inbox.
        let request_path = match &draft {
            Some(_) => PathBuf::from(format!("{name}.md")),
            None => self.request.clone(),
        };
        let key = match &self.key {
            None => None,
            Some(path) => match runner_pipeline::sign::load_signing_key(path) {
                Ok(k) => Some(k),
                Err(e) => {
                    output::error(format!("--key: {e}"));
                    return exit_codes::USAGE;
                }
            },
        };
        let at = runner_core::result::utc_timestamp(time::OffsetDateTime::now_utc());
        let approval =
            match approve::prepare(&text, &self.by, &at, key.as_ref(), &request_path, policy) {
                Ok(a) => a,
                Err(e) => return refused(&name, e),
            };
        eprint!(
            "{}",
            approve::summary(&approval, &request_path, &self.by, &at, policy)
        );
        if draft.is_some() {
            let m = &policy.limits;
            eprintln!(
                "  policy maxima: memory {} MB, wall time {} s, CPU {} s",
                m.max_memory_limit_mb, m.max_time_limit_sec, m.max_cpu_limit_sec
            );
        }
        if !self.yes
            && let Err(code) = confirm(&self.by)
        {
            return code;
        }
        if let Some((drafts, _, inbox)) = &draft {
            return super::drafts::approve_draft(
                drafts,
                &name,
                &approval,
                inbox,
                (&self.by, &at),
                self.json,
            );
        }
        match approve::write(&self.request, text.as_bytes(), &approval) {
            Ok(written) => self.report(&written, &approval, &at),
            Err(e) => {
                output::error(format!("{name}: not approved: {e}"));
                exit_codes::IO
            }
        }
    }

    /// Says what was approved and written: notes on stderr, then the paths (or the
    /// `--json` report) on stdout.
    fn report(&self, written: &approve::Written, approval: &approve::Approval, at: &str) -> i32 {
        if let Some(stale) = &written.removed_stale_signature {
            output::note(format!(
                "removed {}: it signed the request before this approval",
                stale.display()
            ));
        }
        match &approval.judged.approval_key {
            Some(k) => output::note(format!(
                "approved by {} at {at}, signed by key {k}",
                self.by
            )),
            None => match &approval.key_id {
                Some(id) => output::note(format!(
                    "approved by {} at {at}, signed by key {id} (not trusted by the policy in force)",
                    self.by
                )),
                None => output::note(format!("approved by {} at {at} (unsigned)", self.by)),
            },
        }
        let report = ApproveReport {
            request: written.request.clone(),
            signature: written.signature.clone(),
            approved_by: self.by.clone(),
            approved_utc: at.to_owned(),
            key_id: approval.key_id.clone(),
            key_trusted: approval.judged.approval_key.is_some(),
            removed_stale_signature: written.removed_stale_signature.clone(),
        };
        if self.json {
            return super::print_json(&report);
        }
        crate::cli::outln!("{}", report.request.display());
        if let Some(sig) = &report.signature {
            crate::cli::outln!("{}", sig.display());
        }
        exit_codes::OK
    }
}

/// Why `approve::prepare` refused, said, and the exit code.
fn refused(name: &str, e: approve::ApproveError) -> i32 {
    match e {
        approve::ApproveError::Name(m) => {
            output::error(format!("--by: {m}"));
            exit_codes::USAGE
        }
        approve::ApproveError::Edit(e) => {
            match e.line {
                Some(l) => output::error(format!("{name}:{l}: {}", e.message)),
                None => output::error(format!("{name}: {}", e.message)),
            }
            exit_codes::REJECT
        }
        approve::ApproveError::Rejected(reasons) => {
            eprintln!("{name}: not approved: the approved request would be rejected");
            for r in reasons {
                match r.line {
                    Some(l) => eprintln!("  {name}:{l}: {}: {}", r.code, r.message),
                    None => eprintln!("  {name}: {}: {}", r.code, r.message),
                }
            }
            exit_codes::REJECT
        }
    }
}

/// Asks on the terminal whether to approve as `by`; `Err` holds the exit code when the
/// answer is not yes or there is no terminal.
fn confirm(by: &str) -> Result<(), i32> {
    if !std::io::stdin().is_terminal() {
        eprintln!(
            "error: not approved: there is no terminal to confirm on; pass --yes to approve non-interactively"
        );
        return Err(exit_codes::USAGE);
    }
    eprint!("Approve this request as {by}? [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    if std::io::stdin().lock().read_line(&mut answer).is_err()
        || !matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
    {
        eprintln!("not approved");
        return Err(exit_codes::REJECT);
    }
    Ok(())
}
