//! The research-packet validator: never panics, judges the same bytes the same way
//! twice, points only at lines the packet has; its content hashes depend on the
//! normalized text only.
//! The invariant is `runner_fuzz::packet` (src/lib.rs), which the regression test
//! (runner/tests/it/fuzz_regressions.rs) also runs on every saved finding and seed.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| runner_fuzz::packet(data));
