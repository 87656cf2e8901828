//! Finding the documents of an inbox (with the companions that travel with them) and
//! judging each one, strictly and without following links.

use super::GateError;
use super::filer::Filer;
use super::filer::{recover_intents, remove_temporaries};
use super::{COMPANION_SUFFIXES, Companions, HeldDir, Summary, dir_err};
use crate::moves::TMP_PREFIX;
use crate::{Context, DocKind, Judgement, ReadError, Verdict};
use cap_std::fs::Dir;
use runner_core::request::Reason;
use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

pub(super) struct Gate<'a> {
    pub(super) inbox: HeldDir,
    pub(super) accepted: HeldDir,
    pub(super) quarantine: HeldDir,
    pub(super) ctx: &'a Context<'a>,
    pub(super) companions: &'a dyn Companions,
    pub(super) summary: Summary,
}

/// A document and the names that travel with it.
pub(super) type Document = (OsString, Vec<OsString>);
/// An entry left in the inbox, and why.
pub(super) type Skipped = (OsString, String);

impl Gate<'_> {
    pub(super) fn filer(&self) -> Filer<'_> {
        Filer::new(&self.inbox)
    }

    /// Finishes or rolls back the moves an interrupted run left, and removes its
    /// temporary files. A settled move that cannot be made durable is an error: the
    /// gate does not go on as if it were.
    pub(super) fn recover(&mut self) -> Result<(), GateError> {
        for dest in [&self.accepted, &self.quarantine] {
            self.summary.recovered += recover_intents(&self.inbox, &dest.dir)
                .map_err(dir_err("recovering moves into", &dest.path))?;
            remove_temporaries(&dest.dir);
        }
        remove_temporaries(&self.inbox.dir);
        Ok(())
    }

    /// The documents of the inbox with their companions, and the entries skipped.
    pub(super) fn scan(&self) -> io::Result<(Vec<Document>, Vec<Skipped>)> {
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
    pub(super) fn judge_one(&self, name: &OsStr) -> (Judgement, Option<String>) {
        let path = self.inbox.path.join(name);
        if let Some(links) = hard_links(&self.inbox.dir, name) {
            return (rejected("io.hard_link", &hard_link_message(links)), None);
        }
        match crate::judge_entry(&self.inbox.dir, name, self.ctx) {
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
}

/// The `X` of a companion's name (`X.lock.json`, `X.intoto.json`,
/// `X.intoto.dsse.json`), whether or not `X.md` exists.
pub(super) fn companion_stem(name: &[u8]) -> Option<&[u8]> {
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

pub(super) fn rejected(code: &str, message: &str) -> Judgement {
    Judgement {
        kind: None,
        verdict: Verdict::Reject,
        reasons: vec![Reason::new(code, message, None)],
        notes: Vec::new(),
    }
}
