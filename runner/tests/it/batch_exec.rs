//! `runner exec` in batch mode, end to end: several requests (a directory of them) in
//! one process. Each request must get its own verdict and its own result, a rejected or
//! refused one must not stop the others, the exit code is the highest of the runs', and
//! `--jobs N` bounds how many workers run at once.
//!
//! Needs the CPython guest fetched (`just guests`) and the Monty worker built
//! (`just build`).

#![allow(clippy::unwrap_used, clippy::expect_used)]
// reason: a test harness builds fixtures and runs the built binaries on the host.
#![allow(clippy::disallowed_methods)]

use crate::support;

use support::{monty_worker, sha256_hex as sha256};

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// An approved request; `inputs` is the front matter list and `body` the sections
/// before Output Expectations.
fn request(id: &str, backend: &str, inputs: &str, body: &str) -> String {
    support::approved_request("batch", id, backend, 256, inputs, body)
}

fn era(id: &str, command: &str) -> String {
    request(
        id,
        "ERA",
        "",
        &format!("## Command\n`{command}`\n\n## Input Files\nNone.\n"),
    )
}

/// A directory of requests (with `inputs/` beside them), named so that their order is
/// the order of the list.
fn batch_dir(requests: &[(&str, String)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("inputs")).unwrap();
    for (name, text) in requests {
        std::fs::write(dir.path().join(format!("{name}.md")), text).unwrap();
    }
    dir
}

fn exec(args: &[&std::ffi::OsStr], envs: &[(&str, &Path)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_runner"));
    cmd.arg("exec")
        .args(args)
        .env("RUNNER_MONTY_WORKER", monty_worker());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.output().expect("the runner binary runs")
}

fn json_array(out: &Output) -> Vec<Value> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let value: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "no JSON array on stdout ({e}): {stdout:?}; stderr {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    value.as_array().expect("a JSON array").clone()
}

fn reason_codes(entry: &Value) -> Vec<String> {
    entry["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["code"].as_str().unwrap().to_owned())
        .collect()
}

/// The captured stdout of the run whose result document is `result_path`.
fn result_stdout(result_path: &str) -> String {
    let dir = result_path.strip_suffix(".md").expect("a .md result");
    std::fs::read_to_string(Path::new(dir).join("stdout")).unwrap()
}

#[test]
fn mixed_batch_gives_each_request_its_own_verdict_and_result() {
    let declared = sha256(b"what the approval covered\n");
    let dir = batch_dir(&[
        (
            "TR-a-era-alpha",
            era("TR-a-era-alpha", "python -c \"print('alpha')\""),
        ),
        (
            "TR-b-era-exit3",
            era("TR-b-era-exit3", "python -c \"raise SystemExit(3)\""),
        ),
        (
            "TR-c-monty-gamma",
            request(
                "TR-c-monty-gamma",
                "monty",
                "",
                "## Code\n```python\nprint('gamma')\n```\n",
            ),
        ),
        (
            "TR-d-rejected-chaining",
            era("TR-d-rejected-chaining", "python -c \"print(1)\"; rm -rf /"),
        ),
        (
            "TR-e-input-tampered",
            request(
                "TR-e-input-tampered",
                "ERA",
                &format!("inputs:\n  - path: /in/data.txt\n    sha256: \"{declared}\"\n"),
                &format!(
                    "## Command\n`python /in/data.txt`\n\n## Input Files\n- /in/data.txt sha256: {declared}\n"
                ),
            ),
        ),
        (
            "TR-f-era-alpha-again",
            era("TR-f-era-alpha-again", "python -c \"print('alpha')\""),
        ),
    ]);
    // The input on disk is not the one approved.
    std::fs::write(dir.path().join("inputs/data.txt"), "print('swapped')\n").unwrap();
    let results = dir.path().join("results");
    let out = exec(
        &[
            dir.path().as_os_str(),
            "--jobs".as_ref(),
            "3".as_ref(),
            "--json".as_ref(),
            "--results".as_ref(),
            results.as_os_str(),
        ],
        &[],
    );
    let entries = json_array(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let names: Vec<String> = entries
        .iter()
        .map(|e| {
            Path::new(e["request"].as_str().unwrap())
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(
        names,
        [
            "TR-a-era-alpha.md",
            "TR-b-era-exit3.md",
            "TR-c-monty-gamma.md",
            "TR-d-rejected-chaining.md",
            "TR-e-input-tampered.md",
            "TR-f-era-alpha-again.md"
        ],
        "one entry per request, in name order; stderr: {stderr}"
    );

    let ran = |i: usize, exit: i64, stdout: &str| {
        let e = &entries[i];
        assert_eq!(e["verdict"], "ACCEPT", "{e}");
        assert_eq!(e["outcome"], "completed", "{e}");
        assert_eq!(e["exit_code"], exit, "{e}");
        let path = e["result_path"].as_str().unwrap();
        assert!(Path::new(path).is_file(), "{path}");
        assert_eq!(result_stdout(path), stdout, "{e}");
        path.to_owned()
    };
    let a = ran(0, 0, "alpha\n");
    let b = ran(1, 3, "");
    let c = ran(2, 0, "gamma\n");
    let f = ran(5, 0, "alpha\n");
    let distinct: BTreeSet<&String> = [&a, &b, &c, &f].into_iter().collect();
    assert_eq!(
        distinct.len(),
        4,
        "every run has its own result: {a} {b} {c} {f}"
    );

    let d = &entries[3];
    assert_eq!(d["verdict"], "REJECT");
    assert!(d["result_path"].is_null());
    assert!(
        reason_codes(d).contains(&"command.chaining".to_owned()),
        "{d}"
    );
    let e = &entries[4];
    assert_eq!(e["verdict"], "REJECT");
    assert!(e["result_path"].is_null());
    assert_eq!(reason_codes(e), ["stage.input_hash_mismatch"], "{e}");

    // No result for either refused request; one document per run that happened.
    let documents: Vec<String> = std::fs::read_dir(&results)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .collect();
    assert_eq!(documents.len(), 4, "{documents:?}");
    assert!(
        !documents
            .iter()
            .any(|n| n.contains("TR-d-") || n.contains("TR-e-")),
        "{documents:?}"
    );
    // The worst exit code of the runs: 4 (an input whose hash differs) beats 1 (REJECT).
    assert_eq!(out.status.code(), Some(4), "stderr: {stderr}");
    assert!(
        stderr.contains("batch: 6 requests, 4 ran") && stderr.contains("2 not run"),
        "{stderr}"
    );
}

#[test]
fn batch_text_mode_prints_the_result_paths_in_order() {
    let dir = batch_dir(&[]);
    let one = dir.path().join("TR-one.md");
    let two = dir.path().join("TR-two.md");
    std::fs::write(&one, era("TR-one", "python -c \"print('one')\"")).unwrap();
    std::fs::write(&two, era("TR-two", "python -c \"print('two')\"")).unwrap();
    let results = dir.path().join("results");
    // Two files named in reverse order: the output follows the command line.
    let out = exec(
        &[
            two.as_os_str(),
            one.as_os_str(),
            "--results".as_ref(),
            results.as_os_str(),
        ],
        &[],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let paths: Vec<&str> = stdout.lines().collect();
    assert_eq!(paths.len(), 2, "{stdout}");
    assert!(paths[0].contains("TR-two"), "{stdout}");
    assert!(paths[1].contains("TR-one"), "{stdout}");
    assert_eq!(result_stdout(paths[0]), "two\n");
    assert_eq!(result_stdout(paths[1]), "one\n");
}

#[test]
fn an_empty_directory_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = exec(&[dir.path().as_os_str()], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("holds no request"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A worker wrapper that records how many workers are running a request when each
/// receives its own, then runs the real worker on it. A batch keeps workers started
/// ahead (warm) that wait for a request and hold nothing: the wrapper counts a worker
/// once its request has arrived, and one that is ended idle (stdin closed before any
/// byte) is not counted. The runner clears the worker's environment, so the paths are
/// written into the script.
fn spy_worker(dir: &Path) -> PathBuf {
    let script = dir.join("spy-worker.sh");
    let lock = dir.join("spy.lock");
    let active = dir.join("spy.active");
    let seen = dir.join("spy.seen");
    let worker = Path::new(env!("CARGO_BIN_EXE_runner")).with_file_name("runner-era-worker");
    std::fs::write(
        &script,
        format!(
            "#!/bin/bash\n\
             req=$(/usr/bin/mktemp)\n\
             /bin/cat > \"$req\"\n\
             [ -s \"$req\" ] || {{ /bin/rm -f \"$req\"; exit 0; }}\n\
             exec 9>>'{lock}'\n\
             /usr/bin/flock 9\n\
             n=$(( $(cat '{active}' 2>/dev/null || echo 0) + 1 ))\n\
             echo $n > '{active}'\n\
             echo $n >> '{seen}'\n\
             /usr/bin/flock -u 9\n\
             /bin/sleep 0.5\n\
             '{worker}' \"$@\" < \"$req\"\n\
             rc=$?\n\
             /bin/rm -f \"$req\"\n\
             /usr/bin/flock 9\n\
             echo $(( $(cat '{active}') - 1 )) > '{active}'\n\
             /usr/bin/flock -u 9\n\
             exit $rc\n",
            lock = lock.display(),
            active = active.display(),
            seen = seen.display(),
            worker = worker.display(),
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    script
}

fn most_workers_at_once(jobs: &str) -> usize {
    let requests: Vec<(String, String)> = (0..4)
        .map(|i| {
            let id = format!("TR-jobs-{i}");
            let text = era(&id, &format!("python -c \"print({i})\""));
            (id, text)
        })
        .collect();
    let refs: Vec<(&str, String)> = requests
        .iter()
        .map(|(id, text)| (id.as_str(), text.clone()))
        .collect();
    let dir = batch_dir(&refs);
    let spy = spy_worker(dir.path());
    let results = dir.path().join("results");
    let out = exec(
        &[
            dir.path().as_os_str(),
            "--jobs".as_ref(),
            jobs.as_ref(),
            "--json".as_ref(),
            "--results".as_ref(),
            results.as_os_str(),
        ],
        &[("RUNNER_WORKER_EXE", &spy)],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let entries = json_array(&out);
    assert_eq!(entries.len(), 4);
    for (i, e) in entries.iter().enumerate() {
        assert_eq!(
            result_stdout(e["result_path"].as_str().unwrap()),
            format!("{i}\n")
        );
    }
    let seen = std::fs::read_to_string(dir.path().join("spy.seen")).unwrap();
    let counts: Vec<usize> = seen.lines().map(|l| l.trim().parse().unwrap()).collect();
    assert_eq!(counts.len(), 4, "one worker per request: {seen:?}");
    counts.into_iter().max().unwrap()
}

#[test]
fn jobs_bounds_the_workers_alive_at_once() {
    // --jobs 1: strictly one after the other, whatever the timing.
    assert_eq!(most_workers_at_once("1"), 1);
    // --jobs 2: never more than two; each worker lingers 0.5 s before it starts the
    // guest, so two do overlap.
    assert_eq!(most_workers_at_once("2"), 2);
}

#[test]
fn jobs_zero_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = exec(
        &[dir.path().as_os_str(), "--jobs".as_ref(), "0".as_ref()],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
}
