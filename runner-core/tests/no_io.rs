//! The core crate stays without I/O: no path into `std::fs`, `std::process`, `std::env`
//! or `std::net` in its library sources (its unit tests, after `#[cfg(test)]`, may read
//! the fixture corpora), no I/O or engine crate among its dependencies, and the
//! `forbid` that keeps `#[allow(clippy::disallowed_methods)]` out of the library.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// reason: this test reads the crate's own sources and manifest.
#![allow(clippy::disallowed_methods)]

use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The library part of a source file: everything before its first `#[cfg(test)]`.
fn library_part(text: &str) -> &str {
    text.find("#[cfg(test)]").map_or(text, |i| &text[..i])
}

const REFUSED: &[&str] = &[
    "std::fs",
    "std::process",
    "std::env",
    "std::net",
    "std::os::",
    "File::",
    "OpenOptions",
    "Command::",
    "TcpStream",
    "UnixStream",
    "stdin()",
    "stdout()",
    "stderr()",
    "println!",
    "eprintln!",
];

fn refused_in(text: &str) -> Vec<&'static str> {
    let code: String = library_part(text)
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    REFUSED
        .iter()
        .copied()
        .filter(|word| code.contains(word))
        .collect()
}

#[test]
fn the_library_sources_name_no_io() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    sources(&root.join("src"), &mut files);
    assert!(files.len() >= 10, "the sources are found: {files:?}");
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for word in refused_in(&text) {
            found.push(format!("{}: {word}", file.display()));
        }
    }
    assert!(found.is_empty(), "I/O in runner-core: {found:#?}");
}

#[test]
fn the_check_finds_io_where_there_is_some() {
    // The scan is not vacuous: the words it refuses are found in code, and only there.
    assert_eq!(
        refused_in("fn f() { let _ = std::fs::read(\"x\"); }"),
        ["std::fs"]
    );
    assert_eq!(
        refused_in("use std::process::Command;\nfn f() { Command::new(\"sh\"); }"),
        ["std::process", "Command::"]
    );
    assert!(refused_in("// std::fs in a comment\nfn f() {}").is_empty());
    assert!(
        refused_in("fn f() {}\n#[cfg(test)]\nmod t { fn g() { std::fs::read(\"x\"); } }")
            .is_empty()
    );
}

#[test]
fn the_library_forbids_exceptions_to_the_authority_lint() {
    let lib =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    assert!(
        lib.contains("#![cfg_attr(not(test), forbid(clippy::disallowed_methods))]"),
        "src/lib.rs must forbid `#[allow(clippy::disallowed_methods)]`"
    );
}

#[test]
fn no_io_or_engine_crate_is_a_dependency() {
    let manifest: toml::Table =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
            .unwrap()
            .parse()
            .unwrap();
    let deps = manifest["dependencies"].as_table().unwrap();
    assert!(
        deps.contains_key("regex"),
        "the dependencies are read: {deps:?}"
    );
    let refused = [
        "runner-sandbox",
        "runner-wasmtime",
        "runner",
        "wasmtime",
        "wasmtime-wasi",
        "tokio",
        "nix",
        "cap-std",
        "tempfile",
        "caps",
        "landlock",
        "seccompiler",
        "ureq",
        "async-nats",
    ];
    let found: Vec<&str> = refused
        .iter()
        .copied()
        .filter(|name| deps.contains_key(*name))
        .collect();
    assert!(found.is_empty(), "runner-core depends on {found:?}");
}
