//! Package environments, through the built binary on the real CPython 3.12
//! guest: a pinned pure-Python wheel is installed with `runner env install`, mounted
//! read-only on the guest's import path, pinned in the lock, the statement and the
//! result, and verified before every run. The wheels are data fixtures in
//! `tests/envs/` (written by `tests/envs/make_fixtures.py`), named after what they try:
//! a native extension (tagged as such, or disguised as pure), a path-traversal member,
//! a symlink member, a package that writes into its own directory at import, a wheel
//! that ships a top-level `sitecustomize` or shadows the stdlib's `json`; plus a wheel
//! whose hash is not the pinned one, a tree modified after install, and an environment
//! with the network (one `PYTHONPATH`, the runner's urllib door kept).
//!
//! Each test has its own environment store (`RUNNER_ENV_DIR`); the guest comes from the
//! default guest store (`just guests`, which `just test` runs first).

#![allow(clippy::unwrap_used, clippy::expect_used)]
// reason: a test harness builds fixtures and runs the built binaries on the host.
#![allow(clippy::disallowed_methods)]

use runner_core::digest::sha256_hex;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/envs")
        .join(name)
}

fn file_sha(path: &Path) -> String {
    sha256_hex(&std::fs::read(path).unwrap())
}

const GREET: &str = "greet-1.0-py3-none-any.whl";
const SELFWRITE: &str = "writes_into_own_directory_at_import-1.0-py3-none-any.whl";

/// A scratch world: a policy (the built-in one plus an `[[environments]]` table), an
/// environment store, and a request directory.
struct World {
    dir: tempfile::TempDir,
}

impl World {
    /// `env` is the environment `t` (language `python-t`) pinning `packages`:
    /// `(name, version, sha256)`.
    fn new(packages: &[(&str, &str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let pins: Vec<String> = packages
            .iter()
            .map(|(n, v, s)| {
                format!("  {{ name = \"{n}\", version = \"{v}\", sha256 = \"{s}\" }},")
            })
            .collect();
        let policy = format!(
            "{}\n[[environments]]\nname = \"t\"\nguest = \"cpython-3.12\"\nlanguages = [\"python-t\"]\npackages = [\n{}\n]\n",
            runner_core::policy::DEFAULT_POLICY_TOML,
            pins.join("\n")
        );
        std::fs::write(dir.path().join("policy.toml"), policy).unwrap();
        std::fs::create_dir(dir.path().join("store")).unwrap();
        Self { dir }
    }

    fn store(&self) -> PathBuf {
        self.dir.path().join("store")
    }

    fn runner(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_runner"));
        c.env("RUNNER_ENV_DIR", self.store())
            .arg("--policy")
            .arg(self.dir.path().join("policy.toml"));
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.runner().args(args).output().unwrap()
    }

    fn install(&self, wheels: &[&str]) -> Output {
        let mut c = self.runner();
        c.args(["env", "install", "t", "--json", "--wheel"]);
        for w in wheels {
            c.arg(fixture(w));
        }
        c.output().unwrap()
    }

    /// Writes `req/TR-….md` running `main.py` (with `language`), returns its path.
    fn request(&self, language: &str, main_py: &str) -> PathBuf {
        self.request_with(language, main_py, "none")
    }

    /// Adds a `[network]` table allowing `origin` to the policy.
    fn allow_network(&self, origin: &str) {
        let path = self.dir.path().join("policy.toml");
        let mut policy = std::fs::read_to_string(&path).unwrap();
        policy += &format!("\n[network]\nallow = [\"{origin}\"]\ntimeout_sec = 5\n");
        std::fs::write(path, policy).unwrap();
    }

    /// [`World::request`] asking for `network` (`none` or `allowlist`).
    fn request_with(&self, language: &str, main_py: &str, network: &str) -> PathBuf {
        let rationale = if network == "none" {
            "none needed"
        } else {
            "the test server on 127.0.0.1 is the data source"
        };
        let req = self.dir.path().join("req");
        std::fs::create_dir_all(req.join("inputs")).unwrap();
        std::fs::write(req.join("inputs/main.py"), main_py).unwrap();
        let sha = sha256_hex(main_py.as_bytes());
        let path = req.join("TR-20261125-060000Z-env-test.md");
        std::fs::write(
            &path,
            format!(
                r#"---
request_type: tool_request
schema_version: 1
request_id: "TR-20261125-060000Z-env-test"
created_utc: "2026-11-25T06:00:00Z"
requested_by: "core-agent"
approved_by: "operator-ada"
approved_utc: "2026-11-25T06:05:00Z"
purpose: "Import a package from the operator's environment."
backend: ERA
language: {language}
network: {network}
cpu_limit: "20"
memory_limit_mb: 256
time_limit_sec: 60
inputs:
  - path: "/in/main.py"
    sha256: "{sha}"
---
# Environment test

## Command
`python -u main.py`

## Input Files
- `/in/main.py` sha256: {sha} (the script)

## Output Expectations
- stdout: what the package answered.

## Risk Assessment
- Risk level: low
- Justification: imports one pinned package and prints one line.
- Data sensitivity: public
- Network rationale: {rationale}
"#
            ),
        )
        .unwrap();
        path
    }

    fn exec(&self, request: &Path) -> (Output, Value) {
        let out = self
            .runner()
            .arg("exec")
            .arg(request)
            .arg("--json")
            .output()
            .unwrap();
        let report = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        (out, report)
    }

    fn installed_tree(&self) -> PathBuf {
        let out = self.run(&["env", "list", "--json"]);
        assert!(out.status.success(), "{}", text(&out));
        let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(rows[0]["installed"], true, "{rows}");
        PathBuf::from(rows[0]["path"].as_str().unwrap())
    }
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn stdout_of(result: &Path) -> String {
    let id = result.file_stem().unwrap().to_str().unwrap();
    std::fs::read_to_string(result.with_file_name(id).join("stdout")).unwrap()
}

const IMPORT_GREET: &str =
    "import sys\nimport greet\nprint(greet.hello('ci'))\nprint(greet.__file__)\n";

#[test]
fn a_pinned_wheel_installs_imports_in_the_guest_and_is_pinned_in_the_lock() {
    let wheel_sha = file_sha(&fixture(GREET));
    let w = World::new(&[("greet", "1.0", &wheel_sha)]);
    let before = w.run(&["env", "list", "--json"]);
    let rows: Value = serde_json::from_slice(&before.stdout).unwrap();
    assert_eq!(rows[0]["installed"], false, "{rows}");

    let out = w.install(&[GREET]);
    assert!(out.status.success(), "{}", text(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let tree = report["environments"][0]["tree_sha256"]
        .as_str()
        .unwrap()
        .to_owned();
    let tree_dir = w.installed_tree();
    assert!(tree_dir.ends_with(&tree), "{}", tree_dir.display());
    assert!(tree_dir.join("greet/__init__.py").is_file());
    // Only the user can write the store, and only the user reaches it: the tree itself
    // is readable (a worker under its own uid reads it through its preopened
    // directory), the store directory above it is private.
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&tree_dir), 0o755);
    assert_eq!(mode(&tree_dir.join("greet/__init__.py")), 0o644);
    assert_eq!(mode(tree_dir.parent().unwrap()), 0o700);

    let request = w.request("python-t", IMPORT_GREET);
    let (out, report) = w.exec(&request);
    assert!(out.status.success(), "{}", text(&out));
    let result = PathBuf::from(report["result_path"].as_str().unwrap());
    let stdout = stdout_of(&result);
    assert!(stdout.contains("hello ci from greet"), "{stdout}");
    assert!(
        stdout.contains("/site-packages/greet/__init__.py"),
        "{stdout}"
    );

    let id = result.file_stem().unwrap().to_str().unwrap();
    let lock: Value = serde_json::from_str(
        &std::fs::read_to_string(result.with_file_name(format!("{id}.lock.json"))).unwrap(),
    )
    .unwrap();
    let env = &lock["runtime"]["environment"];
    assert_eq!(env["name"], "t");
    assert_eq!(env["tree_sha256"], format!("sha256:{tree}"));
    assert_eq!(env["packages"][0]["name"], "greet");
    assert_eq!(env["packages"][0]["version"], "1.0");
    assert_eq!(env["packages"][0]["sha256"], format!("sha256:{wheel_sha}"));

    let statement =
        std::fs::read_to_string(result.with_file_name(format!("{id}.intoto.json"))).unwrap();
    assert!(
        statement.contains(r#""uri":"environment:t""#),
        "{statement}"
    );
    assert!(
        statement.contains(&format!(
            r#"{{"digest":{{"sha256":"{wheel_sha}"}},"uri":"pkg:pypi/greet@1.0"}}"#
        )),
        "{statement}"
    );
    let doc = std::fs::read_to_string(&result).unwrap();
    assert!(
        doc.contains(&format!("- Package environment: `t tree=sha256:{tree}")),
        "{doc}"
    );
    // The result passes the runner's own checks.
    let verified = w.run(&["verify", result.to_str().unwrap()]);
    assert!(verified.status.success(), "{}", text(&verified));

    // The approver is shown the environment and its packages.
    let unsigned = w.dir.path().join("unsigned.md");
    let body = std::fs::read_to_string(&request)
        .unwrap()
        .replace("approved_by: \"operator-ada\"\n", "")
        .replace("approved_utc: \"2026-11-25T06:05:00Z\"\n", "");
    std::fs::write(&unsigned, body).unwrap();
    let shown = w.run(&[
        "approve",
        unsigned.to_str().unwrap(),
        "--by",
        "operator-bob",
        "--yes",
    ]);
    let shown_text = text(&shown);
    assert!(
        shown_text.contains("environment:   t (greet 1.0)"),
        "{shown_text}"
    );
}

#[test]
fn a_wheel_whose_hash_does_not_match_the_pin_is_refused() {
    let pinned = sha256_hex(b"not the greet wheel");
    let w = World::new(&[("greet", "1.0", &pinned)]);
    let out = w.install(&[GREET]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "its sha256 {} matches no package pinned",
            file_sha(&fixture(GREET))
        )),
        "{stderr}"
    );
    assert!(stderr.contains(&pinned), "{stderr}");
    let rows: Value = serde_json::from_slice(&w.run(&["env", "list", "--json"]).stdout).unwrap();
    assert_eq!(rows[0]["installed"], false);
}

/// Each hostile wheel is pinned by its true hash (so only the content checks can
/// refuse it), and refused before anything is installed.
#[test]
fn hostile_wheels_are_refused_with_the_reason() {
    let cases = [
        (
            "native_extension-1.0-cp312-cp312-linux_x86_64.whl",
            "native-extension",
            "it is a platform wheel (abi `cp312`, platform `linux_x86_64`)",
        ),
        (
            "native_extension_disguised_as_pure-1.0-py3-none-any.whl",
            "native-extension-disguised-as-pure",
            "member `fastmath/_speedups.so` is a native extension",
        ),
        (
            "path_traversal_in_member_name-1.0-py3-none-any.whl",
            "path-traversal-in-member-name",
            "member `../../../../tmp/runner-env-zip-slip.py` escapes the install directory",
        ),
        (
            "symlink_member_to_host_file-1.0-py3-none-any.whl",
            "symlink-member-to-host-file",
            "member `linky/passwd.py` is a symbolic link",
        ),
        (
            "wheel_ships_sitecustomize-1.0-py3-none-any.whl",
            "wheel-ships-sitecustomize",
            "member `sitecustomize.py` is a top-level `sitecustomize`, which Python's `site` \
             runs at every start",
        ),
        (
            "wheel_shadows_stdlib_json-1.0-py3-none-any.whl",
            "wheel-shadows-stdlib-json",
            "member `json/__init__.py` is a top-level `json`, a module of the guest's \
             standard library",
        ),
    ];
    for (file, name, reason) in cases {
        let w = World::new(&[(name, "1.0", &file_sha(&fixture(file)))]);
        let out = w.install(&[file]);
        assert_eq!(out.status.code(), Some(3), "{file}: {}", text(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(reason), "{file}: {stderr}");
        assert!(
            stderr.contains(file),
            "{file}: the message names the wheel: {stderr}"
        );
        // Nothing was installed: no record, no tree beyond the discarded partial one.
        let trees: Vec<_> = std::fs::read_dir(w.store().join("trees"))
            .map(|d| d.filter_map(Result::ok).map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert!(trees.is_empty(), "{file}: {trees:?}");
    }
    assert!(!Path::new("/tmp/runner-env-zip-slip.py").exists());
}

/// A loopback HTTP server answering every request with `hello from loopback`, counting
/// them; it stops accepting after a minute.
fn hello_server() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let origin = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = std::sync::Arc::clone(&hits);
    std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while std::time::Instant::now() < deadline {
            let Ok((mut stream, _)) = listener.accept() else {
                std::thread::sleep(std::time::Duration::from_millis(5));
                continue;
            };
            stream.set_nonblocking(false).unwrap();
            stream
                .set_read_timeout(Some(std::time::Duration::from_secs(5)))
                .unwrap();
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && head.len() < 16 * 1024 {
                match stream.read(&mut byte) {
                    Ok(1) => head.push(byte[0]),
                    _ => break,
                }
            }
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let body = b"hello from loopback";
            let _ = stream.write_all(
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                )
                .as_bytes(),
            );
            let _ = stream.write_all(body);
        }
    });
    (origin, hits)
}

/// A package environment and the network in one run: the guest gets one `PYTHONPATH`,
/// the runner's network directory first (its `sitecustomize`, the urllib door, is the
/// one imported), then the stdlib, then the environment; `urlopen` goes through the
/// broker (recorded in the lock, the server reached once) and the package imports.
#[test]
fn package_environment_with_network_keeps_the_urllib_door() {
    let w = World::new(&[("greet", "1.0", &file_sha(&fixture(GREET)))]);
    let out = w.install(&[GREET]);
    assert!(out.status.success(), "{}", text(&out));
    let (origin, hits) = hello_server();
    w.allow_network(&origin);
    let main = format!(
        "import json, sys, urllib.request\nimport greet\nprint(json.dumps(sys.path))\n\
         with urllib.request.urlopen('{origin}/hello') as r:\n    print(r.read().decode())\n\
         print(greet.hello('net'))\n"
    );
    let request = w.request_with("python-t", &main, "allowlist");
    let (out, report) = w.exec(&request);
    assert!(out.status.success(), "{}", text(&out));
    let result = PathBuf::from(report["result_path"].as_str().unwrap());
    let stdout = stdout_of(&result);
    let mut lines = stdout.lines();
    let path: Vec<String> = serde_json::from_str(lines.next().unwrap()).unwrap();
    let at = |dir: &str| {
        path.iter()
            .position(|p| p == dir)
            .unwrap_or_else(|| panic!("{dir} not on sys.path {path:?}"))
    };
    assert!(
        at("/usr/lib/runner-net") < at("/usr/local/lib/python3.12"),
        "{path:?}"
    );
    assert!(
        at("/usr/local/lib/python3.12") < at("/site-packages"),
        "{path:?}"
    );
    assert_eq!(lines.next(), Some("hello from loopback"), "{stdout}");
    assert_eq!(lines.next(), Some("hello net from greet"), "{stdout}");
    assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 1);
    let lock: Value =
        serde_json::from_slice(&std::fs::read(result.with_extension("lock.json")).unwrap())
            .unwrap();
    let exchanges = lock["network"]["exchanges"].as_array().unwrap();
    assert_eq!(exchanges.len(), 1, "{lock}");
    assert_eq!(exchanges[0]["verdict"], "allowed", "{lock}");
}

#[test]
fn a_package_writing_into_its_own_directory_at_import_is_contained() {
    let w = World::new(&[(
        "writes-into-own-directory-at-import",
        "1.0",
        &file_sha(&fixture(SELFWRITE)),
    )]);
    let out = w.install(&[SELFWRITE]);
    assert!(out.status.success(), "{}", text(&out));
    let tree = w.installed_tree();
    let request = w.request("python-t", "import selfwrite\nprint(selfwrite.WROTE)\n");
    let (out, report) = w.exec(&request);
    assert!(out.status.success(), "{}", text(&out));
    let stdout = stdout_of(Path::new(report["result_path"].as_str().unwrap()));
    assert!(stdout.starts_with("refused: "), "{stdout}");
    assert!(!tree.join("selfwrite/planted.py").exists());
    // The tree still verifies: a second run is accepted.
    let (again, _) = w.exec(&request);
    assert!(again.status.success(), "{}", text(&again));
}

#[test]
fn a_tree_modified_after_install_refuses_the_run() {
    let w = World::new(&[("greet", "1.0", &file_sha(&fixture(GREET)))]);
    assert!(w.install(&[GREET]).status.success());
    let tree = w.installed_tree();
    let request = w.request("python-t", IMPORT_GREET);

    // Edited in place, then a file added: each is refused before anything runs.
    let module = tree.join("greet/__init__.py");
    std::fs::write(&module, "def hello(name):\n    return 'tampered'\n").unwrap();
    let (out, report) = w.exec(&request);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let all = text(&out);
    assert!(all.contains("environment.tampered"), "{all}");
    assert!(all.contains("it was modified"), "{all}");
    assert!(report["result_path"].is_null(), "{report}");

    std::fs::write(
        &module,
        b"def hello(name):\n    return f\"hello {name} from greet\"\n",
    )
    .unwrap();
    let (out, _) = w.exec(&request);
    assert!(out.status.success(), "restored: {}", text(&out));

    std::fs::write(tree.join("greet/extra.py"), "").unwrap();
    let (out, _) = w.exec(&request);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(text(&out).contains("environment.tampered"));
}

#[test]
fn an_environment_not_installed_is_named_with_the_command_that_installs_it() {
    let w = World::new(&[("greet", "1.0", &file_sha(&fixture(GREET)))]);
    let request = w.request("python-t", IMPORT_GREET);
    let (out, _) = w.exec(&request);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let all = text(&out);
    assert!(all.contains("environment.unavailable"), "{all}");
    assert!(all.contains("run `runner env fetch t`"), "{all}");
}

#[test]
fn replay_refuses_a_missing_environment_and_runs_once_it_is_installed_again() {
    let w = World::new(&[("greet", "1.0", &file_sha(&fixture(GREET)))]);
    assert!(w.install(&[GREET]).status.success());
    let request = w.request("python-t", IMPORT_GREET);
    let (out, report) = w.exec(&request);
    assert!(out.status.success(), "{}", text(&out));
    let result = report["result_path"].as_str().unwrap().to_owned();

    std::fs::remove_dir_all(w.store()).unwrap();
    let replay = |w: &World| w.run(&["replay", &result, "--request", request.to_str().unwrap()]);
    let out = replay(&w);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let all = text(&out);
    assert!(all.contains("environment: the lock pins `t`"), "{all}");
    assert!(all.contains("runner env fetch --from-lock"), "{all}");

    assert!(w.install(&[GREET]).status.success());
    let out = replay(&w);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("MATCH  stdout"), "{}", text(&out));
}

#[test]
fn a_monty_request_naming_an_environment_is_rejected() {
    let w = World::new(&[("greet", "1.0", &file_sha(&fixture(GREET)))]);
    let example = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/monty-primes/TR-20261121-101500Z-monty-primes.md");
    let body = std::fs::read_to_string(example)
        .unwrap()
        .replace("language: python\n", "language: python-t\n");
    let path = w.dir.path().join("TR-20261121-101500Z-monty-primes.md");
    std::fs::write(&path, body).unwrap();
    let out = w.run(&["validate", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let all = text(&out);
    assert!(all.contains("language.environment_on_monty"), "{all}");
    assert!(all.contains("backend monty has no packages"), "{all}");
}

/// The example's policy is the built-in one plus its environment, so that nothing else
/// about the example differs from a default run.
#[test]
fn the_example_policy_extends_the_builtin_policy_unchanged() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/package-env/policy.toml"),
    )
    .unwrap();
    assert!(
        text.starts_with(runner_core::policy::DEFAULT_POLICY_TOML),
        "examples/package-env/policy.toml must start with policies/default.toml verbatim"
    );
    let policy = runner_core::policy::Policy::parse(&text, "example").unwrap();
    let env = policy.environment("analysis").unwrap();
    assert_eq!(env.packages.len(), 2);
}
