//! The one harness for every fixture corpus under `tests/`: a directory of documents
//! named after the attack (or the case) they carry, each with a sidecar
//! `<name>.expect.json` saying what must happen to it. What differs between corpora is
//! the sidecar's type and how a fixture is judged; what is the same lives here:
//!
//! - [`load`]: every document with its sidecar, sorted by name, and the corpus's
//!   pairing rules (no document without a sidecar, no sidecar without a document, no
//!   stray JSON), reported all at once;
//! - [`Verdict`]: the sidecar of the judged corpora (requests, results, packets,
//!   governed packets), with [`Verdict::rules`] (well-formed sidecars, names after the
//!   attack), [`mismatch`] (how a judgement differs from it) and [`reason_lines`]
//!   (every reason points at a real line and says something);
//! - [`run_all`]: checks every fixture, `jobs` at a time, and fails once with every
//!   mismatch, so one run shows the whole picture.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use runner_core::request::Reason;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

pub const SIDECAR_SUFFIX: &str = ".expect.json";

/// The repository's `tests/<name>` directory.
pub fn corpus_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests")
        .join(name)
}

/// One document of a corpus and what its sidecar expects of it.
pub struct Fixture<E> {
    /// The name the document and its sidecar share (the attack it carries).
    pub name: String,
    /// The document (`<name>.<ext>`).
    pub path: PathBuf,
    pub expect: E,
}

/// What [`load`] pairs and how strictly.
pub struct Pairing<'a> {
    /// The documents' extension (without the dot).
    pub ext: &'a str,
    /// File names that are neither documents nor sidecars (a catalog, a generator).
    pub ignore: &'a [&'a str],
    /// A sidecar may stand alone: its document is named inside it (`"request"`).
    pub lone_sidecars: bool,
}

impl<'a> Pairing<'a> {
    pub fn documents(ext: &'a str) -> Self {
        Pairing {
            ext,
            ignore: &[],
            lone_sidecars: false,
        }
    }
}

fn file_name(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

/// Every `<name>.<ext>` in `dir` with its parsed sidecar, sorted by name. Panics, naming
/// every problem at once, when a document lacks its sidecar, a sidecar its document
/// (unless `lone_sidecars`), a sidecar does not parse as `E`, or a JSON file is neither.
pub fn load<E: DeserializeOwned>(dir: &Path, pairing: &Pairing) -> Vec<Fixture<E>> {
    let suffix = format!(".{}", pairing.ext);
    let mut docs = BTreeSet::new();
    let mut sidecars = BTreeSet::new();
    let mut problems = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if !path.symlink_metadata().unwrap().is_file() {
            continue;
        }
        let n = file_name(&path);
        if pairing.ignore.contains(&n.as_str()) {
            continue;
        }
        if let Some(name) = n.strip_suffix(SIDECAR_SUFFIX) {
            sidecars.insert(name.to_owned());
        } else if let Some(name) = n.strip_suffix(&suffix) {
            docs.insert(name.to_owned());
        } else if n.ends_with(".json") {
            problems.push(format!(
                "{n}: a JSON file that is not a `*{SIDECAR_SUFFIX}`"
            ));
        }
    }
    for name in docs.difference(&sidecars) {
        problems.push(format!("{name}{suffix}: no sidecar {name}{SIDECAR_SUFFIX}"));
    }
    if !pairing.lone_sidecars {
        for name in sidecars.difference(&docs) {
            problems.push(format!(
                "{name}{SIDECAR_SUFFIX}: no document {name}{suffix}"
            ));
        }
    }
    let mut out = Vec::new();
    for name in sidecars {
        let sidecar = dir.join(format!("{name}{SIDECAR_SUFFIX}"));
        let parsed = std::fs::read_to_string(&sidecar)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str::<E>(&t).map_err(|e| e.to_string()));
        match parsed {
            Ok(expect) => out.push(Fixture {
                path: dir.join(format!("{name}{suffix}")),
                name,
                expect,
            }),
            Err(e) => problems.push(format!("{name}{SIDECAR_SUFFIX}: {e}")),
        }
    }
    assert!(
        problems.is_empty(),
        "{}:\n  {}",
        dir.display(),
        problems.join("\n  ")
    );
    out
}

/// Runs `check` on every fixture, `jobs` at a time, and fails once listing every
/// problem (each prefixed with its fixture's name). Returns what each check returned
/// besides its problems (a timing, say), in fixture order.
pub fn run_all<E: Sync, T: Send>(
    what: &str,
    fixtures: &[Fixture<E>],
    jobs: usize,
    check: impl Fn(&Fixture<E>) -> (Vec<String>, T) + Sync,
) -> Vec<T> {
    let next = AtomicUsize::new(0);
    let done = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..jobs.max(1) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(f) = fixtures.get(i) else { break };
                    let got = check(f);
                    done.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push((i, got));
                }
            });
        }
    });
    let mut done = done.into_inner().unwrap_or_else(|p| p.into_inner());
    done.sort_by_key(|(i, _)| *i);
    let mut failures = Vec::new();
    let mut values = Vec::new();
    for (i, (problems, value)) in done {
        let name = &fixtures[i].name;
        failures.extend(problems.into_iter().map(|p| format!("{name}: {p}")));
        values.push(value);
    }
    assert!(
        failures.is_empty(),
        "{} problems over {} {what} fixtures:\n{}",
        failures.len(),
        fixtures.len(),
        failures.join("\n")
    );
    values
}

/// The sidecar of a judged corpus:
///
/// ```json
/// {"verdict": "REJECT", "codes": ["hash.body_mismatch"], "lines": {"hash.body_mismatch": 14},
///  "notes": ["artifacts.not_checked"], "catalog": false, "note": "why the fixture exists"}
/// ```
///
/// `codes` is the exact set of reason codes (sorted, unique); `notes` the exact set of
/// note codes (default none); `lines` pins the line of some reasons; `catalog` (governed
/// packets only, default true) says whether `tests/governed/catalog.json` is given.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Verdict {
    pub verdict: String,
    pub codes: Vec<String>,
    #[serde(default)]
    pub lines: BTreeMap<String, usize>,
    #[serde(default)]
    pub notes: Vec<String>,
    #[serde(default)]
    pub catalog: Option<bool>,
    /// Why the fixture exists (for a fixture that exposed a bug, the bug).
    #[serde(default)]
    pub note: Option<String>,
}

impl Verdict {
    /// What is wrong with this sidecar itself, named `name`.
    pub fn rules(&self, name: &str) -> Vec<String> {
        let mut problems = Vec::new();
        match self.verdict.as_str() {
            "ACCEPT" if !self.codes.is_empty() => problems.push("an ACCEPT lists codes".into()),
            "REJECT" if self.codes.is_empty() => problems.push("a REJECT lists no codes".into()),
            "ACCEPT" | "REJECT" => {}
            other => problems.push(format!("verdict {other:?} is neither ACCEPT nor REJECT")),
        }
        let sorted: Vec<String> = self
            .codes
            .iter()
            .cloned()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if sorted != self.codes {
            problems.push("codes must be sorted and unique".into());
        }
        for code in self.lines.keys() {
            if !self.codes.contains(code) {
                problems.push(format!("pins the line of {code}, which is not in codes"));
            }
        }
        if !name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        {
            problems.push("fixture names are lowercase-kebab-case, named after the attack".into());
        }
        problems
    }
}

/// The sidecar rules over a whole corpus, and enough fixtures of each verdict.
pub fn check_sidecars(
    what: &str,
    fixtures: &[Fixture<Verdict>],
    min_reject: usize,
    min_accept: usize,
) {
    let count = |v: &str| fixtures.iter().filter(|f| f.expect.verdict == v).count();
    let (accepts, rejects) = (count("ACCEPT"), count("REJECT"));
    assert!(
        rejects >= min_reject,
        "{what}: {rejects} REJECT fixtures; at least {min_reject} wanted"
    );
    assert!(
        accepts >= min_accept,
        "{what}: {accepts} ACCEPT fixtures; keep at least {min_accept} valid variants"
    );
    let problems: Vec<String> = fixtures
        .iter()
        .flat_map(|f| {
            f.expect
                .rules(&f.name)
                .into_iter()
                .map(|p| format!("{}: {p}", f.name))
        })
        .collect();
    assert!(
        problems.is_empty(),
        "{what}: malformed sidecars:\n  {}",
        problems.join("\n  ")
    );
}

/// The sorted, unique codes of `reasons`.
pub fn code_set(reasons: &[Reason]) -> Vec<String> {
    reasons
        .iter()
        .map(|r| r.code.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// `reasons`, one indented line each (`code:line message`).
pub fn show(reasons: &[Reason]) -> String {
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

/// How a judgement (`verdict`, `reasons`, `notes`) differs from the sidecar of `f`, if
/// it does: a paragraph naming the fixture, each difference and what was said.
pub fn mismatch(
    f: &Fixture<Verdict>,
    verdict: &str,
    reasons: &[Reason],
    notes: &[Reason],
) -> Option<String> {
    let e = &f.expect;
    let mut problems = Vec::new();
    if verdict != e.verdict {
        problems.push(format!("verdict: expected {}, got {verdict}", e.verdict));
    }
    let got = code_set(reasons);
    if got != e.codes {
        problems.push(format!("codes: expected {:?}, got {got:?}", e.codes));
    }
    let got_notes = code_set(notes);
    if got_notes != e.notes {
        problems.push(format!("notes: expected {:?}, got {got_notes:?}", e.notes));
    }
    for (code, line) in &e.lines {
        if !reasons
            .iter()
            .any(|r| &r.code == code && r.line == Some(*line))
        {
            let seen: Vec<String> = reasons
                .iter()
                .filter(|r| &r.code == code)
                .map(|r| r.line.map_or("-".into(), |l| l.to_string()))
                .collect();
            problems.push(format!(
                "line of {code}: expected {line}, got [{}]",
                seen.join(", ")
            ));
        }
    }
    if problems.is_empty() {
        return None;
    }
    let note = e
        .note
        .as_deref()
        .map(|n| format!("    note: {n}\n"))
        .unwrap_or_default();
    Some(format!(
        "  {}\n    {}\n{note}    reasons:\n{}    notes:\n{}",
        file_name(&f.path),
        problems.join("\n    "),
        show(reasons),
        show(notes)
    ))
}

/// Fails once, listing every fixture whose judgement differs from its sidecar.
pub fn assert_no_mismatch(what: &str, total: usize, failures: Vec<String>) {
    assert!(
        failures.is_empty(),
        "{} of {total} {what} fixtures disagree with their sidecars:\n{}",
        failures.len(),
        failures.join("")
    );
}

/// Every reason of a document of `bytes` points at one of its lines (or none) and says
/// something.
pub fn reason_lines<'a>(
    bytes: &[u8],
    reasons: impl IntoIterator<Item = &'a Reason>,
) -> Vec<String> {
    let line_count = bytes.split(|&b| b == b'\n').count();
    let mut problems = Vec::new();
    for r in reasons {
        if r.message.trim().is_empty() {
            problems.push(format!("{} has an empty message", r.code));
        }
        if r.line.is_some_and(|l| l == 0 || l > line_count) {
            problems.push(format!(
                "{} points at line {:?} of a {line_count}-line file",
                r.code, r.line
            ));
        }
    }
    problems
}
