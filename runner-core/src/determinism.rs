//! The guest's clocks and entropy as values of a run: the clock and entropy
//! models as locks name them, a run's [`Determinism`] (a virtual clock and a seed, or
//! the host's), and the lock's record of them ([`DeterminismPin`]). The running clock
//! and the seeded stream are `runner_sandbox::determinism`'s; drawing fresh values for
//! a run is `runner::determinism`'s.

use serde::{Deserialize, Serialize};

/// The clock model's name, as locks record it: a fixed step per read, and a sleep moves
/// the clock by what it asked.
pub const CLOCK_MODEL: &str = "virtual-fixed-step/v2";
/// The model of locks written before sleeps moved the clock; their replays run with it.
pub const CLOCK_MODEL_V1: &str = "virtual-fixed-step/v1";
/// The entropy source's name, as locks record it.
pub const ENTROPY_MODEL: &str = "chacha20-seeded/v1";
/// The name recorded for the host's own clocks or entropy.
pub const HOST: &str = "host";
/// What the virtual clock advances by at every read, both clocks together: 3 µs, about
/// what one iteration of a Python loop reading the clock costs the CPython 3.12 guest
/// (measured 3.3–4.0 µs: see the README's lock section), so a loop that only reads the
/// clock sees roughly real durations.
pub const DEFAULT_STEP_NS: u64 = 3_000;

/// The virtual clock of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct VirtualClock {
    /// The wall clock's first reading, microseconds since the Unix epoch (an integer a
    /// double holds exactly until the year 2255, so canonical JSON keeps it).
    pub start_unix_us: u64,
    /// Nanoseconds added at every read of either clock.
    pub step_ns: u64,
    /// Whether a sleep moves the clock by what it asked ([`CLOCK_MODEL`]); `false` only
    /// to replay a [`CLOCK_MODEL_V1`] lock.
    pub sleeps_advance: bool,
}

impl VirtualClock {
    /// The model's name, as the lock records it.
    pub fn model(&self) -> &'static str {
        if self.sleeps_advance {
            CLOCK_MODEL
        } else {
            CLOCK_MODEL_V1
        }
    }
}

/// The guest's clocks and entropy for one run. `None` means the host's own.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Determinism {
    pub clock: Option<VirtualClock>,
    /// The seed of the guest's random stream, 64 lowercase hex digits.
    pub seed: Option<String>,
}

impl Determinism {
    /// The seed as bytes; `None` for host entropy or a seed that is not 64 hex digits.
    pub fn seed_bytes(&self) -> Option<[u8; 32]> {
        parse_seed(self.seed.as_deref()?)
    }
}

/// 64 lowercase hex digits as 32 bytes.
pub fn parse_seed(hex: &str) -> Option<[u8; 32]> {
    if hex.len() != 64 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// 32 bytes as 64 lowercase hex digits.
pub fn seed_hex(seed: &[u8; 32]) -> String {
    seed.iter().map(|b| format!("{b:02x}")).collect()
}

/// The lock's record of the guest's clocks and entropy (`determinism`). Absent in locks
/// written before runs recorded it: those runs saw the host's clocks and entropy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeterminismPin {
    /// `virtual-fixed-step/v2` (`/v1` in locks written before sleeps moved it) or `host`.
    pub clock: String,
    /// The virtual wall clock's first reading, µs since the Unix epoch; `null` for `host`.
    pub clock_start_unix_us: Option<u64>,
    /// What every clock read adds, in ns; `null` for `host`.
    pub clock_step_ns: Option<u64>,
    /// `chacha20-seeded/v1` or `host`.
    pub entropy: String,
    /// The seed, 64 lowercase hex digits; `null` for `host`.
    pub seed: Option<String>,
}

impl From<&Determinism> for DeterminismPin {
    fn from(d: &Determinism) -> Self {
        Self {
            clock: d.clock.map_or(HOST, |c| c.model()).to_owned(),
            clock_start_unix_us: d.clock.map(|c| c.start_unix_us),
            clock_step_ns: d.clock.map(|c| c.step_ns),
            entropy: d.seed.as_ref().map_or(HOST, |_| ENTROPY_MODEL).to_owned(),
            seed: d.seed.clone(),
        }
    }
}

/// A lock's determinism pin that this runner cannot reproduce; the message names the
/// field.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    #[error(
        "determinism.clock: `{model}` with start {start:?} and step {step:?} is not a clock \
         this runner knows (`{CLOCK_MODEL}` with both, or `{HOST}` with neither)"
    )]
    Clock {
        model: String,
        start: Option<u64>,
        step: Option<u64>,
    },
    #[error(
        "determinism.entropy: `{model}` with seed {seed:?} is not an entropy source this \
         runner knows (`{ENTROPY_MODEL}` with a 64-hex seed, or `{HOST}` with none)"
    )]
    Entropy { model: String, seed: Option<String> },
}

impl DeterminismPin {
    /// The values to run a replay with; an error names the field this runner cannot
    /// reproduce (an unknown model, a malformed seed).
    pub fn to_determinism(&self) -> Result<Determinism, PinError> {
        let clock = match (
            self.clock.as_str(),
            self.clock_start_unix_us,
            self.clock_step_ns,
        ) {
            (HOST, None, None) => None,
            (model @ (CLOCK_MODEL | CLOCK_MODEL_V1), Some(start_unix_us), Some(step_ns)) => {
                Some(VirtualClock {
                    start_unix_us,
                    step_ns,
                    sleeps_advance: model == CLOCK_MODEL,
                })
            }
            (model, start, step) => {
                return Err(PinError::Clock {
                    model: model.to_owned(),
                    start,
                    step,
                });
            }
        };
        let seed = match (self.entropy.as_str(), &self.seed) {
            (HOST, None) => None,
            (ENTROPY_MODEL, Some(seed)) if parse_seed(seed).is_some() => Some(seed.clone()),
            (model, seed) => {
                return Err(PinError::Entropy {
                    model: model.to_owned(),
                    seed: seed.clone(),
                });
            }
        };
        Ok(Determinism { clock, seed })
    }

    /// Why a replay of a run recorded with this pin cannot reproduce everything (one line
    /// per host-provided source), empty when it can.
    pub fn unreproducible(pin: Option<&Self>) -> Vec<String> {
        let Some(pin) = pin else {
            return vec![
                "the baseline's lock predates recorded clocks and entropy: the run saw the \
                 host's, which a replay cannot reproduce"
                    .into(),
            ];
        };
        let mut out = Vec::new();
        if pin.entropy == HOST {
            out.push(
                "the baseline ran with the host's entropy (policy [determinism] entropy = \
                 \"host\"): its randomness was not recorded, so output that depends on it \
                 cannot be reproduced"
                    .into(),
            );
        }
        if pin.clock == HOST {
            out.push(
                "the baseline ran with the host's clocks (policy [determinism] clock = \
                 \"host\"): the time it saw was not recorded, so output that depends on it \
                 cannot be reproduced"
                    .into(),
            );
        }
        out
    }
}

/// The Provenance line's text: what the guest's clocks and randomness were.
pub fn describe(d: &Determinism) -> String {
    let clock = match d.clock {
        None => "host clocks (not recorded)".to_owned(),
        Some(c) => {
            let start = i128::from(c.start_unix_us) * 1000;
            let at = time::OffsetDateTime::from_unix_timestamp_nanos(start)
                .ok()
                .and_then(|t| {
                    t.format(&time::format_description::well_known::Rfc3339)
                        .ok()
                })
                .unwrap_or_else(|| format!("{} µs after the epoch", c.start_unix_us));
            format!(
                "virtual clock ({}) from {at}, {} ns per read",
                c.model(),
                c.step_ns
            )
        }
    };
    let entropy = match &d.seed {
        None => "host entropy (not recorded)".to_owned(),
        Some(seed) => format!(
            "ChaCha20 stream ({ENTROPY_MODEL}) from seed {seed}, recorded in the lock: \
             whoever reads it can predict the guest's \"secure\" randomness"
        ),
    };
    format!("{clock}; {entropy}")
}
