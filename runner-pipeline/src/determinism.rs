//! A run's clocks and entropy: here a new run gets fresh values (a clock
//! start at the present microsecond, a seed of 32 bytes from the host's entropy). The
//! policy's `[determinism]` table, the values and the lock's record of them
//! (`DeterminismPin`, which a replay reads them back from) are `runner-core`'s; their
//! use in a run is `runner_sandbox::determinism`'s.

use runner_core::determinism::DEFAULT_STEP_NS;
use runner_core::determinism::Determinism;
use runner_core::determinism::VirtualClock;
use runner_core::determinism::seed_hex;

/// The `[determinism]` table's types live in `runner-core` (no I/O), with the policy.
use runner_core::policy::determinism::{ClockSource, DeterminismPolicy, EntropySource};

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
                runner_sandbox::read::urandom(&mut seed)?;
                Some(seed_hex(&seed))
            }
        };
        Ok(Determinism { clock, seed })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runner_core::determinism::CLOCK_MODEL;
    use runner_core::determinism::CLOCK_MODEL_V1;
    use runner_core::determinism::DeterminismPin;
    use runner_core::determinism::HOST;

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
