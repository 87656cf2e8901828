//! The fixture harness shared by the gate tests: a directory of documents named after
//! the attack they carry, each with a sidecar `<name>.expect.json`:
//!
//! ```json
//! {"verdict": "REJECT", "codes": ["hash.body_mismatch"], "lines": {"hash.body_mismatch": 14},
//!  "notes": ["artifacts.not_checked"], "catalog": false, "note": "why the fixture exists"}
//! ```
//!
//! `codes` is the exact set of reason codes (sorted, unique); `notes` the exact set of
//! note codes (default none); `lines` pins the line of some reasons; `catalog` (governed
//! packets only, default true) says whether `tests/governed/catalog.json` is given. One
//! harness judges them all and reports every mismatch at once.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use runner::gate::{self, Catalog, Context, Follow, Judgement};
use runner::policy::Policy;
use runner::request::Reason;
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const SIDECAR_SUFFIX: &str = ".expect.json";

/// The repository's `tests/<name>` directory.
pub fn corpus_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests")
        .join(name)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expectation {
    pub verdict: String,
    pub codes: Vec<String>,
    #[serde(default)]
    pub lines: BTreeMap<String, usize>,
    #[serde(default)]
    pub notes: Vec<String>,
    #[serde(default)]
    pub catalog: Option<bool>,
    #[serde(default)]
    pub note: Option<String>,
}

pub struct Fixture {
    pub name: String,
    pub path: PathBuf,
    pub expect: Expectation,
}

fn file_name(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

/// Every document in `dir` ending in `.{ext}` (not a sidecar, not `catalog.json`) with
/// its sidecar, sorted by name.
pub fn fixtures(dir: &Path, ext: &str) -> Vec<Fixture> {
    let mut out = Vec::new();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = file_name(p);
            p.symlink_metadata().unwrap().is_file()
                && n.ends_with(&format!(".{ext}"))
                && !n.ends_with(SIDECAR_SUFFIX)
                && n != "catalog.json"
        })
        .collect();
    paths.sort();
    for path in paths {
        let n = file_name(&path);
        let name = n[..n.len() - ext.len() - 1].to_owned();
        let sidecar = dir.join(format!("{name}{SIDECAR_SUFFIX}"));
        let text = std::fs::read_to_string(&sidecar)
            .unwrap_or_else(|e| panic!("{name}: cannot read sidecar {}: {e}", sidecar.display()));
        let expect: Expectation =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: bad sidecar: {e}"));
        out.push(Fixture { name, path, expect });
    }
    out
}

pub fn catalog() -> Catalog {
    Catalog::load(&corpus_dir("governed").join("catalog.json")).expect("the test catalog")
}

/// The library's judgement of a fixture (as `runner validate` gives it).
pub fn judge(f: &Fixture, policy: &Policy, catalog: &Catalog) -> Judgement {
    let ctx = Context {
        policy,
        catalog: (f.expect.catalog != Some(false)).then_some(catalog),
    };
    gate::judge_file(&f.path, &ctx, Follow::Symlinks)
        .unwrap_or_else(|e| panic!("{}: cannot read: {e}", f.name))
        .0
}

pub fn code_set(reasons: &[Reason]) -> Vec<String> {
    reasons
        .iter()
        .map(|r| r.code.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

fn show(reasons: &[Reason]) -> String {
    if reasons.is_empty() {
        return "      (none)\n".into();
    }
    reasons
        .iter()
        .map(|r| {
            format!(
                "      {}:{} {}\n",
                r.code,
                r.line.map_or("-".into(), |l| l.to_string()),
                r.message
            )
        })
        .collect()
}

/// How a judgement differs from the sidecar, if it does.
pub fn mismatch(f: &Fixture, j: &Judgement) -> Option<String> {
    let mut problems = Vec::new();
    if j.verdict.as_str() != f.expect.verdict {
        problems.push(format!(
            "verdict: expected {}, got {}",
            f.expect.verdict,
            j.verdict.as_str()
        ));
    }
    let got = code_set(&j.reasons);
    if got != f.expect.codes {
        problems.push(format!("codes: expected {:?}, got {got:?}", f.expect.codes));
    }
    let notes = code_set(&j.notes);
    if notes != f.expect.notes {
        problems.push(format!(
            "notes: expected {:?}, got {notes:?}",
            f.expect.notes
        ));
    }
    for (code, line) in &f.expect.lines {
        if !j
            .reasons
            .iter()
            .any(|r| &r.code == code && r.line == Some(*line))
        {
            problems.push(format!("line of {code}: expected {line}"));
        }
    }
    if problems.is_empty() {
        return None;
    }
    let note = f
        .expect
        .note
        .as_deref()
        .map(|n| format!("    note: {n}\n"))
        .unwrap_or_default();
    Some(format!(
        "  {}\n    {}\n{note}    reasons:\n{}    notes:\n{}",
        f.name,
        problems.join("\n    "),
        show(&j.reasons),
        show(&j.notes)
    ))
}

/// The corpus rules: enough fixtures, well-formed sidecars, names after the attack,
/// reasons that point at real lines and say something.
pub fn check_corpus(
    kind: &str,
    fixtures: &[Fixture],
    policy: &Policy,
    catalog: &Catalog,
    min_reject: usize,
    min_accept: usize,
) {
    let mut problems = Vec::new();
    let accepts = fixtures
        .iter()
        .filter(|f| f.expect.verdict == "ACCEPT")
        .count();
    let rejects = fixtures
        .iter()
        .filter(|f| f.expect.verdict == "REJECT")
        .count();
    assert!(
        rejects >= min_reject,
        "{kind}: {rejects} REJECT fixtures; at least {min_reject} wanted"
    );
    assert!(
        accepts >= min_accept,
        "{kind}: {accepts} ACCEPT fixtures; at least {min_accept} wanted"
    );
    for f in fixtures {
        let e = &f.expect;
        match e.verdict.as_str() {
            "ACCEPT" if !e.codes.is_empty() => {
                problems.push(format!("{}: an ACCEPT lists codes", f.name))
            }
            "REJECT" if e.codes.is_empty() => {
                problems.push(format!("{}: a REJECT lists no codes", f.name))
            }
            "ACCEPT" | "REJECT" => {}
            other => problems.push(format!("{}: verdict {other:?}", f.name)),
        }
        let sorted: Vec<String> = e
            .codes
            .iter()
            .cloned()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if sorted != e.codes {
            problems.push(format!("{}: codes must be sorted and unique", f.name));
        }
        for code in e.lines.keys() {
            if !e.codes.contains(code) {
                problems.push(format!(
                    "{}: pins the line of {code}, which is not in codes",
                    f.name
                ));
            }
        }
        if !f
            .name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        {
            problems.push(format!(
                "{}: fixture names are lowercase-kebab-case",
                f.name
            ));
        }
        let j = judge(f, policy, catalog);
        if j.kind.map(|k| k.as_str()) != Some(kind) && f.expect.codes != ["kind.unknown"] {
            problems.push(format!(
                "{}: judged as {}, not {kind}",
                f.name,
                j.kind_name()
            ));
        }
        let line_count = std::fs::read(&f.path)
            .unwrap()
            .split(|&b| b == b'\n')
            .count();
        for r in j.reasons.iter().chain(&j.notes) {
            if r.message.trim().is_empty() {
                problems.push(format!("{}: {} has an empty message", f.name, r.code));
            }
            if r.line.is_some_and(|l| l == 0 || l > line_count) {
                problems.push(format!(
                    "{}: {} points at line {:?} of {line_count}",
                    f.name, r.code, r.line
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{kind} corpus:\n  {}",
        problems.join("\n  ")
    );
}

/// Judges every fixture and reports every disagreement with its sidecar.
pub fn check_all(kind: &str, fixtures: &[Fixture], policy: &Policy, catalog: &Catalog) {
    let failures: Vec<String> = fixtures
        .iter()
        .filter_map(|f| mismatch(f, &judge(f, policy, catalog)))
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} {kind} fixtures disagree with their sidecars:\n{}",
        failures.len(),
        fixtures.len(),
        failures.join("")
    );
}

pub fn runner(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_runner"))
        .args(args)
        .output()
        .expect("the runner binary runs")
}

/// `runner validate --json` over the fixtures says what the library says, with the
/// documented line format (`notes` only when there are some).
pub fn check_cli_json(fixtures: &[Fixture], policy: &Policy, catalog: &Catalog) {
    let catalog_path = corpus_dir("governed").join("catalog.json");
    let mut problems = Vec::new();
    for with_catalog in [true, false] {
        let chosen: Vec<&Fixture> = fixtures
            .iter()
            .filter(|f| (f.expect.catalog != Some(false)) == with_catalog)
            .collect();
        if chosen.is_empty() {
            continue;
        }
        let mut args: Vec<&std::ffi::OsStr> = vec!["validate".as_ref(), "--json".as_ref()];
        if with_catalog {
            args.push("--catalog".as_ref());
            args.push(catalog_path.as_os_str());
        }
        args.extend(chosen.iter().map(|f| f.path.as_os_str()));
        let out = runner(&args);
        let stdout = String::from_utf8(out.stdout).expect("UTF-8 JSON Lines");
        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(lines.len(), chosen.len(), "one line per file:\n{stdout}");
        let any_reject = chosen.iter().any(|f| f.expect.verdict == "REJECT");
        assert_eq!(
            out.status.code(),
            Some(if any_reject { 1 } else { 0 }),
            "{stdout}"
        );
        for (f, line) in chosen.iter().zip(lines) {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let keys: BTreeSet<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
            let j = judge(f, policy, catalog);
            let mut want = BTreeSet::from(["file", "kind", "verdict", "reasons"]);
            if !j.notes.is_empty() {
                want.insert("notes");
            }
            if keys != want {
                problems.push(format!("{}: keys {keys:?}", f.name));
            }
            if v["kind"] != j.kind_name() || v["verdict"] != j.verdict.as_str() {
                problems.push(format!(
                    "{}: CLI {} {}, library {} {}",
                    f.name,
                    v["kind"],
                    v["verdict"],
                    j.kind_name(),
                    j.verdict.as_str()
                ));
            }
            let cli_codes: BTreeSet<String> = v["reasons"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    let rk: BTreeSet<&str> =
                        r.as_object().unwrap().keys().map(String::as_str).collect();
                    assert_eq!(
                        rk,
                        BTreeSet::from(["code", "message", "line"]),
                        "{}",
                        f.name
                    );
                    r["code"].as_str().unwrap().to_owned()
                })
                .collect();
            if cli_codes.into_iter().collect::<Vec<_>>() != code_set(&j.reasons) {
                problems.push(format!("{}: CLI codes differ from the library", f.name));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// `runner gate INBOX --accepted A --quarantine Q --json`: the summary and the exit code.
pub fn gate_json(inbox: &Path, accepted: &Path, quarantine: &Path) -> (serde_json::Value, i32) {
    let out = runner(&[
        "gate".as_ref(),
        inbox.as_os_str(),
        "--accepted".as_ref(),
        accepted.as_os_str(),
        "--quarantine".as_ref(),
        quarantine.as_os_str(),
        "--json".as_ref(),
    ]);
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "runner gate printed no JSON ({e}): stdout {} stderr {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (v, out.status.code().unwrap())
}

/// The names in a directory, sorted (none when it does not exist).
pub fn dir_names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    };
    v.sort();
    v
}

// ------------------------------------------------------------------ whole result sets

/// The monty example: it runs without a guest download.
pub const MONTY_EXAMPLE: &str = "examples/monty-primes/TR-20261121-101500Z-monty-primes.md";

/// One real run of the monty example, as `runner exec` wrote it (document, directory,
/// lock, statement), made once per test process: (results directory, result id).
pub fn monty_run() -> &'static (tempfile::TempDir, String) {
    static RUN: std::sync::OnceLock<(tempfile::TempDir, String)> = std::sync::OnceLock::new();
    RUN.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_runner"))
            .arg("exec")
            .arg(
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("..")
                    .join(MONTY_EXAMPLE),
            )
            .arg("--json")
            .arg("--results")
            .arg(tmp.path())
            .output()
            .expect("runner exec runs");
        assert_eq!(
            out.status.code(),
            Some(0),
            "runner exec of the monty example: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let doc = PathBuf::from(report["result_path"].as_str().unwrap());
        let id = doc.file_stem().unwrap().to_string_lossy().into_owned();
        (tmp, id)
    })
}

/// Writes into `dir` the set of [`monty_run`] under the result id `name`: the document
/// with its id replaced, its directory, and the lock and statement `runner exec` would
/// have written for that id (re-sealed with the library's own lock writer). What the
/// gate sees is then a genuine, consistent set with a name of the test's choosing.
pub fn put_exec_set(dir: &Path, name: &str) {
    use runner::lock::{Lock, lock_file_name, statement, text_sha256_tagged};
    let (run, id) = monty_run();
    let text = std::fs::read_to_string(run.path().join(format!("{id}.md")))
        .unwrap()
        .replace(id.as_str(), name);
    let mut lock = Lock::parse(&std::fs::read(run.path().join(lock_file_name(id))).unwrap())
        .expect("exec wrote a valid lock");
    lock.result_id = name.to_owned();
    lock.result_sha256 = text_sha256_tagged(&text);
    let (lock, lock_text) = lock.seal().unwrap();
    let statement = statement::statement_text(&lock, &format!("{name}.md")).unwrap();
    let artifacts = dir.join(name);
    std::fs::create_dir_all(&artifacts).unwrap();
    copy_dir(&run.path().join(id), &artifacts);
    std::fs::write(dir.join(lock_file_name(name)), lock_text).unwrap();
    std::fs::write(dir.join(statement::statement_file_name(name)), statement).unwrap();
    std::fs::write(dir.join(format!("{name}.md")), text).unwrap();
}

fn copy_dir(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}
