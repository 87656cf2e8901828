//! The content rules on the TUNE split of the third-party corpus (`just rules-corpus`)
//! and on the project's own corpus (`tests/rules/*.jsonl`), measured as the `it` tests
//! `content_rules::thirdparty_tune` and `content_rules::content_rules_meet_their_floors`
//! measure them (Monty's suite left out: the rules tuned here do not judge code), without
//! building the runner. `RULES_POLICY` names a policy file to judge with instead of the
//! built-in one, so rules are tried without rebuilding; `RULES_MISSES=FAMILY` lists that
//! family's misses as results (`all` for every family), and every flagged benign item.
//! `RULES_CUT=N` also judges each jailbreak item as a packet with every line cut after N
//! characters, as a result's excerpt cuts a long line at a smaller width: how well the
//! rules know a jailbreak by its opening alone (its misses are listed, cut).
//! `RULES_PROBE=FILE` judges each line of FILE as a packet and as a result and prints
//! the codes. Last, the fixtures of `tests/packets`, `tests/results` and `tests/governed`
//! are judged against their sidecars (verdict, codes, notes and lines), as the `it`
//! tests `gate_packets`, `gate_results` and `gate_governed` judge them.
//! The HELD-OUT split is never read here.

// reason: a developer's tool reads its variables and the corpus files.
#![allow(clippy::disallowed_methods, clippy::unwrap_used, clippy::expect_used)]

use runner_core::policy::Policy;
use runner_gate::ArtifactsAt;
use runner_gate::research_packet;
use runner_gate::tool_result;
use std::collections::BTreeMap;
use std::path::Path;

#[path = "support/judged_documents.rs"]
mod judged_documents;
use judged_documents::{
    Item, ThirdPartyItem, is_content, judge_own, packet_with, read_jsonl, result_with,
};

const RULES_CORPUS: &str = "`just rules-corpus` fetches and builds it";
const OWN_CORPUS: &str = "tests/rules/generate.py writes it";

fn content(codes: impl IntoIterator<Item = String>) -> Vec<String> {
    codes.into_iter().filter(|c| is_content(c)).collect()
}

fn judge_packet(text: &str, policy: &Policy) -> Vec<String> {
    content(
        research_packet::validate(packet_with(text).as_bytes(), policy)
            .into_iter()
            .map(|r| r.code),
    )
}

fn judge_result(text: &str, policy: &Policy) -> Vec<String> {
    content(
        tool_result::validate(
            result_with(text, policy).as_bytes(),
            &ArtifactsAt::Nowhere,
            policy,
        )
        .0
        .into_iter()
        .map(|r| r.code),
    )
}

#[derive(Default, Clone, Copy)]
struct Tally {
    n: usize,
    flagged: usize,
}

impl Tally {
    fn add(&mut self, flagged: bool) {
        self.n += 1;
        self.flagged += usize::from(flagged);
    }
    fn cell(self) -> String {
        let rate = if self.n == 0 {
            0.0
        } else {
            self.flagged as f64 / self.n as f64
        };
        format!("{:>4}/{:<4} {rate:.3}", self.flagged, self.n)
    }
}

fn print_rows(rows: &BTreeMap<String, (Tally, Tally)>) {
    let mut all = (Tally::default(), Tally::default());
    for (family, (p, r)) in rows {
        println!("  {family:<26} {:<15} {:<15}", p.cell(), r.cell());
        all.0.n += p.n;
        all.0.flagged += p.flagged;
        all.1.n += r.n;
        all.1.flagged += r.flagged;
    }
    println!("  {:<26} {:<15} {:<15}", "all", all.0.cell(), all.1.cell());
}

/// Every fixture of `dir` (documents ending in `.{ext}` beside a `.expect.json`) whose
/// judgement differs from its sidecar, with how.
fn fixture_mismatches(dir: &Path, ext: &str, policy: &Policy) -> (usize, Vec<String>) {
    let catalog = runner_gate::Catalog::load(&dir.join("../governed/catalog.json"))
        .expect("the test catalog");
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|x| x == ext)
                && !p.to_string_lossy().ends_with(".expect.json")
                && p.file_name().is_some_and(|n| n != "catalog.json")
        })
        .collect();
    names.sort();
    let mut problems = Vec::new();
    for path in &names {
        let sidecar = path.with_extension("expect.json");
        let Ok(text) = std::fs::read_to_string(&sidecar) else {
            continue;
        };
        let want: serde_json::Value = serde_json::from_str(&text).unwrap();
        let ctx = runner_gate::Context {
            policy,
            catalog: (want["catalog"] != serde_json::Value::Bool(false)).then_some(&catalog),
        };
        let j = runner_gate::judge_file(path, &ctx, runner_gate::Follow::Symlinks)
            .unwrap()
            .0;
        let set = |rs: &[runner_core::markdown::Reason]| {
            let mut v: Vec<String> = rs.iter().map(|r| r.code.clone()).collect();
            v.sort();
            v.dedup();
            v
        };
        let strings = |v: &serde_json::Value| -> Vec<String> {
            let mut v: Vec<String> = v
                .as_array()
                .map(|a| a.iter().map(|x| x.as_str().unwrap().to_owned()).collect())
                .unwrap_or_default();
            v.sort();
            v
        };
        let mut wrong = Vec::new();
        if j.verdict.as_str() != want["verdict"] {
            wrong.push(format!("verdict {}", j.verdict.as_str()));
        }
        if set(&j.reasons) != strings(&want["codes"]) {
            wrong.push(format!(
                "codes {:?}, want {}",
                set(&j.reasons),
                want["codes"]
            ));
        }
        if set(&j.notes) != strings(&want["notes"]) {
            wrong.push(format!("notes {:?}, want {}", set(&j.notes), want["notes"]));
        }
        if let Some(lines) = want["lines"].as_object() {
            for (code, line) in lines {
                if !j
                    .reasons
                    .iter()
                    .any(|r| &r.code == code && r.line.map(|l| l as u64) == line.as_u64())
                {
                    wrong.push(format!("no {code} on line {line}"));
                }
            }
        }
        if !wrong.is_empty() {
            problems.push(format!("fixture {}: {}", path.display(), wrong.join("; ")));
        }
    }
    (names.len(), problems)
}

fn main() {
    let policy = match std::env::var_os("RULES_POLICY") {
        None => Policy::builtin(),
        Some(path) => {
            let p = path.to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"));
            Policy::parse(&text, &p).unwrap_or_else(|e| panic!("{p}: {e}"))
        }
    };
    let misses_of = std::env::var("RULES_MISSES").unwrap_or_default();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let corpus = root.join("target/rules-corpus");
    assert!(judge_packet("Nothing to see here.", &policy).is_empty());
    assert!(judge_result("Nothing to see here.", &policy).is_empty());

    let mut recall: BTreeMap<String, (Tally, Tally)> = BTreeMap::new();
    let mut missed = Vec::new();
    for item in read_jsonl::<ThirdPartyItem>(&corpus.join("tune.jsonl"), RULES_CORPUS) {
        let (p, r) = (
            !judge_packet(&item.text, &policy).is_empty(),
            !judge_result(&item.text, &policy).is_empty(),
        );
        let row = recall.entry(item.family.clone()).or_default();
        row.0.add(p);
        row.1.add(r);
        if (!r || !p) && (misses_of == "all" || misses_of == item.family) {
            missed.push(format!(
                "missed (packet {}, result {}) {}: {:?}",
                if p { "caught" } else { "MISSED" },
                if r { "caught" } else { "MISSED" },
                item.id,
                item.text
            ));
        }
    }
    if let Some(cut) = std::env::var("RULES_CUT")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        let mut t = Tally::default();
        let mut cut_missed = Vec::new();
        for item in read_jsonl::<ThirdPartyItem>(&corpus.join("tune.jsonl"), RULES_CORPUS) {
            if item.family != "jailbreak" {
                continue;
            }
            let opening: Vec<String> = item
                .text
                .split('\n')
                .map(|l| l.chars().take(cut).collect())
                .collect();
            let opening = opening.join("\n");
            let caught = !judge_packet(&opening, &policy).is_empty();
            t.add(caught);
            if !caught {
                cut_missed.push(format!("missed at cut {cut} {}: {opening:?}", item.id));
            }
        }
        println!(
            "jailbreak, packets, every line cut after {cut} characters: {}",
            t.cell()
        );
        missed.extend(cut_missed);
    }
    let mut benign: BTreeMap<String, (Tally, Tally)> = BTreeMap::new();
    let mut flagged = Vec::new();
    for item in read_jsonl::<ThirdPartyItem>(&corpus.join("benign-tune.jsonl"), RULES_CORPUS) {
        let (p, r) = (
            judge_packet(&item.text, &policy),
            judge_result(&item.text, &policy),
        );
        let row = benign.entry(item.family.clone()).or_default();
        row.0.add(!p.is_empty());
        row.1.add(!r.is_empty());
        if !p.is_empty() || !r.is_empty() {
            flagged.push(format!(
                "false positive {} packet {p:?} result {r:?}: {:?}",
                item.id, item.text
            ));
        }
    }
    println!("third-party corpus, TUNE split: recall per family");
    println!("  {:<26} {:<15} {:<15}", "family", "packet", "result");
    print_rows(&recall);
    println!("third-party corpus, TUNE split: false positives on benign text");
    print_rows(&benign);

    let mut own_recall: BTreeMap<String, Tally> = BTreeMap::new();
    let mut own_missed = Vec::new();
    for item in read_jsonl::<Item>(&root.join("tests/rules/positives.jsonl"), OWN_CORPUS) {
        // Code is judged by rules this tool does not tune: left out.
        let Some(codes) = judge_own(&item.target, &item.text, &policy) else {
            continue;
        };
        let caught = !content(codes).is_empty();
        own_recall
            .entry(item.category.clone())
            .or_default()
            .add(caught);
        if !caught {
            own_missed.push(format!(
                "own missed {} {}: {:?}",
                item.id, item.category, item.text
            ));
        }
    }
    let mut own_fp: BTreeMap<String, Tally> = BTreeMap::new();
    let mut own_flagged = Vec::new();
    for item in read_jsonl::<Item>(&root.join("tests/rules/negatives.jsonl"), OWN_CORPUS) {
        let Some(codes) = judge_own(&item.target, &item.text, &policy).map(content) else {
            continue;
        };
        own_fp
            .entry(item.target.clone())
            .or_default()
            .add(!codes.is_empty());
        if !codes.is_empty() {
            own_flagged.push(format!(
                "own false positive {} {codes:?}: {:?}",
                item.id, item.text
            ));
        }
    }
    println!("own corpus (tests/rules, packet and result targets): recall per category");
    for (category, t) in &own_recall {
        println!("  {category:<30} {}", t.cell());
    }
    println!("own corpus: false positives per target");
    for (target, t) in &own_fp {
        println!("  {target:<30} {}", t.cell());
    }
    for line in missed
        .iter()
        .chain(&flagged)
        .chain(&own_missed)
        .chain(&own_flagged)
    {
        println!("{line}");
    }
    if let Ok(probe) = std::env::var("RULES_PROBE") {
        for line in std::fs::read_to_string(&probe).unwrap().lines() {
            if line.trim().is_empty() {
                continue;
            }
            let (p, r) = (judge_packet(line, &policy), judge_result(line, &policy));
            let mark = if p.is_empty() && r.is_empty() {
                "PASS"
            } else {
                "FLAG"
            };
            println!("probe {mark} packet {p:?} result {r:?}: {line}");
        }
    }
    for (dir, ext) in [("packets", "md"), ("results", "md"), ("governed", "json")] {
        let (n, problems) = fixture_mismatches(&root.join("tests").join(dir), ext, &policy);
        println!(
            "fixtures tests/{dir}: {n} judged, {} differ from their sidecars",
            problems.len()
        );
        for p in problems {
            println!("  {p}");
        }
    }
}
