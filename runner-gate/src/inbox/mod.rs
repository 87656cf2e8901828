//! The gate: judge every document in an inbox and move it to the accepted directory or
//! to quarantine (with its reason report), so that a crash at any moment loses nothing
//! and duplicates nothing, and running the gate again is always safe.
//!
//! * **What is a document.** Every entry at the top of the inbox, except names starting
//!   with `.` (uploads in progress: write under a dot-name and rename into place) and
//!   a result's companions. Everything `runner exec` writes for one run is one set and
//!   is never split: the directory `X/`, the replay lock `X.lock.json`, the in-toto
//!   statement `X.intoto.json` and its DSSE envelope `X.intoto.dsse.json` beside `X.md`
//!   travel with `X.md`, to `accepted` or to quarantine with it (`runner verify` needs
//!   all of them beside the result); so does a request's signature `X.md.sig`. A companion with no `X.md` beside it is a document
//!   of its own and is judged like any other file (an orphan lock, statement or
//!   envelope is quarantined as `kind.unknown`); a directory with no `X.md` beside it
//!   stays where it is. Symlinks, FIFOs and devices are never followed or read: they
//!   are quarantined as they are (`io.not_regular`).
//! * **Verdict.** The one validator ([`super::judge_file`]), read strictly: a note (no
//!   catalog, no artifact directory) keeps a document out of `accepted`. A request's
//!   approval is checked as `runner exec` checks it (its `.md.sig`, separation of
//!   duties), so a request that could not run never lands in `accepted`.
//!   A result's verdict covers its document and its artifacts (re-hashed from `X/`).
//!   The lock, statement and envelope are moved, not judged: a tampered one travels
//!   wherever its result goes, and `runner verify` is the check that re-derives them
//!   (and the signature, given the key).
//! * **Order of effects.** For a REJECT the reason report (`NAME.reasons.md` and
//!   `NAME.reasons.json`) is written into quarantine first; a report without its document
//!   is harmless and is overwritten when the document's turn comes again. Then the
//!   companions move (directory first), then the document; each move is one atomic
//!   rename that never replaces ([`super::moves`]). A document's arrival is the last
//!   step: readers of `accepted` may treat `X.md` as complete.
//! * **Durability.** Reports (and intents) are fsynced, file and directory, before the
//!   move they precede; a move is a rename, atomic on its own; the three directories are
//!   fsynced once at the end of the run, before the summary says what moved.
//! * **Intents.** Before a move with companions, and before any copy across
//!   filesystems, the gate records an intent in the *destination* directory
//!   (`.gate-intent-NAME.json`, where inbox writers cannot forge one). At start-up every
//!   intent for this inbox is finished or rolled back: a document that arrived keeps its
//!   companions and loses any source copy left behind; one that did not arrive gets its
//!   companions back in the inbox and is judged again.
//! * **Names.** A destination name is the inbox name made safe (ASCII letters, digits
//!   and `._+@=,-`; anything else becomes `_`; never ending in a report suffix); when it
//!   is taken, `name-2.md`, `name-3.md`, … A rename never overwrites.
//! * **One gate at a time.** The inbox, accepted and quarantine directories are locked
//!   (`flock`) for the whole run.

mod filer;
mod names;
mod scan;
mod sort;
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;

pub use filer::{Filer, recover_intents, remove_temporaries};
pub use names::{safe_name, shown};
use runner_contract::verdict::Verdict;
use scan::Gate;
pub use scan::{hard_link_message, hard_links};

use super::Context;
use cap_std::fs::Dir;
use runner_core::policy::Policy;
use runner_core::request::Reason;
use serde::Serialize;
use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Prefix of intent records.
pub const INTENT_PREFIX: &str = ".gate-intent-";
/// The value of `intent` in an intent record.
pub const INTENT_TYPE: &str = "runner.gate-intent/v1";
/// Suffix of a replay lock travelling with its result.
pub const LOCK_SUFFIX: &str = ".lock.json";
/// Suffix of the run's in-toto statement travelling with its result.
pub const STATEMENT_SUFFIX: &str = ".intoto.json";
/// Suffix of the statement's DSSE envelope (`runner exec --sign-key`) travelling with
/// its result.
pub const ENVELOPE_SUFFIX: &str = ".intoto.dsse.json";
/// Every file `runner exec` writes beside `X.md` as `X` + suffix (the names of
/// [`runner_core::lock::lock_file_name`], [`runner_core::lock::statement::statement_file_name`] and
/// [`runner_core::lock::statement::envelope_file_name`]; a test keeps them equal). Leaving
/// one behind splits the set and `runner verify` then rejects the result, so each moves
/// with it, in this order, before the document. No suffix ends another, so a file is
/// the companion of at most one result.
/// A request's detached approval signature, `X.md.sig` beside `X.md`: it travels with its
/// request, so the request stays verifiable wherever the gate files it.
pub const SIGNATURE_SUFFIX: &str = ".md.sig";

pub const COMPANION_SUFFIXES: [&str; 4] = [
    LOCK_SUFFIX,
    STATEMENT_SUFFIX,
    ENVELOPE_SUFFIX,
    SIGNATURE_SUFFIX,
];

/// A failure that stops the gate before it sorts anything.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error("{what} {path}: {source}")]
    Dir {
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error("{path} is locked by another gate; run one gate per inbox at a time")]
    Busy { path: PathBuf },
    #[error("{a} and {b} are the same directory")]
    SameDir { a: PathBuf, b: PathBuf },
}

/// What happened to one inbox entry.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Entry {
    /// The name in the inbox (escaped when not plain).
    pub source: String,
    pub kind: &'static str,
    /// `ACCEPT`, `REJECT`, or absent when the entry was skipped or could not be moved.
    pub verdict: Option<Verdict>,
    /// Where it went, relative to the destination root: `accepted/NAME` or
    /// `quarantine/NAME`.
    pub dest: Option<String>,
    /// Companions moved with it (destination names).
    pub companions: Vec<String>,
    /// Reason codes (REJECT only).
    pub codes: Vec<String>,
    /// Why the entry stayed in the inbox, when it did.
    pub skipped: Option<String>,
    /// The error that kept it in the inbox, when one did.
    pub error: Option<String>,
}

/// The gate's summary (printed by `runner gate --json`).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Summary {
    pub inbox: String,
    pub accepted_dir: String,
    pub quarantine_dir: String,
    /// Documents judged.
    pub documents: usize,
    pub accepted: usize,
    pub quarantined: usize,
    /// Entries left in the inbox on purpose (hidden names, directories without a result).
    pub skipped: usize,
    /// Documents that could not be moved (they stay in the inbox).
    pub failed: usize,
    /// Interrupted moves of an earlier run, finished or rolled back.
    pub recovered: usize,
    pub seconds: f64,
    /// Documents per second.
    pub files_per_sec: f64,
    pub entries: Vec<Entry>,
}

/// The directories of one run.
pub struct Dirs {
    pub inbox: PathBuf,
    pub accepted: PathBuf,
    pub quarantine: PathBuf,
}

/// Maps an I/O error on `path` to [`GateError::Dir`], naming what the path is.
/// What the gate checks beside a document's own validator with the runner's machinery
/// (signatures, locks), which lives above this crate: `runner::gate` implements it.
pub trait Companions: Sync {
    /// Why a request that passed its validator is still refused: its approval (its
    /// `.md.sig` verified and separation of duties, as `runner exec` judges it); empty
    /// when it is approved.
    fn request_reasons(&self, path: &Path, bytes: &[u8], policy: &Policy) -> Vec<Reason>;
    /// Why a result's set is not whole and consistent (its replay lock, statement and
    /// envelope beside it); empty when it is.
    fn result_set_reasons(&self, path: &Path) -> Vec<Reason>;
}

pub(super) fn dir_err(what: &'static str, path: &Path) -> impl FnOnce(io::Error) -> GateError {
    let path = path.to_owned();
    move |source| GateError::Dir { what, path, source }
}

/// Runs the gate over `dirs.inbox`.
///
/// # Ambient authority
/// Reads, moves and creates files under the three directories the operator named.
pub fn run(
    dirs: &Dirs,
    ctx: &Context<'_>,
    companions: &dyn Companions,
) -> Result<Summary, GateError> {
    let start = Instant::now();
    runner_sandbox::host::create_dir_all(&dirs.accepted)
        .map_err(dir_err("accepted directory", &dirs.accepted))?;
    create_private_dir_all(&dirs.quarantine)
        .map_err(dir_err("quarantine directory", &dirs.quarantine))?;
    let inbox = HeldDir::open(&dirs.inbox).map_err(dir_err("inbox", &dirs.inbox))?;
    let accepted =
        HeldDir::open(&dirs.accepted).map_err(dir_err("accepted directory", &dirs.accepted))?;
    let quarantine = HeldDir::open(&dirs.quarantine)
        .map_err(dir_err("quarantine directory", &dirs.quarantine))?;
    for (a, b) in [
        (&inbox, &accepted),
        (&inbox, &quarantine),
        (&accepted, &quarantine),
    ] {
        if a.path == b.path {
            return Err(GateError::SameDir {
                a: a.path.clone(),
                b: b.path.clone(),
            });
        }
    }
    let _locks = [&inbox, &accepted, &quarantine]
        .into_iter()
        .map(lock_dir)
        .collect::<Result<Vec<_>, _>>()?;

    let mut gate = Gate {
        inbox,
        accepted,
        quarantine,
        ctx,
        companions,
        summary: Summary {
            inbox: dirs.inbox.display().to_string(),
            accepted_dir: dirs.accepted.display().to_string(),
            quarantine_dir: dirs.quarantine.display().to_string(),
            documents: 0,
            accepted: 0,
            quarantined: 0,
            skipped: 0,
            failed: 0,
            recovered: 0,
            seconds: 0.0,
            files_per_sec: 0.0,
            entries: Vec::new(),
        },
    };
    gate.recover()?;
    let (documents, skipped) = gate.scan().map_err(dir_err("inbox", &dirs.inbox))?;
    for (name, why) in skipped {
        gate.summary.skipped += 1;
        gate.summary.entries.push(Entry {
            source: shown(&name),
            kind: "unknown",
            verdict: None,
            dest: None,
            companions: Vec::new(),
            codes: Vec::new(),
            skipped: Some(why),
            error: None,
        });
    }
    for batch in documents.chunks(BATCH) {
        for entry in gate.sort_batch(batch) {
            gate.summary.documents += 1;
            match (&entry.verdict, &entry.error) {
                (_, Some(_)) => gate.summary.failed += 1,
                (Some(Verdict::Accept), None) => gate.summary.accepted += 1,
                (Some(_), None) => gate.summary.quarantined += 1,
                (None, None) => {}
            }
            gate.summary.entries.push(entry);
        }
    }
    // Make every move of the run durable before saying it happened: a directory that
    // cannot be synced fails the run, naming it (the moves may not survive a crash).
    for (what, d) in [
        ("inbox", &gate.inbox),
        ("accepted directory", &gate.accepted),
        ("quarantine directory", &gate.quarantine),
    ] {
        runner_sandbox::durable::sync_dir(&d.dir).map_err(|source| GateError::Dir {
            what,
            path: d.path.clone(),
            source,
        })?;
    }
    let seconds = start.elapsed().as_secs_f64();
    gate.summary.seconds = seconds;
    gate.summary.files_per_sec = if seconds > 0.0 {
        gate.summary.documents as f64 / seconds
    } else {
        0.0
    };
    Ok(gate.summary)
}

fn lock_dir(held: &HeldDir) -> Result<nix::fcntl::Flock<File>, GateError> {
    let file =
        runner_sandbox::durable::open_readable(&held.dir).map_err(|source| GateError::Dir {
            what: "directory",
            path: held.path.clone(),
            source,
        })?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock).map_err(
        |(_, errno)| {
            if errno == nix::errno::Errno::EWOULDBLOCK {
                GateError::Busy {
                    path: held.path.clone(),
                }
            } else {
                GateError::Dir {
                    what: "locking",
                    path: held.path.clone(),
                    source: errno.into(),
                }
            }
        },
    )
}

/// A directory held open (an inbox, a destination, a claim directory), with the
/// canonical path it was opened at: recorded in intents, shown in messages, compared
/// to tell two operator paths are one directory.
#[derive(Debug)]
pub struct HeldDir {
    pub dir: Dir,
    pub path: PathBuf,
}

impl HeldDir {
    /// Opens the directory the operator named at `path`.
    ///
    /// # Ambient authority
    /// Resolves and opens `path` on the host file system.
    pub fn open(path: &Path) -> io::Result<Self> {
        let (dir, path) = runner_sandbox::durable::open_dir_canonical(path)?;
        Ok(Self { dir, path })
    }

    /// The subdirectory `name` (one plain component) of a held directory.
    pub fn open_dir(&self, name: &OsStr) -> io::Result<Self> {
        Ok(Self {
            dir: self.dir.open_dir(name)?,
            path: self.path.join(name),
        })
    }
}

/// Documents judged, named and reported together (one `syncfs` per batch).
const BATCH: usize = 256;

/// Creates `path` (and its missing parents) for files only the operator reads: a
/// directory this creates is 0700; one that exists keeps its mode.
///
/// # Ambient authority
/// Creates directories on the host filesystem ([`runner_sandbox::host`]).
pub fn create_private_dir_all(path: &Path) -> io::Result<()> {
    use cap_std::fs::{DirBuilder, DirBuilderExt};
    if runner_sandbox::host::open_dir(path).is_ok() {
        return Ok(());
    }
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        runner_sandbox::host::create_dir_all(parent)?;
    }
    let (parent, name) = runner_sandbox::host::open_parent(path)?;
    let mut private = DirBuilder::new();
    private.mode(0o700);
    match parent.create_dir_with(&name, &private) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => Err(e),
        _ => Ok(()),
    }
}
