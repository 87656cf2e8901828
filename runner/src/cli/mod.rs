//! The command-line interface: one module per subcommand, each a `XxxCommand` with an
//! `execute()` that returns the process exit code (see [`crate::exit_codes`]).

pub mod approve;
pub mod exec;
pub mod gate;
pub mod guest;
pub mod keygen;
pub mod read;
pub mod replay;
pub mod request;
pub mod validate;
pub mod verify;

use clap::{Parser, Subcommand};
use std::path::PathBuf;

/// Sandboxed tool-execution runner: the TOOL-EXEC gate.
#[derive(Debug, Parser)]
#[command(name = "runner", version, about, long_about = None)]
pub struct Cli {
    /// Policy file to use instead of the built-in `policies/default.toml`.
    #[arg(long, global = true, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Judge documents against their schema and print a verdict for each.
    Validate(validate::ValidateCommand),
    /// Run an approved request in the sandbox and write its Tool Execution Result.
    Exec(exec::ExecCommand),
    /// Sort an inbox: move each accepted document to one directory and each rejected one,
    /// with its reason report, to quarantine.
    Gate(gate::GateCommand),
    /// Manage the pinned guest runtimes (fetch, install from a wheel, list).
    Guest(guest::GuestCommand),
    /// Re-derive every hash of a result, its lock and artifacts; fail closed.
    Verify(verify::VerifyCommand),
    /// Re-run the request a result's lock pins and report MATCH or DRIFT per output.
    Replay(replay::ReplayCommand),
    /// Make an Ed25519 key pair for signing.
    Keygen(keygen::KeygenCommand),
    /// Work on a request before approval (`runner request seal`: fill in its input hashes).
    Request(request::RequestCommand),
    /// Approve a request: show it, confirm, set approved_by/approved_utc, and sign it.
    Approve(approve::ApproveCommand),
}

impl Cli {
    pub fn execute(self) -> i32 {
        let policy = match &self.policy {
            None => crate::policy::Policy::builtin(),
            Some(path) => match crate::policy::Policy::load(path) {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("error: {e}");
                    return crate::exit_codes::USAGE;
                }
            },
        };
        match self.command {
            Command::Validate(cmd) => cmd.execute(&policy),
            Command::Exec(cmd) => cmd.execute(&policy),
            Command::Gate(cmd) => cmd.execute(&policy),
            Command::Guest(cmd) => cmd.execute(),
            Command::Verify(cmd) => cmd.execute(),
            Command::Replay(cmd) => cmd.execute(&policy),
            Command::Keygen(cmd) => cmd.execute(),
            Command::Request(cmd) => cmd.execute(&policy),
            Command::Approve(cmd) => cmd.execute(&policy),
        }
    }
}
