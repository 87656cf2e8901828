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

use super::moves::{
    self, TMP_PREFIX, exists, is_exists, move_noreplace, remove_any, same_tree, write_replace,
    write_replace_unsynced as write_unsynced,
};
use super::{Context, DocKind, Judgement, ReadError, Verdict, report};
use cap_std::fs::Dir;
use runner_core::policy::Policy;
use runner_core::request::Reason;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashSet};
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
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
    pub verdict: Option<&'static str>,
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

/// An intent record: the moves of one document, companions first, the document last.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Intent {
    intent: String,
    /// The inbox, canonical.
    inbox: String,
    /// `[source name, destination name]`, names within the inbox and destination.
    moves: Vec<[String; 2]>,
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

fn dir_err(what: &'static str, path: &Path) -> impl FnOnce(io::Error) -> GateError {
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
                (Some("ACCEPT"), None) => gate.summary.accepted += 1,
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
        moves::sync_dir(&d.dir).map_err(|source| GateError::Dir {
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

struct Gate<'a> {
    inbox: HeldDir,
    accepted: HeldDir,
    quarantine: HeldDir,
    ctx: &'a Context<'a>,
    companions: &'a dyn Companions,
    summary: Summary,
}

/// A document and the names that travel with it.
type Document = (OsString, Vec<OsString>);
/// An entry left in the inbox, and why.
type Skipped = (OsString, String);

impl Gate<'_> {
    fn filer(&self) -> Filer<'_> {
        Filer::new(&self.inbox)
    }

    /// Finishes or rolls back the moves an interrupted run left, and removes its
    /// temporary files. A settled move that cannot be made durable is an error: the
    /// gate does not go on as if it were.
    fn recover(&mut self) -> Result<(), GateError> {
        for dest in [&self.accepted, &self.quarantine] {
            self.summary.recovered += recover_intents(&self.inbox, &dest.dir)
                .map_err(dir_err("recovering moves into", &dest.path))?;
            remove_temporaries(&dest.dir);
        }
        remove_temporaries(&self.inbox.dir);
        Ok(())
    }

    /// The documents of the inbox with their companions, and the entries skipped.
    fn scan(&self) -> io::Result<(Vec<Document>, Vec<Skipped>)> {
        let mut all: Vec<(OsString, bool)> = Vec::new();
        for e in self.inbox.dir.entries()? {
            let e = e?;
            let is_dir = e.file_type().map(|t| t.is_dir()).unwrap_or(false);
            all.push((e.file_name(), is_dir));
        }
        all.sort();
        let files: BTreeSet<&OsStr> = all
            .iter()
            .filter(|(_, d)| !d)
            .map(|(n, _)| n.as_os_str())
            .collect();
        let md_for = |stem: &[u8]| -> OsString {
            let mut v = stem.to_vec();
            v.extend_from_slice(b".md");
            OsString::from(std::ffi::OsStr::from_bytes(&v))
        };
        let mut documents = Vec::new();
        let mut skipped = Vec::new();
        for (name, is_dir) in &all {
            let bytes = name.as_bytes();
            if bytes.starts_with(b".") {
                if !bytes.starts_with(TMP_PREFIX.as_bytes()) {
                    skipped.push((
                        name.clone(),
                        "a hidden name (an upload in progress); rename it into place to submit it"
                            .into(),
                    ));
                }
                continue;
            }
            if *is_dir {
                if !files.contains(md_for(bytes).as_os_str()) {
                    skipped.push((
                        name.clone(),
                        "a directory without a result document NAME.md beside it".into(),
                    ));
                }
                continue;
            }
            // A companion whose result is beside it moves with that result (below); an
            // orphan one falls through and is judged as a document.
            if companion_stem(bytes).is_some_and(|stem| files.contains(md_for(stem).as_os_str())) {
                continue;
            }
            let mut companions = Vec::new();
            if let Some(stem) = bytes.strip_suffix(b".md").filter(|s| !s.is_empty()) {
                let stem = OsStr::from_bytes(stem);
                if all.iter().any(|(n, d)| *d && n == stem) {
                    companions.push(stem.to_owned());
                }
                for suffix in COMPANION_SUFFIXES {
                    let mut companion = stem.as_bytes().to_vec();
                    companion.extend_from_slice(suffix.as_bytes());
                    let companion = OsString::from_vec(companion);
                    if files.contains(companion.as_os_str()) {
                        companions.push(companion);
                    }
                }
            }
            documents.push((name.clone(), companions));
        }
        Ok((documents, skipped))
    }

    /// Judges one inbox entry (never following a symlink), strictly.
    fn judge_one(&self, name: &OsStr) -> (Judgement, Option<String>) {
        let path = self.inbox.path.join(name);
        if let Some(links) = hard_links(&self.inbox.dir, name) {
            return (rejected("io.hard_link", &hard_link_message(links)), None);
        }
        match super::judge_entry(&self.inbox.dir, name, self.ctx) {
            Ok((j, bytes)) => {
                let j = self.completed(j.strict(), &path, &bytes);
                // The text is kept only to quote lines in a reason report.
                let text = (j.verdict == Verdict::Reject)
                    .then(|| String::from_utf8_lossy(&bytes).into_owned());
                (j, text)
            }
            Err(ReadError::NotRegular) => (
                rejected(
                    "io.not_regular",
                    "not a regular file (a symlink, FIFO, socket or device): never followed or read",
                ),
                None,
            ),
            Err(ReadError::Io(e)) => (
                rejected("io.unreadable", &format!("cannot be read: {e}")),
                None,
            ),
        }
    }

    /// What the gate checks beyond the document's own validator, with its companions in
    /// the inbox beside it: a request's approval (its `.md.sig` verified and separation
    /// of duties, as `runner exec` judges it); a result's replay lock, statement and
    /// envelope. Both are the runner's checks ([`Companions`]). Only a document that
    /// passed its validator is checked further.
    fn completed(&self, mut j: Judgement, path: &Path, bytes: &[u8]) -> Judgement {
        if j.verdict != Verdict::Accept {
            return j;
        }
        let extra = match j.kind {
            Some(DocKind::ToolRequest) => {
                self.companions
                    .request_reasons(path, bytes, self.ctx.policy)
            }
            Some(DocKind::ToolResult) => self.companions.result_set_reasons(path),
            _ => Vec::new(),
        };
        if !extra.is_empty() {
            j.reasons.extend(extra);
            j.verdict = Verdict::Reject;
        }
        j
    }

    /// Sorts a batch: judges every document (in parallel), picks every destination
    /// name, writes every reason report, makes them durable with one `syncfs`, then
    /// moves each document with its companions.
    fn sort_batch(&self, batch: &[Document]) -> Vec<Entry> {
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(batch.len().max(1));
        let per = batch.len().div_ceil(threads).max(1);
        let judged: Vec<(Judgement, Option<String>)> = std::thread::scope(|scope| {
            let handles: Vec<_> = batch
                .chunks(per)
                .map(|chunk| {
                    let handle = scope.spawn(move || {
                        chunk
                            .iter()
                            .map(|(name, _)| self.judge_one(name))
                            .collect::<Vec<_>>()
                    });
                    (chunk.len(), handle)
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|(len, h)| {
                    h.join().unwrap_or_else(|_| {
                        let failed = rejected(
                            "internal.panic",
                            "the validator panicked on this document's batch",
                        );
                        vec![(failed, None); len]
                    })
                })
                .collect()
        });

        // Names first (reserved within the batch), then reports, then one flush.
        // Names reserved in each destination (accepted, quarantine) by this batch.
        let mut reserved: [HashSet<String>; 2] = Default::default();
        let mut plans: Vec<Option<Plan>> = Vec::with_capacity(batch.len());
        let mut errors: Vec<Option<String>> = vec![None; batch.len()];
        // Destinations written to (reports, intents), to flush before any move.
        let mut dirty = [false; 2];
        let mut intents: Vec<bool> = vec![false; batch.len()];
        for (i, ((name, companions), (judgement, text))) in batch.iter().zip(&judged).enumerate() {
            let to = Self::dest_index(judgement);
            let dest = &self.dests()[to].dir;
            let reserved = &mut reserved[to];
            let plan = (1..=MAX_TRIES)
                .find_map(|n| self.filer().candidate(name, companions, dest, n, reserved));
            let Some(plan) = plan else {
                errors[i] = Some(format!(
                    "no free name for {} after {MAX_TRIES} tries",
                    shown(name)
                ));
                plans.push(None);
                continue;
            };
            reserved
                .extend(std::iter::once(plan.doc.clone()).chain(plan.companions.iter().cloned()));
            if judgement.verdict == Verdict::Reject {
                if let Err(e) = self.filer().write_reports(
                    dest,
                    &plan.doc,
                    name,
                    judgement,
                    text.as_deref(),
                    false,
                ) {
                    errors[i] = Some(format!("cannot write the reason report: {e}"));
                    plans.push(None);
                    continue;
                }
                dirty[to] = true;
            }
            if !companions.is_empty() {
                let written = self
                    .filer()
                    .intent(name, companions, &plan)
                    .and_then(|(intent_name, bytes)| write_unsynced(dest, &intent_name, &bytes));
                if let Err(e) = written {
                    errors[i] = Some(format!("cannot record the intent: {e}"));
                    plans.push(None);
                    continue;
                }
                intents[i] = true;
                dirty[to] = true;
            }
            plans.push(Some(plan));
        }
        // Every report and intent of the batch durable before any of its moves.
        for (to, dest) in self.dests().into_iter().enumerate() {
            if !dirty[to] {
                continue;
            }
            if let Err(e) = runner_sandbox::durable::syncfs(&dest.dir) {
                for (i, (_, (j, _))) in batch.iter().zip(&judged).enumerate() {
                    if Self::dest_index(j) == to && errors[i].is_none() {
                        errors[i] = Some(format!("cannot flush {}: {e}", dest.path.display()));
                        plans[i] = None;
                    }
                }
            }
        }

        let mut entries = Vec::with_capacity(batch.len());
        for (i, ((name, companions), (judgement, text))) in batch.iter().zip(&judged).enumerate() {
            let to = Self::dest_index(judgement);
            let dest = &self.dests()[to].dir;
            let label = ["accepted", "quarantine"][to];
            let mut entry = Entry {
                source: shown(name),
                kind: judgement.kind_name(),
                verdict: Some(judgement.verdict.as_str()),
                dest: None,
                companions: Vec::new(),
                codes: judgement.reasons.iter().map(|r| r.code.clone()).collect(),
                skipped: None,
                error: errors[i].clone(),
            };
            if let Some(plan) = &plans[i] {
                let moved = match self
                    .filer()
                    .move_all(name, companions, dest, plan, intents[i])
                {
                    Ok(()) => Ok((plan.doc.clone(), plan.companions.clone())),
                    // Someone else took the name since it was picked: the slow path
                    // picks another, writes the report again, and moves.
                    Err(e) if is_exists(&e) => {
                        self.filer()
                            .place(name, companions, dest, judgement, text.as_deref())
                    }
                    Err(e) => Err(e),
                };
                match moved {
                    Ok((doc, moved)) => {
                        entry.dest = Some(format!("{label}/{doc}"));
                        entry.companions =
                            moved.into_iter().map(|c| format!("{label}/{c}")).collect();
                    }
                    Err(e) => entry.error = Some(format!("left in the inbox: {e}")),
                }
            } else if let Some(e) = &entry.error {
                entry.error = Some(format!("left in the inbox: {e}"));
            }
            entries.push(entry);
        }
        entries
    }

    /// The destinations, accepted then quarantine.
    fn dests(&self) -> [&HeldDir; 2] {
        [&self.accepted, &self.quarantine]
    }

    /// Where a judgement sends its document, as an index into [`Gate::dests`].
    fn dest_index(judgement: &Judgement) -> usize {
        match judgement.verdict {
            Verdict::Accept => 0,
            Verdict::Reject => 1,
        }
    }
}

/// Finishes or rolls back every move from `dir` into `dest` that a crash interrupted
/// (see [`Filer::place`]); returns how many it settled. A settled move that cannot be made
/// durable (its record removed, both directories synced) is an error: the caller must
/// not go on as if it were.
pub fn recover_intents(dir: &HeldDir, dest: &Dir) -> io::Result<usize> {
    let Ok(entries) = dest.entries() else {
        return Ok(0);
    };
    let mut names: Vec<OsString> = entries.flatten().map(|e| e.file_name()).collect();
    names.sort();
    let filer = Filer::new(dir);
    let mut settled = 0;
    for name in names
        .iter()
        .filter(|n| n.as_bytes().starts_with(INTENT_PREFIX.as_bytes()))
    {
        if filer.recover_intent(dest, name)? {
            settled += 1;
        }
    }
    Ok(settled)
}

/// Removes the temporary copies (`.gate-tmp-…`) an interrupted move left in `dir`.
pub fn remove_temporaries(dir: &Dir) {
    if let Ok(entries) = dir.entries() {
        for e in entries.flatten() {
            let name = e.file_name();
            if name.as_bytes().starts_with(TMP_PREFIX.as_bytes()) {
                let _ = remove_any(dir, &name);
            }
        }
    }
}

/// Files documents of one directory (the inbox, or a `runner serve` claim directory)
/// into a destination: free names, reason reports, intents, moves that never replace.
/// The gate's own sorting and `runner serve` both go through it.
pub struct Filer<'a> {
    inbox: &'a HeldDir,
}

impl<'a> Filer<'a> {
    /// Files documents of `dir`.
    pub fn new(dir: &'a HeldDir) -> Self {
        Self { inbox: dir }
    }

    /// Returns true when the intent was ours and was settled (durably).
    fn recover_intent(&self, dest: &Dir, name: &OsStr) -> io::Result<bool> {
        let Some(intent) = dest
            .read(name)
            .ok()
            .and_then(|b| serde_json::from_slice::<Intent>(&b).ok())
        else {
            // Unreadable or torn (the record is written atomically, so this is not ours).
            return Ok(false);
        };
        if intent.intent != INTENT_TYPE
            || Path::new(&intent.inbox) != self.inbox.path
            || intent.moves.is_empty()
            || !intent.moves.iter().flatten().all(|n| is_plain_name(n))
        {
            return Ok(false);
        }
        let inbox = &self.inbox.dir;
        let moves: Vec<(&OsStr, &OsStr)> = intent
            .moves
            .iter()
            .map(|[s, d]| (OsStr::new(s), OsStr::new(d)))
            .collect();
        let Some(&(doc_src, doc_dst)) = moves.last() else {
            return Ok(false);
        };
        if exists(dest, doc_dst) {
            // The document arrived: its companions belong with it; drop source copies
            // a cross-filesystem move did not get to remove.
            for &(src, dst) in &moves {
                if exists(inbox, src) && exists(dest, dst) {
                    if same_tree(inbox, src, dest, dst).unwrap_or(false) {
                        let _ = remove_any(inbox, src);
                    }
                } else if exists(inbox, src) && src != doc_src {
                    let _ = move_noreplace(inbox, src, dest, dst, &mut || Ok(()));
                }
            }
        } else {
            // It did not: bring the companions back and judge it again.
            for &(src, dst) in moves.iter().rev() {
                if !exists(dest, dst) {
                    continue;
                }
                if exists(inbox, src) {
                    if same_tree(inbox, src, dest, dst).unwrap_or(false) {
                        let _ = remove_any(dest, dst);
                    }
                } else {
                    let _ = move_noreplace(dest, dst, inbox, src, &mut || Ok(()));
                }
            }
        }
        dest.remove_file(name)?;
        moves::sync_dir(dest)?;
        moves::sync_dir(inbox)?;
        Ok(true)
    }

    /// The names of attempt `n` (`X.md`, then `X-2.md`, …) when none is taken on disk
    /// or reserved by this batch.
    fn candidate(
        &self,
        name: &OsStr,
        companions: &[OsString],
        dest: &Dir,
        n: usize,
        reserved: &HashSet<String>,
    ) -> Option<Plan> {
        let (stem, ext) = safe_name(name);
        // Companions share the `X` of `X.md`: `X/`, `X.lock.json`, `X.intoto.json`,
        // `X.intoto.dsse.json`; each keeps its suffix under the destination's `X`.
        let doc_stem_len = name.as_bytes().len().saturating_sub(3);
        let dest_stem = if n == 1 { stem } else { format!("{stem}-{n}") };
        let doc = format!("{dest_stem}{ext}");
        let companion_dests: Vec<String> = companions
            .iter()
            .map(|c| {
                let bytes = c.as_bytes();
                let suffix =
                    String::from_utf8_lossy(&bytes[doc_stem_len.min(bytes.len())..]).into_owned();
                format!("{dest_stem}{suffix}")
            })
            .collect();
        let taken = std::iter::once(&doc)
            .chain(&companion_dests)
            .any(|d| reserved.contains(d) || exists(dest, OsStr::new(d)));
        (!taken).then_some(Plan {
            doc,
            companions: companion_dests,
        })
    }

    /// Writes `NAME.reasons.md` and `NAME.reasons.json` into `dest`; with `sync`, makes
    /// them durable (file and directory) before returning.
    fn write_reports(
        &self,
        dest: &Dir,
        doc: &str,
        name: &OsStr,
        judgement: &Judgement,
        text: Option<&str>,
        sync: bool,
    ) -> io::Result<()> {
        let (md, js) = report::names(doc);
        let judged = runner_core::result::utc_timestamp(time::OffsetDateTime::now_utc());
        let source = shown(name);
        let md_text = report::markdown(doc, &source, judgement, &judged, text);
        let js_text = report::json(doc, &source, judgement, &judged);
        if sync {
            write_replace(dest, &md, md_text.as_bytes())?;
            write_replace(dest, &js, js_text.as_bytes())
        } else {
            write_unsynced(dest, &md, md_text.as_bytes())?;
            write_unsynced(dest, &js, js_text.as_bytes())
        }
    }

    /// Files the document `name` (with its `companions`, names in the filer's directory)
    /// into `dest` the way the gate files one: a free name (`X.md`, `X-2.md`, …), for a
    /// REJECT the reason report written and made durable first, the companions then the
    /// document, each move atomic and never replacing (an intent in `dest` covers a move
    /// with companions; [`recover_intents`] settles one a crash interrupted). Returns the
    /// names in `dest` of the document and of its companions; the caller fsyncs both
    /// directories when it needs the move durable. The gate's slow path, one document at
    /// a time: a name taken meanwhile means the next name.
    pub fn place(
        &self,
        name: &OsStr,
        companions: &[OsString],
        dest: &Dir,
        judgement: &Judgement,
        text: Option<&str>,
    ) -> io::Result<(String, Vec<String>)> {
        let none = HashSet::new();
        for n in 1..=MAX_TRIES {
            let Some(plan) = self.candidate(name, companions, dest, n, &none) else {
                continue;
            };
            if judgement.verdict == Verdict::Reject {
                self.write_reports(dest, &plan.doc, name, judgement, text, true)?;
            }
            match self.move_all(name, companions, dest, &plan, false) {
                Ok(()) => return Ok((plan.doc, plan.companions)),
                Err(e) if is_exists(&e) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::other(format!(
            "no free name for {} after {MAX_TRIES} tries",
            shown(name)
        )))
    }

    /// Records an intent when needed (companions, or a copy across filesystems), moves
    /// the companions then the document, and removes the intent. On failure, puts back
    /// what moved and returns the error (`EEXIST` when a name was taken).
    /// The intent record of a move: its name in `dest` and its bytes. `Err` for a name
    /// that cannot be recorded faithfully (not plain UTF-8): such a move could not be
    /// recovered, so it is never attempted where it would need one.
    fn intent(
        &self,
        name: &OsStr,
        companions: &[OsString],
        plan: &Plan,
    ) -> io::Result<(String, Vec<u8>)> {
        let plain = std::iter::once(name)
            .chain(companions.iter().map(OsString::as_os_str))
            .all(|n| n.to_str().is_some_and(is_plain_name));
        if !plain {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "a name that is not plain UTF-8 cannot be recorded in an intent (needed to move a result with its directory, or across filesystems)",
            ));
        }
        let mut moves: Vec<[String; 2]> = companions
            .iter()
            .zip(&plan.companions)
            .map(|(c, d)| [c.to_string_lossy().into_owned(), d.clone()])
            .collect();
        moves.push([name.to_string_lossy().into_owned(), plan.doc.clone()]);
        let record = Intent {
            intent: INTENT_TYPE.into(),
            inbox: self.inbox.path.to_string_lossy().into_owned(),
            moves,
        };
        let bytes = serde_json::to_vec(&record).map_err(io::Error::other)?;
        Ok((format!("{INTENT_PREFIX}{}.json", plan.doc), bytes))
    }

    /// `intent_ready`: the intent is already written and durable (the batch path).
    fn move_all(
        &self,
        name: &OsStr,
        companions: &[OsString],
        dest: &Dir,
        plan: &Plan,
        intent_ready: bool,
    ) -> io::Result<()> {
        let intent_name = format!("{INTENT_PREFIX}{}.json", plan.doc);
        let mut intent_written = intent_ready;
        let write_intent = |written: &mut bool| -> io::Result<()> {
            if *written {
                return Ok(());
            }
            let (intent_name, bytes) = self.intent(name, companions, plan)?;
            write_replace(dest, &intent_name, &bytes)?;
            *written = true;
            Ok(())
        };
        if !companions.is_empty() {
            write_intent(&mut intent_written)?;
        }
        let inbox = &self.inbox.dir;
        let mut moved: Vec<(&OsStr, &OsStr)> = Vec::new();
        let mut failure = None;
        let pairs = companions
            .iter()
            .map(OsString::as_os_str)
            .zip(plan.companions.iter().map(OsStr::new))
            .chain(std::iter::once((name, OsStr::new(&plan.doc))));
        for (from, to) in pairs {
            match move_noreplace(inbox, from, dest, to, &mut || {
                write_intent(&mut intent_written)
            }) {
                Ok(()) => moved.push((from, to)),
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        if failure.is_some() {
            // Put back what moved (companions only: the document moves last).
            for &(from, to) in moved.iter().rev() {
                let _ = move_noreplace(dest, to, inbox, from, &mut || Ok(()));
            }
        }
        // A rename is atomic on its own; the directories are fsynced once at the end of
        // the run (see `run`).
        if intent_written {
            let _ = dest.remove_file(&intent_name);
        }
        failure.map_or(Ok(()), Err)
    }
}

/// The destination names of one document and its companions.
#[derive(Debug, Clone)]
struct Plan {
    doc: String,
    companions: Vec<String>,
}

/// Documents judged, named and reported together (one `syncfs` per batch).
const BATCH: usize = 256;
/// Most `-N` suffixes tried for one name.
const MAX_TRIES: usize = 1000;

/// The `X` of a companion's name (`X.lock.json`, `X.intoto.json`,
/// `X.intoto.dsse.json`), whether or not `X.md` exists.
fn companion_stem(name: &[u8]) -> Option<&[u8]> {
    COMPANION_SUFFIXES
        .iter()
        .find_map(|suffix| name.strip_suffix(suffix.as_bytes()))
}

/// The link count of regular file `name` in `dir` when it has more than one name: a
/// hard link may be a second name of any file on the filesystem (`ln /etc/shadow
/// inbox/TR-x.md` needs no symlink), so its bytes are never read, judged or quoted.
pub fn hard_links(dir: &Dir, name: &OsStr) -> Option<u64> {
    use cap_std::fs::MetadataExt;
    dir.symlink_metadata(name)
        .ok()
        .filter(|m| m.is_file() && m.nlink() > 1)
        .map(|m| m.nlink())
}

/// The reason a hard-linked document is refused unread ([`hard_links`]).
pub fn hard_link_message(links: u64) -> String {
    format!(
        "a hard link ({links} names for one file): a document must be a file of its own; never read or quoted (copy it instead of linking it)"
    )
}

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

fn rejected(code: &str, message: &str) -> Judgement {
    Judgement {
        kind: None,
        verdict: Verdict::Reject,
        reasons: vec![Reason::new(code, message, None)],
        notes: Vec::new(),
    }
}

/// A name that can be recorded in an intent and joined to a directory safely.
fn is_plain_name(n: &str) -> bool {
    !n.is_empty() && n != "." && n != ".." && !n.contains('/') && !n.contains('\0')
}

/// An inbox name as shown in reports and summaries: non-printable bytes escaped.
pub fn shown(name: &OsStr) -> String {
    report::printable(&name.to_string_lossy())
}

/// The destination name of an inbox entry, split into stem and extension: unsafe
/// characters become `_`, at most 200 bytes, never a report name.
pub fn safe_name(name: &OsStr) -> (String, String) {
    let lossy = name.to_string_lossy();
    let mut safe: String = lossy
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._+@=,-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if safe.is_empty() || safe.starts_with('.') {
        safe.insert_str(0, "document");
    }
    for suffix in [report::MD_SUFFIX, report::JSON_SUFFIX] {
        if let Some(stem) = safe.strip_suffix(suffix) {
            safe = format!("{stem}.reasons-doc{}", &suffix[".reasons".len()..]);
        }
    }
    let (stem, ext) = match safe.rfind('.') {
        Some(i) if i > 0 && safe.len() - i <= 10 => (safe[..i].to_owned(), safe[i..].to_owned()),
        _ => (safe.clone(), String::new()),
    };
    let stem: String = stem.chars().take(180).collect();
    (stem, ext)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The gate's companion suffixes are the names `runner exec` writes (and the
    /// signature `runner approve` writes), so a renamed one fails here rather than being split off at the gate (a new file in the set
    /// fails `tests/gate_results.rs`, which pins what `exec` writes for one run).
    #[test]
    fn companion_suffixes_are_the_names_exec_writes() {
        use runner_core::lock::statement::{envelope_file_name, statement_file_name};
        let id = "TS-20261121-101500Z-TR-x";
        assert_eq!(
            [
                runner_core::lock::lock_file_name(id),
                statement_file_name(id),
                envelope_file_name(id),
                format!("{id}.md.sig"),
            ],
            COMPANION_SUFFIXES.map(|s| format!("{id}{s}"))
        );
        for a in COMPANION_SUFFIXES {
            assert_eq!(
                companion_stem(format!("{id}{a}").as_bytes()),
                Some(id.as_bytes())
            );
            for b in COMPANION_SUFFIXES.iter().filter(|b| **b != a) {
                assert!(!a.ends_with(b), "{a} ends with {b}: one file, two results");
            }
        }
        assert_eq!(companion_stem(b"TS-x.md"), None);
        assert_eq!(companion_stem(b"TS-x.json"), None);
    }

    #[test]
    fn safe_names() {
        let cases: &[(&str, (&str, &str))] = &[
            ("TS-1-x.md", ("TS-1-x", ".md")),
            ("packet.json", ("packet", ".json")),
            ("we ird\u{1b}.md", ("we_ird_", ".md")),
            ("x.md.reasons.md", ("x.md.reasons-doc", ".md")),
            ("x.md.reasons.json", ("x.md.reasons-doc", ".json")),
            ("noext", ("noext", "")),
            ("ünï.md", ("_n_", ".md")),
        ];
        for (name, (stem, ext)) in cases {
            assert_eq!(
                safe_name(OsStr::new(name)),
                (stem.to_string(), ext.to_string()),
                "{name}"
            );
        }
    }
}
