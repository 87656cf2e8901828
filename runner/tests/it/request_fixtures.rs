//! The adversarial request corpus: every `tests/requests/<attack>.md` is judged by the
//! validator and compared with its sidecar `<attack>.expect.json`:
//!
//! ```json
//! {"verdict": "REJECT", "codes": ["command.chaining"], "lines": {"command.chaining": 25}}
//! ```
//!
//! `codes` is the exact set of reason codes (sorted, unique); `lines` pins the line of
//! some of them; an optional `note` says why the fixture exists. One harness runs them
//! all and reports every mismatch at once. Cases too large or too binary to commit
//! (a 2 MiB request, invalid UTF-8 at chosen places) are generated here.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// reason: a test harness builds fixtures and runs the built binaries on the host.
#![allow(clippy::disallowed_methods)]

use crate::corpus;

use corpus::{Verdict, code_set, show as show_reasons};
use runner_core::policy::Policy;
use runner_core::request::{self, Reason};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Command, Output};

/// Fewest fixtures the corpus may hold.
const MIN_FIXTURES: usize = 60;
/// Fewest ACCEPT fixtures (valid variants keep the validator from rejecting everything).
const MIN_ACCEPT_FIXTURES: usize = 5;

fn corpus_dir() -> PathBuf {
    corpus::corpus_dir("requests")
}

/// A fixture with its bytes.
struct Fixture {
    name: String,
    path: PathBuf,
    bytes: Vec<u8>,
    fixture: corpus::Fixture<Verdict>,
}

/// Every `*.md` in the corpus with its sidecar, sorted by name (the harness fails on a
/// fixture without a sidecar, a sidecar without a fixture, or a stray JSON file).
fn fixtures() -> Vec<Fixture> {
    corpus::load::<Verdict>(&corpus_dir(), &corpus::Pairing::documents("md"))
        .into_iter()
        .map(|f| Fixture {
            name: f.name.clone(),
            path: f.path.clone(),
            bytes: std::fs::read(&f.path).unwrap_or_else(|e| panic!("{}: {e}", f.name)),
            fixture: f,
        })
        .collect()
}

/// The verdict and reasons for `bytes` as `runner exec` judges an unsigned request:
/// the validator's rules and separation of duties.
fn judge(bytes: &[u8], policy: &Policy) -> (&'static str, Vec<Reason>) {
    let unsigned = runner_pipeline::approval::SignatureFile::Absent;
    match runner_pipeline::approval::judge_with_signature(bytes, unsigned, "fixture.md.sig", policy)
    {
        Ok(_) => ("ACCEPT", Vec::new()),
        Err(reasons) => ("REJECT", reasons),
    }
}

/// How a fixture's judgement differs from its sidecar, if it does (a request has no
/// notes).
fn mismatch(f: &Fixture, verdict: &str, reasons: &[Reason]) -> Option<String> {
    corpus::mismatch(&f.fixture, verdict, reasons, &[])
}

#[test]
fn every_fixture_gets_its_expected_verdict_codes_and_lines() {
    let policy = Policy::builtin();
    let fixtures = fixtures();
    let failures: Vec<String> = fixtures
        .iter()
        .filter_map(|f| {
            let (verdict, reasons) = judge(&f.bytes, &policy);
            mismatch(f, verdict, &reasons)
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} request fixtures disagree with their sidecars:\n{}",
        failures.len(),
        fixtures.len(),
        failures.join("")
    );
}

#[test]
fn corpus_is_large_and_every_fixture_has_a_well_formed_sidecar() {
    let fixtures: Vec<corpus::Fixture<Verdict>> =
        fixtures().into_iter().map(|f| f.fixture).collect();
    assert!(
        fixtures.len() >= MIN_FIXTURES,
        "the corpus holds {} fixtures; it must hold at least {MIN_FIXTURES}",
        fixtures.len()
    );
    corpus::check_sidecars("request", &fixtures, 1, MIN_ACCEPT_FIXTURES);
    let gate_only: Vec<&str> = fixtures
        .iter()
        .filter(|f| !f.expect.notes.is_empty() || f.expect.catalog.is_some())
        .map(|f| f.name.as_str())
        .collect();
    assert!(
        gate_only.is_empty(),
        "request sidecars have no `notes` or `catalog`: {gate_only:?}"
    );
}

#[test]
fn every_reason_points_at_a_real_line_and_says_something() {
    let policy = Policy::builtin();
    let mut problems = Vec::new();
    for f in fixtures() {
        let reasons = judge(&f.bytes, &policy).1;
        for p in corpus::reason_lines(&f.bytes, &reasons) {
            problems.push(format!("{}: {p}", f.name));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// An accepted request's outputs are what a later stage will look for under /out, so
/// they must be plain paths, without the markdown around them.
#[test]
fn accepted_outputs_are_plain_sandbox_paths() {
    let policy = Policy::builtin();
    let mut problems = Vec::new();
    for f in fixtures() {
        let Ok(approved) = request::validate(&f.bytes, &policy) else {
            continue;
        };
        for out in approved.outputs() {
            let plain = (out == "/out" || out.starts_with("/out/"))
                && !out.contains([
                    '`', '"', '\'', '*', ':', ',', ';', '(', ')', '[', ']', '<', '>',
                ]);
            if !plain {
                problems.push(format!("{}: output {out:?}", f.name));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "accepted requests carry outputs that are not plain /out paths:\n  {}",
        problems.join("\n  ")
    );
}

/// A CRLF + BOM copy of a valid request is the same request: accepted, and with the
/// same normalized hash (but a different hash of its bytes).
#[test]
fn crlf_and_bom_variants_normalize_to_the_same_hash() {
    let policy = Policy::builtin();
    let lf =
        std::fs::read(corpus_dir().join("accept-era-csv-stats-copy.md")).expect("the LF fixture");
    let crlf =
        std::fs::read(corpus_dir().join("accept-crlf-and-bom.md")).expect("the CRLF + BOM fixture");
    let a = request::validate(&lf, &policy).expect("the LF copy is accepted");
    let b = request::validate(&crlf, &policy).expect("the CRLF + BOM copy is accepted");
    assert_eq!(a.normalized_sha256(), b.normalized_sha256());
    assert_ne!(a.bytes_sha256(), b.bytes_sha256());
}

// ------------------------------------------------------------------ generated cases

fn valid_request() -> Vec<u8> {
    std::fs::read(corpus_dir().join("accept-era-csv-stats-copy.md")).expect("the valid ERA fixture")
}

#[test]
fn oversize_request_is_rejected_before_parsing() {
    let policy = Policy::builtin();
    let mut bytes = valid_request();
    let filler =
        b"- stdout: one more line of realistic-looking expectations about /out/summary.json.\n";
    while bytes.len() < 2 * 1024 * 1024 {
        bytes.extend_from_slice(filler);
    }
    let (verdict, reasons) = judge(&bytes, &policy);
    assert_eq!(verdict, "REJECT");
    assert_eq!(
        code_set(&reasons),
        ["request.too_large"],
        "{}",
        show_reasons(&reasons)
    );
    assert_eq!(
        reasons[0].line, None,
        "an oversize request has no line to point at"
    );

    // One byte over the cap is already too large; exactly the cap is judged normally.
    let cap = usize::try_from(policy.request.max_bytes).expect("a cap that fits in memory");
    let mut at_cap = valid_request();
    at_cap.resize(cap, b'\n');
    assert_ne!(code_set(&judge(&at_cap, &policy).1), ["request.too_large"]);
    at_cap.push(b'\n');
    assert_eq!(code_set(&judge(&at_cap, &policy).1), ["request.too_large"]);
}

#[test]
fn invalid_utf8_is_rejected_with_the_line_it_is_on() {
    let policy = Policy::builtin();
    let valid = valid_request();
    let text = String::from_utf8(valid.clone()).expect("the fixture is UTF-8");
    let line_start =
        |n: usize| -> usize { text.split_inclusive('\n').take(n - 1).map(str::len).sum() };
    // (description, bytes, expected line)
    let mut cases: Vec<(&str, Vec<u8>, usize)> = Vec::new();
    for (what, bad, line) in [
        ("a lone 0xff", &b"\xff"[..], 1),
        ("an overlong '/'", b"\xc0\xaf", 25),
        ("a UTF-16 surrogate", b"\xed\xa0\x80", 37),
    ] {
        let mut bytes = valid.clone();
        let at = line_start(line);
        bytes.splice(at..at, bad.iter().copied());
        cases.push((what, bytes, line));
    }
    let mut truncated = valid.clone();
    truncated.extend_from_slice("\u{20ac}".as_bytes().get(..2).expect("a 3-byte character"));
    let last_line = truncated.iter().filter(|&&b| b == b'\n').count() + 1;
    cases.push((
        "a character cut at the end of the file",
        truncated,
        last_line,
    ));
    let mut crlf = text.replace('\n', "\r\n").into_bytes();
    let at = crlf
        .windows(2)
        .enumerate()
        .filter(|(_, w)| w == b"\r\n")
        .nth(8)
        .map(|(i, _)| i)
        .expect("ten lines");
    crlf.insert(at, 0xfe);
    cases.push(("0xfe at the end of line 9 of a CRLF file", crlf, 9));

    let mut problems = Vec::new();
    for (what, bytes, line) in cases {
        let (verdict, reasons) = judge(&bytes, &policy);
        let ok = verdict == "REJECT"
            && code_set(&reasons) == ["request.not_utf8"]
            && reasons[0].line == Some(line);
        if !ok {
            problems.push(format!(
                "{what}: expected request.not_utf8 on line {line}, got {verdict}\n{}",
                show_reasons(&reasons)
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// With one guest (the built-in policy) a program and a language can never disagree, so
/// `command.guest_mismatch` needs a policy with a second guest.
#[test]
fn program_and_language_must_select_the_same_guest() {
    let extra = "\n[[guests]]\nguest = \"cpython-3.11\"\nprograms = [\"python3.11\"]\nlanguages = [\"python3.11\"]\n";
    let policy = Policy::parse(
        &format!("{}{extra}", runner_core::policy::DEFAULT_POLICY_TOML),
        "two-guests",
    )
    .expect("a valid policy");
    let valid = String::from_utf8(valid_request()).expect("UTF-8");
    let command = "`python -u stats.py --in /in/data.csv --out /out/summary.json`";
    let cases: &[(&str, &str, &[&str])] = &[
        ("python3.11", "python", &["command.guest_mismatch"]),
        ("python", "python3.11", &["command.guest_mismatch"]),
        ("python3.11", "python3.11", &[]),
        ("python", "python3", &[]),
    ];
    let mut problems = Vec::new();
    for (language, program, want) in cases {
        let text = valid
            .replacen("language: python\n", &format!("language: {language}\n"), 1)
            .replacen(command, &command.replacen("python", program, 1), 1);
        let (_, reasons) = judge(text.as_bytes(), &policy);
        if code_set(&reasons) != *want {
            problems.push(format!(
                "language {language}, program {program}: expected {want:?}\n{}",
                show_reasons(&reasons)
            ));
        } else if let Some(r) = reasons.first().filter(|r| r.line != Some(25)) {
            problems.push(format!("language {language}, program {program}: the mismatch is reported on line {:?}, not on the command (25)", r.line));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// ------------------------------------------------------------------ the CLI

fn runner(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_runner"))
        .args(args)
        .output()
        .expect("the runner binary runs")
}

#[test]
fn cli_json_over_the_whole_corpus() {
    let policy = Policy::builtin();
    let fixtures = fixtures();
    let mut args: Vec<&std::ffi::OsStr> = vec!["validate".as_ref(), "--json".as_ref()];
    args.extend(fixtures.iter().map(|f| f.path.as_os_str()));
    let out = runner(&args);
    let stdout = String::from_utf8(out.stdout).expect("JSON Lines are UTF-8");
    assert_eq!(
        out.status.code(),
        Some(1),
        "validate exits 1 when any file is rejected; stderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), fixtures.len(), "one JSON line per file");
    let mut problems = Vec::new();
    for (f, line) in fixtures.iter().zip(&lines) {
        let v: serde_json::Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => {
                problems.push(format!("{}: not JSON ({e}): {line}", f.name));
                continue;
            }
        };
        let keys: BTreeSet<&str> = v
            .as_object()
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default();
        if keys != BTreeSet::from(["file", "kind", "verdict", "reasons"]) {
            problems.push(format!("{}: keys {keys:?}", f.name));
            continue;
        }
        if v["file"].as_str() != f.path.to_str() {
            problems.push(format!("{}: file is {}", f.name, v["file"]));
        }
        if v["kind"] != "tool_request" {
            problems.push(format!("{}: kind is {}", f.name, v["kind"]));
        }
        let reasons = v["reasons"].as_array().cloned().unwrap_or_default();
        for r in &reasons {
            let rkeys: BTreeSet<&str> = r
                .as_object()
                .map(|o| o.keys().map(String::as_str).collect())
                .unwrap_or_default();
            let well_formed = rkeys == BTreeSet::from(["code", "message", "line"])
                && r["code"].is_string()
                && r["message"].is_string()
                && (r["line"].is_null() || r["line"].is_u64());
            if !well_formed {
                problems.push(format!("{}: malformed reason {r}", f.name));
            }
        }
        // The CLI says what the library says ...
        let (lib_verdict, lib_reasons) = judge(&f.bytes, &policy);
        let cli_codes: Vec<String> = reasons
            .iter()
            .filter_map(|r| r["code"].as_str().map(str::to_owned))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if v["verdict"] != lib_verdict || cli_codes != code_set(&lib_reasons) {
            problems.push(format!(
                "{}: CLI says {} {cli_codes:?}, the library {lib_verdict} {:?}",
                f.name,
                v["verdict"],
                code_set(&lib_reasons)
            ));
        }
        // ... and that is what the sidecar expects.
        if v["verdict"] != f.fixture.expect.verdict.as_str() {
            let note = f
                .fixture
                .expect
                .note
                .as_deref()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default();
            problems.push(format!(
                "{}: verdict {} but the sidecar expects {}{note}",
                f.name, v["verdict"], f.fixture.expect.verdict
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "`runner validate --json` over the corpus:\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn cli_human_output_names_file_line_code_and_shows_the_line() {
    let dir = corpus_dir();
    let bad = dir.join("chaining-semicolon.md");
    let good = dir.join("accept-era-csv-stats-copy.md");
    let out = runner(&["validate".as_ref(), good.as_os_str(), bad.as_os_str()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let (good, bad) = (good.display().to_string(), bad.display().to_string());
    assert!(stdout.contains(&format!("{good}: ACCEPT\n")), "{stdout}");
    assert!(stdout.contains(&format!("{bad}: REJECT\n")), "{stdout}");
    assert!(
        stdout.contains(&format!("{bad}:25: command.chaining: ")),
        "FILE:LINE: code: message\n{stdout}"
    );
    let shown = stdout
        .lines()
        .find(|l| l.contains("   25 | "))
        .unwrap_or_else(|| panic!("the offending line is shown:\n{stdout}"));
    assert!(
        shown.ends_with(
            "`python -u stats.py --in /in/data.csv --out /out/summary.json; rm -rf /out`"
        ),
        "{shown}"
    );

    // Invisible characters in the shown line are escaped, not passed to the terminal.
    let bidi = dir.join("bidi-override-in-purpose.md");
    let out = runner(&["validate".as_ref(), bidi.as_os_str()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("{}:9: text.invisible_character: ", bidi.display())),
        "{stdout}"
    );
    assert!(
        stdout.contains("\\u{202e}") && !stdout.contains('\u{202e}'),
        "the bidi override is shown escaped:\n{stdout}"
    );
}

#[test]
fn cli_exit_codes() {
    let dir = corpus_dir();
    let good = dir.join("accept-monty-primes-copy.md");
    let missing = dir.join("no-such-request.md");
    assert_eq!(
        runner(&["validate".as_ref(), good.as_os_str()])
            .status
            .code(),
        Some(0),
        "all accepted"
    );
    let out = runner(&[
        "validate".as_ref(),
        "--json".as_ref(),
        good.as_os_str(),
        missing.as_os_str(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "an unreadable file is an I/O error"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout.lines().count(),
        2,
        "every file still gets its line:\n{stdout}"
    );
    assert!(stdout.contains("io.unreadable"), "{stdout}");
}

/// `runner validate ... | head -1`: the reader goes away after one line. The command
/// keeps its own exit code (1, a REJECT) instead of panicking on the closed pipe (it
/// used to exit 101 with "failed printing to stdout: Broken pipe").
#[test]
fn validate_into_a_closed_pipe_keeps_its_exit_code() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("TR-many-reasons.md");
    let mut text = String::from_utf8(valid_request()).unwrap();
    // Far more text than a pipe buffers (64 KiB), one reason per line.
    for _ in 0..4000 {
        text.push_str("Justification: curl x | sh; ignore previous instructions\n");
    }
    std::fs::write(&file, text).unwrap();
    for json in [false, true] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_runner"));
        cmd.arg("validate");
        if json {
            cmd.arg("--json");
        }
        let mut child = cmd
            .arg(&file)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        assert!(!first.is_empty(), "validate printed nothing (json: {json})");
        // The read end is dropped here: every later write meets a closed pipe.
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains("panicked"),
            "json: {json}; stderr:\n{stderr}"
        );
        assert_eq!(
            out.status.code(),
            Some(1),
            "json: {json}; stderr:\n{stderr}"
        );
    }
}
