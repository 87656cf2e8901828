//! The CLI teaches: every command's help has examples and every option explains itself
//! with one; the committed man pages are the ones the CLI definition renders; completions
//! exist for each shell; `--version` names every registered guest; colour, `--quiet` and
//! `--log-format json` keep stdout clean and follow NO_COLOR / CLICOLOR_FORCE.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// reason: a test harness builds fixtures and runs the built binaries on the host.
#![allow(clippy::disallowed_methods)]

use crate::support;

use support::repo;

use std::process::{Command, Output};

fn runner(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_runner"));
    cmd.args(args).current_dir(repo());
    for var in [
        "NO_COLOR",
        "CLICOLOR_FORCE",
        "CLICOLOR",
        "RUNNER_LOG",
        "RUNNER_LOG_FORMAT",
    ] {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run runner")
}

/// Every visible command, as its path of names (`["guest", "fetch"]`).
fn commands(cmd: &clap::Command, path: Vec<String>, out: &mut Vec<(Vec<String>, clap::Command)>) {
    out.push((path.clone(), cmd.clone()));
    // clap's generated `help` subcommands carry no examples of their own.
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        let mut p = path.clone();
        p.push(sub.get_name().to_owned());
        commands(sub, p, out);
    }
}

#[test]
fn every_command_has_examples_and_every_option_an_example() {
    let mut root = runner::cli::command();
    root.build();
    let mut all = Vec::new();
    commands(&root, Vec::new(), &mut all);
    assert!(all.len() > 15, "{} commands", all.len());
    let mut missing = Vec::new();
    for (path, cmd) in &all {
        let name = format!("runner {}", path.join(" "));
        let after = cmd
            .get_after_help()
            .or(cmd.get_after_long_help())
            .map(|h| h.to_string())
            .unwrap_or_default();
        if !after.contains("Example")
            || !after
                .lines()
                .any(|l| l.trim_start().starts_with("runner ") || l.contains(" runner "))
        {
            missing.push(format!("{name}: no Examples block with a `runner …` line"));
        }
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            if matches!(id, "help" | "version") || arg.is_global_set() && !path.is_empty() {
                continue;
            }
            let help = arg
                .get_long_help()
                .or(arg.get_help())
                .map(|h| h.to_string())
                .unwrap_or_default();
            if !help.contains("Example") {
                missing.push(format!("{name}: option `{id}` has no example"));
            }
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

#[test]
fn help_renders_for_every_command_through_the_binary() {
    let mut root = runner::cli::command();
    root.build();
    let mut all = Vec::new();
    commands(&root, Vec::new(), &mut all);
    for (path, _) in all {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let out = runner(&args, &[]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert!(text.contains("Examples:"), "{args:?}: {text}");
    }
    let top = runner(&["--help"], &[]);
    let text = String::from_utf8_lossy(&top.stdout);
    for (code, _) in runner_contract::exit_codes::TABLE {
        assert!(
            text.contains(&format!("  {code:>3}  ")),
            "exit code {code} not in --help"
        );
    }
}

#[test]
fn committed_man_pages_are_current() {
    let dir = repo().join("man");
    let pages = runner::cli::docs::man_pages().expect("render");
    let mut stale = Vec::new();
    for (name, page) in &pages {
        match std::fs::read(dir.join(name)) {
            Ok(b) if b == *page => {}
            Ok(_) => stale.push(format!("{name} differs")),
            Err(e) => stale.push(format!("{name}: {e}")),
        }
    }
    for entry in std::fs::read_dir(&dir).expect("man/") {
        let name = entry
            .expect("entry")
            .file_name()
            .into_string()
            .expect("utf-8");
        if !pages.iter().any(|(n, _)| *n == name) {
            stale.push(format!("{name} is no longer generated"));
        }
    }
    assert!(
        stale.is_empty(),
        "man/ is stale (run `just man`): {stale:?}"
    );
    let top = String::from_utf8_lossy(&pages[0].1).into_owned();
    assert!(
        top.contains(".TH runner 1"),
        "{}",
        &top[..200.min(top.len())]
    );
    for sub in ["exec", "validate", "guest", "policy"] {
        assert!(
            top.contains(&format!("runner\\-{sub}(1)")),
            "runner.1 lists {sub}"
        );
    }
}

#[test]
fn completions_for_each_shell_name_the_commands() {
    for shell in ["bash", "zsh", "fish"] {
        let out = runner(&["completions", shell], &[]);
        assert_eq!(out.status.code(), Some(0), "{shell}");
        let script = String::from_utf8_lossy(&out.stdout);
        for word in ["validate", "exec", "guest", "policy", "--json"] {
            assert!(script.contains(word), "{shell} completion lacks {word}");
        }
        assert!(
            !script.contains("__schemas"),
            "{shell}: hidden command completed"
        );
    }
    let bad = runner(&["completions", "tcsh"], &[]);
    assert_eq!(bad.status.code(), Some(runner_contract::exit_codes::USAGE));
}

#[test]
fn version_names_the_engines_and_every_guest_pin() {
    let out = runner(&["--version"], &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with(&format!("runner {}\n", runner_pipeline::RUNNER_VERSION)),
        "{text}"
    );
    assert!(text.contains(&format!("wasmtime {}", runner_wasmtime::WASMTIME_VERSION)));
    assert!(text.contains(&format!("monty {}", runner_pipeline::MONTY_VERSION)));
    let manifest = runner_pipeline::guest::GuestManifest::embedded().expect("manifest");
    for g in &manifest.guests {
        let line = format!(
            "guest {}: {}=={}, file sha256 {}",
            g.name, g.package, g.version, g.file_sha256
        );
        assert!(text.contains(&line), "missing `{line}` in {text}");
    }
    let subcommand = runner(&["version"], &[]);
    assert_eq!(
        subcommand.stdout, out.stdout,
        "`runner version` prints the same"
    );
}

fn rejected_request() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().expect("tempdir");
    std::fs::write(tmp.path().join("TR-bad.md"), "no front matter\n").expect("write");
    tmp
}

#[test]
fn colour_only_when_allowed() {
    let tmp = rejected_request();
    let file = tmp.path().join("TR-bad.md");
    let file = file.to_str().unwrap();
    // Not a terminal: no colour by default.
    let plain = runner(&["validate", file], &[]);
    assert!(!plain.stdout.contains(&0x1b), "colour off a terminal");
    let forced = runner(&["validate", file], &[("CLICOLOR_FORCE", "1")]);
    assert!(
        String::from_utf8_lossy(&forced.stdout).contains("\x1b[1;31mREJECT\x1b[0m"),
        "CLICOLOR_FORCE colours the verdict"
    );
    let no_color = runner(
        &["validate", file],
        &[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")],
    );
    assert!(
        !no_color.stdout.contains(&0x1b) && !no_color.stderr.contains(&0x1b),
        "NO_COLOR wins"
    );
    // JSON output is never coloured.
    let json = runner(&["validate", "--json", file], &[("CLICOLOR_FORCE", "1")]);
    assert!(!json.stdout.contains(&0x1b));
}

#[test]
fn json_logs_keep_stderr_structured_and_stdout_pure() {
    let tmp = rejected_request();
    let file = tmp.path().join("TR-bad.md");
    let out = runner(
        &[
            "--log-format",
            "json",
            "-v",
            "exec",
            "--json",
            file.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(runner_contract::exit_codes::REJECT));
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    assert_eq!(stdout.lines().count(), 1, "one JSON document: {stdout}");
    serde_json::from_str::<serde_json::Value>(stdout.trim()).expect("stdout is JSON");
    let stderr = String::from_utf8(out.stderr).expect("utf-8");
    for line in stderr.lines() {
        let v: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("stderr line not JSON ({e}): {line}"));
        assert!(
            v.get("level").is_some() && v.get("message").is_some(),
            "{line}"
        );
    }
    // An error is a JSON log line too.
    let missing = runner(
        &["--log-format", "json", "guest", "path", "no-such-guest"],
        &[],
    );
    assert_eq!(missing.status.code(), Some(runner_contract::exit_codes::IO));
    let line = String::from_utf8_lossy(&missing.stderr);
    let v: serde_json::Value = serde_json::from_str(line.trim()).expect("error as JSON");
    assert_eq!(v["level"], "ERROR");
    assert!(
        v["message"]
            .as_str()
            .unwrap_or("")
            .contains("no-such-guest"),
        "{v}"
    );
    // The environment variable does the same; a bad value is a usage error.
    let env = runner(
        &["guest", "path", "no-such-guest"],
        &[("RUNNER_LOG_FORMAT", "json")],
    );
    serde_json::from_slice::<serde_json::Value>(env.stderr.trim_ascii()).expect("JSON via env");
    let bad = runner(&["guest", "list"], &[("RUNNER_LOG_FORMAT", "xml")]);
    assert_eq!(bad.status.code(), Some(runner_contract::exit_codes::USAGE));
}

#[test]
fn quiet_prints_only_the_answer() {
    let loud = runner(&["guest", "list"], &[]);
    assert!(String::from_utf8_lossy(&loud.stderr).contains("store:"));
    let quiet = runner(&["-q", "guest", "list"], &[]);
    assert_eq!(quiet.status.code(), Some(0));
    assert!(
        quiet.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&quiet.stderr)
    );
    assert_eq!(quiet.stdout, loud.stdout);
    let both = runner(&["-q", "-v", "guest", "list"], &[]);
    assert_eq!(
        both.status.code(),
        Some(runner_contract::exit_codes::USAGE),
        "-q and -v conflict"
    );
}
