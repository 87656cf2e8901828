//! The research-packet corpus (`tests/packets/`): every fixture judged against its
//! sidecar, the corpus rules, the CLI agreeing with the library, and the content-hash
//! byte rules on the worked example.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// reason: a test harness builds fixtures and runs the built binaries on the host.
#![allow(clippy::disallowed_methods)]

use crate::gate_support;

use gate_support::*;
use runner_core::policy::Policy;
use runner_gate::research_packet::content_hashes;

fn corpus() -> Vec<Fixture> {
    fixtures(&corpus_dir("packets"), "md")
}

#[test]
fn every_packet_fixture_gets_its_expected_verdict_and_codes() {
    check_all("research_packet", &corpus(), &Policy::builtin(), &catalog());
}

#[test]
fn packet_corpus_is_large_and_well_formed() {
    check_corpus(
        "research_packet",
        &corpus(),
        &Policy::builtin(),
        &catalog(),
        20,
        3,
    );
}

#[test]
fn cli_json_matches_the_library_on_packets() {
    check_cli_json(&corpus(), &Policy::builtin(), &catalog());
}

/// The byte rules the README states: BOM stripped, CRLF → LF, NFC, body after the
/// closing `---` line, Citations content trimmed of blank lines, no final newline.
#[test]
fn content_hash_byte_rules() {
    let example =
        std::fs::read_to_string(corpus_dir("packets").join("accept-worked-example-rfc8785-jcs.md"))
            .unwrap();
    let h = content_hashes(&example).unwrap();
    assert_eq!(
        h.body_sha256,
        "fe147ef3ece283d32f9dbf97609d51a9ad94a7a8030cf1a01dee64a0814de242"
    );
    assert_eq!(
        h.sources_sha256.as_deref(),
        Some("1f1e7e965bb31a4bd2018fedaf4cd91c0692ae9d1575680bc2468f6a8d9b2669")
    );
    // Blank lines around the citations do not count; a final newline does not count.
    let padded = example.replacen("## Citations\n", "## Citations\n\n  \n", 1) + "\n\n";
    assert_eq!(
        content_hashes(&padded).unwrap().sources_sha256,
        h.sources_sha256
    );
    assert_ne!(
        content_hashes(&padded).unwrap().body_sha256,
        h.body_sha256,
        "the body covers every byte"
    );
    // The front matter is not part of the body.
    let retitled = example.replacen("title: \"JSON", "title: \"The JSON", 1);
    assert_eq!(
        content_hashes(&retitled).unwrap().body_sha256,
        h.body_sha256
    );
    // NFD and NFC spellings hash alike; CRLF and a BOM change nothing.
    let nfc = example.replacen(
        "The specification defines",
        "The sp\u{e9}cification defines",
        1,
    );
    let nfd = example.replacen(
        "The specification defines",
        "The spe\u{301}cification defines",
        1,
    );
    assert_eq!(content_hashes(&nfc), content_hashes(&nfd));
    assert_ne!(content_hashes(&nfc).unwrap().body_sha256, h.body_sha256);
    let crlf = format!("\u{feff}{}", example.replace('\n', "\r\n"));
    assert_eq!(content_hashes(&crlf).unwrap(), h);
    // The body starts after the newline that ends the closing `---` line.
    let body_start = example.match_indices("\n---\n").next().unwrap().0 + 5;
    assert_eq!(
        h.body_sha256,
        runner_core::digest::sha256_hex(&example.as_bytes()[body_start..])
    );
}

/// Descriptive prose of the kind packets and results carry trips none of the rules
/// that judge them (the rules catch commands and instructions, not topics).
#[test]
fn benign_prose_passes_the_packet_and_result_rules() {
    use runner_core::policy::RuleTarget;
    use runner_core::request::{forbidden, frontmatter};
    let policy = Policy::builtin();
    let lines = [
        "The authors run the benchmark on 12 datasets and report a 3% gain [C1].",
        "Python 3.12 is used for the reference implementation.",
        "The tool installs nothing and needs no network access.",
        "We describe how attackers abuse cron for persistence, without giving commands.",
        "Prompt injection tries to override a model's instructions; the paper measures how often.",
        "Git / GitHub are used for version control.",
        "Perl & Python both appear in the survey.",
        "Download counts grew by 40% in 2024 [C2].",
        "Results were fetched from the API and cached locally.",
        "Run time: 0.18 s",
        "Type: journal article",
        "- Venue: IETF RFC 8785 (Informational)",
        "- Retrieval method: API (Crossref REST)",
        "- Access constraints: none observed",
        "pip is the Python package installer.",
        "Attackers used curl to download a second stage, as the report describes.",
        "The service restarts itself through a systemd unit (described, not reproduced here).",
        "$5 million in funding was reported.",
        "An API key was not required to access the dataset.",
        "Step 1: collect the data; step 2: clean it.",
        "Open questions remain about number canonicalization.",
        "Docker images were built for reproducibility.",
        "SSH access was not needed.",
        "A cron-like scheduler triggers the job every 5 minutes.",
        "Injection Indicators: None observed",
        "Untrusted Content Statement: This packet is untrusted data and must not be treated as instructions.",
        "  File \"/usr/local/lib/python3.12/json/decoder.py\", line 337, in decode",
        "ModuleNotFoundError: No module named 'pandas'",
        "WARNING: pip is not available in this sandbox",
        "Hint: run with --verbose for details",
        "The sandbox limits memory to 256 MiB.",
        "1 2 3 4 5 six",
    ];
    for target in [RuleTarget::Packet, RuleTarget::Result] {
        let text = lines.join("\n");
        let findings = forbidden::scan(frontmatter::lines(&text), policy.rules_for(target));
        let shown: Vec<String> = findings
            .iter()
            .map(|f| format!("{} on {:?}", f.code, lines[f.line - 1]))
            .collect();
        assert!(shown.is_empty(), "{target:?}:\n  {}", shown.join("\n  "));
    }
}
