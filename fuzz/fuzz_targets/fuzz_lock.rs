//! The lock: the strict reader never panics, and a lock it accepts is exactly the
//! canonical text of what it read; any lock-shaped JSON, sealed, reads back equal.
//! The invariant is `runner_fuzz::lock` (src/lib.rs), which the regression test
//! (runner/tests/it/fuzz_regressions.rs) also runs on every saved finding and seed.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| runner_fuzz::lock(data));
