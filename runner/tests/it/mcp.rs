//! `runner mcp` driven by a client nobody here wrote: the official MCP Python SDK (`mcp`
//! from PyPI, pinned by hash in tests/mcp/requirements.txt and installed into
//! target/mcp-venv by `just mcp-client`) runs tests/mcp/client.py against the server
//! over stdio. The whole loop: policy → validate_draft → submit_draft → `runner approve`
//! (the operator, here) → `runner serve` runs it → the gate accepts → read_result;
//! `runner drafts reject` → draft_status shows the reason; and the hostile calls (path
//! tricks, bad base64, oversized drafts and inputs, bad ids, 60 calls at once), after
//! which nothing exists outside the drafts directory and the inbox is still empty.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// reason: a test harness builds fixtures and runs the built binaries on the host.
#![allow(clippy::disallowed_methods)]

use crate::support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};
use support::{monty_worker, repo, runner, runner_exe, wait_for};

/// The venv's python with the pinned SDK; fails (never skips) when it is missing.
pub(crate) fn sdk_python() -> PathBuf {
    let py = repo().join("target/mcp-venv/bin/python");
    let ok = Command::new(&py)
        .args(["-c", "import mcp"])
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "the MCP Python SDK is not installed in {}: run `just mcp-client`",
        py.display()
    );
    py
}

pub(crate) struct Dirs {
    _tmp: tempfile::TempDir,
    pub(crate) root: PathBuf,
    pub(crate) drafts: PathBuf,
    pub(crate) inbox: PathBuf,
    pub(crate) results: PathBuf,
}

impl Dirs {
    pub(crate) fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let inbox = root.join("serve/inbox");
        std::fs::create_dir_all(&inbox).unwrap();
        Self {
            drafts: root.join("drafts"),
            results: root.join("serve/results"),
            inbox,
            root,
            _tmp: tmp,
        }
    }
}

/// Runs the Python client in `mode`; its report (the last stdout line).
pub(crate) fn client(dirs: &Dirs, mode: &str, extra: &[&str]) -> Value {
    client_of(dirs, std::ffi::OsStr::new(runner_exe()), mode, extra)
}

/// Runs the Python client against `target`: the runner binary (stdio) or a URL (HTTP).
pub(crate) fn client_of(
    dirs: &Dirs,
    target: &std::ffi::OsStr,
    mode: &str,
    extra: &[&str],
) -> Value {
    let out = Command::new(sdk_python())
        .arg(repo().join("tests/mcp/client.py"))
        .arg(target)
        .args([&dirs.drafts, &dirs.inbox, &dirs.results])
        .arg(mode)
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the MCP client ({mode}) failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

pub(crate) fn run(args: &[&std::ffi::OsStr]) -> Output {
    runner().args(args).output().unwrap()
}

pub(crate) fn os<S: AsRef<std::ffi::OsStr> + ?Sized>(s: &S) -> &std::ffi::OsStr {
    s.as_ref()
}

pub(crate) fn names(dir: &Path) -> Vec<String> {
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

/// A running `runner serve` on the test's inbox.
pub(crate) struct Host(Child);

impl Host {
    pub(crate) fn start(dirs: &Dirs) -> Self {
        Self::start_with(dirs, &[])
    }

    /// `runner [global...] serve` on the test's inbox and results.
    pub(crate) fn start_with(dirs: &Dirs, global: &[&std::ffi::OsStr]) -> Self {
        let child = Command::new(runner_exe())
            .args(global)
            .arg("serve")
            .arg("--inbox")
            .arg(&dirs.inbox)
            .arg("--results")
            .arg(&dirs.results)
            .env("RUNNER_MONTY_WORKER", monty_worker())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dirs.root.join("serve.stderr")).unwrap())
            .spawn()
            .unwrap();
        Self(child)
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_loop_through_the_official_python_client() {
    let dirs = Dirs::new();

    // CORE's side: policy, validate, submit, and the hostile calls.
    let report = client(&dirs, "draft", &[]);
    assert_eq!(report["server"], "runner-mcp", "{report}");
    let id = report["submitted"].as_str().unwrap().to_owned();
    let rejected = report["to_reject"].as_str().unwrap().to_owned();
    assert_eq!(report["concurrent"], 60, "{report}");

    // Nothing outside the drafts directory: the root holds the drafts and the host's
    // directories only, the inbox is empty, and every draft is a whole `TR-…` directory.
    assert_eq!(names(&dirs.root), ["drafts", "serve"]);
    assert_eq!(names(&dirs.root.join("serve")), ["inbox"]);
    assert!(names(&dirs.inbox).is_empty(), "{:?}", names(&dirs.inbox));
    let drafts = names(&dirs.drafts);
    assert!(
        drafts.contains(&id) && drafts.contains(&rejected),
        "{drafts:?}"
    );
    for d in &drafts {
        assert!(d.starts_with("TR-20261128-060000Z-mcp-"), "{d}");
        let inside = names(&dirs.drafts.join(d));
        assert!(inside.contains(&"draft.md".to_owned()), "{d}: {inside:?}");
        assert!(
            inside.iter().all(|n| n == "draft.md" || n == "inputs"),
            "{d}: {inside:?}"
        );
    }
    assert_eq!(names(&dirs.drafts.join(&id).join("inputs")), ["words.txt"]);
    // 2 drafts, 20 of the concurrent submissions; no hostile one.
    assert_eq!(drafts.len(), 22, "{drafts:?}");

    // The operator's side: list, reject one, approve the other into the inbox.
    let out = run(&[
        os("drafts"),
        os("list"),
        os("--drafts"),
        os(&dirs.drafts),
        os("--json"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let entry = list
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"] == id.as_str())
        .unwrap();
    assert_eq!(entry["state"], "drafted");
    assert_eq!(entry["requested_by"], "core-agent");

    let reject = |who: &str| {
        run(&[
            os("drafts"),
            os("reject"),
            os(who),
            os("--drafts"),
            os(&dirs.drafts),
            os("--reason"),
            os("needs a clearer purpose"),
        ])
    };
    let out = reject(&rejected);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(reject(&rejected).status.code(), Some(1), "rejected twice");

    let approve = |who: &str| {
        run(&[
            os("approve"),
            os(who),
            os("--drafts"),
            os(&dirs.drafts),
            os("--inbox"),
            os(&dirs.inbox),
            os("--by"),
            os("operator-ada"),
            os("--yes"),
            os("--json"),
        ])
    };
    let out = approve(&rejected);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a rejected draft is not approved"
    );
    assert!(names(&dirs.inbox).is_empty());
    let out = approve(&id);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let approved: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        approved["request"],
        dirs.inbox.join(format!("{id}.md")).display().to_string()
    );
    assert_eq!(
        names(&dirs.inbox),
        [format!("{id}.inputs"), format!("{id}.md")]
    );
    assert_eq!(
        std::fs::read(dirs.inbox.join(format!("{id}.inputs/words.txt"))).unwrap(),
        b"alpha\nbeta\ngamma\n"
    );
    let text = std::fs::read_to_string(dirs.inbox.join(format!("{id}.md"))).unwrap();
    assert!(text.contains("approved_by: \"operator-ada\""), "{text}");
    assert!(text.contains(report["sha256"].as_str().unwrap()), "{text}");
    // Nothing staged is left beside the inbox; approving twice is refused.
    assert_eq!(names(&dirs.root.join("serve")), ["inbox"]);
    assert_eq!(approve(&id).status.code(), Some(1), "approved twice");

    // The host runs it, as it would any request renamed into its inbox.
    let host = Host::start(&dirs);
    let start = Instant::now();
    wait_for(
        Duration::from_secs(120),
        "the approved draft run and filed",
        || dirs.inbox.join("done").join(format!("{id}.md")).exists(),
    );
    let results = names(&dirs.results);
    assert!(
        results
            .iter()
            .any(|n| n.starts_with("TS-") && n.ends_with(&format!("-{id}.md"))),
        "{results:?} after {:?}",
        start.elapsed()
    );
    drop(host);

    // CORE reads it back: done, the accepted result, the rejection's reason.
    let read = client(&dirs, "read", &[&id, &rejected]);
    assert!(read["result_id"].as_str().unwrap().ends_with(&id), "{read}");
}

/// A result that does not pass the gate is never returned: the same loop's result,
/// tampered with after the run (its stdout excerpt changed), is refused by read_result.
#[test]
fn a_result_the_gate_refuses_is_never_read() {
    let dirs = Dirs::new();
    std::fs::create_dir_all(&dirs.drafts).unwrap();
    std::fs::create_dir_all(&dirs.results).unwrap();
    let id = "TR-20261128-070000Z-mcp-tampered";
    // The operator's own request, run with `runner exec` into the results directory.
    let req = dirs.root.join(format!("{id}.md"));
    std::fs::write(&req, support::monty_request(id, "print('genuine')", "mcp")).unwrap();
    let out = run(&[os("exec"), os(&req), os("--results"), os(&dirs.results)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ts = names(&dirs.results)
        .into_iter()
        .find(|n| n.ends_with(&format!("-{id}.md")))
        .unwrap();
    let path = dirs.results.join(&ts);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("genuine", "forged")).unwrap();
    let py = sdk_python();
    let script = format!(
        r#"
import anyio, sys
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
async def main():
    p = StdioServerParameters(command=sys.argv[1], args=["mcp", "--drafts", sys.argv[2], "--results", sys.argv[3]])
    async with stdio_client(p) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            res = await s.call_tool("read_result", {{"id": "{id}"}})
            assert res.is_error, res
            text = res.content[0].text
            assert "did not pass the gate" in text and "forged" not in text, text
            print("refused:", text)
anyio.run(main)
"#
    );
    let out = Command::new(py)
        .args([os("-c"), os(&script), os(runner_exe())])
        .args([&dirs.drafts, &dirs.results])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
