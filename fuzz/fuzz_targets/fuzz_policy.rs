//! The policy loader: never panics; a policy it accepts pins the hash of its own text,
//! keeps the request rules equal to the request kind's rules, and loads again the same.
//! The invariant is `runner_fuzz::policy` (src/lib.rs), which the regression test
//! (runner/tests/it/fuzz_regressions.rs) also runs on every saved finding and seed.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| runner_fuzz::policy(data));
