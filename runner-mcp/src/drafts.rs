//! The drafts directory: where CORE's drafts wait for the operator.
//!
//! Layout, one directory per draft, named by its `request_id`:
//!
//! ```text
//! DRAFTS/TR-x/draft.md          the draft as submitted, its inputs' sha256 sealed in
//! DRAFTS/TR-x/inputs/NAME       each input, as `/in/NAME`
//! DRAFTS/TR-x/rejected.json     the operator's reason (`runner drafts reject`)
//! DRAFTS/TR-x/approved.json     who approved it, when, into which inbox (`runner approve`)
//! ```
//!
//! A draft appears whole or not at all: it is written under a hidden temporary name (a
//! locked staging directory, see [`crate::staging`]) and renamed into place, never over
//! another draft. Every name is resolved through the
//! held directory (`cap_std`), so nothing is written outside it. Approval moves the
//! approved request, its signature and its inputs into a serve inbox: staged under a
//! hidden name in the inbox's parent (same filesystem), then renamed in, the `.md` last,
//! as the serve protocol wants.

use crate::staging;
use base64::Engine as _;
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt, PermissionsExt};
use runner_core::policy::Policy;
use runner_gate::moves;
use runner_pipeline::approval::approve::Approval;
use runner_pipeline::approval::seal;
use runner_pipeline::stage::InputsRoot;
use runner_sandbox::durable::rename_noreplace;
use runner_sandbox::durable::sync_dir;
use serde::{Deserialize, Serialize};
use std::ffi::OsStr;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// At most this many inputs per draft.
pub const MAX_INPUTS: usize = 32;
/// At most this many bytes per input (decoded).
pub const MAX_INPUT_BYTES: usize = 4 * 1024 * 1024;
/// At most this many bytes of inputs per draft (decoded).
pub const MAX_TOTAL_INPUT_BYTES: usize = 8 * 1024 * 1024;
/// At most this many bytes of an operator's rejection reason.
pub const MAX_REASON_BYTES: usize = 4096;
/// At most this many drafts are listed or scanned.
pub const MAX_LISTED: usize = 10_000;

const DRAFT_FILE: &str = "draft.md";
const INPUTS_DIR: &str = "inputs";
const REJECTED_FILE: &str = "rejected.json";
const APPROVED_FILE: &str = "approved.json";

/// Why a draft operation failed. The messages are for CORE and the operator both.
#[derive(Debug, thiserror::Error)]
pub enum DraftError {
    #[error("draft id {0:?} is not one: an id is `TR-` then 1-125 of A-Z a-z 0-9 . _ -")]
    BadId(String),
    #[error("there is no draft {0}")]
    NoSuchDraft(String),
    #[error("a draft {0} already exists; give the new draft another request_id")]
    Exists(String),
    #[error("input name {name:?} is not one: {why}")]
    BadInputName { name: String, why: &'static str },
    #[error("input {name}: {why}")]
    BadInput { name: String, why: String },
    #[error("the draft is {size} bytes; the policy allows at most {max}")]
    TooLarge { size: usize, max: u64 },
    #[error("the draft's request_id: {0}")]
    RequestId(String),
    #[error("sealing the inputs: {0}")]
    Seal(String),
    #[error("the draft does not pass validation (fix these, then submit again): {0}")]
    Rejected(String),
    #[error("draft {id} was already {state}")]
    Decided { id: String, state: &'static str },
    #[error("{0}")]
    Invalid(String),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> DraftError {
    let what = what.into();
    move |source| DraftError::Io { what, source }
}

/// Checks a draft id: `TR-` and then 1-125 of `A-Z a-z 0-9 . _ -` (the request id's
/// alphabet; the prefix keeps `.`, `..` and hidden names out, and the serve inbox takes
/// only `TR-*.md`).
pub fn check_id(id: &str) -> Result<(), DraftError> {
    let ok = id.len() <= 128
        && id.len() > 3
        && id.starts_with("TR-")
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(DraftError::BadId(id.chars().take(200).collect()))
    }
}

/// Checks an input's name: one plain file name (`/in/NAME`), 1-128 of `A-Z a-z 0-9 . _ -`,
/// not starting with a dot. No directories, no `..`, nothing absolute, no NUL.
pub fn check_input_name(name: &str) -> Result<(), DraftError> {
    let bad = |why| {
        Err(DraftError::BadInputName {
            name: name.chars().take(200).collect(),
            why,
        })
    };
    if name.is_empty() || name.len() > 128 {
        return bad("a name is 1-128 bytes");
    }
    if name.contains('/') || name.contains('\\') {
        return bad("a name is one file name under /in/, without directories");
    }
    if name.starts_with('.') {
        return bad("a name may not start with a dot (`.`, `..` and hidden names)");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return bad("a name holds only A-Z a-z 0-9 . _ -");
    }
    Ok(())
}

/// Decodes one input's base64 content within the caps.
pub fn decode_input(name: &str, b64: &str) -> Result<Vec<u8>, DraftError> {
    // Four base64 characters carry three bytes: refuse before decoding anything large.
    if b64.len() > MAX_INPUT_BYTES.div_ceil(3) * 4 + 4 {
        return Err(DraftError::BadInput {
            name: name.to_owned(),
            why: format!("larger than {MAX_INPUT_BYTES} bytes"),
        });
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .map_err(|e| DraftError::BadInput {
            name: name.to_owned(),
            why: format!("not valid base64 (standard alphabet, padded): {e}"),
        })?;
    if bytes.len() > MAX_INPUT_BYTES {
        return Err(DraftError::BadInput {
            name: name.to_owned(),
            why: format!("larger than {MAX_INPUT_BYTES} bytes"),
        });
    }
    Ok(bytes)
}

/// One sealed input: `/in/NAME` and its sha256.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SealedInput {
    pub path: String,
    /// 64 lowercase hex.
    pub sha256: String,
}

/// The operator's rejection of a draft.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Rejection {
    pub reason: String,
    /// RFC 3339 UTC.
    pub rejected_utc: String,
}

/// The operator's approval of a draft, as recorded beside it.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ApprovalRecord {
    pub approved_by: String,
    /// RFC 3339 UTC.
    pub approved_utc: String,
    /// `sha256:<hex>` of the signing key, when signed.
    pub key_id: Option<String>,
    /// The request's name in the inbox (`TR-x.md`).
    pub inbox_name: String,
}

/// What the drafts directory itself knows of a draft.
#[derive(Debug, Clone)]
pub enum Record {
    Drafted,
    Rejected(Rejection),
    Approved(ApprovalRecord),
}

/// One draft in a listing.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Listed {
    pub id: String,
    /// `drafted`, `approved` or `rejected`.
    pub state: &'static str,
    pub purpose: Option<String>,
    pub requested_by: Option<String>,
}

/// A held drafts directory.
#[derive(Debug)]
pub struct Drafts {
    root: PathBuf,
    dir: Dir,
}

/// What one call to [`Drafts::submit`] is handed: the draft's text and its inputs.
#[derive(Debug, Clone, Default)]
pub struct Submission {
    pub markdown: String,
    /// `(name, decoded bytes)`, names already checked by [`check_input_name`].
    pub inputs: Vec<(String, Vec<u8>)>,
}

/// What was written.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Submitted {
    pub id: String,
    pub inputs: Vec<SealedInput>,
    /// The sealed draft's text, as the operator will read it.
    pub markdown: String,
}

impl Drafts {
    /// Opens (creating it when missing) the drafts directory at `root`.
    ///
    /// # Ambient authority
    /// Creates and opens `root` on the host filesystem.
    pub fn open(root: &Path) -> Result<Self, DraftError> {
        let dir = runner_sandbox::host::create_dir_all(root)
            .map_err(io_err(format!("drafts directory {}", root.display())))?;
        // Staging directories of a process that died before renaming them into place;
        // another server's in flight are held and kept.
        staging::sweep(&dir);
        Ok(Self {
            root: root.to_owned(),
            dir,
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn draft_dir(&self, id: &str) -> Result<Dir, DraftError> {
        check_id(id)?;
        match self.dir.symlink_metadata(id) {
            Ok(m) if m.is_dir() => self.dir.open_dir(id).map_err(io_err(format!("draft {id}"))),
            Ok(_) => Err(DraftError::NoSuchDraft(id.to_owned())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                Err(DraftError::NoSuchDraft(id.to_owned()))
            }
            Err(e) => Err(io_err(format!("draft {id}"))(e)),
        }
    }

    /// The draft's text.
    pub fn read(&self, id: &str, policy: &Policy) -> Result<String, DraftError> {
        let dir = self.draft_dir(id)?;
        let bytes = read_capped(&dir, DRAFT_FILE, policy.request.max_bytes)
            .map_err(io_err(format!("draft {id}: {DRAFT_FILE}")))?;
        String::from_utf8(bytes)
            .map_err(|_| DraftError::Invalid(format!("draft {id} is not UTF-8")))
    }

    /// What the operator decided, if anything.
    pub fn record(&self, id: &str) -> Result<Record, DraftError> {
        let dir = self.draft_dir(id)?;
        if let Some(r) = read_json::<Rejection>(&dir, REJECTED_FILE, id)? {
            return Ok(Record::Rejected(r));
        }
        if let Some(a) = read_json::<ApprovalRecord>(&dir, APPROVED_FILE, id)? {
            return Ok(Record::Approved(a));
        }
        Ok(Record::Drafted)
    }

    /// Every draft, by id (at most [`MAX_LISTED`]).
    pub fn list(&self, policy: &Policy) -> Result<Vec<Listed>, DraftError> {
        let mut ids: Vec<String> = Vec::new();
        for e in self
            .dir
            .entries()
            .map_err(io_err(format!("drafts directory {}", self.root.display())))?
            .take(MAX_LISTED)
        {
            let e = e.map_err(io_err("drafts directory"))?;
            if let Some(name) = e.file_name().to_str()
                && check_id(name).is_ok()
            {
                ids.push(name.to_owned());
            }
        }
        ids.sort();
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            let state = match self.record(&id) {
                Ok(Record::Drafted) => "drafted",
                Ok(Record::Rejected(_)) => "rejected",
                Ok(Record::Approved(_)) => "approved",
                Err(_) => continue,
            };
            let text = self.read(&id, policy).unwrap_or_default();
            out.push(Listed {
                purpose: crate::judge::field(&text, "purpose", policy),
                requested_by: crate::judge::field(&text, "requested_by", policy),
                id,
                state,
            });
        }
        Ok(out)
    }

    /// Writes a new draft: its inputs under `inputs/`, their sha256 sealed into the text
    /// (front matter `inputs:` and `## Input Files`, as `runner request seal` does), all
    /// under a temporary name first and renamed into `DRAFTS/<request_id>/` last.
    pub fn submit(&self, sub: &Submission, policy: &Policy) -> Result<Submitted, DraftError> {
        if sub.markdown.len() as u64 > policy.request.max_bytes {
            return Err(DraftError::TooLarge {
                size: sub.markdown.len(),
                max: policy.request.max_bytes,
            });
        }
        if sub.inputs.len() > MAX_INPUTS {
            return Err(DraftError::Invalid(format!(
                "{} inputs; a draft has at most {MAX_INPUTS}",
                sub.inputs.len()
            )));
        }
        let total: usize = sub.inputs.iter().map(|(_, b)| b.len()).sum();
        if total > MAX_TOTAL_INPUT_BYTES {
            return Err(DraftError::Invalid(format!(
                "the inputs are {total} bytes together; a draft has at most {MAX_TOTAL_INPUT_BYTES}"
            )));
        }
        for (name, _) in &sub.inputs {
            check_input_name(name)?;
        }
        let id = crate::judge::field(&sub.markdown, "request_id", policy)
            .ok_or_else(|| DraftError::RequestId("missing or not a plain string".into()))?;
        check_id(&id).map_err(|e| DraftError::RequestId(e.to_string()))?;
        if moves::exists(&self.dir, OsStr::new(&id)) {
            return Err(DraftError::Exists(id));
        }

        let staged = staging::create(&self.dir, &id)
            .map_err(io_err("creating the draft's temporary directory"))?;
        let tmp = staged.name().to_owned();
        let written = self.write_staged(staged.dir(), &tmp, &id, sub, policy);
        let result = written.and_then(|submitted| {
            match rename_noreplace(&self.dir, OsStr::new(&tmp), &self.dir, OsStr::new(&id)) {
                Ok(()) => {
                    let _ = sync_dir(&self.dir);
                    Ok(submitted)
                }
                Err(e) if moves::is_exists(&e) => Err(DraftError::Exists(id.clone())),
                Err(e) => Err(io_err(format!("renaming the draft into {id}"))(e)),
            }
        });
        if result.is_err() {
            let _ = moves::remove_any(&self.dir, OsStr::new(&tmp));
        }
        result
    }

    fn write_staged(
        &self,
        staged: &Dir,
        tmp: &str,
        id: &str,
        sub: &Submission,
        policy: &Policy,
    ) -> Result<Submitted, DraftError> {
        staged
            .create_dir(INPUTS_DIR)
            .map_err(io_err("the draft's inputs directory"))?;
        let inputs_dir = staged.open_dir(INPUTS_DIR).map_err(io_err("inputs"))?;
        for (name, bytes) in &sub.inputs {
            write_new(&inputs_dir, name, bytes).map_err(io_err(format!("input {name}")))?;
        }
        let sealed = seal::seal(
            &sub.markdown,
            &InputsRoot::named(self.root.join(tmp).join(INPUTS_DIR)),
            policy,
        )
        .map_err(|e| DraftError::Seal(e.to_string()))?;
        for (name, _) in &sub.inputs {
            let path = format!("/in/{name}");
            if !sealed.inputs.iter().any(|i| i.path == path) {
                return Err(DraftError::BadInput {
                    name: name.clone(),
                    why: format!(
                        "the draft does not declare {path} (list it under `inputs:` and in `## Input Files`)"
                    ),
                });
            }
        }
        // Only a draft the operator could approve as it is gets written.
        let verdict = crate::judge::validate_draft(&sealed.text, policy);
        if verdict.verdict != runner_contract::verdict::Verdict::Accept {
            let reasons: Vec<String> = verdict
                .reasons
                .iter()
                .map(|r| match r.line {
                    Some(l) => format!("line {l}: {}: {}", r.code, r.message),
                    None => format!("{}: {}", r.code, r.message),
                })
                .collect();
            return Err(DraftError::Rejected(reasons.join("; ")));
        }
        write_new(staged, DRAFT_FILE, sealed.text.as_bytes())
            .map_err(io_err(format!("draft {id}: {DRAFT_FILE}")))?;
        let _ = sync_dir(&inputs_dir);
        let _ = sync_dir(staged);
        Ok(Submitted {
            id: id.to_owned(),
            inputs: sealed
                .inputs
                .into_iter()
                .map(|i| SealedInput {
                    path: i.path,
                    sha256: i.sha256,
                })
                .collect(),
            markdown: sealed.text,
        })
    }

    /// Records the operator's rejection (refused once approved or rejected).
    pub fn reject(&self, id: &str, reason: &str, at: &str) -> Result<Rejection, DraftError> {
        if reason.trim().is_empty() || reason.len() > MAX_REASON_BYTES {
            return Err(DraftError::Invalid(format!(
                "--reason: give a reason of 1-{MAX_REASON_BYTES} bytes"
            )));
        }
        self.undecided(id)?;
        let dir = self.draft_dir(id)?;
        let r = Rejection {
            reason: reason.trim().to_owned(),
            rejected_utc: at.to_owned(),
        };
        let json = serde_json::to_vec_pretty(&r).map_err(|e| DraftError::Invalid(e.to_string()))?;
        moves::write_replace(&dir, REJECTED_FILE, &json)
            .map_err(io_err(format!("draft {id}: {REJECTED_FILE}")))?;
        Ok(r)
    }

    fn undecided(&self, id: &str) -> Result<(), DraftError> {
        match self.record(id)? {
            Record::Drafted => Ok(()),
            Record::Rejected(_) => Err(DraftError::Decided {
                id: id.to_owned(),
                state: "rejected",
            }),
            Record::Approved(_) => Err(DraftError::Decided {
                id: id.to_owned(),
                state: "approved",
            }),
        }
    }

    /// Moves an approved draft into the serve inbox at `inbox`: the request's inputs
    /// (re-hashed against what it declares), its signature and the approved text are
    /// staged in a hidden directory of the inbox's parent, then renamed in (inputs,
    /// signature, `TR-x.md` last: the serve protocol's commit point), never replacing
    /// anything. The approval is recorded beside the draft before the commit point and
    /// withdrawn if that fails; the draft's inputs are removed once moved.
    ///
    /// # Ambient authority
    /// Opens `inbox` and its parent.
    pub fn approve_into(
        &self,
        id: &str,
        approval: &Approval,
        inbox: &Path,
        record: &ApprovalRecord,
    ) -> Result<Moved, DraftError> {
        self.undecided(id)?;
        let draft = self.draft_dir(id)?;
        let inbox_dir = runner_sandbox::host::open_dir(inbox)
            .map_err(io_err(format!("inbox {}", inbox.display())))?;
        let (parent, _) = runner_sandbox::host::open_parent(inbox)
            .map_err(io_err(format!("the parent of inbox {}", inbox.display())))?;
        let md = format!("{id}.md");
        let sig = format!("{id}.md.sig");
        let inputs = format!("{id}.inputs");
        for name in [&md, &sig, &inputs] {
            if moves::exists(&inbox_dir, OsStr::new(name)) {
                return Err(DraftError::Exists(format!("{name} in the inbox")));
            }
        }
        // What an approval that crashed left staged beside the inbox (nobody holds it).
        staging::sweep(&parent);
        let staged =
            staging::create(&parent, id).map_err(io_err("a staging directory beside the inbox"))?;
        let stage_name = staged.name().to_owned();
        let result = self.stage_and_commit(
            &StageAt {
                draft: &draft,
                stage: staged.dir(),
                inbox: &inbox_dir,
                id,
                md: &md,
                sig: &sig,
                inputs: &inputs,
            },
            approval,
            record,
        );
        let _ = moves::remove_any(&parent, OsStr::new(&stage_name));
        drop(staged);
        let moved = result?;
        // The inputs are in the inbox now; the draft keeps its text and the record.
        let _ = moves::remove_any(&draft, OsStr::new(INPUTS_DIR));
        Ok(Moved {
            request: inbox.join(&md),
            signature: moved.then(|| inbox.join(&sig)),
            inputs: inbox.join(&inputs),
        })
    }

    /// Stages and commits; `Ok(signed)`.
    fn stage_and_commit(
        &self,
        at: &StageAt<'_>,
        approval: &Approval,
        record: &ApprovalRecord,
    ) -> Result<bool, DraftError> {
        let declared = approval.judged.request.inputs();
        if !declared.is_empty() {
            at.stage
                .create_dir(at.inputs)
                .map_err(io_err("staging the inputs"))?;
            let to = at
                .stage
                .open_dir(at.inputs)
                .map_err(io_err("staged inputs"))?;
            let from = at
                .draft
                .open_dir(INPUTS_DIR)
                .map_err(io_err(format!("draft {}: its inputs", at.id)))?;
            for input in declared {
                let name = input.relative();
                let bytes = read_capped(&from, name, MAX_INPUT_BYTES as u64).map_err(|e| {
                    DraftError::BadInput {
                        name: input.path.clone(),
                        why: format!("cannot be read from the draft: {e}"),
                    }
                })?;
                let sha = runner_core::digest::sha256_hex(&bytes);
                if sha != input.sha256 {
                    return Err(DraftError::BadInput {
                        name: input.path.clone(),
                        why: format!("its sha256 is {sha}, the request declares {}", input.sha256),
                    });
                }
                write_new(&to, name, &bytes).map_err(io_err(format!("staging {}", input.path)))?;
            }
            let _ = sync_dir(&to);
        }
        let signed = match &approval.envelope {
            Some(env) => {
                let mut json =
                    serde_json::to_vec(env).map_err(|e| DraftError::Invalid(e.to_string()))?;
                json.push(b'\n');
                write_new(at.stage, at.sig, &json).map_err(io_err("staging the signature"))?;
                true
            }
            None => false,
        };
        write_new(at.stage, at.md, approval.text.as_bytes())
            .map_err(io_err("staging the approved request"))?;
        let _ = sync_dir(at.stage);

        let mut moved: Vec<&str> = Vec::new();
        let undo = |moved: &[&str]| {
            for name in moved.iter().rev() {
                let _ = rename_noreplace(at.inbox, OsStr::new(name), at.stage, OsStr::new(name));
            }
        };
        let companions = [
            (!declared.is_empty()).then_some(at.inputs),
            signed.then_some(at.sig),
        ];
        for name in companions.into_iter().flatten() {
            if let Err(e) = rename_noreplace(at.stage, OsStr::new(name), at.inbox, OsStr::new(name))
            {
                undo(&moved);
                return Err(io_err(format!("moving {name} into the inbox"))(e));
            }
            moved.push(name);
        }
        let json =
            serde_json::to_vec_pretty(record).map_err(|e| DraftError::Invalid(e.to_string()))?;
        if let Err(e) = moves::write_replace(at.draft, APPROVED_FILE, &json) {
            undo(&moved);
            return Err(io_err(format!("draft {}: {APPROVED_FILE}", at.id))(e));
        }
        if let Err(e) = rename_noreplace(at.stage, OsStr::new(at.md), at.inbox, OsStr::new(at.md)) {
            undo(&moved);
            let _ = at.draft.remove_file(APPROVED_FILE);
            return Err(io_err(format!("moving {} into the inbox", at.md))(e));
        }
        let _ = sync_dir(at.inbox);
        Ok(signed)
    }
}

/// Where an approval is staged and committed.
struct StageAt<'a> {
    draft: &'a Dir,
    stage: &'a Dir,
    inbox: &'a Dir,
    id: &'a str,
    md: &'a str,
    sig: &'a str,
    inputs: &'a str,
}

/// Where an approved draft went.
#[derive(Debug, Clone)]
pub struct Moved {
    pub request: PathBuf,
    pub signature: Option<PathBuf>,
    pub inputs: PathBuf,
}

/// Creates `name` in `dir` (never replacing, never following a link), writes and syncs it.
fn write_new(dir: &Dir, name: &str, bytes: &[u8]) -> io::Result<()> {
    let mut f = dir.open_with(
        name,
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(nix_nofollow()),
    )?;
    f.write_all(bytes)?;
    f.set_permissions(cap_std::fs::Permissions::from_mode(0o644))?;
    f.sync_all()
}

/// O_NOFOLLOW: a symlink planted in a draft is refused, not followed.
fn nix_nofollow() -> i32 {
    nix::libc::O_NOFOLLOW
}

/// Reads the regular file `name` of `dir`, at most `cap` bytes (more is an error).
fn read_capped(dir: &Dir, name: &str, cap: u64) -> io::Result<Vec<u8>> {
    let f = dir.open_with(
        name,
        OpenOptions::new().read(true).custom_flags(nix_nofollow()),
    )?;
    if !f.metadata()?.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    let mut bytes = Vec::new();
    f.take(cap.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(io::Error::other(format!("larger than {cap} bytes")));
    }
    Ok(bytes)
}

fn read_json<T: serde::de::DeserializeOwned>(
    dir: &Dir,
    name: &str,
    id: &str,
) -> Result<Option<T>, DraftError> {
    match read_capped(dir, name, 64 * 1024) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| DraftError::Invalid(format!("draft {id}: {name}: {e}"))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err(format!("draft {id}: {name}"))(e)),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn ids_that_are_not_ones() {
        for bad in [
            "",
            "TR-",
            "..",
            "../../etc",
            "TR-../x",
            "TR-a/b",
            "/abs",
            "TR-a\0b",
            "x",
            ".TR-a",
            "TR-é",
        ] {
            assert!(check_id(bad).is_err(), "{bad:?}");
        }
        assert!(check_id(&format!("TR-{}", "a".repeat(126))).is_err());
        assert!(check_id("TR-20261121-100000Z-csv.stats_1").is_ok());
    }

    #[test]
    fn input_names_that_are_not_ones() {
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "/etc/passwd",
            "a/b",
            "a\0b",
            ".hidden",
            "a\\b",
            "é",
            "a b",
        ] {
            assert!(check_input_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_input_name("data.csv").is_ok());
    }

    #[test]
    fn base64_that_is_not() {
        assert!(decode_input("x", "not base64!").is_err());
        assert_eq!(decode_input("x", "aGk=").unwrap(), b"hi");
        let big = "A".repeat(MAX_INPUT_BYTES / 3 * 4 + 8);
        assert!(decode_input("x", &big).is_err());
    }
}
