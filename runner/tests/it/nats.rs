//! `runner serve --nats`, end to end: a real `nats-server` with JetStream, started by
//! each test on a free loopback port in a temporary directory and killed when the test
//! ends; real `runner serve` processes; requests, inputs and results through the real
//! streams and object store. Every wait is bounded.
//!
//! Needs `nats-server` on PATH (`just nats-server` installs the Debian package; `just
//! test` depends on it): without it these tests fail, saying so. Needs the Monty worker
//! built and the CPython guest fetched (`just test` does both).

#![allow(clippy::unwrap_used, clippy::expect_used)]
// reason: a test harness builds fixtures and runs the built binaries on the host.
#![allow(clippy::disallowed_methods)]

use crate::support;

use support::{monty_worker, runner_exe, sha256_hex, wait_for};

use async_nats::jetstream::{self, consumer::pull};
use futures_util::StreamExt;
use serde_json::Value;
use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;

/// A `nats-server -js` of the test's own, on loopback, killed on drop.
struct NatsServer {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl NatsServer {
    fn start() -> Self {
        let found = Command::new("sh")
            .args(["-c", "command -v nats-server"])
            .output()
            .unwrap();
        assert!(
            found.status.success(),
            "nats-server is not installed: these tests need it on PATH. Install it with \
             `just nats-server` (the Debian package nats-server; `just test` does it)"
        );
        let dir = tempfile::tempdir().unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("nats-server")
            .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"])
            .arg(dir.path().join("js"))
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(dir.path().join("nats.log")).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let server = Self {
            child,
            url: format!("nats://127.0.0.1:{port}"),
            _dir: dir,
        };
        wait_for(Duration::from_secs(15), "nats-server listening", || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        server
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A running `runner serve --nats`, its JSON lines and stderr in files.
struct Host {
    child: Child,
    err: PathBuf,
    _dir: tempfile::TempDir,
}

impl Host {
    fn start(server: &NatsServer, extra: &[&str], env: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let err = dir.path().join("stderr");
        let worker = monty_worker();
        let mut cmd = Command::new(runner_exe());
        cmd.args(["serve", "--nats", &server.url, "--json"])
            .args(extra)
            .env("RUNNER_MONTY_WORKER", &worker);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(dir.path().join("stdout")).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap();
        let host = Self {
            child,
            err,
            _dir: dir,
        };
        wait_for(Duration::from_secs(30), "the host serving", || {
            host.stderr().contains("serving nats")
        });
        host
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }

    fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, and the exit code within 60 s.
    fn stop(mut self) -> Option<i32> {
        let status = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(status.success());
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "the host did not stop: {}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The test's side of the engine: a client on the server the hosts serve.
struct Client {
    rt: tokio::runtime::Runtime,
    js: jetstream::Context,
}

impl Client {
    fn new(server: &NatsServer) -> Self {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let js = rt.block_on(async {
            let client = async_nats::connect(server.url.as_str()).await.unwrap();
            jetstream::new(client)
        });
        Self { rt, js }
    }

    fn put_input(&self, name: &str, bytes: &[u8]) {
        self.rt.block_on(async {
            let bucket = self.js.get_object_store("toolexec-inputs").await.unwrap();
            bucket.put(name, &mut &bytes[..]).await.unwrap();
        });
    }

    /// Publishes a request; `approval`: the `Runner-Approval` header's value as sent.
    fn submit(&self, request: &str, approval: Option<&str>) {
        self.rt.block_on(async {
            let mut headers = async_nats::HeaderMap::new();
            if let Some(value) = approval {
                headers.insert("Runner-Approval", value);
            }
            self.js
                .publish_with_headers("toolexec.requests", headers, request.to_owned().into())
                .await
                .unwrap()
                .await
                .unwrap();
        });
    }

    /// Every message of `stream` so far, as JSON (read with an ephemeral consumer).
    fn messages(&self, stream: &str) -> Vec<Value> {
        self.rt.block_on(async {
            let stream = self.js.get_stream(stream).await.unwrap();
            let mut stream = stream;
            let n = stream.info().await.unwrap().state.messages;
            if n == 0 {
                return Vec::new();
            }
            let consumer = stream
                .create_consumer(pull::Config::default())
                .await
                .unwrap();
            let mut out = Vec::new();
            let mut batch = consumer
                .fetch()
                .max_messages(usize::try_from(n).unwrap())
                .expires(Duration::from_secs(2))
                .messages()
                .await
                .unwrap();
            while let Ok(Some(Ok(m))) =
                tokio::time::timeout(Duration::from_secs(5), batch.next()).await
            {
                let mut v: Value = serde_json::from_slice(&m.payload).unwrap();
                v["_subject"] = Value::String(m.subject.to_string());
                out.push(v);
                if out.len() as u64 == n {
                    break;
                }
            }
            out
        })
    }

    /// Waits (bounded) until `stream` holds at least `n` messages; returns them all.
    fn wait_messages(&self, stream: &str, n: usize, limit: Duration) -> Vec<Value> {
        let start = Instant::now();
        loop {
            let got = self.messages(stream);
            if got.len() >= n {
                return got;
            }
            assert!(
                start.elapsed() < limit,
                "timed out after {limit:?} waiting for {n} messages on {stream}; have {}: {got:#?}",
                got.len()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The names of the objects in the results bucket.
    fn result_objects(&self) -> Vec<String> {
        self.rt.block_on(async {
            let bucket = self.js.get_object_store("toolexec-results").await.unwrap();
            let mut list = bucket.list().await.unwrap();
            let mut names = Vec::new();
            while let Some(Ok(info)) = list.next().await {
                names.push(info.name);
            }
            names.sort();
            names
        })
    }

    /// Downloads result `objects` into `dir` (their names are paths relative to it).
    fn download(&self, objects: &[String], dir: &Path) {
        self.rt.block_on(async {
            let bucket = self.js.get_object_store("toolexec-results").await.unwrap();
            for name in objects {
                let mut object = bucket.get(name).await.unwrap();
                let mut bytes = Vec::new();
                object.read_to_end(&mut bytes).await.unwrap();
                let path = dir.join(name);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(path, bytes).unwrap();
            }
        });
    }

    /// Waits until the hosts created the streams and buckets.
    fn wait_ready(&self) {
        wait_for(Duration::from_secs(20), "streams and buckets", || {
            self.rt.block_on(async {
                self.js.get_stream("TOOLEXEC").await.is_ok()
                    && self.js.get_object_store("toolexec-inputs").await.is_ok()
                    && self.js.get_object_store("toolexec-results").await.is_ok()
            })
        });
    }
}

/// An approved ERA request running `python -u job.py` with `job.py` declared by sha256.
fn era(id: &str, script_sha: &str) -> String {
    format!(
        "---\nrequest_type: tool_request\nschema_version: 1\nrequest_id: \"{id}\"\n\
         created_utc: \"2026-11-21T12:00:00Z\"\nrequested_by: \"nats-test\"\n\
         approved_by: \"nats-operator\"\napproved_utc: \"2026-11-21T12:00:01Z\"\n\
         purpose: \"NATS test.\"\nbackend: ERA\nlanguage: python\nnetwork: none\n\
         cpu_limit: \"20\"\nmemory_limit_mb: 256\ntime_limit_sec: 60\ninputs:\n\
         \x20 - path: \"/in/job.py\"\n    sha256: \"{script_sha}\"\n---\n\
         # NATS test\n\n## Command\n`python -u job.py`\n\n## Input Files\n\
         - `/in/job.py` sha256: {script_sha} (the script)\n\n## Output Expectations\n\
         - stdout: one line.\n\n## Risk Assessment\n- Risk level: low\n\
         - Justification: a test.\n- Data sensitivity: public\n\
         - Network rationale: none needed\n"
    )
}

/// Summaries by request id (or subject for rejected ones without an id).
fn by_request(summaries: &[Value]) -> BTreeMap<String, Vec<Value>> {
    let mut by: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for s in summaries {
        let key = s["request_id"]
            .as_str()
            .map_or_else(|| s["_subject"].as_str().unwrap().to_owned(), str::to_owned);
        by.entry(key).or_default().push(s.clone());
    }
    by
}

fn codes(summary: &Value) -> Vec<String> {
    summary["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["code"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn requests_run_through_jetstream_and_results_verify() {
    let server = NatsServer::start();
    let host = Host::start(&server, &["--jobs", "2"], &[]);
    let client = Client::new(&server);
    client.wait_ready();

    let script = b"print('sum', sum(range(10)))\n";
    let script_sha = sha256_hex(script);
    client.put_input(&script_sha, script);
    // An object stored under a hash its bytes do not have: the attack of a store that
    // hands back other bytes than asked for.
    let wanted = b"print('the declared bytes')\n";
    let wanted_sha = sha256_hex(wanted);
    client.put_input(&wanted_sha, b"print('substituted bytes')\n");
    let absent_sha = sha256_hex(b"never uploaded");

    client.submit(&monty("TR-nats-monty", "print(6 * 7)"), None);
    client.submit(&era("TR-nats-era", &script_sha), None);
    client.submit(&era("TR-nats-substituted-input", &wanted_sha), None);
    client.submit(&era("TR-nats-missing-input", &absent_sha), None);
    client.submit("this is not a request\n", None);
    client.submit(
        &monty("TR-nats-bad-header", "print(1)"),
        Some("not base64 !!"),
    );
    // Base64 of something that is not a DSSE envelope: judged as a bad signature file.
    client.submit(
        &monty("TR-nats-bad-sig", "print(2)"),
        Some("bm90IGFuIGVudmVsb3Bl"),
    );

    let summaries = client.wait_messages("TOOLEXEC_RESULTS", 7, Duration::from_secs(120));
    let by = by_request(&summaries);
    assert_eq!(summaries.len(), 7, "{summaries:#?}");

    let m = &by["TR-nats-monty"][0];
    assert_eq!(m["verdict"], "ACCEPT", "{m}");
    assert_eq!(m["outcome"], "completed");
    assert_eq!(m["_subject"], "toolexec.results.TR-nats-monty");
    assert_eq!(m["reused"], false);

    let e = &by["TR-nats-era"][0];
    assert_eq!(e["verdict"], "ACCEPT", "{e}");
    assert_eq!(e["exit_code"], 0, "{e}");
    // Its files are in the results bucket under the result's name, and verify.
    let objects: Vec<String> = e["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    let result_id = e["result_id"].as_str().unwrap();
    assert!(objects.contains(&format!("{result_id}.md")), "{objects:?}");
    assert!(
        objects.contains(&format!("{result_id}/stdout")),
        "{objects:?}"
    );
    let dl = tempfile::tempdir().unwrap();
    client.download(&objects, dl.path());
    let stdout = std::fs::read_to_string(dl.path().join(result_id).join("stdout")).unwrap();
    assert_eq!(stdout, "sum 45\n");
    let request_file = dl.path().join("request.md");
    std::fs::write(&request_file, era("TR-nats-era", &script_sha)).unwrap();
    let verified = Command::new(runner_exe())
        .arg("verify")
        .arg(dl.path().join(format!("{result_id}.md")))
        .arg("--request")
        .arg(&request_file)
        .output()
        .unwrap();
    assert!(
        verified.status.success(),
        "the stored result does not verify: {}{}",
        String::from_utf8_lossy(&verified.stdout),
        String::from_utf8_lossy(&verified.stderr)
    );

    let s = &by["TR-nats-substituted-input"][0];
    assert_eq!(s["verdict"], "REJECT", "{s}");
    assert_eq!(codes(s), ["nats.input_mismatch"]);
    let s = &by["TR-nats-missing-input"][0];
    assert_eq!(s["verdict"], "REJECT", "{s}");
    assert_eq!(codes(s), ["nats.input_missing"]);
    let rejected = &by["toolexec.results.rejected"];
    assert_eq!(rejected.len(), 3, "{rejected:#?}");
    assert!(rejected.iter().all(|s| s["verdict"] == "REJECT"));
    let all: Vec<Vec<String>> = rejected.iter().map(codes).collect();
    assert!(
        all.iter().any(|c| c == &["nats.approval_header"]),
        "{all:?}"
    );
    assert!(
        all.iter().any(|c| c == &["approval.signature_invalid"]),
        "{all:?}"
    );
    assert!(
        all.iter().any(|c| c
            .iter()
            .any(|c| c.starts_with("front_matter") || c.starts_with("request"))),
        "{all:?}"
    );

    // The same request again (as a redelivery would bring it): answered from the store,
    // not run again.
    let before = client.result_objects();
    client.submit(&era("TR-nats-era", &script_sha), None);
    let summaries = client.wait_messages("TOOLEXEC_RESULTS", 8, Duration::from_secs(60));
    let again = &by_request(&summaries)["TR-nats-era"];
    assert_eq!(again.len(), 2);
    assert_eq!(again[1]["reused"], true, "{}", again[1]);
    assert_eq!(again[1]["result_id"], e["result_id"]);
    assert_eq!(again[1]["objects"], e["objects"]);
    assert_eq!(
        client.result_objects(),
        before,
        "a reused result stores nothing new"
    );
    let index: Vec<String> = before
        .iter()
        .filter(|n| n.starts_with("index/"))
        .cloned()
        .collect();
    assert_eq!(index.len(), 2, "one index entry per run: {before:?}");

    // Nothing was dead-lettered; the work queue is empty.
    assert!(client.messages("TOOLEXEC_DEAD").is_empty());
    assert_eq!(host.stop(), Some(0));
}

#[test]
fn infrastructure_failures_go_to_the_dead_letter_subject_after_max_deliver() {
    let server = NatsServer::start();
    // A sandbox that cannot start: the Monty worker is not there.
    let host = Host::start(
        &server,
        &["--max-deliver", "2"],
        &[("RUNNER_MONTY_WORKER", "/nonexistent/runner-monty-worker")],
    );
    let client = Client::new(&server);
    client.wait_ready();
    client.submit(&monty("TR-nats-no-worker", "print(1)"), None);
    // A REJECT is a result, not a retry: it is never dead-lettered.
    client.submit("not a request either\n", None);

    let dead = client.wait_messages("TOOLEXEC_DEAD", 1, Duration::from_secs(60));
    assert_eq!(dead.len(), 1, "{dead:#?}");
    let d = &dead[0];
    assert_eq!(d["request_id"], "TR-nats-no-worker", "{d}");
    // Dead-lettered at its second delivery, or at a third when the server redelivered a
    // delivery whose answer came after ack_wait on a loaded machine (then the reason is
    // `nats.max_deliver`); never run, and never more often.
    let deliveries = d["deliveries"].as_i64().unwrap();
    assert!(deliveries == 2 || deliveries == 3, "{d}");
    let reasons = d["reasons"].as_array().unwrap();
    assert!(!reasons.is_empty(), "{d}");
    if deliveries == 3 {
        assert_eq!(reasons[0]["code"], "nats.max_deliver", "{d}");
    }
    let results = client.wait_messages("TOOLEXEC_RESULTS", 1, Duration::from_secs(30));
    assert_eq!(results.len(), 1, "{results:#?}");
    assert_eq!(results[0]["verdict"], "REJECT");
    // The work queue is drained: nothing is redelivered any more.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(client.messages("TOOLEXEC_DEAD").len(), 1);
    let pending = client.rt.block_on(async {
        let mut s = client.js.get_stream("TOOLEXEC").await.unwrap();
        s.info().await.unwrap().state.messages
    });
    assert_eq!(pending, 0, "the dead request is still queued");
    assert_eq!(host.stop(), Some(0));
}

#[test]
fn a_host_killed_mid_run_leaves_the_request_to_another_and_one_result() {
    let server = NatsServer::start();
    // The hosts' temporary directory, to see what a SIGKILLed host leaves there.
    let tmp = tempfile::tempdir().unwrap();
    let tmpdir = tmp.path().to_str().unwrap();
    let env = [("TMPDIR", tmpdir)];
    let mut first = Host::start(&server, &["--ack-wait", "2"], &env);
    let client = Client::new(&server);
    client.wait_ready();
    let script = b"import time\ntime.sleep(6)\nprint('slept')\n";
    let script_sha = sha256_hex(script);
    client.put_input(&script_sha, script);
    client.submit(&era("TR-nats-killed", &script_sha), None);
    // Wait until the first host holds it (one message delivered, not acked).
    wait_for(
        Duration::from_secs(30),
        "the first host taking the request",
        || {
            client.rt.block_on(async {
                let stream = client.js.get_stream("TOOLEXEC").await.unwrap();
                let mut c: jetstream::consumer::Consumer<pull::Config> =
                    stream.get_consumer("runner").await.unwrap();
                c.info().await.unwrap().num_ack_pending == 1
            })
        },
    );
    std::thread::sleep(Duration::from_secs(1));
    first.kill9();
    let left = scratch_entries(tmp.path());
    assert!(!left.is_empty(), "the killed host was running: {left:?}");
    let second = Host::start(&server, &["--ack-wait", "2"], &env);
    // The next host to start sweeps what the killed one left: only its own directory.
    let now = scratch_entries(tmp.path());
    assert!(
        now.len() == 1 && now[0].starts_with("runner-serve-") && !left.contains(&now[0]),
        "left by the killed host: {left:?}; now: {now:?}"
    );
    client.wait_messages("TOOLEXEC_RESULTS", 1, Duration::from_secs(90));
    // Time for a duplicate to show up if there were one.
    std::thread::sleep(Duration::from_secs(3));
    let results = client.messages("TOOLEXEC_RESULTS");
    assert_eq!(results.len(), 1, "{results:#?}");
    let r = &results[0];
    assert_eq!(r["verdict"], "ACCEPT", "{r}");
    assert_eq!(r["outcome"], "completed", "{r}");
    assert!(
        r["delivery"].as_i64().unwrap() >= 2,
        "not a redelivery: {r}"
    );
    let index = client
        .result_objects()
        .into_iter()
        .filter(|n| n.starts_with("index/"))
        .count();
    assert_eq!(index, 1);
    assert!(client.messages("TOOLEXEC_DEAD").is_empty());
    assert_eq!(second.stop(), Some(0));
    // A host that stops removes its own.
    let after = scratch_entries(tmp.path());
    assert!(after.is_empty(), "{after:?}");
}

/// The hosts' and runs' directories in a temporary directory (`runner-serve-*`,
/// `runner-nats-*`, `runner-run-*`), sorted.
fn scratch_entries(tmp: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(tmp)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            ["runner-serve-", "runner-nats-", "runner-run-"]
                .iter()
                .any(|p| n.starts_with(p))
        })
        .collect();
    names.sort();
    names
}

/// The scale figure (`just bench-nats`, not part of `just test`): requests/s through
/// one nats-server with 1, 2 and 3 hosts (`--jobs 1` each), 60 monty requests per
/// round, measured from the first publish to the last summary stored.
#[test]
#[ignore = "a measurement: run by `just bench-nats`"]
fn throughput_with_one_two_and_three_hosts() {
    const N: usize = 60;
    let mut figures = Vec::new();
    for hosts in 1..=3 {
        let server = NatsServer::start();
        let running: Vec<Host> = (0..hosts).map(|_| Host::start(&server, &[], &[])).collect();
        let client = Client::new(&server);
        client.wait_ready();
        let start = Instant::now();
        for i in 0..N {
            client.submit(
                &monty(&format!("TR-bench-{hosts}-{i}"), &format!("print({i})")),
                None,
            );
        }
        let got = client.wait_messages("TOOLEXEC_RESULTS", N, Duration::from_secs(300));
        let elapsed = start.elapsed().as_secs_f64();
        assert_eq!(got.len(), N);
        assert!(got.iter().all(|s| s["verdict"] == "ACCEPT"));
        figures.push((hosts, N as f64 / elapsed));
        drop(running);
    }
    for (hosts, rate) in &figures {
        println!("nats: {hosts} host(s): {rate:.1} requests/s ({N} monty requests)");
    }
}

/// Three hosts on one server, 300 requests of a mixed load (monty runs, ERA runs with inputs from the
/// store, invalid requests, missing inputs), one host SIGKILLed while the load runs:
/// every request ends with exactly one stored run (one `index/` entry, every summary
/// naming the same result, at most one of them not a reuse), REJECTs are answered and
/// never dead-lettered, nothing is dead. A host killed after storing a result and its
/// `index/` entry but before publishing the summary leaves only the redelivery's
/// `reused` summary: correct, once the stored result it names verifies.
#[test]
fn three_hosts_a_mixed_load_and_a_sigkill_give_one_result_per_request() {
    let server = NatsServer::start();
    let opts = ["--ack-wait", "2"];
    let mut hosts: Vec<Host> = (0..3).map(|_| Host::start(&server, &opts, &[])).collect();
    let client = Client::new(&server);
    client.wait_ready();
    let script = b"import time\ntime.sleep(0.5)\nprint('era')\n";
    let script_sha = sha256_hex(script);
    client.put_input(&script_sha, script);
    let absent = sha256_hex(b"absent");
    let mut runnable = Vec::new();
    let mut rejected_ids = Vec::new();
    let mut invalid = 0;
    for i in 0..300 {
        match i % 9 {
            0 | 4 => {
                let id = format!("TR-mixed-era-{i}");
                let text = era(&id, &script_sha);
                client.submit(&text, None);
                runnable.push((id, text));
            }
            1 => {
                client.submit(&format!("not a request {i}\n"), None);
                invalid += 1;
            }
            2 => {
                let id = format!("TR-mixed-missing-{i}");
                client.submit(&era(&id, &absent), None);
                rejected_ids.push(id);
            }
            _ => {
                let id = format!("TR-mixed-monty-{i}");
                let text = monty(&id, &format!("print({i})"));
                client.submit(&text, None);
                runnable.push((id, text));
            }
        }
    }
    // Kill one host while the load runs.
    client.wait_messages("TOOLEXEC_RESULTS", 40, Duration::from_secs(120));
    hosts[0].kill9();
    let total = runnable.len() + rejected_ids.len() + invalid;
    client.wait_messages("TOOLEXEC_RESULTS", total, Duration::from_secs(600));
    std::thread::sleep(Duration::from_secs(3));
    let summaries = client.messages("TOOLEXEC_RESULTS");
    assert!(summaries.len() >= total, "{}", summaries.len());
    let by = by_request(&summaries);
    let mut reused_only = 0;
    for (id, text) in &runnable {
        let answers = &by[id];
        for s in answers {
            assert_eq!(s["verdict"], "ACCEPT", "{s}");
            assert_eq!(s["outcome"], "completed", "{s}");
            // Every answer names the same stored result.
            assert_eq!(
                s["result_id"], answers[0]["result_id"],
                "{id}: {answers:#?}"
            );
        }
        let runs = answers.iter().filter(|s| s["reused"] == false).count();
        assert!(runs <= 1, "{id} ran twice: {answers:#?}");
        if runs == 0 {
            // Its host died between storing the result and publishing the summary.
            reused_only += 1;
            stored_result_verifies(&client, &answers[0], text);
        }
    }
    // Only the request the killed host held when it died (it runs one at a time, and
    // pulls a message only for a free worker).
    assert!(
        reused_only <= 1,
        "{reused_only} requests answered only by reuse"
    );
    for id in &rejected_ids {
        assert!(
            by[id].iter().all(|s| s["verdict"] == "REJECT"),
            "{:#?}",
            by[id]
        );
    }
    let invalid_shas: std::collections::BTreeSet<&str> = by["toolexec.results.rejected"]
        .iter()
        .map(|s| s["request_sha256"].as_str().unwrap())
        .collect();
    assert_eq!(invalid_shas.len(), invalid);
    let index = client
        .result_objects()
        .into_iter()
        .filter(|n| n.starts_with("index/"))
        .count();
    assert_eq!(index, runnable.len(), "one stored run per runnable request");
    assert!(client.messages("TOOLEXEC_DEAD").is_empty());
    for host in hosts.drain(1..) {
        assert_eq!(host.stop(), Some(0));
    }
}

/// The stored result a summary names (its `objects`) downloads and verifies against
/// the request `text`.
fn stored_result_verifies(client: &Client, summary: &Value, text: &str) {
    let objects: Vec<String> = summary["objects"]
        .as_array()
        .unwrap_or_else(|| panic!("no objects: {summary}"))
        .iter()
        .map(|o| o.as_str().unwrap().to_owned())
        .collect();
    let result_id = summary["result_id"].as_str().unwrap();
    let dl = tempfile::tempdir().unwrap();
    client.download(&objects, dl.path());
    let request_file = dl.path().join("request.md");
    std::fs::write(&request_file, text).unwrap();
    let verified = Command::new(runner_exe())
        .arg("verify")
        .arg(dl.path().join(format!("{result_id}.md")))
        .arg("--request")
        .arg(&request_file)
        .output()
        .unwrap();
    assert!(
        verified.status.success(),
        "the stored result {result_id} does not verify: {}{}",
        String::from_utf8_lossy(&verified.stdout),
        String::from_utf8_lossy(&verified.stderr)
    );
}

/// An approved monty request whose code is `code`.
fn monty(id: &str, code: &str) -> String {
    support::monty_request(id, code, "nats")
}
