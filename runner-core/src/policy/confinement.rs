//! The policy's `[confinement]` table: which of the worker's confinement layers a run
//! requires. The layers themselves are applied by `runner_sandbox::confine`.

use serde::{Deserialize, Serialize};

/// A confinement layer of the worker, as the policy's `[confinement]` table names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    /// The worker dies with the runner (`PR_SET_PDEATHSIG`).
    Pdeathsig,
    /// `RLIMIT_CORE`, `RLIMIT_NOFILE`, `RLIMIT_CPU`, `RLIMIT_AS`, `RLIMIT_FSIZE`.
    Rlimits,
    /// A fresh network namespace: no interface but a loopback that is down.
    NetNamespace,
    /// Effective, permitted, inheritable and ambient capability sets empty.
    Capabilities,
    /// Capability bounding set empty (needs `CAP_SETPCAP`, i.e. a root runner).
    CapabilityBoundingSet,
    /// `PR_SET_NO_NEW_PRIVS`: exec can never gain privileges.
    NoNewPrivs,
    /// The seccomp deny-list (`runner_sandbox::confine::DENIED_SYSCALLS` and the conditional rules).
    Seccomp,
    /// Landlock: by path, only the run's own directories (`runner_sandbox::confine::FsAccess`); no TCP bind or
    /// connect; no signals to, or abstract Unix sockets of, processes outside. Needs
    /// no privileges, only a kernel with Landlock enabled (Linux 5.13+).
    Landlock,
    /// A user and group of the worker's own (`runner_sandbox::confine::worker_id`), no supplementary groups:
    /// files the runner owns are out of its reach by plain file permissions, Landlock or
    /// not. Needs a root runner (it owns the run directories, and only root can change
    /// its uid).
    OwnUid,
}

impl Layer {
    /// Every layer, in the order `runner_sandbox::confine::confine_worker` applies them.
    pub const ALL: [Layer; 9] = [
        Layer::Rlimits,
        Layer::NetNamespace,
        Layer::CapabilityBoundingSet,
        Layer::NoNewPrivs,
        Layer::OwnUid,
        Layer::Pdeathsig,
        Layer::Capabilities,
        Layer::Landlock,
        Layer::Seccomp,
    ];

    /// The name used in the policy and in Provenance.
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Pdeathsig => "pdeathsig",
            Layer::Rlimits => "rlimits",
            Layer::NetNamespace => "net_namespace",
            Layer::Capabilities => "capabilities",
            Layer::CapabilityBoundingSet => "capability_bounding_set",
            Layer::NoNewPrivs => "no_new_privs",
            Layer::Seccomp => "seccomp",
            Layer::Landlock => "landlock",
            Layer::OwnUid => "own_uid",
        }
    }
}

/// Whether a run may go on without a layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Requirement {
    /// The worker refuses to run the guest when the layer cannot be applied.
    Required,
    /// The run goes on without it; Provenance says it did not apply, and why.
    Optional,
}

/// The policy's `[confinement]` table: every layer, required or optional. Every key
/// must be stated (a security setting is written down, not inherited).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfinementPolicy {
    pub pdeathsig: Requirement,
    pub rlimits: Requirement,
    pub net_namespace: Requirement,
    pub capabilities: Requirement,
    pub capability_bounding_set: Requirement,
    pub no_new_privs: Requirement,
    pub seccomp: Requirement,
    pub landlock: Requirement,
    pub own_uid: Requirement,
}

impl Default for ConfinementPolicy {
    /// The built-in policy's table (a test checks `policies/default.toml` says the same):
    /// required what works without privileges, optional what needs root.
    fn default() -> Self {
        Self {
            pdeathsig: Requirement::Required,
            rlimits: Requirement::Required,
            net_namespace: Requirement::Optional,
            capabilities: Requirement::Required,
            capability_bounding_set: Requirement::Optional,
            no_new_privs: Requirement::Required,
            seccomp: Requirement::Required,
            landlock: Requirement::Optional,
            own_uid: Requirement::Optional,
        }
    }
}

impl ConfinementPolicy {
    pub fn requirement(&self, layer: Layer) -> Requirement {
        match layer {
            Layer::Pdeathsig => self.pdeathsig,
            Layer::Rlimits => self.rlimits,
            Layer::NetNamespace => self.net_namespace,
            Layer::Capabilities => self.capabilities,
            Layer::CapabilityBoundingSet => self.capability_bounding_set,
            Layer::NoNewPrivs => self.no_new_privs,
            Layer::Seccomp => self.seccomp,
            Layer::Landlock => self.landlock,
            Layer::OwnUid => self.own_uid,
        }
    }
}
