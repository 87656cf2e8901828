//! The run's virtual clocks and seeded entropy ([`Determinism`]) handed to a WASI
//! context through wasmtime-wasi's hooks: `wall_clock` and `monotonic_clock` read one
//! [`VirtualTime`], `secure_random` (WASI preview 1's `random_get`, hence `os.urandom`,
//! Python's `random` seeding, `uuid4`, `tempfile` names) and `insecure_random` draw from
//! ChaCha20 streams of the recorded seed. Parts left to the host stay the host's.

use runner_sandbox::determinism::{
    Determinism, STREAM_INSECURE, STREAM_SECURE, VirtualTime, seeded_stream,
};
use std::time::Duration;
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, WasiCtxBuilder};

struct WallClock(VirtualTime);

impl HostWallClock for WallClock {
    fn resolution(&self) -> Duration {
        Duration::from_nanos(self.0.step_ns())
    }

    fn now(&self) -> Duration {
        Duration::from_nanos(self.0.wall_ns())
    }
}

struct MonotonicClock(VirtualTime);

impl HostMonotonicClock for MonotonicClock {
    fn resolution(&self) -> u64 {
        self.0.step_ns()
    }

    fn now(&self) -> u64 {
        self.0.monotonic_ns()
    }
}

/// Replaces the builder's clocks and random sources with the run's virtual ones, where
/// `determinism` asks for them.
pub fn apply(builder: &mut WasiCtxBuilder, determinism: &Determinism) {
    if let Some(clock) = determinism.clock {
        let time = VirtualTime::new(clock);
        builder
            .wall_clock(WallClock(time.clone()))
            .monotonic_clock(MonotonicClock(time));
    }
    if let Some(seed) = determinism.seed_bytes() {
        let mut insecure = seeded_stream(&seed, STREAM_INSECURE);
        let insecure_seed = {
            use rand_core::Rng;
            u128::from(insecure.next_u64()) << 64 | u128::from(insecure.next_u64())
        };
        builder
            .secure_random(seeded_stream(&seed, STREAM_SECURE))
            .insecure_random(insecure)
            .insecure_random_seed(insecure_seed);
    }
}
