//! The Monty backend's sections: `## Code` (one fenced block) and `## Inputs (JSON)`.

use crate::request::document::Reasons;
use crate::request::sections::{self, Section};
use std::sync::OnceLock;

/// `## Code`: one fenced code block, opened at the start of the section's first line
/// and closed on its last. What an approver sees rendered must be the text Monty runs,
/// and only fenced code renders as written: unfenced, `&#114;` shows as `r`, `*x*` as
/// emphasis, `\_` as `_`; under an indented fence the renderer strips the indent from
/// each line, which can move a Python line out of its block.
pub(super) fn monty_code(s: &Section<'_>, r: &mut Reasons) -> Option<String> {
    if !monty_code_fenced(s, r) {
        return None;
    }
    let (code, _info) = sections::unfence(&s.text());
    if code.trim().is_empty() {
        r.add(
            "monty.code_empty",
            "`## Code` holds no code",
            s.heading_line,
        );
        return None;
    }
    Some(code)
}

/// Whether `## Code` is exactly one fenced block (with a `monty.code_unfenced` reason
/// naming the first line outside it when not). An empty section is left to the
/// empty-code rule.
fn monty_code_fenced(s: &Section<'_>, r: &mut Reasons) -> bool {
    let first = s.lines.iter().position(|l| !l.text.trim().is_empty());
    let last = s.lines.iter().rposition(|l| !l.text.trim().is_empty());
    let (Some(first), Some(last)) = (first, last) else {
        return true;
    };
    let lines = &s.lines[first..=last];
    let mut unfenced = |line: usize, why: &str| {
        r.add(
            "monty.code_unfenced",
            format!(
                "`## Code` must be one fenced code block (a line ```` ```python ```` at the start, ```` ``` ```` closing it): {why}; markdown outside a fence renders differently from the text Monty runs (`&#114;` shows as `r`)"
            ),
            line,
        );
        false
    };
    if lines[0].text.starts_with(' ') || sections::fence_marker(lines[0].text).is_none() {
        let why = if sections::fence_marker(lines[0].text).is_some() {
            "its opening fence is indented, and a renderer strips that indent from the code's lines"
        } else {
            "its first line is not a fence"
        };
        return unfenced(lines[0].number, why);
    }
    let mut fences = sections::Fences::default();
    for (i, line) in lines.iter().enumerate() {
        fences.step(line.text);
        if !fences.is_open() {
            return match lines.get(i + 1) {
                None => true,
                Some(after) => unfenced(after.number, "this line follows the closing fence"),
            };
        }
    }
    unfenced(
        lines[0].number,
        "the fence opened on this line is not closed in the section",
    )
}

fn python_identifier_re() -> &'static regex::Regex {
    static RE: OnceLock<regex::Regex> = OnceLock::new();
    #[allow(clippy::unwrap_used)] // a constant pattern
    RE.get_or_init(|| regex::Regex::new(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$").unwrap())
}

const PYTHON_KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

pub(super) fn monty_inputs(s: &Section<'_>, r: &mut Reasons) -> Option<String> {
    let (json, _info) = sections::unfence(&s.text());
    let value: serde_json::Value = match serde_json::from_str(&json) {
        Ok(v) => v,
        Err(e) => {
            r.add(
                "monty.inputs_invalid_json",
                format!("`## Inputs (JSON)` is not valid JSON: {e}"),
                s.heading_line,
            );
            return None;
        }
    };
    let Some(object) = value.as_object() else {
        r.add(
            "monty.inputs_not_object",
            "`## Inputs (JSON)` must be a JSON object whose keys name the inputs",
            s.heading_line,
        );
        return None;
    };
    let mut ok = true;
    for key in object.keys() {
        if !python_identifier_re().is_match(key) || PYTHON_KEYWORDS.contains(&key.as_str()) {
            r.add(
                "monty.input_name",
                format!("input name `{key}` is not a Python identifier"),
                s.heading_line,
            );
            ok = false;
        }
    }
    ok.then_some(json)
}
