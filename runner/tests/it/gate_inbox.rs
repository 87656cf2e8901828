//! `runner gate`: sorting an inbox into accepted and quarantine, with reason reports,
//! results moving with their directories, names never overwritten, interrupted runs
//! recovered, a SIGKILL in the middle of a batch losing and duplicating nothing, and the
//! throughput on a mixed inbox of 1000 files.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// reason: a test harness builds fixtures and runs the built binaries on the host.
#![allow(clippy::disallowed_methods)]

use crate::gate_support;

use gate_support::{copy_tree, corpus_dir, put_exec_set};
use runner_gate::research_packet::content_hashes;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

struct Box3 {
    _tmp: tempfile::TempDir,
    inbox: PathBuf,
    accepted: PathBuf,
    quarantine: PathBuf,
}

fn dirs() -> Box3 {
    let tmp = tempfile::tempdir().unwrap();
    let inbox = tmp.path().join("inbox");
    std::fs::create_dir(&inbox).unwrap();
    Box3 {
        inbox,
        accepted: tmp.path().join("accepted"),
        quarantine: tmp.path().join("quarantine"),
        _tmp: tmp,
    }
}

fn gate_cmd(b: &Box3, catalog: bool) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_runner"));
    c.arg("gate")
        .arg(&b.inbox)
        .arg("--accepted")
        .arg(&b.accepted)
        .arg("--quarantine")
        .arg(&b.quarantine)
        .arg("--json");
    if catalog {
        c.arg("--catalog")
            .arg(corpus_dir("governed").join("catalog.json"));
    }
    c
}

fn gate(b: &Box3, catalog: bool) -> (serde_json::Value, Output) {
    let out = gate_cmd(b, catalog).output().expect("runner gate runs");
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: stdout {} stderr {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (v, out)
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    };
    v.sort();
    v
}

fn fixture(kind: &str, name: &str) -> PathBuf {
    corpus_dir(kind).join(name)
}

/// A result fixture (document and directory) copied into `inbox` as `name.md`.
fn put_result(inbox: &Path, fixture_name: &str, name: &str) {
    copy_tree(
        &fixture("results", &format!("{fixture_name}.md")),
        &inbox.join(format!("{name}.md")),
    );
    copy_tree(&fixture("results", fixture_name), &inbox.join(name));
}

/// A valid research packet made unique by `n` (its hashes re-derived).
fn unique_packet(n: usize) -> String {
    let base = std::fs::read_to_string(fixture("packets", "accept-worked-example-rfc8785-jcs.md"))
        .unwrap();
    let text = base
        .replace(
            "RP-20261121-090000Z-rfc8785-jcs\"",
            &format!("RP-20261121-090000Z-rfc8785-jcs-{n}\""),
        )
        .replace(
            "equal values hash to equal bytes.",
            &format!("equal values hash to equal bytes (copy {n})."),
        );
    let old = content_hashes(&base).unwrap();
    let new = content_hashes(&text).unwrap();
    text.replace(&old.body_sha256, &new.body_sha256)
}

fn unique_request(n: usize) -> String {
    std::fs::read_to_string(corpus_dir("requests").join("accept-era-csv-stats-copy.md"))
        .unwrap()
        .replace(
            "TR-20261121-100000Z-csv-stats\"",
            &format!("TR-20261121-100000Z-csv-stats-{n}\""),
        )
}

fn unique_governed(n: usize) -> String {
    std::fs::read_to_string(fixture("governed", "accept-worked-example.json"))
        .unwrap()
        .replace("PKT-EXAMPLE-001", &format!("PKT-EXAMPLE-{n:04}"))
}

fn reasons_json(dir: &Path, doc: &str) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join(format!("{doc}.reasons.json"))).unwrap())
        .unwrap()
}

#[test]
fn sorts_a_mixed_inbox_with_reports_and_companions() {
    let b = dirs();
    std::fs::write(b.inbox.join("TR-good.md"), unique_request(1)).unwrap();
    std::fs::write(b.inbox.join("RP-good.md"), unique_packet(1)).unwrap();
    std::fs::write(b.inbox.join("PKT-good.json"), unique_governed(1)).unwrap();
    put_exec_set(&b.inbox, "TS-good");
    // A result as exec wrote it but without its lock and statement: not whole.
    put_result(&b.inbox, "accept-csv-stats-real-exec", "TS-nolock");
    put_result(&b.inbox, "artifact-one-byte-tampered", "TS-tampered");
    std::fs::copy(
        fixture("packets", "systemd-unit-in-code-block.md"),
        b.inbox.join("RP-systemd.md"),
    )
    .unwrap();
    std::fs::copy(
        fixture("governed", "raw-sql-in-payload.json"),
        b.inbox.join("PKT-sql.json"),
    )
    .unwrap();
    std::fs::write(b.inbox.join("notes.txt"), "just some notes\n").unwrap();
    std::fs::write(b.inbox.join("x.md.reasons.md"), "not a report\n").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", b.inbox.join("link.md")).unwrap();
    nix::unistd::mkfifo(
        &b.inbox.join("pipe.md"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    std::fs::write(b.inbox.join(".upload-in-progress.md"), "half").unwrap();
    std::fs::create_dir(b.inbox.join("orphan-dir")).unwrap();

    let (v, out) = gate(&b, true);
    assert_eq!(out.status.code(), Some(1), "some were quarantined: {v}");
    assert_eq!(v["documents"], 12, "{v}");
    assert_eq!(v["accepted"], 4, "{v}");
    assert_eq!(v["quarantined"], 8, "{v}");
    assert_eq!(v["failed"], 0, "{v}");
    assert_eq!(v["skipped"], 2, "{v}");
    assert!(v["files_per_sec"].as_f64().unwrap() > 0.0);

    assert_eq!(
        names(&b.accepted),
        [
            "PKT-good.json",
            "RP-good.md",
            "TR-good.md",
            "TS-good",
            "TS-good.intoto.json",
            "TS-good.lock.json",
            "TS-good.md"
        ]
    );
    assert_eq!(
        names(&b.accepted.join("TS-good")),
        ["out", "stderr", "stdout"]
    );
    assert_eq!(names(&b.inbox), [".upload-in-progress.md", "orphan-dir"]);
    let q = names(&b.quarantine);
    for doc in [
        "PKT-sql.json",
        "RP-systemd.md",
        "TS-tampered.md",
        "TS-nolock.md",
        "link.md",
        "notes.txt",
        "pipe.md",
        "x.md.reasons-doc.md",
    ] {
        assert!(
            q.contains(&doc.to_owned()),
            "{doc} not in quarantine: {q:?}"
        );
        assert!(
            q.contains(&format!("{doc}.reasons.md")),
            "{doc} has no markdown report: {q:?}"
        );
        assert!(
            q.contains(&format!("{doc}.reasons.json")),
            "{doc} has no JSON report: {q:?}"
        );
    }
    assert!(
        q.contains(&"TS-tampered".to_owned()),
        "a result's directory goes with it: {q:?}"
    );
    // The symlink moved as a symlink, never followed.
    assert!(
        b.quarantine
            .join("link.md")
            .symlink_metadata()
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let link = reasons_json(&b.quarantine, "link.md");
    assert_eq!(link["reasons"][0]["code"], "io.not_regular");

    // Every reason, with its line, in both reports.
    let r = reasons_json(&b.quarantine, "RP-systemd.md");
    assert_eq!(r["kind"], "research_packet");
    assert_eq!(r["source"], "RP-systemd.md");
    let lines: Vec<u64> = r["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|x| x["line"].as_u64())
        .collect();
    assert!(lines.len() >= 6, "{r}");
    let md = std::fs::read_to_string(b.quarantine.join("RP-systemd.md.reasons.md")).unwrap();
    for x in r["reasons"].as_array().unwrap() {
        assert!(md.contains(x["code"].as_str().unwrap()), "{md}");
        if let Some(l) = x["line"].as_u64() {
            assert!(md.contains(&format!("line {l}:")), "{md}");
        }
    }
    let t = reasons_json(&b.quarantine, "TS-nolock.md");
    assert_eq!(t["reasons"][0]["code"], "lock.missing", "{t}");
    assert!(
        t["reasons"][0]["message"]
            .as_str()
            .unwrap()
            .contains("TS-nolock.lock.json"),
        "{t}"
    );
    let t = reasons_json(&b.quarantine, "TS-tampered.md");
    assert_eq!(t["reasons"][0]["code"], "artifacts.hash_mismatch", "{t}");
    let s = reasons_json(&b.quarantine, "PKT-sql.json");
    assert!(
        s["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["code"] == "FLAG_RAW_SQL")
    );

    // Nothing left behind by the gate itself, and a second run has nothing to do.
    for d in [&b.accepted, &b.quarantine, &b.inbox] {
        assert!(
            names(d).iter().all(|n| !n.starts_with(".gate-")),
            "{:?}",
            names(d)
        );
    }
    let (v, out) = gate(&b, true);
    assert_eq!(out.status.code(), Some(0), "{v}");
    assert_eq!(v["documents"], 0);
}

#[test]
fn notes_keep_documents_out_of_accepted() {
    let b = dirs();
    std::fs::write(b.inbox.join("PKT-1.json"), unique_governed(1)).unwrap();
    std::fs::copy(
        fixture("results", "accept-csv-stats-real-exec.md"),
        b.inbox.join("TS-alone.md"),
    )
    .unwrap();
    let (v, out) = gate(&b, false);
    assert_eq!(out.status.code(), Some(1), "{v}");
    assert_eq!(names(&b.accepted), Vec::<String>::new());
    assert_eq!(
        reasons_json(&b.quarantine, "PKT-1.json")["reasons"][0]["code"],
        "CONTENT_HASH_NOT_CHECKED"
    );
    assert_eq!(
        reasons_json(&b.quarantine, "TS-alone.md")["reasons"][0]["code"],
        "artifacts.not_checked"
    );
}

#[test]
fn name_collisions_never_overwrite() {
    let b = dirs();
    put_exec_set(&b.inbox, "TS-same");
    std::fs::write(b.inbox.join("RP-same.md"), unique_packet(1)).unwrap();
    std::fs::write(b.inbox.join("bad.md"), "first\n").unwrap();
    gate(&b, true);
    put_exec_set(&b.inbox, "TS-same");
    std::fs::write(b.inbox.join("RP-same.md"), unique_packet(2)).unwrap();
    std::fs::write(b.inbox.join("bad.md"), "second\n").unwrap();
    let (v, _) = gate(&b, true);
    assert_eq!(v["documents"], 3, "{v}");
    assert_eq!(
        names(&b.accepted),
        [
            "RP-same-2.md",
            "RP-same.md",
            "TS-same",
            "TS-same-2",
            "TS-same-2.intoto.json",
            "TS-same-2.lock.json",
            "TS-same-2.md",
            "TS-same.intoto.json",
            "TS-same.lock.json",
            "TS-same.md"
        ]
    );
    assert_eq!(
        std::fs::read_to_string(b.accepted.join("RP-same.md")).unwrap(),
        unique_packet(1)
    );
    assert_eq!(
        std::fs::read_to_string(b.accepted.join("RP-same-2.md")).unwrap(),
        unique_packet(2)
    );
    assert_eq!(
        std::fs::read_to_string(b.quarantine.join("bad.md")).unwrap(),
        "first\n"
    );
    assert_eq!(
        std::fs::read_to_string(b.quarantine.join("bad-2.md")).unwrap(),
        "second\n"
    );
    assert_eq!(reasons_json(&b.quarantine, "bad-2.md")["file"], "bad-2.md");
    // The renamed result still validates where it landed: its directory was renamed too.
    let out = Command::new(env!("CARGO_BIN_EXE_runner"))
        .arg("validate")
        .arg(b.accepted.join("TS-same-2.md"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// The states a crash can leave, made by hand: a report without its document, a
/// result's directory moved without its document (with the intent recorded), a
/// temporary copy. The next run settles each and sorts everything exactly once.
#[test]
fn an_interrupted_run_is_recovered() {
    let b = dirs();
    std::fs::create_dir_all(&b.accepted).unwrap();
    std::fs::create_dir_all(&b.quarantine).unwrap();
    // A report was written, then the crash: the document is still in the inbox.
    std::fs::write(b.inbox.join("bad.md"), "no front matter\n").unwrap();
    std::fs::write(b.quarantine.join("bad.md.reasons.md"), "stale").unwrap();
    std::fs::write(b.quarantine.join("bad.md.reasons.json"), "stale").unwrap();
    // A result's directory reached accepted, its document did not.
    put_exec_set(&b.inbox, "TS-half");
    std::fs::rename(b.inbox.join("TS-half"), b.accepted.join("TS-half")).unwrap();
    let intent = serde_json::json!({
        "intent": "runner.gate-intent/v1",
        "inbox": b.inbox.canonicalize().unwrap(),
        "moves": [["TS-half", "TS-half"], ["TS-half.md", "TS-half.md"]],
    });
    std::fs::write(
        b.accepted.join(".gate-intent-TS-half.md.json"),
        intent.to_string(),
    )
    .unwrap();
    // A temporary copy from a cross-filesystem move.
    std::fs::write(b.accepted.join(".gate-tmp-1-0-x"), "partial").unwrap();
    // An intent forged inside the inbox is never read.
    std::fs::write(b.inbox.join(".gate-intent-evil.json"), intent.to_string()).unwrap();

    let (v, _) = gate(&b, true);
    assert_eq!(v["recovered"], 1, "{v}");
    assert_eq!(
        names(&b.accepted),
        [
            "TS-half",
            "TS-half.intoto.json",
            "TS-half.lock.json",
            "TS-half.md"
        ]
    );
    assert_eq!(
        names(&b.accepted.join("TS-half")),
        ["out", "stderr", "stdout"]
    );
    assert_eq!(
        names(&b.quarantine),
        ["bad.md", "bad.md.reasons.json", "bad.md.reasons.md"]
    );
    assert_eq!(
        reasons_json(&b.quarantine, "bad.md")["file"],
        "bad.md",
        "the stale report was replaced"
    );
}

/// Inbox on one filesystem, destinations on another (tmpfs): moves are copies that
/// land whole and leave nothing behind.
#[test]
fn moves_across_filesystems() {
    let shm = Path::new("/dev/shm");
    let b = dirs();
    // A pass that moved nothing across filesystems would check nothing: this machine
    // (and CI's) has /dev/shm as a tmpfs, so its absence is a failure, not a skip.
    let other = tempfile::tempdir_in(shm)
        .expect("this test needs /dev/shm (a tmpfs) for a second filesystem");
    use std::os::unix::fs::MetadataExt;
    assert_ne!(
        other.path().metadata().unwrap().dev(),
        b.inbox.metadata().unwrap().dev(),
        "/dev/shm is on the temp directory's filesystem: no cross-filesystem move to test"
    );
    let accepted = other.path().join("accepted");
    let quarantine = other.path().join("quarantine");
    put_exec_set(&b.inbox, "TS-x");
    std::fs::write(b.inbox.join("RP-1.md"), unique_packet(1)).unwrap();
    std::fs::write(b.inbox.join("bad.md"), "nope\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_runner"))
        .arg("gate")
        .arg(&b.inbox)
        .arg("--accepted")
        .arg(&accepted)
        .arg("--quarantine")
        .arg(&quarantine)
        .arg("--json")
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["accepted"], 2, "{v}");
    assert_eq!(v["quarantined"], 1, "{v}");
    assert_eq!(names(&b.inbox), Vec::<String>::new());
    assert_eq!(
        names(&accepted),
        [
            "RP-1.md",
            "TS-x",
            "TS-x.intoto.json",
            "TS-x.lock.json",
            "TS-x.md"
        ]
    );
    assert_eq!(
        std::fs::read_to_string(accepted.join("RP-1.md")).unwrap(),
        unique_packet(1)
    );
    let out = Command::new(env!("CARGO_BIN_EXE_runner"))
        .arg("validate")
        .arg(accepted.join("TS-x.md"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "the copied result still re-derives"
    );
    assert_eq!(
        names(&quarantine),
        ["bad.md", "bad.md.reasons.json", "bad.md.reasons.md"]
    );
}

/// What an inbox holds: documents with their bytes, and result directories with the
/// bytes of every file in them.
fn snapshot(inbox: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut map = BTreeMap::new();
    let mut stack = vec![(inbox.to_path_buf(), String::new())];
    while let Some((dir, prefix)) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            let name = format!("{prefix}{}", e.file_name().to_string_lossy());
            if e.file_type().unwrap().is_dir() {
                stack.push((e.path(), format!("{name}/")));
            } else {
                map.insert(name, std::fs::read(e.path()).unwrap());
            }
        }
    }
    map
}

/// Where each original entry is now, across the three directories (reports, intents and
/// temporary files are the gate's own and are left out).
fn census(b: &Box3) -> BTreeMap<String, Vec<(String, Vec<u8>)>> {
    let mut found: BTreeMap<String, Vec<(String, Vec<u8>)>> = BTreeMap::new();
    for (label, dir) in [
        ("inbox", &b.inbox),
        ("accepted", &b.accepted),
        ("quarantine", &b.quarantine),
    ] {
        if !dir.exists() {
            continue;
        }
        for (name, bytes) in snapshot(dir) {
            let top = name.split('/').next().unwrap();
            if top.starts_with(".gate-")
                || top.ends_with(".reasons.md")
                || top.ends_with(".reasons.json")
            {
                continue;
            }
            found
                .entry(name)
                .or_default()
                .push((label.to_owned(), bytes));
        }
    }
    found
}

fn fill_mixed_inbox(inbox: &Path, n: usize) -> usize {
    let mut documents = 0;
    for i in 0..n {
        match i % 10 {
            0 | 1 => std::fs::write(inbox.join(format!("RP-{i:04}.md")), unique_packet(i)).unwrap(),
            2 => std::fs::write(inbox.join(format!("TR-{i:04}.md")), unique_request(i)).unwrap(),
            3 => {
                std::fs::write(inbox.join(format!("PKT-{i:04}.json")), unique_governed(i)).unwrap()
            }
            4 => put_exec_set(inbox, &format!("TS-{i:04}")),
            5 => put_result(inbox, "stdout-one-byte-tampered", &format!("TS-{i:04}")),
            6 => std::fs::copy(
                fixture("packets", "obfuscated-curl-pipe-sh-zero-width.md"),
                inbox.join(format!("RP-{i:04}.md")),
            )
            .map(|_| ())
            .unwrap(),
            7 => std::fs::copy(
                fixture("governed", "payload-tampered.json"),
                inbox.join(format!("PKT-{i:04}.json")),
            )
            .map(|_| ())
            .unwrap(),
            8 => std::fs::copy(
                fixture(
                    "results",
                    "excerpt-ignore-previous-instructions-homoglyphs.md",
                ),
                inbox.join(format!("TS-{i:04}.md")),
            )
            .map(|_| ())
            .unwrap(),
            _ => std::fs::write(
                inbox.join(format!("junk-{i:04}.txt")),
                format!("junk {i}\n"),
            )
            .unwrap(),
        }
        documents += 1;
    }
    documents
}

/// Each original file is in exactly one place, byte for byte.
fn assert_nothing_lost_or_duplicated(b: &Box3, original: &BTreeMap<String, Vec<u8>>, when: &str) {
    let now = census(b);
    let mut problems = Vec::new();
    for (name, bytes) in original {
        match now.get(name).map(Vec::as_slice) {
            None | Some([]) => problems.push(format!("{name}: lost")),
            Some([(_, b2)]) if b2 == bytes => {}
            Some([(at, _)]) => problems.push(format!("{name}: changed (in {at})")),
            Some(many) => problems.push(format!(
                "{name}: duplicated in {:?}",
                many.iter().map(|(a, _)| a.as_str()).collect::<Vec<_>>()
            )),
        }
    }
    for name in now.keys() {
        if !original.contains_key(name) {
            problems.push(format!("{name}: appeared from nowhere"));
        }
    }
    assert!(problems.is_empty(), "{when}:\n  {}", problems.join("\n  "));
}

#[test]
fn sigkill_mid_batch_loses_nothing_and_a_rerun_finishes() {
    let b = dirs();
    let documents = fill_mixed_inbox(&b.inbox, 300);
    let original = snapshot(&b.inbox);
    let in_inbox = |b: &Box3| {
        names(&b.inbox)
            .iter()
            .filter(|n| !n.starts_with('.'))
            .count()
    };
    // Kill while documents are moving: once the inbox has shrunk a little more each
    // round (the reports and intents of a batch are written before any of its moves,
    // so this lands between moves, not before them).
    let mut kills_mid_move = 0;
    for round in 0..4 {
        let left_before = in_inbox(&b);
        let mut child = gate_cmd(&b, true)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let start = Instant::now();
        let target = left_before.saturating_sub(3 + round * 9);
        loop {
            if in_inbox(&b) <= target
                || child.try_wait().unwrap().is_some()
                || start.elapsed() > Duration::from_secs(20)
            {
                break;
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        let finished = child.try_wait().unwrap().is_some();
        child.kill().ok(); // SIGKILL
        child.wait().unwrap();
        assert_nothing_lost_or_duplicated(&b, &original, &format!("after kill {round}"));
        let left = in_inbox(&b);
        let intents = [&b.accepted, &b.quarantine]
            .iter()
            .flat_map(|d| names(d))
            .filter(|n| n.starts_with(".gate-intent-"))
            .count();
        println!(
            "kill {round}: {} of {left_before} inbox entries moved, {left} left, {intents} intents pending, finished: {finished}",
            left_before - left
        );
        if !finished && left < left_before && left > 0 {
            kills_mid_move += 1;
        }
        if left == 0 {
            break;
        }
    }
    assert!(
        kills_mid_move >= 1,
        "no kill landed between moves in the middle of the batch"
    );

    let (v, out) = gate(&b, true);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{v}");
    assert_eq!(v["failed"], 0, "{v}");
    println!(
        "final run: {} documents, {} interrupted moves recovered",
        v["documents"], v["recovered"]
    );
    assert_nothing_lost_or_duplicated(&b, &original, "after the final run");
    assert_eq!(
        names(&b.inbox)
            .iter()
            .filter(|n| !n.starts_with(".gate-"))
            .count(),
        0,
        "{:?}",
        names(&b.inbox)
    );
    // Every document is sorted, results beside their directories, every quarantined
    // document beside its two reports.
    let (acc, quar) = (names(&b.accepted), names(&b.quarantine));
    let docs = acc
        .iter()
        .chain(&quar)
        .filter(|n| {
            let p = if acc.contains(n) {
                b.accepted.join(n)
            } else {
                b.quarantine.join(n)
            };
            p.is_file()
                && ![".reasons.md", ".reasons.json", ".lock.json", ".intoto.json"]
                    .iter()
                    .any(|suffix| n.ends_with(suffix))
        })
        .count();
    assert_eq!(docs, documents);
    for n in &quar {
        if b.quarantine.join(n).is_file()
            && !n.ends_with(".reasons.md")
            && !n.ends_with(".reasons.json")
        {
            assert!(
                quar.contains(&format!("{n}.reasons.md"))
                    && quar.contains(&format!("{n}.reasons.json")),
                "{n}"
            );
        }
    }
    for n in acc
        .iter()
        .chain(&quar)
        .filter(|n| n.starts_with("TS-") && n.ends_with(".md") && !n.contains(".reasons"))
    {
        let stem = &n[..n.len() - 3];
        let in_acc = acc.contains(n);
        let dir = if in_acc {
            b.accepted.join(stem)
        } else {
            b.quarantine.join(stem)
        };
        let from_fixture_without_dir = original.keys().all(|k| !k.starts_with(&format!("{stem}/")));
        assert!(
            from_fixture_without_dir || dir.is_dir(),
            "{n} lost its directory"
        );
    }
    for d in [&b.accepted, &b.quarantine] {
        assert!(
            names(d).iter().all(|n| !n.starts_with(".gate-")),
            "{:?}",
            names(d)
        );
    }
}

#[test]
fn throughput_on_a_mixed_inbox_of_1000_files() {
    let b = dirs();
    let documents = fill_mixed_inbox(&b.inbox, 1000);
    let (v, out) = gate(&b, true);
    assert_eq!(out.status.code(), Some(1), "{v}");
    assert_eq!(v["documents"], documents, "{v}");
    assert_eq!(v["failed"], 0);
    let accepted = v["accepted"].as_u64().unwrap();
    let quarantined = v["quarantined"].as_u64().unwrap();
    assert_eq!(
        accepted, 500,
        "requests, packets, governed packets and intact results"
    );
    assert_eq!(quarantined, 500);
    let rate = v["files_per_sec"].as_f64().unwrap();
    println!(
        "gate throughput: {documents} documents ({accepted} accepted, {quarantined} quarantined) in {:.3} s = {rate:.0} files/s",
        v["seconds"].as_f64().unwrap()
    );
    assert!(rate > 20.0, "throughput collapsed: {rate} files/s");
}

/// A request travels with its signature, and under a policy requiring signatures the
/// gate checks it as `runner exec` would: the genuine signed request is accepted with
/// its `.md.sig` beside it; the same text altered after signing (the attack: reuse a
/// signature on a rewritten request) is quarantined with its signature.
#[test]
fn a_request_travels_with_its_signature_and_a_forged_one_is_quarantined() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/approval");
    let stem = "TR-20261121-090000Z-word-count";
    let forged = "TR-20261121-090000Z-word-count-forged";
    let text = std::fs::read_to_string(example.join(format!("{stem}.md"))).unwrap();
    let sig = example.join(format!("{stem}.md.sig"));
    let b = dirs();
    std::fs::write(b.inbox.join(format!("{stem}.md")), &text).unwrap();
    std::fs::copy(&sig, b.inbox.join(format!("{stem}.md.sig"))).unwrap();
    std::fs::write(
        b.inbox.join(format!("{forged}.md")),
        text.replace("ten most frequent", "eleven most frequent"),
    )
    .unwrap();
    std::fs::copy(&sig, b.inbox.join(format!("{forged}.md.sig"))).unwrap();
    let mut cmd = gate_cmd(&b, false);
    cmd.arg("--policy").arg(example.join("policy.toml"));
    let out = cmd.output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: stderr {}", String::from_utf8_lossy(&out.stderr));
    });
    assert_eq!(v["accepted"], 1, "{v}");
    assert_eq!(v["quarantined"], 1, "{v}");
    assert_eq!(
        names(&b.accepted),
        vec![format!("{stem}.md"), format!("{stem}.md.sig")]
    );
    let q = names(&b.quarantine);
    assert!(q.contains(&format!("{forged}.md.sig")), "{q:?}");
    let reasons = reasons_json(&b.quarantine, &format!("{forged}.md"));
    assert!(
        reasons.to_string().contains("approval."),
        "the forged request is refused for its approval: {reasons}"
    );
    assert!(names(&b.inbox).is_empty(), "{:?}", names(&b.inbox));
    // What was accepted still verifies where it landed.
    let check = Command::new(env!("CARGO_BIN_EXE_runner"))
        .args(["--policy"])
        .arg(example.join("policy.toml"))
        .arg("validate")
        .arg(b.accepted.join(format!("{stem}.md")))
        .output()
        .unwrap();
    assert!(check.status.success(), "{check:?}");
}

/// The attack: a document in the inbox that is a hard link (a second name of a file the
/// writer wants quoted back; `ln` needs no symlink). It is quarantined unread: its
/// reports quote nothing of it, and they are the operator's only (0600 in a 0700
/// quarantine the gate created).
#[test]
fn a_hard_linked_document_is_quarantined_unread_and_reports_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let b = dirs();
    let secret = b.inbox.parent().unwrap().join("secret.txt");
    std::fs::write(
        &secret,
        "SECRET-LINE-1 must never be quoted\nSECRET-LINE-2\n",
    )
    .unwrap();
    std::fs::hard_link(&secret, b.inbox.join("TR-hard-link.md")).unwrap();
    // A plain rejected document beside it: its report is private too.
    std::fs::write(b.inbox.join("notes.md"), "just some notes\n").unwrap();
    let (v, out) = gate(&b, false);
    assert_eq!(out.status.code(), Some(1), "{v}");
    let r = reasons_json(&b.quarantine, "TR-hard-link.md");
    assert_eq!(r["reasons"][0]["code"], "io.hard_link", "{r}");
    for doc in ["TR-hard-link.md", "notes.md"] {
        for report in [".reasons.md", ".reasons.json"] {
            let path = b.quarantine.join(format!("{doc}{report}"));
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(
                !text.contains("SECRET-LINE"),
                "{report} quotes the linked file: {text}"
            );
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", path.display());
        }
    }
    let mode = std::fs::metadata(&b.quarantine)
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o700, "the quarantine directory the gate created");
}
