//! The scale-out examples (`examples/kubernetes/`, `examples/ci-matrix/`) parse as YAML
//! and use only `runner` flags that exist: each `--flag` after `runner serve` or `runner
//! exec` must be listed by that command's `--help`.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// reason: a test harness builds fixtures and runs the built binaries on the host.
#![allow(clippy::disallowed_methods)]

use saphyr_parser::{Event, Parser};
use std::path::{Path, PathBuf};
use std::process::Command;

fn runner_exe() -> &'static str {
    env!("CARGO_BIN_EXE_runner")
}

/// Every scalar of the YAML file, in document order; panics when it does not parse.
fn scalars(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut parser = Parser::new_from_str(&text);
    let mut out = Vec::new();
    while let Some(event) = parser.next_event() {
        match event {
            Ok((Event::Scalar(value, ..), _)) => out.push(value.into_owned()),
            Ok(_) => {}
            Err(e) => panic!("{} does not parse as YAML: {e}", path.display()),
        }
    }
    out
}

fn help(sub: &str) -> String {
    let out = Command::new(runner_exe())
        .args([sub, "--help"])
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn scale_examples_parse_and_use_only_existing_flags() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let files: Vec<PathBuf> = [
        "kubernetes/consumers.yaml",
        "kubernetes/shard-job.yaml",
        "ci-matrix/github-actions.yml",
    ]
    .iter()
    .map(|f| root.join(f))
    .collect();
    let (serve, exec) = (help("serve"), help("exec"));
    let mut checked = 0;
    for file in &files {
        let words: Vec<String> = scalars(file)
            .iter()
            .flat_map(|s| s.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
            .collect();
        let mut current: Option<&str> = None;
        for pair in words.windows(2) {
            if pair[0].ends_with("runner") {
                match pair[1].as_str() {
                    "serve" => current = Some(&serve),
                    "exec" => current = Some(&exec),
                    _ => {}
                }
            }
            let word = pair[1].as_str();
            if let Some(help) = current
                && word.starts_with("--")
            {
                let flag = word.split('=').next().unwrap();
                // The flag as a whole word of the help (not a prefix of a longer one).
                let listed = help.match_indices(flag).any(|(i, _)| {
                    help[i + flag.len()..]
                        .chars()
                        .next()
                        .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '-'))
                });
                assert!(
                    listed,
                    "{}: `{flag}` is not a flag of this runner command",
                    file.display()
                );
                checked += 1;
            }
        }
    }
    // The files do use runner's flags: the check is not vacuous.
    assert!(checked >= 10, "only {checked} flags found");
}
