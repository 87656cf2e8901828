//! The guest manifest loader: never panics, an error names a line the text has, and
//! every entry it accepts satisfies the rules the fetcher relies on.
//! The invariant is `runner_fuzz::manifest` (src/lib.rs), which the regression test
//! (runner/tests/it/fuzz_regressions.rs) also runs on every saved finding and seed.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| runner_fuzz::manifest(data));
