//! The crash-safe `Filer`: free destination names, reason reports, intent records and
//! moves that never replace, and the recovery of moves a crash interrupted.

use super::names::{safe_name, shown};
use super::{HeldDir, INTENT_PREFIX, INTENT_TYPE};
use crate::moves::{
    TMP_PREFIX, exists, is_exists, move_noreplace, remove_any, same_tree, write_replace,
    write_replace_unsynced as write_unsynced,
};
use crate::{Judgement, Verdict, report};
use cap_std::fs::Dir;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

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
        runner_sandbox::durable::sync_dir(dest)?;
        runner_sandbox::durable::sync_dir(inbox)?;
        Ok(true)
    }

    /// The names of attempt `n` (`X.md`, then `X-2.md`, …) when none is taken on disk
    /// or reserved by this batch.
    pub(super) fn candidate(
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
    pub(super) fn write_reports(
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
    pub(super) fn intent(
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
    pub(super) fn move_all(
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
pub(super) struct Plan {
    pub(super) doc: String,
    pub(super) companions: Vec<String>,
}

/// Most `-N` suffixes tried for one name.
pub(super) const MAX_TRIES: usize = 1000;

/// A name that can be recorded in an intent and joined to a directory safely.
pub(super) fn is_plain_name(n: &str) -> bool {
    !n.is_empty() && n != "." && n != ".." && !n.contains('/') && !n.contains('\0')
}
