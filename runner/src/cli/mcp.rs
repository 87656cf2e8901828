//! `runner mcp --drafts DIR [--inbox DIR] [--results DIR]`: the MCP server for CORE, on
//! stdin/stdout (see the crate `runner-mcp`). It drafts requests into DIR and reads
//! results the gate accepts; it never approves, signs or runs anything.

use super::output;
use runner_contract::exit_codes;
use runner_core::policy::Policy;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  runner mcp --drafts /srv/tool-exec/drafts --inbox /srv/tool-exec/inbox --results /srv/tool-exec/results
  runner --policy policy.toml mcp --drafts drafts

An agent's MCP configuration starts it as a stdio server, for example:
  {\"mcpServers\": {\"runner\": {\"command\": \"runner\",
    \"args\": [\"mcp\", \"--drafts\", \"/srv/tool-exec/drafts\", \"--inbox\", \"/srv/tool-exec/inbox\",
             \"--results\", \"/srv/tool-exec/results\"]}}}

Tools: policy, validate_draft, submit_draft, draft_status, read_result. A draft waits in
DRAFTS for the operator: `runner drafts list`, then `runner approve ID --drafts DRAFTS
--inbox INBOX --by NAME` (or `runner drafts reject ID --reason TEXT`). There is no approve
tool: approval is a human's, outside the agent's reach. stdout carries only the protocol;
logs go to stderr. Exit codes: 0 the client closed the session; 3 I/O (the drafts
directory cannot be made or opened).")]
pub struct McpCommand {
    /// The drafts directory (created if missing): the only place the server writes.
    /// Example: `--drafts /srv/tool-exec/drafts`.
    #[arg(long, value_name = "DIR")]
    pub drafts: PathBuf,
    /// The inbox `runner serve` watches, read only, so `draft_status` can say queued,
    /// running, done or quarantined. Example: `--inbox /srv/tool-exec/inbox`.
    #[arg(long, value_name = "DIR")]
    pub inbox: Option<PathBuf>,
    /// The results directory of that host, read only, for `read_result`. Example:
    /// `--results /srv/tool-exec/results`.
    #[arg(long, value_name = "DIR")]
    pub results: Option<PathBuf>,
    /// The host's quarantine directory (default: `INBOX/quarantine/`). Example:
    /// `--quarantine /srv/tool-exec/quarantine`.
    #[arg(long, value_name = "DIR", requires = "inbox")]
    pub quarantine: Option<PathBuf>,
}

impl McpCommand {
    pub fn execute(self, policy: &Policy) -> i32 {
        let drafts = match runner_mcp::Drafts::open(&self.drafts) {
            Ok(d) => d,
            Err(e) => {
                output::error(e);
                return exit_codes::IO;
            }
        };
        let host = runner_mcp::HostDirs {
            inbox: self.inbox,
            results: self.results,
            quarantine: self.quarantine,
        };
        match runner_mcp::DraftServer::new(drafts, policy.clone(), host).serve_stdio() {
            Ok(()) => exit_codes::OK,
            Err(e) => {
                output::error(e);
                exit_codes::IO
            }
        }
    }
}
