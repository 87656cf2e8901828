//! The pre-initialised cpython-3.12 against the plain module, end to end: each
//! directory under `tests/preinit/` holds the inputs of one request (`script.py` and
//! any other files, subdirectories included) and optionally `command` (the request's
//! command; default `python script.py`). The harness runs the request with
//! `runner exec` (pre-initialisation on), checks that the lock records the
//! pre-initialised module exactly when the fixture expects it (names ending in
//! `-falls-back-to-plain` must run the plain module), then replays the result with
//! `RUNNER_PREINIT=0`, which runs the plain module under the same recorded clocks and
//! seed: every output (stdout, stderr, exit code, outcome, each /out file) must MATCH
//! byte for byte.
//!
//! Needs the guest fetched (`just guests`); `runner guest fetch cpython-3.12` is run
//! first and builds the pre-initialised module when it is missing.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// reason: a test harness builds fixtures and runs the built binaries on the host.
#![allow(clippy::disallowed_methods)]

use crate::support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use support::{declared_inputs, repo, sha256_hex};

/// Files under `dir`, relative, sorted (directories descended; `command` left out).
fn files(dir: &Path, prefix: &str, out: &mut Vec<String>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for e in entries {
        let name = format!("{prefix}{}", e.file_name().to_string_lossy());
        if e.file_type().unwrap().is_dir() {
            files(&e.path(), &format!("{name}/"), out);
        } else if name != "command" {
            out.push(name);
        }
    }
}

fn request(name: &str, command: &str, inputs: &[(String, String)]) -> String {
    let (inputs, section) = declared_inputs(inputs);
    format!(
        "---\nrequest_type: tool_request\nschema_version: 1\nrequest_id: \"TR-20261125-120000Z-{name}\"\ncreated_utc: \"2026-11-25T12:00:00Z\"\nrequested_by: \"test-harness\"\napproved_by: \"test-operator\"\napproved_utc: \"2026-11-25T12:00:01Z\"\npurpose: \"Pre-initialised guest fixture {name}.\"\nbackend: ERA\nlanguage: python\nnetwork: none\ncpu_limit: \"20\"\nmemory_limit_mb: 256\ntime_limit_sec: 30\n{inputs}---\n# {name}\n\n## Command\n`{command}`\n\n## Input Files\n{section}\n## Output Expectations\n- stdout, stderr, and files under /out/ when the fixture writes any.\n\n## Risk Assessment\n- Risk level: low\n- Justification: a test fixture.\n- Data sensitivity: public\n- Network rationale: none needed\n"
    )
}

fn runner(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, Value, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_runner"));
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let json = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (
        out.status.code(),
        json,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn lock_guest(result: &Path) -> Value {
    let lock = result.with_extension("lock.json");
    let lock: Value = serde_json::from_slice(&std::fs::read(&lock).unwrap()).unwrap();
    lock["runtime"]["guest"].clone()
}

/// Runs one fixture; returns the problems found.
fn run_fixture(dir: &Path) -> Vec<String> {
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    let command = std::fs::read_to_string(dir.join("command"))
        .map_or_else(|_| "python script.py".to_owned(), |c| c.trim().to_owned());
    let work = tempfile::tempdir().unwrap();
    let inputs_dir = work.path().join("inputs");
    let mut names = Vec::new();
    files(dir, "", &mut names);
    let mut inputs = Vec::new();
    for file in &names {
        let bytes = std::fs::read(dir.join(file)).unwrap();
        let dest = inputs_dir.join(file);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::write(&dest, &bytes).unwrap();
        inputs.push((file.clone(), sha256_hex(&bytes)));
    }
    std::fs::create_dir_all(&inputs_dir).unwrap();
    let req = work.path().join(format!("TR-{name}.md"));
    std::fs::write(&req, request(&name, &command, &inputs)).unwrap();
    let r1 = work.path().join("r1");
    let r2 = work.path().join("r2");
    let s = |p: &Path| p.to_string_lossy().into_owned();
    let mut problems = Vec::new();
    let (code, report, stderr) = runner(
        &[
            "exec",
            &s(&req),
            "--inputs",
            &s(&inputs_dir),
            "--results",
            &s(&r1),
            "--json",
        ],
        &[],
    );
    let Some(result) = report["result_path"].as_str().map(PathBuf::from) else {
        return vec![format!(
            "{name}: exec wrote no result ({code:?}): {report} {stderr}"
        )];
    };
    let guest = lock_guest(&result);
    let expect_preinit = !name.ends_with("-falls-back-to-plain");
    if guest["preinit_sha256"].is_string() != expect_preinit {
        problems.push(format!(
            "{name}: expected the {} module, the lock records {guest}",
            if expect_preinit {
                "pre-initialised"
            } else {
                "plain"
            }
        ));
    }
    let (code, report, stderr) = runner(
        &[
            "replay",
            &s(&result),
            "--request",
            &s(&req),
            "--inputs",
            &s(&inputs_dir),
            "--results",
            &s(&r2),
            "--json",
        ],
        &[("RUNNER_PREINIT", "0")],
    );
    if report["verdict"] != "MATCH" {
        problems.push(format!(
            "{name}: the plain module's replay is not a MATCH ({code:?}): {report} {stderr}"
        ));
    }
    if let Some(replayed) = report["result_path"].as_str() {
        let guest = lock_guest(Path::new(replayed));
        if !guest["preinit_sha256"].is_null() {
            problems.push(format!(
                "{name}: the replay did not run the plain module: {guest}"
            ));
        }
    }
    problems
}

#[test]
fn pre_initialised_and_plain_runs_give_the_same_outputs() {
    let (code, _, stderr) = runner(&["guest", "fetch", "cpython-3.12", "--json"], &[]);
    assert_eq!(code, Some(0), "guest fetch: {stderr}");
    let root = repo().join("tests/preinit");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert!(
        dirs.len() >= 15,
        "the corpus under {} shrank",
        root.display()
    );
    let problems: Vec<String> = dirs.iter().flat_map(|d| run_fixture(d)).collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
