//! What the gate tests share: the corpora of results, research packets and governed
//! packets (through the one fixture harness, `tests/corpus`), the gate's judgement of a
//! fixture, the CLI's view of the same, and real result sets to feed an inbox.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub(crate) use crate::corpus;
pub(crate) use crate::support;

pub use corpus::{code_set, corpus_dir};
use runner_core::policy::Policy;
use runner_gate::Catalog;
use runner_gate::Context;
use runner_gate::Follow;
use runner_gate::Judgement;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
#[allow(unused_imports)]
pub use support::copy_tree;

pub type Fixture = corpus::Fixture<corpus::Verdict>;

/// Every document in `dir` ending in `.{ext}` with its sidecar, sorted by name
/// (`catalog.json` and the corpora's `generate.py` are neither).
pub fn fixtures(dir: &Path, ext: &str) -> Vec<Fixture> {
    corpus::load(
        dir,
        &corpus::Pairing {
            ignore: &["catalog.json", "generate.py"],
            ..corpus::Pairing::documents(ext)
        },
    )
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
    runner_gate::judge_file(&f.path, &ctx, Follow::Symlinks)
        .unwrap_or_else(|e| panic!("{}: cannot read: {e}", f.name))
        .0
}

/// How a judgement differs from the sidecar, if it does.
pub fn mismatch(f: &Fixture, j: &Judgement) -> Option<String> {
    corpus::mismatch(f, j.verdict.as_str(), &j.reasons, &j.notes)
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
    corpus::check_sidecars(kind, fixtures, min_reject, min_accept);
    let mut problems = Vec::new();
    for f in fixtures {
        let j = judge(f, policy, catalog);
        if j.kind.map(|k| k.as_str()) != Some(kind) && f.expect.codes != ["kind.unknown"] {
            problems.push(format!(
                "{}: judged as {}, not {kind}",
                f.name,
                j.kind_name()
            ));
        }
        let bytes = std::fs::read(&f.path).unwrap();
        for p in corpus::reason_lines(&bytes, j.reasons.iter().chain(&j.notes)) {
            problems.push(format!("{}: {p}", f.name));
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
    corpus::assert_no_mismatch(kind, fixtures.len(), failures);
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
    use runner_core::lock::Lock;
    use runner_core::lock::lock_file_name;
    use runner_core::lock::statement;
    use runner_core::lock::text_sha256_tagged;
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
