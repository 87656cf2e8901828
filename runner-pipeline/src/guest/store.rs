//! The guest store: a directory of verified guest files named by their content,
//! `<guest dir>/<file_sha256>.wasm`. The directory is created 0700 and files 0600. A
//! file enters the store only through `commit`: written to a temporary file in the
//! same directory, fsynced, then renamed into place without replacing anything already
//! there. The store is not trusted on read: [`locate`] hashes the file, and skips the
//! hash only for the very version it hashed before (a stamp in `<guest dir>/verified/`,
//! see `Slot::locate`).

use super::{GuestAsset, GuestEntry, GuestError};
use crate::store::{Staged, create_dir_all, open_regular};
use cap_std::fs::Dir;
use runner_sandbox::digest::{file_stamp, sha256_reader};
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

/// The guest directory used when the caller does not name one: `$RUNNER_GUEST_DIR` if
/// set, else `<cache dir>/guests` (`runner_sandbox::cache::default_cache_dir`).
///
/// # Ambient Authority
/// Reads the process environment and, as a last resort, the password database.
pub fn default_guest_dir() -> PathBuf {
    guest_dir_from_env(
        runner_sandbox::env::var_os,
        runner_sandbox::cache::passwd_home,
    )
}

fn guest_dir_from_env(
    var: impl Fn(&str) -> Option<OsString>,
    home: impl FnOnce() -> Option<PathBuf>,
) -> PathBuf {
    match var("RUNNER_GUEST_DIR").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => runner_sandbox::cache::cache_dir_from_env(&var, home).join("guests"),
    }
}

/// Where `entry` lives in `guest_dir`, whether or not it has been fetched.
pub fn guest_path(entry: &GuestEntry, guest_dir: &Path) -> PathBuf {
    guest_dir.join(format!("{}.wasm", entry.file_sha256))
}

/// The directory holding `asset` alone, `<guest dir>/assets/<sha256>`: the guest sees
/// it, read-only, as the asset's mount directory.
pub fn asset_dir(asset: &GuestAsset, guest_dir: &Path) -> PathBuf {
    guest_dir.join("assets").join(&asset.sha256)
}

/// Where `asset` lives in `guest_dir`, whether or not it has been fetched.
pub fn asset_path(asset: &GuestAsset, guest_dir: &Path) -> PathBuf {
    asset_dir(asset, guest_dir).join(asset.name())
}

/// The guest store at `guest_dir`, `None` when nothing was ever stored there.
///
/// # Ambient Authority
/// Opens `guest_dir` (`runner_sandbox::store_root`).
pub(crate) fn open_store(guest: &str, guest_dir: &Path) -> Result<Option<Dir>, GuestError> {
    runner_sandbox::store_root::open(guest_dir).map_err(GuestError::io(guest, "open", guest_dir))
}

/// The guest store at `guest_dir`, created (0700) when missing.
///
/// # Ambient Authority
/// Creates and opens `guest_dir` (`runner_sandbox::store_root`).
pub(crate) fn create_store(guest: &str, guest_dir: &Path) -> Result<Dir, GuestError> {
    runner_sandbox::store_root::create(guest_dir).map_err(GuestError::io(
        guest,
        "create guest directory",
        guest_dir,
    ))
}

/// One file's place in the store: which guest it belongs to (for messages), the
/// directory it goes in (relative to the store), its name there and the sha256 it must
/// have.
pub(crate) struct Slot<'a> {
    pub guest: &'a str,
    /// The store on the host: what the paths handed out and the messages name.
    pub root: PathBuf,
    /// The directory holding the file, relative to the store (empty: the store).
    pub dir: PathBuf,
    pub name: String,
    pub sha256: &'a str,
}

impl<'a> Slot<'a> {
    pub(crate) fn guest_file(entry: &'a GuestEntry, guest_dir: &Path) -> Self {
        Slot {
            guest: &entry.name,
            root: guest_dir.to_owned(),
            dir: PathBuf::new(),
            name: format!("{}.wasm", entry.file_sha256),
            sha256: &entry.file_sha256,
        }
    }

    pub(crate) fn asset(entry: &'a GuestEntry, asset: &'a GuestAsset, guest_dir: &Path) -> Self {
        Slot {
            guest: &entry.name,
            root: guest_dir.to_owned(),
            dir: Path::new("assets").join(&asset.sha256),
            name: asset.name().to_owned(),
            sha256: &asset.sha256,
        }
    }

    /// The file, relative to the store.
    pub(crate) fn rel(&self) -> PathBuf {
        self.dir.join(&self.name)
    }

    /// The file's path on the host.
    pub(crate) fn dest(&self) -> PathBuf {
        self.root.join(self.rel())
    }

    /// Where the record of the file's last full hash lives, relative to the store:
    /// `verified/<sha256>` (outside the asset directories, which guests see).
    fn stamp(&self) -> PathBuf {
        stamp_rel(self.sha256)
    }

    /// The stored file, verified by sha256, or `None` when absent.
    ///
    /// A full hash records the version it hashed (`sha256` and [`file_stamp`] of the
    /// open descriptor: device, inode, size, mtime, ctime) in the slot's stamp file; a
    /// later call that finds the same version skips the hash (60 ms for the scientific
    /// guest's stdlib zip, on every run before). Why that is safe: any write, truncation,
    /// `chmod` or replacement moves the change time, which only the kernel sets, so a
    /// changed file is hashed again. A version is recorded only once its change time is
    /// [`QUIET`] old, so a same-size rewrite within one coarse clock tick of the hash
    /// cannot share its stamp. The stamp lives in the runner's own 0700 cache directory:
    /// whoever can rewrite it can rewrite the stored file and the runner binary too.
    /// Storage corruption under an unchanged inode goes unseen until the stamp is
    /// removed (`rm -r <guest dir>/verified` brings the full check back).
    fn locate(&self) -> Result<Option<PathBuf>, GuestError> {
        match open_store(self.guest, &self.root)? {
            Some(store) => self.locate_in(&store),
            None => Ok(None),
        }
    }

    /// [`Slot::locate`] in the open store.
    pub(crate) fn locate_in(&self, store: &Dir) -> Result<Option<PathBuf>, GuestError> {
        let dest = self.dest();
        let Some(file) = open_stored(self.guest, store, &self.rel(), &dest)? else {
            return Ok(None);
        };
        let meta = file
            .metadata()
            .map_err(GuestError::io(self.guest, "inspect", &dest))?;
        let record = format!("{} {}\n", self.sha256, file_stamp(&meta));
        if read_stamp(store, &self.stamp()).as_deref() == Some(record.as_str()) {
            return Ok(Some(dest));
        }
        let actual =
            sha256_reader(&file).map_err(GuestError::io(self.guest, "read stored file", &dest))?;
        if actual != self.sha256 {
            return Err(GuestError::StoredHashMismatch {
                guest: self.guest.to_owned(),
                path: dest,
                expected: self.sha256.to_owned(),
                actual,
            });
        }
        if is_quiet(&meta) {
            // Best effort: without the record the next call simply hashes again.
            let _ = write_stamp(store, &self.stamp(), &record);
        }
        Ok(Some(dest))
    }
}

/// The verified asset file, or `None` when it has not been fetched. Hashed like
/// [`locate`] (about 60 ms for the scientific guest's 54 MB stdlib zip), unless this
/// version was hashed before (`Slot::locate`).
///
/// # Ambient Authority
/// Opens a file under `guest_dir`.
pub fn locate_asset(
    entry: &GuestEntry,
    asset: &GuestAsset,
    guest_dir: &Path,
) -> Result<Option<PathBuf>, GuestError> {
    Slot::asset(entry, asset, guest_dir).locate()
}

/// The verified guest file, or `None` when it has not been fetched.
///
/// The file is hashed (streaming; about 20 ms for the 26 MB CPython guest with SHA
/// extensions, 80 ms without) unless this very version was hashed before (a stamp,
/// see `Slot::locate`). A file
/// whose sha256 differs from the manifest, or that is not a regular file, is an error:
/// the store is never trusted just because a name matches.
///
/// # Ambient Authority
/// Opens a file under `guest_dir`.
pub fn locate(entry: &GuestEntry, guest_dir: &Path) -> Result<Option<PathBuf>, GuestError> {
    Slot::guest_file(entry, guest_dir).locate()
}

/// Like [`locate`], but trusts a regular file of the right size without hashing it.
///
/// Trade-off: this saves the hash (tens of milliseconds per run) but does not detect a
/// same-size replacement or bit rot. The store is 0700 and content-addressed, so only
/// the same user (or root) can replace a file; that user could equally replace the
/// runner binary. It is still weaker than [`locate`], which is the default; use this
/// only where a later stage hashes the bytes it actually loads. A size mismatch falls
/// back to [`locate`], so the error still names both hashes.
///
/// # Ambient Authority
/// Reads metadata under `guest_dir`.
pub fn locate_size_only(
    entry: &GuestEntry,
    guest_dir: &Path,
) -> Result<Option<PathBuf>, GuestError> {
    let Some(store) = open_store(&entry.name, guest_dir)? else {
        return Ok(None);
    };
    let slot = Slot::guest_file(entry, guest_dir);
    match store.symlink_metadata(&slot.name) {
        Ok(meta) if meta.is_file() && meta.len() == entry.size => Ok(Some(slot.dest())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        _ => slot.locate_in(&store),
    }
}

/// How old a file's change time must be before its stamp is recorded.
pub(super) const QUIET: std::time::Duration = std::time::Duration::from_secs(2);

/// `verified/<sha256>`, relative to the store: the record of the last full hash of
/// that file.
pub(super) fn stamp_rel(sha256: &str) -> PathBuf {
    Path::new("verified").join(sha256)
}

/// Whether the file's last change is at least [`QUIET`] ago.
fn is_quiet(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    let changed = std::time::UNIX_EPOCH
        + std::time::Duration::new(
            u64::try_from(meta.ctime()).unwrap_or(0),
            u32::try_from(meta.ctime_nsec()).unwrap_or(0),
        );
    std::time::SystemTime::now()
        .duration_since(changed)
        .is_ok_and(|age| age >= QUIET)
}

/// The stamp at `rel` in the store, if there is one (a symlink is not followed).
pub(super) fn read_stamp(store: &Dir, rel: &Path) -> Option<String> {
    use std::io::Read;
    let file = open_regular(store, rel).ok()??;
    let mut text = String::new();
    file.take(400).read_to_string(&mut text).ok()?;
    Some(text)
}

/// Writes the stamp through a private temporary file and a rename (readers see the old
/// record or the new one). Not synced: a lost record only costs one more hash.
pub(super) fn write_stamp(store: &Dir, rel: &Path, record: &str) -> io::Result<()> {
    use std::io::Write;
    let (Some(dir), Some(name)) = (rel.parent(), rel.file_name().and_then(|n| n.to_str())) else {
        return Err(io::Error::other("no directory"));
    };
    let dir = create_dir_all(store, dir, 0o700)?;
    let mut staged = Staged::new(&dir, 0o600)?;
    staged.file().write_all(record.as_bytes())?;
    staged.publish_replacing(name, false)
}

/// Opens the stored file at `rel` without following a symlink and without blocking on
/// a FIFO; `None` when it does not exist. `path` names it in messages.
fn open_stored(
    guest: &str,
    store: &Dir,
    rel: &Path,
    path: &Path,
) -> Result<Option<std::fs::File>, GuestError> {
    let not_regular = || GuestError::NotRegularFile {
        guest: guest.to_owned(),
        path: path.to_owned(),
    };
    match store.symlink_metadata(rel) {
        Ok(meta) if meta.is_file() => {}
        Ok(_) => return Err(not_regular()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(GuestError::io(guest, "inspect", path)(e)),
    }
    // Re-checked on the open handle: the name may have been swapped since the lstat.
    match open_regular(store, rel) {
        Ok(Some(file)) => Ok(Some(file.into_std())),
        Ok(None) => Ok(None),
        Err(e) if e.kind() == io::ErrorKind::InvalidInput => Err(not_regular()),
        Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) => Err(not_regular()),
        Err(e) => Err(GuestError::io(guest, "open stored file", path)(e)),
    }
}

/// A new, empty temporary file (mode 0600) in `guest_dir`, removed on drop unless
/// [`commit`] renames it into place.
#[cfg(test)]
pub(crate) fn stage_file(entry: &GuestEntry, guest_dir: &Path) -> Result<Staged, GuestError> {
    stage_in(&Slot::guest_file(entry, guest_dir))
}

/// A new, empty temporary file (mode 0600) in the slot's directory (created 0700 with
/// the store), removed on drop unless [`commit_slot`] renames it into place.
pub(crate) fn stage_in(slot: &Slot<'_>) -> Result<Staged, GuestError> {
    let dir_path = slot.root.join(&slot.dir);
    let store = create_store(slot.guest, &slot.root)?;
    let dir = if slot.dir.as_os_str().is_empty() {
        store
    } else {
        create_dir_all(&store, &slot.dir, 0o700).map_err(GuestError::io(
            slot.guest,
            "create guest directory",
            &dir_path,
        ))?
    };
    Staged::new(&dir, 0o600).map_err(GuestError::io(
        slot.guest,
        "create a temporary file in",
        &dir_path,
    ))
}

/// [`commit_slot`] for the guest file itself.
#[cfg(test)]
pub(crate) fn commit(
    staged: Staged,
    entry: &GuestEntry,
    guest_dir: &Path,
) -> Result<PathBuf, GuestError> {
    commit_slot(staged, &Slot::guest_file(entry, guest_dir))
}

/// Makes a staged file, whose content the caller has verified against the slot's
/// sha256, the stored file: fsync, link in without replacing, fsync the directory. When
/// the name is already taken (an earlier or concurrent fetch), the existing file is
/// kept if it hashes right and is an error naming both hashes otherwise; the staged
/// file is removed either way.
pub(crate) fn commit_slot(staged: Staged, slot: &Slot<'_>) -> Result<PathBuf, GuestError> {
    let dest = slot.dest();
    let placed = staged.publish_new(&slot.name).map_err(GuestError::io(
        slot.guest,
        "store file at",
        &dest,
    ))?;
    if placed {
        return Ok(dest);
    }
    match slot.locate()? {
        Some(path) => Ok(path),
        None => Err(GuestError::io(slot.guest, "store file at", &dest)(
            io::Error::other("the existing file vanished while being checked; retry"),
        )),
    }
}

#[cfg(test)]
// reason: tests build fixtures on the host filesystem.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use crate::guest::test_support::{entry_for, names_in};
    use std::collections::HashMap;
    use std::fs;
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;

    type EnvCase<'a> = (&'a [(&'a str, &'a str)], Option<&'a str>, &'a str);

    fn dir_from(vars: &[(&str, &str)], home: Option<&str>) -> PathBuf {
        let map: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), OsString::from(v)))
            .collect();
        guest_dir_from_env(|k| map.get(k).cloned(), || home.map(PathBuf::from))
    }

    #[test]
    fn default_guest_dir_precedence() {
        let all = [
            ("RUNNER_GUEST_DIR", "/g"),
            ("RUNNER_CACHE_DIR", "/c"),
            ("XDG_CACHE_HOME", "/x"),
            ("HOME", "/h"),
        ];
        // (environment, password-database home, expected guest dir)
        let cases: &[EnvCase] = &[
            (&all, None, "/g"),
            (&all[1..], None, "/c/guests"),
            (&all[2..], None, "/x/runner/guests"),
            (&all[3..], None, "/h/.cache/runner/guests"),
            (
                &[("XDG_CACHE_HOME", "rel"), ("HOME", "/h")],
                None,
                "/h/.cache/runner/guests",
            ),
            (
                &[("RUNNER_GUEST_DIR", ""), ("HOME", "/h")],
                None,
                "/h/.cache/runner/guests",
            ),
            (&[], Some("/pw"), "/pw/.cache/runner/guests"),
            (&[], None, ".cache/runner/guests"),
        ];
        for (vars, home, want) in cases {
            assert_eq!(
                dir_from(vars, *home),
                PathBuf::from(want),
                "{vars:?} {home:?}"
            );
        }
    }

    fn write_stored(dir: &Path, entry: &GuestEntry, content: &[u8]) -> PathBuf {
        let path = guest_path(entry, dir);
        fs::write(&path, content).expect("write");
        path
    }

    #[test]
    fn locate_absent_then_verified() {
        let dir = tempfile::tempdir().expect("tempdir");
        let entry = entry_for(b"guest bytes");
        assert_eq!(locate(&entry, dir.path()).expect("absent is ok"), None);
        let path = write_stored(dir.path(), &entry, b"guest bytes");
        assert_eq!(
            locate(&entry, dir.path()).expect("valid"),
            Some(path.clone())
        );
        assert_eq!(
            locate_size_only(&entry, dir.path()).expect("valid"),
            Some(path)
        );
    }

    #[test]
    fn locate_refuses_tampered_guest_naming_both_hashes_and_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let entry = entry_for(b"guest bytes");
        // Same size, different content: only the hash can tell.
        let path = write_stored(dir.path(), &entry, b"guest BYTES");
        let err = locate(&entry, dir.path()).expect_err("tampered");
        let msg = err.to_string();
        let actual = runner_core::digest::sha256_hex(b"guest BYTES");
        assert!(
            matches!(err, GuestError::StoredHashMismatch { .. }),
            "{err:?}"
        );
        assert!(msg.contains(&entry.file_sha256), "{msg}");
        assert!(msg.contains(&actual), "{msg}");
        assert!(msg.contains(&path.display().to_string()), "{msg}");
        assert!(msg.contains("`test-guest`"), "{msg}");
        // The cheap variant cannot see a same-size swap; it is documented as weaker.
        assert_eq!(
            locate_size_only(&entry, dir.path()).expect("size matches"),
            Some(path)
        );

        // A different size falls back to the full check.
        write_stored(dir.path(), &entry, b"longer guest bytes");
        let err = locate_size_only(&entry, dir.path()).expect_err("wrong size");
        assert!(
            matches!(err, GuestError::StoredHashMismatch { .. }),
            "{err:?}"
        );
    }

    #[test]
    fn locate_refuses_symlinks_and_directories() {
        let dir = tempfile::tempdir().expect("tempdir");
        let entry = entry_for(b"guest bytes");
        let real = dir.path().join("real.wasm");
        fs::write(&real, b"guest bytes").expect("write");
        std::os::unix::fs::symlink(&real, guest_path(&entry, dir.path())).expect("symlink");
        let err = locate(&entry, dir.path()).expect_err("symlink");
        assert!(matches!(err, GuestError::NotRegularFile { .. }), "{err:?}");
        assert!(locate_size_only(&entry, dir.path()).is_err());

        fs::remove_file(guest_path(&entry, dir.path())).expect("rm");
        fs::create_dir(guest_path(&entry, dir.path())).expect("mkdir");
        let err = locate(&entry, dir.path()).expect_err("directory");
        assert!(matches!(err, GuestError::NotRegularFile { .. }), "{err:?}");
    }

    #[test]
    fn commit_creates_private_dir_and_file_without_leftovers() {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = root.path().join("a/guests");
        let entry = entry_for(b"guest bytes");
        let mut staged = stage_file(&entry, &dir).expect("stage");
        staged.file().write_all(b"guest bytes").expect("write");
        let path = commit(staged, &entry, &dir).expect("commit");
        assert_eq!(path, guest_path(&entry, &dir));
        let mode = |p: &Path| fs::metadata(p).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&path), 0o600);
        assert_eq!(fs::read(&path).expect("read"), b"guest bytes");
        assert_eq!(names_in(&dir), vec![format!("{}.wasm", entry.file_sha256)]);
    }

    #[test]
    fn commit_never_replaces_a_different_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let entry = entry_for(b"guest bytes");
        let path = write_stored(dir.path(), &entry, b"other bytes");
        let mut staged = stage_file(&entry, dir.path()).expect("stage");
        staged.file().write_all(b"guest bytes").expect("write");
        let err = commit(staged, &entry, dir.path()).expect_err("occupied by other content");
        assert!(
            matches!(err, GuestError::StoredHashMismatch { .. }),
            "{err:?}"
        );
        assert_eq!(fs::read(&path).expect("read"), b"other bytes");
        assert_eq!(names_in(dir.path()).len(), 1, "staged file removed");

        // The same content already stored is fine (an earlier or concurrent fetch).
        fs::write(&path, b"guest bytes").expect("write");
        let mut staged = stage_file(&entry, dir.path()).expect("stage");
        staged.file().write_all(b"guest bytes").expect("write");
        assert_eq!(commit(staged, &entry, dir.path()).expect("identical"), path);
        assert_eq!(names_in(dir.path()).len(), 1, "staged file removed");
    }
}
