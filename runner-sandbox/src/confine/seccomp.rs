//! The seccomp layer: the syscall deny-list and the filters that enforce it.

use super::SeccompError;

/// Syscalls the worker never needs once confined and that a guest escaping into it
/// could abuse: debugging and reading other processes, mounting and namespaces (the
/// way back out of the confinement), kernel attack surface (BPF, perf, io_uring,
/// userfaultfd, keyrings, file handles), system administration, and starting any
/// other program. Each fails with EPERM. Measured with strace: after confinement
/// both workers use only memory, futex, file, epoll, rlimit and thread calls.
pub const DENIED_SYSCALLS: &[(&str, i64)] = {
    use nix::libc::*;
    &[
        ("ptrace", SYS_ptrace),
        ("process_vm_readv", SYS_process_vm_readv),
        ("process_vm_writev", SYS_process_vm_writev),
        ("pidfd_getfd", SYS_pidfd_getfd),
        ("mount", SYS_mount),
        ("umount2", SYS_umount2),
        ("pivot_root", SYS_pivot_root),
        ("chroot", SYS_chroot),
        ("fsopen", SYS_fsopen),
        ("fsconfig", SYS_fsconfig),
        ("fsmount", SYS_fsmount),
        ("fspick", SYS_fspick),
        ("move_mount", SYS_move_mount),
        ("open_tree", SYS_open_tree),
        ("mount_setattr", SYS_mount_setattr),
        ("unshare", SYS_unshare),
        ("setns", SYS_setns),
        ("bpf", SYS_bpf),
        ("perf_event_open", SYS_perf_event_open),
        ("userfaultfd", SYS_userfaultfd),
        ("keyctl", SYS_keyctl),
        ("add_key", SYS_add_key),
        ("request_key", SYS_request_key),
        ("kexec_load", SYS_kexec_load),
        ("kexec_file_load", SYS_kexec_file_load),
        ("init_module", SYS_init_module),
        ("finit_module", SYS_finit_module),
        ("delete_module", SYS_delete_module),
        ("reboot", SYS_reboot),
        ("swapon", SYS_swapon),
        ("swapoff", SYS_swapoff),
        ("acct", SYS_acct),
        ("quotactl", SYS_quotactl),
        ("syslog", SYS_syslog),
        ("io_uring_setup", SYS_io_uring_setup),
        ("io_uring_enter", SYS_io_uring_enter),
        ("io_uring_register", SYS_io_uring_register),
        ("open_by_handle_at", SYS_open_by_handle_at),
        ("name_to_handle_at", SYS_name_to_handle_at),
        ("settimeofday", SYS_settimeofday),
        ("clock_settime", SYS_clock_settime),
        ("clock_adjtime", SYS_clock_adjtime),
        ("adjtimex", SYS_adjtimex),
        ("execve", SYS_execve),
        ("execveat", SYS_execveat),
        #[cfg(target_arch = "x86_64")]
        ("iopl", SYS_iopl),
        #[cfg(target_arch = "x86_64")]
        ("ioperm", SYS_ioperm),
    ]
};

/// `clone` flags that create namespaces: denied like `unshare`.
const NAMESPACE_CLONE_FLAGS: [nix::libc::c_int; 7] = [
    nix::libc::CLONE_NEWNS,
    nix::libc::CLONE_NEWUSER,
    nix::libc::CLONE_NEWNET,
    nix::libc::CLONE_NEWPID,
    nix::libc::CLONE_NEWIPC,
    nix::libc::CLONE_NEWUTS,
    nix::libc::CLONE_NEWCGROUP,
];

/// Compile the worker's seccomp filters ([`install_seccomp`] installs them). Two
/// filters:
/// - EPERM for [`DENIED_SYSCALLS`], for `socket` of any family but `AF_UNIX` (the
///   worker's runtime uses a Unix socket pair; nothing needs IP, netlink or packet
///   sockets), and for `clone` with any namespace flag;
/// - ENOSYS for `clone3`, whose flags live in memory a filter cannot read: glibc then
///   falls back to `clone`, which the first filter can judge (as Docker's profile does).
///
/// Architectures other than x86_64, aarch64 and riscv64 fail here (named), so the
/// layer is reported as not applied rather than assumed.
pub(super) fn compile_seccomp() -> Result<[seccompiler::BpfProgram; 2], SeccompError> {
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|_| SeccompError::Architecture(std::env::consts::ARCH))?;
    let cond = |arg: u8, op: SeccompCmpOp, value: u64| {
        SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).map_err(SeccompError::Rule)
    };
    let rule = |c: SeccompCondition| SeccompRule::new(vec![c]).map_err(SeccompError::Rule);

    let mut deny: std::collections::BTreeMap<i64, Vec<SeccompRule>> = DENIED_SYSCALLS
        .iter()
        .map(|&(_, nr)| (nr, Vec::new()))
        .collect();
    let unix = nix::libc::AF_UNIX as u64;
    deny.insert(
        nix::libc::SYS_socket,
        vec![rule(cond(0, SeccompCmpOp::Ne, unix)?)?],
    );
    let mut clone_rules = Vec::new();
    for flag in NAMESPACE_CLONE_FLAGS {
        let flag = flag as u64;
        clone_rules.push(rule(cond(0, SeccompCmpOp::MaskedEq(flag), flag)?)?);
    }
    deny.insert(nix::libc::SYS_clone, clone_rules);
    let eperm = SeccompAction::Errno(nix::libc::EPERM as u32);
    let enosys = SeccompAction::Errno(nix::libc::ENOSYS as u32);

    let compile = |rules, action| -> Result<BpfProgram, SeccompError> {
        SeccompFilter::new(rules, SeccompAction::Allow, action, arch)
            .and_then(BpfProgram::try_from)
            .map_err(SeccompError::Compile)
    };
    let denied = compile(deny, eperm)?;
    let clone3 = compile(
        [(nix::libc::SYS_clone3, Vec::new())].into_iter().collect(),
        enosys,
    )?;
    Ok([denied, clone3])
}

/// Install the filters of [`compile_seccomp`] on every thread; returns how many
/// syscalls are denied outright.
pub(super) fn install_seccomp(
    filters: &[seccompiler::BpfProgram; 2],
) -> Result<usize, SeccompError> {
    for filter in filters {
        seccompiler::apply_filter_all_threads(filter).map_err(SeccompError::Install)?;
    }
    Ok(DENIED_SYSCALLS.len())
}
