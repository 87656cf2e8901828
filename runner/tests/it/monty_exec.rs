//! The Monty backend end to end: every `tests/monty/<case>.md` is run by the real
//! `runner exec` (with the real `runner-monty-worker`) and its result compared with
//! the sidecar `<case>.expect.json`:
//!
//! ```json
//! {"outcome": "timed_out", "exit_code": 124, "stdout_contains": ["spinning"],
//!  "result_contains": ["wall-clock limit"], "max_runtime_sec": 4}
//! ```
//!
//! or, for a case the runner must refuse before running, `{"refused": "<reason code>"}`.
//! Inputs, when a case has any, are in `<case>.inputs/`. A sidecar may name another
//! request with `"request"` (the worked example). Every result must exist, hold the six
//! sections, and agree with the JSON report on outcome and exit code; one harness
//! reports every mismatch at once.
//!
//! The worker is `$RUNNER_MONTY_WORKER`, else `runner-monty-worker` next to the runner
//! binary: build it first (`just build`, or `cargo build --release -p runner-monty
//! --ignore-rust-version`).

#![allow(clippy::unwrap_used, clippy::expect_used)]
// reason: a test harness builds fixtures and runs the built binaries on the host.
#![allow(clippy::disallowed_methods)]

use crate::corpus;

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// Fewest cases the directory may hold.
const MIN_CASES: usize = 15;
const SECTIONS: [&str; 6] = [
    "## Summary",
    "## Provenance",
    "## Outputs",
    "## Stdout",
    "## Stderr",
    "## Safety Notes",
];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Expectation {
    /// Run this request (relative to `tests/monty/`) instead of `<case>.md`.
    #[serde(default)]
    request: Option<String>,
    /// The runner refuses the case before running it, with this reason code.
    #[serde(default)]
    refused: Option<String>,
    #[serde(default)]
    outcome: Option<String>,
    #[serde(default)]
    exit_code: Option<i32>,
    #[serde(default)]
    stdout_contains: Vec<String>,
    #[serde(default)]
    stdout_lacks: Vec<String>,
    #[serde(default)]
    stderr_contains: Vec<String>,
    /// Substrings of the result document (Summary, Provenance, Safety Notes).
    #[serde(default)]
    result_contains: Vec<String>,
    /// Exactly these files under `/out`, with these contents.
    #[serde(default)]
    out_files: Option<BTreeMap<String, String>>,
    /// These files under `/out` (among any others), with these sizes in bytes.
    #[serde(default)]
    out_sizes: BTreeMap<String, u64>,
    #[serde(default)]
    max_runtime_sec: Option<f64>,
    /// Which layer contains the case, and why the case exists.
    #[allow(dead_code)]
    note: String,
}

/// What `runner exec --json` prints.
#[derive(Debug, Deserialize)]
struct Report {
    verdict: String,
    reasons: Vec<ReportReason>,
    result_path: Option<String>,
    outcome: Option<String>,
    exit_code: Option<i32>,
}

#[derive(Debug, Deserialize)]
struct ReportReason {
    code: String,
    message: String,
}

fn cases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/monty")
}

fn worker() -> PathBuf {
    let exe = std::env::var_os("RUNNER_MONTY_WORKER")
        .filter(|v| !v.is_empty())
        .map_or_else(
            || Path::new(env!("CARGO_BIN_EXE_runner")).with_file_name("runner-monty-worker"),
            PathBuf::from,
        );
    assert!(
        exe.is_file(),
        "the Monty worker {} is missing: build it with `cargo build --release -p runner-monty \
         --ignore-rust-version` (or `just build`), or set RUNNER_MONTY_WORKER",
        exe.display()
    );
    exe
}

/// Every case with its sidecar (a sidecar naming its `request` stands alone).
fn cases() -> Vec<corpus::Fixture<Expectation>> {
    corpus::load(
        &cases_dir(),
        &corpus::Pairing {
            lone_sidecars: true,
            ..corpus::Pairing::documents("md")
        },
    )
}

/// Run one case; every mismatch is a line of the returned list.
fn check(name: &str, expect: &Expectation, worker: &Path) -> (Vec<String>, f64) {
    let mut problems = Vec::new();
    let request = match &expect.request {
        Some(rel) => cases_dir().join(rel),
        None => cases_dir().join(format!("{name}.md")),
    };
    let scratch = tempfile::tempdir().expect("tempdir");
    let inputs = cases_dir().join(format!("{name}.inputs"));
    let inputs = if inputs.is_dir() {
        inputs
    } else {
        let empty = scratch.path().join("inputs");
        std::fs::create_dir(&empty).expect("mkdir");
        empty
    };
    let results = scratch.path().join("results");
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_runner"))
        .arg("exec")
        .arg(&request)
        .arg("--inputs")
        .arg(&inputs)
        .arg("--results")
        .arg(&results)
        .arg("--json")
        .env("RUNNER_MONTY_WORKER", worker)
        .output()
        .expect("the runner binary runs");
    let wall = started.elapsed().as_secs_f64();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Report = match serde_json::from_str(stdout.trim()) {
        Ok(r) => r,
        Err(e) => {
            problems.push(format!(
                "no JSON report ({e}); stdout {stdout:?}; stderr {:?}",
                String::from_utf8_lossy(&out.stderr)
            ));
            return (problems, wall);
        }
    };
    if let Some(code) = &expect.refused {
        if report.verdict != "REJECT" || !report.reasons.iter().any(|r| &r.code == code) {
            problems.push(format!("expected a refusal `{code}`, got {report:?}"));
        }
        if results.exists() && std::fs::read_dir(&results).map_or(0, Iterator::count) > 0 {
            problems.push("a refused case wrote a result".into());
        }
        return (problems, wall);
    }
    let Some(result_path) = report.result_path.as_deref().map(PathBuf::from) else {
        let reasons: Vec<String> = report
            .reasons
            .iter()
            .map(|r| format!("{}: {}", r.code, r.message))
            .collect();
        problems.push(format!("no result written: {}", reasons.join("; ")));
        return (problems, wall);
    };
    if out.status.code() != Some(0) {
        problems.push(format!("runner exited with {:?}", out.status.code()));
    }
    if report.outcome.as_deref() != expect.outcome.as_deref() {
        problems.push(format!(
            "outcome {:?}, expected {:?}",
            report.outcome, expect.outcome
        ));
    }
    if expect.exit_code.is_some() && report.exit_code != expect.exit_code {
        problems.push(format!(
            "exit code {:?}, expected {:?}",
            report.exit_code, expect.exit_code
        ));
    }
    if let Some(max) = expect.max_runtime_sec
        && wall > max
    {
        problems.push(format!("took {wall:.2} s, expected at most {max} s"));
    }

    let doc = std::fs::read_to_string(&result_path).unwrap_or_default();
    if doc.is_empty() {
        problems.push(format!("result {} missing or empty", result_path.display()));
    }
    for section in SECTIONS {
        if !doc.lines().any(|l| l == section) {
            problems.push(format!("result lacks `{section}`"));
        }
    }
    if let Some(code) = report.exit_code
        && !doc.contains(&format!("\nexit_code: {code}\n"))
    {
        problems.push(format!("result front matter does not say exit_code {code}"));
    }
    if let Some(outcome) = &report.outcome
        && !doc.contains(&format!("- Outcome: `{outcome}`"))
    {
        problems.push(format!("result Summary does not say outcome {outcome}"));
    }
    for needle in &expect.result_contains {
        if !doc.contains(needle.as_str()) {
            problems.push(format!("result lacks {needle:?}"));
        }
    }
    let stored = result_path.with_extension("");
    let read = |file: &str| {
        String::from_utf8_lossy(&std::fs::read(stored.join(file)).unwrap_or_default()).into_owned()
    };
    let (got_stdout, got_stderr) = (read("stdout"), read("stderr"));
    let excerpt = |s: &str| s.chars().take(300).collect::<String>();
    for needle in &expect.stdout_contains {
        if !got_stdout.contains(needle.as_str()) {
            problems.push(format!(
                "stdout lacks {needle:?}: {:?}",
                excerpt(&got_stdout)
            ));
        }
    }
    for needle in &expect.stdout_lacks {
        if got_stdout.contains(needle.as_str()) {
            problems.push(format!("stdout has {needle:?}"));
        }
    }
    for needle in &expect.stderr_contains {
        if !got_stderr.contains(needle.as_str()) {
            problems.push(format!(
                "stderr lacks {needle:?}: {:?}",
                excerpt(&got_stderr)
            ));
        }
    }
    if let Some(files) = &expect.out_files {
        let out_dir = stored.join("out");
        let mut found = BTreeMap::new();
        if let Ok(entries) = std::fs::read_dir(&out_dir) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                found.insert(name, std::fs::read_to_string(e.path()).unwrap_or_default());
            }
        }
        if &found != files {
            problems.push(format!("/out holds {found:?}, expected {files:?}"));
        }
    }
    for (file, want) in &expect.out_sizes {
        let got = std::fs::symlink_metadata(stored.join("out").join(file)).map(|m| m.len());
        if got.as_ref().ok() != Some(want) {
            problems.push(format!("/out/{file} is {got:?} bytes, expected {want}"));
        }
    }
    (problems, wall)
}

#[test]
fn monty_cases_run_contained_with_complete_results() {
    let worker = worker();
    let cases = cases();
    assert!(
        cases.len() >= MIN_CASES,
        "only {} cases in {}",
        cases.len(),
        cases_dir().display()
    );
    // Two at a time: the machine has two cores, and the slow cases mostly wait.
    let walls = corpus::run_all("monty", &cases, 2, |f| check(&f.name, &f.expect, &worker));
    for (f, wall) in cases.iter().zip(walls) {
        eprintln!("{}: {wall:.2} s", f.name);
    }
}
