//! The second wall, checked from inside: `runner-confinement-probe` applies the same
//! `confine_worker` a guest's worker applies, then reports what the kernel says. Each
//! resource limit must be in force, `no_new_privs` set, every capability set empty, the
//! seccomp filter installed and really refusing what it lists, and (as root, as CI
//! runs) the process must be in a network namespace with no interface but a loopback
//! that has no route.
//!
//! The policy switch is checked under real conditions, not a flag: the probe and
//! `runner exec` run as `nobody` (with `setpriv`), where the kernel refuses a network
//! namespace and the bounding set (Landlock, which needs no privileges, must still
//! apply). The built-in policy lets such a run go on and says
//! so in Provenance; a policy that requires the namespace refuses it, naming the layer
//! and the kernel's reason, and writes no result.

#![allow(clippy::unwrap_used)]
// reason: a test harness builds fixtures and runs the built binaries on the host.
#![allow(clippy::disallowed_methods)]

use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const NOBODY: &str = "65534";

fn runner() -> Command {
    Command::new(env!("CARGO_BIN_EXE_runner"))
}

/// The confinement probe, built beside `runner` (runner-sandbox's `runner-confinement-probe`).
fn probe_command() -> Command {
    Command::new(Path::new(env!("CARGO_BIN_EXE_runner")).with_file_name("runner-confinement-probe"))
}

/// Copies of `runner` and its workers in `dir` (world-readable), so `nobody`
/// can run them wherever the checkout lives (a clone under /root is closed to it).
fn binaries_for_nobody(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let runner = Path::new(env!("CARGO_BIN_EXE_runner"));
    for name in [
        "runner",
        "runner-era-worker",
        "runner-monty-worker",
        "runner-confinement-probe",
    ] {
        let from = runner.with_file_name(name);
        let to = bin.join(name);
        if std::fs::hard_link(&from, &to).is_err() {
            std::fs::copy(&from, &to)
                .unwrap_or_else(|e| panic!("{}: {e} (build the workspace)", from.display()));
        }
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    bin.join("runner")
}

/// `cmd` run as `nobody` (uid and gid 65534, no supplementary groups).
fn as_nobody(cmd: &Command) -> Command {
    assert!(
        nix::unistd::geteuid().is_root(),
        "switching to nobody needs root (CI runs as root); leave the group out with `cargo test -- --skip needs_root`"
    );
    let mut wrapped = Command::new("setpriv");
    wrapped
        .arg(format!("--reuid={NOBODY}"))
        .arg(format!("--regid={NOBODY}"))
        .arg("--clear-groups")
        // The worker next to the copied runner, not one nobody may not reach.
        .env_remove("RUNNER_MONTY_WORKER")
        .arg("--")
        .arg(cmd.get_program())
        .args(cmd.get_args());
    wrapped
}

fn probe_output(cmd: &mut Command) -> (Output, Value) {
    let out = cmd.output().unwrap();
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "probe printed no report ({e}); stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out, report)
}

/// The probe as the runner's user under `policy` (the built-in one when `None`), with
/// the run directories `read` and `write`.
fn probe_with_dirs(policy: Option<&Path>, read: &Path, write: &Path) -> (Output, Value) {
    let mut cmd = probe_command();
    if let Some(policy) = policy {
        cmd.arg(policy);
    }
    probe_output(
        cmd.env("RUNNER_PROBE_READ_DIR", read)
            .env("RUNNER_PROBE_WRITE_DIR", write),
    )
}

/// The probe as the runner's user, with a run's directories (`read/`, `write/`) so
/// every layer has what it applies to.
fn probe() -> Value {
    let dir = tempfile::tempdir().unwrap();
    let (read, write) = probe_dirs(dir.path());
    let (out, report) = probe_with_dirs(None, &read, &write);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    report
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect()
}

/// The soft and hard values of one row of /proc/self/limits.
fn limit(report: &Value, name: &str) -> (String, String) {
    let text = report["limits"].as_str().unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with(name))
        .unwrap_or_else(|| panic!("{name} missing from {text}"));
    let rest: Vec<&str> = line[name.len()..].split_whitespace().collect();
    (rest[0].to_owned(), rest[1].to_owned())
}

/// A directory everyone may enter and write (for runs as nobody).
fn open_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

/// The built-in policy with `layer = "required"`, written where nobody can read it.
fn policy_requiring(dir: &Path, layer: &str) -> PathBuf {
    let default = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies/default.toml"),
    )
    .unwrap();
    let strict = default.replace(
        &format!("{layer} = \"optional\""),
        &format!("{layer} = \"required\""),
    );
    assert_ne!(
        strict, default,
        "the default policy states {layer} as optional"
    );
    let path = dir.join(format!("strict-{layer}.toml"));
    std::fs::write(&path, strict).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    path
}

fn policy_requiring_net_namespace(dir: &Path) -> PathBuf {
    policy_requiring(dir, "net_namespace")
}

/// A run's directories for the probe: `read/input` to read, `write/` to write.
fn probe_dirs(dir: &Path) -> (PathBuf, PathBuf) {
    let (read, write) = (dir.join("read"), dir.join("write"));
    for d in [&read, &write] {
        std::fs::create_dir(d).unwrap();
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    std::fs::write(read.join("input"), "x").unwrap();
    std::fs::set_permissions(read.join("input"), std::fs::Permissions::from_mode(0o644)).unwrap();
    (read, write)
}

/// What the Landlock layer must allow and deny, as `probe_filesystem` reports it.
/// `/etc/passwd` and `/` are world-readable and the temporary directory world-writable,
/// so each EACCES there is Landlock's, not the file mode's.
fn assert_filesystem_walled(r: &Value) {
    let fs = &r["filesystem"];
    for (attempt, expected) in [
        ("read_etc_passwd", "EACCES"),
        ("list_root", "EACCES"),
        ("create_in_tmp", "EACCES"),
        ("read_own_exe", "EACCES"),
        ("read_in_read_dir", "ok"),
        ("list_read_dir", "ok"),
        ("create_in_read_dir", "EACCES"),
        ("create_in_write_dir", "ok"),
        ("mkdir_in_write_dir", "ok"),
        ("remove_in_write_dir", "ok"),
    ] {
        assert_eq!(fs[attempt], expected, "{attempt}: {fs}");
    }
    assert!(
        strings(&r["applied"])
            .iter()
            .any(|a| a.starts_with("landlock(abi=")),
        "{r}"
    );
}

#[test]
fn every_rlimit_is_in_force() {
    let r = probe();
    assert_eq!(
        r["skipped"],
        serde_json::json!([]),
        "every layer applies here: {r}"
    );
    assert_eq!(
        limit(&r, "Max cpu time"),
        ("4".into(), "5".into()),
        "CPU: the 3 s budget rounded up plus 1 s, hard one more"
    );
    assert_eq!(
        limit(&r, "Max file size"),
        ("1048577".into(), "1048577".into())
    );
    assert_eq!(limit(&r, "Max open files"), ("1088".into(), "1088".into()));
    assert_eq!(limit(&r, "Max core file size"), ("0".into(), "0".into()));
    assert_eq!(
        limit(&r, "Max address space"),
        ((2u64 << 30).to_string(), (2u64 << 30).to_string())
    );
    assert_eq!(r["no_new_privs"], "1");
}

/// The `/out` byte cap per file is exact: one write reaching past the cap (1 MiB for
/// the probe) lands exactly one byte more, the runner's evidence that the cap was
/// reached (it cuts that byte off before collecting); any write past that byte fails
/// with EFBIG and the worker records the kernel's SIGXFSZ instead of dying of it, so
/// the run is `output_limit` whatever the guest does about the error.
#[test]
fn a_write_past_the_file_size_limit_is_cut_then_refused_and_recorded() {
    let dir = open_dir();
    let (_, write) = probe_dirs(dir.path());
    let (out, r) = probe_output(probe_command().env("RUNNER_PROBE_WRITE_DIR", &write));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let f = &r["fsize"];
    assert_eq!(f["stale"], false, "nothing recorded before: {f}");
    assert_eq!(
        f["landed"],
        (1u64 << 20) + 1,
        "the write stops one byte past the cap: {f}"
    );
    assert_eq!(
        f["recorded_after_first"], false,
        "a shortened write raises no signal: {f}"
    );
    assert_eq!(f["next_write"], "EFBIG", "{f}");
    assert_eq!(f["recorded"], true, "SIGXFSZ recorded, not fatal: {f}");
    assert!(!write.join("fsize").exists());
}

#[test]
fn seccomp_denies_what_it_lists_and_allows_what_the_worker_needs() {
    let r = probe();
    assert_eq!(r["seccomp"], "2", "filter mode: {r}");
    assert!(
        strings(&r["applied"])
            .iter()
            .any(|l| l.starts_with("seccomp(deny=")),
        "{r}"
    );
    let calls = &r["syscalls"];
    // Without the filter, each of these would succeed or fail otherwise: a user
    // namespace needs no privilege, an IP socket works in any namespace, and the
    // umount2 and execve paths do not exist (ENOENT).
    for denied in [
        "unshare_newuser",
        "unshare_newns",
        "umount2",
        "socket_inet",
        "execve",
    ] {
        assert_eq!(calls[denied], "EPERM", "{denied}: {calls}");
    }
    // What the worker itself needs after confinement: threads (clone3 answers ENOSYS,
    // the C library falls back to clone without namespace flags) and Unix sockets.
    assert_eq!(calls["thread_spawn"], "ok", "{calls}");
    assert_eq!(calls["socket_unix"], "ok", "{calls}");
}

#[test]
fn landlock_keeps_the_worker_to_its_own_directories() {
    let dir = open_dir();
    let policy = policy_requiring(dir.path(), "landlock");
    let (read, write) = probe_dirs(dir.path());
    let (out, r) = probe_with_dirs(Some(&policy), &read, &write);
    assert!(
        out.status.success(),
        "landlock is required here: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_filesystem_walled(&r);
    // The deny-list and the wall compose: the probe's other checks still hold.
    assert_eq!(r["syscalls"]["socket_unix"], "ok", "{r}");
}

fn monty_request(dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/monty-primes/TR-20261121-101500Z-monty-primes.md");
    let req = dir.join("TR-20261121-101500Z-monty-primes.md");
    std::fs::copy(src, &req).unwrap();
    std::fs::set_permissions(&req, std::fs::Permissions::from_mode(0o644)).unwrap();
    req
}

/// The csv-stats ERA example (request and its `inputs/`) copied into `dir`.
fn era_request(dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/csv-stats");
    std::fs::create_dir_all(dir.join("inputs")).unwrap();
    for name in ["data.csv", "stats.py"] {
        std::fs::copy(src.join("inputs").join(name), dir.join("inputs").join(name)).unwrap();
    }
    let req = dir.join("TR-20261121-100000Z-csv-stats.md");
    std::fs::copy(src.join("TR-20261121-100000Z-csv-stats.md"), &req).unwrap();
    req
}

fn results_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("TS-") && n.ends_with(".md"))
                .collect()
        })
        .unwrap_or_default()
}

/// The text of the single result an `exec` that must have succeeded wrote in `results`.
fn the_one_result(out: &Output, results: &Path) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let names = results_in(results);
    assert_eq!(names.len(), 1, "{names:?}");
    std::fs::read_to_string(results.join(&names[0])).unwrap()
}

/// The Provenance's `- Confinement:` line.
fn confinement_line(doc: &str) -> &str {
    doc.lines()
        .find(|l| l.starts_with("- Confinement:"))
        .unwrap_or_else(|| panic!("no Confinement line: {doc}"))
}

#[test]
fn exec_under_required_landlock_runs_monty_whole_and_says_so() {
    // (The ERA guest runs every tests/era case under required Landlock.)
    let dir = open_dir();
    let req = monty_request(dir.path());
    let policy = policy_requiring(dir.path(), "landlock");
    let results = dir.path().join("results");
    let out = runner()
        .arg("--policy")
        .arg(&policy)
        .arg("exec")
        .arg(&req)
        .arg("--results")
        .arg(&results)
        .output()
        .unwrap();
    let doc = the_one_result(&out, &results);
    assert!(doc.contains("sieve: primes below 10000: 1229"), "{doc}");
    let line = confinement_line(&doc);
    assert!(line.contains("landlock(abi="), "{line}");
    assert!(!line.contains("not applied"), "{line}");
}

/// The tests that need root: a fresh network namespace, dropping the bounding set, or
/// switching to `nobody` to see what an unprivileged run does. Each one fails, saying
/// so, when not run as root (CI runs as root); elsewhere leave the group out with
/// `cargo test -- --skip needs_root`.
mod needs_root {
    use super::*;

    #[test]
    fn the_worker_has_no_network() {
        assert!(
            nix::unistd::geteuid().is_root(),
            "a fresh network namespace needs root here (CI runs as root); leave the group out with `cargo test -- --skip needs_root`"
        );
        let r = probe();
        assert!(strings(&r["applied"]).contains(&"net_namespace"), "{r}");
        assert_eq!(
            strings(&r["interfaces"]),
            vec!["lo"],
            "only the (down) loopback of a fresh namespace"
        );
        assert_eq!(
            r["routes"], 0,
            "no usable route anywhere, not even to loopback"
        );
    }

    /// Under a root runner the worker runs as a uid and gid of its
    /// own with no supplementary groups, owns its write directory, and cannot write
    /// (or chmod) a file the runner owns there, where Landlock would let it: the refusal
    /// is the file permissions' alone.
    #[test]
    fn the_worker_runs_as_its_own_uid_and_cannot_touch_runner_owned_files() {
        assert!(
            nix::unistd::geteuid().is_root(),
            "changing uid needs root (CI runs as root); leave the group out with `cargo test -- --skip needs_root`"
        );
        let dir = tempfile::tempdir().unwrap();
        let policy = policy_requiring(dir.path(), "own_uid");
        let (read, write) = probe_dirs(dir.path());
        let foreign = write.join("runner-owned");
        std::fs::write(&foreign, "the runner's\n").unwrap();
        std::fs::set_permissions(&foreign, std::fs::Permissions::from_mode(0o644)).unwrap();
        let (out, r) = probe_with_dirs(Some(&policy), &read, &write);
        assert!(
            out.status.success(),
            "own_uid is required here: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let ids = |field: &str| -> Vec<u32> {
            r[field]
                .as_str()
                .unwrap_or_default()
                .split_whitespace()
                .map(|n| n.parse().unwrap())
                .collect()
        };
        let (uid, gid) = (ids("uid"), ids("gid"));
        assert_eq!(uid.len(), 4, "real, effective, saved, filesystem: {r}");
        assert!(
            uid.iter()
                .all(|&u| u == uid[0] && u >= runner_sandbox::confine::WORKER_ID_BASE),
            "every uid is the worker's own: {r}"
        );
        assert_eq!(gid, uid, "and so is every gid: {r}");
        assert_eq!(r["groups"], "", "no supplementary group: {r}");
        assert!(
            strings(&r["applied"]).contains(&format!("own_uid={}", uid[0]).as_str()),
            "{r}"
        );
        let fs = &r["filesystem"];
        assert_eq!(fs["write_runner_owned_in_write_dir"], "EACCES", "{fs}");
        assert_eq!(fs["chmod_runner_owned_in_write_dir"], "EPERM", "{fs}");
        assert_eq!(
            std::fs::read_to_string(&foreign).unwrap(),
            "the runner's\n",
            "untouched"
        );
        // Its own directories still work: /out is its own, /in readable, not writable.
        assert_filesystem_walled(&r);
        for (attempt, expected) in [
            ("create_in_write_dir", "ok"),
            ("read_in_read_dir", "ok"),
            ("create_in_read_dir", "EACCES"),
        ] {
            assert_eq!(fs[attempt], expected, "{attempt}: {fs}");
        }
        // The capabilities are gone after the change too.
        assert_eq!(r["capabilities"]["permitted"], "0000000000000000", "{r}");
    }

    /// A whole run under the worker's own uid, both backends: the guest reads /in,
    /// writes /out (and, on the ERA guest, its scratch /tmp), and the result says
    /// `own_uid=N` in its Confinement line.
    #[test]
    fn exec_under_required_own_uid_runs_both_backends_and_says_so() {
        assert!(
            nix::unistd::geteuid().is_root(),
            "changing uid needs root (CI runs as root); leave the group out with `cargo test -- --skip needs_root`"
        );
        let dir = tempfile::tempdir().unwrap();
        let policy = policy_requiring(dir.path(), "own_uid");
        for request in [monty_request(dir.path()), era_request(dir.path())] {
            let results = dir.path().join("results");
            let out = Command::new(env!("CARGO_BIN_EXE_runner"))
                .arg("exec")
                .arg(&request)
                .arg("--policy")
                .arg(&policy)
                .arg("--results")
                .arg(&results)
                .output()
                .unwrap();
            let doc = the_one_result(&out, &results);
            let line = confinement_line(&doc);
            assert!(line.contains("own_uid="), "{}: {line}", request.display());
            assert!(doc.contains("exit_code: 0"), "{doc}");
            std::fs::remove_dir_all(&results).unwrap();
        }
    }

    #[test]
    fn the_worker_holds_no_capabilities() {
        assert!(
            nix::unistd::geteuid().is_root(),
            "dropping the bounding set needs root (CI runs as root); leave the group out with `cargo test -- --skip needs_root`"
        );
        let r = probe();
        for set in [
            "effective",
            "permitted",
            "inheritable",
            "ambient",
            "bounding",
        ] {
            assert_eq!(
                r["capabilities"][set], "0000000000000000",
                "{set} capabilities left: {r}"
            );
        }
        let applied = strings(&r["applied"]);
        assert!(applied.contains(&"capabilities=0"), "{r}");
        assert!(applied.contains(&"capability_bounding_set=0"), "{r}");
    }

    #[test]
    fn without_privileges_optional_layers_are_skipped_and_said() {
        let dir = open_dir();
        let exe = binaries_for_nobody(dir.path());
        let (read, write) = probe_dirs(dir.path());
        let probe = Command::new(exe.with_file_name("runner-confinement-probe"));
        let mut probe = as_nobody(&probe);
        probe
            .env("RUNNER_PROBE_READ_DIR", &read)
            .env("RUNNER_PROBE_WRITE_DIR", &write);
        let (out, r) = probe_output(&mut probe);
        assert!(
            out.status.success(),
            "the built-in policy lets an unprivileged run go on: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Landlock needs no privileges: it applies as nobody too.
        assert_filesystem_walled(&r);
        let failed: Vec<&str> = r["failed"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["layer"].as_str().unwrap())
            .collect();
        assert_eq!(
            failed,
            vec!["net_namespace", "capability_bounding_set", "own_uid"],
            "exactly the layers that need root: {r}"
        );
        let provenance = strings(&r["provenance"]);
        assert!(
            provenance
                .iter()
                .any(|l| l.starts_with("not applied: net_namespace (") && l.contains("EPERM")),
            "{provenance:?}"
        );
        // What works without privileges still applies, and is in force.
        assert_eq!(r["seccomp"], "2");
        assert_eq!(r["no_new_privs"], "1");
        assert_eq!(r["capabilities"]["effective"], "0000000000000000");
        assert_eq!(r["syscalls"]["unshare_newuser"], "EPERM");
        assert!(!strings(&r["applied"]).contains(&"net_namespace"));
    }

    #[test]
    fn a_required_layer_that_cannot_apply_refuses_the_probe() {
        let dir = open_dir();
        let policy = policy_requiring_net_namespace(dir.path());
        let exe = binaries_for_nobody(dir.path());
        let (out, _) = probe_output(&mut as_nobody(
            Command::new(exe.with_file_name("runner-confinement-probe")).arg(&policy),
        ));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{stderr}");
        assert!(
            stderr.contains("`net_namespace` is required") && stderr.contains("EPERM"),
            "names the layer and the kernel's reason: {stderr}"
        );
    }

    #[test]
    fn exec_without_privileges_runs_under_the_default_policy_and_says_what_did_not_apply() {
        let dir = open_dir();
        let req = monty_request(dir.path());
        let results = dir.path().join("results");
        let mut exec = Command::new(binaries_for_nobody(dir.path()));
        exec.arg("exec").arg(&req).arg("--results").arg(&results);
        let out = as_nobody(&exec).output().unwrap();
        let doc = the_one_result(&out, &results);
        let line = confinement_line(&doc);
        assert!(line.contains("not applied: net_namespace ("), "{line}");
        assert!(
            line.contains("not applied: capability_bounding_set ("),
            "{line}"
        );
        assert!(line.contains("seccomp(deny="), "{line}");
        assert!(line.contains("capabilities=0"), "{line}");
        assert!(line.contains("landlock(abi="), "{line}");
    }

    #[test]
    fn exec_refuses_a_run_whose_required_layer_cannot_apply() {
        let dir = open_dir();
        let req = monty_request(dir.path());
        let policy = policy_requiring_net_namespace(dir.path());
        let results = dir.path().join("results");
        let mut exec = Command::new(binaries_for_nobody(dir.path()));
        exec.arg("--policy")
            .arg(&policy)
            .arg("exec")
            .arg(&req)
            .arg("--results")
            .arg(&results);
        let out = as_nobody(&exec).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{stderr}");
        assert!(
            stderr.contains("`net_namespace` is required") && stderr.contains("EPERM"),
            "{stderr}"
        );
        assert_eq!(results_in(&results), Vec::<String>::new(), "no result");
    }
}
