//! Staging: the run's private directories, copying declared inputs into them, and
//! checking them again after the run.
//!
//! This is the one place that turns host paths into capabilities: the `--inputs`
//! directory and the run directory are opened here (ambient authority, said so below);
//! everything after works through `cap_std::fs::Dir` handles. Inputs are copied, never
//! linked, without following a symlink, and hashed while they are copied: the copy that
//! the guest sees is the copy that was hashed.

use crate::beside::{BesideDir, BesideError, Inputs};
use cap_std::fs::{
    Dir, DirBuilderExt, MetadataExt, OpenOptions, OpenOptionsExt, PermissionsExt as _,
};
use runner_core::request::DeclaredInput;
use sha2::{Digest, Sha256};
use std::io::{self, Read, Write};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

/// Why staging refused to run. Nothing executes after any of these.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    /// The inputs directory could not be opened, or the default one is not a real
    /// directory.
    #[error(transparent)]
    InputsDir(#[from] BesideError),
    #[error(
        "declared input {path} has {links} hard links; inputs must be files of their own (copy it instead of linking it)"
    )]
    Hardlinked { path: String, links: u64 },
    #[error("declared input {path} is missing from {dir}")]
    Missing { path: String, dir: PathBuf },
    #[error(
        "declared input {path} is a symlink (or passes through one); inputs must be regular files"
    )]
    Symlink { path: String },
    #[error("declared input {path} is not a regular file")]
    NotRegular { path: String },
    #[error("declared input {path} has sha256 {actual}, but the request declares {expected}")]
    HashMismatch {
        path: String,
        expected: String,
        actual: String,
    },
    #[error("run directory: {0}")]
    RunDir(io::Error),
    #[error("copying input {path}: {source}")]
    Copy { path: String, source: io::Error },
}

/// The private directories of one run. Removed when dropped.
///
/// The runner works on them through handles: the run's root, opened once when it is
/// created, and `in/` beneath it. The paths are kept for what must name them: the
/// worker process (its `SandboxSpec`), the `/out` tmpfs mount, and the guest's
/// read-only mounts.
#[derive(Debug)]
pub struct RunDir {
    root: tempfile::TempDir,
    /// The run's root directory, as a capability.
    dir: Dir,
    /// Staged inputs, as a capability.
    input: Dir,
    /// Staged inputs; the guest sees this as `/in` (read-only).
    pub in_dir: PathBuf,
    /// Empty at start; the guest sees it as `/out`.
    pub out_dir: PathBuf,
    /// Where the worker writes captured stdout and stderr.
    pub capture_dir: PathBuf,
}

impl RunDir {
    /// Creates a fresh run directory (mode 0700) under `base`, or under the system temp
    /// directory when `base` is `None`, with `in/`, `out/` and `capture/` (0700) in it.
    ///
    /// # Ambient authority
    /// Creates a directory on the host filesystem and opens it through
    /// [`runner_sandbox::host`]; everything beneath it is made through that handle.
    pub fn create(base: Option<&Path>) -> Result<Self, StageError> {
        let mut builder = tempfile::Builder::new();
        builder
            .prefix("runner-run-")
            .permissions(std::fs::Permissions::from_mode(0o700));
        let root = match base {
            Some(base) => builder.tempdir_in(base),
            None => builder.tempdir(),
        }
        .map_err(StageError::RunDir)?;
        let dir = runner_sandbox::host::open_dir(root.path()).map_err(StageError::RunDir)?;
        let mut private = cap_std::fs::DirBuilder::new();
        private.mode(0o700);
        for name in ["in", "out", "capture"] {
            dir.create_dir_with(name, &private)
                .and_then(|()| {
                    // The mode, whatever the umask.
                    dir.set_permissions(name, cap_std::fs::Permissions::from_mode(0o700))
                })
                .map_err(StageError::RunDir)?;
        }
        let input = dir.open_dir("in").map_err(StageError::RunDir)?;
        Ok(Self {
            in_dir: root.path().join("in"),
            out_dir: root.path().join("out"),
            capture_dir: root.path().join("capture"),
            root,
            dir,
            input,
        })
    }

    pub fn path(&self) -> &Path {
        self.root.path()
    }

    /// The run's root directory (where the runner keeps what the guest does not see
    /// beside `in/`, `out/` and `capture/`).
    pub fn dir(&self) -> &Dir {
        &self.dir
    }

    /// `/out` as it is now: opened through the run's root each time, so a handle taken
    /// after the `/out` tmpfs is mounted sees the tmpfs, not the directory beneath it.
    pub fn out(&self) -> io::Result<Dir> {
        self.dir.open_dir("out")
    }

    /// Removes the guest's scratch `/tmp` from `/out` (the worker removes it when the
    /// guest ends; a worker killed first leaves it): scratch is never an output.
    pub fn remove_scratch(&self) {
        if let Ok(out) = self.out() {
            remove_entry(&out, runner_sandbox::runtime::SCRATCH_IN_OUT);
        }
    }
}

/// Removes the entry `name` of `dir`, whatever it is, never following a symlink the
/// guest may have put there (a symlink is removed, not its target).
pub(crate) fn remove_entry(dir: &Dir, name: &str) {
    match dir.symlink_metadata(name) {
        Ok(m) if m.is_dir() => {
            let _ = dir.remove_dir_all(name);
        }
        Ok(_) => {
            let _ = dir.remove_file(name);
        }
        Err(_) => {}
    }
}

/// Where a run's declared inputs are read from ([`crate::beside`]: `--inputs DIR` is
/// used as named; the default `inputs/` beside the request is never followed through a
/// symlink, since `inputs -> /etc` would stage any file the runner can read). Below the
/// root, no component is ever followed through a symlink, either way.
pub type InputsRoot = BesideDir<Inputs>;

/// An input after staging: its declared path and the sha256 of the staged copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagedInput {
    pub path: String,
    pub sha256: String,
    pub bytes: u64,
}

/// Copies every declared input from `root` into the run's `in/`, hashing each copy, and
/// refuses on the first missing, non-regular, symlinked, hard-linked or mismatching file.
///
/// # Ambient authority
/// Opens `root` on the host filesystem ([`BesideDir::open`]).
pub fn stage_inputs(
    inputs: &[DeclaredInput],
    root: &InputsRoot,
    run: &RunDir,
) -> Result<Vec<StagedInput>, StageError> {
    if inputs.is_empty() {
        return Ok(Vec::new());
    }
    let inputs_dir = root.path();
    let src = root.open()?;
    let dst = &run.input;
    let mut staged = Vec::with_capacity(inputs.len());
    for input in inputs {
        let rel = input.relative();
        let mut file = open_regular_nofollow(&src, rel, &input.path, inputs_dir)?;
        let (parent, name) = match rel.rsplit_once('/') {
            Some((parent, name)) => (Some(parent), name),
            None => (None, rel),
        };
        let dst_dir = match parent {
            Some(parent) => {
                dst.create_dir_all(parent)
                    .map_err(|source| StageError::Copy {
                        path: input.path.clone(),
                        source,
                    })?;
                dst.open_dir(parent).map_err(|source| StageError::Copy {
                    path: input.path.clone(),
                    source,
                })?
            }
            None => dst.try_clone().map_err(StageError::RunDir)?,
        };
        let mut out = dst_dir
            .open_with(
                name,
                OpenOptions::new().write(true).create_new(true).mode(0o444),
            )
            .map_err(|source| StageError::Copy {
                path: input.path.clone(),
                source,
            })?;
        let (sha256, bytes) =
            copy_hashing(&mut file, &mut out).map_err(|source| StageError::Copy {
                path: input.path.clone(),
                source,
            })?;
        if sha256 != input.sha256 {
            return Err(StageError::HashMismatch {
                path: input.path.clone(),
                expected: input.sha256.clone(),
                actual: sha256,
            });
        }
        staged.push(StagedInput {
            path: input.path.clone(),
            sha256,
            bytes,
        });
    }
    Ok(staged)
}

/// Opens `rel` under `dir` refusing symlinks at every component and anything that is
/// not a regular file (FIFOs are opened non-blocking so they cannot hang us).
fn open_regular_nofollow(
    dir: &Dir,
    rel: &str,
    declared: &str,
    inputs_dir: &Path,
) -> Result<cap_std::fs::File, StageError> {
    let mut current = dir.try_clone().map_err(StageError::RunDir)?;
    let components: Vec<&str> = rel.split('/').collect();
    let missing = || StageError::Missing {
        path: declared.to_owned(),
        dir: inputs_dir.to_owned(),
    };
    for component in &components[..components.len() - 1] {
        let meta = current.symlink_metadata(component).map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                missing()
            } else {
                StageError::NotRegular {
                    path: declared.to_owned(),
                }
            }
        })?;
        if meta.file_type().is_symlink() {
            return Err(StageError::Symlink {
                path: declared.to_owned(),
            });
        }
        if !meta.is_dir() {
            return Err(StageError::NotRegular {
                path: declared.to_owned(),
            });
        }
        current = current
            .open_dir(component)
            .map_err(|_| StageError::NotRegular {
                path: declared.to_owned(),
            })?;
    }
    let name = components[components.len() - 1];
    let flags = nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK;
    let file = current
        .open_with(
            name,
            OpenOptions::new().read(true).custom_flags(flags.bits()),
        )
        .map_err(|e| match e.raw_os_error() {
            Some(code) if code == nix::errno::Errno::ELOOP as i32 => StageError::Symlink {
                path: declared.to_owned(),
            },
            _ if e.kind() == io::ErrorKind::NotFound => missing(),
            _ => match current.symlink_metadata(name) {
                Ok(m) if m.file_type().is_symlink() => StageError::Symlink {
                    path: declared.to_owned(),
                },
                _ => StageError::NotRegular {
                    path: declared.to_owned(),
                },
            },
        })?;
    let meta = file.metadata().map_err(|source| StageError::Copy {
        path: declared.to_owned(),
        source,
    })?;
    if !meta.is_file() {
        return Err(StageError::NotRegular {
            path: declared.to_owned(),
        });
    }
    // A hard link is a second name for a file that may live anywhere on the filesystem
    // (`ln /etc/shadow inputs/x` needs no symlink), so it is not "a file inside the
    // inputs directory": its bytes, and its digest in a mismatch message, would leak.
    if meta.nlink() > 1 {
        return Err(StageError::Hardlinked {
            path: declared.to_owned(),
            links: meta.nlink(),
        });
    }
    Ok(file)
}

/// Which end of a copy failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CopySide {
    Read,
    Write,
}

/// Copies `src` into `dst`, hashing what passes: (sha256 hex, bytes).
pub(crate) fn copy_hashing(src: &mut impl Read, dst: &mut impl Write) -> io::Result<(String, u64)> {
    copy_hashing_sided(src, dst).map_err(|(_, e)| e)
}

/// [`copy_hashing`], saying which end failed: a caller copying what someone else wrote
/// (the guest's `/out`) treats a failed read differently from a failed write.
pub(crate) fn copy_hashing_sided(
    src: &mut impl Read,
    dst: &mut impl Write,
) -> Result<(String, u64), (CopySide, io::Error)> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = match src.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err((CopySide::Read, e)),
        };
        hasher.update(&buf[..n]);
        dst.write_all(&buf[..n]).map_err(|e| (CopySide::Write, e))?;
        total += n as u64;
    }
    dst.flush().map_err(|e| (CopySide::Write, e))?;
    Ok((runner_core::digest::hex(&hasher.finalize()), total))
}

/// sha256 of one declared input under `root`, read the way staging reads it (no
/// symlinks, no hard links, regular files only), without copying it.
///
/// # Ambient authority
/// Opens `root` on the host filesystem.
pub fn hash_input(root: &InputsRoot, declared_path: &str) -> Result<String, StageError> {
    let src = root.open()?;
    let rel = declared_path.strip_prefix("/in/").unwrap_or(declared_path);
    let file = open_regular_nofollow(&src, rel, declared_path, root.path())?;
    runner_sandbox::digest::sha256_reader(file).map_err(|source| StageError::Copy {
        path: declared_path.to_owned(),
        source,
    })
}

/// What changed under `/in` during the run: each entry is a human-readable finding.
pub fn recheck_inputs(staged: &[StagedInput], run: &RunDir) -> Vec<String> {
    let mut findings = Vec::new();
    let dir = &run.input;
    for input in staged {
        let rel = input.path.strip_prefix("/in/").unwrap_or(&input.path);
        let now = dir
            .open_with(
                rel,
                OpenOptions::new()
                    .read(true)
                    .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits()),
            )
            .and_then(runner_sandbox::digest::sha256_reader);
        match now {
            Ok(sha) if sha == input.sha256 => {}
            Ok(sha) => findings.push(format!(
                "input {} changed during the run (sha256 {} before, {sha} after)",
                input.path, input.sha256
            )),
            Err(e) => findings.push(format!(
                "input {} could not be re-read after the run: {e}",
                input.path
            )),
        }
    }
    let seen = list_files(dir, 32, 10_000);
    for path in seen {
        if !staged.iter().any(|s| s.path == format!("/in/{path}")) {
            findings.push(format!("a new entry /in/{path} appeared during the run"));
        }
    }
    findings
}

/// Every non-directory entry under `dir`, as slash-joined relative paths, without
/// following symlinks (a symlink is listed, never entered). Stops at `max_depth` levels
/// and `max_entries` paths, so a pathological tree cannot cost the runner.
pub(crate) fn list_files(dir: &Dir, max_depth: usize, max_entries: usize) -> Vec<String> {
    fn walk(
        dir: &Dir,
        prefix: &str,
        out: &mut Vec<String>,
        depth: usize,
        max_depth: usize,
        max_entries: usize,
    ) {
        if depth > max_depth || out.len() > max_entries {
            return;
        }
        let Ok(entries) = dir.entries() else { return };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}/{name}")
            };
            match entry.file_type() {
                Ok(t) if t.is_dir() => {
                    if let Ok(sub) = dir.open_dir(&name) {
                        walk(&sub, &path, out, depth + 1, max_depth, max_entries);
                    }
                }
                _ => out.push(path),
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, "", &mut out, 0, max_depth, max_entries);
    out
}

#[cfg(test)]
// reason: tests build fixtures on the host filesystem.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use runner_core::digest::sha256_hex;

    /// Stages `/in/{name}`, declared with the hash of `declared`, from a directory
    /// where it holds `on_disk`.
    fn stage_one(
        name: &str,
        on_disk: &[u8],
        declared: &[u8],
    ) -> (RunDir, Result<Vec<StagedInput>, StageError>) {
        let src = tempfile::tempdir().unwrap();
        std::fs::write(src.path().join(name), on_disk).unwrap();
        let run = RunDir::create(None).unwrap();
        let staged = stage_inputs(
            &[input(&format!("/in/{name}"), declared)],
            &InputsRoot::named(src.path()),
            &run,
        );
        (run, staged)
    }

    fn input(path: &str, content: &[u8]) -> DeclaredInput {
        DeclaredInput {
            path: path.into(),
            sha256: sha256_hex(content),
        }
    }

    #[test]
    fn stages_and_hashes() {
        let src = tempfile::tempdir().unwrap();
        std::fs::write(src.path().join("a.csv"), b"x,y\n1,2\n").unwrap();
        std::fs::create_dir(src.path().join("sub")).unwrap();
        std::fs::write(src.path().join("sub/b.txt"), b"hello").unwrap();
        let run = RunDir::create(None).unwrap();
        let staged = stage_inputs(
            &[
                input("/in/a.csv", b"x,y\n1,2\n"),
                input("/in/sub/b.txt", b"hello"),
            ],
            &InputsRoot::named(src.path()),
            &run,
        )
        .unwrap();
        assert_eq!(staged.len(), 2);
        assert_eq!(
            std::fs::read(run.in_dir.join("sub/b.txt")).unwrap(),
            b"hello"
        );
        assert!(recheck_inputs(&staged, &run).is_empty());
    }

    #[test]
    fn refuses_mismatch_naming_both_hashes() {
        let err = stage_one("a.csv", b"tampered", b"original").1.unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, StageError::HashMismatch { .. }));
        assert!(
            msg.contains(&sha256_hex(b"original")) && msg.contains(&sha256_hex(b"tampered")),
            "{msg}"
        );
    }

    #[test]
    fn refuses_symlinks_missing_and_non_regular() {
        let src = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/etc/passwd", src.path().join("link.csv")).unwrap();
        std::fs::write(src.path().join("real.csv"), b"r").unwrap();
        std::os::unix::fs::symlink("real.csv", src.path().join("inner-link.csv")).unwrap();
        std::fs::create_dir(src.path().join("dir")).unwrap();
        std::os::unix::fs::symlink(src.path().join("dir"), src.path().join("dirlink")).unwrap();
        std::fs::write(src.path().join("dir/f"), b"f").unwrap();
        nix::unistd::mkfifo(
            &src.path().join("fifo"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        let run = RunDir::create(None).unwrap();
        let cases: &[(&str, &[u8], &str)] = &[
            ("/in/link.csv", b"", "Symlink"),
            ("/in/inner-link.csv", b"r", "Symlink"),
            ("/in/dirlink/f", b"f", "Symlink"),
            ("/in/nope.csv", b"", "Missing"),
            ("/in/dir", b"", "NotRegular"),
            ("/in/fifo", b"", "NotRegular"),
        ];
        for (path, content, want) in cases {
            let err = stage_inputs(
                &[input(path, content)],
                &InputsRoot::named(src.path()),
                &run,
            )
            .unwrap_err();
            assert!(format!("{err:?}").starts_with(want), "{path}: {err:?}");
        }
    }

    #[test]
    fn recheck_finds_changes_and_new_files() {
        let (run, staged) = stage_one("a", b"1", b"1");
        let staged = staged.unwrap();
        std::fs::set_permissions(run.in_dir.join("a"), std::fs::Permissions::from_mode(0o644))
            .unwrap();
        std::fs::write(run.in_dir.join("a"), b"2").unwrap();
        std::fs::write(run.in_dir.join("new"), b"x").unwrap();
        let findings = recheck_inputs(&staged, &run);
        assert_eq!(findings.len(), 2, "{findings:?}");
    }

    /// Attack (audit): `inputs -> /etc` beside a request declaring
    /// `/in/passwd`. The default root is refused; the same link named with `--inputs`
    /// is the operator's choice and is followed.
    #[test]
    fn symlinked_default_inputs_root_is_refused() {
        let base = tempfile::tempdir().unwrap();
        let target = tempfile::tempdir().unwrap();
        std::fs::write(target.path().join("secret"), b"s").unwrap();
        std::os::unix::fs::symlink(target.path(), base.path().join("inputs")).unwrap();
        let request = base.path().join("TR-x.md");
        let run = RunDir::create(None).unwrap();
        let declared = [input("/in/secret", b"wrong hash")];
        let err = stage_inputs(&declared, &InputsRoot::beside(&request), &run).unwrap_err();
        assert!(
            matches!(err, StageError::InputsDir(BesideError::NotARealDir { .. })),
            "{err:?}"
        );
        assert!(
            !err.to_string().contains(&sha256_hex(b"s")),
            "the refusal reveals the target's digest: {err}"
        );
        let err = hash_input(&InputsRoot::beside(&request), "/in/secret").unwrap_err();
        assert!(
            matches!(err, StageError::InputsDir(BesideError::NotARealDir { .. })),
            "{err:?}"
        );
        let named = InputsRoot::for_request(Some(&base.path().join("inputs")), &request);
        let staged = stage_inputs(&[input("/in/secret", b"s")], &named, &run).unwrap();
        assert_eq!(staged[0].sha256, sha256_hex(b"s"));
    }

    #[test]
    fn real_default_inputs_root_is_staged() {
        let base = tempfile::tempdir().unwrap();
        std::fs::create_dir(base.path().join("inputs")).unwrap();
        std::fs::write(base.path().join("inputs/a"), b"1").unwrap();
        let run = RunDir::create(None).unwrap();
        let root = InputsRoot::beside(&base.path().join("TR-x.md"));
        let staged = stage_inputs(&[input("/in/a", b"1")], &root, &run).unwrap();
        assert_eq!(staged.len(), 1);
        // A file where the directory should be is refused as not a directory.
        let other = tempfile::tempdir().unwrap();
        std::fs::write(other.path().join("inputs"), b"not a dir").unwrap();
        let root = InputsRoot::beside(&other.path().join("TR-x.md"));
        let err = stage_inputs(&[input("/in/a", b"1")], &root, &run).unwrap_err();
        assert!(
            matches!(err, StageError::InputsDir(BesideError::NotARealDir { .. })),
            "{err:?}"
        );
    }

    /// Attack (audit): a hard link in the inputs directory names a file that
    /// lives elsewhere; it is refused, and the refusal does not reveal its digest.
    #[test]
    fn hardlinked_input_is_refused_without_its_digest() {
        let src = tempfile::tempdir().unwrap();
        let elsewhere = src.path().join("elsewhere");
        std::fs::write(&elsewhere, b"secret").unwrap();
        std::fs::create_dir(src.path().join("inputs")).unwrap();
        std::fs::hard_link(&elsewhere, src.path().join("inputs/x")).unwrap();
        let root = InputsRoot::named(src.path().join("inputs"));
        let run = RunDir::create(None).unwrap();
        let err = stage_inputs(&[input("/in/x", b"guess")], &root, &run).unwrap_err();
        assert!(
            matches!(err, StageError::Hardlinked { links: 2, .. }),
            "{err:?}"
        );
        assert!(!err.to_string().contains(&sha256_hex(b"secret")), "{err}");
        assert!(hash_input(&root, "/in/x").is_err());
    }
}
