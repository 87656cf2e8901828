//! The Tool Execution Result: collecting `/out`, rendering the document, and
//! publishing it atomically beside its artifacts.
//!
//! Layout in the results directory, for a result id `TS-…`:
//!
//! ```text
//! TS-….md            the result document (appears last, atomically)
//! TS-…/out/…         the artifacts: the guest's /out tree, safe names only
//! TS-…/stdout        the full captured stdout (stdout_sha256 covers exactly these bytes)
//! TS-…/stderr        the full captured stderr
//! ```
//!
//! A result exists when and only when `TS-….md` exists. Everything is written into a
//! private temporary directory inside the results directory first, which is renamed
//! to `TS-…` without replacing anything, then the companion files are created (never
//! replacing), then all of it is made durable at once (one round of fsyncs after every
//! file is written, not one per file), and only then is the document linked into
//! place, also without replacing. A crash at any point leaves either no `TS-….md` or a complete one; two
//! runs never share a name, and a name someone else holds is skipped, not fought over.

pub mod collect;
/// Rendering the document is `runner-core`'s (no I/O).
use runner_core::result::utc_timestamp;

use crate::beside::{BesideDir, BesideError, Results};
use cap_std::fs::Dir;
use cap_std::fs::OpenOptions;
use std::ffi::OsStr;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Publishing failed (the run's outputs are not lost: the message names where they are).
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// The results directory could not be opened (or a staging directory made in it),
    /// or the default one is not a real directory.
    #[error(transparent)]
    ResultsDir(BesideError),
    #[error("writing the result into {dir}: {source}")]
    Write { dir: PathBuf, source: io::Error },
    #[error("the result could not be assembled: {0}")]
    Render(String),
    #[error("no free result name for {base} after {tries} tries")]
    NoName { base: String, tries: usize },
}

/// What a result renders to once its id is known: the document, and companion files
/// (by file name in the results directory) written before it.
#[derive(Debug, Default)]
pub struct Rendered {
    pub document: String,
    pub extras: Vec<(String, Vec<u8>)>,
}

impl From<String> for Rendered {
    fn from(document: String) -> Self {
        Self {
            document,
            extras: Vec::new(),
        }
    }
}

/// Where results are published ([`crate::beside`]: `--results DIR` is used as named;
/// the default `results/` beside the request is created or opened without following a
/// symlink, since `results -> /etc/cron.d` would put our files there).
pub type ResultsRoot = BesideDir<Results>;

/// A result being assembled in a private temporary directory of the results directory.
/// Every operation goes through handles opened once; a staging directory that is never
/// published is removed when this is dropped.
pub struct Staging {
    results_path: PathBuf,
    results: Dir,
    /// The staging directory's name inside `results`; `None` once published.
    tmp_name: Option<String>,
    tmp: Dir,
}

impl Staging {
    /// Opens (creating if needed) the results directory and a private staging directory
    /// inside it, with an empty `out/`.
    ///
    /// # Ambient authority
    /// Creates and opens directories on the host filesystem.
    pub fn new(root: &ResultsRoot) -> Result<Self, PublishError> {
        let results = root.open().map_err(PublishError::ResultsDir)?;
        let results_path = root.path().to_owned();
        let dir_error = |source| PublishError::ResultsDir(root.failed(source));
        let mut tmp_name = None;
        for attempt in 0..100u32 {
            let name = format!("{STAGING_PREFIX}{}-{}", std::process::id(), unique(attempt));
            match results.create_dir(&name) {
                Ok(()) => {
                    tmp_name = Some(name);
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(dir_error(e)),
            }
        }
        let tmp_name = tmp_name.ok_or_else(|| {
            dir_error(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "no free name for a staging directory",
            ))
        })?;
        let tmp = results.open_dir(&tmp_name).map_err(dir_error)?;
        let staging = Self {
            results_path: results_path.clone(),
            results,
            tmp_name: Some(tmp_name),
            tmp,
        };
        staging
            .tmp
            .create_dir("out")
            .map_err(|source| PublishError::Write {
                dir: results_path.clone(),
                source,
            })?;
        Ok(staging)
    }

    /// The staging directory's `out/`, which receives the artifacts.
    pub fn out_dir(&self) -> Result<Dir, PublishError> {
        self.tmp
            .open_dir("out")
            .map_err(|source| self.write_error(source))
    }

    fn write_error(&self, source: io::Error) -> PublishError {
        PublishError::Write {
            dir: self.results_path.clone(),
            source,
        }
    }

    /// Writes a stream file (`stdout`, `stderr`) into the staging directory.
    pub fn write_stream(&self, name: &str, bytes: &[u8]) -> Result<(), PublishError> {
        write_new(&self.tmp, name, bytes).map_err(|e| self.write_error(e))
    }

    /// Publishes: picks a free name `base`, `base-2`, `base-3`, …, renames the staging
    /// directory to it, renders the document with that id, writes its companion files
    /// and links `id.md` into place. A name is free only when the directory, the
    /// document and every companion file are: when any of them is taken (by a concurrent
    /// run, or by someone who pre-created it), what was claimed under that name is
    /// given back and the next name is tried. A failure leaves nothing behind. Returns
    /// the document's path.
    pub fn publish(
        self,
        base: &str,
        render: impl Fn(&str) -> Rendered,
    ) -> Result<PathBuf, PublishError> {
        self.publish_with(base, |id| {
            Ok::<_, std::convert::Infallible>((render(id), ()))
        })
        .map(|(path, ())| path)
    }

    /// [`Staging::publish`] with a renderer that can fail (nothing is published then)
    /// and that returns a value besides the files (the sealed lock), handed back with
    /// the document's path.
    pub fn publish_with<T, E: std::fmt::Display>(
        mut self,
        base: &str,
        render: impl Fn(&str) -> Result<(Rendered, T), E>,
    ) -> Result<(PathBuf, T), PublishError> {
        let Some(tmp_name) = self.tmp_name.clone() else {
            return Err(PublishError::NoName {
                base: base.to_owned(),
                tries: 0,
            });
        };
        const TRIES: usize = 1000;
        for n in 1..=TRIES {
            let id = if n == 1 {
                base.to_owned()
            } else {
                format!("{base}-{n}")
            };
            let doc_name = format!("{id}.md");
            if self.results.symlink_metadata(&doc_name).is_ok() {
                continue;
            }
            match rename_noreplace(&self.results, &tmp_name, &id) {
                Ok(()) => {}
                Err(e) if is_taken(&e) => continue,
                Err(e) => return Err(self.write_error(e)),
            }
            let written = match render(&id) {
                Ok((rendered, value)) => self
                    .write_set(&id, &doc_name, rendered)
                    .map(|()| value)
                    .map_err(|e| self.write_error(e)),
                Err(e) => Err(PublishError::Render(e.to_string())),
            };
            match written {
                Ok(value) => {
                    self.tmp_name = None;
                    return Ok((self.results_path.join(doc_name), value));
                }
                Err(e) => {
                    // Give the claimed directory back to the staging name (dropping
                    // `self` then removes it); if even that fails, remove it here:
                    // nothing is left behind either way.
                    if rename_noreplace(&self.results, &id, &tmp_name).is_err() {
                        let _ = self.results.remove_dir_all(&id);
                        self.tmp_name = None;
                        return Err(e);
                    }
                    let taken =
                        matches!(&e, PublishError::Write { source, .. } if is_taken(source));
                    if !taken {
                        return Err(e);
                    }
                }
            }
        }
        Err(PublishError::NoName {
            base: base.to_owned(),
            tries: TRIES,
        })
    }

    /// Writes the companions and the document of `id`, whose directory is claimed. On
    /// any error, removes what it wrote (the caller gives the directory back).
    fn write_set(&self, id: &str, doc_name: &str, rendered: Rendered) -> io::Result<()> {
        let Rendered {
            document: text,
            extras,
        } = rendered;
        // Companion files (lock, statement, signature) go in before the document: a
        // document never exists without them. create_new refuses a name that is taken.
        let mut written: Vec<&str> = Vec::new();
        let undo = |written: &[&str]| {
            for name in written {
                let _ = self.results.remove_file(name);
            }
        };
        for (name, bytes) in &extras {
            if let Err(e) = write_new(&self.results, name, bytes) {
                undo(&written);
                return Err(e);
            }
            written.push(name);
        }
        let doc_tmp = format!("{DOC_TMP_PREFIX}{}-{id}.md", std::process::id());
        if let Err(e) = write_new(&self.results, &doc_tmp, text.as_bytes()) {
            undo(&written);
            return Err(e);
        }
        // The one durable point: everything the document refers to is on disk before
        // the document is linked.
        let mut set = written.clone();
        set.push(&doc_tmp);
        if let Err(e) = self.make_durable(&set) {
            let _ = self.results.remove_file(&doc_tmp);
            undo(&written);
            return Err(e);
        }
        // link() never replaces: a document someone else put there is never overwritten.
        let linked = self.results.hard_link(&doc_tmp, &self.results, doc_name);
        let _ = self.results.remove_file(&doc_tmp);
        if let Err(e) = linked {
            undo(&written);
            return Err(e);
        }
        runner_sandbox::durable::sync_dir(&self.results)
    }
}

impl Staging {
    /// Makes the claimed result directory (`self.tmp`, renamed: artifacts, streams) and
    /// the files `names` in the results directory durable, with the directory entries
    /// that name them.
    ///
    /// Nothing was synced while it was written: every file's write-back is started
    /// first, then every file and directory is fsynced at once ([`sync_all_at_once`]);
    /// an fsync per file as it was written cost a commit each (8 for a hello-world
    /// result, 12-38 ms measured on the shared bench machine). Crash safety is
    /// unchanged: the document is linked only after every fsync has returned.
    fn make_durable(&self, names: &[&str]) -> io::Result<()> {
        let mut files = Vec::new();
        let mut dirs = Vec::new();
        open_tree(&self.tmp, &mut files, &mut dirs)?;
        for name in names {
            files.push(self.results.open(name)?);
        }
        for file in &files {
            // A hint (it starts write-back now, for all files at once): failure is
            // harmless, the fsync below is what makes the data durable.
            let _ = nix::fcntl::posix_fadvise(
                file,
                0,
                0,
                nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED,
            );
        }
        files.append(&mut dirs);
        files.push(self.results.open(".")?);
        sync_all_at_once(&files)
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if let Some(name) = self.tmp_name.take() {
            let _ = self.results.remove_dir_all(name);
        }
    }
}

/// A name (file or directory) that someone else holds.
fn is_taken(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::AlreadyExists
        || e.raw_os_error() == Some(nix::errno::Errno::ENOTEMPTY as i32)
}

/// A value unlikely to repeat between the processes and attempts that make staging
/// names (their uniqueness is enforced by `mkdir`, not by this).
pub(crate) fn unique(attempt: u32) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "{nanos:x}{:x}{attempt:x}",
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// Creates `name` in `dir` (never replacing anything) and writes `bytes`; publishing
/// syncs it with the rest of the set ([`Staging::make_durable`]).
fn write_new(dir: &Dir, name: &str, bytes: &[u8]) -> io::Result<()> {
    let mut f = dir.open_with(name, OpenOptions::new().write(true).create_new(true))?;
    f.write_all(bytes)
}

fn rename_noreplace(dir: &Dir, from: &str, to: &str) -> io::Result<()> {
    use std::os::fd::AsFd;
    nix::fcntl::renameat2(
        dir.as_fd(),
        from,
        dir.as_fd(),
        to,
        nix::fcntl::RenameFlags::RENAME_NOREPLACE,
    )
    .map_err(io::Error::from)
}

/// Threads [`sync_all_at_once`] uses at most.
const SYNC_THREADS: usize = 16;

/// `fsync`s every file (or directory) of `files`, all at once: from up to
/// [`SYNC_THREADS`] threads, each syncing its share in turn, and returns once every one
/// is done (the first error, if any). On ext4 concurrent fsyncs wait for one journal
/// commit together; one after another, each can wait for a commit of its own (with
/// delayed allocation a file's blocks are allocated at write-back, a new transaction
/// each): 8 fsyncs took 5-10 ms each, 60 ms together, with other builds writing to the
/// disk (`strace -T`). The caller gets no more and no less durability than from a loop.
fn sync_all_at_once(files: &[cap_std::fs::File]) -> io::Result<()> {
    if files.len() <= 1 {
        return files.iter().try_for_each(cap_std::fs::File::sync_all);
    }
    let share = files.len().div_ceil(SYNC_THREADS);
    std::thread::scope(|scope| {
        let threads: Vec<_> = files
            .chunks(share)
            .map(|part| scope.spawn(|| part.iter().try_for_each(cap_std::fs::File::sync_all)))
            .collect();
        threads.into_iter().try_for_each(|thread| {
            thread
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("an fsync thread panicked")))
        })
    })
}

/// Opens every regular file and directory of a staged tree, `dir` itself included
/// (the tree is the runner's own: collected artifacts never include symlinks).
fn open_tree(
    dir: &Dir,
    files: &mut Vec<cap_std::fs::File>,
    dirs: &mut Vec<cap_std::fs::File>,
) -> io::Result<()> {
    for entry in dir.entries()? {
        let entry = entry?;
        let kind = entry.file_type()?;
        if kind.is_dir() {
            open_tree(&entry.open_dir()?, files, dirs)?;
        } else if kind.is_file() {
            files.push(entry.open()?);
        }
    }
    dirs.push(dir.open(".")?);
    Ok(())
}

/// The id of a result for a request: `TS-YYYYMMDD-HHMMSSZ-<request_id>`.
pub fn result_id(now: time::OffsetDateTime, request_id: &str) -> String {
    // The timestamp's digits without its separators: `YYYYMMDD-HHMMSSZ`.
    let compact = utc_timestamp(now).replace(['-', ':'], "").replace('T', "-");
    format!("TS-{compact}-{request_id}")
}

/// A staging directory: `.tmp-result-<pid>-<unique>`.
const STAGING_PREFIX: &str = ".tmp-result-";
/// A document written before it is linked into place: `.tmp-doc-<pid>-<id>.md`.
const DOC_TMP_PREFIX: &str = ".tmp-doc-";

/// Removes the work in progress that processes which are gone left in a results
/// directory `dir` (a host SIGKILLed mid-publish): only the names [`Staging`] makes
/// (`.tmp-result-<pid>-…` directories, `.tmp-doc-<pid>-….md` files), and only when
/// process `<pid>` no longer exists or is this process itself (call it before this
/// process publishes anything: a pid reused from a dead host, as in a container that
/// restarts). A temporary of a live process (a peer host on the same directory) is
/// never touched. Returns how many entries were removed.
///
/// # Ambient authority
/// Opens `dir` by path once, then lists and removes its entries through that handle.
pub fn sweep_stale_temporaries(dir: &Path) -> usize {
    let Ok(dir) = runner_sandbox::host::open_dir(dir) else {
        return 0;
    };
    let Ok(entries) = dir.entries() else {
        return 0;
    };
    let own = std::process::id();
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let (rest, is_dir) = if let Some(rest) = name.strip_prefix(STAGING_PREFIX) {
            (rest, true)
        } else if let Some(rest) = name.strip_prefix(DOC_TMP_PREFIX)
            && name.ends_with(".md")
        {
            (rest, false)
        } else {
            continue;
        };
        let Some(pid) = rest
            .split_once('-')
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let dead = pid == own
            || i32::try_from(pid).is_ok_and(|p| {
                p > 0
                    && nix::sys::signal::kill(nix::unistd::Pid::from_raw(p), None)
                        == Err(nix::errno::Errno::ESRCH)
            });
        if !dead {
            continue;
        }
        // Never through a symlink: only the kind of entry that name stands for.
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let gone = if is_dir && kind.is_dir() {
            dir.remove_dir_all(name)
        } else if !is_dir && kind.is_file() {
            dir.remove_file(name)
        } else {
            continue;
        };
        if gone.is_ok() {
            removed += 1;
        }
    }
    removed
}

/// True for names the results directory uses for work in progress.
pub fn is_temporary_name(name: &OsStr) -> bool {
    name.to_str().is_some_and(|n| n.starts_with(".tmp-"))
}

#[cfg(test)]
// reason: tests build fixtures on the host filesystem.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    #[test]
    fn publishes_and_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let mut paths = Vec::new();
        for _ in 0..3 {
            let s = Staging::new(&ResultsRoot::named(dir.path())).unwrap();
            s.write_stream("stdout", b"hi").unwrap();
            paths.push(
                s.publish("TS-1-x", |id| format!("id {id}\n").into())
                    .unwrap(),
            );
        }
        let names: Vec<String> = paths
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["TS-1-x.md", "TS-1-x-2.md", "TS-1-x-3.md"]);
        assert_eq!(std::fs::read_to_string(&paths[1]).unwrap(), "id TS-1-x-2\n");
        assert_eq!(
            std::fs::read(dir.path().join("TS-1-x-3/stdout")).unwrap(),
            b"hi"
        );
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .filter(|e| is_temporary_name(&e.file_name()))
            .collect();
        assert!(leftovers.is_empty());
    }

    #[test]
    fn concurrent_publishes_get_distinct_names() {
        let dir = tempfile::tempdir().unwrap();
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let d = dir.path().to_owned();
                std::thread::spawn(move || {
                    let s = Staging::new(&ResultsRoot::named(&d)).unwrap();
                    s.write_stream("stdout", format!("{i}").as_bytes()).unwrap();
                    s.publish("TS-1-x", |id| Rendered {
                        document: format!("{id}\n"),
                        extras: vec![(format!("{id}.lock.json"), b"{}".to_vec())],
                    })
                    .unwrap()
                })
            })
            .collect();
        let mut paths: Vec<PathBuf> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        paths.sort();
        paths.dedup();
        assert_eq!(paths.len(), 8);
        for p in &paths {
            let id = p.file_stem().unwrap().to_string_lossy().into_owned();
            assert_eq!(std::fs::read_to_string(p).unwrap(), format!("{id}\n"));
            assert!(dir.path().join(&id).join("stdout").exists());
            assert!(dir.path().join(format!("{id}.lock.json")).exists());
        }
    }

    #[test]
    fn unwritable_results_dir_is_a_clear_error() {
        let err = Staging::new(&ResultsRoot::named("/proc/runner-cannot-write-here"))
            .err()
            .unwrap();
        assert!(
            err.to_string().contains("/proc/runner-cannot-write-here"),
            "{err}"
        );
    }

    /// The files a publish of `id` writes, as `exec` names them.
    fn full_set(id: &str) -> Rendered {
        Rendered {
            document: format!("{id}\n"),
            extras: vec![
                (format!("{id}.lock.json"), b"{}".to_vec()),
                (format!("{id}.intoto.json"), b"{}".to_vec()),
            ],
        }
    }

    /// A host SIGKILLed mid-publish leaves `.tmp-…` entries; the next host
    /// sweeps those of dead processes (and of its own pid, reused), never a live
    /// process's, never another name, never through a symlink.
    #[test]
    fn stale_temporaries_of_dead_processes_are_swept_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let own = std::process::id();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        std::fs::create_dir(d.join(format!(".tmp-result-{own}-a"))).unwrap();
        std::fs::write(d.join(format!(".tmp-result-{own}-a/stdout")), b"x").unwrap();
        std::fs::create_dir(d.join(format!(".tmp-result-{dead}-b"))).unwrap();
        std::fs::write(d.join(format!(".tmp-doc-{dead}-TS-1-x.md")), b"x").unwrap();
        // pid 1 is alive: a peer's work in progress.
        std::fs::create_dir(d.join(".tmp-result-1-c")).unwrap();
        std::fs::write(d.join(".tmp-doc-1-TS-1-y.md"), b"x").unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("keep"), b"x").unwrap();
        std::os::unix::fs::symlink(outside.path(), d.join(format!(".tmp-result-{own}-lnk")))
            .unwrap();
        std::fs::write(d.join("TS-1-z.md"), b"x").unwrap();
        std::fs::write(d.join(".tmp-other"), b"x").unwrap();
        assert_eq!(sweep_stale_temporaries(d), 3);
        assert_eq!(
            names_in(d),
            [
                ".tmp-doc-1-TS-1-y.md".to_owned(),
                ".tmp-other".to_owned(),
                ".tmp-result-1-c".to_owned(),
                format!(".tmp-result-{own}-lnk"),
                "TS-1-z.md".to_owned(),
            ]
        );
        assert!(outside.path().join("keep").exists());
    }

    fn names_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// Attack (audit): someone pre-creates the companion files of the
    /// coming result names (`TS-<next second>-….lock.json`, `.intoto.json`). Publishing
    /// used to fail with `File exists` and leave an orphan `TS-…/` directory; it must
    /// move on to a free name for the whole set and leave the squatted files alone.
    #[test]
    fn squatted_companion_names_move_the_whole_set_on() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("TS-1-x.lock.json"), b"squat").unwrap();
        std::fs::write(dir.path().join("TS-1-x-2.intoto.json"), b"squat").unwrap();
        std::fs::create_dir(dir.path().join("TS-1-x-3")).unwrap();
        std::fs::write(dir.path().join("TS-1-x-3/x"), b"squat").unwrap();
        let squat = format!(".tmp-doc-{}-TS-1-x-4.md", std::process::id());
        std::fs::write(dir.path().join(&squat), b"squat").unwrap();
        let s = Staging::new(&ResultsRoot::named(dir.path())).unwrap();
        s.write_stream("stdout", b"hi").unwrap();
        let path = s.publish("TS-1-x", full_set).unwrap();
        assert_eq!(path, dir.path().join("TS-1-x-5.md"));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "TS-1-x-5\n");
        assert_eq!(
            names_in(dir.path()),
            [
                squat.as_str(),
                "TS-1-x-2.intoto.json",
                "TS-1-x-3",
                "TS-1-x-5",
                "TS-1-x-5.intoto.json",
                "TS-1-x-5.lock.json",
                "TS-1-x-5.md",
                "TS-1-x.lock.json",
            ]
        );
        assert_eq!(
            std::fs::read(dir.path().join("TS-1-x.lock.json")).unwrap(),
            b"squat"
        );
        assert_eq!(names_in(&dir.path().join("TS-1-x-3")), ["x"]);
        assert_eq!(
            std::fs::read(dir.path().join("TS-1-x-5/stdout")).unwrap(),
            b"hi"
        );
    }

    /// A publish that cannot finish leaves nothing in the results directory.
    #[test]
    fn a_failed_publish_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let s = Staging::new(&ResultsRoot::named(dir.path())).unwrap();
        s.write_stream("stdout", b"hi").unwrap();
        // A companion name that cannot be created for a reason other than "taken".
        let err = s
            .publish("TS-1-x", |id| Rendered {
                document: format!("{id}\n"),
                extras: vec![
                    (format!("{id}.lock.json"), b"{}".to_vec()),
                    (format!("{id}/../../escape.json"), b"{}".to_vec()),
                ],
            })
            .unwrap_err();
        assert!(matches!(err, PublishError::Write { .. }), "{err:?}");
        assert!(
            names_in(dir.path()).is_empty(),
            "{:?}",
            names_in(dir.path())
        );
        // An unpublished staging directory is removed when dropped.
        let s = Staging::new(&ResultsRoot::named(dir.path())).unwrap();
        s.write_stream("stdout", b"hi").unwrap();
        drop(s);
        assert!(
            names_in(dir.path()).is_empty(),
            "{:?}",
            names_in(dir.path())
        );
    }

    /// Attack (audit): `results -> elsewhere` beside a request. The default
    /// results directory is never followed through a symlink; one named with
    /// `--results` is the operator's choice and is.
    #[test]
    fn symlinked_default_results_dir_is_refused() {
        let base = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), base.path().join("results")).unwrap();
        let request = base.path().join("TR-x.md");
        let err = Staging::new(&ResultsRoot::beside(&request)).err().unwrap();
        assert!(
            matches!(
                err,
                PublishError::ResultsDir(BesideError::NotARealDir { .. })
            ),
            "{err:?}"
        );
        assert!(names_in(elsewhere.path()).is_empty());
        let named = ResultsRoot::for_request(Some(&base.path().join("results")), &request);
        let s = Staging::new(&named).unwrap();
        s.publish("TS-1-x", full_set).unwrap();
        assert!(elsewhere.path().join("TS-1-x.md").is_file());
        // A real default directory is created and used.
        let fresh = tempfile::tempdir().unwrap();
        let s = Staging::new(&ResultsRoot::beside(&fresh.path().join("TR-x.md"))).unwrap();
        let path = s.publish("TS-1-x", full_set).unwrap();
        assert_eq!(path, fresh.path().join("results/TS-1-x.md"));
    }

    #[test]
    fn ids() {
        let t = time::macros::datetime!(2026-02-09 16:10:30 UTC);
        assert_eq!(result_id(t, "TR-x"), "TS-20260209-161030Z-TR-x");
        assert_eq!(utc_timestamp(t), "2026-02-09T16:10:30Z");
    }
}
