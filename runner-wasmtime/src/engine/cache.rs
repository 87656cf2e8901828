//! The precompiled-module cache: compiled guests keyed by their sha256 and the engine's
//! fingerprint, verified before they are mapped.

use super::*;

/// (`runner_sandbox::cache::default_cache_dir`; the ownership and mode checks make it
/// safe wherever it is).
///
/// # Ambient Authority
///
/// Reads the process environment.
pub fn default_cache_dir() -> PathBuf {
    runner_sandbox::cache::default_cache_dir()
}

/// A short hex fingerprint of everything that decides whether a precompiled module
/// may be loaded by `engine`: the wasmtime version, the target and its CPU features,
/// the compiler flags, tunables and wasm features
/// (`Engine::precompile_compatibility_hash`).
pub fn engine_fingerprint(engine: &Engine) -> String {
    struct ShaHasher(Sha256);
    impl std::hash::Hasher for ShaHasher {
        fn write(&mut self, bytes: &[u8]) {
            self.0.update(bytes);
        }
        fn finish(&self) -> u64 {
            0
        }
    }
    let mut hasher = ShaHasher(Sha256::new());
    hasher.0.update(b"runner-precompiled-v1\0");
    hasher.0.update(crate::WASMTIME_VERSION.as_bytes());
    hasher.0.update(b"\0");
    std::hash::Hash::hash(&engine.precompile_compatibility_hash(), &mut hasher);
    let full = runner_core::digest::sha256_hex(&hasher.0.finalize());
    full[..16].to_owned()
}

/// The file name of the precompiled form of the guest with `wasm_sha256` for `engine`.
pub(crate) fn precompiled_name(engine: &Engine, wasm_sha256: &str) -> String {
    format!(
        "{wasm_sha256}-wasmtime-{}-{}.cwasm",
        crate::WASMTIME_VERSION,
        engine_fingerprint(engine)
    )
}

/// Where the precompiled form of the guest with `wasm_sha256` lives for `engine`.
pub fn precompiled_path(engine: &Engine, cache_dir: &Path, wasm_sha256: &str) -> PathBuf {
    cache_dir.join(precompiled_name(engine, wasm_sha256))
}

/// The sidecar holding a module's sha256, beside it.
pub(crate) const SIDECAR: &str = ".sha256";
/// The record of a module's last full verification, beside it
/// ([`ModuleCache::open_verified`]).
pub(crate) const VERIFIED: &str = ".verified";

/// `name` with `suffix` appended ([`SIDECAR`], [`VERIFIED`]).
pub(crate) fn suffixed(name: &str, suffix: &str) -> String {
    format!("{name}{suffix}")
}

/// Make sure a verified precompiled module for the guest exists in `cache_dir` and
/// return its path: [`ModuleCache::create`], then [`ModuleCache::ensure_compiled`].
///
/// # Ambient Authority
///
/// Creates `cache_dir` (mode 0700) and reads `wasm_path`.
pub fn ensure_compiled(
    engine: &Engine,
    wasm_path: &Path,
    wasm_sha256: &str,
    cache_dir: &Path,
    progress: impl FnMut(&str),
) -> Result<PathBuf, BackendError> {
    ModuleCache::create(cache_dir)?.ensure_compiled(engine, wasm_path, wasm_sha256, progress)
}

/// Load a precompiled module written by [`ModuleCache::ensure_compiled`]. Its directory
/// is opened without following a symlink and checked (ours, not group/world writable);
/// the file is opened once without following symlinks, its owner, mode and sidecar
/// sha256 are checked on that open descriptor, and the same descriptor is mapped; any
/// failed check is an error (the caller recompiles).
///
/// # Ambient Authority
///
/// Opens the directory of `cwasm_path`.
pub fn load_module(engine: &Engine, cwasm_path: &Path) -> Result<Module, BackendError> {
    let fail = |reason: String| -> BackendError {
        ModuleError::Precompiled {
            path: cwasm_path.to_owned(),
            reason,
        }
        .into()
    };
    let name = cwasm_path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| fail("names no file".into()))?;
    let parent = match cwasm_path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let cache = ModuleCache::open(parent).map_err(|e| match e {
        PrivateDirError::NotPrivate(reason) => fail(format!("its directory {reason}")),
        other => fail(other.to_string()),
    })?;
    let file = cache.open_verified(name).map_err(|e| fail(e.to_string()))?;
    deserialize_verified(engine, file).map_err(|source| {
        ModuleError::Load {
            path: cwasm_path.to_owned(),
            source,
        }
        .into()
    })
}

#[allow(unsafe_code)]
fn deserialize_verified(engine: &Engine, file: File) -> wasmtime::Result<Module> {
    // SAFETY: `Module::deserialize_open_file` trusts the bytes to be a module that
    // this wasmtime produced, and the file to stay unchanged while mapped. `file` was
    // opened with O_NOFOLLOW by `open_verified`, which checked on this very descriptor
    // that it is a regular file owned by our euid, not group/world writable, in a
    // directory with the same properties, and that its contents hash to the sidecar
    // written next to it when we compiled it. Only our own uid (or root) can change it.
    // wasmtime additionally checks the header (version, target, settings) and refuses
    // a module built by an incompatible engine.
    unsafe { Module::deserialize_open_file(engine, file) }
}

/// The precompiled-module cache: one private directory (ours, mode 0700, not group or
/// world writable), opened once through the sandbox (`runner_sandbox::cache`); every
/// read, write and rename of the modules, their sidecar hashes and verification stamps
/// is relative to it.
#[derive(Debug)]
pub struct ModuleCache {
    dir: Dir,
    /// Where it is, for messages and for the module paths handed to the worker.
    path: PathBuf,
}

impl ModuleCache {
    /// The cache at `path`, created (0700, with its parents) when missing; refused
    /// when it is a symlink, not ours, or group/world writable.
    ///
    /// # Ambient Authority
    ///
    /// Creates and opens `path`.
    pub fn create(path: &Path) -> Result<Self, BackendError> {
        let dir = runner_sandbox::cache::create_private_dir(path).map_err(|source| {
            ModuleError::CacheDir {
                path: path.to_owned(),
                source,
            }
        })?;
        Ok(Self {
            dir,
            path: path.to_owned(),
        })
    }

    /// The existing cache at `path` (the worker's side: it never creates one).
    ///
    /// # Ambient Authority
    ///
    /// Opens `path`.
    fn open(path: &Path) -> Result<Self, PrivateDirError> {
        Ok(Self {
            dir: runner_sandbox::cache::open_private_dir(path)?,
            path: path.to_owned(),
        })
    }

    /// Make sure a verified precompiled module for the guest exists here and return its
    /// path. A cache hit costs one hash of the precompiled file; a miss (or any doubt:
    /// wrong owner, wrong mode, a symlink, a missing or different sidecar hash) compiles
    /// the guest again, which takes seconds; `progress` hears about it first.
    ///
    /// The guest bytes are checked against `wasm_sha256` before compiling.
    ///
    /// # Ambient Authority
    ///
    /// Reads `wasm_path`.
    pub fn ensure_compiled(
        &self,
        engine: &Engine,
        wasm_path: &Path,
        wasm_sha256: &str,
        mut progress: impl FnMut(&str),
    ) -> Result<PathBuf, BackendError> {
        if !runner_core::digest::is_sha256_hex(wasm_sha256) {
            return Err(ModuleError::NotADigest(wasm_sha256.to_owned()).into());
        }
        let name = precompiled_name(engine, wasm_sha256);
        let cwasm = self.path.join(&name);
        match self.open_verified(&name) {
            Ok(_) => return Ok(cwasm),
            Err(reason) if reason.kind() == io::ErrorKind::NotFound => {}
            Err(reason) => progress(&format!(
                "discarding cached module {}: {reason}",
                cwasm.display()
            )),
        }

        // The guest file, opened where the guest store keeps it.
        let guest = runner_sandbox::host::open_parent(wasm_path)
            .and_then(|(dir, name)| dir.open(name).map(cap_std::fs::File::into_std));
        // Measured here on 2 cores: the 26 MB CPython 3.12 guest in about 10 s, the 99 MB
        // scientific guest in 1.5-3 minutes with about 2.2 GB of memory.
        let estimate = match guest.as_ref().map(|f| f.metadata().map(|m| m.len())) {
            Ok(Ok(size)) if size > 50 << 20 => "a few minutes and gigabytes of memory",
            _ => "about 10 s",
        };
        progress(&format!(
            "compiling guest {} for {} (one time, {estimate})",
            wasm_path.display(),
            engine_name()
        ));
        let mut wasm = Vec::new();
        guest
            .and_then(|mut file| file.read_to_end(&mut wasm))
            .map_err(|source| ModuleError::Read {
                path: wasm_path.to_owned(),
                source,
            })?;
        let actual = runner_core::digest::sha256_hex(&wasm);
        if actual != wasm_sha256 {
            return Err(ModuleError::Digest {
                path: wasm_path.to_owned(),
                actual,
                expected: wasm_sha256.to_owned(),
            }
            .into());
        }
        let started = Instant::now();
        let compiled = engine
            .precompile_module(&wasm)
            .map_err(|source| ModuleError::Compile {
                path: wasm_path.to_owned(),
                source,
            })?;
        progress(&format!(
            "compiled guest in {:.1} s ({} bytes)",
            started.elapsed().as_secs_f64(),
            compiled.len()
        ));
        let sum = runner_core::digest::sha256_hex(&compiled);
        self.write_atomically(&suffixed(&name, SIDECAR), format!("{sum}\n").as_bytes())?;
        self.write_atomically(&name, &compiled)?;
        Ok(cwasm)
    }

    /// Opens `name` here without following a symlink, as a regular file we trust
    /// ([`check_private`]).
    fn open_private(&self, name: &str) -> io::Result<File> {
        let file = self
            .dir
            .open_with(
                name,
                cap_std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits()),
            )?
            .into_std();
        let meta = file.metadata()?;
        check_private(&meta, false).map_err(io::Error::other)?;
        Ok(file)
    }

    /// Open the precompiled module `name` and check it against its sidecar hash. The
    /// returned descriptor is the one that was checked.
    ///
    /// Hashing the module costs about 1 ms per MB (27 MB for the 3.12 guest), on every
    /// run. So a full check records the stamp of the version it hashed
    /// ([`digest::file_stamp`] of this descriptor, with the sidecar hash) in
    /// `NAME.verified`, and a later open whose descriptor has the same stamp and whose
    /// sidecar names the same hash skips the re-hash. A tampered module has a different
    /// stamp (its change time moved) and is hashed again, so it is still never executed.
    /// What the stamp cannot see is storage corruption that bypasses the file system
    /// (bit rot under an unchanged inode); a removed `NAME.verified` brings the full
    /// check back. Anyone able to rewrite the stamp file could equally rewrite the
    /// sidecar: both sit in the same private directory.
    fn open_verified(&self, name: &str) -> io::Result<File> {
        let mut file = self.open_private(name)?;
        let mut sidecar = String::new();
        self.open_private(&suffixed(name, SIDECAR))
            .map_err(|e| io::Error::new(e.kind(), format!("sidecar hash: {e}")))?
            .take(200)
            .read_to_string(&mut sidecar)?;
        let expected = sidecar.trim();
        if !runner_core::digest::is_sha256_hex(expected) {
            return Err(io::Error::other("sidecar hash is not a sha256"));
        }
        let record = format!("{expected} {}\n", digest::file_stamp(&file.metadata()?));
        let stamp = suffixed(name, VERIFIED);
        let mut recorded = String::new();
        if let Ok(file) = self.open_private(&stamp) {
            let _ = file.take(400).read_to_string(&mut recorded);
        }
        if recorded == record {
            return Ok(file);
        }
        let actual = digest::sha256_reader(&mut file)?;
        if actual != expected {
            return Err(io::Error::other(format!(
                "sha256 {actual} differs from the sidecar's {expected}"
            )));
        }
        // Best effort: without the record the next open simply hashes again.
        let _ = self.write_atomically(&stamp, record.as_bytes());
        Ok(file)
    }

    /// Write `bytes` to `name` here through a private temporary file (0600) and a
    /// rename, so readers see the old file or the complete new one, never a torn one.
    pub(crate) fn write_atomically(&self, name: &str, bytes: &[u8]) -> Result<(), BackendError> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let tmp = format!(
            ".tmp-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let mut options = cap_std::fs::OpenOptions::new();
        options.write(true).create_new(true).mode(0o600);
        let written = self
            .dir
            .open_with(&tmp, &options)
            .and_then(|mut file| {
                file.write_all(bytes)?;
                file.sync_all()
            })
            .and_then(|()| self.dir.rename(&tmp, &self.dir, name));
        if written.is_err() {
            let _ = self.dir.remove_file(&tmp);
        }
        written.map_err(|source| {
            ModuleError::Write {
                path: self.path.join(name),
                source,
            }
            .into()
        })
    }
}
