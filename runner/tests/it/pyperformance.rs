//! The pyperformance differential: real, pure-Python benchmarks from
//! pyperformance 1.11.0, each run unmodified through `runner exec` on the default guest
//! (`language: python`) and natively with the host's `python3`, and their outputs
//! compared byte for byte.
//!
//! pyperf's `Runner` spawns worker processes, which a WASI guest cannot; the benchmarks
//! run instead against `tests/pyperformance/pyperf.py`, a stand-in that runs each
//! benchmark function once and prints what it returned and a digest of the module's
//! state afterwards (the same stand-in natively, so the comparison is of the
//! interpreters, not of the harness). The pyperformance sources come from PyPI, pinned by
//! hash: `just pyperformance` downloads and unpacks them into `target/pyperformance/`
//! (`just test` does it first); `$RUNNER_PYPERFORMANCE` may name another copy of the
//! benchmarks directory.
//!
//! Needs the CPython guest (`just guests`) and `python3` on PATH.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// reason: a test harness builds fixtures and runs the built binaries on the host.
#![allow(clippy::disallowed_methods)]

use crate::support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use support::{repo, runner, sha256_hex};

/// Pure-Python benchmarks that run in a few seconds in the guest, with no third-party
/// package: recursion, objects, floats, integer permutations, lists.
const BENCHMARKS: [&str; 7] = [
    "nbody",
    "richards",
    "float",
    "fannkuch",
    "spectral_norm",
    "nqueens",
    "deltablue",
];

/// Benchmarks whose output differs, each with the reason; they must still run to
/// completion in both places and print the same lines but for their state digest. One
/// that starts to agree fails the test, so the list stays true.
const KNOWN_DIFFERENCES: [(&str, &str); 1] = [(
    "nbody",
    "the bodies' positions after 20 000 steps differ from the 10th significant digit on: \
     a last-bit difference of a float operation (the guest's wasi-libc math against the \
     host's glibc, not isolated further) amplified by the chaotic integration; float, \
     spectral_norm and the others agree to the bit",
)];

fn benchmarks_dir() -> PathBuf {
    let dir = std::env::var_os("RUNNER_PYPERFORMANCE")
        .filter(|v| !v.is_empty())
        .map_or_else(
            || {
                repo().join(
                    "target/pyperformance/pyperformance-1.11.0/pyperformance/data-files/benchmarks",
                )
            },
            PathBuf::from,
        );
    assert!(
        dir.join("bm_nbody/run_benchmark.py").is_file(),
        "the pyperformance benchmarks are not at {}: run `just pyperformance` (or set \
         RUNNER_PYPERFORMANCE to a pyperformance data-files/benchmarks directory)",
        dir.display()
    );
    dir
}

fn shim() -> String {
    std::fs::read_to_string(repo().join("tests/pyperformance/pyperf.py")).unwrap()
}

/// A directory holding the benchmark's script and the stand-in, as the guest sees `/in`.
fn inputs_for(name: &str, into: &Path) -> String {
    let script =
        std::fs::read_to_string(benchmarks_dir().join(format!("bm_{name}/run_benchmark.py")))
            .unwrap();
    std::fs::create_dir_all(into).unwrap();
    std::fs::write(into.join("run_benchmark.py"), &script).unwrap();
    std::fs::write(into.join("pyperf.py"), shim()).unwrap();
    script
}

/// The approved request running one benchmark; returns its path.
fn request(name: &str, dir: &Path) -> PathBuf {
    let script = inputs_for(name, &dir.join("inputs"));
    let files = [("run_benchmark.py", script), ("pyperf.py", shim())];
    let mut front = String::new();
    let mut listed = String::new();
    for (file, text) in &files {
        let sha = sha256_hex(text.as_bytes());
        front.push_str(&format!(
            "  - path: \"/in/{file}\"\n    sha256: \"{sha}\"\n"
        ));
        listed.push_str(&format!("- `/in/{file}` sha256: {sha} (input)\n"));
    }
    let id = format!(
        "TR-20261125-120000Z-pyperformance-{}",
        name.replace('_', "-")
    );
    let text = format!(
        "---\nrequest_type: tool_request\nschema_version: 1\nrequest_id: \"{id}\"\n\
         created_utc: \"2026-11-25T12:00:00Z\"\nrequested_by: \"core-agent\"\n\
         approved_by: \"operator-ada\"\napproved_utc: \"2026-11-25T12:01:00Z\"\n\
         purpose: \"The pyperformance benchmark {name}, unmodified, compared with native CPython.\"\n\
         backend: ERA\nlanguage: python\nnetwork: none\ncpu_limit: \"60\"\n\
         memory_limit_mb: 512\ntime_limit_sec: 120\ninputs:\n{front}---\n\
         # pyperformance {name}\n\n## Command\n`python -u run_benchmark.py`\n\n\
         ## Input Files\n{listed}\n\
         ## Output Expectations\n- stdout: what the benchmark returned and its state digest.\n\n\
         ## Risk Assessment\n- Risk level: low\n\
         - Justification: a CPU-bound benchmark reading its own script; no network.\n\
         - Data sensitivity: public\n- Network rationale: none needed\n"
    );
    let path = dir.join(format!("{id}.md"));
    std::fs::write(&path, text).unwrap();
    path
}

/// The benchmark's stdout in the guest, through `runner exec`.
fn in_guest(name: &str) -> Result<String, String> {
    let dir = tempfile::tempdir().unwrap();
    let req = request(name, dir.path());
    let out = runner()
        .args(["exec", "--json", "--results"])
        .arg(dir.path().join("results"))
        .arg(&req)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).map_err(|e| {
        format!(
            "no JSON report ({e}); stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    if report["outcome"] != "completed" || report["exit_code"] != 0 {
        return Err(format!("runner exec: {report}"));
    }
    let doc = PathBuf::from(report["result_path"].as_str().unwrap());
    let stdout = doc.with_extension("").join("stdout");
    std::fs::read_to_string(&stdout).map_err(|e| format!("{}: {e}", stdout.display()))
}

/// The same benchmark natively: the host's `python3`, with the guest's hash seed.
fn native(script_dir: &Path) -> Result<String, String> {
    let out = Command::new("python3")
        .args(["-E", "-s", "-u", "run_benchmark.py"])
        .current_dir(script_dir)
        .env("PYTHONHASHSEED", "0")
        .output()
        .map_err(|e| format!("python3: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "python3 failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8(out.stdout).unwrap())
}

#[test]
fn pyperformance_benchmarks_compute_the_same_in_the_guest_as_natively() {
    let mut problems = Vec::new();
    for name in BENCHMARKS {
        let dir = tempfile::tempdir().unwrap();
        inputs_for(name, dir.path());
        let (guest, native) = (in_guest(name), native(dir.path()));
        let known = KNOWN_DIFFERENCES.iter().find(|(n, _)| *n == name);
        let digest_line = format!("{name} state sha256 ");
        let without_digest = |out: &str| -> Vec<String> {
            out.lines()
                .filter(|l| !l.starts_with(&digest_line))
                .map(str::to_owned)
                .collect()
        };
        match (guest, native, known) {
            (Ok(g), Ok(n), None) if g == n && g.contains(&digest_line) => {
                eprintln!("{name}: same output:\n{g}");
            }
            (Ok(g), Ok(n), Some(_)) if g == n => problems.push(format!(
                "{name}: now agrees with native; take it off KNOWN_DIFFERENCES\n{g}"
            )),
            (Ok(g), Ok(n), Some((_, why)))
                if g.contains(&digest_line) && without_digest(&g) == without_digest(&n) =>
            {
                eprintln!("{name}: differs as known ({why}):\n  guest: {g}  native: {n}");
            }
            (Ok(g), Ok(n), _) => problems.push(format!(
                "{name}: outputs differ\n  guest:\n{g}\n  native:\n{n}"
            )),
            (g, n, _) => problems.push(format!("{name}: guest {g:?}, native {n:?}")),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The stand-in's output says what the benchmark computed: a benchmark that computes
/// something else (nbody with another time step) prints another digest.
#[test]
fn the_state_digest_changes_with_what_the_benchmark_computes() {
    let dir = tempfile::tempdir().unwrap();
    let script = inputs_for("nbody", dir.path());
    let first = native(dir.path()).unwrap();
    assert!(first.contains("nbody state sha256 "), "{first}");
    assert_eq!(native(dir.path()).unwrap(), first, "the digest is stable");
    let changed = script.replace("advance(0.01, iterations)", "advance(0.02, iterations)");
    assert_ne!(changed, script, "the edit applies");
    std::fs::write(dir.path().join("run_benchmark.py"), changed).unwrap();
    assert_ne!(native(dir.path()).unwrap(), first);
}
