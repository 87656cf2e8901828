//! Collecting `/out` after a run: walk it without following a symlink, copy each
//! regular file into the result's artifact directory while hashing it, and report
//! everything else (symlinks, FIFOs, sockets, odd names) as findings instead.

use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
use std::io;

/// One collected artifact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    /// Path relative to `/out` as stored beside the result (always a safe name).
    pub path: String,
    pub sha256: String,
    pub bytes: u64,
}

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

/// A path component that can be written into the result document and onto any
/// filesystem unchanged: ASCII letters, digits and `._+@=,-`, at most 200 bytes, not
/// `.` or `..`.
pub fn is_safe_component(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 200
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._+@=,-".contains(&b))
}

/// A name shown in a finding: control and non-ASCII characters escaped.
pub fn escaped(name: &std::ffi::OsStr) -> String {
    let lossy = name.to_string_lossy();
    let mut out = String::new();
    for c in lossy.chars().take(200) {
        if c.is_ascii_graphic() || c == ' ' {
            out.push(c);
        } else {
            out.push_str(&c.escape_unicode().to_string());
        }
    }
    out
}

/// Walks `out` and copies its regular files into `dest` (an empty directory).
pub fn collect(out: &Dir, dest: &Dir, limits: WalkLimits) -> io::Result<Collected> {
    let mut collected = Collected::default();
    let mut seen = 0u64;
    let mut renamed = 0usize;
    walk(
        out,
        dest,
        "",
        0,
        limits,
        &mut seen,
        &mut renamed,
        &mut collected,
    )?;
    collected.artifacts.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(collected)
}

#[allow(clippy::too_many_arguments)]
fn walk(
    src: &Dir,
    dest: &Dir,
    prefix: &str,
    depth: usize,
    limits: WalkLimits,
    seen: &mut u64,
    renamed: &mut usize,
    c: &mut Collected,
) -> io::Result<()> {
    let mut entries: Vec<_> = src.entries()?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        *seen += 1;
        let raw_name = entry.file_name();
        let shown = format!("/out/{}{}", prefix, escaped(&raw_name));
        if *seen > limits.max_entries {
            c.findings.push(format!(
                "/out holds more than {} entries; the rest were not collected",
                limits.max_entries
            ));
            return Ok(());
        }
        let file_type = entry.file_type()?;
        let name = raw_name
            .to_str()
            .filter(|n| is_safe_component(n))
            .map(str::to_owned);
        let stored = match &name {
            Some(n) => n.clone(),
            None => {
                *renamed += 1;
                let stored = format!("unsafe-name-{renamed}");
                c.findings.push(format!("{shown} has a name that cannot be written safely; stored as /out/{prefix}{stored}"));
                stored
            }
        };
        if file_type.is_symlink() {
            let target = src
                .read_link_contents(&raw_name)
                .map(|t| escaped(t.as_os_str()))
                .unwrap_or_else(|_| "?".into());
            c.findings.push(format!(
                "{shown} is a symlink to `{target}`; it was reported, not followed or collected"
            ));
        } else if file_type.is_dir() {
            if depth + 1 > limits.max_depth {
                c.findings.push(format!(
                    "{shown} nests deeper than {} levels; not collected",
                    limits.max_depth
                ));
                continue;
            }
            let dir_flags = nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_DIRECTORY;
            let sub_src = Dir::from_std_file(
                src.open_with(
                    &raw_name,
                    OpenOptions::new().read(true).custom_flags(dir_flags.bits()),
                )?
                .into_std(),
            );
            dest.create_dir(&stored)?;
            let sub_dest = dest.open_dir(&stored)?;
            walk(
                &sub_src,
                &sub_dest,
                &format!("{prefix}{stored}/"),
                depth + 1,
                limits,
                seen,
                renamed,
                c,
            )?;
        } else if file_type.is_file() {
            let flags = nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK;
            let mut file = src.open_with(
                &raw_name,
                OpenOptions::new().read(true).custom_flags(flags.bits()),
            )?;
            if !file.metadata()?.is_file() {
                c.findings.push(format!(
                    "{shown} changed type while being collected; not collected"
                ));
                continue;
            }
            let mut copy = dest.open_with(
                &stored,
                OpenOptions::new().write(true).create_new(true).mode(0o644),
            )?;
            let (sha256, bytes) = crate::stage::copy_hashing(&mut file, &mut copy)?;
            copy.sync_all()?;
            c.total_bytes += bytes;
            c.artifacts.push(Artifact {
                path: format!("{prefix}{stored}"),
                sha256,
                bytes,
            });
        } else {
            c.findings.push(format!("{shown} is not a regular file, directory or symlink (a FIFO, socket or device); not collected"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cap_std::ambient_authority;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn collects_files_reports_symlinks_and_renames_odd_names() {
        let out = tempfile::tempdir().unwrap();
        let dest = tempfile::tempdir().unwrap();
        std::fs::write(out.path().join("summary.json"), b"{}").unwrap();
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
        let src = Dir::open_ambient_dir(out.path(), ambient_authority()).unwrap();
        let dst = Dir::open_ambient_dir(dest.path(), ambient_authority()).unwrap();
        let c = collect(
            &src,
            &dst,
            WalkLimits {
                max_entries: 100,
                max_depth: 8,
            },
        )
        .unwrap();
        let paths: Vec<&str> = c.artifacts.iter().map(|a| a.path.as_str()).collect();
        assert_eq!(paths, vec!["plots/a.txt", "summary.json", "unsafe-name-1"]);
        assert_eq!(c.artifacts[1].sha256, crate::digest::sha256_hex(b"{}"));
        assert!(
            c.findings
                .iter()
                .any(|f| f.contains("/out/escape is a symlink to `../../../etc/passwd`")),
            "{:?}",
            c.findings
        );
        assert!(
            c.findings
                .iter()
                .any(|f| f.contains("bad\\u{a}name\\u{1b}")),
            "{:?}",
            c.findings
        );
        assert!(
            c.findings
                .iter()
                .any(|f| f.contains("/out/pipe is not a regular file")),
            "{:?}",
            c.findings
        );
        assert!(!dest.path().join("escape").exists());
    }

    #[test]
    fn entry_cap() {
        let out = tempfile::tempdir().unwrap();
        let dest = tempfile::tempdir().unwrap();
        for i in 0..10 {
            std::fs::write(out.path().join(format!("f{i}")), b"x").unwrap();
        }
        let src = Dir::open_ambient_dir(out.path(), ambient_authority()).unwrap();
        let dst = Dir::open_ambient_dir(dest.path(), ambient_authority()).unwrap();
        let c = collect(
            &src,
            &dst,
            WalkLimits {
                max_entries: 5,
                max_depth: 8,
            },
        )
        .unwrap();
        assert_eq!(c.artifacts.len(), 5);
        assert!(c.findings[0].contains("more than 5 entries"));
    }
}
