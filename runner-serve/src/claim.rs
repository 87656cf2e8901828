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

use cap_std::fs::{Dir, DirBuilder, DirBuilderExt};
use nix::fcntl::{Flock, FlockArg};
use runner_gate::inbox::HeldDir;
use runner_gate::moves::{exists, is_exists};
use runner_sandbox::durable::rename_noreplace;
use runner_sandbox::durable::sync_dir;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStrExt;
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

/// A claim directory (this host's, or a dead host's being recovered) held open and
/// locked: the `.serve` directory that holds it, its name there, and itself.
struct Held {
    serve: Dir,
    name: OsString,
    dir: HeldDir,
    _lock: Flock<File>,
}

impl Held {
    /// The companions of `name` that are here.
    fn companions(&self, name: &OsStr) -> Vec<OsString> {
        companion_names(name)
            .into_iter()
            .filter(|c| exists(&self.dir.dir, c))
            .collect()
    }

    /// Moves `name` and its companions back to `inbox`, the `.md` last. A name taken in
    /// the inbox (a new request of the same name) stops it: what is left stays.
    fn give_back(&self, inbox: &Dir, name: &OsStr) -> io::Result<()> {
        for companion in self.companions(name) {
            rename_noreplace(&self.dir.dir, &companion, inbox, &companion)?;
        }
        rename_noreplace(&self.dir.dir, name, inbox, name)?;
        sync_dir(inbox)
    }

    /// Removes the directory when it is empty but for its lock.
    fn remove_if_empty(&self) {
        let only_lock = self.dir.dir.entries().is_ok_and(|entries| {
            entries
                .flatten()
                .all(|e| e.file_name().as_bytes() == LOCK_FILE.as_bytes())
        });
        if only_lock {
            let _ = self.dir.dir.remove_file(LOCK_FILE);
            let _ = self.serve.remove_dir(&self.name);
        }
    }
}

/// This host's claim directory, locked for as long as the value lives.
pub struct ClaimDir {
    inbox: Dir,
    held: Held,
}

impl ClaimDir {
    /// Creates and locks a fresh claim directory in `inbox`.
    pub fn create(inbox: &HeldDir) -> io::Result<Self> {
        Self::create_observed(inbox, &mut |_| {})
    }

    /// [`ClaimDir::create`], calling `between` after each step with the `.serve`
    /// directory (a test runs a peer's recovery pass there, see the tests).
    fn create_observed(inbox: &HeldDir, between: &mut dyn FnMut(&Path)) -> io::Result<Self> {
        let private = || {
            let mut builder = DirBuilder::new();
            builder.mode(0o700);
            builder
        };
        match inbox.dir.create_dir_with(SERVE_DIR, &private()) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        let serve = inbox.open_dir(OsStr::new(SERVE_DIR))?;
        let id = host_id();
        let tmp = format!(".new-{id}");
        serve.dir.create_dir_with(&tmp, &private())?;
        let claims = serve.dir.open_dir(&tmp)?;
        between(&serve.path);
        // The lock file is created and locked under another name, then renamed: a peer's
        // recovery pass takes a `.lock` it can lock for a dead host's, so a `.lock`
        // must never be seen unlocked while its host lives (it was, between its
        // creation and the `flock`, and a peer starting at the same moment swept this
        // directory as a dead host's).
        let file = claims.create(NEW_LOCK_FILE)?.into_std();
        between(&serve.path);
        let lock = Flock::lock(file, FlockArg::LockExclusiveNonblock)
            .map_err(|(_, errno)| io::Error::from(errno))?;
        between(&serve.path);
        claims.rename(NEW_LOCK_FILE, &claims, LOCK_FILE)?;
        between(&serve.path);
        rename_noreplace(&serve.dir, OsStr::new(&tmp), &serve.dir, OsStr::new(&id))?;
        between(&serve.path);
        sync_dir(&serve.dir)?;
        Ok(Self {
            inbox: inbox.dir.try_clone()?,
            held: Held {
                dir: HeldDir {
                    dir: claims,
                    path: serve.path.join(&id),
                },
                serve: serve.dir,
                name: id.into(),
                _lock: lock,
            },
        })
    }

    pub fn path(&self) -> &Path {
        &self.held.dir.path
    }

    /// The claim directory, held.
    pub fn dir(&self) -> &HeldDir {
        &self.held.dir
    }

    /// Claims `name` from the inbox: `Ok(false)` when another host (or an earlier claim of
    /// the same name, still held here) has it. The companions follow the `.md`.
    pub fn claim(&self, name: &OsStr) -> io::Result<bool> {
        let claims = &self.held.dir.dir;
        match rename_noreplace(&self.inbox, name, claims, name) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound || is_exists(&e) => return Ok(false),
            Err(e) => return Err(e),
        }
        for companion in companion_names(name) {
            match rename_noreplace(&self.inbox, &companion, claims, &companion) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// The companions of claimed `name` that are here.
    pub fn companions(&self, name: &OsStr) -> Vec<OsString> {
        self.held.companions(name)
    }

    /// Gives claimed `name` back to the inbox (companions first, the `.md` last).
    pub fn release(&self, name: &OsStr) -> io::Result<()> {
        self.held.give_back(&self.inbox, name)
    }

    /// Removes this claim directory when nothing is claimed in it any more.
    pub fn remove_if_empty(&self) {
        self.held.remove_if_empty();
    }
}

/// A unique id for this host: process id and the clock.
fn host_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{}-{nanos:x}", std::process::id())
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
    held: Held,
}

impl DeadClaims {
    /// The claim directory, held.
    pub fn dir(&self) -> &HeldDir {
        &self.held.dir
    }

    /// Its path (for messages, and for the pipeline, which reads a request by path).
    pub fn path(&self) -> &Path {
        &self.held.dir.path
    }

    /// The requests claimed in it (`TR-*.md` entries), in name order.
    pub fn requests(&self) -> Vec<OsString> {
        let mut names: Vec<OsString> = self
            .held
            .dir
            .dir
            .entries()
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
        self.held.companions(name)
    }

    /// Gives `name` back to `inbox`.
    pub fn give_back(&self, inbox: &Dir, name: &OsStr) -> io::Result<()> {
        self.held.give_back(inbox, name)
    }

    /// Companions left here without their `.md` (the host died between claiming the
    /// `.md` and moving them, or recovery gave the `.md` back first): back to the inbox.
    /// Returns what could not be done (a move refused, the inbox not made durable), one
    /// line each; what stays here is tried again by the next recovery pass.
    pub fn give_back_orphans(&self, inbox: &HeldDir) -> Vec<String> {
        let mut failures = Vec::new();
        let here = &self.held.dir;
        let entries = match here.dir.entries() {
            Ok(entries) => entries,
            Err(e) => return vec![format!("cannot list {}: {e}", here.path.display())],
        };
        let mut moved = false;
        for e in entries.flatten() {
            let name = e.file_name();
            if name.as_bytes() == LOCK_FILE.as_bytes() || super::is_request_name(&name) {
                continue;
            }
            match rename_noreplace(&here.dir, &name, &inbox.dir, &name) {
                Ok(()) => moved = true,
                Err(err) => failures.push(format!(
                    "cannot give {} back to the inbox: {err}",
                    here.path.join(&name).display()
                )),
            }
        }
        if moved && let Err(e) = sync_dir(&inbox.dir) {
            failures.push(format!(
                "the companions given back to {} are not durable yet: {e}",
                inbox.path.display()
            ));
        }
        failures
    }

    /// Removes the directory when it is empty but for its lock.
    pub fn remove_if_empty(&self) {
        self.held.remove_if_empty();
    }
}

/// The claim directories of hosts that are gone, each locked for recovery (`own` is
/// skipped; a directory whose host lives stays locked by it and is skipped too).
pub fn dead_claims(inbox: &HeldDir, own: &Path) -> Vec<DeadClaims> {
    let Ok(serve) = inbox.open_dir(OsStr::new(SERVE_DIR)) else {
        return Vec::new();
    };
    let Ok(entries) = serve.dir.entries() else {
        return Vec::new();
    };
    let mut dead = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name();
        let path = serve.path.join(&name);
        if path == own || !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let Some((dir, lock)) = try_lock(&serve.dir, &name) else {
            continue;
        };
        let held = Held {
            serve: match serve.dir.try_clone() {
                Ok(serve) => serve,
                Err(_) => continue,
            },
            name,
            dir: HeldDir { dir, path },
            _lock: lock,
        };
        if held.name.as_bytes().starts_with(b".new-") {
            // A host being created, or one that died before its directory was in place:
            // it never claimed anything. Remove it once its lock is free (one that died
            // before its `.lock` was in place stays: an empty directory, never taken
            // for a live host's).
            let _ = held.dir.dir.remove_file(LOCK_FILE);
            let _ = held.serve.remove_dir(&held.name);
            continue;
        }
        dead.push(DeadClaims { held });
    }
    dead
}

/// The claim directory `name` of `serve` and its lock, when its lock can be taken (its
/// host is gone).
fn try_lock(serve: &Dir, name: &OsStr) -> Option<(Dir, Flock<File>)> {
    let dir = serve.open_dir(name).ok()?;
    let file = dir.open(LOCK_FILE).ok()?.into_std();
    let lock = Flock::lock(file, FlockArg::LockExclusiveNonblock).ok()?;
    Some((dir, lock))
}

/// A complete result in `results` for the request `request_id` whose normalized text
/// has the tagged sha256 `request_sha256`: a `TS-….md` beside a lock that pins both.
pub fn published_result(
    results: &HeldDir,
    request_id: &str,
    request_sha256: &str,
) -> Option<PathBuf> {
    const LOCK_CAP: u64 = 1 << 22;
    let suffix = runner_gate::inbox::LOCK_SUFFIX;
    for e in results.dir.entries().ok()?.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(id) = name.strip_suffix(suffix) else {
            continue;
        };
        if !id.starts_with("TS-") || !id.contains(request_id) {
            continue;
        }
        let document = format!("{id}.md");
        if !results.dir.metadata(&document).is_ok_and(|m| m.is_file()) {
            continue;
        }
        let Ok(bytes) = runner_gate::read_document_in(&results.dir, OsStr::new(name), LOCK_CAP)
        else {
            continue;
        };
        if bytes.len() as u64 > LOCK_CAP {
            continue;
        }
        let Ok(lock) = serde_json::from_slice::<runner_core::lock::Lock>(&bytes) else {
            continue;
        };
        if lock.request.request_id == request_id && lock.request.sha256 == request_sha256 {
            return Some(results.path.join(document));
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
        let tmp = tempfile::tempdir().unwrap();
        let inbox = HeldDir::open(tmp.path()).unwrap();
        let peer = ClaimDir::create(&inbox).unwrap();
        let mut passes = 0;
        let created = ClaimDir::create_observed(&inbox, &mut |serve| {
            assert_eq!(serve, inbox.path.join(SERVE_DIR));
            assert!(dead_claims(&inbox, peer.path()).is_empty());
            passes += 1;
        });
        let created = created.unwrap();
        assert_eq!(passes, 5);
        // Created and locked: not recoverable while it lives, recoverable once gone.
        assert!(created.path().join(LOCK_FILE).is_file());
        dies(&inbox, created, &peer);
    }

    /// `host` dies (its lock goes with it) while `peer` lives: its claim directory, and
    /// only it, is then recoverable; until then nothing is.
    fn dies(inbox: &HeldDir, host: ClaimDir, peer: &ClaimDir) -> Vec<DeadClaims> {
        assert!(dead_claims(inbox, peer.path()).is_empty());
        let path = host.path().to_owned();
        drop(host);
        let dead = dead_claims(inbox, peer.path());
        assert_eq!(dead.len(), 1);
        assert_eq!(dead[0].path(), path);
        dead
    }

    #[test]
    fn one_of_two_hosts_claims_a_request() {
        let tmp = tempfile::tempdir().unwrap();
        let inbox = HeldDir::open(tmp.path()).unwrap();
        inbox.dir.write("TR-a.md", "x").unwrap();
        inbox.dir.write("TR-a.md.sig", "s").unwrap();
        inbox.dir.create_dir("TR-a.inputs").unwrap();
        let (a, b) = (
            ClaimDir::create(&inbox).unwrap(),
            ClaimDir::create(&inbox).unwrap(),
        );
        assert!(a.claim(OsStr::new("TR-a.md")).unwrap());
        assert!(!b.claim(OsStr::new("TR-a.md")).unwrap());
        assert_eq!(a.companions(OsStr::new("TR-a.md")).len(), 2);
        // A live host's claims are not recoverable; a dead one's are.
        let a_path = a.path().to_owned();
        let dead = dies(&inbox, a, &b);
        assert_eq!(dead[0].requests(), vec![OsString::from("TR-a.md")]);
        dead[0]
            .give_back(&inbox.dir, OsStr::new("TR-a.md"))
            .unwrap();
        dead[0].remove_if_empty();
        assert!(!a_path.exists());
        for n in ["TR-a.md", "TR-a.md.sig", "TR-a.inputs"] {
            assert!(exists(&inbox.dir, OsStr::new(n)), "{n}");
        }
    }
}
