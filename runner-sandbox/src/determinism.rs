//! The guest's clocks and entropy as inputs of the run: a virtual clock that
//! starts at an instant recorded for the run and advances by a fixed step at every read,
//! and a ChaCha20 stream from a recorded seed. Both are data here; the wasmtime engine
//! hands them to the WASI context, the Monty worker to its session policy. A run records
//! them in its lock, and a replay runs with the recorded values, so a program whose
//! output depends only on its inputs, the time and the randomness it saw reproduces.
//!
//! Why a fixed step per read, not time derived from the work executed: the step needs no
//! instrumentation of the compiled guest (fuel metering would change every precompiled
//! module and slow every run), it is the same on every host and engine version, and a
//! timing loop (`while time.time() - t0 < 1: …`) still ends after a fixed number of
//! reads. The price: a duration the guest measures counts clock reads, not work. A sleep
//! (WASI's `poll_oneoff` ending on a clock: `time.sleep`, an asyncio timer) really waits,
//! on real time, so the wall-clock limit keeps its meaning, and then advances both clocks
//! by the time it asked for ([`VirtualTime::sleep_relative`], [`VirtualTime::until`]):
//! the requested length, not the measured one, so a replay sees the same readings.

use chacha20::ChaCha20Rng;
use rand_core::SeedableRng;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use runner_core::determinism::VirtualClock;

/// The stream a guest reads as its (secure or insecure) randomness. `stream` separates
/// the uses of one seed: [`STREAM_SECURE`] for `random_get`/`os.urandom`, others for
/// what else a backend seeds.
pub fn seeded_stream(seed: &[u8; 32], stream: u64) -> ChaCha20Rng {
    let mut rng = ChaCha20Rng::from_seed(*seed);
    rng.set_stream(stream);
    rng
}

/// The stream of `random_get` (`os.urandom`, and through it Python's `random` seeding).
pub const STREAM_SECURE: u64 = 0;
/// The stream of WASI's "insecure" randomness and of its insecure seed.
pub const STREAM_INSECURE: u64 = 1;

/// The running virtual clock: one read counter and one slept total shared by the wall
/// and the monotonic clock, so the two agree on how much time passed. Cheap to clone.
#[derive(Debug, Clone)]
pub struct VirtualTime {
    clock: VirtualClock,
    reads: Arc<AtomicU64>,
    /// Nanoseconds the guest slept, as it asked (see the module docs).
    slept: Arc<AtomicU64>,
}

impl VirtualTime {
    pub fn new(clock: VirtualClock) -> Self {
        Self {
            clock,
            reads: Arc::new(AtomicU64::new(0)),
            slept: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Nanoseconds elapsed on the virtual clock, advancing it by one step.
    pub fn tick(&self) -> u64 {
        let n = self.reads.fetch_add(1, Ordering::Relaxed);
        n.saturating_mul(self.clock.step_ns)
            .saturating_add(self.slept.load(Ordering::Relaxed))
    }

    /// The monotonic reading the next read starts from, without advancing the clock.
    pub fn peek_monotonic_ns(&self) -> u64 {
        self.reads
            .load(Ordering::Relaxed)
            .saturating_mul(self.clock.step_ns)
            .saturating_add(self.slept.load(Ordering::Relaxed))
    }

    /// The wall reading the next read starts from, without advancing the clock.
    pub fn peek_wall_ns(&self) -> u64 {
        let start = self.clock.start_unix_us.saturating_mul(1_000);
        start.saturating_add(self.peek_monotonic_ns())
    }

    /// A sleep of `ns` ended: both clocks move on by `ns`.
    pub fn sleep_relative(&self, ns: u64) {
        let _ = self
            .slept
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |s| {
                Some(s.saturating_add(ns))
            });
    }

    /// How far a sleep until the monotonic reading `deadline_ns` (or, `wall`, the wall
    /// reading) moves the clocks: to the deadline, or nothing if it has passed.
    pub fn until(&self, deadline_ns: u64, wall: bool) -> u64 {
        let now = if wall {
            self.peek_wall_ns()
        } else {
            self.peek_monotonic_ns()
        };
        deadline_ns.saturating_sub(now)
    }

    /// The wall clock's reading, nanoseconds since the Unix epoch; advances the clock.
    pub fn wall_ns(&self) -> u64 {
        let start = self.clock.start_unix_us.saturating_mul(1_000);
        start.saturating_add(self.tick())
    }

    /// The monotonic clock's reading (nanoseconds since the run's start); advances it.
    pub fn monotonic_ns(&self) -> u64 {
        self.tick()
    }

    /// The step, as the clocks' resolution.
    pub fn step_ns(&self) -> u64 {
        self.clock.step_ns.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_core::Rng;
    use runner_core::determinism::{parse_seed, seed_hex};

    /// A clock that starts at 1 s past the epoch and steps 1 µs per read.
    fn clock() -> VirtualTime {
        VirtualTime::new(VirtualClock {
            start_unix_us: 1_000_000,
            step_ns: 1_000,
            sleeps_advance: true,
        })
    }

    #[test]
    fn the_clock_steps_per_read_and_both_clocks_share_the_count() {
        let t = clock();
        assert_eq!(t.wall_ns(), 1_000_000_000);
        assert_eq!(t.monotonic_ns(), 1_000);
        assert_eq!(t.wall_ns(), 1_000_002_000);
        let again = t.clone();
        assert_eq!(again.monotonic_ns(), 3_000);
    }

    #[test]
    fn a_sleep_moves_both_clocks_by_what_it_asked() {
        let t = clock();
        assert_eq!(t.monotonic_ns(), 0);
        t.sleep_relative(5_000_000);
        assert_eq!(t.peek_monotonic_ns(), 5_001_000, "not a read");
        assert_eq!(t.monotonic_ns(), 5_001_000);
        assert_eq!(t.wall_ns(), 1_005_002_000, "the wall clock slept too");
        // Until a deadline: to the deadline from the next reading, never backwards.
        assert_eq!(t.until(9_000_000, false), 9_000_000 - 5_003_000);
        assert_eq!(t.until(1_000, false), 0);
        assert_eq!(t.until(1_010_000_000, true), 1_010_000_000 - 1_005_003_000);
        t.sleep_relative(t.until(9_000_000, false));
        assert_eq!(t.monotonic_ns(), 9_000_000);
    }

    #[test]
    fn a_seed_gives_the_same_stream_and_streams_differ() {
        let seed = parse_seed(&"ab".repeat(32)).unwrap();
        let draw = |stream| {
            let mut bytes = [0u8; 16];
            seeded_stream(&seed, stream).fill_bytes(&mut bytes);
            bytes
        };
        assert_eq!(draw(STREAM_SECURE), draw(STREAM_SECURE));
        assert_ne!(draw(STREAM_SECURE), draw(STREAM_INSECURE));
        assert_eq!(seed_hex(&seed), "ab".repeat(32));
        assert!(parse_seed("AB").is_none());
        assert!(parse_seed(&"AB".repeat(32)).is_none());
    }
}
