//! Claims: how a `serve` host takes a request out of the inbox so that no other host
//! takes it too, and how the claims of a host that died are given back.
//!
//! Each host owns a claim directory `INBOX/.serve/<host id>/` (a hidden name: the inbox
//! scan, and `runner gate`, leave it alone) holding a `.lock` file that the host keeps
//! `flock`ed while it lives. It is created under a temporary name and renamed into place
//! with the lock already held, and the `.lock` itself is locked before it gets that name,
//! so every visible `.lock` (in place or in a directory being created) is locked by its
//! host or abandoned. Claiming a request is one `rename` of `TR-x.md` from the inbox into the
//! claim directory, never replacing: of two hosts, exactly one rename succeeds. Its
//! `TR-x.md.sig` and `TR-x.inputs/` follow (the protocol puts them in before the `.md`).
//!
//! A claim directory whose lock can be taken belongs to a host that died (a `flock` dies
//! with its process). Its claims are recovered: an interrupted filing into `done/` or
//! quarantine is finished or rolled back, a request whose result was already published
//! (a complete `TS-….md` whose lock pins this request's id and sha256) is filed into
//! `done/` without running again, and every other request is renamed back into the
//! inbox (companions first, the `.md` last, as the protocol writes them), to be claimed
//! again like a new one.

use crate::gate::moves::{is_exists, rename_noreplace, sync_dir};
use nix::fcntl::{Flock, FlockArg};
use std::ffi::{OsStr, OsString};
use std::fs::{self, File};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// The hidden directory of the inbox that holds every host's claim directory.
pub const SERVE_DIR: &str = ".serve";
/// The lock file of a claim directory.
const LOCK_FILE: &str = ".lock";
/// The lock file while its host creates and locks it (renamed to [`LOCK_FILE`] once
/// locked; recovery never opens it).
const NEW_LOCK_FILE: &str = ".lock.new";

/// The companions of `TR-x.md` that travel with it: its signature and its inputs.
pub fn companion_names(name: &OsStr) -> [OsString; 2] {
    let bytes = name.as_bytes();
    let stem = bytes.strip_suffix(b".md").unwrap_or(bytes);
    let mut sig = bytes.to_vec();
    sig.extend_from_slice(b".sig");
    let mut inputs = stem.to_vec();
    inputs.extend_from_slice(b".inputs");
    [
        OsStr::from_bytes(&sig).to_owned(),
        OsStr::from_bytes(&inputs).to_owned(),
    ]
}

/// This host's claim directory, locked for as long as the value lives.
pub struct ClaimDir {
    inbox: PathBuf,
    path: PathBuf,
    _lock: Flock<File>,
}

impl ClaimDir {
    /// Creates and locks a fresh claim directory in `inbox` (canonical).
    ///
    /// # Ambient authority
    /// Creates directories and a file under the inbox the operator named.
    pub fn create(inbox: &Path) -> io::Result<Self> {
        Self::create_observed(inbox, &mut |_| {})
    }

    /// [`ClaimDir::create`], calling `between` after each step with the `.serve`
    /// directory (a test runs a peer's recovery pass there, see the tests).
    fn create_observed(inbox: &Path, between: &mut dyn FnMut(&Path)) -> io::Result<Self> {
        let serve = inbox.join(SERVE_DIR);
        match fs::DirBuilder::new().mode(0o700).create(&serve) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        let id = host_id();
        let tmp = serve.join(format!(".new-{id}"));
        fs::DirBuilder::new().mode(0o700).create(&tmp)?;
        between(&serve);
        // The lock file is created and locked under another name, then renamed: a peer's
        // recovery pass takes a `.lock` it can lock for a dead host's, so a `.lock`
        // must never be seen unlocked while its host lives (it was, between its
        // creation and the `flock`, and a peer starting at the same moment swept this
        // directory as a dead host's).
        let new_lock = tmp.join(NEW_LOCK_FILE);
        let file = File::create(&new_lock)?;
        between(&serve);
        let lock = Flock::lock(file, FlockArg::LockExclusiveNonblock)
            .map_err(|(_, errno)| io::Error::from(errno))?;
        between(&serve);
        fs::rename(&new_lock, tmp.join(LOCK_FILE))?;
        between(&serve);
        let path = serve.join(&id);
        rename_noreplace(&tmp, &path)?;
        between(&serve);
        sync_dir(&serve)?;
        Ok(Self {
            inbox: inbox.to_owned(),
            path,
            _lock: lock,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Claims `name` from the inbox: `Ok(false)` when another host (or an earlier claim of
    /// the same name, still held here) has it. The companions follow the `.md`.
    pub fn claim(&self, name: &OsStr) -> io::Result<bool> {
        match rename_noreplace(&self.inbox.join(name), &self.path.join(name)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound || is_exists(&e) => return Ok(false),
            Err(e) => return Err(e),
        }
        for companion in companion_names(name) {
            match rename_noreplace(&self.inbox.join(&companion), &self.path.join(&companion)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// The companions of claimed `name` that are here.
    pub fn companions(&self, name: &OsStr) -> Vec<OsString> {
        present_companions(&self.path, name)
    }

    /// Gives claimed `name` back to the inbox (companions first, the `.md` last).
    pub fn release(&self, name: &OsStr) -> io::Result<()> {
        give_back(&self.path, &self.inbox, name)
    }

    /// Removes this claim directory when nothing is claimed in it any more.
    pub fn remove_if_empty(&self) {
        remove_claim_dir(&self.path);
    }
}

/// A unique id for this host: process id and the clock.
fn host_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{}-{nanos:x}", std::process::id())
}

fn present_companions(dir: &Path, name: &OsStr) -> Vec<OsString> {
    companion_names(name)
        .into_iter()
        .filter(|c| dir.join(c).symlink_metadata().is_ok())
        .collect()
}

/// Moves `name` and its companions from `from` back to `inbox`, the `.md` last. A name
/// taken in the inbox (a new request of the same name) stops it: what is left stays.
fn give_back(from: &Path, inbox: &Path, name: &OsStr) -> io::Result<()> {
    for companion in present_companions(from, name) {
        rename_noreplace(&from.join(&companion), &inbox.join(&companion))?;
    }
    rename_noreplace(&from.join(name), &inbox.join(name))?;
    sync_dir(inbox)
}

fn remove_claim_dir(dir: &Path) {
    let only_lock = fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .flatten()
            .all(|e| e.file_name().as_bytes() == LOCK_FILE.as_bytes())
    });
    if only_lock {
        let _ = fs::remove_file(dir.join(LOCK_FILE));
        let _ = fs::remove_dir(dir);
    }
}

/// What recovery does with one claimed request of a dead host.
pub enum Recovered {
    /// Its result was published before the host died: file it into `done/`.
    Published(PathBuf),
    /// It did not finish: give it back to the inbox.
    Unfinished,
}

/// A dead host's claim directory, locked by the host recovering it.
pub struct DeadClaims {
    pub path: PathBuf,
    _lock: Flock<File>,
}

impl DeadClaims {
    /// The requests claimed in it (`TR-*.md` entries), in name order.
    pub fn requests(&self) -> Vec<OsString> {
        let mut names: Vec<OsString> = fs::read_dir(&self.path)
            .map(|entries| {
                entries
                    .flatten()
                    .map(|e| e.file_name())
                    .filter(|n| super::is_request_name(n))
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    /// Companions of `name` still here.
    pub fn companions(&self, name: &OsStr) -> Vec<OsString> {
        present_companions(&self.path, name)
    }

    /// Gives `name` back to `inbox`.
    pub fn give_back(&self, inbox: &Path, name: &OsStr) -> io::Result<()> {
        give_back(&self.path, inbox, name)
    }

    /// Companions left here without their `.md` (the host died between claiming the
    /// `.md` and moving them, or recovery gave the `.md` back first): back to the inbox.
    /// Returns what could not be done (a move refused, the inbox not made durable), one
    /// line each; what stays here is tried again by the next recovery pass.
    pub fn give_back_orphans(&self, inbox: &Path) -> Vec<String> {
        let mut failures = Vec::new();
        let entries = match fs::read_dir(&self.path) {
            Ok(entries) => entries,
            Err(e) => return vec![format!("cannot list {}: {e}", self.path.display())],
        };
        let mut moved = false;
        for e in entries.flatten() {
            let name = e.file_name();
            if name.as_bytes() == LOCK_FILE.as_bytes() || super::is_request_name(&name) {
                continue;
            }
            match rename_noreplace(&e.path(), &inbox.join(&name)) {
                Ok(()) => moved = true,
                Err(err) => failures.push(format!(
                    "cannot give {} back to the inbox: {err}",
                    e.path().display()
                )),
            }
        }
        if moved && let Err(e) = sync_dir(inbox) {
            failures.push(format!(
                "the companions given back to {} are not durable yet: {e}",
                inbox.display()
            ));
        }
        failures
    }

    /// Removes the directory when it is empty but for its lock.
    pub fn remove_if_empty(&self) {
        remove_claim_dir(&self.path);
    }
}

/// The claim directories of hosts that are gone, each locked for recovery (`own` is
/// skipped; a directory whose host lives stays locked by it and is skipped too).
///
/// # Ambient authority
/// Lists and opens entries under the inbox.
pub fn dead_claims(inbox: &Path, own: &Path) -> Vec<DeadClaims> {
    let serve = inbox.join(SERVE_DIR);
    let Ok(entries) = fs::read_dir(&serve) else {
        return Vec::new();
    };
    let mut dead = Vec::new();
    for e in entries.flatten() {
        let path = e.path();
        if path == own || !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        if e.file_name().as_bytes().starts_with(b".new-") {
            // A host being created, or one that died before its directory was in place:
            // it never claimed anything. Remove it once its lock is free (one that died
            // before its `.lock` was in place stays: an empty directory, never taken
            // for a live host's).
            if let Some(lock) = try_lock(&path) {
                let _ = fs::remove_file(path.join(LOCK_FILE));
                let _ = fs::remove_dir(&path);
                drop(lock);
            }
            continue;
        }
        if let Some(lock) = try_lock(&path) {
            dead.push(DeadClaims { path, _lock: lock });
        }
    }
    dead
}

fn try_lock(dir: &Path) -> Option<Flock<File>> {
    let file = File::open(dir.join(LOCK_FILE)).ok()?;
    Flock::lock(file, FlockArg::LockExclusiveNonblock).ok()
}

/// A complete result in `results` for the request `request_id` whose normalized text
/// has the tagged sha256 `request_sha256`: a `TS-….md` beside a lock that pins both.
///
/// # Ambient authority
/// Lists and reads the results directory the operator named.
pub fn published_result(results: &Path, request_id: &str, request_sha256: &str) -> Option<PathBuf> {
    let suffix = crate::gate::inbox::LOCK_SUFFIX;
    for e in fs::read_dir(results).ok()?.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(id) = name.strip_suffix(suffix) else {
            continue;
        };
        if !id.starts_with("TS-") || !id.contains(request_id) {
            continue;
        }
        let document = results.join(format!("{id}.md"));
        if !document.is_file() {
            continue;
        }
        let Ok(bytes) = crate::read::read_document(&e.path(), 1 << 22) else {
            continue;
        };
        let crate::read::Read2::Bytes(bytes) = bytes else {
            continue;
        };
        let Ok(lock) = serde_json::from_slice::<crate::lock::Lock>(&bytes) else {
            continue;
        };
        if lock.request.request_id == request_id && lock.request.sha256 == request_sha256 {
            return Some(document);
        }
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_recovering_while_a_host_creates_its_claim_directory_leaves_it_alone() {
        // Two hosts starting on one inbox: the one that says `serving` first runs its
        // recovery pass while the other is still creating its claim directory. At every
        // step of that creation the pass must leave it alone (a fresh-clone CI run saw
        // the second host's creation fail: its directory was swept as a dead host's).
        let inbox = tempfile::tempdir().unwrap();
        let inbox = inbox.path().canonicalize().unwrap();
        let peer = ClaimDir::create(&inbox).unwrap();
        let mut passes = 0;
        let created = ClaimDir::create_observed(&inbox, &mut |serve| {
            assert_eq!(serve, inbox.join(SERVE_DIR));
            assert!(dead_claims(&inbox, peer.path()).is_empty());
            passes += 1;
        });
        let created = created.unwrap();
        assert_eq!(passes, 5);
        // Created and locked: not recoverable while it lives, recoverable once gone.
        assert!(created.path().join(LOCK_FILE).is_file());
        assert!(dead_claims(&inbox, peer.path()).is_empty());
        let path = created.path().to_owned();
        drop(created);
        let dead = dead_claims(&inbox, peer.path());
        assert_eq!(dead.len(), 1);
        assert_eq!(dead[0].path, path);
    }

    #[test]
    fn one_of_two_hosts_claims_a_request() {
        let inbox = tempfile::tempdir().unwrap();
        let inbox = inbox.path().canonicalize().unwrap();
        fs::write(inbox.join("TR-a.md"), "x").unwrap();
        fs::write(inbox.join("TR-a.md.sig"), "s").unwrap();
        fs::create_dir(inbox.join("TR-a.inputs")).unwrap();
        let (a, b) = (
            ClaimDir::create(&inbox).unwrap(),
            ClaimDir::create(&inbox).unwrap(),
        );
        assert!(a.claim(OsStr::new("TR-a.md")).unwrap());
        assert!(!b.claim(OsStr::new("TR-a.md")).unwrap());
        assert_eq!(a.companions(OsStr::new("TR-a.md")).len(), 2);
        // A live host's claims are not recoverable; a dead one's are.
        assert!(dead_claims(&inbox, b.path()).is_empty());
        let a_path = a.path().to_owned();
        drop(a);
        let dead = dead_claims(&inbox, b.path());
        assert_eq!(dead.len(), 1);
        assert_eq!(dead[0].path, a_path);
        assert_eq!(dead[0].requests(), vec![OsString::from("TR-a.md")]);
        dead[0].give_back(&inbox, OsStr::new("TR-a.md")).unwrap();
        dead[0].remove_if_empty();
        assert!(!a_path.exists());
        for n in ["TR-a.md", "TR-a.md.sig", "TR-a.inputs"] {
            assert!(inbox.join(n).symlink_metadata().is_ok(), "{n}");
        }
    }
}
