//! Why the ERA backend could not make a guest module ready to run: the engine, the
//! precompiled-module cache, the guest's bytes, its host imports, the pre-initialisation.
//! Each becomes a [`BackendError::Module`], kept typed behind it (a caller that needs the
//! cause downcasts to [`ModuleError`]).

use runner_sandbox::BackendError;
use runner_sandbox::cache::PrivateDirError;
use std::io;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ModuleError {
    #[error("engine: {0:#}")]
    Engine(wasmtime::Error),
    /// The precompiled file could not be found or verified in its cache directory.
    #[error("precompiled module {}: {reason}", path.display())]
    Precompiled { path: PathBuf, reason: String },
    #[error("cannot load precompiled module {}: {source:#}", path.display())]
    Load {
        path: PathBuf,
        source: wasmtime::Error,
    },
    #[error("cache dir {}: {source}", path.display())]
    CacheDir {
        path: PathBuf,
        source: PrivateDirError,
    },
    #[error("guest sha256 {0:?} is not 64 lowercase hex digits")]
    NotADigest(String),
    #[error("cannot read guest {}: {source}", path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error("guest {} has sha256 {actual}, expected {expected}", path.display())]
    Digest {
        path: PathBuf,
        actual: String,
        expected: String,
    },
    #[error("cannot compile guest {}: {source:#}", path.display())]
    Compile {
        path: PathBuf,
        source: wasmtime::Error,
    },
    #[error("cannot write {}: {source}", path.display())]
    Write { path: PathBuf, source: io::Error },
    /// A `host` import the runner would stub with "no host" has another shape.
    #[error("import host::{name} {shape}; the runner cannot stub it")]
    HostImport { name: String, shape: String },
    /// The worker refused the precompiled code, and again after a fresh compile.
    #[error("precompiled module rejected twice: {first}; then {again}")]
    RejectedTwice { first: String, again: String },
    /// The module's structure is not what the pre-initialisation rewrites.
    #[error("cannot pre-initialise the guest: {0}")]
    PreInit(String),
}

impl From<ModuleError> for BackendError {
    fn from(e: ModuleError) -> Self {
        BackendError::Module(Box::new(e))
    }
}
