//! The second wall, checked from inside: `runner __confinement-probe` applies the same
//! `confine_worker` a guest's worker applies, then reports what the kernel says. Each
//! resource limit must be in force, `no_new_privs` set, and (as root, as CI runs) the
//! process must be in a network namespace with no interface but a loopback that has no
//! route.

#![allow(clippy::unwrap_used)]

use serde_json::Value;

fn probe() -> Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_runner"))
        .arg("__confinement-probe")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
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
    assert_eq!(limit(&r, "Max open files"), ("64".into(), "64".into()));
    assert_eq!(limit(&r, "Max core file size"), ("0".into(), "0".into()));
    assert_eq!(
        limit(&r, "Max address space"),
        ((2u64 << 30).to_string(), (2u64 << 30).to_string())
    );
    assert_eq!(r["no_new_privs"], "1");
}

#[test]
fn the_worker_has_no_network() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "a fresh network namespace needs root here (CI runs as root)"
    );
    let r = probe();
    let applied: Vec<&str> = r["applied"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(applied.contains(&"net_namespace"), "{r}");
    let interfaces: Vec<&str> = r["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        interfaces,
        vec!["lo"],
        "only the (down) loopback of a fresh namespace"
    );
    assert_eq!(
        r["routes"], 0,
        "no usable route anywhere, not even to loopback"
    );
}
