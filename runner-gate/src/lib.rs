//! The gates: one validator for every document that crosses one, and the inbox sorter.
//!
//! A document's kind comes from its own text ([`kind`]): a tool request, a tool result,
//! a research packet or a governed packet. Each kind has its validator:
//!
//! * tool requests: [`runner_core::request::validate()`];
//! * tool results: [`tool_result`], which re-derives every artifact and stream hash when
//!   the result's directory `TS-…/` sits beside it ([`artifacts`]);
//! * research packets: [`research_packet`], which re-derives `content_hashes`;
//! * governed packets: [`governed`], which re-derives the manifest hash and, given a
//!   catalog, every item's content hash.
//!
//! A [`Judgement`] is data: a verdict, every reason for a REJECT, and *notes* saying what
//! could not be checked (no catalog, no artifact directory). A note does not fail
//! `runner validate`; the gate ([`inbox`]) accepts nothing it could not fully check, so
//! there a note counts as a reason.

pub mod artifacts;
/// The gate's field readers, part of the one markdown toolkit (`runner-core`).
use runner_core::markdown::fields;
pub mod governed;
pub mod inbox;
pub mod json;
pub mod kind;
pub mod moves;
pub mod report;
pub mod research_packet;
pub mod tool_result;

use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
use runner_contract::verdict::Verdict;
use runner_core::policy::Policy;
use runner_core::request::Reason;
use serde::Serialize;
use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::path::{Path, PathBuf};

/// The four schemas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DocKind {
    ToolRequest,
    ToolResult,
    ResearchPacket,
    GovernedPacket,
}

impl DocKind {
    /// The name printed in `kind`.
    pub fn as_str(self) -> &'static str {
        match self {
            DocKind::ToolRequest => "tool_request",
            DocKind::ToolResult => "tool_result",
            DocKind::ResearchPacket => "research_packet",
            DocKind::GovernedPacket => "governed_packet",
        }
    }
}

/// The judgement on one document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judgement {
    /// `None` when the kind is unknown or ambiguous.
    pub kind: Option<DocKind>,
    pub verdict: Verdict,
    /// Every reason for a REJECT (empty for an ACCEPT).
    pub reasons: Vec<Reason>,
    /// What was not checked, scoped (does not make the verdict REJECT).
    pub notes: Vec<Reason>,
}

impl Judgement {
    fn new(kind: Option<DocKind>, reasons: Vec<Reason>, notes: Vec<Reason>) -> Self {
        let verdict = if reasons.is_empty() {
            Verdict::Accept
        } else {
            Verdict::Reject
        };
        Self {
            kind,
            verdict,
            reasons,
            notes,
        }
    }

    /// The kind's name, `unknown` when there is none.
    pub fn kind_name(&self) -> &'static str {
        self.kind.map_or("unknown", DocKind::as_str)
    }

    /// The gate's reading: every note becomes a reason (nothing is accepted unchecked).
    pub fn strict(mut self) -> Self {
        if !self.notes.is_empty() {
            self.reasons.append(&mut self.notes);
            self.verdict = Verdict::Reject;
        }
        self
    }
}

/// A catalog of named queries: `named_query_id → sql`, read from a JSON object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Catalog {
    pub queries: std::collections::BTreeMap<String, String>,
}

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("cannot read catalog {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("catalog {path}: {reason}")]
    Invalid {
        path: PathBuf,
        reason: CatalogParseError,
    },
}

/// What is wrong with a catalog's text ([`Catalog::parse`]).
#[derive(Debug, thiserror::Error)]
pub enum CatalogParseError {
    #[error(transparent)]
    Json(#[from] json::JsonError),
    #[error("a catalog is a JSON object of `named_query_id: sql`")]
    NotAnObject,
    #[error("the SQL of `{key}` must be a string, found {found}")]
    NotAString { key: String, found: &'static str },
}

impl Catalog {
    /// Parses a catalog: a JSON object whose values are SQL strings.
    pub fn parse(text: &str) -> Result<Self, CatalogParseError> {
        let value = json::parse(runner_core::normalize::strip_bom(text))?;
        let json::Json::Object(entries) = value else {
            return Err(CatalogParseError::NotAnObject);
        };
        let mut queries = std::collections::BTreeMap::new();
        for (k, v) in entries {
            match v {
                json::Json::String(sql) => {
                    queries.insert(k, sql);
                }
                other => {
                    return Err(CatalogParseError::NotAString {
                        key: k,
                        found: other.type_name(),
                    });
                }
            }
        }
        Ok(Self { queries })
    }

    /// Loads a catalog file.
    ///
    /// # Ambient authority
    /// Reads `path`, a file the operator named (through `runner_sandbox::read`, as the
    /// policy is read).
    pub fn load(path: &Path) -> Result<Self, CatalogError> {
        let text =
            runner_sandbox::read::read_to_string(path).map_err(|source| CatalogError::Read {
                path: path.to_owned(),
                source,
            })?;
        Self::parse(&text).map_err(|reason| CatalogError::Invalid {
            path: path.to_owned(),
            reason,
        })
    }
}

/// What a validator may consult besides the document.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    pub policy: &'a Policy,
    pub catalog: Option<&'a Catalog>,
}

/// Where a result's artifacts are: the directory `TS-…/` beside `TS-….md`.
#[derive(Debug, Clone)]
pub enum ArtifactsAt<'a> {
    /// Judge the document alone (the artifact check becomes a note).
    Nowhere,
    /// The result's directory, as a path the operator named (its last component is
    /// opened without following a symlink).
    Dir(PathBuf),
    /// The entry of a directory the caller holds (the gate's inbox), never followed.
    In(&'a Dir, OsString),
}

impl ArtifactsAt<'_> {
    /// The artifact directory beside a document: `dir/NAME/` for `dir/NAME.md`.
    pub fn beside(doc: &Path) -> Self {
        match doc.file_name().and_then(artifact_stem) {
            Some(stem) => Self::Dir(doc.parent().unwrap_or(Path::new(".")).join(stem)),
            None => Self::Nowhere,
        }
    }

    /// The artifact directory `NAME/` beside the entry `NAME.md` of `dir`.
    pub fn beside_in<'d>(dir: &'d Dir, doc: &OsStr) -> ArtifactsAt<'d> {
        match artifact_stem(doc) {
            Some(stem) => ArtifactsAt::In(dir, stem.into()),
            None => ArtifactsAt::Nowhere,
        }
    }
}

/// The `NAME` of a document `NAME.md` (UTF-8, not empty): its artifact directory.
fn artifact_stem(doc: &OsStr) -> Option<&str> {
    doc.to_str()?.strip_suffix(".md").filter(|s| !s.is_empty())
}

/// Judges a document's bytes.
pub fn judge_bytes(bytes: &[u8], artifacts: &ArtifactsAt<'_>, ctx: &Context<'_>) -> Judgement {
    let detected = kind::detect(bytes);
    let kind = match detected {
        kind::Detected::Kind(kind) => kind,
        kind::Detected::Ambiguous(message) => {
            return Judgement::new(
                None,
                vec![Reason::new("kind.ambiguous", message, None)],
                vec![],
            );
        }
        kind::Detected::Unknown(message) => {
            return Judgement::new(
                None,
                vec![Reason::new("kind.unknown", message, None)],
                vec![],
            );
        }
    };
    if bytes.len() as u64 > ctx.policy.request.max_bytes {
        return Judgement::new(Some(kind), vec![too_large(kind, ctx.policy)], vec![]);
    }
    match kind {
        DocKind::ToolRequest => match runner_core::request::validate(bytes, ctx.policy) {
            Ok(_) => Judgement::new(Some(kind), vec![], vec![]),
            Err(reasons) => Judgement::new(Some(kind), reasons, vec![]),
        },
        DocKind::ToolResult => {
            let (reasons, notes) = tool_result::validate(bytes, artifacts, ctx.policy);
            Judgement::new(Some(kind), reasons, notes)
        }
        DocKind::ResearchPacket => Judgement::new(
            Some(kind),
            research_packet::validate(bytes, ctx.policy),
            vec![],
        ),
        DocKind::GovernedPacket => {
            let (reasons, notes) = governed::validate(bytes, ctx.policy, ctx.catalog);
            Judgement::new(Some(kind), reasons, notes)
        }
    }
}

fn too_large(kind: DocKind, policy: &Policy) -> Reason {
    let code = if kind == DocKind::ToolRequest {
        "request.too_large"
    } else {
        "document.too_large"
    };
    Reason::new(
        code,
        format!(
            "the file is larger than {} bytes, the most the policy allows",
            policy.request.max_bytes
        ),
        None,
    )
}

/// How a file is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Follow {
    /// Follow a symlink the operator named (`runner validate FILE`).
    Symlinks,
    /// Never follow one (the gate: inbox entries are untrusted).
    NoSymlinks,
}

/// Why a file could not be judged.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("not a regular file")]
    NotRegular,
}

/// Reads a document: a regular file only (a FIFO would block, a device never ends), at
/// most `cap + 1` bytes (enough to see that it is too large and to detect its kind).
///
/// # Ambient authority
/// Opens `path` on the host filesystem (`runner_sandbox::durable::open_file`).
pub fn read_document(path: &Path, cap: u64, follow: Follow) -> Result<Vec<u8>, ReadError> {
    let file = runner_sandbox::durable::open_file(path, follow == Follow::Symlinks);
    read_opened(file, cap, follow)
}

/// [`read_document`] of the entry `name` of `dir`, never following a symlink (the gate:
/// inbox entries are untrusted).
pub fn read_document_in(dir: &Dir, name: &OsStr, cap: u64) -> Result<Vec<u8>, ReadError> {
    if dir.symlink_metadata(name)?.is_symlink() {
        return Err(ReadError::NotRegular);
    }
    let flags = nix::fcntl::OFlag::O_NONBLOCK | nix::fcntl::OFlag::O_NOFOLLOW;
    let file = dir.open_with(
        name,
        OpenOptions::new().read(true).custom_flags(flags.bits()),
    );
    read_opened(
        file.map(cap_std::fs::File::into_std),
        cap,
        Follow::NoSymlinks,
    )
}

/// The read half of [`read_document`]: a symlink refused (`ELOOP` under
/// [`Follow::NoSymlinks`]) and anything but a regular file are [`ReadError::NotRegular`].
fn read_opened(
    file: std::io::Result<std::fs::File>,
    cap: u64,
    follow: Follow,
) -> Result<Vec<u8>, ReadError> {
    let file = match file {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) && follow == Follow::NoSymlinks => {
            return Err(ReadError::NotRegular);
        }
        Err(e) => return Err(e.into()),
    };
    if !file.metadata()?.is_file() {
        return Err(ReadError::NotRegular);
    }
    let mut bytes = Vec::new();
    file.take(cap.saturating_add(1)).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Judges the file at `path`; a result's artifacts are looked for beside it. `Err` when
/// the file cannot be read at all (the caller reports an `io.*` reason).
pub fn judge_file(
    path: &Path,
    ctx: &Context<'_>,
    follow: Follow,
) -> Result<(Judgement, Vec<u8>), ReadError> {
    let bytes = read_document(path, ctx.policy.request.max_bytes, follow)?;
    let judgement = judge_bytes(&bytes, &ArtifactsAt::beside(path), ctx);
    Ok((judgement, bytes))
}

/// [`judge_file`] of the entry `name` of `dir` (never followed); a result's artifacts
/// are the entry beside it.
pub fn judge_entry(
    dir: &Dir,
    name: &OsStr,
    ctx: &Context<'_>,
) -> Result<(Judgement, Vec<u8>), ReadError> {
    let bytes = read_document_in(dir, name, ctx.policy.request.max_bytes)?;
    let judgement = judge_bytes(&bytes, &ArtifactsAt::beside_in(dir, name), ctx);
    Ok((judgement, bytes))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn artifacts_beside() {
        match ArtifactsAt::beside(Path::new("/r/TS-1-x.md")) {
            ArtifactsAt::Dir(d) => assert_eq!(d, Path::new("/r/TS-1-x")),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            ArtifactsAt::beside(Path::new("/r/x.json")),
            ArtifactsAt::Nowhere
        ));
        assert!(matches!(
            ArtifactsAt::beside(Path::new("/r/.md")),
            ArtifactsAt::Nowhere
        ));
    }

    #[test]
    fn catalog_parsing() {
        let c = Catalog::parse("{\"NQ-1\": \"select 1\"}").unwrap();
        assert_eq!(c.queries["NQ-1"], "select 1");
        assert_eq!(
            Catalog::parse("[1]").unwrap_err().to_string(),
            "a catalog is a JSON object of `named_query_id: sql`"
        );
        assert_eq!(
            Catalog::parse("{\"a\": 1}").unwrap_err().to_string(),
            "the SQL of `a` must be a string, found a number"
        );
        assert!(Catalog::parse("{\"a\": \"x\", \"a\": \"y\"}").is_err());
    }

    #[test]
    fn unknown_and_ambiguous_kinds_are_rejected() {
        let policy = Policy::builtin();
        let ctx = Context {
            policy: &policy,
            catalog: None,
        };
        let j = judge_bytes(b"just text\n", &ArtifactsAt::Nowhere, &ctx);
        assert_eq!(j.verdict, Verdict::Reject);
        assert_eq!(j.kind_name(), "unknown");
        assert_eq!(j.reasons[0].code, "kind.unknown");
        let j = judge_bytes(
            b"---\nresult_type: a\npacket_type: b\n---\n",
            &ArtifactsAt::Nowhere,
            &ctx,
        );
        assert_eq!(j.reasons[0].code, "kind.ambiguous");
    }

    #[test]
    fn strict_turns_notes_into_reasons() {
        let j = Judgement::new(
            Some(DocKind::GovernedPacket),
            vec![],
            vec![Reason::new("n", "m", None)],
        );
        assert_eq!(j.verdict, Verdict::Accept);
        let s = j.strict();
        assert_eq!(s.verdict, Verdict::Reject);
        assert_eq!(s.reasons.len(), 1);
        assert!(s.notes.is_empty());
    }
}
