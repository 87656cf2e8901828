//! Deterministic runs end to end, on the real guest: a program whose output
//! depends on the time and the randomness it saw replays to MATCH, because the lock
//! records the virtual clock's start and the seed and `runner replay` runs with them;
//! under a policy that takes the host's entropy the replay is DRIFT and says why; the
//! wall-clock limit stays on real time.
//!
//! Needs the CPython guest fetched (`just guests`); the monty case needs the monty
//! worker built (`just build`).

#![allow(clippy::unwrap_used, clippy::expect_used)]
// reason: a test harness builds fixtures and runs the built binaries on the host.
#![allow(clippy::disallowed_methods)]

use crate::support;

use support::{runner, sha256_hex};

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A request running `python -u <script>` in a fresh directory, with the script (and
/// `extra` inputs) in `inputs/`.
fn era_request(
    name: &str,
    script: &str,
    time_limit_sec: u64,
    extra: &[(&str, &str)],
) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let inputs = dir.path().join("inputs");
    std::fs::create_dir(&inputs).unwrap();
    let mut files = vec![("main.py", script)];
    files.extend_from_slice(extra);
    let mut front = String::new();
    let mut listed = String::new();
    for (file, text) in &files {
        std::fs::write(inputs.join(file), text).unwrap();
        let sha = sha256_hex(text.as_bytes());
        front.push_str(&format!(
            "  - path: \"/in/{file}\"\n    sha256: \"{sha}\"\n"
        ));
        listed.push_str(&format!("- `/in/{file}` sha256: {sha} (input)\n"));
    }
    let id = format!("TR-20261125-060000Z-{name}");
    let request = format!(
        "---\nrequest_type: tool_request\nschema_version: 1\nrequest_id: \"{id}\"\n\
         created_utc: \"2026-11-25T06:00:00Z\"\nrequested_by: \"core-agent\"\n\
         approved_by: \"operator-ada\"\napproved_utc: \"2026-11-25T06:01:00Z\"\n\
         purpose: \"A run whose output depends on the time and randomness it saw.\"\n\
         backend: ERA\nlanguage: python\nnetwork: none\ncpu_limit: \"20\"\n\
         memory_limit_mb: 256\ntime_limit_sec: {time_limit_sec}\ninputs:\n{front}---\n\
         # Deterministic replay\n\n## Command\n`python -u main.py`\n\n## Input Files\n{listed}\n\
         ## Output Expectations\n- stdout: a few lines.\n\n## Risk Assessment\n\
         - Risk level: low\n- Justification: reads its own script; no network.\n\
         - Data sensitivity: public\n- Network rationale: none needed\n"
    );
    std::fs::write(dir.path().join(format!("{id}.md")), request).unwrap();
    dir
}

fn request_path(dir: &Path) -> PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "md"))
        .unwrap()
}

/// `runner [--policy P] ARGS…` printing JSON → (exit code, report).
fn run_json(policy: Option<&Path>, args: &[&std::ffi::OsStr]) -> (i32, Value) {
    let mut cmd = runner();
    if let Some(p) = policy {
        cmd.arg("--policy").arg(p);
    }
    let out = cmd.args(args).output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?} printed no JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap(), report)
}

/// `runner [--policy P] exec REQUEST --json` → (result path, report).
fn exec(dir: &Path, policy: Option<&Path>) -> (PathBuf, Value) {
    let request = request_path(dir);
    let (_, report) = run_json(
        policy,
        &["exec".as_ref(), request.as_os_str(), "--json".as_ref()],
    );
    let path = PathBuf::from(
        report["result_path"]
            .as_str()
            .unwrap_or_else(|| panic!("exec did not publish: {report}")),
    );
    (path, report)
}

/// `runner [--policy P] replay RESULT --check --json` → (exit code, report).
fn replay(result: &Path, policy: Option<&Path>) -> (i32, Value) {
    let args = [
        "replay".as_ref(),
        result.as_os_str(),
        "--check".as_ref(),
        "--json".as_ref(),
    ];
    run_json(policy, &args)
}

fn stdout_of(result: &Path) -> String {
    let id = result.file_stem().unwrap().to_str().unwrap();
    std::fs::read_to_string(result.with_file_name(id).join("stdout")).unwrap()
}

fn lock_of(result: &Path) -> Value {
    let id = result.file_stem().unwrap().to_str().unwrap();
    let text = std::fs::read_to_string(result.with_file_name(format!("{id}.lock.json"))).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn statement_of(result: &Path) -> Value {
    let id = result.file_stem().unwrap().to_str().unwrap();
    let text = std::fs::read_to_string(result.with_file_name(format!("{id}.intoto.json"))).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Runs the request twice and replays the first run: the two runs differ (each run gets
/// its own clock start and seed, so the program really does see time and randomness),
/// and the replay matches output for output. Returns the first run's stdout and lock.
fn assert_replays_to_match(dir: &Path) -> (String, Value) {
    let (first, report) = exec(dir, None);
    assert_eq!(report["outcome"], "completed", "{report}");
    let (second, _) = exec(dir, None);
    assert_ne!(
        stdout_of(&first),
        stdout_of(&second),
        "two runs printed the same: the program saw no fresh time or randomness"
    );
    let (code, report) = replay(&first, None);
    assert_eq!(report["verdict"], "MATCH", "{report:#}");
    assert_eq!(code, 0, "{report}");
    assert!(report["notes"].as_array().unwrap().is_empty(), "{report}");
    let outputs = report["outputs"].as_array().unwrap();
    assert!(
        outputs.iter().all(|o| o["verdict"] == "MATCH"),
        "{report:#}"
    );
    (stdout_of(&first), lock_of(&first))
}

const TIME_AND_RANDOMNESS: &str = r#"
import os, random, time, datetime, tempfile
print(random.random())
print(time.time())
print(os.urandom(4).hex())
print(datetime.datetime.now().isoformat())
print(time.monotonic_ns())
print(hash("a string"), sorted({"b", "a", "c"}))
for name in random.sample(["c.txt", "a.txt", "b.txt", "d.txt"], 4):
    open("/out/" + name, "w").write(name)
print(os.listdir("/out"), os.listdir("/in"))
with tempfile.NamedTemporaryFile(dir="/out", delete=False) as f:
    f.write(b"x")
print(os.path.basename(f.name))
"#;

#[test]
fn time_randomness_and_urandom_replay_to_match() {
    let dir = era_request("time-random", TIME_AND_RANDOMNESS, 30, &[]);
    let (stdout, lock) = assert_replays_to_match(dir.path());
    // The recorded values: the clock model, its start (the first reading is the start)
    // and step, and the seed.
    let d = &lock["determinism"];
    assert_eq!(d["clock"], "virtual-fixed-step/v2", "{lock}");
    assert_eq!(d["clock_step_ns"], 3000);
    assert_eq!(d["entropy"], "chacha20-seeded/v1");
    assert_eq!(d["seed"].as_str().unwrap().len(), 64);
    let start_us = d["clock_start_unix_us"].as_u64().unwrap();
    let printed: f64 = stdout.lines().nth(1).unwrap().parse().unwrap();
    let start = start_us as f64 / 1e6;
    assert!(
        printed >= start && printed < start + 1.0,
        "time.time() printed {printed}, the clock started at {start}"
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(
        (now - start).abs() < 600.0,
        "the clock starts at the run's real start"
    );
}

#[test]
fn the_in_toto_predicate_records_the_same_values() {
    let dir = era_request(
        "predicate",
        "import random\nprint(random.random())\n",
        30,
        &[],
    );
    let (result, _) = exec(dir.path(), None);
    let lock = lock_of(&result);
    let statement = statement_of(&result);
    assert_eq!(statement["predicate"]["determinism"], lock["determinism"]);
    let document = std::fs::read_to_string(&result).unwrap();
    let seed = lock["determinism"]["seed"].as_str().unwrap();
    assert!(
        document.contains("- Clocks and entropy: virtual clock") && document.contains(seed),
        "{document}"
    );
}

const BOOTSTRAP: &str = r#"
import csv, json, random, statistics
rows = list(csv.DictReader(open("/in/data.csv")))
values = [float(r["value"]) for r in rows]
means = sorted(statistics.fmean(random.choices(values, k=len(values))) for _ in range(500))
ci = [round(means[12], 6), round(means[487], 6)]
train = random.sample(range(len(values)), len(values) // 2)
json.dump({"ci95": ci, "train": train}, open("/out/bootstrap.json", "w"))
print("bootstrap 95% CI", ci)
"#;

#[test]
fn a_bootstrap_resampling_analysis_replays_to_match() {
    let data: String = std::iter::once("value\n".to_owned())
        .chain((0..40).map(|i| format!("{}\n", (i * 37 % 23) as f64 / 3.0)))
        .collect();
    let dir = era_request("bootstrap", BOOTSTRAP, 30, &[("data.csv", &data)]);
    let (_, lock) = assert_replays_to_match(dir.path());
    let artifacts = lock["outputs"]["artifacts"].as_array().unwrap();
    assert!(
        artifacts.iter().any(|a| a["path"] == "bootstrap.json"),
        "{lock}"
    );
}

#[test]
fn a_uuid4_file_name_in_out_replays_to_match() {
    let script = "import uuid\nname = f'{uuid.uuid4()}.txt'\nopen('/out/' + name, 'w').write('hello')\nprint(name)\n";
    let dir = era_request("uuid4", script, 30, &[]);
    let (stdout, lock) = assert_replays_to_match(dir.path());
    let name = stdout.trim();
    assert_eq!(name.len(), 40, "{stdout}");
    let artifacts = lock["outputs"]["artifacts"].as_array().unwrap();
    assert!(artifacts.iter().any(|a| a["path"] == name), "{lock}");
}

const TIMING_LOOP: &str = r#"
import time
t0 = time.perf_counter()
n = 0
while time.perf_counter() - t0 < 0.05:
    n += 1
w0 = time.time()
while time.time() - w0 < 0.01:
    n += 1
print("iterations", n, "elapsed", time.perf_counter() - t0)
"#;

#[test]
fn a_timing_loop_replays_to_match() {
    let dir = era_request("timing-loop", TIMING_LOOP, 30, &[]);
    let (first, report) = exec(dir.path(), None);
    assert_eq!(report["outcome"], "completed", "{report}");
    let stdout = stdout_of(&first);
    // One step (3 µs) per read: about 16 667 + 3 333 iterations, whatever the host.
    let n: u64 = stdout.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!((19_000..21_000).contains(&n), "{stdout}");
    let (code, report) = replay(&first, None);
    assert_eq!(
        (code, report["verdict"].as_str()),
        (0, Some("MATCH")),
        "{report:#}"
    );
}

const SLEEPS: &str = r#"
import asyncio, random, time
print(random.random())
m0 = time.monotonic_ns()
time.sleep(0.25)
print("slept_ns", time.monotonic_ns() - m0)
async def nap(s):
    await asyncio.sleep(s)
    return time.monotonic_ns()
async def main():
    return await asyncio.gather(nap(0.02), nap(0.01), asyncio.wait_for(nap(5), 0.03))
try:
    print(asyncio.run(main()))
except TimeoutError:
    print("timeout at", time.monotonic_ns(), time.time())
"#;

/// Sleeps move the virtual clock by what they asked, not by the real time they took,
/// so a run that sleeps (and an asyncio loop's timers) replays reading for reading.
#[test]
fn sleeps_and_asyncio_timers_replay_to_match() {
    let dir = era_request("sleeps", SLEEPS, 30, &[]);
    let (stdout, _) = assert_replays_to_match(dir.path());
    let slept: u64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("slept_ns "))
        .unwrap()
        .parse()
        .unwrap();
    // 0.25 s, plus a few 3 µs steps of the clock reads around it.
    assert!((250_000_000..250_100_000).contains(&slept), "{stdout}");
    assert!(stdout.contains("timeout at"), "{stdout}");
}

/// The built-in policy with `[determinism]` set as given.
fn policy_with(dir: &Path, clock: &str, entropy: &str) -> PathBuf {
    let text = format!(
        "{}\n[determinism]\nclock = \"{clock}\"\nentropy = \"{entropy}\"\n",
        runner_core::policy::DEFAULT_POLICY_TOML
    );
    let path = dir.join("policy.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn under_host_entropy_the_replay_drifts_and_says_why() {
    let dir = era_request("host-entropy", TIME_AND_RANDOMNESS, 30, &[]);
    let policy = policy_with(dir.path(), "virtual", "host");
    let (result, report) = exec(dir.path(), Some(&policy));
    assert_eq!(report["outcome"], "completed", "{report}");
    let lock = lock_of(&result);
    assert_eq!(lock["determinism"]["entropy"], "host", "{lock}");
    assert_eq!(lock["determinism"]["seed"], Value::Null, "{lock}");
    let document = std::fs::read_to_string(&result).unwrap();
    assert!(
        document.contains("host entropy (not recorded)"),
        "{document}"
    );

    let (code, report) = replay(&result, Some(&policy));
    assert_eq!(report["verdict"], "DRIFT", "{report:#}");
    assert_eq!(code, 5, "{report}");
    let notes: Vec<&str> = report["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert!(
        notes.len() == 1
            && notes[0].contains("host's entropy")
            && notes[0].contains("not recorded"),
        "{notes:?}"
    );
    // The text report says it too.
    let out = runner()
        .arg("--policy")
        .arg(&policy)
        .arg("replay")
        .arg(&result)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("DRIFT") && text.contains("note: the baseline ran with the host's entropy"),
        "{text}"
    );

    // A strict replay under the default policy is refused: [determinism] is a run table.
    let (code, report) = replay(&result, None);
    assert_eq!(report["verdict"], "REFUSED", "{report:#}");
    assert_eq!(code, 1);
}

#[test]
fn a_run_that_sleeps_past_its_wall_limit_still_times_out() {
    let dir = era_request(
        "sleep-past-limit",
        "import time\nprint('sleeping', flush=True)\ntime.sleep(60)\nprint('woke')\n",
        2,
        &[],
    );
    let started = Instant::now();
    let (result, report) = exec(dir.path(), None);
    let took = started.elapsed();
    assert_eq!(report["outcome"], "timed_out", "{report}");
    assert!(took < Duration::from_secs(20), "took {took:?}");
    assert!(
        took >= Duration::from_secs(2),
        "took {took:?}: the limit is on real time"
    );
    assert_eq!(stdout_of(&result), "sleeping\n");
}

#[test]
fn a_monty_run_replays_to_match() {
    let dir = tempfile::tempdir().unwrap();
    let request = "---\nrequest_type: tool_request\nschema_version: 1\n\
        request_id: \"TR-20261125-060000Z-monty-random\"\ncreated_utc: \"2026-11-25T06:00:00Z\"\n\
        requested_by: \"core-agent\"\napproved_by: \"operator-ada\"\n\
        approved_utc: \"2026-11-25T06:01:00Z\"\n\
        purpose: \"Monty code whose output depends on randomness and the time.\"\n\
        backend: monty\nlanguage: python\nnetwork: none\ncpu_limit: \"5\"\n\
        memory_limit_mb: 64\ntime_limit_sec: 10\n---\n# Monty randomness\n\n## Code\n\
        ```python\nimport random\nimport os\nimport time\n\
        print(random.random(), random.randint(1, 10**9))\nprint(os.urandom(8).hex())\n\
        print(time.time())\n```\n\n## Output Expectations\n- stdout: three lines.\n\n\
        ## Risk Assessment\n- Risk level: low\n- Justification: no inputs, no network.\n\
        - Data sensitivity: public\n- Network rationale: none needed\n";
    std::fs::write(
        dir.path().join("TR-20261125-060000Z-monty-random.md"),
        request,
    )
    .unwrap();
    let (_, lock) = assert_replays_to_match(dir.path());
    assert_eq!(lock["backend"], "monty");
    assert_eq!(lock["determinism"]["entropy"], "chacha20-seeded/v1");
}
