//! Collecting `/out` after a run: walk it without following a symlink, copy each
//! regular file into the result's artifact directory while hashing it, and report
//! everything else (symlinks, FIFOs, sockets, odd names) as findings instead.

use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
use std::io;

/// The artifact record, the safe-name rule and the escaping of names in findings are
/// `runner-core`'s (no I/O): the result document and the gate use them too.
use runner_core::result::{Artifact, escaped, is_safe_component};

/// What collecting `/out` found.
#[derive(Debug, Default)]
pub struct Collected {
    pub artifacts: Vec<Artifact>,
    /// Anomalies, each a sentence for Safety Notes.
    pub findings: Vec<String>,
    /// Total bytes of the collected artifacts.
    pub total_bytes: u64,
}

/// Limits on the walk (the `/out` caps already bound what a guest can create; these
/// keep a pathological tree from costing the runner).
#[derive(Debug, Clone, Copy)]
pub struct WalkLimits {
    pub max_entries: u64,
    pub max_depth: usize,
}

/// Walks `out` and copies its regular files into `dest` (an empty directory).
///
/// Nothing a guest can put in `/out` makes collection fail: an entry that cannot be
/// read becomes a finding and the walk goes on, so a run ends in a complete result
/// that says what was not collected. Stored names never collide: a name that cannot be
/// written safely is stored as the first `unsafe-name-N` that no entry of the same
/// directory is called. Only a failure to write the copy (`dest` full, read-only,
/// failing) is an error: that is the runner's problem, and a result missing an
/// artifact it should hold is not published.
pub fn collect(out: &Dir, dest: &Dir, limits: WalkLimits) -> io::Result<Collected> {
    let mut walk = Walk {
        limits,
        seen: 0,
        c: Collected::default(),
    };
    walk.walk(out, dest, "", 0)?;
    let mut collected = walk.c;
    collected.artifacts.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(collected)
}

/// Where collecting one entry failed.
enum Failed {
    /// Reading the guest's `/out`: a finding.
    Source(io::Error),
    /// Writing the result's copy: an error.
    Dest(io::Error),
}

impl From<io::Error> for Failed {
    /// Errors of `?` on the source side (the few destination steps say `Failed::Dest`).
    fn from(e: io::Error) -> Self {
        Failed::Source(e)
    }
}

/// What one entry of `/out` is, and the name it is stored under.
struct Entry {
    raw_name: std::ffi::OsString,
    shown: String,
    stored: String,
}

/// Gives each entry of one directory the name it is stored under: its own when it is
/// safe, else the first `unsafe-name-N` that no safe name of the directory already
/// takes (the guest chose those, and can choose `unsafe-name-1`).
fn stored_names(
    prefix: &str,
    names: Vec<std::ffi::OsString>,
    findings: &mut Vec<String>,
) -> Vec<Entry> {
    let taken: std::collections::HashSet<String> = names
        .iter()
        .filter_map(|n| n.to_str())
        .filter(|n| is_safe_component(n))
        .map(str::to_owned)
        .collect();
    let mut next = 0usize;
    names
        .into_iter()
        .map(|raw_name| {
            let shown = format!("/out/{}{}", prefix, escaped(&raw_name));
            let stored = match raw_name.to_str().filter(|n| is_safe_component(n)) {
                Some(n) => n.to_owned(),
                None => {
                    let stored = loop {
                        next += 1;
                        let candidate = format!("unsafe-name-{next}");
                        if !taken.contains(&candidate) {
                            break candidate;
                        }
                    };
                    findings.push(format!(
                        "{shown} has a name that cannot be written safely; stored as /out/{prefix}{stored}"
                    ));
                    stored
                }
            };
            Entry {
                raw_name,
                shown,
                stored,
            }
        })
        .collect()
}

/// One collection: its limits, the entries seen so far and what it found.
struct Walk {
    limits: WalkLimits,
    seen: u64,
    c: Collected,
}

impl Walk {
    fn walk(&mut self, src: &Dir, dest: &Dir, prefix: &str, depth: usize) -> io::Result<()> {
        let shown_dir = format!("/out/{prefix}");
        let names = match src
            .entries()
            .and_then(|entries| entries.map(|e| e.map(|e| e.file_name())).collect())
        {
            Ok(names) => names,
            Err(e) => {
                self.c.findings.push(format!(
                    "{shown_dir} could not be listed ({e}); its entries were not collected"
                ));
                return Ok(());
            }
        };
        let mut names: Vec<std::ffi::OsString> = names;
        names.sort();
        // The entry cap bounds the work before names are given out.
        let room = self.limits.max_entries.saturating_sub(self.seen);
        let over = names.len() as u64 > room;
        names.truncate(usize::try_from(room).unwrap_or(usize::MAX));
        self.seen += names.len() as u64;
        for entry in stored_names(prefix, names, &mut self.c.findings) {
            match self.collect_entry(src, dest, prefix, depth, &entry) {
                Ok(()) => {}
                Err(Failed::Source(e)) => self.c.findings.push(format!(
                    "{} could not be collected ({e}); not collected",
                    entry.shown
                )),
                Err(Failed::Dest(e)) => return Err(e),
            }
        }
        if over {
            let finding = format!(
                "/out holds more than {} entries; the rest were not collected",
                self.limits.max_entries
            );
            if !self.c.findings.contains(&finding) {
                self.c.findings.push(finding);
            }
        }
        Ok(())
    }

    fn collect_entry(
        &mut self,
        src: &Dir,
        dest: &Dir,
        prefix: &str,
        depth: usize,
        entry: &Entry,
    ) -> Result<(), Failed> {
        let Entry {
            raw_name,
            shown,
            stored,
        } = entry;
        let file_type = src.symlink_metadata(raw_name)?.file_type();
        if file_type.is_symlink() {
            let target = src
                .read_link_contents(raw_name)
                .map(|t| escaped(t.as_os_str()))
                .unwrap_or_else(|_| "?".into());
            self.c.findings.push(format!(
                "{shown} is a symlink to `{target}`; it was reported, not followed or collected"
            ));
        } else if file_type.is_dir() {
            if depth + 1 > self.limits.max_depth {
                self.c.findings.push(format!(
                    "{shown} nests deeper than {} levels; not collected",
                    self.limits.max_depth
                ));
                return Ok(());
            }
            let dir_flags = nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_DIRECTORY;
            let sub_src = Dir::from_std_file(
                src.open_with(
                    raw_name,
                    OpenOptions::new().read(true).custom_flags(dir_flags.bits()),
                )?
                .into_std(),
            );
            dest.create_dir(stored).map_err(Failed::Dest)?;
            let sub_dest = dest.open_dir(stored).map_err(Failed::Dest)?;
            self.walk(
                &sub_src,
                &sub_dest,
                &format!("{prefix}{stored}/"),
                depth + 1,
            )
            .map_err(Failed::Dest)?;
        } else if file_type.is_file() {
            let flags = nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK;
            let mut file = src.open_with(
                raw_name,
                OpenOptions::new().read(true).custom_flags(flags.bits()),
            )?;
            if !file.metadata()?.is_file() {
                self.c.findings.push(format!(
                    "{shown} changed type while being collected; not collected"
                ));
                return Ok(());
            }
            let mut copy = dest
                .open_with(
                    stored,
                    OpenOptions::new().write(true).create_new(true).mode(0o644),
                )
                .map_err(Failed::Dest)?;
            // A read error is the guest's file's (a finding), a write error the result's
            // own (an error). Publishing syncs the copy with the rest of the result.
            let copied =
                crate::stage::copy_hashing_sided(&mut file, &mut copy).map_err(|(side, e)| {
                    match side {
                        crate::stage::CopySide::Read => Failed::Source(e),
                        crate::stage::CopySide::Write => Failed::Dest(e),
                    }
                });
            let (sha256, bytes) = match copied {
                Ok(hashed) => hashed,
                Err(e) => {
                    // The partial copy (ours: the name was created above) is no artifact.
                    drop(copy);
                    let _ = dest.remove_file(stored);
                    return Err(e);
                }
            };
            self.c.total_bytes += bytes;
            self.c.artifacts.push(Artifact {
                path: format!("{prefix}{stored}"),
                sha256,
                bytes,
            });
        } else {
            self.c.findings.push(format!("{shown} is not a regular file, directory or symlink (a FIFO, socket or device); not collected"));
        }
        Ok(())
    }
}

#[cfg(test)]
// reason: tests build fixtures on the host filesystem.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;
    use tempfile::TempDir;

    /// Collects the directory `out` into `dest`, at most `max_entries`, 8 levels deep.
    #[track_caller]
    fn assert_finding(c: &Collected, want: impl Fn(&str) -> bool) {
        assert!(c.findings.iter().any(|f| want(f)), "{:?}", c.findings);
    }

    fn collect_dirs(
        out: &std::path::Path,
        dest: &std::path::Path,
        max_entries: u64,
    ) -> io::Result<Collected> {
        let src = runner_sandbox::host::open_dir(out).unwrap();
        let dst = runner_sandbox::host::open_dir(dest).unwrap();
        let limits = WalkLimits {
            max_entries,
            max_depth: 8,
        };
        collect(&src, &dst, limits)
    }

    /// A guest's `/out` holding `files` (name, content), and an empty destination.
    fn out_holding(files: &[(&str, &[u8])]) -> (TempDir, TempDir) {
        let out = tempfile::tempdir().unwrap();
        for (name, content) in files {
            std::fs::write(out.path().join(name), content).unwrap();
        }
        (out, tempfile::tempdir().unwrap())
    }

    #[test]
    fn collects_files_reports_symlinks_and_renames_odd_names() {
        let (out, dest) = out_holding(&[("summary.json", b"{}")]);
        std::fs::create_dir(out.path().join("plots")).unwrap();
        std::fs::write(out.path().join("plots/a.txt"), b"a").unwrap();
        std::os::unix::fs::symlink("../../../etc/passwd", out.path().join("escape")).unwrap();
        std::fs::write(
            out.path()
                .join(std::ffi::OsStr::from_bytes(b"bad\nname\x1b")),
            b"x",
        )
        .unwrap();
        nix::unistd::mkfifo(
            &out.path().join("pipe"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        let c = collect_dirs(out.path(), dest.path(), 100).unwrap();
        let paths: Vec<&str> = c.artifacts.iter().map(|a| a.path.as_str()).collect();
        assert_eq!(paths, vec!["plots/a.txt", "summary.json", "unsafe-name-1"]);
        assert_eq!(
            c.artifacts[1].sha256,
            runner_core::digest::sha256_hex(b"{}")
        );
        assert_finding(&c, |f| {
            f.contains("/out/escape is a symlink to `../../../etc/passwd`")
        });
        assert_finding(&c, |f| f.contains("bad\\u{a}name\\u{1b}"));
        assert_finding(&c, |f| f.contains("/out/pipe is not a regular file"));
        assert!(!dest.path().join("escape").exists());
    }

    #[test]
    fn entry_cap() {
        let names: Vec<String> = (0..10).map(|i| format!("f{i}")).collect();
        let files: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), &b"x"[..])).collect();
        let (out, dest) = out_holding(&files);
        let c = collect_dirs(out.path(), dest.path(), 5).unwrap();
        assert_eq!(c.artifacts.len(), 5);
        assert!(c.findings[0].contains("more than 5 entries"));
    }

    /// Attack (audit): the guest writes `/out/bad name` (stored as
    /// `unsafe-name-1`) and then `/out/unsafe-name-1` itself. Collection used to fail on
    /// the clash (`File exists`) and leave no result at all.
    #[test]
    fn renamed_entries_never_collide_with_names_the_guest_chose() {
        let (out, dest) = out_holding(&[
            ("bad name", b"renamed"),
            ("unsafe-name-1", b"chosen 1"),
            ("unsafe-name-2", b"chosen 2"),
            ("worse name", b"renamed too"),
        ]);
        let c = collect_dirs(out.path(), dest.path(), 100).unwrap();
        let by_path: std::collections::BTreeMap<&str, &str> = c
            .artifacts
            .iter()
            .map(|a| (a.path.as_str(), a.sha256.as_str()))
            .collect();
        assert_eq!(c.artifacts.len(), 4, "{:?} {:?}", c.artifacts, c.findings);
        for (path, content) in [
            ("unsafe-name-1", &b"chosen 1"[..]),
            ("unsafe-name-2", b"chosen 2"),
            ("unsafe-name-3", b"renamed"),
            ("unsafe-name-4", b"renamed too"),
        ] {
            let sha = runner_core::digest::sha256_hex(content);
            assert_eq!(by_path.get(path), Some(&sha.as_str()), "{path}");
            assert_eq!(std::fs::read(dest.path().join(path)).unwrap(), content);
        }
        assert_finding(&c, |f| {
            f.contains("/out/bad name") && f.contains("stored as /out/unsafe-name-3")
        });
    }

    /// A copy that cannot be written is the runner's problem, not the guest's: an
    /// error (the result is not published without the artifact), not a finding.
    #[test]
    fn a_destination_that_refuses_the_copy_is_an_error() {
        let (out, dest) = out_holding(&[("a", b"a")]);
        // `a` already exists at the destination: its copy cannot be created.
        std::fs::write(dest.path().join("a"), b"in the way").unwrap();
        let err = collect_dirs(out.path(), dest.path(), 100).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(dest.path().join("a")).unwrap(), b"in the way");
    }
}
