//! `runner exec DIR --shard K/N`: three processes over one directory, run at once, run
//! every request exactly once between them; the partition is the same on every run.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// reason: a test harness builds fixtures and runs the built binaries on the host.
#![allow(clippy::disallowed_methods)]

use crate::support;

use support::{monty_worker, runner_exe};

use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// The `request` of each entry of one shard's `--json` array, sorted.
fn shard_requests(dir: &Path, results: &Path, shard: &str) -> std::process::Child {
    Command::new(runner_exe())
        .arg("exec")
        .arg(dir)
        .args(["--shard", shard, "--json", "--results"])
        .arg(results)
        .env("RUNNER_MONTY_WORKER", monty_worker())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn three_shards_in_parallel_run_each_request_once() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("requests");
    std::fs::create_dir(&dir).unwrap();
    let mut all = Vec::new();
    for i in 0..24 {
        let id = format!("TR-20261121-120000Z-shard-{i:02}");
        std::fs::write(
            dir.join(format!("{id}.md")),
            monty(&id, &format!("print({i} * 2)")),
        )
        .unwrap();
        all.push(dir.join(format!("{id}.md")).display().to_string());
    }
    all.sort();
    let mut picked: Vec<Vec<String>> = Vec::new();
    for round in 0..2 {
        let children: Vec<_> = (0..3)
            .map(|k| {
                let results = tmp.path().join(format!("results-{round}-{k}"));
                shard_requests(&dir, &results, &format!("{k}/3"))
            })
            .collect();
        let mut this_round = Vec::new();
        for child in children {
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let entries: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
            let mut names = Vec::new();
            for e in &entries {
                assert_eq!(e["verdict"], "ACCEPT", "{e}");
                assert_eq!(e["outcome"], "completed", "{e}");
                names.push(e["request"].as_str().unwrap().to_owned());
            }
            names.sort();
            this_round.push(names);
        }
        if round == 1 {
            assert_eq!(this_round, picked, "the partition changed between runs");
        }
        picked = this_round;
    }
    // A disjoint cover: every request in exactly one shard (24 over 3 shards: a shard
    // holding all of them would mean the partition does nothing).
    let mut union: Vec<String> = picked.iter().flatten().cloned().collect();
    union.sort();
    assert_eq!(union, all);
    assert!(picked.iter().all(|p| p.len() < all.len()), "{picked:?}");
    // The partition is the one documented: the whole sha256 of the normalized text,
    // modulo N. For N = 3 that is the sum of its 32 bytes modulo 3 (256 ≡ 1 mod 3), a
    // check that shares nothing with the runner's digit-by-digit reduction.
    for (k, names) in picked.iter().enumerate() {
        for name in names {
            let text = std::fs::read_to_string(name).unwrap();
            let tagged = runner_core::lock::text_sha256_tagged(&text);
            let hex = tagged.trim_start_matches("sha256:");
            let sum: u64 = (0..32)
                .map(|i| u64::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
                .sum();
            assert_eq!(
                sum % 3,
                k as u64,
                "{name}: sha256 {hex} is not in shard {k}"
            );
        }
    }
    // And each shard wrote exactly the results of its requests.
    for (k, names) in picked.iter().enumerate() {
        let results = tmp.path().join(format!("results-1-{k}"));
        let docs = std::fs::read_dir(&results)
            .map(|d| {
                d.flatten()
                    .filter(|e| {
                        let n = e.file_name().to_string_lossy().into_owned();
                        n.starts_with("TS-") && n.ends_with(".md")
                    })
                    .count()
            })
            .unwrap_or(0);
        assert_eq!(docs, names.len(), "shard {k}");
    }
}

#[test]
fn a_bad_shard_is_refused_naming_the_problem() {
    for (bad, says) in [("3/3", "K must be less than N"), ("1", "give K/N")] {
        let out = Command::new(runner_exe())
            .args(["exec", "requests", "--shard", bad])
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--shard") && err.contains(says),
            "{bad}: {err}"
        );
    }
}

/// An approved monty request whose code is `code`.
fn monty(id: &str, code: &str) -> String {
    support::monty_request(id, code, "shard")
}
