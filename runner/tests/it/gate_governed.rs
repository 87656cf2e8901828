//! The governed-packet corpus (`tests/governed/`, with `catalog.json`): every fixture
//! judged against its sidecar, the corpus rules, the CLI agreeing with the library, and
//! the scoped note when no catalog is given.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// reason: a test harness builds fixtures and runs the built binaries on the host.
#![allow(clippy::disallowed_methods)]

use crate::gate_support;

use gate_support::*;
use runner_core::policy::Policy;

fn corpus() -> Vec<Fixture> {
    fixtures(&corpus_dir("governed"), "json")
}

#[test]
fn every_governed_fixture_gets_its_expected_verdict_and_codes() {
    check_all("governed_packet", &corpus(), &Policy::builtin(), &catalog());
}

#[test]
fn governed_corpus_is_large_and_well_formed() {
    check_corpus(
        "governed_packet",
        &corpus(),
        &Policy::builtin(),
        &catalog(),
        20,
        3,
    );
}

#[test]
fn cli_json_matches_the_library_on_governed_packets() {
    check_cli_json(&corpus(), &Policy::builtin(), &catalog());
}

/// Governed reasons carry no line; without `--catalog` the verdict carries a note
/// instead of passing the content hashes, and the worked example re-derives with it.
#[test]
fn reasons_have_null_lines_and_missing_catalog_is_a_note() {
    let example = corpus_dir("governed").join("accept-worked-example.json");
    let out = runner(&["validate".as_ref(), "--json".as_ref(), example.as_os_str()]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verdict"], "ACCEPT");
    assert_eq!(v["notes"][0]["code"], "CONTENT_HASH_NOT_CHECKED");
    assert!(v["notes"][0]["line"].is_null());

    let catalog = corpus_dir("governed").join("catalog.json");
    let out = runner(&[
        "validate".as_ref(),
        "--json".as_ref(),
        "--catalog".as_ref(),
        catalog.as_os_str(),
        example.as_os_str(),
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verdict"], "ACCEPT");
    assert!(v.get("notes").is_none(), "{v}");

    let tampered = corpus_dir("governed").join("payload-tampered.json");
    let out = runner(&[
        "validate".as_ref(),
        "--json".as_ref(),
        "--catalog".as_ref(),
        catalog.as_os_str(),
        tampered.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["line"].is_null())
    );

    // A catalog that is not a JSON object of strings is a usage error.
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("catalog.json");
    std::fs::write(&bad, "[1, 2]").unwrap();
    let out = runner(&[
        "validate".as_ref(),
        "--catalog".as_ref(),
        bad.as_os_str(),
        example.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(2));
}
