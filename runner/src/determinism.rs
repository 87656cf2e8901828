//! The policy's `[determinism]` table and the lock's record of a run's clocks and
//! entropy (issue 23). The values themselves and their use are
//! `runner_sandbox::determinism`'s; here a new run gets fresh ones (a clock start at
//! the present microsecond, a seed of 32 bytes from the host's entropy), and a replay
//! reads them back from the baseline's lock.

use runner_sandbox::determinism::{
    CLOCK_MODEL, CLOCK_MODEL_V1, DEFAULT_STEP_NS, Determinism, ENTROPY_MODEL, HOST, VirtualClock,
    parse_seed, seed_hex,
};
use serde::{Deserialize, Serialize};
use std::io::Read;

/// The `[determinism]` table's types live in `runner-core` (no I/O), with the policy.
pub use runner_core::policy::determinism::{ClockSource, DeterminismPolicy, EntropySource};

/// Fresh determinism values for a new run under a `[determinism]` table.
pub trait Fresh {
    /// Fresh values for a new run: the clock starts now, the seed is new.
    ///
    /// # Ambient authority
    /// Reads the host's clock and `/dev/urandom`.
    fn fresh(&self) -> std::io::Result<Determinism>;
}

impl Fresh for DeterminismPolicy {
    fn fresh(&self) -> std::io::Result<Determinism> {
        let clock = match self.clock {
            ClockSource::Host => None,
            ClockSource::Virtual => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_err(std::io::Error::other)?;
                Some(VirtualClock {
                    start_unix_us: u64::try_from(now.as_micros()).map_err(std::io::Error::other)?,
                    step_ns: DEFAULT_STEP_NS,
                    sleeps_advance: true,
                })
            }
        };
        let seed = match self.entropy {
            EntropySource::Host => None,
            EntropySource::Seeded => {
                let mut seed = [0u8; 32];
                std::fs::File::open("/dev/urandom")?.read_exact(&mut seed)?;
                Some(seed_hex(&seed))
            }
        };
        Ok(Determinism { clock, seed })
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_values_round_trip_through_the_pin() {
        let d = DeterminismPolicy::default().fresh().unwrap();
        assert!(d.clock.is_some() && d.seed_bytes().is_some());
        let pin = DeterminismPin::from(&d);
        assert_eq!(pin.clock, CLOCK_MODEL);
        assert_eq!(pin.to_determinism().unwrap(), d);
        assert!(DeterminismPin::unreproducible(Some(&pin)).is_empty());
        // Two runs get two seeds.
        assert_ne!(DeterminismPolicy::default().fresh().unwrap().seed, d.seed);

        let host = DeterminismPolicy {
            clock: ClockSource::Host,
            entropy: EntropySource::Host,
        }
        .fresh()
        .unwrap();
        assert_eq!(host, Determinism::default());
        let pin = DeterminismPin::from(&host);
        assert_eq!((pin.clock.as_str(), pin.entropy.as_str()), (HOST, HOST));
        assert_eq!(pin.to_determinism().unwrap(), host);
        assert_eq!(DeterminismPin::unreproducible(Some(&pin)).len(), 2);
        assert_eq!(DeterminismPin::unreproducible(None).len(), 1);
    }

    #[test]
    fn a_pin_this_runner_cannot_reproduce_is_an_error_naming_the_field() {
        let error = |pin: &DeterminismPin| pin.to_determinism().unwrap_err().to_string();
        let d = DeterminismPolicy::default().fresh().unwrap();
        let mut pin = DeterminismPin::from(&d);
        pin.seed = Some("XYZ".into());
        assert!(error(&pin).contains("determinism.entropy"));
        let mut pin = DeterminismPin::from(&d);
        pin.clock = "virtual-fuel/v9".into();
        assert!(error(&pin).contains("determinism.clock"));
        let mut pin = DeterminismPin::from(&d);
        pin.clock_step_ns = None;
        assert!(pin.to_determinism().is_err());
    }

    #[test]
    fn a_v1_lock_replays_on_a_clock_its_sleeps_do_not_move() {
        let d = DeterminismPolicy::default().fresh().unwrap();
        assert!(d.clock.unwrap().sleeps_advance);
        let mut pin = DeterminismPin::from(&d);
        pin.clock = CLOCK_MODEL_V1.into();
        let old = pin.to_determinism().unwrap();
        let clock = old.clock.unwrap();
        assert!(!clock.sleeps_advance);
        assert_eq!(
            DeterminismPin::from(&old).clock,
            CLOCK_MODEL_V1,
            "and records it so"
        );
        assert_eq!(clock.start_unix_us, d.clock.unwrap().start_unix_us);
    }
}
