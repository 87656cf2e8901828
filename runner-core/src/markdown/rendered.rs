//! What the approver sees must be what the runner reads. A request is approved by a
//! person who usually reads it rendered; markdown has constructs that make the two
//! differ, and each is a way to hide text from the reviewer or to make structure
//! appear that the runner does not see:
//!
//! - raw HTML outside code (`<!-- … -->` comments, `<details>`, `<div hidden>`, …): a
//!   renderer hides or reshapes it, the runner reads the text underneath, section
//!   headings included;
//! - second-level headings that the runner does not take as sections: indented
//!   (` ## Command`), with a tab (`##\tCommand`), empty (`##`), or setext (a line of
//!   `-` under a paragraph). A reviewer sees a heading; the runner sees more lines of
//!   the section above.
//!
//! Each is rejected with the line it is on. Fenced code is content and is not scanned;
//! code spans (`` `…` ``) are shown verbatim and are skipped too. The rules err toward
//! rejecting: a false alarm costs a rewrite, a miss costs an approval that meant
//! something else.

use super::frontmatter::Line;
use super::sections::Fences;
use regex::Regex;
use std::sync::OnceLock;

/// One place where rendered and read text could differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    pub code: &'static str,
    pub message: String,
    pub line: usize,
}

/// Every mismatch in the body `lines`, in line order, at most one per line.
pub fn scan(lines: &[Line<'_>]) -> Vec<Mismatch> {
    let mut found = Vec::new();
    let mut fences = Fences::default();
    // The previous line is paragraph text that a `---` line below would turn into a
    // setext heading (not a list item, quote, heading, table or fence).
    let mut after_paragraph = false;
    // Inside a list or quote since the last blank line: a `---` there is a rule.
    let mut in_container = false;
    for line in lines {
        let text = line.text;
        if fences.step(text) {
            after_paragraph = false;
            continue;
        }
        if text.trim().is_empty() {
            after_paragraph = false;
            in_container = false;
            continue;
        }
        let visible = without_code_spans(text);
        if let Some(what) = raw_html(&visible) {
            found.push(Mismatch {
                code: "body.raw_html",
                message: format!(
                    "raw HTML ({what}) is hidden or reshaped when the document is rendered, \
                     so a person reading it (the approver of a request) would not see what \
                     the runner reads; write it as plain text or inside a code span"
                ),
                line: line.number,
            });
        } else if let Some(what) = hidden_heading(text, after_paragraph && !in_container) {
            found.push(Mismatch {
                code: "body.ambiguous_heading",
                message: format!(
                    "{what} renders as a heading but is not a section to the runner; start a \
                     section with `## Title` at the beginning of the line"
                ),
                line: line.number,
            });
        }
        let t = text.trim_start_matches(' ');
        let indent = text.len() - t.len();
        let container = indent < 4 && (list_marker(t) || t.starts_with('>'));
        in_container |= container;
        after_paragraph = indent < 4 && !container && !t.starts_with('#') && !t.starts_with('|');
    }
    found
}

/// `text` with its code spans removed (CommonMark: a run of n backticks up to the next
/// run of exactly n; a backslash escapes a backtick outside a span; an unmatched run is
/// literal). Only spans closed on the same line are removed, which can only make the
/// scan stricter than a renderer.
fn without_code_spans(text: &str) -> std::borrow::Cow<'_, str> {
    // Without a backtick there is no span: the loop below would copy the line unchanged.
    if !text.contains('`') {
        return text.into();
    }
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut start = 0;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'`' => {
                let run = b[i..].iter().take_while(|&&c| c == b'`').count();
                let mut j = i + run;
                let mut close = None;
                while j < b.len() {
                    if b[j] == b'`' {
                        let r = b[j..].iter().take_while(|&&c| c == b'`').count();
                        if r == run {
                            close = Some(j + r);
                            break;
                        }
                        j += r;
                    } else {
                        j += 1;
                    }
                }
                match close {
                    Some(end) => {
                        out.push_str(&text[start..i]);
                        out.push(' ');
                        i = end;
                        start = end;
                    }
                    None => i += run,
                }
            }
            _ => i += 1,
        }
    }
    out.push_str(&text[start.min(text.len())..]);
    out.into()
}

/// The kind of raw HTML in `text` (already without code spans), if any: what CommonMark
/// takes as an HTML block start or inline HTML (a tag, a closing tag, a comment, a
/// processing instruction, a declaration or CDATA). `\<` is a literal `<`. Autolinks
/// (`<https://…>`, `<a@b.c>`) are shown as links and are not matched.
fn raw_html(text: &str) -> Option<&'static str> {
    // Every form starts with `<`.
    if !text.contains('<') {
        return None;
    }
    static RE: OnceLock<Regex> = OnceLock::new();
    #[allow(clippy::unwrap_used)] // a constant pattern
    let re = RE.get_or_init(|| {
        Regex::new(
            r"<(?:(!--)|(\?)|(!\[CDATA\[)|(![A-Za-z])|(/[A-Za-z][A-Za-z0-9-]*\s*>)|([A-Za-z][A-Za-z0-9-]*(?:\s|/?>|$)))",
        )
        .unwrap()
    });
    for caps in re.captures_iter(text) {
        let Some(m) = caps.get(0) else { continue };
        let backslashes = text[..m.start()]
            .bytes()
            .rev()
            .take_while(|&c| c == b'\\')
            .count();
        if backslashes % 2 == 1 {
            continue;
        }
        let kinds = [
            "an HTML comment `<!--`",
            "a processing instruction `<?`",
            "a CDATA section",
            "an HTML declaration",
            "a closing HTML tag",
            "an HTML tag",
        ];
        for (k, what) in kinds.iter().enumerate() {
            if caps.get(k + 1).is_some() {
                return Some(what);
            }
        }
    }
    None
}

/// A second-level heading a renderer shows that [`super::sections::parse`] does not
/// take as a section (it takes exactly lines starting `## `).
fn hidden_heading(text: &str, after_paragraph: bool) -> Option<&'static str> {
    let t = text.trim_start_matches(' ');
    let indent = text.len() - t.len();
    if indent >= 4 {
        return None; // indented code
    }
    if let Some(rest) = t.strip_prefix("##")
        && (rest.is_empty() || rest.starts_with([' ', '\t']))
    {
        return if indent > 0 {
            Some("an indented `##` line")
        } else if rest.starts_with('\t') {
            Some("a `##` followed by a tab")
        } else if rest.is_empty() {
            Some("an empty `##` heading")
        } else {
            None // `## Title`: a section (an empty title is rejected as unknown)
        };
    }
    let trimmed = t.trim_end();
    if after_paragraph && !trimmed.is_empty() && trimmed.bytes().all(|c| c == b'-') {
        return Some("a line of `-` under text (a setext heading)");
    }
    None
}

/// `t` (indent removed) starts a list item: `-`, `*`, `+` or `1.`/`1)` then a space
/// or the end of the line.
fn list_marker(t: &str) -> bool {
    let b = t.as_bytes();
    let spaced = |i: usize| b.len() == i || b[i] == b' ' || b[i] == b'\t';
    if matches!(b.first(), Some(b'-' | b'*' | b'+')) {
        return spaced(1);
    }
    let digits = b.iter().take_while(|c| c.is_ascii_digit()).count();
    (1..=9).contains(&digits) && matches!(b.get(digits), Some(b'.' | b')')) && spaced(digits + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::markdown::frontmatter::lines;

    fn codes(text: &str) -> Vec<(&'static str, usize)> {
        let all: Vec<_> = lines(text).collect();
        scan(&all).into_iter().map(|m| (m.code, m.line)).collect()
    }

    #[test]
    fn html_outside_code_is_found() {
        for text in [
            "<!--\n## Inputs (JSON)\n-->",
            "text <!-- hidden --> text",
            "<details>",
            "<div hidden>",
            "<span\n",
            "a </div> b",
            "<?php x ?>",
            "<!DOCTYPE html>",
            "<![CDATA[ x ]]>",
            "`code` <!-- x --> `code`",
            "\\`<!--`",
        ] {
            assert_eq!(
                codes(text).first().map(|c| c.0),
                Some("body.raw_html"),
                "{text:?}"
            );
        }
    }

    #[test]
    fn code_and_plain_text_pass() {
        for text in [
            "```python\n<!-- a string -->\nprint('<div>')\n```",
            "~~~\n<details>\n~~~",
            "- `/out/<name>.json`: one file per run",
            "x < 3 and y > 2",
            "n<3 and a<=b",
            "see <https://example.org/x> or <a@b.c>",
            "\\<!-- not a comment",
            "``<!-- ` -->``",
            "# Title\n\n## Command\n`python -u x.py`",
            "- Risk level: low\n---",
            "> quoted\n---",
            "text\n\n---",
            "    ## indented code, not a heading",
            "### a sub-heading",
            "| a | b |\n|---|---|",
        ] {
            assert_eq!(codes(text), vec![], "{text:?}");
        }
    }

    #[test]
    fn headings_the_parser_does_not_see_are_found() {
        for (text, line) in [
            (" ## Command", 1),
            ("   ## Command", 1),
            ("##\tCommand", 1),
            ("##", 1),
            ("text\nCommand\n---", 3),
            ("text\n\nCommand\n--", 4),
        ] {
            assert_eq!(
                codes(text),
                vec![("body.ambiguous_heading", line)],
                "{text:?}"
            );
        }
    }

    #[test]
    fn a_fence_with_a_backtick_in_its_info_string_is_not_a_fence() {
        // A renderer shows "```x`" as a code span, so the comment under it hides text.
        assert_eq!(
            codes("```x`\n<!--\nhidden\n-->\n```"),
            vec![("body.raw_html", 2)]
        );
    }
}
