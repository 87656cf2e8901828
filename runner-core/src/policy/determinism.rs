//! The policy's `[determinism]` table: where the guest's clocks and randomness come
//! from. A run's values are drawn by `runner::determinism` and applied by
//! `runner_sandbox::determinism`.

use serde::{Deserialize, Serialize};

/// Where the guest's clocks come from.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ClockSource {
    /// A virtual clock starting at the instant recorded for the run, advancing a fixed
    /// step per read.
    #[default]
    Virtual,
    /// The host's clocks: a replay cannot reproduce what depended on them.
    Host,
}

/// Where the guest's randomness comes from.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum EntropySource {
    /// A ChaCha20 stream from a seed recorded in the lock: whoever reads the lock can
    /// predict the guest's "secure" randomness.
    #[default]
    Seeded,
    /// The host's entropy, never recorded: a replay cannot reproduce what depended on it.
    Host,
}

/// The `[determinism]` table. Absent: both virtual and seeded. Present: both stated.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct DeterminismPolicy {
    pub clock: ClockSource,
    pub entropy: EntropySource,
}
