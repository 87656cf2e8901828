//! The request validator: never panics, judges the same bytes the same way twice, points
//! only at lines the file has, and an ACCEPT survives the line-ending normalization a
//! signature covers.
//! The invariant is `runner_fuzz::request` (src/lib.rs), which the regression test
//! (runner/tests/it/fuzz_regressions.rs) also runs on every saved finding and seed.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| runner_fuzz::request(data));
