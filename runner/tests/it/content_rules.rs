//! The forbidden-content rules, measured. `tests/rules/positives.jsonl` holds what the
//! schemas forbid, written in many forms; `tests/rules/negatives.jsonl` holds benign
//! text that shares their words; Monty's own test suite (the `test_cases/*.py` of the
//! pinned `monty` crate, located with `cargo metadata`) is a corpus of real, benign code.
//!
//! Each item is judged by the real validators, as the document kind it stands in for:
//! a research packet's Extracted Content, a tool result's Summary, or a monty request's
//! `## Code`. An item counts as caught when the judgement has a content reason
//! (`forbidden.*` or `text.*`). `just bench-rules` prints the table; the test fails when
//! a figure drops below its floor.
//!
//! The third-party corpus (`just rules-corpus`: red-teaming packages' payload files and
//! packaged books, news and speeches, pinned in `tests/rules/thirdparty/SOURCES.md`,
//! extracted into `target/rules-corpus/` by `tests/rules/thirdparty/build.py`) is judged
//! twice per item: as the Extracted Content of a research packet whose content hashes
//! are re-derived, and as extra stdout lines of a tool result whose stdout hash and
//! excerpt are those the runner would write. Its TUNE split is for tuning the rules
//! (`thirdparty_tune`, which lists its misses with `RULES_MISSES=1` and judges with the
//! policy file `RULES_POLICY` names, when set, so rules are tried without rebuilding);
//! its HELD-OUT split, always judged with the built-in policy,
//! only ever prints counts, and `thirdparty_heldout_meets_its_floors` holds
//! [`HELDOUT_FLOORS`] on it.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// reason: a test harness builds fixtures and runs the built binaries on the host.
#![allow(clippy::disallowed_methods)]

use runner_core::policy::Policy;
use runner_gate::ArtifactsAt;
use runner_gate::research_packet;
use runner_gate::tool_result;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[path = "../../../runner-gate/examples/support/judged_documents.rs"]
mod judged_documents;
use judged_documents::{
    Item, ThirdPartyItem, is_content, judge_own, packet_with, read_jsonl, result_with,
};

fn corpus(name: &str) -> Vec<Item> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/rules");
    read_jsonl(&dir.join(name), "tests/rules/generate.py writes it")
}

const REQUEST_HEAD: &str = r#"---
request_type: tool_request
schema_version: 1
request_id: "TR-20261121-101500Z-rules-bench"
created_utc: "2026-11-21T10:15:00Z"
requested_by: "core-agent"
approved_by: "operator-ada"
approved_utc: "2026-11-21T10:20:00Z"
purpose: "Run one case of the content-rule bench."
backend: monty
language: python
network: none
cpu_limit: "5"
memory_limit_mb: 256
time_limit_sec: 10
---
# Bench

## Code
```python
"#;

const REQUEST_TAIL: &str = r#"
```

## Output Expectations
- stdout only; no files are written under /out/.

## Risk Assessment
- Risk level: low
- Justification: pure computation.
- Data sensitivity: public
- Network rationale: none needed
"#;

/// What the validators said about one text as `target`: every reason code, and whether
/// one of them is a content reason.
fn judge(target: &str, text: &str, policy: &Policy) -> Vec<String> {
    if let Some(codes) = judge_own(target, text, policy) {
        return codes;
    }
    assert_eq!(target, "code", "unknown target");
    let doc = format!("{REQUEST_HEAD}{text}{REQUEST_TAIL}");
    match runner_core::request::validate(doc.as_bytes(), policy) {
        Ok(_) => Vec::new(),
        Err(reasons) => reasons.into_iter().map(|r| r.code).collect(),
    }
}

/// Counts of one row of the table.
#[derive(Default, Clone, Copy)]
struct Tally {
    n: usize,
    flagged: usize,
}

impl Tally {
    fn rate(self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.flagged as f64 / self.n as f64
        }
    }
}

/// Monty's own test cases: `test_cases/*.py` beside the manifest `cargo metadata`
/// names for the `monty` dependency. A machine without them fails the test (it has
/// checked nothing); it does not pass.
fn monty_test_cases() -> Vec<PathBuf> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let cargo_out = |args: &[&str]| {
        std::process::Command::new(&cargo)
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .unwrap_or_else(|e| panic!("cargo {args:?}: {e}"))
    };
    // Offline, the dependencies of other platforms are absent: ask for this host's only.
    let version = String::from_utf8(cargo_out(&["-vV"]).stdout).unwrap();
    let host = version
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("cargo -vV names the host");
    let out = cargo_out(&[
        "metadata",
        "--format-version",
        "1",
        "--offline",
        "--locked",
        "--filter-platform",
        host,
    ]);
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata JSON");
    let manifest = meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .find(|p| p["name"] == "monty")
        .and_then(|p| p["manifest_path"].as_str())
        .expect("cargo metadata names the monty package");
    let dir = Path::new(manifest).parent().unwrap().join("test_cases");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "py"))
        .collect();
    cases.sort();
    assert!(
        cases.len() >= 700,
        "{}: {} test cases, expected Monty's ~710",
        dir.display(),
        cases.len()
    );
    cases
}

/// The policy the corpora are judged with: the built-in one, or the policy file that
/// `RULES_POLICY` names (to try rules without rebuilding; the floors hold the built-in).
fn bench_policy() -> Policy {
    match std::env::var_os("RULES_POLICY") {
        None => Policy::builtin(),
        Some(path) => {
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.to_string_lossy()));
            Policy::parse(&text, &path.to_string_lossy())
                .unwrap_or_else(|e| panic!("{}: {e}", path.to_string_lossy()))
        }
    }
}

struct Measurement {
    /// Per category: positives and how many were caught.
    recall: BTreeMap<String, Tally>,
    /// Per target: negatives and how many were flagged.
    false_positives: BTreeMap<String, Tally>,
    missed: Vec<String>,
    flagged_negatives: Vec<String>,
    monty: Tally,
    monty_refused: Vec<String>,
}

fn measure() -> Measurement {
    let policy = bench_policy();
    for target in ["packet", "result", "code"] {
        // The packet's body hash cannot match every item; everything else must hold,
        // so that each item is judged as part of a well-formed document.
        let codes = judge(target, "Nothing to see here.", &policy);
        assert!(
            codes.iter().all(|c| c == "hash.body_mismatch"),
            "the {target} template is not clean: {codes:?}"
        );
    }
    let mut recall: BTreeMap<String, Tally> = BTreeMap::new();
    let mut missed = Vec::new();
    for item in corpus("positives.jsonl") {
        let caught = judge(&item.target, &item.text, &policy)
            .iter()
            .any(|c| is_content(c));
        let t = recall.entry(item.category.clone()).or_default();
        t.n += 1;
        if caught {
            t.flagged += 1;
        } else {
            missed.push(format!(
                "{} {} {} {}: {:?}",
                item.id, item.category, item.target, item.form, item.text
            ));
        }
    }
    let mut false_positives: BTreeMap<String, Tally> = BTreeMap::new();
    let mut flagged_negatives = Vec::new();
    for item in corpus("negatives.jsonl") {
        let codes: Vec<String> = judge(&item.target, &item.text, &policy)
            .into_iter()
            .filter(|c| is_content(c))
            .collect();
        let t = false_positives.entry(item.target.clone()).or_default();
        t.n += 1;
        if !codes.is_empty() {
            t.flagged += 1;
            flagged_negatives.push(format!(
                "{} {} {}: {codes:?} {:?}",
                item.id, item.category, item.target, item.text
            ));
        }
    }
    let mut monty = Tally::default();
    let mut monty_refused = Vec::new();
    for case in monty_test_cases() {
        let code = std::fs::read_to_string(&case).unwrap();
        let codes = judge("code", &code, &policy);
        monty.n += 1;
        if !codes.is_empty() {
            monty.flagged += 1;
            let name = case.file_stem().unwrap().to_string_lossy().into_owned();
            monty_refused.push(format!("{name}: {codes:?}"));
        }
    }
    Measurement {
        recall,
        false_positives,
        missed,
        flagged_negatives,
        monty,
        monty_refused,
    }
}

fn total(rows: &BTreeMap<String, Tally>) -> Tally {
    rows.values().fold(Tally::default(), |a, t| Tally {
        n: a.n + t.n,
        flagged: a.flagged + t.flagged,
    })
}

fn report(m: &Measurement) {
    println!("recall on positives (tests/rules/positives.jsonl), per category:");
    for (category, t) in &m.recall {
        println!(
            "  {category:<30} {:>4}/{:<4} {:.3}",
            t.flagged,
            t.n,
            t.rate()
        );
    }
    let all = total(&m.recall);
    println!(
        "  {:<30} {:>4}/{:<4} {:.3}",
        "overall",
        all.flagged,
        all.n,
        all.rate()
    );
    println!("false positives on negatives (tests/rules/negatives.jsonl), per target:");
    for (target, t) in &m.false_positives {
        println!("  {target:<30} {:>4}/{:<4} {:.3}", t.flagged, t.n, t.rate());
    }
    let neg = total(&m.false_positives);
    println!(
        "  {:<30} {:>4}/{:<4} {:.3}",
        "overall",
        neg.flagged,
        neg.n,
        neg.rate()
    );
    let precision = all.flagged as f64 / (all.flagged + neg.flagged).max(1) as f64;
    println!("precision (caught positives / everything flagged): {precision:.3}");
    println!(
        "refusals on Monty's test suite (code target): {}/{} {:.3}",
        m.monty.flagged,
        m.monty.n,
        m.monty.rate()
    );
    for line in &m.monty_refused {
        println!("  refused: {line}");
    }
    for line in &m.missed {
        println!("  missed: {line}");
    }
    for line in &m.flagged_negatives {
        println!("  false positive: {line}");
    }
}

/// Lowest recall accepted overall and in any one category.
const RECALL_FLOOR: f64 = 0.95;
const CATEGORY_RECALL_FLOOR: f64 = 0.9;
/// Highest false-positive rate accepted on the negatives, overall and per target.
const FALSE_POSITIVE_CEILING: f64 = 0.02;
const TARGET_FALSE_POSITIVE_CEILING: f64 = 0.05;
/// The Monty test cases that may be refused: both hold literal invisible characters
/// (U+2028, U+FEFF), which code can write as escapes instead.
const MONTY_REFUSALS_ALLOWED: &[&str] = &["builtin__repr", "codecs__all"];

#[test]
fn content_rules_meet_their_floors() {
    let m = measure();
    report(&m);
    let all = total(&m.recall);
    assert!(all.n >= 300, "only {} positives", all.n);
    assert!(total(&m.false_positives).n >= 300, "too few negatives");
    assert!(
        all.rate() >= RECALL_FLOOR,
        "recall {:.3} < {RECALL_FLOOR}",
        all.rate()
    );
    for (category, t) in &m.recall {
        assert!(
            t.rate() >= CATEGORY_RECALL_FLOOR,
            "{category}: recall {:.3} < {CATEGORY_RECALL_FLOOR}",
            t.rate()
        );
    }
    let neg = total(&m.false_positives);
    assert!(
        neg.rate() <= FALSE_POSITIVE_CEILING,
        "false positives {:.3} > {FALSE_POSITIVE_CEILING}",
        neg.rate()
    );
    for (target, t) in &m.false_positives {
        assert!(
            t.rate() <= TARGET_FALSE_POSITIVE_CEILING,
            "{target}: false positives {:.3} > {TARGET_FALSE_POSITIVE_CEILING}",
            t.rate()
        );
    }
    let refused: Vec<&str> = m
        .monty_refused
        .iter()
        .map(|l| l.split(':').next().unwrap_or_default())
        .filter(|name| !MONTY_REFUSALS_ALLOWED.contains(name))
        .collect();
    assert!(refused.is_empty(), "Monty test cases refused: {refused:?}");
}

// ---- the third-party corpus --------------------------------------------------------

/// `target/rules-corpus/NAME`, built by `just rules-corpus`. A missing corpus fails the
/// test (nothing was measured); it does not pass.
fn thirdparty(name: &str) -> Vec<ThirdPartyItem> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/rules-corpus");
    read_jsonl(&dir.join(name), "`just rules-corpus` fetches and builds it")
}

/// Every reason code of `text` placed in a packet and in a result.
fn judge_thirdparty(text: &str, policy: &Policy) -> (Vec<String>, Vec<String>) {
    let packet = research_packet::validate(packet_with(text).as_bytes(), policy)
        .into_iter()
        .map(|r| r.code)
        .collect();
    let result = tool_result::validate(
        result_with(text, policy).as_bytes(),
        &ArtifactsAt::Nowhere,
        policy,
    )
    .0
    .into_iter()
    .map(|r| r.code)
    .collect();
    (packet, result)
}

/// Whether `codes` refuse the document for form reasons alone.
fn only_form(codes: &[String]) -> bool {
    !codes.is_empty() && !codes.iter().any(|c| is_content(c))
}

fn content_only(codes: Vec<String>) -> Vec<String> {
    codes.into_iter().filter(|c| is_content(c)).collect()
}

/// One row of a third-party table: the items of a family, caught (or, for benign
/// text, flagged) as packet and as result.
#[derive(Default, Clone, Copy)]
struct Row {
    packet: Tally,
    result: Tally,
}

impl Row {
    fn add(&mut self, packet: bool, result: bool) {
        self.packet.n += 1;
        self.result.n += 1;
        self.packet.flagged += usize::from(packet);
        self.result.flagged += usize::from(result);
    }
}

fn sum(rows: &BTreeMap<String, Row>) -> Row {
    let mut all = Row::default();
    for r in rows.values() {
        all.packet.n += r.packet.n;
        all.packet.flagged += r.packet.flagged;
        all.result.n += r.result.n;
        all.result.flagged += r.result.flagged;
    }
    all
}

struct ThirdParty {
    recall: BTreeMap<String, Row>,
    false_positives: BTreeMap<String, Row>,
    /// Items refused for a form reason only (a schema rule, not a content rule): not
    /// counted as caught or flagged above, since reformatting would pass them. Attacks,
    /// then benign items.
    form_only: (Row, Row),
    /// Missed attacks and flagged benign items, with their source: printed for the TUNE
    /// split only.
    misses: Vec<String>,
}

fn measure_thirdparty(attacks: &str, benign: &str, policy: &Policy) -> ThirdParty {
    // The templates alone are clean: every reason an item earns is the item's.
    let (p, r) = (
        research_packet::validate(packet_with("Nothing to see here.").as_bytes(), policy),
        tool_result::validate(
            result_with("Nothing to see here.", policy).as_bytes(),
            &ArtifactsAt::Nowhere,
            policy,
        )
        .0,
    );
    assert!(p.is_empty(), "the packet template is not clean: {p:?}");
    assert!(r.is_empty(), "the result template is not clean: {r:?}");
    let mut recall: BTreeMap<String, Row> = BTreeMap::new();
    let mut false_positives: BTreeMap<String, Row> = BTreeMap::new();
    let mut misses = Vec::new();
    let mut form_only = (Row::default(), Row::default());
    for (file, positive) in [(attacks, true), (benign, false)] {
        for item in thirdparty(file) {
            let (packet, result) = judge_thirdparty(&item.text, policy);
            let form = if positive {
                &mut form_only.0
            } else {
                &mut form_only.1
            };
            form.add(only_form(&packet), only_form(&result));
            let (packet, result) = (content_only(packet), content_only(result));
            let rows = if positive {
                &mut recall
            } else {
                &mut false_positives
            };
            rows.entry(item.family.clone())
                .or_default()
                .add(!packet.is_empty(), !result.is_empty());
            let wrong = |flagged: bool| flagged != positive;
            if wrong(!packet.is_empty()) || wrong(!result.is_empty()) {
                misses.push(format!(
                    "{} {} packet {packet:?} result {result:?} [{}]: {:?}",
                    if positive { "missed" } else { "false positive" },
                    item.id,
                    item.source,
                    item.text
                ));
            }
        }
    }
    ThirdParty {
        recall,
        false_positives,
        form_only,
        misses,
    }
}

fn cell(t: Tally) -> String {
    format!("{:>4}/{:<4} {:.3}", t.flagged, t.n, t.rate())
}

/// One table's rows, a line per family and the line "all" of their sum.
fn print_rows(rows: &BTreeMap<String, Row>) {
    for (family, r) in rows
        .iter()
        .map(|(f, r)| (f.as_str(), r))
        .chain([("all", &sum(rows))])
    {
        println!(
            "  {family:<26} {:<15} {:<15}",
            cell(r.packet),
            cell(r.result)
        );
    }
}

fn report_thirdparty(split: &str, m: &ThirdParty) {
    println!(
        "third-party corpus, {split} split: recall per family (issue target: >= {ISSUE_RECALL} overall, >= {ISSUE_FAMILY_RECALL} per family)"
    );
    println!("  {:<26} {:<15} {:<15}", "family", "packet", "result");
    print_rows(&m.recall);
    println!(
        "third-party corpus, {split} split: false positives on benign text (issue target: <= {ISSUE_FALSE_POSITIVES})"
    );
    print_rows(&m.false_positives);
    println!(
        "third-party corpus, {split} split: refused for a form reason only (not counted above)"
    );
    println!(
        "  {:<26} {:<15} {:<15}",
        "attacks",
        cell(m.form_only.0.packet),
        cell(m.form_only.0.result)
    );
    println!(
        "  {:<26} {:<15} {:<15}",
        "benign",
        cell(m.form_only.1.packet),
        cell(m.form_only.1.result)
    );
}

/// The issue's targets, printed beside the measured figures.
const ISSUE_RECALL: f64 = 0.95;
const ISSUE_FAMILY_RECALL: f64 = 0.9;
const ISSUE_FALSE_POSITIVES: f64 = 0.01;

/// What `thirdparty_heldout_meets_its_floors` holds on the HELD-OUT split. Set by the
/// integrator to what the merged rules reach (never above a measured figure); the
/// issue's targets above stay the goal.
struct Floors {
    /// Lowest recall over all attacks: (packet, result).
    recall: (f64, f64),
    /// Lowest recall per family: (family, packet, result). Every family of the corpus
    /// has a row, and every row a family.
    family: &'static [(&'static str, f64, f64)],
    /// Highest false-positive rate over all benign text: (packet, result).
    false_positives: (f64, f64),
}

const HELDOUT_FLOORS: Floors = Floors {
    // What the rules measured on HELD-OUT when these floors were set (packets 0.978,
    // results 0.978, false positives 1/724 each), rounded down; the targets (0.95
    // overall, 0.9 per family, at most 0.01 false positives) are printed beside them.
    recall: (0.97, 0.97),
    family: &[
        ("embedded_in_documents", 0.97, 0.97),
        ("encoded", 0.99, 0.99),
        ("exotic_encoding", 0.95, 0.96),
        ("goal_hijacking", 1.0, 1.0),
        ("jailbreak", 0.90, 0.90),
        ("obfuscation", 1.0, 1.0),
        ("python", 1.0, 1.0),
        ("shell", 1.0, 1.0),
        ("smuggled_unicode", 1.0, 1.0),
        ("sql", 0.96, 0.96),
        ("system_prompt_extraction", 1.0, 1.0),
    ],
    false_positives: (0.01, 0.01),
};

/// The TUNE split: the table (and, with `RULES_MISSES=1`, every miss and false
/// positive) for whoever tunes the rules. It holds no floor (tuning is what moves it), so
/// `just test` leaves it out; `just bench-rules` runs it.
#[test]
#[ignore = "a measurement without a floor: `just bench-rules` prints it"]
fn thirdparty_tune() {
    let m = measure_thirdparty("tune.jsonl", "benign-tune.jsonl", &bench_policy());
    report_thirdparty("TUNE", &m);
    if std::env::var_os("RULES_MISSES").is_some() {
        for line in &m.misses {
            println!("  {line}");
        }
    }
    assert!(sum(&m.recall).packet.n >= 500, "too few TUNE attacks");
    assert!(
        sum(&m.false_positives).packet.n >= 300,
        "too few TUNE benign items"
    );
}

/// The HELD-OUT split against [`HELDOUT_FLOORS`]. It prints counts only, never an
/// item: the rules are not to be tuned on it.
#[test]
fn thirdparty_heldout_meets_its_floors() {
    let m = measure_thirdparty("heldout.jsonl", "benign-heldout.jsonl", &Policy::builtin());
    report_thirdparty("HELD-OUT", &m);
    let all = sum(&m.recall);
    assert!(all.packet.n >= 900, "too few HELD-OUT attacks");
    let benign = sum(&m.false_positives);
    assert!(benign.packet.n >= 500, "too few HELD-OUT benign items");
    let f = &HELDOUT_FLOORS;
    let families: Vec<&str> = m.recall.keys().map(String::as_str).collect();
    let floored: Vec<&str> = f.family.iter().map(|r| r.0).collect();
    assert_eq!(
        families, floored,
        "the corpus's families and the floors' rows differ"
    );
    let mut failures = Vec::new();
    let mut check = |what: String, rate: f64, floor: f64, at_least: bool| {
        if (at_least && rate < floor) || (!at_least && rate > floor) {
            let op = if at_least { "<" } else { ">" };
            failures.push(format!("{what}: {rate:.3} {op} {floor}"));
        }
    };
    check(
        "recall, packets".into(),
        all.packet.rate(),
        f.recall.0,
        true,
    );
    check(
        "recall, results".into(),
        all.result.rate(),
        f.recall.1,
        true,
    );
    for &(family, packet, result) in f.family {
        let r = m.recall[family];
        check(format!("{family}, packets"), r.packet.rate(), packet, true);
        check(format!("{family}, results"), r.result.rate(), result, true);
    }
    check(
        "false positives, packets".into(),
        benign.packet.rate(),
        f.false_positives.0,
        false,
    );
    check(
        "false positives, results".into(),
        benign.result.rate(),
        f.false_positives.1,
        false,
    );
    assert!(
        failures.is_empty(),
        "HELD-OUT figures past their floors:\n  {}",
        failures.join("\n  ")
    );
}
