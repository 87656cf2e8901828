//! Monty's own test suite as a differential test: every case of the pinned
//! monty crate's `test_cases/*.py` runs as the `## Code` of a monty request through one
//! batch `runner exec`, and through the `monty` CLI of the same release; the two must
//! agree on stdout, on whether the run failed, and on the exception line when it did.
//! The cases that cannot agree, and those refused before they run, are listed below
//! with the reason; a listed case that agrees, or a refusal not listed with its reason
//! code, fails the test too, so the lists stay true.
//!
//! The cases come from the monty crate the worker is built from, found with `cargo
//! metadata`: Cargo.lock pins that crate's sha256 and cargo checks it when it unpacks
//! the crate, which `just build` has done, so they need no second download (fetching
//! the pydantic-monty-runtime sdist with `pip download --no-binary :all:` builds maturin
//! from source first). The reference is `$MONTY_CLI`, the `monty` binary of
//! pydantic-monty-runtime at the crate's version, installed by sha256 from
//! `tests/monty-diff/requirements.txt`; without it the test is ignored, and fails
//! rather than passes when asked to run:
//!
//! ```sh
//! just test-monty-diff   # installs the CLI into target/monty-venv, then:
//! MONTY_CLI=$PWD/target/monty-venv/bin/monty cargo test --release --locked \
//!     --workspace --ignore-rust-version --test it -- --include-ignored monty_diff::
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used)]
// reason: a test harness builds fixtures and runs the built binaries on the host.
#![allow(clippy::disallowed_methods)]

use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// Fewest cases the crate may hold (1.4.0 has 710): fewer means the wrong directory.
const MIN_CASES: usize = 700;

/// Cases whose result in the runner cannot be the CLI's, and why.
const CANNOT_AGREE: &[(&str, &str)] = &[
    // Limits: the request's memory_limit_mb of 256 stops what the CLI (no limit) runs.
    (
        "bytes__percent_format",
        "limit: '%.2147482623g' % 1.0 reserves about 2.1 GB; memory_exceeded under 256 MB",
    ),
    (
        "str__percent_format",
        "limit: '%.2147482623g' % 1.0 reserves about 2.1 GB; memory_exceeded under 256 MB",
    ),
    // Host functions: neither offers them, and each says so with its own exception.
    (
        "import__os",
        "host function: os.getenv is Monty's RuntimeError in the runner, NotImplementedError in the CLI",
    ),
    (
        "os__environ",
        "host function: os.environ is Monty's RuntimeError in the runner, NotImplementedError in the CLI",
    ),
    (
        "os__urandom",
        "host function: os.urandom is Monty's RuntimeError in the runner, NotImplementedError in the CLI",
    ),
    (
        "os_path__pure",
        "host function: os.getenv (expanduser) is RuntimeError in the runner, NotImplementedError in the CLI",
    ),
    // The test file system: Monty's own harness mounts one; neither here does.
    (
        "pathlib__os",
        "test file system: /virtual/file.txt is outside /in and /out (PermissionError); the CLI has no file system (NotImplementedError)",
    ),
    (
        "pathlib__os_read_error",
        "test file system: /nonexistent is outside /in and /out (PermissionError); the CLI has no file system (NotImplementedError)",
    ),
    // The script's name: `main.py` in the runner, the file's own name in the CLI.
    (
        "import__sys_monty",
        "script name: asserts sys.argv == ['import__sys_monty.py']; the runner's is main.py",
    ),
    (
        "module__dunders",
        "script name: asserts Path(__file__).name == 'module__dunders.py'; the runner's is main.py",
    ),
    // The request is read as NFC text, so the code's NFD literal arrives composed.
    (
        "unicodedata__core",
        "NFC: the runner normalizes the request text, so NFD_E = 'e\\u0301' (literal) becomes U+00E9",
    ),
];

/// Refused before they run for a literal invisible character in the code, which the project
/// lets stay refused (the code can write it as an escape): case, reason code.
const REFUSED_INVISIBLE: &[(&str, &str)] = &[
    ("builtin__repr", "text.control_character"), // U+2028 in a string literal
    ("codecs__all", "text.invisible_character"), // U+FEFF in string literals
];

/// One entry of `runner exec DIR --json`.
#[derive(Debug, Deserialize)]
struct Entry {
    request: String,
    verdict: String,
    reasons: Vec<Reason>,
    result_path: Option<String>,
    outcome: Option<String>,
    exit_code: Option<i32>,
}

#[derive(Debug, Deserialize)]
struct Reason {
    code: String,
}

/// What one side printed, and whether it failed.
struct Run {
    stdout: String,
    stderr: String,
    failed: bool,
}

fn env_path(name: &str, what: &str) -> PathBuf {
    let path = std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("{name} must name {what} (`just test-monty-diff` sets it)"));
    assert!(path.is_file(), "{name}: {} is not a file", path.display());
    path
}

fn worker() -> PathBuf {
    match std::env::var_os("RUNNER_MONTY_WORKER").filter(|v| !v.is_empty()) {
        Some(_) => env_path("RUNNER_MONTY_WORKER", "the Monty worker"),
        None => {
            let exe = Path::new(env!("CARGO_BIN_EXE_runner")).with_file_name("runner-monty-worker");
            assert!(exe.is_file(), "{} is missing: `just build`", exe.display());
            exe
        }
    }
}

/// The version of the monty crate in the workspace and its `test_cases` directory.
fn monty_crate() -> (String, PathBuf) {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--locked",
            "--manifest-path",
        ])
        .arg(&manifest)
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("cargo metadata JSON");
    let monty: Vec<&serde_json::Value> = meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .filter(|p| p["name"] == "monty")
        .collect();
    assert_eq!(monty.len(), 1, "expected one monty package, got {monty:?}");
    let version = monty[0]["version"].as_str().expect("version").to_owned();
    let manifest = PathBuf::from(monty[0]["manifest_path"].as_str().expect("manifest_path"));
    (
        version,
        manifest.parent().expect("crate dir").join("test_cases"),
    )
}

/// The cases' names (file stems), sorted.
fn case_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".py").map(str::to_owned)
        })
        .collect();
    names.sort();
    assert!(
        names.len() >= MIN_CASES,
        "{} holds {} cases, expected at least {MIN_CASES}",
        dir.display(),
        names.len()
    );
    for name in &names {
        assert!(
            name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'),
            "{name}: not usable in a request id"
        );
    }
    names
}

/// An approved monty request whose `## Code` is `code`, fenced past any backticks in it.
fn request(name: &str, code: &str) -> String {
    let longest = code.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    let newline = if code.ends_with('\n') { "" } else { "\n" };
    format!(
        "---\nrequest_type: tool_request\nschema_version: 1\n\
         request_id: \"TR-20261121-120000Z-{name}\"\ncreated_utc: \"2026-11-21T12:00:00Z\"\n\
         requested_by: \"monty-diff\"\napproved_by: \"monty-diff-operator\"\n\
         approved_utc: \"2026-11-21T12:00:01Z\"\npurpose: \"Monty test case {name}.\"\n\
         backend: monty\nlanguage: python\nnetwork: none\ncpu_limit: \"30\"\n\
         memory_limit_mb: 256\ntime_limit_sec: 30\n---\n# Monty test case {name}\n\n\
         ## Code\n{fence}python\n{code}{newline}{fence}\n\n\
         ## Output Expectations\n- stdout only.\n\n## Risk Assessment\n- Risk level: low\n\
         - Justification: a case of Monty's own test suite.\n- Data sensitivity: public\n\
         - Network rationale: none needed\n"
    )
}

/// The last non-empty line of `stderr`: the exception, after a traceback. The CLI puts
/// its timing and `error: ` before the first line.
fn exception_line(stderr: &str) -> &str {
    let line = stderr
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    line.split_once(" ❯ error: ").map_or(line, |(_, rest)| rest)
}

/// How the two runs differ, if they do.
fn disagreement(runner: &Run, cli: &Run) -> Option<String> {
    let mut found = Vec::new();
    if runner.stdout != cli.stdout {
        found.push(format!(
            "stdout: runner {:?}, cli {:?}",
            clip(&runner.stdout),
            clip(&cli.stdout)
        ));
    }
    if runner.failed != cli.failed {
        found.push(format!(
            "failed: runner {}, cli {} (runner: {:?}; cli: {:?})",
            runner.failed,
            cli.failed,
            exception_line(&runner.stderr),
            exception_line(&cli.stderr)
        ));
    } else if cli.failed && exception_line(&runner.stderr) != exception_line(&cli.stderr) {
        found.push(format!(
            "exception: runner {:?}, cli {:?}",
            exception_line(&runner.stderr),
            exception_line(&cli.stderr)
        ));
    }
    (!found.is_empty()).then(|| found.join("; "))
}

fn clip(s: &str) -> String {
    let tail: String = s.chars().rev().take(200).collect();
    tail.chars().rev().collect()
}

/// Run every case through one batch `runner exec`: name → its entry.
fn run_runner(names: &[String], cases: &Path, jobs: usize, work: &Path) -> BTreeMap<String, Entry> {
    let requests = work.join("requests");
    std::fs::create_dir_all(requests.join("inputs")).unwrap();
    for name in names {
        let code = std::fs::read_to_string(cases.join(format!("{name}.py"))).unwrap();
        std::fs::write(requests.join(format!("TR-{name}.md")), request(name, &code)).unwrap();
    }
    let out = Command::new(env!("CARGO_BIN_EXE_runner"))
        .arg("exec")
        .arg(&requests)
        .arg("--jobs")
        .arg(jobs.to_string())
        .arg("--json")
        .arg("--results")
        .arg(work.join("results"))
        .env("RUNNER_MONTY_WORKER", worker())
        .output()
        .expect("the runner binary runs");
    let entries: Vec<Entry> = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON array from runner exec ({e}); stderr {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(entries.len(), names.len(), "one entry per request");
    entries
        .into_iter()
        .map(|e| {
            let stem = Path::new(&e.request).file_stem().unwrap().to_string_lossy();
            (stem.strip_prefix("TR-").unwrap().to_owned(), e)
        })
        .collect()
}

/// The runner's stdout and stderr for a run that has a result (they sit beside it).
fn runner_run(entry: &Entry) -> Result<Run, String> {
    let path = entry.result_path.as_deref().ok_or("no result")?;
    let dir = Path::new(path).with_extension("");
    let read = |stream: &str| {
        std::fs::read(dir.join(stream))
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .map_err(|e| format!("{}/{stream}: {e}", dir.display()))
    };
    Ok(Run {
        stdout: read("stdout")?,
        stderr: read("stderr")?,
        failed: entry.outcome.as_deref() != Some("completed") || entry.exit_code != Some(0),
    })
}

/// Run every case through the CLI, `jobs` at a time, in an empty working directory.
fn run_cli(cli: &Path, names: &[String], cases: &Path, jobs: usize) -> BTreeMap<String, Run> {
    let cwd = tempfile::tempdir().unwrap();
    let next = AtomicUsize::new(0);
    let done = Mutex::new(BTreeMap::new());
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| {
                while let Some(name) = names.get(next.fetch_add(1, Ordering::Relaxed)) {
                    // The request's time limit, so that a runaway case ends here too.
                    let out: Output = Command::new(cli)
                        .args(["--max-feed-duration", "30"])
                        .arg(cases.join(format!("{name}.py")))
                        .current_dir(cwd.path())
                        .output()
                        .expect("the monty CLI runs");
                    let run = Run {
                        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
                        failed: !out.status.success(),
                    };
                    done.lock().unwrap().insert(name.clone(), run);
                }
            });
        }
    });
    done.into_inner().unwrap()
}

/// A scratch directory in memory where there is one: the runner syncs each result to
/// disk before it reports it, which on a busy disk is most of the run (710 results: 47 s
/// on disk against 13 s on tmpfs, measured here).
fn scratch() -> tempfile::TempDir {
    let builder = tempfile::Builder::new().prefix("monty-diff-").to_owned();
    builder
        .tempdir_in("/dev/shm")
        .or_else(|_| builder.tempdir())
        .unwrap()
}

fn listed<'a>(list: &'a [(&str, &str)], name: &str) -> Option<&'a str> {
    list.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}

#[test]
#[ignore = "needs the monty CLI of the pinned release: MONTY_CLI=… (just test-monty-diff)"]
fn monty_test_suite_agrees_with_the_monty_cli() {
    let cli = env_path("MONTY_CLI", "the monty CLI of pydantic-monty-runtime");
    let (version, cases) = monty_crate();
    let cli_version = Command::new(&cli).arg("--version").output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&cli_version.stdout).trim(),
        format!("monty-runtime {version}"),
        "the CLI must be the worker's monty release (tests/monty-diff/requirements.txt)"
    );
    let names = case_names(&cases);
    let known: BTreeSet<&str> = CANNOT_AGREE
        .iter()
        .chain(REFUSED_INVISIBLE)
        .map(|(n, _)| *n)
        .collect();
    for name in &known {
        assert!(
            names.iter().any(|n| n == name),
            "listed case {name} does not exist"
        );
    }
    let jobs = std::thread::available_parallelism().map_or(2, |n| n.get().min(4));
    let work = scratch();

    let started = Instant::now();
    let runner = run_runner(&names, &cases, jobs, work.path());
    let runner_sec = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let cli = run_cli(&cli, &names, &cases, jobs);
    let cli_sec = started.elapsed().as_secs_f64();

    let mut problems = Vec::new();
    let (mut agree, mut differ, mut refused) = (0usize, 0usize, 0usize);
    for name in &names {
        let entry = &runner[name];
        if entry.verdict != "ACCEPT" {
            refused += 1;
            let codes: BTreeSet<&str> = entry.reasons.iter().map(|r| r.code.as_str()).collect();
            let allowed = listed(REFUSED_INVISIBLE, name);
            match allowed {
                Some(code) if codes == BTreeSet::from([code]) => {}
                _ => problems.push(format!("{name}: refused {codes:?}, listed as {allowed:?}")),
            }
            continue;
        }
        let found = match runner_run(entry) {
            Ok(run) => disagreement(&run, &cli[name]),
            Err(e) => Some(e),
        };
        match (found, listed(CANNOT_AGREE, name)) {
            (None, None) => agree += 1,
            (None, Some(_)) => {
                problems.push(format!("{name}: agrees now; drop it from CANNOT_AGREE"))
            }
            (Some(_), Some(_)) => differ += 1,
            (Some(found), None) => problems.push(format!("{name}: {found}")),
        }
    }
    eprintln!(
        "monty {version}: {} cases; {agree} agree, {differ} cannot agree (listed), {refused} \
         refused (listed); runner exec --jobs {jobs} {runner_sec:.1} s, CLI {cli_sec:.1} s",
        names.len()
    );
    assert!(
        problems.is_empty(),
        "{} of {} cases:\n{}",
        problems.len(),
        names.len(),
        problems.join("\n")
    );
    assert!(agree >= names.len() - known.len(), "{agree} agree");
}
