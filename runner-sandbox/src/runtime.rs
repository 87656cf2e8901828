//! How a guest is run, from its manifest entry: data only, shared by the runner (which
//! builds it from the guest manifest), the wasmtime engine (which applies it) and the
//! confinement (which opens the asset directories to the worker).

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// How a guest module is entered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryPoint {
    /// A WASI command: `_start`, which ends by returning or by `proc_exit`.
    #[default]
    Command,
    /// A WASI reactor: `_initialize` if exported, then `run`, whose `i32` result (if it
    /// has one) is the exit code.
    Reactor,
}

/// What the guest's imports from the module `host` (an embedder's custom door, such as
/// the scientific guest's `host::call`) are bound to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostImports {
    /// Not bound: a guest importing any leaves instantiation failing, naming the import.
    #[default]
    Refuse,
    /// Each bound, with the signature the module declares, to a function returning
    /// [`NO_HOST`] ("no host here"); one that does not return a single `i32` is refused.
    NoHost,
}

/// The answer of a `host` import under [`HostImports::NoHost`].
pub const NO_HOST: i32 = -1;

/// A host directory the guest sees, read-only, at `guest`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadOnlyMount {
    pub host: PathBuf,
    pub guest: String,
}

/// How a particular guest is run, from its manifest entry. The default is a plain WASI
/// command with nothing beyond the module docs' list.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuestRuntime {
    pub entry: EntryPoint,
    /// `argv[0]` as the guest sees it instead of the command's program word (the
    /// scientific guest finds its prefix from it: `/usr/local/bin/python.wasm`).
    pub argv0: Option<String>,
    /// Environment beyond `GUEST_ENV` (which it may not change).
    pub env: Vec<(String, String)>,
    pub host_imports: HostImports,
    /// Guest path of a per-run scratch directory (`/tmp`): it is [`SCRATCH_IN_OUT`]
    /// inside `/out`, so `/out`'s byte and file caps bound it, and it is removed when
    /// the guest ends (it stays in the result only if the worker is killed first).
    pub scratch: Option<String>,
    /// Asset directories, read-only.
    pub mounts: Vec<ReadOnlyMount>,
    /// Guest path of the run's network exchange directory (`/net`, a run granted
    /// `network: allowlist`): it is [`NET_IN_OUT`] inside `/out`, created by the runner,
    /// read-write, served by the runner's broker and removed before `/out` is collected.
    #[serde(default)]
    pub exchange: Option<String>,
}

/// Name of the network exchange directory inside the run's `/out`.
pub const NET_IN_OUT: &str = ".net";

/// Name of the scratch directory inside the run's `/out` (see [`GuestRuntime::scratch`]).
pub const SCRATCH_IN_OUT: &str = ".tmp";
