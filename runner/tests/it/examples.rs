//! Every worked example in `examples/` still works: each `TR-*.md` is accepted by the
//! built binary, an ERA request's declared inputs are exactly the files in the
//! `inputs/` folder beside it, with the sha256 the request declares, and every command
//! block of every `examples/*/README.md` runs as a user runs it.
//!
//! The convention for example READMEs (`every_example_readme_runs_as_written`):
//!
//! - Every fence opened with `sh`, `bash` or `shell` is a command block. All the blocks
//!   of one README run in order in one `bash` (`set -euo pipefail`), so a variable set
//!   in one block is seen by the next, from the root of a scratch copy of the
//!   repository's `examples/` and `policies/` (the READMEs' commands are written from
//!   the repository root), with `target/release` there a symlink to the built binaries'
//!   directory and that directory first on `PATH`: `runner` is the built binary.
//! - Every command must succeed, except one whose last line ends with `# exit N`: that
//!   command must exit with N. `# exit N: TEXT` also requires TEXT in what it prints
//!   (stdout and stderr); anything after `# exit N,` is prose.
//! - A block whose fence reads `sh no-run: REASON` is not run. Each one is listed when
//!   the test runs, and the list must equal [`NOT_RUN`]: nothing is skipped silently.
//! - `text` blocks show output as the README's author saw it (paths, times and hashes
//!   differ on every machine) and are not compared.
//! - Every script `examples/*/*.sh` must be run by some block.
//!
//! A failure in `examples/ci-replay` names the command that refreshes its committed
//! baseline (`just refresh-baseline`), which a change of policy, guest or runner makes
//! stale.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// reason: a test harness builds fixtures and runs the built binaries on the host.
#![allow(clippy::disallowed_methods)]

use runner_core::digest::sha256_hex;
use runner_core::policy::Policy;
use runner_core::request;
use runner_core::request::BackendKind;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// Files under `dir` (recursively) for which `keep` holds, sorted.
fn walk(dir: &Path, keep: &dyn Fn(&Path) -> bool) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        let entries =
            std::fs::read_dir(&d).unwrap_or_else(|e| panic!("cannot read {}: {e}", d.display()));
        for entry in entries {
            let path = entry.expect("a readable directory entry").path();
            let kind = std::fs::symlink_metadata(&path)
                .expect("metadata")
                .file_type();
            if kind.is_dir() {
                pending.push(path);
            } else if keep(&path) {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

fn tool_requests() -> Vec<PathBuf> {
    let is_request = |p: &Path| {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        name.starts_with("TR-") && name.ends_with(".md")
    };
    let requests = walk(&examples_dir(), &is_request);
    assert!(
        !requests.is_empty(),
        "no TR-*.md under {}",
        examples_dir().display()
    );
    requests
}

/// The policy an example runs under: `policy.toml` beside its request if there is one
/// (examples/package-env declares an environment), else the built-in policy.
fn example_policy(request: &Path) -> Option<PathBuf> {
    let path = request.parent()?.join("policy.toml");
    path.is_file().then_some(path)
}

#[test]
fn every_example_request_is_accepted_by_the_binary() {
    let requests = tool_requests();
    let (own, builtin): (Vec<PathBuf>, Vec<PathBuf>) = requests
        .iter()
        .cloned()
        .partition(|r| example_policy(r).is_some());
    for request in &own {
        let out = Command::new(env!("CARGO_BIN_EXE_runner"))
            .arg("--policy")
            .arg(example_policy(request).unwrap())
            .arg("validate")
            .arg(request)
            .output()
            .expect("the runner binary runs");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}: {}{}",
            request.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let requests = builtin;
    let out = Command::new(env!("CARGO_BIN_EXE_runner"))
        .arg("validate")
        .arg("--json")
        .args(&requests)
        .output()
        .expect("the runner binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let rejected: Vec<&str> = stdout
        .lines()
        .filter(|l| !l.contains(r#""verdict":"ACCEPT""#))
        .collect();
    assert!(
        rejected.is_empty(),
        "rejected examples:\n{}",
        rejected.join("\n")
    );
    assert_eq!(
        stdout.lines().count(),
        requests.len(),
        "one verdict per example:\n{stdout}"
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn example_inputs_match_their_declared_hashes() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for path in tool_requests() {
        let policy = match example_policy(&path) {
            Some(p) => runner_pipeline::policy::load(&p).expect("the example's policy loads"),
            None => Policy::builtin(),
        };
        let name = path
            .strip_prefix(examples_dir())
            .unwrap_or(&path)
            .display()
            .to_string();
        let bytes = std::fs::read(&path).expect("a readable example");
        let approved = match request::validate(&bytes, &policy) {
            Ok(a) => a,
            Err(reasons) => {
                problems.push(format!("{name}: rejected: {reasons:?}"));
                continue;
            }
        };
        if approved.backend() != BackendKind::Era || approved.inputs().is_empty() {
            continue;
        }
        let inputs_dir = path
            .parent()
            .expect("a request inside a folder")
            .join("inputs");
        // relative path under inputs/ → sha256 of the file there
        let on_disk: BTreeMap<String, String> = walk(&inputs_dir, &|_| true)
            .into_iter()
            .map(|p| {
                let rel = p
                    .strip_prefix(&inputs_dir)
                    .expect("under inputs/")
                    .to_str()
                    .expect("a UTF-8 path")
                    .to_owned();
                (
                    rel,
                    sha256_hex(&std::fs::read(&p).expect("a readable input")),
                )
            })
            .collect();
        for input in approved.inputs() {
            checked += 1;
            match on_disk.get(input.relative()) {
                None => problems.push(format!(
                    "{name}: declares {} but inputs/{} does not exist",
                    input.path,
                    input.relative()
                )),
                Some(actual) if *actual != input.sha256 => problems.push(format!(
                    "{name}: {} declares sha256 {}, inputs/{} has {actual}",
                    input.path,
                    input.sha256,
                    input.relative()
                )),
                Some(_) => {}
            }
        }
        for rel in on_disk.keys() {
            if !approved.inputs().iter().any(|i| i.relative() == rel) {
                problems.push(format!(
                    "{name}: inputs/{rel} is not declared in the request"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(
        checked > 0,
        "no example declares inputs; the hash check checked nothing"
    );
}

/// The CI example, end to end on a private copy: a fresh baseline reproduces (exit 0),
/// an edited input is drift (exit 5), an edited baseline is refused (exit 1).
#[test]
fn ci_replay_example_reproduces_and_fails_on_drift() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let work = tempfile::tempdir().unwrap();
    let copy = |from: &str| {
        let status = std::process::Command::new("cp")
            .arg("-r")
            .arg(repo.join(from))
            .arg(work.path().join("examples"))
            .status()
            .unwrap();
        assert!(status.success());
    };
    std::fs::create_dir(work.path().join("examples")).unwrap();
    copy("examples/csv-stats");
    copy("examples/ci-replay");
    let ex = work.path().join("examples");
    let _ = std::fs::remove_dir_all(ex.join("csv-stats/results"));
    let _ = std::fs::remove_dir_all(ex.join("ci-replay/baseline"));
    let runner = env!("CARGO_BIN_EXE_runner");
    let made = std::process::Command::new(runner)
        .arg("exec")
        .arg(ex.join("csv-stats/TR-20261121-100000Z-csv-stats.md"))
        .arg("--results")
        .arg(ex.join("ci-replay/baseline"))
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let reproduce = || {
        std::process::Command::new("bash")
            .arg(ex.join("ci-replay/reproduce.sh"))
            .env("RUNNER", runner)
            .output()
            .unwrap()
    };
    let out = reproduce();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("MATCH"));
    let data = ex.join("csv-stats/inputs/data.csv");
    let original = std::fs::read(&data).unwrap();
    std::fs::write(
        &data,
        [original.as_slice(), b"west,2026-11-01,9.0,0.0\n"].concat(),
    )
    .unwrap();
    assert_eq!(
        reproduce().status.code(),
        Some(5),
        "an edited input is drift"
    );
    std::fs::write(&data, &original).unwrap();
    let baseline = std::fs::read_dir(ex.join("ci-replay/baseline"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "md"))
        .unwrap();
    let mut text = std::fs::read_to_string(&baseline).unwrap();
    text = text.replacen("mean", "MEAN", 1);
    std::fs::write(&baseline, text).unwrap();
    assert_eq!(
        reproduce().status.code(),
        Some(1),
        "an edited baseline is refused by verify"
    );
}

/// The committed baseline is intact.
#[test]
fn committed_ci_baseline_verifies() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = repo.join("examples/ci-replay/baseline");
    let baseline = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e} (run `just refresh-baseline`)", dir.display()))
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "md"))
        .expect("a TS-….md in examples/ci-replay/baseline");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_runner"))
        .arg("verify")
        .arg(&baseline)
        .arg("--request")
        .arg(repo.join("examples/csv-stats/TR-20261121-100000Z-csv-stats.md"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// The CI example exactly as a user runs it, against the committed baseline (in a
/// scratch copy): it must reproduce. A baseline made before a change of the built-in
/// policy, the guest or the runner is refused by replay; this catches it here, naming
/// the command that refreshes it (the example was once refused for weeks unnoticed).
#[test]
fn committed_ci_baseline_reproduces_as_written() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir(work.path().join("examples")).unwrap();
    for from in ["examples/csv-stats", "examples/ci-replay"] {
        let status = std::process::Command::new("cp")
            .arg("-r")
            .arg(repo.join(from))
            .arg(work.path().join("examples"))
            .status()
            .unwrap();
        assert!(status.success());
    }
    let out = std::process::Command::new("bash")
        .arg(work.path().join("examples/ci-replay/reproduce.sh"))
        .env("RUNNER", env!("CARGO_BIN_EXE_runner"))
        .output()
        .unwrap();
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "examples/ci-replay does not reproduce as committed; after a deliberate change of \
         policy, guest or runner, re-make it with `just refresh-baseline`:\n{printed}"
    );
    assert!(printed.contains("MATCH"), "{printed}");
    assert!(!printed.contains("DRIFT"), "{printed}");
}

/// The blocks marked `no-run`, as `README path: first line of the block`.
const NOT_RUN: &[&str] = &[
    "examples/matplotlib-plot/README.md: runner guest fetch cpython-3.15-scientific",
    "examples/pandas-groupby/README.md: runner guest fetch cpython-3.15-scientific",
];

/// A command block of a README: the line of its opening fence, its lines, and why it is
/// not run (`None`: it runs).
#[derive(Debug, PartialEq, Eq)]
struct Block {
    line: usize,
    lines: Vec<String>,
    not_run: Option<String>,
}

/// The command blocks of a markdown text.
fn command_blocks(text: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut current: Option<Block> = None;
    let mut in_other_fence = false;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_end();
        if let Some(block) = current.as_mut() {
            if trimmed == "```" {
                blocks.extend(current.take());
            } else {
                block.lines.push(line.to_owned());
            }
            continue;
        }
        if in_other_fence {
            in_other_fence = trimmed != "```";
            continue;
        }
        let Some(info) = trimmed.strip_prefix("```") else {
            continue;
        };
        let mut words = info.splitn(2, ' ');
        let lang = words.next().unwrap_or("");
        let rest = words.next().unwrap_or("").trim();
        if ["sh", "bash", "shell"].contains(&lang) {
            let not_run = rest.strip_prefix("no-run:").map(|r| r.trim().to_owned());
            assert!(
                rest.is_empty() || not_run.as_ref().is_some_and(|r| !r.is_empty()),
                "line {}: a command fence takes nothing or `no-run: REASON`, not `{rest}`",
                i + 1
            );
            current = Some(Block {
                line: i + 1,
                lines: Vec::new(),
                not_run,
            });
        } else {
            in_other_fence = true;
        }
    }
    assert!(current.is_none(), "a command block is not closed");
    blocks
}

/// `# exit N` (and `: TEXT`) at the end of a line: the line without it, N and TEXT.
fn exit_marker(line: &str) -> Option<(&str, i32, Option<&str>)> {
    let at = line.rfind("# exit ")?;
    let after = &line[at + "# exit ".len()..];
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    let code = digits.parse().ok()?;
    let rest = &after[digits.len()..];
    let text = rest
        .strip_prefix(':')
        .map(str::trim)
        .filter(|t| !t.is_empty());
    Some((line[..at].trim_end(), code, text))
}

fn single_quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The bash script that runs `blocks` of `readme` (a display name) as the convention
/// says.
fn script_for(readme: &str, blocks: &[Block]) -> String {
    let mut script = String::from("set -euo pipefail\n");
    for block in blocks.iter().filter(|b| b.not_run.is_none()) {
        script.push_str(&format!("echo '>>> {readme}:{}' >&2\n", block.line));
        let mut pending = String::new();
        for (n, line) in block.lines.iter().enumerate() {
            let at = block.line + 1 + n;
            match exit_marker(line) {
                Some((command, code, text)) => {
                    let command = format!("{pending}{command}");
                    pending.clear();
                    script.push_str(&format!(
                        "__out=$( {{ {command}\n}} 2>&1 ) && __rc=0 || __rc=$?\n\
                         printf '%s\\n' \"$__out\"\n\
                         if [ \"$__rc\" != {code} ]; then echo \"{readme}:{at}: expected exit {code}, got $__rc\" >&2; exit 97; fi\n"
                    ));
                    if let Some(text) = text {
                        let want = single_quoted(text);
                        script.push_str(&format!(
                            "case \"$__out\" in *{want}*) ;; *) echo \"{readme}:{at}: expected the output to contain \"{want} >&2; exit 98;; esac\n"
                        ));
                    }
                }
                // A continued line waits for the rest of its command, in case the
                // marker is on its last line.
                None if line.trim_end().ends_with('\\') => {
                    pending.push_str(line);
                    pending.push('\n');
                }
                None => {
                    script.push_str(&pending);
                    pending.clear();
                    script.push_str(line);
                    script.push('\n');
                }
            }
        }
        script.push_str(&pending);
    }
    script
}

#[test]
fn the_readme_block_parser_and_exit_markers() {
    let text = "x\n```sh\na\nb # exit 5: DRIFT\n```\n```text\n```sh\n```\n```sh no-run: needs a download\nc\n```\n```toml\nd\n```\n";
    let blocks = command_blocks(text);
    assert_eq!(
        blocks,
        vec![
            Block {
                line: 2,
                lines: vec!["a".into(), "b # exit 5: DRIFT".into()],
                not_run: None
            },
            Block {
                line: 9,
                lines: vec!["c".into()],
                not_run: Some("needs a download".into())
            },
        ]
    );
    assert_eq!(
        exit_marker("b   # exit 5: DRIFT"),
        Some(("b", 5, Some("DRIFT")))
    );
    assert_eq!(exit_marker("b # exit 1, no result"), Some(("b", 1, None)));
    assert_eq!(exit_marker("b # exit 0"), Some(("b", 0, None)));
    assert_eq!(exit_marker("b # exits"), None);
    // The generated script enforces the marker, and the text.
    let run = |text: &str| {
        let script = script_for("T", &command_blocks(text));
        Command::new("bash")
            .args(["-c", &script])
            .output()
            .unwrap()
            .status
            .code()
    };
    assert_eq!(run("```sh\nfalse # exit 1\necho ok\n```\n"), Some(0));
    assert_eq!(run("```sh\nfalse # exit 2\n```\n"), Some(97));
    assert_eq!(run("```sh\necho MATCH # exit 0: MATCH\n```\n"), Some(0));
    assert_eq!(run("```sh\necho DRIFT # exit 0: MATCH\n```\n"), Some(98));
    assert_eq!(run("```sh\nfalse\necho not reached\n```\n"), Some(1));
    assert_eq!(
        run("```sh\nx=1\n```\n```sh\n[ \"$x\" = 1 ]\n```\n"),
        Some(0)
    );
    assert_eq!(run("```sh\nexit 3 \\\n  # exit 3\n```\n"), Some(0));
}

fn example_readmes() -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(examples_dir())
        .unwrap()
        .flatten()
        .map(|e| e.path().join("README.md"))
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    found
}

/// Every command block of every example README, in a scratch copy, as the convention in
/// the module documentation says.
#[test]
fn every_example_readme_runs_as_written() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_runner"))
        .parent()
        .expect("binary directory")
        .to_owned();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut failures = Vec::new();
    let mut not_run = Vec::new();
    let mut all_commands = String::new();
    let readmes = example_readmes();
    assert!(readmes.len() >= 3, "{readmes:?}");
    for readme in readmes {
        let name = readme
            .strip_prefix(&repo)
            .unwrap_or(&readme)
            .display()
            .to_string()
            .trim_start_matches("runner/../")
            .to_owned();
        let blocks = command_blocks(&std::fs::read_to_string(&readme).unwrap());
        for b in &blocks {
            match &b.not_run {
                Some(why) => {
                    eprintln!("not run: {name}:{} ({why})", b.line);
                    not_run.push(format!(
                        "{name}: {}",
                        b.lines.first().map_or("", |l| l.trim())
                    ));
                }
                None => b.lines.iter().for_each(|l| {
                    all_commands.push_str(l);
                    all_commands.push('\n');
                }),
            }
        }
        let scratch = tempfile::tempdir().unwrap();
        for dir in ["examples", "policies"] {
            let status = Command::new("cp")
                .arg("-R")
                .arg(repo.join(dir))
                .arg(scratch.path())
                .status()
                .unwrap();
            assert!(status.success(), "copying {dir}");
        }
        std::fs::create_dir(scratch.path().join("target")).unwrap();
        std::os::unix::fs::symlink(&bin_dir, scratch.path().join("target/release")).unwrap();
        let out = Command::new("bash")
            .args(["-c", &script_for(&name, &blocks)])
            .current_dir(scratch.path())
            .env("PATH", &path)
            .env("TMPDIR", scratch.path())
            .env_remove("RUNNER")
            .env_remove("RUNNER_LOG")
            .env_remove("RUNNER_LOG_FORMAT")
            .output()
            .unwrap();
        if !out.status.success() {
            let hint = if name.contains("ci-replay") {
                "\nthe committed baseline may be stale: after a deliberate change of policy, \
                 guest or runner, re-make it with `just refresh-baseline` (in its own commit)"
            } else {
                ""
            };
            failures.push(format!(
                "{name}: exit {:?}{hint}\n--- stdout\n{}--- stderr\n{}",
                out.status.code(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(
        not_run, NOT_RUN,
        "the blocks marked `no-run` are not the ones listed in NOT_RUN"
    );
    // Every example script is run by some block.
    let scripts = walk(&examples_dir(), &|p: &Path| {
        p.extension().is_some_and(|x| x == "sh")
    });
    assert!(!scripts.is_empty());
    for script in scripts {
        let rel = script
            .strip_prefix(examples_dir())
            .unwrap()
            .display()
            .to_string();
        assert!(
            all_commands.contains(&format!("examples/{rel}")),
            "examples/{rel} is not run by any README block"
        );
    }
}
