//! `runner verify`: re-derive every hash a result and its lock cover from the files on
//! disk and require equality (L2, L8). Never repairs anything. Each difference names
//! what differed, what was expected and what was found.

use crate::sign;
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
use ed25519_dalek::VerifyingKey;
use runner_contract::verdict::Verdict;
use runner_core::lock::statement;
use runner_core::lock::{Lock, lock_file_name, sha256_tagged, tag, text_sha256_tagged};
use runner_core::request::frontmatter;
use runner_core::request::yaml::{self, Node};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// One thing that did not match.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Difference {
    pub what: String,
    pub expected: String,
    pub actual: String,
}

/// The outcome of verifying one result.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Verification {
    pub verdict: Verdict,
    pub differences: Vec<Difference>,
    /// What was re-derived and compared.
    pub checked: Vec<String>,
    /// What could not be checked (and so is not vouched for).
    pub not_checked: Vec<String>,
    #[serde(skip)]
    pub lock: Option<Lock>,
}

fn diff(
    what: impl Into<String>,
    expected: impl Into<String>,
    actual: impl Into<String>,
) -> Difference {
    Difference {
        what: what.into(),
        expected: expected.into(),
        actual: actual.into(),
    }
}

/// Result id and directory of `TS-….md`.
pub fn result_location(result: &Path) -> (String, PathBuf) {
    let id = result
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dir = result
        .parent()
        .map(Path::to_owned)
        .unwrap_or_else(|| PathBuf::from("."));
    let dir = if dir.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        dir
    };
    (id, dir)
}

/// Where a request is looked for when not given: `<request_id>.md` in the results
/// directory's parent (the default layout, `results/` beside the request) or in the
/// results directory itself; failing that, a markdown file in the parent whose
/// normalized text has the pinned sha256 (so a renamed request is still found, while
/// a request found by name is always compared, tampered or not).
///
/// # Ambient authority
/// Opens the results directory's parent ([`runner_sandbox::host`]), then lists and
/// reads it through that handle.
pub fn find_request(results_dir: &Path, request_id: &str, pinned_sha256: &str) -> Option<PathBuf> {
    let name = format!("{request_id}.md");
    if let Some(p) = [results_dir.join("..").join(&name), results_dir.join(&name)]
        .into_iter()
        .find(|p| p.is_file())
    {
        return Some(p);
    }
    let parent_path = results_dir.join("..");
    let parent = runner_sandbox::host::open_dir(&parent_path).ok()?;
    let entries = parent.entries().ok()?;
    entries
        .flatten()
        .take(1000)
        .map(|e| e.file_name())
        .filter(|name| {
            Path::new(name).extension().is_some_and(|x| x == "md")
                && parent
                    .metadata(name)
                    .is_ok_and(|m| m.is_file() && m.len() <= (1 << 20))
        })
        .find(|name| {
            parent
                .read_to_string(name)
                .is_ok_and(|t| text_sha256_tagged(&t) == pinned_sha256)
        })
        .map(|name| parent_path.join(name))
}

/// The most a lock, a statement or an envelope may hold: a lock of 100,000 artifacts
/// (the most `/out` may hold) is about 20 MB.
const MAX_COMPANION_BYTES: u64 = 64 << 20;

/// Where [`verify_with`] finds the request a lock pins.
#[derive(Debug, Clone, Copy)]
pub enum RequestLookup<'a> {
    /// The file the operator named.
    Given(&'a Path),
    /// Looked for beside the results directory ([`find_request`]).
    Beside,
    /// Not looked for (the gate: a result crosses it without its request); the
    /// verification lists the request as not checked.
    Skip,
}

/// Verifies `result` (a `TS-….md`) against its lock and the files beside it, and the
/// request `request` names (or the one found beside the results).
///
/// # Ambient authority
/// Reads the result, its lock, its artifact directory and the request from the host
/// filesystem: the paths the operator named, or the layout `runner exec` writes.
pub fn verify(result: &Path, request: Option<&Path>) -> Verification {
    verify_with(
        result,
        request.map_or(RequestLookup::Beside, RequestLookup::Given),
    )
}

/// What the gate checks of a result set before it accepts it: the lock (as
/// [`verify`] does, but with no request to look for) and the statement and envelope
/// beside it ([`check_statement`], with no key).
///
/// # Ambient authority
/// As [`verify`]: reads the set beside `result`.
pub fn verify_set(result: &Path) -> Verification {
    let mut v = verify_with(result, RequestLookup::Skip);
    check_statement(&mut v, result, None);
    v
}

/// Verifies `result` against its lock, finding the request as `lookup` says. Never
/// follows a symlink where a lock or an artifact should be.
///
/// # Ambient authority
/// As [`verify`].
pub fn verify_with(result: &Path, lookup: RequestLookup<'_>) -> Verification {
    let mut f = Findings::default();
    let (id, dir) = result_location(result);
    let lock = f.read_lock(&dir.join(lock_file_name(&id)));
    let result_text = f.read_result(result);
    let Some(lock) = lock else {
        return f.finish(None);
    };
    if lock.result_id != id {
        f.differ("lock result_id", &id, &lock.result_id);
    }
    if let Some(text) = &result_text {
        let actual = text_sha256_tagged(text);
        if actual != lock.result_sha256 {
            f.differ("result document sha256", &lock.result_sha256, actual);
        }
        f.checked.push("result document".into());
        compare_front_matter(text, &lock, &mut f.differences);
    }
    match open_artifact_dir(&dir, &id) {
        Err(e) => f.differ(
            format!("artifact directory {}", dir.join(&id).display()),
            "a directory (not a link)",
            e.to_string(),
        ),
        Ok(adir) => {
            unlisted_entries(&adir, &lock, &mut f.differences);
            f.check_streams(&adir, &lock);
            f.check_bodies(&adir, &lock);
            f.check_out(&adir, &lock, &id);
        }
    }
    let request_path = match lookup {
        RequestLookup::Given(p) => Some(p.to_owned()),
        RequestLookup::Beside => find_request(&dir, &lock.request.request_id, &lock.request.sha256),
        RequestLookup::Skip => {
            f.not_checked.push(format!(
                "request {} (it does not travel with the result)",
                lock.request.request_id
            ));
            return f.finish(Some(lock));
        }
    };
    match request_path {
        Some(p) => f.check_request(&p, &lock),
        None => f.not_checked.push(format!(
            "request {} (not given and not found beside the results)",
            lock.request.request_id
        )),
    }
    f.finish(Some(lock))
}

/// What a verification has found so far, in the order it looked.
#[derive(Default)]
struct Findings {
    differences: Vec<Difference>,
    checked: Vec<String>,
    not_checked: Vec<String>,
}

impl Findings {
    fn differ(
        &mut self,
        what: impl Into<String>,
        expected: impl Into<String>,
        actual: impl Into<String>,
    ) {
        self.differences.push(diff(what, expected, actual));
    }

    fn finish(self, lock: Option<Lock>) -> Verification {
        finish(self.differences, self.checked, self.not_checked, lock)
    }

    /// The lock at `lock_path`, parsed and its own hash re-derived.
    fn read_lock(&mut self, lock_path: &Path) -> Option<Lock> {
        let bytes =
            match runner_sandbox::read::read_regular_nofollow(lock_path, MAX_COMPANION_BYTES) {
                Ok(bytes) => bytes,
                Err(e) => {
                    self.differ(
                        format!("lock {}", lock_path.display()),
                        "a readable lock file",
                        e.to_string(),
                    );
                    return None;
                }
            };
        match Lock::parse(&bytes) {
            Ok(lock) => {
                self.checked
                    .push("lock (canonical form, fields, lock_sha256)".into());
                Some(lock)
            }
            Err(e) => {
                self.differ(
                    "lock",
                    "a canonical runner.lock/v1 whose lock_sha256 re-derives",
                    e.to_string(),
                );
                None
            }
        }
    }

    /// The result document's text.
    fn read_result(&mut self, result: &Path) -> Option<String> {
        match runner_sandbox::read::read_regular_nofollow(result, MAX_COMPANION_BYTES) {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(t) => Some(t),
                Err(_) => {
                    self.differ("result document", "UTF-8 text", "invalid UTF-8");
                    None
                }
            },
            Err(e) => {
                self.differ(
                    format!("result {}", result.display()),
                    "a readable result document",
                    e.to_string(),
                );
                None
            }
        }
    }

    /// stdout and stderr beside the result, against their pins.
    fn check_streams(&mut self, adir: &Dir, lock: &Lock) {
        for (name, pin) in [
            ("stdout", &lock.outputs.stdout),
            ("stderr", &lock.outputs.stderr),
        ] {
            match hash_nofollow(adir, name) {
                Ok((sha, bytes)) => {
                    if sha != pin.sha256 {
                        self.differ(format!("{name} sha256"), &pin.sha256, sha);
                    } else if bytes != pin.bytes {
                        self.differ(
                            format!("{name} bytes"),
                            pin.bytes.to_string(),
                            bytes.to_string(),
                        );
                    }
                    self.checked.push(name.into());
                }
                Err(e) => self.differ(format!("{name} file"), "present", e.to_string()),
            }
        }
    }

    /// Each response body the broker gave the guest, stored beside the streams.
    fn check_bodies(&mut self, adir: &Dir, lock: &Lock) {
        for e in lock.network.iter().flat_map(|n| &n.exchanges) {
            let Some(pinned) = &e.response_sha256 else {
                continue;
            };
            let name = runner_core::net::body_file_name(e.seq);
            let what = format!("network response {} ({} {})", e.seq, e.method, e.url);
            match hash_nofollow(adir, &name) {
                Ok((sha, _)) if &sha != pinned => {
                    self.differ(format!("{what} sha256"), pinned, sha);
                }
                Ok(_) => self.checked.push(what),
                Err(err) => self.differ(format!("{what} file"), "present", err.to_string()),
            }
        }
    }

    /// `out/` beside the result: every artifact the lock lists, with its hash and size,
    /// and nothing else.
    fn check_out(&mut self, adir: &Dir, lock: &Lock, id: &str) {
        if adir
            .symlink_metadata("out")
            .is_ok_and(|m| !m.file_type().is_dir())
        {
            self.differ(
                "artifact directory out/",
                "a directory (not a link)",
                "a symlink or another file",
            );
            return;
        }
        let Ok(out) = runner_gate::artifacts::open_dir_nofollow(adir, "out") else {
            if !lock.outputs.artifacts.is_empty() {
                self.differ("artifact directory out/", "present", "missing");
            }
            return;
        };
        // The gate's own listing: a link, a special file, a level too deep or an
        // entry past the cap is a difference, never skipped.
        let mut problems = runner_core::markdown::fields::Reasons::default();
        let on_disk = runner_gate::artifacts::list_out(
            &out,
            MAX_OUT_ENTRIES,
            &runner_core::result::escaped(std::ffi::OsStr::new(id)),
            &mut problems,
        );
        for p in problems.0 {
            self.differ(
                format!("artifact directory out/ ({})", p.code),
                "only regular files the lock lists, within the depth and count caps",
                p.message,
            );
        }
        for a in &lock.outputs.artifacts {
            if a.path.split('/').any(|c| c == ".." || c.is_empty()) {
                self.differ(
                    format!("artifact path {}", a.path),
                    "a relative path",
                    "a path that climbs or is empty",
                );
                continue;
            }
            match hash_nofollow(&out, &a.path) {
                Ok((sha, bytes)) => {
                    if sha != a.sha256 {
                        self.differ(format!("artifact {}", a.path), &a.sha256, sha);
                    } else if bytes != a.bytes {
                        self.differ(
                            format!("artifact {} bytes", a.path),
                            a.bytes.to_string(),
                            bytes.to_string(),
                        );
                    }
                    self.checked.push(format!("artifact {}", a.path));
                }
                Err(e) => self.differ(
                    format!("artifact {}", a.path),
                    &a.sha256,
                    format!("missing or unreadable: {e}"),
                ),
            }
        }
        for path in on_disk.into_keys() {
            if !lock.outputs.artifacts.iter().any(|a| a.path == path) {
                self.differ(
                    format!("artifact {path}"),
                    "absent (not in the lock)",
                    "present",
                );
            }
        }
    }

    /// The request at `p`, against the lock's pin.
    fn check_request(&mut self, p: &Path, lock: &Lock) {
        match runner_sandbox::read::read_document(p, MAX_COMPANION_BYTES) {
            Ok(runner_sandbox::read::Read2::TooLarge(size)) => self.differ(
                format!("request {}", p.display()),
                "readable",
                format!("{size} bytes, more than {MAX_COMPANION_BYTES}"),
            ),
            Ok(runner_sandbox::read::Read2::Bytes(bytes)) => {
                let actual = match std::str::from_utf8(&bytes) {
                    Ok(t) => text_sha256_tagged(t),
                    Err(_) => sha256_tagged(&bytes),
                };
                if actual != lock.request.sha256 {
                    self.differ(
                        format!("request {}", p.display()),
                        &lock.request.sha256,
                        actual,
                    );
                }
                self.checked.push(format!("request {}", p.display()));
            }
            Err(e) => self.differ(
                format!("request {}", p.display()),
                "readable",
                e.to_string(),
            ),
        }
    }
}

/// The statement beside `result` must be the one its lock implies. With `key`, the
/// DSSE envelope beside it must carry exactly that statement under a valid signature by
/// `key`; without a key, an envelope that is there must still carry exactly that
/// statement (its signature is then listed as not checked). Turns the verdict to REJECT
/// on any difference.
///
/// # Ambient authority
/// Reads the statement and envelope beside `result`.
pub fn check_statement(v: &mut Verification, result: &Path, key: Option<&VerifyingKey>) {
    let Some(lock) = v.lock.as_ref() else { return };
    let (id, dir) = result_location(result);
    let expected = match statement::statement_text(lock, &format!("{id}.md")) {
        Ok(t) => t,
        Err(e) => {
            v.differences
                .push(diff("statement", "encodable", e.to_string()));
            v.verdict = Verdict::Reject;
            return;
        }
    };
    let read = |name: String| {
        runner_sandbox::read::read_regular_nofollow(&dir.join(name), MAX_COMPANION_BYTES)
    };
    match read(statement::statement_file_name(&id)) {
        Ok(bytes) if bytes == expected.as_bytes() => v.checked.push("in-toto statement".into()),
        Ok(_) => v.differences.push(diff(
            "in-toto statement",
            "the statement the lock implies",
            "different bytes",
        )),
        Err(e) => v
            .differences
            .push(diff("in-toto statement", "present", e.to_string())),
    }
    let envelope = match (key, read(statement::envelope_file_name(&id))) {
        (_, Ok(bytes)) => Some(bytes),
        // Without a key, an envelope is optional.
        (None, Err(e)) if e.kind() == std::io::ErrorKind::NotFound => None,
        (key, Err(e)) => {
            let wanted = match key {
                Some(_) => "a DSSE envelope beside the result",
                None => "a readable DSSE envelope (or none)",
            };
            v.differences
                .push(diff("statement signature", wanted, e.to_string()));
            None
        }
    };
    if let Some(bytes) = envelope {
        // With a key, the signature is checked; without, only what the envelope carries.
        let carried = sign::parse_envelope(&bytes).and_then(|env| match key {
            Some(key) => sign::verify(&env, statement::PAYLOAD_TYPE, key),
            None => sign::payload(&env, statement::PAYLOAD_TYPE),
        });
        // What was expected when it carries another statement, what was found then, and
        // what was expected when it carries none.
        let (over_this, over_another, valid) = match key {
            Some(_) => (
                "a signature over this run's statement",
                "a valid signature over another statement",
                "a valid signature by the given key",
            ),
            None => (
                "an envelope over this run's statement",
                "an envelope over another statement",
                "a DSSE envelope over this run's statement",
            ),
        };
        match (carried, key) {
            (Ok(payload), Some(key)) if payload == expected.as_bytes() => v.checked.push(format!(
                "statement signature by {}",
                runner_core::policy::key_id(key)
            )),
            (Ok(payload), None) if payload == expected.as_bytes() => {
                v.checked
                    .push("statement envelope carries this run's statement".into());
                v.not_checked
                    .push("statement signature (no public key given)".into());
            }
            (Ok(_), _) => v
                .differences
                .push(diff("statement signature", over_this, over_another)),
            (Err(e), _) => v
                .differences
                .push(diff("statement signature", valid, e.to_string())),
        }
    }
    if !v.differences.is_empty() {
        v.verdict = Verdict::Reject;
    }
}

fn finish(
    differences: Vec<Difference>,
    checked: Vec<String>,
    not_checked: Vec<String>,
    lock: Option<Lock>,
) -> Verification {
    let verdict = if differences.is_empty() {
        Verdict::Accept
    } else {
        Verdict::Reject
    };
    Verification {
        verdict,
        differences,
        checked,
        not_checked,
        lock,
    }
}

/// The result's front matter must agree with the lock on every hash it states.
fn compare_front_matter(text: &str, lock: &Lock, differences: &mut Vec<Difference>) {
    let Ok(split) = frontmatter::split(text) else {
        differences.push(diff("result front matter", "present", "missing"));
        return;
    };
    let budget = yaml::Budget {
        max_depth: 8,
        max_nodes: 100_000,
    };
    let Ok(root) = yaml::load(&split.front_matter, split.front_matter_first_line, budget) else {
        differences.push(diff("result front matter", "valid YAML", "invalid"));
        return;
    };
    let scalar = |key: &str| match root.get(key) {
        Some(Node::Scalar { value, .. }) => value.clone(),
        _ => String::new(),
    };
    for (key, pinned) in [
        ("stdout_sha256", &lock.outputs.stdout.sha256),
        ("stderr_sha256", &lock.outputs.stderr.sha256),
    ] {
        let stated = tag(&scalar(key));
        if stated != *pinned {
            differences.push(diff(
                format!("result front matter {key}"),
                pinned.clone(),
                stated,
            ));
        }
    }
    for (key, pinned) in [
        ("result_id", &lock.result_id),
        ("request_id", &lock.request.request_id),
        ("exit_code", &lock.outputs.exit_code.to_string()),
    ] {
        let stated = scalar(key);
        if stated != *pinned {
            differences.push(diff(
                format!("result front matter {key}"),
                pinned.clone(),
                stated,
            ));
        }
    }
    let stated: Vec<(String, String)> = match root.get("artifacts") {
        Some(Node::Seq { items, .. }) => items
            .iter()
            .map(|i| {
                let get = |k| match i.get(k) {
                    Some(Node::Scalar { value, .. }) => value.clone(),
                    _ => String::new(),
                };
                (get("path"), tag(&get("sha256")))
            })
            .collect(),
        _ => Vec::new(),
    };
    let pinned: Vec<(String, String)> = lock
        .outputs
        .artifacts
        .iter()
        .map(|a| (a.path.clone(), a.sha256.clone()))
        .collect();
    if stated != pinned {
        let show = |v: &[(String, String)]| {
            v.iter()
                .map(|(p, s)| format!("{p}={s}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        differences.push(diff(
            "result front matter artifacts",
            show(&pinned),
            show(&stated),
        ));
    }
}

/// The most entries `out/` may hold: as many as `/out` may (100,000), and a margin.
const MAX_OUT_ENTRIES: u64 = 100_016;

/// The result's artifact directory `id` in the results directory `dir`, which must
/// itself be a directory, not a link to one.
///
/// # Ambient authority
/// Opens the results directory ([`runner_sandbox::host`]).
fn open_artifact_dir(dir: &Path, id: &str) -> std::io::Result<Dir> {
    let results = runner_sandbox::host::open_dir(dir)?;
    if results.symlink_metadata(id)?.file_type().is_symlink() {
        return Err(std::io::Error::other(
            "a symlink; a result's files are never links",
        ));
    }
    runner_gate::artifacts::open_dir_nofollow(&results, id)
}

/// Each entry of the artifact directory the lock does not account for: it holds `out/`,
/// `stdout`, `stderr` and the body of each response the lock pins, nothing else.
fn unlisted_entries(adir: &Dir, lock: &Lock, differences: &mut Vec<Difference>) {
    let bodies: Vec<String> = lock
        .network
        .iter()
        .flat_map(|n| &n.exchanges)
        .filter(|e| e.response_sha256.is_some())
        .map(|e| runner_core::net::body_file_name(e.seq))
        .collect();
    let entries = match adir.entries() {
        Ok(entries) => entries,
        Err(e) => {
            differences.push(diff("artifact directory", "listable", e.to_string()));
            return;
        }
    };
    // The directory holds at most 3 entries and a body per pinned response.
    let cap = bodies.len() + 4;
    let mut names: Vec<String> = entries
        .flatten()
        .take(cap + 1)
        .map(|e| runner_core::result::escaped(&e.file_name()))
        .collect();
    names.sort();
    if names.len() > cap {
        differences.push(diff(
            "artifact directory",
            format!("at most {cap} entries"),
            "more",
        ));
    }
    for name in names {
        if !matches!(name.as_str(), "out" | "stdout" | "stderr") && !bodies.contains(&name) {
            differences.push(diff(
                format!("artifact directory entry {name}"),
                "absent (not in the lock)",
                "present",
            ));
        }
    }
}

/// Why a pinned file could not be hashed ([`hash_nofollow`]); the message is the
/// "actual" side of its difference.
#[derive(Debug, thiserror::Error)]
enum Unhashable {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("{0} is not a directory")]
    NotADirectory(String),
    #[error("not a regular file")]
    NotAFile,
}

/// sha256 (tagged) and size of `path` under `dir`, refusing symlinks at every step.
fn hash_nofollow(dir: &Dir, path: &str) -> Result<(String, u64), Unhashable> {
    let mut current = dir.try_clone()?;
    let parts: Vec<&str> = path.split('/').collect();
    for part in &parts[..parts.len() - 1] {
        let meta = current.symlink_metadata(part)?;
        if !meta.is_dir() {
            return Err(Unhashable::NotADirectory((*part).to_owned()));
        }
        current = current.open_dir(part)?;
    }
    let flags = nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK;
    let file = current.open_with(
        parts[parts.len() - 1],
        OpenOptions::new().read(true).custom_flags(flags.bits()),
    )?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(Unhashable::NotAFile);
    }
    let sha = runner_sandbox::digest::sha256_reader(file)?;
    Ok((tag(&sha), meta.len()))
}
