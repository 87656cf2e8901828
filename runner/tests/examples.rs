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
