//! The replay lock end to end, on the real guest: every run is content-addressed,
//! `runner verify` catches a change to any file it covers, and `runner replay`
//! reports MATCH, or DRIFT for exactly the outputs that changed.
//!
//! Needs the CPython guest fetched (`just guests`); a run without it fails loudly.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// reason: a test harness builds fixtures and runs the built binaries on the host.
#![allow(clippy::disallowed_methods)]

use crate::support;

use support::{copy_tree, runner};

use serde_json::Value;
use std::path::{Path, PathBuf};

const REQUEST: &str = "TR-20261121-100000Z-csv-stats.md";

fn example_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/csv-stats")
}

/// A private copy of the csv-stats example (request + inputs, no results).
fn example_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(example_dir().join(REQUEST), dir.path().join(REQUEST)).unwrap();
    std::fs::create_dir(dir.path().join("inputs")).unwrap();
    for f in ["stats.py", "data.csv"] {
        std::fs::copy(
            example_dir().join("inputs").join(f),
            dir.path().join("inputs").join(f),
        )
        .unwrap();
    }
    dir
}

/// Runs `exec --json` and returns the result path.
fn exec(dir: &Path, extra: &[&str]) -> PathBuf {
    let out = runner()
        .arg("exec")
        .arg(dir.join(REQUEST))
        .arg("--json")
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "exec failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    PathBuf::from(report["result_path"].as_str().unwrap())
}

fn verify(result: &Path, extra: &[&str]) -> (i32, Value) {
    let out = runner()
        .arg("verify")
        .arg(result)
        .arg("--json")
        .args(extra)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "verify printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    (out.status.code().unwrap(), v)
}

fn differences(v: &Value) -> Vec<String> {
    v["differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["what"].as_str().unwrap().to_owned())
        .collect()
}

fn artifact_dir(result: &Path) -> PathBuf {
    result.with_extension("")
}

/// Flips one byte of a file.
fn flip_byte(path: &Path, at: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    let i = at.min(bytes.len() - 1);
    bytes[i] ^= 0x01;
    std::fs::write(path, bytes).unwrap();
}

/// The attack: a response body the lock records no exchange for, beside the streams.
fn forged_net_body(set: &Path) {
    std::fs::write(set.join("net-0001.body"), b"a response nobody asked for").unwrap();
}

/// The attack: a file below a directory chain deeper than any lister used to look.
fn file_nested_65_levels_deep(out: &Path) {
    let mut deep = out.to_owned();
    for _ in 0..65 {
        deep.push("d");
    }
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::write(deep.join("hidden.txt"), b"not in the lock").unwrap();
}

/// The attack: `TS-…/` is a symlink to a set kept elsewhere (here, an identical one).
fn result_directory_is_a_symlink(set: &Path) {
    let elsewhere = set.parent().unwrap().parent().unwrap().join("elsewhere");
    std::fs::rename(set, &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, set).unwrap();
}

#[test]
fn a_fresh_result_verifies_and_each_tamper_is_named() {
    let dir = example_copy();
    let key = dir.path().join("k");
    assert!(
        runner()
            .arg("keygen")
            .arg(&key)
            .output()
            .unwrap()
            .status
            .success()
    );
    let result = exec(
        dir.path(),
        &["--sign-key", key.with_extension("key").to_str().unwrap()],
    );
    let public = key.with_extension("pub");
    let (code, v) = verify(&result, &["--public-key", public.to_str().unwrap()]);
    assert_eq!((code, v["verdict"].as_str()), (0, Some("ACCEPT")), "{v}");
    assert!(
        v["checked"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c.as_str().unwrap().starts_with("request")),
        "the request beside the results is found and checked: {v}"
    );

    let results = result.parent().unwrap().to_owned();
    let id = result.file_stem().unwrap().to_string_lossy().into_owned();
    // Each case: what to do to a fresh copy of the results, and what verify must name.
    type Tamper = Box<dyn Fn(&Path, &Path)>;
    let cases: Vec<(&str, Tamper, &str)> = vec![
        (
            "artifact byte",
            Box::new(|r, _| flip_byte(&artifact_dir(r).join("out/summary.json"), 10)),
            "artifact summary.json",
        ),
        (
            "stdout byte",
            Box::new(|r, _| flip_byte(&artifact_dir(r).join("stdout"), 0)),
            "stdout",
        ),
        (
            "stderr appended",
            Box::new(|r, _| std::fs::write(artifact_dir(r).join("stderr"), b"x").unwrap()),
            "stderr",
        ),
        (
            "artifact deleted",
            Box::new(|r, _| {
                std::fs::remove_file(artifact_dir(r).join("out/summary.json")).unwrap()
            }),
            "artifact summary.json",
        ),
        (
            "extra artifact",
            Box::new(|r, _| std::fs::write(artifact_dir(r).join("out/extra.txt"), b"x").unwrap()),
            "artifact extra.txt",
        ),
        (
            "document body byte",
            Box::new(|r, _| flip_byte(r, 900)),
            "result document sha256",
        ),
        (
            "front matter stdout hash",
            Box::new(|r, _| {
                let t = std::fs::read_to_string(r).unwrap();
                let i = t.find("stdout_sha256: \"").unwrap() + 16;
                let mut b = t.into_bytes();
                b[i] = if b[i] == b'0' { b'1' } else { b'0' };
                std::fs::write(r, b).unwrap();
            }),
            "result front matter stdout_sha256",
        ),
        (
            "lock deleted",
            Box::new(|r, _| std::fs::remove_file(r.with_extension("lock.json")).unwrap()),
            "lock",
        ),
        (
            "lock byte",
            Box::new(|r, _| flip_byte(&r.with_extension("lock.json"), 40)),
            "lock",
        ),
        (
            "statement byte",
            Box::new(|r, _| flip_byte(&r.with_extension("intoto.json"), 30)),
            "in-toto statement",
        ),
        (
            "signature byte",
            Box::new(|r, _| flip_byte(&r.with_extension("intoto.dsse.json"), 20)),
            "statement signature",
        ),
        (
            "request byte",
            Box::new(|_, req| flip_byte(req, 300)),
            "request",
        ),
        (
            "forged-net-body-at-the-result-root",
            Box::new(|r, _| forged_net_body(&artifact_dir(r))),
            "artifact directory entry net-0001.body",
        ),
        (
            "file-nested-65-levels-deep-in-out",
            Box::new(|r, _| file_nested_65_levels_deep(&artifact_dir(r).join("out"))),
            "artifact directory out/",
        ),
        (
            "result-directory-is-a-symlink",
            Box::new(|r, _| result_directory_is_a_symlink(&artifact_dir(r))),
            "artifact directory",
        ),
    ];
    for (name, tamper, want) in cases {
        let copy = tempfile::tempdir().unwrap();
        let req = copy.path().join(REQUEST);
        std::fs::copy(dir.path().join(REQUEST), &req).unwrap();
        let res_dir = copy.path().join("results");
        copy_tree(&results, &res_dir);
        let r = res_dir.join(format!("{id}.md"));
        tamper(&r, &req);
        let (code, v) = verify(&r, &["--public-key", public.to_str().unwrap()]);
        assert_eq!(code, 1, "{name}: verify must fail: {v}");
        assert_eq!(v["verdict"], "REJECT", "{name}");
        let named = differences(&v);
        assert!(
            named.iter().any(|w| w.starts_with(want)),
            "{name}: wanted a difference naming `{want}`, got {named:?}"
        );
    }

    // A signature by another key is not a signature by this one.
    let other = dir.path().join("other");
    assert!(
        runner()
            .arg("keygen")
            .arg(&other)
            .output()
            .unwrap()
            .status
            .success()
    );
    let (code, v) = verify(
        &result,
        &[
            "--public-key",
            other.with_extension("pub").to_str().unwrap(),
        ],
    );
    assert_eq!(code, 1, "{v}");
    assert!(differences(&v).iter().any(|w| w == "statement signature"));
}

#[test]
fn crlf_bom_and_nfd_variants_of_the_request_hash_the_same() {
    let dir = example_copy();
    let result = exec(dir.path(), &[]);
    let text = std::fs::read_to_string(dir.path().join(REQUEST)).unwrap();
    // A BOM, CRLF line endings, and an "é" written decomposed in a comment-free place:
    // the purpose gains "café" in NFC for the original and NFD for the variant.
    let nfc = text.replace("per station.", "per station (café).");
    let nfd = text.replace("per station.", "per station (cafe\u{301}).");
    std::fs::write(dir.path().join(REQUEST), &nfc).unwrap();
    let result_nfc = exec(dir.path(), &[]);
    let variant = dir.path().join("variant.md");
    std::fs::write(&variant, format!("\u{feff}{}", nfd.replace('\n', "\r\n"))).unwrap();
    let (code, v) = verify(&result_nfc, &["--request", variant.to_str().unwrap()]);
    assert_eq!(
        code, 0,
        "the CRLF + BOM + NFD variant must hash like the original: {v}"
    );
    // And the original request text differs from the edited one: that is caught.
    std::fs::write(&variant, text).unwrap();
    let (code, _) = verify(&result_nfc, &["--request", variant.to_str().unwrap()]);
    assert_eq!(code, 1);
    let _ = result;
}

fn replay(result: &Path, extra: &[&str]) -> (i32, Value) {
    let out = runner()
        .arg("replay")
        .arg(result)
        .arg("--json")
        .arg("--check")
        .args(extra)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "replay printed no JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap(), v)
}

fn verdicts(v: &Value) -> Vec<(String, String)> {
    v["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["name"].as_str().unwrap().to_owned(),
                o["verdict"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn replay_matches_then_reports_drift_precisely() {
    let dir = example_copy();
    let result = exec(dir.path(), &[]);
    let (code, v) = replay(&result, &[]);
    assert_eq!((code, v["verdict"].as_str()), (0, Some("MATCH")), "{v}");
    let names: Vec<String> = verdicts(&v).into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        vec![
            "stdout",
            "stderr",
            "exit_code",
            "outcome",
            "artifact summary.json"
        ]
    );

    // An edited input: drift on exactly that input, and nothing runs.
    let data = dir.path().join("inputs/data.csv");
    let mut csv = std::fs::read_to_string(&data).unwrap();
    csv.push_str("west,2026-11-01,9.0,0.0\n");
    std::fs::write(&data, csv).unwrap();
    let (code, v) = replay(&result, &[]);
    assert_eq!(code, 5, "{v}");
    assert_eq!(v["verdict"], "DRIFT");
    assert_eq!(
        verdicts(&v),
        vec![("input /in/data.csv".to_owned(), "DRIFT".to_owned())]
    );

    // Another policy than the pinned one: refused, naming the policy.
    let policy = dir.path().join("policy.toml");
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies/default.toml"),
    )
    .unwrap();
    std::fs::write(
        &policy,
        text.replace("excerpt_lines = 200", "excerpt_lines = 100"),
    )
    .unwrap();
    let out = runner()
        .arg("--policy")
        .arg(&policy)
        .arg("replay")
        .arg(&result)
        .arg("--json")
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{v}");
    assert_eq!(v["verdict"], "REFUSED");
    assert!(
        v["refused"][0].as_str().unwrap().starts_with("policy:"),
        "{v}"
    );
}

#[test]
fn replay_reports_drift_on_the_output_that_changes_and_match_on_the_rest() {
    // A script whose stdout is random on every run (under a policy taking the host's
    // entropy: a recorded seed would replay it), and whose artifact is not.
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("host-entropy.toml");
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies/default.toml"),
    )
    .unwrap();
    std::fs::write(
        &policy,
        format!("{text}\n[determinism]\nclock = \"virtual\"\nentropy = \"host\"\n"),
    )
    .unwrap();
    let policy_arg = ["--policy", policy.to_str().unwrap()];
    std::fs::create_dir(dir.path().join("inputs")).unwrap();
    let script = b"import random\nprint(random.random())\nopen('/out/fixed.txt', 'w').write('same every time\\n')\n";
    std::fs::write(dir.path().join("inputs/noisy.py"), script).unwrap();
    let sha = runner_sha256(script);
    let request = std::fs::read_to_string(example_dir().join(REQUEST))
        .unwrap()
        .replace("csv-stats", "noisy")
        .replace("  - path: \"/in/data.csv\"\n    sha256: \"cb57b76eef265b42ce1f31b6ac92750cf272c9ce5353b55bbbfe66ce8aaeb89f\"\n", "")
        .replace("/in/stats.py", "/in/noisy.py")
        .replace("baee897a2a8444f00a97ec5737e416b651af2e195161f4292eced15072999550", &sha)
        .replace("python -u stats.py --in /in/data.csv --out /out/summary.json", "python -u noisy.py")
        .replace("- `/in/data.csv` sha256: cb57b76eef265b42ce1f31b6ac92750cf272c9ce5353b55bbbfe66ce8aaeb89f (readings: station, date, temp_c, rain_mm)\n", "");
    std::fs::write(dir.path().join(REQUEST), request).unwrap();
    let result = exec(dir.path(), &policy_arg);
    let (code, v) = replay(&result, &policy_arg);
    assert_eq!(code, 5, "{v}");
    assert!(
        v["notes"][0].as_str().unwrap().contains("host's entropy"),
        "{v}"
    );
    let got = verdicts(&v);
    let want: Vec<(String, String)> = [
        ("stdout", "DRIFT"),
        ("stderr", "MATCH"),
        ("exit_code", "MATCH"),
        ("outcome", "MATCH"),
        ("artifact fixed.txt", "MATCH"),
    ]
    .iter()
    .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
    .collect();
    assert_eq!(got, want);
}

fn runner_sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The built-in policy with `from` replaced by `to`, written into `dir`.
fn policy_variant(dir: &Path, name: &str, from: &str, to: &str) -> PathBuf {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies/default.toml"),
    )
    .unwrap();
    assert!(text.contains(from), "{from}");
    let path = dir.join(name);
    std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
    path
}

fn replay_under(policy: &Path, result: &Path, extra: &[&str]) -> (i32, Value) {
    let mut args = vec!["--policy", policy.to_str().unwrap()];
    args.extend_from_slice(&["replay"]);
    let out = runner()
        .args(&args)
        .arg(result)
        .args(["--json", "--check"])
        .args(extra)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "replay printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap(), v)
}

fn pins(v: &Value) -> Vec<String> {
    v["changed_pins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pin"].as_str().unwrap().to_owned())
        .collect()
}

/// A policy whose run tables changed (an output cap) and outputs that do not:
/// refused by default; `--across-upgrade` runs it, MATCH_ACROSS_UPGRADE, exit 0, names
/// the policy's old and new hashes, and its lock records the baseline and verifies.
#[test]
fn replay_across_an_upgrade_with_equal_outputs_matches_and_records_its_baseline() {
    let dir = example_copy();
    let result = exec(dir.path(), &[]);
    let baseline: Value =
        serde_json::from_slice(&std::fs::read(result.with_extension("lock.json")).unwrap())
            .unwrap();
    let upgraded = policy_variant(
        dir.path(),
        "upgraded.toml",
        "out_max_files = 4096",
        "out_max_files = 4000",
    );
    let (code, v) = replay_under(&upgraded, &result, &[]);
    assert_eq!((code, v["verdict"].as_str()), (1, Some("REFUSED")), "{v}");
    assert!(
        v["refused"][0].as_str().unwrap().starts_with("policy:"),
        "{v}"
    );

    let new = dir.path().join("new-baseline");
    let (code, v) = replay_under(
        &upgraded,
        &result,
        &["--across-upgrade", "--results", new.to_str().unwrap()],
    );
    assert_eq!(
        (code, v["verdict"].as_str()),
        (0, Some("MATCH_ACROSS_UPGRADE")),
        "{v}"
    );
    assert!(verdicts(&v).iter().all(|(_, verdict)| verdict == "MATCH"));
    assert_eq!(pins(&v), ["policy", "policy_text", "limits"], "{v}");
    let policy_pin = &v["changed_pins"][0];
    assert_eq!(policy_pin["expected"], baseline["policy"]["run_sha256"]);
    assert_ne!(policy_pin["actual"], policy_pin["expected"]);
    assert_eq!(v["changed_pins"][2]["actual"], "out_files=4000");

    // The new lock names its baseline and the changed pins, and `verify` accepts it.
    let new_result = PathBuf::from(v["result_path"].as_str().unwrap());
    let lock: Value =
        serde_json::from_slice(&std::fs::read(new_result.with_extension("lock.json")).unwrap())
            .unwrap();
    assert_eq!(lock["replay_of"]["lock_sha256"], baseline["lock_sha256"]);
    assert_eq!(lock["replay_of"]["result_id"], baseline["result_id"]);
    assert_eq!(lock["replay_of"]["mode"], "across-upgrade");
    assert_eq!(lock["replay_of"]["changed_pins"], v["changed_pins"]);
    assert_eq!(lock["policy"]["run_sha256"], policy_pin["actual"]);
    let (code, report) = verify(
        &new_result,
        &["--request", dir.path().join(REQUEST).to_str().unwrap()],
    );
    assert_eq!(code, 0, "{report}");
    // And the new baseline replays strictly under the upgraded policy.
    let (code, v) = replay_under(
        &upgraded,
        &new_result,
        &["--request", dir.path().join(REQUEST).to_str().unwrap()],
    );
    assert_eq!((code, v["verdict"].as_str()), (0, Some("MATCH")), "{v}");

    // Inputs that changed are drift across an upgrade too, and nothing runs.
    let data = dir.path().join("inputs/data.csv");
    let mut csv = std::fs::read_to_string(&data).unwrap();
    csv.push_str("west,2026-11-01,9.0,0.0\n");
    std::fs::write(&data, csv).unwrap();
    let (code, v) = replay_under(&upgraded, &result, &["--across-upgrade"]);
    assert_eq!((code, v["verdict"].as_str()), (5, Some("DRIFT")), "{v}");
    assert_eq!(
        verdicts(&v),
        vec![("input /in/data.csv".to_owned(), "DRIFT".to_owned())]
    );
    assert!(v["result_path"].is_null());
}

/// A policy change that changes an output (a stdout cap below what the analysis prints):
/// DRIFT, exit 5 with --check, naming the outputs and the changed pins.
#[test]
fn replay_across_an_upgrade_that_changes_an_output_is_drift() {
    let dir = example_copy();
    let result = exec(dir.path(), &[]);
    let tight = policy_variant(
        dir.path(),
        "tight.toml",
        "stdout_max_bytes = 16777216",
        "stdout_max_bytes = 16",
    );
    let (code, v) = replay_under(&tight, &result, &["--across-upgrade"]);
    assert_eq!((code, v["verdict"].as_str()), (5, Some("DRIFT")), "{v}");
    let drifted: Vec<String> = verdicts(&v)
        .into_iter()
        .filter(|(_, verdict)| verdict == "DRIFT")
        .map(|(name, _)| name)
        .collect();
    assert!(drifted.contains(&"stdout".to_owned()), "{v}");
    assert!(drifted.contains(&"outcome".to_owned()), "{v}");
    assert_eq!(pins(&v), ["policy", "policy_text", "limits"], "{v}");
}

/// What cannot change a run's outputs does not refuse a strict replay: another
/// `[approval]` table changes the policy text's hash, not its run tables' hash. The
/// report still shows the text's old and new hash; the verdict stays MATCH.
#[test]
fn an_approval_table_change_does_not_refuse_a_strict_replay() {
    let dir = example_copy();
    let result = exec(dir.path(), &[]);
    let policy = policy_variant(
        dir.path(),
        "approval.toml",
        "separation_of_duties = true",
        "separation_of_duties = true\n# reviewed 2026-11-25",
    );
    let (code, v) = replay_under(&policy, &result, &[]);
    assert_eq!((code, v["verdict"].as_str()), (0, Some("MATCH")), "{v}");
    assert_eq!(pins(&v), ["policy_text"], "{v}");
}
