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
//! to `TS-…` without replacing anything, and only then is the document linked into
//! place, also without replacing. A crash at any point leaves either no `TS-….md` or a
//! complete one; two runs never share a name.

pub mod collect;
pub mod render;

use std::ffi::OsStr;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Publishing failed (the run's outputs are not lost: the message names where they are).
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error("results directory {dir}: {source}")]
    ResultsDir { dir: PathBuf, source: io::Error },
    #[error("writing the result into {dir}: {source}")]
    Write { dir: PathBuf, source: io::Error },
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

/// A result being assembled in a private temporary directory of the results directory.
pub struct Staging {
    results_dir: PathBuf,
    tmp: Option<tempfile::TempDir>,
}

impl Staging {
    /// Creates `results_dir` if needed and a private staging directory inside it.
    ///
    /// # Ambient authority
    /// Creates directories under `results_dir` on the host filesystem.
    pub fn new(results_dir: &Path) -> Result<Self, PublishError> {
        std::fs::create_dir_all(results_dir).map_err(|source| PublishError::ResultsDir {
            dir: results_dir.to_owned(),
            source,
        })?;
        let tmp = tempfile::Builder::new()
            .prefix(".tmp-result-")
            .tempdir_in(results_dir)
            .map_err(|source| PublishError::ResultsDir {
                dir: results_dir.to_owned(),
                source,
            })?;
        std::fs::create_dir(tmp.path().join("out")).map_err(|source| PublishError::Write {
            dir: tmp.path().to_owned(),
            source,
        })?;
        Ok(Self {
            results_dir: results_dir.to_owned(),
            tmp: Some(tmp),
        })
    }

    /// The staging directory (its `out/` receives the artifacts).
    pub fn path(&self) -> &Path {
        self.tmp
            .as_ref()
            .map_or(self.results_dir.as_path(), |t| t.path())
    }

    /// Writes a stream file (`stdout`, `stderr`) into the staging directory.
    pub fn write_stream(&self, name: &str, bytes: &[u8]) -> Result<(), PublishError> {
        let path = self.path().join(name);
        let werr = |source| PublishError::Write {
            dir: self.path().to_owned(),
            source,
        };
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(werr)?;
        f.write_all(bytes).map_err(werr)?;
        f.sync_all().map_err(werr)?;
        Ok(())
    }

    /// Publishes: picks a free name `base`, `base-2`, `base-3`, …, renames the staging
    /// directory to it, renders the document with that id, and links `id.md` into place.
    /// Returns the document's path.
    pub fn publish(
        mut self,
        base: &str,
        render: impl Fn(&str) -> Rendered,
    ) -> Result<PathBuf, PublishError> {
        let werr = |dir: &Path| {
            let dir = dir.to_owned();
            move |source| PublishError::Write { dir, source }
        };
        let tmp = self.tmp.take().ok_or_else(|| PublishError::NoName {
            base: base.to_owned(),
            tries: 0,
        })?;
        let tmp_path = tmp.keep();
        sync_tree(&tmp_path).map_err(werr(&tmp_path))?;
        const TRIES: usize = 1000;
        for n in 1..=TRIES {
            let id = if n == 1 {
                base.to_owned()
            } else {
                format!("{base}-{n}")
            };
            let doc_path = self.results_dir.join(format!("{id}.md"));
            if doc_path.symlink_metadata().is_ok() {
                continue;
            }
            let dir_path = self.results_dir.join(&id);
            match rename_noreplace(&tmp_path, &dir_path) {
                Ok(()) => {}
                Err(e)
                    if e.raw_os_error() == Some(nix::errno::Errno::EEXIST as i32)
                        || e.raw_os_error() == Some(nix::errno::Errno::ENOTEMPTY as i32) =>
                {
                    continue;
                }
                Err(e) => {
                    let _ = std::fs::remove_dir_all(&tmp_path);
                    return Err(PublishError::Write {
                        dir: self.results_dir.clone(),
                        source: e,
                    });
                }
            }
            let Rendered {
                document: text,
                extras,
            } = render(&id);
            // Companion files (lock, statement, signature) go in before the document:
            // a document never exists without them. Names are derived from the id we
            // hold, so nobody else writes them; create_new refuses a leftover.
            for (name, bytes) in &extras {
                let path = self.results_dir.join(name);
                let written = (|| -> io::Result<()> {
                    let mut f = std::fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(&path)?;
                    f.write_all(bytes)?;
                    f.sync_all()
                })();
                written.map_err(|source| PublishError::Write {
                    dir: self.results_dir.clone(),
                    source,
                })?;
            }
            let doc_tmp = self.results_dir.join(format!(".tmp-{id}.md"));
            let written = (|| -> io::Result<()> {
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&doc_tmp)?;
                f.write_all(text.as_bytes())?;
                f.sync_all()?;
                Ok(())
            })();
            if let Err(e) = written {
                let _ = std::fs::remove_file(&doc_tmp);
                return Err(PublishError::Write {
                    dir: self.results_dir.clone(),
                    source: e,
                });
            }
            // link() never replaces. A runner writes `id.md` only after claiming the
            // directory `id`, which we hold, so a clash here means someone else wrote it.
            let linked = std::fs::hard_link(&doc_tmp, &doc_path);
            let _ = std::fs::remove_file(&doc_tmp);
            match linked {
                Ok(()) => {
                    sync_dir(&self.results_dir).map_err(werr(&self.results_dir))?;
                    return Ok(doc_path);
                }
                Err(e) => {
                    return Err(PublishError::Write {
                        dir: self.results_dir.clone(),
                        source: e,
                    });
                }
            }
        }
        let _ = std::fs::remove_dir_all(&tmp_path);
        Err(PublishError::NoName {
            base: base.to_owned(),
            tries: TRIES,
        })
    }
}

fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    nix::fcntl::renameat2(
        nix::fcntl::AT_FDCWD,
        from,
        nix::fcntl::AT_FDCWD,
        to,
        nix::fcntl::RenameFlags::RENAME_NOREPLACE,
    )
    .map_err(io::Error::from)
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// fsyncs every directory of a staged tree (files were synced when written).
fn sync_tree(dir: &Path) -> io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            sync_tree(&entry.path())?;
        }
    }
    sync_dir(dir)
}

/// The id of a result for a request: `TS-YYYYMMDD-HHMMSSZ-<request_id>`.
pub fn result_id(now: time::OffsetDateTime, request_id: &str) -> String {
    format!(
        "TS-{:04}{:02}{:02}-{:02}{:02}{:02}Z-{request_id}",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second()
    )
}

/// `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_timestamp(now: time::OffsetDateTime) -> String {
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second()
    )
}

/// True for names the results directory uses for work in progress.
pub fn is_temporary_name(name: &OsStr) -> bool {
    name.to_str().is_some_and(|n| n.starts_with(".tmp-"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publishes_and_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let mut paths = Vec::new();
        for _ in 0..3 {
            let s = Staging::new(dir.path()).unwrap();
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
                    let s = Staging::new(&d).unwrap();
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
        let err = Staging::new(Path::new("/proc/runner-cannot-write-here"))
            .err()
            .unwrap();
        assert!(
            err.to_string().contains("/proc/runner-cannot-write-here"),
            "{err}"
        );
    }

    #[test]
    fn ids() {
        let t = time::macros::datetime!(2026-02-09 16:10:30 UTC);
        assert_eq!(result_id(t, "TR-x"), "TS-20260209-161030Z-TR-x");
        assert_eq!(utc_timestamp(t), "2026-02-09T16:10:30Z");
    }
}
