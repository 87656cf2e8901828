//! `runner exec --reuse`: a request whose verified result of the same run (same request
//! sha256, inputs, policy, engine, guest, runner version) is already in the results
//! directory is not run again and is reported `reused`; anything that changes the run
//! (an input, the policy) runs it, and a stored result that does not verify (tampered
//! stdout, a partial set) is passed over with the reason in the log, and the request
//! runs again. A CI-style rerun of a whole batch runs nothing.
//!
//! Needs the Monty worker built and the CPython guest fetched (`just test` does both).

#![allow(clippy::unwrap_used, clippy::expect_used)]
// reason: a test harness builds fixtures and runs the built binaries on the host.
#![allow(clippy::disallowed_methods)]

use crate::support;

use serde_json::Value;
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use support::{monty_worker, runner_exe, sha256_hex as sha256};

/// An approved request; `inputs` is the front matter list and `body` the sections
/// before Output Expectations.
fn request(id: &str, backend: &str, inputs: &str, body: &str) -> String {
    support::approved_request("reuse", id, backend, 256, inputs, body)
}

fn monty(id: &str, code: &str) -> String {
    request(
        id,
        "monty",
        "",
        &format!("## Code\n```python\n{code}\n```\n\n## Inputs (JSON)\n```json\n{{}}\n```\n"),
    )
}

/// An ERA request reading `/in/data.txt`, whose declared hash is that of `data`.
fn era_with_input(id: &str, data: &[u8]) -> String {
    let sha = sha256(data);
    request(
        id,
        "ERA",
        &format!("inputs:\n  - path: /in/data.txt\n    sha256: \"{sha}\"\n"),
        &format!(
            "## Command\n`python -c \"print(open('/in/data.txt').read().upper())\"`\n\n\
             ## Input Files\n- `/in/data.txt` sha256: {sha} (the text to shout)\n"
        ),
    )
}

/// A batch directory: `requests/` with `inputs/` beside the requests, `results/` beside.
struct Batch {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    requests: PathBuf,
    results: PathBuf,
}

impl Batch {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let requests = root.join("requests");
        std::fs::create_dir_all(requests.join("inputs")).unwrap();
        Self {
            results: root.join("results"),
            requests,
            root,
            _tmp: tmp,
        }
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.requests.join(format!("{name}.md"));
        std::fs::write(&path, text).unwrap();
        path
    }

    fn input(&self, data: &[u8]) {
        std::fs::write(self.requests.join("inputs/data.txt"), data).unwrap();
    }

    /// Four monty requests and one ERA request with an input.
    fn populated() -> Self {
        let b = Self::new();
        for i in 0..4 {
            let id = format!("TR-20261121-120000Z-reuse-{i}");
            b.write(&id, &monty(&id, &format!("print('run {i}')")));
        }
        b.input(b"hello\n");
        let id = "TR-20261121-120000Z-reuse-era";
        b.write(id, &era_with_input(id, b"hello\n"));
        b
    }

    /// `runner [global] exec ARGS --results RESULTS --json`.
    fn exec(&self, global: &[&OsStr], args: &[&OsStr]) -> Output {
        Command::new(runner_exe())
            .args(global)
            .arg("exec")
            .args(args)
            .arg("--results")
            .arg(&self.results)
            .arg("--json")
            .env("RUNNER_MONTY_WORKER", monty_worker())
            .output()
            .unwrap()
    }

    /// The batch with `extra` flags: its `--json` array by request file name.
    fn batch(&self, global: &[&OsStr], extra: &[&str]) -> (Output, BTreeMap<String, Value>) {
        let mut args: Vec<&OsStr> = vec![self.requests.as_os_str()];
        args.extend(extra.iter().map(OsStr::new));
        let out = self.exec(global, &args);
        let entries: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{e}: {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        let by = entries
            .into_iter()
            .map(|e| {
                let name = Path::new(e["request"].as_str().unwrap())
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                (name, e)
            })
            .collect();
        (out, by)
    }

    /// The result documents in the results directory.
    fn documents(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.results)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("TS-") && n.ends_with(".md"))
            .collect();
        v.sort();
        v
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Every entry ran (`reused` false) and completed, or was reused; returns the reused count.
fn count_reused(by: &BTreeMap<String, Value>) -> usize {
    by.values()
        .filter(|e| {
            assert_eq!(e["verdict"], "ACCEPT", "{e}");
            assert_eq!(e["outcome"], "completed", "{e}");
            e["reused"].as_bool().unwrap()
        })
        .count()
}

fn verify(result: &str) {
    let out = Command::new(runner_exe())
        .arg("verify")
        .arg(result)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{result}: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn a_rerun_of_a_batch_reuses_every_result_and_runs_nothing() {
    let b = Batch::populated();
    let (first, ran) = b.batch(&[], &["--reuse"]);
    assert!(first.status.success(), "{}", stderr(&first));
    assert_eq!(ran.len(), 5);
    assert_eq!(count_reused(&ran), 0, "nothing to reuse yet: {ran:?}");
    let documents = b.documents();
    assert_eq!(documents.len(), 5);

    // The CI rerun: every request reused, pointing at the first run's verified result,
    // and not one new result written.
    let (second, again) = b.batch(&[], &["--reuse"]);
    assert!(second.status.success(), "{}", stderr(&second));
    assert_eq!(count_reused(&again), 5, "{again:?}");
    for (name, entry) in &again {
        assert_eq!(entry["result_path"], ran[name]["result_path"], "{name}");
        assert_eq!(entry["exit_code"], 0);
        assert!(entry["runtime_sec"].is_null(), "nothing ran: {entry}");
        verify(entry["result_path"].as_str().unwrap());
    }
    assert_eq!(b.documents(), documents, "a reused request wrote a result");
    assert!(
        stderr(&second).contains("0 ran (-), 5 reused, 0 not run"),
        "{}",
        stderr(&second)
    );

    // Sharded reruns (a CI matrix): each shard reuses its part; the union is the batch.
    let mut union = Vec::new();
    for shard in ["0/2", "1/2"] {
        let (out, part) = b.batch(&[], &["--reuse", "--shard", shard]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(count_reused(&part), part.len(), "{shard}: {part:?}");
        union.extend(part.into_keys());
    }
    union.sort();
    assert_eq!(union, ran.keys().cloned().collect::<Vec<_>>());
    assert_eq!(b.documents(), documents);

    // Without --reuse, every request runs again (the flag is what skips them).
    let (third, fresh) = b.batch(&[], &[]);
    assert!(third.status.success(), "{}", stderr(&third));
    assert_eq!(count_reused(&fresh), 0);
    assert_eq!(b.documents().len(), 10);
}

#[test]
fn a_single_request_is_reused_in_text_and_json() {
    let b = Batch::new();
    let id = "TR-20261121-120000Z-reuse-single";
    let path = b.write(id, &monty(id, "print('once')"));
    let first = b.exec(&[], &[path.as_os_str(), OsStr::new("--reuse")]);
    let first: Value = serde_json::from_slice(&first.stdout).unwrap();
    assert_eq!(first["reused"], false, "{first}");
    let second = b.exec(&[], &[path.as_os_str(), OsStr::new("--reuse")]);
    let second: Value = serde_json::from_slice(&second.stdout).unwrap();
    assert_eq!(second["reused"], true, "{second}");
    assert_eq!(second["result_path"], first["result_path"]);
    assert_eq!(second["outcome"], "completed");
    // Text: the path on stdout, `reused` on stderr.
    let text = Command::new(runner_exe())
        .arg("exec")
        .arg(&path)
        .arg("--reuse")
        .arg("--results")
        .arg(&b.results)
        .env("RUNNER_MONTY_WORKER", monty_worker())
        .output()
        .unwrap();
    assert!(text.status.success());
    assert_eq!(
        String::from_utf8_lossy(&text.stdout).trim(),
        first["result_path"].as_str().unwrap()
    );
    assert!(stderr(&text).contains("reused"), "{}", stderr(&text));
    assert_eq!(b.documents().len(), 1);
}

#[test]
fn a_changed_input_or_policy_runs_again() {
    let b = Batch::populated();
    let (first, _) = b.batch(&[], &["--reuse"]);
    assert!(first.status.success(), "{}", stderr(&first));
    let era = "TR-20261121-120000Z-reuse-era.md";

    // New data, and the request declaring its hash: that request runs, the rest is reused.
    b.input(b"changed\n");
    b.write(
        "TR-20261121-120000Z-reuse-era",
        &era_with_input("TR-20261121-120000Z-reuse-era", b"changed\n"),
    );
    let (out, by) = b.batch(&[], &["--reuse"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(count_reused(&by), 4, "{by:?}");
    assert_eq!(by[era]["reused"], false);
    let stdout = Path::new(by[era]["result_path"].as_str().unwrap()).with_extension("");
    assert_eq!(
        std::fs::read_to_string(stdout.join("stdout")).unwrap(),
        "CHANGED\n\n"
    );

    // The input changed under an unchanged request: not reused; it runs, and is refused
    // exactly as without --reuse (exit 4, nothing written).
    b.input(b"tampered\n");
    let before = b.documents().len();
    let (out, by) = b.batch(&[], &["--reuse"]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert_eq!(by[era]["verdict"], "REJECT", "{:?}", by[era]);
    assert_eq!(by[era]["reused"], false);
    assert!(stderr(&out).contains("not reused"), "{}", stderr(&out));
    assert_eq!(b.documents().len(), before);
    b.input(b"changed\n");

    // Another policy (the built-in text with one more comment: another sha256): every
    // request runs again under it; a rerun under it reuses them all.
    let policy = b.root.join("policy.toml");
    let shown = Command::new(runner_exe())
        .args(["policy", "show"])
        .output()
        .unwrap();
    let text = String::from_utf8(shown.stdout).unwrap();
    let text: String = text
        .lines()
        .filter(|l| !l.starts_with("# policy: "))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&policy, format!("{text}# A reviewed change.\n")).unwrap();
    let global = [OsStr::new("--policy"), policy.as_os_str()];
    let (out, by) = b.batch(&global, &["--reuse"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(count_reused(&by), 0, "{by:?}");
    let (out, by) = b.batch(&global, &["--reuse"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(count_reused(&by), 5, "{by:?}");
}

#[test]
fn a_tampered_or_partial_result_is_not_reused_and_the_log_says_why() {
    let b = Batch::populated();
    let (first, ran) = b.batch(&[], &["--reuse"]);
    assert!(first.status.success(), "{}", stderr(&first));
    // Tampered stdout of one stored result.
    let tampered = "TR-20261121-120000Z-reuse-0.md";
    let doc = PathBuf::from(ran[tampered]["result_path"].as_str().unwrap());
    let stdout = doc.with_extension("").join("stdout");
    std::fs::write(&stdout, "run 0, or so they say\n").unwrap();
    // A partial set: the document of another is gone, its lock left.
    let partial = "TR-20261121-120000Z-reuse-1.md";
    let partial_doc = PathBuf::from(ran[partial]["result_path"].as_str().unwrap());
    std::fs::remove_file(&partial_doc).unwrap();

    let (out, by) = b.batch(&[], &["--reuse"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(count_reused(&by), 3, "{by:?}");
    for name in [tampered, partial] {
        assert_eq!(by[name]["reused"], false, "{name}");
        assert_ne!(by[name]["result_path"], ran[name]["result_path"]);
        verify(by[name]["result_path"].as_str().unwrap());
    }
    let log = stderr(&out);
    assert!(
        log.contains(&format!(
            "{}: same run, but it does not verify",
            doc.display()
        )) && log.contains("stdout")
            && log.contains("it runs again"),
        "{log}"
    );
    assert!(
        log.contains(&format!(
            "{}: same run, but it does not verify",
            partial_doc.display()
        )),
        "{log}"
    );
    // The fresh runs are verified results now: the next rerun reuses everything.
    let (out, by) = b.batch(&[], &["--reuse"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(count_reused(&by), 5, "{by:?}");
    for name in [tampered, partial] {
        assert_ne!(by[name]["result_path"], ran[name]["result_path"], "{name}");
    }
}

/// Three attacks on stored results, each of which `runner verify` (and so reuse) used to
/// accept: a forged `net-0001.body` at the `TS-…/` root, a file 65 levels deep in `out/`,
/// and a `TS-…/` that is a symlink. None of them is reused; each runs again.
#[test]
fn a_stored_result_with_an_unlisted_entry_or_a_link_is_not_reused() {
    let b = Batch::populated();
    let (first, ran) = b.batch(&[], &["--reuse"]);
    assert!(first.status.success(), "{}", stderr(&first));
    let set =
        |name: &str| PathBuf::from(ran[name]["result_path"].as_str().unwrap()).with_extension("");
    let forged_net_body = "TR-20261121-120000Z-reuse-0.md";
    std::fs::write(set(forged_net_body).join("net-0001.body"), b"forged").unwrap();
    let nested_65_levels_deep = "TR-20261121-120000Z-reuse-1.md";
    let mut deep = set(nested_65_levels_deep).join("out");
    for _ in 0..65 {
        deep.push("d");
    }
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::write(deep.join("hidden.txt"), b"not in the lock").unwrap();
    let symlinked_set = "TR-20261121-120000Z-reuse-2.md";
    let elsewhere = b.root.join("elsewhere");
    std::fs::rename(set(symlinked_set), &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, set(symlinked_set)).unwrap();

    let (out, by) = b.batch(&[], &["--reuse"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(count_reused(&by), 2, "{by:?}");
    let log = stderr(&out);
    for (name, why) in [
        (forged_net_body, "artifact directory entry net-0001.body"),
        (nested_65_levels_deep, "nests deeper than 32 levels"),
        (symlinked_set, "a symlink; a result's files are never links"),
    ] {
        assert_eq!(by[name]["reused"], false, "{name}");
        assert_ne!(by[name]["result_path"], ran[name]["result_path"], "{name}");
        let doc = PathBuf::from(ran[name]["result_path"].as_str().unwrap());
        let line = log
            .lines()
            .find(|l| {
                l.contains(&format!(
                    "{}: same run, but it does not verify",
                    doc.display()
                ))
            })
            .unwrap_or_else(|| panic!("{name}: no reason in the log: {log}"));
        assert!(line.contains(why), "{name}: wanted `{why}` in {line}");
        verify(by[name]["result_path"].as_str().unwrap());
    }
}
