//! Directory trees a guest reads ([`GuestTree`]), shipped as a zip archive inside one of
//! its assets: matplotlib's data (fonts, styles, its `matplotlibrc`) is
//! `matplotlib/mpl-data.zip` inside the scientific guest's stdlib zip, and matplotlib
//! opens it as a directory beside its own `__init__.py`.
//!
//! [`ensure_tree`] unpacks a tree once into `<guest dir>/trees/<tree_sha256>/`: the
//! archive is copied out of the verified asset with a bounded read and checked against
//! its pinned size and sha256, every member name is checked (relative, no `..`, no
//! link), the unpacked tree is hashed as a whole (`environment::tree::tree_sha256`) and
//! must be the pinned tree, and only then is it renamed into place (directories 0755,
//! files 0644, so a worker under its own uid reads it; the store above stays 0700).
//! [`locate_tree`] verifies it before every run: a metadata walk (no file read) whose
//! result matches the record of the last full hash skips the hash, as
//! `store::Slot::locate` does for one file; anything else hashes the tree again.

use super::manifest::{GuestEntry, GuestTree, MAX_GUEST_SIZE};
use super::store::{QUIET, Slot, create_store, open_store, read_stamp, stamp_rel, write_stamp};
use super::{GuestError, fetch::HashingCopy, missing_asset};
use crate::environment::tree::{tree_sha256, tree_stamp};
use crate::environment::wheel::{
    MemberError, check_members, create_dirs, member_name, new_tree_file,
};
use crate::store::{StagedDir, create_dir_all, open_regular};
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
use runner_sandbox::digest::sha256_reader;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use zip::ZipArchive;
use zip::result::ZipError;

/// Most entries a tree may unpack to, whatever its pinned archive says.
const MAX_TREE_ENTRIES: usize = 100_000;

/// Where `tree` lives in `guest_dir`, whether or not it has been unpacked.
pub fn tree_dir(tree: &GuestTree, guest_dir: &Path) -> PathBuf {
    guest_dir.join(tree_rel(tree))
}

/// `trees/<tree_sha256>`, relative to the store.
fn tree_rel(tree: &GuestTree) -> PathBuf {
    Path::new("trees").join(&tree.tree_sha256)
}

/// The record of the tree's last full hash, beside the files' (`verified/`).
fn tree_stamp_rel(tree: &GuestTree) -> PathBuf {
    stamp_rel(&format!("tree-{}", tree.tree_sha256))
}

/// The verified tree, or `None` when it has not been unpacked. A tree whose metadata is
/// what the last full hash recorded is not hashed again; otherwise every file is hashed
/// and the tree must be the pinned one ([`GuestError::StoredTreeMismatch`]).
///
/// # Ambient Authority
/// Opens the store at `guest_dir` (`runner_sandbox::store_root`).
pub fn locate_tree(
    entry: &GuestEntry,
    tree: &GuestTree,
    guest_dir: &Path,
) -> Result<Option<PathBuf>, GuestError> {
    match open_store(&entry.name, guest_dir)? {
        Some(store) => locate_tree_in(entry, tree, &store, guest_dir),
        None => Ok(None),
    }
}

/// [`locate_tree`] in the open store.
fn locate_tree_in(
    entry: &GuestEntry,
    tree: &GuestTree,
    store: &Dir,
    guest_dir: &Path,
) -> Result<Option<PathBuf>, GuestError> {
    let dir = tree_dir(tree, guest_dir);
    let mismatch = |actual: String| GuestError::StoredTreeMismatch {
        guest: entry.name.clone(),
        path: dir.clone(),
        expected: tree.tree_sha256.clone(),
        actual,
    };
    match store.symlink_metadata(tree_rel(tree)) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => return Err(mismatch("not a directory".into())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(GuestError::io(&entry.name, "inspect", &dir)(e)),
    }
    let root = store
        .open_dir(tree_rel(tree))
        .map_err(GuestError::io(&entry.name, "open", &dir))?;
    // Metadata first, then content: a change between the two moves the metadata, so the
    // record written below can only ever describe a tree that hashed right.
    let (stamp, quiet) =
        tree_stamp(&root, &dir, QUIET).unwrap_or_else(|e| (format!("unreadable ({e})"), false));
    let record = format!("{} {stamp}\n", tree.tree_sha256);
    let record_rel = tree_stamp_rel(tree);
    if read_stamp(store, &record_rel).as_deref() == Some(record.as_str()) {
        return Ok(Some(dir));
    }
    let actual = tree_sha256(&root, &dir).unwrap_or_else(|e| format!("unreadable ({e})"));
    if actual != tree.tree_sha256 {
        return Err(mismatch(actual));
    }
    if quiet {
        // Best effort: without the record the next run simply hashes again.
        let _ = write_stamp(store, &record_rel, &record);
    }
    Ok(Some(dir))
}

/// The verified tree, unpacked first from its asset when it is not in the store yet
/// (a guest fetched before the tree was declared gets it on its next run). The asset
/// must be stored: else [`GuestError::NotFetched`] for an on-request guest, or
/// [`GuestError::Io`] naming the fetch command.
///
/// # Ambient Authority
/// Opens the store at `guest_dir` (`runner_sandbox::store_root`).
pub fn ensure_tree(
    entry: &GuestEntry,
    tree: &GuestTree,
    guest_dir: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<PathBuf, GuestError> {
    if let Some(dir) = locate_tree(entry, tree, guest_dir)? {
        return Ok(dir);
    }
    let asset = entry
        .assets
        .iter()
        .find(|a| a.file == tree.asset)
        .ok_or_else(|| GuestError::TreeUnpack {
            guest: entry.name.clone(),
            member: tree.member.clone(),
            archive: PathBuf::from(&tree.asset),
            reason: Box::new(TreeError::NoSuchAsset),
        })?;
    let slot = Slot::asset(entry, asset, guest_dir);
    let store = create_store(&entry.name, guest_dir)?;
    if slot.locate_in(&store)?.is_none() {
        return Err(missing_asset(entry, asset, guest_dir));
    }
    install_tree(entry, tree, &store, &slot, progress)
}

/// Unpacks `tree` from the verified asset in `slot` into the store (see the module
/// docs). A tree already stored by a concurrent run is kept if it verifies.
fn install_tree(
    entry: &GuestEntry,
    tree: &GuestTree,
    store: &Dir,
    slot: &Slot<'_>,
    progress: &mut dyn FnMut(&str),
) -> Result<PathBuf, GuestError> {
    let guest = entry.name.as_str();
    let archive = slot.dest();
    let fail = |reason: TreeError| GuestError::TreeUnpack {
        guest: guest.to_owned(),
        member: tree.member.clone(),
        archive: archive.clone(),
        reason: Box::new(reason),
    };
    progress(&format!(
        "{guest}: unpacking `{}` ({} bytes) from {}",
        tree.member,
        tree.size,
        archive.display()
    ));
    let trees_path = slot.root.join("trees");
    let trees = create_dir_all(store, "trees", 0o700).map_err(GuestError::io(
        guest,
        "create guest directory",
        &trees_path,
    ))?;
    let work = StagedDir::new(&trees).map_err(GuestError::io(
        guest,
        "create a temporary directory in",
        &trees_path,
    ))?;
    copy_member(tree, store, &slot.rel(), &work.dir).map_err(fail)?;
    let root_path = trees_path.join(work.name()).join("tree");
    unpack(&work.dir, &root_path).map_err(fail)?;
    let actual = work
        .dir
        .open_dir("tree")
        .and_then(|root| tree_sha256(&root, &root_path))
        .map_err(|e| fail(TreeError::io("hash", "the tree")(e)))?;
    if actual != tree.tree_sha256 {
        return Err(fail(TreeError::TreeSha256 {
            actual,
            pinned: tree.tree_sha256.clone(),
        }));
    }
    let dest = tree_dir(tree, &slot.root);
    // Unpacked meanwhile by another run: kept if it verifies (below).
    work.publish("tree", &tree.tree_sha256)
        .map_err(GuestError::io(guest, "store the tree at", &dest))?;
    let found = locate_tree_in(entry, tree, store, &slot.root)?.ok_or_else(|| {
        GuestError::io(guest, "store the tree at", &dest)(io::Error::other(
            "it vanished while being checked; retry",
        ))
    })?;
    progress(&format!(
        "{guest}: tree sha256 {} verified, stored at {}",
        tree.tree_sha256,
        found.display()
    ));
    Ok(found)
}

/// Why a tree could not be unpacked (the `reason` of [`GuestError::TreeUnpack`]).
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    #[error("no asset of this guest is that file")]
    NoSuchAsset,
    #[error("the asset has no such member")]
    NoSuchMember,
    #[error("the member is not a regular file")]
    MemberNotRegular,
    /// `copied` is at most one byte past `pinned` (the copy reads no further).
    #[error(
        "the member is {}{} bytes, the manifest pins {pinned}",
        if copied > pinned { "over " } else { "" },
        (*copied).min(pinned + 1)
    )]
    MemberSize { copied: u64, pinned: u64 },
    #[error("the member's sha256 is {actual}, the manifest pins {pinned}")]
    MemberSha256 { actual: String, pinned: String },
    #[error("it holds more than {MAX_TREE_ENTRIES} entries")]
    TooManyEntries,
    #[error("it unpacks to more than {MAX_GUEST_SIZE} bytes")]
    TooLarge,
    #[error("it unpacks to tree sha256 {actual}, the manifest pins {pinned}")]
    TreeSha256 { actual: String, pinned: String },
    #[error(transparent)]
    Member(#[from] MemberError),
    /// A file or directory operation: `cannot create archive.zip: …`.
    #[error("cannot {action} {what}: {source}")]
    Io {
        action: &'static str,
        what: String,
        #[source]
        source: io::Error,
    },
    /// The zip reader refused: `context` says where (empty for the asset's member
    /// lookup, whose error speaks for itself).
    #[error("{context}{source}")]
    Zip {
        context: String,
        #[source]
        source: ZipError,
    },
    #[error("member `{name}`: {source}")]
    Copy { name: String, source: io::Error },
}

impl TreeError {
    /// Maps an I/O error of `action` on `what` (`the asset`, `archive.zip`); `what`
    /// becomes a `String` only when there is an error.
    fn io(action: &'static str, what: impl Into<String>) -> impl FnOnce(io::Error) -> Self {
        move |source| Self::Io {
            action,
            what: what.into(),
            source,
        }
    }

    /// Maps a zip error, its message after `context` (made only when there is an error).
    fn zip(context: impl Into<String>) -> impl FnOnce(ZipError) -> Self {
        move |source| Self::Zip {
            context: context.into(),
            source,
        }
    }
}

/// Copies the archive member out of the asset at `asset` (in the store) to
/// `archive.zip` in `work`, reading at most one byte past its pinned size, and checks
/// its size and sha256.
fn copy_member(tree: &GuestTree, store: &Dir, asset: &Path, work: &Dir) -> Result<(), TreeError> {
    let file = open_regular(store, asset)
        .and_then(|f| f.ok_or_else(|| io::Error::from(io::ErrorKind::NotFound)))
        .map_err(TreeError::io("open", "the asset"))?;
    let mut outer =
        ZipArchive::new(file.into_std()).map_err(TreeError::zip("not a zip archive: "))?;
    let member = match outer.by_name(&tree.member) {
        Ok(member) => member,
        Err(ZipError::FileNotFound) => return Err(TreeError::NoSuchMember),
        Err(e) => return Err(TreeError::zip("")(e)),
    };
    if !member.is_file() {
        return Err(TreeError::MemberNotRegular);
    }
    let mut out = work
        .open_with(
            "archive.zip",
            OpenOptions::new().write(true).create_new(true).mode(0o600),
        )
        .map_err(TreeError::io("create", "archive.zip"))?;
    let mut tee = HashingCopy {
        from: member.take(tree.size + 1),
        to: &mut out,
        copied: 0,
        write_error: None,
    };
    let actual = match sha256_reader(&mut tee) {
        Ok(hash) => hash,
        Err(e) => {
            return Err(match tee.write_error.take() {
                Some(w) => TreeError::io("write", "archive.zip")(w),
                None => TreeError::io("read", "the member")(e),
            });
        }
    };
    if tee.copied != tree.size {
        return Err(TreeError::MemberSize {
            copied: tee.copied,
            pinned: tree.size,
        });
    }
    if actual != tree.sha256 {
        return Err(TreeError::MemberSha256 {
            actual,
            pinned: tree.sha256.clone(),
        });
    }
    Ok(())
}

/// Unpacks `archive.zip` in `work` into a new directory `tree` beside it (`shown` on
/// the host): every name checked before anything is written, links refused, files 0644
/// and directories 0755, at most [`MAX_TREE_ENTRIES`] entries and [`MAX_GUEST_SIZE`]
/// bytes, every file synced.
fn unpack(work: &Dir, shown: &Path) -> Result<(), TreeError> {
    let file = work
        .open("archive.zip")
        .map_err(TreeError::io("reopen", "the archive"))?;
    let mut zip =
        ZipArchive::new(file.into_std()).map_err(TreeError::zip("the member is not a zip: "))?;
    if zip.len() > MAX_TREE_ENTRIES {
        return Err(TreeError::TooManyEntries);
    }
    check_members(&mut zip, "entry", |_, _| Ok(()))?;
    let root = create_dirs(work, Path::new("tree"))
        .and_then(|()| work.open_dir("tree"))
        .map_err(TreeError::io("create", shown.display().to_string()))?;
    let mut budget = MAX_GUEST_SIZE;
    for i in 0..zip.len() {
        let mut member = zip.by_index(i).map_err(|source| TreeError::Zip {
            context: format!("entry {i}: "),
            source,
        })?;
        let name = member_name(&member, "entry", i)?;
        let dest = Path::new(&name);
        let made = |source| TreeError::Io {
            action: "write",
            what: format!("`{name}`"),
            source,
        };
        if member.is_dir() {
            create_dirs(&root, dest).map_err(made)?;
            continue;
        }
        if let Some(parent) = dest.parent() {
            create_dirs(&root, parent).map_err(made)?;
        }
        let mut out = new_tree_file(&root, dest).map_err(made)?;
        let copied = io::copy(&mut (&mut member).take(budget + 1), &mut out).map_err(|source| {
            TreeError::Copy {
                name: name.clone(),
                source,
            }
        })?;
        if copied > budget {
            return Err(TreeError::TooLarge);
        }
        budget -= copied;
        out.sync_all().map_err(made)?;
    }
    Ok(())
}

#[cfg(test)]
// reason: tests build fixtures on the host filesystem.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use crate::environment::wheel::check_member_name;
    use crate::guest::manifest::GuestAsset;
    use crate::guest::store::asset_path;
    use crate::guest::test_support::entry_for;
    use runner_core::digest::sha256_hex;
    use std::fs;
    use std::io::Write;
    use zip::ZipWriter;
    use zip::write::SimpleFileOptions;

    /// The reasons read as they did when they were built as text.
    #[test]
    fn tree_error_messages() {
        let cases = [
            (
                TreeError::MemberSize {
                    copied: 11,
                    pinned: 10,
                },
                "the member is over 11 bytes, the manifest pins 10",
            ),
            (
                TreeError::MemberSize {
                    copied: 9,
                    pinned: 10,
                },
                "the member is 9 bytes, the manifest pins 10",
            ),
            (
                TreeError::TreeSha256 {
                    actual: "ab".into(),
                    pinned: "cd".into(),
                },
                "it unpacks to tree sha256 ab, the manifest pins cd",
            ),
            (
                TreeError::io("create", "/s/tree")(io::Error::from(
                    io::ErrorKind::PermissionDenied,
                )),
                "cannot create /s/tree: permission denied",
            ),
            (
                TreeError::Member(MemberError::Symlink("a/b".into())),
                "member `a/b` is a symbolic link",
            ),
            (
                TreeError::Io {
                    action: "write",
                    what: "`a/b`".into(),
                    source: io::Error::from(io::ErrorKind::StorageFull),
                },
                "cannot write `a/b`: no storage space",
            ),
            (
                TreeError::zip("entry 3: ")(ZipError::FileNotFound),
                "entry 3: specified file not found in archive",
            ),
            (
                TreeError::TooManyEntries,
                &format!("it holds more than {MAX_TREE_ENTRIES} entries"),
            ),
        ];
        for (error, want) in cases {
            assert_eq!(error.to_string(), want);
        }
    }

    fn zip_of(members: &[(&str, &[u8])]) -> Vec<u8> {
        let mut zw = ZipWriter::new(io::Cursor::new(Vec::new()));
        for (name, data) in members {
            zw.start_file(*name, SimpleFileOptions::default())
                .expect("start");
            zw.write_all(data).expect("write");
        }
        zw.finish().expect("finish").into_inner()
    }

    /// A guest whose one asset (`lib.zip`, stored) holds `data/inner.zip`, whose tree
    /// is pinned to what `inner` unpacks to.
    struct Case {
        dir: tempfile::TempDir,
        entry: GuestEntry,
    }

    impl Case {
        fn new(inner: &[(&str, &[u8])]) -> Self {
            let inner_zip = zip_of(inner);
            let outer = zip_of(&[("data/inner.zip", &inner_zip), ("x.py", b"pass")]);
            let dir = tempfile::tempdir().expect("tempdir");
            // The tree's pin: what the members unpack to, hashed by the same function.
            let expect = dir.path().join("expect");
            fs::create_dir(&expect).expect("mkdir");
            for (name, data) in inner.iter().filter(|(n, _)| check_member_name(n).is_ok()) {
                let p = expect.join(name);
                fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
                fs::write(p, data).expect("write");
            }
            let mut entry = entry_for(b"guest");
            let asset = GuestAsset {
                file: "pkg/lib.zip".into(),
                sha256: sha256_hex(&outer),
                size: outer.len() as u64,
                mount: "/usr/lib/lib.zip".into(),
            };
            let guests = dir.path().join("guests");
            let stored = asset_path(&asset, &guests);
            fs::create_dir_all(stored.parent().expect("parent")).expect("mkdir");
            fs::write(&stored, &outer).expect("store asset");
            entry.trees.push(GuestTree {
                asset: asset.file.clone(),
                member: "data/inner.zip".into(),
                sha256: sha256_hex(&inner_zip),
                size: inner_zip.len() as u64,
                tree_sha256: tree_sha256(
                    &runner_sandbox::host::open_dir(&expect).expect("open"),
                    &expect,
                )
                .expect("hash"),
                mount: "/usr/lib/lib.zip/data".into(),
            });
            entry.assets.push(asset);
            Case { dir, entry }
        }

        fn guests(&self) -> PathBuf {
            self.dir.path().join("guests")
        }

        fn ensure(&self) -> Result<PathBuf, GuestError> {
            ensure_tree(
                &self.entry,
                &self.entry.trees[0],
                &self.guests(),
                &mut |_| {},
            )
        }
    }

    #[test]
    fn unpacks_once_verified_and_readable_by_a_worker() {
        use std::os::unix::fs::PermissionsExt;
        let case = Case::new(&[("matplotlibrc", b"backend: Agg\n"), ("fonts/a.ttf", b"ttf")]);
        let tree = &case.entry.trees[0];
        assert_eq!(
            locate_tree(&case.entry, tree, &case.guests()).expect("ok"),
            None
        );
        let dir = case.ensure().expect("unpacked");
        assert_eq!(dir, tree_dir(tree, &case.guests()));
        assert_eq!(
            fs::read(dir.join("fonts/a.ttf")).expect("read"),
            b"ttf".to_vec()
        );
        let mode = |p: &Path| fs::metadata(p).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o755);
        assert_eq!(mode(&dir.join("fonts")), 0o755);
        assert_eq!(mode(&dir.join("matplotlibrc")), 0o644);
        // No partial directory is left beside it.
        let names: Vec<_> = fs::read_dir(case.guests().join("trees"))
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from(&tree.tree_sha256)]);
        // Found again as it is.
        assert_eq!(case.ensure().expect("again"), dir);
    }

    #[test]
    fn a_changed_stored_tree_is_refused_naming_both_hashes() {
        let case = Case::new(&[("matplotlibrc", b"backend: Agg\n")]);
        let tree = &case.entry.trees[0];
        let dir = case.ensure().expect("unpacked");
        // A record as a quiet tree would have, then a same-size rewrite: the metadata
        // moves, so the tree is hashed again and refused.
        let open = |p: &Path| runner_sandbox::host::open_dir(p).expect("open");
        let (stamp, _) = tree_stamp(&open(&dir), &dir, QUIET).expect("stamp");
        write_stamp(
            &open(&case.guests()),
            &tree_stamp_rel(tree),
            &format!("{} {stamp}\n", tree.tree_sha256),
        )
        .expect("record");
        assert!(locate_tree(&case.entry, tree, &case.guests()).is_ok());
        std::thread::sleep(std::time::Duration::from_millis(20));
        fs::write(dir.join("matplotlibrc"), b"backend: Xyz\n").expect("tamper");
        let err = case.ensure().expect_err("tampered");
        let msg = err.to_string();
        assert!(
            matches!(err, GuestError::StoredTreeMismatch { .. }),
            "{err:?}"
        );
        assert!(msg.contains(&tree.tree_sha256), "{msg}");
        assert!(msg.contains(&dir.display().to_string()), "{msg}");
        // A file added under the tree is refused too.
        fs::write(dir.join("matplotlibrc"), b"backend: Agg\n").expect("restore");
        assert!(case.ensure().is_ok(), "restored");
        fs::write(dir.join("extra.py"), b"").expect("add");
        assert!(matches!(
            case.ensure(),
            Err(GuestError::StoredTreeMismatch { .. })
        ));
    }

    #[test]
    fn wrong_pins_and_hostile_archives_leave_nothing() {
        let check = |case: &Case, want: &str| {
            let err = case.ensure().expect_err("refused");
            let msg = err.to_string();
            assert!(matches!(err, GuestError::TreeUnpack { .. }), "{err:?}");
            assert!(msg.contains(want), "{msg} lacks {want}");
            let trees = case.guests().join("trees");
            let left = fs::read_dir(&trees).map(|d| d.count()).unwrap_or(0);
            assert_eq!(left, 0, "nothing left in {}", trees.display());
        };
        let mut case = Case::new(&[("a.txt", b"a")]);
        case.entry.trees[0].sha256 = "0".repeat(64);
        check(&case, "the manifest pins 0000");
        let mut case = Case::new(&[("a.txt", b"a")]);
        case.entry.trees[0].size -= 1;
        check(&case, "bytes, the manifest pins");
        let mut case = Case::new(&[("a.txt", b"a")]);
        case.entry.trees[0].tree_sha256 = "1".repeat(64);
        check(&case, "it unpacks to tree sha256");
        let mut case = Case::new(&[("a.txt", b"a")]);
        case.entry.trees[0].member = "data/absent.zip".into();
        check(&case, "no such member");
        // Names that would leave the tree: refused before anything is written.
        let case = Case::new(&[("ok.txt", b"a"), ("../escape.txt", b"b")]);
        check(&case, "escapes the install directory");
        assert!(!case.guests().join("trees/escape.txt").exists());
        let case = Case::new(&[("/abs.txt", b"b")]);
        check(&case, "absolute path");
    }

    #[test]
    fn a_missing_asset_names_the_fetch() {
        let mut case = Case::new(&[("a.txt", b"a")]);
        fs::remove_file(asset_path(&case.entry.assets[0], &case.guests())).expect("rm");
        let err = case.ensure().expect_err("no asset");
        assert!(matches!(err, GuestError::Io { .. }), "{err:?}");
        assert!(
            err.to_string().contains("runner guest fetch test-guest"),
            "{err}"
        );
        case.entry.fetch = crate::guest::FetchPolicy::OnRequest;
        let err = case.ensure().expect_err("no asset");
        assert!(matches!(err, GuestError::NotFetched { .. }), "{err:?}");
        assert!(
            err.to_string().contains("runner guest fetch test-guest"),
            "{err}"
        );
    }
}
