//! Checking and unpacking one wheel into an environment's tree. A wheel is accepted
//! only when it is the pinned file (sha256 of the bytes read), names the pinned package
//! and version, is pure Python (file name tags `none`/`any`, `Root-Is-Purelib: true`
//! and `-none-any` tags in its `WHEEL` file, no native-extension member), and every
//! member is a plain relative path (no `..`, no absolute path, no backslash, no symlink).
//! Extraction is bounded in entries and bytes however the archive describes itself.

use super::PackagePin;
use cap_std::fs::{Dir, DirBuilder, DirBuilderExt, OpenOptions, OpenOptionsExt};
use nix::fcntl::OFlag;
use runner_sandbox::digest::sha256_reader;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;
use zip::ZipArchive;
use zip::result::ZipError;

/// Bounds on one environment's unpacked size, over all its wheels.
const MAX_TOTAL_BYTES: u64 = 512 << 20;
const MAX_TOTAL_ENTRIES: u64 = 100_000;
/// Largest `WHEEL` metadata file read.
const MAX_WHEEL_FILE: u64 = 64 << 10;
/// File name endings of compiled extension modules and libraries.
const NATIVE_SUFFIXES: &[&str] = &[".so", ".pyd", ".dylib", ".dll", ".a", ".lib"];

/// Why a wheel was refused or could not be unpacked ([`unpack`]): the reason, for a
/// message naming the wheel (`runner_pipeline::environment::EnvError::Wheel`).
#[derive(Debug, thiserror::Error)]
pub enum WheelError {
    #[error("the path has no file name")]
    NoFileName,
    #[error(
        "`{0}` is not a wheel file name (NAME-VERSION-PYTHON-ABI-PLATFORM.whl); keep the \
         name the wheel was published under"
    )]
    NotAWheelName(String),
    /// The file name says another package or version than the pin.
    #[error("the file is {dist} {version}, the pin is {pin_name} {pin_version}")]
    NotThePin {
        dist: String,
        version: String,
        pin_name: String,
        pin_version: String,
    },
    #[error(
        "it is a platform wheel (abi `{abi}`, platform `{platform}`): only pure-Python \
         wheels (`-none-any`) run in a WASI guest, which cannot load native extensions"
    )]
    PlatformWheel { abi: String, platform: String },
    #[error("cannot open: {0}")]
    Open(#[source] io::Error),
    #[error("cannot read: {0}")]
    Read(#[source] io::Error),
    #[error("sha256 {actual} is not the pinned {pinned} of {name} {version}")]
    NotThePinnedSha256 {
        actual: String,
        pinned: String,
        name: String,
        version: String,
    },
    #[error("not a zip archive: {0}")]
    NotAZip(#[source] ZipError),
    /// A member name, a symbolic link, a native extension (`check_members`).
    #[error(transparent)]
    Member(#[from] MemberError),
    #[error("it has no `{dist_info}/WHEEL` file")]
    NoWheelFile { dist_info: String },
    #[error("WHEEL: {0}")]
    WheelFile(#[source] ZipError),
    #[error("WHEEL: {0}")]
    WheelFileRead(#[source] io::Error),
    #[error(
        "its WHEEL file lists tag `{0}`: only pure-Python wheels (`-none-any`) run in a \
         WASI guest"
    )]
    PlatformTag(String),
    #[error("its WHEEL file does not say `Root-Is-Purelib: true`: not a pure-Python wheel")]
    NotPurelib,
    #[error("more than {MAX_TOTAL_ENTRIES} files in the environment")]
    TooManyFiles,
    #[error("the environment unpacks to more than {MAX_TOTAL_BYTES} bytes")]
    TooManyBytes,
    #[error("cannot create `{target}`: {source}")]
    Create {
        target: String,
        #[source]
        source: io::Error,
    },
    #[error(
        "member `{name}` would overwrite `{target}`, which another member or package \
         already installed"
    )]
    Overwrite { name: String, target: String },
    #[error("cannot write `{target}`: {source}")]
    Write {
        target: String,
        #[source]
        source: io::Error,
    },
    /// A member's bytes could not be copied out.
    #[error("member `{name}`: {source}")]
    Copy {
        name: String,
        #[source]
        source: io::Error,
    },
}

/// Why a member of an archive (a wheel's, a guest tree's) is refused before anything is
/// written (`check_members`, `member_name`, `check_member_name`). `what` is what
/// messages call a member (`member`, `entry`).
#[derive(Debug, thiserror::Error)]
pub enum MemberError {
    #[error("{what} {index}: {source}")]
    Unreadable {
        what: &'static str,
        index: usize,
        #[source]
        source: ZipError,
    },
    #[error("{what} {index}: its name is unreadable ({source})")]
    Name {
        what: &'static str,
        index: usize,
        #[source]
        source: ZipError,
    },
    #[error("member `{}` {why}", name.escape_debug())]
    BadName { name: String, why: BadName },
    #[error("member `{0}` is a symbolic link")]
    Symlink(String),
    #[error(
        "member `{0}` is a native extension or library: only pure-Python wheels run in a \
         WASI guest"
    )]
    NativeExtension(String),
    #[error(
        "member `{name}` is a top-level `{module}`, which Python's `site` runs at every \
         start: a package may not run code before the program does (the runner's own \
         `sitecustomize` is the network door)"
    )]
    StartupHook { name: String, module: String },
    #[error(
        "member `{name}` is a top-level `{module}`, a module of the guest's standard \
         library: a package may not shadow the stdlib"
    )]
    ShadowsStdlib { name: String, module: String },
}

/// What is wrong with a member's name (`check_member_name`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BadName {
    #[error("has an empty name")]
    Empty,
    #[error("is an absolute path")]
    Absolute,
    #[error("holds a backslash, NUL or colon")]
    ForbiddenCharacter,
    #[error("has an empty path component")]
    EmptyComponent,
    #[error("escapes the install directory with `.` or `..`")]
    DotComponent,
}

/// What is left of the environment's bounds.
#[derive(Debug)]
pub struct Budget {
    bytes: u64,
    entries: u64,
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            bytes: MAX_TOTAL_BYTES,
            entries: MAX_TOTAL_ENTRIES,
        }
    }
}

/// Distribution names are normalized in `runner-core` (no I/O), where the policy's
/// environments are checked.
use runner_core::environment::normalize;

/// sha256 hex of the file at `path` (opened without blocking on a FIFO).
///
/// # Ambient Authority
/// Reads `path`.
pub fn file_sha256(path: &Path) -> io::Result<String> {
    sha256_reader(open_regular(path)?)
}

fn open_regular(path: &Path) -> io::Result<File> {
    let file = crate::store::open_named(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    Ok(file)
}

/// The tags of a wheel file name, `{dist}-{version}(-{build})?-{python}-{abi}-{platform}.whl`.
struct WheelName<'a> {
    dist: &'a str,
    version: &'a str,
    abi: &'a str,
    platform: &'a str,
}

fn parse_name(file_name: &str) -> Option<WheelName<'_>> {
    let stem = file_name.strip_suffix(".whl")?;
    let parts: Vec<&str> = stem.split('-').collect();
    if !(parts.len() == 5 || parts.len() == 6) || parts.iter().any(|p| p.is_empty()) {
        return None;
    }
    let n = parts.len();
    Some(WheelName {
        dist: parts[0],
        version: parts[1],
        abi: parts[n - 2],
        platform: parts[n - 1],
    })
}

/// Checks the wheel at `path` against `pin` and unpacks it into `root` (see the module
/// docs); the error is the reason, for a message naming the wheel.
///
/// # Ambient Authority
/// Reads `path` (a wheel the operator named or pip downloaded).
pub fn unpack(
    pin: &PackagePin,
    path: &Path,
    root: &Dir,
    budget: &mut Budget,
) -> Result<(), WheelError> {
    let file_name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or(WheelError::NoFileName)?;
    let tags =
        parse_name(file_name).ok_or_else(|| WheelError::NotAWheelName(file_name.to_owned()))?;
    if normalize(tags.dist) != normalize(&pin.name) || tags.version != pin.version {
        return Err(WheelError::NotThePin {
            dist: tags.dist.to_owned(),
            version: tags.version.to_owned(),
            pin_name: pin.name.clone(),
            pin_version: pin.version.clone(),
        });
    }
    if tags.abi.split('.').any(|t| t != "none") || tags.platform.split('.').any(|t| t != "any") {
        return Err(WheelError::PlatformWheel {
            abi: tags.abi.to_owned(),
            platform: tags.platform.to_owned(),
        });
    }

    let mut file = open_regular(path).map_err(WheelError::Open)?;
    let actual = sha256_reader(&mut file).map_err(WheelError::Read)?;
    if actual != pin.sha256 {
        return Err(WheelError::NotThePinnedSha256 {
            actual,
            pinned: pin.sha256.clone(),
            name: pin.name.clone(),
            version: pin.version.clone(),
        });
    }
    file.seek(SeekFrom::Start(0)).map_err(WheelError::Read)?;
    let mut archive = ZipArchive::new(file).map_err(WheelError::NotAZip)?;

    // Every member's name first, before anything is written.
    let dist_info = format!("{}-{}.dist-info", normalize(&pin.name), pin.version);
    let mut wheel_file = None;
    check_members(&mut archive, "member", |i, name| {
        let base = name.rsplit('/').next().unwrap_or(name).to_ascii_lowercase();
        if NATIVE_SUFFIXES.iter().any(|s| base.ends_with(s)) || base.contains(".so.") {
            return Err(MemberError::NativeExtension(name.to_owned()));
        }
        check_top_level(name)?;
        if let Some((dir, "WHEEL")) = name.split_once('/')
            && normalize_dist_info(dir) == dist_info
        {
            wheel_file = Some(i);
        }
        Ok(())
    })?;
    let wheel_file = wheel_file.ok_or(WheelError::NoWheelFile { dist_info })?;
    check_wheel_metadata(&mut archive, wheel_file)?;

    for i in 0..archive.len() {
        let mut member = archive
            .by_index(i)
            .map_err(|source| MemberError::Unreadable {
                what: "member",
                index: i,
                source,
            })?;
        let name = member_name(&member, "member", i)?;
        let Some(target) = install_path(&name) else {
            continue;
        };
        if budget.entries == 0 {
            return Err(WheelError::TooManyFiles);
        }
        budget.entries -= 1;
        let dest = Path::new(target);
        let created = |source| WheelError::Create {
            target: target.to_owned(),
            source,
        };
        if member.is_dir() {
            create_dirs(root, dest).map_err(created)?;
            continue;
        }
        if let Some(parent) = dest.parent() {
            create_dirs(root, parent).map_err(created)?;
        }
        let mut out = match new_tree_file(root, dest) {
            Ok(out) => out,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                return Err(WheelError::Overwrite {
                    target: target.to_owned(),
                    name,
                });
            }
            Err(source) => {
                return Err(WheelError::Write {
                    target: target.to_owned(),
                    source,
                });
            }
        };
        // One byte past what is left shows the budget is exceeded, whatever the
        // member's header claims.
        let copied =
            io::copy(&mut (&mut member).take(budget.bytes + 1), &mut out).map_err(|source| {
                WheelError::Copy {
                    name: name.clone(),
                    source,
                }
            })?;
        if copied > budget.bytes {
            return Err(WheelError::TooManyBytes);
        }
        budget.bytes -= copied;
    }
    Ok(())
}

/// `Foo_Bar-1.0.dist-info` → `foo_bar-1.0.dist-info` (the name part normalized).
fn normalize_dist_info(dir: &str) -> String {
    match dir
        .strip_suffix(".dist-info")
        .and_then(|s| s.rsplit_once('-'))
    {
        Some((name, version)) => format!("{}-{version}.dist-info", normalize(name)),
        None => dir.to_owned(),
    }
}

/// Checks every member of `archive` before anything is written: a plain relative name
/// ([`check_member_name`]), not a symbolic link; then `each` with its index and name.
/// `what` is what messages call a member (`member`, `entry`).
pub(crate) fn check_members<R: Read + Seek>(
    archive: &mut ZipArchive<R>,
    what: &'static str,
    mut each: impl FnMut(usize, &str) -> Result<(), MemberError>,
) -> Result<(), MemberError> {
    for i in 0..archive.len() {
        let member = archive
            .by_index_raw(i)
            .map_err(|source| MemberError::Unreadable {
                what,
                index: i,
                source,
            })?;
        let name = member_name(&member, what, i)?;
        check_member_name(&name)?;
        if member
            .unix_mode()
            .is_some_and(|m| m & 0o170_000 == 0o120_000)
        {
            return Err(MemberError::Symlink(name));
        }
        each(i, &name)?;
    }
    Ok(())
}

/// The name of `member`, number `i` (`what` is what messages call a member).
pub(crate) fn member_name<R: Read>(
    member: &zip::read::ZipFile<'_, R>,
    what: &'static str,
    i: usize,
) -> Result<String, MemberError> {
    member
        .name()
        .map(std::borrow::Cow::into_owned)
        .map_err(|source| MemberError::Name {
            what,
            index: i,
            source,
        })
}

/// A member name must be a plain relative path: no absolute path, no `..` or `.`
/// component, no empty component, no backslash, no NUL, no drive letter.
pub(crate) fn check_member_name(name: &str) -> Result<(), MemberError> {
    let bad = |why| {
        Err(MemberError::BadName {
            name: name.to_owned(),
            why,
        })
    };
    if name.is_empty() {
        return bad(BadName::Empty);
    }
    if name.starts_with('/') {
        return bad(BadName::Absolute);
    }
    if name.contains('\\') || name.contains('\0') || name.contains(':') {
        return bad(BadName::ForbiddenCharacter);
    }
    let body = name.strip_suffix('/').unwrap_or(name);
    for part in body.split('/') {
        match part {
            "" => return bad(BadName::EmptyComponent),
            "." | ".." => return bad(BadName::DotComponent),
            _ => {}
        }
    }
    Ok(())
}

/// Where a member goes, relative to the tree; `None` for what an import never needs
/// (`*.data/scripts`, `headers`, `data`). `*.data/purelib` goes to the root.
fn install_path(name: &str) -> Option<&str> {
    let (first, rest) = name.split_once('/').unwrap_or((name, ""));
    if first.ends_with(".data") {
        let (kind, rest) = rest.split_once('/')?;
        return (kind == "purelib" && !rest.is_empty()).then_some(rest);
    }
    Some(name)
}

/// The module a member installs at the tree's top level, as an import would find it: a
/// directory (`json/…`, a package) or a module file (`json.py`, `json.pyc`); `None`
/// for anything else (metadata, data files, what is not installed).
fn top_level_module(name: &str) -> Option<&str> {
    let target = install_path(name)?;
    match target.split_once('/') {
        Some((dir, _)) if !dir.contains('.') => Some(dir),
        Some(_) => None,
        None => [".py", ".pyc", ".pyw"]
            .iter()
            .find_map(|ext| target.strip_suffix(ext))
            .map(|stem| stem.split('.').next().unwrap_or(stem)),
    }
}

/// Refuses a member that would install a startup hook (`sitecustomize`,
/// `usercustomize`) or a module of the stdlib at the tree's top level.
fn check_top_level(name: &str) -> Result<(), MemberError> {
    let Some(module) = top_level_module(name) else {
        return Ok(());
    };
    let refused = |module: &str| (name.to_owned(), module.to_owned());
    if super::stdlib::STARTUP_HOOKS.contains(&module) {
        let (name, module) = refused(module);
        return Err(MemberError::StartupHook { name, module });
    }
    if super::stdlib::is_stdlib(module) {
        let (name, module) = refused(module);
        return Err(MemberError::ShadowsStdlib { name, module });
    }
    Ok(())
}

/// [`check_top_level`] over the top-level entries of an installed tree: one unpacked
/// before these members were refused is refused before it is mounted.
pub(crate) fn check_tree_top_level(tree: &Dir) -> io::Result<Result<(), MemberError>> {
    for entry in tree.entries()? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let as_member = if entry.file_type()?.is_dir() {
            format!("{name}/")
        } else {
            name
        };
        if let Err(e) = check_top_level(&as_member) {
            return Ok(Err(e));
        }
    }
    Ok(Ok(()))
}

/// `WHEEL` must say `Root-Is-Purelib: true` and carry only `-none-any` tags.
fn check_wheel_metadata(archive: &mut ZipArchive<File>, index: usize) -> Result<(), WheelError> {
    let mut text = String::new();
    archive
        .by_index(index)
        .map_err(WheelError::WheelFile)?
        .take(MAX_WHEEL_FILE)
        .read_to_string(&mut text)
        .map_err(WheelError::WheelFileRead)?;
    let mut purelib = false;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key.trim().to_ascii_lowercase().as_str() {
            "root-is-purelib" => purelib = value.eq_ignore_ascii_case("true"),
            "tag" if !value.ends_with("-none-any") => {
                return Err(WheelError::PlatformTag(value.to_owned()));
            }
            _ => {}
        }
    }
    if !purelib {
        return Err(WheelError::NotPurelib);
    }
    Ok(())
}

/// Directories of a tree are 0755 and its files 0644: a worker under its own uid reads
/// them through the directory its WASI context opened before it gave up the runner's
/// uid. The store above the trees stays 0700, so no other user of the host reaches them.
/// Creates `rel` (and missing parents) under `root`; an empty `rel` is `root` itself.
pub(crate) fn create_dirs(root: &Dir, rel: &Path) -> io::Result<()> {
    if rel.as_os_str().is_empty() {
        return Ok(());
    }
    root.create_dir_with(rel, DirBuilder::new().recursive(true).mode(0o755))
}

/// A new file (0644) at `rel` under `root`, never through a symlink, never over an
/// existing entry.
pub(crate) fn new_tree_file(root: &Dir, rel: &Path) -> io::Result<cap_std::fs::File> {
    root.open_with(
        rel,
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(OFlag::O_NOFOLLOW.bits()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_normalize_like_wheel_files() {
        assert_eq!(normalize("Foo.Bar--baz"), "foo_bar_baz");
        assert_eq!(normalize("tabulate"), "tabulate");
        assert_eq!(
            normalize_dist_info("Tabulate-0.9.0.dist-info"),
            "tabulate-0.9.0.dist-info"
        );
    }

    #[test]
    fn member_names_that_escape_are_refused() {
        for ok in ["pkg/__init__.py", "pkg/", "a-1.0.dist-info/RECORD"] {
            assert!(check_member_name(ok).is_ok(), "{ok}");
        }
        for (bad, expect) in [
            ("../evil.py", BadName::DotComponent),
            ("pkg/../../evil.py", BadName::DotComponent),
            ("/etc/passwd", BadName::Absolute),
            ("pkg\\..\\evil.py", BadName::ForbiddenCharacter),
            ("C:evil.py", BadName::ForbiddenCharacter),
            ("pkg//x.py", BadName::EmptyComponent),
            ("./x.py", BadName::DotComponent),
            ("", BadName::Empty),
        ] {
            match check_member_name(bad) {
                Err(MemberError::BadName { name, why }) => {
                    assert_eq!((name.as_str(), why), (bad, expect));
                }
                other => panic!("{bad:?}: {other:?}"),
            }
        }
        // The text is the one the refusal always had.
        assert_eq!(
            check_member_name("../evil.py").unwrap_err().to_string(),
            "member `../evil.py` escapes the install directory with `.` or `..`"
        );
    }

    /// Each refusal reads as the text it replaced, byte for byte (the package-env
    /// fixtures and the operator read them).
    #[test]
    fn refusals_keep_their_text() {
        let cases: Vec<(WheelError, &str)> = vec![
            (WheelError::NoFileName, "the path has no file name"),
            (
                WheelError::NotAWheelName("x.whl".into()),
                "`x.whl` is not a wheel file name (NAME-VERSION-PYTHON-ABI-PLATFORM.whl); \
                 keep the name the wheel was published under",
            ),
            (
                WheelError::NotThePin {
                    dist: "a".into(),
                    version: "1".into(),
                    pin_name: "b".into(),
                    pin_version: "2".into(),
                },
                "the file is a 1, the pin is b 2",
            ),
            (
                WheelError::PlatformWheel {
                    abi: "cp312".into(),
                    platform: "linux".into(),
                },
                "it is a platform wheel (abi `cp312`, platform `linux`): only pure-Python \
                 wheels (`-none-any`) run in a WASI guest, which cannot load native extensions",
            ),
            (
                WheelError::NotThePinnedSha256 {
                    actual: "aa".into(),
                    pinned: "bb".into(),
                    name: "t".into(),
                    version: "1".into(),
                },
                "sha256 aa is not the pinned bb of t 1",
            ),
            (
                WheelError::NoWheelFile {
                    dist_info: "t-1.dist-info".into(),
                },
                "it has no `t-1.dist-info/WHEEL` file",
            ),
            (
                WheelError::PlatformTag("cp312-cp312-linux".into()),
                "its WHEEL file lists tag `cp312-cp312-linux`: only pure-Python wheels \
                 (`-none-any`) run in a WASI guest",
            ),
            (
                WheelError::NotPurelib,
                "its WHEEL file does not say `Root-Is-Purelib: true`: not a pure-Python wheel",
            ),
            (
                WheelError::TooManyFiles,
                "more than 100000 files in the environment",
            ),
            (
                WheelError::TooManyBytes,
                "the environment unpacks to more than 536870912 bytes",
            ),
            (
                WheelError::Overwrite {
                    name: "a/x".into(),
                    target: "x".into(),
                },
                "member `a/x` would overwrite `x`, which another member or package already \
                 installed",
            ),
            (
                MemberError::Symlink("l".into()).into(),
                "member `l` is a symbolic link",
            ),
            (
                MemberError::NativeExtension("m.so".into()).into(),
                "member `m.so` is a native extension or library: only pure-Python wheels run \
                 in a WASI guest",
            ),
        ];
        for (error, text) in cases {
            assert_eq!(error.to_string(), text, "{error:?}");
        }
    }

    /// What an import would find at the top level: a startup hook or a stdlib module
    /// is refused however the wheel spells it; a package's own modules and its
    /// metadata pass.
    #[test]
    fn top_level_startup_hooks_and_stdlib_modules_are_refused() {
        for name in [
            "sitecustomize.py",
            "usercustomize.pyc",
            "sitecustomize/__init__.py",
            "pkg-1.0.data/purelib/sitecustomize.py",
        ] {
            assert!(
                matches!(check_top_level(name), Err(MemberError::StartupHook { .. })),
                "{name}"
            );
        }
        for name in [
            "json/__init__.py",
            "json.py",
            "os.cpython-312.pyc",
            "pkg-1.0.data/purelib/urllib/request.py",
        ] {
            assert!(
                matches!(
                    check_top_level(name),
                    Err(MemberError::ShadowsStdlib { .. })
                ),
                "{name}"
            );
        }
        for name in [
            "mypkg/json.py",
            "mypkg/__init__.py",
            "mypkg-1.0.dist-info/METADATA",
            "six.py",
            "pkg-1.0.data/scripts/json",
            "README.md",
        ] {
            assert!(check_top_level(name).is_ok(), "{name}");
        }
        assert_eq!(
            check_top_level("json/__init__.py").unwrap_err().to_string(),
            "member `json/__init__.py` is a top-level `json`, a module of the guest's \
             standard library: a package may not shadow the stdlib"
        );
    }

    #[test]
    fn data_members_map_to_purelib_or_are_skipped() {
        assert_eq!(install_path("pkg/x.py"), Some("pkg/x.py"));
        assert_eq!(install_path("a-1.data/purelib/pkg/x.py"), Some("pkg/x.py"));
        assert_eq!(install_path("a-1.data/scripts/run"), None);
        assert_eq!(install_path("a-1.data/purelib/"), None);
    }

    #[test]
    fn wheel_names_parse() {
        let n = parse_name("tabulate-0.9.0-py3-none-any.whl").unwrap();
        assert_eq!(
            (n.dist, n.version, n.abi, n.platform),
            ("tabulate", "0.9.0", "none", "any")
        );
        let n = parse_name("numpy-2.0.0-1-cp312-cp312-manylinux_2_17_x86_64.whl").unwrap();
        assert_eq!(n.abi, "cp312");
        assert!(parse_name("tabulate.whl").is_none());
        assert!(parse_name("tabulate-0.9.0-py3-none-any.zip").is_none());
    }
}
