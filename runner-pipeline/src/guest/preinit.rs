//! The pre-initialised cpython-3.12 (`runner_wasmtime::preinit`): built once by
//! `runner guest fetch`, stored content-addressed in the guest store, pinned by its
//! sha256, and chosen for a run by [`select`], the one place that decides which module
//! runs.
//!
//! Stored as `<guest dir>/preinit/<key>.wasm` with `<key>.json` (its sha256 and what it
//! was built for), where the key hashes everything the snapshot depends on: the plain
//! guest's sha256, the runner's version (the rewrite and the boot module), the wasmtime
//! version, the guest's runtime (environment, mounts with their content-addressed host
//! directories, scratch) and the virtual clock's step. A run whose runtime differs (the
//! network's `PYTHONPATH`, a package environment) finds no snapshot for it and runs the
//! plain module.

use super::GuestError;
use super::manifest::GuestEntry;
use runner_core::determinism::DEFAULT_STEP_NS;
use runner_core::determinism::Determinism;
use runner_core::run::Limits;
use runner_sandbox::runtime::GuestRuntime;
use runner_sandbox::{GuestProgram, SandboxSpec};
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Plain guests (file sha256) whose structure the rewrite knows: the pinned
/// cpython-3.12 (VMware Wasm Labs' `python.wasm` 3.12.0).
const KNOWN_GUESTS: &[&str] = &["e5dc5a398b07b54ea8fdb503bf68fb583d533f10ec3f930963e02b9505f7a763"];

/// Environment variable: `0` runs the plain module always, replays of pre-initialised
/// runs included (and `guest fetch` builds no pre-initialised module).
pub const PREINIT_ENV: &str = "RUNNER_PREINIT";

/// Whether pre-initialisation is on (it is unless `RUNNER_PREINIT=0`).
pub fn enabled() -> bool {
    runner_sandbox::env::non_empty(PREINIT_ENV).is_none_or(|v| v != "0")
}

/// Whether `entry` has a pre-initialised form.
pub fn applies(entry: &GuestEntry) -> bool {
    KNOWN_GUESTS.contains(&entry.file_sha256.as_str())
}

/// What `<key>.json` records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Record {
    /// sha256 of `<key>.wasm`.
    sha256: String,
    guest_sha256: String,
    runtime: GuestRuntime,
    step_ns: u64,
}

/// A stored pre-initialised module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Built {
    pub path: PathBuf,
    pub sha256: String,
}

fn key(entry: &GuestEntry, runtime: &GuestRuntime, step_ns: u64) -> String {
    let identity = serde_json::json!({
        "guest_sha256": entry.file_sha256,
        "runner": crate::RUNNER_VERSION,
        "format": runner_wasmtime::preinit::FORMAT,
        "wasmtime": runner_wasmtime::WASMTIME_VERSION,
        "boot_sha256": runner_core::digest::sha256_hex(
            runner_wasmtime::preinit::BOOT_SOURCE.as_bytes()
        ),
        "runtime": runtime,
        "step_ns": step_ns,
    });
    runner_core::digest::sha256_hex(identity.to_string().as_bytes())
}

/// `preinit/`, relative to the store.
const DIR: &str = "preinit";

fn dir(guest_dir: &Path) -> PathBuf {
    guest_dir.join(DIR)
}

/// The stored module for `entry` run with `runtime`, if built. The module's hash is
/// checked where it is compiled (`ensure_compiled` hashes it against the recorded
/// sha256 before compiling; a compiled module is verified by its stamp).
pub fn find(entry: &GuestEntry, guest_dir: &Path, runtime: &GuestRuntime) -> Option<Built> {
    let key = key(entry, runtime, DEFAULT_STEP_NS);
    let store = runner_sandbox::store_root::open(guest_dir)
        .ok()??
        .open_dir(DIR)
        .ok()?;
    let record: Record = serde_json::from_slice(&store.read(format!("{key}.json")).ok()?).ok()?;
    if record.guest_sha256 != entry.file_sha256
        || &record.runtime != runtime
        || record.step_ns != DEFAULT_STEP_NS
    {
        return None;
    }
    let name = format!("{key}.wasm");
    store
        .metadata(&name)
        .is_ok_and(|m| m.is_file())
        .then(|| Built {
            path: dir(guest_dir).join(name),
            sha256: record.sha256,
        })
}

/// Builds (once) and stores the pre-initialised module of `entry` (its plain module at
/// `wasm_path`, already verified) for runs with `runtime`; `None` when the guest has
/// none or pre-initialisation is off.
///
/// # Ambient Authority
/// Reads `wasm_path`; writes under `guest_dir/preinit`; creates and removes a temporary
/// directory (the empty `/in` and `/out` of the snapshot's start-up).
pub fn ensure(
    entry: &GuestEntry,
    guest_dir: &Path,
    wasm_path: &Path,
    runtime: &GuestRuntime,
    backend: &runner_wasmtime::worker::WasmtimeBackend,
    progress: &mut dyn FnMut(&str),
) -> Result<Option<Built>, GuestError> {
    if !applies(entry) || !enabled() {
        return Ok(None);
    }
    if let Some(built) = find(entry, guest_dir, runtime) {
        return Ok(Some(built));
    }
    progress(&format!("{}: pre-initialising", entry.name));
    let io = |what: &'static str, path: &Path| GuestError::io(&entry.name, what, path.to_owned());
    let mut wasm = Vec::new();
    crate::store::open_named(wasm_path)
        .and_then(|mut file| file.read_to_end(&mut wasm))
        .map_err(io("read", wasm_path))?;
    let actual = runner_core::digest::sha256_hex(&wasm);
    if actual != entry.file_sha256 {
        return Err(GuestError::StoredHashMismatch {
            guest: entry.name.clone(),
            path: wasm_path.to_owned(),
            expected: entry.file_sha256.clone(),
            actual,
        });
    }
    let scratch = tempfile::tempdir().map_err(io("create a directory for", Path::new("/tmp")))?;
    let held =
        runner_sandbox::host::open_dir(scratch.path()).map_err(io("open", scratch.path()))?;
    for d in ["in", "out", "capture"] {
        held.create_dir(d)
            .map_err(io("create", &scratch.path().join(d)))?;
    }
    let spec = SandboxSpec {
        program: GuestProgram {
            guest: entry.name.clone(),
            wasm_path: wasm_path.to_owned(),
            wasm_sha256: entry.file_sha256.clone(),
            argv: Vec::new(),
            runtime: runtime.clone(),
        },
        in_dir: scratch.path().join("in"),
        out_dir: scratch.path().join("out"),
        capture_dir: scratch.path().join("capture"),
        limits: Limits {
            memory_bytes: 512 << 20,
            wall: Duration::from_secs(120),
            cpu: Duration::from_secs(120),
            stdout_bytes: 1 << 20,
            stderr_bytes: 1 << 20,
            out_bytes: 16 << 20,
            out_files: 64,
        },
        confinement: Default::default(),
        determinism: Default::default(),
    };
    let guest = &spec.program;
    let snapshot =
        runner_wasmtime::preinit::build(backend.engine(), &wasm, guest, &spec, DEFAULT_STEP_NS)
            .map_err(|e| GuestError::Io {
                guest: entry.name.clone(),
                action: "pre-initialise",
                path: wasm_path.to_owned(),
                source: std::io::Error::other(e.to_string()),
            })?;
    let record = Record {
        sha256: runner_core::digest::sha256_hex(&snapshot),
        guest_sha256: entry.file_sha256.clone(),
        runtime: runtime.clone(),
        step_ns: DEFAULT_STEP_NS,
    };
    let key = key(entry, runtime, DEFAULT_STEP_NS);
    let dir_path = dir(guest_dir);
    let store = super::store::create_store(&entry.name, guest_dir)?;
    let held = crate::store::create_dir_all(&store, DIR, 0o700).map_err(io("create", &dir_path))?;
    let wasm_out = dir_path.join(format!("{key}.wasm"));
    write_atomically(&held, &format!("{key}.wasm"), &snapshot).map_err(io("write", &wasm_out))?;
    let json_out = dir_path.join(format!("{key}.json"));
    let json = serde_json::to_vec_pretty(&record).unwrap_or_default();
    // The record last: a module without its record is never used.
    write_atomically(&held, &format!("{key}.json"), &json).map_err(io("write", &json_out))?;
    Ok(Some(Built {
        path: wasm_out,
        sha256: record.sha256,
    }))
}

fn write_atomically(dir: &cap_std::fs::Dir, dest: &str, bytes: &[u8]) -> std::io::Result<()> {
    let mut staged = crate::store::Staged::new(dir, 0o600)?;
    staged.file().write_all(bytes)?;
    staged.publish_replacing(dest, true)
}

/// What a run may use.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Choice {
    /// A new run: the pre-initialised module where [`select`] finds it applies.
    #[default]
    Fresh,
    /// The replayed lock ran the plain module: run it again.
    Plain,
    /// The replayed lock ran this pre-initialised module (sha256 hex): run it, or
    /// refuse when it is not the one stored here.
    Pinned(String),
}

/// Decides which module `program` runs, and switches it to the pre-initialised one when
/// that reproduces the plain module's run: pre-initialisation on, this guest built for
/// this exact runtime, a virtual clock of the snapshot's step (the start-up's clock
/// reads are replayed, see `runner_wasmtime::preinit`), and an argv the boot
/// emulates (`python -c CMD ...`, `python FILE ...` with FILE a plain source file
/// staged under `/in`). Returns the sha256 of the pre-initialised module it chose, or
/// `None` (the plain module runs). `Err`: a replay pinned a pre-initialised module that
/// is not available here.
pub fn select(
    entry: &GuestEntry,
    guest_dir: &Path,
    program: &mut GuestProgram,
    in_dir: &Path,
    determinism: &Determinism,
    choice: &Choice,
) -> Result<Option<String>, Unavailable> {
    if *choice == Choice::Plain || !applies(entry) || program.wasm_sha256 != entry.file_sha256 {
        return Ok(None);
    }
    let usable = || -> Option<Built> {
        if !clock_fits(determinism) {
            return None;
        }
        if !runner_wasmtime::preinit::boot_handles(&program.argv, |p| {
            guest_input(p, in_dir, &program.runtime)
        }) {
            return None;
        }
        find(entry, guest_dir, &program.runtime)
    };
    let built = match choice {
        // Off: the plain module, also to replay a pre-initialised run (its outputs must
        // match; `tests/preinit_diff.rs` relies on it).
        Choice::Plain => None,
        _ if !enabled() => None,
        Choice::Fresh => usable(),
        Choice::Pinned(sha) => match usable() {
            Some(built) if &built.sha256 == sha => Some(built),
            _ => {
                return Err(Unavailable {
                    guest: entry.name.clone(),
                    sha256: sha.clone(),
                });
            }
        },
    };
    Ok(built.map(|built| {
        program.wasm_path = built.path;
        program.wasm_sha256.clone_from(&built.sha256);
        built.sha256
    }))
}

/// A replayed lock ran a pre-initialised module this runner cannot reproduce here.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the lock records a run of the pre-initialised {guest} module sha256:{sha256}, which \
     this runner cannot reproduce here (not built by `runner guest fetch {guest}`, built \
     differently, or not applicable to this run)"
)]
pub struct Unavailable {
    pub guest: String,
    /// Hex, as the lock pins it.
    pub sha256: String,
}

/// The pre-initialised module warm workers should hold for runs of `entry` with
/// `runtime` under `determinism`: the one [`select`] picks for every argv the boot
/// handles, when pre-initialisation is on and the clock is the snapshot's. `None`: such
/// runs use the plain module.
pub fn for_warm_workers(
    entry: &GuestEntry,
    guest_dir: &Path,
    runtime: &GuestRuntime,
    determinism: &Determinism,
) -> Option<Built> {
    (enabled() && applies(entry) && clock_fits(determinism))
        .then(|| find(entry, guest_dir, runtime))
        .flatten()
}

/// Whether a run's clock is the one the snapshot was taken under: virtual, of the
/// default step, sleeps advancing it (the start-up's clock reads are replayed).
fn clock_fits(determinism: &Determinism) -> bool {
    determinism
        .clock
        .as_ref()
        .is_some_and(|clock| clock.step_ns == DEFAULT_STEP_NS && clock.sleeps_advance)
}

/// The host file a guest path names when it resolves into `/in`: `/in/REST`, or a
/// relative path whose first component names no preopen (wasi-libc resolves a relative
/// path against `/` and picks the longest matching preopen, `.` being `/in`). `None`
/// for anything else (other preopens, `..`, empty components).
fn guest_input(path: &str, in_dir: &Path, runtime: &GuestRuntime) -> Option<PathBuf> {
    let rest = match path.strip_prefix("/in/") {
        Some(rest) => rest,
        None if path.starts_with('/') => return None,
        None => {
            let first = path.split('/').next()?;
            let taken = ["in", "out"]
                .into_iter()
                .map(str::to_owned)
                .chain(runtime.mounts.iter().map(|m| m.guest.clone()))
                .chain(runtime.scratch.clone())
                .chain(runtime.exchange.clone())
                .any(|name| name.trim_start_matches('/').split('/').next() == Some(first));
            if taken {
                return None;
            }
            path
        }
    };
    if rest
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return None;
    }
    Some(in_dir.join(rest))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use runner_core::determinism::VirtualClock;

    #[test]
    fn a_replay_runs_what_its_lock_ran_or_refuses() {
        let manifest = super::super::GuestManifest::embedded().unwrap();
        let entry = manifest.require("cpython-3.12").unwrap();
        // An empty store: no pre-initialised module built here.
        let store = tempfile::tempdir().unwrap();
        let in_dir = tempfile::tempdir().unwrap();
        let determinism = Determinism {
            clock: Some(VirtualClock {
                start_unix_us: 1,
                step_ns: DEFAULT_STEP_NS,
                sleeps_advance: true,
            }),
            seed: None,
        };
        let program = || GuestProgram {
            guest: entry.name.clone(),
            wasm_path: PathBuf::from("/plain.wasm"),
            wasm_sha256: entry.file_sha256.clone(),
            argv: vec!["python".into(), "-c".into(), "pass".into()],
            runtime: GuestRuntime::default(),
        };
        let select_with = |choice: &Choice| {
            let mut p = program();
            let chosen = select(
                entry,
                store.path(),
                &mut p,
                in_dir.path(),
                &determinism,
                choice,
            );
            (chosen, p.wasm_path)
        };
        assert_eq!(
            select_with(&Choice::Fresh),
            (Ok(None), PathBuf::from("/plain.wasm"))
        );
        assert_eq!(
            select_with(&Choice::Plain),
            (Ok(None), PathBuf::from("/plain.wasm"))
        );
        let (chosen, path) = select_with(&Choice::Pinned("ab".repeat(32)));
        let why = chosen.unwrap_err().to_string();
        assert!(
            why.contains("cannot reproduce") && why.contains(&"ab".repeat(32)),
            "{why}"
        );
        assert_eq!(path, PathBuf::from("/plain.wasm"));
    }

    #[test]
    fn guest_paths_map_into_in_only_where_wasi_libc_would() {
        let runtime = GuestRuntime {
            scratch: Some("/tmp".into()),
            ..Default::default()
        };
        let in_dir = Path::new("/stage/in");
        let map = |p: &str| guest_input(p, in_dir, &runtime);
        assert_eq!(map("s.py"), Some(in_dir.join("s.py")));
        assert_eq!(map("/in/a/s.py"), Some(in_dir.join("a/s.py")));
        assert_eq!(map("a/s.py"), Some(in_dir.join("a/s.py")));
        // These resolve into other preopens, or leave the tree.
        for p in [
            "in/s.py",
            "out/s.py",
            "tmp/s.py",
            "/out/s.py",
            "/s.py",
            "../s.py",
            "a//s.py",
            "./s.py",
        ] {
            assert_eq!(map(p), None, "{p}");
        }
    }
}
