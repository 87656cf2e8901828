//! Every worked example in `examples/` still works: each `TR-*.md` is accepted by the
//! built binary, and an ERA request's declared inputs are exactly the files in the
//! `inputs/` folder beside it, with the sha256 the request declares.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use runner::backend::BackendKind;
use runner::digest::sha256_hex;
use runner::policy::Policy;
use runner::request;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// Files under `dir` (recursively) for which `keep` holds, sorted.
fn walk(dir: &Path, keep: &dyn Fn(&Path) -> bool) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        let entries =
            std::fs::read_dir(&d).unwrap_or_else(|e| panic!("cannot read {}: {e}", d.display()));
        for entry in entries {
            let path = entry.expect("a readable directory entry").path();
            let kind = std::fs::symlink_metadata(&path)
                .expect("metadata")
                .file_type();
            if kind.is_dir() {
                pending.push(path);
            } else if keep(&path) {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

fn tool_requests() -> Vec<PathBuf> {
    let is_request = |p: &Path| {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        name.starts_with("TR-") && name.ends_with(".md")
    };
    let requests = walk(&examples_dir(), &is_request);
    assert!(
        !requests.is_empty(),
        "no TR-*.md under {}",
        examples_dir().display()
    );
    requests
}

#[test]
fn every_example_request_is_accepted_by_the_binary() {
    let requests = tool_requests();
    let out = Command::new(env!("CARGO_BIN_EXE_runner"))
        .arg("validate")
        .arg("--json")
        .args(&requests)
        .output()
        .expect("the runner binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let rejected: Vec<&str> = stdout
        .lines()
        .filter(|l| !l.contains(r#""verdict":"ACCEPT""#))
        .collect();
    assert!(
        rejected.is_empty(),
        "rejected examples:\n{}",
        rejected.join("\n")
    );
    assert_eq!(
        stdout.lines().count(),
        requests.len(),
        "one verdict per example:\n{stdout}"
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn example_inputs_match_their_declared_hashes() {
    let policy = Policy::builtin();
    let mut problems = Vec::new();
    let mut checked = 0;
    for path in tool_requests() {
        let name = path
            .strip_prefix(examples_dir())
            .unwrap_or(&path)
            .display()
            .to_string();
        let bytes = std::fs::read(&path).expect("a readable example");
        let approved = match request::validate(&bytes, &policy) {
            Ok(a) => a,
            Err(reasons) => {
                problems.push(format!("{name}: rejected: {reasons:?}"));
                continue;
            }
        };
        if approved.backend() != BackendKind::Era || approved.inputs().is_empty() {
            continue;
        }
        let inputs_dir = path
            .parent()
            .expect("a request inside a folder")
            .join("inputs");
        // relative path under inputs/ → sha256 of the file there
        let on_disk: BTreeMap<String, String> = walk(&inputs_dir, &|_| true)
            .into_iter()
            .map(|p| {
                let rel = p
                    .strip_prefix(&inputs_dir)
                    .expect("under inputs/")
                    .to_str()
                    .expect("a UTF-8 path")
                    .to_owned();
                (
                    rel,
                    sha256_hex(&std::fs::read(&p).expect("a readable input")),
                )
            })
            .collect();
        for input in approved.inputs() {
            checked += 1;
            match on_disk.get(input.relative()) {
                None => problems.push(format!(
                    "{name}: declares {} but inputs/{} does not exist",
                    input.path,
                    input.relative()
                )),
                Some(actual) if *actual != input.sha256 => problems.push(format!(
                    "{name}: {} declares sha256 {}, inputs/{} has {actual}",
                    input.path,
                    input.sha256,
                    input.relative()
                )),
                Some(_) => {}
            }
        }
        for rel in on_disk.keys() {
            if !approved.inputs().iter().any(|i| i.relative() == rel) {
                problems.push(format!(
                    "{name}: inputs/{rel} is not declared in the request"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(
        checked > 0,
        "no example declares inputs; the hash check checked nothing"
    );
}

/// The CI example, end to end on a private copy: a fresh baseline reproduces (exit 0),
/// an edited input is drift (exit 5), an edited baseline is refused (exit 1).
#[test]
fn ci_replay_example_reproduces_and_fails_on_drift() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let work = tempfile::tempdir().unwrap();
    let copy = |from: &str| {
        let status = std::process::Command::new("cp")
            .arg("-r")
            .arg(repo.join(from))
            .arg(work.path().join("examples"))
            .status()
            .unwrap();
        assert!(status.success());
    };
    std::fs::create_dir(work.path().join("examples")).unwrap();
    copy("examples/csv-stats");
    copy("examples/ci-replay");
    let ex = work.path().join("examples");
    let _ = std::fs::remove_dir_all(ex.join("csv-stats/results"));
    let _ = std::fs::remove_dir_all(ex.join("ci-replay/baseline"));
    let runner = env!("CARGO_BIN_EXE_runner");
    let made = std::process::Command::new(runner)
        .arg("exec")
        .arg(ex.join("csv-stats/TR-20261121-100000Z-csv-stats.md"))
        .arg("--results")
        .arg(ex.join("ci-replay/baseline"))
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let reproduce = || {
        std::process::Command::new("bash")
            .arg(ex.join("ci-replay/reproduce.sh"))
            .env("RUNNER", runner)
            .output()
            .unwrap()
    };
    let out = reproduce();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("MATCH"));
    let data = ex.join("csv-stats/inputs/data.csv");
    let original = std::fs::read(&data).unwrap();
    std::fs::write(
        &data,
        [original.as_slice(), b"west,2026-11-01,9.0,0.0\n"].concat(),
    )
    .unwrap();
    assert_eq!(
        reproduce().status.code(),
        Some(5),
        "an edited input is drift"
    );
    std::fs::write(&data, &original).unwrap();
    let baseline = std::fs::read_dir(ex.join("ci-replay/baseline"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "md"))
        .unwrap();
    let mut text = std::fs::read_to_string(&baseline).unwrap();
    text = text.replacen("mean", "MEAN", 1);
    std::fs::write(&baseline, text).unwrap();
    assert_eq!(
        reproduce().status.code(),
        Some(1),
        "an edited baseline is refused by verify"
    );
}

/// The committed baseline is intact.
#[test]
fn committed_ci_baseline_verifies() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = repo.join("examples/ci-replay/baseline");
    let baseline = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e} (run `just refresh-baseline`)", dir.display()))
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "md"))
        .expect("a TS-….md in examples/ci-replay/baseline");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_runner"))
        .arg("verify")
        .arg(&baseline)
        .arg("--request")
        .arg(repo.join("examples/csv-stats/TR-20261121-100000Z-csv-stats.md"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// The CI example exactly as a user runs it, against the committed baseline (in a
/// scratch copy): it must reproduce. A baseline made before a change of the built-in
/// policy, the guest or the runner is refused by replay; this catches it here, naming
/// the command that refreshes it (issue 22: the example was refused for weeks).
#[test]
fn committed_ci_baseline_reproduces_as_written() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir(work.path().join("examples")).unwrap();
    for from in ["examples/csv-stats", "examples/ci-replay"] {
        let status = std::process::Command::new("cp")
            .arg("-r")
            .arg(repo.join(from))
            .arg(work.path().join("examples"))
            .status()
            .unwrap();
        assert!(status.success());
    }
    let out = std::process::Command::new("bash")
        .arg(work.path().join("examples/ci-replay/reproduce.sh"))
        .env("RUNNER", env!("CARGO_BIN_EXE_runner"))
        .output()
        .unwrap();
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "examples/ci-replay does not reproduce as committed; after a deliberate change of \
         policy, guest or runner, re-make it with `just refresh-baseline`:\n{printed}"
    );
    assert!(printed.contains("MATCH"), "{printed}");
    assert!(!printed.contains("DRIFT"), "{printed}");
}
