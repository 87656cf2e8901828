//! The research-packet validator: never panics, judges the same bytes the same way
//! twice, points only at lines the packet has; its content hashes depend on the
//! normalized text only.
#![no_main]

use libfuzzer_sys::fuzz_target;
use runner::gate::research_packet::{content_hashes, validate};
use runner::normalize;
use runner::policy::Policy;
use std::sync::LazyLock;

static POLICY: LazyLock<Policy> = LazyLock::new(Policy::builtin);

fuzz_target!(|data: &[u8]| {
    let policy = &*POLICY;
    let reasons = validate(data, policy);
    assert_eq!(reasons, validate(data, policy), "judged differently twice");
    let file_lines = data.iter().filter(|&&b| b == b'\n').count() + 1;
    for r in &reasons {
        if let Some(line) = r.line {
            assert!(
                (1..=file_lines).contains(&line),
                "{r:?}: the file has {file_lines} lines"
            );
        }
    }
    // Normalizing is not idempotent on `\r\r\n` or a doubled BOM (both refused by the
    // validator as a control or invisible character): compare only where it is.
    if let Ok(text) = std::str::from_utf8(data) {
        let normalized = normalize::for_hashing(text);
        if normalize::for_hashing(&normalized) == normalized {
            assert_eq!(content_hashes(text), content_hashes(&normalized));
        }
    }
});
