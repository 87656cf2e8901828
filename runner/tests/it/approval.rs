//! Signed approvals end to end, through the built binary: `runner request seal`,
//! `runner keygen`, `runner approve`, and `runner exec` under a policy that requires a
//! signature by a trusted key. Every tamper with a signed request (any byte, any field,
//! any section) is a REJECT; so are unsigned requests, untrusted or misattributed
//! signatures, truncated signature files and signatures of other requests.
//!
//! The runs that execute need the CPython guest fetched (`just guests`).

#![allow(clippy::unwrap_used, clippy::expect_used)]
// reason: a test harness builds fixtures and runs the built binaries on the host.
#![allow(clippy::disallowed_methods)]

use crate::support;

use support::{repo, runner};

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;

const REQUEST: &str = "TR-20261121-100000Z-csv-stats.md";
const APPROVER: &str = "operator-ada";

fn example_text() -> String {
    std::fs::read_to_string(repo().join("examples/csv-stats").join(REQUEST)).unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A private copy of the csv-stats example with three key pairs made by `runner
/// keygen` (ada and bob trusted, mallory not) and a policy requiring signed approvals.
struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let s = Self { dir };
        std::fs::write(s.request(), example_text()).unwrap();
        let inputs = s.path().join("inputs");
        std::fs::create_dir(&inputs).unwrap();
        for f in ["stats.py", "data.csv"] {
            std::fs::copy(
                repo().join("examples/csv-stats/inputs").join(f),
                inputs.join(f),
            )
            .unwrap();
        }
        std::fs::create_dir(s.path().join("keys")).unwrap();
        for who in ["ada", "bob", "mallory"] {
            let out = runner()
                .arg("keygen")
                .arg(s.path().join("keys").join(who))
                .output()
                .unwrap();
            assert!(out.status.success(), "keygen: {}", stderr(&out));
        }
        let mut policy = std::fs::read_to_string(repo().join("policies/default.toml"))
            .unwrap()
            .replace(
                "require_signed_approval = false",
                "require_signed_approval = true",
            );
        for (name, who) in [(APPROVER, "ada"), ("operator-bob", "bob")] {
            policy.push_str(&format!(
                "\n[[approval.trusted]]\nname = \"{name}\"\npublic_key = \"\"\"\n{}\"\"\"\n",
                std::fs::read_to_string(s.key(who).with_extension("pub")).unwrap()
            ));
        }
        std::fs::write(s.policy(), policy).unwrap();
        s
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
    fn request(&self) -> PathBuf {
        self.path().join(REQUEST)
    }
    fn sig(&self) -> PathBuf {
        self.path().join(format!("{REQUEST}.sig"))
    }
    fn key(&self, who: &str) -> PathBuf {
        self.path().join("keys").join(format!("{who}.key"))
    }
    fn policy(&self) -> PathBuf {
        self.path().join("policy.toml")
    }
    fn key_id(&self, who: &str) -> String {
        let key = runner_pipeline::sign::load_verifying_key(&self.key(who).with_extension("pub"))
            .unwrap();
        runner_core::policy::key_id(&key)
    }

    /// `runner approve --yes`, under the test policy (`strict`) or the built-in one.
    fn approve(&self, by: &str, who: Option<&str>, strict: bool) -> Output {
        let mut c = runner();
        if strict {
            c.arg("--policy").arg(self.policy());
        }
        c.arg("approve")
            .arg(self.request())
            .args(["--by", by, "--yes"]);
        if let Some(who) = who {
            c.arg("--key").arg(self.key(who));
        }
        c.output().unwrap()
    }

    /// Approves as operator-ada with ada's key under the test policy.
    fn signed(self) -> Self {
        let out = self.approve(APPROVER, Some("ada"), true);
        assert!(out.status.success(), "approve: {}", stderr(&out));
        assert!(self.sig().is_file());
        self
    }

    /// `runner exec --json` under the test policy: exit code, reason codes, report.
    fn exec(&self) -> (i32, Vec<String>, Value) {
        let out = runner()
            .arg("--policy")
            .arg(self.policy())
            .arg("exec")
            .arg(self.request())
            .arg("--results")
            .arg(self.path().join("results"))
            .arg("--json")
            .output()
            .unwrap();
        let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "exec printed no JSON ({e}): {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                stderr(&out)
            )
        });
        let codes = report["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["code"].as_str().unwrap().to_owned())
            .collect();
        (out.status.code().unwrap(), codes, report)
    }

    /// Asserts `exec` refuses with `code` among its reasons and writes no result.
    fn assert_rejected(&self, code: &str, what: &str) {
        let (exit, codes, _) = self.exec();
        assert_eq!(exit, 1, "{what}: exit {exit}, reasons {codes:?}");
        assert!(
            codes.iter().any(|c| c == code),
            "{what}: expected {code}, got {codes:?}"
        );
        assert!(
            !self.path().join("results").exists()
                || std::fs::read_dir(self.path().join("results"))
                    .unwrap()
                    .next()
                    .is_none(),
            "{what}: a result was written"
        );
    }

    fn text(&self) -> String {
        std::fs::read_to_string(self.request()).unwrap()
    }
}

/// `approved_utc: "…:SSZ"` with the last digit of the seconds changed.
fn one_second_off(line: &str) -> String {
    let at = line.rfind('Z').unwrap() - 1;
    let digit = if &line[at..=at] == "0" { "1" } else { "0" };
    format!("{}{digit}{}", &line[..at], &line[at + 1..])
}

/// `text` with the one occurrence of `from` replaced by `to`.
fn replace_once(text: &str, from: &str, to: &str) -> String {
    assert_eq!(text.matches(from).count(), 1, "`{from}` must occur once");
    text.replacen(from, to, 1)
}

#[test]
fn one_changed_byte_anywhere_is_a_reject() {
    let s = Setup::new().signed();
    let signed = s.text();
    let approved_utc = signed
        .lines()
        .find(|l| l.starts_with("approved_utc:"))
        .unwrap()
        .to_owned();
    // One byte in every front matter field group and every section.
    let cases: Vec<(&str, String)> = vec![
        (
            "front matter: purpose",
            replace_once(&signed, "three days", "thrEe days"),
        ),
        (
            "front matter: memory_limit_mb",
            replace_once(&signed, "memory_limit_mb: 256", "memory_limit_mb: 255"),
        ),
        (
            "front matter: time_limit_sec",
            replace_once(&signed, "time_limit_sec: 30", "time_limit_sec: 31"),
        ),
        (
            "front matter: approved_utc",
            replace_once(&signed, &approved_utc, &one_second_off(&approved_utc)),
        ),
        (
            "front matter: approved_by",
            replace_once(
                &signed,
                "approved_by: \"operator-ada\"",
                "approved_by: \"operator-adb\"",
            ),
        ),
        (
            "front matter: an input hash",
            replace_once(
                &signed,
                "sha256: \"baee897a2a8444f00a97ec5737e416b651af2e195161f4292eced15072999550\"",
                "sha256: \"baee897a2a8444f00a97ec5737e416b651af2e195161f4292eced15072999551\"",
            ),
        ),
        (
            "title",
            replace_once(&signed, "# Weather summary", "# Weather summarY"),
        ),
        (
            "## Command",
            replace_once(&signed, "python -u stats.py", "python -u stats.pY"),
        ),
        (
            "## Input Files",
            replace_once(&signed, "(the analysis script)", "(the analysis scripT)"),
        ),
        (
            "## Output Expectations",
            replace_once(&signed, "one line per station", "one line per statioN"),
        ),
        (
            "## Risk Assessment",
            replace_once(
                &signed,
                "Network rationale: none needed",
                "Network rationale: none neede!",
            ),
        ),
        ("a byte appended", format!("{signed} ")),
    ];
    assert!(cases.len() >= 8);
    for (what, text) in cases {
        assert_ne!(text, signed, "{what}: nothing changed");
        std::fs::write(s.request(), &text).unwrap();
        s.assert_rejected("approval.bytes_changed", what);
    }
    // Put back, it runs again (the test above was not vacuous).
    std::fs::write(s.request(), &signed).unwrap();
    let (exit, codes, _) = s.exec();
    assert_eq!((exit, codes), (0, vec![]));
}

#[test]
fn signatures_that_prove_nothing_are_rejected() {
    // No signature at all.
    let s = Setup::new();
    s.assert_rejected("approval.signature_missing", "no .sig");

    // A valid signature by a key the policy does not list (written under the built-in
    // policy, which does not require signatures and so lets it be written).
    let s = Setup::new();
    let out = s.approve(APPROVER, Some("mallory"), false);
    assert!(out.status.success(), "{}", stderr(&out));
    s.assert_rejected("approval.signer_untrusted", "untrusted key");

    // A trusted key, but registered under another name than approved_by.
    let s = Setup::new();
    let out = s.approve(APPROVER, Some("bob"), false);
    assert!(out.status.success(), "{}", stderr(&out));
    s.assert_rejected("approval.signer_mismatch", "bob's key approving as ada");

    // A truncated signature file.
    let s = Setup::new().signed();
    let sig = std::fs::read(s.sig()).unwrap();
    std::fs::write(s.sig(), &sig[..sig.len() / 2]).unwrap();
    s.assert_rejected("approval.signature_invalid", "truncated .sig");

    // A signature of a different request, copied beside this one.
    let other = Setup::new();
    std::fs::write(
        other.request(),
        replace_once(&other.text(), "three days", "four days"),
    )
    .unwrap();
    let other = other.signed();
    let s = Setup::new().signed();
    std::fs::copy(other.sig(), s.sig()).unwrap();
    s.assert_rejected("approval.bytes_changed", "another request's .sig");
}

#[test]
fn crlf_and_bom_variants_of_a_signed_request_still_verify() {
    let s = Setup::new().signed();
    let signed = s.text();
    for (what, text) in [
        ("CRLF", signed.replace('\n', "\r\n")),
        ("BOM", format!("\u{feff}{signed}")),
    ] {
        std::fs::write(s.request(), &text).unwrap();
        let (exit, codes, _) = s.exec();
        assert_eq!((exit, codes), (0, vec![]), "{what}");
    }
}

#[test]
fn exec_runs_a_signed_request_and_names_the_key() {
    let s = Setup::new().signed();
    let (exit, codes, report) = s.exec();
    assert_eq!((exit, codes), (0, vec![]));
    let result = PathBuf::from(report["result_path"].as_str().unwrap());
    let doc = std::fs::read_to_string(&result).unwrap();
    let key_id = s.key_id("ada");
    let line = doc
        .lines()
        .find(|l| l.starts_with("- Approval:"))
        .expect("an Approval line");
    assert!(
        line.contains(&format!(
            "signed by key `{key_id}` (trusted as `{APPROVER}`)"
        )),
        "{line}"
    );
    let stem = result.file_stem().unwrap().to_str().unwrap();
    let lock: Value = serde_json::from_slice(
        &std::fs::read(result.with_file_name(format!("{stem}.lock.json"))).unwrap(),
    )
    .unwrap();
    assert_eq!(
        lock["request"]["approval_key"],
        serde_json::json!({"key_id": key_id, "name": APPROVER})
    );
    let statement: Value = serde_json::from_slice(
        &std::fs::read(result.with_file_name(format!("{stem}.intoto.json"))).unwrap(),
    )
    .unwrap();
    assert_eq!(
        statement["predicate"]["approval"]["key"],
        serde_json::json!({"keyid": key_id, "name": APPROVER})
    );
    // The lock still verifies.
    let out = runner().arg("verify").arg(&result).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn unsigned_runs_record_unsigned() {
    // Under the built-in policy (signatures not required) the csv-stats example runs
    // unsigned, and says so.
    let s = Setup::new();
    let out = runner()
        .arg("exec")
        .arg(s.request())
        .arg("--results")
        .arg(s.path().join("results"))
        .arg("--json")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let result = PathBuf::from(report["result_path"].as_str().unwrap());
    let doc = std::fs::read_to_string(&result).unwrap();
    assert!(doc.contains(", unsigned\n"), "{doc}");
    let stem = result.file_stem().unwrap().to_str().unwrap();
    let lock: Value = serde_json::from_slice(
        &std::fs::read(result.with_file_name(format!("{stem}.lock.json"))).unwrap(),
    )
    .unwrap();
    assert_eq!(lock["request"]["approval_key"], Value::Null);
}

/// The csv-stats request as CORE would draft it: no hashes anywhere, one input left
/// out of the front matter (it is named in `## Input Files` only).
fn draft_of(text: &str) -> String {
    let mut draft = String::new();
    let mut skip = false;
    for line in text.split_inclusive('\n') {
        if line.starts_with("inputs:") {
            draft.push_str(line);
            draft.push_str("  - path: \"/in/stats.py\"\n");
            skip = true;
            continue;
        }
        if skip && line.starts_with("  ") {
            continue;
        }
        skip = false;
        draft.push_str(line);
    }
    let hashes = regex::Regex::new(r" sha256: [0-9a-f]{64}").unwrap();
    hashes.replace_all(&draft, "").into_owned()
}

#[test]
fn seal_fills_exactly_the_hashes() {
    let original = example_text();
    let draft = draft_of(&original);
    assert!(!draft.contains("baee897a") && !draft.contains("cb57b76e"));
    for (what, eol) in [("LF", "\n"), ("CRLF", "\r\n")] {
        let s = Setup::new();
        let draft = draft.replace('\n', eol);
        std::fs::write(s.request(), &draft).unwrap();
        let out = runner()
            .args(["request", "seal"])
            .arg(s.request())
            .arg("--inputs")
            .arg(s.path().join("inputs"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{what}: {}", stderr(&out));
        // The draft was the example minus its hashes: sealing gives the example back,
        // byte for byte, line endings included.
        assert_eq!(s.text(), original.replace('\n', eol), "{what}");
        // And the lines that differ from the draft are exactly the hash lines.
        let sealed = s.text();
        let changed: Vec<&str> = sealed
            .lines()
            .filter(|l| !draft.lines().any(|d| d == *l))
            .collect();
        assert!(
            changed
                .iter()
                .all(|l| l.contains("sha256") || l.contains("- path:")),
            "{what}: {changed:?}"
        );
        let out = runner().arg("validate").arg(s.request()).output().unwrap();
        assert!(
            out.status.success(),
            "{what}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

#[test]
fn seal_leaves_an_empty_approval_alone_and_writes_elsewhere_with_output() {
    let s = Setup::new();
    let draft = draft_of(&example_text())
        .replace("approved_by: \"operator-ada\"", "approved_by: \"\"")
        .replace(
            "approved_utc: \"2026-11-21T10:05:00Z\"",
            "approved_utc: \"\"",
        );
    std::fs::write(s.request(), &draft).unwrap();
    let sealed = s.path().join("sealed.md");
    let out = runner()
        .args(["request", "seal"])
        .arg(s.request())
        .arg("--output")
        .arg(&sealed)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(s.text(), draft, "--output leaves the draft alone");
    let text = std::fs::read_to_string(&sealed).unwrap();
    assert!(text.contains("approved_by: \"\"\n") && text.contains("approved_utc: \"\"\n"));
    // Approved, it is the example again but for the approval time.
    std::fs::write(s.request(), &text).unwrap();
    let out = s.approve(APPROVER, None, false);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = runner().arg("validate").arg(s.request()).output().unwrap();
    assert!(out.status.success());
}

#[test]
fn seal_refuses_symlinked_and_missing_inputs_naming_them() {
    let draft = draft_of(&example_text());

    let s = Setup::new();
    std::fs::write(s.request(), &draft).unwrap();
    let data = s.path().join("inputs/data.csv");
    std::fs::rename(&data, s.path().join("elsewhere.csv")).unwrap();
    std::os::unix::fs::symlink(s.path().join("elsewhere.csv"), &data).unwrap();
    let out = runner()
        .args(["request", "seal"])
        .arg(s.request())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(stderr(&out).contains("/in/data.csv"), "{}", stderr(&out));
    assert!(stderr(&out).contains("symlink"), "{}", stderr(&out));
    assert_eq!(s.text(), draft, "nothing written");

    let s = Setup::new();
    std::fs::write(s.request(), &draft).unwrap();
    std::fs::remove_file(s.path().join("inputs/stats.py")).unwrap();
    let out = runner()
        .args(["request", "seal"])
        .arg(s.request())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(stderr(&out).contains("/in/stats.py"), "{}", stderr(&out));
    assert!(stderr(&out).contains("missing"), "{}", stderr(&out));
    assert_eq!(s.text(), draft, "nothing written");
}

#[test]
fn approve_refusals() {
    // Self-approval under separation of duties.
    let s = Setup::new();
    let before = s.text();
    let out = s.approve("core-agent", Some("ada"), false);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("approval.self_approved"),
        "{}",
        stderr(&out)
    );
    assert_eq!(s.text(), before);
    assert!(!s.sig().exists());

    // No terminal and no --yes.
    let out = runner()
        .arg("approve")
        .arg(s.request())
        .args(["--by", APPROVER])
        .arg("--key")
        .arg(s.key("ada"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--yes"), "{}", stderr(&out));
    assert_eq!(s.text(), before);
    assert!(!s.sig().exists());

    // A request that would not validate once approved: every reason listed.
    let bad = replace_once(&before, "cpu_limit: \"10\"", "cpu_limit: \"ten\"");
    let bad = replace_once(&bad, "Risk level: low", "Risk level: lowish");
    std::fs::write(s.request(), &bad).unwrap();
    let out = s.approve(APPROVER, Some("ada"), false);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    for code in ["limits.cpu_limit_format", "risk.level"] {
        assert!(stderr(&out).contains(code), "{code}: {}", stderr(&out));
    }
    assert_eq!(s.text(), bad);
    assert!(!s.sig().exists());

    // Under a policy requiring signatures: without a key, or with a key it does not
    // trust as the approver, the approval would not pass, so it is refused.
    std::fs::write(s.request(), &before).unwrap();
    for (who, code) in [
        (None, "approval.signature_missing"),
        (Some("mallory"), "approval.signer_untrusted"),
        (Some("bob"), "approval.signer_mismatch"),
    ] {
        let out = s.approve(APPROVER, who, true);
        assert_eq!(out.status.code(), Some(1), "{who:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(code), "{who:?}: {}", stderr(&out));
        assert_eq!(s.text(), before);
        assert!(!s.sig().exists());
    }
}

#[test]
fn approve_writes_the_pair_and_shows_what_is_approved() {
    let s = Setup::new();
    let out = s.approve(APPROVER, Some("ada"), true);
    assert!(out.status.success(), "{}", stderr(&out));
    let shown = stderr(&out);
    for fact in [
        "purpose:",
        "python -u stats.py --in /in/data.csv --out /out/summary.json",
        "/in/stats.py  sha256:baee897a2a8444f00a97ec5737e416b651af2e195161f4292eced15072999550",
        "/in/data.csv  sha256:cb57b76eef265b42ce1f31b6ac92750cf272c9ce5353b55bbbfe66ce8aaeb89f",
        "memory 256 MB, wall time 30 s, CPU 10 s",
        "network:       none",
        "risk:          low",
    ] {
        assert!(shown.contains(fact), "summary lacks {fact:?}:\n{shown}");
    }
    // Only the two approval lines changed.
    let before = example_text();
    let after = s.text();
    let changed: Vec<(&str, &str)> = before
        .lines()
        .zip(after.lines())
        .filter(|(a, b)| a != b)
        .collect();
    assert_eq!(changed.len(), 1, "{changed:?}");
    assert!(changed[0].1.starts_with("approved_utc: \""));
    assert_eq!(before.lines().count(), after.lines().count());
    // The envelope signs the normalized text, as a tool request.
    let env = runner_pipeline::sign::parse_envelope(&std::fs::read(s.sig()).unwrap()).unwrap();
    assert_eq!(
        env.payload_type,
        "application/vnd.runner.tool-request+markdown"
    );
    assert_eq!(env.signatures[0].keyid, s.key_id("ada"));
    // No temporary file left behind.
    let mut names: Vec<String> = std::fs::read_dir(s.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            REQUEST.to_owned(),
            format!("{REQUEST}.sig"),
            "inputs".into(),
            "keys".into(),
            "policy.toml".into()
        ]
    );

    // Approving again without a key removes the signature it would contradict.
    let out = s.approve(APPROVER, None, false);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!s.sig().exists());
}

#[test]
fn the_worked_example_verifies_under_its_policy() {
    let dir = repo().join("examples/approval");
    // Its policy is the built-in one with signatures required and ada's key trusted.
    let pem = std::fs::read_to_string(dir.join("operator-ada.pub")).unwrap();
    let expected = format!(
        "{}\n[[approval.trusted]]\nname = \"operator-ada\"\npublic_key = \"\"\"\n{pem}\"\"\"\n",
        std::fs::read_to_string(repo().join("policies/default.toml"))
            .unwrap()
            .replace(
                "require_signed_approval = false",
                "require_signed_approval = true"
            )
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("policy.toml")).unwrap(),
        expected,
        "examples/approval/policy.toml is stale: regenerate it as its README says"
    );
    let policy = runner_pipeline::policy::load(&dir.join("policy.toml")).unwrap();
    let request = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            let n = p.file_name().unwrap().to_str().unwrap();
            n.starts_with("TR-") && n.ends_with(".md")
        })
        .unwrap();
    let bytes = std::fs::read(&request).unwrap();
    let judged = runner_pipeline::approval::judge(&request, &bytes, &policy).unwrap();
    assert_eq!(judged.approval_key.unwrap().name, "operator-ada");
}

/// Attack (audit): sign a monty request whose code branches on
/// `len("café") == 4`, then rewrite only the `é` in its NFD form and keep the `.sig`.
/// The signature covers the normalized (NFC) text; the runner must run exactly that
/// text, so the tampered file takes the branch that was signed, and both runs pin the
/// same request hash because they ran the same code.
#[test]
fn nfd_rewrite_of_a_signed_request_runs_what_was_signed() {
    let s = Setup::new();
    let monty = std::fs::read_to_string(
        repo().join("examples/monty-primes/TR-20261121-101500Z-monty-primes.md"),
    )
    .unwrap();
    let code_start = monty.find("```python\n").unwrap() + "```python\n".len();
    let code_end = code_start + monty[code_start..].find("```\n").unwrap();
    let branching = "if len(\"caf\u{e9}\") == 4:\n    print(\"signed branch\")\nelse:\n    print(\"tampered branch\")\n";
    let text = format!(
        "{}{branching}{}",
        &monty[..code_start],
        &monty[code_end..]
    )
    .replace(
        "## Inputs (JSON)\n```json\n{\"limits\": [10, 100, 1000, 10000], \"label\": \"sieve\"}\n```\n\n",
        "",
    );
    std::fs::write(s.request(), &text).unwrap();
    let s = s.signed();
    let (exit, codes, report) = s.exec();
    assert_eq!((exit, codes), (0, vec![]), "the signed request runs");
    let signed_result = PathBuf::from(report["result_path"].as_str().unwrap());
    let signed_stdout =
        std::fs::read_to_string(signed_result.with_extension("").join("stdout")).unwrap();
    assert_eq!(signed_stdout, "signed branch\n");

    let tampered = s.text().replace('\u{e9}', "e\u{301}");
    assert_ne!(tampered, s.text(), "the rewrite changed the bytes");
    std::fs::write(s.request(), &tampered).unwrap();
    let (exit, codes, report) = s.exec();
    assert_eq!(
        (exit, codes),
        (0, vec![]),
        "the NFD copy normalizes to what was signed"
    );
    let tampered_result = PathBuf::from(report["result_path"].as_str().unwrap());
    let tampered_stdout =
        std::fs::read_to_string(tampered_result.with_extension("").join("stdout")).unwrap();
    assert_eq!(
        tampered_stdout, "signed branch\n",
        "the NFD rewrite ran different code under the same signature"
    );
    let pin = |result: &Path| -> Value {
        let stem = result.file_stem().unwrap().to_str().unwrap();
        let lock: Value = serde_json::from_slice(
            &std::fs::read(result.with_file_name(format!("{stem}.lock.json"))).unwrap(),
        )
        .unwrap();
        lock["request"]["sha256"].clone()
    };
    assert_eq!(pin(&signed_result), pin(&tampered_result));
}
