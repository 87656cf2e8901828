//! The tool-result validator (judged alone, without its artifact directory): never
//! panics, judges the same bytes the same way twice, and points only at lines the
//! document has. Also the excerpt shaper the writer and validator share.
#![no_main]

use libfuzzer_sys::fuzz_target;
use runner::gate::ArtifactsAt;
use runner::gate::tool_result::{shown_lines, validate};
use runner::policy::Policy;
use runner::request::Reason;
use std::sync::LazyLock;

static POLICY: LazyLock<Policy> = LazyLock::new(Policy::builtin);

fn lines_within(reasons: &[Reason], file_lines: usize) {
    for r in reasons {
        if let Some(line) = r.line {
            assert!(
                (1..=file_lines).contains(&line),
                "{r:?}: the file has {file_lines} lines"
            );
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let policy = &*POLICY;
    let (reasons, notes) = validate(data, &ArtifactsAt::Nowhere, policy);
    let again = validate(data, &ArtifactsAt::Nowhere, policy);
    assert_eq!(
        (&reasons, &notes),
        (&again.0, &again.1),
        "judged differently twice"
    );
    let file_lines = data.iter().filter(|&&b| b == b'\n').count() + 1;
    lines_within(&reasons, file_lines);
    lines_within(&notes, file_lines);

    let max = usize::from(data.first().copied().unwrap_or(0) % 16);
    let (shown, count) = shown_lines(data, max);
    assert!(shown.len() <= max && shown.len() <= count);
    for line in &shown {
        assert!(
            !line.chars().any(char::is_control),
            "{line:?} shows a control character"
        );
    }
});
