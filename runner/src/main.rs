//! The `runner` binary: parse the command line, run the subcommand, exit with its
//! documented code (see `runner_contract::exit_codes`).

fn main() {
    // Hidden: write the JSON Schemas of every `--json` output (`just schemas`).
    if std::env::args().nth(1).as_deref() == Some("__schemas") {
        let args: Vec<String> = std::env::args().skip(2).collect();
        std::process::exit(
            match runner::cli::schemas::SchemasCommand::from_args(&args) {
                Ok(cmd) => cmd.execute(),
                Err(usage) => {
                    eprintln!("{usage}");
                    runner_contract::exit_codes::USAGE
                }
            },
        );
    }
    let cli = match runner::cli::parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                runner_contract::exit_codes::USAGE
            } else {
                runner_contract::exit_codes::OK
            };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    if matches!(
        cli.command,
        runner::cli::Command::Exec(_)
            | runner::cli::Command::Replay(_)
            | runner::cli::Command::Serve(_)
    ) {
        // Per-run /out tmpfs mounts live in a mount namespace of our own, entered while
        // the process is still single-threaded; they vanish with the process.
        if let Err(e) = runner_sandbox::confine::enter_private_mount_namespace() {
            // Logging is not set up yet (that happens in `execute`): plain stderr.
            eprintln!("warning: {e}; /out caps fall back to polling");
        }
    }
    std::process::exit(cli.execute());
}
