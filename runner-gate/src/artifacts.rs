//! Re-deriving a result's hashes from the directory beside it (`TS-…/`, laid out as
//! `crate::result` writes it: `out/…`, `stdout`, `stderr`).
//!
//! Nothing is followed: the directory itself, every entry under `out/` and both
//! streams must be what they claim (a directory, regular files), and `out/` must hold
//! exactly the declared artifacts: a missing one, an extra one and a changed byte are
//! each a REJECT naming the file.

use super::fields::Reasons;
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
use runner_sandbox::digest::sha256_reader;
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::Read;
use std::path::Path;

/// An artifact as the front matter declares it.
#[derive(Debug, Clone)]
pub struct Declared {
    /// Relative to `/out`.
    pub path: String,
    pub sha256: String,
    /// Line of its `path` in the document.
    pub line: usize,
}

/// A stream hash as the front matter declares it.
#[derive(Debug, Clone)]
pub struct DeclaredStream {
    pub sha256: String,
    pub line: usize,
}

/// The stored streams, when present, readable and not larger than the cap (for
/// comparing the excerpts with them).
#[derive(Debug, Default)]
pub struct StoredStreams {
    pub stdout: Option<Vec<u8>>,
    pub stderr: Option<Vec<u8>>,
}

/// What checking the directory found.
#[derive(Debug)]
pub enum Checked {
    /// There is no directory beside the result: nothing was re-derived.
    Absent,
    /// The directory was checked (reasons were added for every problem).
    Present(StoredStreams),
}

/// Checks the artifact directory `at`: the entry `at.1` of a directory the caller holds
/// (`at.0`, or the error opening it gave). `stream_cap` bounds how much of a stream is
/// kept in memory for excerpt comparison (hashing reads everything). Nothing is
/// followed: the entry must itself be a directory, and everything below it is reached
/// through its handle.
pub fn check(
    at: (std::io::Result<&Dir>, &OsStr),
    declared: &[Declared],
    stdout: Option<&DeclaredStream>,
    stderr: Option<&DeclaredStream>,
    max_entries: u64,
    stream_cap: u64,
    r: &mut Reasons,
) -> Checked {
    let (parent, name) = at;
    let shown = runner_core::result::escaped(name);
    let dir = match open_result_dir(parent, name, &shown, r) {
        Ok(dir) => dir,
        Err(checked) => return checked,
    };
    check_entries(&dir, &shown, r);
    let streams = check_streams(&dir, &shown, [stdout, stderr], stream_cap, r);
    check_out(&dir, declared, max_entries, &shown, r);
    Checked::Present(streams)
}

/// Opens the result's directory `name` in `parent` without following it; `Err` is
/// what the check concludes when it cannot (absent, or present with a reason added).
fn open_result_dir(
    parent: std::io::Result<&Dir>,
    name: &OsStr,
    shown: &str,
    r: &mut Reasons,
) -> Result<Dir, Checked> {
    let unreadable = |e: std::io::Error, r: &mut Reasons| {
        r.add(
            "artifacts.unreadable",
            format!("the artifact directory `{shown}/` cannot be read: {e}"),
            None,
        );
        Checked::Present(StoredStreams::default())
    };
    let parent = match parent {
        Ok(parent) => parent,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Checked::Absent),
        Err(e) => return Err(unreadable(e, r)),
    };
    match parent.symlink_metadata(name) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Checked::Absent),
        Err(e) => return Err(unreadable(e, r)),
        Ok(m) if !m.is_dir() => {
            r.add(
                "artifacts.not_directory",
                format!("`{shown}` beside the result is not a directory (a symlink or file); nothing in it can be trusted"),
                None,
            );
            return Err(Checked::Present(StoredStreams::default()));
        }
        Ok(_) => {}
    }
    open_dir_nofollow(parent, name).map_err(|e| {
        r.add(
            "artifacts.unreadable",
            format!("the artifact directory `{shown}/` cannot be opened: {e}"),
            None,
        );
        Checked::Present(StoredStreams::default())
    })
}

/// Every entry of the result's directory is part of a result.
fn check_entries(dir: &Dir, shown: &str, r: &mut Reasons) {
    match dir.entries() {
        Ok(entries) => {
            let mut names: Vec<String> = entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            for name in names {
                if !matches!(name.as_str(), "out" | "stdout" | "stderr") && !is_network_body(&name)
                {
                    r.add(
                        "artifacts.unexpected_entry",
                        format!("`{shown}/{}` is not part of a result (a result directory holds `out/`, `stdout`, `stderr` and the recorded network bodies `net-NNNN.body`)", super::fields::clip(&name)),
                        None,
                    );
                }
            }
        }
        Err(e) => r.add(
            "artifacts.unreadable",
            format!("`{shown}/` cannot be listed: {e}"),
            None,
        ),
    }
}

/// The stored `stdout` and `stderr` against their declared hashes; each kept (up to
/// `stream_cap` bytes) when it matches.
fn check_streams(
    dir: &Dir,
    shown: &str,
    [stdout, stderr]: [Option<&DeclaredStream>; 2],
    stream_cap: u64,
    r: &mut Reasons,
) -> StoredStreams {
    let mut streams = StoredStreams::default();
    for (name, declared, slot) in [
        ("stdout", stdout, &mut streams.stdout),
        ("stderr", stderr, &mut streams.stderr),
    ] {
        let Some(declared) = declared else { continue };
        match read_file(dir, name, stream_cap) {
            Ok(None) => r.add(
                "artifacts.stream_missing",
                format!("the full {name} is not stored: `{shown}/{name}` is missing"),
                declared.line,
            ),
            Ok(Some((sha, bytes))) => {
                if sha != declared.sha256 {
                    r.add(
                        "artifacts.stream_hash_mismatch",
                        format!(
                            "`{shown}/{name}` has sha256 {sha}; the front matter says {}",
                            declared.sha256
                        ),
                        declared.line,
                    );
                } else {
                    *slot = bytes;
                }
            }
            Err(problem) => r.add(
                problem.code,
                format!("`{shown}/{name}` {}", problem.message),
                declared.line,
            ),
        }
    }
    streams
}

/// `out/` holds exactly the declared files, each with its declared hash.
fn check_out(dir: &Dir, declared: &[Declared], max_entries: u64, shown: &str, r: &mut Reasons) {
    let mut found: BTreeMap<String, ()> = BTreeMap::new();
    match dir.symlink_metadata("out") {
        Err(_) => {}
        Ok(m) if !m.is_dir() => r.add(
            "artifacts.not_directory",
            format!("`{shown}/out` is not a directory"),
            None,
        ),
        Ok(_) => match open_dir_nofollow(dir, "out") {
            Ok(out) => found = list_out(&out, max_entries, shown, r),
            Err(e) => r.add(
                "artifacts.unreadable",
                format!("`{shown}/out` cannot be opened: {e}"),
                None,
            ),
        },
    }
    let out = open_dir_nofollow(dir, "out").ok();
    for a in declared {
        if found.remove(&a.path).is_none() {
            r.add(
                "artifacts.missing",
                format!(
                    "artifact `{}` is declared but `{shown}/out/{}` is missing",
                    a.path, a.path
                ),
                a.line,
            );
            continue;
        }
        let Some(out) = &out else { continue };
        match read_file(out, &a.path, 0) {
            Ok(Some((sha, _))) if sha != a.sha256 => r.add(
                "artifacts.hash_mismatch",
                format!(
                    "artifact `{}` has sha256 {sha}; the front matter says {}",
                    a.path, a.sha256
                ),
                a.line,
            ),
            Ok(Some(_)) => {}
            Ok(None) => r.add(
                "artifacts.missing",
                format!("artifact `{}` disappeared while being checked", a.path),
                a.line,
            ),
            Err(problem) => r.add(
                problem.code,
                format!("artifact `{}` {}", a.path, problem.message),
                a.line,
            ),
        }
    }
    for extra in found.keys() {
        r.add(
            "artifacts.undeclared",
            format!("`{shown}/out/{extra}` is not declared in the front matter `artifacts`"),
            None,
        );
    }
}

struct Problem {
    code: &'static str,
    message: String,
}

/// Opens the directory `name` under `dir`, refusing a symlink there.
pub fn open_dir_nofollow<P: AsRef<Path>>(dir: &Dir, name: P) -> std::io::Result<Dir> {
    let flags = nix::fcntl::OFlag::O_DIRECTORY | nix::fcntl::OFlag::O_NOFOLLOW;
    let file = dir.open_with(
        name,
        OpenOptions::new().read(true).custom_flags(flags.bits()),
    )?;
    Ok(Dir::from_std_file(file.into_std()))
}

/// Hashes a regular file under `dir` (no symlink followed); keeps its bytes when it is
/// at most `keep` bytes. `Ok(None)` when it does not exist.
/// A file's sha256 and, when small enough, its bytes.
type Hashed = (String, Option<Vec<u8>>);

fn read_file(dir: &Dir, path: &str, keep: u64) -> Result<Option<Hashed>, Problem> {
    match dir.symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(Problem {
                code: "artifacts.unreadable",
                message: format!("cannot be read: {e}"),
            });
        }
        Ok(m) if m.is_symlink() => {
            return Err(Problem {
                code: "artifacts.symlink",
                message: "is a symlink; a result's files are never links".into(),
            });
        }
        Ok(m) if !m.is_file() => {
            return Err(Problem {
                code: "artifacts.not_regular",
                message: "is not a regular file".into(),
            });
        }
        Ok(_) => {}
    }
    let flags = nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK;
    let unreadable = |e: std::io::Error| Problem {
        code: "artifacts.unreadable",
        message: format!("cannot be read: {e}"),
    };
    let file = dir
        .open_with(
            path,
            OpenOptions::new().read(true).custom_flags(flags.bits()),
        )
        .map_err(unreadable)?;
    let meta = file.metadata().map_err(unreadable)?;
    if !meta.is_file() {
        return Err(Problem {
            code: "artifacts.not_regular",
            message: "is not a regular file".into(),
        });
    }
    if meta.len() <= keep {
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        (&file)
            .take(keep + 1)
            .read_to_end(&mut bytes)
            .map_err(unreadable)?;
        if bytes.len() as u64 <= keep {
            return Ok(Some((runner_core::digest::sha256_hex(&bytes), Some(bytes))));
        }
    }
    let sha = sha256_reader(&file).map_err(unreadable)?;
    Ok(Some((sha, None)))
}

/// Every regular file under `out` (a result's `out/`, opened without following), as
/// slash-joined escaped paths. Each symlink, special file, unreadable entry, directory
/// nested deeper than 32 levels and entry past `max_entries` is a reason (`shown` names
/// the result directory in them): nothing is skipped silently. The gate's [`check`] and
/// `runner verify` both list `out/` with it.
pub fn list_out(out: &Dir, max_entries: u64, shown: &str, r: &mut Reasons) -> BTreeMap<String, ()> {
    let mut found = BTreeMap::new();
    let mut seen = 0u64;
    walk(out, "", 0, &mut seen, max_entries, shown, &mut found, r);
    found
}

#[allow(clippy::too_many_arguments)]
fn walk(
    dir: &Dir,
    prefix: &str,
    depth: usize,
    seen: &mut u64,
    max_entries: u64,
    shown: &str,
    found: &mut BTreeMap<String, ()>,
    r: &mut Reasons,
) {
    let entries = match dir.entries() {
        Ok(e) => e,
        Err(e) => {
            r.add(
                "artifacts.unreadable",
                format!("`{shown}/out/{prefix}` cannot be listed: {e}"),
                None,
            );
            return;
        }
    };
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        *seen += 1;
        if *seen > max_entries {
            r.add(
                "artifacts.too_many_entries",
                format!("`{shown}/out` holds more than {max_entries} entries"),
                None,
            );
            return;
        }
        let raw = entry.file_name();
        let name = runner_core::result::escaped(&raw);
        let path = format!("{prefix}{name}");
        let Ok(file_type) = entry.file_type() else {
            r.add(
                "artifacts.unreadable",
                format!("`{shown}/out/{path}` cannot be read"),
                None,
            );
            continue;
        };
        if file_type.is_symlink() {
            r.add(
                "artifacts.symlink",
                format!("`{shown}/out/{path}` is a symlink; a result's files are never links"),
                None,
            );
        } else if file_type.is_dir() {
            if depth >= 32 {
                r.add(
                    "artifacts.too_many_entries",
                    format!("`{shown}/out/{path}` nests deeper than 32 levels"),
                    None,
                );
                continue;
            }
            match open_dir_nofollow(dir, &raw) {
                Ok(sub) => walk(
                    &sub,
                    &format!("{path}/"),
                    depth + 1,
                    seen,
                    max_entries,
                    shown,
                    found,
                    r,
                ),
                Err(e) => r.add(
                    "artifacts.unreadable",
                    format!("`{shown}/out/{path}` cannot be opened: {e}"),
                    None,
                ),
            }
        } else if file_type.is_file() {
            found.insert(path, ());
        } else {
            r.add(
                "artifacts.not_regular",
                format!("`{shown}/out/{path}` is not a regular file (a FIFO, socket or device)"),
                None,
            );
        }
    }
}

/// A recorded network response body (`net-0001.body`, …), which `runner
/// verify` checks against the lock's egress log.
fn is_network_body(name: &str) -> bool {
    name.strip_prefix("net-")
        .and_then(|n| n.strip_suffix(".body"))
        .is_some_and(|n| n.len() >= 4 && n.bytes().all(|b| b.is_ascii_digit()))
}
