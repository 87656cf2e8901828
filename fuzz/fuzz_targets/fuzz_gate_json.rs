//! The gate's strict JSON reader and canonical writer (governed packets, catalogs): the
//! canonical text of anything read parses back and canonicalizes to itself, and its
//! numbers agree with RFC 8785 (serde_jcs) wherever a number is a double.
//! The invariant is `runner_fuzz::gate_json` (src/lib.rs), which the regression test
//! (runner/tests/it/fuzz_regressions.rs) also runs on every saved finding and seed.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| runner_fuzz::gate_json(data));
