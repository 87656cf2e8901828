//! What the integration tests share: where the repository and the built binaries are,
//! digests, tree copies and bounded waits. A test file takes it with `mod support;`.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The repository's root (the workspace above `runner/`).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The `runner` binary under test.
pub fn runner_exe() -> &'static str {
    env!("CARGO_BIN_EXE_runner")
}

/// A `runner` command with stdin closed (no test ever types into it).
pub fn runner() -> Command {
    let mut c = Command::new(runner_exe());
    c.stdin(Stdio::null());
    c
}

/// The Monty worker: `$RUNNER_MONTY_WORKER`, else `runner-monty-worker` next to the
/// runner binary (built by `just build`, or `cargo build --release -p runner-monty
/// --ignore-rust-version`).
pub fn monty_worker() -> PathBuf {
    std::env::var_os("RUNNER_MONTY_WORKER")
        .filter(|v| !v.is_empty())
        .map_or_else(
            || Path::new(runner_exe()).with_file_name("runner-monty-worker"),
            PathBuf::from,
        )
}

/// The lowercase hex sha256 of `bytes`, as requests declare their inputs.
pub fn sha256_hex(bytes: &[u8]) -> String {
    runner_core::digest::sha256_hex(bytes)
}

/// A copy of the file, directory or symlink `from` at `to` (symlinks copied as links).
pub fn copy_tree(from: &Path, to: &Path) {
    let meta = from.symlink_metadata().unwrap();
    if meta.file_type().is_symlink() {
        std::os::unix::fs::symlink(std::fs::read_link(from).unwrap(), to).unwrap();
    } else if meta.is_dir() {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            copy_tree(&e.path(), &to.join(e.file_name()));
        }
    } else {
        std::fs::copy(from, to).unwrap();
    }
}

/// Polls `done` every 25 ms; fails naming `what` after `limit`.
pub fn wait_for(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "timed out after {limit:?}: {what}");
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// An approved request of `backend` (`ERA` or `monty`, `language: python`, no network):
/// `inputs` is the front matter's `inputs:` list (or empty), `body` the sections before
/// Output Expectations. `who` names the test: its requester is `<who>-test`, its
/// approver `<who>-operator`.
pub fn approved_request(
    who: &str,
    id: &str,
    backend: &str,
    memory_mb: u32,
    inputs: &str,
    body: &str,
) -> String {
    format!(
        "---\nrequest_type: tool_request\nschema_version: 1\nrequest_id: \"{id}\"\n\
         created_utc: \"2026-11-21T12:00:00Z\"\nrequested_by: \"{who}-test\"\n\
         approved_by: \"{who}-operator\"\napproved_utc: \"2026-11-21T12:00:01Z\"\n\
         purpose: \"A {who} test.\"\nbackend: {backend}\nlanguage: python\nnetwork: none\n\
         cpu_limit: \"10\"\nmemory_limit_mb: {memory_mb}\ntime_limit_sec: 30\n{inputs}---\n{body}\n\
         ## Output Expectations\n- stdout only\n\n## Risk Assessment\n- Risk level: low\n\
         - Justification: a test.\n- Data sensitivity: public\n\
         - Network rationale: none needed\n"
    )
}

/// A request's declared inputs, `(path under /in, sha256 hex)` each: the front matter's
/// `inputs:` block (empty when there are none) and the `## Input Files` section's lines
/// (`None.` when there are none).
pub fn declared_inputs(inputs: &[(String, String)]) -> (String, String) {
    if inputs.is_empty() {
        return (String::new(), "None.\n".to_owned());
    }
    let mut front = String::from("inputs:\n");
    let mut section = String::new();
    for (file, sha) in inputs {
        front.push_str(&format!(
            "  - path: \"/in/{file}\"\n    sha256: \"{sha}\"\n"
        ));
        section.push_str(&format!("- `/in/{file}` sha256: {sha}\n"));
    }
    (front, section)
}

/// An approved monty request whose code is `code`, with no inputs; `who` names the test
/// (see [`approved_request`]).
pub fn monty_request(id: &str, code: &str, who: &str) -> String {
    approved_request(
        who,
        id,
        "monty",
        64,
        "",
        &format!("## Code\n```python\n{code}\n```\n\n## Inputs (JSON)\n```json\n{{}}\n```\n"),
    )
}
