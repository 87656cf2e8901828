//! The Landlock layer: the directories a confined worker may still reach by path, and
//! the ruleset that denies the rest.

use super::LandlockError;
use std::path::{Path, PathBuf};

/// The host directories a confined worker may still reach by path: read-only (`/in`,
/// a guest's asset directories) and read-write (`/out`, where the worker writes the
/// captures). Everything else on the host is out of reach once [`Layer::Landlock`](super::Layer::Landlock)
/// applies: an escaped guest could not read the runner's keys or write a crontab.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FsAccess {
    pub read: Vec<PathBuf>,
    pub write: Vec<PathBuf>,
    /// The run's own directory, parent of its `/in`, `/out` and capture directory,
    /// which [`Layer::OwnUid`](super::Layer::OwnUid) opens to the worker's own uid; `None`: that layer does
    /// not apply.
    pub run_root: Option<PathBuf>,
}

impl FsAccess {
    /// What a run of `spec` needs: its `/in`, the program's own host directories
    /// (`host_reads`: a guest's asset directories), its `/out` and its capture directory.
    pub fn for_spec<'a, P>(
        spec: &crate::SandboxSpec<P>,
        host_reads: impl IntoIterator<Item = &'a Path>,
    ) -> Self {
        let mut read = vec![spec.in_dir.clone()];
        read.extend(host_reads.into_iter().map(Path::to_owned));
        let run_root = spec.out_dir.parent().filter(|root| {
            spec.in_dir.parent() == Some(*root) && spec.capture_dir.parent() == Some(*root)
        });
        Self {
            read,
            write: vec![spec.out_dir.clone(), spec.capture_dir.clone()],
            run_root: run_root.map(Path::to_owned),
        }
    }
}

/// Applies the Landlock layer: every filesystem right is handled (denied unless a rule
/// grants it), `fs.read` gets the read rights and `fs.write` all of them; TCP bind and
/// connect are handled with no port allowed; signals and abstract Unix sockets are
/// scoped to the worker's own domain. Best effort over the kernel's ABI: `Ok` names
/// the ABI the kernel enforced (`landlock(abi=7)`), a kernel that enforces nothing is
/// `Err`. A directory that cannot be opened is `Err` (a rule silently missing would
/// only make the run fail later, less clearly).
pub(super) fn landlock_ruleset(fs: &FsAccess) -> Result<landlock::RulesetCreated, LandlockError> {
    use landlock::{
        ABI, Access, AccessFs, AccessNet, PathBeneath, PathFd, Ruleset, RulesetAttr,
        RulesetCreatedAttr, Scope,
    };
    let abi = ABI::V9;
    let all = AccessFs::from_all(abi);
    let err = LandlockError::Ruleset;
    let mut ruleset = Ruleset::default()
        .handle_access(all)
        .map_err(err)?
        .handle_access(AccessNet::from_all(abi))
        .map_err(err)?
        .scope(Scope::from_all(abi))
        .map_err(err)?
        .create()
        .map_err(err)?;
    for (dirs, rights) in [(&fs.read, AccessFs::from_read(abi)), (&fs.write, all)] {
        for dir in dirs {
            let fd = PathFd::new(dir).map_err(|source| LandlockError::Open {
                path: dir.clone(),
                source,
            })?;
            ruleset = ruleset
                .add_rule(PathBeneath::new(fd, rights))
                .map_err(err)?;
        }
    }
    Ok(ruleset)
}

/// Enforces a ruleset of [`landlock_ruleset`] on the calling process. `Ok` names the ABI
/// the kernel enforced (`landlock(abi=7)`); a kernel that enforces nothing is `Err`.
pub(super) fn enforce_landlock(ruleset: landlock::RulesetCreated) -> Result<String, LandlockError> {
    use landlock::RulesetStatus;
    let status = ruleset.restrict_self().map_err(LandlockError::Ruleset)?;
    let kernel = kernel_landlock_abi();
    match status.ruleset {
        RulesetStatus::FullyEnforced => Ok(format!("landlock(abi={kernel})")),
        RulesetStatus::PartiallyEnforced => Ok(format!("landlock(abi={kernel}, partial)")),
        RulesetStatus::NotEnforced => Err(LandlockError::NotEnforced),
    }
}

/// The Landlock ABI version the running kernel reports (0: none).
#[allow(unsafe_code)]
fn kernel_landlock_abi() -> i64 {
    use nix::libc;
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_long = 1;
    // SAFETY: with a null attribute pointer and size 0, this flag only asks for the
    // version; no memory is read or written.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    v.max(0)
}
