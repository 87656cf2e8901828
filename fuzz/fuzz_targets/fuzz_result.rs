//! The tool-result validator (judged alone, without its artifact directory): never
//! panics, judges the same bytes the same way twice, and points only at lines the
//! document has. Also the excerpt shaper the writer and validator share.
//! The invariant is `runner_fuzz::result` (src/lib.rs), which the regression test
//! (runner/tests/it/fuzz_regressions.rs) also runs on every saved finding and seed.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| runner_fuzz::result(data));
