//! Usage figures: each run's lock and in-toto predicate record what it
//! used (CPU ms, peak RSS, wall ms, bytes written to /out, stdout and stderr bytes, the
//! limit that fired), and replay ignores them. Monty runs: no guest download needed.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// reason: a test harness builds fixtures and runs the built binaries on the host.
#![allow(clippy::disallowed_methods)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn runner() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_runner"));
    c.stdin(Stdio::null());
    c
}

/// Writes a monty request running `code` with `time_limit_sec` into `dir`.
fn request(dir: &Path, code: &str, time_limit_sec: u32) -> PathBuf {
    let path = dir.join("TR-20261125-070000Z-usage.md");
    std::fs::write(
        &path,
        format!(
            "---\nrequest_type: tool_request\nschema_version: 1\nrequest_id: \"TR-20261125-070000Z-usage\"\ncreated_utc: \"2026-11-25T07:00:00Z\"\nrequested_by: \"core-agent\"\napproved_by: \"operator-ada\"\napproved_utc: \"2026-11-25T07:05:00Z\"\npurpose: \"Measure what a run uses.\"\nbackend: monty\nlanguage: python\nnetwork: none\ncpu_limit: \"10\"\nmemory_limit_mb: 64\ntime_limit_sec: {time_limit_sec}\n---\n# Usage\n\n## Code\n```python\n{code}\n```\n\n## Output Expectations\n- stdout: a line; one file under /out/.\n\n## Risk Assessment\n- Risk level: low\n- Justification: computation only.\n- Data sensitivity: public\n- Network rationale: none needed\n"
        ),
    )
    .unwrap();
    path
}

fn exec(request: &Path, results: &Path) -> (PathBuf, Value) {
    let out = runner()
        .args(["exec", request.to_str().unwrap(), "--results"])
        .arg(results)
        .arg("--json")
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let result = PathBuf::from(v["result_path"].as_str().expect("a result"));
    let lock: Value =
        serde_json::from_slice(&std::fs::read(result.with_extension("lock.json")).unwrap())
            .unwrap();
    (result, lock)
}

#[test]
fn usage_is_recorded_in_lock_and_statement_and_ignored_by_replay() {
    let dir = tempfile::tempdir().unwrap();
    let code = "x = [i * i for i in range(200000)]\nprint('sum', sum(x))\nopen('/out/data.txt', 'w').write('y' * 3000)";
    let req = request(dir.path(), code, 20);
    let results = dir.path().join("results");
    let (result, lock) = exec(&req, &results);
    let u = &lock["usage"];
    assert!(u["wall_ms"].as_u64().unwrap() > 0, "{u}");
    assert!(u["cpu_ms"].as_u64().is_some(), "{u}");
    // A list of 200 000 ints is megabytes: the peak is at least that.
    assert!(u["peak_rss_bytes"].as_u64().unwrap() > 4 << 20, "{u}");
    assert_eq!(u["out_bytes"], 3000, "{u}");
    assert_eq!(u["stdout_bytes"], lock["outputs"]["stdout"]["bytes"], "{u}");
    assert_eq!(u["stderr_bytes"], 0, "{u}");
    assert_eq!(u["limit_fired"], Value::Null, "{u}");
    assert_eq!(
        u["peak_linear_memory_bytes"],
        Value::Null,
        "monty has no linear memory: {u}"
    );
    let statement: Value =
        serde_json::from_slice(&std::fs::read(result.with_extension("intoto.json")).unwrap())
            .unwrap();
    assert_eq!(statement["predicate"]["usage"], *u);
    let out = runner()
        .args(["verify", result.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // Usage differs from run to run; replay does not compare it.
    let out = runner()
        .args(["replay", result.to_str().unwrap(), "--request"])
        .arg(&req)
        .arg("--json")
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verdict"], "MATCH", "{v}");
    assert!(
        !v["outputs"].to_string().contains("usage"),
        "replay compared usage: {v}"
    );
}

#[test]
fn the_limit_that_fired_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let req = request(dir.path(), "print('spin')\nwhile True:\n    pass", 1);
    let (_, lock) = exec(&req, &dir.path().join("results"));
    assert_eq!(lock["outputs"]["outcome"], "timed_out");
    assert_eq!(lock["usage"]["limit_fired"], "timed_out", "{lock}");
    assert!(lock["usage"]["wall_ms"].as_u64().unwrap() >= 1000, "{lock}");
    // The spin burned CPU, and no more than the wall time allows: how much of the
    // second it got depends on the machine's load, so no lower bound beyond "some".
    let wall = lock["usage"]["wall_ms"].as_u64().unwrap();
    let cpu = lock["usage"]["cpu_ms"].as_u64().unwrap();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
    assert!(
        cpu > 0 && cpu <= wall * cores,
        "cpu_ms {cpu}, wall_ms {wall}: {lock}"
    );
}
