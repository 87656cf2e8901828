//! `runner mcp --drafts DIR [--inbox DIR] [--results DIR] [--http ADDR]`: the MCP server
//! for CORE, on stdin/stdout or Streamable HTTP on loopback (see the crate `runner-mcp`). It drafts requests into DIR and reads
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

With --http 127.0.0.1:PORT it serves Streamable HTTP at http://127.0.0.1:PORT/mcp
instead (loopback only; the address is printed on stderr, a port 0 is the kernel's
choice). A request whose Host is not that address, or that carries an Origin other than
that address, is refused with 403 (DNS-rebinding protection): a web page can not drive it.

Tools: policy, validate_draft, submit_draft, draft_status, read_result. A draft waits in
DRAFTS for the operator: `runner drafts list`, then `runner approve ID --drafts DRAFTS
--inbox INBOX --by NAME` (or `runner drafts reject ID --reason TEXT`). There is no approve
tool: approval is a human's, outside the agent's reach. stdout carries only the protocol;
logs go to stderr. Exit codes: 0 the client closed the session; 2 usage (--http not a
loopback address); 3 I/O (the drafts directory cannot be made or opened, the address
cannot be listened on).")]
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
    /// Serve Streamable HTTP on this loopback address (IP:PORT, the IP on 127.0.0.0/8 or ::1)
    /// instead of stdio, at the path /mcp, until the process is stopped. Example:
    /// `--http 127.0.0.1:8765`.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<String>,
}

impl McpCommand {
    pub fn execute(self, policy: &Policy) -> i32 {
        let http = match self.http.as_deref().map(runner_mcp::http::parse_loopback) {
            None => None,
            Some(Ok(addr)) => Some(addr),
            Some(Err(e)) => {
                output::error(e);
                return exit_codes::USAGE;
            }
        };
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
        let server = runner_mcp::DraftServer::new(drafts, policy.clone(), host);
        let served = match http {
            None => server.serve_stdio(),
            Some(addr) => server.serve_http(addr, |bound| {
                output::note(format!(
                    "listening on http://{bound}{}",
                    runner_mcp::http::PATH
                ));
            }),
        };
        match served {
            Ok(()) => exit_codes::OK,
            Err(e) => {
                output::error(e);
                exit_codes::IO
            }
        }
    }
}
