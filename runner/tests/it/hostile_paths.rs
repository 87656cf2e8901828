//! What whoever writes a request's directory can do with the paths around it (the audit's
//! findings), end to end through the built binary on the monty
//! backend (no guest download needed). Each test is named after its attack:
//!
//! * `inputs -> /etc` beside a request: the default inputs root is never followed
//!   through a symlink, and no refusal reveals the digest of a file outside it;
//! * a hard link in `inputs/` to a file elsewhere: refused, digest unrevealed;
//! * `results -> elsewhere`: the default results directory is never followed, and
//!   nothing runs when the result could not be published;
//! * result names squatted ahead of time: the run moves on to a free name for its whole
//!   set of files and leaves no orphan.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// reason: a test harness builds fixtures and runs the built binaries on the host.
#![allow(clippy::disallowed_methods)]

use crate::support;

use support::sha256_hex as sha256;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A monty request reading `/in/<input>` (declared with `sha`) and printing it.
fn request_text(request_id: &str, input: Option<(&str, &str)>) -> String {
    let (front, section, code) = match input {
        // A monty request declares its inputs in the front matter only.
        Some((name, sha)) => (
            format!("inputs:\n  - path: \"/in/{name}\"\n    sha256: \"{sha}\"\n"),
            String::new(),
            format!("with open('/in/{name}') as f:\n    print(f.read())\n"),
        ),
        None => (String::new(), String::new(), "print('ran')\n".to_owned()),
    };
    format!(
        "---\nrequest_type: tool_request\nschema_version: 1\nrequest_id: \"{request_id}\"\ncreated_utc: \"2026-11-21T12:00:00Z\"\nrequested_by: \"core-agent\"\napproved_by: \"operator-ada\"\napproved_utc: \"2026-11-21T12:05:00Z\"\npurpose: \"An adversarial path fixture.\"\nbackend: monty\nlanguage: python\nnetwork: none\ncpu_limit: \"5\"\nmemory_limit_mb: 64\ntime_limit_sec: 10\n{front}---\n# Hostile paths\n\n## Code\n```python\n{code}```\n{section}\n## Output Expectations\n- stdout: the input, or one line.\n\n## Risk Assessment\n- Risk level: high\n- Justification: an adversarial test fixture.\n- Data sensitivity: public\n- Network rationale: none needed\n"
    )
}

/// `runner exec --json REQUEST [extra…]`: the process output and its JSON report.
fn exec(request: &Path, extra: &[&std::ffi::OsStr]) -> (Output, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_runner"))
        .arg("exec")
        .arg(request)
        .args(extra)
        .arg("--json")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "exec printed no JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out, report)
}

fn reason_codes(report: &Value) -> Vec<String> {
    report["reasons"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|r| r["code"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn everything_printed(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    names
}

#[test]
fn inputs_root_symlinked_to_another_directory() {
    // The target stands in for /etc: a directory the request's author must not read.
    let secret_dir = tempfile::tempdir().unwrap();
    std::fs::write(secret_dir.path().join("shadow"), b"root:$6$secret\n").unwrap();
    let real = sha256(b"root:$6$secret\n");
    let work = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(secret_dir.path(), work.path().join("inputs")).unwrap();
    let request = work
        .path()
        .join("TR-20261121-120000Z-inputs-root-symlink.md");
    // First with a wrong hash (the oracle), then with the real one (the read).
    for (what, declared) in [("wrong hash", "0".repeat(64)), ("real hash", real.clone())] {
        std::fs::write(
            &request,
            request_text(
                "TR-20261121-120000Z-inputs-root-symlink",
                Some(("shadow", &declared)),
            ),
        )
        .unwrap();
        let (out, report) = exec(&request, &[]);
        assert_eq!(out.status.code(), Some(4), "{what}: {report}");
        assert_eq!(
            reason_codes(&report),
            ["stage.inputs_dir_symlink"],
            "{what}: {report}"
        );
        let printed = everything_printed(&out);
        assert!(
            !printed.contains(&real),
            "{what}: the refusal reveals the digest of a file outside the inputs: {printed}"
        );
        assert!(!printed.contains("secret"), "{what}: {printed}");
        assert!(
            entries(&work.path().join("results"))
                .iter()
                .all(|n| !n.starts_with("TS-")),
            "{what}: a result was written"
        );
    }
    // The same directory named by the operator is the operator's choice.
    let (out, report) = exec(
        &request,
        &["--inputs".as_ref(), work.path().join("inputs").as_os_str()],
    );
    assert_eq!(out.status.code(), Some(0), "{report}");
}

#[test]
fn hardlinked_input_to_a_file_elsewhere() {
    let work = tempfile::tempdir().unwrap();
    let elsewhere = work.path().join("not-an-input");
    std::fs::write(&elsewhere, b"private\n").unwrap();
    std::fs::create_dir(work.path().join("inputs")).unwrap();
    std::fs::hard_link(&elsewhere, work.path().join("inputs/data.txt")).unwrap();
    let request = work.path().join("TR-20261121-120000Z-hardlinked-input.md");
    std::fs::write(
        &request,
        request_text(
            "TR-20261121-120000Z-hardlinked-input",
            Some(("data.txt", &"0".repeat(64))),
        ),
    )
    .unwrap();
    let (out, report) = exec(&request, &[]);
    assert_eq!(out.status.code(), Some(4), "{report}");
    assert_eq!(
        reason_codes(&report),
        ["stage.input_hardlinked"],
        "{report}"
    );
    assert!(!everything_printed(&out).contains(&sha256(b"private\n")));
    // A copy of it is an input like any other.
    std::fs::remove_file(work.path().join("inputs/data.txt")).unwrap();
    std::fs::copy(&elsewhere, work.path().join("inputs/data.txt")).unwrap();
    std::fs::write(
        &request,
        request_text(
            "TR-20261121-120000Z-hardlinked-input",
            Some(("data.txt", &sha256(b"private\n"))),
        ),
    )
    .unwrap();
    let (out, report) = exec(&request, &[]);
    assert_eq!(out.status.code(), Some(0), "{report}");
}

#[test]
fn results_dir_symlinked_elsewhere() {
    let work = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), work.path().join("results")).unwrap();
    let request = work.path().join("TR-20261121-120000Z-results-symlink.md");
    std::fs::write(
        &request,
        request_text("TR-20261121-120000Z-results-symlink", None),
    )
    .unwrap();
    let (out, report) = exec(&request, &[]);
    assert_eq!(out.status.code(), Some(3), "{report}");
    assert_eq!(reason_codes(&report), ["result.dir_symlink"], "{report}");
    assert!(entries(elsewhere.path()).is_empty());
    // Named explicitly, it is followed.
    let (out, report) = exec(
        &request,
        &[
            "--results".as_ref(),
            work.path().join("results").as_os_str(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert!(entries(elsewhere.path()).iter().any(|n| n.ends_with(".md")));
}

#[test]
fn result_names_squatted_for_the_next_30_seconds() {
    let work = tempfile::tempdir().unwrap();
    let results = work.path().join("results");
    std::fs::create_dir(&results).unwrap();
    let request_id = "TR-20261121-120000Z-squatted-names";
    let request = work.path().join(format!("{request_id}.md"));
    std::fs::write(&request, request_text(request_id, None)).unwrap();
    // Every name `TS-<second>-<request>` the run could pick in the next 30 seconds has
    // its lock file taken; half of them their statement too.
    let now = time::OffsetDateTime::now_utc();
    let mut squatted = Vec::new();
    for s in 0..30i64 {
        let t = now + time::Duration::seconds(s);
        let id = format!(
            "TS-{:04}{:02}{:02}-{:02}{:02}{:02}Z-{request_id}",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second()
        );
        std::fs::write(results.join(format!("{id}.lock.json")), b"squat").unwrap();
        squatted.push(format!("{id}.lock.json"));
        if s % 2 == 0 {
            std::fs::write(results.join(format!("{id}.intoto.json")), b"squat").unwrap();
            squatted.push(format!("{id}.intoto.json"));
        }
    }
    let (out, report) = exec(&request, &["--results".as_ref(), results.as_os_str()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = PathBuf::from(report["result_path"].as_str().unwrap());
    let id = doc.file_stem().unwrap().to_str().unwrap().to_owned();
    assert!(id.ends_with("-2"), "{id}");
    // The whole set is under the new name, and verifies.
    for companion in [format!("{id}.lock.json"), format!("{id}.intoto.json")] {
        assert!(results.join(&companion).is_file(), "{companion}");
    }
    let verify = Command::new(env!("CARGO_BIN_EXE_runner"))
        .arg("verify")
        .arg(&doc)
        .output()
        .unwrap();
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
    // The squatted files are untouched, and nothing is orphaned: every directory has
    // its document, and no staging leftovers remain.
    for name in &squatted {
        assert_eq!(
            std::fs::read(results.join(name)).unwrap(),
            b"squat",
            "{name}"
        );
    }
    let names = entries(&results);
    for name in &names {
        assert!(!name.starts_with(".tmp"), "leftover {name}");
        if results.join(name).is_dir() {
            assert!(
                names.contains(&format!("{name}.md")),
                "orphan directory {name}"
            );
        }
    }
}
