//! The front-matter splitter: never panics, and every line it hands out is the line of
//! the original file with that number (so every reason points at the right line).
//! The invariant is `runner_fuzz::frontmatter` (src/lib.rs), which the regression test
//! (runner/tests/it/fuzz_regressions.rs) also runs on every saved finding and seed.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| runner_fuzz::frontmatter(data));
