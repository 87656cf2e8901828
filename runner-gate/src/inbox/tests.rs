use super::scan::companion_stem;
use super::*;

/// The gate's companion suffixes are the names `runner exec` writes (and the
/// signature `runner approve` writes), so a renamed one fails here rather than being split off at the gate (a new file in the set
/// fails `tests/gate_results.rs`, which pins what `exec` writes for one run).
#[test]
fn companion_suffixes_are_the_names_exec_writes() {
    use runner_core::lock::statement::{envelope_file_name, statement_file_name};
    let id = "TS-20261121-101500Z-TR-x";
    assert_eq!(
        [
            runner_core::lock::lock_file_name(id),
            statement_file_name(id),
            envelope_file_name(id),
            format!("{id}.md.sig"),
        ],
        COMPANION_SUFFIXES.map(|s| format!("{id}{s}"))
    );
    for a in COMPANION_SUFFIXES {
        assert_eq!(
            companion_stem(format!("{id}{a}").as_bytes()),
            Some(id.as_bytes())
        );
        for b in COMPANION_SUFFIXES.iter().filter(|b| **b != a) {
            assert!(!a.ends_with(b), "{a} ends with {b}: one file, two results");
        }
    }
    assert_eq!(companion_stem(b"TS-x.md"), None);
    assert_eq!(companion_stem(b"TS-x.json"), None);
}

#[test]
fn safe_names() {
    let cases: &[(&str, (&str, &str))] = &[
        ("TS-1-x.md", ("TS-1-x", ".md")),
        ("packet.json", ("packet", ".json")),
        ("we ird\u{1b}.md", ("we_ird_", ".md")),
        ("x.md.reasons.md", ("x.md.reasons-doc", ".md")),
        ("x.md.reasons.json", ("x.md.reasons-doc", ".json")),
        ("noext", ("noext", "")),
        ("ünï.md", ("_n_", ".md")),
    ];
    for (name, (stem, ext)) in cases {
        assert_eq!(
            safe_name(OsStr::new(name)),
            (stem.to_string(), ext.to_string()),
            "{name}"
        );
    }
}
