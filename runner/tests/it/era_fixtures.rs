//! Limits and escapes, end to end on the real CPython guest: each directory under
//! `tests/era/` holds a `script.py` (the attack or the workload) and an `expect.json`
//! (limits to ask for, the outcome that must fire, what stdout, Safety Notes and /out
//! must and must not contain). The harness writes an approved request around the
//! script with correct hashes, runs `runner exec` under a test policy with small output
//! caps, and checks the result, then `runner verify`s it and `runner validate`s it
//! (ACCEPT unless `expect.json` says `"validate": "REJECT"`). Every result is also
//! rendered with a real CommonMark renderer (pulldown-cmark): whatever the guest chose,
//! the rendered result holds no image, link or raw HTML, no text from outside a code
//! span or block naming the fixtures' beacon host, and no entity- or emphasis-built
//! "ignore all previous instructions".
//!
//! Needs the guest fetched (`just guests`); without it every case fails loudly. A fixture
//! that also has an `expect-3.15.json` runs on the scientific CPython 3.15 guest too, in
//! `just test-sci` (`era_fixtures_behave_on_the_3_15_guest`).

#![allow(clippy::unwrap_used, clippy::expect_used)]
// reason: a test harness builds fixtures and runs the built binaries on the host.
#![allow(clippy::disallowed_methods)]

use crate::support;

use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use support::{declared_inputs, repo, sha256_hex};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Expect {
    memory_limit_mb: Option<u64>,
    time_limit_sec: Option<u64>,
    cpu_limit: Option<String>,
    #[serde(default)]
    extra_inputs: BTreeMap<String, String>,
    #[serde(default)]
    replace_with_symlink: BTreeMap<String, String>,
    #[serde(default)]
    tamper_after_hashing: BTreeMap<String, String>,
    /// The staging refusal code when nothing may run.
    refused: Option<String>,
    outcome: Option<String>,
    exit_code: Option<i32>,
    #[serde(default)]
    stdout_has: Vec<String>,
    #[serde(default)]
    stdout_lacks: Vec<String>,
    #[serde(default)]
    safety_has: Vec<String>,
    #[serde(default)]
    safety_lacks: Vec<String>,
    #[serde(default)]
    document_lacks: Vec<String>,
    /// Text the result document must hold (the outcome's detail is in its summary line).
    #[serde(default)]
    document_has: Vec<String>,
    #[serde(default)]
    artifacts: Vec<String>,
    #[serde(default)]
    no_artifact: Vec<String>,
    /// Exact sizes, in bytes, of these artifacts (paths under `/out`).
    #[serde(default)]
    artifact_sizes: BTreeMap<String, u64>,
    /// At most this many entries (files and directories) collected under `out/`.
    max_entries_collected: Option<usize>,
    /// The verdict of `runner validate` on the result; ACCEPT when absent.
    validate: Option<String>,
    /// Run with `network: allowlist` under a policy that lists these origins (the guest
    /// then talks to the runner's broker through `/net`).
    network_allow: Option<Vec<String>>,
}

/// The host the hostile fixtures' beacons name.
const BEACON_HOST: &str = "evil.example";

/// What a CommonMark renderer makes of `doc` that the runner never writes: an image, a
/// link, raw HTML, the beacon host outside code, the phrase a guest may build from
/// entities and emphasis. Rendered as a viewer that knows front matter shows it, and as
/// a plain CommonMark one (front matter as prose).
fn rendered_problems(doc: &str) -> Vec<String> {
    use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
    let mut problems = Vec::new();
    for options in [Options::ENABLE_YAML_STYLE_METADATA_BLOCKS, Options::empty()] {
        // What a reader sees, and the part of it outside code.
        let (mut seen, mut prose) = (String::new(), String::new());
        let mut in_block = false;
        for event in Parser::new_ext(doc, options) {
            match event {
                Event::Start(Tag::Image { dest_url, .. }) => {
                    problems.push(format!("renders an image of {dest_url}"));
                }
                Event::Start(Tag::Link { dest_url, .. }) => {
                    problems.push(format!("renders a link to {dest_url}"));
                }
                Event::Html(h) | Event::InlineHtml(h) => {
                    problems.push(format!("renders raw HTML {h:?}"));
                }
                Event::Start(Tag::CodeBlock(_) | Tag::MetadataBlock(_)) => in_block = true,
                Event::End(TagEnd::CodeBlock | TagEnd::MetadataBlock(_)) => in_block = false,
                Event::Text(t) => {
                    seen.push_str(&t);
                    if !in_block {
                        prose.push_str(&t);
                    }
                }
                Event::Code(t) => seen.push_str(&t),
                Event::SoftBreak | Event::HardBreak | Event::End(_) => {
                    seen.push(' ');
                    prose.push(' ');
                }
                _ => {}
            }
        }
        let words = |t: &str| {
            t.to_lowercase()
                .split(|c: char| c.is_whitespace())
                .filter(|w| !w.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        };
        if words(&seen).contains("ignore all previous instructions") {
            problems.push("renders the text \"ignore all previous instructions\"".into());
        }
        if prose.contains(BEACON_HOST) {
            problems.push(format!("renders {BEACON_HOST} outside code"));
        }
    }
    problems
}

/// A policy with small output caps, so floods fire fast.
fn test_policy(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(repo().join("policies/default.toml")).unwrap();
    let text = text
        .replace("stdout_max_bytes = 16777216", "stdout_max_bytes = 1048576")
        .replace("stderr_max_bytes = 16777216", "stderr_max_bytes = 1048576")
        .replace("out_max_bytes = 268435456", "out_max_bytes = 1048576")
        .replace("out_max_files = 4096", "out_max_files = 64")
        // Every case runs with the Landlock wall required (tests/confinement.rs proves
        // what it denies): a real guest must run whole inside it.
        .replace("landlock = \"optional\"", "landlock = \"required\"");
    assert!(
        text.contains("landlock = \"required\""),
        "the default policy states landlock"
    );
    assert!(
        text.contains("out_max_files = 64"),
        "the default policy's caps changed; update this test"
    );
    let path = dir.join("policy.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// `policy` with a `[network]` table allowing `allow`, written into `dir`.
fn network_policy(policy: &Path, allow: &[String], dir: &Path) -> PathBuf {
    let text = format!(
        "{}\n[network]\nallow = {}\nmax_response_bytes = 4096\nmax_requests = 8\ntimeout_sec = 2\n",
        std::fs::read_to_string(policy).unwrap(),
        serde_json::to_string(allow).unwrap()
    );
    let path = dir.join("policy-network.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn request(name: &str, e: &Expect, inputs: &[(String, String)], language: &str) -> String {
    // Every fixture declares its script, so the front matter always has `inputs:`.
    let (fm_inputs, section) = declared_inputs(inputs);
    format!(
        "---\nrequest_type: tool_request\nschema_version: 1\nrequest_id: \"TR-20261121-120000Z-{name}\"\ncreated_utc: \"2026-11-21T12:00:00Z\"\nrequested_by: \"test-harness\"\napproved_by: \"test-operator\"\napproved_utc: \"2026-11-21T12:00:01Z\"\npurpose: \"Adversarial fixture {name}.\"\nbackend: ERA\nlanguage: {language}\nnetwork: {network}\ncpu_limit: \"{cpu}\"\nmemory_limit_mb: {mem}\ntime_limit_sec: {time}\n{fm_inputs}---\n# {name}\n\n## Command\n`python -u script.py`\n\n## Input Files\n{section}\n## Output Expectations\n- stdout, and files under /out/ when the fixture writes any.\n\n## Risk Assessment\n- Risk level: high\n- Justification: an adversarial test fixture.\n- Data sensitivity: public\n- Network rationale: none needed\n",
        cpu = e.cpu_limit.as_deref().unwrap_or("20"),
        network = if e.network_allow.is_some() {
            "allowlist"
        } else {
            "none"
        },
        mem = e.memory_limit_mb.unwrap_or(128),
        time = e.time_limit_sec.unwrap_or(20),
    )
}

/// Files and directories under `dir`, recursively (not `dir` itself).
fn count_entries(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |rd| {
        rd.flatten()
            .map(|e| {
                1 + if e.file_type().is_ok_and(|t| t.is_dir()) {
                    count_entries(&e.path())
                } else {
                    0
                }
            })
            .sum()
    })
}

/// Runs one fixture on the default guest; returns the problems found (empty when it
/// behaved).
fn run_fixture(dir: &Path, policy: &Path) -> Vec<String> {
    run_fixture_as(dir, policy, "expect.json", "python")
}

/// Runs one fixture with `language` against its `expect_file`.
fn run_fixture_as(dir: &Path, policy: &Path, expect_file: &str, language: &str) -> Vec<String> {
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    let e: Expect = serde_json::from_str(&std::fs::read_to_string(dir.join(expect_file)).unwrap())
        .unwrap_or_else(|err| panic!("{name}/{expect_file}: {err}"));
    let work = tempfile::tempdir().unwrap();
    let inputs_dir = work.path().join("inputs");
    std::fs::create_dir(&inputs_dir).unwrap();
    let mut inputs = Vec::new();
    let script = std::fs::read(dir.join("script.py")).unwrap();
    std::fs::write(inputs_dir.join("script.py"), &script).unwrap();
    inputs.push(("script.py".to_owned(), sha256_hex(&script)));
    for (file, content) in &e.extra_inputs {
        std::fs::write(inputs_dir.join(file), content).unwrap();
        inputs.push((file.clone(), sha256_hex(content.as_bytes())));
    }
    for (file, target) in &e.replace_with_symlink {
        std::fs::remove_file(inputs_dir.join(file)).unwrap();
        std::os::unix::fs::symlink(target, inputs_dir.join(file)).unwrap();
    }
    for (file, content) in &e.tamper_after_hashing {
        std::fs::write(inputs_dir.join(file), content).unwrap();
    }
    let network_policy = e
        .network_allow
        .as_ref()
        .map(|allow| network_policy(policy, allow, work.path()));
    let policy = network_policy.as_deref().unwrap_or(policy);
    let req = work.path().join(format!("TR-{name}.md"));
    std::fs::write(&req, request(&name, &e, &inputs, language)).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_runner"))
        .arg("--policy")
        .arg(policy)
        .arg("exec")
        .arg(&req)
        .arg("--json")
        .output()
        .unwrap();
    let report: Value = match serde_json::from_slice(&out.stdout) {
        Ok(v) => v,
        Err(err) => {
            return vec![format!(
                "{name}: exec printed no JSON ({err}); stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            )];
        }
    };
    let mut problems = Vec::new();
    let mut check = |ok: bool, what: String| {
        if !ok {
            problems.push(format!("{name}: {what}"));
        }
    };
    if let Some(code) = &e.refused {
        check(
            out.status.code() == Some(4),
            format!(
                "exit code {:?}, expected 4 (input refused): {report}",
                out.status.code()
            ),
        );
        check(
            report["reasons"][0]["code"] == code.as_str(),
            format!("refusal {}, expected {code}", report["reasons"][0]["code"]),
        );
        check(
            !work.path().join("results").exists()
                || std::fs::read_dir(work.path().join("results"))
                    .unwrap()
                    .next()
                    .is_none(),
            "a refused run left something in results/".into(),
        );
        return problems;
    }
    check(
        out.status.code() == Some(0),
        format!(
            "exit code {:?}: {report}; stderr: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        ),
    );
    let Some(result) = report["result_path"].as_str().map(PathBuf::from) else {
        problems.push(format!("{name}: no result written: {report}"));
        return problems;
    };
    if let Some(want) = &e.outcome {
        check(
            report["outcome"] == want.as_str(),
            format!("outcome {}, expected {want}", report["outcome"]),
        );
    }
    if let Some(want) = e.exit_code {
        check(
            report["exit_code"] == want,
            format!("exit code {}, expected {want}", report["exit_code"]),
        );
    }
    let doc = std::fs::read_to_string(&result).unwrap();
    let artifact_dir = result.with_extension("");
    let stdout =
        String::from_utf8_lossy(&std::fs::read(artifact_dir.join("stdout")).unwrap()).into_owned();
    let safety = doc
        .split("\n## Safety Notes\n")
        .nth(1)
        .unwrap_or("")
        .to_owned();
    for s in &e.stdout_has {
        check(
            stdout.contains(s.as_str()),
            format!(
                "stdout lacks {s:?}; stdout: {}",
                stdout.chars().take(600).collect::<String>()
            ),
        );
    }
    for s in &e.stdout_lacks {
        check(
            !stdout.contains(s.as_str()),
            format!(
                "stdout contains {s:?}: {}",
                stdout.chars().take(600).collect::<String>()
            ),
        );
    }
    for s in &e.safety_has {
        check(
            safety.contains(s.as_str()),
            format!("Safety Notes lack {s:?}: {safety}"),
        );
    }
    for s in &e.safety_lacks {
        check(
            !safety.contains(s.as_str()),
            format!("Safety Notes contain {s:?}: {safety}"),
        );
    }
    for s in &e.document_has {
        check(
            doc.contains(s.as_str()),
            format!("the result document lacks {s:?}"),
        );
    }
    for s in &e.document_lacks {
        check(
            !doc.contains(s.as_str()),
            format!("the result document contains {s:?}"),
        );
    }
    for a in &e.artifacts {
        check(
            artifact_dir.join("out").join(a).is_file(),
            format!("artifact {a} missing"),
        );
    }
    for (a, want) in &e.artifact_sizes {
        let got = std::fs::symlink_metadata(artifact_dir.join("out").join(a)).map(|m| m.len());
        check(
            got.as_ref().ok() == Some(want),
            format!("artifact {a} is {got:?} bytes, expected {want}"),
        );
    }
    if let Some(max) = e.max_entries_collected {
        let count = count_entries(&artifact_dir.join("out"));
        check(
            count <= max,
            format!("{count} entries collected under /out, at most {max} allowed"),
        );
    }
    for a in &e.no_artifact {
        check(
            artifact_dir.join("out").join(a).symlink_metadata().is_err(),
            format!("{a} was collected"),
        );
    }
    // Six sections, in order, whatever the guest printed.
    let sections: Vec<&str> = doc.lines().filter(|l| l.starts_with("## ")).collect();
    check(
        sections
            == [
                "## Summary",
                "## Provenance",
                "## Outputs",
                "## Stdout",
                "## Stderr",
                "## Safety Notes",
            ],
        format!("sections {sections:?}"),
    );
    for p in rendered_problems(&doc) {
        check(false, format!("the result, rendered: {p}"));
    }
    let judged = Command::new(env!("CARGO_BIN_EXE_runner"))
        .arg("--policy")
        .arg(policy)
        .arg("validate")
        .arg(&result)
        .arg("--json")
        .output()
        .unwrap();
    let verdict: Value = serde_json::from_slice(&judged.stdout).unwrap_or(Value::Null);
    let want = e.validate.as_deref().unwrap_or("ACCEPT");
    check(
        verdict["verdict"] == want,
        format!(
            "validate gave {}, expected {want}: {}",
            verdict["verdict"],
            String::from_utf8_lossy(&judged.stdout)
        ),
    );
    let v = Command::new(env!("CARGO_BIN_EXE_runner"))
        .arg("verify")
        .arg(&result)
        .arg("--request")
        .arg(&req)
        .output()
        .unwrap();
    check(
        v.status.success(),
        format!("verify failed: {}", String::from_utf8_lossy(&v.stdout)),
    );
    problems
}

#[test]
fn every_era_fixture_behaves() {
    let root = repo().join("tests/era");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert!(
        dirs.len() >= 19,
        "expected the whole fixture set, found {}",
        dirs.len()
    );
    let policy_dir = tempfile::tempdir().unwrap();
    let policy = test_policy(policy_dir.path());
    // Two at a time: the machine has two cores and several fixtures wait on deadlines.
    let mut problems = Vec::new();
    for pair in dirs.chunks(2) {
        let handles: Vec<_> = pair
            .iter()
            .map(|d| {
                let (d, p) = (d.clone(), policy.clone());
                std::thread::spawn(move || run_fixture(&d, &p))
            })
            .collect();
        for h in handles {
            problems.extend(h.join().unwrap());
        }
    }
    assert!(
        problems.is_empty(),
        "{} problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// The fixtures that also hold an `expect-3.15.json`, run on the scientific CPython 3.15
/// guest (what its build does differently is in that file). Needs the fetched guest, as
/// `sci_guest` does (`just test-sci` runs it).
#[test]
#[ignore = "needs the fetched scientific guest: RUNNER_TEST_SCI_GUEST=$(runner guest path cpython-3.15-scientific)"]
fn era_fixtures_behave_on_the_3_15_guest() {
    assert!(
        std::env::var_os("RUNNER_TEST_SCI_GUEST").is_some(),
        "RUNNER_TEST_SCI_GUEST must name the fetched cpython-3.15-scientific guest"
    );
    let root = repo().join("tests/era");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("expect-3.15.json").is_file())
        .collect();
    dirs.sort();
    assert!(
        dirs.len() >= 4,
        "expected the 3.15 fixtures, found {}",
        dirs.len()
    );
    let policy_dir = tempfile::tempdir().unwrap();
    let policy = test_policy(policy_dir.path());
    let problems: Vec<String> = dirs
        .iter()
        .flat_map(|d| run_fixture_as(d, &policy, "expect-3.15.json", "python-3.15-scientific"))
        .collect();
    assert!(
        problems.is_empty(),
        "{} problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}
