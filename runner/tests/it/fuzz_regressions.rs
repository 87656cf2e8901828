//! Every fuzzing finding, kept, in the normal test suite: each file under
//! `fuzz/regressions/TARGET/` (the inputs that once broke TARGET's invariant) and each
//! seed under `fuzz/corpus/TARGET/` is fed to that target's invariant, the very function
//! the libFuzzer target calls (`fuzz/src/lib.rs`, compiled here through `#[path]`), so a
//! finding that comes back fails `cargo test` without cargo-fuzz.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// reason: a test harness builds fixtures and runs the built binaries on the host.
#![allow(clippy::disallowed_methods)]

#[path = "../../../fuzz/src/lib.rs"]
mod invariants;

use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

/// The files of `dir` (none when it does not exist), sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// Runs `check` on every file of `dir`; returns the files whose invariant failed, each
/// with the panic message.
fn failures(dir: &Path, check: invariants::Invariant) -> (usize, Vec<String>) {
    let files = files(dir);
    let mut failed = Vec::new();
    for file in &files {
        let data = std::fs::read(file).unwrap();
        if let Err(panic) = std::panic::catch_unwind(|| check(&data)) {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            failed.push(format!("{}: {message}", file.display()));
        }
    }
    (files.len(), failed)
}

#[test]
fn every_saved_finding_and_seed_keeps_its_targets_invariant() {
    let root = fuzz_dir();
    let mut failed = Vec::new();
    let mut regressions = 0;
    for (target, check) in invariants::TARGETS {
        let (n, f) = failures(&root.join("regressions").join(target), *check);
        regressions += n;
        failed.extend(f);
        let (seeds, f) = failures(&root.join("corpus").join(target), *check);
        assert!(seeds > 0, "fuzz/corpus/{target} holds no seed");
        failed.extend(f);
    }
    assert!(
        failed.is_empty(),
        "{} input(s) break their fuzz target's invariant:\n{}",
        failed.len(),
        failed.join("\n")
    );
    assert!(
        regressions >= 8,
        "only {regressions} regression inputs found"
    );
}

/// A regression directory for a target the harness does not know would be skipped
/// silently: refuse it.
#[test]
fn every_regression_directory_names_a_target() {
    let known: Vec<&str> = invariants::TARGETS.iter().map(|(t, _)| *t).collect();
    let dirs = std::fs::read_dir(fuzz_dir().join("regressions")).unwrap();
    for dir in dirs {
        let name = dir.unwrap().file_name().into_string().unwrap();
        assert!(
            known.contains(&name.as_str()),
            "fuzz/regressions/{name}: no such target"
        );
    }
}

/// The harness can fail: an input that breaks an invariant is reported with its file.
#[test]
fn a_broken_invariant_is_reported_with_its_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("boom"), b"x").unwrap();
    let (n, failed) = failures(dir.path(), |_| panic!("invariant broken"));
    assert_eq!(n, 1);
    assert_eq!(failed.len(), 1);
    assert!(failed[0].ends_with("boom: invariant broken"), "{failed:?}");
}
