//! Fault injection on `runner exec`: SIGKILL at many moments of a run, a results
//! directory on a full or read-only filesystem, a full filesystem under the run's own
//! staging directory, and concurrent runs of one request.
//! Afterwards the results directory holds, for each run, either no result or a
//! complete one that `runner verify` accepts; never a partial `TS-….md`.
//!
//! The filesystem cases mount small tmpfs instances in a private mount namespace
//! (`unshare -m`), so they need root, which CI has; without it they fail saying so.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// reason: a test harness builds fixtures and runs the built binaries on the host.
#![allow(clippy::disallowed_methods)]

use crate::support;

use support::{runner, sha256_hex as sha256};

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// A request whose script writes a few MB to /out and to stdout, then sleeps a little:
/// long enough that kills land in staging, running, collecting and publishing.
fn write_request(dir: &Path) -> PathBuf {
    let script = b"import time\nwith open('/out/big.bin', 'wb') as f:\n    f.write(b'x' * (8 * 1024 * 1024))\nfor i in range(2000):\n    print('line', i)\ntime.sleep(0.3)\nopen('/out/done.txt', 'w').write('done')\n";
    std::fs::create_dir_all(dir.join("inputs")).unwrap();
    std::fs::write(dir.join("inputs/job.py"), script).unwrap();
    let sha = sha256(script);
    let req = dir.join("TR-20261121-130000Z-crash.md");
    std::fs::write(
        &req,
        format!(
            "---\nrequest_type: tool_request\nschema_version: 1\nrequest_id: \"TR-20261121-130000Z-crash\"\ncreated_utc: \"2026-11-21T13:00:00Z\"\nrequested_by: \"test\"\napproved_by: \"operator\"\napproved_utc: \"2026-11-21T13:00:01Z\"\npurpose: \"Crash-safety fixture.\"\nbackend: ERA\nlanguage: python\nnetwork: none\ncpu_limit: \"20\"\nmemory_limit_mb: 128\ntime_limit_sec: 20\ninputs:\n  - path: \"/in/job.py\"\n    sha256: \"{sha}\"\n---\n## Command\n`python -u job.py`\n\n## Input Files\n- `/in/job.py` sha256: {sha}\n\n## Output Expectations\n- `/out/big.bin` and `/out/done.txt`\n\n## Risk Assessment\n- Risk level: low\n- Justification: a test.\n- Data sensitivity: public\n- Network rationale: none needed\n"
        ),
    )
    .unwrap();
    req
}

/// Every `TS-*.md` in `results` must verify; returns how many there are.
fn assert_only_complete_results(results: &Path, request: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(results) else {
        return 0;
    };
    let mut complete = 0;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("TS-") && name.ends_with(".md") {
            let out = runner()
                .arg("verify")
                .arg(e.path())
                .arg("--request")
                .arg(request)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{name} exists but does not verify: {}",
                String::from_utf8_lossy(&out.stdout)
            );
            complete += 1;
        }
    }
    complete
}

#[test]
fn sigkill_at_any_moment_leaves_no_partial_result() {
    let dir = tempfile::tempdir().unwrap();
    let req = write_request(dir.path());
    let results = dir.path().join("results");
    // One undisturbed run, to know how long a run takes.
    let start = Instant::now();
    let out = runner().arg("exec").arg(&req).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let full = start.elapsed();
    assert_eq!(assert_only_complete_results(&results, &req), 1);

    let steps = 24u32;
    for i in 0..steps {
        let delay = full.mul_f64(f64::from(i) / f64::from(steps - 4));
        let mut child = runner()
            .arg("exec")
            .arg(&req)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        let _ = child.kill();
        let _ = child.wait();
        assert_only_complete_results(&results, &req);
    }
    // Killed runs may leave staging directories (named .tmp-…), never a document.
    for e in std::fs::read_dir(&results).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        assert!(
            name.starts_with("TS-") || name.starts_with(".tmp-"),
            "unexpected entry {name}"
        );
    }
}

#[test]
fn concurrent_runs_of_one_request_give_distinct_complete_results() {
    let dir = tempfile::tempdir().unwrap();
    let req = write_request(dir.path());
    let children: Vec<_> = (0..4)
        .map(|_| {
            runner()
                .arg("exec")
                .arg(&req)
                .arg("--json")
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut paths = Vec::new();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success());
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        paths.push(v["result_path"].as_str().unwrap().to_owned());
    }
    paths.sort();
    paths.dedup();
    assert_eq!(paths.len(), 4, "four runs, four results: {paths:?}");
    assert_eq!(
        assert_only_complete_results(&dir.path().join("results"), &req),
        4
    );
}

fn require_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test mounts tmpfs and needs root (CI runs as root); leave the group out with `cargo test -- --skip needs_root`"
    );
}

/// Runs `runner exec` in a private mount namespace where `results` is a tmpfs mounted
/// with `options`; returns the exit code and stderr, and what the results held.
fn exec_on_mount(dir: &Path, req: &Path, options: &str) -> (i32, String, Vec<String>) {
    let results = dir.join("mnt");
    std::fs::create_dir_all(&results).unwrap();
    let script = format!(
        "mount -t tmpfs -o {options} tmpfs {r} && {exe} exec {req} --results {r}; code=$?; ls -A {r} > {dir}/listing; exit $code",
        r = results.display(),
        exe = env!("CARGO_BIN_EXE_runner"),
        req = req.display(),
        dir = dir.display()
    );
    let out = Command::new("unshare")
        .arg("-m")
        .arg("--propagation")
        .arg("private")
        .arg("sh")
        .arg("-c")
        .arg(&script)
        .output()
        .unwrap();
    let listing = std::fs::read_to_string(dir.join("listing")).unwrap_or_default();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        listing.lines().map(str::to_owned).collect(),
    )
}

/// The tests that need root: each mounts a small tmpfs in a private mount namespace.
/// Each fails, saying so, when not run as root (CI runs as root); elsewhere leave the
/// group out with `cargo test -- --skip needs_root`.
mod needs_root {
    use super::*;

    #[test]
    fn a_full_results_filesystem_is_a_clear_error_and_leaves_nothing() {
        require_root();
        let dir = tempfile::tempdir().unwrap();
        let req = write_request(dir.path());
        // 1 MiB: the 8 MiB artifact cannot fit.
        let (code, stderr, listing) = exec_on_mount(dir.path(), &req, "size=1m");
        assert_eq!(code, 3, "exit code for an I/O error; stderr: {stderr}");
        assert!(
            stderr.contains("result.write") && stderr.contains("mnt"),
            "the error names the problem and the place: {stderr}"
        );
        assert!(
            !listing.iter().any(|n| n.starts_with("TS-")),
            "no result, not even a partial one: {listing:?}"
        );
        assert!(
            listing.is_empty(),
            "the staging directory is removed: {listing:?}"
        );
    }

    #[test]
    fn a_read_only_results_directory_is_a_clear_error() {
        require_root();
        let dir = tempfile::tempdir().unwrap();
        let req = write_request(dir.path());
        let (code, stderr, listing) = exec_on_mount(dir.path(), &req, "ro,size=1m");
        assert_eq!(code, 3, "stderr: {stderr}");
        assert!(
            stderr.contains("Read-only file system") || stderr.contains("read-only"),
            "{stderr}"
        );
        assert!(listing.is_empty());
    }

    #[test]
    fn a_full_staging_filesystem_is_a_clear_error_and_leaves_no_result() {
        require_root();
        let dir = tempfile::tempdir().unwrap();
        let req = write_request(dir.path());
        let results = dir.path().join("results");
        let tmp = dir.path().join("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        // 16 KiB for the run directory: the inputs fit, the 2000 captured stdout lines
        // (about 20 KB) do not.
        let script = format!(
            "mount -t tmpfs -o size=16k tmpfs {tmp} && TMPDIR={tmp} {exe} exec {req} --results {r}",
            tmp = tmp.display(),
            exe = env!("CARGO_BIN_EXE_runner"),
            req = req.display(),
            r = results.display(),
        );
        let out = Command::new("unshare")
            .arg("-m")
            .arg("--propagation")
            .arg("private")
            .arg("sh")
            .arg("-c")
            .arg(&script)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "an I/O error: {stderr}");
        assert!(
            stderr.contains("No space left on device") || stderr.contains("ENOSPC"),
            "the error says what happened: {stderr}"
        );
        assert_eq!(
            assert_only_complete_results(&results, &req),
            0,
            "no result at all"
        );
    }
}
