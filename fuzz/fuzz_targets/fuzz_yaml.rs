//! The strict YAML loader: never panics, never builds more nodes or deeper nesting than
//! the budget allows, and every line it reports lies inside the text it was given.
//! The invariant is `runner_fuzz::yaml` (src/lib.rs), which the regression test
//! (runner/tests/it/fuzz_regressions.rs) also runs on every saved finding and seed.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| runner_fuzz::yaml(data));
