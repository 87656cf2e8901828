//! `runner mcp --http` (Streamable HTTP on loopback) driven by the official MCP Python
//! SDK's HTTP client, and the whole path of a signed approval: CORE submits a monty and
//! an ERA draft over HTTP, the operator approves each with a trusted key under a policy
//! that requires signed approvals, `runner serve` runs them, `draft_status` walks
//! drafted → queued → done and `read_result` returns the accepted results. Also the
//! drafts directory's own guards: a draft whose input changed on disk is not approved,
//! a staging directory a crashed approval left is swept, one another process holds is
//! not.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// reason: a test harness builds fixtures and runs the built binaries on the host.
#![allow(clippy::disallowed_methods)]

use crate::mcp::{Dirs, Host, client_of, names, os, run, sdk_python};
use crate::support::{repo, runner_exe, wait_for};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `runner [global...] mcp --http 127.0.0.1:0`; its URL from its stderr.
struct HttpServer {
    child: Child,
    url: String,
}

impl HttpServer {
    fn start(dirs: &Dirs, global: &[&std::ffi::OsStr]) -> Self {
        let mut child = Command::new(runner_exe())
            .args(global)
            .args([os("mcp"), os("--http"), os("127.0.0.1:0"), os("--drafts")])
            .arg(&dirs.drafts)
            .arg("--inbox")
            .arg(&dirs.inbox)
            .arg("--results")
            .arg(&dirs.results)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        // The first line it writes says where it listens (or why it could not).
        let start = Instant::now();
        while !line.contains("listening on ") {
            line.clear();
            let n = stderr.read_line(&mut line).unwrap();
            assert!(
                n > 0 && start.elapsed() < Duration::from_secs(60),
                "runner mcp --http ended without listening: {line}"
            );
        }
        let url = line
            .trim()
            .rsplit("listening on ")
            .next()
            .unwrap()
            .to_owned();
        assert!(
            url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
            "{url}"
        );
        // Keep draining its stderr so it never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = std::io::Read::read_to_end(&mut stderr, &mut sink);
        });
        Self { child, url }
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn streamable_http_refuses_foreign_hosts_and_origins_and_survives_bad_input() {
    // Only a loopback address is listened on.
    for (addr, says) in [
        ("0.0.0.0:0", "not a loopback address"),
        ("[::]:0", "not a loopback address"),
        ("192.0.2.1:8765", "not a loopback address"),
        ("localhost:8765", "not an address"),
    ] {
        let out = run(&[
            os("mcp"),
            os("--drafts"),
            os("/nonexistent/never-made"),
            os("--http"),
            os(addr),
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{addr}: {err}");
        assert!(
            err.contains(says) && err.contains("--http"),
            "{addr}: {err}"
        );
    }
    assert!(!Path::new("/nonexistent/never-made").exists());

    let dirs = Dirs::new();
    let mut server = HttpServer::start(&dirs, &[]);
    let url = server.url.clone();
    let url = os(&url);
    // Host and Origin checks, a wrong path, garbage and an oversized body, raw.
    let guard = client_of(&dirs, url, "http-guard", &[]);
    assert_eq!(guard["guard"], "ok", "{guard}");
    assert!(server.alive(), "the server died on the raw requests");
    // The hostile tool calls, through the SDK's Streamable HTTP client.
    let hostile = client_of(&dirs, url, "hostile", &[]);
    assert_eq!(hostile["server"], "runner-mcp", "{hostile}");
    assert_eq!(hostile["hostile"], "refused", "{hostile}");
    assert_eq!(hostile["bad_at_once"], 40, "{hostile}");
    assert!(server.alive(), "the server died on the hostile calls");
    // Nothing was written: the drafts directory is empty, the inbox too.
    assert!(names(&dirs.drafts).is_empty(), "{:?}", names(&dirs.drafts));
    assert!(names(&dirs.inbox).is_empty());
    assert_eq!(names(&dirs.root), ["drafts", "serve"]);
}

/// A policy requiring signed approvals with operator-ada's key trusted, and the key.
fn signed_policy(root: &Path) -> (PathBuf, PathBuf) {
    let keys = root.join("keys");
    std::fs::create_dir(&keys).unwrap();
    let out = run(&[os("keygen"), os(&keys.join("ada"))]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut policy = std::fs::read_to_string(repo().join("policies/default.toml"))
        .unwrap()
        .replace(
            "require_signed_approval = false",
            "require_signed_approval = true",
        );
    assert!(policy.contains("require_signed_approval = true"));
    policy.push_str(&format!(
        "\n[[approval.trusted]]\nname = \"operator-ada\"\npublic_key = \"\"\"\n{}\"\"\"\n",
        std::fs::read_to_string(keys.join("ada.pub")).unwrap()
    ));
    let path = root.join("policy.toml");
    std::fs::write(&path, policy).unwrap();
    (path, keys.join("ada.key"))
}

const MONTY: &str = "TR-20261128-080000Z-mcp-walk-monty";
const ERA: &str = "TR-20261128-080000Z-mcp-walk-era";
const TAMPERED: &str = "TR-20261128-080000Z-mcp-walk-tampered";

#[test]
fn a_signed_approval_walks_monty_and_era_drafts_from_http_to_an_accepted_result() {
    let dirs = Dirs::new();
    let (policy, key) = signed_policy(&dirs.root);
    let global = [os("--policy"), os(&policy)];
    // What a `runner approve` that crashed mid-way leaves beside the inbox: a staging
    // directory nobody holds, with a staged request in it.
    let crashed = dirs.root.join("serve/.runner-draft-999999-0-TR-crashed");
    std::fs::create_dir(&crashed).unwrap();
    std::fs::write(crashed.join("TR-crashed.md"), "staged, never committed").unwrap();

    let mut server = HttpServer::start(&dirs, &global);
    let url = os(&server.url);
    let submitted = client_of(&dirs, url, "walk-submit", &[]);
    for id in [MONTY, ERA, TAMPERED] {
        assert!(submitted[id].is_array(), "{submitted}");
    }

    let approve = |id: &str, key: Option<&Path>| {
        let mut args = vec![
            os("--policy"),
            os(&policy),
            os("approve"),
            os(id),
            os("--drafts"),
            os(&dirs.drafts),
            os("--inbox"),
            os(&dirs.inbox),
            os("--by"),
            os("operator-ada"),
            os("--yes"),
        ];
        if let Some(k) = key {
            args.extend([os("--key"), os(k)]);
        }
        run(&args)
    };

    // An input changed on disk after submission: refused, naming it; nothing moves.
    let altered = dirs.drafts.join(TAMPERED).join("inputs/words.txt");
    std::fs::write(&altered, "one two three\nfour five six\n").unwrap();
    let out = approve(TAMPERED, Some(&key));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("/in/words.txt") && err.contains("sha256"),
        "{err}"
    );
    assert!(names(&dirs.inbox).is_empty(), "{:?}", names(&dirs.inbox));

    // Unsigned, under a policy that requires a signature: refused.
    let out = approve(MONTY, None);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("signature"), "{err}");
    assert!(names(&dirs.inbox).is_empty(), "{:?}", names(&dirs.inbox));
    let drafted = client_of(&dirs, url, "status", &["drafted", MONTY, ERA, TAMPERED]);
    assert_eq!(drafted[MONTY], "drafted", "{drafted}");

    for id in [MONTY, ERA] {
        let out = approve(id, Some(&key));
        assert!(
            out.status.success(),
            "{id}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let mut expected: Vec<String> = [MONTY, ERA]
        .iter()
        .flat_map(|id| {
            [
                format!("{id}.inputs"),
                format!("{id}.md"),
                format!("{id}.md.sig"),
            ]
        })
        .collect();
    expected.sort();
    assert_eq!(names(&dirs.inbox), expected);
    assert_eq!(
        names(&dirs.inbox.join(format!("{ERA}.inputs"))),
        ["count.py", "words.txt"]
    );
    // The crashed approval's staging was swept; this one's is gone too.
    assert_eq!(names(&dirs.root.join("serve")), ["inbox"]);
    let queued = client_of(&dirs, url, "status", &["queued", MONTY, ERA]);
    assert_eq!(queued[ERA], "queued", "{queued}");

    // The host runs them under the same policy (signatures checked again on claim).
    let host = Host::start_with(&dirs, &global);
    wait_for(
        Duration::from_secs(300),
        "both approved drafts run and filed",
        || {
            [MONTY, ERA]
                .iter()
                .all(|id| dirs.inbox.join("done").join(format!("{id}.md")).exists())
        },
    );
    drop(host);
    let read = client_of(&dirs, url, "walk-read", &[MONTY, ERA]);
    assert!(read[MONTY].as_str().unwrap().contains("lines: 3"), "{read}");
    assert!(read[ERA].as_str().unwrap().contains("words: 5"), "{read}");
    assert!(server.alive());
    let _ = std::fs::remove_file(&altered);
}

/// Two servers on one drafts directory: a staging directory another process holds (its
/// submission in flight) survives a server starting and `runner drafts list`; one
/// nobody holds (its maker crashed) is removed; once released, the held one goes too.
#[test]
fn a_staging_directory_another_process_holds_survives_a_server_starting() {
    let dirs = Dirs::new();
    std::fs::create_dir_all(&dirs.drafts).unwrap();
    let held = dirs.drafts.join(".runner-draft-111111-0-TR-in-flight");
    let dead = dirs.drafts.join(".runner-draft-222222-0-TR-crashed");
    for d in [&held, &dead] {
        std::fs::create_dir(d).unwrap();
        std::fs::write(d.join("draft.md"), "half written").unwrap();
    }
    // The other server: holds an exclusive flock on its staging directory, as
    // `runner mcp` does while it writes a draft, until its stdin closes.
    let mut other = Command::new(sdk_python())
        .args([
            "-c",
            "import fcntl, os, sys\nfd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)\nfcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\nsys.stdin.read()",
        ])
        .arg(&held)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(other.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "held");

    // A second server starting on the same directory (stdin closed: it sweeps, then ends).
    Command::new(runner_exe())
        .args([os("mcp"), os("--drafts"), os(&dirs.drafts)])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        held.join("draft.md").exists(),
        "the in-flight staging was removed"
    );
    assert!(!dead.exists(), "the crashed staging was kept");
    let out = run(&[os("drafts"), os("list"), os("--drafts"), os(&dirs.drafts)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        held.join("draft.md").exists(),
        "drafts list removed the in-flight staging"
    );

    // Its holder ends without renaming it: now it is provably stale.
    other.stdin.take().unwrap().write_all(b"").unwrap();
    other.wait().unwrap();
    let out = run(&[os("drafts"), os("list"), os("--drafts"), os(&dirs.drafts)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!held.exists(), "a released staging directory was kept");
    assert!(names(&dirs.drafts).is_empty(), "{:?}", names(&dirs.drafts));
}
