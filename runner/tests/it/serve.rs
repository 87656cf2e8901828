//! `runner serve`, end to end with real processes: requests present at start and
//! arriving later, hostile inbox entries (fixtures in `tests/serve/`, one directory per
//! attack), two hosts on one inbox, SIGKILL at random moments with restarts, and the
//! signals. Every wait is bounded; everything lives in a temporary directory.
//!
//! Needs the Monty worker built and, for the input attacks, the CPython guest fetched
//! (`just test` does both).

#![allow(clippy::unwrap_used, clippy::expect_used)]
// reason: a test harness builds fixtures and runs the built binaries on the host.
#![allow(clippy::disallowed_methods)]

use crate::support;

use support::{monty_worker, runner_exe, wait_for};

use serde_json::Value;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn hello(id: &str) -> String {
    monty(id, &format!("print('hello from {id}')"))
}

/// A test's directories: the inbox and the results.
struct Dirs {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    inbox: PathBuf,
    results: PathBuf,
}

impl Dirs {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let inbox = root.join("inbox");
        std::fs::create_dir(&inbox).unwrap();
        Self {
            inbox,
            results: root.join("results"),
            root,
            _tmp: tmp,
        }
    }

    /// Submits a request as the protocol says: written under a hidden name, renamed in.
    fn submit(&self, name: &str, text: &str) {
        let tmp = self.inbox.join(format!(".upload-{name}"));
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, self.inbox.join(name)).unwrap();
    }

    fn names(&self, dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    /// The `TR-*.md` in `done/`.
    fn done(&self) -> Vec<String> {
        self.names(&self.inbox.join("done"))
            .into_iter()
            .filter(|n| n.starts_with("TR-") && n.ends_with(".md"))
            .collect()
    }

    /// Result documents (`TS-*.md`) per request id.
    fn results_by_request(&self) -> BTreeMap<String, Vec<PathBuf>> {
        results_in(&self.results)
    }
}

/// Result documents (`TS-*.md`) in `results`, per request id.
fn results_in(results: &Path) -> BTreeMap<String, Vec<PathBuf>> {
    let mut names: Vec<String> = std::fs::read_dir(results)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    let mut by: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for name in names {
        if !(name.starts_with("TS-") && name.ends_with(".md")) {
            continue;
        }
        let lock = results.join(format!("{}.lock.json", name.trim_end_matches(".md")));
        let lock: Value = serde_json::from_slice(&std::fs::read(&lock).unwrap()).unwrap();
        let id = lock["request"]["request_id"].as_str().unwrap().to_owned();
        by.entry(id).or_default().push(results.join(name));
    }
    by
}

/// A running `runner serve`, its JSON lines in a file.
struct Host {
    child: Child,
    out: PathBuf,
    err: PathBuf,
}

impl Host {
    /// `global`: options before `serve` (`--policy`); `extra`: options of `serve`.
    fn start_with(dirs: &Dirs, tag: &str, global: &[&str], extra: &[&str]) -> Self {
        let out = dirs.root.join(format!("{tag}.jsonl"));
        let err = dirs.root.join(format!("{tag}.stderr"));
        let child = Command::new(runner_exe())
            .args(global)
            .arg("serve")
            .arg("--inbox")
            .arg(&dirs.inbox)
            .arg("--results")
            .arg(&dirs.results)
            .arg("--json")
            .args(extra)
            .env("RUNNER_MONTY_WORKER", monty_worker())
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap();
        Self { child, out, err }
    }

    fn start(dirs: &Dirs, tag: &str, extra: &[&str]) -> Self {
        Self::start_with(dirs, tag, &[], extra)
    }

    fn signal(&self, signal: &str) {
        if signal != "KILL" {
            // A host takes SIGTERM/SIGINT as "drain and stop" once it has blocked them
            // for its signal thread, which it has when it says it is serving; before
            // that the default action ends it (nothing is claimed yet).
            let start = Instant::now();
            while !self.stderr().contains("serving ") {
                assert!(
                    start.elapsed() < Duration::from_secs(30),
                    "the host did not say it is serving within 30 s (its stderr: {:?})",
                    self.stderr()
                );
                std::thread::sleep(Duration::from_millis(25));
            }
        }
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits (bounded) for the host to exit; its exit code.
    fn wait_exit(&mut self, limit: Duration) -> Option<i32> {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            if start.elapsed() > limit {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("the host did not exit within {limit:?}: {}", self.stderr());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn stop(mut self) -> Vec<Value> {
        self.signal("TERM");
        let code = self.wait_exit(Duration::from_secs(30));
        assert_eq!(code, Some(0), "stderr: {}", self.stderr());
        self.lines()
    }

    fn lines(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn verify(result: &Path) {
    let out = Command::new(runner_exe())
        .arg("verify")
        .arg(result)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{} does not verify: {}",
        result.display(),
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn requests_present_at_start_and_arriving_later_run_and_move_to_done() {
    let dirs = Dirs::new();
    dirs.submit(
        "TR-20261121-120000Z-early-1.md",
        &hello("TR-20261121-120000Z-early-1"),
    );
    dirs.submit(
        "TR-20261121-120000Z-early-2.md",
        &hello("TR-20261121-120000Z-early-2"),
    );
    let host = Host::start(&dirs, "host", &[]);
    wait_for(Duration::from_secs(30), "the early requests", || {
        dirs.done().len() == 2
    });
    dirs.submit(
        "TR-20261121-120000Z-late-1.md",
        &hello("TR-20261121-120000Z-late-1"),
    );
    dirs.submit(
        "TR-20261121-120000Z-late-2.md",
        &hello("TR-20261121-120000Z-late-2"),
    );
    wait_for(Duration::from_secs(30), "the late requests", || {
        dirs.done().len() == 4
    });
    let lines = host.stop();
    assert_eq!(lines.len(), 4, "{lines:?}");
    for line in &lines {
        assert_eq!(line["verdict"], "ACCEPT", "{line}");
        assert_eq!(line["outcome"], "completed", "{line}");
        assert!(line["latency_sec"].as_f64().unwrap() > 0.0, "{line}");
        // Where its time went: the host's and its worker's steps on one clock, in order.
        let phases: Vec<&str> = line["phases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["phase"].as_str().unwrap())
            .collect();
        let at = |step: &str| phases.iter().position(|p| *p == step);
        let order = [
            "runner.judged",
            "worker.request_read",
            "worker.guest_ran",
            "runner.published",
            "runner.filed",
        ]
        .map(|step| at(step).unwrap_or_else(|| panic!("no {step} in {phases:?}")));
        assert!(order.is_sorted(), "steps out of order: {phases:?}");
        // The steps before filing lie within the latency (the `.md` commit to publishing).
        let covered: f64 = line["phases"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["phase"] != "runner.filed")
            .map(|p| p["ms"].as_f64().unwrap())
            .sum();
        let latency_ms = line["latency_sec"].as_f64().unwrap() * 1e3;
        assert!(covered > 0.0 && covered <= latency_ms + 0.5, "{line}");
        let result = Path::new(line["result_path"].as_str().unwrap());
        verify(result);
        let stdout = std::fs::read_to_string(result.with_extension("").join("stdout")).unwrap();
        let request = line["request"].as_str().unwrap().trim_end_matches(".md");
        assert_eq!(stdout, format!("hello from {request}\n"));
    }
    let by = dirs.results_by_request();
    assert_eq!(by.len(), 4);
    assert!(by.values().all(|v| v.len() == 1), "{by:?}");
    // Nothing left in the inbox but the host's directories.
    assert_eq!(
        dirs.names(&dirs.inbox),
        vec![".serve", "done", "quarantine"]
    );
    assert!(dirs.names(&dirs.inbox.join(".serve")).is_empty());
}

/// Copies a fixture entry as it is (a symlink stays a symlink).
fn copy_entry(from: &Path, to: &Path) {
    let meta = from.symlink_metadata().unwrap();
    if meta.file_type().is_symlink() {
        std::os::unix::fs::symlink(std::fs::read_link(from).unwrap(), to).unwrap();
    } else if meta.is_dir() {
        std::fs::create_dir(to).unwrap();
        for e in std::fs::read_dir(from).unwrap().flatten() {
            copy_entry(&e.path(), &to.join(e.file_name()));
        }
    } else {
        std::fs::copy(from, to).unwrap();
    }
}

#[test]
fn each_bad_input_is_quarantined_with_its_reasons_and_the_next_request_runs() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/serve");
    let dirs = Dirs::new();
    let host = Host::start(&dirs, "host", &[]);
    let mut expected: BTreeMap<String, String> = BTreeMap::new();
    let mut attacks: Vec<_> = std::fs::read_dir(&fixtures).unwrap().flatten().collect();
    attacks.sort_by_key(|e| e.file_name());
    let staging = dirs.root.join("staging");
    std::fs::create_dir(&staging).unwrap();
    for attack in attacks {
        let code = std::fs::read_to_string(attack.path().join("expect.txt")).unwrap();
        let mut entries: Vec<_> = std::fs::read_dir(attack.path())
            .unwrap()
            .flatten()
            .collect();
        // Companions first, the request (`*.md`) last: the protocol's order.
        entries.sort_by_key(|e| e.file_name().to_string_lossy().ends_with(".md"));
        for e in entries {
            let name = e.file_name().to_string_lossy().into_owned();
            if name == "expect.txt" {
                continue;
            }
            copy_entry(&e.path(), &staging.join(&name));
            std::fs::rename(staging.join(&name), dirs.inbox.join(&name)).unwrap();
            if name.ends_with(".md") {
                expected.insert(name, code.trim().to_owned());
            }
        }
    }
    // Attacks that cannot be committed as files: a FIFO and an oversized request.
    let fifo = "TR-20261121-140000Z-request-is-a-fifo.md";
    nix::unistd::mkfifo(
        &dirs.inbox.join(fifo),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    expected.insert(fifo.into(), "io.not_regular".into());
    let big = "TR-20261121-140000Z-oversized-request.md";
    let mut text = hello("TR-20261121-140000Z-oversized-request");
    text.push_str(&"x".repeat(2 << 20));
    dirs.submit(big, &text);
    expected.insert(big.into(), "request.too_large".into());
    // A second name of a file the writer wants quoted back (a hard link needs no
    // symlink): refused unread; no line of it reaches the reports.
    let secret = dirs.root.join("secret.txt");
    std::fs::write(
        &secret,
        "SECRET-LINE-1 must never be quoted\nSECRET-LINE-2\n",
    )
    .unwrap();
    let hard_link = "TR-20261121-140000Z-request-is-a-hard-link.md";
    std::fs::hard_link(&secret, staging.join(hard_link)).unwrap();
    std::fs::rename(staging.join(hard_link), dirs.inbox.join(hard_link)).unwrap();
    expected.insert(hard_link.into(), "io.hard_link".into());
    // And after them all, a good request.
    let good = "TR-20261121-140000Z-after-the-attacks.md";
    dirs.submit(good, &hello("TR-20261121-140000Z-after-the-attacks"));

    wait_for(Duration::from_secs(60), "every entry handled", || {
        dirs.done().len() == 1
            && expected.keys().all(|n| {
                dirs.inbox
                    .join("quarantine")
                    .join(n)
                    .symlink_metadata()
                    .is_ok()
            })
    });
    let lines = host.stop();
    for (name, code) in &expected {
        let line = lines
            .iter()
            .find(|l| l["request"] == name.as_str())
            .unwrap_or_else(|| panic!("no line for {name}: {lines:?}"));
        assert_eq!(line["verdict"], "REJECT", "{line}");
        let codes: Vec<&str> = line["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["code"].as_str().unwrap())
            .collect();
        assert!(codes.contains(&code.as_str()), "{name}: {codes:?}");
        let quarantine = dirs.inbox.join("quarantine");
        let report: Value = serde_json::from_slice(
            &std::fs::read(quarantine.join(format!("{name}.reasons.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(report["verdict"], "REJECT");
        assert!(
            report["reasons"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["code"] == code.as_str()),
            "{report}"
        );
        assert!(quarantine.join(format!("{name}.reasons.md")).is_file());
        // Reports quote what they judge: the operator's only.
        for report in [".reasons.md", ".reasons.json"] {
            let path = quarantine.join(format!("{name}{report}"));
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", path.display());
        }
    }
    let quarantine = dirs.inbox.join("quarantine");
    let mode = std::fs::metadata(&quarantine).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "the quarantine directory the host created");
    for report in [".reasons.md", ".reasons.json"] {
        let text =
            std::fs::read_to_string(quarantine.join(format!("{hard_link}{report}"))).unwrap();
        assert!(
            !text.contains("SECRET-LINE"),
            "{report} quotes the linked file: {text}"
        );
    }
    // A request's inputs travel with it into quarantine.
    assert!(
        dirs.inbox
            .join("quarantine/TR-20261121-140000Z-symlink-in-inputs.inputs")
            .is_dir()
    );
    let by = dirs.results_by_request();
    assert_eq!(
        by.keys().collect::<Vec<_>>(),
        vec!["TR-20261121-140000Z-after-the-attacks"],
        "only the good request ran"
    );
}

#[test]
fn a_signature_that_does_not_verify_is_quarantined_under_a_policy_requiring_signatures() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/approval");
    let dirs = Dirs::new();
    let stem = "TR-20261121-090000Z-word-count";
    let text = std::fs::read_to_string(example.join(format!("{stem}.md"))).unwrap();
    let sig = example.join(format!("{stem}.md.sig"));
    // The signed request, tampered after signing, under another name.
    let forged = "TR-20261121-090000Z-word-count-forged";
    copy_entry(
        &example.join("inputs"),
        &dirs.inbox.join(format!("{forged}.inputs")),
    );
    std::fs::copy(&sig, dirs.inbox.join(format!("{forged}.md.sig"))).unwrap();
    dirs.submit(
        &format!("{forged}.md"),
        &text.replace("ten most frequent", "eleven most frequent"),
    );
    // The genuine one.
    copy_entry(
        &example.join("inputs"),
        &dirs.inbox.join(format!("{stem}.inputs")),
    );
    std::fs::copy(&sig, dirs.inbox.join(format!("{stem}.md.sig"))).unwrap();
    dirs.submit(&format!("{stem}.md"), &text);
    let policy = example.join("policy.toml");
    let host = Host::start_with(&dirs, "host", &["--policy", policy.to_str().unwrap()], &[]);
    wait_for(Duration::from_secs(60), "both requests handled", || {
        dirs.done().len() == 1
            && dirs
                .inbox
                .join(format!("quarantine/{forged}.md.reasons.json"))
                .is_file()
    });
    let lines = host.stop();
    let forged_line = lines
        .iter()
        .find(|l| l["request"] == format!("{forged}.md"))
        .unwrap();
    assert_eq!(forged_line["verdict"], "REJECT");
    assert!(
        forged_line["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["code"].as_str().unwrap().starts_with("approval.")),
        "{forged_line}"
    );
    // The signature and the inputs went with it.
    for n in [format!("{forged}.md.sig"), format!("{forged}.inputs")] {
        assert!(dirs.inbox.join("quarantine").join(&n).exists(), "{n}");
    }
    assert_eq!(dirs.done(), vec![format!("{stem}.md")]);
    assert!(dirs.inbox.join(format!("done/{stem}.md.sig")).is_file());
    assert!(dirs.inbox.join(format!("done/{stem}.inputs")).is_dir());
}

#[test]
fn two_hosts_on_one_inbox_claim_every_request_once() {
    let dirs = Dirs::new();
    let n = 40;
    let a = Host::start(&dirs, "a", &[]);
    let b = Host::start(&dirs, "b", &[]);
    std::thread::sleep(Duration::from_millis(300));
    for i in 0..n {
        let id = format!("TR-20261121-120000Z-both-{i:03}");
        dirs.submit(&format!("{id}.md"), &hello(&id));
    }
    wait_for(Duration::from_secs(60), "every request done", || {
        dirs.done().len() == n
    });
    let (la, lb) = (a.stop(), b.stop());
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for line in la.iter().chain(&lb) {
        assert_eq!(line["verdict"], "ACCEPT", "{line}");
        *seen
            .entry(line["request"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    assert_eq!(seen.len(), n);
    assert!(seen.values().all(|&c| c == 1), "{seen:?}");
    let by = dirs.results_by_request();
    assert_eq!(by.len(), n);
    assert!(by.values().all(|v| v.len() == 1), "{by:?}");
    eprintln!("host a ran {}, host b ran {}", la.len(), lb.len());
}

/// Worker processes whose parent is gone (reparented away from a `runner`).
fn orphan_workers() -> Vec<String> {
    let mut orphans = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let is_worker =
            cmdline.contains("runner-monty-worker") || cmdline.contains("runner-era-worker");
        if !is_worker {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid …
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .unwrap_or("0");
        let parent = std::fs::read(format!("/proc/{ppid}/cmdline")).unwrap_or_default();
        if !String::from_utf8_lossy(&parent).contains("runner") {
            orphans.push(format!("{cmdline} (parent {ppid})"));
        }
    }
    orphans
}

#[test]
fn sigkill_at_random_moments_loses_nothing_and_runs_nothing_twice() {
    // 200 requests flowing, the host SIGKILLed at a random moment three times
    // and restarted each time, then a last host finishes what is left.
    let n = 200;
    let dirs = Dirs::new();
    for i in 0..n {
        let id = format!("TR-20261121-120000Z-kill-{i:03}");
        dirs.submit(&format!("{id}.md"), &hello(&id));
    }
    let mut seed = std::process::id() as u64 ^ 0x9e37_79b9_7f4a_7c15;
    let mut random_ms = |lo: u64, hi: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        lo + seed % (hi - lo)
    };
    let mut kills = Vec::new();
    for round in 0..3 {
        // A random moment while requests flow: after a random number of the remaining
        // requests (up to a third) are done, plus a random few milliseconds, so the kill
        // lands in claiming, running, publishing or filing.
        let so_far = dirs.done().len() as u64;
        let target = so_far + random_ms(1, ((n as u64 - so_far) / 3).max(2));
        let mut host = Host::start(&dirs, &format!("killed-{round}"), &["--jobs", "2"]);
        wait_for(Duration::from_secs(60), "requests flowing", || {
            dirs.done().len() as u64 >= target
        });
        let jitter = random_ms(0, 40);
        std::thread::sleep(Duration::from_millis(jitter));
        host.signal("KILL");
        host.wait_exit(Duration::from_secs(10));
        kills.push((target, jitter, dirs.done().len()));
        // No partial result visible at any kill: every document has its lock (read by
        // results_by_request) and verifies; nothing but results and hidden staging.
        for results in dirs.results_by_request().values() {
            for r in results {
                verify(r);
            }
        }
        wait_for(Duration::from_secs(5), "no orphan worker", || {
            orphan_workers().is_empty()
        });
    }
    // The kills landed while requests flowed: the last host still has work.
    let before_last = dirs.done().len();
    assert!(
        before_last < n,
        "every request was done before a kill: {kills:?}"
    );
    eprintln!("kills (after N done, + ms, done at the kill): {kills:?}");
    let host = Host::start(&dirs, "final", &["--jobs", "2"]);
    let start = Instant::now();
    while dirs.done().len() < n && start.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(25));
    }
    let done = dirs.done();
    assert_eq!(
        done.len(),
        n,
        "done: {done:?}\ninbox: {:?}\nclaims: {:?}\nstderr: {}",
        dirs.names(&dirs.inbox),
        dirs.names(&dirs.inbox.join(".serve")),
        host.stderr()
    );
    host.stop();
    let by = dirs.results_by_request();
    assert_eq!(by.len(), n, "a request without a result");
    for (id, results) in &by {
        assert_eq!(
            results.len(),
            1,
            "{id} ran to completion twice: {results:?}"
        );
        verify(&results[0]);
    }
    // Nothing half-written is visible: every document verified above; what else is in
    // the results directory is a result's files (a host killed mid-publish can leave a
    // set without its document: not a result, see the README). The hidden `.tmp-…` the
    // killed hosts left were swept by the next host at its start.
    for name in dirs.names(&dirs.results) {
        assert!(name.starts_with("TS-"), "left in the results: {name}");
    }
    assert_eq!(
        dirs.names(&dirs.inbox),
        vec![".serve", "done", "quarantine"]
    );
    assert!(dirs.names(&dirs.inbox.join(".serve")).is_empty());
    assert!(orphan_workers().is_empty());
}

/// A monty request that runs for about `secs` seconds.
fn slow(id: &str, secs: u32) -> String {
    monty(
        id,
        &format!(
            "x = 0\nfor i in range({}):\n    x = x + i\nprint('slow', x)",
            secs * 3_000_000
        ),
    )
}

#[test]
fn sigterm_finishes_the_running_request_and_exits_0() {
    let dirs = Dirs::new();
    let mut host = Host::start(&dirs, "host", &[]);
    let id = "TR-20261121-120000Z-slow";
    dirs.submit(&format!("{id}.md"), &slow(id, 1));
    wait_for(Duration::from_secs(10), "the request claimed", || {
        dirs.names(&dirs.inbox.join(".serve")).iter().any(|d| {
            dirs.names(&dirs.inbox.join(".serve").join(d))
                .contains(&format!("{id}.md"))
        })
    });
    host.signal("TERM");
    // Submitted after the signal: not claimed.
    dirs.submit(
        "TR-20261121-120000Z-after.md",
        &hello("TR-20261121-120000Z-after"),
    );
    assert_eq!(
        host.wait_exit(Duration::from_secs(60)),
        Some(0),
        "{}",
        host.stderr()
    );
    assert_eq!(dirs.done(), vec![format!("{id}.md")]);
    assert!(dirs.inbox.join("TR-20261121-120000Z-after.md").is_file());
    let lines = host.lines();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["outcome"], "completed");
}

#[test]
fn a_second_signal_stops_at_once_and_the_request_runs_again_later() {
    let dirs = Dirs::new();
    let mut host = Host::start(&dirs, "host", &[]);
    let id = "TR-20261121-120000Z-interrupted";
    dirs.submit(&format!("{id}.md"), &slow(id, 5));
    wait_for(Duration::from_secs(10), "the request claimed", || {
        !dirs.inbox.join(format!("{id}.md")).exists()
    });
    std::thread::sleep(Duration::from_millis(200));
    host.signal("TERM");
    std::thread::sleep(Duration::from_millis(100));
    host.signal("TERM");
    let code = host.wait_exit(Duration::from_secs(10));
    assert_eq!(code, Some(128 + 15), "{}", host.stderr());
    assert!(dirs.done().is_empty());
    assert!(dirs.results_by_request().is_empty());
    wait_for(Duration::from_secs(5), "no orphan worker", || {
        orphan_workers().is_empty()
    });
    // The next host recovers the claim and runs it, once.
    let host = Host::start(&dirs, "next", &[]);
    wait_for(Duration::from_secs(60), "the request done", || {
        dirs.done().len() == 1
    });
    host.stop();
    assert_eq!(dirs.results_by_request()[id].len(), 1);
}

/// `GET path` on `addr`; the whole response.
fn http_get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    // One write: the request as a client sends it.
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

#[test]
fn metrics_are_scraped_from_loopback() {
    let dirs = Dirs::new();
    let host = Host::start(&dirs, "host", &["--metrics", "0"]);
    let addr = metrics_addr(&host);
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");
    assert!(http_get(&addr, "/healthz").ends_with("\r\n\r\nok\n"));
    dirs.submit(
        "TR-20261121-120000Z-metered.md",
        &hello("TR-20261121-120000Z-metered"),
    );
    dirs.submit("notes.md", "not a request\n");
    wait_for(Duration::from_secs(30), "both handled", || {
        dirs.done().len() == 1 && dirs.inbox.join("quarantine/notes.md").exists()
    });
    let needles = [
        r#"runner_serve_requests_total{verdict="ACCEPT",outcome="completed"} 1"#,
        r#"runner_serve_requests_total{verdict="REJECT",outcome="none"} 1"#,
        "runner_serve_latency_seconds_count 1",
        "runner_serve_queue_depth 0",
    ];
    // A request is filed into done/ just before it is counted: wait (bounded) for the
    // count, then check every line.
    wait_for(Duration::from_secs(10), "both counted", || {
        let metrics = http_get(&addr, "/metrics");
        needles.iter().all(|n| metrics.contains(n))
    });
    let metrics = http_get(&addr, "/metrics");
    assert!(metrics.starts_with("HTTP/1.1 200 OK"), "{metrics}");
    for needle in needles {
        assert!(metrics.contains(needle), "{needle} not in {metrics}");
    }
    assert!(http_get(&addr, "/nope").starts_with("HTTP/1.1 404"));
    host.stop();
}

/// The attack: slow-loris clients, each sending its request a byte at a time (one every
/// 300 ms, never finishing it inside the host's header timeout), hold connections open
/// while a scraper asks for `/healthz` and `/metrics`: every answer still comes, in full
/// (the old responder served one connection at a time, and a trickle of bytes held it).
#[test]
fn slow_loris_clients_do_not_stall_the_metrics_endpoint() {
    use std::io::Write;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let dirs = Dirs::new();
    let host = Host::start(&dirs, "host", &["--metrics", "0"]);
    let addr = metrics_addr(&host);
    let stop = Arc::new(AtomicBool::new(false));
    let request =
        b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    let lorises: Vec<_> = (0..16)
        .map(|_| {
            let (addr, stop) = (addr.clone(), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut sent = 0usize;
                // Bounded: at most the request's bytes (about 20 s), or until told to stop;
                // a connection the host closed is opened again.
                let mut stream = std::net::TcpStream::connect(&addr).unwrap();
                for &byte in request.iter().take(request.len() - 1) {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    if stream.write_all(&[byte]).is_err() {
                        stream = std::net::TcpStream::connect(&addr).unwrap();
                    }
                    sent += 1;
                    std::thread::sleep(Duration::from_millis(300));
                }
                sent
            })
        })
        .collect();
    // Let them connect and start trickling.
    std::thread::sleep(Duration::from_millis(500));
    for _ in 0..10 {
        let health = http_get(&addr, "/healthz");
        assert!(
            health.starts_with("HTTP/1.1 200 OK") && health.ends_with("\r\n\r\nok\n"),
            "{health:?}"
        );
        let metrics = http_get(&addr, "/metrics");
        assert!(
            metrics.starts_with("HTTP/1.1 200 OK")
                && metrics.contains("runner_serve_queue_depth")
                && metrics.trim_end().ends_with("# EOF"),
            "{metrics:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    stop.store(true, Ordering::Relaxed);
    for loris in lorises {
        assert!(loris.join().unwrap() > 0, "every slow client was sending");
    }
    host.stop();
}

/// The `/metrics` address a host logged.
fn metrics_addr(host: &Host) -> String {
    let mut addr = String::new();
    wait_for(
        Duration::from_secs(10),
        "the metrics address logged",
        || {
            let err = host.stderr();
            let found = err
                .split_whitespace()
                .find_map(|w| w.strip_prefix("http://"))
                .and_then(|w| w.strip_suffix("/metrics"))
                .map(str::to_owned);
            found.map(|a| addr = a).is_some()
        },
    );
    addr
}

/// The value of one sample line (`name{labels} value`) in a `/metrics` answer.
fn metric(addr: &str, sample: &str) -> Option<u64> {
    let text = http_get(addr, "/metrics");
    text.lines().find_map(|l| {
        l.strip_prefix(sample)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// Worker processes (ERA or Monty) whose parent is `pid`.
fn workers_of(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(child) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let cmdline =
            String::from_utf8_lossy(&std::fs::read(e.path().join("cmdline")).unwrap_or_default())
                .into_owned();
        if !(cmdline.contains("runner-monty-worker") || cmdline.contains("runner-era-worker")) {
            continue;
        }
        let ppid = std::fs::read_to_string(e.path().join("stat"))
            .ok()
            .and_then(|stat| {
                stat.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                    .and_then(|p| p.parse::<u32>().ok())
            });
        if ppid == Some(pid) {
            found.push(child);
        }
    }
    found
}

/// True while process `pid` exists and is not a zombie.
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
    })
}

/// Worker processes of one kind (`runner-era-worker`, `runner-monty-worker`) whose
/// parent is `pid`.
fn workers_of_kind(pid: u32, bin: &str) -> Vec<u32> {
    workers_of(pid)
        .into_iter()
        .filter(|w| {
            std::fs::read(format!("/proc/{w}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(bin))
        })
        .collect()
}

const ERA_WORKER: &str = "runner-era-worker";
const MONTY_WORKER: &str = "runner-monty-worker";

/// Waits (bounded) until the host `pid` has exactly `n` idle workers of each kind.
fn wait_for_pools(pid: u32, n: usize) {
    wait_for(Duration::from_secs(60), "both pools full", || {
        workers_of_kind(pid, ERA_WORKER).len() == n && workers_of_kind(pid, MONTY_WORKER).len() == n
    });
}

/// A host starts its workers ahead, at its start, one pool per kind (ERA,
/// preloading the default guest, and Monty), each of `--jobs`; the first request of each
/// kind already takes one (the metrics say `warm`, never `cold`), and each pool refills
/// to `--jobs`.
#[test]
fn pools_start_with_the_host_and_first_requests_run_warm() {
    let dirs = Dirs::new();
    let host = Host::start(&dirs, "host", &["--metrics", "0", "--jobs", "1"]);
    let addr = metrics_addr(&host);
    let pid = host.child.id();
    // Before any request: one idle worker of each kind.
    wait_for_pools(pid, 1);
    wait_for(Duration::from_secs(10), "the metrics see both", || {
        metric(&addr, "runner_serve_warm_workers") == Some(2)
    });
    let first = "TR-20261121-120000Z-warm-1";
    dirs.submit(&format!("{first}.md"), &hello(first));
    wait_for(Duration::from_secs(30), "the monty request done", || {
        dirs.done().len() == 1
    });
    let era = "TR-20261121-120000Z-warm-era";
    dirs.submit(
        &format!("{era}.md"),
        &era_request(era, "python -c \"print('era warm')\""),
    );
    wait_for(Duration::from_secs(60), "the ERA request done", || {
        dirs.done().len() == 2
    });
    let starts = |kind: &str| {
        metric(
            &addr,
            &format!("runner_serve_worker_starts_total{{kind=\"{kind}\"}}"),
        )
        .unwrap_or(0)
    };
    assert_eq!(starts("warm"), 2, "both first requests ran warm");
    assert_eq!(starts("cold"), 0, "no request started a worker cold");
    // Refilled, never more than --jobs of each kind.
    wait_for(Duration::from_secs(10), "the pools refilled", || {
        metric(&addr, "runner_serve_warm_workers") == Some(2)
    });
    assert_eq!(workers_of_kind(pid, ERA_WORKER).len(), 1);
    assert_eq!(workers_of_kind(pid, MONTY_WORKER).len(), 1);
    let lines = host.stop();
    assert!(
        lines.iter().all(|l| l["outcome"] == "completed"),
        "{lines:?}"
    );
    let by_request = dirs.results_by_request();
    let out = |id: &str| {
        std::fs::read_to_string(by_request[id][0].with_extension("").join("stdout")).unwrap()
    };
    assert_eq!(out(first), format!("hello from {first}\n"));
    assert_eq!(out(era), "era warm\n");
}

/// Idle warm workers (started with the host, no request yet) die with a
/// SIGKILLed host (no orphans), within a bounded wait.
#[test]
fn idle_warm_workers_die_with_a_sigkilled_host() {
    let dirs = Dirs::new();
    let mut host = Host::start(&dirs, "host", &["--jobs", "2"]);
    let pid = host.child.id();
    wait_for_pools(pid, 2);
    let idle = workers_of(pid);
    assert_eq!(idle.len(), 4, "two of each kind");
    host.signal("KILL");
    host.wait_exit(Duration::from_secs(10));
    wait_for(Duration::from_secs(5), "the idle workers gone", || {
        idle.iter().all(|&w| !alive(w))
    });
    wait_for(Duration::from_secs(5), "no orphan worker", || {
        orphan_workers().is_empty()
    });
}

/// A warm worker killed while idle is replaced, never handed a request; the
/// next request of its kind completes (on the replacement).
#[test]
fn a_warm_worker_killed_while_idle_is_replaced() {
    let dirs = Dirs::new();
    let host = Host::start(&dirs, "host", &["--metrics", "0", "--jobs", "1"]);
    let addr = metrics_addr(&host);
    let pid = host.child.id();
    wait_for_pools(pid, 1);
    let victim = workers_of_kind(pid, ERA_WORKER)[0];
    let status = Command::new("kill")
        .args(["-KILL", &victim.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    wait_for(Duration::from_secs(30), "the dead worker replaced", || {
        metric(&addr, "runner_serve_warm_workers_replaced_total") == Some(1)
            && workers_of_kind(pid, ERA_WORKER)
                .iter()
                .any(|&w| w != victim && alive(w))
    });
    let second = "TR-20261121-120000Z-idle-2";
    dirs.submit(
        &format!("{second}.md"),
        &era_request(second, "python -c \"print('after the kill')\""),
    );
    wait_for(Duration::from_secs(60), "the request done", || {
        dirs.done().len() == 1
    });
    let lines = host.stop();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines.iter().all(|l| l["outcome"] == "completed"),
        "{lines:?}"
    );
}

/// The lock of a result without what differs between two runs of the same request:
/// timing, usage, the fresh determinism seed and clock, the ids and seals.
fn comparable_lock(doc: &Path) -> Value {
    let mut lock: Value =
        serde_json::from_slice(&std::fs::read(doc.with_extension("lock.json")).unwrap()).unwrap();
    let map = lock.as_object_mut().unwrap();
    for key in [
        "created_utc",
        "determinism",
        "lock_sha256",
        "result_id",
        "result_sha256",
        "usage",
    ] {
        map.remove(key);
    }
    lock
}

/// A request served by a warm worker gives the result `runner exec` gives:
/// the same stdout (sha256), the same outputs, the same lock but for timing and usage.
/// ERA (the worker preloads the guest module) and Monty.
#[test]
fn warm_results_are_identical_to_exec_results() {
    let dirs = Dirs::new();
    let host = Host::start(&dirs, "host", &["--metrics", "0", "--jobs", "1"]);
    let addr = metrics_addr(&host);
    let era = |id: &str| {
        era_request(
            id,
            "python -c \"print(open('/out/a.txt','w').write('era' * 5))\"",
        )
    };
    let requests = [
        (
            "TR-20261121-120000Z-same-era-1",
            era("TR-20261121-120000Z-same-era-1"),
        ),
        (
            "TR-20261121-120000Z-same-era-2",
            era("TR-20261121-120000Z-same-era-2"),
        ),
        (
            "TR-20261121-120000Z-same-monty-1",
            monty("TR-20261121-120000Z-same-monty-1", "print(sum(range(10)))"),
        ),
        (
            "TR-20261121-120000Z-same-monty-2",
            monty("TR-20261121-120000Z-same-monty-2", "print(sum(range(10)))"),
        ),
    ];
    let exec_dir = dirs.root.join("exec");
    std::fs::create_dir(&exec_dir).unwrap();
    for (i, (id, text)) in requests.iter().enumerate() {
        // One at a time, both pools full in between (they start with the host): every
        // request runs warm.
        wait_for(Duration::from_secs(60), "both pools full", || {
            metric(&addr, "runner_serve_warm_workers") == Some(2)
        });
        dirs.submit(&format!("{id}.md"), text);
        wait_for(Duration::from_secs(60), "the request done", || {
            dirs.done().len() == i + 1
        });
        std::fs::write(exec_dir.join(format!("{id}.md")), text).unwrap();
    }
    assert_eq!(
        metric(&addr, r#"runner_serve_worker_starts_total{kind="warm"}"#),
        Some(4),
        "every request ran warm"
    );
    host.stop();
    let out = Command::new(runner_exe())
        .arg("exec")
        .arg(&exec_dir)
        .arg("--results")
        .arg(dirs.root.join("exec-results"))
        .env("RUNNER_MONTY_WORKER", monty_worker())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let served = dirs.results_by_request();
    let execd = results_in(&dirs.root.join("exec-results"));
    for (id, _) in &requests {
        let (a, b) = (&served[*id][0], &execd[*id][0]);
        let (la, lb) = (comparable_lock(a), comparable_lock(b));
        assert_eq!(la, lb, "{id}: the locks differ");
        let stdout = |doc: &Path| {
            support::sha256_hex(&std::fs::read(doc.with_extension("").join("stdout")).unwrap())
        };
        assert_eq!(stdout(a), stdout(b), "{id}: stdout differs");
        assert_eq!(
            dirs.names(&a.with_extension("").join("out")),
            dirs.names(&b.with_extension("").join("out")),
            "{id}: outputs differ"
        );
    }
    let era_out = served["TR-20261121-120000Z-same-era-2"][0]
        .with_extension("")
        .join("out/a.txt");
    assert_eq!(std::fs::read_to_string(era_out).unwrap(), "eraeraeraeraera");
}

/// An approved ERA request (`language: python`, no inputs) running `command`.
fn era_request(id: &str, command: &str) -> String {
    let body = format!("## Command\n`{command}`\n\n## Input Files\n- none\n");
    support::approved_request("serve", id, "ERA", 256, "", &body)
}

/// The tests that need root: mounting a small tmpfs as the results directory. Each says
/// so, when not run as root (CI runs as root); elsewhere leave the group out with
/// `cargo test -- --skip needs_root`.
mod needs_root {
    use super::*;

    /// A tmpfs of `size` mounted on `dir` for as long as the value lives.
    struct Tmpfs(PathBuf);

    impl Tmpfs {
        fn mount(dir: &Path, size: &str) -> Self {
            assert!(
                nix::unistd::geteuid().is_root(),
                "mounting a tmpfs needs root (CI runs as root); leave the group out with `cargo test -- --skip needs_root`"
            );
            std::fs::create_dir_all(dir).unwrap();
            let status = Command::new("mount")
                .args(["-t", "tmpfs", "-o"])
                .arg(format!("size={size},mode=0755"))
                .arg("tmpfs")
                .arg(dir)
                .status()
                .unwrap();
            assert!(status.success(), "mount -t tmpfs on {}", dir.display());
            Self(dir.to_owned())
        }
    }

    impl Drop for Tmpfs {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }

    /// Fills `dir`'s file system: a file written until the disk is full.
    fn fill(file: &Path) {
        use std::io::Write;
        let mut f = std::fs::File::create(file).unwrap();
        let block = vec![0x5au8; 4096];
        for _ in 0..100_000 {
            if f.write_all(&block).is_err() {
                return;
            }
        }
        panic!("{} never filled up", file.display());
    }

    #[test]
    fn a_full_results_disk_keeps_the_request_and_retries_with_backoff() {
        let dirs = Dirs::new();
        let _tmpfs = Tmpfs::mount(&dirs.results, "512k");
        let filler = dirs.results.join("filler");
        fill(&filler);
        let host = Host::start(&dirs, "host", &[]);
        let id = "TR-20261121-120000Z-disk-full";
        dirs.submit(&format!("{id}.md"), &hello(id));
        // Two failed attempts, the second after a longer wait than the first.
        wait_for(Duration::from_secs(30), "two retries", || {
            host.stderr().contains("retry 2 in 2 s")
        });
        let log = host.stderr();
        assert!(log.contains("retry 1 in 1 s"), "{log}");
        assert!(
            log.contains("No space left on device"),
            "the host says why: {log}"
        );
        let retries: Vec<Value> = host
            .lines()
            .into_iter()
            .filter(|l| l["verdict"] == "RETRY")
            .collect();
        assert!(retries.len() >= 2, "{retries:?}");
        assert_eq!(retries[0]["request"], format!("{id}.md"));
        // The request is kept (claimed, neither done nor quarantined), and nothing
        // half-written is in the results: the filler only.
        assert!(dirs.done().is_empty());
        assert!(dirs.names(&dirs.inbox.join("quarantine")).is_empty());
        let claims = dirs.inbox.join(".serve");
        let held: Vec<String> = dirs
            .names(&claims)
            .iter()
            .flat_map(|d| dirs.names(&claims.join(d)))
            .collect();
        assert!(held.contains(&format!("{id}.md")), "{held:?}");
        assert_eq!(dirs.names(&dirs.results), vec!["filler"]);

        // Space again: the next retry publishes the result, once, and files the request.
        std::fs::remove_file(&filler).unwrap();
        wait_for(Duration::from_secs(30), "the request done", || {
            dirs.done().len() == 1
        });
        let lines = host.stop();
        let accepted: Vec<&Value> = lines.iter().filter(|l| l["verdict"] == "ACCEPT").collect();
        assert_eq!(accepted.len(), 1, "{lines:?}");
        let by = dirs.results_by_request();
        assert_eq!(by[id].len(), 1);
        verify(&by[id][0]);
        for name in dirs.names(&dirs.results) {
            assert!(name.starts_with("TS-"), "left in the results: {name}");
        }
    }
}

/// An approved monty request whose code is `code`.
fn monty(id: &str, code: &str) -> String {
    support::monty_request(id, code, "serve")
}
