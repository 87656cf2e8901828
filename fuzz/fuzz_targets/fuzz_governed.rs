//! The governed-packet validator, with and without a catalog: never panics and judges
//! the same bytes the same way twice. Also the catalog reader.
//! The invariant is `runner_fuzz::governed` (src/lib.rs), which the regression test
//! (runner/tests/it/fuzz_regressions.rs) also runs on every saved finding and seed.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| runner_fuzz::governed(data));
