//! The command-line interface: one module per subcommand, each a `XxxCommand` with an
//! `execute()` that returns the process exit code (see [`runner_contract::exit_codes`]).

pub mod approve;
pub mod docs;
pub mod drafts;
pub mod env;
pub mod exec;
pub mod gate;
pub mod guest;
pub mod keygen;
pub mod mcp;
pub mod output;
pub mod policy;
pub mod replay;
pub mod request;
pub mod schemas;
pub mod serve;
pub mod validate;
pub mod verify;
pub mod version;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::path::PathBuf;

/// Sandboxed tool-execution runner: the TOOL-EXEC gate.
#[derive(Debug, Parser)]
#[command(
    name = "runner",
    version,
    about,
    long_about = "Sandboxed tool-execution runner: the TOOL-EXEC gate. It judges approved Tool \
Execution Requests (markdown with YAML front matter), verifies their inputs by sha256, runs \
their one command inside wasmtime with a pinned CPython-for-WASI guest (or in Monty), under \
memory, time, CPU and output limits, and writes a Tool Execution Result with the sha256 of \
every artifact.\n\nEvery command takes --json (one JSON document on stdout, its schema in \
schemas/) and exits with a documented code (below). Logs and progress go to stderr only.",
    after_help = "Examples:
  runner validate examples/*/TR-*.md
  runner exec examples/monty-primes/TR-20261121-101500Z-monty-primes.md
  runner verify examples/ci-replay/baseline/TS-*.md
  runner guest list
  runner --policy my-policy.toml policy show --json"
)]
pub struct Cli {
    /// Policy file to use instead of the built-in `policies/default.toml` (it replaces the
    /// built-in one whole). Example: `--policy policies/strict.toml`.
    #[arg(long, global = true, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// Print only the answer (a path, a verdict, JSON) and errors: no notes, no progress,
    /// no warnings. Example: `runner -q exec TR-….md`.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// More log detail on stderr: `-v` progress and steps, `-vv` debug, `-vvv` trace
    /// (`RUNNER_LOG`, for example `RUNNER_LOG=runner=debug`, overrides). Example: `-v`.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Log line format on stderr: `text` for people, `json` (one object per line) for host
    /// programs; default `$RUNNER_LOG_FORMAT` or `text`. Example: `--log-format json`.
    #[arg(long, global = true, value_enum, value_name = "FORMAT")]
    pub log_format: Option<output::LogFormat>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Judge documents against their schema and print a verdict for each.
    Validate(validate::ValidateCommand),
    /// Run an approved request in the sandbox and write its Tool Execution Result.
    Exec(exec::ExecCommand),
    /// Serve an inbox: run every request renamed into it, as `exec` would, until stopped.
    Serve(serve::ServeCommand),
    /// Sort an inbox: move each accepted document to one directory and each rejected one,
    /// with its reason report, to quarantine.
    Gate(gate::GateCommand),
    /// Manage the pinned guest runtimes (fetch, install from a wheel, list).
    Guest(guest::GuestCommand),
    /// Manage the policy's package environments (fetch, install from wheels, list).
    Env(env::EnvCommand),
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
    /// The MCP server for CORE (stdio, or HTTP on loopback): draft requests, read accepted results; never approve.
    Mcp(mcp::McpCommand),
    /// The operator's side of the drafts `runner mcp` writes: list, show, reject.
    Drafts(drafts::DraftsCommand),
    /// Show the effective policy (`runner policy show`).
    Policy(policy::PolicyCommand),
    /// Print the versions: runner, wasmtime, monty, and every registered guest's pin.
    Version(version::VersionCommand),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(docs::CompletionsCommand),
    /// Print the man page (roff), or write one page per command into a directory.
    Man(docs::ManCommand),
}

/// The CLI definition with what is only known at run time: the long version (wasmtime,
/// monty and the guests' pins, from the embedded manifest) and the exit-code table. The
/// binary, the completions and the man pages all come from this one definition.
pub fn command() -> clap::Command {
    // clap keeps version text as `&'static str` (without its `string` feature): leak
    // the few hundred bytes once per process.
    let long_version: &'static str = Box::leak(version::long_version().into_boxed_str());
    Cli::command()
        .long_version(long_version)
        .after_long_help(format!(
            "{}\n\nExit codes:\n{}",
            Cli::command()
                .get_after_help()
                .map(|h| h.to_string())
                .unwrap_or_default(),
            runner_contract::exit_codes::TABLE
                .iter()
                .map(|(code, meaning)| format!("  {code:>3}  {meaning}"))
                .collect::<Vec<_>>()
                .join("\n")
        ))
}

/// Prints `value` as one line of JSON on stdout: `OK`, or `INTERNAL` when it cannot be
/// encoded (nothing is printed then), `IO` when stdout fails ([`print_stdout`]).
pub fn print_json<T: serde::Serialize>(value: &T) -> i32 {
    match encode_json(value) {
        Ok(line) => print_stdout(&(line + "\n")),
        Err(code) => code,
    }
}

/// Prints `value` as one line of JSON with `outln!` (a closed stdout ends the output,
/// not the command); `Err(INTERNAL)` when it cannot be encoded (reported; nothing is
/// printed then). For a report that comes after the command's work.
pub fn out_json<T: serde::Serialize>(value: &T) -> Result<(), i32> {
    let line = encode_json(value)?;
    write_stdout(format_args!("{line}\n"));
    Ok(())
}

fn encode_json<T: serde::Serialize>(value: &T) -> Result<String, i32> {
    serde_json::to_string(value).map_err(|e| {
        output::error(format!("cannot encode the JSON output: {e}"));
        runner_contract::exit_codes::INTERNAL
    })
}

/// What became of stdout: [`STDOUT_OPEN`], [`STDOUT_GONE`] (its reader went away, as
/// with `| head`) or [`STDOUT_FAILED`] (any other write error, reported once).
static STDOUT_STATE: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(STDOUT_OPEN);
const STDOUT_OPEN: u8 = 0;
const STDOUT_GONE: u8 = 1;
const STDOUT_FAILED: u8 = 2;

/// Writes `args` to stdout, for `outln!` and [`print_stdout`]. A reader that went away
/// (`| head`) ends the output, not the command: what follows is dropped, and the command
/// still finishes its work and exits with its own code (`println!` would panic here).
/// Any other write failure is reported once on stderr and later output dropped too;
/// `false` then, from that write on.
pub fn write_stdout(args: std::fmt::Arguments<'_>) -> bool {
    use std::io::Write;
    use std::sync::atomic::Ordering;
    match STDOUT_STATE.load(Ordering::Relaxed) {
        STDOUT_OPEN => {}
        state => return state == STDOUT_GONE,
    }
    let mut out = std::io::stdout().lock();
    match out.write_fmt(args).and_then(|()| out.flush()) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            STDOUT_STATE.store(STDOUT_GONE, Ordering::Relaxed);
            true
        }
        Err(e) => {
            STDOUT_STATE.store(STDOUT_FAILED, Ordering::Relaxed);
            output::error(format!("writing to stdout: {e}"));
            false
        }
    }
}

/// `println!` for command output: see [`write_stdout`].
macro_rules! outln {
    // A failed write is reported by `write_stdout` and ends the output; the command goes on.
    () => {{
        $crate::cli::write_stdout(format_args!("\n"));
    }};
    ($($arg:tt)*) => {{
        $crate::cli::write_stdout(format_args!("{}\n", format_args!($($arg)*)));
    }};
}
pub(crate) use outln;

/// Writes `text` to stdout ([`write_stdout`]): `OK`, also when the reader went away
/// (`| head`); `IO` when the write failed otherwise.
pub fn print_stdout(text: &str) -> i32 {
    if write_stdout(format_args!("{text}")) {
        runner_contract::exit_codes::OK
    } else {
        runner_contract::exit_codes::IO
    }
}

/// Parses the process arguments with [`command`].
pub fn parse() -> Result<Cli, clap::Error> {
    let mut cmd = command();
    let matches = cmd.try_get_matches_from_mut(std::env::args_os())?;
    Cli::from_arg_matches(&matches).map_err(|e| e.with_cmd(&cmd))
}

impl Cli {
    pub fn execute(self) -> i32 {
        if let Err(e) = output::init(self.quiet, self.verbose, self.log_format) {
            output::error(e);
            return runner_contract::exit_codes::USAGE;
        }
        let policy = match &self.policy {
            None => runner_core::policy::Policy::builtin(),
            Some(path) => match runner_pipeline::policy::load(path) {
                Ok(p) => p,
                Err(e) => {
                    output::error(e);
                    return runner_contract::exit_codes::USAGE;
                }
            },
        };
        match self.command {
            Command::Validate(cmd) => cmd.execute(&policy),
            Command::Exec(cmd) => cmd.execute(&policy),
            Command::Serve(cmd) => cmd.execute(&policy),
            Command::Gate(cmd) => cmd.execute(&policy),
            Command::Guest(cmd) => cmd.execute(),
            Command::Env(cmd) => cmd.execute(&policy),
            Command::Verify(cmd) => cmd.execute(),
            Command::Replay(cmd) => cmd.execute(&policy),
            Command::Keygen(cmd) => cmd.execute(),
            Command::Request(cmd) => cmd.execute(&policy),
            Command::Approve(cmd) => cmd.execute(&policy),
            Command::Mcp(cmd) => cmd.execute(&policy),
            Command::Drafts(cmd) => cmd.execute(&policy),
            Command::Policy(cmd) => cmd.execute(&policy),
            Command::Version(cmd) => cmd.execute(),
            Command::Completions(cmd) => cmd.execute(),
            Command::Man(cmd) => cmd.execute(),
        }
    }
}

/// Reads the request or draft an operator named, as UTF-8 text within the policy's
/// size cap; on failure says why on stderr and gives the exit code.
pub(crate) fn read_request_text(
    path: &std::path::Path,
    policy: &runner_core::policy::Policy,
) -> Result<String, i32> {
    use runner_sandbox::read::{Read2, read_document};
    let name = path.display();
    let max = policy.request.max_bytes;
    let bytes = match read_document(path, max) {
        Ok(Read2::Bytes(b)) => b,
        Ok(Read2::TooLarge(size)) => {
            output::error(format!(
                "{name} is {size} bytes; the policy allows at most {max}"
            ));
            return Err(runner_contract::exit_codes::REJECT);
        }
        Err(e) => {
            output::error(format!("cannot read {name}: {e}"));
            return Err(runner_contract::exit_codes::IO);
        }
    };
    String::from_utf8(bytes).map_err(|_| {
        output::error(format!("{name} is not valid UTF-8"));
        runner_contract::exit_codes::REJECT
    })
}

/// Runs `f` (`validate`, `gate`) with the gate's context: `policy` and the `--catalog`
/// at `path`, loaded. When the catalog does not load, says why on stderr and gives its
/// exit code (unreadable: I/O; invalid: usage) instead.
pub(crate) fn with_gate_context(
    policy: &runner_core::policy::Policy,
    path: Option<&std::path::Path>,
    f: impl FnOnce(&runner_gate::Context<'_>) -> i32,
) -> i32 {
    use runner_gate::Catalog;
    use runner_gate::CatalogError;
    use runner_gate::Context;
    let catalog = match path.map(Catalog::load).transpose() {
        Ok(catalog) => catalog,
        Err(e) => {
            let code = match e {
                CatalogError::Read { .. } => runner_contract::exit_codes::IO,
                _ => runner_contract::exit_codes::USAGE,
            };
            output::error(e);
            return code;
        }
    };
    f(&Context {
        policy,
        catalog: catalog.as_ref(),
    })
}
