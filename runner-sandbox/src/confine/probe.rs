//! The confinement probe: confines its own process like a worker and reports what the
//! kernel then says, so tests can prove each layer is in force.

use super::{ConfinementPolicy, EarlyConfinement, FsAccess, confine_worker, take_fsize_refusal};
use nix::mount::MntFlags;
use runner_core::run::Limits;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The confinement probe's fixed limits ([`probe_main`]): 64 MiB of memory, 5 s of wall
/// clock, 3 s of CPU, 1 MiB for stdout, stderr and `/out`, 16 entries in `/out`. Small
/// and short, they are also what unit tests run under when they test none of a run's
/// limits (changing one of them with struct-update syntax when they do).
pub const PROBE_LIMITS: Limits = Limits {
    memory_bytes: 64 << 20,
    wall: Duration::from_secs(5),
    cpu: Duration::from_secs(3),
    stdout_bytes: 1 << 20,
    stderr_bytes: 1 << 20,
    out_bytes: 1 << 20,
    out_files: 16,
};

/// `runner-confinement-probe [POLICY.toml]` (the binary loads the policy and passes
/// its `[confinement]` table): applies [`confine_worker`] to this
/// process with [`PROBE_LIMITS`], exactly as a worker does before it runs a
/// guest, then prints what the kernel reports (one JSON object): the steps applied and
/// skipped, the layers that failed, `/proc/self/limits`, `NoNewPrivs`, the capability
/// masks, the seccomp mode, the network interfaces and routes it can see, and the errno
/// of calls the filter must deny (and of two it must allow), what a write past
/// `RLIMIT_FSIZE` does (`fsize`, given a write directory), and how long
/// `confine_worker` took (`confine_us`: the request's half, what a warm worker still
/// does after its request arrives) after [`EarlyConfinement::take`]
/// (`early_confine_us`: what a warm worker does before). Then it checks the layers
/// against the policy's `[confinement]` table (the built-in one, or POLICY.toml) like a
/// worker: exit 0 when the run could go on, 3 with the refusal on stderr when not.
/// Tests use it to prove each layer is in force; it runs no guest.
///
/// Limits: [`PROBE_LIMITS`], address space 2 GiB.
pub fn probe_main(confinement: &ConfinementPolicy) -> i32 {
    let limits = PROBE_LIMITS;
    let dir = |var: &str| crate::env::var_os(var).map(PathBuf::from);
    let (read_dir, write_dir) = (dir("RUNNER_PROBE_READ_DIR"), dir("RUNNER_PROBE_WRITE_DIR"));
    // Unlike a worker, the probe keeps its own /proc/self readable: it reports from
    // there (limits, status, network). Nothing else is added.
    let fs_access = FsAccess {
        read: read_dir
            .iter()
            .cloned()
            .chain([PathBuf::from("/proc/self")])
            .collect(),
        write: write_dir.iter().cloned().collect(),
        run_root: write_dir
            .as_deref()
            .and_then(Path::parent)
            .filter(|root| read_dir.as_deref().and_then(Path::parent) == Some(*root))
            .map(Path::to_owned),
    };
    let started = std::time::Instant::now();
    let early = EarlyConfinement::take();
    let early_us = started.elapsed().as_micros();
    let started = std::time::Instant::now();
    let c = confine_worker(early, &limits, Some(2 << 30), &fs_access);
    let confine_us = started.elapsed().as_micros();
    let read = |p: &str| fs::read_to_string(p).unwrap_or_default();
    let interfaces: Vec<String> = read("/proc/net/dev")
        .lines()
        .skip(2)
        .filter_map(|l| l.split(':').next().map(|n| n.trim().to_owned()))
        .collect();
    // Usable routes: a fresh namespace lists IPv6 "reject" entries (RTF_REJECT, 0x200),
    // which route nothing.
    const RTF_REJECT: u32 = 0x200;
    let usable = |flags: Option<&str>| {
        flags
            .and_then(|f| u32::from_str_radix(f, 16).ok())
            .is_some_and(|f| f & RTF_REJECT == 0)
    };
    let routes = read("/proc/net/route")
        .lines()
        .skip(1)
        .filter(|l| usable(l.split_whitespace().nth(3)))
        .count()
        + read("/proc/net/ipv6_route")
            .lines()
            .filter(|l| usable(l.split_whitespace().nth(8)))
            .count();
    let status = read("/proc/self/status");
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(|v| v.trim().to_owned())
    };
    let report = serde_json::json!({
        "applied": c.applied,
        "skipped": c.skipped,
        "failed": c.failed.iter().map(|(l, why)| serde_json::json!({"layer": l.as_str(), "reason": why})).collect::<Vec<_>>(),
        "provenance": c.provenance(),
        "limits": read("/proc/self/limits"),
        "no_new_privs": field("NoNewPrivs"),
        "capabilities": {
            "inheritable": field("CapInh"),
            "permitted": field("CapPrm"),
            "effective": field("CapEff"),
            "bounding": field("CapBnd"),
            "ambient": field("CapAmb"),
        },
        "seccomp": field("Seccomp"),
        "uid": field("Uid"),
        "gid": field("Gid"),
        "groups": field("Groups"),
        "interfaces": interfaces,
        "routes": routes,
        "syscalls": probe_syscalls(),
        "filesystem": probe_filesystem(read_dir.as_deref(), write_dir.as_deref()),
        "fsize": write_dir.as_deref().map(|w| probe_fsize(&w.join("fsize"), limits.out_bytes)),
        "confine_us": confine_us,
        "early_confine_us": early_us,
    });
    println!("{report}");
    match c.check(confinement) {
        Ok(()) => 0,
        Err(refusal) => {
            eprintln!("runner-confinement-probe: {refusal}");
            3
        }
    }
}

/// Tries, after confinement, to reach files the Landlock layer must keep out of reach
/// and the run directories it must leave open (`$RUNNER_PROBE_READ_DIR` holding a file
/// `input`, `$RUNNER_PROBE_WRITE_DIR`); maps each attempt to `"ok"` or its errno name.
fn probe_filesystem(read_dir: Option<&Path>, write_dir: Option<&Path>) -> serde_json::Value {
    use std::fs::OpenOptions;
    let errno = |r: io::Result<()>| match r {
        Ok(()) => "ok".to_owned(),
        Err(e) => e.raw_os_error().map_or_else(
            || e.to_string(),
            |n| format!("{:?}", nix::errno::Errno::from_raw(n)),
        ),
    };
    let create = |p: &Path| {
        errno(
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(p)
                .map(drop),
        )
    };
    let mut report = serde_json::json!({
        "read_etc_passwd": errno(fs::read("/etc/passwd").map(drop)),
        "list_root": errno(fs::read_dir("/").map(drop)),
        "create_in_tmp": create(&std::env::temp_dir().join(format!("runner-probe-{}", std::process::id()))),
        "read_own_exe": errno(fs::read("/proc/self/exe").map(drop)),
    });
    if let Some(r) = read_dir {
        report["read_in_read_dir"] = errno(fs::read(r.join("input")).map(drop)).into();
        report["create_in_read_dir"] = create(&r.join("new")).into();
        report["list_read_dir"] = errno(fs::read_dir(r).map(drop)).into();
    }
    if let Some(w) = write_dir {
        report["create_in_write_dir"] = create(&w.join("new")).into();
        report["mkdir_in_write_dir"] = errno(fs::create_dir(w.join("sub"))).into();
        report["remove_in_write_dir"] = errno(fs::remove_file(w.join("new"))).into();
        // A file the runner owns (the test puts one there, mode 0644): Landlock allows
        // writing in this directory, so only the worker's own uid can refuse it.
        let foreign = w.join("runner-owned");
        if foreign.exists() {
            report["write_runner_owned_in_write_dir"] =
                errno(OpenOptions::new().append(true).open(&foreign).map(drop)).into();
            report["chmod_runner_owned_in_write_dir"] = errno(fs::set_permissions(
                &foreign,
                fs::Permissions::from_mode(0o666),
            ))
            .into();
        }
    }
    report
}

/// Writes past `RLIMIT_FSIZE` in `$RUNNER_PROBE_WRITE_DIR` as a guest would (one
/// write of two bytes past the `/out` cap `cap`, then one more byte), and reports what
/// landed, the errno of the second write and whether the SIGXFSZ handler recorded a
/// refusal after each. The file is removed again.
fn probe_fsize(path: &Path, cap: u64) -> serde_json::Value {
    use std::io::Write;
    let errno = |e: io::Error| {
        e.raw_os_error().map_or_else(
            || e.to_string(),
            |n| format!("{:?}", nix::errno::Errno::from_raw(n)),
        )
    };
    let stale = take_fsize_refusal();
    let mut file = match fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
    {
        Ok(file) => file,
        Err(e) => return serde_json::json!({ "open": errno(e) }),
    };
    let size = usize::try_from(cap.saturating_add(2)).unwrap_or(usize::MAX);
    let landed = file.write(&vec![0u8; size]).map_err(errno);
    let recorded_after_first = take_fsize_refusal();
    let next = match file.write(b"x") {
        Ok(n) => format!("wrote {n}"),
        Err(e) => errno(e),
    };
    let recorded = take_fsize_refusal();
    drop(file);
    let _ = fs::remove_file(path);
    serde_json::json!({
        "stale": stale,
        "landed": landed.map_or_else(serde_json::Value::from, serde_json::Value::from),
        "recorded_after_first": recorded_after_first,
        "next_write": next,
        "recorded": recorded,
    })
}

/// Tries calls the seccomp filter must deny, and two it must allow, after
/// confinement; maps each to `"ok"` or its errno name. None of them can harm the
/// probe when it succeeds: the namespaces would be the probe's own, and `umount2` and
/// `execve` name paths that do not exist, so without the filter they fail with ENOENT
/// (the filter answers EPERM before any path is looked up).
fn probe_syscalls() -> serde_json::Value {
    use nix::errno::Errno;
    let show = |r: Result<(), Errno>| match r {
        Ok(()) => "ok".to_owned(),
        Err(e) => format!("{e:?}"),
    };
    let io = |r: io::Result<()>| match r {
        Ok(()) => "ok".to_owned(),
        Err(e) => e
            .raw_os_error()
            .map_or_else(|| e.to_string(), |n| format!("{:?}", Errno::from_raw(n))),
    };
    let thread = std::thread::Builder::new()
        .spawn(|| ())
        .and_then(|t| t.join().map_err(|_| io::Error::other("thread panicked")));
    let exec = nix::unistd::execv(c"/nonexistent/runner-probe-exec", &[c"runner-probe-exec"]);
    serde_json::json!({
        "unshare_newuser": show(nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWUSER)),
        "unshare_newns": show(nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS)),
        "umount2": show(nix::mount::umount2("/nonexistent/runner-probe", MntFlags::empty())),
        "socket_inet": io(std::net::UdpSocket::bind("127.0.0.1:0").map(drop)),
        "socket_unix": io(std::os::unix::net::UnixDatagram::unbound().map(drop)),
        "thread_spawn": io(thread),
        "execve": show(exec.map(drop)),
    })
}
