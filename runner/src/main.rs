//! The `runner` binary: parse the command line, run the subcommand, exit with its
//! documented code (see `runner::exit_codes`).

use clap::Parser;

fn main() {
    // The hidden worker mode runs a guest in a confined child process.
    if std::env::args().nth(1).as_deref() == Some("__worker") {
        std::process::exit(runner::backend::worker::worker_main());
    }
    // A probe that applies the worker's confinement and reports it (used by tests).
    if std::env::args().nth(1).as_deref() == Some("__confinement-probe") {
        std::process::exit(runner::backend::confine::probe_main());
    }
    let cli = match runner::cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                runner::exit_codes::USAGE
            } else {
                runner::exit_codes::OK
            };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    if matches!(
        cli.command,
        runner::cli::Command::Exec(_) | runner::cli::Command::Replay(_)
    ) {
        // Per-run /out tmpfs mounts live in a mount namespace of our own, entered while
        // the process is still single-threaded; they vanish with the process.
        if let Err(e) = runner::backend::confine::enter_private_mount_namespace() {
            eprintln!("warning: {e}; /out caps fall back to polling");
        }
    }
    std::process::exit(cli.execute());
}
