//! Why a step of a confinement layer did not apply. The text of each is the reason
//! recorded for it (`not applied: LAYER (reason)`, the worker's stderr, the result's
//! Safety Notes, a required layer's refusal), so it names the step and what the kernel
//! said.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

/// Why one step of [`super::confine_worker`] (or [`super::EarlyConfinement::take`]) did
/// not apply.
#[derive(Debug, thiserror::Error)]
pub enum LayerError {
    /// A system call refused: an rlimit, `PR_SET_PDEATHSIG`, the network namespace,
    /// `no_new_privs`.
    #[error(transparent)]
    Errno(#[from] nix::errno::Errno),
    /// What `/proc/self/status` says after a step (or that it cannot be read).
    #[error(transparent)]
    Status(#[from] StatusError),
    /// Emptying the capability bounding set failed.
    #[error("{0}")]
    ClearBoundingSet(#[source] caps::errors::CapsError),
    /// Emptying one of the other capability sets failed.
    #[error("{set:?}: {source}")]
    ClearCapabilities {
        set: caps::CapSet,
        #[source]
        source: caps::errors::CapsError,
    },
    #[error(transparent)]
    OwnUid(#[from] OwnUidError),
    #[error(transparent)]
    Landlock(#[from] LandlockError),
    #[error(transparent)]
    Seccomp(#[from] SeccompError),
}

/// What `/proc/self/status` says against a step: the one read that checks the
/// capability masks also says whether the process is still single-threaded, which
/// both the capability layers and Landlock need, hence `Clone`.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StatusError {
    #[error("cannot read /proc/self/status: {0}")]
    Read(#[source] Arc<io::Error>),
    /// Capabilities (and Landlock) are per thread: another thread would stay behind.
    #[error(
        "the process has {} threads; capabilities are per thread, so they must be \
         dropped before any other thread starts",
        threads.map_or_else(|| "an unknown number of".to_owned(), |n| n.to_string())
    )]
    Threads { threads: Option<usize> },
    #[error("/proc/self/status has no {0}")]
    NoField(&'static str),
    /// A capability mask is not zero after it was emptied.
    #[error("{field} is still {value} after the drop")]
    StillSet { field: &'static str, value: String },
}

/// Why the worker keeps the runner's uid ([`super::Layer::OwnUid`]).
#[derive(Debug, thiserror::Error)]
pub enum OwnUidError {
    #[error(
        "the runner is not root, so the worker keeps the runner's uid (files the runner \
         owns stay writable to it but for Landlock)"
    )]
    NotRoot,
    #[error("no run directory to give to the worker's own uid")]
    NoRunDirectory,
    /// A directory above the run directory could not be inspected.
    #[error("{}: {source}", path.display())]
    Inspect {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A directory above the run directory does not let other users through.
    #[error(
        "the run directory {} lies under {} (mode {:o}), which other users cannot \
         traverse: set TMPDIR to a directory they can",
        root.display(),
        ancestor.display(),
        mode & 0o7777
    )]
    NotTraversable {
        root: PathBuf,
        ancestor: PathBuf,
        mode: u32,
    },
    /// A run directory could not be given to the worker's id.
    #[error("give {} to {id}: {source}", path.display())]
    Give {
        path: PathBuf,
        id: u32,
        #[source]
        source: nix::errno::Errno,
    },
    #[error("setgroups([]): {0}")]
    SetGroups(#[source] nix::errno::Errno),
    #[error("setresgid({id}): {source}")]
    SetResGid {
        id: u32,
        #[source]
        source: nix::errno::Errno,
    },
    #[error("setresuid({id}): {source}")]
    SetResUid {
        id: u32,
        #[source]
        source: nix::errno::Errno,
    },
}

/// Why [`super::Layer::Landlock`] did not apply.
#[derive(Debug, thiserror::Error)]
pub enum LandlockError {
    /// Building or enforcing the ruleset failed.
    #[error("{0}")]
    Ruleset(#[source] landlock::RulesetError),
    /// A directory the worker keeps could not be opened for its rule.
    #[error("{}: {source}", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: landlock::PathFdError,
    },
    #[error("the kernel does not enforce Landlock (not built in, or not in the boot's lsm= list)")]
    NotEnforced,
}

/// Why [`super::Layer::Seccomp`] did not apply.
#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    /// No filter is written for this architecture.
    #[error("no seccomp filter for architecture {0}")]
    Architecture(&'static str),
    /// A condition or rule of the filter was refused.
    #[error("{0}")]
    Rule(#[source] seccompiler::BackendError),
    #[error("cannot compile the seccomp filter: {0}")]
    Compile(#[source] seccompiler::BackendError),
    #[error("cannot install the seccomp filter: {0}")]
    Install(#[source] seccompiler::Error),
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::errno::Errno;

    /// Each reason reads as the text it replaced, byte for byte: the confinement report,
    /// the worker's stderr and the result's Safety Notes show it.
    #[test]
    fn reasons_are_the_texts_they_replaced() {
        let io = || io::Error::from_raw_os_error(13);
        let cases: Vec<(LayerError, String)> = vec![
            (Errno::EPERM.into(), "EPERM: Operation not permitted".into()),
            (
                StatusError::Read(Arc::new(io())).into(),
                format!("cannot read /proc/self/status: {}", io()),
            ),
            (
                StatusError::Threads { threads: Some(3) }.into(),
                "the process has 3 threads; capabilities are per thread, so they must be \
                 dropped before any other thread starts"
                    .into(),
            ),
            (
                StatusError::Threads { threads: None }.into(),
                "the process has an unknown number of threads; capabilities are per thread, \
                 so they must be dropped before any other thread starts"
                    .into(),
            ),
            (
                StatusError::NoField("CapBnd").into(),
                "/proc/self/status has no CapBnd".into(),
            ),
            (
                StatusError::StillSet {
                    field: "CapEff",
                    value: "0000000000000400".into(),
                }
                .into(),
                "CapEff is still 0000000000000400 after the drop".into(),
            ),
            (
                OwnUidError::NotRoot.into(),
                "the runner is not root, so the worker keeps the runner's uid (files the \
                 runner owns stay writable to it but for Landlock)"
                    .into(),
            ),
            (
                OwnUidError::NoRunDirectory.into(),
                "no run directory to give to the worker's own uid".into(),
            ),
            (
                OwnUidError::Inspect {
                    path: "/tmp/a".into(),
                    source: io(),
                }
                .into(),
                format!("/tmp/a: {}", io()),
            ),
            (
                OwnUidError::NotTraversable {
                    root: "/root/t/run".into(),
                    ancestor: "/root".into(),
                    mode: 0o40700,
                }
                .into(),
                "the run directory /root/t/run lies under /root (mode 700), which other users \
                 cannot traverse: set TMPDIR to a directory they can"
                    .into(),
            ),
            (
                OwnUidError::Give {
                    path: "/r/out".into(),
                    id: 7,
                    source: Errno::EPERM,
                }
                .into(),
                "give /r/out to 7: EPERM: Operation not permitted".into(),
            ),
            (
                OwnUidError::SetGroups(Errno::EPERM).into(),
                "setgroups([]): EPERM: Operation not permitted".into(),
            ),
            (
                OwnUidError::SetResGid {
                    id: 7,
                    source: Errno::EPERM,
                }
                .into(),
                "setresgid(7): EPERM: Operation not permitted".into(),
            ),
            (
                OwnUidError::SetResUid {
                    id: 7,
                    source: Errno::EPERM,
                }
                .into(),
                "setresuid(7): EPERM: Operation not permitted".into(),
            ),
            (
                LandlockError::NotEnforced.into(),
                "the kernel does not enforce Landlock (not built in, or not in the boot's \
                 lsm= list)"
                    .into(),
            ),
            (
                SeccompError::Architecture("s390x").into(),
                "no seccomp filter for architecture s390x".into(),
            ),
        ];
        for (error, text) in cases {
            assert_eq!(error.to_string(), text, "{error:?}");
        }
    }
}
