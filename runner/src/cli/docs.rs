//! `runner completions SHELL` and `runner man [--dir DIR]`: shell completions and man
//! pages generated from the one CLI definition ([`super::command`]), so they cannot
//! drift from `--help`. The committed pages under `man/` are checked by a test.

use super::output;
use runner_contract::exit_codes;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  runner completions bash > ~/.local/share/bash-completion/completions/runner
  runner completions zsh > \"${fpath[1]}/_runner\"
  runner completions fish > ~/.config/fish/completions/runner.fish")]
pub struct CompletionsCommand {
    /// The shell to complete for. Example: `bash`.
    #[arg(value_enum, value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

impl CompletionsCommand {
    pub fn execute(self) -> i32 {
        let mut cmd = super::command();
        let mut out = Vec::new();
        clap_complete::generate(self.shell, &mut cmd, "runner", &mut out);
        write_stdout(&out)
    }
}

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  runner man | man -l -
  runner man --dir man      # runner.1 and runner-<command>.1 for each command (just man)")]
pub struct ManCommand {
    /// Write one page per command (`runner.1`, `runner-exec.1`, `runner-guest-fetch.1`, …)
    /// into DIR instead of printing `runner.1` to stdout. Example: `--dir man`.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

impl ManCommand {
    pub fn execute(self) -> i32 {
        let pages = match man_pages() {
            Ok(p) => p,
            Err(e) => {
                output::error(format!("rendering the man pages: {e}"));
                return exit_codes::INTERNAL;
            }
        };
        let Some(dir) = self.dir else {
            return match pages.iter().find(|(name, _)| name == "runner.1") {
                Some((_, page)) => write_stdout(page),
                None => {
                    output::error("no page runner.1 was rendered");
                    exit_codes::INTERNAL
                }
            };
        };
        if let Err(e) = runner_sandbox::host::create_dir_all(&dir) {
            output::error(format!("cannot create {}: {e}", dir.display()));
            return exit_codes::IO;
        }
        for (name, page) in &pages {
            let path = dir.join(name);
            if let Err(e) = runner_pipeline::approval::edit::write_atomic(&path, page) {
                output::error(format!("cannot write {}: {e}", path.display()));
                return exit_codes::IO;
            }
            crate::cli::outln!("{}", path.display());
        }
        exit_codes::OK
    }
}

/// Every man page: `(file name, roff)`, the top-level page first, then one per visible
/// command and subcommand (`runner-guest-fetch.1`), in definition order.
pub fn man_pages() -> std::io::Result<Vec<(String, Vec<u8>)>> {
    fn render(cmd: clap::Command, pages: &mut Vec<(String, Vec<u8>)>) -> std::io::Result<()> {
        let name = format!(
            "{}.1",
            cmd.get_display_name().unwrap_or_else(|| cmd.get_name())
        );
        let mut page = Vec::new();
        clap_mangen::Man::new(cmd.clone()).render(&mut page)?;
        pages.push((name, page));
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            render(sub.clone(), pages)?;
        }
        Ok(())
    }
    // The guests' pins stay out of the pages (`runner --version` shows them): a newly
    // registered guest should not make the committed pages stale.
    let mut cmd = super::command()
        .long_version(None::<&str>)
        .disable_help_subcommand(true);
    cmd.build();
    let mut pages = Vec::new();
    render(cmd, &mut pages)?;
    Ok(pages)
}

fn write_stdout(bytes: &[u8]) -> i32 {
    super::print_stdout(&String::from_utf8_lossy(bytes))
}
