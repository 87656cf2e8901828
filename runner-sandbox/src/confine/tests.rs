use super::mount::thread_count;
use super::*;
use crate::BackendError;
use std::fs;
use std::time::Duration;

fn limits(out_bytes: u64, out_files: u64) -> Limits {
    Limits {
        out_bytes,
        out_files,
        ..PROBE_LIMITS
    }
}

#[test]
fn rlimit_cpu_rounds_up_and_adds_the_slack() {
    assert_eq!(rlimit_cpu_secs(Duration::from_millis(1)), 2);
    assert_eq!(rlimit_cpu_secs(Duration::from_secs(2)), 3);
    assert_eq!(rlimit_cpu_secs(Duration::from_millis(2001)), 4);
    assert_eq!(rlimit_cpu_secs(Duration::ZERO), 2);
}

#[test]
fn private_mount_namespace_refuses_a_threaded_process() {
    // The test harness runs threads: entering would move this thread only.
    assert_eq!(thread_count().map(|n| n > 1), Some(true));
    assert!(!enter_private_mount_namespace().unwrap());
    assert!(!private_mount_namespace_active());
    let dir = tempfile::tempdir().unwrap();
    assert!(
        mount_out_tmpfs(dir.path(), &limits(1 << 20, 4))
            .unwrap()
            .is_none()
    );
}

#[test]
fn tree_usage_counts_and_stops_early() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a"), b"12345").unwrap();
    fs::create_dir(dir.path().join("d")).unwrap();
    fs::write(dir.path().join("d/b"), b"123").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", dir.path().join("l")).unwrap();
    let usage = tree_usage(dir.path(), &limits(1000, 100)).unwrap();
    assert_eq!(usage.entries, 4);
    // The symlink counts its own length, never its target's.
    assert_eq!(usage.bytes, 5 + 3 + "/etc/passwd".len() as u64);
    assert!(!usage.over(&limits(1000, 100)));
    assert!(
        tree_usage(dir.path(), &limits(1000, 2))
            .unwrap()
            .over(&limits(1000, 2))
    );
    assert!(
        tree_usage(dir.path(), &limits(4, 100))
            .unwrap()
            .over(&limits(4, 100))
    );
}

#[test]
fn cut_back_to_cap_trims_what_is_over_and_follows_no_symlink() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    fs::create_dir_all(out.join("d")).unwrap();
    fs::write(out.join("over"), b"0123456789").unwrap();
    fs::write(out.join("at"), b"01234").unwrap();
    fs::write(out.join("d/deep"), b"0123456").unwrap();
    fs::write(outside.path().join("target"), b"0123456789").unwrap();
    std::os::unix::fs::symlink(outside.path().join("target"), out.join("link")).unwrap();
    std::os::unix::fs::symlink(outside.path(), out.join("dirlink")).unwrap();
    assert_eq!(cut_back_to_cap(&out, 5).unwrap(), 2);
    assert_eq!(fs::read(out.join("over")).unwrap(), b"01234");
    assert_eq!(fs::read(out.join("at")).unwrap(), b"01234");
    assert_eq!(fs::read(out.join("d/deep")).unwrap(), b"01234");
    assert_eq!(
        fs::read(outside.path().join("target")).unwrap(),
        b"0123456789"
    );
    assert_eq!(cut_back_to_cap(&out, 5).unwrap(), 0);
}

#[test]
fn sparse_file_counts_at_full_length() {
    let dir = tempfile::tempdir().unwrap();
    let f = fs::File::create(dir.path().join("sparse")).unwrap();
    f.set_len(1 << 30).unwrap();
    assert!(
        tree_usage(dir.path(), &limits(1 << 20, 10))
            .unwrap()
            .over(&limits(1 << 20, 10))
    );
}

#[test]
fn tmpfs_enforces_caps_in_a_thread_namespace() {
    let dir = tempfile::tempdir().unwrap();
    let limits = limits(64 << 10, 3);
    // A plain directory is not a capped mount.
    assert!(!out_caps_enforced(dir.path(), &limits));
    let handle = {
        let path = dir.path().to_path_buf();
        let limits = limits.clone();
        // A dedicated thread: the namespace change stays with it.
        std::thread::spawn(move || {
            let mount = mount_tmpfs_in_thread_namespace(&path, &limits).unwrap()?;
            assert!(out_caps_enforced(&path, &limits));
            // Exactly the caps fit: 3 entries, 64 KiB (empty files take no page).
            fs::write(path.join("f0"), vec![0u8; 64 << 10]).unwrap();
            fs::write(path.join("f1"), b"").unwrap();
            fs::write(path.join("f2"), b"").unwrap();
            assert!(!tmpfs_full(&path));
            assert!(!tree_usage(&path, &limits).unwrap().over(&limits));
            // One entry more still fits (and shows as over); then ENOSPC.
            fs::write(path.join("f3"), b"").unwrap();
            assert!(tree_usage(&path, &limits).unwrap().over(&limits));
            let fourth = fs::write(path.join("f4"), b"x").unwrap_err();
            let big = fs::write(path.join("f0"), vec![0u8; 128 << 10]).unwrap_err();
            assert!(tmpfs_full(&path));
            mount.unmount().unwrap();
            Some((fourth.raw_os_error(), big.raw_os_error()))
        })
    };
    if let Some((fourth, big)) = handle.join().unwrap() {
        assert_eq!(fourth, Some(libc_enospc()));
        assert_eq!(big, Some(libc_enospc()));
    }
    // The mount never existed in this thread's namespace.
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
}

use nix::errno::Errno;

fn libc_enospc() -> i32 {
    nix::errno::Errno::ENOSPC as i32
}

fn failed(layers: Vec<(Layer, LayerError)>) -> WorkerConfinement {
    let mut c = WorkerConfinement::default();
    c.record(Layer::NoNewPrivs, "no_new_privs".into(), Ok(()));
    for (layer, why) in layers {
        c.record(layer, layer.as_str().into(), Err(why));
    }
    c
}

#[test]
fn a_required_layer_that_failed_refuses_naming_it_and_the_reason() {
    let policy = ConfinementPolicy::default();
    let c = failed(vec![(
        Layer::Seccomp,
        SeccompError::Architecture("s390x").into(),
    )]);
    let err = c.check(&policy).unwrap_err();
    assert_eq!(err.layer, Layer::Seccomp);
    let err = err.to_string();
    assert!(err.contains("`seccomp` is required"), "{err}");
    assert!(err.contains("s390x"), "{err}");
    // The same failure of an optional layer lets the run go on, and says so.
    let lenient = ConfinementPolicy {
        seccomp: Requirement::Optional,
        ..policy
    };
    assert!(c.check(&lenient).is_ok());
    assert_eq!(
        c.provenance(),
        vec![
            "no_new_privs".to_owned(),
            "not applied: seccomp (no seccomp filter for architecture s390x)".to_owned()
        ]
    );
}

#[test]
fn default_policy_lets_only_the_root_only_and_kernel_dependent_layers_fail() {
    let policy = ConfinementPolicy::default();
    let c = failed(vec![
        (Layer::NetNamespace, Errno::EPERM.into()),
        (Layer::CapabilityBoundingSet, Errno::EPERM.into()),
        (Layer::Landlock, LandlockError::NotEnforced.into()),
        (Layer::OwnUid, OwnUidError::NotRoot.into()),
    ]);
    assert!(c.check(&policy).is_ok());
    for layer in Layer::ALL {
        let c = failed(vec![(layer, Errno::EPERM.into())]);
        let optional = matches!(
            layer,
            Layer::NetNamespace | Layer::CapabilityBoundingSet | Layer::Landlock | Layer::OwnUid
        );
        assert_eq!(c.check(&policy).is_ok(), optional, "{layer:?}");
    }
}

#[test]
fn a_failed_step_of_a_layer_fails_the_layer_once() {
    let mut c = WorkerConfinement::default();
    c.record(Layer::Rlimits, "rlimit_core=0".into(), Ok(()));
    c.record(
        Layer::Rlimits,
        "rlimit_as=1".into(),
        Err(Errno::EPERM.into()),
    );
    c.record(
        Layer::Rlimits,
        "rlimit_fsize=2".into(),
        Err(Errno::EINVAL.into()),
    );
    assert_eq!(
        c.failed,
        vec![(
            Layer::Rlimits,
            "rlimit_as=1: EPERM: Operation not permitted".to_owned()
        )]
    );
    assert_eq!(c.skipped.len(), 2);
    assert!(c.check(&ConfinementPolicy::default()).is_err());
}

/// The runner's mount errors read as the messages they replaced, under `worker: `.
#[test]
fn mount_errors_keep_their_text() {
    let cases = [
        (
            MountError::Unshare(Errno::EPERM),
            "unshare(CLONE_NEWNS): EPERM: Operation not permitted",
        ),
        (
            MountError::MakePrivate(Errno::EINVAL),
            "mount --make-rprivate /: EINVAL: Invalid argument",
        ),
        (
            MountError::NotEmpty {
                path: "/r/out".into(),
            },
            "/r/out is not empty; refusing to mount over it",
        ),
        (
            MountError::Tmpfs {
                path: "/r/out".into(),
                source: Errno::EPERM,
            },
            "cannot mount tmpfs on /r/out: EPERM: Operation not permitted",
        ),
        (
            MountError::Unmount {
                path: "/r/out".into(),
                source: Errno::EBUSY,
            },
            "cannot unmount /r/out: EBUSY: Device or resource busy",
        ),
    ];
    for (error, text) in cases {
        assert_eq!(
            BackendError::from(error).to_string(),
            format!("worker: {text}")
        );
    }
}

/// The syscall list below is what strace showed on x86_64.
#[cfg(target_arch = "x86_64")]
#[test]
fn the_deny_list_names_each_syscall_once_and_spares_what_the_workers_use() {
    let mut numbers: Vec<i64> = DENIED_SYSCALLS.iter().map(|&(_, n)| n).collect();
    numbers.sort_unstable();
    numbers.dedup();
    assert_eq!(numbers.len(), DENIED_SYSCALLS.len());
    // Seen in strace of both workers after confinement: none may be denied.
    use nix::libc::*;
    for used in [
        SYS_futex,
        SYS_mmap,
        SYS_munmap,
        SYS_mprotect,
        SYS_madvise,
        SYS_openat,
        SYS_openat2,
        SYS_read,
        SYS_write,
        SYS_pread64,
        SYS_pwrite64,
        SYS_close,
        SYS_statx,
        SYS_getdents64,
        SYS_epoll_wait,
        SYS_epoll_ctl,
        SYS_epoll_create1,
        SYS_eventfd2,
        SYS_socketpair,
        SYS_prlimit64,
        SYS_getrusage,
        SYS_prctl,
        SYS_sigaltstack,
        SYS_rt_sigprocmask,
        SYS_rt_sigaction,
        SYS_exit,
        SYS_exit_group,
        SYS_getrandom,
        SYS_readlinkat,
        SYS_fcntl,
        SYS_brk,
        SYS_clone,
        SYS_set_robust_list,
        SYS_rseq,
        SYS_gettid,
        SYS_sched_getaffinity,
    ] {
        assert!(
            !numbers.contains(&used),
            "syscall {used} is used by the workers"
        );
    }
}
