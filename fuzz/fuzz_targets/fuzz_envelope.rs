//! DSSE envelopes: the reader never panics, what it reads writes back to an equal
//! envelope, and verifying any envelope with a real key never panics and accepts only a
//! signature by that key over the pre-authentication encoding.
//! The invariant is `runner_fuzz::envelope` (src/lib.rs), which the regression test
//! (runner/tests/it/fuzz_regressions.rs) also runs on every saved finding and seed.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| runner_fuzz::envelope(data));
