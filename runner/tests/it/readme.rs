//! The README is part of the contract: its exit-code table is `exit_codes::TABLE`, and
//! every command block marked runnable (a fence opened with "```sh runnable") runs as
//! written, with bash (`-euo pipefail`), the built binaries first on `PATH`, in a
//! scratch directory holding a copy of `examples/` and `policies/`, and exits 0.
//! Runnable blocks are kept fast and offline (validate, verify, guest list, policy show,
//! a monty exec); commands that need a download stay in plain `sh` blocks.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// reason: a test harness builds fixtures and runs the built binaries on the host.
#![allow(clippy::disallowed_methods)]

use crate::support;

use support::repo;

use std::path::Path;
use std::process::Command;

fn readme() -> String {
    std::fs::read_to_string(repo().join("README.md")).expect("README.md")
}

/// The runnable blocks: (line of the opening fence, body).
fn runnable_blocks(text: &str) -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        match &mut current {
            None if line.trim_end() == "```sh runnable" => current = Some((i + 1, String::new())),
            None => {}
            Some(_) if line.trim_end() == "```" => blocks.extend(current.take()),
            Some((_, body)) => {
                body.push_str(line);
                body.push('\n');
            }
        }
    }
    assert!(current.is_none(), "a runnable block is not closed");
    blocks
}

#[test]
fn the_exit_code_table_is_the_one_in_exit_codes() {
    let table = runner::exit_codes::markdown_table();
    assert!(
        readme().contains(&table),
        "README.md's exit-code table differs from exit_codes::TABLE; it must read:\n{table}"
    );
}

#[test]
fn the_block_parser_finds_only_closed_runnable_fences() {
    let text =
        "a\n```sh runnable\necho 1\n```\n```sh\nnot me\n```\n```sh runnable\necho 2\necho 3\n```\n";
    let blocks = runnable_blocks(text);
    assert_eq!(
        blocks,
        vec![
            (2, "echo 1\n".to_owned()),
            (8, "echo 2\necho 3\n".to_owned())
        ]
    );
}

#[test]
fn every_runnable_block_in_the_readme_runs() {
    let blocks = runnable_blocks(&readme());
    assert!(
        blocks.len() >= 5,
        "expected the README's runnable blocks, found {}",
        blocks.len()
    );
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_runner"))
        .parent()
        .expect("binary directory")
        .to_owned();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut failures = Vec::new();
    for (line, body) in blocks {
        // A fresh scratch copy per block: blocks are independent of each other.
        let scratch = tempfile::tempdir().expect("tempdir");
        for dir in ["examples", "policies"] {
            let status = Command::new("cp")
                .arg("-R")
                .arg(repo().join(dir))
                .arg(scratch.path())
                .status()
                .expect("cp");
            assert!(status.success(), "copying {dir}");
        }
        let out = Command::new("bash")
            .args(["-euo", "pipefail", "-c", &body])
            .current_dir(scratch.path())
            .env("PATH", &path)
            .env("TMPDIR", scratch.path())
            .env_remove("RUNNER_LOG")
            .env_remove("RUNNER_LOG_FORMAT")
            .output()
            .expect("bash");
        if !out.status.success() {
            failures.push(format!(
                "README.md:{line}: exit {:?}\n--- block\n{body}--- stdout\n{}--- stderr\n{}",
                out.status.code(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
